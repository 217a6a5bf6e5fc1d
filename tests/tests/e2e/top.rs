//! `gemctl top` and what the daemon gives it, in the world a user has (no policy of the tests'
//! own, the default secrets store): `calls/list` and `calls/cancel`, `mcp/stop`, servers' usage
//! over the socket; and `top` itself driven in tmux (send-keys, capture-pane) against a real
//! daemon with real servers: a killed server shows its restart, keys stop and start it, a
//! confirmation answered in `top` lets the call through, a cancelled call ends, and the
//! terminal is given back after `q` and after the daemon stops.

use std::time::Duration;

use geminid_protocol::api::{CallsApiClient, McpApiClient, SessionApiClient, ToolsApiClient};
use geminid_protocol::asks::{AskKind, AsksListenParams};
use geminid_protocol::calls::{CallsCancelParams, CallsListParams};
use geminid_protocol::client::Client;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::mcp::{
    ListServersParams, ServerParams, ServerState, ServerStatus, StartParams,
};
use geminid_protocol::session::{SessionDeriveParams, SessionUpdateParams};
use geminid_protocol::tools::{ToolsCallParams, ToolsCallResult};
use geminid_tests::mcp::{FAST, new_session, stdio, write_user_settings};
use geminid_tests::tmux::Tmux;
use geminid_tests::{Daemon, TestHome, eventually};
use jsonrpsee::core::client::Error as ClientError;
use nix::sys::signal::Signal;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(15);

/// A daemon in a new user's home (no policy of its own) whose settings hold `servers`, a
/// client attached to a session of its workspace, and that session's servers started.
struct World {
    home: TestHome,
    daemon: Daemon,
    client: Client,
    session: String,
}

impl World {
    async fn new(servers: serde_json::Value, interactive: bool) -> anyhow::Result<World> {
        Self::with(servers, interactive, &[]).await
    }

    /// [`World::new`], the daemon started with `extra` arguments too.
    async fn with(
        servers: serde_json::Value,
        interactive: bool,
        extra: &[&str],
    ) -> anyhow::Result<World> {
        let home = TestHome::new()?;
        write_user_settings(&home, servers)?;
        let daemon = Daemon::start(&home, &[FAST, extra].concat()).await?;
        let client = daemon.client().await?;
        let session = new_session(&client, &home).await?;
        if interactive {
            let p = SessionUpdateParams {
                id: session.clone(),
                interactive: Some(true),
                ..Default::default()
            };
            client.update(p).await?;
        }
        client.mcp_start(StartParams { session: session.clone(), wait: true }).await?;
        Ok(World { home, daemon, client, session })
    }

    async fn running(&self, usage: bool) -> anyhow::Result<Vec<ServerStatus>> {
        let p = ListServersParams { session: None, usage };
        Ok(self.client.mcp_list_servers(Some(p)).await?.servers)
    }

    async fn server(&self, name: &str) -> anyhow::Result<Option<ServerStatus>> {
        Ok(self.running(true).await?.into_iter().find(|s| s.name == name))
    }

    fn call(&self, tool: &str, args: serde_json::Value, confirmed: bool) -> ToolsCallParams {
        ToolsCallParams {
            session: self.session.clone(),
            name: tool.to_owned(),
            args: args.as_object().cloned(),
            call_id: None,
            confirmed,
        }
    }
}

