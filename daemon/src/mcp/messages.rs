//! Servers' log messages (`notifications/message`) as they were sent, for the gateway's
//! clients (besides the line each leaves in the server's log). A log message names no
//! request: each is told with the calls in flight on its connection when it came (routed as
//! it comes off the wire, `order`, so before the answer of a call it came before), which is
//! what a client of 2026-07-28 that asks a call's messages gets them by.

use super::callers::Caller;

/// A server's log message as it sent it.
#[derive(Debug)]
#[allow(deprecated, reason = "logging is SEP-2577-deprecated; servers of the earlier eras use it")]
pub(crate) struct ServerMessage {
    /// The server's identity.
    pub identity: String,
    /// The message.
    pub params: rmcp::model::LoggingMessageNotificationParam,
    /// The calls in flight on the server's connection when it came.
    pub calls: Vec<Caller>,
}

/// Log messages kept for a gateway client that falls behind (it misses older ones).
pub(super) const KEPT: usize = 256;
