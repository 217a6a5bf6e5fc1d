//! What servers ask of their client (elicitation, sampling, roots), over the socket with the
//! real daemon and the fixture's `--asks` tools: each request goes to the session whose call
//! caused it, is declined at once when nobody there can answer, and never reaches another
//! session.

use std::process::Stdio;
use std::time::Duration;

use geminid_protocol::api::{
    ElicitationApiClient, McpApiClient, SamplingApiClient, SessionApiClient, ToolsApiClient,
};
use geminid_protocol::asks::{Ask, AskKind, AskNotice, AsksListenParams, AsksRespondParams};
use geminid_protocol::client::{Client, Subscription};
use geminid_protocol::event::{EventBody, EventsSubscribeParams};
use geminid_protocol::mcp::{LogsParams, ServerAskRespondParams, ServerParams};
use geminid_protocol::session::SessionCreateParams;
use geminid_protocol::tools::{ToolsCallParams, ToolsCallResult};
use geminid_tests::mcp::{NetFixture, Setup, growing, shell_env, stdio};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

fn call(session: &str, tool: &str, args: Value) -> ToolsCallParams {
    ToolsCallParams {
        session: session.to_owned(),
        name: format!("mcp_fx_{tool}"),
        args: args.as_object().cloned(),
        call_id: Some(format!("{tool}-call")),
        confirmed: false,
    }
}

/// The JSON the fixture's tool answered with (its client's answer).
fn answered(r: &ToolsCallResult) -> anyhow::Result<Value> {
    Ok(serde_json::from_str(&r.display)?)
}

async fn listen(
    client: &Client,
    session: &str,
    kind: AskKind,
) -> anyhow::Result<Subscription<AskNotice>> {
    let p = AsksListenParams { session: session.to_owned(), kinds: vec![kind] };
    Ok(client.asks_listen(p).await?)
}

async fn next_ask(sub: &mut Subscription<AskNotice>) -> anyhow::Result<Ask> {
    loop {
        match tokio::time::timeout(WAIT, sub.next()).await? {
            Some(Ok(AskNotice::Asked { ask })) => return Ok(ask),
            Some(Ok(AskNotice::Settled { .. })) => continue,
            other => anyhow::bail!("the listener ended: {other:?}"),
        }
    }
}

async fn respond(client: &Client, ask: &Ask, answer: Value) -> anyhow::Result<bool> {
    let p = AsksRespondParams { session: ask.session.clone(), id: ask.id.clone(), answer };
    Ok(client.asks_respond(p).await?.accepted)
}

/// A second session, in its own workspace, from its own connection.
async fn second_session(
    s: &Setup,
    folder: &str,
) -> anyhow::Result<(Client, String, std::path::PathBuf)> {
    let ws = s.home.root().join(folder);
    std::fs::create_dir_all(&ws)?;
    let client = s.daemon.client().await?;
    let p = SessionCreateParams {
        workspace: ws.display().to_string(),
        env: Some(shell_env(&s.home, &[])),
        reuse_default: false,
        ..Default::default()
    };
    let id = client.create(p).await?.id;
    Ok((client, id, ws))
}

async fn log_text(client: &Client, session: &str, name: &str) -> anyhow::Result<String> {
    let server = ServerParams { session: Some(session.to_owned()), name: name.into() };
    let logs = client.mcp_logs(LogsParams { server, lines: None }).await?;
    Ok(logs.lines.iter().map(|l| l.text.clone()).collect::<Vec<_>>().join("\n"))
}

