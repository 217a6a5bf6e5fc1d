//! The faults a hostile probe found in the world users have (issue 37), each run as the probe
//! ran it: a real daemon with the default secrets store and no allow-all policy, and a fixture
//! server that writes down every call that reaches it (`FIXTURE_CALL_LOG`): what a rule or a
//! hook denies must never appear there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use geminid_protocol::api::{AuditApiClient, McpApiClient, SessionApiClient, ToolsApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::mcp::CallToolParams;
use geminid_protocol::policy::{AuditListParams, PolicyDecision};
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::tools::ToolsCallParams;
use geminid_tests::mcp::{FAST, fixture, shell_env};
use geminid_tests::{Daemon, TestHome};
use jsonrpsee::core::client::Error as ClientError;
use serde_json::{Value, json};

/// A user's policy: every tool allowed, and server `a`'s `echo` denied above that (the probe's).
const POLICY: &str = "[[rule]]\ntoolName = \"*\"\ndecision = \"allow\"\npriority = 10\n\n\
                      [[rule]]\nmcpName = \"a\"\ntoolName = \"echo\"\ndecision = \"deny\"\n\
                      priority = 500\n";

/// The error's code and message.
fn failure(r: Result<impl std::fmt::Debug, ClientError>) -> (i32, String) {
    match r {
        Err(ClientError::Call(e)) => (e.code(), e.message().to_owned()),
        other => (0, format!("not a call error: {other:?}")),
    }
}

/// What reached the server.
fn executed(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_owned).collect()
}

struct Probe {
    home: TestHome,
    daemon: Daemon,
    client: Client,
    session: String,
    log: PathBuf,
}

/// A daemon whose user settings run the fixture (lenient about tool names, as the probe's
/// server was) as server `a`, with `settings` merged in and the probe's policy.
async fn probe(settings: Value) -> anyhow::Result<Probe> {
    let home = TestHome::new()?;
    let log = home.root().join("calls.log");
    let mut all = json!({"mcpServers": {"a": {
        "command": fixture(),
        "args": ["--lenient"],
        "env": {"FIXTURE_CALL_LOG": log.display().to_string()}
    }}});
    if let (Some(all), Some(more)) = (all.as_object_mut(), settings.as_object()) {
        all.extend(more.clone());
    }
    std::fs::write(home.root().join("home/.gemini/settings.json"), all.to_string())?;
    let policies = home.root().join("home/.gemini/policies");
    std::fs::create_dir_all(&policies)?;
    std::fs::write(policies.join("p.toml"), POLICY)?;
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
    Ok(Probe { home, daemon, client, session: s.id, log })
}

impl Probe {
    async fn call_tool(&self, server: &str, tool: &str) -> (i32, String) {
        let p = CallToolParams {
            session: self.session.clone(),
            server: server.to_owned(),
            tool: tool.to_owned(),
            arguments: json!({"text": "hi"}).as_object().cloned(),
            confirmed: false,
        };
        match self.client.mcp_call_tool(p).await {
            Ok(v) => (0, v.to_string()),
            r => failure(r),
        }
    }
}

