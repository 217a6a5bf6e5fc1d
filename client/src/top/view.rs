//! Drawing `gemctl top`: a header, the servers, sessions beside calls in flight, what waits
//! for a person, the audit tail, and a footer with the focused pane's keys. Fits 80×24.

use geminid_protocol::mcp::ServerState;
use geminid_protocol::policy::{ApprovalMode, PolicyDecision};
use geminid_protocol::session::Session;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, Paragraph, Row as TableRow, Table, TableState, Wrap,
};

use super::state::{Overlay, Pane, Row, Top};

/// A style, or none without colour.
fn tint(top: &Top, color: Color) -> Style {
    if top.color { Style::new().fg(color) } else { Style::new() }
}

fn state_color(r: &Row) -> Color {
    if r.stopped {
        return Color::DarkGray;
    }
    match r.status.state {
        ServerState::Connected => Color::Green,
        ServerState::Connecting => Color::Yellow,
        ServerState::Disconnected | ServerState::CrashLoop => Color::Red,
        ServerState::NeedsAuth => Color::Magenta,
        ServerState::Disabled | ServerState::Blocked => Color::DarkGray,
    }
}

fn state_word(r: &Row) -> &'static str {
    if r.stopped {
        return "stopped";
    }
    match r.status.state {
        ServerState::Connected => "connected",
        ServerState::Connecting => "starting",
        ServerState::Disconnected => "down",
        ServerState::CrashLoop => "crashloop",
        ServerState::NeedsAuth => "needsauth",
        ServerState::Disabled => "disabled",
        ServerState::Blocked => "blocked",
    }
}

/// `1.2M`, `340K`, `2.1G`.
pub fn bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f >= K * K * K {
        format!("{:.1}G", f / (K * K * K))
    } else if f >= K * K {
        format!("{:.1}M", f / (K * K))
    } else {
        format!("{:.0}K", f / K)
    }
}

/// A call's duration from microseconds: `850µs`, `4.2ms`, `120ms`, `1.5s`.
pub fn latency(us: u64) -> String {
    let ms = us as f64 / 1000.0;
    if us < 1000 {
        format!("{us}µs")
    } else if ms < 10.0 {
        format!("{ms:.1}ms")
    } else if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.1}s", ms / 1000.0)
    }
}

/// A session id as the panes show it: as every table does (what `--session` takes).
fn short_id(id: &str) -> String {
    crate::output::short_session(id)
}

