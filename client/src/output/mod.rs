//! Printing results: a human form, or with `--json` exactly one JSON value on stdout.

pub mod ago;
pub mod color;
pub mod progress;
pub mod shown;

use std::time::Duration;

use geminid_protocol::daemon::StatusResult;
use geminid_protocol::event::{Event, EventBody};
use geminid_protocol::mcp::{LogLine, ServerState, ServerStatus};
use geminid_protocol::session::Session;
use serde::Serialize;

use crate::output::color::{Tone, paint};

/// `println!` for the command's output, handed to stdout in one write: when stdout is gone
/// (`gemctl … | head`), the process ends quietly, as command-line tools do, instead of
/// panicking. What it writes passes [`crate::output::shown::terminal_safe`]; `--json` output
/// ([`json`]) does not need to.
macro_rules! outln {
    () => {
        $crate::output::write_out("\n")
    };
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        $crate::output::write_out(&$crate::output::shown::terminal_safe(&line));
    }};
}
pub(crate) use outln;

/// `print!`, as [`outln!`] without the line break.
macro_rules! out {
    ($($arg:tt)*) => {{
        $crate::output::write_out(&$crate::output::shown::terminal_safe(&format!($($arg)*)));
    }};
}
pub(crate) use out;

/// `eprintln!` through [`crate::output::shown::terminal_safe`]: errors and notes quote servers and
/// files too.
macro_rules! errln {
    () => {
        $crate::output::write_err("\n")
    };
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        $crate::output::write_err(&$crate::output::shown::terminal_safe(&line));
    }};
}
pub(crate) use errln;

/// `eprint!`, as [`errln!`] without the line break (a question before its answer).
macro_rules! err {
    ($($arg:tt)*) => {{
        $crate::output::write_err(&$crate::output::shown::terminal_safe(&format!($($arg)*)));
    }};
}
pub(crate) use err;

/// Writes text for stdout in one write (what [`outln!`] and [`out!`] end in).
pub fn write_out(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        stdout_failed(&e);
    }
}

/// Writes text for stderr in one write, flushed (a question waits on the same line).
pub fn write_err(text: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// Writing the output failed: a reader that went away ends the process with success (it has
/// what it wanted); anything else is an error.
pub fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    errln!("gemctl: cannot write the output: {e}");
    std::process::exit(1);
}

/// Print `value` as pretty JSON.
pub fn json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    // Through a `Value`: parts of some answers arrive pre-serialized (a tool's declaration
    // is sent as the daemon cached it), which the pretty printer would copy as one line.
    let mut text = serde_json::to_string_pretty(&serde_json::to_value(value)?)?;
    text.push('\n');
    write_out(&text);
    Ok(())
}

/// Print `value` as compact JSON on one line (for streams).
pub fn json_line<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut text = serde_json::to_string(value)?;
    text.push('\n');
    write_out(&text);
    Ok(())
}

/// How many characters of a session id tables show.
pub const SHORT_SESSION: usize = 8;

/// A session id as every table shows it (`top`, `audit`): its last 8 characters, which
/// `--session`, `session show` and `session close` take. Not its first: ids begin with their
/// creation time, so sessions made within a minute share them. `-` for none (a record that
/// is not a session's call).
pub fn short_session(id: &str) -> String {
    if id.is_empty() {
        return "-".to_owned();
    }
    let skip = id.chars().count().saturating_sub(SHORT_SESSION);
    id.chars().skip(skip).collect()
}

/// What an audit record is about, as the TOOL column says it: the tool for a call; for a
/// record of something done to a tool's definition (`origin` `pins/...`), that act and the
/// tool (`accept mcp_x_echo`), so it is not read as a call of it.
pub fn audit_subject(r: &geminid_protocol::policy::AuditRecord) -> String {
    match r.origin.as_str() {
        "tools/call" | "mcp/callTool" | "gateway" | "" => r.tool.clone(),
        "pins/accept" => format!("accept {}", r.tool),
        "pins/reject" => format!("reject {}", r.tool),
        "pins" | "pins/hold" => format!("hold {}", r.tool),
        other => format!("{} {}", other.rsplit('/').next().unwrap_or(other), r.tool),
    }
}

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

