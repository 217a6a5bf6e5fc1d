//! The JSON-RPC methods, as jsonrpsee traits. The daemon implements the `*Server` traits and
//! clients get typed `*Client` extension traits for free.
//!
//! Every method takes at most one parameter, a `*Params` object.

use jsonrpsee::core::{RpcResult, SubscriptionResult};
use jsonrpsee::proc_macros::rpc;

use crate::asks::{
    AskNotice, AsksListenParams, AsksPendingParams, AsksPendingResult, AsksRespondParams,
    AsksRespondResult,
};
use crate::auth::{
    AuthBeginParams, AuthBegun, AuthLogoutParams, AuthLogoutResult, AuthProgress,
    AuthProgressParams, AuthStatusParams, AuthStatusResult,
};
use crate::calls::{CallsCancelParams, CallsCancelResult, CallsListParams, CallsListResult};
use crate::commands::{
    CommandsExpandParams, CommandsExpandResult, CommandsListParams, CommandsListResult,
};
use crate::config::{
    ConfigParams, ContextFilesParams, ContextFilesResult, DiagnosticsResult, EffectiveConfig,
    McpAddParams, McpAddResult, McpEnableParams, McpEnableResult, McpImportParams, McpImportResult,
    McpReloadParams, McpReloadResult, McpRemoveParams, McpRemoveResult, TrustGetParams,
    TrustGetResult, TrustSetParams, TrustSetResult,
};
use crate::daemon::{
    DoctorParams, DoctorResult, HelloParams, HelloResult, ShutdownResult, StatusResult,
};
use crate::event::Event;
use crate::event::EventsSubscribeParams;
use crate::extensions::{
    ExtensionEnableParams, ExtensionEnableResult, ExtensionInfo, ExtensionInstallParams,
    ExtensionInstallResult, ExtensionNameParams, ExtensionUninstallResult, ExtensionUpdateParams,
    ExtensionUpdateResult, ExtensionsListParams, ExtensionsListResult, ExtensionsVerifyParams,
};
use crate::hooks::{
    HooksEnableParams, HooksEnableResult, HooksFireParams, HooksFireResult, HooksListParams,
    HooksListResult, HooksMigrateParams, HooksMigrateResult,
};
use crate::mcp::{
    CallToolParams, ListServersParams, ListServersResult, LogLine, LogsParams, LogsResult,
    ServerAskRespondParams, ServerAskRespondResult, ServerParams, ServerStatus, StartParams,
    TasksCancelParams, TasksCancelResult, TasksListParams, TasksListResult,
};
use crate::pins::{PinsParams, PinsResult, ReviewResult, UpdateParams, UpdateResult};
use crate::policy::{
    AuditListParams, AuditListResult, ConfirmationRespondParams, ConfirmationRespondResult,
    PolicyCheckParams, PolicyCheckResult, PolicyListParams, PolicyListResult, PolicyReviewParams,
    PolicyReviewResult,
};
use crate::session::{
    Session, SessionAttachParams, SessionCreateParams, SessionDeriveParams, SessionIdParams,
    SessionListParams, SessionListResult, SessionUpdateParams,
};
use crate::skills::{
    AgentsListResult, SkillActivateParams, SkillActivateResult, SkillEnableParams,
    SkillEnableResult, SkillInstallParams, SkillInstallResult, SkillUninstallParams,
    SkillUninstallResult, SkillsListParams, SkillsListResult, SkillsPromptResult,
};
use crate::tools::{
    CatalogParams, InstructionsResult, PromptsGetParams, PromptsGetResult, PromptsListResult,
    ResourcesListResult, ResourcesReadParams, ResourcesReadResult, ToolsCallParams,
    ToolsCallResult, ToolsCancelParams, ToolsCancelResult, ToolsListParams, ToolsListResult,
    ToolsRefreshParams, ToolsRefreshResult,
};

/// `daemon/*`: handshake, status and lifecycle.
#[rpc(server, client, namespace = "daemon", namespace_separator = "/")]
pub trait DaemonApi {
    /// Version handshake; fails with `VersionMismatch` naming both versions.
    #[method(name = "hello")]
    async fn hello(&self, params: HelloParams) -> RpcResult<HelloResult>;

