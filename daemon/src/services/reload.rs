//! Reload as a registry, and the service that runs it. Each part of the daemon that owns input
//! files is an [`Input`] holding the state it reloads: it names the files and directories the
//! watcher must see for the sessions known now, takes in what changed before the sessions'
//! configurations are read again, and announces what changed for it after. The [`Reloader`]
//! (asked by the watcher, `mcp/reload` and the changes made through the daemon) runs its inputs
//! in their order around reading the configurations, one reload at a time; the watcher watches
//! the union of what they name. A new input-owning feature implements [`Input`] in its own
//! file, and the core, which builds every service, hands it to the reloader.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use geminid_protocol::event::{ConfigChanged, EventBody};

use crate::config::Effective;
use crate::mcp::SessionView;
use crate::services::configs::Configs;
use crate::session::SessionError;

/// What the watcher watches: files by name, and directories for their entries.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Watched {
    /// Files whose change matters.
    pub files: BTreeSet<PathBuf>,
    /// Directories whose entries' changes matter.
    pub dirs: BTreeSet<PathBuf>,
}

/// One part of the daemon that owns input files, holding what it reloads.
pub(crate) trait Input: Send + Sync + std::fmt::Debug {
    /// What it is, for logs.
    fn name(&self) -> &'static str;

    /// The files and directories whose changes it must see, for the sessions `known` now.
    fn watch(&self, known: &[Effective], into: &mut Watched);

    /// Before the sessions' configurations are read again: take in what changed.
    fn before(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// After they were read: announce what changed for it in each of the `known` sessions.
    fn after(&self, _known: &[String]) {}
}

/// Runs reloads: the sessions' configurations read again between what the inputs do before
/// and after, one reload at a time.
#[derive(Debug)]
pub(crate) struct Reloader {
    config: Arc<Configs>,
    /// Sessions.
    sessions: Arc<crate::session::Sessions>,
    /// The event bus.
    events: Arc<crate::events::EventBus>,
    /// The MCP servers.
    mcp: Arc<crate::mcp::Supervisor>,
    /// Cancelled when the daemon begins to shut down.
    shutdown: tokio_util::sync::CancellationToken,
    /// Serializes reloads (file watcher, `mcp/reload`, changes made through the daemon).
    lock: tokio::sync::Mutex<()>,
    /// The parts that own input files, in the order a reload runs them.
    inputs: Vec<Box<dyn Input>>,
}

impl Reloader {
    /// A reloader running `inputs` in this order.
    pub(crate) fn new(
        config: Arc<Configs>,
        sessions: Arc<crate::session::Sessions>,
        events: Arc<crate::events::EventBus>,
        mcp: Arc<crate::mcp::Supervisor>,
        shutdown: tokio_util::sync::CancellationToken,
        inputs: Vec<Box<dyn Input>>,
    ) -> Self {
        let reloader = Self {
            config,
            sessions,
            events,
            mcp,
            shutdown,
            lock: tokio::sync::Mutex::new(()),
            inputs,
        };
        tracing::debug!(inputs = ?reloader.names(), "reload inputs");
        reloader
    }

    /// The inputs' names, in the order a reload runs them.
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.inputs.iter().map(|i| i.name()).collect()
    }

    /// What the watcher watches for the sessions known now: every input's files and
    /// directories.
    pub(crate) fn watched(&self) -> Watched {
        let known: Vec<Effective> = self.config.baselines().values().cloned().collect();
        let mut watched = Watched::default();
        for input in &self.inputs {
            input.watch(&known, &mut watched);
        }
        watched
    }

    /// When a file that vanished should be read again, to count as deleted (the watcher
    /// wakes then).
    /// A file read gave up on while it was being rewritten is read again too, once it may
    /// have settled, so its last version is taken when the rewriting stops.
    pub(crate) fn next_recheck(&self) -> Option<std::time::Instant> {
        let vanished = self.config.loader().next_recheck();
        let unsettled = crate::config::files::next_recheck();
        vanished.into_iter().chain(unsettled).min()
    }

