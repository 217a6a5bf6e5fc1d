//! The gateway over streamable HTTP, for clients that only speak HTTP: `gemctl mcp serve --http
//! 127.0.0.1:PORT` asks the daemon (on an upgraded connection, as for stdio) to listen there
//! for as long as that connection lasts. Loopback addresses only; every request needs the
//! bearer token kept in `<data dir>/gateway-token` (0600, made on first use and shown once);
//! `Host` must be a loopback name (rmcp's DNS-rebinding check), and a request that carries an
//! `Origin` must come from a loopback origin (a web page elsewhere is refused 403, token or not,
//! as the MCP transport requires). Each HTTP session is a gateway over the same daemon session.
//!
//! Any local user can open connections to the port, so they are bounded without letting one
//! who lacks the token deny the one who has it: a connection is kept for the token holder only
//! once a request on it carried the token; until then it is one of a small pool of its own,
//! whose oldest is closed to make room (`admit.rs`). A request's headers must come within
//! [`HEADER_TIMEOUT`], and a connection on which nothing moves for [`IDLE_TIMEOUT`] is closed
//! (an open event stream carries a keep-alive every 15 s). The token is checked before any work.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

use super::admit::{Admission, MAX_CONNECTIONS};
use super::{Gateway, Serving};
use crate::secrets::Secret;
use crate::services::Services;
use crate::session::ConnId;

/// The token's file in the daemon's data directory.
pub(crate) const TOKEN_FILE: &str = "gateway-token";

