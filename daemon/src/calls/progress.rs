//! The calls in flight on each server connection: a server's `notifications/progress` reaches
//! the session and call that asked for it as a `tools/progress` event, and a server's request
//! is matched to the call that caused it ([`Router::whose`]).

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use geminid_protocol::calls::CallProgress;
use geminid_protocol::event::EventBody;
use geminid_protocol::tools::ToolProgress;
use rmcp::model::{ProgressNotificationParam, ProgressToken, RequestId};

use crate::events::EventBus;
use crate::mcp::{Caller, Whose};

/// A call's last progress: the `seq` of the event emitted for it, and what it said.
#[derive(Debug, Default)]
pub(crate) struct Latest {
    seq: AtomicU64,
    said: Mutex<Option<CallProgress>>,
}

impl Latest {
    /// An event `seq` said this.
    pub(crate) fn note(
        &self,
        seq: u64,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) {
        let said = CallProgress { progress, total, message };
        *self.said.lock() = Some(said);
        self.seq.store(seq, Ordering::Release);
    }

    /// The `seq` of the last event, if there was one.
    pub(crate) fn seq(&self) -> Option<u64> {
        Some(self.seq.load(Ordering::Acquire)).filter(|s| *s > 0)
    }

    /// What the last one said.
    pub(crate) fn get(&self) -> Option<CallProgress> {
        self.said.lock().clone()
    }
}

/// A call in flight.
#[derive(Debug, Clone)]
struct InFlight {
    caller: Caller,
    identity: String,
    request: RequestId,
    /// Its last progress.
    last: Arc<Latest>,
}

/// Early progress notifications kept for calls still registering.
const EARLY_PROGRESS_KEPT: usize = 64;

#[derive(Debug, Default)]
struct Table {
    targets: HashMap<String, InFlight>,
    /// Notifications that came before their call was registered: the request is on its way
    /// before rmcp tells the caller its token, and a fast server answers in that gap. Claimed
    /// when the call registers; the oldest go first past [`EARLY_PROGRESS_KEPT`].
    early: VecDeque<(String, ProgressNotificationParam)>,
}

/// Where progress notifications go, by server identity and progress token (tokens are only
/// unique per connection).
#[derive(Debug)]
pub(crate) struct Router {
    events: Arc<EventBus>,
    table: Mutex<Table>,
}

fn key(identity: &str, token: &ProgressToken) -> String {
    format!("{identity}/{}", serde_json::to_string(token).unwrap_or_default())
}

/// Stops routing a call's progress when dropped.
#[derive(Debug)]
pub(crate) struct Tracked<'a> {
    router: &'a Router,
    key: String,
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        self.router.table().targets.remove(&self.key);
    }
}

impl Router {
    /// A router emitting on `events`.
    pub(crate) fn new(events: Arc<EventBus>) -> Self {
        Self { events, table: Mutex::default() }
    }

    fn table(&self) -> parking_lot::MutexGuard<'_, Table> {
        self.table.lock()
    }

    /// Route the notifications of `identity`'s connection with this token to `target` until
    /// the guard drops (and deliver those that came already).
    /// `request` is the call's JSON-RPC id on that connection (what a server request that came
    /// on its stream is associated with); `last` gets each progress event emitted for it.
    pub(crate) fn track(
        &self,
        identity: &str,
        token: &ProgressToken,
        request: &RequestId,
        target: Caller,
        last: Arc<Latest>,
    ) -> Tracked<'_> {
        let key = key(identity, token);
        let early: Vec<ProgressNotificationParam> = {
            let mut t = self.table();
            let flight = InFlight {
                caller: target.clone(),
                identity: identity.to_owned(),
                request: request.clone(),
                last: last.clone(),
            };
            t.targets.insert(key.clone(), flight);
            if t.early.iter().any(|(k, _)| *k == key) {
                let (mine, rest): (Vec<_>, Vec<_>) =
                    t.early.drain(..).partition(|(k, _)| *k == key);
                t.early = rest.into();
                mine.into_iter().map(|(_, n)| n).collect()
            } else {
                Vec::new()
            }
        };
        for n in &early {
            self.emit(&target, n, &last);
        }
        Tracked { router: self, key }
    }

    fn emit(&self, t: &Caller, n: &ProgressNotificationParam, last: &Latest) {
        let seq = self.events.emit(EventBody::ToolProgress(ToolProgress {
            session: t.session.clone(),
            call_id: t.call_id.clone(),
            name: t.name.clone(),
            progress: n.progress,
            total: n.total,
            message: n.message.clone(),
        }));
        last.note(seq, n.progress, n.total, n.message.clone());
    }
}

