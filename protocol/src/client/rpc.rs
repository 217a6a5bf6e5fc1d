//! The typed client: JSON-RPC 2.0 over the WebSocket halves of one connection.
//!
//! jsonrpsee's async client arms a `futures-timer` delay for every request, and that crate
//! wakes its own helper thread when a delay is created and again when it is dropped: two
//! cross-thread wake-ups per call, 20–25 µs of a ~100 µs round trip on a small VM (measured,
//! see BENCHMARKS.md). This client keeps jsonrpsee's wire types, error type and
//! [`ClientT`] trait (so every generated `*ApiClient` method works on it) and does the rest
//! with fewer hand-offs: the caller writes its request itself, one reader task routes answers
//! back, and timeouts use the runtime's own timer.
//!
//! jsonrpsee's `Subscription` cannot be built outside that crate, so the two subscriptions of
//! the protocol are inherent methods here returning this module's [`Subscription`].

use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Poll;
use std::time::Duration;

use jsonrpsee::core::client::{
    BatchResponse, ClientT, Error, ReceivedMessage, TransportReceiverT, TransportSenderT,
};
use jsonrpsee::core::params::BatchRequestBuilder;
use jsonrpsee::core::traits::ToRpcParams;
use jsonrpsee::types::error::OVERSIZED_REQUEST_CODE as REQUEST_TOO_LARGE;
use jsonrpsee::types::{ErrorObject, Id, Notification, Request};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use super::{RawReceiver, RawSender};
use crate::asks::{
    AskNotice, AsksListenParams, AsksPendingParams, AsksPendingResult, AsksRespondParams,
    AsksRespondResult,
};
use crate::event::Event;
use crate::event::EventsSubscribeParams;
use crate::mcp::{LogLine, ServerParams};

/// What the reader hands a waiting call: the raw `result`, or the error.
type Answer = Result<Box<RawValue>, Error>;
/// One notification of a subscription: its raw `result`, or the error that ended it.
type Item = Result<Box<RawValue>, Error>;

/// Someone waiting for the answer to a request id.
enum Waiter {
    Call(oneshot::Sender<Answer>),
    /// A subscribe call: the reader registers the subscription before it reads the next
    /// message, so no notification can arrive before there is somewhere to put it.
    Subscribe {
        unsubscribe: &'static str,
        tx: oneshot::Sender<Result<Registered, Error>>,
    },
}

/// A subscription as the reader registered it.
struct Registered {
    key: String,
    rx: mpsc::Receiver<Item>,
    lagged: Arc<AtomicBool>,
}

struct Slot {
    tx: mpsc::Sender<Item>,
    lagged: Arc<AtomicBool>,
    unsubscribe: &'static str,
}

#[derive(Default)]
struct Routes {
    calls: HashMap<u64, Waiter>,
    subscriptions: HashMap<String, Slot>,
    /// Set once the connection has ended; no new request is registered after that.
    closed: Option<String>,
}

struct Shared {
    sender: Arc<tokio::sync::Mutex<RawSender>>,
    routes: Mutex<Routes>,
    next_id: AtomicU64,
    request_timeout: Duration,
    subscription_buffer: usize,
    /// The daemon's largest message (from `daemon/hello`); 0 until known.
    peer_limit: AtomicU32,
}

impl Shared {
    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn disconnected(reason: &str) -> Error {
        Error::RestartNeeded(Arc::new(Error::Transport(reason.to_owned().into())))
    }

