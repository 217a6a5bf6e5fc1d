//! The daemon's core: everything it owns, constructible without a socket.

pub(crate) mod auth;
pub(crate) mod commands;
pub(crate) mod configs;
mod doctor;
pub(crate) mod extensions;
pub(crate) use extensions::ExtensionsError;
pub(crate) mod hooks;
pub(crate) mod policy;
mod prepared;
pub(crate) mod reload;
pub(crate) mod seat;
pub(crate) mod servers;
pub(crate) mod services;
pub(crate) mod settings;
pub(crate) mod skills;
mod starter;
mod warm;
pub(crate) use skills::SkillsError;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use geminid_protocol::daemon::{Limits, SessionCounts, StatusResult};
use geminid_protocol::event::{EventBody, ShuttingDown};
use geminid_protocol::session::Session;
use geminid_protocol::{DAEMON_VERSION, PROTOCOL_VERSION};
use tokio_util::sync::CancellationToken;

use crate::asks::Asks;
use crate::calls::{Parts, Pipeline, Router, Seats, ServerRequests};
use crate::catalog::Catalog;
use crate::clock;
use crate::config::Loader;
use crate::events::EventBus;
use crate::mcp::{McpOptions, Supervisor};
use crate::secrets::SecretStore;
use crate::session::{SessionError, Sessions};
use crate::store::Store;

/// What the daemon reports about itself.
#[derive(Debug, Clone)]
pub struct DaemonInfo {
    /// The control socket.
    pub socket: PathBuf,
    /// The data directory.
    pub data_dir: PathBuf,
    /// Enforced limits.
    pub limits: Limits,
    /// MCP supervision settings.
    pub mcp: McpOptions,
    /// How long a confirmation waits for a person.
    pub confirm_timeout: Duration,
    /// Keep secrets in the file even where an OS keyring answers (`--secrets file`).
    pub secrets_file_only: bool,
    /// Custom tools' deadlines.
    pub custom_tools: crate::discovered::Options,
    /// How many recently used workspaces have their servers started at the next start
    /// (`--mcp-warm-workspaces`; 0: none, and none are remembered).
    pub warm_workspaces: usize,
    /// What a tool definition that differs from its pin meets, for servers whose entry has no
    /// `pinning` (`--tool-pinning`).
    pub tool_pinning: geminid_protocol::pins::PinMode,
}

/// How long in-flight calls get to finish once shutdown begins (then `calls_cut`).
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The daemon's state.
#[derive(Debug)]
pub(crate) struct Core {
    /// The services the edges reach (sessions, events, servers, catalog, asks, the call
    /// pipeline, extensions) and the shutdown token: one set, shared with rpc and the gateway.
    services: Arc<services::Services>,
    /// Each session's effective configuration, from Gemini CLI's files.
    config: Arc<configs::Configs>,
    /// Long-lived secrets (OAuth tokens, the integrity key): the OS keyring or a 0600 file.
    secrets: Arc<SecretStore>,
    /// Skills and agent definitions.
    skills: Arc<skills::Skills>,
    /// Slash commands.
    commands: Arc<commands::Commands>,
    /// Runs reloads over the inputs.
    reloader: Arc<reload::Reloader>,
    /// Extensions installed, updated, enabled and removed.
    extensions: Arc<extensions::ExtensionService>,
    /// Gemini CLI's files read and changed.
    settings: Arc<settings::Settings>,
    /// Sign-ins to remote servers, and their credentials.
    sign_ins: Arc<auth::SignIns>,
    /// Sessions' servers, listed and started.
    servers: Arc<servers::SessionServers>,
    /// Starts a session's servers (for the catalog, too), noting the workspaces used lately.
    starter: Arc<starter::SessionStarter>,
    /// Each session's policy, asked outside a call.
    policy: Arc<policy::SessionPolicy>,
    store: Store,
    info: DaemonInfo,
    started_ms: u64,
    started: Instant,
    connections: AtomicU32,
    shutdown_reason: OnceLock<String>,
    /// Cancelled when the shutdown grace is over: calls still running are answered
    /// `shuttingDown` and stopped.
    calls_cut: CancellationToken,
}

