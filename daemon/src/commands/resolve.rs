//! Slash-command names after Gemini CLI's conflict rules (its SlashCommandResolver): commands
//! come in the order built-ins, skills, MCP prompts, files (user, workspace, extensions); a
//! built-in keeps its name; any other name claimed twice renames every claimant that is not
//! built in to `<prefix>.<name>` (`user`, `workspace`, the MCP server) or `<ext>:<name>`
//! (extension files and skills), a number appended while that is taken too. An extension's
//! skill is always `<ext>:<name>`.

use std::collections::{BTreeMap, HashMap};

use geminid_protocol::commands::{CommandConflict, CommandKind};

/// A command before its final name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The name it asks for.
    pub name: String,
    /// Its kind.
    pub kind: CommandKind,
    /// Its extension (extension files and skills).
    pub extension: Option<String>,
    /// Its MCP server (prompts).
    pub server: Option<String>,
}

impl Candidate {
    fn prefix(&self) -> Option<&str> {
        match self.kind {
            CommandKind::ExtensionFile | CommandKind::Skill => self.extension.as_deref(),
            CommandKind::McpPrompt => self.server.as_deref(),
            CommandKind::UserFile => Some("user"),
            CommandKind::WorkspaceFile => Some("workspace"),
            CommandKind::BuiltIn => None,
        }
    }
}

fn renamed<T>(name: &str, c: &Candidate, taken: &BTreeMap<String, T>) -> String {
    let sep =
        if matches!(c.kind, CommandKind::Skill | CommandKind::ExtensionFile) { ':' } else { '.' };
    let base = match c.prefix() {
        Some(p) => format!("{p}{sep}{name}"),
        None => name.to_owned(),
    };
    let mut out = base.clone();
    let mut n = 1;
    while taken.contains_key(&out) {
        out = format!("{base}{n}");
        n += 1;
    }
    out
}

