//! Servers' log messages (`notifications/message`) as they were sent, for the gateway's
//! clients (besides the line each leaves in the server's log).

use std::sync::Arc;

use super::Supervisor;

/// A server's log message as it sent it.
#[derive(Debug)]
#[allow(deprecated, reason = "logging is SEP-2577-deprecated; servers of the earlier eras use it")]
pub(crate) struct ServerMessage {
    /// The server's identity.
    pub identity: String,
    /// The message.
    pub params: rmcp::model::LoggingMessageNotificationParam,
}

/// Log messages kept for a gateway client that falls behind (it misses older ones).
pub(super) const KEPT: usize = 256;

impl Supervisor {
    /// Servers' log messages from now on.
    pub(crate) fn messages(&self) -> tokio::sync::broadcast::Receiver<Arc<ServerMessage>> {
        self.messages.subscribe()
    }

    /// A server sent a log message.
    #[allow(
        deprecated,
        reason = "logging is SEP-2577-deprecated; servers of the earlier eras use it"
    )]
    pub(super) fn message(
        &self,
        identity: &str,
        params: &rmcp::model::LoggingMessageNotificationParam,
    ) {
        if self.messages.receiver_count() > 0 {
            let m = ServerMessage { identity: identity.to_owned(), params: params.clone() };
            let _ = self.messages.send(Arc::new(m));
        }
    }
}
