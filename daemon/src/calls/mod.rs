//! The call pipeline: every tool call goes through [`Pipeline::call`], whoever makes it
//! (`tools/call`, `mcp/callTool`; later the gateway, custom tools, tail calls and derived
//! sessions), so that a rule added to a step sees every call.
//!
//! ```text
//! 1 resolve    the tool, its source, its schema, the session's timeout
//! 2 BeforeTool hooks (seat)          → proceed | rewritten arguments | block | stop | ask
//! 3 validate   against the input schema (again after a rewrite)
//! 4 policy (seat)                    → allow | deny | ask
//! 5 ask        a confirmation to the session's clients (asks/)
//! 6 dispatch   to the tool's source (an MCP server, a custom tool's call command),
//!              cancellable by call id, with progress
//! 7 convert    to Gemini parts and functionResponse (the raw MCP result is kept)
//! 8 AfterTool hooks (seat)           → keep | block | additional context
//! 9 audit (seat) one record per resolved call, however it ended
//! ```
//!
//! Each step is one method, in that order: below, except steps 4 and 5 (policy and the
//! confirmation), in `ask.rs`. An empty seat ([`seats`]) lets everything through.

mod ask;
mod audited;
pub(crate) mod convert;
pub(crate) mod error;
pub(crate) mod progress;
pub(crate) mod registry;
pub(crate) mod requests;
mod resolve;

use resolve::Resolved;
pub(crate) mod seats;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tracing::Instrument;

pub(crate) use self::error::CallError;
pub(crate) use self::progress::Router;
pub(crate) use self::requests::ServerRequests;
pub(crate) use self::seats::{After, Before, Decision, Ended, PolicyNote, Route, Seats};

use crate::asks::Asks;
use crate::catalog::Catalog;
use crate::discovered::Discovery;
use crate::mcp::Supervisor;
use crate::mcp::server::Server;
use crate::naming;

/// Who made a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    /// `tools/call`: a tool of the session's table, by its Gemini name.
    #[default]
    ToolsCall,
    /// `mcp/callTool`: a tool of one of the session's servers, by its MCP name.
    McpCallTool,
    /// The MCP gateway (`gemctl mcp serve`): a downstream MCP client's `tools/call`.
    Gateway,
}

/// Which tool.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// By its fully qualified name in the session's tool table.
    Tool(String),
    /// By the server's entry name and the tool's own name.
    Mcp {
        /// The entry name.
        server: String,
        /// The server's name for the tool.
        tool: String,
    },
}

/// A call as an entry point hands it over.
#[derive(Debug, Clone)]
pub(crate) struct CallRequest {
    /// The session calling.
    pub session: String,
    /// The tool.
    pub target: Target,
    /// The arguments; absent stays absent on the way to the server.
    pub args: Option<Map<String, Value>>,
    /// The caller's id for it (`tools/cancel`, `functionResponse.id`).
    pub call_id: Option<String>,
    /// Who calls.
    pub origin: Origin,
    /// The caller is the person: an ask counts as confirmed.
    pub confirmed: bool,
    /// The caller runs the hooks of the sources Gemini CLI reads itself (a gateway client
    /// served with `hooks=client`): the hook seat leaves them to it.
    pub hooks_by_client: bool,
    /// This call is an AfterTool hook's `tailToolCallRequest` after the call to this tool
    /// (a tail call makes no further tail call).
    pub tail_of: Option<String>,
}

/// A call as the seats see it.
#[derive(Debug, Clone, Default)]
pub struct Call {
    /// The session calling.
    pub session: String,
    /// Who calls.
    pub origin: Origin,
    /// The caller's id for it.
    pub call_id: Option<String>,
    /// Its fully qualified name (`mcp_{server}_{tool}`).
    pub name: String,
    /// The server's entry name.
    pub server: String,
    /// The server's name for the tool.
    pub tool: String,
    /// The arguments the server will get (moved to it, and so empty afterwards, when no
    /// AfterTool or audit seat is filled).
    pub args: Option<Map<String, Value>>,
    /// The tool's annotations as its server lists them (`readOnlyHint`, ...).
    pub annotations: Option<Map<String, Value>>,
    /// The caller is the person (`gemctl call`).
    pub confirmed: bool,
    /// The caller runs the hooks of the sources Gemini CLI reads itself (`hooks=client`).
    pub hooks_by_client: bool,
    /// What policy decided, once it has.
    pub policy: Option<PolicyNote>,
    /// The tool whose AfterTool hook asked for this call, for a tail call.
    pub tail_of: Option<String>,
}

