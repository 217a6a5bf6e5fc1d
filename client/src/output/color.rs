//! Colour on a terminal, as Gemini CLI colours its lists: never in a pipe or a file, never
//! with `NO_COLOR` set (<https://no-color.org>), always with `CLICOLOR_FORCE` set to other
//! than `0`, and not for `TERM=dumb`.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// What a piece of text says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Working, allowed: green.
    Good,
    /// Worth a look: yellow.
    Warn,
    /// Failed, refused: red.
    Bad,
    /// Off, beside the point: grey.
    Dim,
}

impl Tone {
    fn code(self) -> &'static str {
        match self {
            Self::Good => "32",
            Self::Warn => "33",
            Self::Bad => "31",
            Self::Dim => "90",
        }
    }
}

/// Whether a stream that is (or is not) a terminal gets colour, given the environment.
fn decide(is_terminal: bool, var: impl Fn(&str) -> Option<String>) -> bool {
    if var("NO_COLOR").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    if var("CLICOLOR_FORCE").is_some_and(|v| !v.is_empty() && v != "0") {
        return true;
    }
    is_terminal && var("TERM").is_none_or(|t| t != "dumb")
}

fn on(stderr: bool) -> bool {
    static OUT: OnceLock<bool> = OnceLock::new();
    static ERR: OnceLock<bool> = OnceLock::new();
    let env = |k: &str| std::env::var(k).ok();
    if stderr {
        *ERR.get_or_init(|| decide(std::io::stderr().is_terminal(), env))
    } else {
        *OUT.get_or_init(|| decide(std::io::stdout().is_terminal(), env))
    }
}

/// `text` in `tone`'s colour, for stdout.
pub fn paint(text: &str, tone: Tone) -> String {
    paint_if(on(false), text, tone)
}

/// `text` in `tone`'s colour, for stderr.
pub fn paint_err(text: &str, tone: Tone) -> String {
    paint_if(on(true), text, tone)
}

/// The length of the colour sequence `text` starts with when it is one [`paint`] writes
/// (a tone's, or the reset): what [`crate::output::shown::terminal_safe`] lets through.
pub fn own_sgr(text: &str) -> Option<usize> {
    let codes = [Tone::Good, Tone::Warn, Tone::Bad, Tone::Dim].map(Tone::code);
    let body = text.strip_prefix("\x1b[")?;
    let code = codes
        .into_iter()
        .chain(["0"])
        .find(|c| body.strip_prefix(c).is_some_and(|rest| rest.starts_with('m')))?;
    Some(code.len() + 3)
}

fn paint_if(on: bool, text: &str, tone: Tone) -> String {
    if on { format!("\x1b[{}m{text}\x1b[0m", tone.code()) } else { text.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_where_it_is_wanted() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())
        };
        assert!(decide(true, env(&[])));
        assert!(!decide(false, env(&[])), "a pipe");
        assert!(!decide(true, env(&[("NO_COLOR", "1")])));
        assert!(decide(true, env(&[("NO_COLOR", "")])), "empty NO_COLOR is unset");
        assert!(!decide(true, env(&[("TERM", "dumb")])));
        assert!(decide(false, env(&[("CLICOLOR_FORCE", "1")])));
        assert!(!decide(false, env(&[("CLICOLOR_FORCE", "0")])));
        assert!(!decide(false, env(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")])));
        assert_eq!(paint_if(true, "ok", Tone::Good), "\x1b[32mok\x1b[0m");
        assert_eq!(paint_if(false, "ok", Tone::Good), "ok");
    }
}
