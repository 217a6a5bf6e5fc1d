//! The accept loop: one jsonrpsee service per accepted local-socket connection (HTTP/1.1 with
//! WebSocket upgrade), a connection limit, a peer check, and graceful shutdown.

pub(crate) mod lifecycle;
pub(crate) mod listen;

use std::sync::Arc;
use std::time::Duration;

use interprocess::local_socket::tokio::Stream;
use interprocess::local_socket::traits::tokio::Listener as _;
use jsonrpsee::server::middleware::rpc::RpcServiceBuilder;
use jsonrpsee::server::{Server, ServerConfig, serve_with_graceful_shutdown, stop_channel};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

use crate::core::{Core, SHUTDOWN_GRACE};
use crate::rpc::{self, Intake};
use crate::session::ConnId;
#[cfg(unix)]
pub(crate) use listen::adopt;
pub(crate) use listen::{Bound, bind, lock_path};

/// Default limit of client connections served at once.
pub(crate) const DEFAULT_MAX_CONNECTIONS: u32 = 1024;
/// How long the answers to calls cut at the end of the grace get to go out.
const ANSWER_GRACE: Duration = Duration::from_secs(2);
/// How long subscribers get to receive the shutting-down event before connections close.
const SUBSCRIBER_DRAIN: Duration = Duration::from_secs(1);
/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serve `bound` until the core's shutdown token fires, then shut down gracefully: stop
/// accepting (the socket file is removed), let in-flight calls finish within
/// [`SHUTDOWN_GRACE`], and flush the database.
pub(crate) async fn run(core: Arc<Core>, bound: Bound) -> anyhow::Result<()> {
    let limits = core.limits();
    let config = ServerConfig::builder()
        .max_request_body_size(limits.max_message_size)
        .max_response_body_size(limits.max_message_size)
        .max_connections(limits.max_connections)
        .set_message_buffer_capacity(limits.subscriber_buffer)
        .build();
    let methods = rpc::methods(core.clone())?;
    let (rpc_core, served) = (core.clone(), methods.clone());
    let svc_builder = Server::builder()
        .set_config(config)
        .set_rpc_middleware(
            RpcServiceBuilder::new()
                .layer_fn(move |s| Intake::new(s, served.clone(), rpc_core.clone())),
        )
        .to_service_builder();
    let (stop_handle, server_handle) = stop_channel();
    let slots = Arc::new(Semaphore::new(usize::try_from(limits.max_connections)?));
    let tracker = TaskTracker::new();
    let Bound { listener, socket, lock } = bound;
    let mut next_id: u32 = 0;
    // What the gateway, on a connection that upgrades to it, is given (not the core).
    let services = core.services().clone();

    loop {
        let stream = tokio::select! {
            () = core.shutdown_token().cancelled() => break,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        if let Err(reason) = peer_allowed(&stream) {
            tracing::warn!(%reason, "refused a connection");
            continue;
        }
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!(limit = limits.max_connections, "connection limit reached; refusing");
            tracker.spawn(refuse_busy(stream, limits.max_connections));
            continue;
        };
        next_id = next_id.wrapping_add(1).max(1);
        let conn = ConnId(next_id);
        let mut svc =
            svc_builder.clone().connection_id(next_id).build(methods.clone(), stop_handle.clone());
        // hyper returns as soon as a connection upgrades to WebSocket; the WebSocket session
        // ends when this resolves. Only both together mean the client is gone.
        let session_closed = svc.on_session_closed();
        let stopped = stop_handle.clone().shutdown();
        let (core, services) = (core.clone(), services.clone());
        let fd = raw_fd(&stream);
        core.connection_opened();
        core.services().sessions.connection_opened(conn);
        tracker.spawn(async move {
            tracing::debug!(conn = conn.0, "connection opened");
            let gateway = TaskTracker::new();
            let routed =
                crate::gateway::route::Routed::new(svc, services, conn, gateway.clone(), fd);
            let serve = serve_with_graceful_shutdown(stream, routed, stopped);
            let (served, ()) = tokio::join!(serve, session_closed);
            // An upgraded connection serving the gateway lasts until its client goes.
            gateway.close();
            gateway.wait().await;
            if let Err(e) = served {
                tracing::debug!(conn = conn.0, error = %e, "connection ended with an error");
            }
            core.sign_ins().connection_closed(conn);
            let unattached = core.services().sessions.connection_closed(conn).await;
            core.sessions_unattached(&unattached);
            core.connection_closed();
            tracing::debug!(conn = conn.0, "connection closed");
            drop(permit);
        });
    }

    // Stop accepting: dropping the listener removes the socket file, so new clients see
    // "not running" at once instead of waiting in the backlog.
    drop(listener);
    // Every subscription ends once it has forwarded the shutting-down event; let them do so
    // before connections close, or a subscriber could miss it.
    let drained = async {
        while core.services().events.subscriber_count() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let _ = tokio::time::timeout(SUBSCRIBER_DRAIN, drained).await;
    let _ = server_handle.stop();
    tracker.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait()).await.is_err() {
        // Every call still running is answered `shuttingDown` now; the connections close
        // once those answers are out.
        tracing::warn!(grace = ?SHUTDOWN_GRACE, "calls still running after the grace period; answering them shuttingDown");
        core.cut_calls();
        if tokio::time::timeout(ANSWER_GRACE, tracker.wait()).await.is_err() {
            tracing::warn!("connections still open after the last answers; closing them");
        }
    }
    core.flush_recent().await;
    core.services().mcp.lifecycle().shutdown().await;
    // Every write a client was told about is flushed already; a failure here (a full disk)
    // loses only bookkeeping, and is said.
    if let Err(e) = core.store().flush().await {
        tracing::error!(error = %e, "the last flush of the database failed");
    }
    if let Err(e) = core.services().audit.sync() {
        tracing::error!(error = %e, "the last sync of the audit log failed");
    }
    tracing::info!(socket = %socket.display(), "stopped");
    // The lock is held until the process exits: the database and the last tasks are released
    // after this (with the runtime), and until then a daemon started on this socket must find
    // this one still running (and `gemctl daemon stop` keeps waiting), not a locked database.
    std::mem::forget(lock);
    Ok(())
}

