//! Names in the order Gemini CLI lists them: JavaScript's `localeCompare` (ICU's root
//! collation) as it orders ASCII names. Whitespace, then punctuation in ICU's order, then
//! digits, then letters, case aside; only where that ties does case count, lower case first.
//! So `alpha` < `Alpha` < `b` and `gamma_2` < `gamma2`. A letter beyond ASCII is ordered by its lower case after every ASCII
//! letter (ICU would place `é` beside `e`); names Gemini CLI lists are ASCII in practice.
//! Used by gemctl (`skills list`) and the daemon (a session's MCP servers, whose tools Gemini
//! CLI declares by server name).

use std::cmp::Ordering;

/// ASCII whitespace and punctuation in ICU's root order.
const PUNCTUATION: &str = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";

/// Where a character sorts, case aside.
fn primary(c: char) -> (u8, u32) {
    if let Some(at) = PUNCTUATION.find(c) {
        return (0, at as u32);
    }
    if c.is_ascii_digit() {
        return (1, u32::from(c));
    }
    if c.is_ascii_alphabetic() {
        return (2, u32::from(c.to_ascii_lowercase()));
    }
    let lower = c.to_lowercase().next().unwrap_or(c);
    (3, u32::from(lower))
}

/// `a` against `b` as `a.localeCompare(b)` orders them.
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    a.chars()
        .map(primary)
        .cmp(b.chars().map(primary))
        .then_with(|| a.chars().map(char::is_uppercase).cmp(b.chars().map(char::is_uppercase)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order Node 22's `localeCompare` gives these (printed by
    /// `node -e 'console.log(JSON.stringify(names.sort((x, y) => x.localeCompare(y))))'`).
    #[test]
    fn names_sort_as_javascripts_locale_compare_sorts_them() {
        let want = [
            "a_b", "a-b", "ab", "alpha", "Alpha", "b", "B", "beta", "Gamma", "gamma_2", "gamma2",
            "my_skill", "my-skill", "myskill", "skill 2", "skill10", "skill9", "zed", "Zeta",
        ];
        let mut got = want.to_vec();
        got.reverse();
        got.sort_by(|a, b| locale_compare(a, b));
        assert_eq!(got, want);
        let punctuation: Vec<char> = PUNCTUATION.chars().collect();
        let mut sorted = punctuation.clone();
        sorted.sort_by(|a, b| locale_compare(&a.to_string(), &b.to_string()));
        assert_eq!(sorted, punctuation);
    }
}
