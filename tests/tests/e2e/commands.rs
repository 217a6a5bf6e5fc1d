//! Slash commands end to end: command files of the user, a trusted workspace and an
//! extension, skills and an MCP server's prompts, named after Gemini CLI's conflict rules;
//! an untrusted workspace loads none; bad files are named; an edit is seen.

use geminid_protocol::api::{CommandsApiClient, McpApiClient, SessionApiClient};
use geminid_protocol::commands::{CommandsExpandParams, CommandsListParams};
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

#[tokio::test]
async fn expansion_args_shell_files_and_policy() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let user = home.root().join("home/.gemini/commands");
    write(user.join("greet.toml"), "prompt = \"Say hi to {{args}}: !{printf '%s' {{args}}}\"")?;
    write(user.join("plain.toml"), "prompt = \"Plain\"")?;
    write(user.join("fail.toml"), "prompt = \"A !{sh -c 'exit 3'} B\"")?;
    write(user.join("killed.toml"), "prompt = \"!{kill -9 $$}\"")?;
    write(user.join("denied.toml"), "prompt = \"!{rm -rf ./nothing-here}\"")?;
    write(user.join("touch.toml"), "prompt = \"!{touch made-by-expand}\"")?;
    write(user.join("files.toml"), "prompt = \"[@{notes.txt}] [@{../../etc/passwd}]\"")?;
    std::fs::write(home.workspace().join("notes.txt"), "the notes")?;
    write(
        home.root().join("home/.gemini/policies/no-rm.toml"),
        "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"rm\"\ndecision = \"deny\"\npriority = 100\n",
    )?;
    let expand = |args: &[&str]| -> anyhow::Result<Value> {
        let mut all = vec!["commands", "expand", "--yes"];
        all.extend_from_slice(args);
        home.gemctl_json(&all)
    };

    // {{args}} raw outside !{}, shell-quoted inside: the quote in the name cannot break out.
    let v = expand(&["greet", "Bob", "O'Neil;", "touch", "pwned"])?;
    assert_eq!(v["text"], "Say hi to Bob O'Neil; touch pwned: Bob O'Neil; touch pwned", "{v}");
    assert_eq!(v["ran"][0]["exitCode"], 0, "{v}");
    assert!(!home.workspace().join("pwned").exists());
    // No {{args}}: the invocation is appended.
    assert_eq!(expand(&["/plain", "x", "y"])?["text"], "Plain\n\n/plain x y");
    assert_eq!(expand(&["plain"])?["text"], "Plain");
    // Exit codes and signals are said after the output.
    let v = expand(&["fail"])?;
    assert_eq!(v["text"], "A \n[Shell command 'sh -c 'exit 3'' exited with code 3] B", "{v}");
    let v = expand(&["killed"])?;
    assert!(v["text"].as_str().is_some_and(|t| t.contains("terminated by signal SIGKILL")), "{v}");
    // Denied by policy: an error, and nothing runs.
    let (code, _, err) = home.gemctl_run(&["commands", "expand", "denied"])?;
    assert_ne!(code, 0);
    assert!(err.contains("blocked by policy") && err.contains("no-rm.toml"), "{err}");
    // @{path}: inside the workspace only; the other placeholder stays, noted.
    let v = expand(&["files"])?;
    assert_eq!(v["text"], "[the notes] [@{../../etc/passwd}]", "{v}");
    assert!(
        v["notes"][0]
            .as_str()
            .is_some_and(|n| n.contains("outside the workspace") || n.contains("not found")),
        "{v}"
    );

    // A headless session: the default policy denies shell commands.
    let client = daemon.client().await?;
    let workspace = home.workspace().display().to_string();
    let create = SessionCreateParams { workspace: workspace.clone(), ..Default::default() };
    let headless = client.create(create).await?;
    let p =
        CommandsExpandParams { session: headless.id, name: "touch".into(), ..Default::default() };
    let e = client.commands_expand(p).await.expect_err("denied headless");
    assert!(e.to_string().contains("blocked by policy"), "{e}");
    // An interactive one's front-end is told what to confirm; nothing runs until it is.
    let create = SessionCreateParams { workspace, interactive: Some(true), ..Default::default() };
    let session = client.create(create).await?;
    let p = CommandsExpandParams {
        session: session.id.clone(),
        name: "touch".into(),
        ..Default::default()
    };
    let r = client.commands_expand(p.clone()).await?;
    assert_eq!(r.needs_confirmation, ["touch made-by-expand"]);
    assert!(r.text.is_empty() && r.ran.is_empty());
    assert!(!home.workspace().join("made-by-expand").exists());
    let r = client.commands_expand(CommandsExpandParams { confirmed: true, ..p }).await?;
    assert_eq!(r.ran.len(), 1);
    assert!(home.workspace().join("made-by-expand").exists());
    let e = client
        .commands_expand(CommandsExpandParams {
            session: session.id,
            name: "nope".into(),
            ..Default::default()
        })
        .await
        .expect_err("unknown");
    assert!(e.to_string().contains("gemctl commands list"), "{e}");
    Ok(())
}

