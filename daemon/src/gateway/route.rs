//! The gateway's door on the daemon's socket: a `GET /mcp` request asking to upgrade to
//! `geminid-mcp` gets `101 Switching Protocols`, and the connection then serves MCP (stdio
//! framing) over the named session, attached to it until it closes; every other request goes
//! on to JSON-RPC.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use geminid_protocol::gateway::{Confirm, Hooks, Names, PATH, REFUSED_SAY, UPGRADE};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use jsonrpsee::server::HttpBody;
use rmcp::ServiceExt as _;
use tokio_util::task::TaskTracker;

use super::{Gateway, Serving};
use crate::services::Services;
use crate::session::ConnId;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The connection's service: the gateway's upgrade, or `inner` (JSON-RPC).
#[derive(Debug, Clone)]
pub(crate) struct Routed<S> {
    inner: S,
    services: Arc<Services>,
    conn: ConnId,
    /// The connection's gateway task, which outlives hyper's part of the connection: the
    /// accept loop waits for it before it detaches the connection's sessions.
    tasks: TaskTracker,
    /// The connection's descriptor (Unix), to take the client's descriptors on (`handed`).
    fd: Option<i32>,
}

impl<S> Routed<S> {
    pub(crate) fn new(
        inner: S,
        services: Arc<Services>,
        conn: ConnId,
        tasks: TaskTracker,
        fd: Option<i32>,
    ) -> Self {
        Self { inner, services, conn, tasks, fd }
    }
}

fn is_gateway(req: &Request<Incoming>) -> bool {
    req.uri().path() == PATH
        && req
            .headers()
            .get(hyper::header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case(UPGRADE))
}

fn answer(status: StatusCode, text: String) -> Response<HttpBody> {
    let mut r = Response::new(HttpBody::from(format!("{text}\n")));
    *r.status_mut() = status;
    r
}

fn query(req: &Request<Incoming>, key: &str) -> Option<String> {
    let q = req.uri().query()?;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| decode(v))
    })
}

