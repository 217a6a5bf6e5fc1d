//! `gemctl mcp update NAME` (issue 72): a local server moved to its newest release on purpose.
//! The newest (npm's `latest` from the registry, or an executable as it is now) is shown old →
//! new as a review, `gemctl mcp review` shows it too, `gemctl mcp accept` takes it (or `update
//! --yes` at once); until then the server runs what was recorded (each fixture writes a marker
//! when it starts). Each case it cannot do is said plainly: an unknown server, a remote one,
//! artifact pinning off, a registry that does not answer (named, with the fix), and a server
//! that runs the newest already. The registry is `artifacts.rs`'s static one on loopback.

use std::path::Path;

use geminid_protocol::api::McpApiClient;
use geminid_protocol::mcp::ServerState;
use geminid_protocol::pins::{ArtifactKind, UpdateParams};
use geminid_tests::mcp::write_user_settings;
use geminid_tests::{Daemon, TestHome};
use serde_json::{Value, json};

use super::artifacts::{QUICK, Registry, accept, audit_has, reaches, script, server, session};

/// The environment of a session whose npx asks `registry` and caches under the test's root.
fn npm_env(root: &Path, registry: &str) -> Vec<(String, String)> {
    let root = |p: &str| root.join(p).display().to_string();
    vec![
        ("npm_config_registry".into(), registry.to_owned()),
        ("npm_config_cache".into(), root("npm-cache")),
        ("npm_config_update_notifier".into(), "false".into()),
        ("npm_config_audit".into(), "false".into()),
        ("npm_config_fund".into(), "false".into()),
        ("MARKERS".into(), root("markers")),
    ]
}