fn text_of(r: &ToolsCallResult) -> String {
    r.result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn error_message<T: std::fmt::Debug>(r: Result<T, ClientError>) -> String {
    match r {
        Err(ClientError::Call(e)) => e.message().to_owned(),
        other => format!("not a call error: {other:?}"),
    }
}

#[tokio::test]
async fn usage_counts_calls_and_errors_and_measures_the_process_tree() -> anyhow::Result<()> {
    let w = World::new(json!({ "fx": stdio(["--rich"].as_slice()) }), false).await?;
    let plain = w.running(false).await?;
    assert!(plain.iter().all(|s| s.usage.is_none()), "usage only when asked: {plain:?}");
    for i in 0..3 {
        let r = w
            .client
            .tools_call(w.call("mcp_fx_echo", json!({ "text": i.to_string() }), true))
            .await?;
        assert!(!r.is_error);
    }
    let failed = w.client.tools_call(w.call("mcp_fx_fail", json!({}), true)).await?;
    assert!(failed.is_error, "{failed:?}");
    let u = w.server("fx").await?.and_then(|s| s.usage).expect("fx's usage");
    assert_eq!((u.calls, u.errors), (4, 1), "{u:?}");
    assert_eq!((u.calls_last_minute, u.errors_last_minute), (4, 1), "{u:?}");
    assert!(u.rss_bytes.is_some_and(|b| b > 1 << 20), "the fixture's resident memory: {u:?}");
    assert!(u.cpu_ms.is_some(), "{u:?}");
    // A call policy refuses never reaches the server: not one of its calls.
    let refused = w.client.tools_call(w.call("mcp_fx_echo", json!({ "text": "x" }), false)).await;
    assert!(refused.is_err(), "a headless session's unconfirmed call is denied: {refused:?}");
    let u = w.server("fx").await?.and_then(|s| s.usage).expect("fx's usage");
    assert_eq!(u.calls, 4, "{u:?}");
    Ok(())
}

/// With telemetry on (here only `--metrics-listen`), a server's usage has its calls' median
/// and 99th percentile from `mcp.client.operation.duration`, which `top` shows in its wide
/// columns; with it off, neither.
#[tokio::test]
async fn usage_has_a_servers_p50_and_p99_while_telemetry_is_on() -> anyhow::Result<()> {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.to_string();
    let w = World::with(json!({ "fx": stdio(&[]) }), false, &["--metrics-listen", &addr]).await?;
    for i in 0..5 {
        let r = w
            .client
            .tools_call(w.call("mcp_fx_echo", json!({ "text": i.to_string() }), true))
            .await?;
        assert!(!r.is_error);
    }
    let u = w.server("fx").await?.and_then(|s| s.usage).expect("fx's usage");
    let (p50, p99) = (u.p50_us.expect("p50"), u.p99_us.expect("p99"));
    assert!(p50 > 0 && p50 <= p99 && p99 <= 300_000_000, "{u:?}");
    let out = w.home.gemctl_cmd(&["top", "--once"]).env("COLUMNS", "130").output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" P50 ") && text.contains(" P99 "), "{text}");
    // NAME TRANSPORT STATE PID UP RST TOOLS SES CPU% RSS CALL/S ERR/M P50 P99 ...
    let fx = row(&text, "fx").expect("fx's row");
    let timed = |w: &str| w.ends_with("ms") || w.ends_with("µs") || w.ends_with('s');
    assert!(fx.len() > 13 && timed(fx[12]) && timed(fx[13]), "{text}");

    let off = World::new(json!({ "fx": stdio(&[]) }), false).await?;
    let r = off.client.tools_call(off.call("mcp_fx_echo", json!({ "text": "x" }), true)).await?;
    assert!(!r.is_error);
    let u = off.server("fx").await?.and_then(|s| s.usage).expect("fx's usage");
    assert_eq!((u.calls, u.p50_us, u.p99_us), (1, None, None), "{u:?}");
    Ok(())
}

#[tokio::test]
async fn calls_in_flight_are_listed_with_progress_and_cancelled_by_number() -> anyhow::Result<()> {
    let w = World::new(json!({ "fx": stdio(["--rich"].as_slice()) }), false).await?;
    let client2 = w.daemon.client().await?;
    let slow = w.call("mcp_fx_progress", json!({ "steps": 100, "gap_ms": 100 }), true);
    let call = tokio::spawn(async move { client2.tools_call(slow).await });
    let progressing = geminid_tests::poll(WAIT, || async {
        match w.client.calls_list(None).await {
            Ok(l) => l.calls.into_iter().find(|c| c.progress.is_some()).map(Ok),
            Err(e) => Some(Err(e)),
        }
    });
    let c = progressing
        .await
        .ok_or_else(|| anyhow::anyhow!("the call never showed its progress"))??;
    assert_eq!(
        (c.tool.as_str(), c.server.as_str(), c.origin.as_str()),
        ("mcp_fx_progress", "fx", "tools/call")
    );
    assert_eq!(c.session, w.session);
    assert_eq!(c.call_id, None, "a call without a callId is listed (and cancellable) too");
    let p = c.progress.clone().expect("progress");
    assert_eq!(p.total, Some(100.0));
    assert!(p.message.is_some_and(|m| m.starts_with("step ")));
    let other = CallsListParams { session: Some("no-such-session".into()) };
    assert!(w.client.calls_list(Some(other)).await.is_err(), "an unknown session is an error");
    let mine = CallsListParams { session: Some(w.session.clone()) };
    assert_eq!(w.client.calls_list(Some(mine)).await?.calls.len(), 1);

    assert!(w.client.calls_cancel(CallsCancelParams { id: c.id }).await?.cancelled);
    let ended = tokio::time::timeout(WAIT, call).await??;
    let why = error_message(ended);
    assert!(why.contains("cancelled"), "{why}");
    assert!(w.client.calls_list(None).await?.calls.is_empty());
    assert!(!w.client.calls_cancel(CallsCancelParams { id: c.id }).await?.cancelled, "once");
    Ok(())
}

