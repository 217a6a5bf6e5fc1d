//! Multi round-trip requests (SEP-2322) for a client of 2026-07-28, which a server does not send
//! requests to: what a call asks on its way (a confirmation, a server's elicitation or sampling
//! request) ends the client's `tools/call` with an `input_required` result naming each ask; the
//! call goes on in the daemon, and the client's retry (its `inputResponses` and the
//! `requestState` it was given) answers the asks and waits again, for the result or the next
//! asks. A client of the earlier eras is asked directly (`elicit`).
//!
//! `requestState` is a handle to the waiting call: random, kept by the gateway's listener (so
//! shared by every HTTP request of one `gemctl mcp serve`), and taken once. One that is
//! unknown, spent, another tool's, or older than [`ROUND_TTL`] is refused; the call it named
//! is cancelled when it lapses. The calls go with their gateway: when the listener (or a stdio
//! client) goes, [`Rounds::end`] cancels every call it started, which withdraws every ask they
//! raised, at once; nobody is left to answer them, and an answer from elsewhere would run a
//! tool for nobody. The asks keep their own deadlines: one nobody answers in time is declined
//! as for any client.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use geminid_protocol::asks::{Ask, AskKind, AskNotice};
use rmcp::model::{
    CallToolResponse, ClientCapabilities, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use crate::calls::{Call, CallError, CallRequest, Outcome};
use crate::services::Services;

/// How long a call waits for the client's retry after an `input_required` answer.
pub(super) const ROUND_TTL: Duration = Duration::from_secs(300);

/// Asks a call raises within this of one another go to the client together.
const GATHER: Duration = Duration::from_millis(20);

type Done = Result<(Call, Outcome), CallError>;

/// How a request of a multi round-trip call ends.
#[derive(Debug)]
pub(super) enum Turn {
    /// The call ended.
    Done(Box<Done>),
    /// It waits on asks: the `input_required` result naming them.
    Asks(Box<CallToolResponse>),
}

/// A call of a multi round-trip client, between its client's requests.
#[derive(Debug)]
pub(super) struct Round {
    /// The tool as the client called it.
    tool: String,
    call_id: String,
    task: JoinHandle<Done>,
    asks: mpsc::UnboundedReceiver<Ask>,
    /// The asks put to the client and not answered yet, under the key the client was given
    /// for each.
    outstanding: Vec<(String, Ask)>,
}

impl Round {
    /// Put `ask` to the client: under the key its server gave it (an input request of a
    /// server of 2026-07-28), unless another ask has that key, else under its own id. One of
    /// a kind this request did not declare is not: an elicitation is declined (a confirmation
    /// denied) at once, a sampling request left to the session's other clients.
    fn take(&mut self, gw: &Gateway, ask: Ask, kinds: &[AskKind]) {
        if self.outstanding.iter().any(|(_, a)| a.id == ask.id) {
            return;
        }
        if !kinds.contains(&ask.kind) {
            let refusal = match ask.kind {
                AskKind::Elicitation => json!({ "action": "decline" }),
                AskKind::Confirmation => json!({ "outcome": "deny",
                    "reason": "the client did not declare elicitation, so it cannot be asked \
                     (`trust: true` on the server, a policy rule, or `gemctl attach` in the \
                     workspace allows the call)" }),
                _ => return,
            };
            let _ = gw.services.asks.respond(&gw.session, &ask.id, refusal);
            return;
        }
        let given = ask.detail.get("inputKey").and_then(Value::as_str).map(str::to_owned);
        let key = given
            .filter(|k| !self.outstanding.iter().any(|(o, _)| o == k))
            .unwrap_or_else(|| ask.id.clone());
        self.outstanding.push((key, ask));
    }
}

#[derive(Debug, Default)]
struct State {
    /// The listener's stop, once it runs, and the kinds it listens for (every kind a request
    /// declared: each request of this era declares its own).
    listening: Option<(CancellationToken, Vec<AskKind>)>,
    /// Where the asks of each call in flight go, and its task's abort handle.
    calls: HashMap<String, (mpsc::UnboundedSender<Ask>, AbortHandle)>,
    /// The calls waiting for their client's retry, by `requestState`.
    parked: HashMap<String, Round>,
    /// The gateway went ([`Rounds::end`]): no call starts or parks.
    ended: bool,
}

/// The multi round-trip calls of one gateway listener (every HTTP request of one `gemctl mcp
/// serve` shares them).
#[derive(Debug)]
pub(crate) struct Rounds {
    /// Its calls get ids `gw<id>-<n>`, an id no gateway has.
    id: u64,
    next: AtomicU64,
    state: Mutex<State>,
}

impl Default for Rounds {
    fn default() -> Self {
        Self { id: super::next_gateway_id(), next: AtomicU64::new(0), state: Mutex::default() }
    }
}

impl Drop for Rounds {
    fn drop(&mut self) {
        let state = self.state.get_mut();
        if let Some((stop, _)) = &state.listening {
            stop.cancel();
        }
        // Nobody can continue them now (`end` cancels them sooner, and audited).
        for (_, abort) in state.calls.values() {
            abort.abort();
        }
    }
}

/// The kinds of asks a request's client answers by multi round-trip: none unless it speaks
/// 2026-07-28 or later.
pub(super) fn kinds(context: &RequestContext<RoleServer>) -> Vec<AskKind> {
    let modern = context.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    let caps: ClientCapabilities = context.client_capabilities().unwrap_or_default();
    if modern { super::elicit::kinds(&caps) } else { Vec::new() }
}

/// What the client's response to `ask` is as an answer to it.
fn answer(ask: &Ask, response: Value, client: &str) -> Value {
    if ask.kind != AskKind::Confirmation {
        return response;
    }
    match response.get("action").and_then(Value::as_str) {
        Some("accept") => json!({ "outcome": "once" }),
        Some("decline") => json!({ "outcome": "deny", "reason": format!("declined in {client}") }),
        _ => json!({ "outcome": "deny", "reason": format!("dismissed in {client}") }),
    }
}

fn invalid(message: String) -> McpError {
    McpError::invalid_params(message, None)
}

impl Rounds {
    fn state(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }

    fn prefix(&self) -> String {
        format!("gw{}-", self.id)
    }

    /// The gateway went (the HTTP listener's `gemctl mcp serve`, or its connection to the
    /// daemon, or a stdio client): cancel every call it started, in flight or parked, so that
    /// their asks are withdrawn now rather than at their deadlines, and take no call after.
    pub(crate) fn end(&self, services: &Services, session: &str) {
        let (calls, parked, listening) = {
            let mut state = self.state();
            state.ended = true;
            let calls = std::mem::take(&mut state.calls);
            (calls, std::mem::take(&mut state.parked), state.listening.take())
        };
        if let Some((stop, _)) = listening {
            stop.cancel();
        }
        if !calls.is_empty() {
            tracing::info!(session, calls = calls.len(), "gateway gone: its calls are cancelled");
        }
        for (call_id, (_, abort)) in calls {
            // Not (or no longer) registered: its task goes, and with it whatever it waits on.
            if !services.calls.cancel(session, &call_id) {
                abort.abort();
            }
        }
        drop(parked);
    }

    /// Listen for the asks of this listener's calls, so that they have an answerer: for
    /// `kinds` and those of earlier requests. Returns once the listener counts (a call made
    /// right after finds it).
    pub(super) async fn listen(self: &Arc<Self>, gw: &Gateway, kinds: Vec<AskKind>) {
        let (stop, kinds, old) = {
            let mut state = self.state();
            let mut all = state.listening.as_ref().map(|(_, k)| k.clone()).unwrap_or_default();
            if kinds.iter().all(|k| all.contains(k)) {
                return;
            }
            all.extend(kinds.into_iter().filter(|k| !all.contains(k)).collect::<Vec<_>>());
            let stop = CancellationToken::new();
            let old = state.listening.replace((stop.clone(), all.clone()));
            (stop, all, old)
        };
        let (rounds, asks) = (Arc::downgrade(self), gw.services.asks.clone());
        let (session, conn, prefix) = (gw.session.clone(), gw.conn, self.prefix());
        let (ready, listening_now) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let scope = crate::asks::Scope::Calls(prefix);
            let mut listening = asks.listen_to(&session, conn, &kinds, scope);
            let _ = ready.send(());
            for ask in std::mem::take(&mut listening.pending) {
                route(&rounds, ask);
            }
            let none = HashSet::new();
            loop {
                let notice = tokio::select! {
                    () = stop.cancelled() => break,
                    n = listening.notices.recv() => n,
                };
                match notice {
                    Ok(n) => {
                        if let AskNotice::Asked { ask } = &*n
                            && listening.wants(&n, &none)
                        {
                            route(&rounds, ask.clone());
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        for ask in asks.pending(&session) {
                            if listening.takes(&ask) {
                                route(&rounds, ask);
                            }
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        let _ = listening_now.await;
        // The old listener goes once the new one counts: an ask of this listener's calls is
        // never without an answerer between the two (it would be withdrawn).
        if let Some((old, _)) = old {
            old.cancel();
        }
    }

    /// A `tools/call` of a multi round-trip client: a new call (`start`), or the retry of a
    /// parked one (`requestState`), answered with its result or the asks it waits on.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn call(
        self: &Arc<Self>,
        gw: &Gateway,
        tool: &str,
        identity: Option<String>,
        request_state: Option<String>,
        responses: Option<InputResponses>,
        start: impl FnOnce(String) -> CallRequest,
        kinds: &[AskKind],
        context: &RequestContext<RoleServer>,
    ) -> Result<Turn, McpError> {
        // This request gets the call's progress under its token, and its server's log messages
        // at the level it asked, while it lasts (`notify::Relay`).
        let relay = |call_id: &str| super::notify::Relay::start(gw, context, call_id, identity);
        let relaying;
        let mut round = match &request_state {
            Some(state) => {
                let round = self.state().parked.remove(state).ok_or_else(|| {
                    invalid(
                        "requestState is unknown, spent or expired: call the tool again without it"
                            .into(),
                    )
                })?;
                if round.tool != tool {
                    let tool_was = round.tool.clone();
                    self.park(gw, state.clone(), round);
                    return Err(invalid(format!(
                        "this requestState is a call of '{tool_was}', not of '{tool}'"
                    )));
                }
                relaying = relay(&round.call_id);
                round
            }
            None => {
                let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
                let call_id = format!("{}{n}", self.prefix());
                let (tx, rx) = mpsc::unbounded_channel();
                let req = start(call_id.clone());
                let services = gw.services.clone();
                // Started and entered under the lock `end` takes: every call it misses
                // starts after it, and is refused.
                let task = {
                    let mut state = self.state();
                    if state.ended {
                        return Err(McpError::internal_error(
                            "this gateway has closed: connect again (gemctl mcp serve)",
                            None,
                        ));
                    }
                    let call = async move { services.calls.call(req).await };
                    let task = tokio::spawn(crate::telemetry::carried(call));
                    state.calls.insert(call_id.clone(), (tx, task.abort_handle()));
                    task
                };
                relaying = relay(&call_id);
                Round { tool: tool.to_owned(), call_id, task, asks: rx, outstanding: Vec::new() }
            }
        };
        let client = context.client_info().map(|i| i.name).unwrap_or_default();
        for (key, response) in responses.unwrap_or_default() {
            // An answer to nothing asked is ignored, as the protocol has it.
            let Some(i) = round.outstanding.iter().position(|(k, _)| *k == key) else { continue };
            let (key, ask) = round.outstanding.remove(i);
            let value = answer(&ask, response, &client);
            if let Err(e) = gw.services.asks.respond(&gw.session, &ask.id, value) {
                // Kept under the same state, for a retry with a better answer.
                round.outstanding.insert(i, (key.clone(), ask));
                if let Some(state) = request_state {
                    self.park(gw, state, round);
                }
                return Err(invalid(format!("inputResponses[\"{key}\"]: {e}")));
            }
        }
        let turn = self.wait(gw, round, kinds, context.ct.clone()).await;
        relaying.end().await;
        turn
    }

    /// Wait for the call's result, or asks to put to the client.
    async fn wait(
        self: &Arc<Self>,
        gw: &Gateway,
        mut round: Round,
        kinds: &[AskKind],
        ct: CancellationToken,
    ) -> Result<Turn, McpError> {
        loop {
            let still: HashSet<String> =
                gw.services.asks.pending(&gw.session).into_iter().map(|a| a.id).collect();
            round.outstanding.retain(|(_, a)| still.contains(&a.id));
            if !round.outstanding.is_empty() {
                let requests: InputRequests = round
                    .outstanding
                    .iter()
                    .filter_map(|(k, a)| Some((k.clone(), input_request(a)?)))
                    .collect();
                let state = uuid::Uuid::new_v4().simple().to_string();
                self.park(gw, state.clone(), round);
                let ask = InputRequiredResult::new(Some(requests), Some(state));
                return Ok(Turn::Asks(Box::new(CallToolResponse::InputRequired(ask))));
            }
            tokio::select! {
                done = &mut round.task => {
                    self.state().calls.remove(&round.call_id);
                    return done
                        .map(|d| Turn::Done(Box::new(d)))
                        .map_err(|e| McpError::internal_error(format!("the call failed: {e}"), None));
                }
                Some(ask) = round.asks.recv() => {
                    round.take(gw, ask, kinds);
                    tokio::time::sleep(GATHER).await;
                    while let Ok(more) = round.asks.try_recv() {
                        round.take(gw, more, kinds);
                    }
                }
                () = ct.cancelled() => {
                    gw.services.calls.cancel(&gw.session, &round.call_id);
                    self.state().calls.remove(&round.call_id);
                    return Err(McpError::internal_error("the call was cancelled", None));
                }
            }
        }
    }

    /// Keep `round` for its client's retry under `state`, until [`ROUND_TTL`] (or, once the
    /// gateway went, cancel it: no retry can come).
    fn park(self: &Arc<Self>, gw: &Gateway, state: String, round: Round) {
        let call_id = round.call_id.clone();
        {
            let mut parked = self.state();
            if parked.ended {
                drop(parked);
                if !gw.services.calls.cancel(&gw.session, &call_id) {
                    round.task.abort();
                }
                return;
            }
            parked.parked.insert(state.clone(), round);
        }
        let (rounds, services, session) =
            (Arc::downgrade(self), gw.services.clone(), gw.session.clone());
        tokio::spawn(async move {
            tokio::time::sleep(ROUND_TTL).await;
            let Some(rounds) = rounds.upgrade() else { return };
            let lapsed = rounds.state().parked.remove(&state);
            if lapsed.is_some() {
                tracing::info!(%session, call = %call_id, "gateway: no retry came; the call is cancelled");
                services.calls.cancel(&session, &call_id);
                rounds.state().calls.remove(&call_id);
            }
        });
    }
}

/// Send `ask` to its call's round.
fn route(rounds: &Weak<Rounds>, ask: Ask) {
    let Some(rounds) = rounds.upgrade() else { return };
    let Some(call) = ask.call_id.clone() else { return };
    if let Some((tx, _)) = rounds.state().calls.get(&call) {
        let _ = tx.send(ask);
    }
}

/// The request an ask is to the client.
fn input_request(ask: &Ask) -> Option<InputRequest> {
    let request = super::elicit::request(ask)?;
    serde_json::from_value(serde_json::to_value(request).ok()?).ok()
}
