//! What the catalog needs of the core ([`Starter`]): a session's servers started, and what its
//! custom tools come from, both read from its configuration.

use super::Core;
use crate::catalog::Starter;
use crate::discovered::Spec;
use crate::session::SessionError;

impl Starter for Core {
    fn ensure_servers(&self, session: &str) -> Result<(), SessionError> {
        self.start_servers(session)
    }

    fn discovery_spec(&self, session: &str) -> Option<Spec> {
        let (discovery, call, workspace) = {
            let known = self.baselines();
            let c = &known.get(session)?.public;
            let text = |key: &str| {
                c.settings.pointer(key).and_then(serde_json::Value::as_str).map(str::to_owned)
            };
            // An empty command is none (Gemini CLI's `if (!discoveryCmd)`).
            let discovery = text("/tools/discoveryCommand").filter(|d| !d.is_empty())?;
            (discovery, text("/tools/callCommand"), c.workspace.clone())
        };
        let env = self.session_env(session);
        Some(Spec { discovery, call, cwd: workspace.into(), env })
    }
}
