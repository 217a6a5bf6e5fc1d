//! Questions to a person, through the clients attached to a session: confirm a tool call,
//! fill in an elicitation form, approve a sampling request, open a login URL.
//!
//! [`Asks::ask`] waits for the first answer from a connection that listens for that kind on
//! that session (`asks/listen`, which only a connection attached to the session may do). An
//! ask is pending until it is answered, its deadline passes, or its caller stops waiting (the
//! call is cancelled or its client went away): dropping the future cancels it, and listeners
//! are told. A client that listens again (after a reconnect) is sent every pending ask first.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use geminid_protocol::asks::{Ask, AskNotice, Settled};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

pub(crate) use answer::Confirmed;
use answer::check;
pub(crate) use answer::kind_name;
pub(crate) use geminid_protocol::asks::AskKind;

use crate::clock;
use crate::session::ConnId;

/// Notices buffered for a listener that falls behind (asks are rare).
const NOTICE_BUFFER: usize = 256;
/// Settled asks remembered, so a late answer is told what happened to its ask.
const RECENT: usize = 1024;
/// How long a pending ask waits for a client that could answer it to listen again, once none
/// does (`gemctl attach` closed; a reconnect is quicker): then it ends, not at its deadline.
const COME_BACK: Duration = Duration::from_secs(5);
/// How often a pending ask looks for someone who could answer it.
const LOOK_FOR_ANSWERER: Duration = Duration::from_millis(500);

/// Why an ask got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AskError {
    /// No client attached to the session listens for this kind.
    #[error("no client attached to this session answers {0} asks (`asks/listen`)")]
    NoAnswerer(&'static str),
    /// Every client that could answer it went while it was pending.
    #[error("the client that could answer this {0} ask went away before answering")]
    AnswererGone(&'static str),
    /// The deadline passed.
    #[error("nobody answered within {}", humantime::format_duration(*.0))]
    TimedOut(Duration),
    /// The answer does not have the shape its kind needs.
    #[error("{0}")]
    BadAnswer(String),
}

/// Why an answer was refused (`confirmation/respond`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RespondError {
    /// No such ask, pending or recently settled.
    #[error(
        "no confirmation {0} is pending (`gemctl confirm` lists this directory's session's; `asks/pending` any session's)"
    )]
    NotFound(String),
    /// The ask is another session's.
    #[error("confirmation {id} belongs to session {belongs}, not {named}")]
    OtherSession {
        /// The ask.
        id: String,
        /// Its session.
        belongs: String,
        /// The session the answer named.
        named: String,
    },
    /// It was settled already.
    #[error("confirmation {id} was already {}", match .how {
        Settled::Answered => "answered (the first answer wins)",
        Settled::Cancelled => "cancelled: its call ended",
        Settled::TimedOut => "denied: nobody answered before its deadline",
    })]
    Settled {
        /// The ask.
        id: String,
        /// How.
        how: Settled,
    },
    /// The answer's shape is wrong; the ask stays pending.
    #[error(transparent)]
    Bad(AskError),
}

#[derive(Debug)]
struct Pending {
    ask: Ask,
    answer: oneshot::Sender<Value>,
}

#[derive(Debug, Default)]
struct Inner {
    /// By number; numbers grow, so this is oldest first.
    pending: BTreeMap<u64, Pending>,
    /// Who listens, by listening stream.
    listeners: HashMap<u64, Listener>,
    next_listener: u64,
    /// The latest settled asks: (id, session, how), oldest first.
    recent: VecDeque<(String, String, Settled)>,
}

/// Which of its session's asks a listening stream answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every one (`gemctl attach`, an editor on `asks/listen`): a person is there for the
    /// whole session.
    Session,
    /// Those raised by the gateway client's own calls (ids starting with this prefix,
    /// `gw<n>-`), and those raised outside any gateway client's call (a server's request
    /// outside a call, an editor's call); never another gateway client's.
    Gateway(String),
    /// Only those raised by the calls whose ids start with this prefix.
    Calls(String),
}

/// Whether a call id is one the gateway gave a client's call (`gw{n}-{m}`).
pub(crate) fn is_gateway_call(id: &str) -> bool {
    id.strip_prefix("gw").and_then(|rest| rest.split_once('-')).is_some_and(|(n, m)| {
        !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && !m.is_empty()
            && m.bytes().all(|b| b.is_ascii_digit())
    })
}

/// One listening stream: its session, the kinds it answers, and which of the session's asks.
#[derive(Debug, Clone)]
struct Listener {
    session: String,
    kinds: Vec<AskKind>,
    scope: Scope,
}

