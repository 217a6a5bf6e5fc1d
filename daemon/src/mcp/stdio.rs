//! The client side of a stdio connection: rmcp's line framing and parsing rules, except that
//! an answer to a `tools/call` is parsed as the JSON object it is.
//!
//! rmcp parses every answer as an untagged union of ~20 result types, trying each in turn
//! (and building an error for each miss) before it reaches `CallToolResult`. That was the
//! largest single cost of a call through the daemon (`BENCHMARKS.md`). This transport knows
//! which requests it sent were `tools/call`, so their answers skip the union; the daemon
//! wants a call's result as JSON anyway. Every other line goes through rmcp's own codec,
//! with its compatibility rules, and is handled as rmcp's `AsyncRwTransport` handles it.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;

use bytes::BytesMut;
use futures::SinkExt;
use rmcp::RoleClient;
use rmcp::model::{
    ClientNotification, ClientRequest, CustomResult, ErrorData, JsonRpcMessage, JsonRpcResponse,
    JsonRpcVersion2_0, RequestId, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{
    DEFAULT_MAX_LINE_LENGTH, JsonRpcMessageCodec, JsonRpcMessageCodecError,
};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio_util::codec::{Decoder, FramedWrite};

use super::log::ServerLog;

/// A line at least this long is parsed off the event loop's worker (`block_in_place`): a
/// 60 MB answer takes about a second to parse, and other clients must not wait for it.
const PARSE_OFF_LOOP: usize = 1 << 20;

type Writer<W> = FramedWrite<W, JsonRpcMessageCodec<TxJsonRpcMessage<RoleClient>>>;

/// An MCP client transport over a child's stdout (`R`) and stdin (`W`).
#[derive(Debug)]
pub(crate) struct StdioTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    max_line: usize,
    /// In the middle of a line that was too long.
    discarding: bool,
    /// The start of the last line that was too long, to find whose answer it was.
    too_long_head: Vec<u8>,
    write: Arc<tokio::sync::Mutex<Option<Writer<W>>>>,
    /// Ids of the `tools/call` requests sent and not yet answered or cancelled. (rmcp's
    /// service loop owns the transport and calls `send` and `receive` from its one task.)
    calls: HashSet<RequestId>,
    /// Ids of every request sent and not yet answered or cancelled: an answer to none of
    /// them is said in the server's log (rmcp drops it). Only for that: bounded by
    /// [`REQUESTS_REMEMBERED`], past which it starts afresh.
    requests: HashSet<RequestId>,
    /// The server's log, for what the server does wrong.
    log: Option<Arc<ServerLog>>,
    /// An "Invalid request" answer is owed to the server (it sent JSON of no known shape).
    owed: Option<Owed>,
    /// The server's notifications handed on and not yet handled.
    backlog: Arc<Backlog>,
    /// A notification read and not yet handed on (it waits for room for its handler).
    parked: Option<Box<RxJsonRpcMessage<RoleClient>>>,
}

/// Notifications a server may have handed on and not yet handled. rmcp runs each
/// notification's handler as a task of its own: a server that sends 200,000 log messages
/// would otherwise fill the runtime's queue with 200,000 tasks, and every other client's
/// tasks would wait behind them (seconds). Past this, the transport stops reading the
/// server until its handlers catch up, and the server's writes wait in its pipe. (So no
/// notification handler may wait for this server's answer: each hands its work on, without
/// waiting, `connect.rs`.)
const NOTIFICATIONS_IN_FLIGHT: usize = 64;

/// The count of notifications in flight, and a wake-up when one is handled.
#[derive(Debug, Default)]
struct Backlog {
    pending: std::sync::atomic::AtomicUsize,
    handled: tokio::sync::Notify,
}

impl Backlog {
    /// Wait for room, then count one more.
    async fn admit(self: &Arc<Self>) -> Handling {
        use std::sync::atomic::Ordering;
        loop {
            let handled = self.handled.notified();
            if self.pending.load(Ordering::Acquire) < NOTIFICATIONS_IN_FLIGHT {
                break;
            }
            handled.await;
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        Handling(self.clone())
    }
}

/// One notification in flight: carried in its extensions into the handler's context, and
/// counted as handled when that is dropped.
#[derive(Debug)]
struct Handling(Arc<Backlog>);

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        self.0.handled.notify_one();
    }
}

/// Count a received notification as handled though it is not handed to a handler (yet): the
/// era probe keeps what comes before the handshake.
pub(crate) fn handled(message: &mut RxJsonRpcMessage<RoleClient>) {
    use rmcp::model::GetExtensions as _;
    if let JsonRpcMessage::Notification(n) = message {
        n.notification.extensions_mut().remove::<Arc<Handling>>();
    }
}

/// Where sending an owed error answer is, so a cancelled `receive` neither loses nor
/// repeats it.
#[derive(Debug, Clone, Copy)]
enum Owed {
    Queue,
    Flush,
}

/// Request ids remembered to tell an unexpected answer (see `StdioTransport::requests`).
const REQUESTS_REMEMBERED: usize = 10_000;

