//! What the seats prepare per session (policy's rules, the hooks registry), kept until an
//! epoch moves: a reload, or a change of something they are made of.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Per-session values, each stored with the epoch it was prepared at.
#[derive(Debug)]
pub(crate) struct PerSession<T> {
    epoch: AtomicU64,
    by_session: Mutex<HashMap<String, (u64, Arc<T>)>>,
}

impl<T> Default for PerSession<T> {
    fn default() -> Self {
        Self { epoch: AtomicU64::new(1), by_session: Mutex::default() }
    }
}

impl<T> PerSession<T> {
    /// Something the values are made of changed: prepare them again on next use.
    pub(crate) fn changed(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// The epoch now (read before preparing, so a change meanwhile prepares again).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The session's value if it was prepared at the current epoch, with that epoch.
    pub(crate) fn current(&self, session: &str) -> Option<(u64, Arc<T>)> {
        let now = self.epoch();
        let map = self.by_session.lock();
        map.get(session).filter(|(at, _)| *at == now).cloned()
    }

    /// Keep a value prepared at `epoch`.
    pub(crate) fn put(&self, session: &str, epoch: u64, value: Arc<T>) {
        let mut map = self.by_session.lock();
        map.insert(session.to_owned(), (epoch, value));
    }

    /// Forget a session (it closed).
    pub(crate) fn forget(&self, session: &str) {
        self.by_session.lock().remove(session);
    }
}
