//! A server's bounded log: its stderr, stray stdout lines and what the supervisor did.

use parking_lot::Mutex;
use std::collections::VecDeque;

use geminid_protocol::mcp::LogLine;
use tokio::sync::broadcast;

use crate::clock;

/// Lines kept per server.
pub(crate) const LOG_MAX_LINES: usize = 1000;
/// Bytes kept per server (text only).
pub(crate) const LOG_MAX_BYTES: usize = 256 * 1024;
/// One line is cut at this many bytes.
pub(crate) const LOG_MAX_LINE: usize = 4096;
/// Followers that fall this far behind miss lines (and are told how many).
const FOLLOW_BUFFER: usize = 256;

#[derive(Debug, Default)]
struct Ring {
    lines: VecDeque<LogLine>,
    bytes: usize,
    dropped: u64,
}

/// A bounded log with live followers.
#[derive(Debug)]
pub(crate) struct ServerLog {
    ring: Mutex<Ring>,
    follow: broadcast::Sender<LogLine>,
}

impl Default for ServerLog {
    fn default() -> Self {
        Self { ring: Mutex::default(), follow: broadcast::channel(FOLLOW_BUFFER).0 }
    }
}

impl ServerLog {
    /// Append a line from `stream` (`stderr`, `stdout` or `geminid`).
    pub(crate) fn push(&self, stream: &str, text: &str) {
        let text = crate::config::env::redact_urls(text);
        let mut text = text.trim_end_matches(['\r', '\n']).to_owned();
        if text.len() > LOG_MAX_LINE {
            let mut cut = LOG_MAX_LINE;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str(" […]");
        }
        let line = LogLine { at: clock::rfc3339(clock::now_ms()), stream: stream.to_owned(), text };
        {
            let mut ring = self.ring.lock();
            ring.bytes += line.text.len();
            ring.lines.push_back(line.clone());
            while ring.lines.len() > LOG_MAX_LINES || ring.bytes > LOG_MAX_BYTES {
                let Some(old) = ring.lines.pop_front() else { break };
                ring.bytes -= old.text.len();
                ring.dropped += 1;
            }
        }
        let _ = self.follow.send(line);
    }

    /// The newest `n` lines (all if `None`), oldest first, and how many were dropped.
    pub(crate) fn tail(&self, n: Option<usize>) -> (Vec<LogLine>, u64) {
        let ring = self.ring.lock();
        let skip = n.map_or(0, |n| ring.lines.len().saturating_sub(n));
        (ring.lines.iter().skip(skip).cloned().collect(), ring.dropped)
    }

    /// New lines as they come.
    pub(crate) fn follow(&self) -> broadcast::Receiver<LogLine> {
        self.follow.subscribe()
    }

    /// The stderr line that says why a process failed: the last one, except that Node ends
    /// every crash with its version (`Node.js v20.20.2`) after the error, its stack and its
    /// properties, so for Node it is the error line (`Error: Cannot find module …`).
    pub(crate) fn failure_line(&self) -> Option<String> {
        let (lines, _) = self.tail(Some(50));
        let texts: Vec<&str> = lines
            .iter()
            .filter(|l| l.stream == "stderr")
            .map(|l| l.text.trim())
            .filter(|t| !t.is_empty())
            .collect();
        let last = *texts.last()?;
        let node = last
            .strip_prefix("Node.js v")
            .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()));
        if !node {
            return Some(last.to_owned());
        }
        let error = texts.iter().rev().find(|t| {
            let head = t.split(':').next().unwrap_or_default();
            head.ends_with("Error") && head.chars().all(|c| c.is_alphanumeric() || c == '_')
        });
        error.or(texts.iter().rev().nth(1)).map(|t| (*t).to_owned())
    }
}

/// `[level] logger: data`, the data as text when it is a string, else as JSON.
#[allow(deprecated)]
pub(super) fn message_line(p: &rmcp::model::LoggingMessageNotificationParam) -> String {
    let level = serde_json::to_value(p.level).ok();
    let level = level.as_ref().and_then(serde_json::Value::as_str).unwrap_or("info");
    let data = match &p.data {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match &p.logger {
        Some(logger) => format!("[{level}] {logger}: {data}"),
        None => format!("[{level}] {data}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_node_crash_is_summarised_by_its_error() {
        let log = super::ServerLog::default();
        for line in [
            "node:internal/modules/cjs/loader:1228",
            "  throw err;",
            "  ^",
            "",
            "Error: Cannot find module '/srv/server.js'",
            "    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)",
            "    at node:internal/main/run_main_module:28:49 {",
            "  code: 'MODULE_NOT_FOUND',",
            "  requireStack: []",
            "}",
            "",
            "Node.js v20.20.2",
        ] {
            log.push("stderr", line);
        }
        log.push("geminid", "process exited");
        assert_eq!(
            log.failure_line().as_deref(),
            Some("Error: Cannot find module '/srv/server.js'")
        );
        let py = super::ServerLog::default();
        py.push("stderr", "Traceback (most recent call last):");
        py.push("stderr", "ModuleNotFoundError: No module named 'mcp'");
        assert_eq!(
            py.failure_line().as_deref(),
            Some("ModuleNotFoundError: No module named 'mcp'")
        );
        assert_eq!(super::ServerLog::default().failure_line(), None);
    }

    use super::*;

    #[test]
    fn bounded_by_lines_and_bytes() {
        let log = ServerLog::default();
        for i in 0..(LOG_MAX_LINES + 10) {
            log.push("stderr", &format!("line {i}\n"));
        }
        let (lines, dropped) = log.tail(None);
        assert_eq!(lines.len(), LOG_MAX_LINES);
        assert_eq!(dropped, 10);
        assert_eq!(lines[0].text, "line 10");
        assert_eq!(log.tail(Some(2)).0.len(), 2);
        let big = "x".repeat(LOG_MAX_LINE * 3);
        for _ in 0..200 {
            log.push("stderr", &big);
        }
        let (lines, _) = log.tail(None);
        assert!(lines.iter().map(|l| l.text.len()).sum::<usize>() <= LOG_MAX_BYTES);
        assert!(lines[lines.len() - 1].text.ends_with("[…]"));
    }
}