/// How much of a line that is too long is kept to find its id.
const TOO_LONG_HEAD: usize = 4096;

/// The `id` of the JSON-RPC object a line starts, if the line's first `head` bytes show it:
/// the value of an `"id"` key at the top level (servers write it before a large `result`).
pub(crate) fn top_level_id(head: &[u8]) -> Option<RequestId> {
    let (mut depth, mut i) = (0usize, 0usize);
    while i < head.len() {
        match head[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < head.len() && head[j] != b'"' {
                    j += if head[j] == b'\\' { 2 } else { 1 };
                }
                let key = head.get(start..j)?;
                i = j + 1;
                let rest = head.get(i..)?;
                let colon = rest.iter().position(|b| !b.is_ascii_whitespace());
                if depth == 1 && key == b"id" && colon.is_some_and(|c| rest[c] == b':') {
                    let value = &rest[colon? + 1..];
                    let mut values = serde_json::Deserializer::from_slice(value).into_iter();
                    return values.next()?.ok();
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

enum Line {
    Full,
    TooLong,
    Eof,
}

/// What one line is.
enum Parsed {
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    Skip,
    Invalid,
}

/// The parts of a message the fast path needs.
#[derive(Deserialize)]
struct Answer<'a> {
    #[allow(dead_code, reason = "only checked to be \"2.0\"")]
    jsonrpc: JsonRpcVersion2_0,
    id: Option<RequestId>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    method: Option<IgnoredAny>,
    error: Option<IgnoredAny>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> StdioTransport<R, W> {
    /// A transport reading lines of up to rmcp's default limit.
    pub(crate) fn new(read: R, write: W) -> Self {
        Self::with_max_line(read, write, DEFAULT_MAX_LINE_LENGTH)
    }

    /// A transport that skips (and logs) lines longer than `max_line` bytes.
    pub(crate) fn with_max_line(read: R, write: W, max_line: usize) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line,
            discarding: false,
            too_long_head: Vec::new(),
            write: Arc::new(tokio::sync::Mutex::new(Some(FramedWrite::new(
                write,
                JsonRpcMessageCodec::default(),
            )))),
            calls: HashSet::new(),
            requests: HashSet::new(),
            log: None,
            owed: None,
            backlog: Arc::default(),
            parked: None,
        }
    }

    /// Say what the server does wrong in `log` too (not only in the daemon's log).
    pub(crate) fn with_log(mut self, log: Arc<ServerLog>) -> Self {
        self.log = Some(log);
        self
    }

    /// Forget the request `message` answers; an answer to none is said in the server's log.
    fn answered(&mut self, message: &RxJsonRpcMessage<RoleClient>) {
        let id = match message {
            JsonRpcMessage::Response(r) => &r.id,
            JsonRpcMessage::Error(e) => match &e.id {
                Some(id) => id,
                None => return,
            },
            _ => return,
        };
        if self.requests.remove(id) {
            return;
        }
        let text = format!(
            "an answer with id {id} answers no request that is waiting (it was cancelled or \
             timed out, or the id is wrong); it is ignored"
        );
        tracing::warn!("{text}");
        if let Some(log) = &self.log {
            log.push("geminid", &text);
        }
    }

    /// Read up to the next newline into `self.line`. Cancel-safe: a partial line stays in
    /// `self.line` and the next call goes on with it.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Line::Eof);
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let too_long = !self.discarding && self.line.len().saturating_add(take) > self.max_line;
            if !self.discarding && !too_long {
                self.line.extend_from_slice(&available[..take]);
            }
            if too_long {
                self.too_long_head = std::mem::take(&mut self.line);
                let room = TOO_LONG_HEAD.saturating_sub(self.too_long_head.len());
                self.too_long_head.extend_from_slice(&available[..take.min(room)]);
                self.too_long_head.truncate(TOO_LONG_HEAD);
            }
            self.read.consume(take);
            if too_long {
                self.discarding = newline.is_none();
                return Ok(Line::TooLong);
            }
            if newline.is_some() {
                if self.discarding {
                    self.discarding = false;
                } else {
                    return Ok(Line::Full);
                }
            }
        }
    }

    /// Parse one line (without its newline).
    fn parse(&mut self, line: &[u8]) -> Parsed {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return Parsed::Skip;
        }
        if let Some(answer) = self.call_answer(line) {
            return Parsed::Message(Box::new(answer));
        }
        let mut buf = BytesMut::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.extend_from_slice(b"\n");
        match JsonRpcMessageCodec::<RxJsonRpcMessage<RoleClient>>::new().decode(&mut buf) {
            Ok(Some(message)) => Parsed::Message(Box::new(message)),
            // rmcp's compatibility rules: a notification outside MCP is ignored.
            Ok(None) => Parsed::Skip,
            Err(JsonRpcMessageCodecError::Serde(e)) => {
                if matches!(
                    e.classify(),
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof
                ) {
                    // Not JSON: nothing to answer (answering could start an error storm).
                    tracing::debug!("ignoring an unparsable line from the server: {e}");
                    Parsed::Skip
                } else {
                    tracing::debug!("protocol error in a message from the server: {e}");
                    Parsed::Invalid
                }
            }
            Err(e) => {
                tracing::debug!("ignoring a line from the server: {e}");
                Parsed::Skip
            }
        }
    }

    /// The line as the answer to a `tools/call` this transport sent, its result kept as JSON.
    /// An error answer to one goes on to rmcp, but the call is no longer pending either way.
    fn call_answer(&mut self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        if self.calls.is_empty() {
            return None;
        }
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let answer: Answer<'_> = serde_json::from_slice(line).ok()?;
        let id = answer.id.filter(|_| answer.method.is_none())?;
        if !self.calls.remove(&id) {
            return None;
        }
        let result = answer.result.filter(|_| answer.error.is_none())?;
        let result = serde_json::from_str(result.get()).ok()?;
        Some(JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id,
            result: ServerResult::CustomResult(CustomResult(result)),
        }))
    }

    /// Send the owed "Invalid request" answer; false if the server cannot be written to.
    async fn pay(&mut self) -> bool {
        let Some(state) = self.owed else { return true };
        let mut write = self.write.lock().await;
        let Some(writer) = write.as_mut() else { return false };
        if matches!(state, Owed::Queue) {
            let error = ErrorData::invalid_request("Invalid request", None);
            if writer.feed(TxJsonRpcMessage::<RoleClient>::error(error, None)).await.is_err() {
                return false;
            }
            self.owed = Some(Owed::Flush);
        }
        if writer.flush().await.is_err() {
            return false;
        }
        self.owed = None;
        true
    }
}

