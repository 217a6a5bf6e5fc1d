//! What the hook runner adds: five hooks running `true` in parallel through
//! `geminid::testing::hooks::fire` (bash, stdin JSON, bounded output, timeout), against five
//! `true` processes spawned directly at once, interleaved in one run (the issue-18 target:
//! ≤ 5 ms more than the slowest of them). And what one BeforeTool hook adds to a whole
//! `tools/call` beyond its own process (issue 39: ≤ 0.5 ms): calls in a session whose
//! workspace settings have the hook, in blocks alternating with a session without it, and the
//! hook's process (`bash -c true`, as hooks are run) spawned alongside.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use geminid::testing::hooks::{Context, HookEvent, Registry, fire, plan};
use serde_json::json;

use crate::{ms, stats};

const ROUNDS: usize = 100;

pub async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!("hooks: five parallel `true` hooks against five `true` processes");
    let dir = geminid_tests::TestHome::new()?;
    let hooks: Vec<_> = (0..5)
        .map(|i| json!({"type": "command", "command": "true", "name": format!("h{i}")}))
        .collect();
    let reg = Registry::new(&json!({"hooks": {"BeforeTool": [{"hooks": hooks}]}}), true, &[]);
    let p = plan(&reg, HookEvent::BeforeTool, Some("mcp_fx_echo"))
        .ok_or_else(|| anyhow::anyhow!("no plan"))?;
    let env: BTreeMap<String, String> = std::env::vars().filter(|(k, _)| k == "PATH").collect();
    let ctx = Context {
        cwd: dir.root(),
        session_id: "s",
        plans_dir: Path::new("/tmp"),
        env: &env,
        trusted: true,
    };
    let input = json!({"session_id": "s", "hook_event_name": "BeforeTool", "tool_name": "mcp_fx_echo", "tool_input": {"text": "hi"}});
    let (mut hooked, mut direct) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let fired = fire(&p, HookEvent::BeforeTool, input.clone(), &ctx).await;
        anyhow::ensure!(
            fired.success && fired.ran.len() == 5,
            "{:?}",
            fired.ran.first().map(|r| &r.error)
        );
        hooked.push(t.elapsed());
        let t = Instant::now();
        let children: Vec<_> = (0..5)
            .map(|_| tokio::process::Command::new("true").spawn())
            .collect::<Result<_, _>>()?;
        for mut c in children {
            c.wait().await?;
        }
        direct.push(t.elapsed());
    }
    let (h, d) = (stats(hooked), stats(direct));
    let mut rows = whole_calls().await?;
    rows.splice(0..0, vec![
        format!(
            "| five `true` hooks in parallel through the runner ({ROUNDS} rounds, interleaved with the next row) | {:.2} ms | {:.2} ms | ≤ 5 ms more than the next row: {:+.2} ms |",
            ms(h.median),
            ms(h.p99),
            ms(h.median) - ms(d.median)
        ),
        format!(
            "| five `true` processes spawned at once and waited for | {:.2} ms | {:.2} ms | |",
            ms(d.median),
            ms(d.p99)
        ),
    ]);
    Ok(rows)
}

/// Calls per session, in alternating blocks.
const CALLS: usize = 300;
const BLOCK: usize = 20;

async fn session_in(
    client: &geminid_protocol::client::Client,
    home: &geminid_tests::TestHome,
    dir: &str,
    settings: serde_json::Value,
) -> anyhow::Result<String> {
    use geminid_protocol::api::SessionApiClient;
    let ws = home.root().join(dir);
    std::fs::create_dir_all(ws.join(".gemini"))?;
    std::fs::write(ws.join(".gemini/settings.json"), settings.to_string())?;
    let p = geminid_protocol::session::SessionCreateParams {
        workspace: ws.display().to_string(),
        env: Some(geminid_tests::mcp::shell_env(home, &[])),
        ..Default::default()
    };
    Ok(client.create(p).await?.id)
}

/// The hook's process as any runner must run it: started, its input written to its stdin,
/// its stdout and stderr read to their end, waited for.
async fn hook_process(input: &[u8]) -> anyhow::Result<()> {
    use std::process::Stdio;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut child = tokio::process::Command::new("bash")
        .args(["-c", "true"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        anyhow::bail!("bash without pipes");
    };
    let _ = stdin.write_all(input).await;
    drop(stdin);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (o, e) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
    o?;
    e?;
    anyhow::ensure!(child.wait().await?.success());
    Ok(())
}

/// A whole call with one BeforeTool hook against one without, and the hook's process alone.
async fn whole_calls() -> anyhow::Result<Vec<String>> {
    eprintln!("hooks: a whole call with one BeforeTool hook against one without");
    let home = geminid_tests::TestHome::allowing_mcp()?;
    geminid_tests::mcp::write_user_settings(
        &home,
        json!({ "fx": { "command": geminid_tests::mcp::fixture() } }),
    )?;
    let daemon = geminid_tests::Daemon::launch(&home).log(crate::BENCH_LOG).start().await?;
    let client = daemon.client().await?;
    let hook = json!({"hooks": {"BeforeTool": [{"matcher": "mcp_fx_echo", "hooks": [{"type": "command", "command": "true", "name": "t"}]}]}});
    let hooked = session_in(&client, &home, "hooked", hook).await?;
    let plain = session_in(&client, &home, "plain", json!({})).await?;
    for s in [&hooked, &plain] {
        for i in 0..20 {
            crate::tools::via_geminid(&client, s, "mcp_fx_echo", &format!("w{i}")).await?;
        }
    }
    let input = serde_json::to_vec(
        &json!({"session_id": hooked, "hook_event_name": "BeforeTool", "tool_name": "mcp_fx_echo", "tool_input": {"text": "hi"}}),
    )?;
    let (mut with, mut without, mut process) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..CALLS / BLOCK {
        for (s, out) in [(&hooked, &mut with), (&plain, &mut without)] {
            for i in 0..BLOCK {
                let t = Instant::now();
                crate::tools::via_geminid(&client, s, "mcp_fx_echo", &format!("{b}.{i}")).await?;
                out.push(t.elapsed());
            }
        }
        for _ in 0..BLOCK {
            let t = Instant::now();
            hook_process(&input).await?;
            process.push(t.elapsed());
        }
    }
    let (w, o, p) = (stats(with), stats(without), stats(process));
    Ok(vec![
        format!(
            "| a whole tools/call with one BeforeTool hook (`true`; {CALLS} calls, blocks of {BLOCK} alternating with the next two rows) | {:.2} ms | {:.2} ms | |",
            ms(w.median),
            ms(w.p99)
        ),
        format!(
            "| the same call in a session without hooks | {:.2} ms | {:.2} ms | |",
            ms(o.median),
            ms(o.p99)
        ),
        format!(
            "| the hook's process alone, as any runner must run it: `bash -c true` with its stdin JSON written, its stdout and stderr read to their end | {:.2} ms | {:.2} ms | |",
            ms(p.median),
            ms(p.p99)
        ),
        format!(
            "| added per call by the hook beyond its process (first row − second − third) | {:+.2} ms | | ≤ 0.5 ms |",
            ms(w.median) - ms(o.median) - ms(p.median)
        ),
    ])
}
