//! The typed client of `geminid-protocol` against the real daemon: many calls on one
//! connection, subscriptions that end, fall behind or are dropped, timeouts, batches, and a
//! daemon that goes away.

use std::time::Duration;

use geminid_protocol::api::{CallsApiClient, DaemonApiClient, SessionApiClient};
use geminid_protocol::client::{Client, connect};
use geminid_protocol::event::EventBody;
use geminid_protocol::mcp::ServerParams;
use geminid_protocol::session::{SessionCreateParams, SessionIdParams};
use geminid_tests::mcp::{Setup, stdio};
use geminid_tests::{Daemon, TestHome, eventually, options};
use jsonrpsee::core::client::{ClientT, Error as RpcError};
use jsonrpsee::core::params::BatchRequestBuilder;
use jsonrpsee::rpc_params;
use serde_json::{Value, json};

async fn status_counts(client: &Client) -> (u32, u32) {
    match client.status().await {
        Ok(s) => (s.connections, s.subscribers),
        Err(e) => panic!("daemon/status failed: {e}"),
    }
}

async fn new_session(client: &Client, home: &TestHome, name: &str) -> anyhow::Result<String> {
    let ws = home.root().join(name);
    std::fs::create_dir_all(&ws)?;
    let p = SessionCreateParams { workspace: ws.display().to_string(), ..Default::default() };
    Ok(client.create(p).await?.id)
}

#[tokio::test]
async fn one_connection_carries_many_concurrent_calls() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(new_session(&client, &home, &format!("ws{i}")).await?);
    }
    // 400 calls in flight at once on one connection; each answer must be its own.
    let calls = (0..400).map(|i| {
        let id = ids[i % ids.len()].clone();
        let client = &client;
        async move { (id.clone(), client.get(SessionIdParams { id }).await) }
    });
    let answers = futures::future::join_all(calls).await;
    for (asked, got) in answers {
        assert_eq!(got?.id, asked);
    }
    Ok(())
}

#[tokio::test]
async fn dropped_subscriptions_and_clients_are_released() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let watcher = daemon.client().await?;
    let client = daemon.client().await?;
    // (The harness's readiness probe may still be closing.)
    assert!(
        eventually(Duration::from_secs(5), || async { status_counts(&watcher).await == (2, 0) })
            .await
    );

    let sub = client.subscribe_events(None).await?;
    assert_eq!(status_counts(&watcher).await.1, 1);
    drop(sub);
    assert!(
        eventually(Duration::from_secs(5), || async { status_counts(&watcher).await.1 == 0 }).await,
        "dropping a subscription unsubscribes"
    );

    let sub = client.subscribe_events(None).await?;
    assert_eq!(status_counts(&watcher).await.1, 1);
    sub.unsubscribe().await?;
    assert!(
        eventually(Duration::from_secs(5), || async { status_counts(&watcher).await.1 == 0 }).await,
        "unsubscribing ends the daemon's side"
    );

    let _kept = client.subscribe_events(None).await?;
    drop(client);
    assert!(
        eventually(Duration::from_secs(5), || async { status_counts(&watcher).await == (1, 0) })
            .await,
        "dropping the client closes its connection and frees its subscriptions"
    );
    Ok(())
}

#[tokio::test]
async fn a_subscriber_that_falls_behind_ends_with_an_error() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let mut opts = options();
    opts.subscription_buffer = 4;
    let (client, _) = connect(daemon.socket(), &opts).await?;
    let mut events = client.subscribe_events(None).await?;
    // Ten sessions' events nobody reads: more than the four the client buffers.
    for i in 0..10 {
        new_session(&client, &home, &format!("ws{i}")).await?;
    }
    // The client fell behind (the fifth arrived with four unread) before anything is read:
    // it told the daemon to stop sending.
    let behind =
        eventually(Duration::from_secs(5), || async { status_counts(&client).await.1 == 0 }).await;
    assert!(behind, "the client never fell behind");
    let mut delivered = 0;
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(5), events.next()).await? {
            Some(Ok(_)) => delivered += 1,
            other => break other,
        }
    };
    assert_eq!(delivered, 4, "what was buffered is still delivered");
    let Some(Err(RpcError::Custom(msg))) = end else { panic!("expected a lag error: {end:?}") };
    assert!(msg.contains("fell 4 notifications behind"), "{msg}");
    assert!(events.next().await.is_none(), "and then the stream ends");
    // The connection is unharmed and the daemon was told to stop sending.
    assert!(
        eventually(Duration::from_secs(5), || async { status_counts(&client).await.1 == 0 }).await
    );
    Ok(())
}

