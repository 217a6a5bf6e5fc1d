//! `gemctl attach`, `gemctl events` and `gemctl confirm`: a session's events, and the
//! confirmations its calls wait for, answered from the terminal or from a script.

use std::collections::VecDeque;
use std::process::ExitCode;

use geminid_protocol::api::{ConfirmationApiClient, McpApiClient};
use geminid_protocol::asks::{Ask, AskKind, AskNotice, AsksListenParams, AsksRespondParams};
use geminid_protocol::client::{Client, Subscription};
use geminid_protocol::event::{Event, EventBody, EventsSubscribeParams};
use geminid_protocol::policy::{ConfirmOutcome, ConfirmationRespondParams};
use tokio::io::AsyncBufReadExt;

use crate::error::call_error;
use crate::output;
use crate::output::{errln, outln};
use crate::session::elicit::{Elicitation, Fed};

/// What an answer typed at `gemctl attach` means: `y` once, `s` this session, `a` always, `n`
/// deny (or the words).
pub fn outcome_typed(text: &str) -> Option<ConfirmOutcome> {
    match text.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "once" => Some(ConfirmOutcome::Once),
        "s" | "session" => Some(ConfirmOutcome::Session),
        "a" | "always" => Some(ConfirmOutcome::Always),
        "n" | "no" | "deny" => Some(ConfirmOutcome::Deny),
        _ => None,
    }
}

fn outcome_name(o: ConfirmOutcome) -> &'static str {
    match o {
        ConfirmOutcome::Once => "once",
        ConfirmOutcome::Session => "session",
        ConfirmOutcome::Always => "always",
        ConfirmOutcome::Deny => "deny",
    }
}

/// Show an ask: a confirmation's question and its answers, or an elicitation's message and
/// its first prompt (started in `forms`).
fn show_ask(ask: &Ask, forms: &mut std::collections::HashMap<String, Elicitation>) {
    if ask.kind == AskKind::Elicitation {
        let server = ask.detail.get("server").and_then(|s| s.as_str()).unwrap_or("?");
        errln!("elicit {} (MCP server {server}, session {}): {}", ask.id, ask.session, ask.title);
        match Elicitation::of(ask) {
            Some(mut e) => {
                if let Some(url) = e.url() {
                    crate::session::elicit::open_url(url);
                }
                if let Fed::Ask(p) = e.start() {
                    errln!("{p}");
                }
                // A URL's own prompt says how to answer it.
                if e.url().is_none() {
                    errln!("  (`!decline` or `!cancel` at any prompt)");
                }
                forms.insert(ask.id.clone(), e);
            }
            None => errln!("  this elicitation cannot be answered here"),
        }
        return;
    }
    let args = ask.detail.get("args").filter(|a| !a.is_null()).map(ToString::to_string);
    let path = ask.detail.get("path").and_then(|p| p.as_str()).unwrap_or(&ask.session);
    errln!("confirm {} (session {path}): {}", ask.id, ask.title);
    if let Some(args) = args {
        errln!("  arguments: {args}");
    }
    errln!("  [y] once  [s] for this session  [a] always  [n] deny  (`{} y` for another)", ask.id);
}

/// Answer one confirmation.
async fn answer(
    client: &Client,
    id: &str,
    outcome: ConfirmOutcome,
    reason: Option<String>,
) -> anyhow::Result<String> {
    let p = ConfirmationRespondParams { id: id.to_owned(), outcome, reason, session: None };
    let r = client.confirmation_respond(p).await.map_err(call_error("confirmation/respond"))?;
    Ok(r.session)
}

/// `gemctl confirm ID OUTCOME [--reason R]`.
pub async fn confirm(
    client: &Client,
    id: String,
    outcome: String,
    reason: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let Some(o) = outcome_typed(&outcome) else {
        anyhow::bail!("{outcome:?} is not an answer: once, session, always or deny (y, s, a, n)");
    };
    let session = answer(client, &id, o, reason).await?;
    if json {
        return output::json(
            &serde_json::json!({ "id": id, "session": session, "outcome": outcome_name(o) }),
        );
    }
    outln!("answered {id} ({}) for session {session}", outcome_name(o));
    Ok(())
}

/// `gemctl confirm` without arguments: the session's pending questions, oldest first.
pub async fn pending(client: &Client, session: String, json: bool) -> anyhow::Result<()> {
    let p = geminid_protocol::asks::AsksPendingParams { session: Some(session.clone()) };
    let r = client.asks_pending(p).await.map_err(call_error("asks/pending"))?;
    if json {
        return output::json(&r.asks);
    }
    if r.asks.is_empty() {
        outln!("Nothing is waiting for an answer in session {session}.");
        return Ok(());
    }
    let now = output::now_ms();
    for a in &r.asks {
        let left = a.deadline_ms.saturating_sub(now) / 1000;
        let kind = serde_json::to_value(a.kind).ok();
        let kind = kind.as_ref().and_then(serde_json::Value::as_str).unwrap_or("ask");
        outln!("{}  {kind}  {}  ({left} s left)", a.id, a.title);
    }
    outln!(
        "\nAnswer one with `gemctl confirm ID once|session|always|deny`, or all as they come with `gemctl attach`."
    );
    Ok(())
}

