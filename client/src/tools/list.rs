//! `gemctl tools list|refresh` and `gemctl mcp tools|describe`: a session's tools.

use geminid_protocol::api::ToolsApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::tools::{ToolKind, ToolsListParams, ToolsRefreshParams};

use crate::error::call_error;
use crate::output;
use crate::output::shown;
use crate::output::{errln, outln};

/// What to print when a session has none of `what`: the servers may not be running.
pub fn none(what: &str) -> String {
    format!("No {what}. `gemctl mcp list` shows the session's servers and why any is not running.")
}

/// `gemctl tools`.
#[derive(Debug, clap::Subcommand)]
pub enum ToolsCommand {
    /// Every tool of the session: those it is offered, custom tools (`tools.discoveryCommand`)
    /// first, then each MCP server's; last, by name, those policy hides, marked
    List {
        /// Only this MCP server's
        server: Option<String>,
    },
    /// Run the session's `tools.discoveryCommand` again and show what it declared (exit 1 if
    /// it failed)
    Refresh,
}

/// Run a `gemctl tools` command.
pub async fn run(
    client: &Client,
    session: String,
    cmd: ToolsCommand,
    json: bool,
) -> anyhow::Result<std::process::ExitCode> {
    match cmd {
        ToolsCommand::List { server } => tools(client, session, server, json).await?,
        ToolsCommand::Refresh => return refresh(client, session, json).await,
    }
    Ok(std::process::ExitCode::SUCCESS)
}

async fn refresh(
    client: &Client,
    session: String,
    json: bool,
) -> anyhow::Result<std::process::ExitCode> {
    let r = client
        .tools_refresh(ToolsRefreshParams { session })
        .await
        .map_err(call_error("tools/refresh"))?;
    let failed = r.discovery.as_ref().is_some_and(|d| d.error.is_some());
    if json {
        output::json(&r)?;
    } else if let Some(d) = &r.discovery {
        match &d.error {
            Some(e) => {
                errln!("error: tool discovery command `{}` failed: {}", d.command, shown::block(e))
            }
            None => outln!(
                "`{}` declared {} tool{} in {} ms{}",
                d.command,
                d.tools.len(),
                if d.tools.len() == 1 { "" } else { "s" },
                d.took_ms,
                if d.tools.is_empty() {
                    String::new()
                } else {
                    let names: Vec<String> =
                        d.tools.iter().map(|t| shown::line(t).to_string()).collect();
                    format!(": {}", names.join(", "))
                }
            ),
        }
        for p in &d.problems {
            errln!("note: {}", shown::line(p));
        }
    } else {
        outln!(
            "No custom tools: the session's settings set no `tools.discoveryCommand` \
             (`gemctl config show` shows them)."
        );
    }
    Ok(if failed { std::process::ExitCode::FAILURE } else { std::process::ExitCode::SUCCESS })
}

/// List the session's tools, optionally one server's.
pub async fn tools(
    client: &Client,
    session: String,
    server: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let mut r = client
        .tools_list(ToolsListParams { session: session.clone(), raw: false, all: true })
        .await
        .map_err(call_error("tools/list"))?;
    if let Some(name) = &server {
        r.tools = r.tools.iter().filter(|t| &t.server == name).cloned().collect();
        if r.tools.is_empty() {
            use geminid_protocol::api::McpApiClient;
            let params =
                geminid_protocol::mcp::ListServersParams { session: Some(session), usage: false };
            let listed = client
                .mcp_list_servers(Some(params))
                .await
                .map_err(call_error("mcp/listServers"))?;
            let Some(found) = listed.servers.iter().find(|s| &s.name == name) else {
                let names = listed.servers.iter().map(|s| s.name.as_str());
                let hint = match geminid_protocol::suggest::closest(name, names) {
                    Some(n) => format!("did you mean '{n}'?"),
                    None => "`gemctl mcp list` shows them".to_owned(),
                };
                anyhow::bail!("no MCP server named '{name}' in this session ({hint})");
            };
            // No tools because it is not running: that is a failure, and why is said.
            if found.state != geminid_protocol::mcp::ServerState::Connected {
                let why = found.last_error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
                anyhow::bail!(
                    "MCP server '{name}' is not running ({}){why} (`gemctl mcp logs {name}` shows \
                     its output)",
                    found.state.phrase()
                );
            }
        }
    }
    if json {
        return output::json(&r);
    }
    let rows: Vec<Vec<String>> = r
        .tools
        .iter()
        .map(|t| {
            let d = &t.declaration.description;
            let first = d.lines().next().unwrap_or_default();
            let shown = match &t.hidden {
                Some(_) => format!("[hidden by policy] {first}"),
                None => first.to_owned(),
            };
            let server = match t.kind {
                ToolKind::Discovered => "(discovered)".to_owned(),
                ToolKind::Mcp => t.server.clone(),
            };
            vec![t.name.clone(), server, shown]
        })
        .collect();
    output::table_or(&none("tools"), &["NAME", "SERVER", "DESCRIPTION"], &rows);
    let notes: Vec<&str> = r
        .diagnostics
        .iter()
        .map(String::as_str)
        .filter(|d| !about_another(d, server.as_deref()))
        .collect();
    // A note quotes the server's words (tool names, property keys, a rule's message): escaped
    // whole, so that none of them starts a line or paints one.
    for d in grouped(&notes) {
        errln!("note: {}", shown::line(&d));
    }
    Ok(())
}