    /// Register `waiter` under a fresh id, unless the connection has ended.
    fn register(&self, waiter: Waiter) -> Result<u64, Error> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut routes = self.routes();
        if let Some(reason) = &routes.closed {
            return Err(Self::disconnected(reason));
        }
        routes.calls.insert(id, waiter);
        Ok(id)
    }

    /// Refuse a request the daemon could not read: it would be answered with id null.
    fn check_size(&self, text: &str) -> Result<(), Error> {
        let limit = self.peer_limit.load(Ordering::Relaxed);
        if limit == 0 || text.len() <= limit as usize {
            return Ok(());
        }
        Err(Error::Call(ErrorObject::owned::<()>(
            REQUEST_TOO_LARGE,
            format!(
                "the request is {} bytes, over the daemon's limit of {limit} bytes (its \
                 --max-message-size); it was not sent",
                text.len()
            ),
            None,
        )))
    }

    /// Write one message. The caller writes it itself; if the socket cannot take it at once,
    /// the rest of the write moves to a task, so a caller that gives up never leaves half a
    /// frame on the connection.
    async fn send(&self, text: String) -> Result<(), Error> {
        let mut sender = self.sender.clone().lock_owned().await;
        let mut write: Pin<Box<dyn Future<Output = _> + Send>> =
            Box::pin(async move { sender.send(text).await });
        let first = std::future::poll_fn(|cx| match write.as_mut().poll(cx) {
            Poll::Ready(r) => Poll::Ready(Some(r)),
            Poll::Pending => Poll::Ready(None),
        })
        .await;
        let result = match first {
            Some(r) => r,
            None => tokio::spawn(write).await.map_err(|e| Error::Transport(e.into()))?,
        };
        result.map_err(|e| Error::Transport(e.into()))
    }

    /// Call `method` and return its raw result.
    async fn call(&self, method: &str, params: Option<Box<RawValue>>) -> Answer {
        let (tx, rx) = oneshot::channel();
        self.exchange(method, params.as_deref(), Waiter::Call(tx), rx).await
    }

    /// Send a request whose answer `waiter` takes, and wait for what it hands to `rx`, within
    /// the request timeout.
    async fn exchange<T>(
        &self,
        method: &str,
        params: Option<&RawValue>,
        waiter: Waiter,
        rx: oneshot::Receiver<Result<T, Error>>,
    ) -> Result<T, Error> {
        let id = self.register(waiter)?;
        let _route = Registration { shared: self, id };
        let text = serde_json::to_string(&Request::borrowed(method, params, Id::Number(id)))?;
        self.check_size(&text)?;
        let exchange = async {
            self.send(text).await?;
            rx.await.map_err(|_| self.ended())?
        };
        tokio::time::timeout(self.request_timeout, exchange)
            .await
            .unwrap_or(Err(Error::RequestTimeout))
    }

    /// The error for a call the connection's end left unanswered.
    fn ended(&self) -> Error {
        Self::disconnected(self.routes().closed.as_deref().unwrap_or("the connection closed"))
    }

    /// Send an unsubscribe call without waiting for its answer (the reader drops answers
    /// nobody waits for).
    fn unsubscribe_later(self: Arc<Self>, method: &'static str, key: String) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let params = format!("[{key}]");
            if let Ok(params) = RawValue::from_string(params)
                && let Ok(text) =
                    serde_json::to_string(&Request::borrowed(method, Some(&params), Id::Number(id)))
            {
                let _ = self.send(text).await;
            }
        });
    }
}

/// Removes a call's route if its caller stops waiting (timeout, or the future is dropped).
struct Registration<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.shared.routes().calls.remove(&self.id);
    }
}

/// A connection to the daemon with typed calls: the generated `*ApiClient` traits
/// (`client.status()`, `client.tools_call(..)`, ...) and [`Client::subscribe_events`],
/// [`Client::mcp_follow_logs`] and [`Client::asks_listen`]. Calls may run concurrently. Dropping it closes the
/// connection.
pub struct Client {
    shared: Arc<Shared>,
    reader: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("connected", &self.is_connected()).finish_non_exhaustive()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Client {
    /// Run the protocol over an upgraded connection. Must be called within a tokio runtime.
    pub(crate) fn new(
        sender: RawSender,
        receiver: RawReceiver,
        request_timeout: Duration,
        subscription_buffer: usize,
    ) -> Self {
        let shared = Arc::new(Shared {
            sender: Arc::new(tokio::sync::Mutex::new(sender)),
            routes: Mutex::default(),
            next_id: AtomicU64::new(1),
            request_timeout,
            subscription_buffer: subscription_buffer.max(1),
            peer_limit: AtomicU32::new(0),
        });
        let reader = tokio::spawn(read(receiver, Arc::downgrade(&shared)));
        Self { shared, reader }
    }

    /// Tell the client the daemon's message limit (from `daemon/hello`): larger requests then
    /// fail at once, unsent.
    pub fn set_peer_limit(&self, max_message_size: u32) {
        self.shared.peer_limit.store(max_message_size, Ordering::Relaxed);
    }

    /// Whether the connection is still up.
    pub fn is_connected(&self) -> bool {
        self.shared.routes().closed.is_none()
    }

    async fn subscribe<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl ToRpcParams,
        unsubscribe: &'static str,
    ) -> Result<Subscription<T>, Error> {
        let params = params.to_rpc_params()?;
        let (tx, rx) = oneshot::channel();
        let waiter = Waiter::Subscribe { unsubscribe, tx };
        let registered = self.shared.exchange(method, params.as_deref(), waiter, rx).await?;
        Ok(Subscription {
            shared: Arc::downgrade(&self.shared),
            key: registered.key,
            rx: registered.rx,
            lagged: registered.lagged,
            unsubscribe,
            done: false,
            marker: PhantomData,
        })
    }

