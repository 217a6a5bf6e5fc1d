//! The watcher on Linux: inotify with masks of its own, so that the kernel wakes the daemon only
//! for what can change an input.
//!
//! notify's inotify backend asks for every directory's opens and attribute changes. A missing
//! input directory is watched at its nearest existing ancestor, which for Gemini CLI's system
//! settings (`/etc/gemini-cli/settings.json`) is `/etc`: every program started anywhere on the
//! machine opens `/etc/ld.so.cache`, and each open woke the watcher's thread (140 times a
//! second on a busy machine, once per process started on a quiet one) for an event it dropped.
//! Here a directory that holds inputs is asked for writes, creations, removals and renames; an
//! ancestor, only for the creation or arrival of an entry and its own removal or move.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
use notify::event::{
    AccessKind, AccessMode, CreateKind, DataChange, Flag, MetadataKind, ModifyKind, RemoveKind,
    RenameMode,
};
use notify::{Event, EventKind};
use parking_lot::Mutex;
use tokio::sync::mpsc;

/// A directory holding input files: everything that writes, adds, removes or renames one.
pub(super) const HOLDS_INPUTS: WatchMask = WatchMask::CREATE
    .union(WatchMask::DELETE)
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::MODIFY)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::ATTRIB)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF)
    .union(WatchMask::ONLYDIR);

/// The nearest existing ancestor of a missing directory: only an entry appearing (the missing
/// directory, or one on the way to it) and the ancestor itself going away.
pub(super) const ANCESTOR: WatchMask = WatchMask::CREATE
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF)
    .union(WatchMask::ONLYDIR);

type Sink = mpsc::Sender<notify::Result<Event>>;
type ByWd = Arc<Mutex<HashMap<WatchDescriptor, PathBuf>>>;

/// The inotify instance's watches; its events are read on a thread of their own.
#[derive(Debug)]
pub(super) struct Watcher {
    watches: Watches,
    /// Each watch's directory, for the reading thread to name events.
    by_wd: ByWd,
    by_path: HashMap<PathBuf, WatchDescriptor>,
}

impl Watcher {
    /// A watcher sending its events to `tx`; its thread ends at the first event after `tx`'s
    /// receiver is gone.
    pub(super) fn new(tx: Sink) -> std::io::Result<Self> {
        let inotify = Inotify::init()?;
        let watches = inotify.watches();
        let by_wd = ByWd::default();
        let names = Arc::clone(&by_wd);
        std::thread::Builder::new()
            .name("geminid-watch".into())
            .spawn(move || read(inotify, &names, &tx))?;
        Ok(Self { watches, by_wd, by_path: HashMap::new() })
    }

    /// Watch `dir` for what `holds_inputs` says it needs (a watch already there is changed).
    pub(super) fn watch(&mut self, dir: &Path, holds_inputs: bool) -> std::io::Result<()> {
        let mask = if holds_inputs { HOLDS_INPUTS } else { ANCESTOR };
        // Held across the add, so that the reading thread cannot see an event of the new watch
        // before it knows its directory.
        let mut by_wd = self.by_wd.lock();
        let wd = self.watches.add(dir, mask)?;
        by_wd.insert(wd.clone(), dir.to_path_buf());
        if let Some(old) = self.by_path.insert(dir.to_path_buf(), wd.clone())
            && old != wd
        {
            by_wd.remove(&old); // the directory was replaced: its old watch went with it
        }
        Ok(())
    }

    /// Stop watching `dir`.
    pub(super) fn unwatch(&mut self, dir: &Path) {
        let Some(wd) = self.by_path.remove(dir) else { return };
        // Two paths of one directory (a symlink) share a watch.
        if self.by_path.values().any(|w| *w == wd) {
            return;
        }
        self.by_wd.lock().remove(&wd);
        let _ = self.watches.remove(wd); // fails if the directory is gone, and its watch with it
    }
}

