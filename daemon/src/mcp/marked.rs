//! A stdio server's processes that left its process group (a `setsid` child, a daemon that
//! detaches): each server starts with a mark in its environment, which whatever it starts
//! inherits, so a pass over `/proc` finds them for the memory budget and for stopping (issue
//! 64, item 9: a setsid grandchild was not counted and outlived `mcp stop` and the daemon).
//! A process that clears its environment on purpose is not found; none of the servers' usual
//! launchers (`npx`, `uvx`, shells, `docker run`) does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// The variable that carries the mark.
pub(crate) const MARK: &str = "GEMINID_SERVER_MARK";

static NEXT: AtomicU64 = AtomicU64::new(1);
static LEADERS: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);

/// A mark no other child of this daemon has.
pub(crate) fn new_mark() -> String {
    format!("{}.{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `pid` leads the processes that carry `mark`.
pub(crate) fn lead(mark: &str, pid: u32) {
    LEADERS.lock().get_or_insert_with(HashMap::new).insert(mark.to_owned(), pid);
}

/// The mark is done with (its server stopped).
pub(crate) fn forget(mark: &str) {
    if let Some(m) = LEADERS.lock().as_mut() {
        m.remove(mark);
    }
}

/// The leader of the processes that carry `mark`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn leader_of(mark: &str) -> Option<u32> {
    LEADERS.lock().as_ref().and_then(|m| m.get(mark).copied())
}

/// The mark in the environment of the process whose `/proc` folder is `dir`, if it carries
/// one and may be read (the user's own processes).
#[cfg(target_os = "linux")]
pub(crate) fn mark_of(dir: &std::path::Path) -> Option<String> {
    let environ = std::fs::read(dir.join("environ")).ok()?;
    let prefix = format!("{MARK}=");
    environ
        .split(|b| *b == 0)
        .find_map(|v| v.strip_prefix(prefix.as_bytes()))
        .map(|m| String::from_utf8_lossy(m).into_owned())
}

/// The processes that carry `mark` outside process group `pgid` (those in it are stopped
/// with it).
#[cfg(target_os = "linux")]
fn strays(mark: &str, pgid: u32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let own = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pid))).ok()?;
            (u32::try_from(own.as_raw()).ok() != Some(pgid)
                && mark_of(&e.path()).is_some_and(|m| m == mark))
            .then_some(pid)
        })
        .collect()
}

#[cfg(all(unix, not(target_os = "linux")))]
fn strays(_mark: &str, _pgid: u32) -> Vec<i32> {
    Vec::new()
}

#[cfg(unix)]
fn signal(pids: &[i32], sig: nix::sys::signal::Signal) {
    for pid in pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), sig);
    }
}

/// Stop what carries `mark` outside group `pgid`: SIGTERM, up to `grace`, SIGKILL.
#[cfg(unix)]
pub(crate) async fn stop(mark: &str, pgid: u32, grace: Duration) {
    use nix::sys::signal::Signal;
    let left = strays(mark, pgid);
    if left.is_empty() {
        return;
    }
    tracing::info!(mark, count = left.len(), "stopping a server's processes outside its group");
    signal(&left, Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    while !strays(mark, pgid).is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal(&strays(mark, pgid), Signal::SIGKILL);
}

/// The same without a grace (a child dropped mid-way).
#[cfg(unix)]
pub(crate) fn kill_now(mark: &str, pgid: u32) {
    signal(&strays(mark, pgid), nix::sys::signal::Signal::SIGKILL);
}

#[cfg(not(unix))]
pub(crate) async fn stop(_mark: &str, _pgid: u32, _grace: Duration) {}

#[cfg(not(unix))]
pub(crate) fn kill_now(_mark: &str, _pgid: u32) {}
