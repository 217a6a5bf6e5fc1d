//! What a key does in `gemctl top`: move around, or act on the selected line (restart, stop
//! or start a server, show its log or tools, cancel a call, answer what waits).

use std::future::Future;
use std::pin::Pin;

use geminid_protocol::api::{
    CallsApiClient, ConfirmationApiClient, ElicitationApiClient, McpApiClient, ToolsApiClient,
};
use geminid_protocol::asks::AskKind;
use geminid_protocol::calls::CallsCancelParams;
use geminid_protocol::client::{Client, Subscription};
use geminid_protocol::mcp::{LogLine, LogsParams, ServerAskRespondParams, ServerParams};
use geminid_protocol::policy::{ConfirmOutcome, ConfirmationRespondParams};
use geminid_protocol::tools::ToolsListParams;
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use serde_json::json;

use super::state::{Overlay, Pane, Top};
use crate::session::elicit::{Elicitation, Fed};

/// Work that runs beside the screen; what it says when done.
pub type Work<'a> = Pin<Box<dyn Future<Output = String> + 'a>>;

/// What the loop does after a key.
pub enum Next<'a> {
    Quit,
    Stay,
    Do(Work<'a>),
}

/// A log line as the log view shows it.
pub fn log_line(l: &LogLine) -> String {
    let time = l.at.get(11..19).unwrap_or(&l.at);
    format!("{time} {:<7} {}", l.stream, l.text)
}

fn rpc_said(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what} failed: {e}")
}

/// Handle one terminal event.
pub async fn key<'a>(
    client: &'a Client,
    top: &mut Top,
    overlay: &mut Option<Overlay>,
    logs: &mut Option<Subscription<LogLine>>,
    event: Event,
) -> Next<'a> {
    let Event::Key(k) = event else {
        // A resize is drawn at once; nothing else matters here.
        return Next::Stay;
    };
    if k.kind == KeyEventKind::Release {
        return Next::Stay;
    }
    let ctrl_c = k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c');
    if ctrl_c {
        return Next::Quit;
    }
    if overlay.is_some() {
        return in_overlay(client, top, overlay, logs, k);
    }
    match k.code {
        KeyCode::Char('q') => return Next::Quit,
        KeyCode::Tab => top.focus = top.focus.step(false),
        KeyCode::BackTab => top.focus = top.focus.step(true),
        KeyCode::Char(c @ '1'..='5') => {
            top.focus = Pane::ALL[(c as usize) - ('1' as usize)];
        }
        KeyCode::Up | KeyCode::Char('k') => top.move_by(-1),
        KeyCode::Down | KeyCode::Char('j') => top.move_by(1),
        KeyCode::PageUp => top.move_by(-10),
        KeyCode::PageDown => top.move_by(10),
        KeyCode::Home => top.move_by(isize::MIN / 2),
        KeyCode::End => top.move_by(isize::MAX / 2),
        KeyCode::Char('?') => *overlay = Some(Overlay::Help),
        _ => {
            return match top.focus {
                Pane::Servers => server_key(client, top, overlay, logs, k).await,
                Pane::Calls => call_key(client, top, k),
                Pane::Asks => ask_key(client, top, overlay, k),
                Pane::Sessions | Pane::Audit => Next::Stay,
            };
        }
    }
    Next::Stay
}

