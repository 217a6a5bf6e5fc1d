//! Hooks as real processes: scripts in bash and Python, each exit-code rule, timeouts with a
//! child that ignores SIGTERM, huge output, a hook that never reads its stdin, a command that
//! does not exist, and the untrusted folder.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use geminid::testing::hooks::{
    Context, Format, HookCommand, HookEvent, HookSource, MAX_OUTPUT, run,
};
use geminid_tests::TestHome;
use serde_json::{Value, json};

fn hook(command: &str) -> HookCommand {
    HookCommand {
        name: None,
        command: command.to_owned(),
        description: None,
        timeout_ms: 10_000,
        env: BTreeMap::new(),
        source: HookSource::Project,
    }
}

fn env() -> BTreeMap<String, String> {
    std::env::vars().filter(|(k, _)| k == "PATH" || k == "HOME").collect()
}

fn ctx<'a>(home: &'a TestHome, env: &'a BTreeMap<String, String>) -> Context<'a> {
    Context {
        cwd: home.root(),
        session_id: "s-1",
        plans_dir: Path::new("/tmp/plans"),
        env,
        trusted: true,
    }
}

fn input() -> Value {
    json!({"session_id": "s-1", "hook_event_name": "BeforeTool", "tool_name": "mcp_fx_echo", "tool_input": {"text": "hi"}})
}

fn script(home: &TestHome, name: &str, body: &str) -> String {
    let path = home.root().join(name);
    std::fs::write(&path, body).unwrap_or_default();
    path.display().to_string()
}

#[tokio::test]
async fn every_exit_code_rule_with_real_scripts() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let env = env();
    let c = ctx(&home, &env);
    let cases: Vec<(String, Option<Value>, Option<i32>, bool)> = vec![
        (
            "echo hello".into(),
            Some(json!({"decision": "allow", "systemMessage": "hello"})),
            Some(0),
            true,
        ),
        (
            "echo careful >&2; exit 1".into(),
            Some(json!({"decision": "allow", "systemMessage": "Warning: careful"})),
            Some(1),
            false,
        ),
        (
            "echo nope; exit 2".into(),
            Some(json!({"decision": "deny", "reason": "nope"})),
            Some(2),
            false,
        ),
        (
            "echo nope; exit 3".into(),
            Some(json!({"decision": "deny", "reason": "nope"})),
            Some(3),
            false,
        ),
        ("exit 2".into(), None, Some(2), false),
        (
            "echo '{\"decision\": \"block\", \"reason\": \"r\"}'; exit 2".into(),
            Some(json!({"decision": "block", "reason": "r"})),
            Some(2),
            false,
        ),
        ("echo '{\"decision\": 7}'".into(), Some(json!({"decision": 7})), Some(0), true),
        (
            "echo '{not json'".into(),
            Some(json!({"decision": "allow", "systemMessage": "{not json"})),
            Some(0),
            true,
        ),
        (
            format!(
                "python3 {}",
                script(
                    &home,
                    "ask.py",
                    "import json, sys\nd = json.load(sys.stdin)\nprint(json.dumps(json.dumps({'decision': 'ask', 'systemMessage': d['tool_input']['text']})))\n"
                )
            ),
            Some(json!({"decision": "ask", "systemMessage": "hi"})),
            Some(0),
            true,
        ),
    ];
    for (command, want, code, success) in cases {
        let ran = run(&hook(&command), HookEvent::BeforeTool, &input(), &c).await;
        assert_eq!(ran.output.map(Value::Object), want, "{command}: {:?}", ran.stderr);
        assert_eq!((ran.exit_code, ran.success), (code, success), "{command}");
    }
    // The format is said.
    let ran = run(&hook("echo '{}'"), HookEvent::BeforeTool, &input(), &c).await;
    assert_eq!(ran.format, Some(Format::Json));
    Ok(())
}

#[tokio::test]
async fn stdin_environment_and_substitutions_reach_the_hook() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let env = env();
    let c = ctx(&home, &env);
    // The references in the command text become shell-quoted values (so they belong outside
    // double quotes, as in Gemini CLI); the variables hold the plain values.
    let mut h = hook(
        "printf '%s|%s|%s|%s|%s|' $GEMINI_SESSION_ID \"$MINE\" $GEMINI_CWD \"$PWD\" \"$(printenv GEMINI_SESSION_ID)\"; cat",
    );
    h.env.insert("MINE".into(), "from-env".into());
    let ran = run(&h, HookEvent::BeforeTool, &input(), &c).await;
    let root = home.root().display().to_string();
    let (head, body) = ran.stdout.rsplit_once('|').unwrap_or_default();
    assert_eq!(head, format!("s-1|from-env|{root}|{root}|s-1"));
    assert_eq!(serde_json::from_str::<Value>(body)?, input());
    Ok(())
}

#[tokio::test]
async fn a_hook_past_its_timeout_is_stopped_with_everything_it_started() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let env = env();
    let c = ctx(&home, &env);
    let marker = home.root().join("stubborn.pid");
    let mut h = hook(&format!(
        "bash -c 'trap \"\" TERM; echo $$ > {}; sleep 60' & sleep 60",
        marker.display()
    ));
    h.timeout_ms = 300;
    let started = Instant::now();
    let ran = run(&h, HookEvent::BeforeTool, &input(), &c).await;
    assert_eq!(ran.error.as_deref(), Some("Hook timed out after 300ms"));
    assert!(!ran.success && ran.output.is_none());
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    let pid: i32 = std::fs::read_to_string(&marker)?.trim().parse()?;
    let gone = geminid_tests::eventually(Duration::from_secs(2), || async {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err()
    })
    .await;
    assert!(gone, "the child that ignored SIGTERM was killed");
    Ok(())
}

