//! Skills and agent definitions end to end, through gemctl and a real daemon: precedence
//! across the user's and a workspace's folders as trust changes, an edit seen at once,
//! enable and disable in settings, activation through policy (allowed for the person, denied
//! headless), install, link and uninstall with consent, and agent definitions deriving a
//! session.

use std::path::{Path, PathBuf};

use geminid_protocol::api::{SessionApiClient, SkillsApiClient};
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::skills::SkillActivateParams;
use geminid_tests::{Daemon, TestHome};
use serde_json::Value;

fn skill(dir: &Path, name: &str, description: &str) -> anyhow::Result<PathBuf> {
    let d = dir.join(name);
    std::fs::create_dir_all(d.join("scripts"))?;
    std::fs::write(
        d.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: {description}\n---\nInstructions of {description}.\n"
        ),
    )?;
    std::fs::write(d.join("scripts/run.sh"), "echo run\n")?;
    Ok(d)
}

fn listed(home: &TestHome) -> anyhow::Result<Value> {
    home.gemctl_json(&["skills", "list"])
}

fn find<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list["skills"].as_array()?.iter().find(|s| s["name"] == name)
}

#[tokio::test]
async fn precedence_trust_edits_and_enablement() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let user = home.root().join("home/.gemini/skills");
    let ws = home.workspace().join(".gemini/skills");
    skill(&user, "review", "the user's review")?;
    skill(&ws, "review", "the workspace's review")?;
    std::fs::create_dir_all(ws.join("broken"))?;
    std::fs::write(ws.join("broken/SKILL.md"), "no frontmatter at all\n")?;

    // Untrusted: the workspace's skills are skipped, and that is said.
    let v = listed(&home)?;
    let review = find(&v, "review").ok_or_else(|| anyhow::anyhow!("review missing: {v}"))?;
    assert_eq!(review["description"], "the user's review");
    assert_eq!(review["source"]["scope"], "user");
    let notes = v["diagnostics"].to_string();
    assert!(notes.contains("not trusted") && notes.contains("gemctl trust"), "{notes}");

    // Trusted: the workspace's copy wins, the override named; a broken file is diagnosed.
    assert!(home.gemctl(&["trust"])?.status.success());
    let v = listed(&home)?;
    let review = find(&v, "review").ok_or_else(|| anyhow::anyhow!("review missing: {v}"))?;
    assert_eq!(review["description"], "the workspace's review");
    assert_eq!(review["overrides"][0]["source"]["scope"], "user");
    let notes = v["diagnostics"].to_string();
    assert!(notes.contains("Skill conflict") && notes.contains("no frontmatter"), "{notes}");

    // An editor's save (a new file renamed over the old one) is seen on the next request.
    let file = ws.join("review/SKILL.md");
    let tmp = ws.join("review/.SKILL.md.swp");
    std::fs::write(&tmp, "---\nname: review\ndescription: edited\n---\nNew.\n")?;
    std::fs::rename(&tmp, &file)?;
    let v = listed(&home)?;
    assert_eq!(find(&v, "review").map(|s| s["description"].clone()), Some("edited".into()));
    // `skills show` gives its instructions (the list does not carry them).
    assert!(find(&v, "review").is_some_and(|s| s.get("instructions").is_none()), "{v}");
    let (code, out, err) = home.gemctl_run(&["skills", "show", "review"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("  Instructions:\n    New.\n"), "{out}");
    let shown = home.gemctl_json(&["skills", "show", "review"])?;
    assert_eq!(shown["instructions"], "New.", "{shown}");

    // Disable (the workspace's settings by default), then enable (every file that lists it).
    let (code, out, err) = home.gemctl_run(&["skills", "disable", "REVIEW"])?;
    assert_eq!(code, 0, "{out}{err}");
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(
        home.workspace().join(".gemini/settings.json"),
    )?)?;
    assert_eq!(settings["skills"]["disabled"], serde_json::json!(["REVIEW"]));
    let v = listed(&home)?;
    assert_eq!(find(&v, "review").map(|s| s["enabled"].clone()), Some(false.into()));
    let prompt = home.gemctl_json(&["skills", "prompt"])?;
    assert!(!prompt["prompt"].as_str().unwrap_or_default().contains("<name>review</name>"));
    let (code, _, err) = home.gemctl_run(&["skills", "activate", "review"])?;
    assert_ne!(code, 0);
    assert!(err.contains("disabled") && err.contains("gemctl skills enable"), "{err}");
    let (code, out, err) = home.gemctl_run(&["skills", "enable", "review"])?;
    assert_eq!(code, 0, "{out}{err}");
    let v = listed(&home)?;
    assert_eq!(find(&v, "review").map(|s| s["enabled"].clone()), Some(true.into()));
    let prompt = home.gemctl_json(&["skills", "prompt"])?;
    let text = prompt["prompt"].as_str().unwrap_or_default();
    assert!(text.contains("<available_skills>") && text.contains("<name>review</name>"), "{text}");
    // Gemini CLI's list format.
    let (code, out, _) = home.gemctl_run(&["skills", "list"])?;
    assert_eq!(code, 0);
    assert!(
        out.starts_with("Discovered Agent Skills:\n\nreview [Enabled]\n  Description: edited\n"),
        "{out}"
    );
    // Skills turned off: Gemini CLI's words, and ours on stderr (`--json` still lists them).
    let settings = home.root().join("home/.gemini/settings.json");
    std::fs::write(&settings, r#"{"skills": {"enabled": false}}"#)?;
    let (code, out, err) = home.gemctl_run(&["skills", "list"])?;
    assert_eq!((code, out.as_str()), (0, "No skills discovered.\n"), "{err}");
    assert!(err.contains("skills are turned off"), "{err}");
    assert!(find(&listed(&home)?, "review").is_some());
    Ok(())
}

