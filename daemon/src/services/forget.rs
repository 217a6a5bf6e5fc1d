//! What a closed session leaves behind, dropped through one trait: each part that keeps
//! something per session implements [`Forget`], and the core calls every one registered when
//! a session closes (`core/sessions.rs`), in the order it registered them.

use crate::catalog::Catalog;
use crate::mcp::Supervisor;

/// A part that keeps something per session.
pub(crate) trait Forget: Send + Sync + std::fmt::Debug {
    /// The session closed: drop what is kept for it.
    fn forget(&self, session: &str);
}

/// The configuration's baseline for the session (a reload no longer reads it).
impl Forget for super::configs::Configs {
    fn forget(&self, session: &str) {
        self.baselines().remove(session);
    }
}

/// The session's servers: each one nobody else uses may go (after the linger).
impl Forget for Supervisor {
    fn forget(&self, session: &str) {
        self.lifecycle().release_session(session);
    }
}

/// The session's tool table and custom tools.
impl Forget for Catalog {
    fn forget(&self, session: &str) {
        Catalog::forget(self, session);
    }
}