    /// Version, pid, uptime, socket, data dir, session and connection counts.
    #[method(name = "status")]
    async fn status(&self) -> RpcResult<StatusResult>;

    /// Graceful shutdown: the reply is sent, then the daemon stops accepting, finishes
    /// in-flight calls, flushes its database and removes its socket.
    #[method(name = "shutdown")]
    async fn shutdown(&self) -> RpcResult<ShutdownResult>;

    /// Check what a session needs: the secrets store, the folder's trust, the configuration's
    /// problems, the programs its stdio servers run, its remote servers' reachability, its
    /// servers' states; each finding with its fix.
    #[method(name = "doctor")]
    async fn doctor(&self, params: DoctorParams) -> RpcResult<DoctorResult>;
}

/// `session/*`: sessions and which connections are attached to them.
#[rpc(server, client, namespace = "session", namespace_separator = "/")]
pub trait SessionApi {
    /// Create a session for a workspace (or reuse its default one) and attach this connection.
    #[method(name = "create", with_extensions)]
    async fn create(&self, params: SessionCreateParams) -> RpcResult<Session>;

    /// One session by id.
    #[method(name = "get")]
    async fn get(&self, params: SessionIdParams) -> RpcResult<Session>;

    /// Sessions, oldest first, paginated.
    #[method(name = "list")]
    async fn list(&self, params: Option<SessionListParams>) -> RpcResult<SessionListResult>;

    /// Attach an existing session to this connection (e.g. after either side restarted).
    #[method(name = "attach", with_extensions)]
    async fn attach(&self, params: SessionAttachParams) -> RpcResult<Session>;

    /// Detach this connection from a session; the session stays.
    #[method(name = "detach", with_extensions)]
    async fn detach(&self, params: SessionIdParams) -> RpcResult<Session>;

    /// Close a session: detach everyone and delete it (and the sessions derived from it).
    #[method(name = "close")]
    async fn close(&self, params: SessionIdParams) -> RpcResult<Session>;

    /// Change a session's approval mode or interactivity.
    #[method(name = "update")]
    async fn update(&self, params: SessionUpdateParams) -> RpcResult<Session>;

    /// Create a subagent's session under a parent.
    #[method(name = "derive")]
    async fn derive(&self, params: SessionDeriveParams) -> RpcResult<Session>;
}

/// `events/*`: the event stream.
#[rpc(server, client, namespace = "events", namespace_separator = "/")]
pub trait EventsApi {
    /// Stream events (notifications named `events/event`) until unsubscribed or the daemon
    /// shuts down. A subscriber that falls too far behind is dropped with an error.
    #[subscription(name = "subscribe" => "event", unsubscribe = "unsubscribe", item = Event)]
    async fn subscribe_events(&self, params: Option<EventsSubscribeParams>) -> SubscriptionResult;
}

/// `config/*`: a session's effective configuration.
#[rpc(server, client, namespace = "config", namespace_separator = "/")]
pub trait ConfigApi {
    /// The effective configuration for a session; secrets in `env`/`headers` redacted.
    #[method(name = "get")]
    async fn config_get(&self, params: ConfigParams) -> RpcResult<EffectiveConfig>;

    /// Every warning and error in the session's input files, with file, line and column.
    #[method(name = "diagnostics")]
    async fn config_diagnostics(&self, params: ConfigParams) -> RpcResult<DiagnosticsResult>;
}

/// `context/*`: what the model's instructions are made of.
#[rpc(server, client, namespace = "context", namespace_separator = "/")]
pub trait ContextApi {
    /// The context files Gemini CLI would load for the session, in its order: global, the
    /// enabled extensions', the project's.
    #[method(name = "files")]
    async fn context_files(&self, params: ContextFilesParams) -> RpcResult<ContextFilesResult>;
}

/// `trust/*`: folder trust rules in `trustedFolders.json`.
#[rpc(server, client, namespace = "trust", namespace_separator = "/")]
pub trait TrustApi {
    /// Whether a directory is trusted, and the rule written for it.
    #[method(name = "get")]
    async fn trust_get(&self, params: TrustGetParams) -> RpcResult<TrustGetResult>;

