//! Secrets as users keep them: through a real Secret Service (GNOME Keyring on a private bus)
//! where there is one, and in the 0600 file where there is none or it hangs, with the daemon
//! coming up every time (it used to panic at start inside tokio half the time on a machine
//! without a Secret Service once an extension was installed).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use geminid_tests::keyring::{SecretService, available};
use geminid_tests::{Daemon, TestHome};
use serde_json::{Value, json};

/// An extension folder `src/<name>` with a manifest and a context file.
fn make(home: &TestHome, name: &str) -> anyhow::Result<PathBuf> {
    let dir = home.root().join("src").join(name);
    std::fs::create_dir_all(&dir)?;
    let manifest = json!({"name": name, "version": "1.0.0", "contextFileName": "GEMINI.md"});
    std::fs::write(dir.join("gemini-extension.json"), manifest.to_string())?;
    std::fs::write(dir.join("GEMINI.md"), format!("{name} helps.\n"))?;
    Ok(dir)
}

fn install(home: &TestHome, dir: &Path) -> anyhow::Result<()> {
    let (code, out, err) =
        home.gemctl_run(&["extensions", "install", &dir.display().to_string(), "--consent"])?;
    anyhow::ensure!(code == 0, "install {}: {out}{err}", dir.display());
    Ok(())
}

/// Each installed extension's (name, whether it loads).
fn loaded(home: &TestHome) -> anyhow::Result<Vec<(String, bool)>> {
    let v = home.gemctl_json(&["extensions", "list"])?;
    let all = v["extensions"].as_array().cloned().unwrap_or_default();
    Ok(all
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap_or_default().to_owned();
            (name, e["integrity"] == "verified" && e["active"] == true)
        })
        .collect())
}

/// `gemctl doctor`'s finding about the secrets store.
fn secrets_finding(home: &TestHome) -> anyhow::Result<Value> {
    let (_, out, err) = home.gemctl_run(&["--json", "doctor"])?;
    let v: Value = serde_json::from_str(&out).map_err(|e| anyhow::anyhow!("{e}: {out}{err}"))?;
    v["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["check"] == "secrets").cloned())
        .ok_or_else(|| anyhow::anyhow!("no secrets finding: {v}"))
}

/// With a Secret Service, the integrity key lives in the keyring (no key file, no credentials
/// file, no secrets file), and a restarted daemon verifies with it.
#[tokio::test]
async fn the_integrity_key_goes_through_a_real_secret_service() -> anyhow::Result<()> {
    let mut home = TestHome::new()?;
    if !available()? {
        return Ok(());
    }
    let service = SecretService::start(home.root())?;
    home.set_session_bus(service.address());
    let daemon = Daemon::start(&home, &[]).await?;
    let finding = secrets_finding(&home)?;
    assert_eq!(finding["status"], "ok", "{finding}");
    assert!(finding["message"].as_str().unwrap_or_default().contains("OS keyring"), "{finding}");
    install(&home, &make(&home, "alpha")?)?;
    install(&home, &make(&home, "beta")?)?;
    for file in ["home/.gemini/integrity.key", "home/.gemini/gemini-credentials.json"] {
        assert!(!home.root().join(file).exists(), "{file} was written: the key left the keyring");
    }
    assert!(!home.data_dir().join("secrets.json").exists(), "secrets.json was written");
    drop(daemon);
    let daemon = Daemon::start(&home, &[]).await?;
    let got = loaded(&home)?;
    assert_eq!(got, [("alpha".to_owned(), true), ("beta".to_owned(), true)], "{}", daemon.log());
    assert!(!daemon.log().contains("panicked"), "{}", daemon.log());
    Ok(())
}

/// No Secret Service (no bus at all, as on a server or in CI): with five extensions
/// installed, 100 starts out of 100 come up, answer, and keep the key in Gemini CLI's file.
#[tokio::test]
async fn without_a_secret_service_every_start_comes_up() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    {
        let _daemon = Daemon::start(&home, &[]).await?;
        for i in 0..5 {
            install(&home, &make(&home, &format!("ext{i}"))?)?;
        }
        let finding = secrets_finding(&home)?;
        assert_eq!(finding["status"], "warning", "{finding}");
    }
    for start in 0..100 {
        let mut daemon =
            Daemon::start(&home, &[]).await.map_err(|e| anyhow::anyhow!("start {start}: {e}"))?;
        let client = daemon.client().await?;
        drop(client);
        daemon.signal(nix::sys::signal::Signal::SIGTERM)?;
        let status = daemon.wait_exit(Duration::from_secs(10)).await?;
        assert!(status.success(), "start {start} ended {status}: {}", daemon.log());
        assert!(!daemon.log().contains("panicked"), "start {start}: {}", daemon.log());
    }
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(loaded(&home)?.iter().all(|(_, ok)| *ok), "{:?}", loaded(&home)?);
    Ok(())
}

