//! A gateway request as the MCP conventions' SERVER span (`tools/call {tool}`, each request of
//! a multi round-trip call, `prompts/get {prompt}`, `resources/read`), its parent the trace
//! context the client's `params._meta` carried, the pipeline's spans its children; and its
//! duration in `mcp.server.operation.duration`. With telemetry off, the request as it is.

use opentelemetry::trace::FutureExt as _;
use opentelemetry::{Context, KeyValue};
use rmcp::RoleServer;
use rmcp::service::RequestContext;

use rmcp::ErrorData as McpError;

use super::mrtr::Turn;
use crate::calls::{Call, CallError, CallRequest, Outcome, Pipeline};
use crate::telemetry::{Operation, Side};

/// `calls.call(req)`, as the span of the client's request `context` for the tool it named
/// `served` in the gateway session `session`.
pub(super) async fn call(
    calls: &Pipeline,
    req: CallRequest,
    context: &RequestContext<RoleServer>,
    served: &str,
    session: &str,
) -> Result<(Call, Outcome), CallError> {
    let Some(op) = Operation::tool_call(
        Side::Server,
        served,
        || crate::telemetry::extract(Some(&context.meta.0.0), &Context::current()),
        || attributes(context, session),
    ) else {
        return calls.call(req).await;
    };
    op.tool_io("gen_ai.tool.call.arguments", || {
        serde_json::to_string(&req.args).unwrap_or_default()
    });
    let done = calls.call(req).with_context(op.context().clone()).await;
    if let Ok((_, o)) = &done
        && !o.is_error
    {
        op.tool_io("gen_ai.tool.call.result", || o.result.to_string());
    }
    op.end(failed(&done));
    done
}

/// How a call's result failed, if it did: `error.type` and the description.
fn failed(done: &Result<(Call, Outcome), CallError>) -> Option<(String, String)> {
    match done {
        Ok((_, o)) if o.is_error => Some(("tool_error".to_owned(), o.display.clone())),
        Ok(_) => None,
        // What the gateway answers with a protocol error (`Gateway::call_failed`).
        Err(e @ (CallError::ToolNotFound(_) | CallError::InvalidArguments { .. })) => {
            Some((rmcp::model::ErrorCode::INVALID_PARAMS.0.to_string(), e.to_string()))
        }
        Err(e) => Some(("tool_error".to_owned(), e.to_string())),
    }
}

/// One request of a multi round-trip client's call of the tool it named `served` (`turn`:
/// the call begun or taken up again, its answer the result or the asks it waits on) as the
/// SERVER span of `context`; the call's own task, spawned by the first request, is under the
/// first request's span (`telemetry::carried`).
pub(super) async fn round(
    turn: impl Future<Output = Result<Turn, McpError>>,
    context: &RequestContext<RoleServer>,
    served: &str,
    session: &str,
) -> Result<Turn, McpError> {
    let Some(op) = Operation::tool_call(
        Side::Server,
        served,
        || crate::telemetry::extract(Some(&context.meta.0.0), &Context::current()),
        || attributes(context, session),
    ) else {
        return turn.await;
    };
    let done = turn.with_context(op.context().clone()).await;
    op.end(match &done {
        Ok(Turn::Done(d)) => failed(d),
        Ok(Turn::Asks(_)) => None,
        Err(e) => Some((e.code.0.to_string(), e.message.to_string())),
    });
    done
}

/// A request of `method` other than a tool call (`prompts/get`, `resources/read`), `work`,
/// as the SERVER span of `context`: named with `target` when it has a low-cardinality one (a
/// prompt's name), with `own` attributes (the prompt's name, the resource's URI).
pub(super) async fn served<T>(
    method: &'static str,
    target: Option<&str>,
    own: impl FnOnce() -> Vec<KeyValue>,
    context: &RequestContext<RoleServer>,
    session: &str,
    work: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let Some(op) = Operation::begin(
        Side::Server,
        method,
        target,
        own,
        || crate::telemetry::extract(Some(&context.meta.0.0), &Context::current()),
        || attributes(context, session),
    ) else {
        return work.await;
    };
    let done = work.with_context(op.context().clone()).await;
    op.end(done.as_ref().err().map(|e| (e.code.0.to_string(), e.message.to_string())));
    done
}

/// The request's attributes: its id, the session, the protocol and the transport (`pipe` for
/// stdio and the daemon's socket, `tcp` for streamable HTTP, whose `Mcp-Session-Id` is then the
/// session's id).
fn attributes(context: &RequestContext<RoleServer>, session: &str) -> Vec<KeyValue> {
    let id = match &context.id {
        rmcp::model::NumberOrString::Number(n) => n.to_string(),
        rmcp::model::NumberOrString::String(s) => s.to_string(),
    };
    let http = super::presence::of(context);
    let (transport, session) = match &http {
        Some((_, id)) => ("tcp", id.clone()),
        None => ("pipe", session.to_owned()),
    };
    let mut out = vec![
        KeyValue::new("jsonrpc.request.id", id),
        KeyValue::new("mcp.session.id", session),
        KeyValue::new("network.transport", transport),
    ];
    if let Some(v) = context.protocol_version()
        && let Ok(serde_json::Value::String(v)) = serde_json::to_value(&v)
    {
        out.push(KeyValue::new("mcp.protocol.version", v));
    }
    out
}
