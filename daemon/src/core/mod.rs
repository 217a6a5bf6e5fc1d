//! The daemon's core: the composition (every service built once, in order, each given only the
//! handles it uses), status (`status.rs`), shutdown (`shutdown.rs`), the doctor
//! (`doctor.rs`), warm workspaces (`warm.rs`) and the sessions' lifecycle (`sessions.rs`).
//! Constructible without a socket. The services themselves live in `crate::services`.

mod doctor;
mod sessions;
mod shutdown;
pub(crate) mod status;
mod warm;

use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use geminid_protocol::daemon::Limits;
use tokio_util::sync::CancellationToken;

use crate::asks::Asks;
use crate::audit::AuditLog;
use crate::calls::{Parts, Pipeline, Router, Seats, ServerRequests};
use crate::catalog::Catalog;
use crate::clock;
use crate::config::Loader;
use crate::events::EventBus;
use crate::extensions::Extensions;
use crate::mcp::{McpOptions, Supervisor};
use crate::secrets::SecretStore;
use crate::services::auth::SignIns;
use crate::services::commands::{Commands, CommandsInput};
use crate::services::configs::Configs;
use crate::services::extensions::{ExtensionService, ExtensionsInput};
use crate::services::forget::Forget;
use crate::services::hooks::{HookSeat, HooksInput};
use crate::services::policy::requests::{PolicyInput, PolicyRequests};
use crate::services::policy::tool_calls::ToolCallPolicy;
use crate::services::recent::Recent;
use crate::services::reload::{Input, Reloader};
use crate::services::servers::SessionServers;
use crate::services::settings::{Settings, SettingsInput};
use crate::services::skills::{Skills, SkillsInput};
use crate::services::starter::SessionStarter;
use crate::services::{Services, policy};
use crate::session::Sessions;
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
    /// What a local server whose artifact differs from the one recorded on its first start
    /// meets, for servers whose entry has no `artifactPinning` (`--artifact-pinning`).
    pub artifact_pinning: geminid_protocol::pins::PinMode,
}

