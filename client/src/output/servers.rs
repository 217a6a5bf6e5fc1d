//! Servers as `gemctl status`, `mcp list` and `mcp restart` print them.

use geminid_protocol::daemon::StatusResult;
use geminid_protocol::mcp::{LogLine, ServerState, ServerStatus};
use geminid_protocol::pins::PinStatus;
use serde::Serialize;

use crate::output::color::{Tone, paint};
use crate::output::shown;
use crate::output::{count, outln, uptime};

/// The servers the daemon runs, counted for `gemctl status`.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServersSummary {
    /// How many have a live process or connection (connected or connecting).
    pub running: usize,
    /// How many in each state, running or not, by the state's protocol name (`connected`,
    /// `needs-auth`, `crash-loop`, as `mcp/listServers` says it): stable keys for scripts
    /// (audit M8).
    pub by_state: std::collections::BTreeMap<String, usize>,
    /// How many running ones no session uses (kept warm), as `gemctl doctor` counts them.
    pub idle: usize,
    /// The same counts by the state's label (`Connected`, `Crash loop`), for the text.
    #[serde(skip)]
    by_label: std::collections::BTreeMap<&'static str, usize>,
}

impl ServersSummary {
    pub fn of(servers: &[ServerStatus]) -> Self {
        let mut s = Self::default();
        for server in servers {
            *s.by_state.entry(state_id(server.state)).or_default() += 1;
            *s.by_label.entry(server.state.label()).or_default() += 1;
            s.running += usize::from(server.is_live());
            s.idle += usize::from(server.is_kept_warm());
        }
        s
    }

    fn text(&self) -> String {
        let live = |label: &str| {
            [ServerState::Connected, ServerState::Connecting].iter().any(|s| s.label() == label)
        };
        let states = |running: bool| -> Vec<String> {
            self.by_label
                .iter()
                .filter(|(label, _)| live(label) == running)
                .map(|(label, n)| format!("{n} {}", label.to_lowercase()))
                .collect()
        };
        let mut text = match self.running {
            0 => "none running".to_owned(),
            n => format!("{n} running ({})", states(true).join(", ")),
        };
        if self.idle > 0 {
            text.push_str(&format!(", {} idle (kept warm)", self.idle));
        }
        // Crash loop, disconnected, needs authentication: known, but no process runs.
        let down = states(false);
        if !down.is_empty() {
            text.push_str(&format!("; not running: {}", down.join(", ")));
        }
        text
    }
}

/// A server state as the protocol writes it (`needs-auth`).
fn state_id(state: ServerState) -> String {
    match serde_json::to_value(state) {
        Ok(serde_json::Value::String(s)) => s,
        _ => state.label().to_owned(),
    }
}

/// `gemctl status`.
pub fn status(s: &StatusResult, servers: &ServersSummary) {
    // One write: stdout is line-buffered and flushes at every newline it is given, so the
    // text is formatted first and handed over whole.
    let text = format!(
        "geminid {} (protocol {}), pid {}\n  up:          {} (since {})\n  socket:      {}\n  \
         data dir:    {}\n  sessions:    {} ({} attached)\n  servers:     {}\n  connections: {} \
         ({} subscribed to events)",
        s.version,
        s.protocol_version,
        s.pid,
        uptime(s.uptime_secs),
        s.started_at,
        s.socket,
        s.data_dir,
        s.sessions.total,
        s.sessions.attached,
        servers.text(),
        s.connections,
        s.subscribers
    );
    let warnings: String =
        s.warnings.iter().map(|w| format!("\n  warning:     {}", shown::line(w))).collect();
    outln!("{text}{warnings}");
}

/// The colour `gemini mcp list` gives a state's icon.
pub fn state_tone(state: ServerState) -> Tone {
    match state {
        ServerState::Connected => Tone::Good,
        ServerState::Connecting => Tone::Warn,
        ServerState::Disabled => Tone::Dim,
        ServerState::Blocked
        | ServerState::Disconnected
        | ServerState::NeedsAuth
        | ServerState::CrashLoop => Tone::Bad,
    }
}

