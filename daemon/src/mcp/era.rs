//! Which protocol era a stdio server speaks, found within the server's whole start-up limit.
//!
//! rmcp's `ClientLifecycleMode::Auto` asks `server/discover` (id 0) and, after a fixed 10 s
//! without an answer, writes `initialize` (id 1) on the same pipe. A server still loading (a
//! first `npx` download, a JVM, a busy laptop at login) then reads both, answers id 0 first,
//! and rmcp takes that for a crossed answer: the handshake fails, and every retry is as slow.
//! So the probe is geminid's own ([`probe`]): `server/discover` under an id rmcp never uses;
//! after [`PATIENCE`] with no answer, `initialize` as well (a server that ignores requests it
//! does not know still connects); then whichever answer comes first settles the era, however
//! late, within the attempt's own limit. rmcp is then given that era's lifecycle over
//! [`Primed`], which answers rmcp's handshake request with what the server already said (the
//! server sees one handshake of its era), hands on what the server sent meanwhile in order,
//! and drops the answers to the probe's requests that come after the era was settled.

use std::collections::VecDeque;
use std::time::Duration;

use futures::future::Either;
use rmcp::RoleClient;
use rmcp::model::{
    ClientConfig, ClientJsonRpcMessage, ClientRequest, ClientResult, DiscoverRequest,
    DiscoverRequestParams, ErrorCode, ErrorData, InitializeRequest, JsonRpcMessage,
    ProtocolVersion, RequestId, RequestMetaObject, ServerRequest, ServerResult,
};
use rmcp::service::TxJsonRpcMessage;
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, RxJsonRpcMessage};
use rmcp::transport::Transport;

/// How long `server/discover` alone is given before `initialize` is sent beside it (rmcp's
/// own fallback time): a server of the earlier eras that never answers a request it does not
/// know connects after this, and a slow one of either era is still waited for.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// The probe's own request ids. Numbers (some servers take no others), far above any id
/// rmcp's counter (from 0, one per request) reaches, and below 2^53 so that a server that
/// reads numbers as doubles (JavaScript) answers with the same one.
const DISCOVER_ID: i64 = 9_007_199_254_740_001;
const INITIALIZE_ID: i64 = 9_007_199_254_740_002;

/// What the server says before the era is settled (its log messages, mostly) is handed on up
/// to this many messages; a server that says more before answering loses the rest.
const PENDING_KEPT: usize = 256;

/// The era geminid prefers, and the one it speaks to a server that has `initialize`.
fn modern() -> ProtocolVersion {
    ProtocolVersion::V_2026_07_28
}

/// A server's answer to one of the probe's requests.
type Answer = Result<ServerResult, ErrorData>;

/// The handshake request whose answer the server already gave.
#[derive(Debug)]
enum Given {
    Discover(Answer),
    Initialize(Answer),
}