fn uri(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

#[tokio::test]
async fn an_elicitation_goes_to_the_calling_sessions_client_and_completes_the_call()
-> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&["--asks"]) })).await?;
    let filter = EventsSubscribeParams {
        session: Some(s.session.clone()),
        kinds: Some(vec!["elicitation/requested".into()]),
    };
    let mut events = s.client.subscribe_events(Some(filter)).await?;
    let mut asks = listen(&s.client, &s.session, AskKind::Elicitation).await?;
    let caller = s.daemon.client().await?;
    let p = call(&s.session, "ask", json!({ "message": "Who are you?" }));
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    let ask = next_ask(&mut asks).await?;
    assert_eq!((ask.kind, ask.title.as_str()), (AskKind::Elicitation, "Who are you?"));
    assert_eq!(ask.call_id.as_deref(), Some("ask-call"));
    assert_eq!(
        (ask.detail["server"].as_str(), ask.detail["name"].as_str()),
        (Some("fx"), Some("mcp_fx_ask"))
    );
    assert_eq!(ask.detail["request"]["mode"], "form");
    assert_eq!(ask.detail["request"]["requestedSchema"]["required"], json!(["name"]));
    let event = tokio::time::timeout(WAIT, events.next())
        .await?
        .ok_or_else(|| anyhow::anyhow!("no event"))??;
    let EventBody::ElicitationRequested(e) = event.body else { anyhow::bail!("{event:?}") };
    assert_eq!(
        (e.id.as_str(), e.server.as_str(), e.tool.as_str()),
        (ask.id.as_str(), "fx", "mcp_fx_ask")
    );

    // An answer of the wrong shape is refused and the ask stays pending.
    let bad = respond(&s.client, &ask, json!({ "name": "Grace" })).await;
    assert!(bad.is_err(), "{bad:?}");
    assert!(
        respond(
            &s.client,
            &ask,
            json!({ "action": "accept", "content": { "name": "Grace", "colour": "blue" } })
        )
        .await?
    );
    let r = tokio::time::timeout(WAIT, running).await???;
    // The fields the answer left out carry the schema's defaults (SEP-1034).
    assert_eq!(
        answered(&r)?,
        json!({ "action": "accept", "content": { "name": "Grace", "colour": "blue", "age": 36, "subscribe": false } })
    );
    let log = log_text(&s.client, &s.session, "fx").await?;
    assert!(
        log.contains(&format!("an elicitation for session {}'s call to mcp_fx_ask", s.session)),
        "{log}"
    );
    Ok(())
}

#[tokio::test]
async fn nobody_able_to_answer_is_a_decline_at_once_and_sampling_needs_a_sampler()
-> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&["--asks"]) })).await?;
    // Confirmations are answered here, elicitations are not: declined, not left hanging.
    let _confirming = listen(&s.client, &s.session, AskKind::Confirmation).await?;
    let r = tokio::time::timeout(WAIT, s.client.tools_call(call(&s.session, "ask", json!({}))))
        .await??;
    assert_eq!(answered(&r)?, json!({ "action": "decline" }));
    let url =
        tokio::time::timeout(WAIT, s.client.tools_call(call(&s.session, "ask_url", json!({}))))
            .await??;
    assert_eq!(answered(&url)?, json!({ "action": "decline" }));
    // Sampling has no decline: the server gets an error saying why.
    let r = tokio::time::timeout(WAIT, s.client.tools_call(call(&s.session, "sample", json!({}))))
        .await?;
    let why = format!("{r:?}");
    assert!(r.is_err() && why.contains("can sample (geminid never calls a model itself)"), "{why}");

    // A client that declared sampling answers it; geminid passes its answer through.
    let mut sampler = listen(&s.client, &s.session, AskKind::Sampling).await?;
    let caller = s.daemon.client().await?;
    let p = call(&s.session, "sample", json!({ "prompt": "Say hi" }));
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    let ask = next_ask(&mut sampler).await?;
    assert_eq!(ask.kind, AskKind::Sampling);
    assert_eq!(ask.detail["request"]["messages"][0]["content"]["text"], "Say hi");
    let reply = json!({ "role": "assistant", "content": { "type": "text", "text": "hi" }, "model": "test-model" });
    // Answered by its id from a connection attached to nothing, with the kind's own method.
    let stranger = s.daemon.client().await?;
    let p = |result: Value| ServerAskRespondParams { id: ask.id.clone(), result, session: None };
    let wrong = stranger.elicitation_respond(p(json!({ "action": "accept" }))).await;
    let why = format!("{wrong:?}");
    assert!(
        why.contains("is a sampling ask, not elicitation (answer it with sampling/respond)"),
        "{why}"
    );
    assert_eq!(stranger.sampling_respond(p(reply.clone())).await?.session, s.session);
    let again = stranger.sampling_respond(p(reply)).await;
    assert!(format!("{again:?}").contains("already"), "{again:?}");
    let r = tokio::time::timeout(WAIT, running).await???;
    let got = answered(&r)?;
    assert_eq!(
        (got["model"].as_str(), got["content"]["text"].as_str()),
        (Some("test-model"), Some("hi")),
        "{got}"
    );
    Ok(())
}