/// Print events (of `session`, or all) until Ctrl-C or the daemon's shutdown. With `hold`, the
/// session's MCP servers are started once the stream is open, so their state changes show,
/// and kept running for as long as this connection stays attached. With `answer`, the
/// session's confirmations are shown and answered from stdin (the session is interactive
/// while this runs; it stops answering at the end of stdin). `announce` is said on stderr once
/// Ctrl-C is handled.
pub async fn stream_events(
    client: &Client,
    session: Option<String>,
    hold: bool,
    answer_from_stdin: bool,
    json: bool,
    announce: Option<String>,
) -> anyhow::Result<ExitCode> {
    // One listener for the whole run, installed before "Ctrl-C to detach" is said: a Ctrl-C
    // right after it must detach even where the signal came ignored (a shell's background
    // job), and a `ctrl_c()` made anew in each turn of the loop below misses one that comes
    // while an event is printed (once installed, the handler keeps the signal from ending the
    // process, and a new listener sees only later ones). Its first poll installs it.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let pressed =
        std::future::poll_fn(|cx| std::task::Poll::Ready(ctrl_c.as_mut().poll(cx).is_ready()))
            .await;
    if pressed {
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(line) = announce {
        errln!("{line}");
    }
    let params = EventsSubscribeParams { session: session.clone(), kinds: None };
    let mut sub =
        client.subscribe_events(Some(params)).await.map_err(call_error("events/subscribe"))?;
    let mut asks: Option<Subscription<AskNotice>> = None;
    if let (true, Some(session)) = (hold, &session) {
        let start = geminid_protocol::mcp::StartParams { session: session.clone(), wait: false };
        client.mcp_start(start).await.map_err(call_error("mcp/start"))?;
        if answer_from_stdin {
            let kinds = vec![AskKind::Confirmation, AskKind::Elicitation];
            let p = AsksListenParams { session: session.clone(), kinds };
            asks = Some(client.asks_listen(p).await.map_err(call_error("asks/listen"))?);
        }
    }
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut waiting: VecDeque<Ask> = VecDeque::new();
    let mut forms: std::collections::HashMap<String, Elicitation> = Default::default();
    loop {
        tokio::select! {
            _ = &mut ctrl_c => return Ok(ExitCode::SUCCESS),
            item = sub.next() => {
                let event: Event = match item {
                    Some(Ok(e)) => e,
                    Some(Err(e)) => return Err(anyhow::Error::new(e).context("event stream")),
                    None => anyhow::bail!("the daemon ended the event stream"),
                };
                // A confirmation this gemctl answers is shown as a question, not twice.
                let asked_here = asks.is_some() && matches!(event.body, EventBody::ConfirmationRequested(_));
                if json {
                    output::json_line(&event)?
                } else if !asked_here {
                    output::events::event(&event)
                }
                if matches!(event.body, EventBody::DaemonShuttingDown(_)) {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            notice = async { asks.as_mut()?.next().await }, if asks.is_some() => match notice {
                Some(Ok(AskNotice::Asked { ask })) => {
                    show_ask(&ask, &mut forms);
                    waiting.push_back(ask);
                }
                Some(Ok(AskNotice::Settled { id, how })) => {
                    if let Some(i) = waiting.iter().position(|a| a.id == id) {
                        waiting.remove(i);
                        forms.remove(&id);
                        errln!("{id}: settled ({})", serde_json::to_value(how).unwrap_or_default().as_str().unwrap_or("?"));
                    }
                }
                Some(Err(e)) => return Err(anyhow::Error::new(e).context("confirmations")),
                None => asks = None,
            },
            line = stdin.next_line(), if asks.is_some() => match line {
                Ok(Some(line)) if waiting.front().is_some_and(|a| forms.contains_key(&a.id)) => {
                    let Some(ask) = waiting.front().cloned() else { continue };
                    let Some(form) = forms.get_mut(&ask.id) else { continue };
                    match form.feed(&line) {
                        Fed::Ask(p) => errln!("{p}"),
                        Fed::Again(why) => errln!("  {why}"),
                        Fed::Done(answer) => {
                            forms.remove(&ask.id);
                            waiting.pop_front();
                            let action = answer["action"].as_str().unwrap_or("?").to_owned();
                            let p = AsksRespondParams { session: ask.session.clone(), id: ask.id.clone(), answer };
                            match client.asks_respond(p).await {
                                Ok(r) if r.accepted => errln!("{}: {action}", ask.id),
                                Ok(_) => errln!("{}: already settled", ask.id),
                                Err(e) => errln!("{}: {e}", ask.id),
                            }
                        }
                    }
                }
                Ok(Some(line)) if line.trim().is_empty() => {}
                Ok(Some(line)) => {
                    let (id, typed) = match line.trim().split_once(char::is_whitespace) {
                        Some((id, rest)) => (Some(id.to_owned()), rest.to_owned()),
                        None => (waiting.front().map(|a| a.id.clone()), line.clone()),
                    };
                    let (Some(id), Some(o)) = (id, outcome_typed(&typed)) else {
                        errln!("answer y (once), s (session), a (always) or n (deny), optionally after the ask's id");
                        continue;
                    };
                    match answer(client, &id, o, None).await {
                        Ok(_) => errln!("{id}: {}", outcome_name(o)),
                        Err(e) => errln!("{id}: {e:#}"),
                    }
                }
                // The end of stdin: nobody is left to answer, so stop saying we can (and wait
                // until the daemon knows, so a call right after is not asked here).
                Ok(None) | Err(_) => {
                    if let Some(sub) = asks.take() {
                        sub.unsubscribe().await.map_err(call_error("asks/unlisten"))?;
                    }
                    if !json {
                        errln!("stdin closed: this attach no longer answers confirmations or elicitations");
                    }
                }
            },
        }
    }
}
