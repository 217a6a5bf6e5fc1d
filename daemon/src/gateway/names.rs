//! The names the gateway serves tools and prompts under. `server` names are
//! `<server>__<item>`, with every character a client may refuse replaced by `_` (Claude Code and
//! OpenAI-style clients accept `^[A-Za-z0-9_-]{1,64}$`), cut to 64 characters with a hash of
//! the whole name so two long names stay apart, and a name already taken renamed `__2`, `__3`
//! (the first in the session's order, servers by name, keeps it; each rename is reported). The
//! same table gives the same names, so a client's approvals and settings keep working across
//! restarts. `fqn` names are Gemini CLI's own, already unique; `own` names (one server's
//! gateway) are the server's, unchanged.

use std::collections::HashMap;

use geminid_protocol::gateway::Names;
use sha2::{Digest, Sha256};

/// The longest name served.
pub(crate) const MAX_NAME: usize = 64;

/// One item to name: its server, its own name, and its name in the session (Gemini's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item<'a> {
    /// The server's entry name.
    pub server: &'a str,
    /// The server's name for it.
    pub own: &'a str,
    /// Its fully qualified name in the session.
    pub fqn: &'a str,
}

/// Served names and back.
#[derive(Debug, Default)]
pub(crate) struct NameMap {
    /// In the items' order: the served name of each.
    pub served: Vec<String>,
    /// Served name → position in the items.
    pub by_served: HashMap<String, usize>,
    /// Renames, in words.
    pub notes: Vec<String>,
}

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect()
}

/// `name` cut to `max` characters, the end replaced by a hash of all of it.
fn fit(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let hash = Sha256::digest(name.as_bytes());
    let hex: String = hash.iter().take(4).map(|b| format!("{b:02x}")).collect();
    // `clean` leaves ASCII only, so any byte index is a character boundary.
    format!("{}_{hex}", &name[..max - hex.len() - 1])
}

/// Name `items` for a client.
pub(crate) fn build(items: &[Item<'_>], mode: Names) -> NameMap {
    let mut map = NameMap::default();
    for (i, item) in items.iter().enumerate() {
        let base = match mode {
            Names::Fqn => item.fqn.to_owned(),
            // One server's gateway: its names as it gives them (its client names them as it
            // would name the server's own).
            Names::Own => item.own.to_owned(),
            // A custom tool has no server: its own name (`discovered_tool_…`) stands alone.
            Names::Server if item.server.is_empty() => fit(&clean(item.fqn), MAX_NAME),
            Names::Server => fit(&format!("{}__{}", clean(item.server), clean(item.own)), MAX_NAME),
        };
        let mut name = base.clone();
        let mut n = 1;
        while map.by_served.contains_key(&name) {
            n += 1;
            let suffix = format!("__{n}");
            name = format!("{}{suffix}", fit(&base, MAX_NAME - suffix.len()));
        }
        if name != base {
            let first = map.by_served[&base];
            map.notes.push(format!(
                "'{}' of server '{}' is served as '{name}': '{base}' is '{}' of server '{}'",
                item.own, item.server, items[first].own, items[first].server
            ));
        }
        map.by_served.insert(name.clone(), i);
        map.served.push(name);
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(pairs: &[(&'static str, &'static str)]) -> Vec<Item<'static>> {
        pairs.iter().map(|(s, o)| Item { server: s, own: o, fqn: o }).collect()
    }

    #[test]
    fn readable_short_unique_and_the_same_every_time() {
        let long = "a_tool_with_a_name_so_long_that_no_client_would_accept_it_whole_at_all";
        let list = items(&[
            ("github", "create_issue"),
            ("my.server", "get thing"),
            ("a", "b__c"),
            ("a__b", "c"),
            ("x", long),
            ("x", "a_tool_with_a_name_so_long_that_no_client_would_accept_it_whole_at_all_2"),
        ]);
        let m = build(&list, Names::Server);
        assert_eq!(m.served[0], "github__create_issue");
        assert_eq!(m.served[1], "my_server__get_thing");
        assert_eq!(m.served[2], "a__b__c");
        assert_eq!(m.served[3], "a__b__c__2", "a collision is renamed");
        assert!(
            m.notes[0].contains("'c' of server 'a__b' is served as 'a__b__c__2'"),
            "{:?}",
            m.notes
        );
        assert!(m.served[4].len() == MAX_NAME && m.served[5].len() == MAX_NAME);
        assert_ne!(m.served[4], m.served[5], "cut names keep apart by their hash");
        for n in &m.served {
            assert!(n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{n}");
        }
        assert_eq!(build(&list, Names::Server).served, m.served, "stable");
        assert_eq!(build(&list, Names::Fqn).served[0], "create_issue");
        let own = build(&list, Names::Own);
        assert_eq!(own.served[1], "get thing", "own names are not cleaned");
        assert!(own.notes.is_empty());
    }
}