    /// Write or remove the rule for a directory.
    #[method(name = "set")]
    async fn trust_set(&self, params: TrustSetParams) -> RpcResult<TrustSetResult>;
}

/// `mcp/*`: MCP server configuration.
#[rpc(server, client, namespace = "mcp", namespace_separator = "/")]
pub trait McpApi {
    /// Add or replace a server in the user or project settings file.
    #[method(name = "add")]
    async fn mcp_add(&self, params: McpAddParams) -> RpcResult<McpAddResult>;

    /// Remove a server from the user or project settings file.
    #[method(name = "remove")]
    async fn mcp_remove(&self, params: McpRemoveParams) -> RpcResult<McpRemoveResult>;

    /// Move the user's Gemini CLI servers behind the gateway (`gemctl mcp import`).
    #[method(name = "import")]
    async fn mcp_import(&self, params: McpImportParams) -> RpcResult<McpImportResult>;

    /// Enable a server (persistently, or clear its session-only disable).
    #[method(name = "enable")]
    async fn mcp_enable(&self, params: McpEnableParams) -> RpcResult<McpEnableResult>;

    /// Disable a server (persistently, or for the session only).
    #[method(name = "disable")]
    async fn mcp_disable(&self, params: McpEnableParams) -> RpcResult<McpEnableResult>;

    /// Re-read every input file now, as a file change would.
    #[method(name = "reload")]
    async fn mcp_reload(&self, params: Option<McpReloadParams>) -> RpcResult<McpReloadResult>;

    /// Servers and their runtime state, read from the supervisor: never starts anything.
    #[method(name = "listServers")]
    async fn mcp_list_servers(
        &self,
        params: Option<ListServersParams>,
    ) -> RpcResult<ListServersResult>;

    /// The session needs its servers: start (or share) every one it may run. It keeps them
    /// while a connection is attached to it; after that they stop once unused for the linger
    /// period.
    #[method(name = "start")]
    async fn mcp_start(&self, params: StartParams) -> RpcResult<ListServersResult>;

    /// Stop a running server now; it stays stopped (its sessions' calls to it fail) until
    /// `mcp/restart` starts it again.
    #[method(name = "stop")]
    async fn mcp_stop(&self, params: ServerParams) -> RpcResult<ServerStatus>;

    /// Stop and start a running server again (also the way out of `crash-loop` and
    /// `needs-auth`).
    #[method(name = "restart")]
    async fn mcp_restart(&self, params: ServerParams) -> RpcResult<ServerStatus>;

    /// The newest lines of a server's log (its stderr and what the supervisor did).
    #[method(name = "logs")]
    async fn mcp_logs(&self, params: LogsParams) -> RpcResult<LogsResult>;

    /// Call a tool on one of the session's servers by its MCP name; the result is the
    /// server's `CallToolResult` as it sent it.
    #[method(name = "callTool")]
    async fn mcp_call_tool(&self, params: CallToolParams) -> RpcResult<serde_json::Value>;

    /// A running server's definitions that differ from their pins: each pinned and listed
    /// canonical form, and what a reader may miss in it, with a digest of what it shows.
    #[method(name = "review")]
    async fn mcp_review(&self, params: ServerParams) -> RpcResult<ReviewResult>;

    /// Pin the server's definitions as it lists them now (those named, or every one that
    /// differs), when that is as the review named by `digest` (or the last one) showed them:
    /// held ones are offered again.
    #[method(name = "accept")]
    async fn mcp_accept(&self, params: PinsParams) -> RpcResult<PinsResult>;

    /// Say no to the server's differing definitions (those named, or all): they stay held,
    /// marked rejected, until they are accepted or the server lists them as pinned again.
    #[method(name = "reject")]
    async fn mcp_reject(&self, params: PinsParams) -> RpcResult<PinsResult>;

