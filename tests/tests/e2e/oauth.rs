//! OAuth with the real daemon and gemctl against the fixture's OAuth mode (a protected MCP
//! server and its authorization server on 127.0.0.1, `tests/src/fixture/oauth.rs`), signed in
//! headlessly through `$BROWSER` set to a helper that follows the redirect.

use std::time::Duration;

use geminid_protocol::api::{McpApiClient, ToolsApiClient};
use geminid_protocol::mcp::{ListServersParams, ServerState, ServerStatus, StartParams};
use geminid_protocol::tools::ToolsCallParams;
use geminid_tests::mcp::{FAST, NetFixture, Setup, fixture, new_session, write_user_settings};
use geminid_tests::{Daemon, TestHome, eventually};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(15);
const TOKEN_PREFIX: &str = "geminid-test-token-";

/// The fixture's OAuth site and the daemon that uses it.
struct Site {
    fx: NetFixture,
    base: String,
    http: reqwest::Client,
}

impl Site {
    fn start() -> anyhow::Result<Self> {
        let fx = NetFixture::start("--http", &["--oauth"])?;
        let base = fx.url.trim_end_matches("/mcp").to_owned();
        Ok(Self { fx, base, http: reqwest::Client::new() })
    }

    async fn control(&self, v: Value) -> anyhow::Result<()> {
        self.http.post(format!("{}/control", self.base)).body(v.to_string()).send().await?;
        Ok(())
    }

    async fn counts(&self) -> anyhow::Result<Value> {
        Ok(self.http.get(format!("{}/control", self.base)).send().await?.json().await?)
    }
}

