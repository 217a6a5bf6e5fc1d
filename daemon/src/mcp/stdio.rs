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

type Writer<W> = FramedWrite<W, JsonRpcMessageCodec<TxJsonRpcMessage<RoleClient>>>;

/// An MCP client transport over a child's stdout (`R`) and stdin (`W`).
#[derive(Debug)]
pub struct StdioTransport<R, W> {
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
fn top_level_id(head: &[u8]) -> Option<RequestId> {
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
    pub fn new(read: R, write: W) -> Self {
        Self::with_max_line(read, write, DEFAULT_MAX_LINE_LENGTH)
    }

    /// A transport that skips (and logs) lines longer than `max_line` bytes.
    pub fn with_max_line(read: R, write: W, max_line: usize) -> Self {
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
        }
    }

    /// Say what the server does wrong in `log` too (not only in the daemon's log).
    pub fn with_log(mut self, log: Arc<ServerLog>) -> Self {
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
            let line = std::mem::take(&mut self.line);
            let parsed = self.parse(line.strip_suffix(b"\n").unwrap_or(&line));
            self.line = line;
            self.line.clear();
            match parsed {
                Parsed::Message(message) => {
                    self.answered(&message);
                    return Some(*message);
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
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequestParams, Request};
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    /// A transport whose server side is two in-memory pipes.
    fn pair(
        max_line: usize,
    ) -> (StdioTransport<DuplexStream, DuplexStream>, DuplexStream, DuplexStream) {
        pair_with(max_line, 1 << 16)
    }

    /// The same, with a pipe to the server that holds only `stdin` bytes.
    fn pair_with(
        max_line: usize,
        stdin: usize,
    ) -> (StdioTransport<DuplexStream, DuplexStream>, DuplexStream, DuplexStream) {
        let (read, server_out) = tokio::io::duplex(1 << 16);
        let (write, server_in) = tokio::io::duplex(stdin);
        (StdioTransport::with_max_line(read, write, max_line), server_out, server_in)
    }

    /// A `tools/list` request with `id`.
    fn list_request(id: i64) -> TxJsonRpcMessage<RoleClient> {
        JsonRpcMessage::request(
            ClientRequest::ListToolsRequest(Default::default()),
            RequestId::Number(id),
        )
    }

    fn call(id: i64) -> TxJsonRpcMessage<RoleClient> {
        let request =
            ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("echo")));
        JsonRpcMessage::request(request, RequestId::Number(id))
    }

    async fn next(
        t: &mut StdioTransport<DuplexStream, DuplexStream>,
    ) -> anyhow::Result<serde_json::Value> {
        let message = t.receive().await.ok_or_else(|| anyhow::anyhow!("no message"))?;
        Ok(serde_json::to_value(&message)?)
    }

