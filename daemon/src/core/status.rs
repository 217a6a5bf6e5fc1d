//! `daemon/status`, and the connections it counts.

use std::sync::atomic::Ordering;

use geminid_protocol::daemon::{SessionCounts, StatusResult};
use geminid_protocol::{DAEMON_VERSION, PROTOCOL_VERSION};

use super::Core;
use crate::clock;

impl Core {
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

    /// Count a new connection.
    pub(crate) fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Forget a connection.
    pub(crate) fn connection_closed(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
