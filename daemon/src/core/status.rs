//! `daemon/status`, and the connections it counts.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use geminid_protocol::daemon::{SessionCounts, StatusResult};
use geminid_protocol::mcp::ServerState;
use geminid_protocol::{DAEMON_VERSION, PROTOCOL_VERSION};

use super::Core;
use crate::clock;
use crate::services::Services;
use crate::telemetry::DaemonGauges;

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

/// What the telemetry's gauges read of the daemon (`/metrics`, OTLP): servers by state, the
/// idle servers' memory and budget, the definitions the running servers listed, pending asks.
/// Nothing once the daemon is gone.
pub(crate) fn gauges(
    services: &Arc<Services>,
) -> impl Fn() -> DaemonGauges + Send + Sync + 'static {
    let services = Arc::downgrade(services);
    move || {
        let Some(s) = services.upgrade() else { return DaemonGauges::default() };
        let servers = s.mcp.status().list_all();
        let mut by_state: Vec<(&'static str, u64)> = Vec::new();
        let mut definitions = [("tool", 0), ("prompt", 0), ("resource", 0)];
        for server in &servers {
            let state = state_name(server.state);
            match by_state.iter_mut().find(|(s, _)| *s == state) {
                Some((_, n)) => *n += 1,
                None => by_state.push((state, 1)),
            }
            for (i, n) in [server.tools, server.prompts, server.resources].into_iter().enumerate() {
                definitions[i].1 += u64::from(n.unwrap_or(0));
            }
        }
        let (idle_memory, idle_memory_budget) = s.mcp.idle().memory();
        DaemonGauges {
            servers: by_state,
            idle_memory,
            idle_memory_budget,
            definitions,
            pending_asks: s.asks.pending_count() as u64,
        }
    }
}

/// A state's wire name.
fn state_name(state: ServerState) -> &'static str {
    match state {
        ServerState::Disabled => "disabled",
        ServerState::Blocked => "blocked",
        ServerState::Connecting => "connecting",
        ServerState::Connected => "connected",
        ServerState::Disconnected => "disconnected",
        ServerState::NeedsAuth => "needs-auth",
        ServerState::CrashLoop => "crash-loop",
    }
}
