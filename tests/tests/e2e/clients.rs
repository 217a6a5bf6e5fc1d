//! `gemctl clients list|connect|disconnect` on each client's own file (issue 69, item 3): the
//! client gets an entry of each server's name that runs `gemctl mcp serve --server NAME`, its
//! comments and everything else stay, and `disconnect` gives back the user's bytes exactly.
//! The files are written as each client's documentation shows them (kinds.rs names the docs).

use std::path::PathBuf;

use geminid_tests::{Daemon, TestHome};

/// A client's file, its text as a user has it, and a line that must survive connect.
pub(crate) struct Case {
    pub(crate) client: &'static str,
    pub(crate) path: PathBuf,
    pub(crate) text: String,
    pub(crate) kept: &'static str,
}

pub(crate) fn cases(home: &TestHome) -> Vec<Case> {
    let h = home.root().join("home");
    let fx = serde_json::to_string(&geminid_tests::mcp::fixture()).unwrap_or_default();
    vec![
        Case {
            client: "claude-code",
            path: h.join(".claude.json"),
            // As Claude Code writes it: 2-space JSON, its own state around the servers.
            text: format!(
                "{{\n  \"numStartups\": 3,\n  \"mcpServers\": {{\n    \"fx\": {{\n      \"type\": \"stdio\",\n      \"command\": {fx},\n      \"args\": [\n        \"--rich\"\n      ],\n      \"env\": {{}}\n    }}\n  }},\n  \"projects\": {{}}\n}}"
            ),
            kept: "\"numStartups\": 3",
        },
        Case {
            client: "codex",
            path: h.join(".codex/config.toml"),
            text: format!(
                "# my Codex settings\nmodel = \"o4-mini\"\n\n# the fixture\n[mcp_servers.fx]\ncommand = {fx}\nargs = [\"--rich\"]\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n"
            ),
            kept: "# the fixture",
        },
        Case {
            client: "vscode",
            path: home.root().join("config/Code/User/mcp.json"),
            text: format!(
                "{{\n\t// my servers\n\t\"servers\": {{\n\t\t\"fx\": {{ \"type\": \"stdio\", \"command\": {fx}, \"args\": [\"--rich\"] }}, // the fixture\n\t\t\"asks\": {{ \"type\": \"stdio\", \"command\": \"npx\", \"env\": {{ \"KEY\": \"${{input:key}}\" }} }},\n\t}},\n\t\"inputs\": [ {{ \"id\": \"key\", \"type\": \"promptString\", \"password\": true }} ]\n}}\n"
            ),
            kept: "// the fixture",
        },
        Case {
            client: "cursor",
            path: h.join(".cursor/mcp.json"),
            text: format!(
                "{{\n  \"mcpServers\": {{\n    \"fx\": {{ \"command\": {fx}, \"args\": [\"--rich\"], \"env\": {{ \"TOKEN\": \"${{env:FX_TOKEN}}\" }} }}\n  }}\n}}\n"
            ),
            kept: "{\n  \"mcpServers\"",
        },
        Case {
            client: "agy",
            path: h.join(".gemini/config/mcp_config.json"),
            text: format!(
                "{{\n  // agy's servers\n  \"mcpServers\": {{\n    \"fx\": {{ \"command\": {fx}, \"args\": [\"--rich\"] }},\n    \"off\": {{ \"command\": \"x\", \"disabled\": true }}\n  }}\n}}\n"
            ),
            kept: "// agy's servers",
        },
    ]
}

pub(crate) fn servers_json(home: &TestHome) -> PathBuf {
    home.root().join("home/.gemini/geminid/servers.json")
}

pub(crate) fn write(path: &PathBuf, text: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(path.parent().unwrap_or(path))?;
    Ok(std::fs::write(path, text)?)
}

