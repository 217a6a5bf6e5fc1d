//! Tool calls a server turns into tasks (the 2026-07-28 tasks extension, SEP-2663): the call
//! waits while the daemon polls `tasks/get` (at the server's interval), answers the task's
//! input requests for the calling session (as `asked` answers a server's requests), and ends
//! with the task's result. Each change is kept in the store (`store::tasks`), so `tasks/list`
//! shows a session's tasks, and a task still open when the daemon stops is followed again once
//! its server connects (or marked lost when the server no longer knows it). A call whose
//! caller goes away cancels its task (`tasks/cancel`).

use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::mcp::{McpTask, TaskState};
use rmcp::RoleClient;
use rmcp::model::{CancelTaskParams, GetTaskParams, RequestId, TaskPayload, TaskStatus};
use rmcp::service::Peer;
use serde_json::Value;

use super::callers::{Caller, Whose};
use super::error::McpError;
use super::server::Server;
use super::supervisor::Supervisor;
use crate::clock;
use crate::store::tasks::TaskRecord;

/// Polling bounds, whatever the server suggests.
const POLL_MIN: Duration = Duration::from_millis(20);
const POLL_MAX: Duration = Duration::from_secs(5);
/// Polling when the server suggests nothing.
const POLL_DEFAULT: Duration = Duration::from_millis(200);

fn state_of(s: &TaskStatus) -> TaskState {
    match s {
        TaskStatus::Working => TaskState::Working,
        TaskStatus::InputRequired => TaskState::InputRequired,
        TaskStatus::Completed => TaskState::Completed,
        TaskStatus::Failed => TaskState::Failed,
        TaskStatus::Cancelled => TaskState::Cancelled,
        // A status of a later revision: still in flight as far as geminid can tell.
        _ => TaskState::Working,
    }
}

fn interval(ms: Option<u64>) -> Duration {
    ms.map_or(POLL_DEFAULT, Duration::from_millis).clamp(POLL_MIN, POLL_MAX)
}

/// Cancels the task on its server if the call stops waiting before it ended.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    task_id: String,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else { return };
        let id = std::mem::take(&mut self.task_id);
        tokio::spawn(async move {
            let _ = peer.cancel_task(CancelTaskParams::new(id)).await;
        });
    }
}

impl Supervisor {
    /// The tool calls its servers turned into tasks.
    pub(crate) fn long_calls(&self) -> LongCalls<'_> {
        LongCalls { sup: self }
    }
}

/// Calls that became tasks (see the module).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LongCalls<'a> {
    sup: &'a Supervisor,
}

