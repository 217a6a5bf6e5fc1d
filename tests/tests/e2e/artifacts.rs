//! Artifact pins (issue 72): what a local server runs is recorded on its first start (an npm
//! package's exact version and integrity, any other command's executable and its `#!`
//! interpreter, by SHA-256), later starts run exactly that, and a different artifact holds
//! the server before its code runs (each fixture writes a marker file when it starts: a held
//! start leaves none), shown in `mcp list` and the audit, reviewed old → new with `gemctl mcp
//! review`, taken with `gemctl mcp accept`. The npm registry is a static folder behind
//! `python3 -m http.server` on loopback (a packument and tarballs), offline.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use geminid_protocol::api::{McpApiClient, SessionApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::mcp::{ServerParams, ServerState, ServerStatus, StartParams};
use geminid_protocol::pins::{ArtifactKind, PinsParams};
use geminid_protocol::session::SessionCreateParams;
use geminid_tests::mcp::{fixture, shell_env, write_user_settings};
use geminid_tests::{Daemon, TestHome, eventually};

use super::pins::status;
use serde_json::{Value, json};

pub(super) const QUICK: &[&str] = &["--mcp-backoff", "50ms", "--mcp-stop-grace", "500ms"];

pub(super) async fn session(
    client: &Client,
    home: &TestHome,
    extra: &[(&str, &str)],
) -> anyhow::Result<String> {
    let s = client
        .create(SessionCreateParams {
            workspace: home.workspace().display().to_string(),
            env: Some(shell_env(home, extra)),
            reuse_default: false,
            ..Default::default()
        })
        .await?;
    client.mcp_start(StartParams { session: s.id.clone(), wait: true }).await?;
    Ok(s.id)
}

/// `name`'s status once `state` (up to a minute: a cold npx installs first).
pub(super) async fn reaches(
    client: &Client,
    session: &str,
    name: &str,
    state: ServerState,
) -> anyhow::Result<ServerStatus> {
    let ok = eventually(Duration::from_secs(60), || async {
        status(client, session, name).await.is_ok_and(|s| s.state == state)
    })
    .await;
    let s = status(client, session, name).await?;
    anyhow::ensure!(ok, "{name} never reached {state:?}: {s:#?}");
    Ok(s)
}

pub(super) fn server(session: &str, name: &str) -> ServerParams {
    ServerParams { session: Some(session.into()), name: name.into() }
}

pub(super) async fn accept(
    client: &Client,
    session: &str,
    name: &str,
) -> anyhow::Result<Vec<String>> {
    let p = PinsParams { server: server(session, name), names: vec![], digest: None };
    Ok(client.mcp_accept(p).await?.done)
}

pub(super) fn audit_has(home: &TestHome, needle: &str) -> anyhow::Result<bool> {
    let (_, out, _) = home.gemctl_run(&["audit", "--json"])?;
    Ok(out.contains(needle))
}

/// A script server: it writes `marker` when it starts, then runs the fixture.
pub(super) fn script(path: &Path, marker: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let text =
        format!("#!/bin/sh\necho started >> '{}'\nexec '{}' \"$@\"\n", marker.display(), fixture());
    // Written beside and renamed, as an update does (a running copy keeps its file).
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(tmp, path)?;
    Ok(())
}

#[tokio::test]
async fn a_changed_executable_is_held_before_it_runs_until_accepted() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let bin = home.root().join("bin");
    std::fs::create_dir_all(&bin)?;
    let (srv, first, second) =
        (bin.join("srv"), home.root().join("first.started"), home.root().join("second.started"));
    script(&srv, &first)?;
    write_user_settings(&home, json!({"srv": {"command": srv.display().to_string()}}))?;
    let mut daemon = Daemon::start(&home, QUICK).await?;
    let client = daemon.client().await?;
    let s = session(&client, &home, &[]).await?;
    let st = reaches(&client, &s, "srv", ServerState::Connected).await?;
    let a = st.artifact.clone().ok_or_else(|| anyhow::anyhow!("no artifact: {st:#?}"))?;
    let pinned = a.pinned.clone().ok_or_else(|| anyhow::anyhow!("nothing recorded: {a:#?}"))?;
    assert_eq!(pinned.kind, ArtifactKind::Executable);
    assert!(pinned.digest.starts_with("sha256:") && a.first_use, "{a:#?}");
    assert!(
        pinned.interpreter.as_deref().is_some_and(|i| i.starts_with("/bin/sh sha256:")),
        "{a:#?}"
    );

    // The script is replaced: the next start is held, and the new script never ran.
    script(&srv, &second)?;
    client.mcp_restart(server(&s, "srv")).await?;
    let st = reaches(&client, &s, "srv", ServerState::Blocked).await?;
    assert!(!second.exists(), "the changed executable ran");
    let a = st.artifact.clone().unwrap_or_else(|| unreachable!());
    assert!(a.held, "{a:#?}");
    assert_ne!(a.differs.as_ref().map(|d| &d.digest), Some(&pinned.digest));
    assert!(st.last_error.as_deref().is_some_and(|e| e.contains("is held")), "{st:#?}");
    assert!(audit_has(&home, "artifact differs (held)")?, "no audit record");
    let (code, out, err) = home.gemctl_run(&["mcp", "review", "srv"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("recorded:") && out.contains("now:") && out.contains(&pinned.digest),
        "{out}"
    );

    // Accepted: recorded, started, and it stays accepted across a daemon restart.
    let done = accept(&client, &s, "srv").await?;
    assert!(done.iter().any(|d| d.starts_with("artifact ")), "{done:?}");
    reaches(&client, &s, "srv", ServerState::Connected).await?;
    assert!(second.exists(), "the accepted executable did not run");
    assert!(audit_has(&home, "pins/accept")?);
    daemon.signal(nix::sys::signal::Signal::SIGTERM)?;
    daemon.wait_exit(Duration::from_secs(20)).await?;
    let daemon = Daemon::start(&home, QUICK).await?;
    let client = daemon.client().await?;
    let s = session(&client, &home, &[]).await?;
    let st = reaches(&client, &s, "srv", ServerState::Connected).await?;
    let a = st.artifact.unwrap_or_else(|| unreachable!());
    assert!(!a.first_use && !a.held && a.differs.is_none(), "{a:#?}");
    Ok(())
}

