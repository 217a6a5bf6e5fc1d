//! Policy in the call pipeline, over the socket with the real daemon: confirmations answered
//! from another connection, timeouts, headless sessions, approvals that survive a restart,
//! "always" saved to `auto-saved.toml`, derived sessions, the audit log and policy files
//! reloaded as they change.

use std::time::Duration;

use geminid_protocol::api::{
    AuditApiClient, ConfirmationApiClient, McpApiClient, PolicyApiClient, SessionApiClient,
    ToolsApiClient,
};
use geminid_protocol::asks::{AskKind, AskNotice, AsksListenParams};
use geminid_protocol::client::{Client, Subscription};
use geminid_protocol::config::McpReloadParams;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::event::{Event, EventBody, EventsSubscribeParams};
use geminid_protocol::policy::{
    AuditConfirmation, AuditListParams, AuditRecord, ConfirmOutcome, ConfirmationRespondParams,
    PolicyDecision, PolicyListParams,
};
use geminid_protocol::session::{SessionDeriveParams, SessionIdParams};
use geminid_protocol::tools::{ToolsCallParams, ToolsCallResult, ToolsListParams};
use geminid_tests::mcp::{FAST, Setup, shell_env, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome, eventually, line_with, stderr_lines};
use jsonrpsee::core::client::Error as ClientError;
use serde_json::json;
use std::sync::Arc;

const WAIT: Duration = Duration::from_secs(10);

/// A user policy that asks about `fx`'s `echo` (above the tests' allow-all rule).
const ASK_ECHO: &str =
    "[[rule]]\ntoolName = \"echo\"\nmcpName = \"fx\"\ndecision = \"ask_user\"\npriority = 500\n";

