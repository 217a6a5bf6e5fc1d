//! Whether an HTTP client is still there. A streamable HTTP client has no connection of its
//! own: it holds its session by its requests (each naming it in `Mcp-Session-Id`) and the
//! streams they open (the GET stream, a call's POST stream). One that crashed, was killed, or
//! closed without a DELETE leaves its session for rmcp's keep-alive (5 minutes), and its calls
//! waiting on asks nobody will answer. Here every request that names a session holds it while
//! its response is open; a session none of whose responses is open for [`GRACE`] (10 s) has gone, and
//! a call of it still waiting is cancelled as after a DELETE. A client that comes back within
//! it (its GET stream reconnecting) has not gone.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::service::RequestContext;

/// How long a session may have no open response before its client counts as gone: well past
/// the 3 s rmcp tells a client to wait before it resumes a dropped stream (`retry: 3000`).
pub(crate) const GRACE: Duration = Duration::from_secs(10);

/// How often a waiting call looks.
const LOOK: Duration = Duration::from_millis(250);

/// The HTTP sessions of one listener, and how many open responses each has.
#[derive(Debug)]
pub(crate) struct Presence {
    /// By session id: open responses, and since when none (when none).
    open: Mutex<HashMap<String, (usize, Option<Instant>)>>,
    grace: Duration,
}

impl Default for Presence {
    fn default() -> Self {
        Self::with_grace(GRACE)
    }
}

impl Presence {
    fn with_grace(grace: Duration) -> Self {
        Self { open: Mutex::default(), grace }
    }

    fn arrive(&self, session: &str) {
        let mut open = self.open.lock();
        let e = open.entry(session.to_owned()).or_insert((0, None));
        e.0 += 1;
        e.1 = None;
    }

    fn leave(&self, session: &str) {
        let mut open = self.open.lock();
        if let Some(e) = open.get_mut(session) {
            e.0 = e.0.saturating_sub(1);
            if e.0 == 0 {
                e.1 = Some(Instant::now());
            }
        }
    }

    /// Whether `session`'s client has had no connection open for [`GRACE`].
    fn gone_now(&self, session: &str) -> bool {
        let open = self.open.lock();
        match open.get(session) {
            Some((0, Some(since))) => since.elapsed() >= self.grace,
            _ => false,
        }
    }

    /// Resolves once `session`'s client has gone (it never does while one stays open).
    pub(crate) async fn gone(&self, session: &str) {
        while !self.gone_now(session) {
            tokio::time::sleep(LOOK).await;
        }
    }

    /// Forget sessions that went long ago (their ids are never reused).
    fn prune(&self) {
        const FORGET: Duration = Duration::from_secs(600);
        self.open
            .lock()
            .retain(|_, (n, since)| *n > 0 || since.is_none_or(|s| s.elapsed() < FORGET));
    }
}

/// A request's hold on its session, while its response is open.
#[derive(Debug)]
pub(crate) struct Held {
    presence: Arc<Presence>,
    session: String,
}

impl Presence {
    /// A request naming `session` arrived: it is there until the guard drops.
    pub(crate) fn hold(self: &Arc<Self>, session: &str) -> Held {
        self.prune();
        self.arrive(session);
        Held { presence: self.clone(), session: session.to_owned() }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.presence.leave(&self.session);
    }
}

/// The listener's presence and the request's session, for a request that came over HTTP.
pub(crate) fn of(context: &RequestContext<RoleServer>) -> Option<(Arc<Presence>, String)> {
    let parts = context.extensions.get::<hyper::http::request::Parts>()?;
    let session = parts.headers.get("mcp-session-id")?.to_str().ok()?.to_owned();
    let presence = parts.extensions.get::<Arc<Presence>>()?.clone();
    Some((presence, session))
}

/// Until the request of `context` is cancelled by its client, its client has gone (`client_gone`:
/// gemctl killed, its stdout closed, the relayed connection hung up), or its HTTP client has gone
/// without a word (no connection of its session open for the grace): as after a DELETE.
pub(crate) async fn cancelled(
    context: &RequestContext<RoleServer>,
    client_gone: &tokio_util::sync::CancellationToken,
    session: &str,
    call: &str,
) {
    let vanished = of(context);
    let gone = async {
        match &vanished {
            Some((presence, http)) => presence.gone(http).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = context.ct.cancelled() => {}
        () = client_gone.cancelled() => {
            tracing::info!(%session, %call, "gateway: the client went; its call is cancelled");
        }
        () = gone => {
            tracing::info!(%session, %call, "gateway: the HTTP client went without a word; its call is cancelled");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_there_while_any_of_its_responses_is_open() {
        let presence = Arc::new(Presence::with_grace(Duration::from_secs(3600)));
        let (a, b) = (presence.hold("s1"), presence.hold("s1"));
        drop(a);
        assert_eq!(presence.open.lock()["s1"], (1, None), "b is still open");
        drop(b);
        assert!(presence.open.lock()["s1"].1.is_some(), "none open: the grace runs");
        assert!(!presence.gone_now("s1"), "not before the grace");
        // Back within the grace: there again.
        let _c = presence.hold("s1");
        assert_eq!(presence.open.lock()["s1"], (1, None));
        assert!(!presence.gone_now("unknown"), "a session never seen is not gone");
    }

    #[tokio::test]
    async fn a_session_none_of_whose_responses_is_open_goes_after_the_grace() {
        let presence = Arc::new(Presence::with_grace(Duration::from_millis(20)));
        drop(presence.hold("s1"));
        tokio::time::timeout(Duration::from_secs(60), presence.gone("s1")).await.unwrap();
        assert!(presence.gone_now("s1"));
    }
}