#[tokio::test]
async fn artifact_pinning_warn_starts_a_changed_executable_and_off_records_nothing()
-> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let (srv, marker) = (home.root().join("srv"), home.root().join("started"));
    script(&srv, &marker)?;
    let entry = |mode: &str| json!({"command": srv.display().to_string(), "artifactPinning": mode});
    std::fs::create_dir_all(home.root().join("home/.gemini/geminid"))?;
    let own = home.root().join("home/.gemini/geminid/servers.json");
    std::fs::write(&own, json!({"mcpServers": {"srv": entry("warn")}}).to_string())?;
    let daemon = Daemon::start(&home, QUICK).await?;
    let client = daemon.client().await?;
    let s = session(&client, &home, &[]).await?;
    reaches(&client, &s, "srv", ServerState::Connected).await?;
    script(&srv, &home.root().join("other"))?;
    client.mcp_restart(server(&s, "srv")).await?;
    let ok =
        eventually(Duration::from_secs(30), || async { home.root().join("other").exists() }).await;
    assert!(ok, "warn held the changed executable");
    let st = reaches(&client, &s, "srv", ServerState::Connected).await?;
    let a = st.artifact.unwrap_or_else(|| unreachable!());
    assert!(!a.held && a.differs.is_some(), "{a:#?}");
    drop(daemon);
    Ok(())
}

// ---- npm: a registry on loopback ----

/// A static npm registry: `/<name>` is the packument, `/tarballs/<file>` each tarball.
pub(super) struct Registry {
    dir: PathBuf,
    child: Child,
    pub(super) url: String,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    pub(super) fn start(root: &Path) -> anyhow::Result<Self> {
        use std::io::BufRead;
        let dir = root.join("registry");
        std::fs::create_dir_all(dir.join("tarballs"))?;
        let mut child = geminid_tests::sealed(&mut Command::new("python3"))
            .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory"])
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .ok_or_else(|| anyhow::anyhow!("no port in {line:?}"))?
            .to_owned();
        Ok(Self { dir, child, url: format!("http://127.0.0.1:{port}/") })
    }

    /// Pack the fixture package `version` whose start writes `<markers>/<tag>` (and lists as
    /// many more tools as `tag` has letters), and publish it, replacing any tarball of that version.
    pub(super) fn publish(
        &self,
        root: &Path,
        version: &str,
        tag: &str,
        latest: bool,
    ) -> anyhow::Result<()> {
        let src = root.join(format!("pkg-{tag}"));
        std::fs::create_dir_all(&src)?;
        let package = json!({
            "name": "fixture-srv", "version": version,
            "bin": {"fixture-srv": "srv.js"},
        });
        std::fs::write(src.join("package.json"), package.to_string())?;
        let js = format!(
            "#!/usr/bin/env node\nconst fs = require('fs'), path = require('path');\n\
             fs.writeFileSync(path.join(process.env.MARKERS, '{tag}'), 'started');\n\
             const r = require('child_process').spawnSync({fixture:?}, ['--tools', '{n}'], {{stdio: 'inherit'}});\n\
             process.exit(r.status === null ? 1 : r.status);\n",
            fixture = fixture(),
            n = tag.len()
        );
        std::fs::write(src.join("srv.js"), js)?;
        let out = geminid_tests::sealed(&mut Command::new("npm"))
            .args(["pack", "--json", "--pack-destination"])
            .arg(self.dir.join("tarballs"))
            .env("npm_config_cache", root.join("pack-cache"))
            .env("HOME", root.join("home"))
            .current_dir(&src)
            .output()?;
        anyhow::ensure!(out.status.success(), "npm pack: {}", String::from_utf8_lossy(&out.stderr));
        let packed: Value = serde_json::from_slice(&out.stdout)?;
        let (file, integrity, shasum) = (
            packed[0]["filename"].as_str().unwrap_or_default().to_owned(),
            packed[0]["integrity"].as_str().unwrap_or_default().to_owned(),
            packed[0]["shasum"].as_str().unwrap_or_default().to_owned(),
        );
        let path = self.dir.join("fixture-srv");
        let mut doc: Value = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)?,
            Err(_) => json!({"name": "fixture-srv", "dist-tags": {}, "versions": {}, "time": {}}),
        };
        doc["versions"][version] = json!({
            "name": "fixture-srv", "version": version, "bin": {"fixture-srv": "srv.js"},
            "dist": {"tarball": format!("{}tarballs/{file}", self.url), "integrity": integrity, "shasum": shasum},
        });
        doc["time"][version] = json!(format!(
            "2026-12-07T21:{:02}:00.000Z",
            doc["versions"].as_object().map_or(0, |v| v.len())
        ));
        if latest {
            doc["dist-tags"]["latest"] = json!(version);
        }
        std::fs::write(path, doc.to_string())?;
        Ok(())
    }
}

