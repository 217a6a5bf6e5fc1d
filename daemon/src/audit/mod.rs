//! The audit log: one bounded record in sled per call through the pipeline (time, session,
//! tool, server, policy's decision and its rule, the confirmation, duration, ok or error).
//! Argument values are never kept: their names, and a hash of their stable form.

use std::sync::atomic::{AtomicU64, Ordering};

use geminid_protocol::policy::{AuditListParams, AuditListResult, AuditRecord};

use crate::clock;
use crate::store::Store;

/// Records kept; the oldest go first.
pub(crate) const KEEP: u64 = 10_000;
/// Sets another number of records kept, from 1 up (for tests, which fill a smaller log).
const KEEP_ENV: &str = "GEMINID_AUDIT_KEEP";
/// `audit/list`'s default page.
pub(crate) const DEFAULT_LIMIT: u32 = 50;
/// `audit/list`'s largest page.
pub(crate) const MAX_LIMIT: u32 = 1_000;

/// The audit log over the daemon's store.
#[derive(Debug)]
pub struct AuditLog {
    store: Store,
    next: AtomicU64,
    keep: u64,
}

impl AuditLog {
    /// The log in `store`, numbering on from its last record; records past the bound (a
    /// larger bound's, or those a killed daemon left) are forgotten now.
    pub(crate) fn new(store: Store) -> Self {
        let keep = std::env::var(KEEP_ENV).ok().and_then(|v| v.parse().ok()).filter(|k| *k > 0);
        Self::keeping(store, keep.unwrap_or(KEEP))
    }

    fn keeping(store: Store, keep: u64) -> Self {
        let last = store.last_audit_seq();
        if let Some(first) = (last + 1).checked_sub(keep)
            && let Err(e) = store.trim_audit(first)
        {
            tracing::warn!(error = %e, "old audit records were not forgotten");
        }
        Self { store, next: AtomicU64::new(last + 1), keep }
    }

    /// `audit/list`: newest first, a page of at most [`MAX_LIMIT`].
    pub(crate) fn list(&self, p: &AuditListParams) -> AuditListResult {
        let limit = p.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut records = Vec::new();
        // One more than the page, to tell whether older ones remain.
        self.store.audit_newest_first(p.before, |r: AuditRecord| {
            if p.since.is_some_and(|s| r.seq <= s) {
                return false;
            }
            if p.session.as_ref().is_none_or(|s| *s == r.session) {
                records.push(r);
            }
            records.len() <= limit
        });
        let more = records.len() > limit;
        records.truncate(limit);
        AuditListResult { records, more, keeps: self.keep }
    }

    /// A record of something that is not a call, about `server`'s `tool` (tool-definition
    /// pins: a definition held, accepted or rejected): `origin` says what.
    pub(crate) fn note(&self, server: &str, tool: &str, origin: &str, error: Option<String>) {
        self.write(|seq| noted(seq, server, tool, origin, error));
    }

    /// Numbers one record, which `make` builds from its number, and writes it. The call
    /// pipeline's records are built in `calls::audited`.
    pub(crate) fn write(&self, make: impl FnOnce(u64) -> AuditRecord) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let rec = make(seq);
        if let Err(e) = self.store.put_audit(seq, &rec, self.keep) {
            tracing::warn!(error = %e, tool = %rec.tool, "the audit record was not written");
        }
    }
}

/// Record `seq`, of something that is not a call (see [`AuditLog::note`]).
fn noted(seq: u64, server: &str, tool: &str, origin: &str, error: Option<String>) -> AuditRecord {
    AuditRecord {
        seq,
        time: clock::rfc3339(clock::now_ms()),
        session: String::new(),
        tool: tool.to_owned(),
        server: server.to_owned(),
        origin: origin.to_owned(),
        arg_keys: vec![],
        args_hash: None,
        decision: None,
        rule: None,
        confirmation: None,
        hooks: None,
        duration_ms: 0,
        ok: error.is_none(),
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_the_latest_records_and_numbers_on_from_the_last_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let log = AuditLog::new(store.clone());
        for _ in 0..5 {
            let seq = log.next.fetch_add(1, Ordering::Relaxed);
            let rec = noted(seq, "fx", "echo", "pins/hold", None);
            store.put_audit(seq, &rec, 3).unwrap();
        }
        let all = log.list(&AuditListParams { limit: Some(100), ..Default::default() });
        let seqs: Vec<u64> = all.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [5, 4, 3], "newest first, the oldest forgotten");
        assert!(!all.more);
        let page = log.list(&AuditListParams { limit: Some(2), ..Default::default() });
        assert!(page.more, "a page that did not hold them all says so");
        let next = log.list(&AuditListParams { before: Some(4), ..Default::default() });
        assert_eq!(next.records.iter().map(|r| r.seq).collect::<Vec<_>>(), [3]);
        let since = log.list(&AuditListParams { since: Some(3), ..Default::default() });
        assert_eq!(since.records.len(), 2);
        let other = log.list(&AuditListParams { session: Some("s2".into()), ..Default::default() });
        assert!(other.records.is_empty());
        // A new log over the store (as at the next start) numbers on from its last record.
        // Not by reopening the directory here: sled lets go of it in the background.
        drop(log);
        let log = AuditLog::new(store.clone());
        assert_eq!(log.next.load(Ordering::Relaxed), 6);
        // A smaller bound forgets the records past it at once.
        let log = AuditLog::keeping(store, 2);
        let all = log.list(&AuditListParams::default());
        assert_eq!(all.records.iter().map(|r| r.seq).collect::<Vec<_>>(), [5, 4]);
        assert_eq!(all.keeps, 2);
    }
}
