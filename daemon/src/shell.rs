//! Text for `bash -c` that carries values its author did not write (a custom command's
//! `{{args}}`, a hook's `$GEMINI_PROJECT_DIR`). Pasting a value into the command, however it is
//! quoted, lets it out of the quotes the author wrote around the spot (`"{{args}}"` with
//! `$(...)` inside): so the value goes to the shell as an environment variable, and each spot
//! becomes a reference to that variable quoted for where it stands. bash then expands the value
//! and never parses it. Where no reference is safe (a here-document, arithmetic, which
//! evaluates what it expands), the caller decides: refuse, or leave the text alone.

/// Which quoting is in force at a spot of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// Outside quotes (at the top, in `$(...)` or backticks).
    Plain,
    /// Inside `'...'`.
    Single,
    /// Inside `"..."`.
    Double,
    /// Inside `$'...'`.
    AnsiC,
    /// After a `<<` here-document operator.
    Heredoc,
    /// Inside `$((...))` or `((...))`.
    Arithmetic,
}

impl Context {
    /// What the spot is, for a message.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Plain => "outside quotes",
            Self::Single => "inside single quotes",
            Self::Double => "inside double quotes",
            Self::AnsiC => "inside $'...'",
            Self::Heredoc => "in a here-document",
            Self::Arithmetic => "inside arithmetic",
        }
    }
}