/// How long in-flight calls get to finish once shutdown begins (then `calls_cut`).
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The daemon's state.
#[derive(Debug)]
pub(crate) struct Core {
    /// The handles the edges reach (sessions, events, servers, catalog, asks, the call
    /// pipeline, extensions, hooks, audit) and the shutdown token: one set, shared with rpc
    /// and the gateway.
    services: Arc<Services>,
    /// Each session's effective configuration, from Gemini CLI's files.
    config: Arc<Configs>,
    /// Long-lived secrets (OAuth tokens, the integrity key): the OS keyring or a 0600 file.
    secrets: Arc<SecretStore>,
    /// Skills and agent definitions.
    skills: Arc<Skills>,
    /// Slash commands.
    commands: Arc<Commands>,
    /// Runs reloads over the inputs.
    reloader: Arc<Reloader>,
    /// Extensions installed, updated, enabled and removed.
    extensions: Arc<ExtensionService>,
    /// Gemini CLI's files read and changed.
    settings: Arc<Settings>,
    /// Sign-ins to remote servers, and their credentials.
    sign_ins: Arc<SignIns>,
    /// Sessions' servers, listed and started.
    servers: Arc<SessionServers>,
    /// Starts a session's servers (for the catalog, too), noting the workspaces used lately.
    starter: Arc<SessionStarter>,
    /// Each session's policy, asked outside a call.
    policy: Arc<PolicyRequests>,
    /// What a closed session's state is dropped through, in this order.
    forget: Vec<Arc<dyn Forget>>,
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

/// What every service is built over: the foundations, the MCP client and the sessions.
struct Base {
    events: Arc<EventBus>,
    progress: Arc<Router>,
    asks: Arc<Asks>,
    secrets: Arc<SecretStore>,
    auth: Arc<crate::auth::Auth>,
    audit: Arc<AuditLog>,
    extensions: Arc<Extensions>,
    mcp: Arc<Supervisor>,
    sessions: Arc<Sessions>,
    config: Arc<Configs>,
    policies: Arc<crate::policy::session_rules::Policies>,
}

impl Base {
    fn new(store: &Store, info: &DaemonInfo, config: Loader) -> Self {
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
        let audit = Arc::new(AuditLog::new(store.clone()));
        let extensions = Arc::new(Extensions::new(
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
        let pins = Arc::new(
            crate::pins::Pins::new(store.clone(), key, info.tool_pinning, Some(audit.clone()))
                .with_artifact_mode(info.artifact_pinning),
        );
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
        let config = Arc::new(Configs::new(
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
        let policies =
            Arc::new(crate::policy::session_rules::Policies::with_store(store.clone(), key));
        Self {
            events,
            progress,
            asks,
            secrets,
            auth,
            audit,
            extensions,
            mcp,
            sessions,
            config,
            policies,
        }
    }
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
        let b = Base::new(&store, &info, config);
        let config = b.config.clone();
        let guard = Arc::new(ToolCallPolicy::new(
            config.clone(),
            b.sessions.clone(),
            b.asks.clone(),
            b.policies.clone(),
        ));
        let hooks = Arc::new(HookSeat::new(config.clone(), b.events.clone()));
        let seats = seats.unwrap_or_else(|| Seats {
            before_tool: Some(hooks.clone()),
            after_tool: Some(hooks.clone()),
            policy: Some(guard.clone()),
            tool_filter: Some(guard.clone()),
            audit: Some(b.audit.clone()),
        });
        let starter = Arc::new(SessionStarter::new(
            config.clone(),
            b.sessions.clone(),
            b.mcp.clone(),
            Recent::new(info.warm_workspaces),
        ));
        let discovered =
            Arc::new(crate::discovered::Registry::new(info.custom_tools, b.events.clone()));
        let catalog = Arc::new(Catalog::new(
            b.mcp.clone(),
            discovered,
            starter.clone(),
            seats.tool_filter.clone(),
        ));
        let parts = Parts {
            mcp: b.mcp.clone(),
            catalog: catalog.clone(),
            asks: b.asks.clone(),
            events: b.events.clone(),
            progress: b.progress.clone(),
            confirm_deadline: info.confirm_timeout,
        };
        let services = Arc::new(Services {
            sessions: b.sessions.clone(),
            events: b.events.clone(),
            mcp: b.mcp.clone(),
            catalog,
            asks: b.asks.clone(),
            calls: Arc::new(Pipeline::new(parts, seats)),
            extensions: b.extensions.clone(),
            hooks,
            audit: b.audit.clone(),
            shutdown: CancellationToken::new(),
            data_dir: info.data_dir.clone(),
        });
        Self::with_features(b, services, guard, starter, store, info)
    }

    /// The feature services over the edges' handles, the reload inputs in their order, and
    /// the parts a closed session is forgotten by.
    fn with_features(
        b: Base,
        services: Arc<Services>,
        guard: Arc<ToolCallPolicy>,
        starter: Arc<SessionStarter>,
        store: Store,
        info: DaemonInfo,
    ) -> Arc<Self> {
        let (config, s) = (b.config.clone(), &services);
        let policy = Arc::new(PolicyRequests::new(
            config.clone(),
            s.sessions.clone(),
            s.asks.clone(),
            s.catalog.clone(),
            b.policies.clone(),
            guard.clone(),
        ));
        let skills = Arc::new(Skills::new(
            config.clone(),
            s.sessions.clone(),
            s.mcp.clone(),
            s.calls.clone(),
            s.events.clone(),
        ));
        let commands = Arc::new(Commands::new(
            config.clone(),
            s.sessions.clone(),
            s.mcp.clone(),
            s.events.clone(),
            s.catalog.clone(),
            skills.clone(),
            policy.clone(),
        ));
        // Extensions come first: what they contribute is part of every session's
        // configuration, and of the policy, hooks, skills and commands read after it.
        let inputs: Vec<Box<dyn Input>> = vec![
            Box::new(ExtensionsInput(s.extensions.clone())),
            Box::new(SettingsInput(config.clone())),
            Box::new(PolicyInput { config: config.clone(), guard: guard.clone() }),
            Box::new(HooksInput(s.hooks.clone())),
            Box::new(SkillsInput(skills.clone())),
            Box::new(CommandsInput(commands.clone())),
        ];
        let reloader = Arc::new(Reloader::new(
            config.clone(),
            s.sessions.clone(),
            s.events.clone(),
            s.mcp.clone(),
            s.shutdown.clone(),
            inputs,
        ));
        let servers = Arc::new(SessionServers::new(
            config.clone(),
            s.sessions.clone(),
            s.mcp.clone(),
            s.catalog.clone(),
            starter.clone(),
        ));
        let sign_ins = Arc::new(SignIns::new(
            b.auth,
            config.clone(),
            s.mcp.clone(),
            servers.clone(),
            &info.mcp,
        ));
        let settings = Arc::new(Settings::new(
            config.clone(),
            s.sessions.clone(),
            s.extensions.clone(),
            reloader.clone(),
        ));
        let extensions = Arc::new(ExtensionService::new(
            config.clone(),
            s.sessions.clone(),
            s.extensions.clone(),
            s.events.clone(),
            reloader.clone(),
        ));
        // A closed session's baseline, servers, tool table, prepared rules and hooks, and
        // what its skills and commands were last told, in this order.
        let forget: Vec<Arc<dyn Forget>> = vec![
            config.clone(),
            s.mcp.clone(),
            s.catalog.clone(),
            guard,
            s.hooks.clone(),
            skills.clone(),
            commands.clone(),
        ];
        Arc::new(Self {
            services,
            config,
            secrets: b.secrets,
            skills,
            commands,
            reloader,
            extensions,
            settings,
            sign_ins,
            servers,
            starter,
            policy,
            forget,
            store,
            info,
            started_ms: clock::now_ms(),
            started: Instant::now(),
            connections: AtomicU32::new(0),
            shutdown_reason: OnceLock::new(),
            calls_cut: CancellationToken::new(),
        })
    }

    /// The services the edges reach: the ones the core holds, not copies.
    pub(crate) fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// Each session's effective configuration (read, and made known to reloads).
    pub(crate) fn configs(&self) -> &Arc<Configs> {
        &self.config
    }

    /// The skills service (`skills/*`, `agents/*`).
    pub(crate) fn skills(&self) -> &Arc<Skills> {
        &self.skills
    }

    /// The commands service (`commands/list`).
    pub(crate) fn commands(&self) -> &Arc<Commands> {
        &self.commands
    }

    /// The policy service (`policy/*`, `confirmation/respond`, `session/update`).
    pub(crate) fn policy(&self) -> &Arc<policy::requests::PolicyRequests> {
        &self.policy
    }

    /// The extensions service (`extensions/*`).
    pub(crate) fn extensions(&self) -> &Arc<ExtensionService> {
        &self.extensions
    }

    /// The settings service (`config/*`, `trust/*`, `mcp/add|remove|enable|disable`).
    pub(crate) fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }

    /// Sessions' servers (`mcp/listServers`, `mcp/start`, the server a name means).
    pub(crate) fn servers(&self) -> &Arc<SessionServers> {
        &self.servers
    }

    /// Sign-ins (`auth/*`).
    pub(crate) fn sign_ins(&self) -> &Arc<SignIns> {
        &self.sign_ins
    }

    /// The reloads (the watcher, `mcp/reload`).
    pub(crate) fn reloader(&self) -> &Arc<Reloader> {
        &self.reloader
    }

    /// The limits it enforces.
    pub(crate) fn limits(&self) -> Limits {
        self.info.limits
    }

    /// The database.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }
}