#[tokio::test]
async fn activation_goes_through_policy() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    skill(&home.root().join("home/.gemini/skills"), "deploy", "deploys")?;

    // The person activating (gemctl) confirms by doing so.
    let (code, out, err) = home.gemctl_run(&["skills", "activate", "deploy"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("<activated_skill name=\"deploy\">"), "{out}");
    assert!(out.contains("Instructions of deploys.") && out.contains("└───scripts"), "{out}");
    let s = home.gemctl_json(&["session", "show"])?;
    assert_eq!(s["state"]["activatedSkills"], serde_json::json!(["deploy"]));
    assert!(
        s["state"]["allowedPaths"][0].as_str().unwrap_or_default().ends_with("skills/deploy"),
        "{s}"
    );

    // A headless session's model asking is denied by the default policy, and audited.
    let client = daemon.client().await?;
    let workspace = home.workspace().display().to_string();
    let session = client.create(SessionCreateParams { workspace, ..Default::default() }).await?;
    let p = SkillActivateParams {
        session: session.id.clone(),
        name: "deploy".into(),
        ..Default::default()
    };
    let e = client.skills_activate(p).await.expect_err("denied headless");
    assert!(e.to_string().contains("activate_skill"), "{e}");
    let unknown =
        SkillActivateParams { session: session.id, name: "nope".into(), ..Default::default() };
    let e = client.skills_activate(unknown).await.expect_err("unknown");
    assert!(e.to_string().contains("Available skills are: deploy"), "{e}");
    let audit = home.gemctl_json(&["audit"])?.to_string();
    assert!(audit.contains("activate_skill"), "{audit}");
    Ok(())
}

#[tokio::test]
async fn install_link_uninstall() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let src = home.root().join("src");
    skill(&src, "one", "first")?;
    skill(&src, "two", "second")?;
    let user = home.root().join("home/.gemini/skills");

    // Without consent, and nobody at a terminal: nothing is written.
    let (code, _, err) = home.gemctl_run(&["skills", "install", &src.display().to_string()])?;
    assert_eq!(code, 1);
    assert!(err.contains("one: first") && err.contains("not installed"), "{err}");
    assert!(!user.exists());

    let (code, out, err) =
        home.gemctl_run(&["skills", "install", &src.display().to_string(), "--consent"])?;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("Skill \"one\" installed") && out.contains("Skill \"two\" installed"),
        "{out}"
    );
    assert!(user.join("two/scripts/run.sh").is_file());

    // A source without skills says what a skill is.
    let empty = home.root().join("empty");
    std::fs::create_dir_all(&empty)?;
    let (code, _, err) =
        home.gemctl_run(&["skills", "install", &empty.display().to_string(), "--consent"])?;
    assert_ne!(code, 0);
    assert!(err.contains("no skill found") && err.contains("SKILL.md"), "{err}");

    // Link: a symlink per skill; a name already there is refused.
    let dev = home.root().join("dev");
    skill(&dev, "three", "third")?;
    let (code, _, err) =
        home.gemctl_run(&["skills", "link", &dev.display().to_string(), "--consent"])?;
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::symlink_metadata(user.join("three"))?.file_type().is_symlink());
    let (code, _, err) =
        home.gemctl_run(&["skills", "link", &dev.display().to_string(), "--consent"])?;
    assert_ne!(code, 0);
    assert!(err.contains("already exists"), "{err}");
    std::fs::write(
        dev.join("three/SKILL.md"),
        "---\nname: three\ndescription: edited in place\n---\n",
    )?;
    let v = listed(&home)?;
    assert_eq!(find(&v, "three").map(|s| s["description"].clone()), Some("edited in place".into()));

    // Uninstall removes the link only, and the copied folder.
    assert_eq!(home.gemctl_run(&["skills", "uninstall", "three"])?.0, 0);
    assert!(!user.join("three").exists() && dev.join("three/SKILL.md").is_file());
    assert_eq!(home.gemctl_run(&["skills", "uninstall", "one"])?.0, 0);
    assert!(!user.join("one").exists());
    let (code, _, err) = home.gemctl_run(&["skills", "uninstall", "one"])?;
    assert_ne!(code, 0);
    assert!(err.contains("no skill named"), "{err}");
    let (code, _, err) = home.gemctl_run(&["skills", "show", "tow"])?;
    assert_ne!(code, 0);
    assert!(err.contains("no skill named \"tow\" here (did you mean \"two\"?)"), "{err}");
    Ok(())
}