/// A client transport after the probe: rmcp's handshake request is answered from what the
/// server said to the probe, and late answers to the probe are dropped.
pub(crate) struct Primed<T> {
    inner: T,
    /// What the server sent while the probe waited, handed on first and in order.
    pending: VecDeque<RxJsonRpcMessage<RoleClient>>,
    /// The answer to the handshake request rmcp is about to send, if the server gave it.
    given: Option<Given>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Primed<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // rmcp's `initialize` carries the client's info as it is, whose version is the newest
        // (which has no `initialize`): a server of the earlier eras is asked for theirs.
        if let JsonRpcMessage::Request(r) = &mut item
            && let ClientRequest::InitializeRequest(init) = &mut r.request
            && !init.params.protocol_version.has_initialize()
        {
            init.params.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        }
        if let JsonRpcMessage::Request(r) = &item {
            let answer = match (&r.request, self.given.take()) {
                (ClientRequest::DiscoverRequest(_), Some(Given::Discover(a)))
                | (ClientRequest::InitializeRequest(_), Some(Given::Initialize(a))) => Some(a),
                (_, given) => {
                    self.given = given;
                    None
                }
            };
            if let Some(answer) = answer {
                let id = r.id.clone();
                self.pending.push_back(match answer {
                    Ok(result) => JsonRpcMessage::response(result, id),
                    Err(error) => JsonRpcMessage::error(error, Some(id)),
                });
                return Either::Left(std::future::ready(Ok(())));
            }
        }
        Either::Right(self.inner.send(item))
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        if let Some(message) = self.pending.pop_front() {
            return Some(message);
        }
        loop {
            let message = self.inner.receive().await?;
            if probe_id(&message).is_none() {
                return Some(message);
            }
            tracing::debug!("a late answer to the era probe, dropped");
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Which of the probe's requests a message answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Discover,
    Initialize,
}

fn probe_id(message: &RxJsonRpcMessage<RoleClient>) -> Option<Probe> {
    let id = match message {
        JsonRpcMessage::Response(r) => &r.id,
        JsonRpcMessage::Error(e) => e.id.as_ref()?,
        _ => return None,
    };
    match id {
        RequestId::Number(DISCOVER_ID) => Some(Probe::Discover),
        RequestId::Number(INITIALIZE_ID) => Some(Probe::Initialize),
        _ => None,
    }
}

/// What the probe learnt, once it knows enough: rmcp does the handshake of this era, and
/// `given` answers its request if the server already answered it.
struct Settled {
    lifecycle: ClientLifecycleMode,
    given: Option<Given>,
}

/// An error to `server/discover` that a server of the 2026-07-28 era gives (version
/// negotiation, a missing capability, a header mismatch): rmcp's discover lifecycle handles
/// those. Any other error is how the earlier eras answer a method they do not have.
fn is_modern_error(error: &ErrorData) -> bool {
    matches!(
        error.code,
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH
    )
}

/// The era, from the answers so far (`initialize`: `None` if not sent, `Some(None)` if sent
/// and unanswered); `None` while it cannot be told yet.
fn settle(
    discover: &mut Option<Answer>,
    initialize: &mut Option<Option<Answer>>,
) -> Option<Settled> {
    let discover_mode = || ClientLifecycleMode::Discover { preferred_versions: vec![modern()] };
    match (discover.as_ref(), initialize.as_ref()) {
        // The server speaks 2026-07-28 (an `initialize` sent beside it is answered and dropped).
        (Some(Ok(_)), _) => Some(Settled {
            lifecycle: discover_mode(),
            given: discover.take().map(Given::Discover),
        }),
        (Some(Err(e)), _) if is_modern_error(e) => {
            Some(Settled { lifecycle: discover_mode(), given: None })
        }
        // An earlier era: rmcp's `initialize` goes to the server, or is answered with what the
        // server already said to the probe's.
        (Some(Err(_)), None) => {
            Some(Settled { lifecycle: ClientLifecycleMode::Initialize, given: None })
        }
        // `initialize` answered, with a result or an error, and discover not (a server of the
        // earlier eras that ignores methods it does not know): that answer is the era's.
        (Some(Err(_)) | None, Some(Some(_))) => Some(Settled {
            lifecycle: ClientLifecycleMode::Initialize,
            given: initialize.take().flatten().map(Given::Initialize),
        }),
        // Still waiting: for discover, or (discover failed) for initialize's answer.
        _ => None,
    }
}

/// Asks the server's era on `inner` and gives rmcp the transport and the lifecycle to finish
/// the handshake with. It waits as long as the server takes: the caller bounds the attempt.
pub(crate) async fn probe<T: Transport<RoleClient> + 'static>(
    mut inner: T,
    info: &ClientConfig,
    patience: Duration,
) -> Result<(Primed<T>, ClientLifecycleMode), ClientInitializeError> {
    let mut discover_request = DiscoverRequest::new(DiscoverRequestParams {});
    discover_request.extensions.insert(RequestMetaObject::with_client_context(
        modern(),
        info.client_info.clone(),
        info.capabilities.clone(),
    ));
    let request = ClientRequest::DiscoverRequest(discover_request);
    send(&mut inner, request, DISCOVER_ID, "send discover request").await?;

    let mut pending = VecDeque::new();
    let mut discover: Option<Answer> = None;
    let mut initialize: Option<Option<Answer>> = None;
    let patience = tokio::time::sleep(patience);
    tokio::pin!(patience);
    loop {
        if let Some(Settled { lifecycle, given }) = settle(&mut discover, &mut initialize) {
            return Ok((Primed { inner, pending, given }, lifecycle));
        }
        let message = tokio::select! {
            () = &mut patience, if initialize.is_none() => {
                let mut legacy = info.clone();
                legacy.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
                let request = ClientRequest::InitializeRequest(InitializeRequest::new(legacy));
                send(&mut inner, request, INITIALIZE_ID, "send initialize request").await?;
                initialize = Some(None);
                continue;
            }
            message = inner.receive() => message,
        };
        let Some(message) = message else {
            return Err(ClientInitializeError::ConnectionClosed(
                "the server closed its output before answering the MCP handshake".into(),
            ));
        };
        let which = probe_id(&message);
        let answer = match message {
            JsonRpcMessage::Response(r) => Ok(r.result),
            JsonRpcMessage::Error(e) if e.id.is_some() => Err(e.error),
            // An error without an id answers what the server could not read: the one request
            // it has, while it has one; with two outstanding, it cannot be told which.
            JsonRpcMessage::Error(e) => {
                if discover.is_none() && initialize.is_none() {
                    discover = Some(Err(e.error));
                } else {
                    tracing::debug!(error = ?e.error, "an error answering no request, ignored");
                }
                continue;
            }
            JsonRpcMessage::Request(r) if matches!(r.request, ServerRequest::PingRequest(_)) => {
                let pong = ClientJsonRpcMessage::response(ClientResult::empty(()), r.id);
                inner.send(pong).await.map_err(|e| {
                    ClientInitializeError::transport::<T>(e, "answer the server's ping")
                })?;
                continue;
            }
            mut other => {
                // Kept here, it is not being handled: its place in the transport's backlog
                // goes, or a server that logs much before answering would never be read on.
                crate::mcp::stdio::handled(&mut other);
                if pending.len() < PENDING_KEPT {
                    pending.push_back(other);
                } else {
                    tracing::debug!("a message before the handshake past those kept, dropped");
                }
                continue;
            }
        };
        match which {
            Some(Probe::Discover) => discover = Some(answer),
            Some(Probe::Initialize) => initialize = Some(Some(answer)),
            None => tracing::debug!("an answer to no request of the era probe, dropped"),
        }
    }
}

