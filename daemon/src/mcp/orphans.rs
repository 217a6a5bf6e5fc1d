//! Children of a daemon that was killed before it could stop them: found through the pid
//! records in sled and stopped on the next start, after checking each is still the same
//! process (pid and start time), so a reused pid is never signalled.

use std::time::Duration;

use super::child::{Signal, group_alive, signal_group, start_time};
use crate::store::Store;

/// What happened to one recorded child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It was still running and was stopped.
    Stopped,
    /// Its leader was gone but members of its process group were left; they were stopped.
    GroupStopped,
    /// Nothing of it is left.
    Gone,
    /// The pid now belongs to another process: left alone.
    Reused,
}

/// Stop every recorded child left by an earlier daemon and forget the records, all at once
/// (one grace period in all, not one per child). Returns (pid, outcome) for each record.
pub async fn cleanup(store: &Store, grace: Duration) -> Vec<(u32, Outcome)> {
    let records: Vec<_> =
        store.children().into_iter().filter(|r| r.daemon_pid != std::process::id()).collect();
    let each = records.into_iter().map(|rec| async move {
        let outcome = clean_one(&rec, grace).await;
        if let Err(e) = store.remove_child(rec.pid) {
            tracing::warn!(pid = rec.pid, error = %e, "could not forget a child record");
        }
        (rec.pid, outcome)
    });
    futures::future::join_all(each).await
}

async fn clean_one(rec: &crate::store::ChildRecord, grace: Duration) -> Outcome {
    let now = start_time(rec.pid);
    let outcome = match (now, rec.start_time) {
        (Some(now), Some(then)) if now == then => {
            stop_group(rec.pid, grace).await;
            Outcome::Stopped
        }
        (Some(_), _) => Outcome::Reused,
        // The leader is gone. A process group with its id can only be the old one (a new
        // process with that pid would exist and lead its own group).
        (None, _) if group_alive(rec.pid) => {
            stop_group(rec.pid, grace).await;
            Outcome::GroupStopped
        }
        (None, _) => Outcome::Gone,
    };
    match outcome {
        Outcome::Stopped | Outcome::GroupStopped => tracing::warn!(
            pid = rec.pid,
            server = %rec.server,
            command = %rec.command,
            old_daemon = rec.daemon_pid,
            "stopped an MCP server left behind by a daemon that did not shut down"
        ),
        Outcome::Reused => tracing::info!(
            pid = rec.pid,
            server = %rec.server,
            "a recorded child's pid now belongs to another process; left alone"
        ),
        Outcome::Gone => {}
    }
    outcome
}

async fn stop_group(pgid: u32, grace: Duration) {
    signal_group(pgid, Signal::Term);
    let deadline = tokio::time::Instant::now() + grace;
    while group_alive(pgid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if group_alive(pgid) {
        signal_group(pgid, Signal::Kill);
    }
}
