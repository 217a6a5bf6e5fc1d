//! The small shell grammar a custom command's `!{…}` line must keep to before an allow that
//! rules decided (a prefix, a pattern, `tools.allowed`) lets it run without a person: words of
//! safe characters, `'…'`, `"…"` without `$` (but geminid's own `${GEMINID_ARGS}`), backtick
//! or backslash, the chain operators `&&`, `||`, `;`, `|` and new lines, and plain
//! redirections (`>`, `>>`, `>|`, `<`, `<>`, `2>&1`, `&>`, `&>>`). Anything else bash could
//! read as code (substitutions, arithmetic, expansions, here-documents, comments, escapes,
//! subshells, groups, an assignment before a command, `&` alone, control characters) is not
//! plain: a hand-written splitter of bash's full grammar always misses something, so geminid
//! asks about such a line instead (stricter than Gemini CLI, never looser).

/// One command of a plain line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    /// Its text, trimmed.
    pub text: String,
    /// Its text with the first word unquoted (`"echo"/x` → `echo/x`): the name bash runs,
    /// as a prefix must match it.
    pub named: String,
}

/// A plain line: its commands in order, and whether a redirection stands in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plain {
    /// Each command.
    pub commands: Vec<Command>,
    /// A redirection stands somewhere in it.
    pub redirection: bool,
}

/// Why a line is not plain: what stands where (a character offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotPlain {
    /// What was found.
    pub what: String,
    /// At which character of the line.
    pub at: usize,
}

impl std::fmt::Display for NotPlain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at character {}", self.what, self.at + 1)
    }
}

impl NotPlain {
    /// Why a line that rules allow is asked about, and how to run it.
    pub(crate) fn reason(&self, cmd: &str) -> String {
        format!(
            "\"{cmd}\" is not plain shell ({self}), so an allowed prefix or pattern does not let \
             it run without a person: a person confirms it (`gemctl commands expand` from a \
             terminal, or with --yes), the session runs in yolo, or the line is rewritten \
             without it"
        )
    }
}

/// How strict a decision is (deny, then ask, then allow).
pub(crate) fn strictness(d: geminid_protocol::policy::PolicyDecision) -> u8 {
    use geminid_protocol::policy::PolicyDecision;
    match d {
        PolicyDecision::Allow => 0,
        PolicyDecision::AskUser => 1,
        PolicyDecision::Deny => 2,
    }
}

/// Builtins that evaluate their operands as arithmetic (`a[$(cmd)]` runs `cmd`): not plain
/// when the arguments reach the line.
const EVALUATING: &[&str] = &["let", "declare", "typeset", "local", "readonly", "unset", "[["];

/// Safe characters of a word besides letters and digits.
const WORD: &str = "_-./,:@%+=~*?[]^!";

struct Lexer<'a> {
    line: &'a str,
    out: Plain,
    /// Where the current command starts (a byte offset).
    start: usize,
    /// The first word of the current command, unquoted, and where it ends.
    first: Option<(String, usize)>,
    /// The word being read: its unquoted value, whether any of it was quoted, whether it
    /// holds the arguments.
    word: Option<(String, bool, bool)>,
    /// The next word is a redirection's target.
    target: bool,
    /// The arguments' reference stands somewhere in the line.
    uses_args: bool,
}

fn not_plain(line: &str, byte: usize, what: impl Into<String>) -> NotPlain {
    NotPlain { what: what.into(), at: line[..byte].chars().count() }
}

