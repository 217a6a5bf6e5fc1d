//! Folder trust (`trustedFolders.json`, COMPAT §1.5): TRUST_FOLDER, TRUST_PARENT and
//! DO_NOT_TRUST rules, the longest matching rule wins, no match means untrusted. A file that
//! does not parse makes every folder untrusted and is reported, never fatal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) use geminid_protocol::config::TrustLevel;
use geminid_protocol::config::{Diagnostic, TrustInfo};

use super::env::Env;
use super::files::{FileRead, diagnostic, read_object};

/// The rules of `trustedFolders.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TrustRules {
    /// Path as written → level.
    pub rules: BTreeMap<String, TrustLevel>,
}

/// Load the rules; a missing file is no rules, a broken one is no rules plus a diagnostic.
/// (The daemon's reads go through the loader, which keeps a broken file's last good rules.)
pub(crate) fn load(path: &Path) -> (TrustRules, Option<Diagnostic>) {
    match read_object(path) {
        FileRead::Missing => (TrustRules::default(), None),
        FileRead::Failed(d) => (TrustRules::default(), Some(untrusting(d))),
        FileRead::Parsed { value, .. } => match rules_from(value) {
            Ok(rules) => (rules, None),
            Err(message) => {
                let d = diagnostic(geminid_protocol::config::Severity::Error, path, None, message);
                (TrustRules::default(), Some(untrusting(d)))
            }
        },
    }
}

/// The rules a parsed `trustedFolders.json` holds, or why it holds none.
pub(crate) fn rules_from(value: serde_json::Value) -> Result<TrustRules, String> {
    serde_json::from_value(value).map(|rules| TrustRules { rules }).map_err(|e| {
        format!("{e}; values must be \"TRUST_FOLDER\", \"TRUST_PARENT\" or \"DO_NOT_TRUST\"")
    })
}

fn untrusting(mut d: Diagnostic) -> Diagnostic {
    d.message.push_str("; until it is fixed, no folder is trusted");
    d
}

fn normalize(p: &Path) -> PathBuf {
    let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if cfg!(any(windows, target_os = "macos")) {
        PathBuf::from(p.to_string_lossy().to_lowercase())
    } else {
        p
    }
}

/// Whether `location` is trusted. `folder_trust_enabled` is `security.folderTrust.enabled`;
/// `env` is the session's environment, where `GEMINI_RESTRICTED_MODE=true` and
/// `GEMINI_CLI_TRUST_WORKSPACE=false` distrust and `GEMINI_CLI_TRUST_WORKSPACE=true` trusts
/// (Gemini CLI's `checkPathTrust`, in that order).
pub(crate) fn decide(
    rules: &TrustRules,
    location: &Path,
    folder_trust_enabled: bool,
    env: Option<&Env>,
) -> TrustInfo {
    let var = |name: &str| env.and_then(|e| e.get(name)).map(String::as_str);
    if var("GEMINI_RESTRICTED_MODE") == Some("true") {
        return TrustInfo { trusted: false, reason: "GEMINI_RESTRICTED_MODE=true".into() };
    }
    match var("GEMINI_CLI_TRUST_WORKSPACE") {
        Some("true") => {
            return TrustInfo { trusted: true, reason: "GEMINI_CLI_TRUST_WORKSPACE=true".into() };
        }
        Some("false") => {
            return TrustInfo { trusted: false, reason: "GEMINI_CLI_TRUST_WORKSPACE=false".into() };
        }
        _ => {}
    }
    if !folder_trust_enabled {
        return TrustInfo {
            trusted: true,
            reason: "folder trust is disabled (security.folderTrust.enabled)".into(),
        };
    }
    let location = normalize(location);
    let best = rules
        .rules
        .iter()
        .filter(|(rule, level)| {
            let rule = normalize(Path::new(rule));
            let effective = match level {
                TrustLevel::TrustParent => rule.parent().map(Path::to_path_buf).unwrap_or(rule),
                _ => rule,
            };
            location.starts_with(&effective)
        })
        .max_by_key(|(rule, _)| rule.len());
    match best {
        Some((rule, level)) => {
            let name = serde_json::to_value(level)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            TrustInfo {
                trusted: *level != TrustLevel::DoNotTrust,
                reason: format!("rule {rule} ({name})"),
            }
        }
        None => TrustInfo {
            trusted: false,
            reason: "no rule in trustedFolders.json matches; `gemctl trust` trusts it".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(pairs: &[(&Path, TrustLevel)]) -> TrustRules {
        TrustRules { rules: pairs.iter().map(|(p, l)| (p.display().to_string(), *l)).collect() }
    }

    #[test]
    fn longest_rule_wins_and_parent_means_siblings() -> anyhow::Result<()> {
        let root = tempfile::tempdir()?;
        let (a, b, c) = (root.path().join("a"), root.path().join("a/b"), root.path().join("a/b/c"));
        std::fs::create_dir_all(&c)?;
        let sibling = root.path().join("a/sib");
        std::fs::create_dir_all(&sibling)?;
        let r = rules(&[(&a, TrustLevel::TrustFolder), (&b, TrustLevel::DoNotTrust)]);
        assert!(decide(&r, &a, true, None).trusted);
        assert!(!decide(&r, &c, true, None).trusted, "longer DO_NOT_TRUST wins");
        let r = rules(&[(&b, TrustLevel::TrustParent)]);
        assert!(decide(&r, &sibling, true, None).trusted, "TRUST_PARENT trusts the parent's tree");
        assert!(!decide(&r, root.path(), true, None).trusted);
        // No rule, folder trust off, and the environment override.
        let none = TrustRules::default();
        assert!(!decide(&none, &a, true, None).trusted);
        assert!(decide(&none, &a, false, None).trusted);
        let env = |pairs: &[(&str, &str)]| -> Env {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        assert!(
            decide(&none, &a, true, Some(&env(&[("GEMINI_CLI_TRUST_WORKSPACE", "true")]))).trusted
        );
        let all = rules(&[(&a, TrustLevel::TrustFolder)]);
        assert!(
            !decide(&all, &a, true, Some(&env(&[("GEMINI_CLI_TRUST_WORKSPACE", "false")]))).trusted
        );
        // Restricted mode distrusts before the override trusts, and with folder trust off.
        let restricted =
            env(&[("GEMINI_RESTRICTED_MODE", "true"), ("GEMINI_CLI_TRUST_WORKSPACE", "true")]);
        assert!(!decide(&all, &a, false, Some(&restricted)).trusted);
        assert!(decide(&all, &a, true, Some(&env(&[("GEMINI_RESTRICTED_MODE", "1")]))).trusted);
        Ok(())
    }

    #[test]
    fn a_broken_file_trusts_nothing_and_says_so() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("trustedFolders.json");
        std::fs::write(&path, "{ \"/x\": ")?;
        let (r, d) = load(&path);
        assert!(r.rules.is_empty());
        assert!(d.is_some_and(|d| d.message.contains("no folder is trusted")));
        std::fs::write(&path, "{ \"/x\": \"TRUST_EVERYTHING\" }")?;
        let (_, d) = load(&path);
        assert!(d.is_some_and(|d| d.message.contains("TRUST_PARENT")));
        Ok(())
    }
}