/// The final names of `all` (each candidate's index by its final name) and the conflicts.
pub fn resolve(all: &[Candidate]) -> (BTreeMap<String, usize>, Vec<CommandConflict>) {
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut first: HashMap<String, usize> = HashMap::new();
    let mut conflicts: Vec<CommandConflict> = Vec::new();
    let note = |conflicts: &mut Vec<CommandConflict>,
                name: &str,
                loser: usize,
                to: &str,
                winner: usize| {
        conflicts.push(CommandConflict {
            name: name.to_owned(),
            renamed_to: to.to_owned(),
            loser_kind: all[loser].kind,
            winner_kind: all[winner].kind,
        });
    };
    for (i, c) in all.iter().enumerate() {
        let final_name = if c.kind == CommandKind::Skill && c.extension.is_some() {
            renamed(&c.name, c, &names)
        } else if first.contains_key(&c.name) {
            // The one holding the name now, unless it is built in, is renamed too.
            let holder = names.get(&c.name).copied();
            let mine = if c.kind == CommandKind::BuiltIn {
                c.name.clone()
            } else {
                let to = renamed(&c.name, c, &names);
                if let Some(h) = holder {
                    note(&mut conflicts, &c.name, i, &to, h);
                }
                to
            };
            if let Some(h) = holder
                && all[h].kind != CommandKind::BuiltIn
            {
                // Named while it still holds the name, as Gemini CLI does (a skill of no
                // extension, which has no prefix, becomes `name1`).
                let to = renamed(&all[h].name, &all[h], &names);
                names.remove(&c.name);
                names.insert(to.clone(), h);
                note(&mut conflicts, &c.name, h, &to, i);
            }
            mine
        } else {
            first.insert(c.name.clone(), i);
            c.name.clone()
        };
        if let Some(displaced) = names.insert(final_name.clone(), i) {
            // A name taken by a rename before, claimed now as a command's own: Gemini CLI's
            // map drops the renamed command; here it keeps a numbered name.
            let to = renamed(&all[displaced].name, &all[displaced], &names);
            names.insert(to.clone(), displaced);
            note(&mut conflicts, &final_name, displaced, &to, i);
        }
    }
    (names, conflicts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, kind: CommandKind, ext: Option<&str>, server: Option<&str>) -> Candidate {
        Candidate {
            name: name.into(),
            kind,
            extension: ext.map(Into::into),
            server: server.map(Into::into),
        }
    }

    fn finals(all: &[Candidate]) -> Vec<(String, usize)> {
        resolve(all).0.into_iter().collect()
    }

    /// Gemini CLI's SlashCommandResolver cases as data.
    #[test]
    fn gemini_cli_resolver_cases() {
        use CommandKind::*;
        // Unique names stay.
        assert_eq!(
            finals(&[c("a", BuiltIn, None, None), c("b", UserFile, None, None)]),
            [("a".into(), 0), ("b".into(), 1)]
        );
        // A built-in keeps its name; the file command is renamed.
        assert_eq!(
            finals(&[c("help", BuiltIn, None, None), c("help", UserFile, None, None)]),
            [("help".into(), 0), ("user.help".into(), 1)]
        );
        // User and workspace files: both renamed.
        assert_eq!(
            finals(&[c("deploy", UserFile, None, None), c("deploy", WorkspaceFile, None, None)]),
            [("user.deploy".into(), 0), ("workspace.deploy".into(), 1)]
        );
        // An extension's command and an MCP prompt.
        assert_eq!(
            finals(&[
                c("x", McpPrompt, None, Some("srv")),
                c("x", ExtensionFile, Some("ext"), None)
            ]),
            [("ext:x".into(), 1), ("srv.x".into(), 0)]
        );
        // An extension's skill is always prefixed, and takes a number when that is taken.
        assert_eq!(
            finals(&[c("ext:s", UserFile, None, None), c("s", Skill, Some("ext"), None)]),
            [("ext:s".into(), 0), ("ext:s1".into(), 1)]
        );
        // A skill of no extension has no prefix: it takes a number.
        assert_eq!(
            finals(&[c("review", Skill, None, None), c("review", UserFile, None, None)]),
            [("review1".into(), 0), ("user.review".into(), 1)]
        );
        // Three claimants.
        assert_eq!(
            finals(&[
                c("t", UserFile, None, None),
                c("t", WorkspaceFile, None, None),
                c("t", ExtensionFile, Some("e"), None),
            ]),
            [("e:t".into(), 2), ("user.t".into(), 0), ("workspace.t".into(), 1)]
        );
        // A rename's number when the prefixed name is taken (Gemini CLI's `gcp:deploy1`).
        assert_eq!(
            finals(&[
                c("deploy", UserFile, None, None),
                c("gcp:deploy", UserFile, None, None),
                c("deploy", ExtensionFile, Some("gcp"), None),
            ]),
            [("gcp:deploy".into(), 1), ("gcp:deploy1".into(), 2), ("user.deploy".into(), 0)]
        );
        // Three MCP prompts: all three prefixed by their servers.
        assert_eq!(
            finals(&[
                c("t", McpPrompt, None, Some("s1")),
                c("t", McpPrompt, None, Some("s2")),
                c("t", McpPrompt, None, Some("s3")),
            ]),
            [("s1.t".into(), 0), ("s2.t".into(), 1), ("s3.t".into(), 2)]
        );
        // A later command whose own name is a rename given before: Gemini CLI's map loses the
        // renamed one (`a.greet` is `c`'s alone there); it keeps a number here.
        assert_eq!(
            finals(&[
                c("greet", McpPrompt, None, Some("a")),
                c("greet", McpPrompt, None, Some("b")),
                c("a.greet", McpPrompt, None, Some("c")),
            ]),
            [("a.greet".into(), 2), ("a.greet1".into(), 0), ("b.greet".into(), 1)]
        );
    }
}
