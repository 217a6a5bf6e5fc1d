//! Sessions: one agent front-end's view of the daemon (a workspace, its session-scoped state and
//! the connections attached to it).
//!
//! The persistent part lives in the [`Store`]; which connections are attached and the client's
//! environment are runtime state, held here in memory only. Mutations are serialized by one
//! async lock so that "get or create the default session" and close never race.

use parking_lot::{Mutex, MutexGuard};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use geminid_protocol::common::{ClientEnv, SessionId};
use geminid_protocol::event::EventBody;
use geminid_protocol::session::{
    EnvSource, SESSION_LIST_MAX_PAGE, Session, SessionCreateParams, SessionListParams,
    SessionListResult, SessionState,
};

use crate::clock;
use crate::events::EventBus;
use crate::secrets::Secret;
use crate::store::{SessionRecord, Store, StoreError};

/// Identifies one client connection (assigned by the accept loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// Session errors.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// No such session.
    #[error("no session with id {0:?}; `gemctl session list` shows the sessions that exist")]
    NotFound(SessionId),
    /// The workspace is unusable.
    #[error("workspace {path:?} {reason}")]
    InvalidWorkspace {
        /// The path given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A derived session cannot be made so.
    #[error("{0}")]
    InvalidDerive(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Default)]
struct Runtime {
    /// Connections open now. A call can finish after its connection closed; such a
    /// connection must not be attached, or the session would stay attached forever.
    live: HashSet<ConnId>,
    /// Sessions in the store, kept here so `daemon/status` does not scan the database.
    total: usize,
    attached: HashMap<SessionId, HashSet<ConnId>>,
    by_conn: HashMap<ConnId, HashSet<SessionId>>,
    /// Each session's client environment (it holds the user's tokens).
    envs: HashMap<SessionId, HeldEnv>,
    /// The environment the last `gemctl` command or editor gave (not an MCP client's): the
    /// user's shell, as near as the daemon knows it.
    user_env: Option<HeldEnv>,
}

/// A client's environment held for a session, and where it came from.
#[derive(Debug, Clone)]
struct HeldEnv {
    env: Secret<Arc<ClientEnv>>,
    since_ms: u64,
    /// Given by `gemctl mcp serve` for an MCP client (`envIfUnset`).
    from_mcp_client: bool,
}

impl HeldEnv {
    fn new(env: ClientEnv, from_mcp_client: bool) -> Self {
        Self { env: Secret::new(Arc::new(env)), since_ms: clock::now_ms(), from_mcp_client }
    }
}

impl Runtime {
    /// Hold `env` for session `id`. An MCP client's (`from_mcp_client`: `gemctl mcp serve`,
    /// which MCP clients start with a trimmed environment; Gemini CLI removes every variable
    /// named like a token) is completed from the user's last known one: the user's values,
    /// plus the variables only the client sets (issue 63, C5: a workspace an MCP client
    /// reached first ran its servers without the shell's tokens).
    fn give_env(&mut self, id: &str, env: ClientEnv, from_mcp_client: bool) {
        let held = if !from_mcp_client {
            let held = HeldEnv::new(env, false);
            self.user_env = Some(held.clone());
            held
        } else if let Some(user) = &self.user_env {
            let mut completed = (**user.env.expose()).clone();
            // Where the client is (PWD, OLDPWD...) is the client's, not the last shell's.
            completed.retain(|k, _| !crate::config::env::VOLATILE_ENV.contains(&k.as_str()));
            for (k, v) in env {
                completed.entry(k).or_insert(v);
            }
            HeldEnv::new(completed, true)
        } else {
            HeldEnv::new(env, true)
        };
        self.envs.insert(id.to_owned(), held);
    }
}

impl Runtime {
    fn attach(&mut self, id: &str, conn: ConnId) {
        if !self.live.contains(&conn) {
            return;
        }
        self.attached.entry(id.to_owned()).or_default().insert(conn);
        self.by_conn.entry(conn).or_default().insert(id.to_owned());
    }

