//! Text someone else chose (a server's tool names, descriptions, errors and instructions, a
//! package's or a file's words), made safe to show a person: every character a terminal acts
//! on (C0 and C1 controls, ESC sequences) or a reader does not see (bidi overrides,
//! zero-width and other invisible characters, by Unicode property:
//! [`geminid_protocol::text`]) is written out visibly, `⟨ESC⟩`, `⟨U+202E⟩`.
//!
//! Two layers. A field is wrapped where it is formatted, [`line()`] for a one-line field (its
//! line breaks escaped too, so a name cannot make a line of its own) or [`block()`] for text of
//! several lines; [`table`](crate::output::table) cells are lines. And every line gemctl
//! writes for a person (`outln!`, `errln!` and the rest in [`crate::output`]) passes
//! [`terminal_safe`], which leaves only gemctl's own colours and line breaks to the terminal:
//! a field formatted raw by mistake can still break a line, but it cannot rewrite, hide or
//! recolour one. `--json` output is JSON, whose escaping holds, and is written as it is.

use std::fmt;

use geminid_protocol::text::hidden_at;

/// A one-line field, shown safely: `format!("{}", line(&tool.name))`.
pub fn line(text: &str) -> Shown<'_> {
    Shown { text, lines: false }
}

/// Text of several lines, shown safely: line breaks and tabs kept, the rest as [`line()`].
pub fn block(text: &str) -> Shown<'_> {
    Shown { text, lines: true }
}

/// Someone else's text, escaped where it is displayed ([`line()`], [`block()`]).
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    text: &'a str,
    lines: bool,
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut prev = None;
        let mut chars = self.text.chars().peekable();
        while let Some(c) = chars.next() {
            let kept = self.lines && matches!(c, '\n' | '\t');
            if !kept && (c.is_control() || hidden_at(prev, c, chars.peek().copied())) {
                escape(f, c)?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
            prev = Some(c);
        }
        Ok(())
    }
}

fn escape(f: &mut impl fmt::Write, c: char) -> fmt::Result {
    match c {
        '\u{1b}' => f.write_str("⟨ESC⟩"),
        '\n' => f.write_str("⟨LF⟩"),
        '\r' => f.write_str("⟨CR⟩"),
        '\t' => f.write_str("⟨TAB⟩"),
        c => write!(f, "⟨U+{:04X}⟩", u32::from(c)),
    }
}

/// What gemctl writes for a person, as it may reach a terminal: line breaks, tabs and
/// gemctl's own colours ([`crate::output::color::own_sgr`]) as they are, every other control or
/// hidden character escaped as [`line()`] does.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let risky = |c: char| c.is_control() || geminid_protocol::text::invisible(c);
    if !text.chars().any(risky) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut prev = None;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(n) = crate::output::color::own_sgr(rest) {
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            continue;
        }
        rest = &rest[c.len_utf8()..];
        let next = rest.chars().next();
        if !matches!(c, '\n' | '\t') && (c.is_control() || hidden_at(prev, c, next)) {
            let _ = escape(&mut out, c);
        } else {
            out.push(c);
        }
        prev = Some(c);
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_cannot_act_on_the_terminal_or_hide() {
        let name = "t\u{1b}]0;PWNED\u{7}\r\u{1b}[2K\u{9b}2J\u{202E}x\u{2028}\u{3164}\nnext";
        assert_eq!(
            line(name).to_string(),
            "t⟨ESC⟩]0;PWNED⟨U+0007⟩⟨CR⟩⟨ESC⟩[2K⟨U+009B⟩2J⟨U+202E⟩x⟨U+2028⟩⟨U+3164⟩⟨LF⟩next"
        );
        assert_eq!(block("a\tb\nc\u{200B}").to_string(), "a\tb\nc⟨U+200B⟩");
        assert_eq!(line("Loved ❤\u{FE0F}, plain").to_string(), "Loved ❤\u{FE0F}, plain");
        assert_eq!(line("😀\u{FE00}\u{E0100}").to_string(), "😀⟨U+FE00⟩⟨U+E0100⟩");
    }

    #[test]
    fn only_gemctls_own_colours_reach_the_terminal() {
        let ours = "\u{1b}[32m✓\u{1b}[0m fx\n\tnext";
        assert_eq!(terminal_safe(ours), ours);
        assert_eq!(
            terminal_safe("\u{1b}[8mhidden\u{1b}[0m\r\u{1b}]52;c;x\u{7}"),
            "⟨ESC⟩[8mhidden\u{1b}[0m⟨CR⟩⟨ESC⟩]52;c;x⟨U+0007⟩"
        );
        assert_eq!(terminal_safe("line\u{2028}sep \u{85}"), "line⟨U+2028⟩sep ⟨U+0085⟩");
    }

    /// Every word gemctl writes for a person goes through the macros of `output/print.rs`, which
    /// pass [`terminal_safe`]: the standard printing macros are not used in client/src.
    #[test]
    fn nothing_prints_around_the_sanitiser() -> std::io::Result<()> {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src.clone()];
        let mut raw = Vec::new();
        while let Some(p) = files.pop() {
            if p.is_dir() {
                files.extend(std::fs::read_dir(&p)?.flat_map(|e| e.map(|e| e.path())));
                continue;
            }
            if p.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            for (n, l) in std::fs::read_to_string(&p)?.lines().enumerate() {
                let code = l.split("//").next().unwrap_or_default();
                for m in ["println!", "print!", "eprintln!", "eprint!"] {
                    let at = code.match_indices(m).any(|(i, _)| {
                        !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '"')
                    });
                    if at {
                        raw.push(format!("{}:{}: {}", p.display(), n + 1, l.trim()));
                    }
                }
            }
        }
        assert!(raw.is_empty(), "use outln!/out!/errln!/err! (crate::output):\n{}", raw.join("\n"));
        Ok(())
    }
}