#[tokio::test]
async fn a_new_command_file_is_announced() -> anyhow::Result<()> {
    use geminid_protocol::event::EventsSubscribeParams;
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let user = home.root().join("home/.gemini/commands");
    write(user.join("one.toml"), "prompt = \"1\"")?;
    let client = daemon.client().await?;
    let workspace = home.workspace().display().to_string();
    let session = client.create(SessionCreateParams { workspace, ..Default::default() }).await?;
    let p = CommandsListParams { session: session.id.clone(), built_ins: Vec::new() };
    assert_eq!(client.commands_list(p).await?.commands.len(), 1);
    let kinds = Some(vec!["commands/changed".into()]);
    let params = EventsSubscribeParams { session: Some(session.id.clone()), kinds };
    let mut events = client.subscribe_events(Some(params)).await?;
    // In a new namespace folder: the folder's creation is seen, then its file.
    write(user.join("ns/two.toml"), "prompt = \"2\"")?;
    let e = tokio::time::timeout(std::time::Duration::from_secs(10), events.next()).await?;
    let e = serde_json::to_value(e.ok_or_else(|| anyhow::anyhow!("no event"))??)?;
    assert_eq!(e["payload"]["changed"], serde_json::json!(["ns:two"]), "{e}");
    Ok(())
}

/// A command's `!{…}` is decided in the session's approval mode, as its calls are (issue 68
/// item 1): a headless session refuses it by default and in `autoEdit` (shell commands are not
/// edits) and `plan` (read-only, with Gemini CLI's message), and runs it in `yolo`.
#[tokio::test]
async fn a_commands_shell_line_is_decided_in_the_sessions_mode() -> anyhow::Result<()> {
    use geminid_protocol::policy::ApprovalMode;
    use geminid_protocol::session::SessionUpdateParams;
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let user = home.root().join("home/.gemini/commands");
    write(user.join("touch.toml"), "prompt = \"!{touch made-by-expand}\"")?;
    let client = daemon.client().await?;
    let workspace = home.workspace().display().to_string();
    let session = client.create(SessionCreateParams { workspace, ..Default::default() }).await?;
    let made = home.workspace().join("made-by-expand");
    let expand = CommandsExpandParams {
        session: session.id.clone(),
        name: "touch".into(),
        ..Default::default()
    };
    for (mode, refused) in [
        (ApprovalMode::Default, "blocked by policy"),
        (ApprovalMode::AutoEdit, "blocked by policy"),
        (ApprovalMode::Plan, "You are in Plan Mode"),
    ] {
        let update = SessionUpdateParams {
            id: session.id.clone(),
            approval_mode: Some(mode),
            ..Default::default()
        };
        client.update(update).await?;
        let e = client.commands_expand(expand.clone()).await.expect_err("refused");
        assert!(e.to_string().contains(refused), "{mode:?}: {e}");
        assert!(!made.exists(), "{mode:?}: nothing runs");
    }
    let update = SessionUpdateParams {
        id: session.id.clone(),
        approval_mode: Some(ApprovalMode::Yolo),
        ..Default::default()
    };
    client.update(update).await?;
    let r = client.commands_expand(expand).await?;
    assert_eq!((r.ran.len(), r.needs_confirmation.len()), (1, 0), "{r:?}");
    assert!(made.exists(), "yolo runs it, as Gemini CLI does");
    Ok(())
}

/// What `!{…}` a headless session runs (`confirmed` false, as `gemini -p`): true when it ran,
/// false when it was refused or would be asked about.
async fn runs(
    client: &geminid_protocol::client::Client,
    session: &str,
    name: &str,
    args: &str,
) -> anyhow::Result<(bool, String)> {
    let p = CommandsExpandParams {
        session: session.to_owned(),
        name: name.into(),
        args: args.into(),
        ..Default::default()
    };
    Ok(match client.commands_expand(p).await {
        Ok(r) => (r.needs_confirmation.is_empty() && !r.ran.is_empty(), r.text),
        Err(e) => (false, e.to_string()),
    })
}