impl<R, W> Transport<RoleClient> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        match &item {
            JsonRpcMessage::Request(r) => {
                if matches!(r.request, ClientRequest::CallToolRequest(_)) {
                    self.calls.insert(r.id.clone());
                }
                if self.requests.len() >= REQUESTS_REMEMBERED {
                    self.requests.clear();
                }
                self.requests.insert(r.id.clone());
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    self.calls.remove(id);
                    self.requests.remove(id);
                }
            }
            _ => {}
        }
        let write = self.write.clone();
        async move {
            match write.lock().await.as_mut() {
                Some(writer) => writer.send(item).await.map_err(Into::into),
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the transport is closed",
                )),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            // One server's stream must not hold the worker it runs on from every other task:
            // lines read from the buffer cost tokio no I/O, so nothing else would make a flood
            // of notifications yield. Here, before anything is read: rmcp drops a receive
            // that yields (it polls it in a select!), and one dropped between reading a line
            // and handing it on lost that line and the one read onto it after.
            tokio::task::consume_budget().await;
            // A notification waits for room for its handler, parked: a receive dropped while
            // it waits loses nothing.
            if self.parked.is_some() {
                let handling = Arc::new(self.backlog.admit().await);
                let mut message = self.parked.take()?;
                if let JsonRpcMessage::Notification(n) = message.as_mut() {
                    use rmcp::model::GetExtensions as _;
                    n.notification.extensions_mut().insert(handling);
                }
                return Some(*message);
            }
            if !self.pay().await {
                return None;
            }
            match self.read_line().await {
                Ok(Line::Full) => {}
                Ok(Line::TooLong) => {
                    let head = std::mem::take(&mut self.too_long_head);
                    let id = top_level_id(&head);
                    tracing::error!(
                        max = self.max_line,
                        id = ?id,
                        "a message from the server is longer than the line limit; discarded"
                    );
                    // The answer's request fails at once rather than at its timeout.
                    if let Some(id) = id {
                        self.calls.remove(&id);
                        self.requests.remove(&id);
                        let error = ErrorData::internal_error(
                            format!(
                                "its answer is longer than the {} bytes a message may have, and \
                                 was dropped",
                                self.max_line
                            ),
                            None,
                        );
                        return Some(JsonRpcMessage::Error(rmcp::model::JsonRpcError {
                            jsonrpc: JsonRpcVersion2_0,
                            id: Some(id),
                            error,
                        }));
                    }
                    continue;
                }
                Ok(Line::Eof) => return None,
                Err(e) => {
                    tracing::error!("reading from the server failed: {e}");
                    return None;
                }
            }
            // A very long line is parsed off the worker.
            let line = std::mem::take(&mut self.line);
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            let parsed = if body.len() >= PARSE_OFF_LOOP {
                crate::config::files::off_loop(|| self.parse(body))
            } else {
                self.parse(body)
            };
            self.line = line;
            self.line.clear();
            match parsed {
                Parsed::Message(message) => {
                    self.answered(&message);
                    if !matches!(message.as_ref(), JsonRpcMessage::Notification(_)) {
                        return Some(*message);
                    }
                    self.parked = Some(message);
                }
                Parsed::Skip => {}
                Parsed::Invalid => self.owed = Some(Owed::Queue),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}

#[cfg(test)]
mod tests;
