//! Shutdown: the first reason wins, the shutdown token is cancelled (new work is answered
//! `shuttingDown`), and at the end of the grace the calls still running are cut.

use geminid_protocol::event::{EventBody, ShuttingDown};
use tokio_util::sync::CancellationToken;

use super::Core;

impl Core {
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
}