#[tokio::test]
async fn on_stdio_a_request_while_two_sessions_call_is_declined_and_the_log_says_why()
-> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&["--asks"]) })).await?;
    let (other, second, _) = second_session(&s, "ws2").await?;
    let mut first_asks = listen(&s.client, &s.session, AskKind::Elicitation).await?;
    let mut second_asks = listen(&other, &second, AskKind::Elicitation).await?;
    // The shared server running for both first (a cold start under load can take longer than
    // the 300 ms below).
    for (c, id) in [(&s.client, &s.session), (&other, &second)] {
        tokio::time::timeout(WAIT, c.tools_call(call(id, "echo", json!({ "text": "up" }))))
            .await??;
    }
    // The first session's call is in flight on the shared server while the second's asks.
    let sleeper = s.daemon.client().await?;
    let p = call(&s.session, "sleep", json!({ "ms": 1500 }));
    let sleeping = tokio::spawn(async move { sleeper.tools_call(p).await });
    let asleep = geminid_tests::mcp::logged(&s.client, None, "fx", "sleeping 1500 ms", WAIT);
    assert!(asleep.await, "the first session's call never reached the server");
    let r = tokio::time::timeout(WAIT, other.tools_call(call(&second, "ask", json!({})))).await??;
    assert_eq!(answered(&r)?, json!({ "action": "decline" }));
    tokio::time::timeout(WAIT, sleeping).await???;
    for sub in [&mut first_asks, &mut second_asks] {
        let nothing = tokio::time::timeout(Duration::from_millis(200), sub.next()).await;
        assert!(nothing.is_err(), "neither session was asked: {nothing:?}");
    }
    let log = log_text(&other, &second, "fx").await?;
    assert!(log.contains("cannot say whose call asked"), "{log}");
    Ok(())
}

#[tokio::test]
async fn over_http_two_sessions_asked_at_once_each_get_their_own() -> anyhow::Result<()> {
    let http = NetFixture::start("--http", &["--asks"])?;
    let s = Setup::new(json!({ "fx": { "httpUrl": http.url } })).await?;
    let (other, second, _) = second_session(&s, "ws2").await?;
    let mut first_asks = listen(&s.client, &s.session, AskKind::Elicitation).await?;
    let mut second_asks = listen(&other, &second, AskKind::Elicitation).await?;
    let (c1, c2) = (s.daemon.client().await?, s.daemon.client().await?);
    let (p1, p2) = (call(&s.session, "ask", json!({})), call(&second, "ask", json!({})));
    let one = tokio::spawn(async move { c1.tools_call(p1).await });
    let two = tokio::spawn(async move { c2.tools_call(p2).await });
    let (a1, a2) = match (next_ask(&mut first_asks).await, next_ask(&mut second_asks).await) {
        (Ok(a1), Ok(a2)) => (a1, a2),
        other => anyhow::bail!("{other:?}\n{}", log_text(&s.client, &s.session, "fx").await?),
    };
    assert_eq!((a1.session.as_str(), a2.session.as_str()), (s.session.as_str(), second.as_str()));
    assert!(
        respond(&s.client, &a1, json!({ "action": "accept", "content": { "name": "first" } }))
            .await?
    );
    assert!(
        respond(&other, &a2, json!({ "action": "accept", "content": { "name": "second" } }))
            .await?
    );
    let (r1, r2) =
        (tokio::time::timeout(WAIT, one).await???, tokio::time::timeout(WAIT, two).await???);
    assert_eq!(answered(&r1)?["content"]["name"], "first");
    assert_eq!(answered(&r2)?["content"]["name"], "second");
    for sub in [&mut first_asks, &mut second_asks] {
        loop {
            match tokio::time::timeout(Duration::from_millis(200), sub.next()).await {
                Ok(Some(Ok(AskNotice::Settled { .. }))) => continue,
                Err(_) => break,
                other => anyhow::bail!("a session was asked twice: {other:?}"),
            }
        }
    }
    Ok(())
}