    /// Move a local server to its newest release on purpose: resolved now (npm's `latest`,
    /// or the executable as it is), offered as a review that `mcp/accept` takes (or taken at
    /// once with `yes`).
    #[method(name = "update")]
    async fn mcp_update(&self, params: UpdateParams) -> RpcResult<UpdateResult>;
}

/// `mcp/followLogs`: the one subscription under `mcp/`, in a trait of its own so that
/// [`McpApiClient`] needs only request/response (see [`crate::client::Client`]).
#[rpc(server, client, namespace = "mcp", namespace_separator = "/")]
pub trait McpLogsApi {
    /// Stream a server's log lines as they are written (notifications `mcp/logLine`).
    #[subscription(name = "followLogs" => "logLine", unsubscribe = "unfollowLogs", item = LogLine)]
    async fn mcp_follow_logs(&self, params: ServerParams) -> SubscriptionResult;
}

/// `tools/*`: a session's MCP tools as Gemini sees them.
#[rpc(server, client, namespace = "tools", namespace_separator = "/")]
pub trait ToolsApi {
    /// The session's tools: fully qualified names and Gemini function declarations.
    #[method(name = "list")]
    async fn tools_list(&self, params: ToolsListParams) -> RpcResult<ToolsListResult>;

    /// Call a tool by its fully qualified name. Progress the server reports arrives as
    /// `tools/progress` events. If the caller disconnects or cancels first, the server is sent
    /// `notifications/cancelled`.
    #[method(name = "call")]
    async fn tools_call(&self, params: ToolsCallParams) -> RpcResult<ToolsCallResult>;

    /// Cancel a call made with a `callId`.
    #[method(name = "cancel")]
    async fn tools_cancel(&self, params: ToolsCancelParams) -> RpcResult<ToolsCancelResult>;

    /// Every connected server's instructions, and the system-prompt text Gemini CLI makes of
    /// them.
    #[method(name = "instructions")]
    async fn tools_instructions(&self, params: CatalogParams) -> RpcResult<InstructionsResult>;

    /// Run the session's `tools.discoveryCommand` again (its custom tools change for every
    /// session with the same command, workspace and environment).
    #[method(name = "refresh")]
    async fn tools_refresh(&self, params: ToolsRefreshParams) -> RpcResult<ToolsRefreshResult>;
}

/// `prompts/*`: MCP prompts as slash commands.
#[rpc(server, client, namespace = "prompts", namespace_separator = "/")]
pub trait PromptsApi {
    /// The session's prompts, named as Gemini CLI names their commands.
    #[method(name = "list")]
    async fn prompts_list(&self, params: CatalogParams) -> RpcResult<PromptsListResult>;

    /// Get a prompt, its arguments parsed as Gemini CLI parses a command line.
    #[method(name = "get")]
    async fn prompts_get(&self, params: PromptsGetParams) -> RpcResult<PromptsGetResult>;
}

/// `resources/*`: MCP resources and `@server:uri` references.
#[rpc(server, client, namespace = "resources", namespace_separator = "/")]
pub trait ResourcesApi {
    /// The session's resources and resource templates.
    #[method(name = "list")]
    async fn resources_list(&self, params: CatalogParams) -> RpcResult<ResourcesListResult>;

    /// Read a resource.
    #[method(name = "read")]
    async fn resources_read(&self, params: ResourcesReadParams) -> RpcResult<ResourcesReadResult>;
}

/// `asks/*`: questions to a person through the session's clients (see [`crate::asks`]).
#[rpc(server, client, namespace = "asks", namespace_separator = "/")]
pub trait AsksApi {
    /// Listen for asks of some kinds on a session this connection is attached to
    /// (notifications `asks/notice`): the pending ones first, then each new one and each one
    /// settled. Listening is how a client says it can answer those kinds.
    #[subscription(name = "listen" => "notice", unsubscribe = "unlisten", item = AskNotice)]
    async fn asks_listen(&self, params: AsksListenParams) -> SubscriptionResult;

    /// Answer an ask; the first answer wins.
    #[method(name = "respond")]
    async fn asks_respond(&self, params: AsksRespondParams) -> RpcResult<AsksRespondResult>;