/// `mcp/callTool` and `tools/call` with names that are almost right: none reaches the server,
/// each is refused as unknown before policy, hooks and the audit see it, and the exact names
/// are decided by the deny rule and the blocking hook.
#[tokio::test]
async fn a_name_that_is_almost_right_reaches_no_server_and_no_tool() -> anyhow::Result<()> {
    let hook = json!({"hooks": {"BeforeTool": [{"matcher": "mcp_a_env", "hooks": [{
        "type": "command", "name": "blk",
        "command": "echo '{\"decision\": \"block\", \"reason\": \"hook says no\"}'"
    }]}]}});
    let p = probe(hook).await?;
    // Start the server and let it list its tools (an allowed call).
    let (code, out) = p.call_tool("a", "pid").await;
    assert_eq!(code, 0, "{out}");
    let not_found = ErrorCode::ServerNotFound.code();
    for server in ["A", " a", "a ", "a\u{200b}", "\u{0430}"] {
        for tool in ["echo", "env"] {
            let (code, msg) = p.call_tool(server, tool).await;
            assert_eq!(code, not_found, "server {server:?} tool {tool}: {msg}");
        }
    }
    let (code, msg) = p.call_tool("A", "echo").await;
    assert!(msg.contains("did you mean 'a'"), "{code} {msg}");
    for tool in ["ECHO", " echo", "echo ", "Env"] {
        let (code, msg) = p.call_tool("a", tool).await;
        assert_eq!(code, ErrorCode::ToolNotFound.code(), "tool {tool:?}: {msg}");
    }
    for name in ["mcp_A_echo", "mcp_a_ECHO", "mcp_a_echo ", "MCP_a_echo"] {
        let r = p
            .client
            .tools_call(ToolsCallParams {
                session: p.session.clone(),
                name: name.to_owned(),
                args: json!({"text": "hi"}).as_object().cloned(),
                call_id: None,
                confirmed: false,
            })
            .await;
        let (code, msg) = failure(r);
        assert_eq!(code, ErrorCode::ToolNotFound.code(), "{name:?}: {msg}");
    }
    // The exact names: the rule and the hook decide.
    let (code, msg) = p.call_tool("a", "echo").await;
    assert_eq!(code, ErrorCode::PolicyDenied.code(), "{msg}");
    let (code, msg) = p.call_tool("a", "env").await;
    assert_eq!(code, ErrorCode::HookBlocked.code(), "{msg}");
    assert_eq!(executed(&p.log), ["pid"], "only the allowed call reached the server");
    // Nothing was audited as allowed but that call.
    let audit = p
        .client
        .audit_list(Some(AuditListParams {
            session: Some(p.session.clone()),
            ..Default::default()
        }))
        .await?;
    let ran: Vec<(&str, &str)> = audit
        .records
        .iter()
        .filter(|r| r.ok && r.decision == Some(PolicyDecision::Allow))
        .map(|r| (r.server.as_str(), r.tool.as_str()))
        .collect();
    assert_eq!(ran, [("a", "mcp_a_pid")], "{:#?}", audit.records);
    let refused: Vec<(&str, Option<_>)> =
        audit.records.iter().filter(|r| !r.ok).map(|r| (r.tool.as_str(), r.decision)).collect();
    assert_eq!(
        refused,
        [("mcp_a_env", None), ("mcp_a_echo", Some(PolicyDecision::Deny))],
        "near misses are not audited as calls: {:#?}",
        audit.records
    );
    drop(p.daemon);
    drop(p.home);
    Ok(())
}

/// A policy file saved in place (truncated, then written) while four clients call the tool it
/// denies: the call never runs.
#[tokio::test]
async fn a_policy_file_saved_in_place_never_loses_its_deny_rules() -> anyhow::Result<()> {
    let p = probe(json!({})).await?;
    let (code, out) = p.call_tool("a", "pid").await;
    assert_eq!(code, 0, "{out}");
    let file = p.home.root().join("home/.gemini/policies/p.toml");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let made = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let mut callers = Vec::new();
    for _ in 0..4 {
        let client = p.daemon.client().await?;
        let (session, stop, made) = (p.session.clone(), stop.clone(), made.clone());
        callers.push(tokio::spawn(async move {
            let mut calls = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let params = CallToolParams {
                    session: session.clone(),
                    server: "a".into(),
                    tool: "echo".into(),
                    arguments: json!({"text": "hi"}).as_object().cloned(),
                    confirmed: false,
                };
                let _ = client.mcp_call_tool(params).await;
                calls += 1;
                made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            calls
        }));
    }
    // An editor's save in place: truncate, then the same rules written back; every tenth
    // written only once the daemon has read the emptied file (and waits for it to settle);
    // every seventh left broken until the daemon has read that.
    let log = p.daemon.log_path();
    let saver = tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        use geminid_tests::{RELOADED, STILL_CHANGING, lines_with, more_lines_with};
        use std::io::Write;
        // The daemon has read the file: found it still changing, or reloaded with it.
        let read = [STILL_CHANGING, RELOADED];
        for i in 0..100 {
            let seen = lines_with(&log, &read);
            let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(&file)?;
            if i % 10 == 0 {
                more_lines_with(&log, &read, seen)?;
            }
            if i % 7 == 0 {
                let seen = lines_with(&log, &read);
                f.write_all(b"[[rule]\n")?;
                more_lines_with(&log, &read, seen)?;
                f.set_len(0)?;
                let mut f2 = std::fs::OpenOptions::new().write(true).open(&file)?;
                f2.write_all(POLICY.as_bytes())?;
            } else {
                f.write_all(POLICY.as_bytes())?;
            }
        }
        Ok(())
    });
    saver.await??;
    // The last save taken (a reload asked for reads it), with the callers still calling
    // through it and after it.
    let client = p.daemon.client().await?;
    let before = made.load(std::sync::atomic::Ordering::Relaxed);
    geminid_protocol::api::McpApiClient::mcp_reload(&client, None).await?;
    let more = || async { made.load(std::sync::atomic::Ordering::Relaxed) >= before + 20 };
    assert!(geminid_tests::eventually(Duration::from_secs(20), more).await, "the callers stalled");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut calls = 0;
    for c in callers {
        calls += c.await?;
    }
    assert!(calls > 40, "the callers made {calls} calls");
    let ran = executed(&p.log);
    assert_eq!(ran, ["pid"], "a denied call ran while the file was saved ({calls} calls)");
    drop(p.daemon);
    drop(p.home);
    Ok(())
}

