//! A server's requests to its client, answered for the call that caused them: an elicitation
//! is asked of that session's clients (kind `elicitation`), a sampling request of those that
//! declared sampling (kind `sampling`); nobody able to answer, or nobody answering in time,
//! is the protocol's decline at once (an error for sampling, which has no decline).

#![allow(
    deprecated,
    reason = "sampling and roots are SEP-2577-deprecated; servers of the eras before 2026-07-28 use them"
)]

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use geminid_protocol::event::EventBody;
use geminid_protocol::mcp::ServerAsked;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction,
};
use serde_json::{Map, Value, json};

use super::Router;
use crate::asks::{AskError, AskKind, Asks};
use crate::events::EventBus;
use crate::mcp::{Caller, Callers, Whose};

/// The calls in flight and the people who answer for them: the daemon's [`Callers`].
#[derive(Debug, Clone)]
pub(crate) struct ServerRequests {
    router: Arc<Router>,
    asks: Arc<Asks>,
    events: Arc<EventBus>,
    deadline: Duration,
}

impl ServerRequests {
    /// Requests routed by `router`'s calls in flight, asked through `asks`, waiting up to
    /// `deadline` for an answer.
    pub(crate) fn new(
        router: Arc<Router>,
        asks: Arc<Asks>,
        events: Arc<EventBus>,
        deadline: Duration,
    ) -> Self {
        Self { router, asks, events, deadline }
    }
}

fn decline() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

/// An accepted form's content with the schema's defaults filled in for the fields the answer
/// left out (SEP-1034: a client applies the defaults a server declares).
pub(crate) fn with_defaults(schema: &Value, content: Option<Value>) -> Option<Value> {
    let defaults: Map<String, Value> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .filter_map(|(k, p)| p.get("default").map(|d| (k.clone(), d.clone())))
                .collect()
        })
        .unwrap_or_default();
    if defaults.is_empty() {
        return content;
    }
    let mut out = match content {
        Some(Value::Object(m)) => m,
        None => Map::new(),
        other => return other,
    };
    for (k, d) in defaults {
        out.entry(k).or_insert(d);
    }
    Some(Value::Object(out))
}

/// What the ask shows about an elicitation: the server, the call, and the request as the
/// server sent it (`mode`, `message`, `requestedSchema` or `url`, `elicitationId`).
fn detail(caller: &Caller, server: &str, mut request: Value) -> Value {
    // The server's key for a request it made as an input request (`mcp::INPUT_KEY`), kept
    // beside the request rather than in it.
    let meta = request.get_mut("_meta").and_then(Value::as_object_mut);
    let key = meta.and_then(|m| m.remove(crate::mcp::INPUT_KEY));
    if request.get("_meta").and_then(Value::as_object).is_some_and(|m| m.is_empty())
        && let Some(obj) = request.as_object_mut()
    {
        obj.remove("_meta");
    }
    let mut d = json!({
        "server": server,
        "name": caller.name,
        "session": caller.session,
        "request": request,
    });
    if let Some(key) = key {
        d["inputKey"] = key;
    }
    d
}

impl ServerRequests {
    fn announce(
        &self,
        kind: &'static str,
        caller: &Caller,
        server: &str,
        ask: &geminid_protocol::asks::Ask,
    ) {
        let asked = ServerAsked {
            id: ask.id.clone(),
            session: caller.session.clone(),
            call_id: caller.call_id.clone(),
            tool: caller.name.clone(),
            server: server.to_owned(),
            message: ask.title.clone(),
            deadline_ms: ask.deadline_ms,
        };
        self.events.emit(match kind {
            "sampling" => EventBody::SamplingRequested(asked),
            _ => EventBody::ElicitationRequested(asked),
        });
    }

    async fn elicitation(
        self,
        caller: Caller,
        server: String,
        params: ElicitRequestParams,
    ) -> ElicitResult {
        let request = serde_json::to_value(&params).unwrap_or(Value::Null);
        let message = request.get("message").and_then(Value::as_str).unwrap_or_default().to_owned();
        let schema = request.get("requestedSchema").cloned();
        let asked = self
            .asks
            .ask_then(
                &caller.session,
                caller.call_id.as_deref(),
                AskKind::Elicitation,
                message,
                detail(&caller, &server, request),
                self.deadline,
                |ask| self.announce("elicitation", &caller, &server, ask),
            )
            .await;
        match asked {
            Ok(answer) => match serde_json::from_value::<ElicitResult>(answer) {
                Ok(mut r) => {
                    if r.action == ElicitationAction::Accept
                        && let Some(schema) = &schema
                    {
                        r.content = with_defaults(schema, r.content.take());
                    }
                    r
                }
                Err(e) => {
                    tracing::warn!(server, error = %e, "an elicitation answer is not an ElicitResult: declined");
                    decline()
                }
            },
            Err(e) => {
                tracing::info!(server, session = %caller.session, error = %e, "elicitation declined");
                decline()
            }
        }
    }

    async fn sampling(
        self,
        caller: Caller,
        server: String,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        let request = serde_json::to_value(&params).unwrap_or(Value::Null);
        let title = format!("MCP server '{server}' asks for a model answer");
        let asked = self
            .asks
            .ask_then(
                &caller.session,
                caller.call_id.as_deref(),
                AskKind::Sampling,
                title,
                detail(&caller, &server, request),
                self.deadline,
                |ask| self.announce("sampling", &caller, &server, ask),
            )
            .await;
        let refused = |why: String| rmcp::ErrorData::new(rmcp::model::ErrorCode(-1), why, None);
        match asked {
            Ok(answer) => serde_json::from_value(answer).map_err(|e| {
                refused(format!("the client's sampling answer is not a CreateMessageResult: {e}"))
            }),
            Err(AskError::NoAnswerer(_)) => Err(refused(format!(
                "no client attached to session {} can sample (geminid never calls a model itself)",
                caller.session
            ))),
            Err(e) => Err(refused(e.to_string())),
        }
    }
}

impl Callers for ServerRequests {
    fn progress(&self, identity: &str, params: &rmcp::model::ProgressNotificationParam) {
        self.router.progress(identity, params);
    }

    fn capabilities(&self, session: &str) -> rmcp::model::ClientCapabilities {
        let mut caps = crate::mcp::connect::capabilities();
        if !self.asks.answers(session, AskKind::Elicitation) {
            caps.elicitation = None;
        }
        if !self.asks.answers(session, AskKind::Sampling) {
            caps.sampling = None;
        }
        caps
    }

    fn whose(&self, identity: &str, origin: Option<&rmcp::model::RequestId>) -> Whose {
        self.router.whose(identity, origin)
    }

    fn in_flight(&self, identity: &str) -> Vec<Caller> {
        self.router.in_flight(identity)
    }

    fn elicit(
        &self,
        caller: Caller,
        server: String,
        params: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult> {
        self.clone().elicitation(caller, server, params).boxed()
    }

    fn sample(
        &self,
        caller: Caller,
        server: String,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'static, Result<CreateMessageResult, rmcp::ErrorData>> {
        self.clone().sampling(caller, server, params).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_only_what_the_answer_left_out() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 36},
            "email": {"type": "string"},
        }});
        let got = with_defaults(&schema, Some(json!({"name": "Grace"})));
        assert_eq!(got, Some(json!({"name": "Grace", "age": 36})));
        assert_eq!(with_defaults(&schema, None), Some(json!({"name": "Ada", "age": 36})));
        let none = json!({"type": "object", "properties": {"x": {"type": "string"}}});
        assert_eq!(with_defaults(&none, None), None, "no defaults, nothing invented");
    }
}
