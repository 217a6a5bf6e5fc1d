//! Printing results: a human form, or with `--json` exactly one JSON value on stdout.

pub mod ago;
pub mod color;
pub mod events;
pub mod print;
pub mod progress;
pub mod servers;
pub mod sessions;
pub mod shown;

pub(crate) use self::print::{err, errln, out, outln};
pub use self::print::{json, json_line, result_out};

use std::time::Duration;

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

/// `1 tool`, `2 tools`.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

#[cfg(test)]
mod tests {
    #[test]
    fn humanize_picks_two_units() {
        use std::time::Duration;
        assert_eq!(super::humanize(Duration::from_secs(59)), "59s");
        assert_eq!(super::humanize(Duration::from_secs(61)), "1m 1s");
        assert_eq!(super::humanize(Duration::from_secs(3 * 3600 + 120)), "3h 2m");
        assert_eq!(super::humanize(Duration::from_secs(2 * 86400 + 3600)), "2d 1h");
    }
}
