//! What the hook runner adds: five hooks running `true` in parallel through
//! `geminid::hooks::exec::fire` (bash, stdin JSON, bounded output, timeout), against five
//! `true` processes spawned directly at once, interleaved in one run (the issue-18 target:
//! ≤ 5 ms more than the slowest of them).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use geminid::hooks::HookEvent;
use geminid::hooks::exec::fire;
use geminid::hooks::plan::plan;
use geminid::hooks::registry::Registry;
use geminid::hooks::run::Context;
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
    Ok(vec![
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
    ])
}