impl Lexer<'_> {
    fn end_word(&mut self, at: usize) -> Result<(), NotPlain> {
        let Some((value, quoted, args)) = self.word.take() else { return Ok(()) };
        if self.target {
            self.target = false;
            return Ok(());
        }
        if self.first.is_none() {
            if args {
                return Err(not_plain(self.line, at, "the arguments in a command's name"));
            }
            let name = value.split('=').next().unwrap_or_default();
            // (quoted or not: `A='$(x)' cmd` is an assignment too)
            let _ = quoted;
            if value.contains('=')
                && !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || "_[]+".contains(c))
            {
                return Err(not_plain(self.line, at, "an assignment before a command"));
            }
            if self.uses_args && EVALUATING.contains(&value.as_str()) {
                return Err(not_plain(
                    self.line,
                    at,
                    format!("`{value}`, which evaluates the arguments as arithmetic"),
                ));
            }
            self.first = Some((value, at));
        }
        Ok(())
    }

    fn end_command(&mut self, at: usize, operator: bool) -> Result<(), NotPlain> {
        self.end_word(at)?;
        if self.target {
            return Err(not_plain(self.line, at, "a redirection with no target"));
        }
        let text = self.line[self.start..at].trim();
        match self.first.take() {
            Some((name, end)) => {
                let rest = self.line.get(end..at).unwrap_or_default().trim_end();
                self.out
                    .commands
                    .push(Command { text: text.to_owned(), named: format!("{name}{rest}") });
            }
            None if !text.is_empty() => {
                return Err(not_plain(self.line, at, "a redirection with no command"));
            }
            None if operator => {
                return Err(not_plain(self.line, at, "an operator with no command before it"));
            }
            None => {}
        }
        Ok(())
    }

    fn push(&mut self, c: char, quoted: bool, args: bool) {
        let w = self.word.get_or_insert_with(|| (String::new(), false, false));
        if !args {
            w.0.push(c);
        }
        w.1 |= quoted;
        w.2 |= args;
    }
}

/// `line` read in the plain grammar, `reference` (`${GEMINID_ARGS}`) allowed inside double
/// quotes; the first thing that is not plain is the error.
pub(crate) fn lex(line: &str, reference: &str) -> Result<Plain, NotPlain> {
    let mut l = Lexer {
        line,
        out: Plain::default(),
        start: 0,
        first: None,
        word: None,
        target: false,
        uses_args: line.contains(reference),
    };
    let b = line.as_bytes();
    let mut i = 0;
    let mut after_operator = false;
    while i < b.len() {
        let c = line[i..].chars().next().unwrap_or_default();
        let next = b.get(i + 1).copied().unwrap_or(0);
        let mut step = c.len_utf8();
        match c {
            ' ' | '\t' => l.end_word(i)?,
            '\n' | ';' | '|' | '&' if !(c == '&' && next == b'>') => {
                let op = match (c, next) {
                    ('\n', _) => "\n",
                    (';', b';') => return Err(not_plain(line, i, "`;;`")),
                    (';', _) => ";",
                    ('|', b'|') | ('&', b'&') => {
                        step = 2;
                        "&&"
                    }
                    ('|', b'&') => return Err(not_plain(line, i, "`|&`")),
                    ('|', _) => "|",
                    _ => return Err(not_plain(line, i, "`&` (a command in the background)")),
                };
                l.end_command(i, op != "\n")?;
                l.start = i + step;
                // `&&`, `||` and `|` need a command after them (`;` and a new line do not).
                after_operator = op == "&&" || op == "|" || (op == "\n" && after_operator);
                i += step;
                continue;
            }
            '<' | '>' | '&' => step = l.redirection(i, next)?,
            '\'' => step = l.single_quoted(i)?,
            '"' => step = l.double_quoted(i, reference)?,
            '$' => return Err(not_plain(line, i, dollar(&line[i..]))),
            '`' => return Err(not_plain(line, i, "a backtick substitution")),
            '\\' => return Err(not_plain(line, i, "a backslash")),
            '#' => return Err(not_plain(line, i, "`#` (a comment)")),
            '(' | ')' => return Err(not_plain(line, i, "a parenthesis (a subshell or pattern)")),
            '{' | '}' => return Err(not_plain(line, i, "a brace (a group or brace expansion)")),
            c if c.is_control() => return Err(not_plain(line, i, control(Some(c)))),
            c if c.is_ascii_alphanumeric() || WORD.contains(c) || !c.is_ascii() => {
                l.push(c, false, false);
            }
            c => return Err(not_plain(line, i, format!("`{c}`"))),
        }
        if !matches!(c, ' ' | '\t') {
            after_operator = false;
        }
        i += step;
    }
    if after_operator {
        return Err(not_plain(line, line.len(), "a line that ends with an operator"));
    }
    l.end_command(line.len(), false)?;
    Ok(l.out)
}