/// A reference to the environment variable `var` that makes its value one literal piece of
/// text at a spot of `context`; none where no reference is safe.
pub(crate) fn reference(var: &str, context: Context) -> Option<String> {
    match context {
        Context::Plain => Some(format!("\"${{{var}}}\"")),
        Context::Double => Some(format!("${{{var}}}")),
        // Close the quotes, expand inside double quotes, open them again.
        Context::Single => Some(format!("'\"${{{var}}}\"'")),
        Context::AnsiC => Some(format!("'\"${{{var}}}\"$'")),
        Context::Heredoc | Context::Arithmetic => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    Top,
    /// `$(`, with the depth of plain parentheses opened inside it.
    Subst(u32),
    Backtick,
    Single,
    Double,
    AnsiC,
    /// `$((` or `((`, with the depth of parentheses opened inside it.
    Arith(u32),
}

/// `command` with each `pattern` replaced by `replace(context)` for the quoting in force there;
/// the first spot where `replace` gives none is the error.
pub(crate) fn rewrite(
    command: &str,
    pattern: &str,
    mut replace: impl FnMut(Context) -> Option<String>,
) -> Result<String, Context> {
    let b = command.as_bytes();
    let mut out = String::with_capacity(command.len());
    let mut stack = vec![Frame::Top];
    let mut heredoc = false;
    let mut i = 0;
    // Copies `n` bytes (never splitting a character: every boundary below is ASCII).
    let copy = |out: &mut String, from: usize, n: usize| {
        out.push_str(command.get(from..(from + n).min(command.len())).unwrap_or_default());
    };
    while i < b.len() {
        let top = *stack.last().unwrap_or(&Frame::Top);
        if !pattern.is_empty() && b[i..].starts_with(pattern.as_bytes()) {
            let context = match top {
                _ if heredoc => Context::Heredoc,
                Frame::Top | Frame::Subst(_) | Frame::Backtick => Context::Plain,
                Frame::Single => Context::Single,
                Frame::Double => Context::Double,
                Frame::AnsiC => Context::AnsiC,
                Frame::Arith(_) => Context::Arithmetic,
            };
            out.push_str(&replace(context).ok_or(context)?);
            i += pattern.len();
            continue;
        }
        let at = |k: usize| b.get(i + k).copied().unwrap_or(0);
        let mut step = 1;
        match (top, at(0)) {
            (Frame::Single, b'\'') | (Frame::Double, b'"') | (Frame::AnsiC, b'\'') => {
                stack.pop();
            }
            (Frame::Single, _) => {}
            (Frame::AnsiC | Frame::Double, b'\\') => step = 2,
            (Frame::AnsiC, _) => {}
            (_, b'\\') => step = 2,
            (Frame::Double, b'$') if at(1) == b'(' && at(2) == b'(' => {
                stack.push(Frame::Arith(0));
                step = 3;
            }
            (Frame::Double, b'$') if at(1) == b'(' => {
                stack.push(Frame::Subst(0));
                step = 2;
            }
            (Frame::Double, b'`') => stack.push(Frame::Backtick),
            (Frame::Double, _) => {}
            // Code: the top, a command substitution, backticks, arithmetic.
            (_, b'\'') => stack.push(Frame::Single),
            (_, b'"') => stack.push(Frame::Double),
            (_, b'$') if at(1) == b'\'' => {
                stack.push(Frame::AnsiC);
                step = 2;
            }
            (_, b'$') if at(1) == b'(' && at(2) == b'(' => {
                stack.push(Frame::Arith(0));
                step = 3;
            }
            (_, b'$') if at(1) == b'(' => {
                stack.push(Frame::Subst(0));
                step = 2;
            }
            (Frame::Arith(0), b')') if at(1) == b')' => {
                stack.pop();
                step = 2;
            }
            (Frame::Arith(d), b'(') => set_top(&mut stack, Frame::Arith(d + 1)),
            (Frame::Arith(d), b')') => set_top(&mut stack, Frame::Arith(d.saturating_sub(1))),
            (_, b'(') if at(1) == b'(' => {
                stack.push(Frame::Arith(0));
                step = 2;
            }
            (Frame::Subst(d), b'(') => set_top(&mut stack, Frame::Subst(d + 1)),
            (Frame::Subst(0), b')') => {
                stack.pop();
            }
            (Frame::Subst(d), b')') => set_top(&mut stack, Frame::Subst(d - 1)),
            (Frame::Backtick, b'`') => {
                stack.pop();
            }
            (_, b'`') => stack.push(Frame::Backtick),
            // `<<` and `<<-` open a here-document (`<<<` is a here-string: a word).
            (_, b'<') if at(1) == b'<' && at(2) != b'<' => {
                heredoc = true;
                step = 2;
            }
            (_, b'<') if at(1) == b'<' => step = 3,
            _ => {}
        }
        // A multi-byte character is copied whole.
        while i + step < b.len() && !command.is_char_boundary(i + step) {
            step += 1;
        }
        copy(&mut out, i, step);
        i += step;
    }
    Ok(out)
}

/// What Gemini CLI's shell parser finds in a command for its policy checks: each command's
/// text (those inside `$(...)`, backticks, `(...)` and `<(...)` too, and the whole of one that
/// holds them) and whether a redirection (`>`, `>>`, `<`, `&>`, `2>&1`, a here-document or
/// here-string) is there.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// Each command's text, trimmed, in the order they end.
    pub commands: Vec<String>,
    /// A redirection stands somewhere in it.
    pub redirection: bool,
}

/// Where the splitter is: a level that holds commands (with where its current command
/// started), or quoting and arithmetic, which hold none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Code(usize),
    Backtick(usize),
    Single,
    Double,
    AnsiC,
    Arith(u32),
}

