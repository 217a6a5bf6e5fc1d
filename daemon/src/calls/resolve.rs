//! Step 1 of the pipeline: a call's names resolved, exactly, to one tool of the session's
//! table or one tool a server listed, with its source, schema and timeout. Nothing that is
//! not resolved here reaches policy, hooks, the audit or a server.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{CallError, CallRequest, Pipeline, Target, Via};
use crate::catalog::tools::Source;
use crate::mcp::catalog::Validation;
use crate::naming;

/// A resolved tool (step 1).
#[derive(Debug)]
pub(super) struct Resolved {
    pub(super) via: Via,
    pub(super) server_name: String,
    pub(super) tool: String,
    pub(super) name: String,
    pub(super) timeout: Duration,
    pub(super) validator: Option<Arc<Validation>>,
    /// Gemini CLI added `wait_for_previous` to its declaration.
    pub(super) offers_wait: bool,
    /// Its annotations, when it has any.
    pub(super) annotations: Option<Map<String, Value>>,
}

impl Pipeline {
    /// Whether the call's caller confirms it itself, or someone listening (its gateway
    /// client, which elicits) would be asked to: then a tool hidden only because nobody
    /// would confirm it may be called, and policy decides.
    fn can_confirm(&self, req: &CallRequest) -> bool {
        let to = match &self.seats.policy {
            Some(p) => p.route(&req.session).to,
            None => req.session.clone(),
        };
        req.confirmed
            || self.asks.answers_call(
                &to,
                crate::asks::AskKind::Confirmation,
                req.call_id.as_deref(),
            )
    }

    /// Step 1: the tool, its server and what to check its arguments against.
    pub(super) async fn resolve(&self, req: &CallRequest) -> Result<Resolved, CallError> {
        match &req.target {
            Target::Tool(name) => {
                let mut st = self.catalog.session_tools(&req.session, false).await?;
                if st.pending && st.get(name).is_none() {
                    // Not there yet: wait for the server that would have it, then look again.
                    let _span = crate::telemetry::child("server_start", || {
                        vec![opentelemetry::KeyValue::new("gen_ai.tool.name", name.clone())]
                    });
                    self.mcp.lifecycle().settle_for_tool(&req.session, name).await;
                    st = self.catalog.tools_now(&req.session)?;
                }
                let t = match (st.get(name), st.hidden.get(name)) {
                    (Some(t), _) => t,
                    // The person calling is there to confirm it, or someone listening would be
                    // asked: policy decides again.
                    (None, Some((h, t))) if h.by_default && self.can_confirm(req) => t,
                    (None, Some((h, _))) => return Err(hidden(&h.why)),
                    (None, None) => {
                        if let Some(why) = self.mcp.status().held_in_session(&req.session, name) {
                            return Err(CallError::Held(why));
                        }
                        let why = self.mcp.status().explain_missing_tool(&req.session, name);
                        // Hidden ones too: a person may call those policy only asks about.
                        let names = st
                            .tools
                            .iter()
                            .chain(st.hidden.values().map(|(_, t)| t))
                            .map(|t| (t.fqn.as_str(), t.tool().name.as_str()));
                        let near = geminid_protocol::suggest::tool(name, names);
                        return Err(CallError::missing(why, name, near));
                    }
                };
                let tool = t.tool();
                let (via, offers_wait) = match &t.source {
                    Source::Mcp { server, .. } => (
                        Via::Mcp(server.clone()),
                        naming::offers_wait_for_previous(tool.input_schema()),
                    ),
                    // Declared as it is: `wait_for_previous` only where Gemini CLI added it.
                    Source::Discovered { discovery, .. } => (
                        Via::Discovered(discovery.clone()),
                        tool.input_schema().is_some_and(Value::is_object)
                            && naming::offers_wait_for_previous(tool.input_schema()),
                    ),
                };
                Ok(Resolved {
                    via,
                    server_name: t.server_name.clone(),
                    tool: tool.name.clone(),
                    name: name.clone(),
                    timeout: t.timeout,
                    validator: Some(tool.validator.clone()),
                    offers_wait,
                    annotations: annotations_of(&tool.raw),
                })
            }
            Target::Mcp { server, tool } => {
                self.catalog.ensure_servers(&req.session)?;
                self.mcp.lifecycle().settle_server(&req.session, server).await;
                // Both names exactly as listed, or no call: policy, hooks and the audit see
                // the server's entry and the tool the server listed, never a near miss that a
                // lenient server would take for it.
                let found = self.mcp.find(Some(&req.session), server)?;
                let catalog = found.catalog();
                let Some(listed) = catalog.tool(tool) else {
                    // A server that is not connected has listed nothing: its state is why.
                    if let Some(e) = crate::mcp::request::not_connected(&found) {
                        return Err(e.into());
                    }
                    if let Some(why) = found.held_tool(tool) {
                        return Err(CallError::Held(why));
                    }
                    return Err(CallError::ToolNotFound(unlisted(server, tool, &catalog)));
                };
                let (validator, annotations) =
                    (Some(listed.validator.clone()), annotations_of(&listed.raw));
                if let Some(h) =
                    self.catalog.hides(&req.session, server, tool, annotations.as_ref())
                    && !(h.by_default && self.can_confirm(req))
                {
                    return Err(hidden(&h.why));
                }
                let timeout = self.mcp.timeout_for(&req.session, &found);
                Ok(Resolved {
                    name: naming::fqn(server, tool),
                    via: Via::Mcp(found),
                    server_name: server.clone(),
                    tool: tool.clone(),
                    timeout,
                    validator,
                    offers_wait: false,
                    annotations,
                })
            }
        }
    }
}

/// Why `mcp/callTool` found no tool `tool` on `server`: the server did not list it (a near
/// miss by case or spaces is named, never called).
fn unlisted(server: &str, tool: &str, catalog: &crate::mcp::catalog::Catalog) -> String {
    match geminid_protocol::suggest::closest(tool, catalog.tools.iter().map(|t| t.name.as_str())) {
        Some(near) => format!(
            "MCP server '{server}' lists no tool named '{tool}' (names are exact: did you mean \
             '{}'?)",
            near
        ),
        None => format!(
            "MCP server '{server}' lists no tool named '{tool}' (`gemctl mcp tools {server}` \
             lists them)"
        ),
    }
}

/// A tool's annotations in its listing, when it has any.
fn annotations_of(raw: &Value) -> Option<Map<String, Value>> {
    raw.get("annotations").and_then(Value::as_object).filter(|m| !m.is_empty()).cloned()
}

/// A call to a tool policy hides: Gemini CLI's text for a call policy denies, then why (the
/// seat writes a rule's file from `~`).
fn hidden(why: &str) -> CallError {
    CallError::PolicyDenied(format!(
        "Tool execution denied by policy. (geminid: the tool is {why})"
    ))
}
