//! The gateway's side of MCP's stdio framing, handed over or relayed: rmcp's line framing and
//! parsing rules (its codec), with two bounds rmcp's own `AsyncRwTransport` lacks.
//!
//! - Back-pressure. rmcp reads a client's requests as fast as they come and runs each as a
//!   task of its own, and each answer waits for the client in a task too: a client that sends
//!   and never reads grew the daemon without bound. Here the client's input is not read while
//!   [`QUEUED_MAX`] messages wait to be written to it, or while [`IN_FLIGHT_MAX`] of its
//!   requests are unanswered; nothing is dropped, and its reading again resumes it.
//! - A message longer than [`MAX_MESSAGE`] is not buffered: its first bytes are kept to find
//!   its `id`, the rest skipped, and the request is answered with an Invalid Request error
//!   that names the limit (id `null` where the start does not show it), and logged. rmcp
//!   dropped it without a word, and its line buffer kept the size of the largest line read.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use futures::SinkExt as _;
use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, BufReader};
use tokio_util::codec::{Decoder as _, FramedWrite};

/// The longest message read from a client: rmcp's own limit (16 MiB, the size its streamable
/// HTTP client allows an event).
pub(super) const MAX_MESSAGE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
/// Messages to the client written and not yet taken by it, past which its input waits.
pub(super) const QUEUED_MAX: usize = 256;
/// The client's requests read and not yet answered, past which its input waits (a client
/// that calls 512 tools at once is flooding; each call is a task and its state).
pub(super) const IN_FLIGHT_MAX: usize = 512;
/// How much of a message too long is kept to find its id.
const HEAD: usize = 4096;
/// A line buffer grown past this is let go once its line is parsed (not kept for the next).
const KEEP_BUFFER: usize = 1 << 20;

type Writer<W> = FramedWrite<W, JsonRpcMessageCodec<TxJsonRpcMessage<RoleServer>>>;

/// Messages handed to the writer and not yet written.
#[derive(Debug, Default)]
struct Queue {
    queued: AtomicUsize,
    written: tokio::sync::Notify,
}

/// One message queued: counted out when written, or when its write is dropped.
struct Queued(Arc<Queue>);

impl Queued {
    fn new(queue: &Arc<Queue>) -> Self {
        queue.queued.fetch_add(1, Ordering::AcqRel);
        Self(queue.clone())
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::AcqRel);
        self.0.written.notify_waiters();
    }
}

/// The gateway's transport over a client's input (`R`) and output (`W`).
pub(super) struct Wire<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// In the middle of a line that was too long.
    discarding: bool,
    /// The start of the line that is too long.
    head: Vec<u8>,
    write: Arc<tokio::sync::Mutex<Option<Writer<W>>>>,
    queue: Arc<Queue>,
    /// The client's requests read and not yet answered (nor cancelled by it).
    in_flight: HashSet<RequestId>,
    /// For the log.
    session: String,
}

enum Line {
    Full,
    TooLong,
    Eof,
}