fn policy_file(home: &TestHome, name: &str, text: &str) -> anyhow::Result<std::path::PathBuf> {
    let dir = home.root().join("home/.gemini/policies");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Re-read every input file now (what the watcher does after its debounce).
async fn reload(client: &Client) -> anyhow::Result<()> {
    client.mcp_reload(Some(McpReloadParams { session: None })).await?;
    Ok(())
}

fn echo(session: &str, text: &str) -> ToolsCallParams {
    ToolsCallParams {
        session: session.to_owned(),
        name: "mcp_fx_echo".into(),
        args: json!({ "text": text }).as_object().cloned(),
        call_id: None,
        confirmed: false,
    }
}

/// The error's code and message.
fn failure(r: Result<impl std::fmt::Debug, ClientError>) -> (i32, String) {
    match r {
        Err(ClientError::Call(e)) => (e.code(), e.message().to_owned()),
        other => (0, format!("not a call error: {other:?}")),
    }
}

async fn listen(client: &Client, session: &str) -> anyhow::Result<Subscription<AskNotice>> {
    let p = AsksListenParams { session: session.to_owned(), kinds: vec![AskKind::Confirmation] };
    Ok(client.asks_listen(p).await?)
}

/// The next ask a listener is sent.
async fn next_ask(
    sub: &mut Subscription<AskNotice>,
) -> anyhow::Result<geminid_protocol::asks::Ask> {
    loop {
        match tokio::time::timeout(WAIT, sub.next()).await? {
            Some(Ok(AskNotice::Asked { ask })) => return Ok(ask),
            Some(Ok(AskNotice::Settled { .. })) => continue,
            other => anyhow::bail!("the listener ended: {other:?}"),
        }
    }
}

fn respond(id: &str, outcome: ConfirmOutcome) -> ConfirmationRespondParams {
    ConfirmationRespondParams { id: id.to_owned(), outcome, reason: None, session: None }
}

async fn audit(client: &Client, session: &str) -> anyhow::Result<Vec<AuditRecord>> {
    let p = AuditListParams { session: Some(session.to_owned()), ..Default::default() };
    Ok(client.audit_list(Some(p)).await?.records)
}

#[tokio::test]
async fn a_confirmation_is_answered_from_a_second_connection_and_only_once() -> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&[]) })).await?;
    policy_file(&s.home, "ask.toml", ASK_ECHO)?;
    reload(&s.client).await?;
    let filter = EventsSubscribeParams {
        session: Some(s.session.clone()),
        kinds: Some(vec!["confirmation/requested".into()]),
    };
    let mut events: Subscription<Event> = s.client.subscribe_events(Some(filter)).await?;
    let caller = Arc::new(s.daemon.client().await?);
    let mut asks = listen(&s.client, &s.session).await?;
    let call = {
        let client = caller.clone();
        let p = echo(&s.session, "secret-value-42");
        tokio::spawn(async move { client.tools_call(p).await })
    };
    let ask = next_ask(&mut asks).await?;
    assert_eq!(ask.detail["path"], json!(s.session));
    let event = tokio::time::timeout(WAIT, events.next()).await?.unwrap()?;
    let EventBody::ConfirmationRequested(req) = event.body else { panic!("{event:?}") };
    assert_eq!((req.id.as_str(), req.tool.as_str()), (ask.id.as_str(), "mcp_fx_echo"));
    assert_eq!((req.to.as_str(), req.server.as_str()), (s.session.as_str(), "fx"));
    assert!(req.details.contains("ask.toml"), "{}", req.details);

    // Another connection, attached to nothing, answers; the session it names must be the
    // ask's.
    let other = s.daemon.client().await?;
    let wrong = ConfirmationRespondParams {
        session: Some("nope".into()),
        ..respond(&ask.id, ConfirmOutcome::Once)
    };
    let (code, _) = failure(other.confirmation_respond(wrong).await);
    assert_eq!(code, ErrorCode::SessionNotFound.code());
    let answered = other.confirmation_respond(respond(&ask.id, ConfirmOutcome::Once)).await?;
    assert_eq!(answered.session, s.session);
    let (code, message) =
        failure(other.confirmation_respond(respond(&ask.id, ConfirmOutcome::Deny)).await);
    assert_eq!(code, ErrorCode::InvalidArguments.code());
    assert!(message.contains("already answered"), "{message}");
    let (_, message) =
        failure(other.confirmation_respond(respond("ask-999", ConfirmOutcome::Once)).await);
    assert!(message.contains("no confirmation ask-999 is pending"), "{message}");
    let out: ToolsCallResult = call.await??;
    assert_eq!(out.result["content"][0]["text"], "secret-value-42");

    let records = audit(&s.client, &s.session).await?;
    let r = &records[0];
    assert_eq!((r.tool.as_str(), r.ok), ("mcp_fx_echo", true));
    assert_eq!(r.decision, Some(PolicyDecision::AskUser));
    assert_eq!(r.confirmation, Some(AuditConfirmation::Answered(ConfirmOutcome::Once)));
    assert!(
        r.rule.as_ref().is_some_and(|rule| rule.file.ends_with("ask.toml") && rule.line == Some(1))
    );
    assert_eq!(r.arg_keys, ["text"]);
    let text = serde_json::to_string(&records)?;
    assert!(!text.contains("secret-value-42"), "argument values are not kept: {text}");
    Ok(())
}

#[tokio::test]
async fn another_sessions_confirmation_is_refused() -> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&[]) })).await?;
    policy_file(&s.home, "ask.toml", ASK_ECHO)?;
    reload(&s.client).await?;
    let caller = Arc::new(s.daemon.client().await?);
    let mut asks = listen(&s.client, &s.session).await?;
    let call = {
        let client = caller.clone();
        let p = echo(&s.session, "x");
        tokio::spawn(async move { client.tools_call(p).await })
    };
    let ask = next_ask(&mut asks).await?;
    let ws = s.home.root().join("ws2");
    std::fs::create_dir_all(&ws)?;
    let create = geminid_protocol::session::SessionCreateParams {
        workspace: ws.display().to_string(),
        ..Default::default()
    };
    let other = s.client.create(create).await?.id;
    let p = ConfirmationRespondParams {
        session: Some(other.clone()),
        ..respond(&ask.id, ConfirmOutcome::Once)
    };
    let (code, message) = failure(s.client.confirmation_respond(p).await);
    assert_eq!(code, ErrorCode::InvalidArguments.code());
    assert!(
        message.contains(&format!("belongs to session {}, not {other}", s.session)),
        "{message}"
    );
    // Still pending: the right session's answer decides.
    let p = ConfirmationRespondParams {
        reason: Some("not today".into()),
        ..respond(&ask.id, ConfirmOutcome::Deny)
    };
    s.client.confirmation_respond(p).await?;
    let (code, message) = failure(call.await?);
    assert_eq!(code, ErrorCode::PolicyDenied.code());
    assert!(message.contains("declined: not today"), "{message}");
    Ok(())
}