/// `command` split as Gemini CLI's parser splits it (`&&`, `||`, `;`, `|`, `&`, new lines;
/// substitutions and subshells opened); none when it does not parse (an unclosed quote or
/// parenthesis, a `)` too many), which Gemini CLI decides with its default.
pub(crate) fn parse(command: &str) -> Option<Parsed> {
    let b = command.as_bytes();
    let mut out = Parsed::default();
    let mut stack = vec![Level::Code(0)];
    let mut heredocs: Vec<String> = Vec::new();
    let end = |out: &mut Parsed, from: usize, to: usize| {
        let text = command.get(from..to).unwrap_or_default().trim();
        if !text.is_empty() {
            out.commands.push(text.to_owned());
        }
    };
    let mut i = 0;
    while i < b.len() {
        let at = |k: usize| b.get(i + k).copied().unwrap_or(0);
        let top = *stack.last()?;
        if let Some(step) = in_text(&mut stack, top, i, &at) {
            i = past(command, i, step?);
            continue;
        }
        let mut step = 1;
        match (top, at(0)) {
            // Code: the top, a substitution, a subshell, backticks.
            (_, b'\\') => step = 2,
            (_, b'\'') => stack.push(Level::Single),
            (_, b'"') => stack.push(Level::Double),
            (_, b'$') if at(1) == b'\'' => {
                stack.push(Level::AnsiC);
                step = 2;
            }
            (_, b'$') if at(1) == b'(' && at(2) == b'(' => {
                stack.push(Level::Arith(0));
                step = 3;
            }
            (_, b'(') if at(1) == b'(' => {
                stack.push(Level::Arith(0));
                step = 2;
            }
            (_, b'$' | b'<' | b'>') if at(1) == b'(' => {
                stack.push(Level::Code(i + 2));
                step = 2;
            }
            (_, b'(') => stack.push(Level::Code(i + 1)),
            (Level::Code(from), b')') => {
                end(&mut out, from, i);
                stack.pop();
                // The outermost level is never closed.
                stack.last()?;
            }
            (Level::Backtick(from), b'`') => {
                end(&mut out, from, i);
                stack.pop();
            }
            (_, b'`') => stack.push(Level::Backtick(i + 1)),
            (_, b'#') if i == 0 || b" \t\n;&|(".contains(&b[i - 1]) => {
                while i + step < b.len() && b[i + step] != b'\n' {
                    step += 1;
                }
            }
            (_, b'<') if at(1) == b'<' && at(2) != b'<' => {
                out.redirection = true;
                heredocs.push(heredoc_word(command.get(i + 2..).unwrap_or_default()));
                step = 2;
            }
            (_, b'<' | b'>') => {
                out.redirection = true;
                if at(1) == b'&' || at(1) == b'>' || at(1) == b'<' || at(1) == b'|' {
                    step = 2;
                }
            }
            (_, b'&') if at(1) == b'>' => {
                out.redirection = true;
                step = if at(2) == b'>' { 3 } else { 2 };
            }
            (Level::Code(from) | Level::Backtick(from), c @ (b';' | b'&' | b'|' | b'\n')) => {
                end(&mut out, from, i);
                if c != b'\n' && (at(1) == c || (c == b'|' && at(1) == b'&')) {
                    step = 2;
                }
                if c == b'\n' && !heredocs.is_empty() {
                    step = past_heredocs(command, i + 1, std::mem::take(&mut heredocs))? - i;
                }
                let next = i + step;
                set_level(
                    &mut stack,
                    match top {
                        Level::Backtick(_) => Level::Backtick(next),
                        _ => Level::Code(next),
                    },
                );
            }
            _ => {}
        }
        i = past(command, i, step);
    }
    match stack.as_slice() {
        [Level::Code(from)] if heredocs.is_empty() => end(&mut out, *from, b.len()),
        _ => return None,
    }
    Some(out)
}

/// The step past byte `i` of `command` inside quotes or arithmetic (`top`), the levels it
/// opens or closes pushed or popped; `None` at a level of code (the top, a substitution, a
/// subshell, backticks), which `parse` reads itself. `Some(None)`: a `)` too many.
fn in_text(
    stack: &mut Vec<Level>,
    top: Level,
    i: usize,
    at: &dyn Fn(usize) -> u8,
) -> Option<Option<usize>> {
    let mut step = 1;
    match (top, at(0)) {
        (Level::Single, b'\'') | (Level::Double, b'"') | (Level::AnsiC, b'\'') => {
            stack.pop();
        }
        (Level::Single, _) => {}
        (Level::AnsiC | Level::Double, b'\\') => step = 2,
        (Level::AnsiC, _) => {}
        (Level::Double, b'$') if at(1) == b'(' && at(2) == b'(' => {
            stack.push(Level::Arith(0));
            step = 3;
        }
        (Level::Double, b'$') if at(1) == b'(' => {
            stack.push(Level::Code(i + 2));
            step = 2;
        }
        (Level::Double, b'`') => stack.push(Level::Backtick(i + 1)),
        (Level::Double, _) => {}
        (Level::Arith(0), b')') if at(1) == b')' => {
            stack.pop();
            step = 2;
        }
        (Level::Arith(d), b'(') => set_level(stack, Level::Arith(d + 1)),
        (Level::Arith(d), b')') => match d.checked_sub(1) {
            Some(d) => set_level(stack, Level::Arith(d)),
            None => return Some(None),
        },
        (Level::Arith(_), b'\\') => step = 2,
        (Level::Arith(_), _) => {}
        (Level::Code(_) | Level::Backtick(_), _) => return None,
    }
    Some(Some(step))
}

