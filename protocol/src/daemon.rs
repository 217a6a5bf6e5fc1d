//! `daemon/*`: the handshake, status and lifecycle.

use serde::{Deserialize, Serialize};

/// Who is calling, for logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClientInfo {
    /// Program name, e.g. `gemctl`.
    pub name: String,
    /// Program version.
    pub version: String,
}

/// `daemon/hello`: the first call of every client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionCounts {
    /// Every session in the database.
    pub total: u32,
    /// Sessions with at least one attached connection.
    pub attached: u32,
}

/// Limits reported in `daemon/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ShutdownResult {
    /// The pid that is shutting down, so a client can wait for it to exit.
    pub pid: u32,
}

/// `daemon/doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DoctorParams {
    /// The session whose folder, configuration and servers are checked.
    pub session: crate::common::SessionId,
}

/// Result of `daemon/doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DoctorResult {
    /// What was checked, in order.
    pub findings: Vec<Finding>,
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// What was checked: `socket`, `version`, `secrets`, `trust`, `config`, `command`,
    /// `remote`, `auth`, `server`.
    pub check: String,
    /// How it went.
    pub status: FindingStatus,
    /// What was found.
    pub message: String,
    /// What fixes it, when something does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// How a check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum FindingStatus {
    /// Fine.
    Ok,
    /// Works, but something may not be what the user wants.
    Warning,
    /// Broken.
    Error,
}