    /// `events/subscribe`: stream events (see [`crate::api::EventsApiServer`]).
    pub async fn subscribe_events(
        &self,
        params: Option<EventsSubscribeParams>,
    ) -> Result<Subscription<Event>, Error> {
        let mut p = jsonrpsee::core::params::ArrayParams::new();
        p.insert(params)?;
        self.subscribe("events/subscribe", p, "events/unsubscribe").await
    }

    /// `mcp/followLogs`: stream a server's log lines.
    pub async fn mcp_follow_logs(
        &self,
        params: ServerParams,
    ) -> Result<Subscription<LogLine>, Error> {
        let mut p = jsonrpsee::core::params::ArrayParams::new();
        p.insert(params)?;
        self.subscribe("mcp/followLogs", p, "mcp/unfollowLogs").await
    }

    /// `asks/listen`: answer a session's asks of some kinds (see
    /// [`crate::api::AsksApiServer`]).
    pub async fn asks_listen(
        &self,
        params: AsksListenParams,
    ) -> Result<Subscription<AskNotice>, Error> {
        let mut p = jsonrpsee::core::params::ArrayParams::new();
        p.insert(params)?;
        self.subscribe("asks/listen", p, "asks/unlisten").await
    }

    /// `asks/respond`: answer one of a session's asks (the generated `AsksApiClient` needs a
    /// subscription client; this is the same call).
    pub async fn asks_respond(
        &self,
        params: AsksRespondParams,
    ) -> Result<AsksRespondResult, Error> {
        let mut p = jsonrpsee::core::params::ArrayParams::new();
        p.insert(params)?;
        ClientT::request(self, "asks/respond", p).await
    }

    /// `asks/pending`: a session's pending asks.
    pub async fn asks_pending(
        &self,
        params: AsksPendingParams,
    ) -> Result<AsksPendingResult, Error> {
        let mut p = jsonrpsee::core::params::ArrayParams::new();
        p.insert(params)?;
        ClientT::request(self, "asks/pending", p).await
    }
}

impl ClientT for Client {
    async fn notification<Params>(&self, method: &str, params: Params) -> Result<(), Error>
    where
        Params: ToRpcParams + Send,
    {
        let params = params.to_rpc_params()?;
        if let Some(reason) = &self.shared.routes().closed {
            return Err(Shared::disconnected(reason));
        }
        let text = serde_json::to_string(&Notification::new(method.into(), params))?;
        self.shared.send(text).await
    }

    async fn request<R, Params>(&self, method: &str, params: Params) -> Result<R, Error>
    where
        R: DeserializeOwned,
        Params: ToRpcParams + Send,
    {
        let params = params.to_rpc_params()?;
        let raw = self.shared.call(method, params).await?;
        Ok(serde_json::from_str(raw.get())?)
    }

