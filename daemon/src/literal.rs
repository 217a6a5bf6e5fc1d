//! Regular expressions written in the source.

use regex::{Regex, RegexBuilder};

/// Compile a pattern written in the source. The tests of every function that uses one
/// compile it, so a typo fails there and never in use.
#[allow(clippy::expect_used, reason = "a literal pattern, compiled by the tests")]
pub(crate) fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a pattern written in the source compiles")
}

/// [`regex()`], matching case-insensitively.
#[allow(clippy::expect_used, reason = "a literal pattern, compiled by the tests")]
pub(crate) fn regex_ignoring_case(pattern: &str) -> Regex {
    RegexBuilder::new(pattern)
        .case_insensitive(true)
        .build()
        .expect("a pattern written in the source compiles")
}