/// Where the next character after `step` bytes from `i` starts.
fn past(command: &str, i: usize, mut step: usize) -> usize {
    while i + step < command.len() && !command.is_char_boundary(i + step) {
        step += 1;
    }
    i + step
}

/// A here-document's delimiter, from what follows its `<<`: quotes and escapes left out.
fn heredoc_word(rest: &str) -> String {
    let rest = rest.strip_prefix('-').unwrap_or(rest).trim_start();
    rest.chars()
        .take_while(|c| !c.is_whitespace() && !";&|<>()".contains(*c))
        .filter(|c| !"'\"\\".contains(*c))
        .collect()
}

/// Past the here-documents' lines from `pos`, up to each one's delimiter in turn (they are
/// not code); `None` when one is not closed.
fn past_heredocs(command: &str, mut pos: usize, heredocs: Vec<String>) -> Option<usize> {
    for delim in heredocs {
        loop {
            let line_end = command[pos..].find('\n').map_or(command.len(), |n| pos + n);
            let line = command[pos..line_end].trim_start_matches('\t');
            pos = (line_end + 1).min(command.len());
            if line == delim {
                break;
            }
            if line_end == command.len() {
                return None;
            }
        }
    }
    Some(pos)
}

fn set_level(stack: &mut [Level], level: Level) {
    if let Some(top) = stack.last_mut() {
        *top = level;
    }
}

