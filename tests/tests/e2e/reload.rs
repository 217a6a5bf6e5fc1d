//! Hot reload end to end: edit Gemini CLI's files in every way editors and tools do, and
//! watch the daemon's event stream.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use geminid_protocol::api::{McpApiClient, SessionApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::client::Subscription;
use geminid_protocol::config::McpReloadParams;
use geminid_protocol::event::EventsSubscribeParams;
use geminid_protocol::event::{ConfigChanged, Event, EventBody};
use geminid_protocol::session::SessionCreateParams;
use geminid_tests::{Daemon, INPUT_CHANGED, TestHome};
use pretty_assertions::assert_eq;

struct Watch {
    daemon: Daemon,
    client: Client,
    session: String,
    events: Subscription<Event>,
    user: PathBuf,
}

async fn setup(home: &TestHome) -> anyhow::Result<Watch> {
    setup_with(home, Daemon::start(home, &[]).await?).await
}

async fn setup_with(home: &TestHome, daemon: Daemon) -> anyhow::Result<Watch> {
    // Trust the workspace through the session's environment, as a headless run would.
    let env = [("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned())].into();
    let client = daemon.client().await?;
    let workspace = home.workspace().display().to_string();
    let s = client
        .create(SessionCreateParams {
            workspace,
            env: Some(env),
            reuse_default: false,
            ..Default::default()
        })
        .await?;
    let filter = EventsSubscribeParams {
        session: Some(s.id.clone()),
        kinds: Some(vec!["config/changed".into()]),
    };
    let events = client.subscribe_events(Some(filter)).await?;
    Ok(Watch {
        daemon,
        client,
        session: s.id,
        events,
        user: home.root().join("home/.gemini/settings.json"),
    })
}

/// The next event of `events`, a `config/changed` within 10 s.
pub(super) async fn config_changed(
    events: &mut Subscription<Event>,
) -> anyhow::Result<ConfigChanged> {
    let ev = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .map_err(|_| anyhow::anyhow!("no config/changed event within 10 s"))?
        .ok_or_else(|| anyhow::anyhow!("subscription ended"))??;
    match ev.body {
        EventBody::ConfigChanged(c) => Ok(c),
        other => anyhow::bail!("unexpected event {other:?}"),
    }
}

impl Watch {
    async fn next(&mut self) -> anyhow::Result<ConfigChanged> {
        config_changed(&mut self.events).await
    }

    /// No event arrives within `d`.
    async fn quiet(&mut self, d: Duration) -> bool {
        tokio::time::timeout(d, self.events.next()).await.is_err()
    }
}

fn servers(names: &[&str]) -> String {
    let entries: Vec<String> =
        names.iter().map(|n| format!("\"{n}\": {{\"command\": \"{n}\"}}")).collect();
    format!("{{\"mcpServers\": {{{}}}}}", entries.join(", "))
}

/// Replace a file the way many editors do: write a sibling, then rename over it.
fn replace_by_rename(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.swp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

#[tokio::test]
async fn edits_creations_renames_and_deletions_are_announced() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut w = setup(&home).await?;

    // Created after start (the user file did not exist).
    std::fs::write(&w.user, servers(&["a"]))?;
    let c = w.next().await?;
    assert_eq!((c.reason.as_str(), c.servers_added.clone()), ("watch", vec!["a".to_owned()]));

    // Edited in place.
    std::fs::write(&w.user, r#"{"mcpServers": {"a": {"command": "a2"}, "b": {"command": "b"}}}"#)?;
    let c = w.next().await?;
    assert_eq!((c.servers_added, c.servers_changed), (vec!["b".to_owned()], vec!["a".to_owned()]));

    // Replaced by rename.
    replace_by_rename(&w.user, &servers(&["b"]))?;
    let c = w.next().await?;
    assert_eq!(c.servers_removed, ["a"]);

    // A workspace file in a .gemini directory that did not exist yet.
    std::fs::create_dir(home.workspace().join(".gemini"))?;
    std::fs::write(home.workspace().join(".gemini/settings.json"), servers(&["w"]))?;
    let c = w.next().await?;
    assert_eq!(c.servers_added, ["w"]);

    // Deleted.
    std::fs::remove_file(&w.user)?;
    let c = w.next().await?;
    assert_eq!(c.servers_removed, ["b"]);

    // Touching an unrelated file in a watched directory is not a change.
    std::fs::write(home.root().join("home/.gemini/unrelated.txt"), "x")?;
    assert!(w.quiet(Duration::from_millis(800)).await, "an unrelated file caused an event");
    Ok(())
}

#[tokio::test]
async fn a_truncated_file_keeps_its_last_good_contents_and_is_reported() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut w = setup(&home).await?;
    std::fs::write(&w.user, servers(&["keep"]))?;
    assert_eq!(w.next().await?.servers_added, ["keep"]);
    std::fs::write(&w.user, r#"{"mcpServers": {"keep": {"comm"#)?; // truncated mid-write
    let c = w.next().await?;
    assert!(c.servers_removed.is_empty() && c.servers_changed.is_empty(), "{c:?}");
    assert!(c.diagnostics_changed);
    assert!(
        c.errors.iter().any(|e| e.message.contains("last good contents stay in effect")),
        "{c:?}"
    );
    std::fs::write(&w.user, servers(&["keep", "new"]))?;
    let c = w.next().await?;
    assert_eq!(c.servers_added, ["new"]);
    assert!(c.errors.is_empty() && c.diagnostics_changed);
    Ok(())
}

#[tokio::test]
async fn a_symlinked_settings_file_is_followed() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let dotfiles = home.root().join("dotfiles");
    std::fs::create_dir(&dotfiles)?;
    let target = dotfiles.join("gemini-settings.json");
    std::fs::write(&target, servers(&["one"]))?;
    std::os::unix::fs::symlink(&target, home.root().join("home/.gemini/settings.json"))?;
    let mut w = setup(&home).await?;
    std::fs::write(&target, servers(&["one", "two"]))?;
    assert_eq!(w.next().await?.servers_added, ["two"]);
    Ok(())
}

#[tokio::test]
async fn a_hundred_writes_in_a_second_give_few_reloads_and_the_final_state() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut w = setup(&home).await?;
    let start = Instant::now();
    // A stream of writes: each one once the daemon's watcher has seen the one before.
    for i in 0..100 {
        let seen = w.daemon.lines_with(&[INPUT_CHANGED]);
        std::fs::write(&w.user, servers(&[&format!("s{i}")]))?;
        let more = || async { w.daemon.lines_with(&[INPUT_CHANGED]) > seen };
        assert!(geminid_tests::eventually(Duration::from_secs(10), more).await, "write {i} unseen");
    }
    let elapsed = start.elapsed();
    let mut events = Vec::new();
    while let Ok(c) = tokio::time::timeout(Duration::from_secs(3), w.next()).await {
        events.push(c?);
    }
    assert!(
        !events.is_empty() && events.len() <= 8,
        "{} reloads for 100 writes in {elapsed:?}",
        events.len()
    );
    let config = geminid_protocol::api::ConfigApiClient::config_get(
        &w.client,
        geminid_protocol::config::ConfigParams { session: w.session.clone(), ..Default::default() },
    )
    .await?;
    let names: Vec<_> = config.mcp_servers.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, ["s99"], "final state after {} reloads", events.len());
    Ok(())
}