/// What a call produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The server's `CallToolResult`, as it sent it.
    pub result: Value,
    /// Whether the tool reported an error.
    pub is_error: bool,
    /// What Gemini gets.
    pub parts: Vec<Value>,
    /// The `functionResponse` part.
    pub function_response: Value,
    /// The display string.
    pub display: String,
    /// Texts the pipeline added for the model after the server's answer (the note about
    /// arguments a hook rewrote, an AfterTool hook's context); in `parts` too. The gateway
    /// adds them to the MCP result it returns.
    pub notes: Vec<String>,
    /// The `seq` of the last `tools/progress` event the call emitted, if it emitted any.
    pub last_progress: Option<u64>,
    /// The model gets one text (a custom tool's output), not a list of parts.
    pub one_text: bool,
}

impl Outcome {
    /// Add `note` to what the model gets, as Gemini CLI appends it to a tool's `llmContent`
    /// (after a blank line: to the text itself, or as a part of its own), and so to the
    /// `functionResponse` of a result (an error's response is the error alone, there too).
    fn tell_model(&mut self, call: &Call, note: String) {
        let piece = format!("\n\n{note}");
        let last = self.parts.last_mut().filter(|_| self.one_text);
        match last.and_then(|p| p.get_mut("text")) {
            Some(Value::String(text)) => text.push_str(&piece),
            _ => self.parts.push(serde_json::json!({ "text": piece })),
        }
        if !self.is_error {
            let id = call.call_id.as_deref();
            self.function_response = convert::function_response(&call.name, id, &self.parts);
        }
        self.notes.push(note);
    }
}

/// Where a resolved call goes.
#[derive(Debug)]
enum Via {
    /// An MCP server.
    Mcp(Arc<Server>),
    /// A custom tool's call command.
    Discovered(Arc<Discovery>),
}

/// What the BeforeTool hooks did to a call's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rewrite {
    No,
    /// Rewritten to what they were.
    Same,
    Changed,
}

/// The pipeline and what it owns: the call-id registry and progress routing.
#[derive(Debug)]
pub(crate) struct Pipeline {
    mcp: Arc<Supervisor>,
    catalog: Arc<Catalog>,
    asks: Arc<Asks>,
    events: Arc<crate::events::EventBus>,
    registry: registry::Registry,
    progress: Arc<Router>,
    seats: Seats,
    confirm_deadline: Duration,
}

/// What a pipeline is built from besides its seats.
#[derive(Debug)]
pub(crate) struct Parts {
    /// The servers.
    pub mcp: Arc<Supervisor>,
    /// The sessions' tables.
    pub catalog: Arc<Catalog>,
    /// Questions to a person.
    pub asks: Arc<Asks>,
    /// Where `confirmation/requested` goes.
    pub events: Arc<crate::events::EventBus>,
    /// Progress routing.
    pub progress: Arc<Router>,
    /// How long a confirmation waits.
    pub confirm_deadline: Duration,
}

/// A call on its way, audited when it ends, or when its caller goes away first (its future
/// dropped: the call is cancelled, and the record says so).
struct Audited<'a> {
    audit: Option<&'a dyn seats::Audit>,
    started: Option<Instant>,
    call: Call,
    done: bool,
}

impl Audited<'_> {
    /// Record how it ended; the call as the seats left it.
    fn end(mut self, ended: &Ended) -> Call {
        self.record(ended);
        self.done = true;
        let empty = Call { origin: self.call.origin, ..Call::default() };
        std::mem::replace(&mut self.call, empty)
    }

    fn record(&self, ended: &Ended) {
        if let (Some(audit), Some(started)) = (self.audit, self.started) {
            audit.record(&self.call, ended, started.elapsed());
        }
    }
}

impl Drop for Audited<'_> {
    fn drop(&mut self) {
        if !self.done {
            let why = "cancelled: the caller went away before the call ended";
            self.record(&Ended::Failed(why.to_owned()));
        }
    }
}

