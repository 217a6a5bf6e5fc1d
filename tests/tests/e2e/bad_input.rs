//! Bad input on the socket: each case gets a clear error, the daemon keeps serving, and
//! nothing already stored is lost.

use std::time::Duration;

use futures::future::join_all;
use geminid_protocol::api::{DaemonApiClient, SessionApiClient};
use geminid_protocol::client::{ConnectError, connect_raw};
use geminid_protocol::session::{SessionCreateParams, SessionIdParams};
use geminid_tests::{Daemon, TestHome, eventually, http_post, raw_exchange};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};

/// The daemon still answers and still has `session`.
async fn still_serving(daemon: &Daemon, session: &str) -> anyhow::Result<()> {
    let c = daemon.client().await?;
    c.status().await?;
    c.get(SessionIdParams { id: session.to_owned() }).await?;
    Ok(())
}

async fn with_session(home: &TestHome, extra: &[&str]) -> anyhow::Result<(Daemon, String)> {
    let daemon = Daemon::start(home, extra).await?;
    let workspace = home.workspace().display().to_string();
    let s = daemon
        .client()
        .await?
        .create(SessionCreateParams { workspace, ..Default::default() })
        .await?;
    Ok((daemon, s.id))
}

/// Send one WebSocket text message and return the reply.
async fn ws_roundtrip(daemon: &Daemon, msg: &str) -> anyhow::Result<serde_json::Value> {
    let (mut tx, mut rx) = connect_raw(daemon.socket(), 64 * 1024 * 1024).await?;
    tx.send(msg.to_owned()).await?;
    let reply = tokio::time::timeout(Duration::from_secs(10), rx.receive()).await??;
    let ReceivedMessage::Text(text) = reply else { anyhow::bail!("unexpected reply {reply:?}") };
    Ok(serde_json::from_str(&text)?)
}

#[tokio::test]
async fn garbage_and_non_http_bytes_close_only_that_connection() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &[]).await?;
    for junk in [
        &b"\x00\xff\xfe garbage \x01\x02\r\n\r\n"[..],
        b"HELLO daemon\n\n",
        b"{\"jsonrpc\":\"2.0\"}\r\n\r\n",
    ] {
        let reply = raw_exchange(daemon.socket(), junk, Duration::from_secs(5)).await?;
        let text = String::from_utf8_lossy(&reply);
        assert!(reply.is_empty() || text.starts_with("HTTP/1.1 4"), "{junk:?} got {text}");
        still_serving(&daemon, &id).await?;
    }
    Ok(())
}

#[tokio::test]
async fn malformed_json_non_jsonrpc_unknown_method_and_wrong_types_are_errors() -> anyhow::Result<()>
{
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &[]).await?;
    let cases = [
        ("{not json", -32700),
        (r#"{"hello":"world"}"#, -32700),
        (r#"{"jsonrpc":"2.0","id":1,"method":"no/suchMethod"}"#, -32601),
        (r#"{"jsonrpc":"2.0","id":1,"method":"session/get","params":{"id":42}}"#, -32602),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"workspace":["x"]}}"#,
            -32602,
        ),
        (r#"{"jsonrpc":"2.0","id":1,"method":"session/get"}"#, -32602),
    ];
    for (msg, want) in cases {
        let reply = ws_roundtrip(&daemon, msg).await?;
        assert_eq!(reply["error"]["code"], want, "{msg} -> {reply}");
        assert!(reply["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
        // Over plain HTTP too.
        let (_, body) = http_post(daemon.socket(), msg).await?;
        let reply: serde_json::Value = serde_json::from_str(&body)?;
        assert_eq!(reply["error"]["code"], want, "HTTP {msg} -> {reply}");
    }
    // A subscription over a POST says what works instead of "Internal error" (audit C10).
    for method in ["events/subscribe", "asks/listen", "mcp/followLogs"] {
        let msg = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"{method}","params":{{"session":"{id}","name":"x","kinds":["confirmation"]}}}}"#
        );
        let (_, body) = http_post(daemon.socket(), &msg).await?;
        let reply: serde_json::Value = serde_json::from_str(&body)?;
        let text = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            text.contains("needs a connection that stays open") && text.contains("WebSocket"),
            "{method}: {reply}"
        );
    }
    let wrong = ws_roundtrip(
        &daemon,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/get","params":{"id":42}}"#,
    )
    .await?;
    assert!(
        wrong["error"]["data"].as_str().is_some_and(|d| d.contains("expected a string")),
        "{wrong}"
    );
    still_serving(&daemon, &id).await
}