#[tokio::test]
async fn a_timed_out_call_leaves_the_connection_in_order() -> anyhow::Result<()> {
    let t = Setup::new(json!({ "fx": stdio(&[]) })).await?;
    let mut opts = options();
    opts.request_timeout = Duration::from_millis(300);
    let (client, _) = connect(t.daemon.socket(), &opts).await?;
    let session = t.session.clone();
    let call = |tool: &'static str, args: Value| {
        let p = json!({ "session": session, "name": tool, "args": args });
        client.request::<Value, _>("tools/call", rpc_params![p])
    };
    // Warm up: the server starts on the first call.
    t.client
        .request::<Value, _>("mcp/start", rpc_params![json!({"session": t.session, "wait": true})])
        .await?;
    let late = call("mcp_fx_sleep", json!({ "ms": 1000 })).await;
    assert!(matches!(late, Err(RpcError::RequestTimeout)), "{late:?}");
    // The late answer arrives while the next call waits, and must not be taken for it.
    let next = call("mcp_fx_sleep", json!({ "ms": 100 })).await?;
    assert_eq!(next["display"], "slept 100 ms");
    // The late answer has been sent once the daemon no longer lists its call.
    let answered = eventually(Duration::from_secs(10), || async {
        t.client.calls_list(None).await.is_ok_and(|l| l.calls.is_empty())
    })
    .await;
    assert!(answered, "the late call never ended");
    let echo = call("mcp_fx_echo", json!({ "text": "still in order" })).await?;
    assert_eq!(echo["display"], "still in order");
    Ok(())
}

#[tokio::test]
async fn batches_answer_in_order() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    let mut batch = BatchRequestBuilder::new();
    batch.insert("daemon/status", rpc_params![])?;
    batch.insert("no/such/method", rpc_params![])?;
    batch.insert("session/list", rpc_params![])?;
    let r = client.batch_request::<Value>(batch).await?;
    assert_eq!((r.num_successful_calls(), r.num_failed_calls()), (2, 1));
    let entries: Vec<_> = r.into_iter().collect();
    assert_eq!(entries[0].as_ref().ok().map(|s| s["pid"].clone()), Some(json!(daemon.pid())));
    assert_eq!(entries[1].as_ref().err().map(|e| e.code()), Some(-32601));
    assert!(entries[2].as_ref().is_ok_and(|l| l["sessions"].is_array()));
    Ok(())
}

#[tokio::test]
async fn calls_and_streams_end_cleanly_when_the_daemon_dies() -> anyhow::Result<()> {
    let t = Setup::new(json!({ "fx": stdio(&[]) })).await?;
    let Setup { home, mut daemon, client, session } = t;
    let start = json!({"session": session, "wait": true});
    client.request::<Value, _>("mcp/start", rpc_params![start]).await?;
    let mut events = client.subscribe_events(None).await?;
    let mut logs = client
        .mcp_follow_logs(ServerParams { session: Some(session.clone()), name: "fx".into() })
        .await?;
    // (The server is asleep when the daemon dies; it exits once that call ends: 2 s.)
    let pending = {
        let p = json!({ "session": session, "name": "mcp_fx_sleep", "args": { "ms": 2000 } });
        client.request::<Value, _>("tools/call", rpc_params![p])
    };
    let killer = async {
        // Once the call is asleep on the server (its log says so).
        while let Some(Ok(line)) = logs.next().await {
            if line.text.contains("sleeping 2000 ms") {
                break;
            }
        }
        daemon.kill9().await
    };
    let (pending, killed) =
        tokio::time::timeout(Duration::from_secs(10), async { tokio::join!(pending, killer) })
            .await?;
    killed?;
    assert!(matches!(pending, Err(RpcError::RestartNeeded(_))), "{pending:?}");
    // Both streams end instead of hanging.
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(e) = events.next().await {
            assert!(
                !matches!(e, Ok(ref ev) if matches!(ev.body, EventBody::DaemonShuttingDown(_))),
                "SIGKILL sends no goodbye"
            );
        }
        while logs.next().await.is_some() {}
    })
    .await;
    assert!(end.is_ok(), "subscriptions end with the connection");
    assert!(!client.is_connected());
    let after = client.status().await;
    let Err(RpcError::RestartNeeded(why)) = after else { panic!("{after:?}") };
    assert!(why.to_string().contains("connection"), "{why}");
    drop((client, daemon, home));
    Ok(())
}

