//! Workspace policy acceptances (`crate::policy::accept`): one signed record per workspace in
//! the `policy_accepted` tree, flushed when written. A record that is gone reads as none ever
//! written, which is safe here: the workspace's policy files are then not loaded until they
//! are accepted again.

use crate::store::{Store, StoreError};

const TREE: &str = "policy_accepted";

impl Store {
    /// The acceptance record kept for `workspace`, as written; none when there is none.
    pub fn policy_accepted_record(&self, workspace: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let open = self.handles()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        Ok(tree.get(workspace.as_bytes()).map_err(|e| self.err(e))?.map(|v| v.to_vec()))
    }

    /// Keep `record`, as written, for `workspace` (durable before this returns); the tests
    /// crate writes a damaged one with it.
    pub fn put_policy_accepted_record(
        &self,
        workspace: &str,
        record: &[u8],
    ) -> Result<(), StoreError> {
        let open = self.handles_for_write()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        tree.insert(workspace.as_bytes(), record).map_err(|e| self.err(e))?;
        tree.flush().map(drop).map_err(|e| self.err(e))
    }

    /// The workspaces an acceptance is kept for.
    pub fn policy_accepted_keys(&self) -> Vec<String> {
        self.keys_of(TREE)
    }
}
