//! "Always allow": the rule Gemini CLI saves for it, in `~/.gemini/policies/auto-saved.toml`
//! (user tier, priority 950: `{decision = "allow", priority = 950, toolName, mcpName}` with the
//! tool's own name and its server). The file is edited in place, its other content kept; one
//! that does not parse as TOML is refused and left as it is.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, value};

use crate::config::ConfigPaths;
use crate::config::write::{WriteError, atomic_write, read_text};

/// The priority of a saved rule.
pub(crate) const PRIORITY: i64 = 950;

/// Where the rules are saved.
pub(crate) fn path(paths: &ConfigPaths) -> PathBuf {
    paths.home.join(".gemini").join("policies").join("auto-saved.toml")
}

/// Why a rule could not be saved; the file is left as it was.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SaveError {
    /// It could not be read or written.
    #[error(transparent)]
    File(#[from] WriteError),
    /// It is not TOML.
    #[error(
        "{}{at}: not valid TOML ({message}); it is left as it is: fix or delete it to save approvals",
        path.display()
    )]
    NotToml {
        /// The file.
        path: PathBuf,
        /// Where (`:line:column`), when the parser says.
        at: String,
        /// What the parser said.
        message: String,
    },
    /// Its `rule` is something else than an array of tables.
    #[error("{}: `rule` is not an array of tables ([[rule]]); it is left as it is", .0.display())]
    NotRules(PathBuf),
}

fn read(path: &Path) -> Result<DocumentMut, SaveError> {
    let text = read_text(path)?;
    text.parse::<DocumentMut>().map_err(|e| {
        let at = e.span().map(|s| {
            let before = &text[..s.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!(":{line}:{column}")
        });
        SaveError::NotToml {
            path: path.to_owned(),
            at: at.unwrap_or_default(),
            message: e.message().to_owned(),
        }
    })
}

/// Whether a rule could be saved now (the file is absent or valid TOML).
pub(crate) fn check(path: &Path) -> Result<(), SaveError> {
    read(path).map(drop)
}

/// Save an allow rule for `tool` (a server's own name for it, with `server`; or a built-in's
/// name): `Ok(false)` when the file has that rule already.
pub(crate) fn save(path: &Path, tool: &str, server: Option<&str>) -> Result<bool, SaveError> {
    let mut doc = read(path)?;
    let rules = doc.entry("rule").or_insert(Item::ArrayOfTables(Default::default()));
    let Some(rules) = rules.as_array_of_tables_mut() else {
        return Err(SaveError::NotRules(path.to_owned()));
    };
    let same = |t: &Table| {
        t.get("toolName").and_then(Item::as_str) == Some(tool)
            && t.get("mcpName").and_then(Item::as_str) == server
            && t.get("decision").and_then(Item::as_str) == Some("allow")
            && t.get("argsPattern").is_none()
            && t.get("commandPrefix").is_none()
    };
    if rules.iter().any(same) {
        return Ok(false);
    }
    let mut rule = Table::new();
    rule.insert("toolName", value(tool));
    if let Some(server) = server {
        rule.insert("mcpName", value(server));
    }
    rule.insert("decision", value("allow"));
    rule.insert("priority", value(PRIORITY));
    rules.push(rule);
    atomic_write(path, &doc.to_string(), None)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Tier;
    use crate::policy::load::load;

    #[test]
    fn a_saved_rule_keeps_the_file_and_loads_at_950_in_the_user_tier() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policies/auto-saved.toml");
        assert!(save(&file, "search", Some("docs")).unwrap(), "a new file");
        assert!(!save(&file, "search", Some("docs")).unwrap(), "saved once");
        let mine = "# mine\n[[rule]]\ntoolName = \"x\" # keep\ndecision = \"deny\"\npriority = 1\n";
        std::fs::write(&file, format!("{mine}\n{}", std::fs::read_to_string(&file).unwrap()))
            .unwrap();
        assert!(save(&file, "read_file", None).unwrap());
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with(mine), "{text}");
        let loaded = load("auto-saved.toml", &text, Tier::User);
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        let got: Vec<_> = loaded
            .rules
            .iter()
            .map(|r| {
                (
                    r.tool_name.as_str(),
                    r.mcp_name.as_deref(),
                    r.origin.priority,
                    r.effective_priority(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("x", None, 1, 4.001),
                ("mcp_docs_search", Some("docs"), 950, 4.95),
                ("read_file", None, 950, 4.95)
            ]
        );
    }

    #[test]
    fn a_file_that_is_not_toml_or_not_a_file_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auto-saved.toml");
        std::fs::write(&file, "[[rule]\ntoolName = ").unwrap();
        let err = save(&file, "search", Some("docs")).unwrap_err();
        assert!(matches!(err, SaveError::NotToml { .. }), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("auto-saved.toml:1:") && err.contains("left as it is"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "[[rule]\ntoolName = ");
        assert!(check(&file).is_err());
        std::fs::write(&file, "rule = 3\n").unwrap();
        let err = save(&file, "search", None).unwrap_err();
        assert!(matches!(err, SaveError::NotRules(_)), "{err:?}");
        assert!(err.to_string().contains("not an array of tables"), "{err}");
        let dir_file = dir.path().join("dir.toml");
        std::fs::create_dir(&dir_file).unwrap();
        let err = save(&dir_file, "search", None).unwrap_err();
        assert!(matches!(err, SaveError::File(_)), "{err:?}");
        assert!(dir_file.is_dir());
    }
}
