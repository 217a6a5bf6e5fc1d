//! Tool calls a server turns into tasks (the 2026-07-28 tasks extension), with the real daemon
//! and the fixture's `long` tool: the call waits for the task's result, `tasks/list` keeps the
//! session's tasks, `tasks/cancel` cancels one on its server, and a task left open by a daemon
//! killed meanwhile is followed to its end by the next one.

use std::time::Duration;

use geminid_protocol::api::{McpApiClient, SessionApiClient, TasksApiClient, ToolsApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::mcp::{McpTask, StartParams, TaskState, TasksCancelParams, TasksListParams};
use geminid_protocol::session::SessionAttachParams;
use geminid_protocol::tools::ToolsCallParams;
use geminid_tests::mcp::{FAST, NetFixture, Setup, stdio};
use geminid_tests::{Daemon, eventually};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(10);

fn long(session: &str, server: &str, ms: u64, call_id: &str) -> ToolsCallParams {
    ToolsCallParams {
        session: session.to_owned(),
        name: format!("mcp_{server}_long"),
        args: json!({ "ms": ms }).as_object().cloned(),
        call_id: Some(call_id.to_owned()),
        confirmed: false,
    }
}

async fn tasks(client: &Client, session: &str) -> anyhow::Result<Vec<McpTask>> {
    Ok(client.tasks_list(TasksListParams { session: session.to_owned() }).await?.tasks)
}

#[tokio::test]
async fn a_call_that_becomes_a_task_waits_for_its_result_and_is_listed() -> anyhow::Result<()> {
    let s = Setup::new(json!({ "fx": stdio(&["--asks", "--modern"]) })).await?;
    let r = tokio::time::timeout(WAIT, s.client.tools_call(long(&s.session, "fx", 300, "first")))
        .await??;
    assert_eq!((r.is_error, r.display.as_str()), (false, "done after 300 ms"));
    let listed = tasks(&s.client, &s.session).await?;
    let [t] = listed.as_slice() else { anyhow::bail!("{listed:?}") };
    assert_eq!(
        (t.state, t.tool.as_str(), t.server.as_str()),
        (TaskState::Completed, "mcp_fx_long", "fx")
    );
    assert_eq!(t.call_id.as_deref(), Some("first"));
    assert_eq!(
        t.result.as_ref().map(|r| r["content"][0]["text"].clone()),
        Some(json!("done after 300 ms"))
    );
    assert!(t.id.ends_with(&format!("/{}", t.task_id)), "{t:?}");

    // Cancelled from another connection while it runs: the server cancels it, the call ends
    // saying so, and the list keeps it as cancelled.
    let caller = s.daemon.client().await?;
    let p = long(&s.session, "fx", 60_000, "second");
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    let working = || async {
        tasks(&s.client, &s.session)
            .await
            .is_ok_and(|t| t.iter().any(|t| t.state == TaskState::Working))
    };
    assert!(eventually(WAIT, working).await, "the second task shows as working");
    let id = tasks(&s.client, &s.session)
        .await?
        .into_iter()
        .find(|t| t.state == TaskState::Working)
        .map(|t| t.id);
    let id = id.ok_or_else(|| anyhow::anyhow!("no working task"))?;
    s.client.tasks_cancel(TasksCancelParams { session: s.session.clone(), id: id.clone() }).await?;
    let ended = tokio::time::timeout(WAIT, running).await??;
    assert!(format!("{ended:?}").contains("cancelled the task"), "{ended:?}");
    let listed = tasks(&s.client, &s.session).await?;
    assert_eq!(listed.iter().find(|t| t.id == id).map(|t| t.state), Some(TaskState::Cancelled));
    assert_eq!(listed.len(), 2, "newest first: {listed:?}");
    assert_eq!(listed[0].id, id);

    // `gemctl tasks` lists them; `cancel` without an id says what it needs.
    let (code, out, err) = s.home.gemctl_run(&["--session", &s.session, "tasks"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&id) && out.contains("cancelled") && out.contains("completed"), "{out}");
    let (code, _, err) = s.home.gemctl_run(&["--session", &s.session, "tasks", "cancel"])?;
    assert!(code != 0 && err.contains("needs the task's id"), "{err}");
    // A task of no session's, or an unknown id: said so.
    let unknown = s
        .client
        .tasks_cancel(TasksCancelParams { session: s.session.clone(), id: "nope/1".into() })
        .await;
    assert!(format!("{unknown:?}").contains("has no task nope/1"), "{unknown:?}");
    Ok(())
}

#[tokio::test]
async fn a_task_left_open_by_a_killed_daemon_is_followed_to_its_end_by_the_next()
-> anyhow::Result<()> {
    let http = NetFixture::start("--http", &["--asks", "--modern"])?;
    let mut s = Setup::new(json!({ "web": { "httpUrl": http.url } })).await?;
    let caller = s.daemon.client().await?;
    let p = long(&s.session, "web", 1_500, "kept");
    let running = tokio::spawn(async move { caller.tools_call(p).await });
    let working = || async {
        tasks(&s.client, &s.session)
            .await
            .is_ok_and(|t| t.iter().any(|t| t.state == TaskState::Working))
    };
    assert!(eventually(WAIT, working).await, "the task shows as working");
    // Killed: nothing cancels the task on the server.
    s.daemon.kill9().await?;
    let _ = running.await;
    let daemon = Daemon::start(&s.home, FAST).await?;
    let client = daemon.client().await?;
    let env = Some(geminid_tests::mcp::shell_env(&s.home, &[]));
    client.attach(SessionAttachParams { id: s.session.clone(), env }).await?;
    let listed = tasks(&client, &s.session).await?;
    assert_eq!(
        listed.iter().map(|t| t.state).collect::<Vec<_>>(),
        [TaskState::Working],
        "kept across the restart"
    );
    client.mcp_start(StartParams { session: s.session.clone(), wait: true }).await?;
    let done = || async {
        tasks(&client, &s.session)
            .await
            .is_ok_and(|t| t.first().is_some_and(|t| t.state == TaskState::Completed))
    };
    assert!(
        eventually(WAIT, done).await,
        "{:?}\n{}",
        tasks(&client, &s.session).await?,
        daemon.log()
    );
    let t = tasks(&client, &s.session).await?.remove(0);
    assert_eq!(
        t.result.map(|r| r["content"][0]["text"].clone()),
        Some(json!("done after 1500 ms"))
    );
    s.daemon = daemon;
    Ok(())
}