#[tokio::test]
async fn a_stopped_server_stays_stopped_until_restarted() -> anyhow::Result<()> {
    let w = World::new(json!({ "fx": stdio(&[]) }), false).await?;
    let before = w.server("fx").await?.expect("fx runs");
    let pid = before.pid.expect("a pid");
    let p = ServerParams { session: Some(w.session.clone()), name: "fx".into() };
    let stopped = w.client.mcp_stop(p.clone()).await?;
    assert_eq!(stopped.state, ServerState::Disconnected);
    assert!(w.server("fx").await?.is_none(), "no longer running");
    assert!(eventually(WAIT, || async { !geminid_tests::alive(pid) }).await, "its process is gone");
    // Not started again behind the person's back: not by a call, not after a while.
    let r = w.client.tools_call(w.call("mcp_fx_echo", json!({ "text": "x" }), true)).await;
    let why = error_message(r);
    assert!(why.contains("fx"), "{why}");
    // An hour on the daemon's clock: past every backoff and linger.
    geminid_tests::advance_clock(&w.client, Duration::from_secs(3600)).await?;
    assert!(w.server("fx").await?.is_none(), "still stopped");
    let again = w.client.mcp_stop(p.clone()).await;
    match again {
        Err(ClientError::Call(e)) => {
            assert_eq!(e.code(), ErrorCode::ServerUnavailable.code());
            assert!(e.message().contains("not running"), "{}", e.message());
        }
        other => panic!("stopping a stopped server: {other:?}"),
    }
    let started = w.client.mcp_restart(p).await?;
    assert_eq!(started.state, ServerState::Connected);
    assert_ne!(started.pid, Some(pid));
    let r = w.client.tools_call(w.call("mcp_fx_echo", json!({ "text": "back" }), true)).await?;
    assert_eq!(text_of(&r), "back");
    // The command line says the same.
    let (code, out, err) = w.home.gemctl_run(&["mcp", "stop", "fx"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("fx"), "{out}");
    let (code, _, err) = w.home.gemctl_run(&["mcp", "stop", "fx"])?;
    assert_ne!(code, 0);
    assert!(err.contains("not running") && err.contains("gemctl mcp restart fx"), "{err}");
    Ok(())
}

/// `gemctl top` polling every 300 ms on a terminal of `size`.
fn top(home: &TestHome, size: (u16, u16), env: &[(&str, &str)]) -> anyhow::Result<Tmux> {
    Tmux::gemctl(home, &["top", "--interval", "300ms"], size, env)
}

/// After `top` ended: it exited 0 and the terminal is in cooked mode with echo.
async fn given_back(tmux: &Tmux) -> anyhow::Result<String> {
    let screen = tmux.until(WAIT, "top's exit", |s| s.contains("TOP-EXITED")).await?;
    assert!(screen.contains("TOP-EXITED rc=0"), "{screen}");
    let modes = tmux.until(WAIT, "the terminal modes", |s| s.contains("icanon")).await?;
    assert!(
        modes.contains(" icanon") || modes.contains("\nicanon"),
        "canonical mode is back:\n{modes}"
    );
    assert!(!modes.contains("-icanon") && !modes.contains("-echo"), "{modes}");
    assert!(!modes.contains("Servers ("), "the alternate screen is left:\n{modes}");
    Ok(modes)
}

/// Whether a captured screen sets a foreground colour anywhere (tmux writes `38;5;N` or `3N`).
fn coloured(screen: &str) -> bool {
    screen.contains("\x1b[38;5;") || (30..38).any(|n| screen.contains(&format!("\x1b[{n}m")))
}

/// What follows each switch to green on a captured screen.
fn green(screen: &str) -> String {
    screen.split("\x1b[38;5;2m").skip(1).chain(screen.split("\x1b[32m").skip(1)).collect()
}

/// A server's row as words: name, state, pid, up, restarts, tools, sessions, cpu, rss, calls/s,
/// errors.
fn row<'a>(screen: &'a str, name: &str) -> Option<Vec<&'a str>> {
    screen.lines().find_map(|l| {
        let words: Vec<&str> =
            l.trim_matches(|c| c == '│' || c == ' ').split_whitespace().collect();
        (words.first() == Some(&name) && words.len() >= 11).then_some(words)
    })
}

