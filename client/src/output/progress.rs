//! Progress on stderr while a command waits: on a terminal one line redrawn in place (a bar
//! when the total is known), cleared when the wait ends; elsewhere (`--progress` into a pipe or
//! a file) one line per step, and a step the server repeats is printed once.

use std::io::{IsTerminal, Write};

use geminid_protocol::tools::ToolProgress;

/// Width of the bar, in characters.
const BAR: usize = 20;

/// Progress lines for one wait.
#[derive(Debug)]
pub struct Progress {
    live: bool,
    last: Option<String>,
    drawn: bool,
}

impl Progress {
    /// For stderr as it is: live on a terminal (not `TERM=dumb`).
    pub fn on_stderr() -> Self {
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        Self::new(std::io::stderr().is_terminal() && !dumb)
    }

    fn new(live: bool) -> Self {
        Self { live, last: None, drawn: false }
    }

    /// Whether it redraws one line (a terminal).
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Show a call's progress: on a terminal labelled with the tool's name (`mcp_x_build
    /// [#####-----] 2/10 compiling`), cut to the terminal's width so that it stays one line.
    pub fn call(&mut self, p: &ToolProgress) {
        // The tool's name and message are the server's: one line, nothing the terminal acts on.
        let text = crate::output::shown::line(&crate::output::events::progress(p)).to_string();
        let name = crate::output::shown::line(&p.name);
        let bar = match p.total {
            Some(total) if total > 0.0 => bar(p.progress / total),
            _ => String::new(),
        };
        // A terminal of no size (a pty nobody set one for) is not one column wide.
        let width = ratatui::crossterm::terminal::size()
            .ok()
            .filter(|&(w, _)| w > 0)
            .map_or(usize::MAX, |(w, _)| w.into());
        self.say(&text, &fit(&format!("{name} {bar}{text}"), width));
    }

    /// Show a status line (`2 of 5 servers ready`): redrawn on a terminal, else printed when
    /// it changed.
    pub fn status(&mut self, text: &str) {
        let text = crate::output::shown::line(text).to_string();
        self.say(&text, &text);
    }

    fn say(&mut self, key: &str, live_text: &str) {
        if let Some(line) = self.line(key, live_text) {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(line.as_bytes());
            let _ = err.flush();
        }
    }

    /// What to write for this step, if anything.
    fn line(&mut self, key: &str, live_text: &str) -> Option<String> {
        if self.last.as_deref() == Some(key) {
            return None;
        }
        self.last = Some(key.to_owned());
        if self.live {
            self.drawn = true;
            Some(format!("\r\x1b[K{live_text}"))
        } else {
            Some(format!("progress: {key}\n"))
        }
    }

    /// The wait is over: take the live line away.
    pub fn finish(&mut self) {
        if self.live && std::mem::take(&mut self.drawn) {
            let _ = std::io::stderr().write_all(b"\r\x1b[K");
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `line` cut to fit in `width` columns less one (a line as wide as the terminal wraps on
/// some), with `…` where it was cut.
fn fit(line: &str, width: usize) -> String {
    let room = width.saturating_sub(1);
    if line.chars().count() <= room {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(room.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `[#########-----------] ` for a fraction done.
fn bar(done: f64) -> String {
    let filled = ((done.clamp(0.0, 1.0) * BAR as f64).round() as usize).min(BAR);
    format!("[{}{}] ", "#".repeat(filled), "-".repeat(BAR - filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_step_is_said_once() {
        let mut p = Progress::new(false);
        assert_eq!(p.line("1/4", "x").as_deref(), Some("progress: 1/4\n"));
        assert_eq!(p.line("2/4", "x").as_deref(), Some("progress: 2/4\n"));
        assert_eq!(p.line("2/4", "x"), None);
        assert_eq!(p.line("3/4", "x").as_deref(), Some("progress: 3/4\n"));
    }

    #[test]
    fn on_a_terminal_one_line_is_redrawn() {
        let mut p = Progress::new(true);
        assert_eq!(p.line("1/4", "[#####] 1/4").as_deref(), Some("\r\x1b[K[#####] 1/4"));
        assert!(p.drawn);
        assert_eq!(bar(0.5), format!("[{}{}] ", "#".repeat(10), "-".repeat(10)));
        assert_eq!(bar(2.0), format!("[{}] ", "#".repeat(20)));
        assert_eq!(bar(-1.0), format!("[{}] ", "-".repeat(20)));
        assert_eq!(fit("mcp_x_build [##] 1/2", 80), "mcp_x_build [##] 1/2");
        assert_eq!(fit("mcp_x_build [##] 1/2", 10), "mcp_x_bu…");
    }
}
