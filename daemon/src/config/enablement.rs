//! Which configured MCP servers may start (COMPAT §1.6): admin switch, allowlist, excludelist,
//! session disable, then `mcp-server-enablement.json`. Names compare lower-cased and trimmed.

use std::collections::BTreeSet;

use geminid_protocol::config::BlockReason;

/// Normalize a server name for enablement lookups.
pub(crate) fn normalize(name: &str) -> String {
    name.trim().to_lowercase()
}

/// Names the contents of `mcp-server-enablement.json` disable (normalized). The file is read
/// by the loader, which keeps its last good contents.
pub(crate) fn disabled_in(value: &serde_json::Value) -> BTreeSet<String> {
    value
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.get("enabled").and_then(serde_json::Value::as_bool) == Some(false))
        .map(|(k, _)| normalize(k))
        .collect()
}

/// The inputs that decide enablement.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gate {
    /// `admin.mcp.enabled` (default true).
    pub admin_enabled: bool,
    /// Consolidated `mcp.allowed` (intersection over scopes that set it), normalized.
    pub allowed: Option<BTreeSet<String>>,
    /// Consolidated `mcp.excluded` (all scopes), normalized.
    pub excluded: BTreeSet<String>,
    /// Disabled for the session, normalized.
    pub session: BTreeSet<String>,
    /// Disabled in the enablement file, normalized.
    pub file: BTreeSet<String>,
}

impl Gate {
    /// Why `name` may not start, in the reference's order; `None` if it may.
    pub(crate) fn blocked(&self, name: &str) -> Option<BlockReason> {
        let n = normalize(name);
        if !self.admin_enabled {
            Some(BlockReason::Admin)
        } else if self.allowed.as_ref().is_some_and(|a| !a.contains(&n)) {
            Some(BlockReason::Allowlist)
        } else if self.excluded.contains(&n) {
            Some(BlockReason::Excludelist)
        } else if self.session.contains(&n) {
            Some(BlockReason::Session)
        } else if self.file.contains(&n) {
            Some(BlockReason::Enablement)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::files::{FileRead, read_object};
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| normalize(s)).collect()
    }

    #[test]
    fn order_and_normalization() {
        let gate = Gate {
            admin_enabled: true,
            allowed: Some(set(&["A", "b", "c", "d"])),
            excluded: set(&["b"]),
            session: set(&["C"]),
            file: set(&["d"]),
        };
        assert_eq!(gate.blocked(" a "), None);
        assert_eq!(gate.blocked("b"), Some(BlockReason::Excludelist));
        assert_eq!(gate.blocked("c"), Some(BlockReason::Session));
        assert_eq!(gate.blocked("D"), Some(BlockReason::Enablement));
        assert_eq!(gate.blocked("e"), Some(BlockReason::Allowlist));
        let off = Gate { admin_enabled: false, ..gate };
        assert_eq!(off.blocked("a"), Some(BlockReason::Admin));
    }

    #[test]
    fn reads_the_enablement_file() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let p = dir.path().join("mcp-server-enablement.json");
        std::fs::write(&p, r#"{ "Foo": { "enabled": false }, "bar": { "enabled": true } }"#)?;
        let disabled = |p: &Path| match read_object(p) {
            FileRead::Parsed { value, .. } => disabled_in(&value),
            _ => BTreeSet::new(),
        };
        assert_eq!(disabled(&p), set(&["foo"]));
        assert!(disabled(&dir.path().join("missing.json")).is_empty());
        Ok(())
    }
}
