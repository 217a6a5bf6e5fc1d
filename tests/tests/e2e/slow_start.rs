//! Servers slower to answer their first message than the era probe's patience (10 s): a first
//! `npx` download, a JVM, a laptop at login. Each connects on its first start, in either
//! protocol era, within the start-up limit the user gave (issue 63, B2), and a late answer
//! never breaks the handshake.

use geminid_tests::mcp::{starts, stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::{Value, json};

fn state_of(list: &Value, server: &str) -> String {
    list.as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == server))
        .map(|s| s["state"].to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_server_slower_than_the_probe_connects_on_its_first_start_in_either_era()
-> anyhow::Result<()> {
    let home = TestHome::new()?;
    // 12 s before either reads its stdin: the probe's `server/discover` waits unanswered past
    // its patience, so `initialize` is sent beside it, and both are read at once.
    write_user_settings(
        &home,
        json!({
            "legacy": stdio(&["--startup-delay-ms", "12000"]),
            "modern": stdio(&["--modern", "--startup-delay-ms", "12000"]),
        }),
    )?;
    // The default start-up limit (30 s).
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, out, err) = home.gemctl_run(&["mcp", "start"])?;
    assert_eq!(code, 0, "both connect: {out}{err}");
    let list = home.gemctl_json(&["mcp", "list"])?;
    for server in ["legacy", "modern"] {
        assert_eq!(state_of(&list, server), r#""connected""#, "{server}: {list}");
        assert_eq!(starts(&home, server)?, 1, "{server} connected on its first start");
        let tool = format!("mcp_{server}_echo");
        let (code, out, err) = home.gemctl_run(&["call", &tool, r#"{"text": "late"}"#])?;
        assert_eq!((code, out.trim()), (0, "late"), "{server}: {err}");
    }
    Ok(())
}

#[tokio::test]
async fn the_start_up_limit_the_user_gave_still_ends_the_wait() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "slow": stdio(&["--startup-delay-ms", "12000"]) }))?;
    // Below the server's start: the limit is the user's, the probe's patience adds nothing.
    let _daemon = Daemon::start(&home, &["--mcp-startup-timeout", "4s"]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, out, err) = home.gemctl_run(&["mcp", "start"])?;
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("no answer to the MCP handshake within 4s"), "{out}{err}");
    Ok(())
}