/// A workspace folder whose name is a command, and a hook written as Claude Code hooks are
/// (`"$GEMINI_PROJECT_DIR"`): the hook gets the path, and the name never runs.
#[tokio::test]
async fn a_workspace_folder_name_never_reaches_bash_as_code() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    // The hook runs in the folder: a name that ran would leave PWNED there.
    let ws = home.root().join("proj-$(touch PWNED)-`touch PWNED`");
    std::fs::create_dir(&ws)?;
    let pwned = ws.join("PWNED");
    let seen = home.root().join("seen");
    let settings = json!({
        "mcpServers": {"a": {"command": fixture()}},
        "hooks": {"BeforeTool": [{"matcher": ".*", "hooks": [{"type": "command", "name": "check",
            "command": format!("test -d \"$GEMINI_PROJECT_DIR\" && printf %s \"$GEMINI_PROJECT_DIR\" > {} && cd $GEMINI_PROJECT_DIR; echo '{{\"decision\": \"allow\"}}'", seen.display())
        }]}]}
    });
    std::fs::write(home.root().join("home/.gemini/settings.json"), settings.to_string())?;
    let trusted = json!({ ws.display().to_string(): "TRUST_FOLDER" });
    std::fs::write(home.root().join("home/.gemini/trustedFolders.json"), trusted.to_string())?;
    let _daemon = Daemon::start(&home, FAST).await?;
    // The person calls (as `gemctl call` does): no allow-all policy needed.
    let mut cmd = home.gemctl_cmd(&["call", "mcp_a_echo", r#"{"text": "x"}"#]);
    let out = cmd.current_dir(&ws).output()?;
    let said =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert!(!pwned.exists(), "the folder's name ran as a command");
    assert!(seen.exists(), "the hook did not run: {said}");
    assert_eq!(std::fs::read_to_string(&seen)?, ws.display().to_string());
    Ok(())
}

/// `{{args}}` inside quotes the command's author wrote: what the person typed is text to the
/// command, in each quoting; a here-document is refused with the line.
#[tokio::test]
async fn typed_arguments_never_run_whatever_quotes_surround_them() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let commands = home.root().join("home/.gemini/commands");
    std::fs::create_dir_all(&commands)?;
    let write = |name: &str, prompt: &str| {
        std::fs::write(commands.join(format!("{name}.toml")), format!("prompt = '''{prompt}'''\n"))
    };
    write("dq", "Matches: !{printf '%s' \"{{args}}\"}")?;
    write("sq", "Matches: !{printf '%s' '{{args}}'}")?;
    write("bare", "Matches: !{printf '%s' {{args}}}")?;
    write("heredoc", "Look:\n!{cat <<EOF\n{{args}}\nEOF}")?;
    let trusted = json!({ home.workspace().display().to_string(): "TRUST_FOLDER" });
    std::fs::write(home.root().join("home/.gemini/trustedFolders.json"), trusted.to_string())?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let pwned = home.root().join("PWNED");
    let p = pwned.display();
    for payload in [
        format!("x$(touch {p})"),
        format!("x`touch {p}`"),
        format!("x\"; touch {p}; \""),
        format!("x'; touch {p}; '"),
        format!("x\" && touch {p} && \""),
        format!("x\"\ntouch {p}\n\""),
    ] {
        for name in ["dq", "sq", "bare"] {
            // gemctl expands as the person, who confirms the shell command.
            let out = home.gemctl(&["--json", "commands", "expand", "--yes", name, &payload])?;
            assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
            let v: Value = serde_json::from_slice(&out.stdout)?;
            // `{{args}}` is the words typed, one space between them, as Gemini CLI gives it.
            let words = payload.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(v["text"], format!("Matches: {words}"), "{name} {payload:?}");
            assert!(!pwned.exists(), "/{name} {payload:?} ran");
        }
    }
    let (code, _, err) = home.gemctl_run(&["commands", "expand", "heredoc", "x"])?;
    assert_ne!(code, 0);
    assert!(err.contains("line 2") && err.contains("here-document"), "{err}");
    Ok(())
}