#[tokio::test]
async fn mcp_reload_forces_a_reread_and_enablement_is_announced() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut w = setup(&home).await?;
    assert!(w.client.mcp_reload(None).await?.changes.is_empty());
    std::fs::write(&w.user, servers(&["x"]))?;
    // Whichever comes first, the forced reload or the watcher, reports it once.
    let forced =
        w.client.mcp_reload(Some(McpReloadParams { session: Some(w.session.clone()) })).await?;
    let c = w.next().await?;
    assert_eq!(c.servers_added, ["x"]);
    if let Some(f) = forced.changes.first() {
        assert_eq!(f.reason, "mcp/reload");
    }
    assert!(w.quiet(Duration::from_millis(800)).await, "announced twice");
    // A session-only disable touches no file, and is announced all the same.
    let out = home.gemctl(&["--session", &w.session, "mcp", "disable", "x", "--session-only"])?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c = w.next().await?;
    assert_eq!((c.enablement_changed, c.reason.as_str()), (vec!["x".to_owned()], "mcp/disable"));
    // gemctl mcp reload.
    let out = home.gemctl(&["--session", &w.session, "mcp", "reload"])?;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Reloaded; nothing changed.\n");
    Ok(())
}

/// Issue 64, item 4: while the user's settings file and a policy file are each saved in place
/// every 50 ms (truncate, then write: no version is ever left alone long enough to settle),
/// every call answers in a bounded time with the last good rules: the denied tool is denied
/// each time and never reaches the server, the allowed one runs. The old reader waited up to
/// 5 s for each file to settle, on every read a call made, and stalled calls for the whole
/// storm. When the storm ends, its last version is taken.
#[tokio::test]
async fn calls_during_a_storm_of_saves_answer_at_once_with_the_last_good_rules()
-> anyhow::Result<()> {
    use geminid_protocol::mcp::CallToolParams;
    use geminid_tests::mcp::{FAST, fixture, shell_env};
    use serde_json::json;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The storm's length; the old reader stalled each call for most of it.
    const STORM: Duration = Duration::from_secs(12);
    /// What a call may take while it lasts (a busy machine included): a quarter of it.
    const BOUND: Duration = Duration::from_secs(3);

    let home = TestHome::new()?;
    let log = home.root().join("calls.log");
    let settings = |n: u32| {
        let entry = json!({"a": {
            "command": fixture(),
            "env": {"FIXTURE_CALL_LOG": log.display().to_string()}
        }});
        format!("// save {n}\n{}\n", json!({"mcpServers": entry}))
    };
    let policy = |said: &str| {
        format!(
            "[[rule]]\ntoolName = \"*\"\ndecision = \"allow\"\npriority = 10\n\n[[rule]]\n\
             mcpName = \"a\"\ntoolName = \"echo\"\ndecision = \"deny\"\npriority = 500\n\
             denyMessage = \"{said}\"\n"
        )
    };
    let user = home.root().join("home/.gemini/settings.json");
    let rules = home.root().join("home/.gemini/policies/p.toml");
    std::fs::create_dir_all(rules.parent().unwrap_or(&rules))?;
    std::fs::write(&user, settings(0))?;
    std::fs::write(&rules, policy("denied before"))?;
    let daemon = Daemon::start(&home, FAST).await?;
    let client = daemon.client().await?;
    let s = client
        .create(SessionCreateParams {
            workspace: home.workspace().display().to_string(),
            env: Some(shell_env(&home, &[])),
            reuse_default: false,
            ..Default::default()
        })
        .await?;
    let call = |tool: &str| {
        let p = CallToolParams {
            session: s.id.clone(),
            server: "a".to_owned(),
            tool: tool.to_owned(),
            arguments: json!({"text": "hi"}).as_object().cloned(),
            confirmed: false,
        };
        let client = &client;
        async move {
            let started = Instant::now();
            let r = client.mcp_call_tool(p).await.map_err(|e| e.to_string());
            (started.elapsed(), r)
        }
    };
    let (_, started) = call("pid").await;
    started.map_err(|e| anyhow::anyhow!("the allowed call before the storm failed: {e}"))?;

    // An editor saving in place, as the probe's did: truncate, flush, a pause, write.
    let save_in_place = |path: &Path, text: &str| -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.set_len(0)?;
        f.flush()?;
        f.write_all(text.as_bytes())
    };
    let over = Arc::new(AtomicBool::new(false));
    let saved = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let storm = {
        let (over, saved, user, rules) = (over.clone(), saved.clone(), user.clone(), rules.clone());
        let daemon_log = daemon.log_path();
        let texts = [
            (settings(1), policy("denied in storm A")),
            (settings(2), policy("denied in storm B")),
        ];
        let last = policy("denied after the storm");
        std::thread::spawn(move || -> std::io::Result<u32> {
            let until = std::time::Instant::now() + STORM;
            let mut saves = 0;
            while std::time::Instant::now() < until {
                let (s, p) = &texts[saves as usize % 2];
                // Saved again once the daemon's watcher has seen the last saves.
                let seen = geminid_tests::lines_with(&daemon_log, &[INPUT_CHANGED]);
                save_in_place(&user, s)?;
                save_in_place(&rules, p)?;
                saves += 1;
                saved.store(saves, Ordering::SeqCst);
                geminid_tests::more_lines_with(&daemon_log, &[INPUT_CHANGED], seen)
                    .map_err(std::io::Error::other)?;
            }
            save_in_place(&rules, &last)?;
            over.store(true, Ordering::SeqCst);
            Ok(saves)
        })
    };
    let mut took = Vec::new();
    while !over.load(Ordering::SeqCst) {
        for tool in ["echo", "pid"] {
            let (t, r) = call(tool).await;
            took.push((tool, t));
            match (tool, r) {
                ("echo", Ok(v)) => anyhow::bail!("the denied tool ran during the storm: {v}"),
                ("echo", Err(e)) => assert!(e.contains("denied"), "{e}"),
                (_, r) => assert!(r.is_ok(), "the allowed call failed during the storm: {r:?}"),
            }
        }
        // Called again after the storm's next save: the storm, not the calls, should load the
        // machine.
        let at = saved.load(Ordering::SeqCst);
        let next = || async { saved.load(Ordering::SeqCst) != at || over.load(Ordering::SeqCst) };
        geminid_tests::eventually(BOUND, next).await;
    }
    let saves = storm.join().map_err(|_| anyhow::anyhow!("the storm panicked"))??;
    let slowest = took.iter().map(|t| t.1).max().unwrap_or_default();
    eprintln!("{} calls during {saves} saves of each file, the slowest {slowest:?}", took.len());
    assert!(
        slowest < BOUND && took.len() >= 4,
        "{} calls during {saves} saves of each file in {STORM:?}, the slowest took {slowest:?}: \
         {took:?}",
        took.len()
    );
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!ran.lines().any(|l| l.contains("echo")), "the denied tool ran: {ran}");

    // The storm is over: its last version is taken.
    let after =
        || async { matches!(call("echo").await.1, Err(e) if e.contains("denied after the storm")) };
    assert!(
        geminid_tests::eventually(Duration::from_secs(10), after).await,
        "the last version was not taken: {:?}",
        call("echo").await
    );
    Ok(())
}