impl Pipeline {
    /// A pipeline over these parts.
    pub(crate) fn new(parts: Parts, seats: Seats) -> Self {
        let Parts { mcp, catalog, asks, events, progress, confirm_deadline } = parts;
        Self {
            mcp,
            catalog,
            asks,
            events,
            registry: registry::Registry::default(),
            progress,
            seats,
            confirm_deadline,
        }
    }

    /// `tools/cancel`: whether a call with that id was running.
    pub(crate) fn cancel(&self, session: &str, call_id: &str) -> bool {
        self.registry.cancel(session, call_id)
    }

    /// `calls/cancel`: whether the call of that number was running.
    pub(crate) fn cancel_number(&self, id: u64) -> bool {
        self.registry.cancel_number(id)
    }

    /// `calls/list`: the calls in flight (of one session), oldest first.
    pub(crate) fn in_flight(
        &self,
        session: Option<&str>,
    ) -> Vec<geminid_protocol::calls::CallInFlight> {
        self.registry.list(session)
    }

    /// Make a call, through every step: the call as the seats saw it last, and what it
    /// produced.
    pub(crate) async fn call(&self, req: CallRequest) -> Result<(Call, Outcome), CallError> {
        let resolved = match self.resolve(&req).await {
            Ok(r) => r,
            Err(e) => {
                self.refused(&req, &e);
                return Err(e);
            }
        };
        let call = Call {
            session: req.session,
            origin: req.origin,
            call_id: req.call_id,
            name: resolved.name.clone(),
            server: resolved.server_name.clone(),
            tool: resolved.tool.clone(),
            args: req.args,
            annotations: resolved.annotations.clone(),
            confirmed: req.confirmed,
            hooks_by_client: req.hooks_by_client,
            policy: None,
            tail_of: req.tail_of.clone(),
        };
        // At debug: an enabled span formats its fields for every call (about 8k instructions,
        // 7% of a call, at the default `info`); `RUST_LOG=geminid=debug` shows it.
        let span = tracing::debug_span!(
            "call",
            session = %call.session,
            server = %call.server,
            tool = %call.tool,
            call_id = call.call_id.as_deref().unwrap_or(""),
        );
        let started = self.seats.audit.as_ref().map(|_| Instant::now());
        // Recorded however it ends: a caller that goes away drops this future mid-call.
        let mut audited =
            Audited { audit: self.seats.audit.as_deref(), started, call, done: false };
        let result = self.run(&resolved, &mut audited.call).instrument(span).await;
        let ended = match &result {
            Ok(o) => Ended::Answered { is_error: o.is_error },
            Err(e) => Ended::Failed(e.audited()),
        };
        let call = audited.end(&ended);
        result.map(|o| (call, o))
    }

    /// A call policy refused before it resolved (a tool it hides) is audited too.
    fn refused(&self, req: &CallRequest, e: &CallError) {
        let Some(audit) = &self.seats.audit else { return };
        let (why, policy) = match e {
            CallError::PolicyDenied(why) => (
                why,
                Some(PolicyNote {
                    decision: geminid_protocol::policy::PolicyDecision::Deny,
                    rule: None,
                    confirmation: None,
                }),
            ),
            CallError::Held(why) => (why, None),
            _ => return,
        };
        let (name, server, tool) = match &req.target {
            Target::Tool(name) => (name.clone(), String::new(), String::new()),
            Target::Mcp { server, tool } => {
                (naming::fqn(server, tool), server.clone(), tool.clone())
            }
        };
        let call = Call {
            session: req.session.clone(),
            origin: req.origin,
            call_id: req.call_id.clone(),
            name,
            server,
            tool,
            args: req.args.clone(),
            annotations: None,
            confirmed: req.confirmed,
            hooks_by_client: req.hooks_by_client,
            tail_of: req.tail_of.clone(),
            policy,
        };
        audit.record(&call, &Ended::Failed(why.clone()), Duration::ZERO);
    }

    /// Steps 2 to 8, in the registry of calls in flight, cancellable as a whole by the call's
    /// id or its number.
    async fn run(&self, r: &Resolved, call: &mut Call) -> Result<Outcome, CallError> {
        let Some(mut registered) = self.registry.register(call) else {
            return Err(CallError::DuplicateCallId(call.call_id.clone().unwrap_or_default()));
        };
        let id = call.call_id.clone().unwrap_or_else(|| format!("#{}", registered.id()));
        let tool = call.name.clone();
        let progress = registered.progress.clone();
        tokio::select! {
            outcome = self.steps(r, call, &progress) => outcome,
            Ok(()) = &mut registered.cancelled => Err(CallError::Cancelled { id, tool }),
        }
    }