async fn server_key<'a>(
    client: &'a Client,
    top: &mut Top,
    overlay: &mut Option<Overlay>,
    logs: &mut Option<Subscription<LogLine>>,
    k: KeyEvent,
) -> Next<'a> {
    if k.code == KeyCode::Char('o') {
        top.sort = top.sort.next();
        top.sort_rows();
        return Next::Stay;
    }
    let Some(row) = top.server() else { return Next::Stay };
    let name = row.status.name.clone();
    // The session the name is looked up in: one using it (names are per session), else the
    // one running server of that name.
    let session = row.status.sessions.first().cloned();
    let params = ServerParams { session: session.clone(), name: name.clone() };
    match k.code {
        KeyCode::Char('r') | KeyCode::Char('s') => {
            let verb =
                if row.stopped || k.code == KeyCode::Char('s') { "start" } else { "restart" };
            if k.code == KeyCode::Char('s') && !row.stopped {
                top.say(format!("{name} is running (r restarts it)"));
                return Next::Stay;
            }
            top.say(format!("{verb}ing {name}…"));
            Next::Do(Box::pin(async move {
                match client.mcp_restart(params).await {
                    Ok(s) => format!("{name}: {}", s.state.phrase()),
                    Err(e) => rpc_said(&format!("{verb} {name}"), e),
                }
            }))
        }
        KeyCode::Char('x') => {
            if row.stopped {
                top.say(format!("{name} is stopped already (s starts it)"));
                return Next::Stay;
            }
            top.say(format!("stopping {name}…"));
            Next::Do(Box::pin(async move {
                match client.mcp_stop(params).await {
                    Ok(_) => format!("{name} stopped (s starts it again)"),
                    Err(e) => rpc_said(&format!("stop {name}"), e),
                }
            }))
        }
        KeyCode::Char('l') => {
            let p = LogsParams { server: params.clone(), lines: Some(500) };
            let mut lines: Vec<String> = match client.mcp_logs(p).await {
                Ok(r) => r.lines.iter().map(log_line).collect(),
                Err(e) => vec![rpc_said("mcp/logs", e)],
            };
            match client.mcp_follow_logs(params).await {
                Ok(s) => *logs = Some(s),
                Err(e) => lines.push(rpc_said("mcp/followLogs", e)),
            }
            *overlay = Some(Overlay::Logs { name, lines, follow: true, scroll: 0 });
            Next::Stay
        }
        KeyCode::Char('t') | KeyCode::Enter => {
            let lines = match session {
                // `tools/list` would start a session's servers that are not running: only a
                // session that uses this one is asked.
                None => vec![
                    "No session uses this server now; a session's tools are listed with".to_owned(),
                    format!("`gemctl mcp tools {name}` in its workspace."),
                ],
                Some(session) => {
                    let p = ToolsListParams { session, raw: false, all: true };
                    match client.tools_list(p).await {
                        Ok(r) => r
                            .tools
                            .iter()
                            .filter(|t| t.server == name)
                            .map(|t| {
                                let hidden = t.hidden.as_ref().map(|h| format!(" [hidden: {h}]"));
                                let first = t.declaration.description.lines().next().unwrap_or("");
                                format!("{}{}  {first}", t.tool, hidden.unwrap_or_default())
                            })
                            .collect(),
                        Err(e) => vec![rpc_said("tools/list", e)],
                    }
                }
            };
            *overlay = Some(Overlay::Tools { name, lines });
            Next::Stay
        }
        _ => Next::Stay,
    }
}

fn call_key<'a>(client: &'a Client, top: &mut Top, k: KeyEvent) -> Next<'a> {
    if !matches!(k.code, KeyCode::Char('c') | KeyCode::Char('x') | KeyCode::Delete) {
        return Next::Stay;
    }
    let Some(call) = top.call() else { return Next::Stay };
    let (id, tool) = (call.id, call.tool.clone());
    top.say(format!("cancelling {tool}…"));
    Next::Do(Box::pin(async move {
        match client.calls_cancel(CallsCancelParams { id }).await {
            Ok(r) if r.cancelled => format!("cancelled {tool}"),
            Ok(_) => format!("{tool} had ended already"),
            Err(e) => rpc_said("calls/cancel", e),
        }
    }))
}