#[tokio::test]
async fn nobody_answering_denies_and_a_late_answer_is_told_why() -> anyhow::Result<()> {
    let s = Setup::with_args(json!({ "fx": stdio(&[]) }), &["--confirm-timeout", "300ms"]).await?;
    policy_file(&s.home, "ask.toml", ASK_ECHO)?;
    reload(&s.client).await?;
    // No client listens: denied at once, saying how to listen.
    let (code, message) = failure(s.client.tools_call(echo(&s.session, "a")).await);
    assert_eq!(code, ErrorCode::PolicyDenied.code());
    assert!(message.contains("asks/listen"), "{message}");
    let caller = Arc::new(s.daemon.client().await?);
    let mut asks = listen(&s.client, &s.session).await?;
    let call = {
        let client = caller.clone();
        let p = echo(&s.session, "b");
        tokio::spawn(async move { client.tools_call(p).await })
    };
    let ask = next_ask(&mut asks).await?;
    let (code, message) = failure(call.await?);
    assert_eq!(code, ErrorCode::ConfirmationTimedOut.code());
    assert!(message.contains("within 300ms, so it is denied"), "{message}");
    let (_, message) =
        failure(s.client.confirmation_respond(respond(&ask.id, ConfirmOutcome::Once)).await);
    assert!(message.contains("nobody answered before its deadline"), "{message}");
    let records = audit(&s.client, &s.session).await?;
    let how: Vec<_> = records.iter().map(|r| r.confirmation).collect();
    assert_eq!(how, [Some(AuditConfirmation::TimedOut), Some(AuditConfirmation::NoAnswerer)]);
    Ok(())
}

#[tokio::test]
async fn a_headless_session_hides_what_no_rule_allows_but_its_person_may_call_it()
-> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(
        &home,
        json!({ "fx": stdio(&[]), "trusted": { "command": geminid_tests::mcp::fixture(), "trust": true } }),
    )?;
    let daemon = Daemon::start(&home, FAST).await?;
    let client = daemon.client().await?;
    let create = geminid_protocol::session::SessionCreateParams {
        workspace: home.workspace().display().to_string(),
        env: Some(shell_env(&home, &[])),
        ..Default::default()
    };
    let session = client.create(create).await?.id;
    let list = |all| ToolsListParams { session: session.clone(), raw: false, all };
    let shown = client.tools_list(list(false)).await?;
    assert!(shown.tools.iter().all(|t| t.server == "trusted"), "{:?}", shown.tools);
    assert!(shown.tools.iter().any(|t| t.name == "mcp_trusted_echo"));
    let note =
        shown.diagnostics.iter().find(|d| d.contains("mcp_fx_echo")).cloned().unwrap_or_default();
    assert!(note.contains("not interactive") && note.contains("gemctl attach"), "{note}");
    let all = client.tools_list(list(true)).await?;
    let hidden = all.tools.iter().find(|t| t.name == "mcp_fx_echo").and_then(|t| t.hidden.clone());
    assert!(hidden.is_some_and(|h| h.contains("not interactive")));

    let (code, _) = failure(client.tools_call(echo(&session, "a")).await);
    assert_eq!(code, ErrorCode::PolicyDenied.code());
    // The person at the terminal (`gemctl call`) is there to confirm it.
    let mine = ToolsCallParams { confirmed: true, ..echo(&session, "mine") };
    assert_eq!(client.tools_call(mine).await?.result["content"][0]["text"], "mine");
    let records = audit(&client, &session).await?;
    assert_eq!(records[0].confirmation, Some(AuditConfirmation::ByCaller));
    assert!(!records[1].ok, "{:?}", records[1]);

    // A listening client makes the session interactive: its tools are listed again.
    let _asks = listen(&client, &session).await?;
    let shown = client.tools_list(list(false)).await?;
    assert!(shown.tools.iter().any(|t| t.name == "mcp_fx_echo"), "{:?}", shown.diagnostics);
    drop(client);
    Ok(())
}

