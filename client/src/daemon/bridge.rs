//! `gemctl rpc`: relays JSON-RPC between stdin/stdout and the daemon, for editors that cannot
//! speak WebSocket over a Unix socket. Input framing is detected from the first byte:
//! `Content-Length:` headers (LSP style) or one message per line; replies use the same framing.
//! Subscriptions work because every daemon message, notifications included, is relayed.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use geminid_protocol::client::connect_raw;
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use serde_json::Value;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::sync::watch;

/// After stdin ends, how long to wait for replies still owed.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How messages are framed on stdin/stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One JSON message per line.
    Lines,
    /// `Content-Length: N\r\n\r\n` + N bytes.
    ContentLength,
}

/// Read one message; `None` at end of input.
pub async fn read_message<R: AsyncBufRead + Unpin>(
    input: &mut R,
    framing: &mut Option<Framing>,
) -> anyhow::Result<Option<String>> {
    loop {
        let detected = match *framing {
            Some(f) => f,
            None => {
                let buf = input.fill_buf().await?;
                let Some(&first) = buf.iter().find(|b| !b.is_ascii_whitespace()) else {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    let n = buf.len();
                    input.consume(n);
                    continue;
                };
                let f = if first.eq_ignore_ascii_case(&b'c') {
                    Framing::ContentLength
                } else {
                    Framing::Lines
                };
                *framing = Some(f);
                f
            }
        };
        match detected {
            Framing::Lines => {
                let mut line = String::new();
                if input.read_line(&mut line).await? == 0 {
                    return Ok(None);
                }
                let msg = line.trim();
                if !msg.is_empty() {
                    return Ok(Some(msg.to_owned()));
                }
            }
            Framing::ContentLength => {
                let mut length = None;
                loop {
                    let mut header = String::new();
                    if input.read_line(&mut header).await? == 0 {
                        return Ok(None);
                    }
                    let header = header.trim();
                    if header.is_empty() {
                        if length.is_some() {
                            break;
                        }
                        continue;
                    }
                    if let Some((name, value)) = header.split_once(':')
                        && name.trim().eq_ignore_ascii_case("content-length")
                    {
                        length =
                            Some(value.trim().parse::<usize>().with_context(|| {
                                format!("bad Content-Length header {header:?}")
                            })?);
                    }
                }
                let mut body = vec![0; length.unwrap_or(0)];
                input.read_exact(&mut body).await.context("input ended inside a message")?;
                return Ok(Some(String::from_utf8(body).context("message is not UTF-8")?));
            }
        }
    }
}

/// Write one message in `framing`.
pub async fn write_message<W: AsyncWrite + Unpin>(
    out: &mut W,
    framing: Framing,
    msg: &str,
) -> std::io::Result<()> {
    match framing {
        Framing::Lines => {
            out.write_all(msg.as_bytes()).await?;
            out.write_all(b"\n").await?;
        }
        Framing::ContentLength => {
            out.write_all(format!("Content-Length: {}\r\n\r\n", msg.len()).as_bytes()).await?;
            out.write_all(msg.as_bytes()).await?;
        }
    }
    out.flush().await
}

/// Requests (with an id) in a message, and responses in one.
fn count(msg: &str, what: fn(&Value) -> bool) -> i64 {
    match serde_json::from_str::<Value>(msg) {
        Ok(Value::Array(items)) => items.iter().filter(|v| what(v)).count() as i64,
        Ok(v) => i64::from(what(&v)),
        Err(_) => 0,
    }
}

fn is_request(v: &Value) -> bool {
    v.get("method").is_some() && v.get("id").is_some_and(|id| !id.is_null())
}

fn is_response(v: &Value) -> bool {
    v.get("method").is_none() && v.get("id").is_some_and(|id| !id.is_null())
}

/// Run the bridge until stdin ends (and owed replies arrive) or the daemon goes away.
pub async fn run(socket: &Path, max_message_size: u32) -> anyhow::Result<()> {
    let (mut tx, mut rx) = connect_raw(socket, max_message_size).await?;
    let mut stdin = BufReader::new(tokio::io::stdin());
    let (framing_tx, mut framing_rx) = watch::channel(None::<Framing>);
    let (owed_tx, mut owed_rx) = watch::channel(0i64);

    let reader = async {
        let mut framing = None;
        while let Some(msg) = read_message(&mut stdin, &mut framing).await? {
            framing_tx.send_replace(framing);
            owed_tx.send_modify(|n| *n += count(&msg, is_request));
            tx.send(msg).await.context("sending to geminid")?;
        }
        // Input ended: wait (bounded) for the replies still owed, then close.
        let drained = owed_rx.wait_for(|n| *n <= 0);
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, drained).await;
        let _ = tx.close().await;
        anyhow::Ok(())
    };
    let writer = async {
        let mut stdout = tokio::io::stdout();
        loop {
            let text = match rx.receive().await {
                Ok(ReceivedMessage::Text(t)) => t,
                Ok(ReceivedMessage::Bytes(b)) => String::from_utf8_lossy(&b).into_owned(),
                Ok(ReceivedMessage::Pong) => continue,
                Err(e) => bail!("geminid closed the connection: {e}"),
            };
            let framing = framing_rx.wait_for(Option::is_some).await.map(|f| *f);
            let framing = framing.ok().flatten().unwrap_or(Framing::Lines);
            write_message(&mut stdout, framing, &text).await?;
            // Only a reply that reached stdout is delivered; the reader may exit after this.
            owed_tx.send_modify(|n| *n -= count(&text, is_response));
        }
    };
    tokio::select! {
        r = reader => r,
        r = writer => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &str) -> (Vec<String>, Option<Framing>) {
        let mut r = BufReader::new(input.as_bytes());
        let mut framing = None;
        let mut out = Vec::new();
        while let Ok(Some(m)) = read_message(&mut r, &mut framing).await {
            out.push(m);
        }
        (out, framing)
    }

    #[tokio::test]
    async fn detects_lines() {
        let (msgs, f) = read_all("\n{\"a\":1}\n\n[{\"b\":2}]\n{\"c\":3}").await;
        assert_eq!(msgs, ["{\"a\":1}", "[{\"b\":2}]", "{\"c\":3}"]);
        assert_eq!(f, Some(Framing::Lines));
    }

    #[tokio::test]
    async fn detects_content_length() {
        let input = "Content-Length: 7\r\n\r\n{\"a\":1}content-length: 8\r\nContent-Type: x\r\n\r\n{\"b\":\n2}";
        let (msgs, f) = read_all(input).await;
        assert_eq!(msgs, ["{\"a\":1}", "{\"b\":\n2}"]);
        assert_eq!(f, Some(Framing::ContentLength));
    }

    #[test]
    fn counts_requests_and_responses() {
        assert_eq!(count(r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#, is_request), 1);
        assert_eq!(count(r#"{"jsonrpc":"2.0","method":"m"}"#, is_request), 0);
        assert_eq!(count(r#"[{"id":1,"method":"m"},{"id":2,"method":"m"}]"#, is_request), 2);
        assert_eq!(count(r#"{"id":1,"result":3}"#, is_response), 1);
        assert_eq!(count(r#"{"method":"events/event","params":{}}"#, is_response), 0);
    }
}
