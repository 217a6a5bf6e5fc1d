//! Parameter and result types of every method. On the wire, field names are camelCase and
//! `params` is one JSON object (the `[object]` form that jsonrpsee clients send is accepted too).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A session's id (a UUIDv7 string, so ids sort by creation time).
pub type SessionId = String;

/// Environment variables sent by a client. Held in the daemon's memory only, never persisted.
pub type ClientEnv = BTreeMap<String, String>;

/// Who is calling, for logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    /// Program name, e.g. `gemctl`.
    pub name: String,
    /// Program version.
    pub version: String,
}

/// `daemon/hello`: the first call of every client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloParams {
    /// The protocol version the client speaks.
    pub protocol_version: u32,
    /// The client's name and version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientInfo>,
}

/// Result of `daemon/hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloResult {
    /// The protocol version the daemon speaks.
    pub protocol_version: u32,
    /// The daemon's release version.
    pub daemon_version: String,
    /// The daemon's process id.
    pub pid: u32,
    /// The largest message the daemon reads or sends, in bytes (its `--max-message-size`);
    /// a client refuses to send a larger request rather than have it answered with id null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_size: Option<u32>,
}

/// Result of `daemon/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    /// The daemon's release version.
    pub version: String,
    /// The protocol version it speaks.
    pub protocol_version: u32,
    /// Its process id.
    pub pid: u32,
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
    /// Seconds since it started.
    pub uptime_secs: u64,
    /// The control socket it serves.
    pub socket: String,
    /// Where its database lives.
    pub data_dir: String,
    /// Session counts.
    pub sessions: SessionCounts,
    /// Open client connections, this one included.
    pub connections: u32,
    /// Live `events/subscribe` subscriptions.
    pub subscribers: u32,
    /// The limits it enforces.
    pub limits: Limits,
    /// What went wrong that the user should know about (a damaged database found at start,
    /// writes failing now); empty when all is well.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Session counts in `daemon/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCounts {
    /// Every session in the database.
    pub total: u32,
    /// Sessions with at least one attached connection.
    pub attached: u32,
}

/// Limits reported in `daemon/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Most client connections served at once.
    pub max_connections: u32,
    /// Largest JSON-RPC message accepted or sent, in bytes.
    pub max_message_size: u32,
    /// Events buffered per subscriber before it is dropped as too slow.
    pub subscriber_buffer: u32,
}

/// Result of `daemon/shutdown`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShutdownResult {
    /// The pid that is shutting down, so a client can wait for it to exit.
    pub pid: u32,
}

/// `session/create`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCreateParams {
    /// Absolute path of the workspace directory; it must exist.
    pub workspace: String,
    /// The client's environment, used for `${VAR}` expansion and as the inherited environment
    /// of the session's stdio servers. Memory only. Absent: the daemon's own environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<ClientEnv>,
    /// Return the workspace's default session (creating it if there is none) instead of a new
    /// one. This is what `gemctl` does when no `--session` is given.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reuse_default: bool,
}

/// `session/attach`: attach an existing session to this connection.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionAttachParams {
    /// The session.
    pub id: SessionId,
    /// The client's environment, as in `session/create`; it replaces the one held before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<ClientEnv>,
}

/// Methods that name one session: `session/get`, `session/detach`, `session/close`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionIdParams {
    /// The session.
    pub id: SessionId,
}

/// `session/list`: every field optional.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionListParams {
    /// Only sessions of this workspace (absolute path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Continue after this cursor (a `nextCursor` from the previous page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Page size; default and maximum [`SESSION_LIST_MAX_PAGE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Largest `session/list` page.
pub const SESSION_LIST_MAX_PAGE: u32 = 500;

/// Result of `session/list`, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionListResult {
    /// This page.
    pub sessions: Vec<Session>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Where a session's environment comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EnvSource {
    /// A client sent its environment (held in memory).
    Client,
    /// No client sent one since the daemon started: the daemon's own is used.
    Daemon,
}

/// A session: one agent front-end's view of the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// Its id.
    pub id: SessionId,
    /// Canonical absolute path of its workspace.
    pub workspace: String,
    /// Whether it is its workspace's default session.
    pub is_default: bool,
    /// When it was created (RFC 3339, UTC).
    pub created_at: String,
    /// When a client last created, attached or detached it (RFC 3339, UTC).
    pub last_seen_at: String,
    /// Connections attached to it now.
    pub attached_connections: u32,
    /// Where its environment comes from (the values are never returned).
    pub env_source: EnvSource,
    /// Session-scoped overrides.
    pub state: SessionState,
}

/// Session-scoped state that survives restarts. Later subsystems add their parts here.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionState {
    /// MCP servers disabled for this session only.
    pub disabled_servers: Vec<String>,
    /// Tool calls approved for the rest of this session ("always allow").
    pub approvals: Vec<String>,
    /// Skills activated in this session.
    pub activated_skills: Vec<String>,
}

/// `events/subscribe`: every field optional.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventsSubscribeParams {
    /// Only events about this session (daemon-wide events are always delivered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// Only these kinds (e.g. `["session/closed"]`); absent means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
}