#[tokio::test]
async fn agent_definitions_and_derive() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let agents = home.root().join("home/.gemini/agents");
    std::fs::create_dir_all(&agents)?;
    std::fs::write(
        agents.join("researcher.md"),
        "---\nname: researcher\ndescription: Reads things\ntools: [mcp_fx_*]\n---\nYou research.\n",
    )?;
    std::fs::write(agents.join("bad.md"), "---\nname: bad\ndescription: d\ncolour: red\n---\n")?;
    std::fs::write(agents.join("_draft.md"), "not read")?;
    let v = home.gemctl_json(&["agents", "list"])?;
    let names: Vec<&str> =
        v["agents"].as_array().into_iter().flatten().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(names, ["researcher"]);
    let notes = v["diagnostics"].to_string();
    assert!(notes.contains("bad.md") && notes.contains("colour"), "{notes}");

    let parent = home.gemctl_json(&["session", "show"])?;
    let id = parent["id"].as_str().unwrap_or_default().to_owned();
    let d = home.gemctl_json(&["session", "derive", &id, "--agent", "researcher"])?;
    assert_eq!(d["state"]["derived"]["name"], "researcher");
    assert_eq!(d["state"]["derived"]["tools"], serde_json::json!(["mcp_fx_*"]));
    let (code, _, err) = home.gemctl_run(&["session", "derive", &id, "--agent", "nobody"])?;
    assert_ne!(code, 0);
    assert!(err.contains("no agent definition named") && err.contains("researcher"), "{err}");
    Ok(())
}

#[tokio::test]
async fn skills_served_by_mcp_servers() -> anyhow::Result<()> {
    use geminid_protocol::api::McpApiClient;
    use geminid_protocol::mcp::StartParams;
    use geminid_protocol::skills::SkillsListParams;
    use geminid_tests::mcp::{shell_env, stdio, write_user_settings};
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    write_user_settings(
        &home,
        serde_json::json!({ "srv": stdio(&["--skills"]), "bad": stdio(&["--fail-skills"]) }),
    )?;
    // The user's copy of the name the server serves: the server's wins (user < MCP < workspace).
    skill(&home.root().join("home/.gemini/skills"), "served-skill", "the user's copy")?;
    let client = daemon.client().await?;
    let session = client
        .create(SessionCreateParams {
            workspace: home.workspace().display().to_string(),
            env: Some(shell_env(&home, &[])),
            ..Default::default()
        })
        .await?;
    let id = session.id.clone();
    client.mcp_start(StartParams { session: id.clone(), wait: true }).await?;

    let v =
        client.skills_list(SkillsListParams { session: id.clone(), instructions: false }).await?;
    let served = v
        .skills
        .iter()
        .find(|s| s.name == "served-skill")
        .ok_or_else(|| anyhow::anyhow!("{v:?}"))?;
    assert_eq!(served.source.server.as_deref(), Some("srv"), "{v:?}");
    assert_eq!(served.location, "skill://served-skill/SKILL.md");
    assert_eq!(served.overrides.len(), 1, "it overrides the user's copy");
    let bad = v
        .diagnostics
        .iter()
        .find(|d| d.file.contains("'bad'"))
        .ok_or_else(|| anyhow::anyhow!("{:?}", v.diagnostics))?;
    assert!(bad.message.contains("listing its skills failed"), "{}", bad.message);

    let p = SkillActivateParams {
        session: id,
        name: "served-skill".into(),
        confirmed: true,
        ..Default::default()
    };
    let a = client.skills_activate(p).await?;
    assert!(a.text.contains("Follow the served steps."), "{}", a.text);
    assert!(a.resources.contains("skill://served-skill/notes.md"), "{}", a.resources);
    Ok(())
}