    /// The session's pending asks.
    #[method(name = "pending")]
    async fn asks_pending(&self, params: AsksPendingParams) -> RpcResult<AsksPendingResult>;
}

/// `policy/*`: the policy engine's decisions, asked without making a call.
#[rpc(server, client, namespace = "policy", namespace_separator = "/")]
pub trait PolicyApi {
    /// What the session's rules decide for a call (front-ends ask about their own built-in
    /// tools with the same engine).
    #[method(name = "check")]
    async fn policy_check(&self, params: PolicyCheckParams) -> RpcResult<PolicyCheckResult>;

    /// Every rule that applies to the session, in the order they are tried, and the
    /// problems in its policy files.
    #[method(name = "list")]
    async fn policy_list(&self, params: PolicyListParams) -> RpcResult<PolicyListResult>;

    /// The session's workspace policy files against what the user accepted, and the rules
    /// accepting them would add: a trusted workspace's policy files are loaded only once
    /// accepted, exactly as they were.
    #[method(name = "review")]
    async fn policy_review(&self, params: PolicyReviewParams) -> RpcResult<PolicyReviewResult>;

    /// Accept the session's workspace policy files as they are (as `digest` says they were
    /// reviewed): their digest is kept, signed, and they are loaded until they change.
    #[method(name = "accept")]
    async fn policy_accept(&self, params: PolicyReviewParams) -> RpcResult<PolicyReviewResult>;
}

/// `confirmation/*`: answering the policy's questions.
#[rpc(server, client, namespace = "confirmation", namespace_separator = "/")]
pub trait ConfirmationApi {
    /// Answer a confirmation (`confirmation/requested`): the first answer wins; a later one,
    /// or one for an ask that is no longer pending, is an error that says why.
    #[method(name = "respond")]
    async fn confirmation_respond(
        &self,
        params: ConfirmationRespondParams,
    ) -> RpcResult<ConfirmationRespondResult>;
}

/// `elicitation/*`: answering a server's form or URL for the person behind a call.
#[rpc(server, client, namespace = "elicitation", namespace_separator = "/")]
pub trait ElicitationApi {
    /// Answer an elicitation (`elicitation/requested`) with an `ElicitResult`: the first
    /// answer wins; one for an ask that is no longer pending, or is not an elicitation, is an
    /// error that says why.
    #[method(name = "respond")]
    async fn elicitation_respond(
        &self,
        params: ServerAskRespondParams,
    ) -> RpcResult<ServerAskRespondResult>;
}

/// `tasks/*`: tool calls servers turned into tasks, followed by the daemon to their end.
#[rpc(server, client, namespace = "tasks", namespace_separator = "/")]
pub trait TasksApi {
    /// A session's tasks, newest first: those in flight and those that ended (kept across
    /// daemon restarts).
    #[method(name = "list")]
    async fn tasks_list(&self, params: TasksListParams) -> RpcResult<TasksListResult>;

    /// Ask the server to cancel one of the session's tasks.
    #[method(name = "cancel")]
    async fn tasks_cancel(&self, params: TasksCancelParams) -> RpcResult<TasksCancelResult>;
}

/// `calls/*`: every tool call in flight, whoever made it.
#[rpc(server, client, namespace = "calls", namespace_separator = "/")]
pub trait CallsApi {
    /// The calls in flight (of one session, or of all), oldest first, with their last
    /// progress.
    #[method(name = "list")]
    async fn calls_list(&self, params: Option<CallsListParams>) -> RpcResult<CallsListResult>;

    /// Cancel a call in flight by its `calls/list` id, whoever made it and whether or not
    /// it has a `callId`.
    #[method(name = "cancel")]
    async fn calls_cancel(&self, params: CallsCancelParams) -> RpcResult<CallsCancelResult>;
}

/// `auth/*`: OAuth sign-in to remote MCP servers. No answer holds a token.
#[rpc(server, client, namespace = "auth", namespace_separator = "/")]
pub trait AuthApi {
    /// Start signing in to a server: discovery, client registration, the loopback listener;
    /// the URL to open. The daemon then waits (5 minutes) for the browser, for as long as this
    /// connection lasts; a newer sign-in to the same server ends it.
    #[method(name = "begin", with_extensions)]
    async fn auth_begin(&self, params: AuthBeginParams) -> RpcResult<AuthBegun>;

