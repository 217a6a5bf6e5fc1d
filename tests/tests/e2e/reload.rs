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
use geminid_tests::{Daemon, TestHome};
use pretty_assertions::assert_eq;

struct Watch {
    _daemon: Daemon,
    client: Client,
    session: String,
    events: Subscription<Event>,
    user: PathBuf,
}

async fn setup(home: &TestHome) -> anyhow::Result<Watch> {
    let daemon = Daemon::start(home, &[]).await?;
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
        _daemon: daemon,
        client,
        session: s.id,
        events,
        user: home.root().join("home/.gemini/settings.json"),
    })
}

impl Watch {
    async fn next(&mut self) -> anyhow::Result<ConfigChanged> {
        let ev = tokio::time::timeout(Duration::from_secs(10), self.events.next())
            .await
            .map_err(|_| anyhow::anyhow!("no config/changed event within 10 s"))?
            .ok_or_else(|| anyhow::anyhow!("subscription ended"))??;
        match ev.body {
            EventBody::ConfigChanged(c) => Ok(c),
            other => anyhow::bail!("unexpected event {other:?}"),
        }
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
    for i in 0..100 {
        std::fs::write(&w.user, servers(&[&format!("s{i}")]))?;
        tokio::time::sleep(Duration::from_millis(10)).await;
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