fn read(mut inotify: Inotify, by_wd: &ByWd, tx: &Sink) {
    let mut buffer = [0u8; 8192];
    loop {
        let events = match inotify.read_events_blocking(&mut buffer) {
            Ok(events) => events,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.try_send(Err(notify::Error::io(e)));
                return;
            }
        };
        let mut by_wd = by_wd.lock();
        for ev in events {
            if tx.is_closed() {
                return;
            }
            if ev.mask.contains(EventMask::IGNORED) {
                by_wd.remove(&ev.wd);
                continue;
            }
            let event = if ev.mask.contains(EventMask::Q_OVERFLOW) {
                // Events were lost: name every watched directory, so that a reload follows.
                let all = Event::new(EventKind::Other).set_flag(Flag::Rescan);
                by_wd.values().fold(all, |e, p| e.add_path(p.clone()))
            } else {
                let Some(dir) = by_wd.get(&ev.wd) else { continue };
                let path = ev.name.map_or_else(|| dir.clone(), |n| dir.join(n));
                Event::new(kind(ev.mask)).add_path(path)
            };
            // A full buffer means a reload is coming anyway.
            let _ = tx.try_send(Ok(event));
        }
    }
}

/// The event kind notify would have given.
fn kind(mask: EventMask) -> EventKind {
    if mask.contains(EventMask::CREATE) {
        EventKind::Create(CreateKind::Any)
    } else if mask.intersects(EventMask::DELETE | EventMask::DELETE_SELF) {
        EventKind::Remove(RemoveKind::Any)
    } else if mask.contains(EventMask::MOVED_FROM) {
        EventKind::Modify(ModifyKind::Name(RenameMode::From))
    } else if mask.contains(EventMask::MOVED_TO) {
        EventKind::Modify(ModifyKind::Name(RenameMode::To))
    } else if mask.contains(EventMask::MOVE_SELF) {
        EventKind::Modify(ModifyKind::Name(RenameMode::Any))
    } else if mask.contains(EventMask::CLOSE_WRITE) {
        EventKind::Access(AccessKind::Close(AccessMode::Write))
    } else if mask.contains(EventMask::MODIFY) {
        EventKind::Modify(ModifyKind::Data(DataChange::Any))
    } else if mask.contains(EventMask::ATTRIB) {
        EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any))
    } else {
        EventKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Opening and reading files in a watched ancestor sends nothing; creating an entry does.
    #[tokio::test]
    async fn an_ancestor_is_told_only_of_new_entries() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("ld.so.cache"), "x")?;
        let (tx, mut rx) = mpsc::channel(64);
        let mut w = Watcher::new(tx)?;
        w.watch(dir.path(), false)?;
        for _ in 0..20 {
            std::fs::read(dir.path().join("ld.so.cache"))?;
        }
        std::fs::write(dir.path().join("ld.so.cache"), "y")?; // a write, not a new entry
        std::fs::create_dir(dir.path().join("gemini-cli"))?;
        let first = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv()).await?;
        let first = first.ok_or_else(|| anyhow::anyhow!("closed"))??;
        assert_eq!(first.paths, [dir.path().join("gemini-cli")], "{first:?}");
        assert!(matches!(first.kind, EventKind::Create(_)));
        Ok(())
    }

    /// A directory holding inputs is told of a write.
    #[tokio::test]
    async fn a_directory_holding_inputs_is_told_of_writes() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let file = dir.path().join("settings.json");
        std::fs::write(&file, "{}")?;
        let (tx, mut rx) = mpsc::channel(64);
        let mut w = Watcher::new(tx)?;
        w.watch(dir.path(), true)?;
        std::fs::read(&file)?;
        std::fs::write(&file, "{ }")?;
        let first = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv()).await?;
        let first = first.ok_or_else(|| anyhow::anyhow!("closed"))??;
        assert_eq!(first.paths, [file], "{first:?}");
        assert!(matches!(first.kind, EventKind::Modify(_) | EventKind::Access(_)), "{first:?}");
        Ok(())
    }
}