#[tokio::test]
async fn top_shows_a_killed_server_restarting_and_stops_and_starts_it() -> anyhow::Result<()> {
    // Two launch specs (one spec would be one shared process).
    let w = World::new(json!({ "fx": stdio(&[]), "other": stdio(&["--rich"]) }), false).await?;
    let pid = w.server("fx").await?.and_then(|s| s.pid).expect("fx's pid");
    let tmux = top(&w.home, (100, 30), &[])?;
    let screen = tmux
        .until(WAIT, "fx connected", |s| row(s, "fx").is_some_and(|r| r[1] == "connected"))
        .await?;
    assert!(screen.contains("Servers (2)") && screen.contains("Sessions (1)"), "{screen}");
    let words = row(&screen, "fx").expect("fx's row");
    assert_eq!(words[2], pid.to_string(), "{screen}");
    // Colour on a terminal: the state is green.
    let colours = tmux.screen(true);
    assert!(green(&colours).contains("connected"), "{colours:?}");

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL)?;
    let screen = tmux
        .until(WAIT, "fx restarted", |s| {
            row(s, "fx")
                .is_some_and(|r| r[1] == "connected" && r[4] == "1" && r[2] != pid.to_string())
        })
        .await?;
    assert_eq!(row(&screen, "other").map(|r| r[4]), Some("0"), "{screen}");

    // Sorted by name, fx is the first row and selected: `x` stops it, `s` starts it.
    tmux.key("x").await?;
    tmux.until(WAIT, "fx stopped", |s| row(s, "fx").is_some_and(|r| r[1] == "stopped")).await?;
    assert!(w.server("fx").await?.is_none(), "the daemon stopped it");
    tmux.key("s").await?;
    tmux.until(WAIT, "fx started", |s| row(s, "fx").is_some_and(|r| r[1] == "connected")).await?;
    assert!(w.server("fx").await?.is_some_and(|s| s.state == ServerState::Connected));

    // Its log, followed: what the supervisor did is in it.
    tmux.key("l").await?;
    // One log across the stop and the start.
    let log = tmux.until(WAIT, "fx's log", |s| s.contains("Log of fx")).await?;
    assert!(log.contains("stopped by `gemctl mcp stop`"), "{log}");
    assert!(log.contains("starting a stopped") || log.matches("started").count() >= 2, "{log}");
    tmux.key("Escape").await?;
    tmux.until(WAIT, "the panes again", |s| s.contains("Servers (2)")).await?;
    tmux.key("q").await?;
    given_back(&tmux).await?;
    Ok(())
}