/// The query's `key` parsed, if it is there; for a value that does not parse, why (saying
/// what it may be).
fn parsed<T>(
    req: &Request<Incoming>,
    key: &str,
    parse: impl Fn(&str) -> Option<T>,
    may_be: &str,
) -> Result<Option<T>, String> {
    match query(req, key) {
        None => Ok(None),
        Some(v) => parse(&v).map(Some).ok_or_else(|| format!("{key}={v} is not {may_be}")),
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(h) = s.get(i + 1..i + 3)
            && let Ok(v) = u8::from_str_radix(h, 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Check the request, answer 101, and serve the gateway on the upgraded connection.
async fn open(
    services: Arc<Services>,
    conn: ConnId,
    tasks: TaskTracker,
    fd: Option<i32>,
    req: Request<Incoming>,
) -> Response<HttpBody> {
    let Some(session) = query(&req, "session") else {
        return answer(StatusCode::BAD_REQUEST, "the gateway needs ?session=<id>".into());
    };
    let server = query(&req, "server");
    let names = match parsed(&req, "names", Names::parse, "a naming: server, fqn or own") {
        // One server's gateway serves its names as they are, unless told otherwise.
        Ok(n) => n.unwrap_or(if server.is_some() { Names::Own } else { Names::default() }),
        Err(why) => return answer(StatusCode::BAD_REQUEST, why),
    };
    let confirm = match parsed(&req, "confirm", Confirm::parse, "who confirms: geminid or client") {
        Ok(c) => c.unwrap_or_default(),
        Err(why) => return answer(StatusCode::BAD_REQUEST, why),
    };
    let hooks = match parsed(&req, "hooks", Hooks::parse, "who runs hooks: geminid or client") {
        Ok(h) => h.unwrap_or_default(),
        Err(why) => return answer(StatusCode::BAD_REQUEST, why),
    };
    if names == Names::Own && server.is_none() {
        return answer(
            StatusCode::BAD_REQUEST,
            "names=own serves one server's names as they are: it needs server=<name>".into(),
        );
    }
    // `http=ADDR`: listen there instead (bound now, so a refusal is this answer).
    let listener = match query(&req, "http") {
        None => None,
        Some(addr) => match super::http::bind(&addr).await {
            Ok(l) => Some(l),
            Err(why) => return answer(StatusCode::BAD_REQUEST, why.to_string()),
        },
    };
    // Attached for as long as the connection lasts (the accept loop detaches it at close).
    if let Err(e) = services.sessions.attach(conn, &session, None).await {
        return answer(StatusCode::NOT_FOUND, e.to_string());
    }
    // One server's gateway: exactly one of the session's entries (one not running now, being
    // disabled or untrusted, is served empty until it runs), or an extension's server (empty
    // where its extension is disabled, as Gemini CLI has no such server there).
    if let Some(name) = &server
        && let Err(why) = services.catalog.check_server(&session, name)
        && !services.extensions.current().servers().contains_key(name)
    {
        return answer(StatusCode::NOT_FOUND, why);
    }
    // Fires when the client is gone (not only its stdin closed): its calls are cancelled then.
    let gone = tokio_util::sync::CancellationToken::new();
    let serving = Serving { names, server, confirm, hooks, rounds: Default::default(), gone };
    // `fds=1`: the client hands over its own client's stdin and stdout (Linux: where a pipe can
    // be opened again through /proc, see `handed`, so not without /proc; elsewhere it relays).
    let hand = fd.filter(|_| {
        cfg!(target_os = "linux")
            && query(&req, "fds").as_deref() == Some("1")
            && std::path::Path::new("/proc/self/fd").is_dir()
    });
    // `refused=say`: a refused handover is said, and relayed where it can be.
    let say = req.uri().query().is_some_and(|q| q.split('&').any(|kv| kv == REFUSED_SAY));
    #[cfg(not(unix))]
    let _ = say;
    let upgraded = hyper::upgrade::on(req);
    if let Some(listener) = listener {
        tasks.spawn(async move {
            match upgraded.await {
                Ok(io) => {
                    super::http::serve(
                        services,
                        session,
                        serving,
                        conn,
                        listener,
                        TokioIo::new(io),
                    )
                    .await;
                }
                Err(e) => tracing::debug!(error = %e, "gateway: the upgrade did not complete"),
            }
        });
        return switching(false);
    }
    let opened = Opened { services, session, serving, conn };
    tasks.spawn(async move {
        let io = match upgraded.await {
            Ok(io) => TokioIo::new(io),
            Err(e) => {
                tracing::debug!(error = %e, "gateway: the upgrade did not complete");
                return;
            }
        };
        #[cfg(unix)]
        if let Some(fd) = hand {
            // `io` holds the connection (and so `fd`) open until the session ends.
            opened.serve_handed(fd, say).await;
            drop(io);
            return;
        }
        let (read, write) = tokio::io::split(io);
        opened.serve_relayed(read, write, fd).await;
    });
    switching(hand.is_some())
}

/// A gateway checked and attached, to serve once the connection is upgraded.
struct Opened {
    services: Arc<Services>,
    session: String,
    serving: Serving,
    conn: ConnId,
}

impl Opened {
    /// Serve the client's descriptors gemctl hands over on the connection `fd`, until the
    /// session ends, gemctl goes or the client closes its stdout (these two cancel its calls).
    /// Descriptors it cannot take are relayed instead, for a gemctl that asked to be told
    /// (`say`); one that did not ask is closed, as before.
    #[cfg(unix)]
    async fn serve_handed(self, fd: i32, say: bool) {
        use super::handed::Refusal;
        let shutdown = self.services.shutdown.clone();
        let taken = tokio::select! {
            t = super::handed::take(fd) => t,
            () = shutdown.cancelled() => return,
        };
        let super::handed::Handed { input, output, mut conn, closer, stdout } = match taken {
            Ok(h) => h,
            Err(refusal) => {
                let why = refusal.why().to_string();
                let relay = say && matches!(refusal, Refusal::Relay { .. });
                tracing::warn!(session = %self.session, error = %why, relay,
                    "gateway: the client's descriptors are not taken");
                let told = geminid_protocol::gateway::HandRefused { refused: why, relay };
                let line = serde_json::to_string(&told).unwrap_or_default() + "\n";
                match refusal {
                    Refusal::Relay { mut conn, first, .. } if relay => {
                        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
                        if conn.write_all(line.as_bytes()).await.is_ok() {
                            let (read, write) = conn.into_split();
                            let read = std::io::Cursor::new(first).chain(read);
                            self.serve_relayed(read, write, Some(fd)).await;
                        }
                    }
                    Refusal::Relay { mut conn, .. }
                    | Refusal::Closed { conn: Some(mut conn), .. }
                        if say =>
                    {
                        use tokio::io::AsyncWriteExt as _;
                        let _ = conn.write_all(line.as_bytes()).await;
                    }
                    _ => {}
                }
                return;
            }
        };
        tracing::debug!(session = %self.session, "gateway: the client's descriptors handed over");
        let gone = self.serving.gone.clone();
        let done = tokio_util::sync::CancellationToken::new();
        // gemctl's connection is held until the session ends (closing it then ends gemctl);
        // its end before then is gemctl gone, as is a write to the client failing.
        let watch = async {
            tokio::select! {
                () = super::handed::ended(&mut conn) => {}
                () = super::handed::closed(stdout) => {}
                () = closer.gone.cancelled() => {}
                () = done.cancelled() => return,
            }
            closer.end();
            gone.cancel();
        };
        let session = async {
            self.serve(input, output).await;
            done.cancel();
        };
        tokio::join!(watch, session);
        drop(conn);
    }

    /// Serve the connection itself (gemctl relays) on `read` and `write`; `fd`, its
    /// descriptor, is watched for the client going: a connection closed both ways, not only
    /// gemctl's stdin.
    async fn serve_relayed<R, W>(self, read: R, write: W, fd: Option<i32>)
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let gone = self.serving.gone.clone();
        let session = self.serve(read, write);
        #[cfg(unix)]
        if let Some(watch) = fd.and_then(super::handed::hangup) {
            tokio::pin!(session);
            tokio::select! {
                () = &mut session => return,
                () = watch => gone.cancel(),
            }
            return session.await;
        }
        let _ = (fd, gone);
        session.await;
    }

    /// Serve MCP's stdio framing on `read` and `write` until the client closes or the daemon
    /// shuts down.
    async fn serve<R, W>(self, read: R, write: W)
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let Self { services, session, serving, conn } = self;
        let instructions =
            Gateway::instructions(&services, &session, serving.server.as_deref()).await;
        let rounds = serving.rounds.clone();
        let gateway =
            Gateway::new(services.clone(), session.clone(), (serving, "pipe"), conn, instructions);
        tracing::info!(%session, conn = conn.0, "gateway opened");
        let running = match gateway.serve(super::wire::Wire::new(read, write, &session)).await {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(error = %e, "gateway: the client did not initialize");
                return;
            }
        };
        let shutdown = services.shutdown.clone();
        tokio::select! {
            _ = running.waiting() => {}
            () = shutdown.cancelled() => {}
        }
        // Its client's calls of 2026-07-28 go with it, and the asks they raised.
        rounds.end(&services, &session);
        tracing::info!(%session, conn = conn.0, "gateway closed");
    }
}

fn switching(handed: bool) -> Response<HttpBody> {
    let mut r = Response::new(HttpBody::empty());
    if handed {
        r.headers_mut().insert(
            geminid_protocol::gateway::HAND_HEADER,
            hyper::header::HeaderValue::from_static("ready"),
        );
    }
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    r.headers_mut()
        .insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("upgrade"));
    r.headers_mut()
        .insert(hyper::header::UPGRADE, hyper::header::HeaderValue::from_static(UPGRADE));
    r
}

impl<S> tower_service::Service<Request<Incoming>> for Routed<S>
where
    S: tower_service::Service<Request<Incoming>, Response = Response<HttpBody>, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<HttpBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        if is_gateway(&req) {
            let (services, conn, tasks) = (self.services.clone(), self.conn, self.tasks.clone());
            let fd = self.fd;
            return Box::pin(async move { Ok(open(services, conn, tasks, fd, req).await) });
        }
        Box::pin(self.inner.call(req))
    }
}
