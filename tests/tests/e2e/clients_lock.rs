//! Writers of geminid's servers.json at once (issue 69): `gemctl clients connect` of five
//! clients from five processes and Gemini CLI's through the daemon (`mcp/import`), all started
//! together, each reading servers.json, adding its servers and writing it back. Without the
//! shared lock (`geminid_protocol::config_lock`) a later write drops an earlier one's servers.

use std::process::{Child, Stdio};

use geminid_tests::{Daemon, TestHome};

use crate::clients::{cases, servers_json, write};

/// Each case's server under a name of its own, so a lost write shows as a missing name.
fn renamed(client: &str, text: &str) -> String {
    let name = format!("fx-{client}");
    text.replace("\"fx\"", &format!("\"{name}\""))
        .replace("mcp_servers.fx]", &format!("mcp_servers.{name}]"))
}

fn all_at_once(home: &TestHome, verb: &str, clients: &[&str]) -> anyhow::Result<()> {
    let children: Vec<(String, Child)> = clients
        .iter()
        .map(|c| {
            let mut cmd = home.gemctl_cmd(&["clients", verb, c]);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            Ok((c.to_string(), cmd.spawn()?))
        })
        .collect::<anyhow::Result<_>>()?;
    for (c, child) in children {
        let out = child.wait_with_output()?;
        anyhow::ensure!(
            out.status.success(),
            "{verb} {c}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

#[tokio::test]
async fn connects_at_once_lose_no_server() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let cases: Vec<_> =
        cases(&home).into_iter().map(|c| (c.client, c.path, renamed(c.client, &c.text))).collect();
    let clients: Vec<&str> = cases.iter().map(|c| c.0).collect();
    // Rounds: the race is between processes started together; each round is a new chance.
    for round in 0..3 {
        for (_, path, text) in &cases {
            write(path, text)?;
        }
        all_at_once(&home, "connect", &clients)?;
        let own = std::fs::read_to_string(servers_json(&home))?;
        for c in &clients {
            assert!(own.contains(&format!("\"fx-{c}\"")), "round {round}: fx-{c} lost: {own}");
        }
        for (c, path, _) in &cases {
            let now = std::fs::read_to_string(path)?;
            assert!(now.contains("--server"), "round {round}: {c}: {now}");
        }
        all_at_once(&home, "disconnect", &clients)?;
        for (c, path, text) in &cases {
            pretty_assertions::assert_eq!(
                &std::fs::read_to_string(path)?,
                text,
                "round {round}: {c}"
            );
        }
        // Each connect gave its client every server geminid had by then, so which servers
        // a disconnect could take back out depends on the order: start the next round afresh.
        std::fs::remove_file(servers_json(&home))?;
    }
    // The daemon writing at the same time: Gemini CLI's connect is its `mcp/import`. (Its
    // gateway entries reach every server geminid has by then, so which servers each client's
    // disconnect gives back depends on the order; only the connects are raced here.)
    let fx = serde_json::to_string(&geminid_tests::mcp::fixture())?;
    let user = home.root().join("home/.gemini/settings.json");
    write(&user, &format!("{{ \"mcpServers\": {{ \"fx-gemini\": {{ \"command\": {fx} }} }} }}\n"))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    for (_, path, text) in &cases {
        write(path, text)?;
    }
    let mut with_gemini = clients.clone();
    with_gemini.push("gemini");
    all_at_once(&home, "connect", &with_gemini)?;
    let own = std::fs::read_to_string(servers_json(&home))?;
    for c in &with_gemini {
        assert!(own.contains(&format!("\"fx-{c}\"")), "with the daemon: fx-{c} lost: {own}");
    }
    assert!(std::fs::read_to_string(&user)?.contains("--server"));
    Ok(())
}