#[tokio::test]
async fn a_confirmation_answered_in_top_lets_the_call_through_and_a_cancelled_call_ends()
-> anyhow::Result<()> {
    let mut w = World::new(json!({ "fx": stdio(&["--rich", "--asks"]) }), true).await?;
    let tmux = top(&w.home, (100, 30), &[])?;
    tmux.until(WAIT, "the servers", |s| row(s, "fx").is_some()).await?;

    // The default policy asks about an MCP tool. The session is interactive and a client of
    // it listens for confirmations (a Gemini CLI, a `gemctl attach` elsewhere), not answering.
    let kinds = vec![AskKind::Confirmation, AskKind::Elicitation];
    let listens = AsksListenParams { session: w.session.clone(), kinds };
    let _listening = w.client.asks_listen(listens).await?;
    let asking = w.daemon.client().await?;
    let p = w.call("mcp_fx_echo", json!({ "text": "through" }), false);
    let call = tokio::spawn(async move { asking.tools_call(p).await });
    tmux.until(WAIT, "the question", |s| {
        s.contains("Waiting for you (1)") && s.contains("confirm")
    })
    .await?;
    tmux.key("4").await?;
    tmux.key("y").await?;
    let r = tokio::time::timeout(WAIT, call).await???;
    assert_eq!(text_of(&r), "through");
    // The audit tail: the call, asked and answered.
    tmux.until(WAIT, "the answer in the audit", |s| {
        s.contains("Waiting for you (0)")
            && s.lines().any(|l| l.contains("mcp_fx_echo") && l.contains("asked"))
    })
    .await?;

    // A server's form, answered field by field in top (`⏎`): a required field left empty is
    // asked again, an empty line takes a default.
    let asking = w.daemon.client().await?;
    let p = w.call("mcp_fx_ask", json!({ "message": "Who are you?" }), true);
    let call = tokio::spawn(async move { asking.tools_call(p).await });
    tmux.until(WAIT, "the form", |s| s.contains("Waiting for you (1)") && s.contains("form"))
        .await?;
    tmux.key("Enter").await?;
    tmux.until(WAIT, "its first field", |s| s.contains("Who are you?") && s.contains("Name"))
        .await?;
    tmux.key("Enter").await?;
    tmux.until(WAIT, "the field asked again", |s| s.contains("Name is required")).await?;
    for key in ["Grace", "Enter", "Enter", "blue", "Enter", "Enter"] {
        tmux.key(key).await?;
    }
    let r = tokio::time::timeout(WAIT, call).await???;
    let answer: serde_json::Value = serde_json::from_str(&r.display)?;
    assert_eq!(
        answer,
        json!({ "action": "accept", "content": { "name": "Grace", "age": 36, "colour": "blue", "subscribe": false } })
    );

    // A long call: listed with its progress, and `c` in the calls pane ends it.
    let waiting = w.daemon.client().await?;
    let p = w.call("mcp_fx_progress", json!({ "steps": 600, "gap_ms": 100 }), true);
    let call = tokio::spawn(async move { waiting.tools_call(p).await });
    // With its progress: `step N` of 600, in percent.
    tmux.until(WAIT, "the call in flight and its progress", |s| {
        s.contains("Calls in flight (1)")
            && s.lines().any(|l| l.contains("mcp_fx_progress") && l.contains("% step "))
    })
    .await?;
    tmux.key("3").await?;
    tmux.key("c").await?;
    let ended = tokio::time::timeout(WAIT, call).await??;
    let why = error_message(ended);
    assert!(why.contains("cancelled"), "{why}");
    tmux.until(WAIT, "no call in flight", |s| s.contains("Calls in flight (0)")).await?;

    // The daemon stops: top says so and gives the terminal back.
    w.daemon.signal(Signal::SIGTERM)?;
    w.daemon.wait_exit(WAIT).await?;
    let end = given_back(&tmux).await?;
    assert!(end.contains("shutting down"), "{end}");
    Ok(())
}