    /// The sign-in's next step after `after` (waiting up to 30 s for it; then the current
    /// one).
    #[method(name = "progress")]
    async fn auth_progress(&self, params: AuthProgressParams) -> RpcResult<AuthProgress>;

    /// Each of the session's remote servers' credentials: state, issuer, expiry; never a
    /// token.
    #[method(name = "status")]
    async fn auth_status(&self, params: AuthStatusParams) -> RpcResult<AuthStatusResult>;

    /// Forget a server's credentials (and restart it if it runs).
    #[method(name = "logout")]
    async fn auth_logout(&self, params: AuthLogoutParams) -> RpcResult<AuthLogoutResult>;
}

/// `sampling/*`: answering a server's request for a model's answer.
#[rpc(server, client, namespace = "sampling", namespace_separator = "/")]
pub trait SamplingApi {
    /// Answer a sampling request (`sampling/requested`) with a `CreateMessageResult`.
    #[method(name = "respond")]
    async fn sampling_respond(
        &self,
        params: ServerAskRespondParams,
    ) -> RpcResult<ServerAskRespondResult>;
}

/// `hooks/*`: the session's hooks; firing the events the front-end owns.
#[rpc(server, client, namespace = "hooks", namespace_separator = "/")]
pub trait HooksApi {
    /// Every hook of the session and the problems in their configuration.
    #[method(name = "list")]
    async fn hooks_list(&self, params: HooksListParams) -> RpcResult<HooksListResult>;

    /// Run an event's hooks (every event but `BeforeTool` and `AfterTool`, which calls fire).
    #[method(name = "fire")]
    async fn hooks_fire(&self, params: HooksFireParams) -> RpcResult<HooksFireResult>;

    /// Take a hook out of `hooksConfig.disabled` in a settings file (kept as written).
    #[method(name = "enable")]
    async fn hooks_enable(&self, params: HooksEnableParams) -> RpcResult<HooksEnableResult>;

    /// Add a hook to `hooksConfig.disabled` in a settings file (kept as written).
    #[method(name = "disable")]
    async fn hooks_disable(&self, params: HooksEnableParams) -> RpcResult<HooksEnableResult>;

    /// Add Claude Code's hooks of the workspace to its settings file, converted.
    #[method(name = "migrate")]
    async fn hooks_migrate(&self, params: HooksMigrateParams) -> RpcResult<HooksMigrateResult>;
}

/// `commands/*`: the slash commands a front-end offers.
#[rpc(server, client, namespace = "commands", namespace_separator = "/")]
pub trait CommandsApi {
    /// File commands, MCP prompts and skills, named after Gemini CLI's conflict rules.
    #[method(name = "list")]
    async fn commands_list(&self, params: CommandsListParams) -> RpcResult<CommandsListResult>;

    /// The text a command sends to the model: `@{path}` contents, `!{cmd}` output (policy
    /// checked as `run_shell_command`), `{{args}}`, in Gemini CLI's order.
    #[method(name = "expand")]
    async fn commands_expand(
        &self,
        params: CommandsExpandParams,
    ) -> RpcResult<CommandsExpandResult>;
}

/// `skills/*`: Agent Skills as each session sees them.
#[rpc(server, client, namespace = "skills", namespace_separator = "/")]
pub trait SkillsApi {
    /// Every skill the session's folders hold, which copy wins, enabled or not.
    #[method(name = "list")]
    async fn skills_list(&self, params: SkillsListParams) -> RpcResult<SkillsListResult>;

    /// The system prompt's `<available_skills>` section for the session.
    #[method(name = "prompt")]
    async fn skills_prompt(&self, params: SkillsListParams) -> RpcResult<SkillsPromptResult>;

    /// Activate a skill (policy decides, as for the `activate_skill` tool): its instructions
    /// and resources, recorded on the session.
    #[method(name = "activate")]
    async fn skills_activate(&self, params: SkillActivateParams) -> RpcResult<SkillActivateResult>;

