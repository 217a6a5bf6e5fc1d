//! The database under damage and a full disk: what is lost is said, the damaged copy is kept,
//! and writes work again once there is room, without a restart.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use geminid_protocol::api::{DaemonApiClient, SessionApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::session::{SessionCreateParams, SessionListParams};
use geminid_tests::{Daemon, TestHome};
use jsonrpsee::core::client::Error as RpcError;
use nix::sys::signal::Signal;

async fn new_sessions(
    client: &Client,
    home: &TestHome,
    from: usize,
    n: usize,
) -> anyhow::Result<()> {
    for i in from..from + n {
        let ws = home.root().join("ws").join(format!("w{i}"));
        std::fs::create_dir_all(&ws)?;
        let p = SessionCreateParams { workspace: ws.display().to_string(), ..Default::default() };
        client.create(p).await?;
    }
    Ok(())
}

async fn session_count(client: &Client) -> anyhow::Result<usize> {
    let list = client.list(Some(SessionListParams::default())).await?;
    Ok(list.sessions.len())
}

/// The `damaged-*` directories in the data directory.
fn kept_copies(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with("damaged-") {
            out.push(e.path());
        }
    }
    Ok(out)
}

async fn stop(mut daemon: Daemon) -> anyhow::Result<()> {
    daemon.signal(Signal::SIGTERM)?;
    let status = daemon.wait_exit(Duration::from_secs(15)).await?;
    anyhow::ensure!(status.success(), "exit {status}\n{}", daemon.log());
    Ok(())
}

#[tokio::test]
async fn a_damaged_database_is_reported_kept_aside_and_replaced() -> anyhow::Result<()> {
    for damage in ["truncated", "junk at its start", "deleted"] {
        let home = TestHome::new()?;
        let daemon = Daemon::start(&home, &[]).await?;
        let client = daemon.client().await?;
        new_sessions(&client, &home, 0, 30).await?;
        drop(client);
        stop(daemon).await?;

        let db = home.data_dir().join("db");
        let original = std::fs::read(&db)?;
        match damage {
            "truncated" => std::fs::write(&db, &original[..original.len() / 3])?,
            "junk at its start" => {
                let mut bytes = original.clone();
                bytes[..4096].iter_mut().enumerate().for_each(|(i, b)| *b = b"JUNK"[i % 4]);
                std::fs::write(&db, bytes)?;
            }
            _ => std::fs::remove_file(&db)?,
        }

        let daemon = Daemon::start(&home, &[]).await?;
        let client = daemon.client().await?;
        let status = client.status().await?;
        let warning = status.warnings.join("\n");
        assert!(warning.contains("the database was damaged"), "{damage}: {warning}");
        let left = session_count(&client).await?;
        assert!(left < 30, "{damage}: {left} sessions");
        let lost = 30 - left;
        assert!(warning.contains(&format!("{lost} of its 30 sessions were lost")), "{warning}");
        assert!(daemon.log().contains("the database was damaged"), "{damage}: not logged");
        // The damaged copy is kept, whole, and not written over.
        let kept = kept_copies(&home.data_dir())?;
        assert_eq!(kept.len(), 1, "{damage}: {kept:?}");
        let kept_db = std::fs::metadata(kept[0].join("db")).map(|m| m.len() as usize).ok();
        let want = match damage {
            "truncated" => Some(original.len() / 3),
            "junk at its start" => Some(original.len()),
            _ => None,
        };
        assert_eq!(kept_db, want, "{damage}: the kept copy is not the damaged file");
        // The fresh database works, and keeps what it is given.
        new_sessions(&client, &home, 100, 3).await?;
        drop(client);
        stop(daemon).await?;
        let daemon = Daemon::start(&home, &[]).await?;
        let client = daemon.client().await?;
        assert_eq!(session_count(&client).await?, left + 3, "{damage}");
        assert!(client.status().await?.warnings.is_empty(), "{damage}: reported twice");
        drop(client);
        stop(daemon).await?;
    }
    Ok(())
}