/// `tools.exclude: ["pid"]` hides `mcp_ft_pid` as Gemini CLI's registry does (it checks an MCP
/// tool's own name as well as its full one), even on a trusted server, and a call to it is
/// refused whoever makes it.
#[tokio::test]
async fn tools_exclude_names_an_mcp_tool_by_its_own_name_too() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    std::fs::write(
        home.root().join("home/.gemini/settings.json"),
        json!({
            "mcpServers": { "ft": { "command": geminid_tests::mcp::fixture(), "trust": true } },
            "tools": { "exclude": ["pid", "mcp_ft_env"] }
        })
        .to_string(),
    )?;
    let daemon = Daemon::start(&home, FAST).await?;
    let client = daemon.client().await?;
    let create = geminid_protocol::session::SessionCreateParams {
        workspace: home.workspace().display().to_string(),
        env: Some(shell_env(&home, &[])),
        ..Default::default()
    };
    let session = client.create(create).await?.id;
    let list = |all| ToolsListParams { session: session.clone(), raw: false, all };
    let shown: Vec<String> =
        client.tools_list(list(false)).await?.tools.iter().map(|t| t.name.clone()).collect();
    assert!(shown.contains(&"mcp_ft_echo".to_owned()), "{shown:?}");
    assert!(!shown.iter().any(|n| n == "mcp_ft_pid" || n == "mcp_ft_env"), "{shown:?}");
    let all = client.tools_list(list(true)).await?;
    let why = all.tools.iter().find(|t| t.name == "mcp_ft_pid").and_then(|t| t.hidden.clone());
    assert!(why.as_deref().is_some_and(|w| w.contains("tools.exclude")), "{why:?}");
    let pid = ToolsCallParams { name: "mcp_ft_pid".into(), confirmed: true, ..echo(&session, "x") };
    let (code, message) = failure(client.tools_call(pid).await);
    assert_eq!(code, ErrorCode::PolicyDenied.code(), "{message}");
    Ok(())
}

#[tokio::test]
async fn session_approvals_survive_a_restart_and_always_is_saved_for_good() -> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&[]) })).await?;
    let ask_all =
        "[[rule]]\ntoolName = \"*\"\nmcpName = \"fx\"\ndecision = \"ask_user\"\npriority = 500\n";
    policy_file(&s.home, "ask.toml", ask_all)?;
    reload(&s.client).await?;
    let caller = Arc::new(s.daemon.client().await?);
    let mut asks = listen(&s.client, &s.session).await?;
    let call = {
        let client = caller.clone();
        let p = echo(&s.session, "a");
        tokio::spawn(async move { client.tools_call(p).await })
    };
    let ask = next_ask(&mut asks).await?;
    s.client.confirmation_respond(respond(&ask.id, ConfirmOutcome::Session)).await?;
    call.await??;
    let got = s.client.get(SessionIdParams { id: s.session.clone() }).await?;
    assert_eq!(got.state.approvals, ["mcp_fx_echo"]);
    drop(asks);

    // Across a restart, with nobody listening: the approval holds.
    let Setup { home, mut daemon, client, session } = s;
    drop(client);
    daemon.signal(nix::sys::signal::Signal::SIGTERM)?;
    daemon.wait_exit(WAIT).await?;
    let daemon = Daemon::start(&home, FAST).await?;
    let client = Arc::new(daemon.client().await?);
    client
        .attach(geminid_protocol::session::SessionAttachParams {
            id: session.clone(),
            env: Some(shell_env(&home, &[])),
        })
        .await?;
    assert_eq!(client.tools_call(echo(&session, "b")).await?.result["content"][0]["text"], "b");
    assert_eq!(
        audit(&client, &session).await?[0].confirmation,
        Some(AuditConfirmation::Remembered)
    );

    // "Always": a rule in auto-saved.toml, beside what the file held.
    let saved = policy_file(&home, "auto-saved.toml", "# mine\n")?;
    let mut asks = listen(&client, &session).await?;
    let pid = |session: &str| ToolsCallParams {
        name: "mcp_fx_pid".into(),
        args: None,
        ..echo(session, "")
    };
    let call = {
        let (client, p) = (client.clone(), pid(&session));
        tokio::spawn(async move { client.tools_call(p).await })
    };
    let ask = next_ask(&mut asks).await?;
    client.confirmation_respond(respond(&ask.id, ConfirmOutcome::Always)).await?;
    call.await??;
    let text = std::fs::read_to_string(&saved)?;
    assert!(text.contains("# mine\n"), "the file's own content is kept: {text}");
    assert!(
        text.contains("toolName = \"pid\"")
            && text.contains("mcpName = \"fx\"")
            && text.contains("priority = 950"),
        "{text}"
    );
    let rules = client
        .policy_list(PolicyListParams { session: session.clone(), tier: Some("user".into()) })
        .await?;
    assert!(
        rules
            .rules
            .iter()
            .any(|r| r.tool_name == "mcp_fx_pid" && r.source.effective_priority == 4.95)
    );

    // An auto-saved.toml someone broke: "always" is refused, the file kept, the ask pending.
    std::fs::write(&saved, "[[rule]\n")?;
    let sleep = ToolsCallParams {
        name: "mcp_fx_sleep".into(),
        args: json!({"ms": 1}).as_object().cloned(),
        ..echo(&session, "")
    };
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.tools_call(sleep).await })
    };
    let ask = next_ask(&mut asks).await?;
    let (code, message) =
        failure(client.confirmation_respond(respond(&ask.id, ConfirmOutcome::Always)).await);
    assert_eq!(code, ErrorCode::InvalidArguments.code());
    assert!(
        message.contains("auto-saved.toml:1:") && message.contains("answer once, session or deny"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&saved)?, "[[rule]\n");
    client.confirmation_respond(respond(&ask.id, ConfirmOutcome::Once)).await?;
    call.await??;
    drop(home);
    Ok(())
}