impl Core {
    /// A core over an opened store, its call pipeline's seats filled by its own policy and
    /// audit log.
    pub(crate) fn new(store: Store, info: DaemonInfo, config: Loader) -> Arc<Self> {
        Self::build(store, info, config, None)
    }

    /// A core whose call pipeline has these seats (and no others).
    pub(crate) fn with_seats(
        store: Store,
        info: DaemonInfo,
        config: Loader,
        seats: Seats,
    ) -> Arc<Self> {
        Self::build(store, info, config, Some(seats))
    }

    fn build(store: Store, info: DaemonInfo, config: Loader, seats: Option<Seats>) -> Arc<Self> {
        let buffer = usize::try_from(info.limits.subscriber_buffer).unwrap_or(usize::MAX);
        let events = Arc::new(EventBus::new(buffer));
        let progress = Arc::new(Router::new(events.clone()));
        let asks = Arc::new(Asks::default());
        let requests = ServerRequests::new(
            progress.clone(),
            asks.clone(),
            events.clone(),
            info.confirm_timeout,
        );
        let secrets = Arc::new(if info.secrets_file_only {
            SecretStore::file_only(&info.data_dir)
        } else {
            SecretStore::new(&info.data_dir)
        });
        let auth =
            Arc::new(crate::auth::Auth::new(secrets.clone(), config.paths().home.join(".gemini")));
        let audit = Arc::new(crate::audit::AuditLog::new(store.clone()));
        let extensions = Arc::new(crate::extensions::Extensions::new(
            config.paths().home.join(".gemini"),
            secrets.clone(),
            store.clone(),
            events.clone(),
        ));
        extensions.rescan(false);
        let key = {
            let extensions = extensions.clone();
            Arc::new(move || extensions.integrity_key())
        };
        let pins = Arc::new(crate::pins::Pins::new(
            store.clone(),
            key,
            info.tool_pinning,
            Some(audit.clone()),
        ));
        // A key replaced in the keychain is taken with the pins signed again (rekey.rs).
        let signs: Arc<dyn crate::extensions::SignsWithKey> = pins.clone();
        extensions.also_signed_by(Arc::downgrade(&signs));
        let mcp = Supervisor::new(
            info.mcp,
            events.clone(),
            store.clone(),
            Arc::new(requests),
            auth.clone(),
            pins,
        );
        let sessions = Arc::new(Sessions::new(store.clone(), events.clone()));
        let daemon_env = std::env::vars()
            .filter(|(k, _)| !crate::systemd::PRIVATE_VARS.contains(&k.as_str()))
            .collect();
        let config = Arc::new(configs::Configs::new(
            config.with_store(store.clone()),
            sessions.clone(),
            extensions.clone(),
            daemon_env,
        ));
        // Workspace policy acceptances are signed with the integrity key too.
        let key: crate::policy::accept::KeySource = {
            let extensions = extensions.clone();
            Arc::new(move || extensions.integrity_key().map_err(|e| e.to_string()))
        };
        let policies = Arc::new(crate::policy::service::Policies::with_store(store.clone(), key));
        let guard = Arc::new(seat::Guard::new(
            config.clone(),
            sessions.clone(),
            asks.clone(),
            policies.clone(),
        ));
        let hook_seat = Arc::new(hooks::HookSeat::new(config.clone(), events.clone()));
        let seats = seats.unwrap_or_else(|| Seats {
            before_tool: Some(hook_seat.clone()),
            after_tool: Some(hook_seat.clone()),
            policy: Some(guard.clone()),
            tool_filter: Some(guard.clone()),
            audit: Some(audit.clone()),
        });
        let starter = Arc::new(starter::SessionStarter::new(
            config.clone(),
            sessions.clone(),
            mcp.clone(),
            warm::Recent::new(info.warm_workspaces),
        ));
        let discovered =
            Arc::new(crate::discovered::Registry::new(info.custom_tools, events.clone()));
        let catalog = Arc::new(Catalog::new(
            mcp.clone(),
            discovered,
            starter.clone(),
            seats.tool_filter.clone(),
        ));
        let parts = Parts {
            mcp: mcp.clone(),
            catalog: catalog.clone(),
            asks: asks.clone(),
            events: events.clone(),
            progress,
            confirm_deadline: info.confirm_timeout,
        };
        let services = Arc::new(services::Services {
            sessions,
            events,
            mcp,
            catalog,
            asks,
            calls: Arc::new(Pipeline::new(parts, seats)),
            extensions,
            hooks: hook_seat,
            audit,
            shutdown: CancellationToken::new(),
            data_dir: info.data_dir.clone(),
        });
        let policy = Arc::new(policy::SessionPolicy::new(
            config.clone(),
            services.clone(),
            policies,
            guard.clone(),
        ));
        let skills = Arc::new(skills::Skills::new(config.clone(), services.clone()));
        let commands = Arc::new(commands::Commands::new(
            config.clone(),
            services.clone(),
            skills.clone(),
            policy.clone(),
        ));
        // Extensions come first: what they contribute is part of every session's
        // configuration, and of the policy, hooks, skills and commands read after it.
        let inputs: Vec<Box<dyn reload::Input>> = vec![
            Box::new(extensions::ExtensionsInput(services.extensions.clone())),
            Box::new(settings::SettingsInput(config.clone())),
            Box::new(policy::PolicyInput { config: config.clone(), guard: guard.clone() }),
            Box::new(hooks::HooksInput(services.hooks.clone())),
            Box::new(skills::SkillsInput(skills.clone())),
            Box::new(commands::CommandsInput(commands.clone())),
        ];
        let reloader = Arc::new(reload::Reloader::new(config.clone(), services.clone(), inputs));
        let servers = Arc::new(servers::SessionServers::new(
            config.clone(),
            services.clone(),
            starter.clone(),
        ));
        let sign_ins = Arc::new(auth::SignIns::new(
            auth,
            config.clone(),
            services.mcp.clone(),
            servers.clone(),
            &info.mcp,
        ));
        let settings =
            Arc::new(settings::Settings::new(config.clone(), services.clone(), reloader.clone()));
        let extensions = Arc::new(extensions::ExtensionService::new(
            config.clone(),
            services.clone(),
            reloader.clone(),
        ));
        Arc::new(Self {
            services,
            config,
            secrets,
            skills,
            commands,
            reloader,
            extensions,
            settings,
            sign_ins,
            servers,
            starter,
            policy,
            store,
            info,
            started_ms: clock::now_ms(),
            started: Instant::now(),
            connections: AtomicU32::new(0),
            shutdown_reason: OnceLock::new(),
            calls_cut: CancellationToken::new(),
        })
    }

