//! Sessions as `gemctl session list|show|new` print them.

use geminid_protocol::session::Session;

use crate::output::shown;
use crate::output::{outln, table};

/// `gemctl session list`.
pub fn sessions(list: &[Session]) {
    if list.is_empty() {
        outln!("No sessions. `gemctl session new` creates one.");
        return;
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            vec![
                s.id.clone(),
                s.workspace.clone(),
                if s.is_default { "yes" } else { "" }.to_owned(),
                s.attached_connections.to_string(),
                crate::output::ago::age(&s.last_seen_at),
                s.state
                    .derived
                    .as_ref()
                    .map(|d| format!("{} ({})", d.parent, d.name))
                    .unwrap_or_default(),
            ]
        })
        .collect();
    table(&["ID", "WORKSPACE", "DEFAULT", "ATTACHED", "LAST SEEN", "PARENT"], &rows);
}

/// `gemctl session show` / `new`.
pub fn session(s: &Session) {
    outln!("session {}{}", s.id, if s.is_default { " (default for its workspace)" } else { "" });
    outln!("  workspace:  {}", s.workspace);
    outln!("  created:    {} ({})", s.created_at, crate::output::ago::ago(&s.created_at));
    outln!("  last seen:  {} ({})", s.last_seen_at, crate::output::ago::ago(&s.last_seen_at));
    outln!("  attached:   {} connection(s)", s.attached_connections);
    if let Some(d) = &s.state.derived {
        outln!("  subagent:   '{}' of {} (path {})", d.name, d.parent, d.path);
    }
    let mode = serde_json::to_value(s.state.approval_mode).unwrap_or_default();
    outln!("  mode:       {}", mode.as_str().unwrap_or("default"));
    outln!("  interactive: {}", interactivity(s));
    match s.env_source {
        geminid_protocol::session::EnvSource::Client => {
            let by = if s.env_from_mcp_client {
                "an MCP client's (through `gemctl mcp serve`)"
            } else {
                "a gemctl command's or an editor's"
            };
            let since = s.env_since.as_deref().map(|t| format!(" since {t}")).unwrap_or_default();
            outln!("  env:        {by}{since}; servers it starts inherit it (values not shown):");
            let keys: Vec<String> = s.env_keys.iter().map(|k| shown::line(k).to_string()).collect();
            outln!("              {}", keys.join(" "));
        }
        geminid_protocol::session::EnvSource::Daemon => {
            outln!("  env:        the daemon's own (no client has given one since it started)")
        }
    }
    let list = |v: &[String]| if v.is_empty() { "none".to_owned() } else { v.join(", ") };
    outln!("  disabled servers: {}", list(&s.state.disabled_servers));
    outln!("  activated skills: {}", list(&s.state.activated_skills));
}

/// Whether a person answers the session's confirmations, and what decides it.
fn interactivity(s: &Session) -> String {
    match (s.state.interactive, s.listening) {
        (Some(true), _) => "yes (set: `gemctl session update --auto` undoes it)".into(),
        (Some(false), _) => "no, headless (set: `gemctl session update --auto` undoes it)".into(),
        (None, Some(true)) => "yes: a client listens for confirmations".into(),
        (None, Some(false)) => "no: no client listens for confirmations, so calls that need \
                                one are denied (`gemctl attach` in another terminal answers them)"
            .into(),
        (None, None) => "while a client listens for confirmations".into(),
    }
}