#[tokio::test]
async fn oversized_messages_are_refused() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &["--max-message-size", "4096"]).await?;
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"session/get","params":{{"id":"{}"}}}}"#,
        "x".repeat(8192)
    );
    let (status, _) = http_post(daemon.socket(), &big).await?;
    assert!(status.contains("413"), "{status}");
    // Over WebSocket the daemon answers with an error (or drops that connection), and only that.
    let (mut tx, mut rx) = connect_raw(daemon.socket(), 1024 * 1024).await?;
    tx.send(big).await?;
    match tokio::time::timeout(Duration::from_secs(10), rx.receive()).await? {
        Ok(ReceivedMessage::Text(t)) => assert!(t.contains("error"), "{t}"),
        Ok(other) => panic!("unexpected {other:?}"),
        Err(_) => {} // connection closed
    }
    still_serving(&daemon, &id).await
}

#[tokio::test]
async fn a_request_whose_id_cannot_be_one_is_an_invalid_request_not_silence() -> anyhow::Result<()>
{
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &[]).await?;
    for odd in ["1e400", "1.5", r#"{"a":1}"#, "true", "[1]"] {
        let msg = format!(r#"{{"jsonrpc":"2.0","id":{odd},"method":"daemon/status"}}"#);
        let reply = ws_roundtrip(&daemon, &msg).await?;
        assert_eq!(reply["error"]["code"], -32600, "{msg} -> {reply}");
        assert_eq!(reply["id"], serde_json::Value::Null, "{reply}");
        let (status, body) = http_post(daemon.socket(), &msg).await?;
        let reply: serde_json::Value = serde_json::from_str(&body)?;
        assert_eq!(reply["error"]["code"], -32600, "HTTP {status} {msg} -> {body}");
    }
    // In a batch, the odd entry gets its error and the good one its answer.
    let batch = r#"[{"jsonrpc":"2.0","id":1.5,"method":"daemon/status"},
                    {"jsonrpc":"2.0","id":2,"method":"daemon/status"}]"#;
    let reply = ws_roundtrip(&daemon, batch).await?;
    let answers = reply.as_array().cloned().unwrap_or_default();
    assert_eq!(answers.len(), 2, "{reply}");
    assert!(answers.iter().any(|a| a["error"]["code"] == -32600), "{reply}");
    assert!(answers.iter().any(|a| a["id"] == 2 && a["result"].is_object()), "{reply}");
    still_serving(&daemon, &id).await
}

#[tokio::test]
async fn a_request_over_the_daemons_limit_fails_at_once_never_hangs() -> anyhow::Result<()> {
    use geminid_protocol::client::{handshake, open};
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &["--max-message-size", "4096"]).await?;
    let big = SessionIdParams { id: "x".repeat(8192) };
    let code =
        |r: Result<geminid_protocol::session::Session, jsonrpsee::core::client::Error>| match r {
            Err(jsonrpsee::core::client::Error::Call(obj)) => {
                (obj.code(), obj.message().to_owned())
            }
            Err(other) => (0, other.to_string()),
            Ok(s) => (0, format!("answered {s:?}")),
        };
    // This client's own limit is 64 MiB: after the hello it knows the daemon's, and refuses
    // to send at all.
    let client = daemon.client().await?;
    let started = std::time::Instant::now();
    let (c, message) = code(client.get(big.clone()).await);
    assert_eq!(c, -32007, "{message}");
    assert!(message.contains("over the daemon's limit of 4096 bytes"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(2));
    client.status().await?;

    // Without the hello the request is sent; the daemon answers with id null, and the one
    // call waiting is the one it answers.
    let opts = geminid_tests::options();
    let unhandshaken = open(daemon.socket(), &opts).await?;
    let (c, message) = code(unhandshaken.get(big.clone()).await);
    assert_eq!(c, -32007, "{message}");
    assert!(message.contains("--max-message-size"), "{message}");
    unhandshaken.status().await?;

    // With several calls waiting nobody can tell whose it was: the connection ends, and
    // every one of them fails rather than waiting for ever.
    let slow = SessionCreateParams {
        workspace: home.workspace().display().to_string(),
        ..Default::default()
    };
    let several = open(daemon.socket(), &opts).await?;
    let (a, b) = tokio::time::timeout(
        Duration::from_secs(10),
        futures::future::join(several.get(big.clone()), several.create(slow)),
    )
    .await?;
    assert!(a.is_err(), "{a:?}");
    // The other call either finished first or ended with the connection.
    if b.is_err() {
        assert!(!several.is_connected());
    }
    drop(handshake(&unhandshaken, &opts).await?);
    still_serving(&daemon, &id).await
}

