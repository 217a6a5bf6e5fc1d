//! Hot reload: watch the directories that hold every input file (so editors that replace a
//! file by rename, and files created later, are seen), debounce, then reload.
//!
//! The debounce waits for [`QUIET`] without relevant events, but never longer than [`MAX_DELAY`]
//! after the first one, so a stream of writes still reloads a bounded number of times and the
//! last write is always read. A symlinked file is watched at its target as well.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::services::reload::Reloader;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux::Watcher;

/// Quiet time after the last change before reloading.
pub(crate) const QUIET: Duration = Duration::from_millis(50);
/// Longest wait between the first change and the reload.
pub(crate) const MAX_DELAY: Duration = Duration::from_millis(500);
/// Watcher events buffered before further ones are dropped (a reload is coming by then).
const EVENT_BUFFER: usize = 1024;

/// What to watch and which events matter.
#[derive(Debug, Default, PartialEq, Eq)]
struct Targets {
    /// Input files (and the targets of symlinked ones).
    files: BTreeSet<PathBuf>,
    /// Directories whose every entry is an input (policy directories).
    trees: BTreeSet<PathBuf>,
    /// The directories holding the files, and the trees themselves.
    dirs: BTreeSet<PathBuf>,
}

impl Targets {
    #[cfg(test)]
    fn of(files: BTreeSet<PathBuf>) -> Self {
        Self::with_trees(files, BTreeSet::new())
    }

    /// What the daemon's inputs name (`core::reload`).
    fn of_inputs(w: crate::services::reload::Watched) -> Self {
        Self::with_trees(w.files, w.dirs)
    }

    fn with_trees(files: BTreeSet<PathBuf>, trees: BTreeSet<PathBuf>) -> Self {
        let mut all = files.clone();
        for f in &files {
            if std::fs::symlink_metadata(f).is_ok_and(|m| m.file_type().is_symlink())
                && let Ok(target) = std::fs::canonicalize(f)
            {
                all.insert(target);
            }
        }
        let mut dirs: BTreeSet<PathBuf> =
            all.iter().filter_map(|f| f.parent().map(Path::to_path_buf)).collect();
        dirs.extend(trees.iter().cloned());
        Self { files: all, trees, dirs }
    }

    /// An event matters if it touches an input file or an entry of a tree, or creates (or
    /// removes) one of the directories they live in or an ancestor of one.
    fn matters(&self, event: &notify::Event) -> bool {
        event.paths.iter().any(|p| {
            self.files.contains(p)
                || p.parent().is_some_and(|d| self.trees.contains(d))
                || self.dirs.iter().any(|d| d.starts_with(p))
        })
    }

    /// The directories to watch: each wanted directory, or its nearest existing ancestor;
    /// with whether it is a wanted one (then all its changes matter; in an ancestor, only new
    /// entries and its own removal).
    fn watch_dirs(&self) -> BTreeMap<PathBuf, bool> {
        let mut out = BTreeMap::new();
        for d in &self.dirs {
            if let Some(a) = d.ancestors().find(|a| a.is_dir()) {
                *out.entry(a.to_path_buf()).or_default() |= a == d;
            }
        }
        out
    }
}

/// Start watching the inputs of `reloader`, reloading when they change; runs until shutdown.
pub(crate) fn spawn(reloader: Arc<Reloader>) -> std::io::Result<()> {
    let (tx, rx) = mpsc::channel(EVENT_BUFFER);
    let watcher = Watcher::new(tx)?;
    tokio::spawn(run(reloader, watcher, rx));
    Ok(())
}

fn sync(watcher: &mut Watcher, watched: &mut BTreeSet<PathBuf>, targets: &Targets) {
    let wanted = targets.watch_dirs();
    for gone in watched.iter().filter(|d| !wanted.contains_key(*d)) {
        watcher.unwatch(gone);
    }
    // Never drop a watch that is still wanted (a write in between would be missed); adding
    // one again is harmless and renews it for a directory that was deleted and re-created.
    watched.clear();
    for (d, holds_inputs) in wanted {
        match watcher.watch(&d, holds_inputs) {
            Ok(()) => {
                watched.insert(d);
            }
            Err(e) => tracing::warn!(dir = %d.display(), error = %e, "cannot watch"),
        }
    }
    tracing::debug!(dirs = ?watched, "watching");
}