/// The notes, each reason policy hides tools for said once with how many it hides (audit turn
/// 4, C8: a fresh project printed 43 identical lines, one per hidden tool).
fn grouped(notes: &[&str]) -> Vec<String> {
    const HIDDEN: &str = "' is hidden by policy: ";
    let mut out: Vec<String> = Vec::new();
    let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
    for note in notes {
        let parsed = note.strip_prefix("tool '").and_then(|rest| rest.split_once(HIDDEN));
        match parsed {
            Some((tool, why)) => match reasons.iter_mut().find(|(w, _)| *w == why) {
                Some((_, tools)) => tools.push(tool),
                None => reasons.push((why, vec![tool])),
            },
            None => out.push((*note).to_owned()),
        }
    }
    for (why, tools) in reasons {
        out.push(match tools.as_slice() {
            [one] => format!("tool '{one}{HIDDEN}{why}"),
            many => format!(
                "{} tools are hidden by policy ([hidden by policy] above): {why}",
                many.len()
            ),
        });
    }
    out
}

/// Whether a note of `tools/list` is about a server other than the one asked for (new-user
/// audit C13: `mcp tools time` noted a disconnected `broken` and a policy rule of `notes`).
fn about_another(note: &str, server: Option<&str>) -> bool {
    let Some(name) = server else { return false };
    let other_server =
        note.contains("MCP server '") && !note.contains(&format!("MCP server '{name}'"));
    let other_tool = note.contains("'mcp_") && !note.contains(&format!("'mcp_{name}_"));
    other_server || other_tool
}

/// Show one tool's declaration and raw MCP object.
pub async fn describe(client: &Client, session: String, name: String) -> anyhow::Result<()> {
    let r = client
        .tools_list(ToolsListParams { session, raw: true, all: true })
        .await
        .map_err(call_error("tools/list"))?;
    // Its full name, or the server's own name for it when only one server has that tool.
    let t = match r.tools.iter().find(|t| t.name == name) {
        Some(t) => t,
        None => match r.tools.iter().filter(|t| t.tool == name).collect::<Vec<_>>()[..] {
            [t] => t,
            [] => {
                let near = geminid_protocol::suggest::closest(
                    &name,
                    r.tools.iter().map(|t| t.name.as_str()),
                );
                // (A tool's own name was taken above when only one server has it.)
                match near {
                    Some(n) => anyhow::bail!("no tool named '{name}' (did you mean '{n}'?)"),
                    None => anyhow::bail!("no tool named '{name}' (gemctl mcp tools lists them)"),
                }
            }
            ref several => anyhow::bail!(
                "several servers have a tool '{name}': {}; give its full name",
                several.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        },
    };
    output::json(&t)
}

#[cfg(test)]
mod tests {
    use super::{about_another, grouped};

    #[test]
    fn tools_hidden_for_one_reason_are_one_note() {
        let why = "no rule matches, and the session is not interactive: denied";
        let a = format!("tool 'mcp_a_x' is hidden by policy: {why}");
        let b = format!("tool 'mcp_b_y' is hidden by policy: {why}");
        let deny = "tool 'mcp_c_z' is hidden by policy: deny rule";
        let other = "MCP server 'broken' is disconnected";
        let notes = grouped(&[&a, other, &b, deny]);
        assert_eq!(
            notes,
            [
                other.to_owned(),
                format!("2 tools are hidden by policy ([hidden by policy] above): {why}"),
                deny.to_owned(),
            ]
        );
    }

    #[test]
    fn notes_about_other_servers_are_left_out_of_one_servers_tools() {
        let broken = "MCP server 'broken' is disconnected: its catalog is not listed";
        let rule = "tool 'mcp_notes_delete_all_notes' is hidden by policy: deny rule";
        let own = "tool 'mcp_time_convert' is hidden by policy: deny rule";
        let general = "3 tools are left out: nobody answers confirmations (asks/listen first)";
        assert!(about_another(broken, Some("time")) && about_another(rule, Some("time")));
        assert!(!about_another(own, Some("time")) && !about_another(general, Some("time")));
        assert!(!about_another(broken, Some("broken")) && !about_another(broken, None));
    }
}