/// The icon `gemini mcp list` shows for a state.
pub fn state_icon(state: ServerState) -> &'static str {
    match state {
        ServerState::Connected => "✓",
        ServerState::Connecting => "…",
        ServerState::Blocked => "⛔",
        ServerState::Disabled => "○",
        ServerState::Disconnected | ServerState::NeedsAuth | ServerState::CrashLoop => "✗",
    }
}

/// `gemctl mcp list --all`: every running copy, with the identity that tells copies of one
/// name apart and the sessions that use it.
pub fn running_servers(list: &[ServerStatus]) {
    if list.is_empty() {
        outln!("No MCP servers running.");
        return;
    }
    servers_with(list, true);
}

/// `gemctl mcp list`: Gemini CLI's line for each server, plus what geminid knows.
pub fn servers(list: &[ServerStatus]) {
    servers_with(list, false);
}

fn servers_with(list: &[ServerStatus], copies: bool) {
    if list.is_empty() {
        outln!("No MCP servers configured.");
        return;
    }
    outln!("Configured MCP servers:\n");
    for s in list {
        server_lines(s, copies);
    }
}

/// One server of a list, or alone (`mcp restart NAME`: no list header).
pub fn server(s: &ServerStatus) {
    server_lines(s, false);
}

fn server_lines(s: &ServerStatus, copies: bool) {
    use geminid_protocol::common::Scope;
    let ext = match (&s.extension, s.scope) {
        (Some(e), _) => format!(" (from {})", shown::line(e)),
        (None, Scope::Antigravity) => {
            " (from Antigravity CLI's ~/.gemini/config/mcp_config.json)".into()
        }
        (None, Scope::AntigravityWorkspace) => {
            " (from Antigravity CLI's .agents/mcp_config.json)".into()
        }
        (None, _) => String::new(),
    };
    let mut extra = Vec::new();
    if let Some(pid) = s.pid {
        extra.push(format!("pid {pid}"));
    }
    if let Some(up) = s.uptime_secs {
        extra.push(format!("up {}", uptime(up)));
    }
    if s.restarts > 0 {
        extra.push(count(u64::from(s.restarts), "restart"));
    }
    if let Some(t) = s.tools {
        extra.push(count(u64::from(t), "tool"));
    }
    if s.sessions.len() > 1 {
        extra.push(format!("shared by {} sessions", s.sessions.len()));
    }
    if let Some(idle) = s.idle_secs {
        use geminid_protocol::mcp::KeepWarm;
        let kept = match (s.keep_warm, s.stops_in_secs) {
            (Some(KeepWarm::Never), _) => "stopping (keepWarm: never)".to_owned(),
            (_, None) => "kept warm (keepWarm: always)".to_owned(),
            (_, Some(left)) => format!("kept warm {} more", uptime(left)),
        };
        extra.push(format!("idle {}, {kept}", uptime(idle)));
        if let Some(bytes) = s.rss_bytes {
            extra.push(format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20)));
        }
    }
    let extra = if extra.is_empty() { String::new() } else { format!(" ({})", extra.join(", ")) };
    use geminid_protocol::mcp::AtRest;
    let state = match (s.unresponsive_secs, s.at_rest) {
        (Some(secs), _) => format!("Unresponsive (no answer to pings for {})", uptime(secs)),
        // Not started, or stopped on purpose: no failure, so not Gemini CLI's red
        // "Disconnected" (README, "Where geminid differs from Gemini CLI").
        (None, Some(AtRest::NotStarted)) => "Not started".to_owned(),
        (None, Some(AtRest::Stopped)) => "Stopped".to_owned(),
        (None, None) => s.state.label().to_owned(),
    };
    outln!(
        "{} {}{ext}: {} ({}) - {state}{extra}",
        if s.unresponsive_secs.is_some() {
            paint("⚠", Tone::Warn)
        } else if s.at_rest.is_some() {
            paint("○", Tone::Dim)
        } else {
            paint(state_icon(s.state), state_tone(s.state))
        },
        shown::line(&s.name),
        shown::line(&s.target),
        s.transport.label()
    );
    if let Some(e) = &s.last_error {
        let e = shown::line(e).to_string();
        outln!("    {}", paint(&e, if s.at_rest.is_some() { Tone::Dim } else { Tone::Bad }));
    }
    for p in &s.problems {
        outln!("    {} {}", paint("warning:", Tone::Warn), shown::line(p));
    }
    if let Some(line) = s.pins.as_ref().and_then(|p| list_line(p, &s.name)) {
        outln!("{line}");
    }
    if copies {
        let id = s.identity.as_deref().unwrap_or("-");
        let users = if s.sessions.is_empty() && s.is_live() {
            "none (kept warm)".to_owned()
        } else if s.sessions.is_empty() {
            "none".to_owned()
        } else {
            s.sessions.join(", ")
        };
        let mcp = s.protocol_version.as_deref().map(|v| format!("; MCP {v}")).unwrap_or_default();
        outln!("    identity {id}; sessions: {users}{}", shown::line(&mcp));
        if !s.roots.is_empty() {
            outln!(
                "    roots {} (it asks for roots: one copy per set of roots)",
                s.roots.join(" ")
            );
        }
        if let Some(told) = &s.told {
            outln!("    told: {} (the copy for clients that declare so)", told.describe());
        }
    }
}