#[test]
fn every_clients_file_round_trips_byte_exact() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    for c in cases(&home) {
        write(&c.path, &c.text)?;
        let (code, out, err) = home.gemctl_run(&["clients", "connect", c.client])?;
        assert_eq!(code, 0, "{}: {out}{err}", c.client);
        let now = std::fs::read_to_string(&c.path)?;
        assert!(
            now.contains("--server") && now.contains("\"fx\"") || now.contains("[mcp_servers.fx]"),
            "{}:\n{now}",
            c.client
        );
        assert!(now.contains(c.kept), "{} lost {:?}:\n{now}", c.client, c.kept);
        let own = std::fs::read_to_string(servers_json(&home))?;
        assert!(own.contains("\"fx\"") && own.contains("--rich"), "{}: {own}", c.client);
        // Connect twice: nothing changes.
        let (code, out, _) = home.gemctl_run(&["clients", "connect", c.client])?;
        assert!(code == 0 && out.contains("already connected"), "{}: {out}", c.client);
        assert_eq!(std::fs::read_to_string(&c.path)?, now, "{}", c.client);
        let listed = home.gemctl_json(&["clients", "list"])?;
        let row = listed
            .as_array()
            .and_then(|a| a.iter().find(|r| r["client"] == c.client))
            .cloned()
            .unwrap_or_default();
        assert_eq!(row["connected"], true, "{}: {row}", c.client);
        assert_eq!(row["throughGeminid"], serde_json::json!(["fx"]), "{}: {row}", c.client);
        assert_eq!(row["movedToGeminid"], serde_json::json!(["fx"]), "{}: {row}", c.client);
        let (code, out, err) = home.gemctl_run(&["clients", "disconnect", c.client])?;
        assert_eq!(code, 0, "{}: {out}{err}", c.client);
        pretty_assertions::assert_eq!(std::fs::read_to_string(&c.path)?, c.text, "{}", c.client);
        let own = std::fs::read_to_string(servers_json(&home))?;
        assert!(!own.contains("--rich"), "{}: geminid kept the server: {own}", c.client);
        let (code, out, _) = home.gemctl_run(&["clients", "disconnect", c.client])?;
        assert!(code == 0 && out.contains("not connected"), "{}: {out}", c.client);
        assert_eq!(std::fs::read_to_string(&c.path)?, c.text, "{}", c.client);
    }
    Ok(())
}

#[test]
fn a_variable_only_the_client_fills_keeps_that_server_with_it() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let c = cases(&home)
        .into_iter()
        .find(|c| c.client == "vscode")
        .ok_or_else(|| anyhow::anyhow!("no case vscode"))?;
    write(&c.path, &c.text)?;
    let (code, out, _) = home.gemctl_run(&["clients", "connect", "vscode"])?;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("'asks' stays with VS Code") && out.contains("${input:key}"), "{out}");
    let own = std::fs::read_to_string(servers_json(&home))?;
    assert!(!own.contains("asks"), "{own}");
    let listed = home.gemctl_json(&["clients", "list"])?;
    let row = listed.as_array().and_then(|a| a.iter().find(|r| r["client"] == "vscode")).cloned();
    assert_eq!(row.unwrap_or_default()["startsItself"], serde_json::json!(["asks"]));
    Ok(())
}

#[test]
fn a_damaged_file_is_refused_untouched() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    for c in cases(&home) {
        let damaged = &c.text[..c.text.len() / 2];
        write(&c.path, damaged)?;
        let (code, out, err) = home.gemctl_run(&["clients", "connect", c.client])?;
        assert_ne!(code, 0, "{}: {out}", c.client);
        assert!(
            err.contains("cannot read") && err.contains("Nothing was changed"),
            "{}: {err}",
            c.client
        );
        assert_eq!(std::fs::read_to_string(&c.path)?, damaged, "{}", c.client);
        assert!(!servers_json(&home).exists(), "{}", c.client);
        let (_, out, _) = home.gemctl_run(&["clients", "disconnect", c.client])?;
        assert!(out.contains("not connected"), "{}: {out}", c.client);
    }
    Ok(())
}

#[test]
fn a_client_not_installed_is_named_with_the_fix() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let (code, _, err) = home.gemctl_run(&["clients", "connect", "cursor"])?;
    assert_ne!(code, 0);
    assert!(
        err.contains("Cursor is not installed here") && err.contains(".cursor/mcp.json"),
        "{err}"
    );
    assert!(!home.root().join("home/.cursor").exists());
    Ok(())
}

