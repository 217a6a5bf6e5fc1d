//! Accept `params` as a JSON object (what editors send) as well as `[object]` (what jsonrpsee's
//! typed clients send). The generated method handlers read positional params, so an object is
//! wrapped into a one-element array before dispatch.
//!
//! Also: jsonrpsee reads a request whose `id` is not a string, an integer or null (`1.5`,
//! `1e400`, `true`, an object) as a notification, and a notification gets no answer, so its
//! sender would wait for ever. geminid takes no notifications at all; one that names one of
//! its methods is such a request, and is answered with JSON-RPC's invalid-request error (id
//! null: there is no id to answer with).
//!
//! And shutdown: once it has begun, new work is answered `shuttingDown`; once its grace is
//! over, every call still running is answered `shuttingDown` and stopped, so no caller is
//! left with a closed connection and no answer.

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;

use geminid_protocol::error::ErrorCode;
use jsonrpsee::core::middleware::{Batch, BatchEntry, BatchEntryErr, Notification, RpcServiceT};
use jsonrpsee::types::{ErrorObject, Id, Request};
use jsonrpsee::{MethodResponse, Methods};
use serde_json::value::RawValue;

use crate::core::Core;

/// The RPC middleware every call passes through: named params made positional, requests
/// with an unusable id answered, and calls during shutdown answered.
#[derive(Clone)]
pub(crate) struct Intake<S> {
    inner: S,
    methods: Methods,
    core: Arc<Core>,
}

impl<S> std::fmt::Debug for Intake<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intake").finish_non_exhaustive()
    }
}

impl<S> Intake<S> {
    /// Wrap `inner`; `methods` are the daemon's methods (the ones it serves).
    pub(crate) fn new(inner: S, methods: Methods, core: Arc<Core>) -> Self {
        Self { inner, methods, core }
    }

    /// Whether `method` is one of the daemon's: a notification of one is a request whose
    /// id could not be read.
    fn serves(&self, method: &str) -> bool {
        self.methods.method(method).is_some()
    }
}

/// Methods still served once shutdown has begun: they start no work.
fn served_while_stopping(method: &str) -> bool {
    method.starts_with("daemon/") || UNSUBSCRIBE.contains(&method)
}

/// Answer `call`, or `shuttingDown` if the shutdown grace ends first.
async fn within_grace<F>(core: Arc<Core>, id: Id<'static>, call: F) -> MethodResponse
where
    F: Future<Output = MethodResponse>,
{
    let reason = |core: &Core| core.shutdown_reason().unwrap_or("shutdown").to_owned();
    if core.shutdown_token().is_cancelled() {
        return MethodResponse::error(
            id,
            ErrorCode::ShuttingDown.error(format!(
                "geminid is shutting down ({}) and takes no new work; retry once it is back",
                reason(&core)
            )),
        );
    }
    tokio::select! {
        biased;
        answer = call => answer,
        () = core.calls_cut().cancelled() => MethodResponse::error(
            id,
            ErrorCode::ShuttingDown.error(format!(
                "geminid is shutting down ({}): the call was still running after the {}s grace \
                 and was stopped",
                reason(&core),
                crate::core::SHUTDOWN_GRACE.as_secs()
            )),
        ),
    }
}

/// The answer to a call whose handler panicked: an internal error naming the method, and the
/// panic in the log (its message only: a handler's panic text is ours, not a secret's).
fn panicked(id: Id<'static>, method: &str, panic: &(dyn std::any::Any + Send)) -> MethodResponse {
    let what = crate::panic_text(panic);
    tracing::error!(%method, panic = %what, "a handler panicked; answered with an internal error");
    MethodResponse::error(
        id,
        ErrorObject::owned::<()>(
            jsonrpsee::types::error::INTERNAL_ERROR_CODE,
            format!(
                "internal error: geminid failed while answering {method} (a bug: the daemon's \
                 log has the details; please report it)"
            ),
            None,
        ),
    )
}

/// The error for a request whose id cannot be one.
fn unusable_id_error(method: &str) -> ErrorObject<'static> {
    ErrorObject::owned::<()>(
        jsonrpsee::types::error::INVALID_REQUEST_CODE,
        format!(
            "invalid request ({method}): an id must be a string, an integer or null; a \
             request without a usable id is not answered otherwise, and geminid takes no \
             notifications"
        ),
        None,
    )
}