impl Router {
    /// The call a request from `identity`'s server belongs to: the call sent as `origin` when
    /// the transport names the stream it came on, else the one session with calls in flight
    /// on that connection (several calls of one session count as that session's; their
    /// first is named).
    pub(crate) fn whose(&self, identity: &str, origin: Option<&RequestId>) -> Whose {
        let t = self.table();
        let mut here: Vec<&InFlight> =
            t.targets.values().filter(|f| f.identity == identity).collect();
        if let Some(id) = origin {
            return match here.iter().find(|f| f.request == *id) {
                Some(f) => Whose::One(f.caller.clone()),
                None => Whose::Nobody,
            };
        }
        here.sort_by(|a, b| a.caller.session.cmp(&b.caller.session));
        let mut sessions: Vec<String> = here.iter().map(|f| f.caller.session.clone()).collect();
        sessions.dedup();
        match (sessions.len(), here.first()) {
            (0, _) | (_, None) => Whose::Nobody,
            (1, Some(f)) => Whose::One(f.caller.clone()),
            _ => Whose::Several(sessions),
        }
    }

    /// The calls in flight on `identity`'s connection (what a notification that names no
    /// request, a log message, may belong to).
    pub(crate) fn in_flight(&self, identity: &str) -> Vec<Caller> {
        let t = self.table();
        t.targets.values().filter(|f| f.identity == identity).map(|f| f.caller.clone()).collect()
    }

    /// A progress notification arrived from the server of `identity`.
    pub(crate) fn progress(&self, identity: &str, n: &ProgressNotificationParam) {
        let key = key(identity, &n.progress_token);
        let target = {
            let mut t = self.table();
            let target = t.targets.get(&key).map(|f| (f.caller.clone(), f.last.clone()));
            if target.is_none() {
                if t.early.len() >= EARLY_PROGRESS_KEPT {
                    t.early.pop_front();
                }
                t.early.push_back((key, n.clone()));
            }
            target
        };
        if let Some((t, last)) = target {
            self.emit(&t, n, &last);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Progress that arrives before its call registered is delivered once it does, and a
    /// token is only matched on the connection it came from (every connection counts its
    /// tokens from the same start).
    #[test]
    fn progress_is_routed_by_connection_and_kept_for_a_late_registration() {
        let events = Arc::new(EventBus::new(16));
        let router = Router::new(events.clone());
        let mut rx = events.subscribe();
        let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
        let note = |p: f64| {
            let mut n = ProgressNotificationParam::new(token.clone(), p);
            n.total = Some(3.0);
            n
        };
        let target =
            Caller { session: "s".into(), call_id: Some("c".into()), name: "mcp_a_t".into() };
        router.progress("server-a", &note(1.0));
        let last = Arc::new(Latest::default());
        let guard = router.track("server-a", &token, &RequestId::Number(1), target, last.clone());
        router.progress("server-b", &note(9.0));
        router.progress("server-a", &note(2.0));
        drop(guard);
        router.progress("server-a", &note(3.0));
        let mut seen = Vec::new();
        while let Ok(p) = rx.try_recv() {
            if let EventBody::ToolProgress(t) = &p.event.body {
                seen.push(t.progress);
            }
        }
        assert_eq!(
            seen,
            [1.0, 2.0],
            "the early one delivered, the other connection's and the late one not"
        );
        assert_eq!(last.seq(), Some(2), "the second event's seq");
        assert_eq!(last.get().map(|p| (p.progress, p.total)), Some((2.0, Some(3.0))));
    }
}
