//! A server's list that never ends (a new cursor with every page) stops at geminid's cap on
//! one listing (attack report of issue 68, finding 5: such a `tools/list` took the daemon to
//! 2 GB in 4 s): that list fails for that server, saying the cap, in `mcp list` and its log;
//! the daemon's memory stays bounded and is given back; other servers work on.

use std::cell::Cell;
use std::process::Stdio;
use std::time::Duration;

use geminid_tests::mcp::{stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome, eventually};
use serde_json::json;

/// The daemon's resident memory, in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    kib >> 10
}

/// Most the daemon may hold while four endless lists are read (each stops at 10,000 items of
/// 1 KB); unbounded, one such list passed 2 GB.
const MOST_MIB: u64 = 400;

#[tokio::test]
async fn an_endless_list_stops_at_the_cap_and_the_memory_is_given_back() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let endless = |method: &str| {
        let mut entry = stdio(&["--raw", "--endless", method]);
        // Long enough that, uncapped, the listing would go on well past the bound.
        entry["timeout"] = json!(120_000);
        entry
    };
    let lists = [
        ("etools", "tools/list", "tools"),
        ("eprompts", "prompts/list", "prompts"),
        ("eres", "resources/list", "resources"),
        ("etemplates", "resources/templates/list", "resource templates"),
    ];
    let mut servers = serde_json::Map::new();
    for (name, method, _) in lists {
        servers.insert(name.to_owned(), endless(method));
    }
    servers.insert("ok".to_owned(), stdio(&[]));
    write_user_settings(&home, serde_json::Value::Object(servers))?;
    let daemon = Daemon::start(&home, &["--mcp-backoff", "50ms"]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let pid = daemon.pid();
    let before = rss_mib(pid);

    // The servers start in the background; the test watches the daemon's memory meanwhile.
    let mut starter = home.gemctl_cmd(&["mcp", "start"]).stdout(Stdio::null()).spawn()?;
    let most = Cell::new(before);
    let said = |text: &str| {
        lists.iter().all(|(name, _, what)| {
            text.lines().any(|l| l.contains(*name))
                && text.contains(&format!(
                    "its {what} list went past geminid's cap on one listing (more than 10,000 {what}"
                ))
        })
    };
    let capped = eventually(Duration::from_secs(90), || {
        let (home, most) = (&home, &most);
        async move {
            let rss = rss_mib(pid);
            most.set(most.get().max(rss));
            assert!(rss < MOST_MIB, "the daemon holds {rss} MiB, past {MOST_MIB}");
            let (_, out, _) = home.gemctl_run(&["mcp", "list"]).unwrap_or_default();
            said(&out)
        }
    })
    .await;
    let (_, list, _) = home.gemctl_run(&["mcp", "list"])?;
    assert!(capped, "no cap said for every list:\n{list}\n{}", daemon.log());
    starter.wait()?;

    // Each server's log says it too; none of the capped lists is offered in part.
    let (_, log, _) = home.gemctl_run(&["mcp", "logs", "etools"])?;
    assert!(
        log.contains("went past geminid's cap on one listing (more than 10,000 tools"),
        "{log}"
    );
    let tools = home.gemctl_json(&["mcp", "tools"])?;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("mcp_etools_")), "{names:?}");
    assert!(names.contains(&"mcp_ok_echo"), "{names:?}");
    let prompts = home.gemctl_json(&["mcp", "prompts"])?.to_string();
    assert!(!prompts.contains("e0_0"), "{prompts}");

    // Another server works on.
    let (code, out, err) =
        home.gemctl_run(&["call", "mcp_ok_echo", r#"{"text": "still here"}"#])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("still here"), "{out}");

    // What was gathered is given back.
    let settled =
        eventually(Duration::from_secs(10), || async { rss_mib(pid) < before + 40 }).await;
    eprintln!(
        "daemon RSS: {before} MiB before, at most {} MiB, {} MiB after",
        most.get(),
        rss_mib(pid)
    );
    assert!(
        settled,
        "{} MiB held after the listings ended (from {before}, at most {})",
        rss_mib(pid),
        most.get()
    );
    Ok(())
}