/// The answer to a request whose id cannot be one.
fn unusable_id(method: &str) -> MethodResponse {
    MethodResponse::error(Id::Null, unusable_id_error(method))
}

fn wrap(params: &mut Option<Cow<'_, RawValue>>) {
    let Some(p) = params else { return };
    if p.get().trim_start().starts_with('{')
        && let Ok(raw) = RawValue::from_string(format!("[{}]", p.get()))
    {
        *params = Some(Cow::Owned(raw));
    }
}

/// The methods that open a subscription.
const SUBSCRIBE: &[&str] = &["events/subscribe", "asks/listen", "mcp/followLogs"];

/// A subscription asked for over an HTTP `POST`, which carries one answer and cannot hold it:
/// jsonrpsee answers a bare "Internal error"; say what works instead (new-user audit C10).
fn over_post(id: Id<'static>, method: &str, answer: MethodResponse) -> MethodResponse {
    let bare = answer.is_error() && answer.as_json().get().contains("\"Internal error\"");
    if !(bare && SUBSCRIBE.contains(&method)) {
        return answer;
    }
    MethodResponse::error(
        id,
        ErrorObject::owned::<()>(
            jsonrpsee::types::error::INVALID_REQUEST_CODE,
            format!(
                "{method} opens a subscription, which needs a connection that stays open: a \
                 WebSocket (upgrade at `ws://localhost/` on the socket) or `gemctl rpc`; an \
                 HTTP POST carries one answer (docs/PROTOCOL.md, Transport)"
            ),
            None,
        ),
    )
}

/// The methods that end a subscription take its id, positionally; named, it is
/// `{"subscription": id}`.
const UNSUBSCRIBE: &[&str] = &["events/unsubscribe", "mcp/unfollowLogs"];

fn normalize(method: &str, params: &mut Option<Cow<'_, RawValue>>) {
    if UNSUBSCRIBE.contains(&method)
        && let Some(p) = params
        && let Ok(serde_json::Value::Object(map)) = serde_json::from_str(p.get())
        && let Some(id) = map.get("subscription")
        && let Ok(raw) = RawValue::from_string(format!("[{id}]"))
    {
        *params = Some(Cow::Owned(raw));
        return;
    }
    wrap(params);
}

