//! MCP server runtime: states, `mcp/listServers`, `mcp/start`, `mcp/restart`, `mcp/logs`,
//! `mcp/callTool`.

use serde::{Deserialize, Serialize};

use crate::common::SessionId;
use crate::config::Scope;

/// The state of one server, as the supervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ServerState {
    /// Disabled by the user (enablement file or for the session); not started.
    Disabled,
    /// Not allowed to run (untrusted folder, admin switch, allow/exclude list, invalid entry).
    Blocked,
    /// Starting: spawning or connecting, then the MCP handshake.
    Connecting,
    /// Handshake done; ready for calls.
    Connected,
    /// Not running: not started yet, stopped, or failed (`lastError` says why) and waiting
    /// for its next attempt.
    Disconnected,
    /// The server answered 401: it needs credentials. Not retried until they change or the
    /// server is restarted.
    NeedsAuth,
    /// Failed too often in a row; parked until its configuration changes or it is restarted.
    CrashLoop,
}

impl ServerState {
    /// The word Gemini CLI prints for it (`gemini mcp list`), or ours where it has none.
    pub fn label(self) -> &'static str {
        match self {
            Self::Disabled => "Disabled",
            Self::Blocked => "Blocked",
            Self::Connecting => "Connecting",
            Self::Connected => "Connected",
            Self::Disconnected => "Disconnected",
            Self::NeedsAuth => "Needs authentication",
            Self::CrashLoop => "Crash loop",
        }
    }

    /// What follows "the server is" in a sentence: `in crash loop`, `waiting for sign-in`.
    pub fn phrase(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Blocked => "blocked",
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Disconnected => "disconnected",
            Self::NeedsAuth => "waiting for sign-in",
            Self::CrashLoop => "in crash loop",
        }
    }
}

/// How a server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Transport {
    /// A child process on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
    /// Legacy HTTP+SSE (2024-11-05).
    Sse,
}

impl Transport {
    /// As Gemini CLI prints it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
            Self::Sse => "sse",
        }
    }
}

/// How long a server stays running once no session uses it (`keepWarm` of its entry in
/// geminid's own `servers.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum KeepWarm {
    /// The daemon's idle period (`--mcp-linger`), within its idle-memory budget
    /// (`--mcp-idle-memory`; the least recently used idle server stops first).
    #[default]
    Default,
    /// Kept running while the daemon runs, whatever its memory.
    Always,
    /// Stopped as soon as no session uses it.
    Never,
}

/// One server as `mcp/listServers` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    /// Its name in the settings.
    pub name: String,
    /// The settings scope it came from.
    pub scope: Scope,
    /// The extension that contributes it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    /// How it is reached (for a `url` without `type`: the transport that connected, else
    /// `http`).
    pub transport: Transport,
    /// `command args…` for stdio, the URL otherwise (no secrets: env and headers are not
    /// shown).
    pub target: String,
    /// Its state.
    pub state: ServerState,
    /// Why it is blocked or disabled, or its last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The first 12 hex digits of its identity (sessions showing the same one share it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// The child's process id (stdio, while running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Seconds since it connected (while connected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uptime_secs: Option<u64>,
    /// Seconds since it last failed to answer a ping in time, while it is connected but not
    /// answering (a stopped or wedged process); absent while it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresponsive_secs: Option<u64>,
    /// How many times it was started again after its first start.
    pub restarts: u32,
    /// Tool, prompt and resource counts from its last discovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<u32>,
    /// See `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<u32>,
    /// See `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<u32>,
    /// The MCP revision negotiated with it (`2025-11-25`, ...), while connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// What its last discovery found wrong (a malformed tool left out, a list that failed
    /// or timed out), one sentence each; empty when all is well.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// The sessions using this process or connection.
    #[serde(default)]
    pub sessions: Vec<SessionId>,
    /// Seconds since the last session using it let go, while none uses it (it is kept warm
    /// for the next one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_secs: Option<u64>,
    /// While idle: seconds until it stops for being unused; absent when it is kept for as
    /// long as the daemon runs (`keepWarm: "always"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stops_in_secs: Option<u64>,
    /// Its entry's `keepWarm`, when not the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_warm: Option<KeepWarm>,
    /// The roots it was given, when it asked for them: such a server is shared only between
    /// sessions with the same roots (one copy per set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<String>,
    /// What it is told its clients answer, when that is less than everything: the copy of
    /// clients of that kind (`gemctl mcp serve --confirm client` for a client that declares
    /// no elicitation or sampling), which may list fewer tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub told: Option<crate::session::Declares>,
    /// While idle: resident memory of its process group in bytes (stdio, where the system
    /// tells: Linux), what counts against the idle-memory budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Its tool-definition pins (absent while it has listed nothing, or with pinning `off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins: Option<crate::pins::PinStatus>,
    /// What it runs against what was recorded on its first start (local servers with
    /// artifact pinning on, once it was resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Box<crate::pins::ArtifactStatus>>,
    /// What it costs and how it is used, when `mcp/listServers` was asked for `usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ServerUsage>,
    /// Why it has no process when that is no failure (`state` is `disconnected` then): not
    /// started yet, or stopped on purpose; `lastError` says how and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_rest: Option<AtRest>,
}

