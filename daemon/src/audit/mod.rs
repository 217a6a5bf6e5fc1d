//! The audit log: one bounded record per call through the pipeline (time, session, tool,
//! server, policy's decision and its rule, the confirmation, duration, ok or error), in files
//! of JSON lines beside the database (`files.rs`), at most [`KEEP`] records and one file's
//! worth on disk. Argument values are never kept: their names, and a hash of their stable form.

mod files;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use geminid_protocol::policy::{AuditListParams, AuditListResult, AuditRecord};

use crate::clock;
use crate::store::Store;
use files::Files;

/// Records kept; the oldest go first.
pub(crate) const KEEP: u64 = 10_000;
/// Sets another number of records kept, from 1 up (for tests, which fill a smaller log).
const KEEP_ENV: &str = "GEMINID_AUDIT_KEEP";
/// `audit/list`'s default page.
pub(crate) const DEFAULT_LIMIT: u32 = 50;
/// `audit/list`'s largest page.
pub(crate) const MAX_LIMIT: u32 = 1_000;
/// How long after a record it is synced to the disk, with the records written until then.
const SYNC_AFTER: Duration = Duration::from_millis(500);

/// The audit log in its files.
#[derive(Debug)]
pub struct AuditLog {
    files: Arc<Files>,
    next: AtomicU64,
    keep: u64,
    sync_due: Arc<AtomicBool>,
    /// A temporary store's log lives in a directory of its own, removed with the log.
    _temporary: Option<tempfile::TempDir>,
}

impl AuditLog {
    /// The log beside `store`'s database, numbering on from its last record; records past
    /// the bound (a larger bound's) are forgotten now. The records an older daemon kept in
    /// the database's `audit` tree move to the files the first time.
    pub(crate) fn new(store: Store) -> Self {
        let keep = std::env::var(KEEP_ENV).ok().and_then(|v| v.parse().ok()).filter(|k| *k > 0);
        Self::keeping(store, keep.unwrap_or(KEEP))
    }

    fn keeping(store: Store, keep: u64) -> Self {
        let (dir, temporary) = match store.dir() {
            Some(d) => (d.join("audit"), None),
            None => match tempfile::tempdir() {
                Ok(t) => (t.path().to_owned(), Some(t)),
                Err(e) => {
                    tracing::error!(error = %e, "no directory for the audit log; it keeps nothing");
                    (std::env::temp_dir().join("geminid-audit-unavailable"), None)
                }
            },
        };
        let (files, last) = match Files::open(&dir, keep) {
            Ok(opened) => opened,
            Err(e) => {
                tracing::error!(error = %e, dir = %dir.display(), "the audit log's files cannot be opened");
                (Files::unopened(&dir, keep), 0)
            }
        };
        let log = Self {
            files: Arc::new(files),
            next: AtomicU64::new(last + 1),
            keep,
            sync_due: Arc::new(AtomicBool::new(false)),
            _temporary: temporary,
        };
        log.move_from(&store);
        log
    }

