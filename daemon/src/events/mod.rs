//! The daemon's event bus. Each event is serialized once and shared by every subscriber; the
//! channel is bounded, and a subscriber that falls behind by more than its capacity is told so
//! and dropped (see `rpc::events`) instead of growing memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use geminid_protocol::event::{Event, EventBody};
use serde_json::value::RawValue;
use tokio::sync::broadcast;

use crate::clock;

/// Events buffered per subscriber before it is dropped as too slow.
pub(crate) const DEFAULT_SUBSCRIBER_BUFFER: usize = 1024;

/// An event with its JSON form, built once at emit time.
#[derive(Debug)]
pub(crate) struct Published {
    /// The event.
    pub event: Event,
    /// Its serialized form.
    pub json: Box<RawValue>,
}

/// Fan-out of events to subscribers.
#[derive(Debug)]
pub(crate) struct EventBus {
    tx: broadcast::Sender<Arc<Published>>,
    seq: AtomicU64,
    capacity: usize,
}

impl EventBus {
    /// A bus whose subscribers may lag by at most `capacity` events.
    pub(crate) fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(1));
        Self { tx, seq: AtomicU64::new(0), capacity }
    }

    /// The per-subscriber buffer.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Publish an event to current subscribers; its `seq` (0: it could not be serialized and
    /// nobody got it).
    pub(crate) fn emit(&self, body: EventBody) -> u64 {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let event = Event { seq, timestamp: clock::rfc3339(clock::now_ms()), body };
        let json = match serde_json::value::to_raw_value(&event) {
            Ok(j) => j,
            Err(e) => {
                tracing::error!(kind = event.body.kind(), error = %e, "cannot serialize event");
                return 0;
            }
        };
        tracing::debug!(seq, kind = event.body.kind(), "event");
        // No receivers is fine: nobody is listening.
        let _ = self.tx.send(Arc::new(Published { event, json }));
        seq
    }

    /// A new subscription, starting with the next event.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Published>> {
        self.tx.subscribe()
    }

    /// Subscribers now.
    pub(crate) fn subscriber_count(&self) -> usize {
        self.tx.receiver_count()
    }
}