fn ask_key<'a>(
    client: &'a Client,
    top: &mut Top,
    overlay: &mut Option<Overlay>,
    k: KeyEvent,
) -> Next<'a> {
    let Some(ask) = top.ask().cloned() else { return Next::Stay };
    let KeyCode::Char(c) = k.code else {
        if k.code == KeyCode::Enter && ask.kind == AskKind::Elicitation {
            return open_form(top, overlay, ask);
        }
        return Next::Stay;
    };
    match ask.kind {
        AskKind::Confirmation => {
            let Some(outcome) = crate::session::attach::outcome_typed(&c.to_string()) else {
                return Next::Stay;
            };
            let id = ask.id.clone();
            let p =
                ConfirmationRespondParams { id: id.clone(), outcome, reason: None, session: None };
            let word = match outcome {
                ConfirmOutcome::Once => "allowed once",
                ConfirmOutcome::Session => "allowed for the session",
                ConfirmOutcome::Always => "allowed always",
                ConfirmOutcome::Deny => "denied",
            };
            Next::Do(Box::pin(async move {
                match client.confirmation_respond(p).await {
                    Ok(_) => format!("{id}: {word}"),
                    Err(e) => rpc_said(&format!("answer {id}"), e),
                }
            }))
        }
        AskKind::Elicitation if c == 'n' => {
            let id = ask.id.clone();
            let p = ServerAskRespondParams {
                id: id.clone(),
                result: json!({ "action": "decline" }),
                session: None,
            };
            Next::Do(Box::pin(async move {
                match client.elicitation_respond(p).await {
                    Ok(_) => format!("{id}: declined"),
                    Err(e) => rpc_said(&format!("answer {id}"), e),
                }
            }))
        }
        AskKind::Elicitation if c == 'y' => open_form(top, overlay, ask),
        _ => {
            top.say(format!("{} is answered by the client that asked for it", ask.id));
            Next::Stay
        }
    }
}

fn open_form<'a>(
    top: &mut Top,
    overlay: &mut Option<Overlay>,
    ask: geminid_protocol::asks::Ask,
) -> Next<'a> {
    let Some(mut form) = Elicitation::of(&ask) else {
        top.say(format!("{} cannot be answered here", ask.id));
        return Next::Stay;
    };
    let prompt = match form.start() {
        Fed::Ask(p) | Fed::Again(p) => p,
        Fed::Done(_) => String::new(),
    };
    *overlay = Some(Overlay::Form(Box::new(super::state::Form {
        ask,
        form,
        prompt,
        input: String::new(),
        note: None,
    })));
    Next::Stay
}

fn in_overlay<'a>(
    client: &'a Client,
    top: &mut Top,
    overlay: &mut Option<Overlay>,
    logs: &mut Option<Subscription<LogLine>>,
    k: KeyEvent,
) -> Next<'a> {
    let close = matches!(k.code, KeyCode::Esc);
    match overlay {
        Some(Overlay::Form(f)) => match k.code {
            KeyCode::Esc => *overlay = None,
            KeyCode::Backspace => {
                f.input.pop();
            }
            KeyCode::Char(c) => f.input.push(c),
            KeyCode::Enter => match f.form.feed(&f.input) {
                Fed::Ask(p) => {
                    f.prompt = p;
                    f.input.clear();
                    f.note = None;
                }
                Fed::Again(why) => f.note = Some(why),
                Fed::Done(result) => {
                    let id = f.ask.id.clone();
                    *overlay = None;
                    let p = ServerAskRespondParams { id: id.clone(), result, session: None };
                    return Next::Do(Box::pin(async move {
                        match client.elicitation_respond(p).await {
                            Ok(_) => format!("{id}: answered"),
                            Err(e) => rpc_said(&format!("answer {id}"), e),
                        }
                    }));
                }
            },
            _ => {}
        },
        Some(Overlay::Logs { lines, follow, scroll, .. }) => match k.code {
            KeyCode::Char('f') => {
                *follow = !*follow;
                *scroll = lines.len().saturating_sub(1);
            }
            KeyCode::Up | KeyCode::Char('k') => {
                *follow = false;
                *scroll = scroll.saturating_sub(1);
            }
            KeyCode::Down | KeyCode::Char('j') => *scroll = (*scroll + 1).min(lines.len()),
            KeyCode::PageUp => {
                *follow = false;
                *scroll = scroll.saturating_sub(20);
            }
            KeyCode::PageDown => *scroll = (*scroll + 20).min(lines.len()),
            KeyCode::Char('q') | KeyCode::Char('l') => {
                *overlay = None;
                *logs = None;
            }
            _ if close => {
                *overlay = None;
                *logs = None;
            }
            _ => {}
        },
        Some(Overlay::Help | Overlay::Tools { .. })
            if close || matches!(k.code, KeyCode::Char('q' | '?' | 't')) =>
        {
            *overlay = None;
        }
        Some(Overlay::Help | Overlay::Tools { .. }) | None => {}
    }
    let _ = top;
    Next::Stay
}