    async fn batch_request<'a, R>(
        &self,
        batch: BatchRequestBuilder<'a>,
    ) -> Result<BatchResponse<'a, R>, Error>
    where
        R: DeserializeOwned + std::fmt::Debug + 'a,
    {
        let calls = batch.build()?;
        let mut waiting = Vec::with_capacity(calls.len());
        let mut routes = Vec::with_capacity(calls.len());
        let mut requests = Vec::with_capacity(calls.len());
        for (method, params) in &calls {
            let (tx, rx) = oneshot::channel();
            let id = self.shared.register(Waiter::Call(tx))?;
            routes.push(Registration { shared: &self.shared, id });
            waiting.push(rx);
            requests.push(Request::borrowed(method, params.as_deref(), Id::Number(id)));
        }
        let text = serde_json::to_string(&requests)?;
        self.shared.check_size(&text)?;
        let exchange = async {
            self.shared.send(text).await?;
            Ok::<_, Error>(join_all(waiting).await)
        };
        let answers = tokio::time::timeout(self.shared.request_timeout, exchange)
            .await
            .unwrap_or(Err(Error::RequestTimeout))?;
        drop(routes);
        let (mut ok, mut failed) = (0, 0);
        let mut entries = Vec::with_capacity(answers.len());
        for answer in answers {
            match answer.map_err(|_| self.shared.ended())? {
                Ok(raw) => {
                    ok += 1;
                    entries.push(Ok(serde_json::from_str(raw.get())?));
                }
                Err(Error::Call(e)) => {
                    failed += 1;
                    entries.push(Err(e));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(BatchResponse::new(ok, entries, failed))
    }
}

/// Await every receiver in order.
async fn join_all<T>(
    receivers: Vec<oneshot::Receiver<T>>,
) -> Vec<Result<T, oneshot::error::RecvError>> {
    let mut out = Vec::with_capacity(receivers.len());
    for rx in receivers {
        out.push(rx.await);
    }
    out
}

/// The notifications of one subscription, in order. Ends (`None`) when the subscription or
/// the connection ends; dropping it unsubscribes.
pub struct Subscription<T> {
    shared: Weak<Shared>,
    key: String,
    rx: mpsc::Receiver<Item>,
    lagged: Arc<AtomicBool>,
    unsubscribe: &'static str,
    done: bool,
    marker: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Subscription<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").field("id", &self.key).finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned> Subscription<T> {
    /// The next notification; `None` once the subscription has ended.
    pub async fn next(&mut self) -> Option<Result<T, Error>> {
        if self.done {
            return None;
        }
        match self.rx.recv().await {
            Some(Ok(raw)) => Some(serde_json::from_str(raw.get()).map_err(Error::ParseError)),
            Some(Err(e)) => {
                self.done = true;
                Some(Err(e))
            }
            None => {
                self.done = true;
                self.lagged.load(Ordering::Acquire).then(|| {
                    Err(Error::Custom(format!(
                        "subscription {} dropped: this client fell {} notifications behind",
                        self.key,
                        self.rx.max_capacity()
                    )))
                })
            }
        }
    }

    /// End the subscription and wait for the daemon to confirm it.
    pub async fn unsubscribe(mut self) -> Result<(), Error> {
        self.done = true;
        let Some(shared) = self.shared.upgrade() else { return Ok(()) };
        shared.routes().subscriptions.remove(&self.key);
        let params = RawValue::from_string(format!("[{}]", self.key))?;
        shared.call(self.unsubscribe, Some(params)).await.map(drop)
    }
}

impl<T> Drop for Subscription<T> {
    fn drop(&mut self) {
        // A subscription that ended (unsubscribed, lagged, errored, disconnected) has no
        // route left; only a live one is removed here and unsubscribed.
        let Some(shared) = self.shared.upgrade() else { return };
        let removed = shared.routes().subscriptions.remove(&self.key).is_some();
        if removed && !self.done {
            shared.unsubscribe_later(self.unsubscribe, std::mem::take(&mut self.key));
        }
    }
}

/// The parts of an incoming message this client looks at.
#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<ErrorObject<'a>>,
    #[serde(default, borrow)]
    params: Option<SubscriptionParams<'a>>,
}

#[derive(Deserialize)]
struct SubscriptionParams<'a> {
    #[serde(borrow)]
    subscription: &'a RawValue,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<ErrorObject<'a>>,
}

/// `"result": null` is a result (unlike a missing `result`).
fn present<'de, D>(d: D) -> Result<Option<&'de RawValue>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    <&RawValue>::deserialize(d).map(Some)
}

/// The reader task: route every answer and notification until the connection ends.
async fn read(mut receiver: RawReceiver, shared: Weak<Shared>) {
    let reason = loop {
        let text = match receiver.receive().await {
            Ok(ReceivedMessage::Text(t)) => t,
            Ok(ReceivedMessage::Bytes(b)) => match String::from_utf8(b) {
                Ok(t) => t,
                Err(_) => continue,
            },
            Ok(ReceivedMessage::Pong) => continue,
            Err(e) => break format!("the connection to geminid ended: {e}"),
        };
        let Some(shared) = shared.upgrade() else { return };
        let ended = if text.trim_start().starts_with('[') {
            // Anything that is not JSON-RPC has nothing to route (the daemon never sends it).
            serde_json::from_str::<Vec<&RawValue>>(&text)
                .map(|batch| batch.iter().find_map(|m| route(&shared, m.get())))
                .unwrap_or_default()
        } else {
            route(&shared, &text)
        };
        if let Some(reason) = ended {
            break reason;
        }
    };
    if let Some(shared) = shared.upgrade() {
        let mut routes = shared.routes();
        routes.closed = Some(reason.clone());
        // Dropping the waiters' senders wakes them with "disconnected"; dropping the
        // subscriptions' senders ends their streams.
        routes.calls.clear();
        routes.subscriptions.clear();
    }
}