#[tokio::test]
async fn a_silent_client_does_not_block_others() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &[]).await?;
    let silent = tokio::net::UnixStream::connect(daemon.socket()).await?;
    let silent_ws = connect_raw(daemon.socket(), 1024).await?; // upgraded, then says nothing
    for _ in 0..5 {
        still_serving(&daemon, &id).await?;
    }
    let c = daemon.client().await?;
    // The silent two and this one; the checks' own connections are gone once the daemon has
    // seen them close, which a busy machine may take a moment to do.
    let three = eventually(Duration::from_secs(10), || async {
        c.status().await.is_ok_and(|s| s.connections == 3)
    })
    .await;
    assert!(three, "{:?}", c.status().await.map(|s| s.connections));
    drop((silent, silent_ws));
    assert!(
        eventually(Duration::from_secs(10), || async {
            c.status().await.is_ok_and(|s| s.connections == 1)
        })
        .await
    );
    Ok(())
}

#[tokio::test]
async fn a_client_killed_mid_request_is_cleaned_up() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &[]).await?;
    for _ in 0..20 {
        let (mut tx, rx) = connect_raw(daemon.socket(), 1024 * 1024).await?;
        let ws = home.workspace().display().to_string();
        tx.send(format!(r#"{{"jsonrpc":"2.0","id":1,"method":"session/create","params":{{"workspace":"{ws}"}}}}"#)).await?;
        drop((tx, rx)); // gone before the reply
    }
    let c = daemon.client().await?;
    let settled = eventually(Duration::from_secs(10), || async {
        c.status().await.is_ok_and(|s| s.connections == 1 && s.sessions.attached == 0)
    })
    .await;
    assert!(settled, "{:?}", c.status().await?);
    still_serving(&daemon, &id).await
}

#[tokio::test]
async fn two_hundred_connections_at_once() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &[]).await?;
    let clients = join_all((0..200).map(|_| daemon.client())).await;
    let clients: Vec<_> = clients.into_iter().collect::<Result<_, _>>()?;
    let statuses = join_all(clients.iter().map(|c| c.status())).await;
    assert!(statuses.iter().all(Result::is_ok));
    assert_eq!(clients[0].status().await?.connections, 200);
    drop(clients);
    let c = daemon.client().await?;
    assert!(
        eventually(Duration::from_secs(15), || async {
            c.status().await.is_ok_and(|s| s.connections == 1)
        })
        .await
    );
    still_serving(&daemon, &id).await
}

#[tokio::test]
async fn over_the_connection_limit_is_a_clear_refusal() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &["--max-connections", "3"]).await?;
    // Wait until the start-up connections are gone, then take every slot.
    let first = daemon.client().await?;
    let settled = eventually(Duration::from_secs(10), || async {
        first.status().await.is_ok_and(|s| s.connections == 1)
    });
    assert!(settled.await);
    let more = join_all((0..2).map(|_| daemon.client())).await;
    let mut held: Vec<_> = more.into_iter().collect::<Result<_, _>>()?;
    held.push(first);
    let refused =
        geminid_protocol::client::connect(daemon.socket(), &geminid_tests::options()).await;
    let Err(ConnectError::Handshake { .. }) = &refused else {
        panic!("expected a refusal: {refused:?}")
    };
    let (status, body) = http_post(daemon.socket(), "{}").await?;
    assert!(
        status.contains("503") && body.contains("too many connections (limit 3)"),
        "{status} {body}"
    );
    assert!(daemon.log().contains("connection limit reached"));
    drop(held);
    let ok =
        eventually(Duration::from_secs(10), || async { still_serving(&daemon, &id).await.is_ok() })
            .await;
    assert!(ok, "never recovered after the limit");
    Ok(())
}

