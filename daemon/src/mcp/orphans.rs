//! Children of a daemon that was killed before it could stop them: found through the pid
//! records in sled and stopped on the next start, after checking each is still the same
//! process (pid and start time), so a reused pid is never signalled.

use std::time::Duration;

use std::collections::HashMap;

use super::child::{Signal, group_alive, signal_group, start_time};
use crate::store::{ChildRecord, Store};

/// What happened to one recorded child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It was still running and was stopped.
    Stopped,
    /// Its leader was gone but members of its process group were left; they were stopped.
    GroupStopped,
    /// Nothing of it is left.
    Gone,
    /// The pid now belongs to another process: left alone.
    Reused,
}

/// What may not start yet: the identities whose orphan is still being stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Held {
    /// Identity → orphans of it still being stopped.
    identities: HashMap<String, usize>,
    /// Orphans recorded without an identity (by an older daemon): every start waits.
    unknown: usize,
}

impl Held {
    /// What the records of `orphans` hold.
    pub(crate) fn of(orphans: &[ChildRecord]) -> Self {
        let mut held = Self::default();
        for rec in orphans {
            match &rec.identity {
                Some(id) => *held.identities.entry(id.clone()).or_default() += 1,
                None => held.unknown += 1,
            }
        }
        held
    }

    /// Whether a server of `identity` must wait.
    pub(crate) fn holds(&self, identity: &str) -> bool {
        self.unknown > 0 || self.identities.contains_key(identity)
    }

    /// `rec`'s orphan is gone.
    pub(crate) fn release(&mut self, rec: &ChildRecord) {
        match &rec.identity {
            Some(id) => {
                if let Some(n) = self.identities.get_mut(id) {
                    *n -= 1;
                    if *n == 0 {
                        self.identities.remove(id);
                    }
                }
            }
            None => self.unknown = self.unknown.saturating_sub(1),
        }
    }
}

/// The recorded children left by an earlier daemon.
pub(crate) fn left_behind(store: &Store) -> Vec<ChildRecord> {
    store.children().into_iter().filter(|r| r.daemon_pid != std::process::id()).collect()
}

/// Stop `rec`'s child if it is still the one recorded, and forget the record.
pub(crate) async fn clean(store: &Store, rec: &ChildRecord, grace: Duration) -> Outcome {
    let outcome = clean_one(rec, grace).await;
    if let Err(e) = store.remove_child(rec.pid) {
        tracing::warn!(pid = rec.pid, error = %e, "could not forget a child record");
    }
    outcome
}

async fn clean_one(rec: &ChildRecord, grace: Duration) -> Outcome {
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