/// How long a client has to send a request's headers; a half-sent request is closed then.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection on which no byte moved for this long is closed.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the accept loop pauses when accepting failed and no connection could be shed
/// (out of descriptors for some other reason): it would otherwise spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Why the HTTP gateway cannot listen, or has no token.
#[derive(Debug, thiserror::Error)]
pub(super) enum HttpError {
    /// `http=` is not an address.
    #[error("{0} is not an address and port (e.g. 127.0.0.1:8765)")]
    NotAnAddress(String),
    /// `http=` is not a loopback address.
    #[error("{0} is not a loopback address: the gateway listens on 127.0.0.1 or ::1 only")]
    NotLoopback(SocketAddr),
    /// The address is taken, or not ours to bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The token file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadToken {
        /// The token file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A new token could not be written.
    #[error(transparent)]
    WriteToken(#[from] crate::config::write::WriteError),
}

/// Bind `addr`, which must be a loopback address.
pub(super) async fn bind(addr: &str) -> Result<TcpListener, HttpError> {
    let parsed: SocketAddr = addr.parse().map_err(|_| HttpError::NotAnAddress(addr.to_owned()))?;
    if !parsed.ip().is_loopback() {
        return Err(HttpError::NotLoopback(parsed));
    }
    TcpListener::bind(parsed).await.map_err(|source| HttpError::Bind { addr: parsed, source })
}

/// The token, and whether it was made now (then it is shown to the user once).
fn token(data_dir: &Path) -> Result<(Secret<String>, bool, PathBuf), HttpError> {
    let file = data_dir.join(TOKEN_FILE);
    match std::fs::read_to_string(&file) {
        Ok(t) if !t.trim().is_empty() => {
            return Ok((Secret::new(t.trim().to_owned()), false, file));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(HttpError::ReadToken { path: file, source }),
    }
    let made = format!("gmd_{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    crate::config::write::atomic_write(&file, &format!("{made}\n"), Some(0o600))?;
    Ok((Secret::new(made), true, file))
}

/// Equal without saying where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorized(req: &Request<Incoming>, token: &Secret<String>) -> bool {
    req.headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| same(given.trim().as_bytes(), token.expose().as_bytes()))
}

/// The `Origin` a request carries when it is not a loopback one (a web page elsewhere, `null`,
/// or something unreadable); none when it has no `Origin` (a local client) or a loopback one.
fn foreign_origin(req: &Request<Incoming>) -> Option<String> {
    let origin = req.headers().get(hyper::header::ORIGIN)?;
    let Ok(text) = origin.to_str() else { return Some("(unreadable)".to_owned()) };
    let loopback = text.parse::<hyper::Uri>().ok().and_then(|u| {
        let host = u.host()?.trim_start_matches('[').trim_end_matches(']').to_owned();
        Some(
            host.eq_ignore_ascii_case("localhost")
                || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()),
        )
    });
    (loopback != Some(true)).then(|| text.to_owned())
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn forbidden(origin: &str) -> Response<Body> {
    let text = format!(
        "geminid's gateway serves local clients only; a request from origin {origin} is refused\n"
    );
    let mut r = Response::new(Full::new(Bytes::from(text)).boxed());
    *r.status_mut() = StatusCode::FORBIDDEN;
    r
}

/// A stream that notes when a byte last moved either way (milliseconds since `epoch`).
struct Watched<S> {
    inner: S,
    epoch: Instant,
    last: Arc<AtomicU64>,
}

impl<S> Watched<S> {
    fn touch(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Relaxed);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Resolves once no byte has moved on the connection for [`IDLE_TIMEOUT`].
async fn idle(epoch: Instant, last: Arc<AtomicU64>) {
    loop {
        let quiet =
            epoch.elapsed().saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
        if quiet >= IDLE_TIMEOUT {
            return;
        }
        tokio::time::sleep(IDLE_TIMEOUT - quiet).await;
    }
}

fn unauthorized() -> Response<Body> {
    let text = "geminid's gateway needs `Authorization: Bearer <token>`; the token is in the \
                daemon's data directory, file gateway-token\n";
    let mut r = Response::new(Full::new(Bytes::from(text)).boxed());
    *r.status_mut() = StatusCode::UNAUTHORIZED;
    r.headers_mut()
        .insert(hyper::header::WWW_AUTHENTICATE, hyper::header::HeaderValue::from_static("Bearer"));
    r
}

fn busy() -> Response<Body> {
    let text = format!(
        "geminid's gateway serves {MAX_CONNECTIONS} connections with the token at once; close \
         some (a connection idle for {}s closes by itself)\n",
        IDLE_TIMEOUT.as_secs()
    );
    let mut r = Response::new(Full::new(Bytes::from(text)).boxed());
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r
}

/// Serve HTTP on `listener` until `control` (the upgraded connection that asked) closes or the
/// daemon shuts down. The first line written on `control` says where, and the token if new.
/// The token (read, or made) and what gemctl is told on `control`: the URL, the token file,
/// and the token when it is new; or why there is none. `None`: no token, or gemctl went.
async fn announce<C: AsyncWrite + Unpin>(
    data_dir: &Path,
    listener: &TcpListener,
    control: &mut C,
) -> Option<(Secret<String>, serde_json::Value)> {
    let (token, new, file) = match token(data_dir) {
        Ok(t) => t,
        Err(why) => {
            let line = json!({ "error": why.to_string() }).to_string();
            let _ = control.write_all(format!("{line}\n").as_bytes()).await;
            return None;
        }
    };
    let local = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let mut said =
        json!({ "url": format!("http://{local}/mcp"), "tokenFile": file.display().to_string() });
    if new {
        said["token"] = json!(token.expose());
    }
    control.write_all(format!("{said}\n").as_bytes()).await.ok()?;
    Some((token, said))
}

pub(super) async fn serve<C: AsyncRead + AsyncWrite + Unpin>(
    services: Arc<Services>,
    session: String,
    serving: Serving,
    conn: ConnId,
    listener: TcpListener,
    mut control: C,
) {
    let Some((token, said)) = announce(&services.data_dir, &listener, &mut control).await else {
        return;
    };
    let instructions = Gateway::instructions(&services, &session, serving.server.as_deref()).await;
    let rounds = serving.rounds.clone();
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop.clone());
    let (c, s) = (services.clone(), session.clone());
    let service = StreamableHttpService::new(
        move || {
            Ok(Gateway::new(
                c.clone(),
                s.clone(),
                (serving.clone(), "tcp"),
                conn,
                instructions.clone(),
            ))
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    tracing::info!(%session, url = %said["url"], "gateway listening over HTTP");
    let mut eof = [0u8; 64];
    let shutdown = services.shutdown.clone();
    let admission = Admission::new();
    let presence = Arc::new(super::presence::Presence::default());
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            // Whatever gemctl sends, or its going, ends the listener.
            _ = control.read(&mut eof) => break,
            () = shutdown.cancelled() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors, most likely: the oldest unauthenticated connection goes.
                if !admission.shed() {
                    tracing::warn!(error = %e, "gateway accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
                continue;
            }
        };
        let place = Arc::new(admission.arrive());
        let (service, token, admitted) = (service.clone(), token.clone(), place.clone());
        let presence = presence.clone();
        let handler = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let (mut service, token, place) = (service.clone(), token.clone(), admitted.clone());
            let presence = presence.clone();
            async move {
                if let Some(origin) = foreign_origin(&req) {
                    return Ok::<_, Infallible>(forbidden(&origin));
                }
                if !authorized(&req, &token) {
                    return Ok::<_, Infallible>(unauthorized());
                }
                if !place.admit() {
                    tracing::warn!(limit = MAX_CONNECTIONS, "gateway connection limit reached");
                    return Ok::<_, Infallible>(busy());
                }
                // The session this request names is there while its response is open.
                let held = req
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                    .map(|id| presence.hold(id));
                req.extensions_mut().insert(presence);
                let deleting = req.method() == hyper::Method::DELETE;
                let mut response = service.call(req).await?;
                // A session closed is 204, which every client takes for success (rmcp says
                // 202, and the Python SDK warns "Session termination failed: 202" on each).
                if deleting && response.status() == StatusCode::ACCEPTED {
                    response = Response::new(http_body_util::Empty::new().boxed());
                    *response.status_mut() = StatusCode::NO_CONTENT;
                }
                Ok(match held {
                    Some(held) => response.map(|body| {
                        body.map_frame(move |frame| {
                            let _held = &held;
                            frame
                        })
                        .boxed()
                    }),
                    None => response,
                })
            }
        });
        let stopped = stop.clone();
        tokio::spawn(async move {
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
            let (epoch, last) = (Instant::now(), Arc::new(AtomicU64::new(0)));
            let io = Watched { inner: tcp, epoch, last: last.clone() };
            let conn = builder.serve_connection(TokioIo::new(io), handler);
            tokio::select! {
                _ = conn => {}
                () = idle(epoch, last) => {}
                () = place.closed() => {}
                () = stopped.cancelled() => {}
            }
        });
    }
    stop.cancel();
    // The calls its clients started go with it, and the asks they raised.
    rounds.end(&services, &session);
    tracing::info!(%session, "gateway stopped listening over HTTP");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_loopback_address_and_port_is_bound() {
        for (addr, want) in [
            ("8765", "is not an address and port (e.g. 127.0.0.1:8765)"),
            ("localhost:8765", "is not an address and port"),
            ("0.0.0.0:0", "0.0.0.0:0 is not a loopback address"),
            ("192.0.2.1:80", "is not a loopback address"),
        ] {
            let e = bind(addr).await.unwrap_err();
            assert!(e.to_string().contains(want), "{addr}: {e}");
        }
        let taken = bind("127.0.0.1:0").await.unwrap();
        let at = taken.local_addr().unwrap().to_string();
        let e = bind(&at).await.unwrap_err();
        assert!(matches!(e, HttpError::Bind { .. }), "{e:?}");
        assert!(e.to_string().starts_with(&format!("cannot listen on {at}: ")), "{e}");
    }
}