fn set_top(stack: &mut [Frame], frame: Frame) {
    if let Some(top) = stack.last_mut() {
        *top = frame;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What each payload must stay: text, never a command.
    const PAYLOADS: &[&str] = &[
        "x$(touch PWNED)",
        "x`touch PWNED`",
        "x; touch PWNED",
        "x && touch PWNED",
        "x | touch PWNED",
        "x\ntouch PWNED",
        "x' ; touch PWNED ; '",
        "x\" ; touch PWNED ; \"",
        "x\\\"; touch PWNED #",
        "$(touch PWNED)'\"`touch PWNED`",
        "it's a \"quoted\" *.rs ~ {a,b} $HOME",
    ];

    fn commands_rewritten(template: &str) -> Result<String, Context> {
        rewrite(template, "{{args}}", |c| reference("GEMINID_T", c))
    }

    /// Every quoting an author may write around `{{args}}`, run through a real bash with each
    /// payload: what comes out is the payload, and nothing ran.
    #[test]
    fn arguments_are_text_in_every_quoting_a_command_may_use() {
        let templates = [
            ("printf %s {{args}}", ""),
            ("printf %s '{{args}}'", ""),
            ("printf %s \"{{args}}\"", ""),
            ("printf %s $'{{args}}'", ""),
            ("printf %s \"$(printf %s \"{{args}}\")\"", ""),
            ("printf %s \"$(printf %s {{args}})\"", ""),
            ("printf %s \"`printf %s '{{args}}'`\"", ""),
            ("printf %s 'a'\"{{args}}\"'b'", "b"),
        ];
        for (template, suffix) in templates {
            let cmd = commands_rewritten(template).unwrap();
            for payload in PAYLOADS {
                let dir = tempfile::tempdir().unwrap();
                let out = std::process::Command::new("bash")
                    .args(["-c", &cmd])
                    .current_dir(dir.path())
                    .env("GEMINID_T", payload)
                    .output()
                    .unwrap();
                assert!(
                    !dir.path().join("PWNED").exists(),
                    "{template:?} ran {payload:?} (as {cmd:?})"
                );
                let got = String::from_utf8_lossy(&out.stdout);
                let want = if suffix.is_empty() {
                    (*payload).to_owned()
                } else {
                    format!("a{payload}{suffix}")
                };
                assert_eq!(got, want, "{template:?} as {cmd:?}");
            }
        }
    }

    #[test]
    fn commands_are_split_as_gemini_cli_splits_them() {
        let split = |c: &str| parse(c).map(|p| (p.commands, p.redirection));
        let v = |a: &[&str], r: bool| Some((a.iter().map(|s| (*s).to_owned()).collect(), r));
        assert_eq!(split("echo A"), v(&["echo A"], false));
        assert_eq!(split("echo A && touch x"), v(&["echo A", "touch x"], false));
        assert_eq!(
            split("echo A; touch x || b | c & d"),
            v(&["echo A", "touch x", "b", "c", "d"], false)
        );
        assert_eq!(split("echo A > x"), v(&["echo A > x"], true));
        assert_eq!(split("echo A >> x 2>&1"), v(&["echo A >> x 2>&1"], true));
        assert_eq!(split("echo $(touch x)"), v(&["touch x", "echo $(touch x)"], false));
        assert_eq!(split("echo `touch x`"), v(&["touch x", "echo `touch x`"], false));
        assert_eq!(
            split("echo \"$(touch x; b)\""),
            v(&["touch x", "b", "echo \"$(touch x; b)\""], false)
        );
        assert_eq!(split("(touch x)"), v(&["touch x", "(touch x)"], false));
        assert_eq!(split("diff <(ls) x"), v(&["ls", "diff <(ls) x"], false));
        assert_eq!(
            split("echo 'a && b' \"c; d\" \\; e"),
            v(&["echo 'a && b' \"c; d\" \\; e"], false)
        );
        assert_eq!(split("echo $(( 1 < 2 ))"), v(&["echo $(( 1 < 2 ))"], false));
        assert_eq!(split("echo a # && touch x\nls"), v(&["echo a # && touch x", "ls"], false));
        assert_eq!(split("cat <<E\n$(x) && y\nE\nls"), v(&["cat <<E", "ls"], true));
        assert_eq!(split("echo 'open"), None);
        assert_eq!(split("echo $(x"), None);
        assert_eq!(split("echo x)"), None);
    }

    #[test]
    fn here_documents_and_arithmetic_are_refused() {
        assert_eq!(commands_rewritten("cat <<EOF\n{{args}}\nEOF"), Err(Context::Heredoc));
        assert_eq!(commands_rewritten("cat <<-'E'\n{{args}}\nE"), Err(Context::Heredoc));
        assert_eq!(commands_rewritten("echo $(( {{args}} + 1 ))"), Err(Context::Arithmetic));
        assert_eq!(commands_rewritten("(( {{args}} ))"), Err(Context::Arithmetic));
        // A here-string is a word like any other.
        assert_eq!(
            commands_rewritten("cat <<< {{args}}").as_deref(),
            Ok("cat <<< \"${GEMINID_T}\"")
        );
    }

    #[test]
    fn each_quoting_gets_its_reference() {
        let all = commands_rewritten("a {{args}} '{{args}}' \"{{args}}\" $'{{args}}' é{{args}}");
        assert_eq!(
            all.as_deref(),
            Ok(concat!(
                "a \"${GEMINID_T}\" ''\"${GEMINID_T}\"'' \"${GEMINID_T}\" ",
                "$''\"${GEMINID_T}\"$'' é\"${GEMINID_T}\""
            ))
        );
        // Escapes and nesting: an escaped quote opens nothing; `)` closes `$(`.
        assert_eq!(
            commands_rewritten("echo \\' {{args}} \"$(echo ')' {{args}})\" {{args}}").as_deref(),
            Ok(concat!(
                "echo \\' \"${GEMINID_T}\" \"$(echo ')' \"${GEMINID_T}\")\" ",
                "\"${GEMINID_T}\""
            ))
        );
    }
}