/// A daemon whose system settings file is `system` (`GEMINI_CLI_SYSTEM_SETTINGS_PATH`).
async fn with_system_settings(home: &TestHome, system: &Path) -> anyhow::Result<Watch> {
    let var = format!("GEMINI_CLI_SYSTEM_SETTINGS_PATH={}", system.display());
    let daemon = Daemon::launch(home).under(&["env", &var]).start().await?;
    setup_with(home, daemon).await
}

/// A system settings file created after start in folders that did not exist (its nearest
/// existing ancestor is watched only for new entries) is read.
#[tokio::test]
async fn a_system_settings_file_in_folders_made_later_is_read() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let system = home.root().join("opt/gemini/etc/gemini-cli/settings.json");
    let mut w = with_system_settings(&home, &system).await?;
    std::fs::create_dir_all(system.parent().unwrap_or(&system))?;
    std::fs::write(&system, servers(&["sys"]))?;
    let c = w.next().await?;
    assert_eq!(c.servers_added, ["sys"]);
    // Edited in place, now that its folder is watched itself.
    std::fs::write(&system, servers(&["sys", "two"]))?;
    assert_eq!(w.next().await?.servers_added, ["two"]);
    Ok(())
}

/// How many times each of `pid`'s threads gave up the CPU to wait, by thread name.
#[cfg(target_os = "linux")]
fn waits_by_thread(pid: u32) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
    let mut out = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let status = std::fs::read_to_string(task?.path().join("status"))?;
        let field =
            |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_owned());
        let name = field("Name:").unwrap_or_default();
        let waits: u64 = field("voluntary_ctxt_switches:").unwrap_or_default().parse()?;
        *out.entry(name).or_default() += waits;
    }
    Ok(out)
}