/// sled's settings file (`conf`) overwritten with text or with bytes: sled alone would start
/// empty (text) or refuse to open (bytes). The damage is said, the damaged copy kept, and
/// every session read back from the database file itself.
#[tokio::test]
async fn a_garbage_conf_file_is_reported_and_loses_no_session() -> anyhow::Result<()> {
    for garbage in [b"garbage text here\n".to_vec(), vec![0xa5; 300]] {
        let home = TestHome::new()?;
        let daemon = Daemon::start(&home, &[]).await?;
        let client = daemon.client().await?;
        new_sessions(&client, &home, 0, 12).await?;
        drop(client);
        stop(daemon).await?;
        std::fs::write(home.data_dir().join("conf"), &garbage)?;

        let daemon = Daemon::start(&home, &[]).await?;
        let client = daemon.client().await?;
        let warning = client.status().await?.warnings.join("\n");
        assert!(warning.contains("the database was damaged"), "{garbage:?}: {warning}");
        assert!(warning.contains("0 of its 12 sessions were lost, 12 recovered"), "{warning}");
        assert!(daemon.log().contains("the database was damaged"), "not logged");
        assert_eq!(session_count(&client).await?, 12);
        let kept = kept_copies(&home.data_dir())?;
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(std::fs::read(kept[0].join("conf"))?, garbage, "the damaged conf is kept");
        drop(client);
        stop(daemon).await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_killed_daemon_is_not_damage() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut daemon = Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    new_sessions(&client, &home, 0, 10).await?;
    daemon.kill9().await?;
    let daemon = Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    assert_eq!(session_count(&client).await?, 10);
    assert!(client.status().await?.warnings.is_empty());
    assert!(kept_copies(&home.data_dir())?.is_empty());
    Ok(())
}

/// A small tmpfs mounted over the home's state directory, unmounted when dropped.
struct SmallDisk {
    at: PathBuf,
}

impl SmallDisk {
    fn mount(at: &Path, size: &str) -> Option<Self> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self { at: at.to_path_buf() })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

#[tokio::test]
async fn writes_work_again_once_a_full_disk_has_room() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let state = home.root().join("state");
    let Some(_disk) = SmallDisk::mount(&state, "3m") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return Ok(());
    };
    let daemon = Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    new_sessions(&client, &home, 0, 2).await.context("before the disk filled")?;
    // Fill the disk.
    let filler = state.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 4 * 1024 * 1024]);
    let (mut refused, mut saved) = (None, 2);
    for i in 2..400 {
        if let Err(e) = new_sessions(&client, &home, i, 1).await {
            refused = Some(e);
            break;
        }
        saved += 1;
    }
    let refused = refused.map(|e| e.to_string()).unwrap_or_default();
    assert!(refused.contains("is full, so this was not saved"), "{refused}");
    // Reads still work while writes fail.
    assert!(session_count(&client).await? >= saved);
    let warned = client.status().await?.warnings.join("\n");
    assert!(warned.contains("failed (is its disk full?)"), "{warned}");

    std::fs::remove_file(&filler)?;
    new_sessions(&client, &home, 1000, 1).await.map_err(|e| match e.downcast::<RpcError>() {
        Ok(e) => anyhow::anyhow!("still failing after space was freed: {e}"),
        Err(e) => e,
    })?;
    assert!(client.status().await?.warnings.is_empty());
    drop(client);
    stop(daemon).await?;
    let daemon = Daemon::start(&home, &[]).await.context("restarting")?;
    let client = daemon.client().await?;
    assert_eq!(session_count(&client).await?, saved + 1);
    drop(client);
    stop(daemon).await
}