    #[tokio::test]
    async fn a_call_answer_is_kept_as_json_and_other_answers_parse_as_rmcp_does()
    -> anyhow::Result<()> {
        let (mut t, mut out, _in) = pair(DEFAULT_MAX_LINE_LENGTH);
        t.send(call(7)).await?;
        t.send(list_request(8)).await?;
        // Not a valid CallToolResult (content is not an array): kept as it is.
        let odd = json!({"jsonrpc": "2.0", "id": 7, "result": {"content": "x", "extra": 1}});
        let list = json!({"jsonrpc": "2.0", "id": 8, "result": {"tools": []}});
        out.write_all(format!("{odd}\n{list}\n").as_bytes()).await?;
        let got = t.receive().await.ok_or_else(|| anyhow::anyhow!("no message"))?;
        match got {
            JsonRpcMessage::Response(r) => {
                assert_eq!(r.id, RequestId::Number(7));
                match r.result {
                    ServerResult::CustomResult(c) => assert_eq!(c.0, odd["result"]),
                    other => anyhow::bail!("not kept as JSON: {other:?}"),
                }
            }
            other => anyhow::bail!("not an answer: {other:?}"),
        }
        // An answer to anything else is rmcp's: here a ListToolsResult.
        match t.receive().await.ok_or_else(|| anyhow::anyhow!("no message"))? {
            JsonRpcMessage::Response(r) => {
                assert!(matches!(r.result, ServerResult::ListToolsResult(_)), "{:?}", r.result);
            }
            other => anyhow::bail!("not an answer: {other:?}"),
        }
        // The call was answered: a second answer with its id answers nothing, and is said
        // in the server's log; the stream goes on.
        let log = Arc::new(ServerLog::default());
        t.log = Some(log.clone());
        t.send(list_request(9)).await?;
        out.write_all(format!("{list}\n").replace("\"id\":8", "\"id\":7").as_bytes()).await?;
        out.write_all(format!("{list}\n").replace("\"id\":8", "\"id\":9").as_bytes()).await?;
        assert_eq!(next(&mut t).await?["id"], 7); // passed on: rmcp drops it
        assert_eq!(next(&mut t).await?["id"], 9);
        assert!(t.calls.is_empty() && t.requests.is_empty());
        let (lines, _) = log.tail(None);
        assert!(
            lines.iter().any(|l| l.text.contains("an answer with id 7 answers no request")),
            "{lines:?}"
        );
        Ok(())
    }

    #[test]
    fn the_id_of_a_line_is_found_at_its_top_level_only() {
        let id = |s: &str| top_level_id(s.as_bytes());
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":7,"result":{"#), Some(RequestId::Number(7)));
        assert_eq!(id(r#"{ "id" : "a\"b", "result""#), Some(RequestId::String("a\"b".into())));
        assert_eq!(id(r#"{"result":{"id":3,"content":["#), None);
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","result":{"text":"\"id\":4"},"id":5}"#),
            Some(RequestId::Number(5))
        );
        assert_eq!(id(r#"{"method":"x","params":[{"id":1}]"#), None);
        assert_eq!(id("not json at all"), None);
    }

    #[tokio::test]
    async fn an_answer_over_the_line_limit_fails_its_request_at_once() -> anyhow::Result<()> {
        let (mut t, mut out, _in) = pair(256);
        t.send(call(9)).await?;
        t.send(list_request(10)).await?;
        let big = json!({"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": "x".repeat(1000)}]}});
        let small = json!({"jsonrpc": "2.0", "id": 10, "result": {"tools": []}});
        out.write_all(format!("{big}\n{small}\n").as_bytes()).await?;
        let failed = next(&mut t).await?;
        assert_eq!(failed["id"], 9, "{failed}");
        let message = failed["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("longer than the 256 bytes a message may have"), "{message}");
        assert!(t.calls.is_empty());
        // The rest of the stream is read as before.
        assert_eq!(next(&mut t).await?["id"], 10);
        Ok(())
    }

    #[tokio::test]
    async fn a_cancelled_call_is_forgotten() -> anyhow::Result<()> {
        let (mut t, _out, _in) = pair(DEFAULT_MAX_LINE_LENGTH);
        t.send(call(3)).await?;
        assert_eq!(t.calls.len(), 1);
        let cancel = ClientNotification::CancelledNotification(rmcp::model::Notification::new(
            rmcp::model::CancelledNotificationParam::new(Some(RequestId::Number(3)), None),
        ));
        t.send(JsonRpcMessage::notification(cancel)).await?;
        assert!(t.calls.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn an_error_answer_to_a_call_goes_to_rmcp_and_the_call_is_forgotten() -> anyhow::Result<()>
    {
        let (mut t, mut out, _in) = pair(DEFAULT_MAX_LINE_LENGTH);
        t.send(call(5)).await?;
        let error = json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32602, "message": "bad"}});
        out.write_all(format!("{error}\n").as_bytes()).await?;
        match t.receive().await.ok_or_else(|| anyhow::anyhow!("no message"))? {
            JsonRpcMessage::Error(e) => assert_eq!(e.error.message, "bad"),
            other => anyhow::bail!("not an error: {other:?}"),
        }
        assert!(t.calls.is_empty());
        Ok(())
    }