#[tokio::test]
async fn a_derived_session_two_levels_deep_asks_its_root_with_its_path() -> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&[]) })).await?;
    policy_file(&s.home, "ask.toml", ASK_ECHO)?;
    reload(&s.client).await?;
    let derive = |parent: &str, name: &str, tools: Option<Vec<String>>| SessionDeriveParams {
        parent: parent.to_owned(),
        name: name.to_owned(),
        tools,
        agent: None,
    };
    let a =
        s.client.derive(derive(&s.session, "researcher", Some(vec!["mcp_fx_echo".into()]))).await?;
    let b = s.client.derive(derive(&a.id, "reader", None)).await?;
    let path = format!("{}/researcher/reader", s.session);
    assert_eq!(
        b.state.derived.as_ref().map(|d| (d.root.as_str(), d.path.as_str())),
        Some((s.session.as_str(), path.as_str()))
    );
    let (code, message) = failure(s.client.derive(derive(&a.id, "no/slash", None)).await);
    assert_eq!(code, ErrorCode::InvalidArguments.code());
    assert!(message.contains("1 to 64 letters"), "{message}");

    let listed = s
        .client
        .tools_list(ToolsListParams { session: a.id.clone(), raw: false, all: false })
        .await?;
    let names: Vec<_> = listed.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["mcp_fx_echo"], "{:?}", listed.diagnostics);

    // b's confirmation goes to the root's listener, labelled with b's path.
    let caller = Arc::new(s.daemon.client().await?);
    let mut asks = listen(&s.client, &s.session).await?;
    let call = {
        let client = caller.clone();
        let p = echo(&b.id, "from b");
        tokio::spawn(async move { client.tools_call(p).await })
    };
    let ask = next_ask(&mut asks).await?;
    assert_eq!(ask.session, s.session);
    assert_eq!(
        (ask.detail["path"].as_str(), ask.detail["session"].as_str()),
        (Some(path.as_str()), Some(b.id.as_str()))
    );
    s.client.confirmation_respond(respond(&ask.id, ConfirmOutcome::Once)).await?;
    assert_eq!(call.await??.result["content"][0]["text"], "from b");

    // A rule for one subagent applies to it only.
    let deny = format!(
        "{ASK_ECHO}\n[[rule]]\ntoolName = \"mcp_fx_echo\"\nsubagent = \"reader\"\ndecision = \"deny\"\npriority = 600\n"
    );
    policy_file(&s.home, "ask.toml", &deny)?;
    reload(&s.client).await?;
    let (code, _) = failure(s.client.tools_call(echo(&b.id, "x")).await);
    assert_eq!(code, ErrorCode::PolicyDenied.code());

    // Closing the root closes both.
    s.client.close(SessionIdParams { id: s.session.clone() }).await?;
    for id in [&a.id, &b.id] {
        let (code, _) = failure(s.client.get(SessionIdParams { id: id.clone() }).await);
        assert_eq!(code, ErrorCode::SessionNotFound.code());
    }
    Ok(())
}