fn pairs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[tokio::test]
async fn mcp_update_offers_the_newest_npm_release_and_accept_or_yes_takes_it() -> anyhow::Result<()>
{
    let home = TestHome::allowing_mcp()?;
    let root = home.root().to_path_buf();
    let registry = Registry::start(&root)?;
    registry.publish(&root, "1.0.0", "v100", true)?;
    let markers = root.join("markers");
    std::fs::create_dir_all(&markers)?;
    let env = npm_env(&root, &registry.url);
    write_user_settings(&home, json!({"srv": {"command": "npx", "args": ["-y", "fixture-srv"]}}))?;
    let daemon = Daemon::start(&home, QUICK).await?;
    let client = daemon.client().await?;
    let s = session(&client, &home, &pairs(&env)).await?;
    reaches(&client, &s, "srv", ServerState::Connected).await?;

    // Nothing newer: said, exit 0, nothing offered.
    let (code, out, err) = home.gemctl_run(&["mcp", "update", "srv"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("newest release already") && out.contains("fixture-srv 1.0.0"), "{out}");

    // 1.0.1 is published: offered old → new, and the server still runs 1.0.0.
    registry.publish(&root, "1.0.1", "v101", true)?;
    let (code, out, err) = home.gemctl_run(&["mcp", "update", "srv"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("recorded:") && out.contains("fixture-srv 1.0.0"), "{out}");
    assert!(out.contains("newest:") && out.contains("fixture-srv 1.0.1"), "{out}");
    assert!(out.contains("published: 2026-12-07T21:02:00.000Z"), "{out}");
    assert!(out.contains("gemctl mcp accept srv"), "{out}");
    assert!(!markers.join("v101").exists(), "the offered 1.0.1 ran before it was taken");
    // A restart meanwhile keeps the offer, and runs the recorded 1.0.0.
    client.mcp_restart(server(&s, "srv")).await?;
    let st = reaches(&client, &s, "srv", ServerState::Connected).await?;
    assert!(!markers.join("v101").exists(), "a restart ran the offered 1.0.1");
    let a = st.artifact.unwrap_or_else(|| unreachable!());
    assert_eq!(a.offered.and_then(|o| o.version).as_deref(), Some("1.0.1"));
    let (code, out, err) = home.gemctl_run(&["mcp", "review", "srv"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Update offered") && out.contains("fixture-srv 1.0.1"), "{out}");
    assert!(audit_has(&home, "artifact update offered")?);

    // Accepted: recorded, and the server restarts on 1.0.1.
    let done = accept(&client, &s, "srv").await?;
    assert!(done.iter().any(|d| d.contains("fixture-srv 1.0.1")), "{done:?}");
    let st = reaches(&client, &s, "srv", ServerState::Connected).await?;
    let ok = geminid_tests::eventually(std::time::Duration::from_secs(30), || async {
        markers.join("v101").exists()
    })
    .await;
    assert!(ok, "the accepted 1.0.1 did not run");
    let a = st.artifact.unwrap_or_else(|| unreachable!());
    assert!(a.offered.is_none(), "{a:#?}");

    // `--yes --json` takes 1.0.2 at once.
    registry.publish(&root, "1.0.2", "v1002", true)?;
    let r = home.gemctl_json(&["mcp", "update", "srv", "--yes"])?;
    assert_eq!(r["accepted"], json!(true), "{r}");
    assert_eq!(
        (r["recorded"]["version"].clone(), r["newest"]["version"].clone()),
        (json!("1.0.1"), json!("1.0.2"))
    );
    let ok = geminid_tests::eventually(std::time::Duration::from_secs(60), || async {
        markers.join("v1002").exists()
    })
    .await;
    assert!(ok, "update --yes did not restart on 1.0.2");
    let st = reaches(&client, &s, "srv", ServerState::Connected).await?;
    let pinned = st.artifact.and_then(|a| a.pinned).unwrap_or_else(|| unreachable!());
    assert_eq!(pinned.version.as_deref(), Some("1.0.2"));

    // The registry goes away: the error names it and the fix, at once.
    let url = registry.url.clone();
    drop(registry);
    let started = std::time::Instant::now();
    let (code, out, err) = home.gemctl_run(&["mcp", "update", "srv"])?;
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains(&format!("its registry {url} did not answer")), "{err}");
    assert!(err.contains("npm_config_registry"), "{err}");
    assert!(started.elapsed().as_secs() < 30, "took {:?}", started.elapsed());
    drop(daemon);
    Ok(())
}

#[tokio::test]
async fn mcp_update_re_records_an_executable_and_refuses_what_it_cannot_update()
-> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let (srv, first, second) = (
        home.root().join("srv"),
        home.root().join("first.started"),
        home.root().join("second.started"),
    );
    script(&srv, &first)?;
    let srv_s = srv.display().to_string();
    std::fs::create_dir_all(home.root().join("home/.gemini/geminid"))?;
    let own = home.root().join("home/.gemini/geminid/servers.json");
    let off = json!({"command": srv_s, "args": ["off"], "artifactPinning": "off"});
    std::fs::write(&own, json!({"mcpServers": {"off": off}}).to_string())?;
    write_user_settings(
        &home,
        json!({
            "srv": {"command": srv_s},
            "remote": {"httpUrl": "http://127.0.0.1:9/mcp"},
        }),
    )?;
    let daemon = Daemon::start(&home, QUICK).await?;
    let client = daemon.client().await?;
    let s = session(&client, &home, &[]).await?;
    reaches(&client, &s, "srv", ServerState::Connected).await?;

    let (code, out, err) = home.gemctl_run(&["mcp", "update", "srv"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("newest release already"), "{out}");

    // The file is replaced: offered (its new digest), not run until accepted.
    script(&srv, &second)?;
    let r: Value = home.gemctl_json(&["mcp", "update", "srv"])?;
    assert_eq!(r["accepted"], Value::Null, "{r}");
    assert_eq!(r["newest"]["kind"], json!("executable"), "{r}");
    assert_ne!(r["recorded"]["digest"], r["newest"]["digest"], "{r}");
    assert!(!second.exists(), "the new file ran before it was taken");
    let done = accept(&client, &s, "srv").await?;
    assert!(done.iter().any(|d| d.starts_with("artifact ")), "{done:?}");
    let st = reaches(&client, &s, "srv", ServerState::Connected).await?;
    assert!(second.exists(), "the accepted file did not run");
    let pinned = st.artifact.and_then(|a| a.pinned).unwrap_or_else(|| unreachable!());
    assert_eq!(
        (pinned.kind, Some(&pinned.digest)),
        (ArtifactKind::Executable, r["newest"]["digest"].as_str().map(str::to_owned).as_ref())
    );

    // What it cannot update, each said.
    let (code, _, err) = home.gemctl_run(&["mcp", "update", "nope"])?;
    assert_ne!(code, 0);
    assert!(err.contains("nope"), "{err}");
    let (code, _, err) = home.gemctl_run(&["mcp", "update", "remote"])?;
    assert_ne!(code, 0);
    assert!(err.contains("is remote"), "{err}");
    let (code, _, err) = home.gemctl_run(&["mcp", "update", "off"])?;
    assert_ne!(code, 0);
    assert!(err.contains("artifactPinning is off"), "{err}");
    let e = client
        .mcp_update(UpdateParams { server: server(&s, "off"), yes: true })
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("not pinned"), "{e}");
    drop(daemon);
    Ok(())
}
