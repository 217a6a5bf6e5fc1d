//! What a policy decision costs: one tool call decided against 1,000 rules, against an empty
//! rule set, interleaved in one run (the engine in process; the issue-17 target is on the whole
//! call, ≤ 20 µs more with 1,000 rules).

use std::time::Instant;

use geminid::policy::engine::PolicySet;
use geminid::policy::load::load;
use geminid::policy::{ApprovalMode, Tier, ToolCall};
use serde_json::json;

use crate::{stats, us};

const ROUNDS: usize = 20_000;

/// 1,000 rules as users write them: exact names, server wildcards, argument patterns and
/// command prefixes, none of which matches the measured call (so every rule is tried).
fn thousand_rules() -> String {
    let mut text = String::new();
    for i in 0..1000 {
        let body = match i % 4 {
            0 => format!("toolName = \"tool_{i}\""),
            1 => format!("mcpName = \"server_{i}\"\ntoolName = \"*\""),
            2 => format!(
                "toolName = \"write_file\"\nargsPattern = \"\\\"file_path\\\":\\\"/secret/{i}/\""
            ),
            _ => format!("toolName = \"run_shell_command\"\ncommandPrefix = \"deploy-{i}\""),
        };
        text.push_str(&format!(
            "[[rule]]\n{body}\ndecision = \"deny\"\npriority = {}\n\n",
            i % 999
        ));
    }
    text
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!("policy: a decision against 1,000 rules and against none");
    let loaded = load("bench.toml", &thousand_rules(), Tier::User);
    anyhow::ensure!(loaded.rules.len() == 1000, "{:?}", loaded.problems.first());
    let full = PolicySet::new(loaded.rules);
    let empty = PolicySet::new(vec![]);
    let args =
        json!({"path": "/work/src/main.rs", "content": "fn main() {}\n", "mode": "overwrite"});
    let call = ToolCall {
        name: "mcp_fs_write",
        server: Some("fs"),
        args: args.as_object(),
        annotations: None,
        subagent: None,
    };
    let (mut with, mut without) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for _ in 0..ROUNDS {
        let t = Instant::now();
        std::hint::black_box(full.decide(std::hint::black_box(&call), ApprovalMode::Default, true));
        with.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(empty.decide(
            std::hint::black_box(&call),
            ApprovalMode::Default,
            true,
        ));
        without.push(t.elapsed());
    }
    let (w, e) = (stats(with), stats(without));
    Ok(vec![
        format!(
            "| a decision against 1,000 rules, none matching ({ROUNDS} rounds, interleaved with an empty set) | {:.2} µs | {:.2} µs | ≤ 20 µs more per call |",
            us(w.median),
            us(w.p99)
        ),
        format!(
            "| the same call against no rules | {:.2} µs | {:.2} µs | |",
            us(e.median),
            us(e.p99)
        ),
    ])
}
