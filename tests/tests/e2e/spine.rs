//! Every method of the spine through the real socket, restart persistence and shutdown.

use std::collections::BTreeSet;
use std::time::Duration;

use geminid_protocol::PROTOCOL_VERSION;
use geminid_protocol::api::{DaemonApiClient, SessionApiClient};
use geminid_protocol::client::ConnectError;
use geminid_protocol::daemon::HelloParams;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::event::EventsSubscribeParams;
use geminid_protocol::event::{Event, EventBody};
use geminid_protocol::session::{
    EnvSource, SessionAttachParams, SessionCreateParams, SessionIdParams, SessionListParams,
};
use geminid_tests::{Daemon, TestHome, alive, eventually, http_post};
use jsonrpsee::core::client::Error as RpcError;
use nix::sys::signal::Signal;
use pretty_assertions::assert_eq;

fn create(ws: &std::path::Path) -> SessionCreateParams {
    SessionCreateParams { workspace: ws.to_string_lossy().into_owned(), ..Default::default() }
}

fn code(e: RpcError) -> i32 {
    match e {
        RpcError::Call(obj) => obj.code(),
        other => panic!("expected a call error, got {other}"),
    }
}

async fn next_event(
    sub: &mut geminid_protocol::client::Subscription<Event>,
) -> anyhow::Result<Event> {
    let item = tokio::time::timeout(Duration::from_secs(10), sub.next()).await?;
    Ok(item.ok_or_else(|| anyhow::anyhow!("subscription ended"))??)
}

#[tokio::test]
async fn every_method_over_the_socket() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let a = daemon.client().await?;
    let b = daemon.client().await?;

    let hello = a.hello(HelloParams { protocol_version: PROTOCOL_VERSION, client: None }).await?;
    assert_eq!((hello.protocol_version, hello.pid), (PROTOCOL_VERSION, daemon.pid()));

    let mut status = a.status().await?;
    assert_eq!(status.pid, daemon.pid());
    assert_eq!(status.socket, home.socket().display().to_string());
    assert_eq!(status.data_dir, home.data_dir().display().to_string());
    // The readiness probe's connection may still be closing on a busy machine.
    if status.connections != 2 {
        let two = geminid_tests::poll(Duration::from_secs(5), || async {
            match a.status().await {
                Ok(s) if s.connections != 2 => None,
                got => Some(got),
            }
        });
        if let Some(got) = two.await {
            status = got?;
        }
    }
    assert_eq!(status.connections, 2);

    let mut events = b.subscribe_events(None).await?;
    let s = a.create(create(&home.workspace())).await?;
    assert_eq!(s.attached_connections, 1);
    assert_eq!(s.workspace, std::fs::canonicalize(home.workspace())?.display().to_string());
    assert!(
        matches!(next_event(&mut events).await?.body, EventBody::SessionCreated(ref e) if e.id == s.id)
    );

    let attached = b.attach(SessionAttachParams { id: s.id.clone(), env: None }).await?;
    assert_eq!(attached.attached_connections, 2);
    assert!(matches!(next_event(&mut events).await?.body, EventBody::SessionAttached(_)));
    assert_eq!(a.get(SessionIdParams { id: s.id.clone() }).await?.attached_connections, 2);
    let list = a.list(None).await?;
    assert_eq!(list.sessions.iter().map(|s| &s.id).collect::<Vec<_>>(), vec![&s.id]);
    assert_eq!(a.status().await?.sessions.attached, 1);

    let detached = b.detach(SessionIdParams { id: s.id.clone() }).await?;
    assert_eq!(detached.attached_connections, 1);
    assert!(matches!(next_event(&mut events).await?.body, EventBody::SessionDetached(_)));

    let closed = b.close(SessionIdParams { id: s.id.clone() }).await?;
    assert_eq!(closed.id, s.id);
    assert!(matches!(next_event(&mut events).await?.body, EventBody::SessionClosed(_)));
    assert_eq!(a.list(None).await?.sessions.len(), 0);
    assert_eq!(a.status().await?.sessions.total, 0);
    Ok(())
}

