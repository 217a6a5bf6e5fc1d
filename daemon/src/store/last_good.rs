//! Each settings-style input file's last good contents (`crate::config`), one record per file
//! in the `last_good` tree, keyed by its path: so that a daemon that starts while a file does
//! not parse uses what it last read of it instead of nothing. A record holds the file's own
//! text, which may hold tokens (an `env` value, a header): it lives only in the database, in
//! the owner-only data directory, and is never shown.

use serde::{Deserialize, Serialize};

use super::{Store, StoreError, decode, encode};

const TREE: &str = "last_good";
/// Version of [`LastGood`] as written by this build.
pub(crate) const LAST_GOOD_RECORD_VERSION: u32 = 1;

/// A file's last good contents as kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LastGood {
    /// When they were read, Unix ms.
    pub read_ms: u64,
    /// The file's text as it was then.
    pub text: String,
}

impl Store {
    /// The last good contents kept for the file at `path`; none when there are none, an error
    /// when the record cannot be read (a damaged record is no last good contents).
    pub(crate) fn last_good(&self, path: &str) -> Result<Option<LastGood>, StoreError> {
        let open = self.handles()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        match tree.get(path.as_bytes()).map_err(|e| self.err(e))? {
            Some(bytes) => decode(path.as_bytes(), &bytes, LAST_GOOD_RECORD_VERSION).map(Some),
            None => Ok(None),
        }
    }

    /// Keep `record` as the last good contents of the file at `path` (durable before this
    /// returns: a daemon killed right after starts with them).
    pub(crate) fn put_last_good(&self, path: &str, record: &LastGood) -> Result<(), StoreError> {
        self.put_last_good_record(path, &encode(record, LAST_GOOD_RECORD_VERSION))
    }

    /// Forget the last good contents of the file at `path` (it was deleted).
    pub(crate) fn remove_last_good(&self, path: &str) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        if tree.remove(path.as_bytes()).map_err(|e| self.err(e))?.is_some() {
            tree.flush().map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// The paths of the files whose last good contents are kept.
    pub fn last_good_keys(&self) -> Vec<String> {
        self.keys_of(TREE)
    }

    /// Keep `record`, as written, under `path` (durable before this returns); the tests
    /// crate writes a damaged one with it.
    pub fn put_last_good_record(&self, path: &str, record: &[u8]) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        tree.insert(path.as_bytes(), record).map_err(|e| self.err(e))?;
        tree.flush().map(drop).map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_good_contents_round_trip_and_a_damaged_record_is_an_error() -> anyhow::Result<()> {
        let store = Store::temporary()?;
        assert_eq!(store.last_good("/h/.gemini/settings.json")?, None);
        let rec = LastGood { read_ms: 7, text: "{\"a\": 1}".into() };
        store.put_last_good("/h/.gemini/settings.json", &rec)?;
        assert_eq!(store.last_good("/h/.gemini/settings.json")?, Some(rec));
        assert_eq!(store.last_good_keys(), ["/h/.gemini/settings.json"]);
        store.put_last_good_record("/h/.gemini/settings.json", b"\xff garbage")?;
        assert!(store.last_good("/h/.gemini/settings.json").is_err());
        store.remove_last_good("/h/.gemini/settings.json")?;
        assert_eq!(store.last_good("/h/.gemini/settings.json")?, None);
        Ok(())
    }
}