#[tokio::test]
async fn an_edit_is_announced_as_skills_changed() -> anyhow::Result<()> {
    use geminid_protocol::event::EventsSubscribeParams;
    use geminid_protocol::skills::SkillsListParams;
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let user = home.root().join("home/.gemini/skills");
    skill(&user, "first", "one")?;
    let client = daemon.client().await?;
    let workspace = home.workspace().display().to_string();
    let session = client.create(SessionCreateParams { workspace, ..Default::default() }).await?;
    let prompt = client
        .skills_prompt(SkillsListParams { session: session.id.clone(), instructions: false })
        .await?;
    assert_eq!(prompt.names, ["first"]);
    let params = EventsSubscribeParams {
        session: Some(session.id.clone()),
        kinds: Some(vec!["skills/changed".into()]),
    };
    let mut events = client.subscribe_events(Some(params)).await?;
    // A new skill folder, then an edit inside an existing one (an editor's rename).
    skill(&user, "second", "two")?;
    let e = next_event(&mut events).await?;
    assert_eq!(e["payload"]["changed"], serde_json::json!(["second"]), "{e}");
    assert_eq!(e["payload"]["enabled"], serde_json::json!(["first", "second"]), "{e}");
    let tmp = user.join("first/SKILL.md.new");
    std::fs::write(&tmp, "---\nname: first\ndescription: edited\n---\n")?;
    std::fs::rename(&tmp, user.join("first/SKILL.md"))?;
    let e = next_event(&mut events).await?;
    assert_eq!(e["payload"]["changed"], serde_json::json!(["first"]), "{e}");
    // Removed.
    std::fs::remove_dir_all(user.join("second"))?;
    let e = next_event(&mut events).await?;
    assert_eq!(e["payload"]["changed"], serde_json::json!(["second"]), "{e}");
    assert_eq!(e["payload"]["enabled"], serde_json::json!(["first"]), "{e}");
    Ok(())
}

async fn next_event(
    events: &mut geminid_protocol::client::Subscription<geminid_protocol::event::Event>,
) -> anyhow::Result<Value> {
    let e = tokio::time::timeout(std::time::Duration::from_secs(10), events.next()).await?;
    Ok(serde_json::to_value(e.ok_or_else(|| anyhow::anyhow!("no event"))??)?)
}

#[tokio::test]
async fn install_from_a_git_repository_with_a_path() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let repo = home.root().join("src/repo");
    skill(&repo.join("skills"), "from-git", "cloned")?;
    let git = |args: &[&str]| -> anyhow::Result<()> {
        // Not the user's git configuration (a signing key, hooks): the home's.
        let ok = home
            .command("git", &[])
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(&repo)
            .status()?
            .success();
        anyhow::ensure!(ok, "git {args:?} failed");
        Ok(())
    };
    git(&["init", "-q"])?;
    git(&["add", "-A"])?;
    git(&["commit", "-q", "-m", "skills"])?;
    let url = format!("file://{}", repo.display());
    // The skills are in a folder of the repository: without --path there are none at its top.
    let (code, _, err) = home.gemctl_run(&["skills", "install", &url, "--consent"])?;
    assert_ne!(code, 0);
    assert!(err.contains("no skill found"), "{err}");
    let (code, out, err) = home.gemctl_run(&[
        "skills",
        "install",
        &url,
        "--path",
        "skills",
        "--scope",
        "workspace",
        "--consent",
    ])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Skill \"from-git\" installed"), "{out}");
    let installed = home.workspace().join(".gemini/skills/from-git");
    assert!(installed.join("SKILL.md").is_file() && installed.join("scripts/run.sh").is_file());
    assert!(!installed.join(".git").exists());
    let left: Vec<_> = std::fs::read_dir(home.workspace().join(".gemini/skills"))?
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "no staging folder is left behind: {left:?}");
    let (code, _, err) =
        home.gemctl_run(&["skills", "install", &url, "--path", "../..", "--consent"])?;
    assert_ne!(code, 0);
    assert!(err.contains("must stay inside"), "{err}");
    Ok(())
}