#[tokio::test]
async fn plain_http_with_named_params_works_like_curl() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let ws = home.workspace().display().to_string();
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"session/create","params":{{"workspace":"{ws}"}}}}"#
    );
    let (status, reply) = http_post(daemon.socket(), &body).await?;
    assert!(status.contains("200"), "{status}");
    let reply: serde_json::Value = serde_json::from_str(&reply)?;
    assert_eq!(reply["result"]["workspace"], ws);
    // Positional form too, and a batch.
    let id = reply["result"]["id"].as_str().unwrap_or_default().to_owned();
    let batch = format!(
        r#"[{{"jsonrpc":"2.0","id":1,"method":"session/get","params":[{{"id":"{id}"}}]}},
            {{"jsonrpc":"2.0","id":2,"method":"session/get","params":{{"id":"{id}"}}}}]"#
    );
    let (_, reply) = http_post(daemon.socket(), &batch).await?;
    let reply: serde_json::Value = serde_json::from_str(&reply)?;
    assert_eq!(reply[0]["result"]["id"], id.as_str());
    assert_eq!(reply[1]["result"]["id"], id.as_str());
    Ok(())
}

#[tokio::test]
async fn version_mismatch_names_both_versions() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    let err = client
        .hello(HelloParams { protocol_version: PROTOCOL_VERSION + 1, client: None })
        .await
        .err();
    let Some(RpcError::Call(obj)) = err else { panic!("expected a call error: {err:?}") };
    assert_eq!(obj.code(), ErrorCode::VersionMismatch.code());
    let msg = obj.message();
    assert!(msg.contains(&format!("speaks version {}", PROTOCOL_VERSION + 1)), "{msg}");
    assert!(msg.contains(&format!("speaks version {PROTOCOL_VERSION}")), "{msg}");
    assert!(msg.contains("restart it from the client's release"), "{msg}");
    // An older client (an editor written from an old PROTOCOL.md) is told to send this one.
    let older = HelloParams { protocol_version: PROTOCOL_VERSION - 1, client: None };
    let err = client.hello(older).await.err();
    let Some(RpcError::Call(obj)) = err else { panic!("expected a call error: {err:?}") };
    let msg = obj.message();
    assert!(msg.contains(&format!("send `protocolVersion: {PROTOCOL_VERSION}`")), "{msg}");
    assert!(!msg.contains("restart"), "the daemon is not the one behind: {msg}");
    Ok(())
}

#[tokio::test]
async fn unknown_session_and_missing_workspace_are_clear_errors() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let c = daemon.client().await?;
    let missing = SessionIdParams { id: "01a00000-0000-7000-8000-000000000000".into() };
    let not_found = ErrorCode::SessionNotFound.code();
    assert_eq!(c.get(missing.clone()).await.map_err(code).err(), Some(not_found));
    assert_eq!(c.close(missing.clone()).await.map_err(code).err(), Some(not_found));
    assert_eq!(c.detach(missing.clone()).await.map_err(code).err(), Some(not_found));
    let attach = SessionAttachParams { id: missing.id.clone(), env: None };
    assert_eq!(c.attach(attach).await.map_err(code).err(), Some(not_found));
    let sub =
        c.subscribe_events(Some(EventsSubscribeParams { session: Some(missing.id), kinds: None }));
    assert_eq!(sub.await.map_err(code).err(), Some(not_found));

    let gone = home.root().join("no-such-dir");
    let err = c.create(create(&gone)).await.err();
    let Some(RpcError::Call(obj)) = err else { panic!("expected a call error: {err:?}") };
    assert_eq!(obj.code(), ErrorCode::InvalidWorkspace.code());
    assert!(obj.message().contains("does not exist"), "{}", obj.message());
    // Nothing was created by the failures.
    assert_eq!(c.status().await?.sessions.total, 0);
    Ok(())
}

#[tokio::test]
async fn sessions_survive_a_graceful_restart() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut daemon = Daemon::start(&home, &[]).await?;
    let c = daemon.client().await?;
    let mut before = Vec::new();
    for _ in 0..3 {
        before.push(c.create(create(&home.workspace())).await?);
    }
    drop(c);
    daemon.signal(Signal::SIGTERM)?;
    assert!(daemon.wait_exit(Duration::from_secs(10)).await?.success());
    assert!(!home.socket().exists(), "socket left behind after SIGTERM");

    let daemon = Daemon::start(&home, &[]).await?;
    let after = daemon.client().await?.list(None).await?.sessions;
    let key = |s: &geminid_protocol::session::Session| {
        (s.id.clone(), s.workspace.clone(), s.created_at.clone())
    };
    assert_eq!(
        after.iter().map(key).collect::<Vec<_>>(),
        before.iter().map(key).collect::<Vec<_>>()
    );
    assert!(after.iter().all(|s| s.attached_connections == 0 && s.env_source == EnvSource::Daemon));
    Ok(())
}

