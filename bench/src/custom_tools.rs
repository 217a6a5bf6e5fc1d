//! Custom tools against a real daemon: `tools/refresh` of a discovery command declaring 100
//! tools, against running that command directly; and `tools/call` of a custom tool (its call
//! command, a shell script echoing stdin), against running the same script directly, and
//! against the fixture server's `echo` through the same pipeline. Interleaved in one run.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use geminid_protocol::api::ToolsApiClient;
use geminid_protocol::tools::{ToolsCallParams, ToolsRefreshParams};
use geminid_tests::Daemon;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::tools::{FixtureIo, fixture_home, session, via_geminid};
use crate::{ms, stats};

const DECLARED: usize = 100;
const ROUNDS: usize = 100;

/// `path` run with `arg`, `input` on stdin, to its end: its stdout.
async fn direct(path: &str, arg: &str, input: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut child = tokio::process::Command::new(path)
        .arg(arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input).await?;
    }
    Ok(child.wait_with_output().await?.stdout)
}

fn script(path: &std::path::Path, body: &str) -> anyhow::Result<String> {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path.display().to_string())
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!(
        "custom tools: discovery of {DECLARED} tools and calls, against the same processes run directly"
    );
    let io = FixtureIo::EventLoop;
    let home = fixture_home(&[io])?;
    let bin = home.root().join("bin");
    std::fs::create_dir_all(&bin)?;
    let decls: Vec<_> = (0..DECLARED)
        .map(|i| json!({"name": format!("t{i}"), "description": format!("Tool {i}."), "parametersJsonSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}))
        .collect();
    std::fs::write(bin.join("decls.json"), json!([{ "functionDeclarations": decls }]).to_string())?;
    let discover =
        script(&bin.join("discover"), &format!("cat {}", bin.join("decls.json").display()))?;
    let call = script(&bin.join("call"), "cat")?;
    let settings = home.root().join("home/.gemini/settings.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&settings)?)?;
    v["tools"] = json!({ "discoveryCommand": discover, "callCommand": call });
    std::fs::write(&settings, v.to_string())?;
    // Custom tools are asked about by default: a rule allows them, as the MCP ones are.
    std::fs::write(
        home.root().join("home/.gemini/policies/bench-custom.toml"),
        "[[rule]]\ntoolName = \"discovered_tool_*\"\ndecision = \"allow\"\npriority = 1\n",
    )?;
    let daemon = Daemon::launch(&home).log(crate::BENCH_LOG).start().await?;
    let (client, session) = session(&daemon, &home).await?;

    let (mut refresh, mut run) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS / 5 {
        let t = Instant::now();
        let r = client.tools_refresh(ToolsRefreshParams { session: session.clone() }).await?;
        refresh.push(t.elapsed());
        let found = r.discovery.map(|d| d.tools.len()).unwrap_or_default();
        anyhow::ensure!(found == DECLARED, "discovered {found}");
        let t = Instant::now();
        let out = direct(&discover, "", b"").await?;
        run.push(t.elapsed());
        anyhow::ensure!(!out.is_empty());
    }
    let (mut custom, mut spawned, mut mcp) = (Vec::new(), Vec::new(), Vec::new());
    let args = json!({ "text": "hi" });
    let expected = args.to_string();
    for i in 0..ROUNDS {
        let t = Instant::now();
        let p = ToolsCallParams {
            session: session.clone(),
            name: "discovered_tool_t7".into(),
            args: args.as_object().cloned(),
            call_id: None,
            confirmed: false,
        };
        let r = client.tools_call(p).await?;
        custom.push(t.elapsed());
        anyhow::ensure!(!r.is_error && r.display == expected, "{}", r.display);
        let t = Instant::now();
        let out = direct(&call, "t7", expected.as_bytes()).await?;
        spawned.push(t.elapsed());
        anyhow::ensure!(out == expected.as_bytes());
        let t = Instant::now();
        via_geminid(&client, &session, &format!("mcp_{}_echo", io.server()), &format!("m{i}"))
            .await?;
        mcp.push(t.elapsed());
    }
    let (rf, rn) = (stats(refresh), stats(run));
    let (c, s, m) = (stats(custom), stats(spawned), stats(mcp));
    let row = |what: &str, median: Duration, p99: Duration, target: String| {
        format!("| {what} | {:.2} ms | {:.2} ms | {target} |", ms(median), ms(p99))
    };
    Ok(vec![
        row(
            &format!(
                "`tools/refresh`: a discovery command declaring {DECLARED} tools ({} rounds, interleaved with the next row)",
                ROUNDS / 5
            ),
            rf.median,
            rf.p99,
            format!("what geminid adds: {:+.2} ms", ms(rf.median) - ms(rn.median)),
        ),
        row("the same command run directly, its output read", rn.median, rn.p99, String::new()),
        row(
            &format!(
                "`tools/call` of a custom tool (a `sh` script echoing stdin; {ROUNDS} calls, interleaved with the next two rows)"
            ),
            c.median,
            c.p99,
            format!("what geminid adds: {:+.2} ms", ms(c.median) - ms(s.median)),
        ),
        row(
            "the same script run directly, its input written and output read",
            s.median,
            s.p99,
            String::new(),
        ),
        row(
            "`tools/call` of the fixture server's `echo` (an MCP tool, same pipeline)",
            m.median,
            m.p99,
            String::new(),
        ),
    ])
}
