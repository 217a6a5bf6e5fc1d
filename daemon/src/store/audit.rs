//! The database's `audit` tree, where daemons before the audit files kept their records: read
//! once at start to move them to the files (`audit/files.rs`), then emptied.

use serde::de::DeserializeOwned;

use super::{Store, StoreError, decode};

/// Version of the audit records.
const AUDIT_RECORD_VERSION: u32 = 1;

impl Store {
    /// Keep an audit record under `seq`, forgetting the one `keep` records older (so the log
    /// holds at most `keep`, and one more for each time the daemon died between the two
    /// writes). Flushed half a second later with the writes around it (`flush.rs`).
    ///
    /// Two writes, not a `sled::Batch`: applying a batch writes sled's log buffer out at once,
    /// twice, to make the batch atomic, which cost every call two disk writes and a wake-up of
    /// sled's I/O threads (a quarter of the daemon's CPU under calls; issue 39). Nothing needs
    /// the record and the removal together.
    #[cfg(test)]
    pub(crate) fn put_audit<T: serde::Serialize>(
        &self,
        seq: u64,
        rec: &T,
        keep: u64,
    ) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        open.audit
            .insert(seq.to_be_bytes(), super::encode(rec, AUDIT_RECORD_VERSION))
            .map_err(|e| self.err(e))?;
        if let Some(old) = seq.checked_sub(keep) {
            open.audit.remove(old.to_be_bytes()).map_err(|e| self.err(e))?;
        }
        self.written();
        Ok(())
    }

    /// The last audit record's `seq` (0 when there is none).
    pub(crate) fn last_audit_seq(&self) -> u64 {
        let Ok(open) = self.handles() else { return 0 };
        let last = open.audit.last().ok().flatten();
        last.and_then(|(k, _)| Some(u64::from_be_bytes(k.as_ref().try_into().ok()?))).unwrap_or(0)
    }

    /// Forget every audit record older than `first` (those a larger bound kept, or a daemon
    /// killed between a record's two writes left), in batches, so that no single write holds
    /// sled's log long. Returns how many went.
    pub(crate) fn trim_audit(&self, first: u64) -> Result<u64, StoreError> {
        const BATCH: usize = 1_000;
        let open = self.handles_for_write()?;
        let mut gone = 0;
        loop {
            let mut batch = sled::Batch::default();
            let mut n = 0u64;
            for item in open.audit.range(..first.to_be_bytes()).keys().take(BATCH) {
                batch.remove(item.map_err(|e| self.err(e))?);
                n += 1;
            }
            if n == 0 {
                if gone > 0 {
                    self.written();
                }
                return Ok(gone);
            }
            open.audit.apply_batch(batch).map_err(|e| self.err(e))?;
            gone += n;
        }
    }

    /// Audit records newest first, those before `before` if given, until `take` returns false;
    /// unreadable ones are skipped.
    pub(crate) fn audit_newest_first<T: DeserializeOwned>(
        &self,
        before: Option<u64>,
        mut take: impl FnMut(T) -> bool,
    ) {
        let Ok(open) = self.handles() else { return };
        // No record has the largest number: before it is every record.
        let end = before.unwrap_or(u64::MAX).to_be_bytes();
        for item in open.audit.range(..end).rev() {
            let Ok((k, v)) = item else { continue };
            match decode(&k, &v, AUDIT_RECORD_VERSION) {
                Ok(rec) => {
                    if !take(rec) {
                        return;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "skipping an audit record"),
            }
        }
    }
}