/// One server flooding its client (200,000 log messages in one call; a 15 MB answer, under the
/// 16 MiB limit)
/// while another session calls a quiet server: the quiet calls keep being answered.
#[tokio::test]
async fn a_flooding_server_does_not_stall_the_others() -> anyhow::Result<()> {
    use geminid_tests::mcp::{Setup, stdio};
    // Headless calls to two servers: the test allows every MCP tool.
    let s = Setup::new(json!({ "loud": stdio(&["--flood"]), "quiet": stdio(&[]) })).await?;
    let session = s.session.clone();
    let call = move |client: std::sync::Arc<Client>,
                     server: &'static str,
                     tool: &'static str,
                     args: Value| {
        let session = session.clone();
        async move {
            let p = CallToolParams {
                session,
                server: server.into(),
                tool: tool.into(),
                arguments: args.as_object().cloned(),
                confirmed: false,
            };
            client.mcp_call_tool(p).await
        }
    };
    let quiet = std::sync::Arc::new(s.daemon.client().await?);
    let loud = std::sync::Arc::new(s.daemon.client().await?);
    call(quiet.clone(), "quiet", "echo", json!({"text": "warm"})).await?;
    call(loud.clone(), "loud", "flood", json!({"count": 0})).await?;
    for args in [json!({"count": 200_000}), json!({"count": 0, "bytes": 15_000_000})] {
        let flooding = std::time::Instant::now();
        let flood = tokio::spawn(call(loud.clone(), "loud", "flood", args.clone()));
        // Quiet calls answered while the flood goes on, each to its end: a quiet call stalled
        // behind the flood would end with it, the only one.
        let mut during = Vec::new();
        while !flood.is_finished() {
            let started = std::time::Instant::now();
            call(quiet.clone(), "quiet", "echo", json!({"text": "still here"})).await?;
            if !flood.is_finished() {
                during.push(started.elapsed());
            }
        }
        flood.await??;
        let flooded = flooding.elapsed();
        during.sort();
        let worst = during.last().copied().unwrap_or_default();
        eprintln!(
            "{args}: the flood took {flooded:?}; {} quiet calls answered during it, median {:?}, \
             worst {worst:?}",
            during.len(),
            during.get(during.len() / 2)
        );
        // Not a time limit, which a busy machine breaks: the flood lasts long enough for
        // several quiet calls (hundreds on a quiet machine), and none waits for a good part of it.
        assert!(during.len() >= 3, "{args}: {} quiet calls in {flooded:?}", during.len());
        assert!(worst < flooded / 2, "{args}: a quiet call waited {worst:?} of {flooded:?}");
    }
    Ok(())
}