/// An allowed prefix (`tools.allowed: ["run_shell_command(echo)"]`, a policy rule's
/// `commandPrefix`) lets `echo …` run and nothing chained to it, redirected or substituted
/// into it: each command of the line is asked on its own, as Gemini CLI asks (issue 68 item 2).
#[tokio::test]
async fn an_allowed_prefix_does_not_let_a_chain_or_a_redirection_run() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let user = home.root().join("home/.gemini/commands");
    let lines = [
        ("plain", "echo A", true),
        ("and", "echo A && touch x", false),
        ("semi", "echo A; touch x", false),
        ("pipe", "echo A | tee x", false),
        ("or", "false || touch x", false),
        ("to", "echo A > x", false),
        ("append", "echo A >> x", false),
        ("subst", "echo $(touch x)", false),
        ("tick", "echo `touch x`", false),
        ("sub", "echo A && (touch x)", false),
        ("quoted", "echo 'A && touch x'", true),
    ];
    for (name, line, _) in lines {
        write(
            user.join(format!("{name}.toml")),
            &format!("prompt = {:?}", format!("!{{{line}}}")),
        )?;
    }
    let client = daemon.client().await?;
    let workspace = home.workspace().display().to_string();
    let settings = home.root().join("home/.gemini/settings.json");
    let policy = home.root().join("home/.gemini/policies/echo.toml");
    for how in ["tools.allowed", "commandPrefix"] {
        if how == "tools.allowed" {
            write(settings.clone(), r#"{"tools": {"allowed": ["run_shell_command(echo)"]}}"#)?;
        } else {
            std::fs::remove_file(&settings)?;
            write(
                policy.clone(),
                "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"echo\"\ndecision = \"allow\"\npriority = 100\n",
            )?;
        }
        let create = SessionCreateParams { workspace: workspace.clone(), ..Default::default() };
        let session = client.create(create).await?;
        for (name, line, want) in lines {
            let (ran, text) = runs(&client, &session.id, name, "").await?;
            assert_eq!(ran, want, "{how}: !{{{line}}}: {text}");
            assert!(!home.workspace().join("x").exists(), "{how}: !{{{line}}} made x");
        }
        client.close(geminid_protocol::session::SessionIdParams { id: session.id }).await?;
    }
    Ok(())
}

/// `@{file}` is text: what it holds is never run or filled in, whether or not the prompt
/// itself has `!{…}` or `{{args}}` (issue 68 item 3); `{{args}}` is the words typed, one space
/// between each, and the invocation appended is trimmed (item 4).
#[tokio::test]
async fn an_included_file_is_text_and_arguments_are_trimmed() -> anyhow::Result<()> {
    use geminid_protocol::policy::ApprovalMode;
    use geminid_protocol::session::SessionUpdateParams;
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let user = home.root().join("home/.gemini/commands");
    let doc = "Run !{touch pwned} with {{args}}.";
    std::fs::write(home.workspace().join("doc.md"), doc)?;
    write(user.join("doc.toml"), "prompt = \"See @{doc.md}\"")?;
    write(user.join("both.toml"), "prompt = \"!{printf hi} @{doc.md} [{{args}}]\"")?;
    write(user.join("args.toml"), "prompt = \"[{{args}}] !{printf '%s' {{args}}}\"")?;
    write(user.join("plain.toml"), "prompt = \"P\"")?;
    let client = daemon.client().await?;
    let workspace = home.workspace().display().to_string();
    let session = client.create(SessionCreateParams { workspace, ..Default::default() }).await?;
    let update = SessionUpdateParams {
        id: session.id.clone(),
        approval_mode: Some(ApprovalMode::Yolo),
        ..Default::default()
    };
    client.update(update).await?;
    let (_, text) = runs(&client, &session.id, "doc", "").await?;
    assert_eq!(text, format!("See {doc}"));
    let (_, text) = runs(&client, &session.id, "doc", " a  b ").await?;
    assert_eq!(text, format!("See {doc}\n\n/doc  a  b"));
    let (ran, text) = runs(&client, &session.id, "both", "  x   y ").await?;
    assert!(ran, "{text}");
    assert_eq!(text, format!("hi {doc} [x y]"));
    assert!(!home.workspace().join("pwned").exists(), "the file's command ran");
    let (_, text) = runs(&client, &session.id, "args", "  it's \t two  ").await?;
    assert_eq!(text, "[it's two] it's two");
    let (_, text) = runs(&client, &session.id, "plain", "   ").await?;
    assert_eq!(text, "P");
    Ok(())
}

