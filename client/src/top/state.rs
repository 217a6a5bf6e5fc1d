//! What `gemctl top` knows: the daemon's answers at the last poll, what it derives from two
//! polls (CPU%, calls per second), the servers it saw stop, and where the person is.

use std::collections::HashMap;
use std::time::Instant;

use geminid_protocol::api::{
    AuditApiClient, CallsApiClient, DaemonApiClient, McpApiClient, SessionApiClient,
};
use geminid_protocol::asks::{Ask, AsksPendingParams};
use geminid_protocol::calls::{CallInFlight, CallsListParams};
use geminid_protocol::client::Client;
use geminid_protocol::daemon::StatusResult;
use geminid_protocol::mcp::{ListServersParams, ServerState, ServerStatus};
use geminid_protocol::policy::{AuditListParams, AuditRecord};
use geminid_protocol::session::{Session, SessionListParams};

use crate::error::call_error;
use crate::session::elicit::Elicitation;

/// What covers the panes for a while.
#[derive(Debug)]
pub enum Overlay {
    Help,
    /// A server's log, followed as it is written.
    Logs {
        name: String,
        lines: Vec<String>,
        follow: bool,
        scroll: usize,
    },
    /// A server's tools, as the first session using it sees them.
    Tools {
        name: String,
        lines: Vec<String>,
    },
    /// An elicitation answered field by field.
    Form(Box<Form>),
}

/// An elicitation being answered: its ask, where the form is, what it asks now, what is
/// typed, and why the last line was not taken.
#[derive(Debug)]
pub struct Form {
    pub ask: Ask,
    pub form: Elicitation,
    pub prompt: String,
    pub input: String,
    pub note: Option<String>,
}

/// How many audit records are shown at most.
pub const AUDIT_KEPT: u32 = 50;

/// The panes, in the order Tab visits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Servers,
    Sessions,
    Calls,
    Asks,
    Audit,
}

impl Pane {
    pub const ALL: [Pane; 5] =
        [Pane::Servers, Pane::Sessions, Pane::Calls, Pane::Asks, Pane::Audit];

    fn index(self) -> usize {
        Self::ALL.iter().position(|p| *p == self).unwrap_or(0)
    }

    /// The next pane (or the previous one).
    pub fn step(self, back: bool) -> Pane {
        let n = Self::ALL.len();
        let i = if back { (self.index() + n - 1) % n } else { (self.index() + 1) % n };
        Self::ALL[i]
    }
}

/// How the servers are sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Name,
    State,
    Cpu,
    Memory,
    Calls,
    Errors,
}

impl Sort {
    pub fn next(self) -> Sort {
        match self {
            Sort::Name => Sort::State,
            Sort::State => Sort::Cpu,
            Sort::Cpu => Sort::Memory,
            Sort::Memory => Sort::Calls,
            Sort::Calls => Sort::Errors,
            Sort::Errors => Sort::Name,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Sort::Name => "name",
            Sort::State => "state",
            Sort::Cpu => "cpu",
            Sort::Memory => "memory",
            Sort::Calls => "calls/s",
            Sort::Errors => "errors",
        }
    }
}

/// One server as shown: its status and what two polls tell.
#[derive(Debug, Clone)]
pub struct Row {
    pub status: ServerStatus,
    /// Percent of one core since the last poll.
    pub cpu: Option<f64>,
    /// Calls per second since the last poll.
    pub rate: Option<f64>,
    /// Seen running before and gone from the daemon's list now: stopped (`s` starts it).
    pub stopped: bool,
}

/// One daemon answer of each kind.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub daemon: Option<StatusResult>,
    pub servers: Vec<ServerStatus>,
    pub sessions: Vec<Session>,
    pub calls: Vec<CallInFlight>,
    pub asks: Vec<Ask>,
    pub audit: Vec<AuditRecord>,
}