impl<S> RpcServiceT for Intake<S>
where
    S: RpcServiceT<MethodResponse = MethodResponse, NotificationResponse = MethodResponse>
        + Send
        + Sync
        + Clone
        + 'static,
{
    type MethodResponse = S::MethodResponse;
    type NotificationResponse = S::NotificationResponse;
    type BatchResponse = S::BatchResponse;

    fn call<'a>(
        &self,
        mut req: Request<'a>,
    ) -> impl Future<Output = Self::MethodResponse> + Send + 'a {
        normalize(&req.method, &mut req.params);
        let id = req.id.clone().into_owned();
        let method = req.method.clone().into_owned();
        let exempt = served_while_stopping(&req.method);
        // A synchronous handler runs inside `call`, an async one inside its future: a panic
        // in either is answered as an internal error, never a connection that goes silent.
        let inner = &self.inner;
        let call = std::panic::catch_unwind(AssertUnwindSafe(|| inner.call(req)));
        let core = self.core.clone();
        async move {
            let call = match call {
                Ok(call) => AssertUnwindSafe(call).catch_unwind(),
                Err(panic) => return panicked(id, &method, panic.as_ref()),
            };
            let answered = |answer: std::thread::Result<MethodResponse>| {
                answer.unwrap_or_else(|panic| panicked(id.clone(), &method, panic.as_ref()))
            };
            let answer = if exempt {
                answered(call.await)
            } else {
                within_grace(core, id.clone(), async { answered(call.await) }).await
            };
            over_post(id, &method, answer)
        }
    }

    fn batch<'a>(
        &self,
        mut batch: Batch<'a>,
    ) -> impl Future<Output = Self::BatchResponse> + Send + 'a {
        for entry in batch.iter_mut() {
            match entry {
                Ok(BatchEntry::Call(req)) => normalize(&req.method, &mut req.params),
                Ok(BatchEntry::Notification(n)) if self.serves(n.method_name()) => {
                    *entry = Err(BatchEntryErr::new(Id::Null, unusable_id_error(&n.method)));
                }
                Ok(BatchEntry::Notification(n)) => normalize(&n.method, &mut n.params),
                Err(_) => {}
            }
        }
        self.inner.batch(batch)
    }

    fn notification<'a>(
        &self,
        mut n: Notification<'a>,
    ) -> impl Future<Output = Self::NotificationResponse> + Send + 'a {
        let refused = self.serves(n.method_name()).then(|| unusable_id(&n.method));
        normalize(&n.method, &mut n.params);
        let inner = self.inner.clone();
        async move {
            match refused {
                Some(answer) => answer,
                None => inner.notification(n).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A method whose handler panics, before its future (`sync`) or inside it.
    #[derive(Clone)]
    struct Panics {
        sync: bool,
    }

    impl RpcServiceT for Panics {
        type MethodResponse = MethodResponse;
        type NotificationResponse = MethodResponse;
        type BatchResponse = MethodResponse;

        fn call<'a>(&self, _: Request<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
            assert!(!self.sync, "a synchronous handler's bug");
            async { panic!("an async handler's bug") }
        }

        fn batch<'a>(&self, _: Batch<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
            std::future::ready(MethodResponse::error(Id::Null, unusable_id_error("batch")))
        }

        fn notification<'a>(
            &self,
            _: Notification<'a>,
        ) -> impl Future<Output = MethodResponse> + Send + 'a {
            std::future::ready(MethodResponse::error(Id::Null, unusable_id_error("notification")))
        }
    }

    /// A handler's panic is an internal error answered to its caller (it used to end the
    /// connection's task, and the caller waited for ever).
    #[tokio::test]
    async fn a_handler_that_panics_is_answered_with_an_internal_error() -> anyhow::Result<()> {
        let (_dir, core) = crate::rpc::tests::core()?;
        let methods = crate::rpc::methods(core.clone())?;
        for sync in [true, false] {
            let intake = Intake::new(Panics { sync }, methods.clone(), core.clone());
            let answer = intake.call(Request::borrowed("session/list", None, Id::Number(7))).await;
            assert_eq!(answer.as_error_code(), Some(jsonrpsee::types::error::INTERNAL_ERROR_CODE));
            let json = answer.as_json().get();
            assert!(json.contains("\"id\":7") && json.contains("session/list"), "{json}");
        }
        Ok(())
    }

    fn wrapped(json: &str) -> Option<String> {
        let mut p = Some(Cow::Owned(RawValue::from_string(json.to_owned()).ok()?));
        wrap(&mut p);
        p.map(|p| p.get().to_owned())
    }

    #[test]
    fn objects_become_one_element_arrays() {
        assert_eq!(wrapped(r#"{"id":"x"}"#).as_deref(), Some(r#"[{"id":"x"}]"#));
        assert_eq!(wrapped(r#"[{"id":"x"}]"#).as_deref(), Some(r#"[{"id":"x"}]"#));
        assert_eq!(wrapped("3").as_deref(), Some("3"));
    }

    #[test]
    fn a_named_subscription_id_becomes_positional() {
        let norm = |method: &str, json: &str| {
            let mut p = Some(Cow::Owned(RawValue::from_string(json.to_owned()).ok()?));
            normalize(method, &mut p);
            p.map(|p| p.get().to_owned())
        };
        assert_eq!(
            norm("events/unsubscribe", r#"{"subscription":"abc"}"#).as_deref(),
            Some(r#"["abc"]"#)
        );
        assert_eq!(norm("mcp/unfollowLogs", r#"{"subscription":7}"#).as_deref(), Some("[7]"));
        assert_eq!(norm("events/unsubscribe", r#"["abc"]"#).as_deref(), Some(r#"["abc"]"#));
        assert_eq!(
            norm("session/get", r#"{"subscription":"x"}"#).as_deref(),
            Some(r#"[{"subscription":"x"}]"#)
        );
    }
}