impl Listener {
    /// Whether it answers an ask of `kind` raised by the call `call_id` of `session`.
    fn takes(&self, session: &str, kind: AskKind, call_id: Option<&str>) -> bool {
        self.session == session
            && self.kinds.contains(&kind)
            && match &self.scope {
                Scope::Session => true,
                Scope::Gateway(p) => {
                    call_id.is_none_or(|c| !is_gateway_call(c) || c.starts_with(p.as_str()))
                }
                Scope::Calls(p) => call_id.is_some_and(|c| c.starts_with(p.as_str())),
            }
    }
}

impl Inner {
    /// Whether a connection listens for `kind` on `session`, for the call `call_id`.
    fn answers(&self, session: &str, kind: AskKind, call_id: Option<&str>) -> bool {
        self.listeners.values().any(|l| l.takes(session, kind, call_id))
    }

    /// The pending asks `went` answered that nobody listening answers any more, taken out of
    /// the table (settled as cancelled), with their senders.
    fn orphaned(&mut self, went: &Listener) -> Vec<Pending> {
        let gone: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| {
                let (session, kind, call) = (&p.ask.session, p.ask.kind, p.ask.call_id.as_deref());
                went.takes(session, kind, call) && !self.answers(session, kind, call)
            })
            .map(|(n, _)| *n)
            .collect();
        let mut out = Vec::with_capacity(gone.len());
        for n in gone {
            if let Some(p) = self.pending.remove(&n) {
                self.settled(&p.ask, Settled::Cancelled);
                out.push(p);
            }
        }
        out
    }

    fn settled(&mut self, ask: &Ask, how: Settled) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((ask.id.clone(), ask.session.clone(), how));
    }
}

/// Every pending ask, and who can answer.
#[derive(Debug)]
pub(crate) struct Asks {
    inner: Mutex<Inner>,
    next: AtomicU64,
    notices: broadcast::Sender<Arc<AskNotice>>,
    /// [`COME_BACK`] (shorter in tests).
    come_back: Duration,
}

impl Default for Asks {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            next: AtomicU64::new(1),
            notices: broadcast::channel(NOTICE_BUFFER).0,
            come_back: COME_BACK,
        }
    }
}

/// A listening stream; it stops counting as an answerer when dropped.
#[derive(Debug)]
pub(crate) struct Listening<'a> {
    asks: &'a Asks,
    id: u64,
    listener: Listener,
    /// The pending asks of its kinds when it started, oldest first.
    pub pending: Vec<Ask>,
    /// New asks and settlements of every session: filter with [`Listening::wants`].
    pub notices: broadcast::Receiver<Arc<AskNotice>>,
}

impl Listening<'_> {
    /// Whether this listener is sent a notice: asks of its session and kinds, and the
    /// settlement of any ask it was sent.
    pub(crate) fn wants(
        &self,
        notice: &AskNotice,
        sent: &std::collections::HashSet<String>,
    ) -> bool {
        match notice {
            AskNotice::Asked { ask } => self.takes(ask),
            AskNotice::Settled { id, .. } => sent.contains(id),
        }
    }

    /// Whether `ask` is this listener's to answer (its session, kinds and scope).
    pub(crate) fn takes(&self, ask: &Ask) -> bool {
        self.listener.takes(&ask.session, ask.kind, ask.call_id.as_deref())
    }
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        // An ask only this gateway client could answer ends now, rather than at its
        // deadline: its asker is told nobody is left to answer (the sender dropped). A
        // person's stream (attach, an editor) may come back: its asks wait for it, and are
        // sent first when it listens again.
        let orphaned = {
            let mut inner = self.asks.inner();
            inner.listeners.remove(&self.id);
            match self.listener.scope {
                Scope::Session => Vec::new(),
                Scope::Gateway(_) | Scope::Calls(_) => inner.orphaned(&self.listener),
            }
        };
        for p in orphaned {
            tracing::info!(id = %p.ask.id, "ask withdrawn: the last client that could answer it went");
            self.asks.notify(AskNotice::Settled { id: p.ask.id, how: Settled::Cancelled });
        }
    }
}

/// Settles an ask as cancelled (or timed out) if it is still pending when its asker stops
/// waiting.
struct Asking<'a> {
    asks: &'a Asks,
    n: u64,
    how: Settled,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        let removed = {
            let mut inner = self.asks.inner();
            let removed = inner.pending.remove(&self.n);
            if let Some(p) = &removed {
                inner.settled(&p.ask, self.how);
            }
            removed
        };
        if let Some(p) = removed {
            tracing::info!(id = %p.ask.id, how = ?self.how, "ask settled without an answer");
            self.asks.notify(AskNotice::Settled { id: p.ask.id, how: self.how });
        }
    }
}

