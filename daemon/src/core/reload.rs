//! Reload as a registry. Each part of the daemon that owns input files is an [`Input`]: it
//! names the files and directories the watcher must see for the sessions known now, takes in
//! what changed before the sessions' configurations are read again, and announces what changed
//! for it after. A reload (the watcher, `mcp/reload`, a change made through the daemon) runs
//! the inputs of [`inputs`] in their order around reading the configurations; the watcher
//! watches the union of what they name. A new input-owning feature implements [`Input`] in its
//! own file and is listed once, in [`inputs`].

use std::collections::BTreeSet;
use std::path::PathBuf;

use futures::future::BoxFuture;

use super::Core;
use crate::config::Effective;

/// What the watcher watches: files by name, and directories for their entries.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Watched {
    /// Files whose change matters.
    pub files: BTreeSet<PathBuf>,
    /// Directories whose entries' changes matter.
    pub dirs: BTreeSet<PathBuf>,
}

/// One part of the daemon that owns input files.
pub(crate) trait Input: Send + Sync + std::fmt::Debug {
    /// What it is, for logs.
    fn name(&self) -> &'static str;

    /// The files and directories whose changes it must see, for the sessions `known` now.
    fn watch(&self, core: &Core, known: &[Effective], into: &mut Watched);

    /// Before the sessions' configurations are read again: take in what changed.
    fn before<'a>(&'a self, _core: &'a Core) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    /// After they were read: announce what changed for it in each of the `known` sessions.
    fn after(&self, _core: &Core, _known: &[String]) {}
}

/// Every input, in the order a reload runs them. Extensions come first: what they contribute
/// is part of every session's configuration, and of the policy, hooks, skills and commands
/// read after it.
pub(crate) fn inputs() -> Vec<Box<dyn Input>> {
    vec![
        Box::new(super::extensions::ExtensionsInput),
        Box::new(super::settings::SettingsInput),
        Box::new(super::policy::PolicyInput),
        Box::new(super::hooks::HooksInput),
        Box::new(super::skills::SkillsInput),
        Box::new(super::commands::CommandsInput),
    ]
}

impl Core {
    /// What the watcher watches for the sessions known now: every input's files and
    /// directories.
    pub(crate) fn watched(&self) -> Watched {
        let known: Vec<Effective> = self.baselines().values().cloned().collect();
        let mut watched = Watched::default();
        for input in &self.inputs {
            input.watch(self, &known, &mut watched);
        }
        watched
    }

    /// When a file that vanished should be read again, to count as deleted (the watcher
    /// wakes then).
    pub(crate) fn next_recheck(&self) -> Option<std::time::Instant> {
        self.config.loader().next_recheck()
    }

    /// Notified when what the watcher should watch may have changed (a session became known).
    pub(crate) fn watch_changed(&self) -> &tokio::sync::Notify {
        self.config.watch_changed()
    }

    /// Each input takes in what changed, before the configurations are read again.
    pub(super) async fn inputs_before(&self) {
        for input in &self.inputs {
            tracing::trace!(input = input.name(), "reload: before");
            input.before(self).await;
        }
    }

    /// Each input announces what changed for the `known` sessions.
    pub(super) fn inputs_after(&self, known: &[String]) {
        for input in &self.inputs {
            tracing::trace!(input = input.name(), "reload: after");
            input.after(self, known);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_input_is_listed_once_extensions_first() {
        let names: Vec<&str> = inputs().iter().map(|i| i.name()).collect();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(names.first(), Some(&"extensions"), "{names:?}");
    }
}