/// A diagnostic as compilers print one: `file:line:column: error|warning: message`.
pub fn diagnostic(d: &geminid_protocol::common::Diagnostic) -> String {
    let pos = match (d.line, d.column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    };
    let sev =
        if d.severity == geminid_protocol::common::Severity::Error { "error" } else { "warning" };
    format!("{}{pos}: {sev}: {}", shown::line(&d.file), shown::block(&d.message))
}

/// Milliseconds since the Unix epoch (what the daemon's deadlines and expiries are in).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub fn uptime(secs: u64) -> String {
    humanize(Duration::from_secs(secs))
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86400, (s % 86400) / 3600),
    }
}

/// A table, or `none` when there are no rows.
pub fn table_or(none: &str, header: &[&str], rows: &[Vec<String>]) {
    if rows.is_empty() {
        outln!("{none}");
    } else {
        table(header, rows);
    }
}

/// A table with left-aligned columns. Every cell is one line ([`shown::line`]): a cell that
/// holds a server's or a file's words cannot break the table or act on the terminal.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|r| r.iter().map(|c| shown::line(c).to_string()).collect()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> =
            cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        outln!("{}", padded.join("  ").trim_end());
    };
    line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        line(row);
    }
}

/// `gemctl session list`.
pub fn sessions(list: &[Session]) {
    if list.is_empty() {
        outln!("No sessions. `gemctl session new` creates one.");
        return;
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                s.id.clone(),
                s.workspace.clone(),
                if s.is_default { "yes" } else { "" }.to_owned(),
                s.attached_connections.to_string(),
                crate::output::ago::age(&s.last_seen_at),
                s.state
                    .derived
                    .as_ref()
                    .map(|d| format!("{} ({})", d.parent, d.name))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    table(&["ID", "WORKSPACE", "DEFAULT", "ATTACHED", "LAST SEEN", "PARENT"], &rows);
}

/// `gemctl session show` / `new`.
pub fn session(s: &Session) {
    outln!("session {}{}", s.id, if s.is_default { " (default for its workspace)" } else { "" });
    outln!("  workspace:  {}", s.workspace);
    outln!("  created:    {} ({})", s.created_at, crate::output::ago::ago(&s.created_at));
    outln!("  last seen:  {} ({})", s.last_seen_at, crate::output::ago::ago(&s.last_seen_at));
    outln!("  attached:   {} connection(s)", s.attached_connections);
    if let Some(d) = &s.state.derived {
        outln!("  subagent:   '{}' of {} (path {})", d.name, d.parent, d.path);
    }
    let mode = serde_json::to_value(s.state.approval_mode).unwrap_or_default();
    outln!("  mode:       {}", mode.as_str().unwrap_or("default"));
    outln!("  interactive: {}", interactivity(s));
    match s.env_source {
        geminid_protocol::session::EnvSource::Client => {
            let by = if s.env_from_mcp_client {
                "an MCP client's (through `gemctl mcp serve`)"
            } else {
                "a gemctl command's or an editor's"
            };
            let since = s.env_since.as_deref().map(|t| format!(" since {t}")).unwrap_or_default();
            outln!("  env:        {by}{since}; servers it starts inherit it (values not shown):");
            let keys: Vec<String> = s.env_keys.iter().map(|k| shown::line(k).to_string()).collect();
            outln!("              {}", keys.join(" "));
        }
        geminid_protocol::session::EnvSource::Daemon => {
            outln!("  env:        the daemon's own (no client has given one since it started)")
        }
    }
    let list = |v: &[String]| if v.is_empty() { "none".to_owned() } else { v.join(", ") };
    outln!("  disabled servers: {}", list(&s.state.disabled_servers));
    outln!("  activated skills: {}", list(&s.state.activated_skills));
}

/// Whether a person answers the session's confirmations, and what decides it.
fn interactivity(s: &Session) -> String {
    match (s.state.interactive, s.listening) {
        (Some(true), _) => "yes (set: `gemctl session update --auto` undoes it)".into(),
        (Some(false), _) => "no, headless (set: `gemctl session update --auto` undoes it)".into(),
        (None, Some(true)) => "yes: a client listens for confirmations".into(),
        (None, Some(false)) => "no: no client listens for confirmations, so calls that need \
                                one are denied (`gemctl attach` in another terminal answers them)"
            .into(),
        (None, None) => "while a client listens for confirmations".into(),
    }
}

/// One event, human form.
pub fn event(e: &Event) {
    outln!("{}", shown::line(&event_line(e)));
}

/// [`event`]'s line.
fn event_line(e: &Event) -> String {
    let detail = match &e.body {
        EventBody::SessionCreated(s)
        | EventBody::SessionAttached(s)
        | EventBody::SessionDetached(s)
        | EventBody::SessionClosed(s) => {
            format!("{} {} (attached: {})", s.id, s.workspace, s.attached_connections)
        }
        EventBody::DaemonShuttingDown(d) => d.reason.clone(),
        EventBody::ConfigChanged(c) => format!("{} {}", c.session, describe_change(c)),
        EventBody::McpServerState(m) => {
            let s = &m.server;
            // Also sent when only the pid or the restart count changed.
            let mut line = if m.previous == s.state {
                format!("{}: {}", s.name, s.state.label())
            } else {
                format!("{}: {} → {}", s.name, m.previous.label(), s.state.label())
            };
            let mut notes = Vec::new();
            if let Some(pid) = s.pid {
                notes.push(format!("pid {pid}"));
            }
            if s.restarts > 0 {
                notes.push(count(u64::from(s.restarts), "restart"));
            }
            if !notes.is_empty() {
                line.push_str(&format!(" ({})", notes.join(", ")));
            }
            if let Some(e) = &s.last_error {
                line.push_str(&format!(": {e}"));
            }
            line
        }
        EventBody::CatalogChanged(c) => format!(
            "{}: {}, {}, {}",
            c.server,
            count(u64::from(c.tools), "tool"),
            count(u64::from(c.prompts), "prompt"),
            count(u64::from(c.resources), "resource")
        ),
        EventBody::ToolProgress(p) => match &p.call_id {
            Some(id) => format!("{} {} (call {id})", p.name, progress(p)),
            None => format!("{} {}", p.name, progress(p)),
        },
        EventBody::ConfirmationRequested(c) => {
            format!("{} {} ({}) for {}: {}", c.id, c.tool, c.server, c.path, c.details)
        }
        EventBody::ToolsChanged(c) if c.differs.is_empty() => {
            format!("{}: every definition is as pinned", c.server)
        }
        EventBody::ToolsChanged(c) => format!(
            "{}: {} differing from their pins ({}); `gemctl mcp review {}`",
            c.server,
            c.differs.len(),
            c.differs
                .iter()
                .map(|d| format!(
                    "{} {} {}{}",
                    d.kind.label(),
                    d.name,
                    d.change.label(),
                    if d.held { ", held" } else { "" }
                ))
                .collect::<Vec<_>>()
                .join("; "),
            c.server
        ),
        // A kind this gemctl does not know yet: `--json` shows it whole.
        _ => String::new(),
    };
    format!("{}  {:<20} {detail}", e.timestamp, e.body.kind())
}

/// A call's progress: `2/3 step 2`, `2`, `0.5 halfway`.
pub fn progress(p: &geminid_protocol::tools::ToolProgress) -> String {
    let amount = match p.total {
        Some(total) => format!("{}/{total}", p.progress),
        None => p.progress.to_string(),
    };
    match &p.message {
        Some(m) => format!("{amount} {m}"),
        None => amount,
    }
}

/// One line saying what a `config/changed` contains.
pub fn describe_change(c: &geminid_protocol::event::ConfigChanged) -> String {
    let mut parts = Vec::new();
    let mut list = |label: &str, names: &[String]| {
        if !names.is_empty() {
            parts.push(format!("{label}: {}", names.join(", ")));
        }
    };
    list("added", &c.servers_added);
    list("removed", &c.servers_removed);
    list("changed", &c.servers_changed);
    list("enablement", &c.enablement_changed);
    if c.trust_changed {
        parts.push("trust changed".into());
    }
    if c.settings_changed {
        parts.push("settings changed".into());
    }
    if !c.errors.is_empty() {
        parts.push(format!("{} error(s): {}", c.errors.len(), c.errors[0].message));
    } else if c.diagnostics_changed {
        parts.push("diagnostics changed".into());
    }
    parts.join("; ")
}

/// `1 tool`, `2 tools`.
fn count(n: u64, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
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

/// What to read before a server list (an untrusted folder, settings errors), then a blank line.
pub fn warnings(lines: &[String]) {
    for l in lines {
        outln!("{}", shown::block(l));
    }
    if !lines.is_empty() {
        outln!("");
    }
}

/// The same warnings under `--json`, where stdout holds only the JSON value.
pub fn warnings_to_stderr(lines: &[String]) {
    for l in lines {
        errln!("{l}");
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
    let ext =
        s.extension.as_ref().map(|e| format!(" (from {})", shown::line(e))).unwrap_or_default();
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
    if let Some(line) = s.pins.as_ref().and_then(|p| crate::mcp::pins::list_line(p, &s.name)) {
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

#[cfg(test)]
mod tests {
    use geminid_protocol::event::{Event, EventBody};

    #[test]
    fn progress_and_catalog_events_read_as_text() -> anyhow::Result<()> {
        let event = |kind: &str, payload: serde_json::Value| -> anyhow::Result<Event> {
            let json =
                serde_json::json!({"seq": 1, "timestamp": "T", "kind": kind, "payload": payload});
            Ok(serde_json::from_value(json)?)
        };
        let p = event(
            "tools/progress",
            serde_json::json!({"session": "s", "callId": "c1", "name": "mcp_x_slow", "progress": 2.0, "total": 3.0, "message": "step 2"}),
        )?;
        assert_eq!(
            super::event_line(&p),
            "T  tools/progress       mcp_x_slow 2/3 step 2 (call c1)"
        );
        let p = event(
            "tools/progress",
            serde_json::json!({"session": "s", "name": "mcp_x_slow", "progress": 0.5}),
        )?;
        assert_eq!(super::event_line(&p), "T  tools/progress       mcp_x_slow 0.5");
        let c = event(
            "catalog/changed",
            serde_json::json!({"server": "x", "identity": "abc", "sessions": [], "tools": 1, "prompts": 0, "resources": 2}),
        )?;
        assert!(matches!(c.body, EventBody::CatalogChanged(_)));
        assert_eq!(
            super::event_line(&c),
            "T  catalog/changed      x: 1 tool, 0 prompts, 2 resources"
        );
        let state = |previous: &str, state: &str, pid: Option<u32>| {
            let mut payload = serde_json::json!({"name": "fx", "scope": "user", "transport": "stdio", "target": "fx", "state": state, "identity": "abc", "restarts": 3, "sessions": [], "previous": previous});
            if let Some(pid) = pid {
                payload["pid"] = pid.into();
            }
            event("mcp/serverState", payload)
        };
        let restarted = state("connecting", "connected", Some(7))?;
        assert_eq!(
            super::event_line(&restarted),
            "T  mcp/serverState      fx: Connecting → Connected (pid 7, 3 restarts)"
        );
        // Only the pid or the count changed: no arrow between two equal states.
        let same = state("connecting", "connecting", None)?;
        assert_eq!(super::event_line(&same), "T  mcp/serverState      fx: Connecting (3 restarts)");
        Ok(())
    }

    #[test]
    fn humanize_picks_two_units() {
        use std::time::Duration;
        assert_eq!(super::humanize(Duration::from_secs(59)), "59s");
        assert_eq!(super::humanize(Duration::from_secs(61)), "1m 1s");
        assert_eq!(super::humanize(Duration::from_secs(3 * 3600 + 120)), "3h 2m");
        assert_eq!(super::humanize(Duration::from_secs(2 * 86400 + 3600)), "2d 1h");
    }
}