/// An error the daemon answered with id null: it could not read the request it answers (too
/// large, or not JSON). With one call waiting, that call is the one; with several, nobody can
/// know whose it was, and the connection ends so that none of them waits for ever.
fn unattributed(shared: &Arc<Shared>, error: &ErrorObject<'_>) -> Option<String> {
    let message = if error.code() == REQUEST_TOO_LARGE {
        let limit = error.data().map(|d| format!(" ({})", d.get().trim_matches('"')));
        format!(
            "geminid could not read a request: it is over the daemon's --max-message-size{}",
            limit.unwrap_or_default()
        )
    } else {
        format!("geminid could not read a request: {}", error.message())
    };
    let mut routes = shared.routes();
    if routes.calls.len() == 1
        && let Some(id) = routes.calls.keys().next().copied()
        && let Some(Waiter::Call(tx)) = routes.calls.remove(&id)
    {
        let _ = tx.send(Err(Error::Call(ErrorObject::owned::<()>(error.code(), message, None))));
        return None;
    }
    Some(message)
}

/// Route one message; `Some(reason)` when the connection must end.
fn route(shared: &Arc<Shared>, text: &str) -> Option<String> {
    let Ok(msg) = serde_json::from_str::<Incoming<'_>>(text) else { return None };
    // `"id": null` reads as no id; an error without an id is the daemon's answer to a
    // request it could not read.
    if msg.id.is_none()
        && msg.params.is_none()
        && let Some(e) = &msg.error
    {
        return unattributed(shared, e);
    }
    if let Some(id) = msg.id {
        let Ok(id) = serde_json::from_str::<u64>(id.get()) else { return None };
        let waiter = shared.routes().calls.remove(&id)?;
        let answer: Answer = match (msg.result, msg.error) {
            (_, Some(e)) => Err(Error::Call(e.into_owned())),
            (Some(r), None) => Ok(r.to_owned()),
            (None, None) => Err(Error::Custom("an answer with neither result nor error".into())),
        };
        match waiter {
            Waiter::Call(tx) => {
                let _ = tx.send(answer);
            }
            Waiter::Subscribe { unsubscribe, tx } => {
                let registered = answer.map(|raw| {
                    let key = raw.get().to_owned();
                    let (stx, rx) = mpsc::channel(shared.subscription_buffer);
                    let lagged = Arc::new(AtomicBool::new(false));
                    let slot = Slot { tx: stx, lagged: lagged.clone(), unsubscribe };
                    shared.routes().subscriptions.insert(key.clone(), slot);
                    Registered { key, rx, lagged }
                });
                if let Err(Ok(gone)) = tx.send(registered) {
                    // The caller stopped waiting: end the subscription it would have had.
                    shared.routes().subscriptions.remove(&gone.key);
                    shared.clone().unsubscribe_later(unsubscribe, gone.key);
                }
            }
        }
        return None;
    }
    let p = msg.params?;
    let key = p.subscription.get();
    let mut routes = shared.routes();
    let slot = routes.subscriptions.get(key)?;
    let item = match (p.result, p.error) {
        (_, Some(e)) => Err(Error::Call(e.into_owned())),
        (Some(r), None) => Ok(r.to_owned()),
        (None, None) => return None,
    };
    let ended = item.is_err();
    match slot.tx.try_send(item) {
        Ok(()) if !ended => {}
        Ok(()) => {
            routes.subscriptions.remove(key);
        }
        Err(mpsc::error::TrySendError::Closed(_)) => {
            routes.subscriptions.remove(key);
        }
        Err(mpsc::error::TrySendError::Full(_)) => {
            // Never let one slow consumer stall every other answer on this connection.
            slot.lagged.store(true, Ordering::Release);
            let unsubscribe = slot.unsubscribe;
            routes.subscriptions.remove(key);
            drop(routes);
            shared.clone().unsubscribe_later(unsubscribe, key.to_owned());
        }
    }
    None
}