    /// Returns whether `conn` was attached.
    fn detach(&mut self, id: &str, conn: ConnId) -> bool {
        let was = self.attached.get_mut(id).is_some_and(|c| c.remove(&conn));
        if self.attached.get(id).is_some_and(HashSet::is_empty) {
            self.attached.remove(id);
        }
        if let Some(s) = self.by_conn.get_mut(&conn) {
            s.remove(id);
            if s.is_empty() {
                self.by_conn.remove(&conn);
            }
        }
        was
    }

    fn attached_count(&self, id: &str) -> u32 {
        self.attached.get(id).map_or(0, |c| u32::try_from(c.len()).unwrap_or(u32::MAX))
    }
}

/// The session registry.
#[derive(Debug)]
pub(crate) struct Sessions {
    store: Store,
    events: Arc<EventBus>,
    runtime: Mutex<Runtime>,
    write: tokio::sync::Mutex<()>,
}

impl Sessions {
    /// A registry over `store`, announcing changes on `events`.
    pub(crate) fn new(store: Store, events: Arc<EventBus>) -> Self {
        let runtime = Runtime { total: store.session_count(), ..Runtime::default() };
        Self { store, events, runtime: Mutex::new(runtime), write: tokio::sync::Mutex::new(()) }
    }

    fn runtime(&self) -> MutexGuard<'_, Runtime> {
        // A panic while holding this lock cannot leave the maps half-updated in a way that
        // matters more than stopping the daemon would, so keep serving.
        self.runtime.lock()
    }

    fn view(&self, rec: SessionRecord) -> Session {
        let rt = self.runtime();
        let held = rt.envs.get(&rec.id);
        let env_source = if held.is_some() { EnvSource::Client } else { EnvSource::Daemon };
        let env_keys = held.map(|h| h.env.expose().keys().cloned().collect()).unwrap_or_default();
        Session {
            attached_connections: rt.attached_count(&rec.id),
            id: rec.id,
            workspace: rec.workspace,
            is_default: rec.is_default,
            created_at: clock::rfc3339(rec.created_ms),
            last_seen_at: clock::rfc3339(rec.last_seen_ms),
            env_source,
            env_keys,
            env_since: held.map(|h| clock::rfc3339(h.since_ms)),
            env_from_mcp_client: held.is_some_and(|h| h.from_mcp_client),
            listening: None,
            state: rec.state,
        }
    }

    /// A session's stored record.
    pub(crate) fn record(&self, id: &str) -> Result<SessionRecord, SessionError> {
        self.store.session(id)?.ok_or_else(|| SessionError::NotFound(id.to_owned()))
    }

    async fn persist(&self, rec: &SessionRecord) -> Result<(), SessionError> {
        self.store.put_session(rec)?;
        self.store.flush().await?;
        Ok(())
    }

    /// Create a session (or reuse the workspace's default one) and attach `conn` to it.
    pub(crate) async fn create(
        &self,
        conn: ConnId,
        params: SessionCreateParams,
    ) -> Result<Session, SessionError> {
        let workspace = canonical_workspace(&params.workspace)?;
        let w = self.write.lock().await;
        // Clients that declare less have a default session of their own kind.
        let upstream = params.upstream.filter(|d| !d.is_all());
        let existing = match params.reuse_default {
            true => match self.store.default_session(&workspace, upstream)? {
                Some(id) => self.store.session(&id)?,
                None => None,
            },
            false => None,
        };
        let now = clock::now_ms();
        let (mut rec, created) = match existing {
            Some(rec) => (rec, false),
            None => {
                let state = SessionState {
                    approval_mode: params.approval_mode.unwrap_or_default(),
                    interactive: params.interactive,
                    upstream,
                    ..SessionState::default()
                };
                let rec = SessionRecord {
                    id: uuid::Uuid::now_v7().to_string(),
                    workspace,
                    is_default: params.reuse_default,
                    created_ms: now,
                    last_seen_ms: now,
                    state,
                };
                (rec, true)
            }
        };
        rec.last_seen_ms = now;
        self.store.put_session(&rec)?;
        {
            let mut rt = self.runtime();
            rt.total += usize::from(created);
            rt.attach(&rec.id, conn);
            if let Some(env) = params.env
                && !(params.env_if_unset && rt.envs.contains_key(&rec.id))
            {
                rt.give_env(&rec.id, env, params.env_if_unset);
            }
        }
        // Made durable before the answer, but outside the lock: sessions created or attached
        // at once share their flushes instead of queueing one fsync each behind it.
        drop(w);
        self.store.flush().await?;
        let session = self.view(rec);
        // Every gemctl command attaches its directory's session: only a new one is worth a line
        // at the default level (the log grew by a pair per command, audit M4).
        if created {
            tracing::info!(session = %session.id, workspace = %session.workspace, "session created");
        } else {
            tracing::debug!(session = %session.id, workspace = %session.workspace, "session attached");
        }
        self.events.emit(match created {
            true => EventBody::SessionCreated(session.clone()),
            false => EventBody::SessionAttached(session.clone()),
        });
        Ok(session)
    }

    /// One session.
    pub(crate) fn get(&self, id: &str) -> Result<Session, SessionError> {
        Ok(self.view(self.record(id)?))
    }

    /// A page of sessions, oldest first.
    pub(crate) fn list(
        &self,
        params: SessionListParams,
    ) -> Result<SessionListResult, SessionError> {
        let limit = params.limit.unwrap_or(SESSION_LIST_MAX_PAGE).clamp(1, SESSION_LIST_MAX_PAGE);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let workspace = params.workspace.map(|w| canonical_workspace(&w).unwrap_or(w));
        let mut sessions = Vec::new();
        let mut next_cursor = None;
        for rec in self.store.sessions_after(params.cursor.as_deref()) {
            let rec = rec?;
            if workspace.as_ref().is_some_and(|w| *w != rec.workspace) {
                continue;
            }
            if sessions.len() == limit {
                next_cursor = sessions.last().map(|s: &Session| s.id.clone());
                break;
            }
            sessions.push(self.view(rec));
        }
        Ok(SessionListResult { sessions, next_cursor })
    }

    /// Attach `conn` to an existing session, replacing its environment if one is given.
    pub(crate) async fn attach(
        &self,
        conn: ConnId,
        id: &str,
        env: Option<ClientEnv>,
    ) -> Result<Session, SessionError> {
        let w = self.write.lock().await;
        let mut rec = self.record(id)?;
        rec.last_seen_ms = clock::now_ms();
        self.store.put_session(&rec)?;
        {
            let mut rt = self.runtime();
            rt.attach(id, conn);
            if let Some(env) = env {
                rt.give_env(id, env, false);
            }
        }
        drop(w);
        self.store.flush().await?;
        let session = self.view(rec);
        tracing::debug!(session = %id, conn = conn.0, "session attached");
        self.events.emit(EventBody::SessionAttached(session.clone()));
        Ok(session)
    }

    /// Detach `conn` from a session. Detaching a connection that is not attached is not an
    /// error (the result shows the count), but the session must exist.
    pub(crate) async fn detach(&self, conn: ConnId, id: &str) -> Result<Session, SessionError> {
        let w = self.write.lock().await;
        let mut rec = self.record(id)?;
        let was_attached = self.runtime().detach(id, conn);
        if was_attached {
            rec.last_seen_ms = clock::now_ms();
            self.store.put_session(&rec)?;
            drop(w);
            self.store.flush().await?;
        }
        let session = self.view(rec);
        if was_attached {
            tracing::debug!(session = %id, conn = conn.0, "session detached");
            self.events.emit(EventBody::SessionDetached(session.clone()));
        }
        Ok(session)
    }

    /// Default sessions nobody has used for `max_idle` and that hold nothing of their own
    /// (no session-only disables, approvals or skills): `gemctl` makes one per directory it is
    /// ever run in, and `session/create` with `reuseDefault` makes it again on next use.
    pub(crate) fn idle_defaults(
        &self,
        max_idle: std::time::Duration,
    ) -> Result<Vec<SessionId>, SessionError> {
        let now = clock::now_ms();
        let max = u64::try_from(max_idle.as_millis()).unwrap_or(u64::MAX);
        let mut out = Vec::new();
        for rec in self.store.sessions_after(None) {
            let rec = rec?;
            let idle = now.saturating_sub(rec.last_seen_ms) >= max;
            let attached = self.runtime().attached.get(&rec.id).is_some_and(|c| !c.is_empty());
            if rec.is_default && idle && !attached && rec.state == SessionState::default() {
                out.push(rec.id);
            }
        }
        Ok(out)
    }

    /// Close a session: detach every connection and delete it.
    pub(crate) async fn close(&self, id: &str) -> Result<Session, SessionError> {
        let _w = self.write.lock().await;
        let rec = self.record(id)?;
        self.store.delete_session(&rec)?;
        self.store.flush().await?;
        let mut session = self.view(rec);
        {
            let mut rt = self.runtime();
            for conn in rt.attached.remove(id).unwrap_or_default() {
                if let Some(s) = rt.by_conn.get_mut(&conn) {
                    s.remove(id);
                }
            }
            rt.envs.remove(id);
            rt.total = rt.total.saturating_sub(1);
        }
        session.attached_connections = 0;
        tracing::info!(session = %id, "session closed");
        self.events.emit(EventBody::SessionClosed(session.clone()));
        Ok(session)
    }

    /// Change a session's stored state; `change` may refuse. Returns the session as it is
    /// now.
    pub(crate) async fn update_state<E>(
        &self,
        id: &str,
        change: impl FnOnce(&mut SessionState) -> Result<(), E>,
    ) -> Result<Result<Session, E>, SessionError> {
        let _w = self.write.lock().await;
        let mut rec = self.record(id)?;
        if let Err(e) = change(&mut rec.state) {
            return Ok(Err(e));
        }
        self.persist(&rec).await?;
        Ok(Ok(self.view(rec)))
    }

    /// A subagent's session under `parent`: the same workspace and client environment, the
    /// parent's approval mode and interactivity, its place in `state.derived`. Not attached
    /// to any connection: its confirmations go to the root's clients.
    pub(crate) async fn derive(
        &self,
        parent: &str,
        name: &str,
        tools: Option<Vec<String>>,
    ) -> Result<Session, SessionError> {
        let bad = |reason: String| SessionError::InvalidDerive(reason);
        if name.is_empty()
            || name.len() > 64
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(bad(format!(
                "a subagent's name is 1 to 64 letters, digits, '_', '-' or '.', not {name:?}"
            )));
        }
        let _w = self.write.lock().await;
        let up = self.record(parent)?;
        let (root, path) = match &up.state.derived {
            Some(d) => (d.root.clone(), format!("{}/{name}", d.path)),
            None => (up.id.clone(), format!("{}/{name}", up.id)),
        };
        let now = clock::now_ms();
        let state = SessionState {
            approval_mode: up.state.approval_mode,
            interactive: up.state.interactive,
            upstream: up.state.upstream,
            derived: Some(geminid_protocol::session::Derived {
                parent: parent.to_owned(),
                root,
                name: name.to_owned(),
                path,
                tools,
            }),
            ..SessionState::default()
        };
        let rec = SessionRecord {
            id: uuid::Uuid::now_v7().to_string(),
            workspace: up.workspace.clone(),
            is_default: false,
            created_ms: now,
            last_seen_ms: now,
            state,
        };
        self.persist(&rec).await?;
        {
            let mut rt = self.runtime();
            rt.total += 1;
            if let Some(env) = rt.envs.get(parent).cloned() {
                rt.envs.insert(rec.id.clone(), env);
            }
        }
        let session = self.view(rec);
        tracing::info!(session = %session.id, parent, name, "session derived");
        self.events.emit(EventBody::SessionCreated(session.clone()));
        Ok(session)
    }

    /// The sessions derived directly from `parent`.
    pub(crate) fn children(&self, parent: &str) -> Result<Vec<SessionId>, SessionError> {
        let mut out = Vec::new();
        for rec in self.store.sessions_after(None) {
            let rec = rec?;
            if rec.state.derived.as_ref().is_some_and(|d| d.parent == parent) {
                out.push(rec.id);
            }
        }
        Ok(out)
    }

    /// Disable (or re-enable) a server for one session only; stored with the session, so it
    /// holds for every client of the session and across restarts.
    pub(crate) async fn set_server_disabled(
        &self,
        id: &str,
        name: &str,
        disabled: bool,
    ) -> Result<(), SessionError> {
        let _w = self.write.lock().await;
        let mut rec = self.record(id)?;
        let key = crate::config::enablement::normalize(name);
        let list = &mut rec.state.disabled_servers;
        list.retain(|n| crate::config::enablement::normalize(n) != key);
        if disabled {
            list.push(key);
            list.sort();
        }
        self.persist(&rec).await
    }

    /// A connection opened: it may attach sessions until [`Sessions::connection_closed`].
    pub(crate) fn connection_opened(&self, conn: ConnId) {
        self.runtime().live.insert(conn);
    }

    /// A connection went away: detach it from everything it was attached to. Returns the
    /// sessions left with no connection.
    pub(crate) async fn connection_closed(&self, conn: ConnId) -> Vec<SessionId> {
        let ids: Vec<SessionId> = {
            let mut rt = self.runtime();
            rt.live.remove(&conn);
            rt.by_conn.get(&conn).map(|s| s.iter().cloned().collect()).unwrap_or_default()
        };
        let mut unattached = Vec::new();
        for id in ids {
            match self.detach(conn, &id).await {
                Ok(s) if s.attached_connections == 0 => unattached.push(id),
                Ok(_) | Err(SessionError::NotFound(_)) => {}
                Err(e) => tracing::warn!(session = %id, error = %e, "detach on disconnect failed"),
            }
        }
        unattached
    }

    /// Whether the connection is attached to the session.
    pub(crate) fn is_attached(&self, conn: ConnId, id: &str) -> bool {
        self.runtime().attached.get(id).is_some_and(|c| c.contains(&conn))
    }

    /// The environment a session's servers inherit: the client's if one was sent, else `None`
    /// (meaning the daemon's own).
    pub(crate) fn client_env(&self, id: &str) -> Option<Arc<ClientEnv>> {
        self.runtime().envs.get(id).map(|e| e.env.expose().clone())
    }

    /// (total sessions, sessions with at least one connection attached).
    pub(crate) fn counts(&self) -> (usize, usize) {
        let rt = self.runtime();
        (rt.total, rt.attached.len())
    }
}

/// The canonical absolute path of an existing workspace directory.
fn canonical_workspace(raw: &str) -> Result<String, SessionError> {
    let invalid = |reason: &str| SessionError::InvalidWorkspace {
        path: raw.to_owned(),
        reason: reason.to_owned(),
    };
    let path = Path::new(raw);
    if !path.is_absolute() {
        return Err(invalid("must be an absolute path"));
    }
    let canonical = std::fs::canonicalize(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => invalid("does not exist"),
        _ => invalid(&format!("cannot be resolved: {e}")),
    })?;
    if !canonical.is_dir() {
        return Err(invalid("is not a directory"));
    }
    canonical.into_os_string().into_string().map_err(|_| invalid("is not valid UTF-8"))
}

#[cfg(test)]
mod tests;
