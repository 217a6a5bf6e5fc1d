//! `gemctl call` (a tool, with its progress, cancelled on Ctrl-C) and `gemctl tasks` (the MCP
//! tasks such calls run as).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use geminid_protocol::api::ToolsApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::event::EventsSubscribeParams;
use geminid_protocol::event::{Event, EventBody};
use geminid_protocol::tools::{ToolsCallParams, ToolsCancelParams};
use serde_json::Value;

use crate::error::call_error;
use crate::output;
use crate::output::shown;
use crate::output::{errln, outln};

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