impl Lexer<'_> {
    /// A redirection at `i` (`next` the byte after it): the step past its operator and a
    /// descriptor target; the word before it taken as the descriptor when it is digits.
    fn redirection(&mut self, i: usize, next: u8) -> Result<usize, NotPlain> {
        let line = self.line;
        // A word of digits just before is the descriptor redirected.
        if self.word.as_ref().is_some_and(|(w, q, a)| {
            !q && !a && !w.is_empty() && w.bytes().all(|d| d.is_ascii_digit())
        }) {
            self.word = None;
        } else {
            self.end_word(i)?;
        }
        if self.target {
            return Err(not_plain(line, i, "a redirection with no target"));
        }
        let two = line.get(i..i + 2).unwrap_or_default();
        let three = line.get(i..i + 3).unwrap_or_default();
        if two == "<<" {
            return Err(not_plain(line, i, "a here-document or here-string (`<<`)"));
        }
        if next == b'(' {
            return Err(not_plain(line, i, "a process substitution"));
        }
        let mut step = if three == "&>>" {
            3
        } else if [">>", ">|", ">&", "<&", "<>", "&>"].contains(&two) {
            2
        } else {
            1
        };
        self.out.redirection = true;
        self.target = true;
        if two == ">&" || two == "<&" {
            // The target is a descriptor, or `-`.
            let rest = &line[i + 2..];
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            let n = if n == 0 && rest.starts_with('-') { 1 } else { n };
            if n == 0 {
                return Err(not_plain(line, i, "a redirection to a word after `>&`"));
            }
            self.target = false;
            step += n;
        }
        Ok(step)
    }

    /// A single-quoted string at `i`: the step past it.
    fn single_quoted(&mut self, i: usize) -> Result<usize, NotPlain> {
        let line = self.line;
        let Some(len) = line[i + 1..].find('\'') else {
            return Err(not_plain(line, i, "an unclosed quote"));
        };
        let body = &line[i + 1..i + 1 + len];
        if let Some(k) = body.find(|c: char| c.is_control() && c != '\t' && c != '\n') {
            return Err(not_plain(line, i + 1 + k, control(body[k..].chars().next())));
        }
        body.chars().for_each(|c| self.push(c, true, false));
        self.push_empty_quoted();
        Ok(len + 2)
    }

    /// A double-quoted string at `i`, `reference` the one `$` allowed in it: the step past it.
    fn double_quoted(&mut self, i: usize, reference: &str) -> Result<usize, NotPlain> {
        let line = self.line;
        let mut k = i + 1;
        loop {
            let Some(d) = line[k..].chars().next() else {
                return Err(not_plain(line, i, "an unclosed quote"));
            };
            match d {
                '"' => break,
                '$' if line[k..].starts_with(reference) => {
                    self.push('$', true, true);
                    k += reference.len();
                    continue;
                }
                '$' => return Err(not_plain(line, k, dollar(&line[k..]))),
                '`' => return Err(not_plain(line, k, "a backtick substitution")),
                '\\' => return Err(not_plain(line, k, "a backslash")),
                d if d.is_control() && d != '\t' && d != '\n' => {
                    return Err(not_plain(line, k, control(Some(d))));
                }
                d => self.push(d, true, false),
            }
            k += d.len_utf8();
        }
        self.push_empty_quoted();
        Ok(k + 1 - i)
    }

    /// A quoted string makes a word even when empty (`''`).
    fn push_empty_quoted(&mut self) {
        let w = self.word.get_or_insert_with(|| (String::new(), false, false));
        w.1 = true;
    }
}

fn dollar(at: &str) -> String {
    let what = if at.starts_with("$((") {
        "arithmetic `$((`"
    } else if at.starts_with("$(") {
        "a command substitution `$(`"
    } else if at.starts_with("$[") {
        "arithmetic `$[`"
    } else if at.starts_with("${") {
        "a parameter expansion `${`"
    } else if at.starts_with("$'") || at.starts_with("$\"") {
        "a `$'…'` or `$\"…\"` string"
    } else {
        "a variable `$`"
    };
    what.to_owned()
}

fn control(c: Option<char>) -> String {
    match c {
        Some('\r') => "a carriage return".to_owned(),
        Some('\0') => "a NUL character".to_owned(),
        Some(c) => format!("a control character (U+{:04X})", c as u32),
        None => "a control character".to_owned(),
    }
}

#[cfg(test)]
#[path = "plain_tests.rs"]
mod tests;