impl LongCalls<'_> {
    fn keep(self, rec: &TaskRecord) {
        if let Err(e) = self.sup.store().put_task(rec) {
            tracing::warn!(task = %rec.task.id, error = %e, "the task's state is not kept");
        }
    }

    /// Follow a task `server` created for the call sent as `origin`, to its result.
    pub(super) async fn follow_task(
        &self,
        server: &Arc<Server>,
        peer: &Peer<RoleClient>,
        origin: &RequestId,
        created: rmcp::model::CreateTaskResult,
    ) -> Result<Value, rmcp::ServiceError> {
        let identity = server.identity.clone();
        let caller = match self.sup.callers.whose(&identity, Some(origin)) {
            Whose::One(c) => c,
            _ => Caller { session: String::new(), call_id: None, name: String::new() },
        };
        let now = clock::now_ms();
        let t = &created.task;
        let mut rec = TaskRecord {
            identity: identity.clone(),
            task: McpTask {
                id: format!("{}/{}", &identity[..12.min(identity.len())], t.task_id),
                session: caller.session,
                call_id: caller.call_id,
                tool: caller.name,
                server: server.name.clone(),
                task_id: t.task_id.clone(),
                state: state_of(&t.status),
                message: t.status_message.clone(),
                created_ms: now,
                updated_ms: now,
                result: None,
                error: None,
            },
        };
        server
            .log
            .push("geminid", &format!("task {} for {}'s call", rec.task.task_id, rec.task.session));
        self.keep(&rec);
        let mut guard = CancelOnDrop { peer: Some(peer.clone()), task_id: t.task_id.clone() };
        let out = self.poll(peer, &mut rec, Some(origin), interval(t.poll_interval_ms)).await;
        guard.peer = None;
        out
    }

    /// Poll a task until it ends, keeping each change, answering its input requests.
    async fn poll(
        &self,
        peer: &Peer<RoleClient>,
        rec: &mut TaskRecord,
        origin: Option<&RequestId>,
        mut every: Duration,
    ) -> Result<Value, rmcp::ServiceError> {
        let failed =
            |why: String| rmcp::ServiceError::McpError(rmcp::ErrorData::internal_error(why, None));
        loop {
            tokio::time::sleep(every).await;
            let got = match peer.get_task(GetTaskParams::new(rec.task.task_id.clone())).await {
                Ok(got) => got,
                Err(e) => {
                    let why = format!("tasks/get failed: {}", super::failure::error_chain(&e));
                    self.end_task(rec, TaskState::Lost, None, Some(why.clone()));
                    return Err(failed(why));
                }
            };
            let task = got.task;
            every = interval(task.task.poll_interval_ms);
            let state = state_of(&task.task.status);
            if state != rec.task.state || task.task.status_message != rec.task.message {
                rec.task.state = state;
                rec.task.message = task.task.status_message.clone();
                rec.task.updated_ms = clock::now_ms();
                self.keep(rec);
            }
            match task.payload {
                TaskPayload::Completed { result } => {
                    let result = Value::Object(result);
                    self.end_task(rec, TaskState::Completed, Some(result.clone()), None);
                    return Ok(result);
                }
                TaskPayload::Failed { error } => {
                    let why = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("the task failed")
                        .to_owned();
                    self.end_task(rec, TaskState::Failed, None, Some(why.clone()));
                    return Err(failed(why));
                }
                TaskPayload::Cancelled => {
                    self.end_task(rec, TaskState::Cancelled, None, None);
                    return Err(failed("the server cancelled the task".into()));
                }
                TaskPayload::InputRequired { input_requests } => {
                    let Some(origin) = origin else {
                        // Followed again after a restart: nobody's call waits to be asked.
                        continue;
                    };
                    let identity = rec.identity.clone();
                    let responses =
                        self.sup.requests().fulfil(&identity, origin, Some(input_requests)).await?;
                    let p = rmcp::model::UpdateTaskParams::new(rec.task.task_id.clone(), responses);
                    peer.update_task(p).await?;
                }
                _ => {}
            }
        }
    }

    fn end_task(
        &self,
        rec: &mut TaskRecord,
        state: TaskState,
        result: Option<Value>,
        error: Option<String>,
    ) {
        rec.task.state = state;
        rec.task.result = result;
        rec.task.error = error;
        rec.task.updated_ms = clock::now_ms();
        self.keep(rec);
    }

    /// `server` connected: follow again its tasks the store had open when the daemon started
    /// (left by a daemon that stopped while they ran), once.
    pub(super) fn resume_tasks(self, server: &Arc<Server>) {
        let open: Vec<TaskRecord> = {
            let mut inner = self.sup.registry.lock();
            let (mine, rest) = std::mem::take(&mut inner.resume)
                .into_iter()
                .partition(|r: &TaskRecord| r.identity == server.identity);
            inner.resume = rest;
            mine
        };
        if open.is_empty() {
            return;
        }
        let (Some(peer), Some(me)) = (server.peer(), self.sup.me.upgrade()) else { return };
        for mut rec in open {
            let (peer, me) = (peer.clone(), me.clone());
            server.log.push("geminid", &format!("following task {} again", rec.task.task_id));
            tokio::spawn(async move {
                let _ = me.long_calls().poll(&peer, &mut rec, None, POLL_MIN).await;
            });
        }
    }

    /// A session's tasks, newest first.
    pub(crate) fn tasks(self, session: &str) -> Vec<McpTask> {
        self.sup.store().tasks_of(session).into_iter().map(|r| r.task).collect()
    }

    /// Ask the server to cancel one of the session's tasks.
    pub(crate) async fn cancel_task(&self, session: &str, id: &str) -> Result<McpTask, McpError> {
        let rec =
            self.sup.store().tasks_of(session).into_iter().find(|r| r.task.id == id).ok_or_else(
                || {
                    McpError::NotFound(format!(
                        "session {session} has no task {id} (`tasks/list` shows its tasks)"
                    ))
                },
            )?;
        if rec.task.state.is_final() {
            return Ok(rec.task);
        }
        let server = self.sup.registry.lock().servers.get(&rec.identity).cloned();
        let peer = server.as_ref().and_then(|s| s.peer()).ok_or_else(|| {
            McpError::Unavailable(format!(
                "MCP server '{}' is not connected: its task cannot be cancelled now",
                rec.task.server
            ))
        })?;
        peer.cancel_task(CancelTaskParams::new(rec.task.task_id.clone())).await.map_err(|e| {
            McpError::of_service(&rec.task.server, &e, super::failure::error_chain(&e))
        })?;
        Ok(rec.task)
    }
}