impl Snapshot {
    /// Ask the daemon for all of it (six requests on one connection, sent together).
    pub async fn fetch(client: &Client) -> anyhow::Result<Snapshot> {
        let servers =
            client.mcp_list_servers(Some(ListServersParams { session: None, usage: true }));
        let calls = client.calls_list(Some(CallsListParams::default()));
        let asks = client.asks_pending(AsksPendingParams { session: None });
        let audit = client
            .audit_list(Some(AuditListParams { limit: Some(AUDIT_KEPT), ..Default::default() }));
        let (daemon, servers, sessions, calls, asks, audit) =
            tokio::join!(client.status(), servers, sessions(client), calls, asks, audit);
        Ok(Snapshot {
            daemon: Some(daemon.map_err(call_error("daemon/status"))?),
            servers: servers.map_err(call_error("mcp/listServers"))?.servers,
            sessions: sessions?,
            calls: calls.map_err(call_error("calls/list"))?.calls,
            asks: asks.map_err(call_error("asks/pending"))?.asks,
            audit: audit.map_err(call_error("audit/list"))?.records,
        })
    }
}

/// Every session, page by page.
async fn sessions(client: &Client) -> anyhow::Result<Vec<Session>> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let p = SessionListParams { cursor, ..Default::default() };
        let page = client.list(Some(p)).await.map_err(call_error("session/list"))?;
        out.extend(page.sessions);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(out),
        }
    }
}

/// Where the person is in a pane.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cursor {
    pub selected: usize,
}

/// Everything on the screen.
#[derive(Debug)]
pub struct Top {
    pub snap: Snapshot,
    pub rows: Vec<Row>,
    pub focus: Pane,
    pub cursors: HashMap<&'static str, Cursor>,
    pub sort: Sort,
    /// Servers seen running that are gone now, by name and identity.
    stopped: Vec<ServerStatus>,
    /// The last reading of each server (by identity): when, CPU ms, calls.
    last: HashMap<String, (Instant, Option<u64>, u64)>,
    /// The last thing an action said, and when.
    pub message: Option<(String, Instant)>,
    pub color: bool,
    /// Drawn once as text (`--once`): no focus, no keys to press.
    pub once: bool,
}

fn pane_key(p: Pane) -> &'static str {
    match p {
        Pane::Servers => "servers",
        Pane::Sessions => "sessions",
        Pane::Calls => "calls",
        Pane::Asks => "asks",
        Pane::Audit => "audit",
    }
}

impl Top {
    pub fn new(color: bool) -> Top {
        Top {
            snap: Snapshot::default(),
            rows: Vec::new(),
            focus: Pane::Servers,
            cursors: HashMap::new(),
            sort: Sort::Name,
            stopped: Vec::new(),
            last: HashMap::new(),
            message: None,
            color,
            once: false,
        }
    }

    /// Take a new snapshot, taken at `now`.
    pub fn update(&mut self, snap: Snapshot, now: Instant) {
        let mut rows = Vec::new();
        let mut last = HashMap::new();
        for s in &snap.servers {
            let id = s.identity.clone().unwrap_or_default();
            let usage = s.usage.as_ref();
            let cpu_ms = usage.and_then(|u| u.cpu_ms);
            let calls = usage.map_or(0, |u| u.calls);
            let (cpu, rate) = match self.last.get(&id) {
                Some((at, before_cpu, before_calls)) => {
                    let secs = now.duration_since(*at).as_secs_f64();
                    let cpu = match (cpu_ms, before_cpu) {
                        (Some(c), Some(b)) if secs > 0.0 && c >= *b => {
                            Some((c - b) as f64 / 10.0 / secs)
                        }
                        _ => None,
                    };
                    let rate = (secs > 0.0 && calls >= *before_calls)
                        .then(|| (calls - before_calls) as f64 / secs);
                    (cpu, rate)
                }
                None => (None, None),
            };
            last.insert(id, (now, cpu_ms, calls));
            rows.push(Row { status: s.clone(), cpu, rate, stopped: false });
        }
        // Servers that were running at the last poll and are gone now: stopped.
        for before in &self.snap.servers {
            let here = |s: &ServerStatus| s.name == before.name && s.identity == before.identity;
            if !snap.servers.iter().any(here) && !self.stopped.iter().any(here) {
                self.stopped.push(before.clone());
            }
        }
        // One that runs again (under any identity) is not shown as stopped.
        self.stopped.retain(|s| !snap.servers.iter().any(|r| r.name == s.name));
        for s in &self.stopped {
            let mut status = s.clone();
            status.state = ServerState::Disconnected;
            status.pid = None;
            status.uptime_secs = None;
            status.usage = None;
            status.sessions.clear();
            rows.push(Row { status, cpu: None, rate: None, stopped: true });
        }
        self.last = last;
        self.rows = rows;
        self.snap = snap;
        self.sort_rows();
        self.clamp();
    }

