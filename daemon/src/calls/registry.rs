//! Every call in flight, whoever made it: `calls/list` shows them with their progress,
//! `calls/cancel` reaches any of them by its number, and `tools/cancel` those with a call id.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use geminid_protocol::calls::CallInFlight;
use tokio::sync::oneshot;

use super::progress::Latest;
use super::{Call, Origin};

/// One call in flight.
#[derive(Debug)]
struct Flight {
    session: String,
    call_id: Option<String>,
    tool: String,
    server: String,
    origin: Origin,
    started: Instant,
    progress: Arc<Latest>,
    cancel: oneshot::Sender<()>,
}

#[derive(Debug, Default)]
struct Table {
    flights: HashMap<u64, Flight>,
    /// (session, call id) → number, for the calls that have an id.
    by_call_id: HashMap<(String, String), u64>,
}

/// The calls in flight, by the daemon's number for each.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    next: AtomicU64,
    table: Mutex<Table>,
}

/// A registered call; unregistered when dropped.
#[derive(Debug)]
pub(crate) struct Registered<'a> {
    registry: &'a Registry,
    id: u64,
    /// Fires when the call is cancelled.
    pub cancelled: oneshot::Receiver<()>,
    /// Where its progress is kept.
    pub progress: Arc<Latest>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let mut t = self.registry.table();
        if let Some(f) = t.flights.remove(&self.id)
            && let Some(call_id) = f.call_id
        {
            t.by_call_id.remove(&(f.session, call_id));
        }
    }
}

fn origin_name(o: Origin) -> &'static str {
    match o {
        Origin::ToolsCall => "tools/call",
        Origin::McpCallTool => "mcp/callTool",
        Origin::Gateway => "gateway",
    }
}

impl Registered<'_> {
    /// Its number.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

impl Registry {
    fn table(&self) -> parking_lot::MutexGuard<'_, Table> {
        self.table.lock()
    }

    /// Put a call in the table. `None` when a call with its id is already in progress in the
    /// session: ids name one call at a time (a second would take the first one's
    /// `tools/cancel`, and the first one's end would unregister the second).
    pub(crate) fn register(&self, call: &Call) -> Option<Registered<'_>> {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut t = self.table();
        if let Some(call_id) = &call.call_id {
            let key = (call.session.clone(), call_id.clone());
            if t.by_call_id.contains_key(&key) {
                return None;
            }
            t.by_call_id.insert(key, id);
        }
        let (tx, rx) = oneshot::channel();
        let progress = Arc::new(Latest::default());
        let flight = Flight {
            session: call.session.clone(),
            call_id: call.call_id.clone(),
            tool: call.name.clone(),
            server: call.server.clone(),
            origin: call.origin,
            started: Instant::now(),
            progress: progress.clone(),
            cancel: tx,
        };
        t.flights.insert(id, flight);
        Some(Registered { registry: self, id, cancelled: rx, progress })
    }

    /// `tools/cancel`: whether a call with that id was running.
    pub(crate) fn cancel(&self, session: &str, call_id: &str) -> bool {
        let id = self.table().by_call_id.get(&(session.to_owned(), call_id.to_owned())).copied();
        id.is_some_and(|id| self.cancel_number(id))
    }

    /// `calls/cancel`: whether the call of that number was running.
    pub(crate) fn cancel_number(&self, id: u64) -> bool {
        let flight = {
            let mut t = self.table();
            let f = t.flights.remove(&id);
            if let Some(f) = &f
                && let Some(call_id) = &f.call_id
            {
                t.by_call_id.remove(&(f.session.clone(), call_id.clone()));
            }
            f
        };
        flight.is_some_and(|f| f.cancel.send(()).is_ok())
    }

    /// `calls/list`: the calls in flight (of one session), oldest first.
    pub(crate) fn list(&self, session: Option<&str>) -> Vec<CallInFlight> {
        let t = self.table();
        let mut out: Vec<CallInFlight> = t
            .flights
            .iter()
            .filter(|(_, f)| session.is_none_or(|s| f.session == s))
            .map(|(id, f)| CallInFlight {
                id: *id,
                session: f.session.clone(),
                call_id: f.call_id.clone(),
                tool: f.tool.clone(),
                server: f.server.clone(),
                origin: origin_name(f.origin).to_owned(),
                elapsed_ms: u64::try_from(f.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                progress: f.progress.get(),
            })
            .collect();
        out.sort_by_key(|c| c.id);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(session: &str, call_id: Option<&str>) -> Call {
        Call {
            session: session.into(),
            origin: Origin::ToolsCall,
            call_id: call_id.map(str::to_owned),
            name: "mcp_a_t".into(),
            server: "a".into(),
            tool: "t".into(),
            args: None,
            annotations: None,
            confirmed: false,
            hooks_by_client: false,
            policy: None,
            tail_of: None,
        }
    }

    #[test]
    fn an_id_names_one_call_at_a_time_and_is_free_again_when_it_ends() {
        let r = Registry::default();
        let first = r.register(&call("s", Some("c")));
        assert!(first.is_some());
        assert!(r.register(&call("s", Some("c"))).is_none(), "the id is taken while the call runs");
        assert!(r.register(&call("t", Some("c"))).is_some(), "ids are per session");
        drop(first);
        assert!(!r.cancel("s", "c"), "nothing to cancel once it ended");
        let mut again = r.register(&call("s", Some("c"))).unwrap();
        assert!(r.cancel("s", "c"));
        assert!(again.cancelled.try_recv().is_ok());
    }

    #[test]
    fn every_call_is_listed_and_cancellable_by_its_number() {
        let r = Registry::default();
        let mut anonymous = r.register(&call("s", None)).unwrap();
        let named = r.register(&call("t", Some("c"))).unwrap();
        named.progress.note(7, 2.0, Some(4.0), Some("half".into()));
        let all = r.list(None);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].call_id, None);
        assert_eq!(all[1].progress.as_ref().map(|p| (p.progress, p.total)), Some((2.0, Some(4.0))));
        assert_eq!(r.list(Some("t")).len(), 1);
        assert!(r.cancel_number(all[0].id));
        assert!(anonymous.cancelled.try_recv().is_ok());
        assert!(!r.cancel_number(all[0].id), "once");
        assert!(r.cancel_number(all[1].id));
        assert!(!r.cancel("t", "c"), "its call id went with it");
        assert!(r.list(None).is_empty());
    }
}
