//! geminid's own integrity record of each installed extension (the hash of every file, signed):
//! one entry per extension name in the `extensions` tree, flushed when written.

use super::{Store, StoreError};

const TREE: &str = "extensions";

impl Store {
    /// `name`'s record as written; none when there is none (or the database cannot be read).
    pub(crate) fn extension_record(&self, name: &str) -> Option<Vec<u8>> {
        let open = self.handles().ok()?;
        let tree = open.db.open_tree(TREE).ok()?;
        tree.get(name.as_bytes()).ok().flatten().map(|v| v.to_vec())
    }

    /// Keep `name`'s record (durable before this returns).
    pub(crate) fn put_extension_record(&self, name: &str, record: &[u8]) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        tree.insert(name.as_bytes(), record).map_err(|e| self.err(e))?;
        tree.flush().map(drop).map_err(|e| self.err(e))
    }

    /// The name of every extension with a record.
    pub(crate) fn extension_names(&self) -> Vec<String> {
        self.keys_of(TREE)
    }

    /// Forget `name`'s record (uninstall).
    pub(crate) fn delete_extension_record(&self, name: &str) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        tree.remove(name.as_bytes()).map_err(|e| self.err(e))?;
        tree.flush().map(drop).map_err(|e| self.err(e))
    }
}
