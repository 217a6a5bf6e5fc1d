//! What changed between two effective configurations of one session, as the MCP supervisor
//! will need it: which servers to start, stop or restart, and which became (un)blocked.

use geminid_protocol::config::Severity;
use geminid_protocol::event::ConfigChanged;

use super::Effective;

/// The change from `old` to `new`, or `None` if nothing a client can observe changed.
pub(crate) fn diff(
    session: &str,
    reason: &str,
    old: &Effective,
    new: &Effective,
) -> Option<ConfigChanged> {
    let mut c = ConfigChanged {
        session: session.to_owned(),
        reason: reason.to_owned(),
        ..Default::default()
    };
    for (name, spec) in &new.servers {
        match old.servers.get(name) {
            None => c.servers_added.push(name.clone()),
            Some(o) if o.config != spec.config || o.scope != spec.scope => {
                c.servers_changed.push(name.clone())
            }
            Some(o) if o.blocked != spec.blocked => c.enablement_changed.push(name.clone()),
            Some(_) => {}
        }
    }
    c.servers_removed =
        old.servers.keys().filter(|n| !new.servers.contains_key(*n)).cloned().collect();
    c.trust_changed = old.public.trust.trusted != new.public.trust.trusted;
    c.settings_changed = old.public.settings != new.public.settings;
    c.diagnostics_changed = old.public.diagnostics != new.public.diagnostics;
    c.errors =
        new.public.diagnostics.iter().filter(|d| d.severity == Severity::Error).cloned().collect();
    let changed = !c.servers_added.is_empty()
        || !c.servers_removed.is_empty()
        || !c.servers_changed.is_empty()
        || !c.enablement_changed.is_empty()
        || c.trust_changed
        || c.settings_changed
        || c.diagnostics_changed;
    changed.then_some(c)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use geminid_protocol::config::{BlockReason, EffectiveConfig, Scope, TrustInfo};

    use super::*;
    use crate::config::ServerSpec;
    use crate::config::mcp::McpServerConfig;

    fn effective(servers: &[(&str, &str, Option<BlockReason>)]) -> Effective {
        let servers: BTreeMap<_, _> = servers
            .iter()
            .map(|(n, cmd, blocked)| {
                let config =
                    McpServerConfig { command: Some((*cmd).to_owned()), ..Default::default() };
                (
                    (*n).to_owned(),
                    ServerSpec {
                        shown: config.clone(),
                        config,
                        scope: Scope::User,
                        extension: None,
                        blocked: *blocked,
                        unset: vec![],
                    },
                )
            })
            .collect();
        Effective {
            public: EffectiveConfig {
                workspace: "/w".into(),
                trust: TrustInfo { trusted: true, reason: String::new() },
                files: vec![],
                mcp_servers: vec![],
                settings: serde_json::json!({}),
                diagnostics: vec![],
            },
            servers,
            shown_settings: serde_json::json!({}),
            hook_files: vec![],
            extensions: vec![],
            refusing: vec![],
            upstream: None,
        }
    }

    #[test]
    fn classifies_each_server() {
        let old = effective(&[
            ("same", "a", None),
            ("gone", "b", None),
            ("edited", "c", None),
            ("toggled", "d", None),
        ]);
        let new = effective(&[
            ("same", "a", None),
            ("new", "e", None),
            ("edited", "C", None),
            ("toggled", "d", Some(BlockReason::Enablement)),
        ]);
        let c = diff("s", "watch", &old, &new).unwrap_or_default();
        assert_eq!(c.servers_added, ["new"]);
        assert_eq!(c.servers_removed, ["gone"]);
        assert_eq!(c.servers_changed, ["edited"]);
        assert_eq!(c.enablement_changed, ["toggled"]);
        assert!(!c.trust_changed && !c.settings_changed);
        assert_eq!(diff("s", "watch", &old, &old), None);
    }
}