impl ServerStatus {
    /// Whether it has a live process or connection: connected, or connecting.
    pub fn is_live(&self) -> bool {
        matches!(self.state, ServerState::Connected | ServerState::Connecting)
    }

    /// Whether it is kept warm: live, and no session uses it. `gemctl status` and `gemctl
    /// doctor` count idle servers with this one test.
    pub fn is_kept_warm(&self) -> bool {
        self.is_live() && self.idle_secs.is_some()
    }
}

/// Why a server an entry runs as has no process, when that is no failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum AtRest {
    /// Nothing started it since the daemon started: a session's first call or `gemctl mcp
    /// start` does.
    NotStarted,
    /// Stopped on purpose: idle past `--mcp-linger` or the memory budget, `keepWarm: never`,
    /// `gemctl mcp stop`, or no configuration runs it any more.
    Stopped,
}

/// A server's resources and calls (`mcp/listServers` with `usage`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServerUsage {
    /// CPU time its process tree used so far, user and system, in milliseconds (its process
    /// group: a stdio server and what it started; where the system tells: Linux). A client
    /// gets CPU% from two readings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// Resident memory of its process tree in bytes (as `cpuMs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Tool calls sent to this process or connection since it was first started.
    pub calls: u64,
    /// Those that failed: an error result (`isError`), an error answer, a timeout or a lost
    /// connection.
    pub errors: u64,
    /// Calls in the last 60 seconds.
    pub calls_last_minute: u32,
    /// Errors in the last 60 seconds.
    pub errors_last_minute: u32,
    /// The median duration of its tool calls since the daemon started, in microseconds,
    /// estimated from the `mcp.client.operation.duration` histogram's buckets (linear within
    /// a bucket, as Prometheus' `histogram_quantile`) of the servers of this name; only while
    /// telemetry is on (OTLP export, or `--metrics-listen`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<u64>,
    /// The 99th percentile, as `p50Us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<u64>,
}

/// `mcp/listServers`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ListServersParams {
    /// One session's servers (every configured one, running or not); without it, every
    /// running server of the daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// Add each running server's `usage` (its process tree read from the system: one pass
    /// over the process table).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage: bool,
}

/// Result of `mcp/listServers` and `mcp/start`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ListServersResult {
    /// Servers, in settings order (user, workspace, …) then by name.
    pub servers: Vec<ServerStatus>,
    /// What to read before the list, for a session's list: the folder is untrusted (and how
    /// to trust it), or a settings file has errors (each with its position).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `mcp/start`: the session needs its servers now.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StartParams {
    /// The session.
    pub session: SessionId,
    /// Wait until every server has settled (connected, or failed its first attempt).
    #[serde(default)]
    pub wait: bool,
}

/// `mcp/restart` and `mcp/logs`: one server by name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServerParams {
    /// The session whose server `name` means; without it, the running server of that name
    /// (an error if several sessions run different ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// The server's name.
    pub name: String,
}

/// `mcp/logs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogsParams {
    /// Which server.
    #[serde(flatten)]
    pub server: ServerParams,
    /// At most this many of the newest lines [default: all that are kept].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u32>,
}

/// One line of a server's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    /// When (RFC 3339).
    pub at: String,
    /// `stderr` (the child's), `stdout` (non-JSON-RPC output, ignored), `message` (the
    /// server's `notifications/message`: `[level] logger: data`) or `geminid` (what the
    /// supervisor did).
    pub stream: String,
    /// The text, without its newline.
    pub text: String,
}