/// npx needs `node` and `npm` on the PATH: the tests' machine has Node 20.
#[tokio::test]
async fn an_npx_server_runs_its_recorded_version_and_a_new_or_republished_one_is_held()
-> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    let root = home.root().to_path_buf();
    let registry = Registry::start(&root)?;
    registry.publish(&root, "1.0.0", "v100", true)?;
    let markers = root.join("markers");
    std::fs::create_dir_all(&markers)?;
    let (cache, markers_s) = (root.join("npm-cache"), markers.display().to_string());
    let cache_s = cache.display().to_string();
    let env = [
        ("npm_config_registry", registry.url.as_str()),
        ("npm_config_cache", cache_s.as_str()),
        ("npm_config_update_notifier", "false"),
        ("npm_config_audit", "false"),
        ("npm_config_fund", "false"),
        ("MARKERS", markers_s.as_str()),
    ];
    let entry = |spec: &str| json!({"srv": {"command": "npx", "args": ["-y", spec]}});
    write_user_settings(&home, entry("fixture-srv"))?;
    let daemon = Daemon::start(&home, QUICK).await?;
    let client = daemon.client().await?;
    let s = session(&client, &home, &env).await?;

    // A first start from a cold cache installs, runs and records 1.0.0.
    let st = reaches(&client, &s, "srv", ServerState::Connected).await?;
    let a = st.artifact.clone().unwrap_or_else(|| unreachable!());
    let pinned = a.pinned.clone().ok_or_else(|| anyhow::anyhow!("nothing recorded: {a:#?}"))?;
    assert_eq!((pinned.kind, pinned.version.as_deref()), (ArtifactKind::Npm, Some("1.0.0")));
    assert!(pinned.digest.starts_with("sha512-") && a.first_use, "{a:#?}");
    assert!(markers.join("v100").exists());

    // 1.0.1 is published and tagged latest: the server still runs the recorded 1.0.0.
    registry.publish(&root, "1.0.1", "v101", true)?;
    client.mcp_restart(server(&s, "srv")).await?;
    reaches(&client, &s, "srv", ServerState::Connected).await?;
    assert!(!markers.join("v101").exists(), "1.0.1 ran over the recorded 1.0.0");

    // The entry asks for 1.0.1: held before it runs; review says 1.0.0 → 1.0.1.
    write_user_settings(&home, entry("fixture-srv@1.0.1"))?;
    let st = reaches(&client, &s, "srv", ServerState::Blocked).await?;
    assert!(!markers.join("v101").exists(), "1.0.1 ran before it was accepted");
    let a = st.artifact.unwrap_or_else(|| unreachable!());
    assert_eq!(a.differs.as_ref().and_then(|d| d.version.as_deref()), Some("1.0.1"), "{a:#?}");
    let (code, out, err) = home.gemctl_run(&["mcp", "review", "srv"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("fixture-srv 1.0.0") && out.contains("fixture-srv 1.0.1"), "{out}");
    assert!(out.contains("published: 2026-12-07T21:02:00.000Z"), "{out}");
    accept(&client, &s, "srv").await?;
    reaches(&client, &s, "srv", ServerState::Connected).await?;
    assert!(markers.join("v101").exists(), "the accepted 1.0.1 did not run");

    // 1.0.1 is unpublished and published again with other bytes; npx's cache is gone (a new
    // machine, a cleaned cache): held, and the new bytes never ran.
    registry.publish(&root, "1.0.1", "evil", true)?;
    std::fs::remove_dir_all(&cache)?;
    client.mcp_restart(server(&s, "srv")).await?;
    let st = reaches(&client, &s, "srv", ServerState::Blocked).await?;
    assert!(!markers.join("evil").exists(), "the republished 1.0.1 ran");
    let a = st.artifact.unwrap_or_else(|| unreachable!());
    let (old, new) =
        (a.pinned.unwrap_or_else(|| unreachable!()), a.differs.unwrap_or_else(|| unreachable!()));
    assert_eq!((old.version, new.version.clone()), (Some("1.0.1".into()), Some("1.0.1".into())));
    assert_ne!(old.digest, new.digest);
    drop(daemon);
    Ok(())
}