#[tokio::test]
async fn roots_are_the_calling_sessions_and_a_server_that_asks_is_split_by_roots()
-> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&["--asks"]) })).await?;
    let extra = s.home.root().join("shared-lib");
    std::fs::create_dir_all(&extra)?;
    let (other, second, ws2) = second_session(&s, "ws2").await?;
    let pid = |client: Client, session: String| async move {
        let r = client.tools_call(call(&session, "pid", json!({}))).await?;
        anyhow::Ok((client, r.display))
    };
    let (client_a, pid_a) = pid(s.daemon.client().await?, s.session.clone()).await?;
    let (other, pid_b) = pid(other, second.clone()).await?;
    assert_eq!(pid_a, pid_b, "one server for both until it asks for roots");

    let r = client_a.tools_call(call(&s.session, "roots", json!({}))).await?;
    assert_eq!(answered(&r)?, json!([uri(&s.home.workspace())]));
    // The second session has other roots: it now runs its own server, which answers its own.
    let r = other.tools_call(call(&second, "roots", json!({}))).await?;
    assert_eq!(answered(&r)?, json!([uri(&ws2)]));
    let (_, pid_a2) = pid(client_a, s.session.clone()).await?;
    let (other, pid_b2) = pid(other, second.clone()).await?;
    assert_eq!(pid_a2, pid_a, "the session whose roots it was given keeps it");
    assert_ne!(pid_b2, pid_a, "the other moved to a server of its own");
    let log = log_text(&s.client, &s.session, "fx").await?;
    assert!(log.contains(&format!("sessions {second} run their own")), "{log}");
    drop(other);
    Ok(())
}

/// A server asks for its roots on its own, after the `gemctl` command that started it has let
/// its session go (it lingers): it gets the roots of the session it was started for, not none.
/// (A fresh-clone interop run found the everything server given none this way.)
#[tokio::test]
async fn a_server_asking_for_roots_after_its_command_ended_gets_its_sessions() -> anyhow::Result<()>
{
    let home = geminid_tests::TestHome::new()?;
    let args = ["--asks", "--roots-at-start-ms", "400"];
    geminid_tests::mcp::write_user_settings(&home, json!({ "fx": stdio(&args) }))?;
    let _daemon = geminid_tests::Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    // Starts the server and lets the session go at once (a command attaches nothing).
    assert!(home.gemctl(&["mcp", "start"])?.status.success());
    let asked = geminid_tests::eventually(WAIT, || async {
        home.gemctl_run(&["mcp", "logs", "fx"])
            .is_ok_and(|(_, out, _)| out.contains("asked for its roots at start"))
    });
    assert!(asked.await, "the server never asked for its roots");
    let (code, out, err) = home.gemctl_run(&["call", "mcp_fx_start_roots"])?;
    assert_eq!(code, 0, "{out}{err}");
    let got: Value = serde_json::from_str(out.trim())?;
    assert_eq!(got, json!([uri(&home.workspace())]), "{out}");
    Ok(())
}