    pub fn sort_rows(&mut self) {
        let key = |r: &Row| -> (u8, i64) {
            let u = r.status.usage.as_ref();
            let neg = |f: Option<f64>| -(f.unwrap_or(-1.0) * 1000.0) as i64;
            match self.sort {
                Sort::Name => (0, 0),
                Sort::State => (state_rank(r), 0),
                Sort::Cpu => (0, neg(r.cpu)),
                Sort::Memory => (0, -(u.and_then(|u| u.rss_bytes).unwrap_or(0) as i64)),
                Sort::Calls => (0, neg(r.rate)),
                Sort::Errors => (0, -i64::from(u.map_or(0, |u| u.errors_last_minute))),
            }
        };
        self.rows
            .sort_by(|a, b| key(a).cmp(&key(b)).then_with(|| a.status.name.cmp(&b.status.name)));
    }

    /// Keep every selection inside its list.
    pub fn clamp(&mut self) {
        for p in Pane::ALL {
            let len = self.len(p);
            let c = self.cursors.entry(pane_key(p)).or_default();
            c.selected = c.selected.min(len.saturating_sub(1));
        }
    }

    /// How many lines a pane's list has.
    pub fn len(&self, p: Pane) -> usize {
        match p {
            Pane::Servers => self.rows.len(),
            Pane::Sessions => self.snap.sessions.len(),
            Pane::Calls => self.snap.calls.len(),
            Pane::Asks => self.snap.asks.len(),
            Pane::Audit => self.snap.audit.len(),
        }
    }

    pub fn selected(&self, p: Pane) -> usize {
        self.cursors.get(pane_key(p)).map_or(0, |c| c.selected)
    }

    /// Move the focused pane's selection by `by` lines.
    pub fn move_by(&mut self, by: isize) {
        let len = self.len(self.focus);
        let c = self.cursors.entry(pane_key(self.focus)).or_default();
        let to = c.selected as isize + by;
        c.selected = to.clamp(0, len.saturating_sub(1) as isize) as usize;
    }

    pub fn server(&self) -> Option<&Row> {
        self.rows.get(self.selected(Pane::Servers))
    }

    pub fn call(&self) -> Option<&CallInFlight> {
        self.snap.calls.get(self.selected(Pane::Calls))
    }

    pub fn ask(&self) -> Option<&Ask> {
        self.snap.asks.get(self.selected(Pane::Asks))
    }

    pub fn say(&mut self, text: impl Into<String>) {
        self.message = Some((text.into(), Instant::now()));
    }
}

fn state_rank(r: &Row) -> u8 {
    if r.stopped {
        return 7;
    }
    match r.status.state {
        ServerState::CrashLoop => 0,
        ServerState::NeedsAuth => 1,
        ServerState::Disconnected => 2,
        ServerState::Connecting => 3,
        ServerState::Connected => 4,
        ServerState::Blocked => 5,
        ServerState::Disabled => 6,
    }
}