/// `45s`, `12m`, `3h`, `2d`.
pub fn short_duration(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

fn block<'a>(top: &Top, pane: Pane, title: String) -> Block<'a> {
    let focused = top.focus == pane && !top.once;
    let style = if focused && top.color {
        Style::new().fg(Color::Cyan)
    } else if focused {
        Style::new().add_modifier(Modifier::BOLD)
    } else {
        Style::new()
    };
    let mark = if focused { "▶ " } else { "" };
    Block::new().borders(Borders::ALL).border_style(style).title(format!("{mark}{title}"))
}

/// A pane's table state: its selection shown while it has the focus and a line to select.
fn selection(top: &Top, pane: Pane) -> TableState {
    TableState::default()
        .with_selected((top.focus == pane && top.len(pane) > 0).then(|| top.selected(pane)))
}

fn highlight(top: &Top) -> Style {
    if top.color {
        Style::new().bg(Color::DarkGray)
    } else {
        Style::new().add_modifier(Modifier::REVERSED)
    }
}

/// Width of the sessions pane at least: its columns' least (SESSION 12, WORKSPACE 9, CL 2,
/// MODE 8, ASKS 4), the gaps between them and its borders.
const SESSIONS_MIN: u16 = 12 + 9 + 2 + 8 + 4 + 4 + 2;
/// Width the calls pane keeps at least: its columns' least (SESSION 8, TOOL 10, ELAPSED 7,
/// PROGRESS 6), the gaps between them and its borders.
const CALLS_MIN: u16 = 8 + 10 + 7 + 6 + 3 + 2;

/// The whole screen.
pub fn draw(f: &mut Frame<'_>, top: &Top, overlay: Option<&Overlay>) {
    let area = f.area();
    // One frame as text has no keys to press: no key bar.
    let foot_h = if top.once { 0 } else { 1 };
    let [head, body, foot] =
        Layout::vertical([Constraint::Length(1), Constraint::Fill(1), Constraint::Length(foot_h)])
            .areas(area);
    header(f, head, top);
    let servers_h = (top.rows.len() as u16 + 3).clamp(4, body.height.saturating_mul(2) / 5 + 1);
    let asks_h = if top.snap.asks.is_empty() { 3 } else { (top.snap.asks.len() as u16 + 2).min(6) };
    let [servers_a, middle, asks_a, audit_a] = Layout::vertical([
        Constraint::Length(servers_h),
        Constraint::Fill(1),
        Constraint::Length(asks_h),
        Constraint::Fill(1),
    ])
    .areas(body);
    // Half each, but the sessions pane no narrower than its columns' headers need (80
    // columns cut WORKSPACE), while the calls pane keeps its columns' least.
    let left = (middle.width / 2).max(SESSIONS_MIN).min(middle.width.saturating_sub(CALLS_MIN));
    let [sessions_a, calls_a] =
        Layout::horizontal([Constraint::Length(left), Constraint::Fill(1)]).areas(middle);
    servers(f, servers_a, top);
    sessions(f, sessions_a, top);
    calls(f, calls_a, top);
    asks(f, asks_a, top);
    audit(f, audit_a, top);
    if !top.once {
        footer(f, foot, top);
    }
    if let Some(o) = overlay {
        overlay_view(f, area, top, o);
    }
}

fn header(f: &mut Frame<'_>, area: Rect, top: &Top) {
    let s = &top.snap;
    let mut text = match &s.daemon {
        Some(d) => format!(
            "geminid {} · pid {} · up {} · {} sessions · {} servers · {} calls",
            d.version,
            d.pid,
            short_duration(d.uptime_secs),
            s.sessions.len(),
            s.servers.len(),
            s.calls.len()
        ),
        None => "geminid: connecting…".to_owned(),
    };
    if !s.asks.is_empty() {
        text.push_str(&format!(" · {} waiting for you", s.asks.len()));
    }
    let style = if top.color { Style::new().add_modifier(Modifier::BOLD) } else { Style::new() };
    f.render_widget(Paragraph::new(Line::from(vec![Span::styled(text, style)])), area);
}

/// A server's name, and when another row has the same name (a server that asks for roots runs
/// one copy per set of roots; one told less runs a copy for the clients that declare less),
/// what tells its copy apart: its roots' last folder, `told less`, else its identity's first
/// digits (audit turn 4, C4: three `everything` rows alike).
fn copy_label(s: &geminid_protocol::mcp::ServerStatus, rows: &[Row]) -> String {
    if rows.iter().filter(|r| r.status.name == s.name).count() < 2 {
        return s.name.clone();
    }
    let folder = |root: &String| {
        let path = root.strip_prefix("file://").unwrap_or(root).trim_end_matches('/');
        path.rsplit('/').next().unwrap_or(path).to_owned()
    };
    match (s.roots.first(), &s.identity) {
        (Some(root), _) => format!("{} ({})", s.name, folder(root)),
        (None, _) if s.told.is_some() => format!("{} (told less)", s.name),
        (None, Some(id)) => format!("{} #{}", s.name, id.get(..6).unwrap_or(id)),
        (None, None) => s.name.clone(),
    }
}

fn servers(f: &mut Frame<'_>, area: Rect, top: &Top) {
    let wide = area.width >= 110;
    let mut head =
        vec!["NAME", "STATE", "PID", "UP", "RST", "TOOLS", "SES", "CPU%", "RSS", "CALL/S", "ERR/M"];
    let mut widths = vec![
        Constraint::Min(10),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(4),
        Constraint::Length(3),
        Constraint::Length(5),
        Constraint::Length(3),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(5),
    ];
    if wide {
        head.insert(1, "TRANSPORT");
        widths.insert(1, Constraint::Length(9));
        // Each server's call durations, from the daemon's histograms (telemetry on).
        head.extend(["P50", "P99"]);
        widths.extend([Constraint::Length(6), Constraint::Length(6)]);
        head.push("LAST ERROR");
        widths.push(Constraint::Fill(2));
    }
    let rows = top.rows.iter().map(|r| {
        let s = &r.status;
        let u = s.usage.as_ref();
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
        let mut cells = vec![
            Cell::from(copy_label(s, &top.rows)),
            Cell::from(Span::styled(state_word(r), tint(top, state_color(r)))),
            Cell::from(opt(s.pid.map(|p| p.to_string()))),
            Cell::from(opt(s.uptime_secs.map(short_duration))),
            Cell::from(s.restarts.to_string()),
            Cell::from(opt(s.tools.map(|t| t.to_string()))),
            Cell::from(s.sessions.len().to_string()),
            Cell::from(opt(r.cpu.map(|c| format!("{c:.1}")))),
            Cell::from(opt(u.and_then(|u| u.rss_bytes).map(bytes))),
            Cell::from(opt(r.rate.map(|c| format!("{c:.1}")))),
            Cell::from(opt(u.map(|u| u.errors_last_minute.to_string()))),
        ];
        if wide {
            cells.insert(1, Cell::from(format!("{:?}", s.transport).to_lowercase()));
            cells.push(Cell::from(opt(u.and_then(|u| u.p50_us).map(latency))));
            cells.push(Cell::from(opt(u.and_then(|u| u.p99_us).map(latency))));
            cells.push(Cell::from(s.last_error.clone().unwrap_or_default()));
        }
        TableRow::new(cells)
    });
    let title = format!("Servers ({}) · sorted by {}", top.rows.len(), top.sort.label());
    let head_style = Style::new().add_modifier(Modifier::BOLD);
    let table = Table::new(rows, widths)
        .header(TableRow::new(head).style(head_style))
        .block(block(top, Pane::Servers, title))
        .row_highlight_style(highlight(top));
    f.render_stateful_widget(table, area, &mut selection(top, Pane::Servers));
}

/// A session's approval mode, and whether it asks a person (`yes`: interactive, `no`:
/// headless, `auto`: while a client listens for confirmations).
fn mode(s: &Session) -> (&'static str, &'static str) {
    let m = match s.state.approval_mode {
        ApprovalMode::Default => "default",
        ApprovalMode::AutoEdit => "autoEdit",
        ApprovalMode::Yolo => "yolo",
        ApprovalMode::Plan => "plan",
    };
    let asks = match s.state.interactive {
        Some(true) => "yes",
        Some(false) => "no",
        None => "auto",
    };
    (m, asks)
}

/// Sessions as a tree: each root, then the sessions derived from it, indented.
pub fn session_lines(list: &[Session]) -> Vec<(usize, &Session)> {
    fn under<'a>(
        list: &'a [Session],
        parent: &str,
        depth: usize,
        out: &mut Vec<(usize, &'a Session)>,
    ) {
        for s in
            list.iter().filter(|s| s.state.derived.as_ref().is_some_and(|d| d.parent == parent))
        {
            out.push((depth, s));
            under(list, &s.id, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    let known = |id: &str| list.iter().any(|s| s.id == id);
    for s in list {
        let root = match &s.state.derived {
            None => true,
            Some(d) => !known(&d.parent),
        };
        if root {
            out.push((0, s));
            under(list, &s.id, 1, &mut out);
        }
    }
    out
}

fn sessions(f: &mut Frame<'_>, area: Rect, top: &Top) {
    let lines = session_lines(&top.snap.sessions);
    let rows = lines.iter().map(|(depth, s)| {
        let name = match &s.state.derived {
            Some(d) => format!("{}└ {}", "  ".repeat(depth.saturating_sub(1)), d.name),
            None => short_id(&s.id),
        };
        let ws = std::path::Path::new(&s.workspace)
            .file_name()
            .map_or_else(|| s.workspace.clone(), |n| n.to_string_lossy().into_owned());
        let (m, asks) = mode(s);
        TableRow::new(vec![
            Cell::from(name),
            Cell::from(ws),
            Cell::from(s.attached_connections.to_string()),
            Cell::from(m),
            Cell::from(asks),
        ])
    });
    let widths = [
        Constraint::Min(12),
        Constraint::Fill(1),
        Constraint::Length(2),
        Constraint::Length(8),
        Constraint::Length(4),
    ];
    let table = Table::new(rows, widths)
        .header(
            TableRow::new(vec!["SESSION", "WORKSPACE", "CL", "MODE", "ASKS"])
                .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .block(block(top, Pane::Sessions, format!("Sessions ({})", lines.len())))
        .row_highlight_style(highlight(top));
    f.render_stateful_widget(table, area, &mut selection(top, Pane::Sessions));
}

fn calls(f: &mut Frame<'_>, area: Rect, top: &Top) {
    let rows = top.snap.calls.iter().map(|c| {
        let progress = c.progress.as_ref().map_or(String::new(), |p| match p.total {
            Some(t) if t > 0.0 => format!("{:.0}%", p.progress / t * 100.0),
            _ => format!("{}", p.progress),
        });
        let progress = match c.progress.as_ref().and_then(|p| p.message.as_deref()) {
            Some(m) => format!("{progress} {m}"),
            None => progress,
        };
        TableRow::new(vec![
            Cell::from(short_id(&c.session)),
            Cell::from(c.tool.clone()),
            Cell::from(format!("{:.1}s", c.elapsed_ms as f64 / 1000.0)),
            Cell::from(progress),
        ])
    });
    let widths =
        [Constraint::Length(8), Constraint::Min(10), Constraint::Length(7), Constraint::Min(6)];
    let table = Table::new(rows, widths)
        .header(
            TableRow::new(vec!["SESSION", "TOOL", "ELAPSED", "PROGRESS"])
                .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .block(block(top, Pane::Calls, format!("Calls in flight ({})", top.snap.calls.len())))
        .row_highlight_style(highlight(top));
    f.render_stateful_widget(table, area, &mut selection(top, Pane::Calls));
}

fn asks(f: &mut Frame<'_>, area: Rect, top: &Top) {
    let now = crate::output::now_ms();
    let rows = top.snap.asks.iter().map(|a| {
        let left = a.deadline_ms.saturating_sub(now) / 1000;
        let kind = match a.kind {
            geminid_protocol::asks::AskKind::Confirmation => "confirm",
            geminid_protocol::asks::AskKind::Elicitation => "form",
            geminid_protocol::asks::AskKind::Sampling => "sampling",
            geminid_protocol::asks::AskKind::OpenUrl => "open url",
        };
        TableRow::new(vec![
            Cell::from(a.id.clone()),
            Cell::from(Span::styled(kind, tint(top, Color::Yellow))),
            Cell::from(short_id(&a.session)),
            Cell::from(a.title.clone()),
            Cell::from(format!("{left}s")),
        ])
    });
    let widths = [
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Fill(1),
        Constraint::Length(5),
    ];
    let title = if top.snap.asks.is_empty() || top.once {
        format!("Waiting for you ({})", top.snap.asks.len())
    } else {
        format!(
            "Waiting for you ({}) · y once  s session  a always  n deny  ⏎ form",
            top.snap.asks.len()
        )
    };
    let table = Table::new(rows, widths)
        .block(block(top, Pane::Asks, title))
        .row_highlight_style(highlight(top));
    f.render_stateful_widget(table, area, &mut selection(top, Pane::Asks));
}

fn audit(f: &mut Frame<'_>, area: Rect, top: &Top) {
    let rows = top.snap.audit.iter().map(|r| {
        let time = r.time.get(11..19).unwrap_or(&r.time).to_owned();
        let (word, color) = match (r.decision, r.ok) {
            (Some(PolicyDecision::Deny), _) => ("denied", Color::Red),
            (_, false) => ("failed", Color::Red),
            (Some(PolicyDecision::AskUser), true) => ("asked", Color::Yellow),
            _ => ("ok", Color::Green),
        };
        TableRow::new(vec![
            Cell::from(time),
            Cell::from(short_id(&r.session)),
            Cell::from(crate::output::audit_subject(r)),
            Cell::from(Span::styled(word, tint(top, color))),
            Cell::from(format!("{}ms", r.duration_ms)),
            Cell::from(r.error.clone().unwrap_or_default()),
        ])
    });
    let widths = [
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Min(12),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Fill(1),
    ];
    let table = Table::new(rows, widths)
        .block(block(top, Pane::Audit, "Audit (newest first)".to_owned()))
        .row_highlight_style(highlight(top));
    f.render_stateful_widget(table, area, &mut selection(top, Pane::Audit));
}

/// The keys of the focused pane.
pub fn keys(pane: Pane) -> &'static str {
    match pane {
        Pane::Servers => "r restart  x stop  s start  l logs  t tools  o sort",
        Pane::Sessions => "↑↓ select",
        Pane::Calls => "c cancel",
        Pane::Asks => "y once  s session  a always  n deny  ⏎ answer a form",
        Pane::Audit => "↑↓ select",
    }
}

fn footer(f: &mut Frame<'_>, area: Rect, top: &Top) {
    let fresh = top.message.as_ref().filter(|(_, at)| at.elapsed().as_secs() < 5);
    let text = match fresh {
        Some((m, _)) => m.clone(),
        None => {
            let extra = match (top.focus, top.server()) {
                (Pane::Servers, Some(r)) => {
                    r.status.last_error.as_deref().map(|e| format!(" · {e}"))
                }
                _ => None,
            };
            format!("{}  ⇥ pane  q quit  ? help{}", keys(top.focus), extra.unwrap_or_default())
        }
    };
    f.render_widget(Paragraph::new(text), area);
}

fn overlay_view(f: &mut Frame<'_>, area: Rect, top: &Top, o: &Overlay) {
    let (title, lines, keys): (String, Vec<Line<'_>>, &str) = match o {
        Overlay::Help => ("Help".to_owned(), HELP.lines().map(Line::from).collect(), "esc close"),
        Overlay::Logs { name, lines, follow, scroll } => {
            let height = area.height.saturating_sub(3) as usize;
            let end = if *follow { lines.len() } else { (*scroll + height).min(lines.len()) };
            let start = end.saturating_sub(height);
            let shown = lines[start..end].iter().map(|l| Line::from(l.clone())).collect();
            let mode = if *follow { "following" } else { "paused" };
            (format!("Log of {name} ({mode})"), shown, "f follow  ↑↓ PgUp PgDn scroll  esc close")
        }
        Overlay::Tools { name, lines } => (
            format!("Tools of {name}"),
            lines.iter().map(|l| Line::from(l.clone())).collect(),
            "esc close",
        ),
        Overlay::Form(form) => {
            let mut ls: Vec<Line<'_>> = vec![Line::from(form.ask.title.clone()), Line::from("")];
            ls.extend(form.prompt.lines().map(|l| Line::from(l.to_owned())));
            if let Some(n) = &form.note {
                ls.push(Line::from(Span::styled(n.clone(), tint(top, Color::Red))));
            }
            ls.push(Line::from(format!("> {}▏", form.input)));
            let keys = "⏎ enter  esc leave (answer later)  !decline  !cancel";
            (format!("Answer {}", form.ask.id), ls, keys)
        }
    };
    let [main, foot] = Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(area);
    f.render_widget(Clear, area);
    let p = Paragraph::new(lines)
        .block(Block::new().borders(Borders::ALL).title(title))
        .wrap(Wrap { trim: false });
    f.render_widget(p, main);
    f.render_widget(Paragraph::new(keys), foot);
}

const HELP: &str = "\
gemctl top: everything geminid holds, live.

  Tab / Shift-Tab, 1-5   move between panes
  ↑ ↓ j k, PgUp PgDn      select
  q, Ctrl-C              quit

Servers    r restart   x stop   s start (a stopped one)   l its log   t its tools
           o sort by name, state, cpu, memory, calls/s, errors
Calls      c cancel the selected call
Waiting    y once   s for the session   a always   n deny   ⏎ answer a form

CPU% is of one core, over the last refresh; RSS is the server's process tree.
CALL/S is over the last refresh, ERR/M over the last minute.
Nothing here starts a server by itself: `s` and `r` do, when you press them.";