#[tokio::test]
async fn gemctl_attach_fills_in_a_form_field_by_field() -> anyhow::Result<()> {
    use std::io::Write;
    let home = geminid_tests::TestHome::allowing_mcp()?;
    geminid_tests::mcp::write_user_settings(&home, json!({ "fx": stdio(&["--asks"]) }))?;
    let daemon = geminid_tests::Daemon::start(&home, geminid_tests::mcp::FAST).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let session =
        home.gemctl_json(&["session", "show"])?["id"].as_str().unwrap_or_default().to_owned();
    let mut attach = home
        .gemctl_cmd(&["attach", "--answer"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    let mut err = geminid_tests::stderr_lines(&mut attach);
    geminid_tests::line_with(&mut err, "are answered here").await?;
    let caller = daemon.client().await?;
    let p = call(&session, "ask", json!({ "message": "Tell me about you" }));
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    let asked = geminid_tests::line_with(&mut err, "elicit ask-").await?;
    assert!(asked.contains("MCP server fx") && asked.contains("Tell me about you"), "{asked}");
    geminid_tests::line_with(&mut err, "Name (text):").await?;
    let mut stdin = attach.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
    writeln!(stdin)?;
    geminid_tests::line_with(&mut err, "Name is required").await?;
    writeln!(stdin, "Ada Lovelace")?;
    geminid_tests::line_with(&mut err, "Age (a whole number, empty for 36):").await?;
    writeln!(stdin, "thirty")?;
    geminid_tests::line_with(&mut err, "is not a whole number").await?;
    writeln!(stdin, "28")?;
    geminid_tests::line_with(&mut err, "colour (red | green | blue, empty for green):").await?;
    writeln!(stdin)?;
    geminid_tests::line_with(&mut err, "subscribe (y or n, empty for false):").await?;
    writeln!(stdin, "y")?;
    geminid_tests::line_with(&mut err, ": accept").await?;
    let r = tokio::time::timeout(WAIT, running).await???;
    assert_eq!(
        answered(&r)?,
        json!({ "action": "accept", "content": { "name": "Ada Lovelace", "age": 28, "colour": "green", "subscribe": true } })
    );
    // `!decline` at a prompt declines the whole form.
    let caller = daemon.client().await?;
    let p = call(&session, "ask", json!({}));
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    geminid_tests::line_with(&mut err, "Name (text):").await?;
    writeln!(stdin, "!decline")?;
    let r = tokio::time::timeout(WAIT, running).await???;
    assert_eq!(answered(&r)?, json!({ "action": "decline" }));
    drop(stdin);
    let _ = attach.kill();
    let _ = attach.wait();
    Ok(())
}

/// The protocol versions a session's servers speak, by name.
async fn versions(client: &Client, session: &str) -> anyhow::Result<Vec<(String, Option<String>)>> {
    let p = geminid_protocol::mcp::StartParams { session: session.to_owned(), wait: true };
    let servers = client.mcp_start(p).await?.servers;
    Ok(servers.into_iter().map(|s| (s.name, s.protocol_version)).collect())
}

#[tokio::test]
async fn servers_of_both_eras_are_reached_and_a_modern_ones_input_required_is_answered()
-> anyhow::Result<()> {
    let http = NetFixture::start("--http", &["--asks", "--modern"])?;
    let s = Setup::new(json!({
        "fx": growing(&["--asks", "--modern"]),
        "old": stdio(&["--asks"]),
        "web": { "httpUrl": http.url },
    }))
    .await?;
    let mut got = versions(&s.client, &s.session).await?;
    got.sort();
    let want = |n: &str, v: &str| (n.to_owned(), Some(v.to_owned()));
    assert_eq!(
        got,
        [want("fx", "2026-07-28"), want("old", "2025-11-25"), want("web", "2026-07-28")]
    );

    // An elicitation as an input_required result: the call's own session is asked, and the
    // call is sent again with the answer.
    let mut asks = listen(&s.client, &s.session, AskKind::Elicitation).await?;
    let caller = s.daemon.client().await?;
    let p = call(&s.session, "ask", json!({ "message": "Modern?" }));
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    let ask = match next_ask(&mut asks).await {
        Ok(a) => a,
        Err(e) => anyhow::bail!(
            "{e}: {:?}\n{}",
            running.await,
            log_text(&s.client, &s.session, "fx").await?
        ),
    };
    assert_eq!((ask.title.as_str(), ask.call_id.as_deref()), ("Modern?", Some("ask-call")));
    assert!(
        respond(&s.client, &ask, json!({ "action": "accept", "content": { "name": "Hedy" } }))
            .await?
    );
    let r = tokio::time::timeout(WAIT, running).await???;
    assert_eq!(
        answered(&r)?["content"],
        json!({ "name": "Hedy", "age": 36, "colour": "green", "subscribe": false })
    );
    // Roots the same way, and nobody to ask is still a decline at once.
    let r = s.client.tools_call(call(&s.session, "roots", json!({}))).await?;
    assert_eq!(answered(&r)?, json!([uri(&s.home.workspace())]));
    // Awaited: a dropped subscription is ended in the background, and an ask made before
    // the daemon hears of it goes to the listener that is leaving (seen under load).
    asks.unsubscribe().await?;
    let r = tokio::time::timeout(WAIT, s.client.tools_call(call(&s.session, "ask", json!({}))))
        .await??;
    assert_eq!(answered(&r)?, json!({ "action": "decline" }));

    // Each request of the new era declares what its own session can answer: elicitation only
    // while a client of it listens, sampling not at all here; roots and tasks always.
    let r = s.client.tools_call(call(&s.session, "caps", json!({}))).await?;
    let caps = answered(&r)?;
    assert!(caps.get("elicitation").is_none() && caps.get("sampling").is_none(), "{caps}");
    assert!(
        caps["roots"]["listChanged"] == json!(true)
            && caps["extensions"].get("io.modelcontextprotocol/tasks").is_some(),
        "{caps}"
    );
    // A server that needs what the call did not declare says so, and the error says how.
    let refused = s.client.tools_call(call(&s.session, "needs_elicitation", json!({}))).await;
    assert!(
        format!("{refused:?}").contains("needs a capability this call did not declare"),
        "{refused:?}"
    );
    let _listening = listen(&s.client, &s.session, AskKind::Elicitation).await?;
    let caps = answered(&s.client.tools_call(call(&s.session, "caps", json!({}))).await?)?;
    assert!(caps.get("elicitation").is_some() && caps.get("sampling").is_none(), "{caps}");
    let r = s.client.tools_call(call(&s.session, "needs_elicitation", json!({}))).await?;
    assert_eq!(answered(&r)?, json!("declared"));

    // The stateless HTTP server of the new era is listed and called.
    let p = ToolsCallParams {
        name: "mcp_web_echo".into(),
        ..call(&s.session, "echo", json!({ "text": "over http" }))
    };
    assert_eq!(s.client.tools_call(p).await?.display, "over http");
    // A list change arrives on the subscriptions/listen stream the new era needs.
    let grown = s.client.tools_call(call(&s.session, "grow", json!({}))).await?.display;
    let listed = || async {
        let p = geminid_protocol::tools::ToolsListParams {
            session: s.session.clone(),
            raw: false,
            all: false,
        };
        s.client
            .tools_list(p)
            .await
            .is_ok_and(|l| l.tools.iter().any(|t| t.name == format!("mcp_fx_{grown}")))
    };
    assert!(
        geminid_tests::eventually(WAIT, listed).await,
        "{grown} listed after tools/list_changed"
    );
    Ok(())
}

#[tokio::test]
async fn a_tools_list_with_a_ttl_is_listed_again_when_it_runs_out() -> anyhow::Result<()> {
    let s = Setup::new(json!({
        "fx": growing(&["--modern", "--list-ttl-ms", "1000"]),
        "kept": growing(&["--modern"]),
    }))
    .await?;
    let names = || async {
        let p = geminid_protocol::tools::ToolsListParams {
            session: s.session.clone(),
            raw: false,
            all: false,
        };
        s.client
            .tools_list(p)
            .await
            .map(|l| l.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>())
    };
    // Each grows a tool without saying so.
    let quiet = |server: &str| ToolsCallParams {
        name: format!("mcp_{server}_grow"),
        ..call(&s.session, "grow", json!({ "quiet": true }))
    };
    let grown = s.client.tools_call(quiet("fx")).await?.display;
    let kept = s.client.tools_call(quiet("kept")).await?.display;
    let listed = || async { names().await.is_ok_and(|n| n.contains(&format!("mcp_fx_{grown}"))) };
    assert!(
        geminid_tests::eventually(WAIT, listed).await,
        "listed again after its ttlMs: {:?}",
        names().await?
    );
    // A list without a ttl is kept until the server says it changed.
    assert!(!names().await?.contains(&format!("mcp_kept_{kept}")), "{:?}", names().await?);
    Ok(())
}
