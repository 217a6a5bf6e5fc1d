//! Calls in flight with a call id, so that `tools/cancel` can reach them.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

/// Calls in flight with a call id, by (session, call id).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    cancels: Mutex<HashMap<(String, String), oneshot::Sender<()>>>,
}

/// A registered call; unregistered when dropped.
#[derive(Debug)]
pub(crate) struct Registered<'a> {
    registry: &'a Registry,
    key: (String, String),
    /// Fires when the call is cancelled.
    pub cancelled: oneshot::Receiver<()>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.registry.cancels().remove(&self.key);
    }
}

impl Registry {
    fn cancels(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), oneshot::Sender<()>>> {
        self.cancels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Make a call with an id cancellable. `None` when a call with that id is already in
    /// progress in the session: ids name one call at a time (a second would take the first
    /// one's `tools/cancel`, and the first one's end would unregister the second).
    pub(crate) fn register(&self, session: &str, call_id: &str) -> Option<Registered<'_>> {
        let key = (session.to_owned(), call_id.to_owned());
        let mut cancels = self.cancels();
        if cancels.contains_key(&key) {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        cancels.insert(key.clone(), tx);
        Some(Registered { registry: self, key, cancelled: rx })
    }

    /// `tools/cancel`: whether a call with that id was running.
    pub(crate) fn cancel(&self, session: &str, call_id: &str) -> bool {
        let key = (session.to_owned(), call_id.to_owned());
        let tx = self.cancels().remove(&key);
        tx.is_some_and(|tx| tx.send(()).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_names_one_call_at_a_time_and_is_free_again_when_it_ends() {
        let r = Registry::default();
        let first = r.register("s", "c");
        assert!(first.is_some());
        assert!(r.register("s", "c").is_none(), "the id is taken while the call runs");
        assert!(r.register("t", "c").is_some(), "ids are per session");
        drop(first);
        assert!(!r.cancel("s", "c"), "nothing to cancel once it ended");
        let mut again = r.register("s", "c").unwrap();
        assert!(r.cancel("s", "c"));
        assert!(again.cancelled.try_recv().is_ok());
    }
}
