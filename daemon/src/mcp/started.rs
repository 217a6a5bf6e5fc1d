//! A server's start and restart as spans of their own when spans are exported: `start {name}`
//! from an attempt's beginning (spawning or reaching it) until it is connected with its first
//! catalog listed, or until the attempt failed, parked the server, was restarted or stopped;
//! `restart {name}` once it has been connected before. Attributes: `mcp.server.name`,
//! `network.transport` (`pipe` for a child's stdio, `tcp` for a remote server), the attempt
//! (`geminid.mcp.server.attempt`: 1 for the first since the last start someone asked for or
//! the last connection), the outcome (`geminid.mcp.server.start.outcome`: `connected`, or the
//! failure's `error.type`). A trace of its own: a start outlives the call that asked for it.

use geminid_protocol::mcp::ServerState;
use opentelemetry::KeyValue;
use parking_lot::Mutex;

use crate::telemetry::Active;

/// The start under way, if any, and whether the server was ever connected.
#[derive(Debug, Default)]
pub(crate) struct Starts {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    span: Option<Active>,
    connected_before: bool,
}

/// What keeps a parked server from starting, as `error.type`.
pub(crate) fn parked_why(state: ServerState) -> &'static str {
    match state {
        ServerState::NeedsAuth => "needs_auth",
        ServerState::Blocked => "artifact_held",
        ServerState::CrashLoop => "crash_loop",
        _ => "parked",
    }
}

impl Starts {
    /// An attempt to start the server `name` over `transport` begins, the `attempt`th in a
    /// row; one still under way ended as `restarted`.
    pub(crate) fn begin(&self, name: &str, transport: &'static str, attempt: u32) {
        if crate::telemetry::on().is_none() {
            return;
        }
        let mut inner = self.inner.lock();
        if let Some(old) = inner.span.take() {
            end(&old, Some("restarted"));
        }
        let verb = if inner.connected_before { "restart" } else { "start" };
        inner.span = crate::telemetry::own(
            || format!("{verb} {name}"),
            || {
                vec![
                    KeyValue::new("mcp.server.name", name.to_owned()),
                    KeyValue::new("network.transport", transport),
                    KeyValue::new("geminid.mcp.server.attempt", i64::from(attempt)),
                ]
            },
        );
    }

    /// The attempt under way, if any, ended: connected (`None`) or failed with `error`.
    pub(crate) fn ended(&self, error: Option<&'static str>) {
        if crate::telemetry::on().is_none() {
            return;
        }
        let mut inner = self.inner.lock();
        if error.is_none() {
            inner.connected_before = true;
        }
        if let Some(span) = inner.span.take() {
            end(&span, error);
        }
    }
}

fn end(span: &Active, error: Option<&'static str>) {
    let outcome = error.unwrap_or("connected");
    span.set(KeyValue::new("geminid.mcp.server.start.outcome", outcome));
    if let Some(e) = error {
        span.failed(e, e);
    }
}
