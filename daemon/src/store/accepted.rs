//! Workspace policy acceptances (`crate::policy::accept`): one signed record per workspace in
//! the `policy_accepted` tree, flushed when written. A record that is gone loads nothing (the
//! files are not loaded until accepted again), and, as the pins', one the manifest beside the
//! database names is an error, so that it reads as damaged ("accept again"), not as a folder
//! never accepted.

use crate::store::{Store, StoreError};

const TREE: &str = "policy_accepted";
/// The manifest of the workspaces a record was written for, beside the database.
const MANIFEST: &str = "geminid.policy-accepted.manifest";

impl Store {
    /// The acceptance record kept for `workspace`, as written; none when there is none.
    pub fn policy_accepted_record(&self, workspace: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let open = self.handles()?;
        let tree = open.db.open_tree(TREE).map_err(|e| self.err(e))?;
        if let Some(v) = tree.get(workspace.as_bytes()).map_err(|e| self.err(e))? {
            return Ok(Some(v.to_vec()));
        }
        match self.manifest(MANIFEST) {
            Ok(keys) if !keys.contains(workspace) => Ok(None),
            Ok(_) => Err(StoreError::Corrupt {
                key: format!("{TREE}/{workspace}"),
                reason: "it was written, and is gone from the database: damaged, or edited"
                    .to_owned(),
            }),
            Err(why) => Err(StoreError::Corrupt {
                key: format!("{TREE}/{workspace}"),
                reason: format!(
                    "there is none, and the manifest of those written ({why}) cannot tell whether there was one"
                ),
            }),
        }
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
        tree.flush().map(drop).map_err(|e| self.err(e))?;
        self.manifest_add(MANIFEST, TREE, workspace)
    }

    /// The workspaces an acceptance is kept for.
    pub fn policy_accepted_keys(&self) -> Vec<String> {
        self.keys_of(TREE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record the manifest names that is gone from the database is an error (read as
    /// damaged, "accept again"), not as a workspace never accepted.
    #[test]
    fn a_record_gone_from_the_database_is_an_error() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let store = Store::open(dir.path())?;
        assert!(store.policy_accepted_record("/ws")?.is_none());
        store.put_policy_accepted_record("/ws", b"{}")?;
        assert!(store.policy_accepted_record("/ws")?.is_some());
        let open = store.handles_for_write()?;
        open.db.open_tree(TREE)?.remove("/ws")?;
        let err = store.policy_accepted_record("/ws").map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("is gone from the database"), "{err}");
        assert!(store.policy_accepted_record("/other")?.is_none());
        Ok(())
    }
}