async fn tool_names(s: &Setup) -> Vec<String> {
    let p = ToolsListParams { session: s.session.clone(), raw: false, all: false };
    let l = s.client.tools_list(p).await;
    l.map(|l| l.tools.iter().map(|t| t.name.clone()).collect()).unwrap_or_default()
}

#[tokio::test]
async fn policy_files_are_reloaded_as_they_change_and_a_broken_one_keeps_its_rules()
-> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&[]) })).await?;
    let names = tool_names;
    assert!(names(&s).await.contains(&"mcp_fx_echo".to_owned()));
    let deny = "[[rule]]\ntoolName = \"mcp_fx_echo\"\ndecision = \"deny\"\npriority = 500\n";
    let file = policy_file(&s.home, "deny.toml", deny)?;
    assert!(
        eventually(WAIT, || async { !names(&s).await.contains(&"mcp_fx_echo".to_owned()) }).await,
        "the watcher saw the new file"
    );
    // An editor mid-save: the rule stays in force, and the problem is reported.
    std::fs::write(&file, "[[rule]]\ntoolName = \n")?;
    let listed =
        || s.client.policy_list(PolicyListParams { session: s.session.clone(), tier: None });
    assert!(
        eventually(WAIT, || async {
            listed().await.is_ok_and(|l| {
                l.diagnostics
                    .iter()
                    .any(|d| d.message.contains("last good rules (1) stay in force"))
            })
        })
        .await
    );
    assert!(!names(&s).await.contains(&"mcp_fx_echo".to_owned()));
    // A directory where a policy file would be is reported, and costs nothing else.
    std::fs::create_dir(s.home.root().join("home/.gemini/policies/dir.toml"))?;
    std::fs::remove_file(&file)?;
    assert!(
        eventually(WAIT, || async { names(&s).await.contains(&"mcp_fx_echo".to_owned()) }).await
    );
    let l = listed().await?;
    assert!(l.diagnostics.iter().any(|d| d.file.ends_with("dir.toml")), "{:?}", l.diagnostics);
    Ok(())
}