async fn run(
    reloader: Arc<Reloader>,
    mut watcher: Watcher,
    mut rx: mpsc::Receiver<notify::Result<notify::Event>>,
) {
    let mut watched = BTreeSet::new();
    let mut targets = Targets::of_inputs(reloader.watched());
    sync(&mut watcher, &mut watched, &targets);
    loop {
        // A file that vanished is read again once its grace is over (then it counts as deleted,
        // unless it came back meanwhile, which its own events announce first); one a read gave
        // up on while it was being rewritten, once it may have settled.
        let recheck = reloader.next_recheck();
        let grace_over = async move {
            match recheck {
                Some(at) => crate::clock::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = reloader.shutdown().cancelled() => return,
            () = grace_over => tracing::debug!("a vanished or unsettled input file is due"),
            // A read gave up on a file being rewritten: sleep until it is due instead.
            () = reloader.recheck_set().notified() => continue,
            () = reloader.watch_changed().notified() => {
                let now = Targets::of_inputs(reloader.watched());
                if now == targets {
                    continue;
                }
                // A file in a newly watched directory may have changed before its watch
                // existed: fall through to a reload.
                targets = now;
                sync(&mut watcher, &mut watched, &targets);
            }
            ev = rx.recv() => match ev {
                None => return,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "file watcher error");
                    continue;
                }
                // Read-only events (opens, closes without a write) never arrive: counting the
                // reload's own reads would make each reload trigger the next.
                Some(Ok(ev)) if !targets.matters(&ev) => continue,
                Some(Ok(ev)) => tracing::debug!(paths = ?ev.paths, kind = ?ev.kind, "input changed"),
            },
        }
        let first = Instant::now();
        loop {
            let deadline = (Instant::now() + QUIET).min(first + MAX_DELAY);
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                // (The tests pace a stream of writes by these lines.)
                Ok(Some(Ok(ev))) => {
                    tracing::debug!(paths = ?ev.paths, kind = ?ev.kind, "input changed again");
                }
                Ok(Some(Err(_))) => continue,
                Ok(None) => return,
                Err(_) => break,
            }
        }
        // Watch new directories first, so a write right after this reload is not missed.
        targets = Targets::of_inputs(reloader.watched());
        sync(&mut watcher, &mut watched, &targets);
        match reloader.reload(None, "watch").await {
            // (The tests wait for this line.)
            Ok(_) => tracing::debug!("reloaded for a change to the input files"),
            Err(e) => tracing::warn!(error = %e, "reload failed"),
        }
    }
}

/// Elsewhere, notify's watcher, whose read-only events are dropped on its own thread.
#[cfg(not(target_os = "linux"))]
struct Watcher(notify::RecommendedWatcher);

#[cfg(not(target_os = "linux"))]
impl Watcher {
    fn new(tx: mpsc::Sender<notify::Result<notify::Event>>) -> std::io::Result<Self> {
        let w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            // Reading a file is not a change; dropped before it wakes the runtime.
            if !matches!(&res, Ok(ev) if is_read_only(&ev.kind)) {
                let _ = tx.try_send(res);
            }
        });
        w.map(Self).map_err(std::io::Error::other)
    }

    fn watch(&mut self, dir: &Path, _holds_inputs: bool) -> notify::Result<()> {
        use notify::Watcher as _;
        self.0.watch(dir, notify::RecursiveMode::NonRecursive)
    }

    fn unwatch(&mut self, dir: &Path) {
        use notify::Watcher as _;
        let _ = self.0.unwatch(dir);
    }
}

#[cfg(not(target_os = "linux"))]
fn is_read_only(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => false,
        notify::EventKind::Access(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_existing_ancestor_and_relevance() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("ws/.gemini/settings.json");
        let t = Targets::of([file.clone()].into());
        assert_eq!(t.watch_dirs(), [(dir.path().to_path_buf(), false)].into());
        let event = |p: PathBuf| notify::Event::new(notify::EventKind::Any).add_path(p);
        assert!(t.matters(&event(dir.path().join("ws"))), "creating an ancestor matters");
        assert!(t.matters(&event(file.clone())));
        assert!(!t.matters(&event(dir.path().join("ws/.gemini/other.json"))));
        assert!(!t.matters(&event(dir.path().join("unrelated"))));
        Ok(())
    }

    #[test]
    fn every_entry_of_a_tree_matters() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let tree = dir.path().join("home/.gemini/policies");
        let t = Targets::with_trees(BTreeSet::new(), [tree.clone()].into());
        assert_eq!(t.watch_dirs(), [(dir.path().to_path_buf(), false)].into(), "not there yet");
        let event = |p: PathBuf| notify::Event::new(notify::EventKind::Any).add_path(p);
        assert!(t.matters(&event(tree.join("new.toml"))));
        assert!(t.matters(&event(tree.clone())));
        assert!(t.matters(&event(dir.path().join("home"))));
        assert!(!t.matters(&event(tree.join("sub/deep.toml"))), "not recursive");
        std::fs::create_dir_all(&tree)?;
        assert_eq!(t.watch_dirs(), [(tree, true)].into());
        Ok(())
    }

    #[test]
    fn symlinked_files_are_watched_at_their_target() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join("dotfiles"))?;
        std::fs::create_dir_all(dir.path().join("home"))?;
        let target = dir.path().join("dotfiles/settings.json");
        std::fs::write(&target, "{}")?;
        let link = dir.path().join("home/settings.json");
        std::os::unix::fs::symlink(&target, &link)?;
        let t = Targets::of([link].into());
        assert!(t.files.contains(&std::fs::canonicalize(&target)?));
        assert!(t.watch_dirs().contains_key(&std::fs::canonicalize(dir.path().join("dotfiles"))?));
        Ok(())
    }
}
