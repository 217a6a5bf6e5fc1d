//! `gemctl clients connect CLIENT --project [DIR]` (issue 69): a project folder's own MCP file
//! of each client (Claude Code's .mcp.json, Codex's .codex/config.toml, VS Code's
//! .vscode/mcp.json, Cursor's .cursor/mcp.json, agy's .agents/mcp_config.json), its servers
//! moved to the folder's .gemini/geminid/servers.json (served by geminid in that folder only
//! when it is trusted), the same byte-exact disconnect as the user files'.

use std::path::{Path, PathBuf};

use geminid_tests::{Daemon, TestHome};

use crate::clients::write;

/// Each client's project file with a server of its own name (`fx-CLIENT`), as written by hand.
fn files(ws: &Path) -> Vec<(&'static str, PathBuf, String)> {
    let fx = serde_json::to_string(&geminid_tests::mcp::fixture()).unwrap_or_default();
    vec![
        (
            "claude-code",
            ws.join(".mcp.json"),
            format!(
                "{{\n  \"mcpServers\": {{\n    \"fx-claude-code\": {{\n      \"type\": \"stdio\",\n      \"command\": {fx},\n      \"args\": [],\n      \"env\": {{}}\n    }}\n  }}\n}}\n"
            ),
        ),
        (
            "codex",
            ws.join(".codex/config.toml"),
            format!("# this project's servers\n[mcp_servers.fx-codex]\ncommand = {fx}\n"),
        ),
        (
            "vscode",
            ws.join(".vscode/mcp.json"),
            format!(
                "{{\n\t// the team's servers\n\t\"servers\": {{\n\t\t\"fx-vscode\": {{ \"type\": \"stdio\", \"command\": {fx} }},\n\t}}\n}}\n"
            ),
        ),
        (
            "cursor",
            ws.join(".cursor/mcp.json"),
            format!("{{ \"mcpServers\": {{ \"fx-cursor\": {{ \"command\": {fx} }} }} }}"),
        ),
        (
            "agy",
            ws.join(".agents/mcp_config.json"),
            format!(
                "{{\n  // agy's\n  \"mcpServers\": {{ \"fx-agy\": {{ \"command\": {fx} }} }}\n}}\n"
            ),
        ),
    ]
}

/// The servers `config show` lists in the workspace's session, each with its scope and command.
fn shown(home: &TestHome) -> anyhow::Result<Vec<(String, String, String)>> {
    let shown = home.gemctl_json(&["config", "show"])?;
    let servers = shown["mcpServers"].as_array().cloned().unwrap_or_default();
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    Ok(servers
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("fx-")))
        .map(|s| (text(&s["name"]), text(&s["scope"]), text(&s["config"]["command"])))
        .collect())
}

#[tokio::test]
async fn a_projects_files_round_trip_and_its_servers_are_served_there() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let ws = std::fs::canonicalize(home.workspace())?;
    let files = files(&ws);
    for (_, path, text) in &files {
        write(path, text)?;
    }
    let _daemon = Daemon::start(&home, &[]).await?;
    // Untrusted: refused, said so, nothing written.
    let (code, out, err) = home.gemctl_run(&["clients", "connect", "cursor", "--project"])?;
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("not a trusted folder") && err.contains("gemctl trust"), "{err}");
    assert_eq!(std::fs::read_to_string(&files[3].1)?, files[3].2);
    assert!(!ws.join(".gemini/geminid").exists());
    let ws_text = ws.display().to_string();
    assert_eq!(home.gemctl_run(&["trust", &ws_text])?.0, 0);
    for (client, path, text) in &files {
        let (code, out, err) = home.gemctl_run(&["clients", "connect", client, "--project"])?;
        assert_eq!(code, 0, "{client}: {out}{err}");
        let now = std::fs::read_to_string(path)?;
        assert!(now.contains("--workspace") && now.contains(&ws_text), "{client}: {now}");
        assert_ne!(&now, text);
    }
    let own = std::fs::read_to_string(ws.join(".gemini/geminid/servers.json"))?;
    let user_own = home.root().join("home/.gemini/geminid/servers.json");
    assert!(!std::fs::read_to_string(&user_own).unwrap_or_default().contains("fx-"));
    let fixture = geminid_tests::mcp::fixture();
    let mut want: Vec<(String, String, String)> = files
        .iter()
        .map(|(c, _, _)| (format!("fx-{c}"), "geminid".to_owned(), fixture.clone()))
        .collect();
    want.sort();
    for (name, _, _) in &want {
        assert!(own.contains(&format!("\"{name}\"")), "{name}: {own}");
    }
    // Served once each, from the project's servers.json: never agy's gateway entry.
    let wait = std::time::Duration::from_secs(20);
    let served = geminid_tests::poll(wait, || async {
        let mut s = shown(&home).ok()?;
        s.sort();
        (s == want).then_some(s)
    })
    .await;
    assert_eq!(served, Some(want), "{:?}", shown(&home));
    let listed = home.gemctl_json(&["clients", "list"])?;
    let rows: Vec<_> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["project"] == ws_text.as_str() && r["connected"] == true)
        .collect();
    assert_eq!(rows.len(), files.len(), "{listed}");
    // Last connected, first disconnected: each connect gave its client the servers connected
    // before it too, which stay while a client still reaches them.
    for (client, path, text) in files.iter().rev() {
        let (code, out, err) = home.gemctl_run(&["clients", "disconnect", client, "--project"])?;
        assert_eq!(code, 0, "{client}: {out}{err}");
        pretty_assertions::assert_eq!(&std::fs::read_to_string(path)?, text, "{client}");
    }
    let own = std::fs::read_to_string(ws.join(".gemini/geminid/servers.json"))?;
    assert!(!own.contains("fx-"), "{own}");
    Ok(())
}

/// The home folder is no project, Gemini CLI has no project connect, and a folder that is not
/// there is named: each refused with the reason, nothing written.
#[test]
fn a_project_that_cannot_be_is_refused() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let h = home.root().join("home");
    let h_text = h.display().to_string();
    let (code, _, err) =
        home.gemctl_run(&["clients", "connect", "cursor", "--project", &h_text])?;
    assert!(code != 0 && err.contains("home folder"), "{err}");
    let (code, _, err) =
        home.gemctl_run(&["clients", "disconnect", "gemini", "--project", &h_text])?;
    assert!(code != 0 && err.contains("home folder"), "{err}");
    let ws = home.workspace().display().to_string();
    let (code, _, err) = home.gemctl_run(&["clients", "disconnect", "gemini", "--project", &ws])?;
    assert!(code != 0 && err.contains("mcp import"), "{err}");
    let gone = h.join("nowhere").display().to_string();
    let (code, _, err) =
        home.gemctl_run(&["clients", "disconnect", "cursor", "--project", &gone])?;
    assert!(code != 0 && err.contains("nowhere"), "{err}");
    assert!(!h.join(".gemini/geminid/clients").exists());
    Ok(())
}
