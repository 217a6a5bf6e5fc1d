//! MCP tasks (long-running tool calls) as the daemon last saw them, by session: `tasks/list`
//! reads them, and those still open when the daemon starts are followed again once their
//! server connects.

use geminid_protocol::mcp::McpTask;
use serde::{Deserialize, Serialize};

use super::{Store, StoreError};

/// How many finished tasks a session keeps (the oldest go first).
const FINISHED_KEPT: usize = 200;

/// A task and the identity of the server that runs it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TaskRecord {
    /// The server's full identity.
    pub identity: String,
    /// The task.
    pub task: McpTask,
}

fn key(session: &str, id: &str) -> Vec<u8> {
    [session.as_bytes(), b"\0", id.as_bytes()].concat()
}

impl Store {
    fn tasks_tree(&self) -> Result<sled::Tree, StoreError> {
        let open = self.handles_for_write()?;
        open.db.open_tree("tasks").map_err(|e| self.err(e))
    }

    /// Keep a task as it stands now (durable at once: tasks are few and outlive restarts).
    pub(crate) fn put_task(&self, rec: &TaskRecord) -> Result<(), StoreError> {
        let tree = self.tasks_tree()?;
        let bytes = serde_json::to_vec(rec).unwrap_or_default();
        tree.insert(key(&rec.task.session, &rec.task.id), bytes).map_err(|e| self.err(e))?;
        if rec.task.state.is_final() {
            self.trim_tasks(&tree, &rec.task.session);
        }
        tree.flush().map(drop).map_err(|e| self.err(e))
    }

    fn trim_tasks(&self, tree: &sled::Tree, session: &str) {
        let mut finished: Vec<(u64, sled::IVec)> = tree
            .scan_prefix([session.as_bytes(), b"\0"].concat())
            .filter_map(Result::ok)
            .filter_map(|(k, v)| {
                let rec: TaskRecord = serde_json::from_slice(&v).ok()?;
                rec.task.state.is_final().then_some((rec.task.updated_ms, k))
            })
            .collect();
        if finished.len() > FINISHED_KEPT {
            finished.sort();
            for (_, k) in &finished[..finished.len() - FINISHED_KEPT] {
                let _ = tree.remove(k);
            }
            self.written();
        }
    }

    /// A session's tasks, newest first; unreadable records are skipped.
    pub(crate) fn tasks_of(&self, session: &str) -> Vec<TaskRecord> {
        let Ok(tree) = self.tasks_tree() else { return Vec::new() };
        let mut out: Vec<TaskRecord> = tree
            .scan_prefix([session.as_bytes(), b"\0"].concat())
            .filter_map(Result::ok)
            .filter_map(|(_, v)| serde_json::from_slice(&v).ok())
            .collect();
        out.sort_by_key(|r| std::cmp::Reverse(r.task.created_ms));
        out
    }

    /// Every task not yet final, of every session.
    pub(crate) fn open_tasks(&self) -> Vec<TaskRecord> {
        let Ok(tree) = self.tasks_tree() else { return Vec::new() };
        tree.iter()
            .filter_map(Result::ok)
            .filter_map(|(_, v)| serde_json::from_slice::<TaskRecord>(&v).ok())
            .filter(|r| !r.task.state.is_final())
            .collect()
    }
}
