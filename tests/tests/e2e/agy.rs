//! Antigravity CLI's files (issue 69) through the real daemon and gemctl: its servers files and
//! plugins created while the daemon runs are reloaded, listed with where they come from, and a
//! plugin's server command never reaches a shell. agy itself cannot be installed here: the
//! files are written in the format of Gemini CLI's migration guide
//! (docs/resources/migrating-to-antigravity-cli.md).

use geminid_protocol::api::SessionApiClient;
use geminid_protocol::event::EventsSubscribeParams;
use geminid_protocol::session::SessionCreateParams;
use geminid_tests::{Daemon, TestHome};

use super::reload::config_changed;
use serde_json::json;

/// The workspace of `home`, trusted, and its `~/.gemini`.
fn trusted(home: &TestHome) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let ws = home.workspace();
    let gemini = home.root().join("home/.gemini");
    write(
        &gemini.join("trustedFolders.json"),
        &json!({ ws.display().to_string(): "TRUST_FOLDER" }),
    )?;
    Ok((ws, gemini))
}

fn write(path: &std::path::Path, value: &serde_json::Value) -> anyhow::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(value)?)?;
    Ok(())
}

#[tokio::test]
async fn agys_files_and_plugins_are_watched_and_listed_with_their_source() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let (ws, gemini) = trusted(&home)?;
    let daemon = Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    let workspace = ws.display().to_string();
    let s = client
        .create(SessionCreateParams { workspace, reuse_default: false, ..Default::default() })
        .await?;
    let filter = EventsSubscribeParams {
        session: Some(s.id.clone()),
        kinds: Some(vec!["config/changed".into()]),
    };
    let mut events = client.subscribe_events(Some(filter)).await?;

    // agy's user file, in a folder that did not exist when the daemon started.
    write(
        &gemini.join("config/mcp_config.json"),
        &json!({"mcpServers": {"agy-user": {"serverUrl": "http://127.0.0.1:9/mcp"}}}),
    )?;
    assert_eq!(config_changed(&mut events).await?.servers_added, ["agy-user"]);
    // The workspace's, in a trusted folder.
    write(
        &ws.join(".agents/mcp_config.json"),
        &json!({"mcpServers": {"agy-ws": {"command": "agy-ws"}}}),
    )?;
    assert_eq!(config_changed(&mut events).await?.servers_added, ["agy-ws"]);
    // A plugin: its servers file first, then the marker that makes the folder a plugin. Its
    // server's command crosses into a shell if anything ever hands it to one.
    let owned = home.root().join("tmp/owned");
    let plugin = gemini.join("antigravity-cli/plugins/tools");
    let hostile = format!("true; touch {}", owned.display());
    write(
        &plugin.join("mcp_config.json"),
        &json!({"mcpServers": {"plug": {"command": &hostile}}}),
    )?;
    write(&plugin.join("plugin.json"), &json!({"name": "tools"}))?;
    let c = config_changed(&mut events).await?;
    assert!(c.servers_added.contains(&"plug".to_owned()), "{c:?}");
    // Edited in place, now that each exists: the watcher watches them as it does settings.json.
    let servers = json!({"mcpServers": {
        "agy-user": {"serverUrl": "http://127.0.0.1:9/mcp"}, "agy-user2": {"command": "x"}}});
    std::fs::write(gemini.join("config/mcp_config.json"), servers.to_string())?;
    assert_eq!(config_changed(&mut events).await?.servers_added, ["agy-user2"]);
    let servers = json!({"mcpServers": {"plug": {"command": hostile}, "plug2": {"command": "y"}}});
    std::fs::write(plugin.join("mcp_config.json"), servers.to_string())?;
    assert_eq!(config_changed(&mut events).await?.servers_added, ["plug2"]);

    let shown = home.gemctl(&["config", "show"])?;
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!(
            "agy-user        {}",
            gemini.join("config/mcp_config.json").display()
        )),
        "{shown}"
    );
    assert!(
        shown
            .contains(&format!("agy-workspace   {}", ws.join(".agents/mcp_config.json").display())),
        "{shown}"
    );
    let listed = home.gemctl(&["mcp", "list"])?;
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("agy-user")
            && listed.contains("(from Antigravity CLI's ~/.gemini/config/mcp_config.json)"),
        "{listed}"
    );
    assert!(listed.contains("(from Antigravity CLI's .agents/mcp_config.json)"), "{listed}");
    assert!(listed.contains("plug") && listed.contains("(from tools)"), "{listed}");
    let list = home.gemctl_json(&["mcp", "list"])?;
    let plug = list.as_array().into_iter().flatten().find(|s| s["name"] == "plug").cloned();
    let plug = plug.ok_or_else(|| anyhow::anyhow!("no plug in {list}"))?;
    assert_eq!(plug["scope"], "extension", "{plug}");
    // Started, the command is one program's name, which does not exist: no shell ran it.
    let (_, out, err) = home.gemctl_run(&["mcp", "start"])?;
    let list = home.gemctl_json(&["mcp", "list"])?;
    let plug = list.as_array().into_iter().flatten().find(|s| s["name"] == "plug").cloned();
    let plug = plug.ok_or_else(|| anyhow::anyhow!("no plug in {list}"))?;
    let why = plug["lastError"].as_str().unwrap_or_default();
    assert!(
        why.contains("cannot start 'true; touch") && why.contains("command not found"),
        "{plug}\n{out}{err}"
    );
    assert!(!owned.exists(), "a plugin's server command reached a shell");
    Ok(())
}