/// Result of `mcp/logs`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogsResult {
    /// The server's name.
    pub name: String,
    /// Oldest first.
    pub lines: Vec<LogLine>,
    /// Lines dropped because the log is bounded.
    pub dropped: u64,
}

/// `mcp/callTool`: call one tool on one of the session's servers by its MCP name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallToolParams {
    /// The session.
    pub session: SessionId,
    /// The server's name.
    pub server: String,
    /// The tool's name as the server lists it.
    pub tool: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,
    /// The caller is the person (as `gemctl call`): see `tools/call`'s `confirmed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirmed: bool,
}

/// Payload of the `mcp/serverState` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServerStateChanged {
    /// The server, as it is now.
    #[serde(flatten)]
    pub server: ServerStatus,
    /// The state it left.
    pub previous: ServerState,
}

/// Payload of the `elicitation/requested` and `sampling/requested` events: a server's request
/// for the person (or model) behind one session's call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServerAsked {
    /// The ask's id, for `asks/respond`.
    pub id: String,
    /// The session whose call caused it.
    pub session: String,
    /// That call's id, when the caller gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool called (its fully qualified name).
    pub tool: String,
    /// The server's name.
    pub server: String,
    /// What it asks, in its words.
    pub message: String,
    /// When it is declined unanswered (milliseconds since the Unix epoch).
    pub deadline_ms: u64,
}

/// Where a long-running call (an MCP task) stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum TaskState {
    /// The server is working on it.
    Working,
    /// The server waits for an answer (an elicitation, sampling, roots) to go on.
    InputRequired,
    /// It finished; `result` is its `CallToolResult`.
    Completed,
    /// It failed; `error` says why.
    Failed,
    /// It was cancelled.
    Cancelled,
    /// Nobody can follow it any more (its server forgot it, or it was stopped for good).
    Lost,
}

impl TaskState {
    /// Whether it can change no more.
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Working | Self::InputRequired)
    }
}

/// A tool call a server turned into a task (the 2026-07-28 tasks extension), followed by the
/// daemon to its end and kept in its database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpTask {
    /// Its id for `tasks/cancel`: the server's identity (12 hex digits), `/`, the server's
    /// task id.
    pub id: String,
    /// The session whose call it is.
    pub session: String,
    /// That call's id, when the caller gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool (its fully qualified name).
    pub tool: String,
    /// The server's name.
    pub server: String,
    /// The server's task id.
    pub task_id: String,
    /// Where it stands.
    pub state: TaskState,
    /// The server's words about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it began and when it last changed (milliseconds since the Unix epoch).
    pub created_ms: u64,
    /// See `created_ms`.
    pub updated_ms: u64,
    /// For a completed task: its `CallToolResult`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// For a failed or lost one: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `tasks/list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TasksListParams {
    /// The session.
    pub session: String,
}

/// `tasks/list`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TasksListResult {
    /// The session's tasks, newest first.
    pub tasks: Vec<McpTask>,
}

/// `tasks/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TasksCancelParams {
    /// The session.
    pub session: String,
    /// The task's `id`.
    pub id: String,
}

/// `tasks/cancel`'s result: the task as it stands after the server was asked (cancellation
/// is the server's to carry out; `tasks/list` shows when it has).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TasksCancelResult {
    /// The task.
    pub task: McpTask,
}

/// `elicitation/respond` and `sampling/respond`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServerAskRespondParams {
    /// The ask's id (from the `*/requested` event or `asks/notice`).
    pub id: String,
    /// The answer: MCP's `ElicitResult` (`{action, content?}`) or `CreateMessageResult`
    /// (`{role, content, model, stopReason?}`).
    pub result: serde_json::Value,
    /// The session the answer is meant for: refused when the ask is another's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// `elicitation/respond`'s and `sampling/respond`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ServerAskRespondResult {
    /// The session it was answered for.
    pub session: String,
}

/// Payload of the `mcp/resourceUpdated` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceUpdated {
    /// The server's name.
    pub server: String,
    /// The first 12 hex digits of its identity.
    pub identity: String,
    /// The resource.
    pub uri: String,
}

/// Payload of the `catalog/changed` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CatalogChanged {
    /// The server's name (as the session that started it calls it).
    pub server: String,
    /// The first 12 hex digits of its identity.
    pub identity: String,
    /// The sessions using it.
    pub sessions: Vec<SessionId>,
    /// Counts after the change.
    pub tools: u32,
    /// See `tools`.
    pub prompts: u32,
    /// See `tools`.
    pub resources: u32,
}