/// Claude Code rewrites its file on every start: what it changed outside the servers is kept,
/// the servers come back as they were. A server the user changed after connect is not
/// clobbered: disconnect says what to do, and `--force` puts the old file back.
#[test]
fn an_edit_after_connect_is_not_clobbered() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let all = cases(&home);
    let claude = all
        .iter()
        .find(|c| c.client == "claude-code")
        .ok_or_else(|| anyhow::anyhow!("no case claude"))?;
    write(&claude.path, &claude.text)?;
    assert_eq!(home.gemctl_run(&["clients", "connect", "claude-code"])?.0, 0);
    let now = std::fs::read_to_string(&claude.path)?;
    write(&claude.path, &now.replace("\"numStartups\": 3", "\"numStartups\": 4"))?;
    let (code, out, err) = home.gemctl_run(&["clients", "disconnect", "claude-code"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("is kept"), "{err}");
    let back = std::fs::read_to_string(&claude.path)?;
    assert_eq!(back, claude.text.replace("\"numStartups\": 3", "\"numStartups\": 4"));

    let codex =
        all.iter().find(|c| c.client == "codex").ok_or_else(|| anyhow::anyhow!("no case codex"))?;
    write(&codex.path, &codex.text)?;
    assert_eq!(home.gemctl_run(&["clients", "connect", "codex"])?.0, 0);
    let edited = std::fs::read_to_string(&codex.path)?.replace("--confirm", "--confirm-by-me");
    write(&codex.path, &edited)?;
    let (code, _, err) = home.gemctl_run(&["clients", "disconnect", "codex"])?;
    assert_ne!(code, 0);
    assert!(err.contains("was changed after") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read_to_string(&codex.path)?, edited);
    let (code, _, err) = home.gemctl_run(&["clients", "disconnect", "codex", "--force"])?;
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(&codex.path)?, codex.text);
    let aside = home.root().join("home/.gemini/geminid/clients/codex.at-disconnect");
    assert_eq!(std::fs::read_to_string(aside)?, edited);
    Ok(())
}

/// A file the user keeps as a link (a dotfiles repository's) stays a link; the file it leads to
/// is written.
#[cfg(unix)]
#[test]
fn a_linked_file_stays_a_link() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let c = cases(&home)
        .into_iter()
        .find(|c| c.client == "cursor")
        .ok_or_else(|| anyhow::anyhow!("no case cursor"))?;
    let real = home.root().join("home/dotfiles/cursor-mcp.json");
    write(&real, &c.text)?;
    std::fs::create_dir_all(home.root().join("home/.cursor"))?;
    std::os::unix::fs::symlink(&real, &c.path)?;
    assert_eq!(home.gemctl_run(&["clients", "connect", "cursor"])?.0, 0);
    assert!(std::fs::symlink_metadata(&c.path)?.file_type().is_symlink());
    assert!(std::fs::read_to_string(&real)?.contains("--server"));
    assert_eq!(home.gemctl_run(&["clients", "disconnect", "cursor"])?.0, 0);
    assert!(std::fs::symlink_metadata(&c.path)?.file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&real)?, c.text);
    Ok(())
}