#[tokio::test]
async fn gemctl_attach_answers_from_the_terminal_and_gemctl_confirm_from_scripts()
-> anyhow::Result<()> {
    use std::io::Write;
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;
    policy_file(&home, "ask.toml", ASK_ECHO)?;
    // A confirmation left unanswered by a mistake fails the test in seconds, not minutes.
    let _daemon = Daemon::start(&home, &[FAST, &["--confirm-timeout", "5s"]].concat()).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let session =
        home.gemctl_json(&["session", "show"])?["id"].as_str().unwrap_or_default().to_owned();
    let mut attach = home
        .gemctl_cmd(&["attach", "--answer"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()?;
    let mut err = stderr_lines(&mut attach);
    line_with(&mut err, "are answered here").await?;
    let caller = Arc::new(_daemon.client().await?);
    let call = |text: &'static str| {
        let (client, p) = (caller.clone(), echo(&session, text));
        tokio::spawn(async move { client.tools_call(p).await })
    };
    // Typed at the terminal: y.
    let first = call("typed");
    let asked = line_with(&mut err, "confirm ask-").await?;
    assert!(asked.contains("Allow the call to 'mcp_fx_echo'"), "{asked}");
    line_with(&mut err, "arguments: {\"text\":\"typed\"}").await?;
    let mut stdin = attach.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
    writeln!(stdin, "y")?;
    assert_eq!(first.await??.result["content"][0]["text"], "typed");

    // From a script: gemctl confirm ID deny --reason.
    let second = call("scripted");
    let asked = line_with(&mut err, "confirm ask-").await?;
    let id = asked.split_whitespace().nth(1).unwrap_or_default().to_owned();
    // `gemctl confirm` alone lists what waits (new-user audit C5).
    let (code, out, e) = home.gemctl_run(&["confirm"])?;
    assert_eq!(code, 0, "{out}{e}");
    assert!(
        out.contains(&id) && out.contains("confirmation") && out.contains("mcp_fx_echo"),
        "{out}"
    );
    let listed = home.gemctl_json(&["confirm"])?;
    assert_eq!(listed[0]["id"], id.as_str(), "{listed:#}");
    let (code, out, e) = home.gemctl_run(&["confirm", &id, "deny", "--reason", "not now"])?;
    assert_eq!(code, 0, "{out}{e}");
    assert!(out.contains(&format!("answered {id} (deny) for session {session}")), "{out}");
    let (code, message) = failure(second.await?);
    assert_eq!(code, ErrorCode::PolicyDenied.code());
    assert!(message.contains("declined: not now"), "{message}");
    line_with(&mut err, &format!("{id}: settled (answered)")).await?;
    let (code, _, e) = home.gemctl_run(&["confirm", &id, "once"])?;
    assert_ne!(code, 0);
    assert!(e.contains("already answered"), "{e}");
    let (code, _, e) = home.gemctl_run(&["confirm", &id, "maybe"])?;
    assert_ne!(code, 0);
    assert!(e.contains("not an answer"), "{e}");
    let (code, out, _) = home.gemctl_run(&["confirm"])?;
    assert_eq!(code, 0);
    assert!(out.contains("Nothing is waiting for an answer"), "{out}");
    let (code, _, e) = home.gemctl_run(&["confirm", "ask-999999", "y"])?;
    assert_ne!(code, 0);
    assert!(e.contains("`gemctl confirm` lists"), "{e}");

    // The end of stdin: this attach stops answering, and the session is headless again.
    drop(stdin);
    line_with(&mut err, "no longer answers confirmations").await?;
    let (code, message) = failure(call("late").await?);
    assert_eq!(code, ErrorCode::PolicyDenied.code());
    assert!(message.contains("asks/listen"), "{message}");
    attach.kill()?;
    attach.wait()?;

    // gemctl audit: newest first, the confirmations as they went.
    let audit = home.gemctl_json(&["audit", "-n", "3"])?;
    let how: Vec<_> = audit["records"]
        .as_array()
        .map(|r| r.iter().map(|r| r["confirmation"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(
        how,
        [json!("noAnswerer"), json!({"answered": "deny"}), json!({"answered": "once"})]
    );
    let (code, out, _) = home.gemctl_run(&["audit"])?;
    assert_eq!(code, 0);
    assert!(out.contains("answered once") && out.contains("nobody to ask"), "{out}");

    // gemctl session derive and update.
    let child =
        home.gemctl_json(&["session", "derive", &session, "helper", "--tools", "mcp_fx_echo"])?;
    assert_eq!(child["state"]["derived"]["path"], json!(format!("{session}/helper")));
    // A tool the parent does not have would leave the subagent without it: refused, with the
    // one likely meant (audit C6); a front-end's own name and a wildcard are taken as given.
    let (code, _, err) =
        home.gemctl_run(&["session", "derive", &session, "typo", "--tools", "mcp_fx_ecoh"])?;
    assert_ne!(code, 0);
    assert!(
        err.contains("the parent session has no tool 'mcp_fx_ecoh' (did you mean 'mcp_fx_echo'?)"),
        "{err}"
    );
    for tools in ["read_file,mcp_fx_echo", "mcp_fx_*"] {
        let (code, _, err) =
            home.gemctl_run(&["session", "derive", &session, "ok", "--tools", tools])?;
        assert_eq!(code, 0, "{tools}: {err}");
    }
    let updated = home.gemctl_json(&["session", "update", "--mode", "yolo", "--headless"])?;
    assert_eq!(
        (updated["state"]["approvalMode"].as_str(), updated["state"]["interactive"].as_bool()),
        (Some("yolo"), Some(false))
    );
    Ok(())
}
