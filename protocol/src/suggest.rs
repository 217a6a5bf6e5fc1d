//! "Did you mean": the name a person most likely meant when the one given names nothing. Used
//! for the text of an error only; nothing is ever resolved or called through a suggestion
//! (names that cross the socket are exact).

/// The candidate `name` most likely meant, if any is close: one that differs only in case,
/// surrounding spaces or `-` against `_`; else the nearest within one edit, or two for names of
/// eight characters or more (a swap of two neighbours is one edit).
pub fn closest<'a, I>(name: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let candidates: Vec<&str> = candidates.into_iter().filter(|c| *c != name).collect();
    let folded = fold(name);
    if folded.is_empty() {
        return None;
    }
    if let Some(c) = candidates.iter().find(|c| fold(c) == folded) {
        return Some(c);
    }
    let limit = (folded.chars().count() / 4).clamp(1, 2);
    candidates
        .iter()
        .map(|c| (distance(&fold(c), &folded), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The tool `name` most likely meant among `(full name, its server's own name for it)`: the
/// one tool whose own name `name` is (given for its full `mcp_server_tool` name), else
/// [`closest`] among the full names.
pub fn tool<'a, I>(name: &str, tools: I) -> Option<&'a str>
where
    I: IntoIterator<Item = (&'a str, &'a str)> + Clone,
{
    let mut own = tools.clone().into_iter().filter(|(_, own)| *own == name);
    if let (Some((full, _)), None) = (own.next(), own.next()) {
        return Some(full);
    }
    closest(name, tools.into_iter().map(|(full, _)| full))
}

/// ` (did you mean 'X'?)` for an error message, or nothing.
pub fn did_you_mean<'a, I>(name: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    closest(name, candidates).map(|c| format!(" (did you mean '{c}'?)")).unwrap_or_default()
}

fn fold(s: &str) -> String {
    s.trim().to_lowercase().replace('-', "_")
}

/// Edits from `a` to `b`: insert, delete, replace, or swap two neighbours (optimal string
/// alignment distance).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Three rows: two back (for a swap), one back, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_a_person_likely_meant() {
        let servers = ["everything", "memory", "filesystem", "time"];
        for (given, want) in [
            ("Memory", Some("memory")),
            (" time", Some("time")),
            ("everythign", Some("everything")), // a swap
            ("filesytem", Some("filesystem")),  // a letter left out
            ("tim", Some("time")),
            ("notes", None),
            ("", None),
            ("memory", None), // itself is no suggestion
        ] {
            assert_eq!(closest(given, servers), want, "{given:?}");
        }
        // Two edits at most, however long the name.
        assert_eq!(closest("mcp_rich_nope", ["mcp_rich_typed"]), None);
        let tools = [
            ("mcp_everything_get-sum", "get-sum"),
            ("mcp_everything_echo", "echo"),
            ("mcp_time_echo", "echo"),
            ("mcp_time_slow_echo", "slow_echo"),
        ];
        assert_eq!(tool("get-sum", tools), Some("mcp_everything_get-sum"));
        assert_eq!(tool("slow_echo", tools), Some("mcp_time_slow_echo"));
        assert_eq!(tool("get_sum", tools), None, "the own name is matched as written");
        // Two servers have `echo`: which one is not guessed.
        assert_eq!(tool("echo", tools), None);
        assert_eq!(tool("mcp_everything_get_sum", tools), Some("mcp_everything_get-sum"));
        assert_eq!(
            did_you_mean("mcp-server-everythign", ["mcp-server-everything"]),
            " (did you mean 'mcp-server-everything'?)"
        );
        assert_eq!(did_you_mean("x", ["abc"]), "");
    }

    #[test]
    fn distance_counts_edits() {
        for (a, b, d) in [
            ("", "", 0),
            ("a", "", 1),
            ("ab", "ba", 1),
            ("kitten", "sitting", 3),
            ("abc", "abc", 0),
        ] {
            assert_eq!(distance(a, b), d, "{a} {b}");
        }
    }
}
