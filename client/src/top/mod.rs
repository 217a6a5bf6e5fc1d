//! `gemctl top`: a live view of everything the daemon holds (servers with their cost and use,
//! sessions, calls in flight, what waits for a person, the audit tail), and keys to act on it.
//! Fed by the event stream and a poll each `--interval`; it never starts a server by itself.
//! `--once` prints one frame as text.

mod act;
mod state;
mod view;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use geminid_protocol::client::{Client, Subscription};
use geminid_protocol::event::{EventBody, EventsSubscribeParams};
use geminid_protocol::mcp::LogLine;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use self::state::{Overlay, Snapshot, Top};
use crate::error::call_error;
use crate::output::errln;

/// The terminal in raw mode on the alternate screen, given back however `top` ends (a panic
/// included: ratatui's hook restores it first).
struct Screen(ratatui::DefaultTerminal);

impl Screen {
    fn open() -> anyhow::Result<Screen> {
        Ok(Screen(ratatui::try_init()?))
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Whether colour is wanted on this terminal.
fn colour() -> bool {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty());
    !set("NO_COLOR") && std::env::var("TERM").is_ok_and(|t| t != "dumb")
}

/// `gemctl top [--once] [--interval D]`.
pub async fn run(client: &Client, once: bool, interval: Duration) -> anyhow::Result<ExitCode> {
    if once {
        return print_once(client).await;
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "`gemctl top` needs a terminal; `gemctl top --once` prints one frame as text"
        );
    }
    let why = live(client, interval.max(Duration::from_millis(200))).await?;
    if let Some(why) = why {
        errln!("gemctl top: {why}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One frame as text: two polls half a second apart (CPU% and calls/s need two), drawn at
/// the terminal's width (or `COLUMNS`, or 120) and as tall as it needs.
async fn print_once(client: &Client) -> anyhow::Result<ExitCode> {
    let mut top = Top::new(false);
    top.once = true;
    top.update(Snapshot::fetch(client).await?, Instant::now());
    tokio::time::sleep(Duration::from_millis(500)).await;
    top.update(Snapshot::fetch(client).await?, Instant::now());
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<u16>().ok())
        .or_else(|| ratatui::crossterm::terminal::size().ok().map(|(w, _)| w))
        .unwrap_or(120)
        .max(60);
    let sessions = view::session_lines(&top.snap.sessions).len().max(top.snap.calls.len());
    let height = 2
        + (top.rows.len() + 3)
        + (sessions + 3)
        + (top.snap.asks.len() + 2).max(3)
        + (top.snap.audit.len().min(10) + 3);
    let mut term = Terminal::new(TestBackend::new(width, u16::try_from(height).unwrap_or(200)))?;
    term.draw(|f| view::draw(f, &top, None))?;
    let buffer = term.backend().buffer();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let line: String =
            (0..buffer.area.width).map(|x| buffer[(x, y)].symbol().to_owned()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    crate::output::outln!("{}", out.trim_end());
    Ok(ExitCode::SUCCESS)
}

/// How long a failed refresh waits for the subscription's last events (a shutdown is said
/// before the connection closes).
const LAST_WORDS: Duration = Duration::from_millis(500);

/// The events that change what is shown (each brings the next poll forward).
const WATCHED: &[&str] = &[
    "session/created",
    "session/attached",
    "session/detached",
    "session/closed",
    "daemon/shuttingDown",
    "mcp/serverState",
    "catalog/changed",
    "tools/progress",
    "confirmation/requested",
    "elicitation/requested",
    "sampling/requested",
    "mcp/toolsChanged",
];

/// How soon after an event the screen is refreshed: a burst (a server's progress
/// notifications) is one refresh, and at most four a second.
const AFTER_EVENT: Duration = Duration::from_millis(250);

/// The live screen until `q`; why it ended otherwise (the daemon stopped).
async fn live(client: &Client, interval: Duration) -> anyhow::Result<Option<String>> {
    let kinds = Some(WATCHED.iter().map(|k| (*k).to_owned()).collect());
    let params = EventsSubscribeParams { session: None, kinds };
    let mut events =
        client.subscribe_events(Some(params)).await.map_err(call_error("events/subscribe"))?;
    let mut top = Top::new(colour());
    top.update(Snapshot::fetch(client).await?, Instant::now());
    let mut screen = Screen::open()?;
    let (keys_tx, mut keys) = tokio::sync::mpsc::channel(64);
    // crossterm reads the terminal blocking: on a thread of its own, for as long as we run.
    std::thread::spawn(move || {
        while let Ok(ev) = ratatui::crossterm::event::read() {
            if keys_tx.blocking_send(ev).is_err() {
                break;
            }
        }
    });
    let mut quit = std::pin::pin!(quit_signals()?);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut overlay: Option<Overlay> = None;
    let mut logs: Option<Subscription<LogLine>> = None;
    let mut pending = FuturesUnordered::new();
    // An event asks for a refresh a little later, so that a burst is one refresh.
    let mut soon: Option<tokio::time::Instant> = None;
    loop {
        screen.0.draw(|f| view::draw(f, &top, overlay.as_ref()))?;
        let refresh = tokio::select! {
            _ = tick.tick() => true,
            () = async { tokio::time::sleep_until(soon.unwrap_or_else(tokio::time::Instant::now)).await }, if soon.is_some() => true,
            key = keys.recv() => {
                let Some(key) = key else { return Ok(None) };
                match act::key(client, &mut top, &mut overlay, &mut logs, key).await {
                    act::Next::Quit => return Ok(None),
                    act::Next::Stay => false,
                    act::Next::Do(work) => {
                        pending.push(work);
                        false
                    }
                }
            }
            done = pending.next(), if !pending.is_empty() => {
                if let Some(said) = done {
                    top.say(said);
                }
                true
            }
            line = async { next_line(&mut logs).await } => {
                match (line, overlay.as_mut()) {
                    (Some(l), Some(Overlay::Logs { lines, .. })) => lines.push(act::log_line(&l)),
                    _ => logs = None,
                }
                false
            }
            event = events.next() => match event {
                Some(Ok(e)) => {
                    if let EventBody::DaemonShuttingDown(s) = &e.body {
                        return Ok(Some(format!("geminid is shutting down ({})", s.reason)));
                    }
                    if soon.is_none() {
                        soon = Some(tokio::time::Instant::now() + AFTER_EVENT);
                    }
                    false
                }
                _ => return Ok(Some("the connection to geminid ended".to_owned())),
            },
            () = &mut quit => return Ok(None),
        };
        if refresh {
            soon = None;
            match Snapshot::fetch(client).await {
                Ok(snap) => top.update(snap, Instant::now()),
                Err(e) => {
                    // A daemon that shuts down says so before its connections close, but the
                    // refresh can meet the closed connection before the client has handed
                    // the event on: read what the subscription still gives (it ends with the
                    // connection), for a moment at most.
                    let said = tokio::time::timeout(LAST_WORDS, async {
                        while let Some(Ok(ev)) = events.next().await {
                            if let EventBody::DaemonShuttingDown(s) = &ev.body {
                                return Some(format!("geminid is shutting down ({})", s.reason));
                            }
                        }
                        None
                    });
                    let said = said.await.ok().flatten();
                    return Ok(Some(
                        said.unwrap_or_else(|| format!("geminid stopped answering: {e:#}")),
                    ));
                }
            }
        }
    }
}

/// SIGTERM or SIGHUP (the terminal closed): end as `q` does, giving the terminal back.
#[cfg(unix)]
fn quit_signals() -> anyhow::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    })
}

#[cfg(not(unix))]
fn quit_signals() -> anyhow::Result<impl Future<Output = ()>> {
    Ok(std::future::pending())
}

async fn next_line(logs: &mut Option<Subscription<LogLine>>) -> Option<LogLine> {
    match logs {
        Some(s) => match s.next().await {
            Some(Ok(l)) => Some(l),
            _ => None,
        },
        None => std::future::pending().await,
    }
}