    async fn steps(
        &self,
        r: &Resolved,
        call: &mut Call,
        progress: &Arc<progress::Latest>,
    ) -> Result<Outcome, CallError> {
        let rewritten = self.before_tool(call).await?;
        let shown_args = self.validate(r, call, rewritten != Rewrite::No)?;
        self.policy(call).await?;
        let result = self.dispatch(r, call, progress).await?;
        let last_progress = progress.seq();
        // A result of megabytes takes the worker a while to convert: off the event loop, so
        // that other clients' calls are not held behind it.
        let large = convert::text_bytes(&result) >= convert::LARGE_RESULT;
        let convert = || match r.via {
            Via::Mcp(_) => Self::convert(call, &shown_args, result),
            Via::Discovered(_) => Self::convert_discovered(call, result),
        };
        let mut outcome = if large { crate::config::files::off_loop(convert) } else { convert() };
        outcome.last_progress = last_progress;
        if let Some((name, args)) = self.after_tool(call, &mut outcome).await? {
            // The tail call's result replaces this one; it goes through every step itself.
            let tail = CallRequest {
                session: call.session.clone(),
                target: Target::Tool(name),
                args: Some(args),
                call_id: None,
                origin: call.origin,
                confirmed: call.confirmed,
                hooks_by_client: call.hooks_by_client,
                tail_of: Some(call.name.clone()),
            };
            let (_, o) = Box::pin(self.call(tail)).await?;
            outcome = Outcome { last_progress, ..o };
        } else if rewritten == Rewrite::Changed {
            // Gemini CLI's scheduler tells the model after the AfterTool hooks have run (so
            // they do not read it), in these words (its per-key wording is another path's).
            let note = "[System] Tool input parameters were modified by a hook before execution.";
            outcome.tell_model(call, note.to_owned());
        }
        Ok(outcome)
    }

    /// Step 2: BeforeTool hooks: whether they rewrote the arguments, and to something else.
    async fn before_tool(&self, call: &mut Call) -> Result<Rewrite, CallError> {
        let Some(seat) = &self.seats.before_tool else { return Ok(Rewrite::No) };
        match seat.before_tool(call).await {
            Before::Proceed => Ok(Rewrite::No),
            Before::Rewrite(args) => {
                let old = call.args.take().unwrap_or_default();
                let same = old == args;
                call.args = Some(args);
                // Rewritten to the same: still validated again, said to the model as no change.
                Ok(if same { Rewrite::Same } else { Rewrite::Changed })
            }
            Before::Block(why) => Err(CallError::HookBlocked(why)),
            Before::Stop(why) => Err(CallError::Stopped(why)),
            Before::Ask(question) => {
                self.confirm(call, question).await.map(|_| Rewrite::No).map_err(|u| u.error)
            }
        }
    }

    /// Step 3: the arguments against the tool's input schema. `wait_for_previous` is Gemini CLI's
    /// parameter, added to the declaration the model sees: it is checked here against that
    /// declaration and not sent on, because the server never declared it (and a schema with
    /// `additionalProperties: false`, as zod-based servers emit, forbids it). A server that
    /// declares it itself gets it. Returns the arguments as the model sent them, for the
    /// error text (Gemini CLI quotes its call).
    fn validate(&self, r: &Resolved, call: &mut Call, rewritten: bool) -> Result<Value, CallError> {
        let invalid = |why: String| CallError::InvalidArguments { tool: call.name.clone(), why };
        let wait = match call.args.as_mut() {
            Some(map) if r.offers_wait => map.remove(naming::WAIT_FOR_PREVIOUS_PARAM),
            _ => None,
        };
        if wait.as_ref().is_some_and(|w| !w.is_boolean()) {
            return Err(invalid(format!(
                "/{}: must be a boolean",
                naming::WAIT_FOR_PREVIOUS_PARAM
            )));
        }
        let mut args = Value::Object(call.args.clone().unwrap_or_default());
        if let Some(v) = &r.validator
            && let Ok(v) = &**v
            && let Err(e) = crate::mcp::catalog::check_args(v, &args)
        {
            let why =
                if rewritten { format!("{e} (after a BeforeTool hook rewrote them)") } else { e };
            return Err(invalid(why));
        }
        if let (Some(w), Some(map)) = (wait, args.as_object_mut()) {
            map.insert(naming::WAIT_FOR_PREVIOUS_PARAM.to_owned(), w);
        }
        Ok(args)
    }