fn count(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// Everything shown to anyone: outputs, logs; a test token in any of it is a leak.
#[derive(Default)]
struct Shown(String);

impl Shown {
    fn add(&mut self, s: &str) {
        self.0.push_str(s);
        self.0.push('\n');
    }
}

/// `gemctl --session S ARGS` with `$BROWSER` set to the helper: (code, stdout, stderr).
fn gemctl(
    home: &TestHome,
    session: &str,
    args: &[&str],
    shown: &mut Shown,
) -> anyhow::Result<(i32, String, String)> {
    let mut all = vec!["--session", session];
    all.extend_from_slice(args);
    user(home, &all, shown)
}

/// `gemctl ARGS` as the user types it in the workspace (its default session, which nobody
/// stays attached to), with `$BROWSER` set to the helper: (code, stdout, stderr).
fn user(
    home: &TestHome,
    args: &[&str],
    shown: &mut Shown,
) -> anyhow::Result<(i32, String, String)> {
    let out = home
        .gemctl_cmd(args)
        .env("BROWSER", format!("{} --browser", fixture()))
        .env_remove("OAUTH_CALLBACK_PORT")
        .output()?;
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    shown.add(&o);
    shown.add(&e);
    Ok((out.status.code().unwrap_or(-1), o, e))
}

async fn server(s: &Setup, name: &str) -> anyhow::Result<ServerStatus> {
    let list = s
        .client
        .mcp_list_servers(Some(ListServersParams {
            session: Some(s.session.clone()),
            usage: false,
        }))
        .await?;
    list.servers
        .into_iter()
        .find(|x| x.name == name)
        .ok_or_else(|| anyhow::anyhow!("no server {name}"))
}

fn echo(session: &str, text: &str) -> ToolsCallParams {
    ToolsCallParams {
        session: session.to_owned(),
        name: "mcp_remote_echo".into(),
        args: json!({ "text": text }).as_object().cloned(),
        call_id: None,
        confirmed: false,
    }
}

#[tokio::test]
async fn a_headless_sign_in_connects_and_one_refresh_serves_fifty_calls() -> anyhow::Result<()> {
    let site = Site::start()?;
    let s = Setup::new(json!({ "remote": { "httpUrl": site.fx.url } })).await?;
    // Trusted for good, not through the session's environment: gemctl's own (which has no
    // GEMINI_CLI_TRUST_WORKSPACE) may be what a later request is judged by.
    anyhow::ensure!(s.home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let mut shown = Shown::default();
    let started =
        s.client.mcp_start(StartParams { session: s.session.clone(), wait: true }).await?.servers;
    let remote = started.iter().find(|x| x.name == "remote").cloned();
    let remote = remote.ok_or_else(|| anyhow::anyhow!("{started:?}"))?;
    assert_eq!(remote.state, ServerState::NeedsAuth, "{remote:?}");
    let why = remote.last_error.clone().unwrap_or_default();
    assert!(why.contains("gemctl mcp auth remote"), "the error names the fix: {why}");

    let (code, out, err) = gemctl(&s.home, &s.session, &["mcp", "auth", "remote"], &mut shown)?;
    assert_eq!(code, 0, "{out}{err}");
    for step in [
        "discovering",
        "registered as a new client",
        "waiting for the browser",
        "exchanging the code",
        "reconnecting",
        "signed in and connected",
    ] {
        assert!(err.contains(step), "step {step:?} shown: {err}");
    }
    assert!(out.contains("/as/authorize?"), "the URL is printed: {out}");
    let sent = site.counts().await?["lastAuthorize"].clone();
    assert_eq!(sent["code_challenge_method"], "S256");
    assert_eq!(sent["resource"], json!(site.fx.url));
    assert_eq!(sent["scope"], "mcp", "the challenge's scope");
    assert!(sent["redirect_uri"].as_str().unwrap_or_default().starts_with("http://127.0.0.1:"));
    assert_eq!(server(&s, "remote").await?.state, ServerState::Connected);
    let r = s.client.tools_call(echo(&s.session, "hi")).await?;
    assert_eq!(r.display, "hi");

    let status = s.home.gemctl_json(&["--session", &s.session, "mcp", "auth", "--status"])?;
    shown.add(&status.to_string());
    let row = &status["servers"][0];
    assert_eq!((row["name"].as_str(), row["state"].as_str()), (Some("remote"), Some("signed-in")));
    assert_eq!(row["issuer"], json!(format!("{}/as", site.base)));
    assert_eq!(row["refreshable"], true);
    assert!(status["storage"].as_str().unwrap_or_default().contains("secrets.json"), "{status}");

    // Every access token refused at once (mid-session): 50 calls in flight, one refresh.
    site.control(json!({ "revoke": true, "expiresIn": 301 })).await?;
    let calls = (0..50).map(|i| s.client.tools_call(echo(&s.session, &format!("n{i}"))));
    for (i, r) in futures::future::join_all(calls).await.into_iter().enumerate() {
        assert_eq!(r?.display, format!("n{i}"));
    }
    let counts = site.counts().await?;
    assert_eq!(
        count(&counts, "refreshes"),
        1,
        "exactly one refresh for 50 refused calls: {counts}"
    );
    // That token (301 s) is within the 5-minute margin a second later: refreshed before use,
    // once for 50 calls.
    site.control(json!({ "expiresIn": 3600 })).await?;
    // Until it is within the margin by the expiry the daemon holds (the same wall clock).
    let status = s.home.gemctl_json(&["--session", &s.session, "mcp", "auth", "--status"])?;
    let expires = status["servers"][0]["expiresAtMs"].as_u64();
    let expires = expires.ok_or_else(|| anyhow::anyhow!("no expiry: {status}"))?;
    let now_ms = || {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    };
    let due = eventually(WAIT, || async { now_ms() + 5 * 60 * 1000 >= expires }).await;
    assert!(due, "the token never came within the margin: {status}");
    let calls = (0..50).map(|i| s.client.tools_call(echo(&s.session, &format!("m{i}"))));
    for r in futures::future::join_all(calls).await {
        r?;
    }
    let counts = site.counts().await?;
    assert_eq!(count(&counts, "refreshes"), 2, "one proactive refresh: {counts}");
    assert_eq!(count(&counts, "refused"), 0, "a rotated refresh token is never sent twice");

    // A refresh the server refuses: the token is removed and the server needs a sign-in,
    // saying how.
    site.control(json!({ "revoke": true, "fail": "refresh" })).await?;
    let r = s.client.tools_call(echo(&s.session, "x")).await;
    shown.add(&format!("{r:?}"));
    let needs =
        || async { server(&s, "remote").await.is_ok_and(|x| x.state == ServerState::NeedsAuth) };
    assert!(eventually(WAIT, needs).await, "{:?}", server(&s, "remote").await);
    let st = server(&s, "remote").await?;
    let why = st.last_error.clone().unwrap_or_default();
    assert!(why.contains("gemctl mcp auth remote") && why.contains("invalid_grant"), "{why}");
    let (_, out, _) = gemctl(&s.home, &s.session, &["mcp", "auth", "--status"], &mut shown)?;
    assert!(out.contains("remote: not signed in"), "{out}");

    // Signed in again, then out: the server needs a sign-in once more.
    site.control(json!({ "fail": null })).await?;
    let (code, out, err) = gemctl(&s.home, &s.session, &["mcp", "auth", "remote"], &mut shown)?;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = gemctl(&s.home, &s.session, &["mcp", "logout", "remote"], &mut shown)?;
    assert_eq!(code, 0);
    assert!(out.contains("Signed out of 'remote'"), "{out}");
    assert_eq!(server(&s, "remote").await?.state, ServerState::NeedsAuth);

    // No token anywhere anyone sees: outputs, the daemon's log, the server's log, and the
    // secrets file keeps them hex-encoded.
    let (_, logs, _) = gemctl(&s.home, &s.session, &["mcp", "logs", "remote"], &mut shown)?;
    assert!(logs.contains("401"), "{logs}");
    shown.add(&s.daemon.log());
    let secrets = std::fs::read_to_string(s.home.data_dir().join("secrets.json"))?;
    shown.add(&secrets);
    assert!(!shown.0.contains(TOKEN_PREFIX), "a test token was shown");
    Ok(())
}

#[tokio::test]
async fn a_sign_in_that_goes_wrong_says_why_and_stores_nothing() -> anyhow::Result<()> {
    let site = Site::start()?;
    let s = Setup::with_args(
        json!({ "remote": { "httpUrl": site.fx.url } }),
        &["--oauth-timeout", "1s"],
    )
    .await?;
    anyhow::ensure!(s.home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    // Gemini CLI's token file, readable by others: not imported, and said how to fix.
    let gemini_tokens = s.home.root().join("home/.gemini/mcp-oauth-tokens.json");
    std::fs::write(&gemini_tokens, "[]")?;
    std::fs::set_permissions(&gemini_tokens, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    s.client.mcp_start(StartParams { session: s.session.clone(), wait: true }).await?;
    let mut shown = Shown::default();
    let (_, out, _) = gemctl(&s.home, &s.session, &["mcp", "auth", "--status"], &mut shown)?;
    let fix = format!("`chmod 600 {}` fixes it", gemini_tokens.display());
    assert!(out.contains(&fix) && out.contains("remote: not signed in"), "{out}");
    let cases = [
        ("as-down", "no OAuth metadata found"),
        (
            "register",
            "client registration failed: the authorization server answered invalid_client_metadata: registration is closed",
        ),
        ("state", "state is not this sign-in's"),
        ("iss", "comes from issuer \"http://evil.example/as\""),
        ("error", "answered access_denied: the user said no"),
        ("never", "nobody finished signing in within 1s"),
        ("token-html", "answered 200 with text/html, not a token"),
        ("token-500", "could not be reached"),
        ("resource", "protected-resource metadata is for https://elsewhere.example/mcp"),
    ];
    for (mode, expected) in cases {
        site.control(json!({ "fail": mode })).await?;
        let (code, out, err) = gemctl(&s.home, &s.session, &["mcp", "auth", "remote"], &mut shown)?;
        assert_ne!(code, 0, "{mode}: {out}{err}");
        assert!(err.contains(expected), "{mode}: expected {expected:?} in: {err}");
        let status = s.home.gemctl_json(&["--session", &s.session, "mcp", "auth", "--status"])?;
        assert_eq!(status["servers"][0]["state"], "none", "{mode}: nothing stored: {status}");
    }
    // Fixed, it works, on the port OAUTH_CALLBACK_PORT names.
    site.control(json!({ "fail": null })).await?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let out = s
        .home
        .gemctl_cmd(&["--session", &s.session, "mcp", "auth", "remote"])
        .env("BROWSER", format!("{} --browser", fixture()))
        .env("OAUTH_CALLBACK_PORT", port.to_string())
        .output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let sent = site.counts().await?["lastAuthorize"].clone();
    assert_eq!(sent["redirect_uri"], json!(format!("http://127.0.0.1:{port}/oauth/callback")));
    let bad = s
        .home
        .gemctl_cmd(&["--session", &s.session, "mcp", "auth", "remote"])
        .env("OAUTH_CALLBACK_PORT", "http")
        .output()?;
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a port number"));
    // A name that is not a remote server.
    let (code, _, err) = gemctl(&s.home, &s.session, &["mcp", "auth", "nope"], &mut shown)?;
    assert!(code != 0 && err.contains("no remote MCP server named 'nope'"), "{err}");
    shown.add(&s.daemon.log());
    assert!(!shown.0.contains(TOKEN_PREFIX), "a test token was shown");
    Ok(())
}

/// A sign-in holds a loopback listener until the browser comes back, so there is one per server
/// at a time and it lasts only as long as the client that began it (issue 64, item 13; issue
/// 63, C16): a second `auth/begin` ends the first, whose listener is closed by the time the
/// second answers; a client that goes (Ctrl-C on `gemctl mcp auth`) takes its listener along.
/// Each sign-in used to keep its listener for the whole browser timeout: 1,100 of them ran the
/// daemon out of descriptors.
#[tokio::test]
async fn one_sign_in_per_server_and_it_goes_with_its_client() -> anyhow::Result<()> {
    use geminid_protocol::api::AuthApiClient;
    use geminid_protocol::auth::{AuthBeginParams, AuthProgressParams, AuthStep};
    let site = Site::start()?;
    let s = Setup::new(json!({ "remote": { "httpUrl": site.fx.url } })).await?;
    anyhow::ensure!(s.home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let begin = || AuthBeginParams {
        session: s.session.clone(),
        name: "remote".into(),
        callback_port: None,
    };
    let listening = |redirect: &str| {
        let at = redirect.trim_start_matches("http://").split('/').next().unwrap_or_default();
        std::net::TcpStream::connect(at).is_ok()
    };
    let failed = |attempt: String| {
        let client = &s.client;
        async move {
            let mut after = 0;
            loop {
                let p = client
                    .auth_progress(AuthProgressParams { attempt: attempt.clone(), after })
                    .await?;
                if p.step.is_done() {
                    anyhow::ensure!(p.step == AuthStep::Failed, "{p:?}");
                    return anyhow::Ok(p.message.unwrap_or_default());
                }
                after = p.seq;
            }
        }
    };

    let first = s.client.auth_begin(begin()).await?;
    assert!(listening(&first.redirect_uri), "{first:?}");
    let second = s.client.auth_begin(begin()).await?;
    assert!(!listening(&first.redirect_uri), "the replaced sign-in still listens");
    assert!(listening(&second.redirect_uri), "{second:?}");
    let why = failed(first.attempt.clone()).await?;
    assert!(why.contains("a newer sign-in to this server began"), "{why}");

    // A client that began a sign-in and went: its listener closes, and the sign-in says why.
    let other = s.daemon.client().await?;
    let third = other.auth_begin(begin()).await?;
    assert!(!listening(&second.redirect_uri), "the replaced sign-in still listens");
    drop(other);
    let why = failed(third.attempt.clone()).await?;
    assert!(why.contains("the client that began this sign-in went away"), "{why}");
    assert!(!listening(&third.redirect_uri), "the sign-in of a client that went still listens");
    Ok(())
}

#[tokio::test]
async fn a_server_behind_a_header_has_nothing_to_sign_in_to() -> anyhow::Result<()> {
    // A plain server (no OAuth anywhere), reached with a static Authorization header, and the
    // same server without one.
    let fx = NetFixture::start("--http", &[])?;
    let s = Setup::with_args(
        json!({
            "notes": { "httpUrl": fx.url, "headers": { "Authorization": "Bearer static-token" } },
            "bare": { "httpUrl": fx.url }
        }),
        &[],
    )
    .await?;
    anyhow::ensure!(s.home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let mut shown = Shown::default();
    // Status says the header is how it authenticates, not "not signed in" (audit C14).
    let (_, out, _) = gemctl(&s.home, &s.session, &["mcp", "auth", "--status"], &mut shown)?;
    assert!(
        out.contains("notes: sends the Authorization header its settings give (no sign-in)"),
        "{out}"
    );
    assert!(out.contains("bare: not signed in"), "{out}");
    // Once it has connected without a token, it needs no sign-in (issue 63, C16).
    s.client.mcp_start(StartParams { session: s.session.clone(), wait: true }).await?;
    let (_, out, _) = gemctl(&s.home, &s.session, &["mcp", "auth", "--status"], &mut shown)?;
    assert!(out.contains("bare: needs no sign-in (it connected without one)"), "{out}");
    let (code, _, err) = gemctl(&s.home, &s.session, &["mcp", "auth", "notes"], &mut shown)?;
    assert_ne!(code, 0);
    assert!(
        err.contains("no OAuth metadata found") && err.contains("nothing to sign in to"),
        "{err}"
    );
    let (code, _, err) = gemctl(&s.home, &s.session, &["mcp", "auth", "bare"], &mut shown)?;
    assert_ne!(code, 0);
    assert!(err.contains("`oauth.authorizationUrl` and `oauth.tokenUrl`"), "{err}");
    assert!(!shown.0.contains("static-token"), "the header's token was shown");
    Ok(())
}

/// Waits until the server `name` runs for no session, kept warm: a one-shot gemctl's session
/// lets go of its servers when the daemon sees its connection close, a moment after gemctl
/// exits, and a person's next command comes after that.
async fn kept_warm_unused(daemon: &Daemon, name: &str) -> anyhow::Result<()> {
    let client = daemon.client().await?;
    let all = || ListServersParams { session: None, usage: false };
    let unused = || async {
        let listed = client.mcp_list_servers(Some(all())).await;
        listed.is_ok_and(|l| l.servers.iter().any(|s| s.name == name && s.sessions.is_empty()))
    };
    let ok = eventually(WAIT, unused).await;
    anyhow::ensure!(ok, "{name} still used: {:?}", client.mcp_list_servers(Some(all())).await);
    Ok(())
}

/// The first hour in the user's order (audit B3): `gemctl mcp start` leaves the server waiting
/// in needs-auth, `gemctl mcp auth` signs in, and a call then works; each step a one-shot
/// gemctl of the workspace's default session, which nobody stays attached to, with servers
/// kept warm as the daemon's default does. The same order holds when another session started
/// the server (`mcp/start`) and across a daemon restart.
#[tokio::test]
async fn the_first_hour_start_then_sign_in_then_call() -> anyhow::Result<()> {
    let site = Site::start()?;
    let home = TestHome::allowing_mcp()?;
    write_user_settings(&home, json!({ "remote": { "httpUrl": site.fx.url } }))?;
    // FAST's supervision, but servers kept warm for the session's idle hours, as by default.
    let mut args: Vec<&str> =
        FAST.chunks(2).filter(|flag| flag[0] != "--mcp-linger").flatten().copied().collect();
    args.extend(["--mcp-linger", "1h"]);
    let mut daemon = Daemon::start(&home, &args).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let mut shown = Shown::default();
    let call = ["call", "mcp_remote_echo", r#"{"text": "first hour"}"#];

    // start (needs-auth) → sign in → call.
    let (_, out, err) = user(&home, &["mcp", "start"], &mut shown)?;
    assert!(out.contains("gemctl mcp auth remote"), "needs a sign-in, and says how: {out}{err}");
    kept_warm_unused(&daemon, "remote").await?;
    let (code, out, err) = user(&home, &["mcp", "auth", "remote"], &mut shown)?;
    assert_eq!(code, 0, "signing in to a server waiting in needs-auth: {out}{err}");
    assert!(err.contains("signed in and connected"), "{err}");
    let (code, out, err) = user(&home, &call, &mut shown)?;
    assert_eq!((code, out.trim()), (0, "first hour"), "{err}");

    // Signed out, the warm server needs a sign-in again at once (not its old token).
    kept_warm_unused(&daemon, "remote").await?;
    let (code, out, err) = user(&home, &["mcp", "logout", "remote"], &mut shown)?;
    assert_eq!(code, 0, "{out}{err}");
    let all = daemon.client().await?.mcp_list_servers(Some(ListServersParams::default())).await?;
    let remote = all.servers.iter().find(|x| x.name == "remote").map(|x| x.state);
    assert_eq!(remote, Some(ServerState::NeedsAuth), "signed out: {all:?}");
    let (code, _, err) = user(&home, &call, &mut shown)?;
    assert!(code != 0 && err.contains("gemctl mcp auth remote"), "after logout: {err}");

    // Another session (attached, as an editor's) started it: the sign-in from here serves both.
    let client = daemon.client().await?;
    let other = new_session(&client, &home).await?;
    let started = client.mcp_start(StartParams { session: other.clone(), wait: true }).await?;
    let remote = started.servers.iter().find(|x| x.name == "remote").map(|x| x.state);
    assert_eq!(remote, Some(ServerState::NeedsAuth), "{started:?}");
    let (code, out, err) = user(&home, &["mcp", "auth", "remote"], &mut shown)?;
    assert_eq!(code, 0, "signing in to a server another session waits on: {out}{err}");
    assert_eq!(client.tools_call(echo(&other, "there")).await?.display, "there");
    let (code, out, err) = user(&home, &call, &mut shown)?;
    assert_eq!((code, out.trim()), (0, "first hour"), "{err}");
    let (code, out, err) = user(&home, &["mcp", "logout", "remote"], &mut shown)?;
    assert_eq!(code, 0, "{out}{err}");
    drop(client);

    // After a daemon restart (the warm server comes back needing a sign-in): the same order.
    daemon.signal(nix::sys::signal::Signal::SIGTERM)?;
    daemon.wait_exit(WAIT).await?;
    let daemon = Daemon::start(&home, &args).await?;
    let (_, out, err) = user(&home, &["mcp", "start"], &mut shown)?;
    assert!(out.contains("gemctl mcp auth remote"), "needs a sign-in, and says how: {out}{err}");
    kept_warm_unused(&daemon, "remote").await?;
    let (code, out, err) = user(&home, &["mcp", "auth", "remote"], &mut shown)?;
    assert_eq!(code, 0, "signing in after a daemon restart: {out}{err}");
    let (code, out, err) = user(&home, &call, &mut shown)?;
    assert_eq!((code, out.trim()), (0, "first hour"), "{err}");

    shown.add(&daemon.log());
    assert!(!shown.0.contains(TOKEN_PREFIX), "a test token was shown");
    Ok(())
}

/// With telemetry on, a server waiting for a sign-in ends its start span as `needs_auth`,
/// and each token refresh is a span of its own saying how it ended (`refreshed`, then one
/// the authorization server refuses, `invalid_grant`), with no token in any attribute.
#[tokio::test]
async fn a_token_refresh_is_a_span_of_its_own() -> anyhow::Result<()> {
    use super::telemetry_spans::{named, settings};
    let receiver = geminid_tests::otlp::Receiver::start().await?;
    let site = Site::start()?;
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "remote": { "httpUrl": site.fx.url } }), &receiver.endpoint)?;
    let daemon = Daemon::start(&home, FAST).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    let started = client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
    assert!(started.servers.iter().all(|x| x.state == ServerState::NeedsAuth), "{started:?}");
    let mut shown = Shown::default();
    let (code, out, err) = gemctl(&home, &session, &["mcp", "auth", "remote"], &mut shown)?;
    assert_eq!(code, 0, "{out}{err}");
    site.control(json!({ "revoke": true })).await?;
    assert_eq!(client.tools_call(echo(&session, "after")).await?.display, "after");
    site.control(json!({ "revoke": true, "fail": "refresh" })).await?;
    let _ = client.tools_call(echo(&session, "refused")).await;

    let refreshes =
        |r: &geminid_tests::otlp::Receiver| named(&r.spans(), "token refresh remote").len() >= 2;
    assert!(receiver.until(WAIT, refreshes).await, "{:#?}", receiver.spans());
    let spans = receiver.spans();
    let attr = |s: &geminid_tests::otlp::Span, k: &str| s.attributes.get(k).cloned();
    let refresh = named(&spans, "token refresh remote");
    let outcomes: Vec<_> =
        refresh.iter().map(|s| attr(s, "geminid.oauth.refresh.outcome")).collect();
    assert_eq!(
        outcomes,
        [Some("refreshed".to_owned()), Some("invalid_grant".to_owned())],
        "{refresh:#?}"
    );
    assert_eq!(attr(refresh[1], "error.type").as_deref(), Some("invalid_grant"));
    assert!(refresh.iter().all(|s| s.parent.is_empty()), "traces of their own: {refresh:#?}");
    assert!(refresh.iter().all(|s| attr(s, "mcp.server.name").as_deref() == Some("remote")));
    let start = named(&spans, "start remote");
    let waited = start.iter().any(|s| attr(s, "error.type").as_deref() == Some("needs_auth"));
    assert!(waited, "the first start waited for a sign-in: {start:#?}");
    for s in &spans {
        shown.add(&format!("{:?}", s.attributes));
    }
    assert!(!shown.0.contains(TOKEN_PREFIX), "a test token was shown");
    Ok(())
}
