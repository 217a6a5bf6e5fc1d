//! Tool-definition pins (`crate::pins`): one signed record per server (by its pin key) in the
//! `pins` tree, flushed when written.

use super::{Store, StoreError};

const TREE: &str = "pins";

impl Store {
    /// The pins record kept under `key`, as written; none when there is none. An unreadable
    /// database is an error (the pins cannot be told apart from none).
    pub fn pins_record(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let open = self.handles()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        Ok(tree.get(key.as_bytes()).map_err(|e| self.err(e))?.map(|v| v.to_vec()))
    }

    /// Keep the pins record under `key` (durable before this returns).
    pub fn put_pins_record(&self, key: &str, record: &[u8]) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        tree.insert(key.as_bytes(), record).map_err(|e| self.err(e))?;
        tree.flush().map(drop).map_err(|e| self.err(e))
    }

    /// Every pins record's key.
    pub fn pins_keys(&self) -> Vec<String> {
        self.keys_of(TREE)
    }
}