impl<R: AsyncRead + Unpin + Send, W: AsyncWrite + Unpin + Send + 'static> Wire<R, W> {
    pub(super) fn new(read: R, write: W, session: &str) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            head: Vec::new(),
            write: Arc::new(tokio::sync::Mutex::new(Some(FramedWrite::new(
                write,
                JsonRpcMessageCodec::default(),
            )))),
            queue: Arc::default(),
            in_flight: HashSet::new(),
            session: session.to_owned(),
        }
    }

    /// Until the client may be read again: fewer than [`QUEUED_MAX`] messages wait for it and
    /// fewer than [`IN_FLIGHT_MAX`] of its requests are unanswered. (rmcp polls `receive` in a
    /// `select!` beside handing answers to `send`: an answer drops this wait, and the next
    /// `receive` looks again.)
    fn room(&self) -> impl Future<Output = ()> + Send + 'static {
        let queue = self.queue.clone();
        let answers_owed = self.in_flight.len() >= IN_FLIGHT_MAX;
        async move {
            if answers_owed {
                return std::future::pending().await;
            }
            loop {
                let written = queue.written.notified();
                if queue.queued.load(Ordering::Acquire) < QUEUED_MAX {
                    return;
                }
                written.await;
            }
        }
    }

    /// Read up to the next newline into `self.line`, never more than [`MAX_MESSAGE`] of it.
    /// Cancel-safe: a partial line stays in `self.line` (or the head of one too long in
    /// `self.head`) and the next call goes on with it.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Line::Eof);
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if !self.discarding && self.line.len().saturating_add(take) > MAX_MESSAGE + 1 {
                // Too long: keep its start (for the id) and let the rest go by.
                self.head = std::mem::take(&mut self.line);
                self.head.truncate(HEAD);
                self.head.shrink_to_fit();
                self.discarding = true;
            }
            if self.discarding {
                let room = HEAD.saturating_sub(self.head.len());
                self.head.extend_from_slice(&available[..take.min(room)]);
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if newline.is_some() {
                if self.discarding {
                    self.discarding = false;
                    return Ok(Line::TooLong);
                }
                return Ok(Line::Full);
            }
        }
    }

    /// Queue `message` for the client, written in the order queued (its own task: a
    /// `receive` dropped by rmcp's loop does not lose it).
    fn owe(&mut self, message: TxJsonRpcMessage<RoleServer>) {
        let send = Transport::<RoleServer>::send(self, message);
        tokio::spawn(async move {
            if let Err(e) = send.await {
                tracing::debug!(error = %e, "gateway: an error answer could not be written");
            }
        });
    }

    /// The line read (without its newline) as a message, or `None` when it is none (not JSON,
    /// or a notification rmcp's rules ignore); JSON of no known shape is answered.
    fn parse(&mut self, body: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        if body.is_empty() {
            return None;
        }
        let mut buf = BytesMut::with_capacity(body.len() + 1);
        buf.extend_from_slice(body);
        buf.extend_from_slice(b"\n");
        match JsonRpcMessageCodec::<RxJsonRpcMessage<RoleServer>>::new().decode(&mut buf) {
            Ok(message) => message,
            Err(JsonRpcMessageCodecError::Serde(e))
                if !matches!(
                    e.classify(),
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof
                ) =>
            {
                // JSON, but no message: an Invalid Request, as rmcp answers it (with the id
                // where it shows).
                tracing::debug!(error = %e, "gateway: a message of no known shape");
                let id = crate::mcp::stdio::top_level_id(&body[..body.len().min(HEAD)]);
                let error = ErrorData::invalid_request("Invalid request", None);
                self.owe(TxJsonRpcMessage::<RoleServer>::error(error, id));
                None
            }
            // Not JSON: nothing to answer (answering could start an error storm).
            Err(e) => {
                tracing::debug!(error = %e, "gateway: ignoring an unparsable line");
                None
            }
        }
    }

    /// A message too long was skipped: say so to the client and in the log.
    fn too_long(&mut self) {
        let head = std::mem::take(&mut self.head);
        let id = crate::mcp::stdio::top_level_id(&head);
        tracing::warn!(
            session = %self.session, id = ?id, limit = MAX_MESSAGE,
            "gateway: a message from the client is longer than the limit; skipped unread"
        );
        let text = format!(
            "the message is longer than the {MAX_MESSAGE} bytes ({} MiB) geminid reads of one \
             JSON-RPC message; it was not read",
            MAX_MESSAGE >> 20
        );
        let data = serde_json::json!({ "limit": MAX_MESSAGE });
        let error = ErrorData::invalid_request(text, Some(data));
        self.owe(TxJsonRpcMessage::<RoleServer>::error(error, id));
    }

    /// Keep count of the client's requests: one read is in flight until answered, or
    /// cancelled by the client (rmcp then drops its answer).
    fn count(&mut self, message: &RxJsonRpcMessage<RoleServer>) {
        match message {
            JsonRpcMessage::Request(r) => {
                self.in_flight.insert(r.id.clone());
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    self.in_flight.remove(id);
                }
            }
            _ => {}
        }
    }
}

impl<R, W> Transport<RoleServer> for Wire<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let id = match &item {
            JsonRpcMessage::Response(r) => Some(&r.id),
            JsonRpcMessage::Error(e) => e.id.as_ref(),
            _ => None,
        };
        if let Some(id) = id {
            self.in_flight.remove(id);
        }
        let queued = Queued::new(&self.queue);
        let write = self.write.clone();
        async move {
            let _queued = queued;
            match write.lock().await.as_mut() {
                Some(writer) => writer.send(item).await.map_err(Into::into),
                None => Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the transport is closed",
                )),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // A flood of lines already buffered costs tokio no I/O: yield now and then, before
            // anything is read (a receive dropped after a line is read would lose it).
            tokio::task::consume_budget().await;
            self.room().await;
            match self.read_line().await {
                Ok(Line::Full) => {}
                Ok(Line::TooLong) => {
                    self.too_long();
                    continue;
                }
                Ok(Line::Eof) => return None,
                Err(e) => {
                    tracing::debug!(error = %e, "gateway: reading from the client failed");
                    return None;
                }
            }
            let mut line = std::mem::take(&mut self.line);
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            // A long line is parsed off the event loop's worker.
            let parsed = if body.len() >= KEEP_BUFFER {
                crate::config::files::off_loop(|| self.parse(body))
            } else {
                self.parse(body)
            };
            if line.capacity() <= KEEP_BUFFER {
                line.clear();
                self.line = line;
            }
            if let Some(message) = parsed {
                self.count(&message);
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}
