//! The seats where policy, hooks and the audit log plug into the pipeline. Each is a trait; a
//! seat left empty lets everything through, so the pipeline is whole before those features
//! land, and a feature fills its seat in [`Seats`].

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use geminid_protocol::policy::{AuditConfirmation, PolicyDecision, PolicyRuleSource};
use serde_json::{Map, Value};

use super::{Call, Outcome};
use crate::asks::Confirmed;
pub use crate::catalog::{Hidden, ToolFilter};

/// Why hooks blocked a call or stopped the turn, and which hooks said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What the model reads (Gemini CLI's text).
    pub why: String,
    /// The hooks that decided it, by name (or command): for the audit log and the caller,
    /// never for the model.
    pub by: Vec<String>,
}

impl From<String> for Verdict {
    fn from(why: String) -> Self {
        Self { why, by: Vec::new() }
    }
}

impl From<&str> for Verdict {
    fn from(why: &str) -> Self {
        why.to_owned().into()
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// What a BeforeTool hook decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Before {
    /// Go on with the call as it is.
    Proceed,
    /// Go on with these arguments instead (they are validated again).
    Rewrite(Map<String, Value>),
    /// Do not call the tool; the message says why.
    Block(Verdict),
    /// Stop the agent's turn.
    Stop(Verdict),
    /// Ask the person first, with this question.
    Ask(String),
}

/// What policy decided for a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Call it.
    Allow,
    /// Refuse it; the message says which rule.
    Deny(String),
    /// Ask the person first, with this question.
    Ask(String),
}

/// What an AfterTool hook decided.
#[derive(Debug, Clone, PartialEq)]
pub enum After {
    /// Keep the result as it is.
    Keep,
    /// Hide the result from the model; the message says why.
    Block(Verdict),
    /// Stop the agent's turn.
    Stop(Verdict),
    /// Keep it, and add this text for the model.
    AddContext(String),
    /// Call this tool instead (`tailToolCallRequest`): its result replaces this one.
    Tail {
        /// The tool, by its name in the session's table.
        name: String,
        /// Its arguments.
        args: Map<String, Value>,
    },
}

/// BeforeTool hooks (`hooks/`), run before policy as in Gemini CLI.
pub trait BeforeTool: Send + Sync + Debug {
    /// Decide on a call about to be made.
    fn before_tool<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, Before>;

    /// The call waits for a confirmation (step 5): Gemini CLI's `Notification` hooks
    /// (`ToolPermission`) run meanwhile.
    fn confirming<'a>(&'a self, _call: &'a Call) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// What policy decided and why, kept on the call for the audit log.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyNote {
    /// The engine's decision (before a remembered approval or the caller's confirmation
    /// turned an ask into an allow).
    pub decision: PolicyDecision,
    /// The rule that decided it (absent: the default).
    pub rule: Option<PolicyRuleSource>,
    /// How its confirmation went, when one was needed.
    pub confirmation: Option<AuditConfirmation>,
}

/// Where a session's confirmations go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The session whose clients answer (a derived session's root).
    pub to: String,
    /// The calling session's path label.
    pub path: String,
}

/// Tool-call policy (`policy/`).
pub trait Policy: Send + Sync + Debug {
    /// Decide on a call whose arguments are valid.
    fn decide(&self, call: &Call) -> (Decision, Option<PolicyNote>);

    /// The person confirmed a call it asked about, for this long (`Once`, `Session`,
    /// `Always`); an error says why it could not be remembered (the call still goes on).
    fn remember<'a>(
        &'a self,
        _call: &'a Call,
        _confirmed: Confirmed,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// Where the session's confirmations are asked.
    fn route(&self, session: &str) -> Route {
        Route { to: session.to_owned(), path: session.to_owned() }
    }
}

/// AfterTool hooks (`hooks/`).
pub trait AfterTool: Send + Sync + Debug {
    /// Decide on a call's result.
    fn after_tool<'a>(&'a self, call: &'a Call, outcome: &'a Outcome) -> BoxFuture<'a, After>;
}

/// How a call ended, for the audit log.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// The tool answered (`is_error` when it reported a tool error).
    Answered {
        /// Whether the tool reported an error.
        is_error: bool,
    },
    /// The pipeline or the server failed it; the protocol error's name and its message.
    Failed(String),
}

/// The audit log (`policy/` keeps it): one record per call that was resolved.
pub trait Audit: Send + Sync + Debug {
    /// A call ended.
    fn record(&self, call: &Call, ended: &Ended, took: Duration);
}

/// Who sits in each seat; an empty seat lets everything through (and costs nothing: no
/// future is boxed, no clock read). Policy and hooks fill theirs as they land.
#[derive(Debug, Clone, Default)]
pub struct Seats {
    /// Step 2.
    pub before_tool: Option<Arc<dyn BeforeTool>>,
    /// Step 4.
    pub policy: Option<Arc<dyn Policy>>,
    /// Step 8.
    pub after_tool: Option<Arc<dyn AfterTool>>,
    /// Step 9.
    pub audit: Option<Arc<dyn Audit>>,
    /// Policy's static filter, applied where the catalog builds a session's tool table (and
    /// at step 1 for a call by MCP name).
    pub tool_filter: Option<Arc<dyn ToolFilter>>,
}