    /// Step 6: the call on its source, its progress routed to the session (and kept in
    /// `last`). The arguments go to the server by move when no later seat will read them
    /// (`Call::args` is then empty afterwards). Counted in the server's usage.
    async fn dispatch(
        &self,
        r: &Resolved,
        call: &mut Call,
        last: &Arc<progress::Latest>,
    ) -> Result<Value, CallError> {
        let server = match &r.via {
            Via::Mcp(server) => server,
            Via::Discovered(d) => return Ok(d.call(&call.tool, call.args.as_ref()).await),
        };
        let args = if self.seats.after_tool.is_some() || self.seats.audit.is_some() {
            call.args.clone()
        } else {
            call.args.take()
        };
        let target = crate::mcp::Caller {
            session: call.session.clone(),
            call_id: call.call_id.clone(),
            name: call.name.clone(),
        };
        let identity = server.identity.as_str();
        let track = |token: &rmcp::model::ProgressToken, id: &rmcp::model::RequestId| {
            self.progress.track(identity, token, id, target, last.clone())
        };
        let result = self
            .mcp
            .requests()
            .call_tool(server, &call.session, r.timeout, &call.tool, args, track)
            .await;
        server.calls.ended(result.as_ref().map_or(true, convert::is_error));
        Ok(result?)
    }

    /// Step 7: the result as Gemini gets it.
    fn convert(call: &Call, shown_args: &Value, result: Value) -> Outcome {
        let is_error = convert::is_error(&result);
        let id = call.call_id.as_deref();
        let own = &call.tool;
        let (parts, display, function_response) = if is_error {
            let message = convert::error_message(own, shown_args, &result);
            let response = convert::error_response(&call.name, id, &message);
            let display = format!("Error: MCP tool '{own}' reported an error.");
            (vec![serde_json::json!({ "text": message })], display, response)
        } else {
            let (parts, display) = convert::parts(own, &result);
            let response = convert::function_response(&call.name, id, &parts);
            (parts, display, response)
        };
        Outcome {
            result,
            is_error,
            parts,
            function_response,
            display,
            notes: Vec::new(),
            last_progress: None,
            one_text: false,
        }
    }

    /// Step 7 for a custom tool: its text as Gemini CLI gives it to the model (stdout, or the
    /// report of a call that failed), unwrapped.
    fn convert_discovered(call: &Call, result: Value) -> Outcome {
        let is_error = convert::is_error(&result);
        let text = result["content"][0]["text"].as_str().unwrap_or_default().to_owned();
        let id = call.call_id.as_deref();
        let parts = vec![serde_json::json!({ "text": text })];
        let function_response = if is_error {
            convert::error_response(&call.name, id, &text)
        } else {
            convert::function_response(&call.name, id, &parts)
        };
        Outcome {
            result,
            is_error,
            parts,
            function_response,
            display: text,
            notes: Vec::new(),
            last_progress: None,
            one_text: true,
        }
    }

    /// Step 8: AfterTool hooks: the tail call they ask for, if any (at most one per call).
    async fn after_tool(
        &self,
        call: &Call,
        outcome: &mut Outcome,
    ) -> Result<Option<(String, Map<String, Value>)>, CallError> {
        let Some(seat) = &self.seats.after_tool else { return Ok(None) };
        match seat.after_tool(call, outcome).await {
            After::Keep => Ok(None),
            After::Block(why) => Err(CallError::HookBlocked(why)),
            After::Stop(why) => Err(CallError::Stopped(why)),
            After::AddContext(text) => {
                outcome.tell_model(call, text);
                Ok(None)
            }
            After::Tail { name, args } if call.tail_of.is_none() => Ok(Some((name, args))),
            After::Tail { name, .. } => {
                tracing::warn!(tool = %call.name, tail = %name, "a tail call's hook asked for another tail call; ignored");
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests;