    /// Install skills from a folder, a `.skill` archive or a git repository.
    #[method(name = "install")]
    async fn skills_install(&self, params: SkillInstallParams) -> RpcResult<SkillInstallResult>;

    /// Link the skills of a folder (a symlink each, so edits there apply).
    #[method(name = "link")]
    async fn skills_link(&self, params: SkillInstallParams) -> RpcResult<SkillInstallResult>;

    /// Remove an installed skill's folder (or link).
    #[method(name = "uninstall")]
    async fn skills_uninstall(
        &self,
        params: SkillUninstallParams,
    ) -> RpcResult<SkillUninstallResult>;

    /// Take a skill off every `skills.disabled` the user writes (user and workspace).
    #[method(name = "enable")]
    async fn skills_enable(&self, params: SkillEnableParams) -> RpcResult<SkillEnableResult>;

    /// Add a skill to the scope's `skills.disabled`.
    #[method(name = "disable")]
    async fn skills_disable(&self, params: SkillEnableParams) -> RpcResult<SkillEnableResult>;
}

/// `agents/*`: agent definitions (subagents) as each session sees them.
#[rpc(server, client, namespace = "agents", namespace_separator = "/")]
pub trait AgentsApi {
    /// Every agent definition of the session's folders, and the files that did not load.
    #[method(name = "list")]
    async fn agents_list(&self, params: SkillsListParams) -> RpcResult<AgentsListResult>;
}

/// `extensions/*`: installed extensions, their integrity, enablement and installation.
#[rpc(server, client, namespace = "extensions", namespace_separator = "/")]
pub trait ExtensionsApi {
    /// Every installed extension, as the session's workspace sees it.
    #[method(name = "list")]
    async fn extensions_list(
        &self,
        params: ExtensionsListParams,
    ) -> RpcResult<ExtensionsListResult>;

    /// Hash every file again now and compare with the records.
    #[method(name = "verify")]
    async fn extensions_verify(
        &self,
        params: ExtensionsVerifyParams,
    ) -> RpcResult<ExtensionsListResult>;

    /// Re-sign an extension's files as they are now (after a deliberate local edit).
    #[method(name = "accept")]
    async fn extensions_accept(&self, params: ExtensionNameParams) -> RpcResult<ExtensionInfo>;

    /// Enable an extension for the user or the session's workspace.
    #[method(name = "enable")]
    async fn extensions_enable(
        &self,
        params: ExtensionEnableParams,
    ) -> RpcResult<ExtensionEnableResult>;

    /// Disable an extension for the user or the session's workspace.
    #[method(name = "disable")]
    async fn extensions_disable(
        &self,
        params: ExtensionEnableParams,
    ) -> RpcResult<ExtensionEnableResult>;

    /// Install an extension from a local folder (copied; with consent).
    #[method(name = "install")]
    async fn extensions_install(
        &self,
        params: ExtensionInstallParams,
    ) -> RpcResult<ExtensionInstallResult>;

    /// Link a development folder as an extension (read in place, not verified).
    #[method(name = "link")]
    async fn extensions_link(
        &self,
        params: ExtensionInstallParams,
    ) -> RpcResult<ExtensionInstallResult>;

    /// Check for updates, or update one extension or every one, with a real rollback.
    #[method(name = "update")]
    async fn extensions_update(
        &self,
        params: ExtensionUpdateParams,
    ) -> RpcResult<ExtensionUpdateResult>;

    /// Remove an installed extension, its integrity records and its enablement rules.
    #[method(name = "uninstall")]
    async fn extensions_uninstall(
        &self,
        params: ExtensionNameParams,
    ) -> RpcResult<ExtensionUninstallResult>;
}

/// `audit/*`: the record of every call.
#[rpc(server, client, namespace = "audit", namespace_separator = "/")]
pub trait AuditApi {
    /// The latest audit records, newest first.
    #[method(name = "list")]
    async fn audit_list(&self, params: Option<AuditListParams>) -> RpcResult<AuditListResult>;
}