#[tokio::test]
async fn acknowledged_sessions_survive_sigkill_during_writes() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut daemon = Daemon::start(&home, &[]).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut writers = Vec::new();
    for _ in 0..4 {
        let client = daemon.client().await?;
        let (tx, ws) = (tx.clone(), home.workspace());
        writers.push(tokio::spawn(async move {
            // Write until the daemon dies; only replies that arrived count as acknowledged.
            while let Ok(s) = client.create(create(&ws)).await {
                if tx.send(s.id).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut acked = BTreeSet::new();
    while acked.len() < 60 {
        acked.insert(rx.recv().await.ok_or_else(|| anyhow::anyhow!("writers stopped"))?);
    }
    daemon.kill9().await?;
    for w in writers {
        w.await?;
    }
    while let Ok(id) = rx.try_recv() {
        acked.insert(id);
    }
    assert!(home.socket().exists(), "a SIGKILLed daemon cannot remove its socket");

    let daemon = Daemon::start(&home, &[]).await?;
    let c = daemon.client().await?;
    let mut stored = BTreeSet::new();
    let mut cursor = None;
    loop {
        let page = c.list(Some(SessionListParams { cursor, ..Default::default() })).await?;
        stored.extend(page.sessions.into_iter().map(|s| s.id));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let lost: Vec<_> = acked.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged sessions lost after SIGKILL: {lost:?}");
    assert!(daemon.log().contains("removed a stale socket"), "{}", daemon.log());
    Ok(())
}

#[tokio::test]
async fn client_env_is_used_in_memory_and_never_stored_or_shown() -> anyhow::Result<()> {
    const SENTINEL: &str = "sentinel-Zq8xK2-secret-value";
    let home = TestHome::new()?;
    let mut daemon = Daemon::start(&home, &[]).await?;
    let c = daemon.client().await?;
    let mut params = create(&home.workspace());
    params.env = Some([("MY_API_TOKEN".to_owned(), SENTINEL.to_owned())].into());
    let s = c.create(params).await?;
    assert_eq!(s.env_source, EnvSource::Client);
    let shown = serde_json::to_string(&c.get(SessionIdParams { id: s.id.clone() }).await?)?;
    assert!(!shown.contains(SENTINEL));
    drop(c);
    daemon.signal(Signal::SIGTERM)?;
    daemon.wait_exit(Duration::from_secs(10)).await?;
    assert!(!daemon.log().contains(SENTINEL), "the env reached the log");
    for entry in walk(&home.data_dir())? {
        let bytes = std::fs::read(&entry)?;
        let found = bytes.windows(SENTINEL.len()).any(|w| w == SENTINEL.as_bytes());
        assert!(!found, "the client's env was written to {}", entry.display());
    }
    Ok(())
}

fn walk(dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() { files.extend(walk(&p)?) } else { files.push(p) }
    }
    Ok(files)
}

#[tokio::test]
async fn sigterm_sigint_and_shutdown_are_graceful() -> anyhow::Result<()> {
    for how in ["SIGTERM", "SIGINT", "daemon/shutdown"] {
        let home = TestHome::new()?;
        let mut daemon = Daemon::start(&home, &[]).await?;
        let watcher = daemon.client().await?;
        let mut events = watcher.subscribe_events(None).await?;
        let c = daemon.client().await?;
        let s = c.create(create(&home.workspace())).await?;
        let _ = next_event(&mut events).await?; // session/created
        match how {
            "SIGTERM" => daemon.signal(Signal::SIGTERM)?,
            "SIGINT" => daemon.signal(Signal::SIGINT)?,
            _ => assert_eq!(c.shutdown().await?.pid, daemon.pid()),
        }
        let ev = next_event(&mut events).await?;
        let EventBody::DaemonShuttingDown(d) = ev.body else { panic!("{how}: got {ev:?}") };
        assert!(d.reason.contains(how), "{how}: {}", d.reason);
        let status = daemon.wait_exit(Duration::from_secs(10)).await?;
        assert!(status.success(), "{how}: exit {status}\n{}", daemon.log());
        assert!(!home.socket().exists(), "{how}: socket left behind");
        // The session written before the shutdown is there after a restart.
        let daemon = Daemon::start(&home, &[]).await?;
        let got = daemon.client().await?.get(SessionIdParams { id: s.id.clone() }).await?;
        assert_eq!(got.id, s.id);
    }
    Ok(())
}

#[tokio::test]
async fn a_second_daemon_names_the_first_and_a_stale_socket_is_replaced() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut first = Daemon::start(&home, &[]).await?;
    let mut second = Daemon::spawn(&home, &[])?;
    let status = second.wait_exit(Duration::from_secs(10)).await?;
    assert!(!status.success());
    let log = second.log();
    assert!(log.contains(&format!("already running (pid {})", first.pid())), "{log}");
    // The first one is unharmed.
    assert!(first.client().await?.status().await.is_ok());
    // Another socket, the same database: the first daemon is named, and the way out.
    let dir = tempfile::tempdir()?;
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    let other = dir.path().join("other.sock").display().to_string();
    let mut second = Daemon::spawn(&home, &["--socket", &other])?;
    assert!(!second.wait_exit(Duration::from_secs(10)).await?.success());
    let log = second.log();
    assert!(
        log.contains(&format!(
            "is in use by another geminid (pid {}, socket {}); give this one a database of its \
             own with --data-dir DIR",
            first.pid(),
            home.socket().display()
        )),
        "{log}"
    );
    assert!(first.client().await?.status().await.is_ok());

    first.kill9().await?;
    assert!(home.socket().exists());
    assert!(matches!(
        geminid_protocol::client::connect(&home.socket(), &geminid_tests::options()).await,
        Err(ConnectError::NotRunning { .. })
    ));
    let third = Daemon::start(&home, &[]).await?;
    assert!(third.log().contains("removed a stale socket"), "{}", third.log());
    assert!(alive(third.pid()));
    Ok(())
}

#[tokio::test]
async fn killed_clients_are_detached_and_their_subscriptions_freed() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let c = daemon.client().await?;
    let s = c.create(create(&home.workspace())).await?;
    // A gemctl process attached to the session and subscribed to its events.
    let mut attach = home
        .gemctl_cmd(&["--json", "attach", &s.id])
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let ready = eventually(Duration::from_secs(10), || async {
        c.status().await.is_ok_and(|st| st.subscribers == 1)
            && c.get(SessionIdParams { id: s.id.clone() })
                .await
                .is_ok_and(|s| s.attached_connections == 2)
    })
    .await;
    assert!(ready, "gemctl attach never attached\n{}", daemon.log());
    attach.kill()?;
    attach.wait()?;
    let freed = eventually(Duration::from_secs(10), || async {
        c.status().await.is_ok_and(|st| st.subscribers == 0 && st.connections == 1)
            && c.get(SessionIdParams { id: s.id.clone() })
                .await
                .is_ok_and(|s| s.attached_connections == 1)
    })
    .await;
    assert!(freed, "killed client still counted: {:?}", c.status().await?);
    Ok(())
}

/// A daemon killed while it was starting a server leaves its lock with the child it had just
/// forked, until that child's exec closes it: a start right after the kill waits that out
/// (the soak met it), while a live daemon's lock is refused at once (the test above).
#[tokio::test]
async fn a_lock_left_by_a_daemon_that_is_gone_is_waited_for() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut gone = std::process::Command::new("true").spawn()?;
    let dead = gone.id();
    gone.wait()?;
    let lock = geminid_protocol::socket::lock_path(&home.socket());
    let mut held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&lock)?;
    held.try_lock()?;
    std::io::Write::write_all(&mut held, format!("{dead}\n").as_bytes())?;
    let daemon = Daemon::spawn(&home, &[])?;
    // Once the daemon has the lock file open (it is trying it), and is still there: it waits
    // instead of refusing.
    let fd_dir = format!("/proc/{}/fd", daemon.pid());
    let trying = eventually(Duration::from_secs(10), || async {
        std::fs::read_dir(&fd_dir).is_ok_and(|fds| {
            fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|p| p == lock))
        })
    });
    assert!(trying.await, "the daemon never opened the lock file\n{}", daemon.log());
    assert!(!geminid_tests::process_gone(daemon.pid()), "refused at once\n{}", daemon.log());
    drop(held);
    daemon.wait_ready().await?;
    assert!(daemon.client().await?.status().await.is_ok());
    Ok(())
}
