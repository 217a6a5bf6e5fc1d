//! Which connections the HTTP gateway keeps. Any local user can connect to its port, but only
//! the token holder may hold its connections: a connection that has not yet sent a request
//! with the token waits among the unauthenticated ([`MAX_UNAUTHENTICATED`] at once: the oldest
//! is closed to make room for a new one; each is closed [`AUTH_DEADLINE`] after it came), and
//! its first request with the token makes it the token holder's ([`MAX_CONNECTIONS`] at once,
//! a pool nothing without the token can enter). So a flood of bare connections only ever
//! evicts other bare connections, never a client with the token, and never holds more than
//! [`MAX_UNAUTHENTICATED`] descriptors.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The token holder's connections one HTTP listener serves at once.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// Connections kept at once before their first request with the token; a new one closes the
/// oldest.
pub(crate) const MAX_UNAUTHENTICATED: usize = 128;

/// How long a connection may stay without a request that carries the token.
pub(crate) const AUTH_DEADLINE: Duration = Duration::from_secs(3);

/// The connections of one listener: those waiting for the token, oldest first, and the
/// token holder's slots.
#[derive(Debug)]
pub(super) struct Admission {
    waiting: Mutex<VecDeque<(u64, CancellationToken)>>,
    next: AtomicU64,
    authed: Arc<Semaphore>,
}

/// One connection's place.
#[derive(Debug)]
pub(super) struct Place {
    id: u64,
    close: CancellationToken,
    admitted: OnceLock<OwnedSemaphorePermit>,
    admission: Arc<Admission>,
}

impl Admission {
    /// No connections yet.
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::default(),
            next: AtomicU64::new(0),
            authed: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        })
    }

    /// A connection came: it waits with the unauthenticated, the oldest of whom is closed
    /// when they are too many.
    pub(super) fn arrive(self: &Arc<Self>) -> Place {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let close = CancellationToken::new();
        let mut waiting = self.waiting.lock();
        while waiting.len() >= MAX_UNAUTHENTICATED {
            if let Some((_, oldest)) = waiting.pop_front() {
                oldest.cancel();
            }
        }
        waiting.push_back((id, close.clone()));
        Place { id, close, admitted: OnceLock::new(), admission: self.clone() }
    }

    /// Close the oldest unauthenticated connection (to free a descriptor when accepting
    /// failed); false when there is none.
    pub(super) fn shed(&self) -> bool {
        let oldest = self.waiting.lock().pop_front();
        oldest.map(|(_, close)| close.cancel()).is_some()
    }
}

impl Place {
    /// A request with the token came on this connection: from now on it is the token holder's.
    /// False when the token holder's connections are all taken (or this one was closed).
    pub(super) fn admit(&self) -> bool {
        if self.admitted.get().is_some() {
            return true;
        }
        let mut waiting = self.admission.waiting.lock();
        if self.admitted.get().is_some() {
            return true;
        }
        let Some(at) = waiting.iter().position(|(id, _)| *id == self.id) else { return false };
        let Ok(permit) = self.admission.authed.clone().try_acquire_owned() else { return false };
        waiting.remove(at);
        let _ = self.admitted.set(permit);
        true
    }

    /// Resolves when the connection must close: another took its place, or the token did not
    /// come in time. Never, once admitted.
    pub(super) async fn closed(&self) {
        tokio::select! {
            () = self.close.cancelled() => {}
            () = tokio::time::sleep(AUTH_DEADLINE) => {
                if self.admitted.get().is_some() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if self.admitted.get().is_none() {
            self.admission.waiting.lock().retain(|(id, _)| *id != self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bare_connections_evict_each_other_never_the_token_holders() {
        let admission = Admission::new();
        let holder = admission.arrive();
        assert!(holder.admit());
        let bare: Vec<Place> = (0..MAX_UNAUTHENTICATED * 3).map(|_| admission.arrive()).collect();
        assert_eq!(admission.waiting.lock().len(), MAX_UNAUTHENTICATED);
        // The holder stays; the oldest bare ones were told to close, the newest were not.
        assert!(!holder.close.is_cancelled());
        assert!(bare[0].close.is_cancelled());
        assert!(!bare[bare.len() - 1].close.is_cancelled());
        // A newcomer with the token is admitted whatever the flood.
        let late = admission.arrive();
        assert!(late.admit());
        assert!(!bare[0].admit(), "a connection told to close is not admitted");
        drop(bare);
        assert!(admission.waiting.lock().is_empty());
    }

    #[tokio::test]
    async fn the_token_holders_pool_is_bounded() {
        let admission = Admission::new();
        let held: Vec<Place> = (0..MAX_CONNECTIONS).map(|_| admission.arrive()).collect();
        assert!(held.iter().all(Place::admit));
        let one_more = admission.arrive();
        assert!(!one_more.admit());
        drop(held);
        assert!(one_more.admit());
    }
}
