//! Each session's effective configuration, as the services that need it read it: the seats
//! (policy, hooks), the catalog's starter and the core itself. Computed from Gemini CLI's files
//! ([`Loader`]), the session's record (its workspace, the servers it disabled), its client's
//! environment (else the daemon's own) and the installed extensions. What each known session
//! was last told is kept beside it (the baselines a reload diffs against).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::config::env::Env;
use crate::config::{ConfigPaths, Effective, Loader};
use crate::extensions::Extensions;
use crate::secrets::Secret;
use crate::session::{SessionError, Sessions};

/// Sessions' effective configurations.
#[derive(Debug)]
pub(crate) struct Configs {
    loader: Loader,
    sessions: Arc<Sessions>,
    extensions: Arc<Extensions>,
    /// The daemon's own environment, for sessions whose client sent none (it may hold the
    /// user's tokens).
    daemon_env: Secret<Arc<Env>>,
    /// Each known session's configuration as of the last reload: what changes are diffed
    /// against. Only a reload moves it forward, so no change goes unannounced.
    baselines: parking_lot::Mutex<HashMap<String, Effective>>,
    /// Woken when the set of files to watch may have changed (a new session).
    watch_changed: tokio::sync::Notify,
}

impl Configs {
    /// Over these files, sessions and extensions; `daemon_env` is the daemon's environment.
    pub(crate) fn new(
        loader: Loader,
        sessions: Arc<Sessions>,
        extensions: Arc<Extensions>,
        daemon_env: Env,
    ) -> Self {
        Self {
            loader,
            sessions,
            extensions,
            daemon_env: Secret::new(Arc::new(daemon_env)),
            baselines: parking_lot::Mutex::default(),
            watch_changed: tokio::sync::Notify::new(),
        }
    }

    /// Gemini CLI's files.
    pub(crate) fn loader(&self) -> &Loader {
        &self.loader
    }

    /// Where they are.
    pub(crate) fn paths(&self) -> &ConfigPaths {
        self.loader.paths()
    }

    /// The daemon's own environment.
    pub(crate) fn daemon_env(&self) -> &Arc<Env> {
        self.daemon_env.expose()
    }

    /// The environment a session's configuration expands against: its client's, else the
    /// daemon's own.
    pub(crate) fn session_env(&self, session: &str) -> Arc<Env> {
        self.sessions.client_env(session).unwrap_or_else(|| self.daemon_env.expose().clone())
    }

    /// A session's configuration read now, without making it known.
    pub(crate) fn compute(&self, session: &str) -> Result<Effective, SessionError> {
        let rec = self.sessions.record(session)?;
        let disabled = rec.state.disabled_servers.iter().cloned().collect();
        let env = self.session_env(session);
        let extensions = self.extensions.current();
        let mut e =
            self.loader.effective_with(Path::new(&rec.workspace), &env, &disabled, &*extensions);
        e.upstream = rec.state.upstream;
        Ok(e)
    }

    /// The known sessions' configurations as of the last reload.
    pub(crate) fn baselines(&self) -> parking_lot::MutexGuard<'_, HashMap<String, Effective>> {
        self.baselines.lock()
    }

    /// A session's configuration as it was last told (read now if it is not known yet),
    /// without making it known: what a listing shows without starting anything.
    pub(crate) fn last_told(&self, session: &str) -> Result<Effective, SessionError> {
        let known = self.baselines().get(session).cloned();
        match known {
            Some(c) => Ok(c),
            None => self.compute(session),
        }
    }

    /// A session's effective configuration, read now. The first read makes the session
    /// known: its files are watched and later changes are announced.
    pub(crate) fn effective(&self, session: &str) -> Result<Effective, SessionError> {
        let e = self.compute(session)?;
        let mut known = self.baselines();
        if !known.contains_key(session) {
            known.insert(session.to_owned(), e.clone());
            self.watch_changed.notify_one();
        }
        Ok(e)
    }

    /// Make a session known (watched, its changes announced) if it is not already.
    pub(crate) fn track(&self, session: &str) {
        if !self.baselines().contains_key(session) {
            let _ = self.effective(session);
        }
    }

    /// Woken when the set of files to watch may have changed.
    pub(crate) fn watch_changed(&self) -> &tokio::sync::Notify {
        &self.watch_changed
    }
}