/// Issue 67, item 2: a missing system settings folder is watched at its nearest existing
/// ancestor (`/etc` for `/etc/gemini-cli/settings.json`), where every program started on the
/// machine opens `/etc/ld.so.cache`. Reading files there must not wake the daemon: before, its
/// watcher asked the kernel for opens and woke once per program started anywhere.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn reading_files_beside_a_missing_settings_folder_does_not_wake_the_daemon()
-> anyhow::Result<()> {
    const READS: u64 = 2_000;
    let home = TestHome::new()?;
    let etc = home.root().join("etc");
    std::fs::write(etc.join("ld.so.cache"), "x")?;
    let mut w = with_system_settings(&home, &etc.join("gemini-cli/settings.json")).await?;
    let pid = w.daemon.pid();
    let before = waits_by_thread(pid)?;
    for _ in 0..READS {
        std::fs::read(etc.join("ld.so.cache"))?;
    }
    // Then a change that matters, which the daemon must see: once it has, every read before it
    // has been delivered to the watcher too (the kernel keeps a watch's events in order).
    std::fs::create_dir(etc.join("gemini-cli"))?;
    std::fs::write(etc.join("gemini-cli/settings.json"), servers(&["sys"]))?;
    assert_eq!(w.next().await?.servers_added, ["sys"]);
    let after = waits_by_thread(pid)?;
    let woken: Vec<(String, u64)> = after
        .iter()
        .map(|(name, n)| (name.clone(), n - before.get(name).copied().unwrap_or(0)))
        .collect();
    // The daemon's other threads wake for the reload and on their own timers; none wakes for
    // each read. Before: the watcher thread, once per read or every few reads.
    let most = woken.iter().map(|(_, n)| *n).max().unwrap_or(0);
    assert!(most < READS / 20, "{READS} reads of a file beside the watched folder woke {woken:?}");
    Ok(())
}