/// One log line.
pub fn log_line(l: &LogLine) {
    outln!("{} [{}] {}", l.at, l.stream, shown::line(&l.text));
}

/// How long after a first-use pin `mcp list` still says it (audit turn 4, P1: the note
/// stayed for the daemon's whole life).
const FIRST_USE_SAID_FOR_MS: u64 = 10 * 60 * 1000;

/// The line `mcp list` prints under a server whose definitions differ from their pins, or
/// that was pinned on first use a moment ago.
pub fn list_line(p: &PinStatus, server: &str) -> Option<String> {
    list_line_at(p, server, crate::output::ago::now_ms())
}

fn list_line_at(p: &PinStatus, server: &str, now_ms: u64) -> Option<String> {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    if p.differs.is_empty() {
        let recent = now_ms.saturating_sub(p.since_ms) < FIRST_USE_SAID_FOR_MS;
        return (p.first_use && recent).then(|| {
            let n = usize::try_from(p.pinned).unwrap_or(usize::MAX);
            format!(
                "    pinned {} on first use (trust on first use)",
                plural(n, "definition", "definitions")
            )
        });
    }
    let held = p.differs.iter().any(|d| d.held);
    let n = p.differs.len();
    let what = p
        .differs
        .iter()
        .map(|d| format!("{} {} ({})", d.kind.label(), shown::line(&d.name), d.change.label()))
        .collect::<Vec<_>>()
        .join(", ");
    let head = match (held, n) {
        (true, 1) => "⚠ 1 definition differs from its pin and is held".to_owned(),
        (true, n) => format!("⚠ {n} definitions differ from their pins and are held"),
        (false, n) => format!(
            "⚠ {} from {} (offered: pinning is warn)",
            plural(n, "definition differs", "definitions differ"),
            if n == 1 { "its pin" } else { "their pins" }
        ),
    };
    Some(format!("    {head}: {what}; `gemctl mcp review {}`", shown::line(server)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_list_line_says_a_first_use_pin_a_while_and_each_difference_plainly() {
        use geminid_protocol::pins::{Change, DefinitionKind, HeldDefinition, PinMode, PinStatus};
        let now = 1_000_000_000;
        let mut p = PinStatus {
            mode: PinMode::Enforce,
            pinned: 1,
            since_ms: now - 1000,
            first_use: true,
            differs: vec![],
        };
        let line = super::list_line_at(&p, "fx", now);
        assert_eq!(
            line.as_deref(),
            Some("    pinned 1 definition on first use (trust on first use)")
        );
        assert_eq!(
            super::list_line_at(&p, "fx", now + 3_600_000),
            None,
            "not for the daemon's life"
        );
        p.differs.push(HeldDefinition {
            kind: DefinitionKind::Tool,
            name: "shout".into(),
            change: Change::Changed,
            held: true,
            rejected: false,
        });
        let line = super::list_line_at(&p, "fx", now).unwrap_or_default();
        assert_eq!(
            line,
            "    ⚠ 1 definition differs from its pin and is held: tool shout (changed); `gemctl mcp review fx`"
        );
    }
}
