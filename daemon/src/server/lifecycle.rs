//! The daemon's life as a service: telling systemd how it is (`READY=1`, `STATUS=`,
//! `WATCHDOG=1`, `STOPPING=1`), and leaving when nobody needs it (`--idle-exit`).

use std::sync::Arc;
use std::time::Duration;

use crate::clock;
use crate::core::Core;
use crate::systemd::Notifier;

/// How often the status line is looked at (sent only when it changed).
const STATUS_EVERY: Duration = Duration::from_secs(2);

/// The status line systemd shows (`systemctl --user status geminid`).
pub(crate) fn status_line(core: &Core) -> String {
    let (sessions, attached) = core.services().sessions.counts();
    let servers = core.services().mcp.status().list_all().len();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{} ({attached} attached), {} running",
        plural(sessions, "session", "sessions"),
        plural(servers, "MCP server", "MCP servers")
    )
}

/// Whether nothing needs the daemon now: no connection, no attached session, no server running
/// (a server lingering after its last session keeps it until it stops).
pub(crate) fn idle(core: &Core) -> bool {
    core.status().connections == 0
        && core.services().sessions.counts().1 == 0
        && core.services().mcp.status().list_all().is_empty()
}

/// Start the tasks: `READY=1` now (the socket is bound and about to be served), the status
/// line while it changes, the watchdog while the event loop turns, `STOPPING=1` when shutdown
/// begins, and the idle exit when `idle_exit` is set.
pub(crate) fn spawn(core: Arc<Core>, notifier: Notifier, idle_exit: Option<Duration>) {
    if notifier.enabled() {
        let status = status_line(&core);
        notifier.notify(&format!("READY=1\nMAINPID={}\nSTATUS={status}", std::process::id()));
        let (c, n) = (core.clone(), notifier.clone());
        tokio::spawn(async move {
            let mut last = status;
            let shutdown = c.shutdown_token().clone();
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => {
                        let why = c.shutdown_reason().unwrap_or("shutting down").to_owned();
                        n.notify(&format!("STOPPING=1\nSTATUS=stopping: {why}"));
                        return;
                    }
                    () = tokio::time::sleep(STATUS_EVERY) => {}
                }
                let now = status_line(&c);
                if now != last {
                    n.notify(&format!("STATUS={now}"));
                    last = now;
                }
            }
        });
        if let Some(every) = notifier.watchdog_every() {
            let (c, n) = (core.clone(), notifier);
            tokio::spawn(async move {
                // Sent from the event loop itself: a loop that stops turning stops these, and
                // systemd restarts the daemon.
                while !c.shutdown_token().is_cancelled() {
                    n.notify("WATCHDOG=1");
                    tokio::time::sleep(every).await;
                }
            });
        }
    }
    if let Some(after) = idle_exit.filter(|d| !d.is_zero()) {
        tokio::spawn(async move {
            let tick = (after / 4).clamp(Duration::from_millis(100), Duration::from_secs(15));
            let mut since = clock::now();
            loop {
                clock::sleep(tick).await;
                if core.shutdown_token().is_cancelled() {
                    return;
                }
                if !idle(&core) {
                    since = clock::now();
                } else if clock::now().saturating_duration_since(since) >= after {
                    let after = humantime::format_duration(after);
                    core.request_shutdown(&format!("idle for {after} (--idle-exit)"));
                    return;
                }
            }
        });
    }
}