#[tokio::test]
async fn a_slow_subscriber_is_dropped_not_buffered() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &["--subscriber-buffer", "4"]).await?;
    // Subscribe over a raw connection and never read from it again.
    let (mut tx, rx) = connect_raw(daemon.socket(), 1024 * 1024).await?;
    tx.send(r#"{"jsonrpc":"2.0","id":1,"method":"events/subscribe"}"#.to_owned()).await?;
    let c = daemon.client().await?;
    assert!(
        eventually(Duration::from_secs(10), || async {
            c.status().await.is_ok_and(|s| s.subscribers == 1)
        })
        .await
    );
    // Long workspace paths make big events, so the socket buffers fill quickly.
    let deep = home.workspace().join("w".repeat(200)).join("x".repeat(200));
    std::fs::create_dir_all(&deep)?;
    let workspace = deep.display().to_string();
    let mut created = 0;
    let dropped = eventually(Duration::from_secs(60), || {
        let (c, workspace) = (&c, workspace.clone());
        created += 8;
        async move {
            let batch = (0..8).map(|_| {
                c.create(SessionCreateParams { workspace: workspace.clone(), ..Default::default() })
            });
            let _ = join_all(batch).await;
            c.status().await.is_ok_and(|s| s.subscribers == 0)
        }
    })
    .await;
    assert!(dropped, "slow subscriber still subscribed after {created} events\n{}", daemon.log());
    assert!(daemon.log().contains("dropping slow events subscriber"), "{}", daemon.log());
    drop((tx, rx));
    still_serving(&daemon, &id).await
}

#[tokio::test]
async fn a_socket_directory_open_to_others_is_refused_with_the_fix() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let home = TestHome::new()?;
    let open_dir = home.root().join("open");
    std::fs::create_dir(&open_dir)?;
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o755))?;
    let socket = open_dir.join("g.sock");
    let mut d = Daemon::spawn(&home, &["--socket", &socket.display().to_string()])?;
    assert!(!d.wait_exit(Duration::from_secs(10)).await?.success());
    let log = d.log();
    assert!(log.contains("is open to other users (mode 0755)"), "{log}");
    assert!(log.contains(&format!("chmod 700 {}", open_dir.display())), "{log}");
    assert!(!socket.exists());
    Ok(())
}

#[tokio::test]
async fn a_file_where_the_socket_should_be_is_not_deleted() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    std::fs::write(home.socket(), "precious")?;
    let mut d = Daemon::spawn(&home, &[])?;
    assert!(!d.wait_exit(Duration::from_secs(10)).await?.success());
    assert!(d.log().contains("exists and is not a socket"), "{}", d.log());
    assert_eq!(std::fs::read_to_string(home.socket())?, "precious");
    Ok(())
}

#[tokio::test]
async fn another_uid_is_refused() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if !nix::unistd::geteuid().is_root() || which("setpriv").is_none() {
        eprintln!("SKIPPED another_uid_is_refused: needs root and setpriv to act as another user");
        return Ok(());
    }
    let home = TestHome::new()?;
    let (daemon, id) = with_session(&home, &[]).await?;
    // Let uid 65534 reach the socket and run a copy of gemctl, so only the daemon's check stops it.
    for p in [home.root(), &home.root().join("run")] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o711))?;
    }
    std::fs::set_permissions(daemon.socket(), std::fs::Permissions::from_mode(0o666))?;
    let gemctl = home.root().join("gemctl");
    std::fs::copy(geminid_tests::bin("gemctl"), &gemctl)?;
    std::fs::set_permissions(&gemctl, std::fs::Permissions::from_mode(0o755))?;
    let out = geminid_tests::sealed(&mut std::process::Command::new("setpriv"))
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&gemctl)
        .args(["--no-autostart", "--socket", &daemon.socket().display().to_string(), "status"])
        .output()?;
    assert!(!out.status.success(), "another uid got in: {}", String::from_utf8_lossy(&out.stdout));
    assert!(
        eventually(Duration::from_secs(5), || async {
            daemon.log().contains("refused a connection")
        })
        .await,
        "{}",
        daemon.log()
    );
    assert!(daemon.log().contains("peer uid 65534"), "{}", daemon.log());
    still_serving(&daemon, &id).await
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
}
