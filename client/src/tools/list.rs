//! `gemctl tools list|refresh`, `gemctl mcp tools|describe` and `gemctl call`: a session's
//! tools.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use geminid_protocol::api::ToolsApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::event::EventsSubscribeParams;
use geminid_protocol::event::{Event, EventBody};
use geminid_protocol::tools::{
    ToolKind, ToolsCallParams, ToolsCancelParams, ToolsListParams, ToolsRefreshParams,
};
use serde_json::Value;

use crate::error::call_error;
use crate::output;
use crate::output::shown;
use crate::output::{errln, outln};

/// What to print when a session has none of `what`: the servers may not be running.
fn none(what: &str) -> String {
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

/// `gemctl call TOOL [JSON | --args-file F | -]`.
pub async fn call(
    client: &Client,
    session: String,
    name: String,
    args: Option<String>,
    args_file: Option<PathBuf>,
    progress: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let text = match (args.as_deref(), args_file) {
        (_, Some(f)) => std::fs::read_to_string(&f)
            .with_context(|| format!("cannot read arguments from {}", f.display()))?,
        (Some("-"), None) => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).context("cannot read arguments from stdin")?;
            s
        }
        (Some(a), None) => a.to_owned(),
        (None, None) => "{}".to_owned(),
    };
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("the arguments are not JSON: {}", text.trim()))?;
    let Value::Object(map) = value else {
        anyhow::bail!("the arguments must be a JSON object, like {{\"key\": \"value\"}}");
    };
    // The call's progress, on stderr: this process's calls are told apart by a call id.
    let call_id = format!("gemctl-{}", std::process::id());
    let mut progress = if progress {
        let kinds = Some(vec!["tools/progress".to_owned()]);
        let params = EventsSubscribeParams { session: Some(session.clone()), kinds };
        Some(client.subscribe_events(Some(params)).await.map_err(call_error("events/subscribe"))?)
    } else {
        None
    };
    // Ctrl-C cancels the call and says so. Listened for before the call goes out (its first
    // poll installs the handler), so that no Ctrl-C ends the process without a word.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let pressed =
        std::future::poll_fn(|cx| std::task::Poll::Ready(ctrl_c.as_mut().poll(cx).is_ready()))
            .await;
    let (tool, cancel) =
        (name.clone(), ToolsCancelParams { session: session.clone(), call_id: call_id.clone() });
    if pressed {
        return Ok(cancelled(client, &tool, cancel, None).await);
    }
    let params = ToolsCallParams {
        session,
        name,
        args: Some(map),
        call_id: Some(call_id.clone()),
        confirmed: true,
    };
    let call = client.tools_call(params);
    tokio::pin!(call);
    let mut seen = 0;
    let mut shown = crate::output::progress::Progress::on_stderr();
    let r = loop {
        let next = async {
            match progress.as_mut() {
                Some(sub) => sub.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = &mut call => break r,
            _ = &mut ctrl_c => return Ok(cancelled(client, &tool, cancel, Some(&mut shown)).await),
            event = next => match event {
                Some(Ok(event)) => seen = show_progress(&mut shown, &event, &call_id).max(seen),
                // The stream ended or lagged: the call goes on without progress.
                _ => progress = None,
            },
        }
    }
    .map_err(call_error("tools/call"))?;
    // The answer can overtake the call's last progress events: they are read up to the one it
    // names (bounded, should the stream have lost them).
    if let (Some(sub), Some(last)) = (progress.as_mut(), r.last_progress) {
        let rest = async {
            while seen < last {
                match sub.next().await {
                    Some(Ok(event)) => seen = show_progress(&mut shown, &event, &call_id).max(seen),
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout(PROGRESS_CATCH_UP, rest).await;
    }
    shown.finish();
    if json {
        output::json(&r)?;
    } else if r.is_error {
        errln!("{}", shown::block(&r.display));
        for part in &r.result["content"].as_array().cloned().unwrap_or_default() {
            if let Some(t) = part["text"].as_str() {
                errln!("{}", shown::block(t));
            }
        }
    } else {
        output::result_out(&r.display);
    }
    Ok(if r.is_error { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// How long `gemctl call` waits, after Ctrl-C, for the daemon to cancel the call.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Exit code of a command ended by Ctrl-C (128 + SIGINT), as shells report one.
const EXIT_INTERRUPTED: u8 = 130;

/// Ctrl-C during `gemctl call`: cancel the call (`tools/cancel`) and say what became of it.
async fn cancelled(
    client: &Client,
    tool: &str,
    cancel: ToolsCancelParams,
    shown: Option<&mut crate::output::progress::Progress>,
) -> ExitCode {
    if let Some(p) = shown {
        p.finish();
    }
    let why = match tokio::time::timeout(CANCEL_WAIT, client.tools_cancel(cancel)).await {
        Ok(Ok(r)) if r.cancelled => "geminid told its server to stop it".to_owned(),
        Ok(Ok(_)) => "it was not running any more".to_owned(),
        Ok(Err(e)) => format!("geminid did not cancel it ({e}); it does once gemctl has gone"),
        Err(_) => format!(
            "geminid did not answer within {CANCEL_WAIT:?}; it cancels the call once gemctl has gone"
        ),
    };
    errln!("cancelled: {tool} ({why})");
    ExitCode::from(EXIT_INTERRUPTED)
}

/// How long the call's last progress events are waited for after its answer.
const PROGRESS_CATCH_UP: Duration = Duration::from_secs(2);

/// Show `event` if it is progress of the call `call_id`: its `seq` if so, else 0.
fn show_progress(
    shown: &mut crate::output::progress::Progress,
    event: &Event,
    call_id: &str,
) -> u64 {
    let EventBody::ToolProgress(p) = &event.body else { return 0 };
    if p.call_id.as_deref() != Some(call_id) {
        return 0;
    }
    shown.call(p);
    event.seq
}

/// `gemctl mcp prompts`.
pub async fn prompts(client: &Client, session: String, json: bool) -> anyhow::Result<()> {
    use geminid_protocol::api::PromptsApiClient;
    use geminid_protocol::tools::CatalogParams;
    let r =
        client.prompts_list(CatalogParams { session }).await.map_err(call_error("prompts/list"))?;
    if json {
        return output::json(&r);
    }
    let rows: Vec<Vec<String>> = r
        .prompts
        .iter()
        .map(|p| {
            let args: Vec<String> = p
                .arguments
                .iter()
                .map(|a| {
                    let n = a["name"].as_str().unwrap_or_default();
                    if a["required"] == true { format!("--{n}") } else { format!("[--{n}]") }
                })
                .collect();
            vec![format!("/{}", p.name), p.server.clone(), args.join(" "), p.description.clone()]
        })
        .collect();
    output::table_or(&none("prompts"), &["COMMAND", "SERVER", "ARGUMENTS", "DESCRIPTION"], &rows);
    Ok(())
}

/// `gemctl prompt NAME [args…]`: prints the prompt text Gemini CLI would submit.
pub async fn prompt(
    client: &Client,
    session: String,
    name: String,
    args: Vec<String>,
    json: bool,
) -> anyhow::Result<()> {
    use geminid_protocol::api::PromptsApiClient;
    use geminid_protocol::tools::PromptsGetParams;
    let name = name.trim_start_matches('/').to_owned();
    // The shell has split the words; put them back as the user would have typed them.
    let text = args.iter().map(|a| retype(a)).collect::<Vec<_>>().join(" ");
    let r = client
        .prompts_get(PromptsGetParams { session, name, args: Some(text), arguments: None })
        .await
        .map_err(call_error("prompts/get"))?;
    if json {
        return output::json(&r);
    }
    let text: String = serde_json::from_str(&r.submit).unwrap_or(r.submit);
    output::result_out(&text);
    Ok(())
}

/// One shell word as it would be typed on Gemini CLI's prompt line, where words are split at
/// spaces: a value (of `--key=value`, or a positional) that has a space, is empty or starts
/// with a quote goes in quotes, with `"` and `\` escaped.
fn retype(word: &str) -> String {
    let needs_quotes = |v: &str| v.is_empty() || v.contains(' ') || v.starts_with('"');
    let quoted = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
    if let Some((key, value)) = word.strip_prefix("--").and_then(|r| r.split_once('='))
        && !key.is_empty()
    {
        return if needs_quotes(value) {
            format!("--{key}={}", quoted(value))
        } else {
            word.to_owned()
        };
    }
    if needs_quotes(word) { quoted(word) } else { word.to_owned() }
}

/// `gemctl mcp resources`.
pub async fn resources(client: &Client, session: String, json: bool) -> anyhow::Result<()> {
    use geminid_protocol::api::ResourcesApiClient;
    use geminid_protocol::tools::CatalogParams;
    let r = client
        .resources_list(CatalogParams { session })
        .await
        .map_err(call_error("resources/list"))?;
    if json {
        return output::json(&r);
    }
    let rows: Vec<Vec<String>> = r
        .resources
        .iter()
        .map(|e| {
            let mime = e.resource["mimeType"].as_str().unwrap_or_default().to_owned();
            let name = e.resource["name"].as_str().unwrap_or_default().to_owned();
            vec![e.reference.clone(), name, mime]
        })
        .collect();
    output::table_or(&none("resources"), &["REFERENCE", "NAME", "MIME TYPE"], &rows);
    Ok(())
}

/// `gemctl read @server:uri`.
pub async fn read(
    client: &Client,
    session: String,
    reference: String,
    json: bool,
) -> anyhow::Result<()> {
    use geminid_protocol::api::ResourcesApiClient;
    use geminid_protocol::tools::ResourcesReadParams;
    let p = ResourcesReadParams { session, reference: Some(reference), ..Default::default() };
    let r = client.resources_read(p).await.map_err(call_error("resources/read"))?;
    if json {
        return output::json(&r);
    }
    for part in r.parts.iter().skip(1) {
        if let Some(t) = part["text"].as_str() {
            output::result_out(t);
        }
    }
    Ok(())
}

/// `gemctl tasks [cancel ID]`: the session's MCP tasks, or cancel one.
pub async fn tasks(
    client: &Client,
    session: String,
    action: Option<String>,
    id: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    use geminid_protocol::api::TasksApiClient;
    use geminid_protocol::mcp::{TasksCancelParams, TasksListParams};
    if action.is_some() {
        let Some(id) = id else {
            anyhow::bail!("`gemctl tasks cancel` needs the task's id (`gemctl tasks` lists them)")
        };
        let p = TasksCancelParams { session, id };
        let r = client.tasks_cancel(p).await.map_err(call_error("tasks/cancel"))?;
        if json {
            return output::json(&r);
        }
        outln!(
            "asked MCP server '{}' to cancel task {} (it was {})",
            r.task.server,
            r.task.id,
            state(r.task.state)
        );
        return Ok(());
    }
    let r =
        client.tasks_list(TasksListParams { session }).await.map_err(call_error("tasks/list"))?;
    if json {
        return output::json(&r);
    }
    if r.tasks.is_empty() {
        outln!("no MCP tasks in this session");
    }
    for t in &r.tasks {
        let about = t.error.as_deref().or(t.message.as_deref()).unwrap_or("");
        outln!("{:<32} {:<14} {}  {about}", t.id, state(t.state), t.tool);
    }
    Ok(())
}

fn state(s: geminid_protocol::mcp::TaskState) -> &'static str {
    use geminid_protocol::mcp::TaskState as S;
    match s {
        S::Working => "working",
        S::InputRequired => "input required",
        S::Completed => "completed",
        S::Failed => "failed",
        S::Cancelled => "cancelled",
        S::Lost => "lost",
    }
}

#[cfg(test)]
mod tests {
    use super::{about_another, grouped, retype};

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

    #[test]
    fn words_are_retyped_for_the_prompt_line() {
        assert_eq!(retype("Ann"), "Ann");
        assert_eq!(retype("Ada Lovelace"), r#""Ada Lovelace""#);
        assert_eq!(retype("--name=Ada Lovelace"), r#"--name="Ada Lovelace""#);
        assert_eq!(retype("--style=warm"), "--style=warm");
        assert_eq!(retype("--name="), r#"--name="""#);
        assert_eq!(retype(""), r#""""#);
        assert_eq!(retype(r#""quoted""#), r#""\"quoted\"""#);
        assert_eq!(retype(r#"--say=a "b" \c"#), r#"--say="a \"b\" \\c""#);
        assert_eq!(retype(r#"x"y"#), r#"x"y"#);
    }
}