    #[tokio::test]
    async fn junk_and_lines_over_the_limit_are_skipped() -> anyhow::Result<()> {
        let (mut t, mut out, _in) = pair(64);
        let long = format!("{{\"pad\":\"{}\"}}", "x".repeat(200));
        let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        let lines =
            ["not json at all".to_owned(), String::new(), "\r".to_owned(), long, ping.to_string()];
        // Split mid-line, as pipes do.
        let text = lines.join("\n") + "\n";
        let (a, b) = text.split_at(text.len() - 10);
        out.write_all(a.as_bytes()).await?;
        let writer = async {
            tokio::task::yield_now().await;
            out.write_all(b.as_bytes()).await
        };
        let (got, written) = tokio::join!(next(&mut t), writer);
        written?;
        assert_eq!(got?, ping);
        Ok(())
    }

    #[tokio::test]
    async fn a_receive_cancelled_mid_line_loses_nothing() -> anyhow::Result<()> {
        let (mut t, mut out, _in) = pair(DEFAULT_MAX_LINE_LENGTH);
        let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
        let (a, b) = ping.split_at(ping.len() / 2);
        out.write_all(a.as_bytes()).await?;
        // rmcp polls `receive` in a select!: here the other branch wins while half a line is in.
        let cancelled =
            tokio::time::timeout(std::time::Duration::from_millis(50), t.receive()).await;
        assert!(cancelled.is_err(), "a half line was delivered");
        out.write_all(format!("{b}\n").as_bytes()).await?;
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), next(&mut t)).await??;
        assert_eq!(got.to_string(), ping);
        Ok(())
    }

    #[tokio::test]
    async fn json_of_no_known_shape_is_answered_invalid_request() -> anyhow::Result<()> {
        let (mut t, mut out, mut server_in) = pair(DEFAULT_MAX_LINE_LENGTH);
        let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
        out.write_all(format!("{{\"jsonrpc\":\"2.0\",\"id\":1}}\n{ping}\n").as_bytes()).await?;
        assert_eq!(next(&mut t).await?, ping);
        let mut buf = vec![0; 4096];
        let n = server_in.read(&mut buf).await?;
        let answer: serde_json::Value = serde_json::from_slice(&buf[..n])?;
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        Ok(())
    }

    #[tokio::test]
    async fn an_owed_answer_is_sent_once_when_a_receive_is_cancelled_while_sending_it()
    -> anyhow::Result<()> {
        use std::time::Duration;
        // The server's stdin holds 16 bytes and nobody reads it yet: the answer stalls.
        let (mut t, mut out, mut server_in) = pair_with(DEFAULT_MAX_LINE_LENGTH, 16);
        out.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1}\n").await?;
        let stalled = tokio::time::timeout(Duration::from_millis(50), t.receive()).await;
        assert!(stalled.is_err(), "a message was delivered: {stalled:?}");
        // The next receive finishes the answer while the server reads, then goes on.
        let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
        out.write_all(format!("{ping}\n").as_bytes()).await?;
        let mut sent = Vec::new();
        let drain = async {
            let mut buf = [0u8; 64];
            // Everything the transport writes until it has been quiet for 200 ms.
            while let Ok(n) =
                tokio::time::timeout(Duration::from_millis(200), server_in.read(&mut buf)).await
            {
                match n? {
                    0 => break,
                    n => sent.extend_from_slice(&buf[..n]),
                }
            }
            anyhow::Ok(())
        };
        let (got, drained) = tokio::join!(next(&mut t), drain);
        drained?;
        assert_eq!(got?, ping);
        let text = String::from_utf8(sent)?;
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "sent: {text:?}");
        let answer: serde_json::Value = serde_json::from_str(lines[0])?;
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        Ok(())
    }
}