/// Every way an outside tester made `touch` run under an `echo`-only allow (issue 68's attack
/// report, items 1-9): with `tools.allowed: ["run_shell_command(echo)"]` and with a
/// `commandPrefix = "echo"` rule, in the default mode and in `autoEdit`, headless, nothing runs
/// and the answer is a refusal or an ask that says why. A line outside geminid's plain grammar
/// is asked about whatever allowed it.
#[tokio::test]
async fn no_line_the_attack_report_found_runs_under_an_echo_allow() -> anyhow::Result<()> {
    use geminid_protocol::policy::ApprovalMode;
    use geminid_protocol::session::SessionUpdateParams;
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let user = home.root().join("home/.gemini/commands");
    let ws = home.workspace();
    std::fs::create_dir_all(ws.join("echo"))?;
    // (name, the line in `!{…}`, the arguments); MARK is the marker file `touch` would make.
    let lines: &[(&str, &str, &str)] = &[
        ("arith", "echo $((  $(touch MARK) ))", ""),
        ("arith2", "echo $(( `touch MARK` ))", ""),
        ("arith3", "echo $(( x[$(touch MARK)] ))", ""),
        ("escsp", "echo \\ #; touch MARK", ""),
        ("escpar", "echo \\(#; touch MARK", ""),
        ("escsemi", "echo \\;#; touch MARK", ""),
        ("contnl", "echo a\\\n#; touch MARK", ""),
        ("parcmt", "echo ${x:- #}; touch MARK", ""),
        ("nestbt", "echo `echo \\`touch MARK\\``", ""),
        ("btcmt", "echo `echo #`; touch MARK\necho `", ""),
        ("dqq", "echo\"\"/../evil.sh dqq", ""),
        ("argcmt", "echo '{{args}}'; touch MARK", "x #"),
        ("aold", "echo $[ {{args}} ]", "a[$(touch MARK)]"),
        ("aidx", "echo ${a[{{args}}]}", "a[$(touch MARK)]"),
        ("aadq", "echo $(( \"{{args}}\" ))", "a[$(touch MARK)]"),
        ("atp", "echo ${GEMINID_ARGS@P}", "$(touch MARK)"),
        ("argvar", "echo $(( GEMINID_ARGS ))", "a[$(touch MARK)]"),
        ("hdoc", "echo <<E\n$(touch MARK)\nE", ""),
        ("hdocbt", "echo <<E\n`touch MARK`\nE", ""),
        ("hansi", "echo <<$'E'\nE\ntouch MARK\n$E", ""),
    ];
    let mark = |name: &str| ws.join(format!("m-{name}"));
    for (name, line, _) in lines {
        let line = line.replace("MARK", &mark(name).display().to_string());
        write(
            user.join(format!("{name}.toml")),
            &format!("prompt = {}", Value::from(format!("!{{{line}}}"))),
        )?;
    }
    let evil = ws.join("evil.sh");
    std::fs::write(&evil, format!("#!/bin/sh\ntouch {}\n", mark("dqq").display()))?;
    std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let client = daemon.client().await?;
    let settings = home.root().join("home/.gemini/settings.json");
    let policy = home.root().join("home/.gemini/policies/echo.toml");
    let mut bad = Vec::new();
    for how in ["tools.allowed", "commandPrefix"] {
        if how == "tools.allowed" {
            write(settings.clone(), r#"{"tools": {"allowed": ["run_shell_command(echo)"]}}"#)?;
        } else {
            std::fs::remove_file(&settings)?;
            write(
                policy.clone(),
                "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"echo\"\ndecision = \"allow\"\npriority = 500\n",
            )?;
        }
        let create =
            SessionCreateParams { workspace: ws.display().to_string(), ..Default::default() };
        let session = client.create(create).await?;
        // The allow works: a plain echo runs.
        write(user.join("ok.toml"), "prompt = \"!{echo fine}\"")?;
        for mode in [ApprovalMode::Default, ApprovalMode::AutoEdit] {
            let update = SessionUpdateParams {
                id: session.id.clone(),
                approval_mode: Some(mode),
                ..Default::default()
            };
            client.update(update).await?;
            let (ran, text) = runs(&client, &session.id, "ok", "").await?;
            assert!(ran && text.contains("fine"), "{how} {mode:?}: the allow runs echo: {text}");
            for (name, line, args) in lines {
                let args = args.replace("MARK", &mark(name).display().to_string());
                let p = CommandsExpandParams {
                    session: session.id.clone(),
                    name: (*name).into(),
                    args: args.clone(),
                    ..Default::default()
                };
                let said = match client.commands_expand(p).await {
                    Ok(r) if r.ran.is_empty() && r.asks.len() == r.needs_confirmation.len() => {
                        r.asks.iter().map(|a| a.reason.clone()).collect::<Vec<_>>().join("; ")
                    }
                    Ok(r) => format!("ran or asked without a reason: {r:?}"),
                    Err(e) => e.to_string(),
                };
                let reasoned = said.contains("not plain")
                    || said.contains("blocked by policy")
                    || said.contains("cannot be given to the shell safely");
                if mark(name).exists() || !reasoned {
                    bad.push(format!("{how} {mode:?} !{{{line}}} {args:?}: {said}"));
                    let _ = std::fs::remove_file(mark(name));
                }
            }
        }
        client.close(geminid_protocol::session::SessionIdParams { id: session.id }).await?;
    }
    assert!(
        bad.is_empty(),
        "{} of {} ran or said no reason:\n{}",
        bad.len(),
        lines.len() * 4,
        bad.join("\n")
    );
    Ok(())
}

/// `gemctl commands expand` never runs what policy asks about without a person: without a
/// terminal it names each command with why and says `--yes` confirms from a script (issue 68's
/// attack report); `--no-confirm` and `--json` give the reason too. `@{fifo}` does not hang,
/// `!{echo @{f}}` is refused saying what to write instead, and the untrusted folder's warning
/// names `gemctl trust` once.
#[tokio::test]
async fn gemctl_asks_before_running_and_says_why() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let user = home.root().join("home/.gemini/commands");
    let ws = home.workspace();
    write(user.join("chain.toml"), "prompt = \"!{echo A; touch made}\"")?;
    write(user.join("var.toml"), "prompt = \"!{echo $HOME}\"")?;
    write(user.join("fifo.toml"), "prompt = \"[@{fifo}]\"")?;
    write(user.join("nested.toml"), "prompt = \"!{echo @{g.txt}}\"")?;
    std::fs::write(ws.join("g.txt"), "G")?;
    assert!(std::process::Command::new("mkfifo").arg(ws.join("fifo")).status()?.success());
    let v = home.gemctl_json(&["commands", "list"])?;
    let warning = v["diagnostics"][0]["message"].as_str().unwrap_or_default().to_owned();
    assert_eq!(warning.matches("gemctl trust").count(), 1, "{warning}");
    assert!(home.gemctl(&["trust"])?.status.success());

    // stdin is not a terminal: nothing runs, each command is named with why, --yes is said.
    let (code, _, err) = home.gemctl_run(&["commands", "expand", "chain"])?;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("needs a confirmation: echo A; touch made"), "{err}");
    assert!(err.contains("why: ") && err.contains("--yes"), "{err}");
    assert!(!ws.join("made").exists(), "ran without a person: {err}");
    let (code, out, err) = home.gemctl_run(&["commands", "expand", "--yes", "chain"])?;
    assert_eq!((code, out.trim()), (0, "A"), "{err}");
    assert!(ws.join("made").exists());
    write(
        home.root().join("home/.gemini/settings.json"),
        r#"{"tools": {"allowed": ["run_shell_command(echo)"]}}"#,
    )?;
    // Not plain: asked even though echo is allowed, with the reason, in text and JSON.
    let (code, _, err) = home.gemctl_run(&["commands", "expand", "--no-confirm", "var"])?;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not plain") && err.contains("a variable `$`"), "{err}");
    assert!(err.contains("without --no-confirm from a terminal"), "{err}");
    let (_, out, _) = home.gemctl_run(&["--json", "commands", "expand", "--no-confirm", "var"])?;
    let v: Value = serde_json::from_str(&out)?;
    assert!(v["asks"][0]["reason"].as_str().is_some_and(|r| r.contains("not plain")), "{v}");
    // A FIFO is not read (it would wait for a writer forever).
    let v = home.gemctl_json(&["commands", "expand", "fifo"])?;
    assert_eq!(v["text"], "[@{fifo}]", "{v}");
    assert!(v["notes"].to_string().contains("not a regular file"), "{v}");
    let (code, _, err) = home.gemctl_run(&["commands", "expand", "--yes", "nested"])?;
    assert_ne!(code, 0);
    assert!(err.contains("`@{` inside `!{…}` is not supported") && err.contains("cat"), "{err}");
    Ok(())
}