#[tokio::test]
async fn a_secret_in_a_server_urls_query_is_redacted_everywhere_it_is_shown() -> anyhow::Result<()>
{
    // Finding 3 of the attack on 611fc29: agy's `serverUrl` often carries a key in its query.
    let home = TestHome::new()?;
    let (_, gemini) = trusted(&home)?;
    write(
        &gemini.join("config/mcp_config.json"),
        &json!({"mcpServers": {"remote": {
            "serverUrl": "http://alice:hunter2pass@127.0.0.1:9/mcp?api_key=QUERYSECRET&x=1&access_token=QUERYTOKEN"}}}),
    )?;
    let daemon = Daemon::start(&home, &[]).await?;
    let (_, out, err) = home.gemctl_run(&["mcp", "start"])?;
    let list = home.gemctl_json(&["mcp", "list"])?.to_string();
    let shown = home.gemctl_json(&["config", "show"])?.to_string();
    let doctor = home.gemctl_run(&["doctor"])?;
    let log = daemon.log();
    assert!(list.contains("api_key=[redacted]&x=1&access_token=[redacted]"), "{list}");
    assert!(list.contains("lastError"), "the failed start is listed: {list}");
    for (what, text) in [
        ("mcp start", format!("{out}{err}")),
        ("mcp list --json", list),
        ("config show --json", shown),
        ("doctor", format!("{}{}", doctor.1, doctor.2)),
        ("the daemon's log", log),
    ] {
        for secret in ["QUERYSECRET", "QUERYTOKEN", "hunter2pass"] {
            assert!(!text.contains(secret), "{secret} in {what}:\n{text}");
        }
    }
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn a_server_of_the_workspaces_agents_file_starts_in_the_workspace() -> anyhow::Result<()> {
    // Finding 6 of the attack on 611fc29: it started in $HOME, so `./run.sh` was not found.
    use std::os::unix::fs::PermissionsExt;
    let home = TestHome::new()?;
    let ws = home.workspace();
    let fixture = geminid_tests::mcp::stdio(&[])["command"].as_str().unwrap_or_default().to_owned();
    let script = ws.join("run.sh");
    std::fs::write(&script, format!("#!/bin/sh\nexec '{fixture}' \"$@\"\n"))?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    write(
        &ws.join(".agents/mcp_config.json"),
        &json!({"mcpServers": {"wsrel": {"command": "./run.sh"}}}),
    )?;
    home.gemctl_json(&["trust"])?;
    let started = home.gemctl_json(&["mcp", "start"])?;
    let wsrel = started.as_array().into_iter().flatten().find(|s| s["name"] == "wsrel");
    assert_eq!(wsrel.map(|s| s["state"].clone()), Some(json!("connected")), "{started}");
    Ok(())
}