async fn send<T: Transport<RoleClient> + 'static>(
    inner: &mut T,
    request: ClientRequest,
    id: i64,
    context: &'static str,
) -> Result<(), ClientInitializeError> {
    let message = ClientJsonRpcMessage::request(request, RequestId::Number(id));
    inner.send(message).await.map_err(|e| ClientInitializeError::transport::<T>(e, context))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::stdio::StdioTransport;
    use rmcp::service::ClientServiceExt as _;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

    /// A server at the other end of two in-memory pipes, driven line by line by the test.
    struct Peer {
        lines: Lines<BufReader<DuplexStream>>,
        out: DuplexStream,
    }

    impl Peer {
        async fn read(&mut self) -> anyhow::Result<Value> {
            let line = self.lines.next_line().await?.ok_or_else(|| anyhow::anyhow!("closed"))?;
            Ok(serde_json::from_str(&line)?)
        }

        async fn write(&mut self, message: Value) -> anyhow::Result<()> {
            self.out.write_all(format!("{message}\n").as_bytes()).await?;
            Ok(())
        }
    }

    fn pipes() -> (StdioTransport<DuplexStream, DuplexStream>, Peer) {
        let (read, out) = tokio::io::duplex(1 << 16);
        let (write, server_in) = tokio::io::duplex(1 << 16);
        let peer = Peer { lines: BufReader::new(server_in).lines(), out };
        (StdioTransport::new(read, write), peer)
    }

    fn initialized(id: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "peer", "version": "1"},
        }})
    }

    fn not_found(id: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}})
    }

    /// rmcp's handshake over the probe, as `connect` does it.
    async fn connect(
        transport: StdioTransport<DuplexStream, DuplexStream>,
        patience: Duration,
    ) -> anyhow::Result<rmcp::service::RunningService<RoleClient, ()>> {
        let info = rmcp::ClientHandler::get_info(&());
        let (primed, lifecycle) = probe(transport, &info, patience).await?;
        Ok(().serve_with_lifecycle(primed, lifecycle).await?)
    }

    /// After the handshake: a `tools/list` gets to the server as the next request and its
    /// answer back, so nothing of the probe is left on the wire.
    async fn lists(
        service: &rmcp::service::RunningService<RoleClient, ()>,
        peer: &mut Peer,
    ) -> anyhow::Result<()> {
        let (listed, asked) = tokio::join!(service.list_tools(None), async {
            let request = peer.read().await?;
            anyhow::ensure!(request["method"] == "tools/list", "{request}");
            peer.write(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": []}}))
                .await?;
            Ok(())
        });
        asked?;
        assert!(listed?.tools.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn a_late_error_to_discover_leaves_the_initialize_sent_beside_it_to_settle_the_era()
    -> anyhow::Result<()> {
        // A server of the earlier eras that was busy past the patience: it reads both requests
        // and answers them in order, discover's error first (rmcp's own fallback failed here).
        let (transport, mut peer) = pipes();
        let client = tokio::spawn(connect(transport, Duration::from_millis(20)));
        let discover = peer.read().await?;
        assert_eq!(discover["method"], "server/discover");
        let initialize = peer.read().await?;
        assert_eq!(initialize["method"], "initialize");
        assert_eq!(initialize["params"]["protocolVersion"], "2025-11-25");
        peer.write(not_found(&discover["id"])).await?;
        peer.write(initialized(&initialize["id"])).await?;
        // One handshake: rmcp's own `initialize` was answered with what the server said.
        assert_eq!(peer.read().await?["method"], "notifications/initialized");
        let service = client.await??;
        let name = service.peer_info().and_then(|i| i.server_info.as_ref().map(|s| s.name.clone()));
        assert_eq!(name.as_deref(), Some("peer"));
        lists(&service, &mut peer).await
    }

    #[tokio::test]
    async fn a_server_that_never_answers_discover_connects_on_the_initialize_sent_beside_it()
    -> anyhow::Result<()> {
        let (transport, mut peer) = pipes();
        let client = tokio::spawn(connect(transport, Duration::from_millis(20)));
        let _ignored = peer.read().await?;
        let initialize = peer.read().await?;
        // What it says before answering is handed on, in order, after the era is settled.
        peer.write(json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "loading"}}))
            .await?;
        peer.write(initialized(&initialize["id"])).await?;
        assert_eq!(peer.read().await?["method"], "notifications/initialized");
        let service = client.await??;
        lists(&service, &mut peer).await
    }

    #[tokio::test]
    async fn a_prompt_error_to_discover_sends_no_initialize_of_the_probes_own() -> anyhow::Result<()>
    {
        let (transport, mut peer) = pipes();
        let client = tokio::spawn(connect(transport, Duration::from_secs(3600)));
        let discover = peer.read().await?;
        peer.write(not_found(&discover["id"])).await?;
        // rmcp's own `initialize`, under rmcp's own id, asking for an era that has it.
        let initialize = peer.read().await?;
        assert_eq!(initialize["method"], "initialize");
        assert_eq!(initialize["id"], 0, "{initialize}");
        assert_eq!(initialize["params"]["protocolVersion"], "2025-11-25", "{initialize}");
        peer.write(initialized(&initialize["id"])).await?;
        assert_eq!(peer.read().await?["method"], "notifications/initialized");
        let service = client.await??;
        lists(&service, &mut peer).await
    }

    #[tokio::test]
    async fn an_answer_to_nothing_of_the_probes_and_a_ping_do_not_settle_the_era()
    -> anyhow::Result<()> {
        let (transport, mut peer) = pipes();
        let client = tokio::spawn(connect(transport, Duration::from_secs(3600)));
        let discover = peer.read().await?;
        peer.write(json!({"jsonrpc": "2.0", "id": 0, "result": {}})).await?;
        peer.write(json!({"jsonrpc": "2.0", "id": "p", "method": "ping"})).await?;
        let pong = peer.read().await?;
        assert_eq!(pong, json!({"jsonrpc": "2.0", "id": "p", "result": {}}));
        peer.write(not_found(&discover["id"])).await?;
        let initialize = peer.read().await?;
        assert_eq!(initialize["method"], "initialize");
        peer.write(initialized(&initialize["id"])).await?;
        assert_eq!(peer.read().await?["method"], "notifications/initialized");
        let service = client.await??;
        lists(&service, &mut peer).await
    }

    #[tokio::test]
    async fn a_server_that_exits_before_answering_is_a_closed_connection() -> anyhow::Result<()> {
        let (transport, mut peer) = pipes();
        let client = tokio::spawn(connect(transport, Duration::from_secs(3600)));
        let _ = peer.read().await?;
        drop(peer);
        let e = client.await?.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("closed its output before answering"), "{e}");
        Ok(())
    }

    #[tokio::test]
    async fn a_server_that_logs_much_before_answering_is_still_read() -> anyhow::Result<()> {
        // More than the transport's backlog of notifications in flight (64).
        let (transport, mut peer) = pipes();
        let client = tokio::spawn(connect(transport, Duration::from_secs(3600)));
        let discover = peer.read().await?;
        assert!(discover["id"].is_number(), "some servers take no other ids: {discover}");
        for n in 0..300 {
            peer.write(json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": format!("loading {n}")}}))
                .await?;
        }
        peer.write(not_found(&discover["id"])).await?;
        // Read on past the backlog: rmcp's `initialize` comes (a test that fails, not hangs).
        let initialize = tokio::time::timeout(Duration::from_secs(30), peer.read()).await??;
        peer.write(initialized(&initialize["id"])).await?;
        assert_eq!(peer.read().await?["method"], "notifications/initialized");
        let service = client.await??;
        lists(&service, &mut peer).await
    }

    #[tokio::test]
    async fn an_error_to_the_initialize_sent_beside_an_unanswered_discover_ends_it()
    -> anyhow::Result<()> {
        // A server of the earlier eras that ignores methods it does not know, and refuses us:
        // its error is the answer, not a wait for a discover answer that never comes.
        let (transport, mut peer) = pipes();
        let client = tokio::spawn(connect(transport, Duration::from_millis(20)));
        let _ignored = peer.read().await?;
        let initialize = peer.read().await?;
        peer.write(json!({"jsonrpc": "2.0", "id": initialize["id"],
            "error": {"code": -32603, "message": "boom"}}))
            .await?;
        let e = tokio::time::timeout(Duration::from_secs(30), client).await??;
        let e = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("boom"), "{e}");
        Ok(())
    }

    #[tokio::test]
    async fn an_error_without_an_id_while_two_requests_wait_answers_neither() -> anyhow::Result<()>
    {
        let (transport, mut peer) = pipes();
        let client = tokio::spawn(connect(transport, Duration::from_millis(20)));
        let discover = peer.read().await?;
        let initialize = peer.read().await?;
        peer.write(not_found(&discover["id"])).await?;
        peer.write(json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32700, "message": "stray"}}))
            .await?;
        peer.write(initialized(&initialize["id"])).await?;
        assert_eq!(peer.read().await?["method"], "notifications/initialized");
        let service = client.await??;
        lists(&service, &mut peer).await
    }
}