/// Answer an over-limit connection with an HTTP 503 the client can show, then close it.
async fn refuse_busy(mut stream: Stream, limit: u32) {
    let body = format!("geminid: too many connections (limit {limit}); try again later\n");
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    // Read the request first (briefly), so the client is not mid-write when we close and
    // actually sees the 503 rather than a broken pipe.
    let mut request = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_millis(500), stream.read(&mut request)).await;
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(reply.as_bytes())).await;
    let _ = stream.shutdown().await;
}

/// The connection's descriptor, on which the gateway takes a client's descriptors.
#[cfg(unix)]
fn raw_fd(stream: &Stream) -> Option<i32> {
    use std::os::fd::AsRawFd as _;
    #[allow(irrefutable_let_patterns, reason = "one kind of local socket on Unix")]
    let Stream::UdSocket(s) = stream else { return None };
    Some(s.inner().as_raw_fd())
}

#[cfg(windows)]
fn raw_fd(_stream: &Stream) -> Option<i32> {
    None
}

/// Only the daemon's own user may connect.
#[cfg(unix)]
fn peer_allowed(stream: &Stream) -> Result<(), String> {
    use interprocess::local_socket::traits::StreamCommon as _;
    let me = nix::unistd::geteuid().as_raw();
    let creds = stream.peer_creds().map_err(|e| format!("cannot read peer credentials: {e}"))?;
    match creds.euid() {
        Some(uid) if uid == me => Ok(()),
        Some(uid) => {
            Err(format!("peer uid {uid} (pid {:?}) is not this daemon's uid {me}", creds.pid()))
        }
        None => Err("the peer's uid is unknown".to_owned()),
    }
}

/// Named pipes are created with the default DACL, which admits only the owner and admins.
#[cfg(windows)]
fn peer_allowed(_stream: &Stream) -> Result<(), String> {
    Ok(())
}