impl Asks {
    fn inner(&self) -> parking_lot::MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    fn notify(&self, notice: AskNotice) {
        // Nobody listening is fine.
        let _ = self.notices.send(Arc::new(notice));
    }

    /// Ask the session's clients, and wait for the first answer (its shape checked for the
    /// kind) until `deadline`.
    #[cfg(test)]
    pub(crate) async fn ask(
        &self,
        session: &str,
        call_id: Option<&str>,
        kind: AskKind,
        title: String,
        detail: Value,
        deadline: Duration,
    ) -> Result<Value, AskError> {
        self.ask_then(session, call_id, kind, title, detail, deadline, |_| {}).await
    }

    /// [`Asks::ask`], calling `asked` with the ask once it is pending (before listeners are
    /// told).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn ask_then(
        &self,
        session: &str,
        call_id: Option<&str>,
        kind: AskKind,
        title: String,
        detail: Value,
        deadline: Duration,
        asked: impl FnOnce(&Ask),
    ) -> Result<Value, AskError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let millis = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX);
        let ask = Ask {
            id: format!("ask-{n}"),
            session: session.to_owned(),
            call_id: call_id.map(str::to_owned),
            kind,
            title,
            detail,
            deadline_ms: clock::now_ms().saturating_add(millis),
        };
        let (tx, rx) = oneshot::channel();
        {
            let mut inner = self.inner();
            if !inner.answers(session, kind, call_id) {
                return Err(AskError::NoAnswerer(kind_name(kind)));
            }
            inner.pending.insert(n, Pending { ask: ask.clone(), answer: tx });
        }
        tracing::info!(session, id = %ask.id, kind = kind_name(kind), "asking");
        let mut asking = Asking { asks: self, n, how: Settled::Cancelled };
        asked(&ask);
        self.notify(AskNotice::Asked { ask });
        let until = tokio::time::Instant::now() + deadline;
        let mut rx = rx;
        // Since when nobody listening would be asked it (a person's stream that went: it
        // may come back, and is sent its pending asks first when it does).
        let mut alone: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                answered = &mut rx => return match answered {
                    Ok(answer) => Ok(answer),
                    // Taken out of the table unanswered: the last client that could answer
                    // it went.
                    Err(_) => Err(AskError::AnswererGone(kind_name(kind))),
                },
                () = tokio::time::sleep_until(until) => {
                    asking.how = Settled::TimedOut;
                    return Err(AskError::TimedOut(deadline));
                }
                () = tokio::time::sleep(LOOK_FOR_ANSWERER) => {
                    if self.inner().answers(session, kind, call_id) {
                        alone = None;
                    } else if alone.get_or_insert_with(tokio::time::Instant::now).elapsed()
                        >= self.come_back
                    {
                        tracing::info!(session, n = asking.n, "ask withdrawn: nobody who could answer it came back");
                        return Err(AskError::AnswererGone(kind_name(kind)));
                    }
                }
            }
        }
    }

    /// Start listening on a session for some kinds (the caller checked that the connection
    /// is attached to it).
    pub(crate) fn listen(&self, session: &str, conn: ConnId, kinds: &[AskKind]) -> Listening<'_> {
        self.listen_to(session, conn, kinds, Scope::Session)
    }

    /// [`Asks::listen`] for the asks of `scope` only (other asks do not count this stream as
    /// their answerer).
    pub(crate) fn listen_to(
        &self,
        session: &str,
        _conn: ConnId,
        kinds: &[AskKind],
        scope: Scope,
    ) -> Listening<'_> {
        let mut kinds = kinds.to_vec();
        kinds.sort_by_key(|k| kind_name(*k));
        kinds.dedup();
        // Subscribed before the pending ones are read, under the lock `ask` inserts under:
        // an ask is either pending here or arrives as a notice, never neither.
        let mut inner = self.inner();
        let notices = self.notices.subscribe();
        let listener = Listener { session: session.to_owned(), kinds, scope };
        let pending = inner
            .pending
            .values()
            .filter(|p| listener.takes(session, p.ask.kind, p.ask.call_id.as_deref()))
            .map(|p| p.ask.clone())
            .collect();
        inner.next_listener += 1;
        let id = inner.next_listener;
        inner.listeners.insert(id, listener.clone());
        drop(inner);
        Listening { asks: self, id, listener, pending, notices }
    }

    /// Answer an ask: `Ok(false)` when it is no longer pending (or never was); an answer of
    /// the wrong shape is refused and the ask stays pending.
    pub(crate) fn respond(&self, session: &str, id: &str, answer: Value) -> Result<bool, AskError> {
        let taken = {
            let mut inner = self.inner();
            let found = inner
                .pending
                .iter()
                .find(|(_, p)| p.ask.id == id && p.ask.session == session)
                .map(|(n, p)| (*n, p.ask.kind));
            let Some((n, kind)) = found else { return Ok(false) };
            check(kind, &answer)?;
            let p = inner.pending.remove(&n);
            if let Some(p) = &p {
                inner.settled(&p.ask, Settled::Answered);
            }
            p
        };
        let Some(p) = taken else { return Ok(false) };
        let accepted = p.answer.send(answer).is_ok();
        tracing::info!(session, id, "ask answered");
        self.notify(AskNotice::Settled { id: p.ask.id, how: Settled::Answered });
        Ok(accepted)
    }

    /// Answer an ask by its id alone, refusing (with why) one that is another session's than
    /// `session` (when given), no longer pending, or unknown. Returns its session.
    pub(crate) fn respond_by_id(
        &self,
        session: Option<&str>,
        id: &str,
        answer: Value,
    ) -> Result<String, RespondError> {
        let owner = {
            let inner = self.inner();
            let pending =
                inner.pending.values().find(|p| p.ask.id == id).map(|p| p.ask.session.clone());
            match pending {
                Some(owner) => owner,
                None => {
                    let recent = inner.recent.iter().rev().find(|(i, _, _)| i == id);
                    return Err(match recent {
                        Some((_, owner, _)) if session.is_some_and(|s| s != owner) => {
                            RespondError::OtherSession {
                                id: id.to_owned(),
                                belongs: owner.clone(),
                                named: session.unwrap_or_default().to_owned(),
                            }
                        }
                        Some((_, _, how)) => RespondError::Settled { id: id.to_owned(), how: *how },
                        None => RespondError::NotFound(id.to_owned()),
                    });
                }
            }
        };
        if let Some(named) = session
            && named != owner
        {
            return Err(RespondError::OtherSession {
                id: id.to_owned(),
                belongs: owner,
                named: named.to_owned(),
            });
        }
        match self.respond(&owner, id, answer) {
            Ok(true) => Ok(owner),
            // Settled between the look and the answer: say how.
            Ok(false) => {
                let inner = self.inner();
                let how = inner.recent.iter().rev().find(|(i, _, _)| i == id).map(|r| r.2);
                Err(RespondError::Settled {
                    id: id.to_owned(),
                    how: how.unwrap_or(Settled::Answered),
                })
            }
            Err(e) => Err(RespondError::Bad(e)),
        }
    }

    /// The kind of a pending ask.
    pub(crate) fn kind_of(&self, id: &str) -> Option<AskKind> {
        self.inner().pending.values().find(|p| p.ask.id == id).map(|p| p.ask.kind)
    }

    /// Whether a client attached to the session listens for asks of this kind.
    /// (A stream that answers only some calls' asks counts.)
    pub(crate) fn answers(&self, session: &str, kind: AskKind) -> bool {
        self.inner().listeners.values().any(|l| l.session == session && l.kinds.contains(&kind))
    }

    /// Whether a client attached to the session answers every ask of this kind raised in it,
    /// whoever's call raised it (`gemctl attach`, an editor): the session is interactive.
    /// A gateway client answers its own calls' asks only, so it does not count.
    pub(crate) fn answers_all(&self, session: &str, kind: AskKind) -> bool {
        self.inner()
            .listeners
            .values()
            .any(|l| l.session == session && l.kinds.contains(&kind) && l.scope == Scope::Session)
    }

    /// Whether someone listening would be asked an ask of `kind` raised by the call
    /// `call_id` of `session`.
    pub(crate) fn answers_call(&self, session: &str, kind: AskKind, call_id: Option<&str>) -> bool {
        self.inner().answers(session, kind, call_id)
    }

    /// A session's pending asks, oldest first.
    pub(crate) fn pending(&self, session: &str) -> Vec<Ask> {
        let inner = self.inner();
        inner.pending.values().filter(|p| p.ask.session == session).map(|p| p.ask.clone()).collect()
    }

    /// How many asks are pending, in every session.
    pub(crate) fn pending_count(&self) -> usize {
        self.inner().pending.len()
    }

    /// Every session's pending asks, oldest first.
    pub(crate) fn pending_all(&self) -> Vec<Ask> {
        self.inner().pending.values().map(|p| p.ask.clone()).collect()
    }
}

mod answer;
#[cfg(test)]
mod tests;