    /// Woken when [`Reloader::next_recheck`] may have moved earlier without a change (a read
    /// gave up on a file being rewritten).
    pub(crate) fn recheck_set(&self) -> &'static tokio::sync::Notify {
        crate::config::files::recheck_set()
    }

    /// Notified when what the watcher should watch may have changed (a session became known).
    pub(crate) fn watch_changed(&self) -> &tokio::sync::Notify {
        self.config.watch_changed()
    }

    /// Cancelled when the daemon begins to shut down (the watcher stops then).
    pub(crate) fn shutdown(&self) -> &tokio_util::sync::CancellationToken {
        &self.shutdown
    }

    /// Re-read the configuration of every known session (and `ensure`, if given), emit one
    /// `config/changed` event per session whose configuration changed, and return them.
    pub(crate) async fn reload(
        &self,
        ensure: Option<&str>,
        reason: &str,
    ) -> Result<Vec<ConfigChanged>, SessionError> {
        let _serial = self.lock.lock().await;
        // Every file is read again from here on: a read that gives up again asks anew.
        crate::config::files::recheck_taken();
        for input in &self.inputs {
            tracing::trace!(input = input.name(), "reload: before");
            input.before().await;
        }
        if let Some(id) = ensure {
            self.sessions.record(id)?;
        }
        let mut ids: BTreeSet<String> = self.config.baselines().keys().cloned().collect();
        ids.extend(ensure.map(str::to_owned));
        let mut changes = Vec::new();
        // Servers a session not running its servers now no longer configures.
        let mut dropped = std::collections::HashSet::new();
        for id in ids {
            let new = match self.config.compute(&id) {
                Ok(e) => e,
                Err(SessionError::NotFound(_)) => {
                    self.config.baselines().remove(&id);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let old = self.config.baselines().insert(id.clone(), new.clone());
            if let Some((old, change)) = old.and_then(|old| {
                let change = crate::config::diff::diff(&id, reason, &old, &new)?;
                Some((old, change))
            }) {
                tracing::info!(session = %id, reason, added = ?change.servers_added, removed = ?change.servers_removed, changed = ?change.servers_changed, "configuration changed");
                self.events.emit(EventBody::ConfigChanged(change.clone()));
                if self.mcp.is_active(&id) {
                    let env = self.config.session_env(&id);
                    let mut touched = change.servers_changed.clone();
                    touched.extend(change.enablement_changed.iter().cloned());
                    self.mcp
                        .lifecycle()
                        .sync(SessionView { id: &id, config: &new, env: &env }, &touched);
                } else {
                    let env = self.config.session_env(&id);
                    let mcp = &self.mcp;
                    let now =
                        mcp.idle().configured(SessionView { id: &id, config: &new, env: &env });
                    let was =
                        mcp.idle().configured(SessionView { id: &id, config: &old, env: &env });
                    dropped.extend(was.into_iter().filter(|b| !now.contains(b)));
                }
                changes.push(change);
            }
        }
        if !dropped.is_empty() {
            self.stop_unconfigured(dropped);
        }
        let known: Vec<String> = self.config.baselines().keys().cloned().collect();
        for input in &self.inputs {
            tracing::trace!(input = input.name(), "reload: after");
            input.after(&known);
        }
        Ok(changes)
    }

    /// Stop the servers in `dropped` that no known session's configuration runs any more
    /// and no session uses: a server removed while no client is attached (`gemctl mcp remove`)
    /// is not kept warm for hours, nor left crash-looping.
    fn stop_unconfigured(&self, mut dropped: std::collections::HashSet<String>) {
        let known: Vec<(String, Effective)> =
            self.config.baselines().iter().map(|(id, e)| (id.clone(), e.clone())).collect();
        for (id, config) in &known {
            let env = self.config.session_env(id);
            let view = SessionView { id, config, env: &env };
            for base in self.mcp.idle().configured(view) {
                dropped.remove(&base);
            }
        }
        self.mcp.idle().unconfigured(&dropped);
    }

    /// `mcp/reload`: the edits are done, so files missing now are taken as deleted at once,
    /// then every known session (and `ensure`) is re-read as in [`Reloader::reload`].
    pub(crate) async fn requested(
        &self,
        ensure: Option<&str>,
    ) -> Result<Vec<ConfigChanged>, SessionError> {
        self.config.loader().take_deletions();
        self.reload(ensure, "mcp/reload").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_hands_each_input_once_extensions_first() -> anyhow::Result<()> {
        let (_dir, core) = crate::rpc::tests::core()?;
        let names = core.reloader().names();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(
            names,
            ["extensions", "settings", "policy", "hooks", "skills", "commands"],
            "extensions first: what they contribute is read by every input after them"
        );
        Ok(())
    }
}