/// Gemini CLI's connect is `mcp import`, its disconnect `mcp unimport`: the same bytes back.
#[tokio::test]
async fn gemini_connect_is_mcp_import() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let user = home.root().join("home/.gemini/settings.json");
    let fx = serde_json::to_string(&geminid_tests::mcp::fixture())?;
    let text =
        format!("{{\n  // mine\n  \"mcpServers\": {{ \"fx\": {{ \"command\": {fx} }} }}\n}}\n");
    write(&user, &text)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let (code, out, err) = home.gemctl_run(&["clients", "connect", "gemini"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(std::fs::read_to_string(&user)?.contains("--server"));
    let listed = home.gemctl_json(&["clients", "list"])?;
    let row = listed.as_array().and_then(|a| a.iter().find(|r| r["client"] == "gemini")).cloned();
    assert_eq!(row.unwrap_or_default()["connected"], true);
    let (code, out, err) = home.gemctl_run(&["clients", "disconnect", "gemini"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(std::fs::read_to_string(&user)?, text);
    Ok(())
}

/// geminid reads agy's file itself: after connect, the server is served once, from geminid's
/// servers.json with its own command, never as the gateway entry agy's file now holds (which
/// would be geminid serving itself); after disconnect it is agy's file's again.
#[tokio::test]
async fn geminid_never_serves_agys_gateway_entry_as_a_server() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let c = cases(&home).into_iter().find(|c| c.client == "agy");
    let c = c.ok_or_else(|| anyhow::anyhow!("no case agy"))?;
    write(&c.path, &c.text)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let fx = |home: &TestHome| -> anyhow::Result<Vec<(String, String)>> {
        let shown = home.gemctl_json(&["config", "show"])?;
        let servers = shown["mcpServers"].as_array().cloned().unwrap_or_default();
        Ok(servers
            .iter()
            .filter(|s| s["name"] == "fx")
            .map(|s| {
                (
                    s["scope"].as_str().unwrap_or_default().to_owned(),
                    s["config"]["command"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect())
    };
    let fixture = geminid_tests::mcp::fixture();
    assert_eq!(fx(&home)?, [("antigravity".to_owned(), fixture.clone())]);
    assert_eq!(home.gemctl_run(&["clients", "connect", "agy"])?.0, 0);
    let wait = std::time::Duration::from_secs(20);
    let moved = geminid_tests::poll(wait, || async {
        fx(&home).ok().filter(|f| f.iter().any(|(scope, _)| scope == "geminid"))
    })
    .await;
    assert_eq!(moved, Some(vec![("geminid".to_owned(), fixture.clone())]));
    assert_eq!(home.gemctl_run(&["clients", "disconnect", "agy"])?.0, 0);
    let back = geminid_tests::poll(wait, || async {
        fx(&home).ok().filter(|f| f.iter().all(|(scope, _)| scope == "antigravity"))
    })
    .await;
    assert_eq!(back, Some(vec![("antigravity".to_owned(), fixture)]));
    Ok(())
}

/// The user's real order of steps: connect, then add a server to the client the client's own
/// way (into the same file): disconnect gives back the servers as they were and keeps the new
/// one, named.
#[test]
fn a_server_added_after_connect_is_kept_by_disconnect() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let c = cases(&home).into_iter().find(|c| c.client == "cursor");
    let c = c.ok_or_else(|| anyhow::anyhow!("no case cursor"))?;
    write(&c.path, &c.text)?;
    assert_eq!(home.gemctl_run(&["clients", "connect", "cursor"])?.0, 0);
    let now = std::fs::read_to_string(&c.path)?;
    let added = now.replacen(
        "\"mcpServers\": {",
        "\"mcpServers\": {\n    \"new\": { \"command\": \"n\" },",
        1,
    );
    write(&c.path, &added)?;
    let (code, out, err) = home.gemctl_run(&["clients", "disconnect", "cursor"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("added or changed since: new"), "{err}");
    let back = std::fs::read_to_string(&c.path)?;
    let fx_line = c.text.lines().find(|l| l.contains("\"fx\"")).unwrap_or_default();
    assert!(back.contains(fx_line) && back.contains("\"new\""), "{back}");
    Ok(())
}

/// A damaged record is named, with what to do, and the client's file is left as it is.
#[test]
fn a_damaged_record_is_named_and_the_file_left_alone() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let c = cases(&home).into_iter().find(|c| c.client == "codex");
    let c = c.ok_or_else(|| anyhow::anyhow!("no case codex"))?;
    write(&c.path, &c.text)?;
    assert_eq!(home.gemctl_run(&["clients", "connect", "codex"])?.0, 0);
    let connected = std::fs::read_to_string(&c.path)?;
    let dir = home.root().join("home/.gemini/geminid/clients/codex");
    std::fs::write(dir.join("record.json"), "{\"client\": ")?;
    for verb in ["disconnect", "connect"] {
        let (code, _, err) = home.gemctl_run(&["clients", verb, "codex"])?;
        assert_ne!(code, 0, "{verb}");
        assert!(err.contains("is damaged") && err.contains("original"), "{verb}: {err}");
        assert_eq!(std::fs::read_to_string(&c.path)?, connected, "{verb}");
    }
    Ok(())
}

/// A name the gateway's command line would read as an option stays with the client.
#[test]
fn a_name_that_reads_as_an_option_stays_with_the_client() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let path = home.root().join("home/.cursor/mcp.json");
    let text = "{ \"mcpServers\": { \"--help\": { \"command\": \"x\" }, \"ok\": { \"command\": \"y\" } } }";
    write(&path, text)?;
    let (code, out, err) = home.gemctl_run(&["clients", "connect", "cursor"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("'--help' stays with Cursor"), "{out}");
    let now = std::fs::read_to_string(&path)?;
    assert!(now.contains("\"--help\": { \"command\": \"x\" }"), "{now}");
    assert!(!std::fs::read_to_string(servers_json(&home))?.contains("--help"));
    Ok(())
}

/// `connect --json` is for scripts: it names the servers, never prints their definitions,
/// whose `env` may hold a secret.
#[test]
fn connect_json_names_servers_without_their_secrets() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let path = home.root().join("home/.cursor/mcp.json");
    let text = "{ \"mcpServers\": { \"gh\": { \"command\": \"x\", \"env\": { \"GITHUB_TOKEN\": \"ghp_s3cr3tvalue\" } } } }";
    write(&path, text)?;
    for _ in 0..2 {
        let out = home.gemctl(&["--json", "clients", "connect", "cursor"])?;
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{shown}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        let v: serde_json::Value = serde_json::from_str(&shown)?;
        assert_eq!(v["throughGeminid"], serde_json::json!(["gh"]), "{v}");
    }
    Ok(())
}
