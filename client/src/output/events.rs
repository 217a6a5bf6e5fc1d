//! Events as `gemctl events` and `attach` print them, a call's progress, a configuration change.

use geminid_protocol::event::{Event, EventBody};

use crate::output::shown;
use crate::output::{count, outln};

/// One event, human form.
pub fn event(e: &Event) {
    outln!("{}", shown::line(&event_line(e)));
}

/// [`event`]'s line.
fn event_line(e: &Event) -> String {
    let detail = match &e.body {
        EventBody::SessionCreated(s)
        | EventBody::SessionAttached(s)
        | EventBody::SessionDetached(s)
        | EventBody::SessionClosed(s) => {
            format!("{} {} (attached: {})", s.id, s.workspace, s.attached_connections)
        }
        EventBody::DaemonShuttingDown(d) => d.reason.clone(),
        EventBody::ConfigChanged(c) => format!("{} {}", c.session, describe_change(c)),
        EventBody::McpServerState(m) => {
            let s = &m.server;
            // Also sent when only the pid or the restart count changed.
            let mut line = if m.previous == s.state {
                format!("{}: {}", s.name, s.state.label())
            } else {
                format!("{}: {} → {}", s.name, m.previous.label(), s.state.label())
            };
            let mut notes = Vec::new();
            if let Some(pid) = s.pid {
                notes.push(format!("pid {pid}"));
            }
            if s.restarts > 0 {
                notes.push(count(u64::from(s.restarts), "restart"));
            }
            if !notes.is_empty() {
                line.push_str(&format!(" ({})", notes.join(", ")));
            }
            if let Some(e) = &s.last_error {
                line.push_str(&format!(": {e}"));
            }
            line
        }
        EventBody::CatalogChanged(c) => format!(
            "{}: {}, {}, {}",
            c.server,
            count(u64::from(c.tools), "tool"),
            count(u64::from(c.prompts), "prompt"),
            count(u64::from(c.resources), "resource")
        ),
        EventBody::ToolProgress(p) => match &p.call_id {
            Some(id) => format!("{} {} (call {id})", p.name, progress(p)),
            None => format!("{} {}", p.name, progress(p)),
        },
        EventBody::ConfirmationRequested(c) => {
            format!("{} {} ({}) for {}: {}", c.id, c.tool, c.server, c.path, c.details)
        }
        EventBody::ToolsChanged(c) if c.differs.is_empty() => {
            format!("{}: every definition is as pinned", c.server)
        }
        EventBody::ToolsChanged(c) => format!(
            "{}: {} differing from their pins ({}); `gemctl mcp review {}`",
            c.server,
            c.differs.len(),
            c.differs
                .iter()
                .map(|d| format!(
                    "{} {} {}{}",
                    d.kind.label(),
                    d.name,
                    d.change.label(),
                    if d.held { ", held" } else { "" }
                ))
                .collect::<Vec<_>>()
                .join("; "),
            c.server
        ),
        // A kind this gemctl does not know yet: `--json` shows it whole.
        _ => String::new(),
    };
    format!("{}  {:<20} {detail}", e.timestamp, e.body.kind())
}

/// A call's progress: `2/3 step 2`, `2`, `0.5 halfway`.
pub fn progress(p: &geminid_protocol::tools::ToolProgress) -> String {
    let amount = match p.total {
        Some(total) => format!("{}/{total}", p.progress),
        None => p.progress.to_string(),
    };
    match &p.message {
        Some(m) => format!("{amount} {m}"),
        None => amount,
    }
}

/// One line saying what a `config/changed` contains.
pub fn describe_change(c: &geminid_protocol::event::ConfigChanged) -> String {
    let mut parts = Vec::new();
    let mut list = |label: &str, names: &[String]| {
        if !names.is_empty() {
            parts.push(format!("{label}: {}", names.join(", ")));
        }
    };
    list("added", &c.servers_added);
    list("removed", &c.servers_removed);
    list("changed", &c.servers_changed);
    list("enablement", &c.enablement_changed);
    if c.trust_changed {
        parts.push("trust changed".into());
    }
    if c.settings_changed {
        parts.push("settings changed".into());
    }
    if !c.errors.is_empty() {
        parts.push(format!("{} error(s): {}", c.errors.len(), c.errors[0].message));
    } else if c.diagnostics_changed {
        parts.push("diagnostics changed".into());
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use geminid_protocol::event::{Event, EventBody};

    #[test]
    fn progress_and_catalog_events_read_as_text() -> anyhow::Result<()> {
        let event = |kind: &str, payload: serde_json::Value| -> anyhow::Result<Event> {
            let json =
                serde_json::json!({"seq": 1, "timestamp": "T", "kind": kind, "payload": payload});
            Ok(serde_json::from_value(json)?)
        };
        let p = event(
            "tools/progress",
            serde_json::json!({"session": "s", "callId": "c1", "name": "mcp_x_slow", "progress": 2.0, "total": 3.0, "message": "step 2"}),
        )?;
        assert_eq!(
            super::event_line(&p),
            "T  tools/progress       mcp_x_slow 2/3 step 2 (call c1)"
        );
        let p = event(
            "tools/progress",
            serde_json::json!({"session": "s", "name": "mcp_x_slow", "progress": 0.5}),
        )?;
        assert_eq!(super::event_line(&p), "T  tools/progress       mcp_x_slow 0.5");
        let c = event(
            "catalog/changed",
            serde_json::json!({"server": "x", "identity": "abc", "sessions": [], "tools": 1, "prompts": 0, "resources": 2}),
        )?;
        assert!(matches!(c.body, EventBody::CatalogChanged(_)));
        assert_eq!(
            super::event_line(&c),
            "T  catalog/changed      x: 1 tool, 0 prompts, 2 resources"
        );
        let state = |previous: &str, state: &str, pid: Option<u32>| {
            let mut payload = serde_json::json!({"name": "fx", "scope": "user", "transport": "stdio", "target": "fx", "state": state, "identity": "abc", "restarts": 3, "sessions": [], "previous": previous});
            if let Some(pid) = pid {
                payload["pid"] = pid.into();
            }
            event("mcp/serverState", payload)
        };
        let restarted = state("connecting", "connected", Some(7))?;
        assert_eq!(
            super::event_line(&restarted),
            "T  mcp/serverState      fx: Connecting → Connected (pid 7, 3 restarts)"
        );
        // Only the pid or the count changed: no arrow between two equal states.
        let same = state("connecting", "connecting", None)?;
        assert_eq!(super::event_line(&same), "T  mcp/serverState      fx: Connecting (3 restarts)");
        Ok(())
    }
}