#[tokio::test]
async fn top_fits_80_by_24_honours_no_color_and_prints_one_frame_with_once() -> anyhow::Result<()> {
    let w = World::new(json!({ "fx": stdio(&[]) }), false).await?;
    let derived = SessionDeriveParams {
        parent: w.session.clone(),
        name: "researcher".into(),
        ..Default::default()
    };
    w.client.derive(derived).await?;
    let tmux = top(&w.home, (80, 24), &[("NO_COLOR", "1")])?;
    // Servers and sessions arrive in separate answers: wait for both (a busy machine drew
    // the servers first).
    let both = |s: &str| row(s, "fx").is_some() && s.contains("└ researcher");
    let screen = tmux.until(WAIT, "fx and the derived session", both).await?;
    // The derived session under its parent.
    let lines: Vec<&str> = screen.lines().collect();
    let parent = lines.iter().position(|l| l.contains(&w.session[w.session.len() - 8..]));
    let child = lines.iter().position(|l| l.contains("└ researcher"));
    assert!(parent.is_some_and(|p| child == Some(p + 1)), "{screen}");
    for pane in [
        "Servers (1)",
        "Sessions (2)",
        "Calls in flight (0)",
        "Waiting for you (0)",
        "Audit",
        "q quit",
    ] {
        assert!(screen.contains(pane), "{pane} at 80×24:\n{screen}");
    }
    assert!(!screen.contains("TRANSPORT"), "narrow: no transport column");
    let colours = tmux.screen(true);
    assert!(!coloured(&colours), "NO_COLOR: no colour:\n{colours:?}");
    // Wider: the transport and last error columns.
    tmux.tmux(&["resize-window", "-t", "top", "-x", "130", "-y", "30"])?;
    tmux.until(WAIT, "the wide columns", |s| s.contains("TRANSPORT") && s.contains("LAST ERROR"))
        .await?;
    tmux.key("?").await?;
    tmux.until(WAIT, "the help", |s| s.contains("gemctl top: everything geminid holds")).await?;
    tmux.key("Escape").await?;
    tmux.key("C-c").await?;
    given_back(&tmux).await?;

    // `--once`: one frame as text, at COLUMNS, without a terminal.
    let out = w.home.gemctl_cmd(&["top", "--once"]).env("COLUMNS", "80").output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(row(&text, "fx").is_some_and(|r| r[1] == "connected"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    assert!(!text.contains('\x1b'), "no escapes in text: {text:?}");
    // Every column's header whole at 80 columns (it read `WORKSPAC`), and no keys to press in
    // a frame printed as text: no key bar, no pane marked as focused (audit turn 4, P4).
    assert!(text.contains(" WORKSPACE "), "{text}");
    for keys in ["q quit", "⇥ pane", "▶"] {
        assert!(!text.contains(keys), "{keys} in --once:\n{text}");
    }
    // Without a terminal and without --once: a clear error.
    let (code, _, err) = w.home.gemctl_run(&["top"])?;
    assert_ne!(code, 0);
    assert!(err.contains("needs a terminal") && err.contains("--once"), "{err}");
    Ok(())
}

/// Sessions created within the same minute share their ids' first characters (UUIDv7: the
/// time): `top` and `audit` show the same short id, the last 8 characters, and every command
/// that takes a session takes it (audit turn 4, C11: `top` showed `01a24dff` twice, `audit`
/// the end, and `session close 01a24dff` fitted 2 sessions).
#[tokio::test]
async fn top_and_audit_show_one_short_session_id_that_commands_take() -> anyhow::Result<()> {
    let w = World::new(json!({ "fx": stdio(&[]) }), false).await?;
    let other = new_session(&w.client, &w.home).await?;
    let short = |id: &str| id[id.len() - 8..].to_owned();
    let (mine, theirs) = (short(&w.session), short(&other));
    let (code, out, err) =
        w.home.gemctl_run(&["--session", &mine, "call", "mcp_fx_echo", r#"{"text": "hi"}"#])?;
    assert_eq!((code, out.as_str()), (0, "hi\n"), "{err}");

    let out = w.home.gemctl_cmd(&["top", "--once"]).env("COLUMNS", "100").output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let sessions: Vec<&str> = text.lines().filter(|l| l.contains(" ws ")).collect();
    assert!(sessions.iter().any(|l| l.contains(&mine)), "{text}");
    assert!(sessions.iter().any(|l| l.contains(&theirs)), "{text}");
    assert!(!text.contains(&w.session[..8]), "no id's start: {text}");
    // The audit tail in `top` and `gemctl audit` name the call's session alike.
    assert!(text.lines().any(|l| l.contains(&mine) && l.contains("mcp_fx_echo")), "{text}");
    let (code, audit, err) = w.home.gemctl_run(&["audit", "-n", "1"])?;
    assert_eq!(code, 0, "{err}");
    let row: Vec<&str> = audit.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row.get(2..4), Some(&[mine.as_str(), "mcp_fx_echo"][..]), "{audit}");

    // The short id shown is taken wherever a session is.
    let shown = w.home.gemctl_json(&["session", "show", &theirs])?;
    assert_eq!(shown["id"], json!(other), "{shown}");
    let (code, out, err) = w.home.gemctl_run(&["--session", &mine, "mcp", "restart", "fx"])?;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = w.home.gemctl_run(&["session", "close", &theirs])?;
    assert_eq!((code, out.trim()), (0, format!("closed session {other}").as_str()), "{err}");
    Ok(())
}