    /// Move the records an older daemon kept in the database's tree into the files (the
    /// latest `keep`, in order), then empty the tree.
    fn move_from(&self, store: &Store) {
        if store.last_audit_seq() == 0 {
            return;
        }
        let mut old = Vec::new();
        let keep = usize::try_from(self.keep).unwrap_or(usize::MAX);
        store.audit_newest_first(None, |r: AuditRecord| {
            old.push(r);
            old.len() < keep
        });
        let first = self.next.load(Ordering::Relaxed);
        // With their own numbers, after any the files hold.
        for rec in old.into_iter().rev().filter(|r| r.seq >= first) {
            self.next.store(rec.seq + 1, Ordering::Relaxed);
            if let Err(e) = self.files.append(&rec) {
                tracing::warn!(error = %e, "an old audit record was not moved");
            }
        }
        if let Err(e) = self.sync() {
            tracing::warn!(error = %e, "the moved audit records were not synced; kept in the database too");
            return;
        }
        match store.trim_audit(u64::MAX) {
            Ok(n) => tracing::info!(
                records = n,
                from = first,
                "audit records moved from the database to their files"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "the database's old audit records were not removed")
            }
        }
    }

    /// `audit/list`: newest first, a page of at most [`MAX_LIMIT`].
    pub(crate) fn list(&self, p: &AuditListParams) -> AuditListResult {
        let limit = p.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut records = Vec::new();
        // One more than the page, to tell whether older ones remain.
        self.files.newest_first(self.next.load(Ordering::Relaxed), |r| {
            if p.before.is_some_and(|b| r.seq >= b) {
                return true;
            }
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

    /// Numbers one record, which `make` builds from its number, and writes it; synced
    /// [`SYNC_AFTER`] later with those after it. The call pipeline's records are built in
    /// `calls::audited`.
    pub(crate) fn write(&self, make: impl FnOnce(u64) -> AuditRecord) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let rec = make(seq);
        if let Err(e) = self.files.append(&rec) {
            tracing::warn!(error = %e, tool = %rec.tool, "the audit record was not written");
        }
        self.sync_soon();
    }

    fn sync_soon(&self) {
        if self.sync_due.swap(true, Ordering::AcqRel) {
            return; // a sync is already on its way
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.sync_due.store(false, Ordering::Release);
            return;
        };
        let (files, due) = (self.files.clone(), self.sync_due.clone());
        runtime.spawn(async move {
            tokio::time::sleep(SYNC_AFTER).await;
            // Cleared first: a record written during the sync schedules the next one.
            due.store(false, Ordering::Release);
            let synced = tokio::task::spawn_blocking(move || files.sync()).await;
            if let Ok(Err(e)) = synced {
                tracing::warn!(error = %e, "the audit log was not synced");
            }
        });
    }

    /// Write out and sync every record so far (at a clean stop).
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        self.files.sync()
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

    fn fill(log: &AuditLog, n: usize) {
        for _ in 0..n {
            log.note("fx", "echo", "pins/hold", None);
        }
    }

    fn seqs(r: &AuditListResult) -> Vec<u64> {
        r.records.iter().map(|r| r.seq).collect()
    }

    #[test]
    fn the_log_keeps_the_latest_records_and_numbers_on_from_the_last_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let log = AuditLog::keeping(store.clone(), 3);
        fill(&log, 5);
        let all = log.list(&AuditListParams { limit: Some(100), ..Default::default() });
        assert_eq!(seqs(&all), [5, 4, 3], "newest first, the oldest forgotten");
        assert!(!all.more);
        let page = log.list(&AuditListParams { limit: Some(2), ..Default::default() });
        assert!(page.more, "a page that did not hold them all says so");
        let next = log.list(&AuditListParams { before: Some(4), ..Default::default() });
        assert_eq!(seqs(&next), [3]);
        let since = log.list(&AuditListParams { since: Some(3), ..Default::default() });
        assert_eq!(since.records.len(), 2);
        let other = log.list(&AuditListParams { session: Some("s2".into()), ..Default::default() });
        assert!(other.records.is_empty());
        // A new log over the same files (as at the next start) numbers on from its last
        // record, and a smaller bound forgets the records past it.
        log.sync().unwrap();
        drop(log);
        let log = AuditLog::keeping(store.clone(), 3);
        assert_eq!(log.next.load(Ordering::Relaxed), 6);
        let log = AuditLog::keeping(store, 2);
        let all = log.list(&AuditListParams::default());
        assert_eq!(seqs(&all), [5, 4]);
        assert_eq!(all.keeps, 2);
    }

    /// The files on disk hold the bound and at most one file more, however many records went
    /// through (sled's tree wandered and grew).
    #[test]
    fn the_files_stay_within_the_bound_and_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let log = AuditLog::keeping(store, 100);
        fill(&log, 1_000);
        log.sync().unwrap();
        let audit = dir.path().join("audit");
        let lines: usize = std::fs::read_dir(&audit)
            .unwrap()
            .map(|e| std::fs::read(e.unwrap().path()).unwrap().split(|b| *b == b'\n').count() - 1)
            .sum();
        assert!((100..=125).contains(&lines), "{lines} records on disk for a bound of 100");
        let all = log.list(&AuditListParams { limit: Some(1_000), ..Default::default() });
        assert_eq!(all.records.len(), 100);
        assert_eq!(all.records[0].seq, 1_000);
    }

    /// A line a crash cut short is skipped, and the records after it are read.
    #[test]
    fn a_line_cut_short_is_skipped_and_the_log_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let log = AuditLog::keeping(store.clone(), 100);
        fill(&log, 3);
        log.sync().unwrap();
        drop(log);
        let audit = dir.path().join("audit");
        let file = std::fs::read_dir(&audit).unwrap().next().unwrap().unwrap().path();
        let mut bytes = std::fs::read(&file).unwrap();
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&file, bytes).unwrap();
        let log = AuditLog::keeping(store, 100);
        assert_eq!(log.next.load(Ordering::Relaxed), 3, "numbered on from the last whole one");
        fill(&log, 2);
        let all = log.list(&AuditListParams::default());
        assert_eq!(seqs(&all), [4, 3, 2, 1]);
    }

    /// An older daemon's records in the database's tree move to the files once, in order.
    #[test]
    fn records_kept_in_the_database_move_to_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for seq in 1..=4 {
            store.put_audit(seq, &noted(seq, "fx", "echo", "pins/hold", None), 10).unwrap();
        }
        let log = AuditLog::keeping(store.clone(), 3);
        assert_eq!(seqs(&log.list(&AuditListParams::default())), [4, 3, 2], "their own numbers");
        assert_eq!(store.last_audit_seq(), 0, "the tree is emptied");
        fill(&log, 1);
        assert_eq!(seqs(&log.list(&AuditListParams::default())), [5, 4, 3]);
    }
}