#[tokio::test]
async fn huge_output_unread_stdin_and_a_missing_command() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let env = env();
    let c = ctx(&home, &env);
    // 50 MB on stdout: kept to the bound, said, and the hook is not held up.
    let ran =
        run(&hook("head -c 50000000 /dev/zero | tr '\\0' x"), HookEvent::BeforeTool, &input(), &c)
            .await;
    assert_eq!(ran.stdout.len(), MAX_OUTPUT);
    assert_eq!(ran.note.as_deref(), Some("stdout was cut at 1 MiB"));
    assert!(ran.error.is_none());
    assert_eq!(ran.exit_code, Some(0));
    // A hook that never reads a large stdin.
    let big = json!({"tool_input": {"text": "y".repeat(4 << 20)}});
    let ran = run(&hook("echo fine"), HookEvent::BeforeTool, &big, &c).await;
    assert_eq!(
        ran.output.map(Value::Object),
        Some(json!({"decision": "allow", "systemMessage": "fine"}))
    );
    // bash reports it and exits 127: plain text with an exit ≥ 2 denies, as Gemini CLI does.
    let ran = run(&hook("no-such-command-here"), HookEvent::BeforeTool, &input(), &c).await;
    assert_eq!(ran.exit_code, Some(127));
    let out = ran.output.unwrap_or_default();
    assert_eq!(out["decision"], "deny");
    assert!(out["reason"].as_str().unwrap_or_default().contains("command not found"), "{out:?}");
    Ok(())
}

#[tokio::test]
async fn a_settings_hook_does_not_run_in_an_untrusted_folder() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let env = env();
    let c = Context { trusted: false, ..ctx(&home, &env) };
    let marker = home.root().join("ran");
    let ran =
        run(&hook(&format!("touch {}", marker.display())), HookEvent::BeforeTool, &input(), &c)
            .await;
    assert!(
        ran.error.as_deref().is_some_and(|e| e.contains("untrusted folder")),
        "{:?}",
        ran.error
    );
    assert!(!marker.exists());
    let mut ext = hook(&format!("touch {}", marker.display()));
    ext.source = HookSource::Extensions;
    let ran = run(&ext, HookEvent::BeforeTool, &input(), &c).await;
    assert!(ran.success && marker.exists(), "an extension's hook is not gated by folder trust");
    Ok(())
}

#[tokio::test]
async fn a_sequential_plan_passes_changes_on_and_the_outputs_are_aggregated() -> anyhow::Result<()>
{
    use geminid::testing::hooks::{Registry, fire, plan};
    let home = TestHome::new()?;
    let env = env();
    let c = ctx(&home, &env);
    let rewrite = r#"echo '{"hookSpecificOutput": {"tool_input": {"text": "rewritten"}}, "systemMessage": "one"}'"#;
    let show = script(
        &home,
        "show.py",
        "import json, sys\nd = json.load(sys.stdin)\nprint(json.dumps({'decision': 'block', 'reason': d['tool_input']['text']}))\n",
    );
    let settings = json!({"hooks": {"BeforeTool": [
        {"sequential": true, "hooks": [{"type": "command", "command": rewrite}]},
        {"hooks": [{"type": "command", "command": format!("python3 {show}")}]},
    ]}});
    let reg = Registry::new(&settings, true, &[]);
    let p = plan(&reg, HookEvent::BeforeTool, Some("mcp_fx_echo"))
        .ok_or_else(|| anyhow::anyhow!("no plan"))?;
    let fired = fire(&p, HookEvent::BeforeTool, input(), &c).await;
    assert!(fired.success);
    let m = fired.merged.unwrap_or_default();
    assert_eq!(m["reason"], "rewritten", "the second hook saw the first one's tool_input");
    assert_eq!((m["decision"].as_str(), m["systemMessage"].as_str()), (Some("block"), Some("one")));

    // In parallel, the second hook sees the original input.
    let settings = json!({"hooks": {"BeforeTool": [
        {"hooks": [{"type": "command", "command": rewrite}, {"type": "command", "command": format!("python3 {show}")}]},
    ]}});
    let reg = Registry::new(&settings, true, &[]);
    let p =
        plan(&reg, HookEvent::BeforeTool, Some("x")).ok_or_else(|| anyhow::anyhow!("no plan"))?;
    let fired = fire(&p, HookEvent::BeforeTool, input(), &c).await;
    assert_eq!(fired.merged.unwrap_or_default()["reason"], "hi");
    Ok(())
}

mod in_calls {
    //! BeforeTool and AfterTool inside `tools/call` and `mcp/callTool`, and `hooks/fire`, over a
    //! real core whose settings hold the hooks (a user policy allows the fixture's tools).

    use std::time::Duration;

    use geminid_tests::inproc::InProcess;
    use geminid_tests::mcp::stdio;
    use serde_json::{Value, json};

    async fn with_hooks(hooks: Value) -> anyhow::Result<InProcess> {
        let p = InProcess::daemon(json!({}), Duration::from_secs(5)).await?;
        let home = p.home.root().join("home/.gemini");
        std::fs::create_dir_all(home.join("policies"))?;
        std::fs::write(home.join("policies/allow.toml"), geminid_tests::ALLOW_MCP)?;
        let settings = json!({ "mcpServers": { "fx": stdio(&[]) }, "hooks": hooks });
        std::fs::write(home.join("settings.json"), serde_json::to_string(&settings)?)?;
        let _: Value =
            p.call("mcp/reload", json!({})).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        Ok(p)
    }

    fn def(matcher: &str, command: &str) -> Value {
        json!({ "matcher": matcher, "hooks": [{ "type": "command", "command": command }] })
    }

    async fn echo(p: &InProcess, text: &str) -> Result<Value, (i32, String)> {
        p.call(
            "tools/call",
            json!({ "session": p.session, "name": "mcp_fx_echo", "args": { "text": text } }),
        )
        .await
    }

