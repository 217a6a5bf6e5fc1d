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
    let request = ClientRequest::CallToolRequest(Request::new(CallToolRequestParams::new("echo")));
    JsonRpcMessage::request(request, RequestId::Number(id))
}

async fn next(
    t: &mut StdioTransport<DuplexStream, DuplexStream>,
) -> anyhow::Result<serde_json::Value> {
    let message = t.receive().await.ok_or_else(|| anyhow::anyhow!("no message"))?;
    Ok(serde_json::to_value(&message)?)
}

#[tokio::test]
async fn a_call_answer_is_kept_as_json_and_other_answers_parse_as_rmcp_does() -> anyhow::Result<()>
{
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
async fn an_error_answer_to_a_call_goes_to_rmcp_and_the_call_is_forgotten() -> anyhow::Result<()> {
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
    let cancelled = tokio::time::timeout(std::time::Duration::from_millis(50), t.receive()).await;
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

/// rmcp polls `receive` in a `select!` beside its other work, so a receive that yields is
/// dropped. Under load the task's cooperative budget runs out and a receive yields there:
/// nothing may be lost when it does. (Before: the budget was taken after a whole line was
/// read and before it was parsed, so a receive dropped there lost that line and the next,
/// read onto it; under 500 sessions calling at once one answer in ~5,000 never came and its
/// call waited for its timeout.)
#[tokio::test]
async fn receives_dropped_when_the_budget_runs_out_lose_no_message() -> anyhow::Result<()> {
    // A pipe to the server that holds all the requests (nothing reads them).
    let (mut t, mut out, _in) = pair_with(DEFAULT_MAX_LINE_LENGTH, 1 << 20);
    const N: i64 = 1_000;
    let mut lines = String::new();
    for id in 0..N {
        t.send(call(id)).await?;
        lines.push_str(&json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}).to_string());
        lines.push('\n');
    }
    // Written as the transport reads (the pipe holds 64 KiB), and stopped with the test.
    let writer = tokio::spawn(async move { out.write_all(lines.as_bytes()).await });
    // In a task of its own: tokio's cooperative budget is a spawned task's.
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while got.len() < N as usize && tokio::time::Instant::now() < deadline {
            // Polled once and dropped if it yields, as a select! does when another branch is
            // ready (tokio's own select! looks at the budget first, so it does not show this).
            match futures::FutureExt::now_or_never(t.receive()) {
                Some(Some(JsonRpcMessage::Response(r))) => got.push(r.id),
                Some(other) => anyhow::bail!("unexpected {other:?}"),
                None => tokio::task::yield_now().await,
            }
        }
        anyhow::Ok(got)
    });
    let got = reader.await??;
    writer.abort();
    assert_eq!(got.len(), N as usize, "answers lost");
    Ok(())
}