/// Twenty calls that outlast the shutdown grace, over five connections: each gets an answer
/// (`shuttingDown`), none a bare closed connection; new work sent after the SIGTERM is refused
/// with that code or meets a closed connection, and never waits.
#[tokio::test]
async fn every_call_in_flight_at_sigterm_is_answered() -> anyhow::Result<()> {
    use geminid_protocol::error::ErrorCode;
    use nix::sys::signal::Signal;
    let t = Setup::new(json!({ "fx": stdio(&[]) })).await?;
    let Setup { home: _home, mut daemon, client, session } = t;
    let _keep = &client;
    let start = json!({"session": session, "wait": true});
    client.request::<Value, _>("mcp/start", rpc_params![start]).await?;
    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(daemon.client().await?);
    }
    let calls = (0..20).map(|i| {
        let c = &clients[i % clients.len()];
        let p = json!({ "session": session, "name": "mcp_fx_sleep", "args": { "ms": 30_000 } });
        c.request::<Value, _>("tools/call", rpc_params![p])
    });
    let all = futures::future::join_all(calls);
    let mut events = client.subscribe_events(None).await?;
    let stopper = async {
        // Once all twenty run (the daemon lists them), then once the shutdown has begun.
        let running = eventually(Duration::from_secs(10), || async {
            client.calls_list(None).await.is_ok_and(|l| l.calls.len() == 20)
        });
        anyhow::ensure!(running.await, "the twenty calls never all ran");
        daemon.signal(Signal::SIGTERM)?;
        while let Some(event) = events.next().await {
            if matches!(event?.body, EventBody::DaemonShuttingDown(_)) {
                break;
            }
        }
        // New work on a connection that is still open (it has calls running).
        let p = json!({ "session": session, "name": "mcp_fx_echo", "args": { "text": "late" } });
        let late = clients[0].request::<Value, _>("tools/call", rpc_params![p]).await;
        anyhow::Ok(late)
    };
    let started = std::time::Instant::now();
    let (answers, late) =
        tokio::time::timeout(Duration::from_secs(20), async { tokio::join!(all, stopper) }).await?;
    let shutting_down = ErrorCode::ShuttingDown.code();
    match late? {
        Err(RpcError::Call(e)) => {
            assert_eq!(e.code(), shutting_down, "{e:?}");
            assert!(e.message().contains("takes no new work"), "{}", e.message());
        }
        Err(RpcError::RestartNeeded(_)) => {}
        other => panic!("a call after SIGTERM: {other:?}"),
    }
    for (i, answer) in answers.into_iter().enumerate() {
        match answer {
            Err(RpcError::Call(e)) => {
                assert_eq!(e.code(), shutting_down, "call {i}: {e:?}\n{}", daemon.log());
                assert!(e.message().contains("grace"), "call {i}: {}", e.message());
            }
            other => panic!("call {i} got {other:?}"),
        }
    }
    assert!(started.elapsed() < Duration::from_secs(12), "took {:?}", started.elapsed());
    let status = daemon.wait_exit(Duration::from_secs(10)).await?;
    assert!(status.success(), "exit {status}\n{}", daemon.log());
    Ok(())
}