    /// The limits it enforces.
    pub(crate) fn limits(&self) -> Limits {
        self.info.limits
    }

    /// Close the default sessions idle for `max_idle` that hold nothing of their own (see
    /// [`Sessions::idle_defaults`]); returns how many.
    pub(crate) async fn prune_sessions(&self, max_idle: Duration) -> Result<usize, SessionError> {
        let ids = self.services.sessions.idle_defaults(max_idle)?;
        for id in &ids {
            match self.close_session(id).await {
                Ok(_) | Err(SessionError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if !ids.is_empty() {
            tracing::info!(count = ids.len(), idle = %humantime::format_duration(max_idle), "closed idle default sessions");
        }
        Ok(ids.len())
    }

    /// Close a session and stop tracking its configuration; the sessions derived from it
    /// are closed first.
    pub(crate) async fn close_session(&self, id: &str) -> Result<Session, SessionError> {
        self.services.sessions.record(id)?;
        let order = self.with_descendants(id);
        let mut closed = None;
        for sid in order.iter().rev() {
            let s = match self.services.sessions.close(sid).await {
                Ok(s) => s,
                Err(SessionError::NotFound(_)) if sid != id => continue,
                Err(e) => return Err(e),
            };
            self.config.baselines().remove(sid);
            self.services.mcp.release_session(sid);
            self.services.catalog.forget(sid);
            self.policy.forget(sid);
            self.services.hooks.forget(sid);
            self.skills.forget(sid);
            self.commands.forget(sid);
            if sid == id {
                closed = Some(s);
            }
        }
        closed.ok_or_else(|| SessionError::NotFound(id.to_owned()))
    }

    /// These sessions lost their last connection: their servers may go (after the linger).
    pub(crate) fn sessions_unattached(&self, ids: &[String]) {
        // Connections close on their own during a shutdown; a session's servers must keep
        // serving the calls still running (of other connections) until the end of the grace,
        // when every server is stopped anyway.
        if self.services.shutdown.is_cancelled() {
            return;
        }
        for id in ids {
            // A derived session has no connection of its own: it lets its servers go with
            // its root's last client.
            for sid in self.with_descendants(id) {
                self.services.mcp.release_session(&sid);
                self.services.catalog.forget(&sid);
            }
        }
    }

    /// A session and every session derived from it, parents first.
    fn with_descendants(&self, id: &str) -> Vec<String> {
        let mut out = vec![id.to_owned()];
        let mut i = 0;
        while let Some(next) = out.get(i).cloned() {
            out.extend(self.services.sessions.children(&next).unwrap_or_default());
            i += 1;
        }
        out
    }

    /// The database.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// `daemon/status`.
    pub(crate) fn status(&self) -> StatusResult {
        let (total, attached) = self.services.sessions.counts();
        let to_u32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        StatusResult {
            version: DAEMON_VERSION.to_owned(),
            protocol_version: PROTOCOL_VERSION,
            pid: std::process::id(),
            started_at: clock::rfc3339(self.started_ms),
            uptime_secs: self.started.elapsed().as_secs(),
            socket: self.info.socket.display().to_string(),
            data_dir: self.info.data_dir.display().to_string(),
            sessions: SessionCounts { total: to_u32(total), attached: to_u32(attached) },
            connections: self.connections.load(Ordering::Relaxed),
            subscribers: to_u32(self.services.events.subscriber_count()),
            limits: self.info.limits,
            warnings: [self.store.warnings(), self.config.loader().warnings()].concat(),
        }
    }

    /// Begin a graceful shutdown; the first reason wins and later requests are no-ops.
    pub(crate) fn request_shutdown(&self, reason: &str) {
        if self.shutdown_reason.set(reason.to_owned()).is_ok() {
            tracing::info!(reason, "shutting down");
            self.services
                .events
                .emit(EventBody::DaemonShuttingDown(ShuttingDown { reason: reason.to_owned() }));
            self.services.shutdown.cancel();
        }
    }

    /// Cancelled when shutdown begins.
    pub(crate) fn shutdown_token(&self) -> &CancellationToken {
        &self.services.shutdown
    }

    /// Why the daemon is shutting down, once it is.
    pub(crate) fn shutdown_reason(&self) -> Option<&str> {
        self.shutdown_reason.get().map(String::as_str)
    }

    /// Cancelled once the shutdown grace is over (see [`Core::cut_calls`]).
    pub(crate) fn calls_cut(&self) -> &CancellationToken {
        &self.calls_cut
    }

    /// End the shutdown grace: every call still running is answered `shuttingDown`.
    pub(crate) fn cut_calls(&self) {
        self.calls_cut.cancel();
    }

    /// Count a new connection.
    pub(crate) fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Forget a connection.
    pub(crate) fn connection_closed(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