    #[tokio::test]
    async fn before_tool_blocks_stops_rewrites_and_is_matched_by_tool_name() -> anyhow::Result<()> {
        let p = with_hooks(json!({ "BeforeTool": [
            def("echo", r#"python3 -c 'import json,sys; d=json.load(sys.stdin); t=d["tool_input"]["text"]; print(json.dumps({"decision":"block","reason":"no "+t}) if t=="bad" else json.dumps({"continue": False, "stopReason": "halt"}) if t=="stop" else json.dumps({"hookSpecificOutput":{"tool_input":{"text": t.upper()}}}) if t=="loud" else "")'"#),
            def("^mcp_fx_pid$", "echo pid-hook >&2; exit 2"),
        ], "AfterTool": [def("echo", "cat > \"$GEMINI_CWD/after.json\"")] })).await?;
        let (code, message) = echo(&p, "bad").await.unwrap_err();
        assert_eq!(
            (code, message.as_str()),
            (
                geminid_protocol::error::ErrorCode::HookBlocked.code(),
                "Tool execution blocked: no bad"
            )
        );
        let (_, message) = echo(&p, "stop").await.unwrap_err();
        assert_eq!(message, "halt");
        let out = echo(&p, "loud").await.unwrap();
        assert_eq!(out["result"]["content"][0]["text"], "LOUD");
        let note = out["parts"].as_array().and_then(|a| a.last()).cloned().unwrap_or_default();
        let said = "[System] Tool input parameters were modified by a hook before execution.";
        // After a blank line, as Gemini CLI appends it, and in the functionResponse too.
        assert_eq!(note["text"], format!("\n\n{said}"));
        let output = &out["functionResponse"]["functionResponse"]["response"]["output"];
        assert!(output.as_str().is_some_and(|o| o.ends_with(&format!("\n\n\n{said}"))), "{out}");
        // Added after the AfterTool hooks ran (0.61's scheduler): they read the result alone.
        let after = std::fs::read_to_string(p.home.workspace().join("after.json"))?;
        let after: Value = serde_json::from_str(&after)?;
        let read = after["tool_response"]["llmContent"].to_string();
        assert!(read.contains("LOUD") && !read.contains("[System]"), "{after}");
        assert_eq!(echo(&p, "fine").await.unwrap()["result"]["content"][0]["text"], "fine");
        // Plain text on exit 2 denies, for the tool its matcher names only; mcp/callTool too.
        let (_, message) = p
            .call::<Value>(
                "mcp/callTool",
                json!({ "session": p.session, "server": "fx", "tool": "pid" }),
            )
            .await
            .unwrap_err();
        assert_eq!(message, "Tool execution blocked: pid-hook");
        p.shutdown().await;
        Ok(())
    }

    #[tokio::test]
    async fn a_confirmation_fires_the_notification_hooks() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let seen = dir.path().join("notification.json");
        let p = with_hooks(json!({
            "BeforeTool": [def("echo", r#"echo '{"decision": "ask"}'"#)],
            "Notification": [def("ignored: no context", &format!("cat > '{}'", seen.display()))],
        }))
        .await?;
        // Nobody listens, so the confirmation is denied; the hook ran while it was asked.
        let (_, message) = echo(&p, "hi").await.unwrap_err();
        assert!(message.contains("needs a confirmation"), "{message}");
        let got: Value = serde_json::from_str(&std::fs::read_to_string(&seen)?)?;
        assert_eq!(got["hook_event_name"], "Notification");
        assert_eq!(got["notification_type"], "ToolPermission");
        assert_eq!(got["message"], "Tool Confirm MCP Tool Execution requires MCP");
        assert_eq!(
            got["details"],
            json!({"type": "mcp", "title": "Confirm MCP Tool Execution", "serverName": "fx",
                   "toolName": "echo", "toolDisplayName": "mcp_fx_echo"})
        );
        assert_eq!(got["session_id"], json!(p.session));
        // A call that needs no confirmation fires none.
        std::fs::remove_file(&seen)?;
        let _ = p
            .call::<Value>(
                "mcp/callTool",
                json!({ "session": p.session, "server": "fx", "tool": "pid" }),
            )
            .await;
        assert!(!seen.exists());
        p.shutdown().await;
        Ok(())
    }

    #[tokio::test]
    async fn a_tail_call_replaces_the_result_once() -> anyhow::Result<()> {
        // echo's AfterTool asks for pid; pid's own AfterTool asks for echo again, which is not
        // followed (one tail per call). pid's BeforeTool sees which call it follows.
        let tail = |to: &str| {
            format!(
                r#"echo '{{"hookSpecificOutput": {{"tailToolCallRequest": {{"name": "{to}", "args": {{}}}}}}}}'"#
            )
        };
        let p = with_hooks(json!({
            "AfterTool": [def("^mcp_fx_echo$", &tail("mcp_fx_pid")), def("^mcp_fx_pid$", &tail("mcp_fx_echo"))],
            "BeforeTool": [def("^mcp_fx_pid$", r#"python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps({"systemMessage": d.get("original_request_name", "none")}))' > $GEMINI_CWD/seen.json; true"#)],
        })).await?;
        let out = echo(&p, "hi").await.unwrap();
        let text = out["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
        assert!(text.parse::<u32>().is_ok(), "pid's result replaced echo's: {out}");
        let seen = std::fs::read_to_string(p.home.workspace().join("seen.json"))?;
        assert!(seen.contains("mcp_fx_echo"), "{seen}");
        p.shutdown().await;
        Ok(())
    }

    #[tokio::test]
    async fn a_hook_of_an_mcp_tool_is_told_the_servers_connection_as_gemini_cli_tells_it()
    -> anyhow::Result<()> {
        let p = with_hooks(json!({
            "BeforeTool": [def("^mcp_fx_pid$", "cat > \"$GEMINI_CWD/before.json\"")],
            "AfterTool": [def("^mcp_fx_pid$", "cat > \"$GEMINI_CWD/after.json\"")],
        }))
        .await?;
        let out: Value = p
            .call("tools/call", json!({ "session": p.session, "name": "mcp_fx_pid", "args": {} }))
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        assert_eq!(out["result"]["isError"], json!(false), "{out}");
        let mut want = stdio(&[]);
        want["server_name"] = json!("fx");
        want["tool_name"] = json!("pid");
        for file in ["before.json", "after.json"] {
            let seen: Value =
                serde_json::from_str(&std::fs::read_to_string(p.home.workspace().join(file))?)?;
            assert_eq!(seen["mcp_context"], want, "{file}: {seen}");
        }
        p.shutdown().await;
        Ok(())
    }

    #[tokio::test]
    async fn after_tool_adds_context_or_blocks_and_hooks_fire_runs_the_other_events()
    -> anyhow::Result<()> {
        let p = with_hooks(json!({
            "AfterTool": [def("echo", r#"python3 -c 'import json,sys; d=json.load(sys.stdin); t=d["tool_input"]["text"]; print(json.dumps({"decision":"deny","reason":"hidden"}) if t=="secret" else json.dumps({"hookSpecificOutput":{"additionalContext":"saw <"+d["tool_response"]["llmContent"][0]["text"][:5]+">"+(" error="+repr(d["tool_response"]["error"]) if "error" in d["tool_response"] else "")}}))'"#)],
            "SessionStart": [def("startup", "echo started"), def("resume", "echo resumed")],
            "BeforeAgent": [
                {"sequential": true, "hooks": [{"type": "command", "command": "echo '{\"hookSpecificOutput\": {\"additionalContext\": \"first\"}}'"}]},
                {"hooks": [{"type": "command", "command": "python3 -c 'import json,sys; print(json.dumps({\"systemMessage\": json.load(sys.stdin)[\"prompt\"]}))'"}]},
            ],
            "PreToolUse": [def("", "echo claude")],
        })).await?;
        let out = echo(&p, "hello").await.unwrap();
        let last = out["parts"].as_array().and_then(|a| a.last()).cloned().unwrap_or_default();
        let context = "<hook_context>saw &lt;&lt;untr&gt;</hook_context>";
        assert_eq!(last["text"], format!("\n\n{context}"));
        let output = &out["functionResponse"]["functionResponse"]["response"]["output"];
        assert!(output.as_str().is_some_and(|o| o.ends_with(&format!("\n\n\n{context}"))), "{out}");
        let (_, message) = echo(&p, "secret").await.unwrap_err();
        // Gemini CLI sends the hook's reason as it is.
        assert_eq!(message, "hidden");

        let fire = |event: &str, input: Value| {
            p.call::<Value>(
                "hooks/fire",
                json!({ "session": p.session, "event": event, "input": input }),
            )
        };
        let started = fire("SessionStart", json!({"source": "startup"})).await.unwrap();
        assert_eq!(started["aggregated"]["systemMessage"], "started");
        assert_eq!(started["hooks"].as_array().map(Vec::len), Some(1));
        let agent = fire("BeforeAgent", json!({"prompt": "p"})).await.unwrap();
        assert_eq!(agent["aggregated"]["systemMessage"], "p\n\nfirst", "chained: {agent}");
        let none = fire("SessionEnd", json!({"reason": "exit"})).await.unwrap();
        assert_eq!(none, json!({"success": true, "hooks": []}));
        for (event, want) in [
            ("BeforeTool", "needs the call: input.tool_name"),
            ("PreToolUse", "is not a hook event"),
        ] {
            let (_, message) = fire(event, json!({})).await.unwrap_err();
            assert!(message.contains(want), "{message}");
        }
        let list: Value = p.call("hooks/list", json!({ "session": p.session })).await.unwrap();
        assert_eq!(list["hooks"].as_array().map(Vec::len), Some(5));
        let warnings = list["warnings"].to_string();
        assert!(warnings.contains("invalid hook event name \\\"PreToolUse\\\""), "{warnings}");
        p.shutdown().await;
        Ok(())
    }
}

#[tokio::test]
async fn gemctl_hooks_list_and_run() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let settings = json!({"mcpServers": {"notes": {"command": "/bin/true"}}, "hooks": {
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello from a hook", "name": "greet"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "exit 3"}]}],
        "PreToolUse": [{"hooks": [{"type": "command", "command": "true"}]}],
        "BeforeTool": [{"matcher": "mcp_notes_delete", "hooks": [{"type": "command", "name": "guard",
            "command": "cat > seen.json; echo '{\"decision\": \"deny\", \"reason\": \"no deleting\"}'"}]}],
    }});
    std::fs::write(home.root().join("home/.gemini/settings.json"), settings.to_string())?;
    let _daemon = geminid_tests::Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, out, err) = home.gemctl_run(&["hooks", "list"])?;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("SessionStart") && out.contains("greet") && out.contains("startup"),
        "{out}"
    );
    // The user's file is said as such, not by Gemini CLI's `project` tag (audit C15).
    let header: Vec<&str> = out.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["EVENT", "HOOK", "MATCHER", "SCOPE", "ENABLED", "TIMEOUT"], "{out}");
    let greet = out.lines().find(|l| l.contains("greet")).unwrap_or_default();
    assert!(greet.contains(" user ") && !greet.contains("project"), "{out}");
    assert!(err.contains("invalid hook event name \"PreToolUse\""), "{err}");
    let (code, out, err) =
        home.gemctl_run(&["hooks", "run", "SessionStart", "--input", r#"{"source": "startup"}"#])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("greet: exit 0") && out.contains("\"systemMessage\":\"hello from a hook\""),
        "{out}"
    );
    let fired =
        home.gemctl_json(&["hooks", "run", "SessionStart", "--input", r#"{"source": "resume"}"#])?;
    assert_eq!(fired["hooks"], json!([]));
    // A hook that exits 3 without output ran (exit codes are outcomes, not failures to run).
    let (code, out, _) = home.gemctl_run(&["hooks", "run", "Notification"])?;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("exit 3"), "{out}");
    // A tool's hooks as a dry run: they run on the call given, nothing is called (issue 63,
    // C14: BeforeTool was refused, and the hook one most wants to test could not be).
    let (code, _, err) = home.gemctl_run(&["hooks", "run", "BeforeTool"])?;
    assert_ne!(code, 0);
    assert!(err.contains("needs the call") && err.contains("--tool"), "{err}");
    let (code, out, err) = home.gemctl_run(&[
        "hooks",
        "run",
        "BeforeTool",
        "--tool",
        "mcp_notes_delete",
        "--args",
        r#"{"id": 1}"#,
    ])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("guard: exit 0") && out.contains("no deleting"), "{out}");
    assert!(out.contains("the tool was not called"), "{out}");
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(home.workspace().join("seen.json"))?)?;
    assert_eq!(
        (&seen["tool_name"], &seen["tool_input"]),
        (&json!("mcp_notes_delete"), &json!({"id": 1}))
    );
    assert_eq!(seen["hook_event_name"], "BeforeTool", "{seen}");
    let context = &seen["mcp_context"];
    assert_eq!(
        (&context["server_name"], &context["tool_name"]),
        (&json!("notes"), &json!("delete"))
    );
    assert_eq!(context["command"], "/bin/true", "{seen}");
    let (code, out, err) =
        home.gemctl_run(&["hooks", "run", "BeforeTool", "--tool", "mcp_time_now"])?;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("No hook matches."), "{out}");
    // A name the session has no tool of is said (a typo would read as a passing test), and
    // --tool belongs to the tool events only.
    assert!(err.contains("no tool named 'mcp_time_now'"), "{err}");
    let (code, _, err) = home.gemctl_run(&["hooks", "run", "SessionStart", "--tool", "x"])?;
    assert_ne!(code, 0);
    assert!(err.contains("for BeforeTool and AfterTool"), "{err}");
    let (code, _, err) = home.gemctl_run(&["hooks", "run", "SessionEnd", "--input", "[1]"])?;
    assert_ne!(code, 0);
    assert!(err.contains("JSON object"), "{err}");

    // Disable by name in the user file (kept as written), then it no longer runs; enable.
    let settings_file = home.root().join("home/.gemini/settings.json");
    let mut text = std::fs::read_to_string(&settings_file)?;
    text.insert_str(1, "\n  // mine\n");
    std::fs::write(&settings_file, &text)?;
    let (code, out, err) = home.gemctl_run(&["hooks", "disable", "greet"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Hook \"greet\" disabled in"), "{out}");
    let written = std::fs::read_to_string(&settings_file)?;
    assert!(written.contains("// mine") && written.contains("\"disabled\""), "{written}");
    let fired =
        home.gemctl_json(&["hooks", "run", "SessionStart", "--input", r#"{"source": "startup"}"#])?;
    assert_eq!(fired["hooks"], json!([]), "disabled");
    let listed = home.gemctl_json(&["hooks", "list"])?;
    assert!(
        listed["hooks"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["name"] == "greet" && h["enabled"] == false))
    );
    // Also disabled in the workspace's file: enabling in the user file says so.
    std::fs::create_dir_all(home.workspace().join(".gemini"))?;
    std::fs::write(
        home.workspace().join(".gemini/settings.json"),
        r#"{"hooksConfig": {"disabled": ["greet"]}}"#,
    )?;
    let (code, _, err) = home.gemctl_run(&["hooks", "enable", "greet"])?;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("still disables it"), "{err}");
    let (code, _, _) = home.gemctl_run(&["hooks", "enable", "greet", "--scope", "project"])?;
    assert_eq!(code, 0);
    let fired =
        home.gemctl_json(&["hooks", "run", "SessionStart", "--input", r#"{"source": "startup"}"#])?;
    assert_eq!(fired["hooks"].as_array().map(Vec::len), Some(1), "enabled again: {fired}");
    Ok(())
}

#[tokio::test]
async fn migrate_from_claude_code_and_project_hooks_are_announced_once() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let ws = home.workspace();
    let _daemon = geminid_tests::Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, _, err) = home.gemctl_run(&["hooks", "migrate", "--from-claude"])?;
    assert_ne!(code, 0);
    assert!(err.contains("no Claude Code settings in") && err.contains(".claude"), "{err}");
    let (code, _, err) = home.gemctl_run(&["hooks", "migrate"])?;
    assert_ne!(code, 0, "--from-claude is required");
    assert!(err.contains("--from-claude"), "{err}");

    std::fs::create_dir_all(ws.join(".claude"))?;
    std::fs::create_dir_all(ws.join(".gemini"))?;
    // Claude Code's files (with a comment, as Claude Code accepts), and the workspace's own
    // settings with a hook of its own and a comment: both stay.
    std::fs::write(
        ws.join(".claude/settings.json"),
        r#"{
  // mine
  "hooks": {
    "PreToolUse": [{"matcher": "Edit|Bash", "hooks": [{"type": "command", "command": "$CLAUDE_PROJECT_DIR/check.sh", "timeout": 30}]}],
    "PermissionRequest": [{"hooks": [{"type": "command", "command": "x"}]}]
  }
}"#,
    )?;
    std::fs::write(
        ws.join(".claude/settings.local.json"),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo done"}]}]}}"#,
    )?;
    let gemini = ws.join(".gemini/settings.json");
    let own = "{\n  // the project's own\n  \"hooks\": {\"BeforeTool\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"echo own\"}]}]}\n}\n";
    std::fs::write(&gemini, own)?;

    let dry = home.gemctl_json(&["hooks", "migrate", "--from-claude", "--dry-run"])?;
    assert_eq!(dry["written"], false);
    assert_eq!(std::fs::read_to_string(&gemini)?, own, "a dry run writes nothing");
    assert_eq!(dry["sources"].as_array().map(Vec::len), Some(2), "{dry}");
    assert_eq!(dry["changed"], json!(["BeforeTool", "AfterAgent"]));
    let (code, out, err) = home.gemctl_run(&["hooks", "migrate", "--from-claude", "--dry-run"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Would add to") && out.contains("run_shell_command"), "{out}");
    assert!(err.contains("PermissionRequest: Gemini CLI has no such event"), "{err}");

    let (code, out, err) = home.gemctl_run(&["hooks", "migrate", "--from-claude"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Added to"), "{out}");
    let text = std::fs::read_to_string(&gemini)?;
    assert!(text.contains("// the project's own") && text.contains("echo own"), "{text}");
    let written: Value = serde_json::from_str(
        &text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n"),
    )?;
    let before = &written["hooks"]["BeforeTool"];
    assert_eq!(before[1]["matcher"], "replace|run_shell_command", "{written}");
    assert_eq!(before[1]["hooks"][0]["command"], "$GEMINI_PROJECT_DIR/check.sh");
    assert_eq!(before[1]["hooks"][0]["timeout"], 30000, "seconds become milliseconds");
    assert_eq!(written["hooks"]["AfterAgent"][0]["hooks"][0]["command"], "echo done");
    let (code, out, _) = home.gemctl_run(&["hooks", "migrate", "--from-claude"])?;
    assert_eq!(code, 0);
    assert!(out.contains("Nothing to change"), "a second run adds nothing: {out}");

    // The daemon reloaded: the migrated hooks are listed. They are the workspace's own, new to
    // the user: the first answer says so, once, and records them.
    let listed = home.gemctl_json(&["hooks", "list"])?;
    assert_eq!(listed["hooks"].as_array().map(Vec::len), Some(3), "{listed}");
    let notice = listed["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("echo own") && notice.contains("$GEMINI_PROJECT_DIR/check.sh"),
        "{notice}"
    );
    let recorded = std::fs::read_to_string(home.root().join("home/.gemini/trusted_hooks.json"))?;
    assert!(recorded.contains(":echo done"), "{recorded}");
    let again = home.gemctl_json(&["hooks", "list"])?;
    assert_eq!(again.get("notice"), None, "said once: {again}");

    // A new hook is announced again, by the first answer (here hooks/fire), and only it.
    let grown = text.replace("echo own", "echo own2");
    std::fs::write(&gemini, &grown)?;
    let mut fired = Value::Null;
    let run = geminid_tests::poll(Duration::from_secs(10), || {
        let got = home.gemctl_json(&["hooks", "run", "AfterAgent"]);
        std::future::ready(match got {
            Ok(v) if v.get("notice").is_none() => {
                fired = v;
                None
            }
            got => Some(got),
        })
    });
    if let Some(got) = run.await {
        fired = got?;
    }
    let notice = fired["notice"].as_str().unwrap_or_default();
    assert!(notice.contains("echo own2") && !notice.contains("echo done"), "{fired}");

    // A problem names its file, line and column; a Claude file that does not parse is named
    // with its line, and nothing is written.
    std::fs::write(
        &gemini,
        "{\n  \"hooks\": {\n    \"BeforeTool\": [{\"hooks\": [{\"type\": \"Command\", \"command\": \"x\"}]}]\n  }\n}\n",
    )?;
    let warned = || async {
        home.gemctl_json(&["hooks", "list"])
            .is_ok_and(|l| l["warnings"].to_string().contains("Command"))
    };
    assert!(geminid_tests::eventually(Duration::from_secs(10), warned).await);
    let listed = home.gemctl_json(&["hooks", "list"])?;
    let w = listed["warnings"].to_string();
    let at =
        format!("{}:3:31: hooks.BeforeTool[0].hooks[0]: type \\\"Command\\\"", gemini.display());
    assert!(w.contains(&at), "{w}\nwanted {at}");
    std::fs::write(ws.join(".claude/settings.local.json"), "{\n  \"hooks\": {,\n}")?;
    let before = std::fs::read_to_string(&gemini)?;
    let (code, _, err) = home.gemctl_run(&["hooks", "migrate", "--from-claude"])?;
    assert_ne!(code, 0);
    assert!(
        err.contains("settings.local.json:2:") && err.contains("nothing was migrated"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&gemini)?, before);
    Ok(())
}

#[tokio::test]
async fn a_block_names_its_hook_to_the_person_not_the_model() -> anyhow::Result<()> {
    use geminid_tests::mcp::{stdio, write_user_settings};
    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;
    // The hooks beside the servers, in the user's own file.
    let path = home.root().join("home/.gemini/settings.json");
    let mut settings: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    settings["hooks"] = json!({ "BeforeTool": [{ "matcher": "echo", "hooks": [
        { "type": "command", "name": "guard", "command": "echo 'not today' >&2; exit 2" }
    ]}]});
    std::fs::write(&path, settings.to_string())?;
    let _daemon = geminid_tests::Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, _, err) = home.gemctl_run(&["call", "mcp_fx_echo", r#"{"text": "x"}"#])?;
    assert_ne!(code, 0);
    // The message is Gemini CLI's, as the model reads it; the note under it is for the person
    // (audit C19).
    assert!(err.contains("Tool execution blocked: not today\n"), "{err}");
    assert!(
        err.contains(
            "note: decided by the hook 'guard' (`gemctl hooks disable guard` turns it off)"
        ),
        "{err}"
    );
    let audit = home.gemctl_json(&["audit", "-n", "1"])?;
    let error = audit["records"][0]["error"].as_str().unwrap_or_default().to_owned();
    assert_eq!(error, "Tool execution blocked: not today (by hook 'guard')", "{audit}");
    Ok(())
}

/// A user settings file with a BeforeTool hook that blocks every `echo` (the audit's "never
/// touch prod entities"), and the server in geminid's own file (as `gemctl mcp import` leaves
/// it), so that the server is there whether or not the settings file parses.
fn guarded_home() -> anyhow::Result<(TestHome, std::path::PathBuf, String)> {
    use geminid_tests::mcp::stdio;
    let home = TestHome::allowing_mcp()?;
    let own = home.root().join("home/.gemini/geminid");
    std::fs::create_dir_all(&own)?;
    std::fs::write(
        own.join("servers.json"),
        json!({ "mcpServers": { "fx": stdio(&[]) } }).to_string(),
    )?;
    let good = serde_json::to_string_pretty(
        &json!({ "hooks": { "BeforeTool": [{ "matcher": "echo", "hooks": [
            { "type": "command", "name": "guard", "command": "echo 'never touch prod entities' >&2; exit 2" }
        ]}]}}),
    )?;
    let path = home.root().join("home/.gemini/settings.json");
    Ok((home, path, good))
}

/// `gemctl call mcp_fx_echo`: its exit code and stderr.
fn call_echo(home: &TestHome) -> anyhow::Result<(i32, String)> {
    let (code, out, err) = home.gemctl_run(&["call", "mcp_fx_echo", r#"{"text": "prod"}"#])?;
    Ok((code, format!("{out}{err}")))
}

const BLOCKED: &str = "Tool execution blocked: never touch prod entities";

/// Audit B4: a settings file that does not parse when the daemon starts, with no good version
/// known, fails closed: a call its hook would block is refused with the file, line, column and
/// the fix (`call` and `status` say it), and once it is fixed the hook blocks as before. A
/// trusted workspace's file that breaks with no good version refuses calls the same way.
#[tokio::test]
async fn a_settings_file_broken_at_the_first_start_refuses_calls_until_it_is_fixed()
-> anyhow::Result<()> {
    let (home, path, good) = guarded_home()?;
    // `"hooks" {`: a colon missing on line 2, as the audit broke its file.
    std::fs::write(&path, good.replacen("\"hooks\":", "\"hooks\"", 1))?;
    let _daemon = geminid_tests::Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    // The file from `~`: what the model reads names no absolute path (the user's name).
    let at = "~/.gemini/settings.json:2:11: invalid JSON";
    let root = home.root().display().to_string();

    let (code, said) = call_echo(&home)?;
    assert_ne!(code, 0, "the call went through without the user's hooks: {said}");
    assert!(said.contains("Tool execution refused: ") && said.contains(at), "{said}\nwanted {at}");
    assert!(!said.contains(&root), "{said}");
    assert!(said.contains("fix it and geminid reloads it"), "{said}");
    // The person's own views keep the whole path.
    let at = format!("{}:2:11: invalid JSON", path.display());
    let (_, status, _) = home.gemctl_run(&["status"])?;
    assert!(status.contains(&at) && status.contains("is refused until it is fixed"), "{status}");
    let (_, listed, err) = home.gemctl_run(&["hooks", "list"])?;
    // `hooks list` says the refusal as calls get it.
    assert!(format!("{listed}{err}").contains("~/.gemini/settings.json:2:11"), "{listed}{err}");
    let (_, doctor, _) = home.gemctl_run(&["doctor"])?;
    assert!(doctor.contains(&at) && doctor.contains("is refused until it is fixed"), "{doctor}");

    // Fixed: the reload clears it, and the hook blocks the call as it would have.
    std::fs::write(&path, &good)?;
    let blocked = || async { call_echo(&home).is_ok_and(|(_, said)| said.contains(BLOCKED)) };
    assert!(geminid_tests::eventually(Duration::from_secs(10), blocked).await);
    let (_, status, _) = home.gemctl_run(&["status"])?;
    assert!(!status.contains("settings.json"), "{status}");

    // A trusted workspace's file, broken with no good version ever read: refused too.
    let ws = home.workspace().join(".gemini/settings.json");
    std::fs::create_dir_all(home.workspace().join(".gemini"))?;
    std::fs::write(&ws, "{\n  \"tools\": {,\n}")?;
    // A file outside the home folder is named by its file name alone.
    let at = "Tool execution refused: settings.json:2:13: invalid JSON";
    let refused = || async {
        call_echo(&home)
            .is_ok_and(|(code, said)| code != 0 && said.contains(at) && !said.contains(&root))
    };
    assert!(
        geminid_tests::eventually(Duration::from_secs(10), refused).await,
        "{:?}",
        call_echo(&home)?
    );
    std::fs::write(&ws, "{}")?;
    let blocked = || async { call_echo(&home).is_ok_and(|(_, said)| said.contains(BLOCKED)) };
    assert!(geminid_tests::eventually(Duration::from_secs(10), blocked).await);
    Ok(())
}

/// Audit B4: the last good contents outlive the daemon. A file read good, then broken before
/// the next start, keeps its hook blocking (and the start says it uses the last good
/// contents, from when); a damaged copy in the store is no copy: said, calls refused, nothing
/// crashes.
#[tokio::test]
async fn the_last_good_settings_outlive_a_restart_and_a_damaged_copy_is_none() -> anyhow::Result<()>
{
    let (home, path, good) = guarded_home()?;
    std::fs::write(&path, &good)?;
    let restart = |daemon: Option<geminid_tests::Daemon>| async {
        if let Some(mut d) = daemon {
            d.signal(nix::sys::signal::Signal::SIGTERM)?;
            d.wait_exit(Duration::from_secs(15)).await?;
        }
        geminid_tests::Daemon::start(&home, &[]).await
    };
    let daemon = restart(None).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, said) = call_echo(&home)?;
    assert!(code != 0 && said.contains(BLOCKED), "{said}");

    std::fs::write(&path, good.replacen("\"hooks\":", "\"hooks\"", 1))?;
    let daemon = restart(Some(daemon)).await?;
    let (code, said) = call_echo(&home)?;
    assert!(code != 0 && said.contains(BLOCKED), "the last good hook blocks: {said}");
    let (_, status, _) = home.gemctl_run(&["status"])?;
    let at = format!("{}:2:11: invalid JSON", path.display());
    assert!(
        status.contains(&at)
            && status.contains("its last good contents, as geminid read them at 20"),
        "{status}"
    );
    let (code, check, _) = home.gemctl_run(&["config", "check"])?;
    assert_eq!(code, 1);
    assert!(check.contains("its last good contents, as geminid read them at"), "{check}");

    // The record in the store damaged while the daemon is down.
    let mut daemon = daemon;
    daemon.signal(nix::sys::signal::Signal::SIGTERM)?;
    daemon.wait_exit(Duration::from_secs(15)).await?;
    {
        let store = geminid::testing::Store::open(&home.data_dir())?;
        let keys = store.last_good_keys();
        let key = path.display().to_string();
        assert!(keys.contains(&key), "{keys:?}");
        store.put_last_good_record(&key, b"\xa5\xa5 not a record")?;
    }
    let _daemon = restart(None).await?;
    let (code, said) = call_echo(&home)?;
    let model_at = "Tool execution refused: ~/.gemini/settings.json:2:11: invalid JSON";
    assert!(code != 0 && said.contains(model_at), "{said}");
    assert!(
        said.contains("the copy of its last good contents geminid kept cannot be used"),
        "{said}"
    );
    let (code, _, _) = home.gemctl_run(&["status"])?;
    assert_eq!(code, 0);
    Ok(())
}

/// Issue 64, item 12: a BeforeTool hook whose call ends before it does (`calls/cancel`, or
/// its caller's connection gone) is stopped with everything it started, long before its own
/// timeout: the hook and the child it left sleeping were left running (the child for its whole
/// 300 s; the daemon killed only the hook's own process).
#[tokio::test]
async fn a_hook_whose_call_ends_first_is_stopped_with_everything_it_started() -> anyhow::Result<()>
{
    use geminid_protocol::api::{CallsApiClient, McpApiClient, ToolsApiClient};
    use geminid_protocol::calls::CallsCancelParams;
    use geminid_protocol::mcp::StartParams;
    use geminid_protocol::tools::ToolsCallParams;
    use geminid_tests::mcp::{new_session, stdio, write_user_settings};
    const WAIT: Duration = Duration::from_secs(15);
    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;
    let dir = home.root().join("pids");
    std::fs::create_dir_all(&dir)?;
    let d = dir.display();
    // Each call's text names its files; the child's file is whole once it is there.
    let hook = script(
        &home,
        "slow_hook.sh",
        &format!(
            "tag=$(sed -n 's/.*\"text\":\"\\([a-z]*\\)\".*/\\1/p')\n\
             echo $$ > {d}/$tag.hook\n\
             sleep 300 & echo $! > {d}/$tag.tmp; mv {d}/$tag.tmp {d}/$tag.child\n\
             wait\necho '{{\"decision\": \"allow\"}}'\n"
        ),
    );
    let path = home.root().join("home/.gemini/settings.json");
    let mut settings: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    settings["hooks"] = json!({ "BeforeTool": [{ "matcher": "echo", "hooks": [
        { "type": "command", "name": "slow", "command": format!("sh {hook}"), "timeout": 120_000 }
    ]}]});
    std::fs::write(&path, settings.to_string())?;
    let daemon = geminid_tests::Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
    let call = |tag: &str| ToolsCallParams {
        session: session.clone(),
        name: "mcp_fx_echo".into(),
        args: json!({ "text": tag }).as_object().cloned(),
        call_id: None,
        confirmed: true,
    };
    let pids = |tag: &str| -> anyhow::Result<[u32; 2]> {
        let read = |f: &str| std::fs::read_to_string(dir.join(format!("{tag}.{f}")));
        Ok([read("hook")?.trim().parse()?, read("child")?.trim().parse()?])
    };
    let all_gone = |pids: [u32; 2]| async move {
        geminid_tests::eventually(WAIT, || async {
            pids.iter().all(|p| geminid_tests::process_gone(*p))
        })
        .await
    };

    // Cancelled by number.
    let caller = daemon.client().await?;
    let p = call("cancelled");
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    let started =
        geminid_tests::eventually(WAIT, || async { dir.join("cancelled.child").exists() });
    anyhow::ensure!(started.await, "the hook never started its child");
    let [hook_pid, child_pid] = pids("cancelled")?;
    assert!(!geminid_tests::process_gone(child_pid), "the hook's child runs");
    let id = client.calls_list(None).await?.calls.first().map(|c| c.id).expect("the call");
    assert!(client.calls_cancel(CallsCancelParams { id }).await?.cancelled);
    let ended = tokio::time::timeout(WAIT, running).await??;
    assert!(ended.is_err(), "the cancelled call is answered as one: {ended:?}");
    assert!(
        all_gone([hook_pid, child_pid]).await,
        "hook {hook_pid} or its child {child_pid} ran on"
    );

    // The caller goes away.
    let caller = daemon.client().await?;
    let p = call("abandoned");
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    let started =
        geminid_tests::eventually(WAIT, || async { dir.join("abandoned.child").exists() });
    anyhow::ensure!(started.await, "the hook never started its child");
    let [hook_pid, child_pid] = pids("abandoned")?;
    // The task owns the caller's client: aborting it closes the connection.
    running.abort();
    let _ = running.await;
    let ended = geminid_tests::eventually(WAIT, || async {
        client.calls_list(None).await.is_ok_and(|l| l.calls.is_empty())
    });
    assert!(ended.await, "the abandoned call ended");
    assert!(
        all_gone([hook_pid, child_pid]).await,
        "hook {hook_pid} or its child {child_pid} ran on"
    );
    Ok(())
}

/// Issue 66, item 5: hooks that cannot be prepared fail closed, as the policy seat does. A
/// call whose session is closed while its tool runs finds the session's hooks unreadable when
/// its result comes back (the session's record is gone): its result is withheld with the hook
/// problem named, and the audit record says so. Before, the hook seat let it through.
#[tokio::test]
async fn a_call_whose_hooks_cannot_be_read_is_refused_and_audited_so() -> anyhow::Result<()> {
    use geminid_protocol::api::ToolsApiClient;
    use geminid_protocol::api::{AuditApiClient, CallsApiClient, McpApiClient, SessionApiClient};
    use geminid_protocol::mcp::StartParams;
    use geminid_protocol::policy::AuditListParams;
    use geminid_protocol::session::SessionIdParams;
    use geminid_protocol::tools::ToolsCallParams;
    use geminid_tests::mcp::{new_session, stdio, write_user_settings};
    const WAIT: Duration = Duration::from_secs(30);
    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, json!({ "fx": stdio(&["--rich"]) }))?;
    let daemon = geminid_tests::Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    // Two sessions share the server, so closing one leaves it running for the call.
    let keeper = new_session(&client, &home).await?;
    let session = new_session(&client, &home).await?;
    for s in [&keeper, &session] {
        client.mcp_start(StartParams { session: s.clone(), wait: true }).await?;
    }
    let until = home.root().join("answer-now");
    let caller = daemon.client().await?;
    let p = ToolsCallParams {
        session: session.clone(),
        name: "mcp_fx_wait".into(),
        args: json!({ "until": until.display().to_string() }).as_object().cloned(),
        call_id: None,
        confirmed: true,
    };
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    let in_flight = geminid_tests::eventually(WAIT, || async {
        client.calls_list(None).await.is_ok_and(|r| r.calls.iter().any(|c| c.tool == "mcp_fx_wait"))
    });
    if !in_flight.await {
        let ended = tokio::time::timeout(WAIT, running).await?;
        anyhow::bail!("the call did not reach its tool: {ended:?}");
    }
    client.close(SessionIdParams { id: session.clone() }).await?;
    std::fs::write(&until, "")?;
    let ended = tokio::time::timeout(WAIT, running).await??;
    let Err(jsonrpsee::core::client::Error::Call(e)) = ended else {
        anyhow::bail!("the call's result came back though its hooks cannot be read: {ended:?}");
    };
    assert_eq!(e.code(), geminid_protocol::error::ErrorCode::HookBlocked.code(), "{e:?}");
    assert!(
        e.message().starts_with("Tool result withheld: the session's hooks cannot be read ("),
        "{e:?}"
    );
    // The session is gone: its records are found among everyone's.
    let records = client.audit_list(Some(AuditListParams::default())).await?.records;
    let record = records
        .iter()
        .find(|r| r.session == session && r.tool == "mcp_fx_wait")
        .expect("the call's record");
    assert!(!record.ok, "{record:?}");
    let error = record.error.as_deref().unwrap_or_default();
    assert!(error.contains("the session's hooks cannot be read"), "{record:?}");
    Ok(())
}
