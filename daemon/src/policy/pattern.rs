//! `argsPattern`, `commandPrefix` and `commandRegex` as regular expressions over the stable
//! form of a call's arguments (Gemini CLI's `buildArgsPatterns`, `isSafeRegExp`).
//!
//! Patterns are written for JavaScript's `RegExp`; they are compiled with the `regex` crate,
//! which has no backtracking (so no pattern can take exponential time) and therefore no
//! look-around or backreferences: a pattern using them is refused, named. JavaScript's `\0`
//! (a NUL, which the stable form puts around each top-level argument) is accepted.

use regex::Regex;

/// Longest pattern accepted (Gemini CLI's limit).
pub const MAX_PATTERN: usize = 2048;

/// `text` with every character a `RegExp` gives a meaning escaped (Gemini CLI's
/// `escapeRegex`: ``-[]{}()*+?.,\^$|#`` whitespace and `"`).
pub fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "-[]{}()*+?.,\\^$|#\"".contains(c) || c.is_whitespace() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Why a pattern is refused, if it is: too long, or a nested quantifier (`(a+)+`, `(.*)*`),
/// which Gemini CLI refuses as a ReDoS risk (refused here too, so that a file is read the same
/// by both).
pub fn unsafe_reason(pattern: &str) -> Option<String> {
    if pattern.len() > MAX_PATTERN {
        return Some(format!("it is longer than {MAX_PATTERN} characters"));
    }
    // A group holding a quantifier, itself quantified: `\([^)]*[*+?{].*\)[*+?{]`.
    let nested = crate::literal::regex(r"\([^)]*[*+?{].*\)[*+?{]");
    if nested.is_match(pattern) {
        return Some(
            "it has a nested quantifier (a quantified group containing a quantifier, as in \
             `(a+)+`), which can take exponential time in Gemini CLI"
                .to_owned(),
        );
    }
    None
}

/// The regular expressions a rule's argument fields stand for: one per `commandPrefix`, or the
/// `commandRegex`, or the `argsPattern` (`None`: the rule looks at no arguments).
pub fn args_patterns(
    args_pattern: Option<&str>,
    command_prefix: Option<&[String]>,
    command_regex: Option<&str>,
) -> Vec<Option<String>> {
    if let Some(prefixes) = command_prefix {
        return prefixes
            .iter()
            .map(|p| {
                // The prefix as a JSON string literal without its closing quote, then a
                // boundary: whitespace, the closing quote, or an escaped quote (not any
                // backslash: `git\status` must not match `git status`'s prefix `git`).
                let encoded = serde_json::to_string(p).unwrap_or_default();
                let open = &encoded[..encoded.len().saturating_sub(1)];
                Some(format!("{}(?:[\\s\"]|\\\\\")", escape_regex(&format!("\"command\":{open}"))))
            })
            .collect();
    }
    if let Some(r) = command_regex {
        return vec![Some(format!("\"command\":\"{r}"))];
    }
    vec![args_pattern.map(str::to_owned)]
}

/// Compile a JavaScript-flavoured pattern; `Err` says why it cannot be.
pub fn compile(pattern: &str) -> Result<Regex, String> {
    if let Some(why) = unsafe_reason(pattern) {
        return Err(format!("unsafe pattern: {why}"));
    }
    let translated = translate(pattern);
    Regex::new(&translated).map_err(|e| {
        let text = e.to_string();
        if text.contains("look-around") || text.contains("backreferences") {
            format!(
                "it uses look-around or a backreference, which geminid's regex engine does not \
                 have (it never backtracks): {}",
                text.lines().last().unwrap_or(&text)
            )
        } else {
            text
        }
    })
}

/// JavaScript-only escapes rewritten for the `regex` crate: `\0` (NUL) → `\x00`, and `\/`
/// (an escaped slash, common in patterns copied from `/.../` literals) → `/`.
pub(crate) fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') if !chars.peek().is_some_and(char::is_ascii_digit) => out.push_str("\\x00"),
            Some('/') => out.push('/'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::stringify::stable_stringify;
    use serde_json::json;

    fn prefix(p: &str) -> Regex {
        let patterns = args_patterns(None, Some(&[p.to_owned()]), None);
        compile(patterns[0].as_deref().unwrap()).unwrap()
    }

    fn command(c: &str) -> String {
        stable_stringify(&json!({ "command": c, "description": "d" }))
    }

    /// Gemini CLI's `utils.test.ts` cases for `isSafeRegExp`.
    #[test]
    fn unsafe_patterns_are_refused_as_gemini_cli_refuses_them() {
        for bad in ["(a+)+", "(.*)*", "([a-z]+)+", "(.*)+", "(a{1,3})+"] {
            assert!(unsafe_reason(bad).is_some(), "{bad}");
            assert!(compile(bad).unwrap_err().contains("nested quantifier"), "{bad}");
        }
        let safe =
            ["abc", "^abc$", "a|b", "a+", "a*", "a?", "a{1,3}", "(abc)*", "(a|b)+", "(a|b)*"];
        for good in safe {
            assert_eq!(unsafe_reason(good), None, "{good}");
            assert!(compile(good).is_ok(), "{good}");
        }
        for invalid in ["[", "([a-z)", "*"] {
            assert!(compile(invalid).is_err(), "{invalid}");
        }
        assert!(unsafe_reason(&"a".repeat(3000)).is_some());
    }

    #[test]
    fn a_command_prefix_matches_whole_words_only() {
        let git = prefix("git status");
        assert!(git.is_match(&command("git status")));
        assert!(git.is_match(&command("git status --short")));
        assert!(!git.is_match(&command("git statusx")));
        assert!(!git.is_match(&command("echo git status")));
        let g = prefix("git");
        assert!(!g.is_match(&command("git\\status")), "a backslash is not a boundary");
        assert!(g.is_match(&command("git \"quoted\"")));
        // An argument named like another's value cannot forge a match.
        let forged =
            stable_stringify(&json!({ "command": "rm -rf /", "x": "\"command\":\"git status" }));
        assert!(!prefix("git status").is_match(&forged));
    }

    #[test]
    fn a_command_regex_anchors_at_the_command_value() {
        let patterns = args_patterns(None, None, Some("npm (test|run lint)"));
        let r = compile(patterns[0].as_deref().unwrap()).unwrap();
        assert!(r.is_match(&command("npm test")));
        assert!(!r.is_match(&command("sudo npm test")));
    }

    #[test]
    fn javascript_escapes_are_understood_and_look_around_is_named() {
        let r = compile("\\0\"path\":\"\\/etc\\/").unwrap();
        assert!(r.is_match(&stable_stringify(&json!({"path": "/etc/passwd"}))));
        let e = compile("foo(?=bar)").unwrap_err();
        assert!(e.contains("look-around"), "{e}");
        assert_eq!(escape_regex("a.b (c)"), "a\\.b\\ \\(c\\)");
    }
}
