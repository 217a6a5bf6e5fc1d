//! When sled's writes reach the disk. A write a client is told about is flushed before the
//! reply (`Store::flush`, or the tree's own flush where it is written). The rest (audit
//! records, a reaped child forgotten, a session deleted, old tasks dropped) is flushed
//! [`FLUSH_AFTER`] after the first of them, together with every write until then: one flush
//! per interval under a stream of calls, and no timer at all at rest. sled's own flusher runs
//! only every [`GC_EVERY_MS`], for what it also does: giving the space of old records back
//! (its segment cleaning). At a clean stop the daemon flushes last (`server::run`), so nothing
//! is lost; a crash (SIGKILL, power) loses at most the last [`FLUSH_AFTER`] of those writes.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Store, StoreError};

/// How long after an unflushed write it is flushed.
pub(super) const FLUSH_AFTER: Duration = Duration::from_millis(500);
/// sled's periodic flusher, which also cleans its segments (so a busy audit log's old
/// records give their space back): 0.1–0.2 wake-ups a second at rest, where every 500 ms
/// (sled's default) was 4.
pub(super) const GC_EVERY_MS: u64 = 10_000;

impl Store {
    /// Make everything written so far durable (and the manifest with it).
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let db = open.db.clone();
        drop(open);
        self.flush_blocking(move || db.flush()).await?;
        if self.shared.manifest_behind.swap(false, Ordering::AcqRel)
            && let Err(e) = self.write_manifest()
        {
            // What was flushed is safe; a manifest left behind only counts fewer sessions
            // than there are, and the next flush tries again.
            tracing::warn!(error = %e, "the database manifest was not updated");
            self.shared.manifest_behind.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Run a sled flush on tokio's blocking pool. Never sled's `flush_async`: that runs the
    /// flush on sled's own small I/O pool, where it waits for buffer writes queued on the same
    /// pool; a few dozen at once (sessions opening together) took every pool thread and froze
    /// the daemon for good.
    pub(super) async fn flush_blocking(
        &self,
        flush: impl FnOnce() -> sled::Result<usize> + Send + 'static,
    ) -> Result<(), StoreError> {
        match tokio::task::spawn_blocking(flush).await {
            Ok(r) => r.map(drop).map_err(|e| self.err(e)),
            Err(e) => Err(StoreError::Corrupt { key: "flush".into(), reason: e.to_string() }),
        }
    }

    /// Something was written that its caller does not flush: flush it [`FLUSH_AFTER`] from
    /// now, with whatever else is written until then. Outside the daemon's runtime (a test's
    /// store) sled's own flusher writes it out.
    pub(super) fn written(&self) {
        if self.shared.flush_due.swap(true, Ordering::AcqRel) {
            return; // a flush is already on its way
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.shared.flush_due.store(false, Ordering::Release);
            return;
        };
        let store = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(FLUSH_AFTER).await;
            // Cleared first: a write during the flush schedules the next one.
            store.shared.flush_due.store(false, Ordering::Release);
            if let Err(e) = store.flush().await {
                tracing::warn!(error = %e, "the database was not flushed");
            }
        });
    }
}
