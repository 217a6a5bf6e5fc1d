//! `calls/*`: every tool call in flight in the daemon, whoever made it (a session's front-end,
//! `gemctl call`, the gateway), and cancelling one of them. What `gemctl top` shows.

use serde::{Deserialize, Serialize};

use crate::common::SessionId;

/// `calls/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallsListParams {
    /// Only this session's calls; without it, every session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
}

/// `calls/list`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallsListResult {
    /// The calls in flight, oldest first.
    pub calls: Vec<CallInFlight>,
}

/// One tool call in flight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallInFlight {
    /// The daemon's number for it (for `calls/cancel`); unique while the daemon runs.
    pub id: u64,
    /// The session calling.
    pub session: SessionId,
    /// The caller's `callId`, if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool's fully qualified name.
    pub tool: String,
    /// Its server's entry name (empty for a custom tool).
    pub server: String,
    /// Who called: `tools/call`, `mcp/callTool` or `gateway`.
    pub origin: String,
    /// Milliseconds since the call began.
    pub elapsed_ms: u64,
    /// What the server last reported (`tools/progress`), if it reported anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<CallProgress>,
}

/// A call's last progress notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallProgress {
    /// Progress so far.
    pub progress: f64,
    /// The total, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// The server's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `calls/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallsCancelParams {
    /// The call's `id` in `calls/list`.
    pub id: u64,
}

/// `calls/cancel`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CallsCancelResult {
    /// Whether it was in flight (it now fails with `cancelled`, and its server was sent
    /// `notifications/cancelled`).
    pub cancelled: bool,
}