/// A session bus that accepts and never answers (a hung D-Bus): the daemon decides "no
/// keyring" within the probe's 2 s, starts, and says why.
#[tokio::test]
async fn a_hung_session_bus_means_the_file_within_seconds() -> anyhow::Result<()> {
    let mut home = TestHome::new()?;
    let socket = home.root().join("hung-bus");
    let listener = std::os::unix::net::UnixListener::bind(&socket)?;
    let (done, until_done) = std::sync::mpsc::channel::<()>();
    let held = std::thread::spawn(move || {
        // Accept and hold every connection, answering nothing.
        let mut kept = Vec::new();
        for conn in listener.incoming().take(4) {
            kept.push(conn);
        }
        // Until the test ends (its end drops the sender).
        let _ = until_done.recv();
    });
    home.set_session_bus(&format!("unix:path={}", socket.display()));
    install_one_and_restart(&home).await?;
    drop((done, held));
    Ok(())
}

async fn install_one_and_restart(home: &TestHome) -> anyhow::Result<()> {
    let started = Instant::now();
    let daemon = Daemon::start(home, &[]).await?;
    install(home, &make(home, "solo")?)?;
    let finding = secrets_finding(home)?;
    assert_eq!(finding["status"], "warning", "{finding}");
    assert!(
        finding["message"].as_str().unwrap_or_default().contains("did not answer"),
        "{finding}"
    );
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
    drop(daemon);
    let started = Instant::now();
    let daemon = Daemon::start(home, &[]).await?;
    assert_eq!(loaded(home)?, [("solo".to_owned(), true)], "{}", daemon.log());
    assert!(started.elapsed() < Duration::from_secs(6), "took {:?}", started.elapsed());
    Ok(())
}

/// With a Secret Service, an OAuth sign-in keeps its token in the keyring (no secrets file),
/// and a restarted daemon connects with it without signing in again.
#[tokio::test]
async fn an_oauth_token_goes_through_a_real_secret_service() -> anyhow::Result<()> {
    use geminid_protocol::api::{McpApiClient, SessionApiClient};
    use geminid_protocol::mcp::{ServerState, StartParams};
    use geminid_protocol::session::SessionCreateParams;
    use geminid_tests::mcp::{FAST, NetFixture, shell_env, write_user_settings};
    let mut home = TestHome::new()?;
    if !available()? {
        return Ok(());
    }
    let service = SecretService::start(home.root())?;
    home.set_session_bus(service.address());
    let site = NetFixture::start("--http", &["--oauth"])?;
    write_user_settings(&home, json!({ "remote": { "httpUrl": site.url } }))?;
    let connect = |daemon: Daemon| {
        let home = &home;
        async move {
            let client = daemon.client().await?;
            let s = client
                .create(SessionCreateParams {
                    workspace: home.workspace().display().to_string(),
                    env: Some(shell_env(home, &[])),
                    reuse_default: false,
                    ..Default::default()
                })
                .await?;
            let started =
                client.mcp_start(StartParams { session: s.id.clone(), wait: true }).await?;
            let state = started.servers.iter().find(|x| x.name == "remote").map(|x| x.state);
            anyhow::Ok((daemon, client, s.id, state))
        }
    };
    let (daemon, client, session, state) = connect(Daemon::start(&home, FAST).await?).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    assert_eq!(state, Some(ServerState::NeedsAuth));
    geminid_tests::oauth::sign_in(&client, &session, "remote").await?;
    assert!(!home.data_dir().join("secrets.json").exists(), "the token went to the file");
    drop(client);
    drop(daemon);
    let (_daemon, _client, _, state) = connect(Daemon::start(&home, FAST).await?).await?;
    assert_eq!(state, Some(ServerState::Connected), "the token was not read back");
    Ok(())
}
