//! Two rules of the house read from the sources, beside the layers (`layers.rs`, whose file
//! walk they share): no function over 120 lines (here), and no import circle between the files
//! of one top-level module (`circles.rs`). Both read code only: comments, strings and character literals are blanked
//! first (`code_only`), so a brace or a path inside them counts for nothing.
//!
//! A function is measured from the line of its `fn` to the line of its closing brace; closures
//! and items inside it count as part of it. Test code is measured too (`tests.rs` files and
//! `#[cfg(test)]` modules): a test over 120 lines is a table or a story that reads better as
//! named steps as well.

use std::path::Path;

/// The longest a function may be, in lines from its `fn` to its closing brace.
const LONGEST: usize = 120;

pub(crate) fn src() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

/// `path` as the failure names it: `daemon/src/...`.
pub(crate) fn shown(path: &Path) -> String {
    format!("daemon/src/{}", path.strip_prefix(src()).unwrap_or(path).display())
}

/// `text` with comments and string, byte-string, raw-string and character literals blanked to
/// spaces (newlines kept, so lines still count), lifetimes left as they are.
pub(crate) fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, from: &[char]| {
        out.extend(from.iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
    };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut i = 0;
    while i < c.len() {
        let after_ident = i > 0 && ident(c[i - 1]);
        let end = match c[i] {
            '/' if c.get(i + 1) == Some(&'/') => {
                (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len())
            }
            '/' if c.get(i + 1) == Some(&'*') => {
                let (mut depth, mut j) = (0, i);
                while j < c.len() {
                    if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                        depth += 1;
                        j += 2;
                    } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                j
            }
            '"' => quoted(&c, i + 1, '"'),
            'b' | 'c' | 'r' if !after_ident => match raw_string(&c, i) {
                Some(end) => end,
                None if c[i] != 'r' && c.get(i + 1) == Some(&'"') => quoted(&c, i + 2, '"'),
                None => {
                    out.push(c[i]);
                    i += 1;
                    continue;
                }
            },
            '\'' if c.get(i + 1) == Some(&'\\') => quoted(&c, i + 1, '\''),
            '\'' if c.get(i + 2) == Some(&'\'') => i + 3,
            ch => {
                out.push(ch);
                i += 1;
                continue;
            }
        };
        let end = end.min(c.len());
        blank(&mut out, &c[i..end]);
        i = end;
    }
    out
}

/// The end (one past the closing `close`) of a literal whose text starts at `from`.
fn quoted(c: &[char], from: usize, close: char) -> usize {
    let mut j = from;
    while j < c.len() {
        match c[j] {
            '\\' => j += 2,
            ch if ch == close => return j + 1,
            _ => j += 1,
        }
    }
    c.len()
}

/// The end of a raw string (`r"…"`, `r#"…"#`, `br"…"`, `cr"…"`) starting at `i`, if one does.
fn raw_string(c: &[char], i: usize) -> Option<usize> {
    let mut j = i + usize::from(c[i] != 'r');
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = c[j..].iter().take_while(|&&ch| ch == '#').count();
    j += hashes;
    if c.get(j) != Some(&'"') {
        return None;
    }
    (j + 1..c.len())
        .find(|&k| {
            c[k] == '"' && c[k + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes
        })
        .map(|k| k + 1 + hashes)
}

/// The line (from 1) of each byte offset of `code`.
pub(crate) fn line_of(code: &str, at: usize) -> usize {
    code[..at].matches('\n').count() + 1
}

/// Each function with a body in `code` (from `code_only`): its name, the line of its `fn` and
/// its length in lines.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let is_ident = |x: u8| x.is_ascii_alphanumeric() || x == b'_';
    let mut out = Vec::new();
    for (at, _) in code.match_indices("fn") {
        if (at > 0 && is_ident(b[at - 1])) || !b.get(at + 2).is_some_and(u8::is_ascii_whitespace) {
            continue;
        }
        let rest = code[at + 2..].trim_start();
        let name: String = rest.chars().take_while(|&c| c.is_alphanumeric() || c == '_').collect();
        if name.is_empty() {
            continue;
        }
        // The body's `{`: the first outside the signature's parentheses and brackets, unless a
        // `;` ends a declaration first.
        let (mut depth, mut open) = (0i32, None);
        for (i, &x) in b.iter().enumerate().skip(at + 2) {
            match x {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut depth = 0;
        let close = (open..b.len()).find(|&i| {
            match b[i] {
                b'{' => depth += 1,
                b'}' => depth -= 1,
                _ => {}
            }
            depth == 0
        });
        let Some(close) = close else { continue };
        let first = line_of(code, at);
        out.push((name, first, line_of(code, close) - first + 1));
    }
    out
}

#[test]
fn no_function_is_over_120_lines() {
    let mut long = Vec::new();
    for file in crate::layers::rust_files(src()) {
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        for (name, line, length) in functions(&code) {
            if length > LONGEST {
                long.push(format!("{}:{line}: fn {name} is {length} lines", shown(&file)));
            }
        }
    }
    long.sort();
    assert!(
        long.is_empty(),
        "functions over {LONGEST} lines (split each into named steps):\n{}",
        long.join("\n")
    );
}

#[test]
fn code_is_read_without_comments_strings_or_chars() {
    let text = "fn a() {\n    let s = \"}\"; // }\n    let c = '{'; let r = r#\"}\"#;\n    /* } /* } */ } */\n    x::<'static>(b'}')\n}\nfn b();\nfn c(f: fn(u8) -> [u8; 2]) where T: X {}\n";
    let code = code_only(text);
    assert_eq!(code.lines().count(), text.lines().count());
    assert!(!code.contains('"') && code.contains("'static"));
    let fns = functions(&code);
    assert_eq!(fns, [("a".to_owned(), 1, 6), ("c".to_owned(), 8, 1)]);
}
