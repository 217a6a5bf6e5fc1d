//! Small sets of marks that outlive the daemon (the servers known to ask for roots).

use std::collections::HashSet;

use super::{Store, StoreError};

impl Store {
    /// The marks in `set`; none when the database cannot be read.
    pub(crate) fn marked(&self, set: &str) -> HashSet<String> {
        let Ok(open) = self.handles() else { return HashSet::new() };
        let Ok(tree) = open.db.open_tree(format!("marks/{set}")) else { return HashSet::new() };
        tree.iter()
            .filter_map(|item| item.ok())
            .filter_map(|(k, _)| String::from_utf8(k.to_vec()).ok())
            .collect()
    }

    /// Add `key` to `set`.
    pub(crate) fn mark(&self, set: &str, key: &str) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let tree = open.db.open_tree(format!("marks/{set}")).map_err(|e| self.err(e))?;
        tree.insert(key.as_bytes(), &[] as &[u8]).map_err(|e| self.err(e))?;
        // Rare and small: durable at once, so a daemon killed right after keeps it.
        tree.flush().map(drop).map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn marks_are_kept_per_set() -> anyhow::Result<()> {
        let store = super::Store::temporary()?;
        assert!(store.marked("a").is_empty());
        store.mark("a", "x")?;
        store.mark("a", "x")?;
        store.mark("b", "y")?;
        assert_eq!(store.marked("a").into_iter().collect::<Vec<_>>(), ["x"]);
        assert_eq!(store.marked("b").len(), 1);
        Ok(())
    }
}