/// Issue 67, item 5: `gemctl audit -n N` pages past the daemon's largest page (1,000) up to
/// what the log keeps, and says when more was asked than it keeps; the log holds no more than
/// it keeps, and a smaller bound at the next start forgets the records past it. Before, `-n`
/// above 1,000 printed 1,000 rows without a word.
#[tokio::test]
async fn the_audit_log_pages_past_a_page_and_keeps_its_bound() -> anyhow::Result<()> {
    use geminid_protocol::api::ToolsApiClient;
    use geminid_protocol::tools::ToolsCallParams;
    use geminid_tests::mcp::{FAST, new_session, stdio, write_user_settings};

    const KEEP: usize = 1_100;
    const CALLS: usize = 1_250;
    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, serde_json::json!({ "fx": stdio(&[]) }))?;
    let keep = format!("GEMINID_AUDIT_KEEP={KEEP}");
    let daemon = Daemon::launch(&home).args(FAST).under(&["env", &keep]).start().await?;
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    for chunk in (0..CALLS).collect::<Vec<_>>().chunks(25) {
        let calls = chunk.iter().map(|i| {
            client.tools_call(ToolsCallParams {
                session: session.clone(),
                name: "mcp_fx_echo".into(),
                args: serde_json::json!({ "text": i.to_string() }).as_object().cloned(),
                call_id: None,
                confirmed: false,
            })
        });
        for r in futures::future::join_all(calls).await {
            r?;
        }
    }
    let rows = |n: &str| -> anyhow::Result<(usize, String)> {
        let (code, out, err) = home.gemctl_run(&["audit", "-n", n])?;
        anyhow::ensure!(code == 0, "audit -n {n}: {out}{err}");
        Ok((out.lines().count() - 1, err)) // less the header
    };
    let (n, err) = rows("1050")?;
    assert_eq!((n, err.as_str()), (1050, ""), "two pages, nothing to say");
    let (n, err) = rows("5000")?;
    assert_eq!(n, KEEP, "every record kept, no more");
    assert!(err.contains("keeps the latest 1100 records"), "{err}");
    let json = home.gemctl_json(&["audit", "-n", "5000"])?;
    assert_eq!(json["records"].as_array().map(Vec::len), Some(KEEP));
    assert_eq!(json["keeps"], KEEP);
    let seqs: Vec<u64> = json["records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["seq"].as_u64())
        .collect();
    let newest = seqs.first().copied().unwrap_or(0);
    assert!(seqs.windows(2).all(|w| w[0] == w[1] + 1), "newest first, none twice or missing");
    drop(client);
    stop(daemon).await?;

    // A smaller bound: the records past it go at start.
    let daemon = Daemon::launch(&home).args(FAST).under(&["env", "GEMINID_AUDIT_KEEP=100"]);
    let daemon = daemon.start().await?;
    let json = home.gemctl_json(&["audit", "-n", "5000"])?;
    let seqs: Vec<u64> = json["records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["seq"].as_u64())
        .collect();
    assert_eq!((seqs.len(), seqs.first().copied()), (100, Some(newest)));
    stop(daemon).await
}

/// One `echo` call of `text` in `session`.
async fn echo(client: &Client, session: &str, text: &str) -> anyhow::Result<()> {
    use geminid_protocol::api::ToolsApiClient;
    use geminid_protocol::tools::ToolsCallParams;
    client
        .tools_call(ToolsCallParams {
            session: session.to_owned(),
            name: "mcp_fx_echo".into(),
            args: serde_json::json!({ "text": text }).as_object().cloned(),
            call_id: None,
            confirmed: false,
        })
        .await?;
    Ok(())
}

/// The audit records' `argsHash`es, newest first.
fn audit_hashes(home: &TestHome) -> anyhow::Result<Vec<String>> {
    let json = home.gemctl_json(&["audit", "-n", "1000"])?;
    Ok(json["records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["argsHash"].as_str().map(str::to_owned))
        .collect())
}

/// Issue 67, item 2: sled's own flusher runs every 10 s (it used to every 500 ms); what a
/// client is not told about (the audit) is flushed by the daemon after its writes, and
/// everything at a clean stop. A session made and a call made just before `gemctl daemon
/// stop` are there after the restart.
#[tokio::test]
async fn a_session_and_a_call_just_before_a_clean_stop_are_kept() -> anyhow::Result<()> {
    use geminid_tests::mcp::{FAST, new_session, stdio, write_user_settings};

    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, serde_json::json!({ "fx": stdio(&[]) }))?;
    let mut daemon = Daemon::launch(&home).args(FAST).start().await?;
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    echo(&client, &session, "just before the stop").await?;
    let hashes = audit_hashes(&home)?;
    assert_eq!(hashes.len(), 1, "{hashes:?}");
    drop(client);
    home.gemctl_json(&["daemon", "stop"])?;
    let status = daemon.wait_exit(Duration::from_secs(15)).await?;
    anyhow::ensure!(status.success(), "exit {status}\n{}", daemon.log());

    let daemon = Daemon::launch(&home).args(FAST).start().await?;
    let client = daemon.client().await?;
    let sessions = client.list(Some(SessionListParams::default())).await?.sessions;
    assert!(sessions.iter().any(|s| s.id == session), "{sessions:?}");
    assert_eq!(audit_hashes(&home)?, hashes);
    drop(client);
    stop(daemon).await
}

/// Issue 67, item 2: an audit record reaches the database file about half a second after its
/// call, with no stop and before sled's own flusher (every 10 s) would: seen in the
/// file, then the daemon is killed, and the record is there after the restart.
#[tokio::test]
async fn an_audit_record_reaches_the_disk_soon_after_its_call() -> anyhow::Result<()> {
    use geminid_tests::mcp::{FAST, new_session, stdio, write_user_settings};

    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, serde_json::json!({ "fx": stdio(&[]) }))?;
    let mut daemon = Daemon::launch(&home).args(FAST).start().await?;
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    echo(&client, &session, "a call in the middle of the day").await?;
    let hashes = audit_hashes(&home)?;
    let hash = hashes.first().context("no audit record")?.clone();
    // The record is a JSON line in the audit log's files: its argument hash appears there
    // once written out, which the daemon does half a second after the call.
    let dir = home.data_dir().join("audit");
    let written = |dir: &std::path::Path| {
        std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| {
            std::fs::read(e.path())
                .is_ok_and(|b| b.windows(hash.len()).any(|w| w == hash.as_bytes()))
        })
    };
    let on_disk = geminid_tests::poll(Duration::from_secs(5), || {
        let found = written(&dir);
        async move { found.then_some(()) }
    })
    .await;
    anyhow::ensure!(on_disk.is_some(), "the record never reached {}", dir.display());
    drop(client);
    daemon.kill9().await?;

    let daemon = Daemon::launch(&home).args(FAST).start().await?;
    assert_eq!(audit_hashes(&home)?, hashes);
    stop(daemon).await
}
