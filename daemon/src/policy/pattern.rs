//! `argsPattern`, `commandPrefix` and `commandRegex` as regular expressions over the stable
//! form of a call's arguments (Gemini CLI's `buildArgsPatterns`, `isSafeRegExp`).
//!
//! Patterns are written for JavaScript's `RegExp`; they are compiled with the `regex` crate,
//! which has no backtracking (so no pattern can take exponential time) and therefore no
//! look-around or backreferences: a pattern using them is refused, named. JavaScript's `\0`
//! (a NUL, which the stable form puts around each top-level argument) is accepted.

use std::sync::{Arc, LazyLock, OnceLock};

use regex::Regex;

/// Longest pattern accepted (Gemini CLI's limit).
pub(crate) const MAX_PATTERN: usize = 2048;

/// `text` with every character a `RegExp` gives a meaning escaped (Gemini CLI's
/// `escapeRegex`: ``-[]{}()*+?.,\^$|#`` whitespace and `"`).
pub(crate) fn escape_regex(text: &str) -> String {
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
pub(crate) fn unsafe_reason(pattern: &str) -> Option<String> {
    if pattern.len() > MAX_PATTERN {
        return Some(format!("it is longer than {MAX_PATTERN} characters"));
    }
    // A group holding a quantifier, itself quantified. Compiled once: compiling it for each
    // pattern was a third of reading a file of 10,000 rules (issue 39).
    static NESTED: LazyLock<Regex> =
        LazyLock::new(|| crate::literal::regex(r"\([^)]*[*+?{].*\)[*+?{]"));
    if NESTED.is_match(pattern) {
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
pub(crate) fn args_patterns(
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

/// Compile a JavaScript-flavoured pattern now; `Err` says why it cannot be. The tests' oracle
/// for [`ArgsPattern::new`], which checks without compiling.
#[cfg(test)]
fn compile(pattern: &str) -> Result<Regex, String> {
    if let Some(why) = unsafe_reason(pattern) {
        return Err(format!("unsafe pattern: {why}"));
    }
    Regex::new(&translate(pattern)).map_err(|e| explain(&e.to_string()))
}

/// A rule's argument pattern: checked when its file is read, compiled the first time a call
/// is matched against it. Most rules of a large file are never tried, and compiling each
/// up front cost a file of 10,000 rules a fifth of its read and most of the daemon's memory
/// (issue 39).
#[derive(Debug)]
pub struct ArgsPattern {
    translated: String,
    compiled: OnceLock<Option<Regex>>,
}

impl ArgsPattern {
    /// A JavaScript-flavoured pattern checked as `compile` checks it (refused when unsafe,
    /// not valid, or using look-around or backreferences), without building its matcher.
    pub(crate) fn new(pattern: &str) -> Result<Arc<Self>, String> {
        if let Some(why) = unsafe_reason(pattern) {
            return Err(format!("unsafe pattern: {why}"));
        }
        let translated = translate(pattern);
        regex_syntax::Parser::new().parse(&translated).map_err(|e| explain(&e.to_string()))?;
        Ok(Arc::new(Self { translated, compiled: OnceLock::new() }))
    }

    /// The pattern as matched against the arguments' stable JSON form (a `commandPrefix` or
    /// `commandRegex` as the pattern it becomes): what `policy review` shows.
    pub(crate) fn text(&self) -> &str {
        &self.translated
    }

    /// Whether `text` matches; `None` when the matcher cannot be built after all (it would be
    /// larger than the `regex` crate's size limit), which is logged once.
    pub(crate) fn is_match(&self, text: &str) -> Option<bool> {
        let compiled = self.compiled.get_or_init(|| match Regex::new(&self.translated) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!(pattern = %self.translated, error = %e, "a policy rule's pattern cannot be used; the rule denies (or asks) every call it names and allows none");
                None
            }
        });
        compiled.as_ref().map(|r| r.is_match(text))
    }
}

/// A `regex` error in words a policy's author can act on.
fn explain(text: &str) -> String {
    if text.contains("look-around") || text.contains("backreferences") {
        format!(
            "it uses look-around or a backreference, which geminid's regex engine does not \
             have (it never backtracks): {}",
            text.lines().last().unwrap_or(text)
        )
    } else {
        text.to_owned()
    }
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

    fn prefix(p: &str) -> Arc<ArgsPattern> {
        let patterns = args_patterns(None, Some(&[p.to_owned()]), None);
        ArgsPattern::new(patterns[0].as_deref().unwrap()).unwrap()
    }

    /// Whether `text` matches, the pattern being one that can be built.
    trait Matches {
        fn m(&self, text: &str) -> bool;
    }

    impl Matches for ArgsPattern {
        fn m(&self, text: &str) -> bool {
            self.is_match(text).unwrap()
        }
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
            assert!(ArgsPattern::new(good).is_ok(), "{good}");
        }
        for invalid in ["[", "([a-z)", "*"] {
            assert!(compile(invalid).is_err(), "{invalid}");
            assert!(ArgsPattern::new(invalid).is_err(), "{invalid}");
        }
        assert!(ArgsPattern::new("(a+)+").unwrap_err().contains("nested quantifier"));
        assert!(unsafe_reason(&"a".repeat(3000)).is_some());
    }

    #[test]
    fn a_command_prefix_matches_whole_words_only() {
        let git = prefix("git status");
        assert!(git.m(&command("git status")));
        assert!(git.m(&command("git status --short")));
        assert!(!git.m(&command("git statusx")));
        assert!(!git.m(&command("echo git status")));
        let g = prefix("git");
        assert!(!g.m(&command("git\\status")), "a backslash is not a boundary");
        assert!(g.m(&command("git \"quoted\"")));
        // An argument named like another's value cannot forge a match.
        let forged =
            stable_stringify(&json!({ "command": "rm -rf /", "x": "\"command\":\"git status" }));
        assert!(!prefix("git status").m(&forged));
    }

    /// Checked when read, built when first matched: a pattern too large to build (which only
    /// building finds) matches nothing and says so, and the rule holding it fails closed
    /// (`Rule::matches`).
    #[test]
    fn a_pattern_is_built_when_first_matched() {
        let p = ArgsPattern::new("\\0\"path\":\"\\/etc\\/").unwrap();
        assert!(p.compiled.get().is_none());
        assert_eq!(p.is_match(&stable_stringify(&json!({"path": "/etc/passwd"}))), Some(true));
        assert_eq!(p.is_match("x"), Some(false));
        let huge = ArgsPattern::new("\\w{1000}\\w{1000}").unwrap();
        assert_eq!(huge.is_match("x"), None);
    }

    #[test]
    fn a_command_regex_anchors_at_the_command_value() {
        let patterns = args_patterns(None, None, Some("npm (test|run lint)"));
        let r = ArgsPattern::new(patterns[0].as_deref().unwrap()).unwrap();
        assert!(r.m(&command("npm test")));
        assert!(!r.m(&command("sudo npm test")));
    }

    #[test]
    fn javascript_escapes_are_understood_and_look_around_is_named() {
        let r = ArgsPattern::new("\\0\"path\":\"\\/etc\\/").unwrap();
        assert!(r.m(&stable_stringify(&json!({"path": "/etc/passwd"}))));
        let e = compile("foo(?=bar)").unwrap_err();
        assert!(e.contains("look-around"), "{e}");
        let e = ArgsPattern::new("foo(?=bar)").unwrap_err();
        assert!(e.contains("look-around"), "{e}");
        assert_eq!(escape_regex("a.b (c)"), "a\\.b\\ \\(c\\)");
    }
}
