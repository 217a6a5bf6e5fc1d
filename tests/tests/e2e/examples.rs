//! Every file in `config-examples/` loads where it belongs, as the reader that reads it sees it:
//! settings of each scope, trusted folders, extension enablement, a policy file, hooks, an
//! extension, a skill, an agent, a command and geminid's own settings file. (The gateway
//! clients' entries are loaded by `gateway.rs`.)

use std::path::{Path, PathBuf};

use geminid_tests::{Daemon, TestHome};
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config-examples")
}

fn copy(from: &str, to: &Path) -> anyhow::Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::copy(examples().join(from), to)?;
    Ok(())
}

fn names(v: &Value, list: &str, field: &str) -> Vec<String> {
    v[list]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x[field].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn every_example_loads_where_it_belongs() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let gemini = home.root().join("home/.gemini");
    copy("settings.json", &gemini.join("settings.json"))?;
    copy("workspace/.gemini/settings.json", &home.workspace().join(".gemini/settings.json"))?;
    copy("workspace/tools/tools.py", &home.workspace().join("tools/tools.py"))?;
    copy("workspace/tools/call.sh", &home.workspace().join("tools/call.sh"))?;
    copy("system.settings.json", &home.root().join("etc/settings.json"))?;
    copy("trustedFolders.json", &gemini.join("trustedFolders.json"))?;
    copy("extension-enablement.json", &gemini.join("extensions/extension-enablement.json"))?;
    copy("policies/team.toml", &gemini.join("policies/team.toml"))?;
    copy("skills/review/SKILL.md", &gemini.join("skills/review/SKILL.md"))?;
    copy("agents/reviewer.md", &gemini.join("agents/reviewer.md"))?;
    copy("commands/git/commit.toml", &gemini.join("commands/git/commit.toml"))?;
    let config = home.root().join("geminid.config.toml");
    copy("geminid.config.toml", &config)?;
    let config_arg = config.display().to_string();
    let _daemon = Daemon::start(&home, &["--config", &config_arg]).await?;

    // `gemctl trust` adds to the example's trusted folders, keeping its entries.
    assert!(home.gemctl(&["trust"])?.status.success());
    let trusted = std::fs::read_to_string(gemini.join("trustedFolders.json"))?;
    assert!(
        trusted.contains("/home/me/downloads") && trusted.contains("TRUST_PARENT"),
        "{trusted}"
    );

    let (code, out, err) = home.gemctl_run(&["config", "check"])?;
    assert_eq!(code, 0, "{out}{err}");
    let shown = home.gemctl_json(&["config", "show"])?;
    let servers = shown["mcpServers"].to_string();
    for server in ["everything", "remote-example", "project-files"] {
        assert!(servers.contains(server), "{server} missing: {shown}");
    }

    let rules = home.gemctl_json(&["policy", "list"])?.to_string();
    assert!(rules.contains("it prints the environment") && rules.contains("team.toml"), "{rules}");
    let hooks = home.gemctl_json(&["hooks", "list"])?.to_string();
    assert!(hooks.contains("audit"), "{hooks}");

    let ext = examples().join("extensions/hello").display().to_string();
    let (code, out, err) = home.gemctl_run(&["extensions", "link", &ext, "--consent"])?;
    assert_eq!(code, 0, "{out}{err}");
    let listed = home.gemctl_json(&["extensions", "list"])?.to_string();
    assert!(listed.contains("hello") && listed.contains("hello-server"), "{listed}");
    // Its server starts (it ships with it) and answers.
    let (code, out, err) =
        home.gemctl_run(&["call", "mcp_hello-server_hello", r#"{"name": "Ada"}"#])?;
    assert_eq!((code, out.as_str()), (0, "Hello, Ada!\n"), "{err}");

    // The project's custom tools are discovered, and run.
    let (code, out, err) = home.gemctl_run(&["tools", "refresh"])?;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) =
        home.gemctl_run(&["call", "discovered_tool_word_count", r#"{"text": "one two three"}"#])?;
    assert_eq!((code, out.trim()), (0, "3"), "{err}");

    let skills = home.gemctl_json(&["skills", "list"])?;
    assert!(names(&skills, "skills", "name").contains(&"review".to_owned()), "{skills}");
    let agents = home.gemctl_json(&["agents", "list"])?;
    assert!(names(&agents, "agents", "name").contains(&"reviewer".to_owned()), "{agents}");
    let commands = home.gemctl_json(&["commands", "list"])?;
    let commands = names(&commands, "commands", "name");
    for want in ["git:commit", "greet", "review"] {
        assert!(commands.contains(&want.to_owned()), "{want} missing: {commands:?}");
    }

    // geminid's own settings file was read: its values are the daemon's.
    let status = home.gemctl_json(&["status"])?;
    assert_eq!(status["limits"]["maxConnections"], 256, "{status}");
    Ok(())
}

/// `config-examples/editors/client.py`, an editor's integration written from PROTOCOL.md,
/// runs against a real daemon as shipped: a new user's home (no policy: the call is
/// confirmed), the client answering the confirmation its call raises.
#[tokio::test]
async fn the_example_editor_client_calls_a_tool_and_answers_its_confirmation() -> anyhow::Result<()>
{
    use geminid_tests::mcp::{stdio, write_user_settings};
    let home = TestHome::new()?;
    write_user_settings(&home, serde_json::json!({ "fx": stdio(&[]) }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    // A client that lists before it listens is told what it does not see, and why.
    {
        use geminid_protocol::api::{SessionApiClient, ToolsApiClient};
        let c = daemon.client().await?;
        let workspace = home.workspace().display().to_string();
        let p = geminid_protocol::session::SessionCreateParams { workspace, ..Default::default() };
        let session = c.create(p).await?.id;
        let p = geminid_protocol::tools::ToolsListParams { session, raw: false, all: false };
        let listed = c.tools_list(p).await?;
        assert!(!listed.tools.iter().any(|t| t.name == "mcp_fx_echo"), "headless: left out");
        let said = listed.diagnostics.join("\n");
        assert!(
            said.contains("need a confirmation are left out") && said.contains("asks/listen"),
            "{said}"
        );
    }
    let client = examples().join("editors/client.py").display().to_string();
    let count = |v: Value| v.as_array().map_or(0, Vec::len);
    let before = count(home.gemctl_json(&["session", "list"])?);
    let out = home
        .command("python3", &[&client, "mcp_fx_echo", r#"{"text": "from the editor"}"#])
        .output()?;
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("confirming: ") && stdout.contains("mcp_fx_echo"), "{stdout}");
    assert!(stdout.trim_end().ends_with("from the editor"), "{stdout}");
    // Its own session is closed at the end: the daemon has the sessions it had.
    let after = home.gemctl_json(&["session", "list"])?;
    assert_eq!(count(after.clone()), before, "{after}");
    Ok(())
}
