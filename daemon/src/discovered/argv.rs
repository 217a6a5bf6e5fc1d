//! `tools.discoveryCommand` split into a program and its arguments as Gemini CLI splits it
//! (npm `shell-quote`'s `parse` with no environment; nothing runs a shell): whitespace between
//! words, `'…'` taken literally, `"…"` with `\"`, `\\` and `\$` escapes, a backslash outside
//! quotes taking the next character literally, `#` starting a comment, `$NAME` and `${NAME}`
//! standing for nothing (settings expansion has already replaced every variable that is set; a
//! lone `$` stays). Where Gemini CLI silently drops a word (a shell operator such as `|` or `>`,
//! a glob such as `*.json`) or misreads one (an unclosed quote), geminid refuses the command
//! with the fix.

/// Why a command line is refused.
pub(crate) type Refused = String;

fn operator_at(rest: &[char]) -> Option<String> {
    const LONG: [&str; 8] = ["<<<", "||", "&&", ";;", "|&", "<(", ">>", ">&"];
    let text: String = rest.iter().take(3).collect();
    if let Some(op) = LONG.iter().find(|op| text.starts_with(**op)) {
        return Some((*op).to_owned());
    }
    if text.starts_with("<&") {
        return Some("<&".to_owned());
    }
    rest.first().filter(|c| "&;()|<>".contains(**c)).map(|c| c.to_string())
}

/// `line` as a program and its arguments.
pub(crate) fn split(line: &str) -> Result<Vec<String>, Refused> {
    let chars: Vec<char> = line.chars().collect();
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            words.extend(word.take());
            i += 1;
            continue;
        }
        if let Some(op) = operator_at(&chars[i..]) {
            return Err(format!(
                "`{op}` is a shell operator, and the discovery command runs without a shell \
                 (Gemini CLI drops it): run a script, or `sh -c '…'`"
            ));
        }
        let w = word.get_or_insert_with(String::new);
        match c {
            '#' => {
                // The rest of the line is a comment.
                words.extend(word.take().filter(|w| !w.is_empty()));
                return finish(words);
            }
            '\\' => {
                if let Some(next) = chars.get(i + 1) {
                    w.push(*next);
                }
                i += 2;
            }
            '\'' => {
                let Some(end) = chars[i + 1..].iter().position(|c| *c == '\'') else {
                    return Err(unclosed('\''));
                };
                w.extend(&chars[i + 1..i + 1 + end]);
                i += end + 2;
            }
            '"' => i = double_quoted(&chars, i + 1, w)?,
            '$' => i = variable(&chars, i + 1, w)?,
            '*' | '?' => {
                return Err(format!(
                    "`{c}` is a glob, and no shell expands it in the discovery command (Gemini CLI \
                     drops the word): quote it to pass it as it is"
                ));
            }
            _ => {
                w.push(c);
                i += 1;
            }
        }
    }
    words.extend(word);
    finish(words)
}

fn finish(words: Vec<String>) -> Result<Vec<String>, Refused> {
    if words.is_empty() {
        return Err("the discovery command is empty".to_owned());
    }
    Ok(words)
}

fn unclosed(q: char) -> Refused {
    format!("the discovery command has an unclosed {q}")
}

/// A double-quoted part from `i` (past the opening quote) into `w`: where it ends.
fn double_quoted(chars: &[char], mut i: usize, w: &mut String) -> Result<usize, Refused> {
    loop {
        match chars.get(i) {
            None => return Err(unclosed('"')),
            Some('"') => return Ok(i + 1),
            Some('\\') => {
                match chars.get(i + 1) {
                    Some(c @ ('"' | '\\' | '$')) => w.push(*c),
                    Some(c) => {
                        w.push('\\');
                        w.push(*c);
                    }
                    None => return Err(unclosed('"')),
                }
                i += 2;
            }
            Some('$') => i = variable(chars, i + 1, w)?,
            Some(c) => {
                w.push(*c);
                i += 1;
            }
        }
    }
}

/// A `$` reference from `i` (past the `$`): it stands for nothing, or `$` when no name follows.
fn variable(chars: &[char], i: usize, w: &mut String) -> Result<usize, Refused> {
    match chars.get(i) {
        Some('{') => {
            let Some(len) = chars[i + 1..].iter().position(|c| *c == '}') else {
                return Err("bad substitution: a `${` without its `}`".to_owned());
            };
            if len == 0 {
                return Err("bad substitution: `${}`".to_owned());
            }
            Ok(i + len + 2)
        }
        Some(c) if "*@#?$!_-".contains(*c) => Ok(i + 1),
        _ => {
            let len =
                chars[i..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == '_').count();
            if len == 0 {
                w.push('$');
            }
            Ok(i + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    /// npm `shell-quote`'s own parse cases that involve no environment, as data.
    #[test]
    fn splits_as_shell_quote_does() {
        let cases: &[(&str, &[&str])] = &[
            ("a 'b' \"c\"", &["a", "b", "c"]),
            (
                "beep \"boop\" 'foo bar baz' \"it's \\\"so\\\" groovy\"",
                &["beep", "boop", "foo bar baz", "it's \"so\" groovy"],
            ),
            ("a b\\ c d", &["a", "b c", "d"]),
            ("\\$beep bo\\`op", &["$beep", "bo`op"]),
            ("echo \"foo = \\\"foo\\\"\"", &["echo", "foo = \"foo\""]),
            ("", &[]),
            (" ", &[]),
            ("\t", &[]),
            ("a\"b\"", &["ab"]),
            ("a'b'", &["ab"]),
            ("a'b'c\"d\"e", &["abcde"]),
            ("'a\\b'", &["a\\b"]),
            ("\"a\\b\"", &["a\\b"]),
            ("\"a\\\\b\"", &["a\\b"]),
            ("x $HOME/y", &["x", "/y"]),
            ("x \"${HOME}\"y", &["x", "y"]),
            ("x $ y", &["x", "$", "y"]),
            ("x '$HOME'", &["x", "$HOME"]),
            ("python3 tools.py --list # the rest is a comment", &["python3", "tools.py", "--list"]),
            ("x '*.json' \\*", &["x", "*.json", "*"]),
            ("/usr/bin/discover --flag=\"two words\"", &["/usr/bin/discover", "--flag=two words"]),
        ];
        for (line, want) in cases {
            match split(line) {
                Ok(got) => assert_eq!(&got, want, "{line:?}"),
                Err(e) => assert!(want.is_empty() && e.contains("empty"), "{line:?}: {e}"),
            }
        }
    }

    #[test]
    fn what_gemini_cli_would_drop_is_refused_with_the_fix() {
        for (line, says) in [
            ("discover | jq .", "`|` is a shell operator"),
            ("discover > out.json", "`>` is a shell operator"),
            ("a && b", "`&&`"),
            ("ls *.json", "`*` is a glob"),
            ("echo 'unclosed", "unclosed '"),
            ("echo \"unclosed", "unclosed \""),
            ("echo ${}", "bad substitution"),
            ("echo ${HOME", "bad substitution"),
            ("# only a comment", "empty"),
        ] {
            let e = split(line).unwrap_err();
            assert!(e.contains(says), "{line:?}: {e}");
        }
    }
}
