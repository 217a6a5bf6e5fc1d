//! Slash commands end to end: command files of the user, a trusted workspace and an
//! extension, skills and an MCP server's prompts, named after Gemini CLI's conflict rules;
//! an untrusted workspace loads none; bad files are named; an edit is seen.

use geminid_protocol::api::{CommandsApiClient, McpApiClient, SessionApiClient};
use geminid_protocol::commands::CommandsListParams;
use geminid_protocol::mcp::StartParams;
use geminid_protocol::session::SessionCreateParams;
use geminid_tests::mcp::{shell_env, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::Value;

fn write(path: std::path::PathBuf, text: &str) -> anyhow::Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    std::fs::write(path, text)?;
    Ok(())
}

fn names(v: &Value) -> Vec<String> {
    v["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn files_prompts_and_skills_with_conflicts() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let user = home.root().join("home/.gemini/commands");
    let ws = home.workspace().join(".gemini/commands");
    write(user.join("deploy.toml"), "prompt = \"user deploy\"")?;
    write(user.join("git/commit.toml"), "prompt = \"commit {{args}}\"\ndescription = \"Commit\"")?;
    write(user.join("greet.toml"), "prompt = \"hi\"")?;
    write(user.join("review.toml"), "prompt = \"review\"")?;
    write(user.join("broken.toml"), "prompt = ")?;
    write(ws.join("deploy.toml"), "prompt = \"workspace deploy\"")?;
    let skill = home.root().join("home/.gemini/skills/review");
    write(skill.join("SKILL.md"), "---\nname: review\ndescription: Reviews\n---\nDo.\n")?;

    // Untrusted: no command file loads, and that is said; skills still become commands.
    let v = home.gemctl_json(&["commands", "list"])?;
    assert_eq!(names(&v), ["review"], "{v}");
    assert!(v["diagnostics"].to_string().contains("not trusted"), "{v}");

    assert!(home.gemctl(&["trust"])?.status.success());
    write_user_settings(&home, serde_json::json!({ "srv": stdio(&["--rich"]) }))?;
    // MCP prompts are those of the session's running servers: a client attached to its
    // session with them started.
    let client = daemon.client().await?;
    let session = client
        .create(SessionCreateParams {
            workspace: home.workspace().display().to_string(),
            env: Some(shell_env(&home, &[])),
            ..Default::default()
        })
        .await?;
    client.mcp_start(StartParams { session: session.id.clone(), wait: true }).await?;
    let built_ins = vec!["help".to_owned(), "commit".to_owned()];
    let listed =
        client.commands_list(CommandsListParams { session: session.id.clone(), built_ins }).await?;
    let v = serde_json::to_value(&listed)?;
    let got = names(&v);
    for want in [
        "git:commit",
        "user.deploy",
        "workspace.deploy",
        "user.review",
        "review1",
        "srv.greet",
        "user.greet",
        "image-only",
    ] {
        assert!(got.contains(&want.to_owned()), "{want} missing from {got:?}");
    }
    assert!(!got.contains(&"help".to_owned()), "built-ins are not listed");
    let commit = v["commands"].as_array().into_iter().flatten().find(|c| c["name"] == "git:commit");
    assert_eq!(commit.map(|c| c["description"].clone()), Some("Commit".into()));
    let renamed = v["commands"].as_array().into_iter().flatten().find(|c| c["name"] == "review1");
    assert_eq!(
        renamed.map(|c| (c["kind"].clone(), c["renamedFrom"].clone())),
        Some(("skill".into(), "review".into()))
    );
    let said = v["diagnostics"].to_string();
    assert!(said.contains("broken.toml") && said.contains("not valid TOML"), "{said}");
    assert!(v["conflicts"].as_array().is_some_and(|c| c.len() >= 6), "{v}");

    // An edit is seen on the next request.
    write(user.join("git/commit.toml"), "prompt = \"commit\"\ndescription = \"Commit it now\"")?;
    let v = home.gemctl_json(&["commands", "list"])?;
    let commit = v["commands"].as_array().into_iter().flatten().find(|c| c["name"] == "git:commit");
    assert_eq!(commit.map(|c| c["description"].clone()), Some("Commit it now".into()));
    Ok(())
}
