//! Policy in the call pipeline: the policy seat (decide, remember an approval, route a
//! confirmation), its static filter, and each session's rules prepared once and kept until
//! something they are made of changes (a reload, a policy file, the session's mode or
//! approvals, or whether a person is there to answer).

use std::collections::HashSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::asks::{AskKind, Asks, Confirmed};
use crate::calls::seats::{Hidden, Policy, PolicyNote, Route, ToolFilter};
use crate::calls::{Call, Decision};
use crate::policy::session_rules::{Policies, SessionRules, reason, source};
use crate::policy::{ApprovalMode, Decision as Rule, ToolCall, saved};
use crate::services::configs::Configs;
use crate::services::prepared::PerSession;
use crate::session::{SessionError, Sessions};
use geminid_protocol::policy::AuditConfirmation;

/// A session's policy as the seat uses it.
#[derive(Debug)]
struct Prepared {
    epoch: u64,
    interactive: bool,
    /// The session's own setting (absent: whether its root has a listening client).
    forced: Option<bool>,
    route: Route,
    mode: ApprovalMode,
    subagent: Option<String>,
    /// A derived session's tools (absent: all).
    tools: Option<HashSet<String>>,
    /// Tools approved for the rest of the session.
    approvals: HashSet<String>,
    /// `tools.exclude` (with the extensions' exclusions joined to it): Gemini CLI also hides an
    /// MCP tool whose own name (after `mcp_{server}_`) is listed.
    excluded: HashSet<String>,
    policy: SessionRules,
}

/// The policy seat and static filter of the call pipeline.
#[derive(Debug)]
pub(crate) struct ToolCallPolicy {
    config: Arc<Configs>,
    sessions: Arc<Sessions>,
    asks: Arc<Asks>,
    policies: Arc<Policies>,
    prepared: PerSession<Prepared>,
}

impl ToolCallPolicy {
    pub(crate) fn new(
        config: Arc<Configs>,
        sessions: Arc<Sessions>,
        asks: Arc<Asks>,
        policies: Arc<Policies>,
    ) -> Self {
        Self { config, sessions, asks, policies, prepared: PerSession::default() }
    }

    /// Something sessions' rules are made of changed: prepare them again on next use.
    pub(crate) fn changed(&self) {
        self.prepared.changed();
    }

    /// Forget a session (it closed).
    pub(crate) fn forget(&self, session: &str) {
        self.prepared.forget(session);
    }

    /// Whether the session is interactive for every caller: set so, or a client attached to
    /// its root answers every confirmation raised in it (a gateway client answers only its
    /// own calls', so it makes them interactive, not the session: [`ToolCallPolicy::decide`]).
    fn interactive(&self, forced: Option<bool>, root: &str) -> bool {
        forced.unwrap_or_else(|| self.asks.answers_all(root, AskKind::Confirmation))
    }

    /// Whether the call is decided as in an interactive session: the session is, or someone
    /// listening would be asked to confirm this call (its gateway client, which elicits).
    fn interactive_for(&self, p: &Prepared, call: &Call) -> bool {
        p.interactive
            || (p.forced.is_none()
                && self.asks.answers_call(
                    &p.route.to,
                    AskKind::Confirmation,
                    call.call_id.as_deref(),
                ))
    }

    fn prepare(&self, session: &str) -> Result<Arc<Prepared>, SessionError> {
        let epoch = self.prepared.epoch();
        let cached = self.prepared.current(session).map(|(_, p)| p);
        if let Some(p) = cached
            && self.interactive(p.forced, &p.route.to) == p.interactive
        {
            return Ok(p);
        }
        let rec = self.sessions.record(session)?;
        let state = &rec.state;
        let (route, subagent, tools) = match &state.derived {
            Some(d) => (
                Route { to: d.root.clone(), path: d.path.clone() },
                Some(d.name.clone()),
                d.tools.as_ref().map(|t| t.iter().cloned().collect()),
            ),
            None => (Route { to: session.to_owned(), path: session.to_owned() }, None, None),
        };
        let interactive = self.interactive(state.interactive, &route.to);
        let effective = self.config.effective(session)?;
        let policy = self.policies.for_session(self.config.paths(), &effective, interactive);
        let excluded = effective
            .public
            .settings
            .pointer("/tools/exclude")
            .and_then(Value::as_array)
            .map(|l| l.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let p = Arc::new(Prepared {
            epoch,
            interactive,
            forced: state.interactive,
            route,
            mode: state.approval_mode,
            subagent,
            tools,
            approvals: state.approvals.iter().cloned().collect(),
            excluded,
            policy,
        });
        self.prepared.put(session, epoch, p.clone());
        Ok(p)
    }

    /// The session's approval mode and whether it is interactive now, as its calls are
    /// decided: every check outside a call (`policy/check`, a command's shell lines) takes
    /// them from here, so none decides in another mode than the session's calls.
    pub(crate) fn standing(&self, session: &str) -> Result<(ApprovalMode, bool), SessionError> {
        self.prepare(session).map(|p| (p.mode, p.interactive))
    }
}

impl ToolCallPolicy {
    /// What the engine and the session's approvals make of a call.
    fn verdict_for(&self, call: &Call) -> (Decision, Option<PolicyNote>) {
        let p = match self.prepare(&call.session) {
            Ok(p) => p,
            Err(e) => {
                return (Decision::Deny(format!("the session's policy cannot be read: {e}")), None);
            }
        };
        let tc = ToolCall {
            name: &call.name,
            // A tool of the daemon's own (`activate_skill`) has no server.
            server: Some(call.server.as_str()).filter(|s| !s.is_empty()),
            args: call.args.as_ref(),
            annotations: call.annotations.as_ref(),
            subagent: p.subagent.as_deref(),
        };
        // A policy file that gives no rules, with no good version known, cannot be known not
        // to deny this call: it is refused, with where the file breaks and the fix.
        if !p.policy.refusing.is_empty() {
            let home = &self.config.paths().home;
            let each: Vec<String> =
                p.policy.refusing.iter().map(|d| located_from_home(d, home)).collect();
            return (
                Decision::Deny(format!("Tool execution refused: {}", each.join("; and "))),
                None,
            );
        }
        // A person calling directly is there to confirm: decide as for an interactive session.
        let interactive = self.interactive_for(&p, call) || call.confirmed;
        let set = match interactive == p.interactive {
            true => p.policy.set.clone(),
            // The rules implied by settings differ between the two (`autoAllowInHeadless`).
            false => match self.config.effective(&call.session) {
                Ok(e) => self.policies.for_session(self.config.paths(), &e, interactive).set,
                Err(e) => {
                    let why = format!("the session's policy cannot be read: {e}");
                    return (Decision::Deny(why), None);
                }
            },
        };
        let v = set.verdict(&tc, p.mode, interactive);
        let mut note =
            PolicyNote { decision: v.decision, rule: v.rule.map(source), confirmation: None };
        let why = || reason(v.decision, v.rule, p.mode, interactive);
        // "denied by the rule in F" reads after "is"; the default's reason is a sentence.
        let is = || match v.rule {
            Some(_) => format!("is {}", why()),
            None => format!("is denied: {}", why()),
        };
        let decision = match v.decision {
            Rule::Allow => Decision::Allow,
            Rule::Deny => Decision::Deny(denied(&call.name, v.rule, &self.config.paths().home, is)),
            Rule::AskUser if p.approvals.contains(&call.name) => {
                note.confirmation = Some(AuditConfirmation::Remembered);
                Decision::Allow
            }
            Rule::AskUser if call.confirmed => {
                // Through the gateway, only a client that confirms calls itself says so.
                note.confirmation = Some(match call.origin {
                    crate::calls::Origin::Gateway => AuditConfirmation::ByClient,
                    _ => AuditConfirmation::ByCaller,
                });
                Decision::Allow
            }
            Rule::AskUser => {
                let server = match call.server.as_str() {
                    "" => String::new(),
                    s => format!(" (server '{s}')"),
                };
                let it = match v.rule {
                    Some(_) => format!("It is {}.", why()),
                    None => "No policy rule decides it.".to_owned(),
                };
                Decision::Ask(format!("Allow the call to '{}'{server}? {it}", call.name))
            }
        };
        (decision, Some(note))
    }
}

/// The policy span's attributes: what was decided, by which rule (its tier, priority, and its
/// file's name and line: not the folder, which names the user), and how an ask was settled.
fn traced(span: &crate::telemetry::Active, d: &Decision, note: Option<&PolicyNote>) {
    use opentelemetry::KeyValue;
    let decided = match d {
        Decision::Allow => "allow",
        Decision::Deny(_) => "deny",
        Decision::Ask(_) => "ask_user",
    };
    span.set(KeyValue::new("geminid.policy.decision", decided));
    let Some(note) = note else { return };
    match &note.rule {
        Some(r) => {
            let file = std::path::Path::new(&r.file)
                .file_name()
                .map_or_else(|| r.file.clone(), |f| f.to_string_lossy().into_owned());
            span.set(KeyValue::new("geminid.policy.rule.tier", r.tier.clone()));
            span.set(KeyValue::new("geminid.policy.rule.priority", i64::from(r.priority)));
            span.set(KeyValue::new("geminid.policy.rule.file", file));
            if let Some(line) = r.line {
                span.set(KeyValue::new("geminid.policy.rule.line", i64::from(line)));
            }
        }
        None => span.set(KeyValue::new("geminid.policy.rule.tier", "default")),
    }
    if let Some(c) = &note.confirmation
        && let Ok(serde_json::Value::String(c)) = serde_json::to_value(c)
    {
        span.set(KeyValue::new("geminid.policy.confirmation", c));
    }
}

impl Policy for ToolCallPolicy {
    fn decide(&self, call: &Call) -> (Decision, Option<PolicyNote>) {
        let span = crate::telemetry::child("policy", Vec::new);
        let (decision, note) = self.verdict_for(call);
        if let Some(span) = &span {
            traced(span, &decision, note.as_ref());
        }
        (decision, note)
    }

    fn remember<'a>(
        &'a self,
        call: &'a Call,
        confirmed: Confirmed,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let saved = match confirmed {
                Confirmed::Once | Confirmed::Deny => return Ok(()),
                Confirmed::Session => Ok(()),
                Confirmed::Always => {
                    let file = saved::path(self.config.paths());
                    saved::save(&file, &call.tool, Some(&call.server))
                        .map(drop)
                        .map_err(|e| e.to_string())
                }
            };
            // Kept with the session either way: an "always" that could not be saved still
            // holds for the session.
            let name = call.name.clone();
            let kept = self
                .sessions
                .update_state(&call.session, |s| {
                    if !s.approvals.contains(&name) {
                        s.approvals.push(name.clone());
                        s.approvals.sort();
                    }
                    Ok::<(), std::convert::Infallible>(())
                })
                .await;
            self.changed();
            let _session = kept.map_err(|e| e.to_string())?;
            saved
        })
    }

    fn route(&self, session: &str) -> Route {
        match self.prepare(session) {
            Ok(p) => p.route.clone(),
            Err(_) => Route { to: session.to_owned(), path: session.to_owned() },
        }
    }
}

/// What a call a rule (or no rule) denies answers, to its caller and the model: Gemini CLI's
/// text (`Tool execution denied by policy.` and the rule's `denyMessage`), then the rule that
/// decided, its file written from `~` (the model is not told the user's home folder, which
/// names the user; `gemctl policy check` and the audit log keep the whole path).
fn denied(
    tool: &str,
    rule: Option<&crate::policy::rule::Rule>,
    home: &std::path::Path,
    is: impl Fn() -> String,
) -> String {
    let Some(r) = rule else {
        return format!(
            "Tool execution denied by policy. (geminid: the call to '{tool}' {})",
            is()
        );
    };
    let at = source(r);
    let file = from_home(&at.file, home);
    let line = at.line.map(|l| format!(":{l}")).unwrap_or_default();
    let message = r.deny_message.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
    format!(
        "Tool execution denied by policy.{message} (geminid: the call to '{tool}' is denied by the \
         rule in {file}{line}, {} tier, priority {})",
        at.tier, at.priority
    )
}

/// `path` as the model may read it: from `~` when it is in the home folder, else its file name
/// (an absolute path names the user).
pub(crate) fn from_home(path: &str, home: &std::path::Path) -> String {
    let p = std::path::Path::new(path);
    if !p.is_absolute() {
        return path.to_owned();
    }
    match p.strip_prefix(home) {
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => {
            p.file_name().map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned())
        }
    }
}

/// A diagnostic as `config::located` says it, its file from `~` and the home folder in its
/// message written `~` too.
pub(crate) fn located_from_home(
    d: &geminid_protocol::common::Diagnostic,
    home: &std::path::Path,
) -> String {
    let mut d = d.clone();
    d.file = from_home(&d.file, home);
    d.message = in_home_words(&d.message, home);
    crate::config::located(&d)
}

/// `text` with each path in the home folder written from `~`.
fn in_home_words(text: &str, home: &std::path::Path) -> String {
    let home = home.display().to_string();
    match home.as_str() {
        "" | "/" => text.to_owned(),
        _ => text.replace(&format!("{home}/"), "~/"),
    }
}

impl ToolFilter for ToolCallPolicy {
    fn hides(
        &self,
        session: &str,
        name: &str,
        server: Option<&str>,
        annotations: Option<&Map<String, Value>>,
    ) -> Option<Hidden> {
        let p = self.prepare(session).ok()?;
        if let (Some(tools), Some(agent)) = (&p.tools, &p.subagent)
            && !tools.iter().any(|t| t == name)
            && !tools.iter().any(|t| t.strip_suffix('*').is_some_and(|pre| name.starts_with(pre)))
        {
            let why = format!("the subagent '{agent}' is not given this tool");
            return Some(Hidden { why, by_default: false });
        }
        // An MCP tool's own name in `tools.exclude` hides it, as Gemini CLI's registry does
        // (it checks the name after the server's prefix as well as the full one).
        if let Some(server) = server
            && let Some(own) = name.strip_prefix(&crate::naming::fqn(server, ""))
            && !own.is_empty()
            && p.excluded.contains(own)
        {
            let why = format!(
                "`tools.exclude` lists '{own}', the tool's own name on its server (Gemini CLI \
                 excludes it by that name too)"
            );
            return Some(Hidden { why, by_default: false });
        }
        let tc =
            ToolCall { name, server, args: None, annotations, subagent: p.subagent.as_deref() };
        let rule = p.policy.set.excludes(&tc, p.mode, p.interactive)?;
        // Said to clients and models too: the rule's file from `~`.
        let mut why = in_home_words(
            &reason(Rule::Deny, rule, p.mode, p.interactive),
            &self.config.paths().home,
        );
        if rule.is_none() {
            why.push_str(match server {
                Some(_) => {
                    " (a client listening for confirmations, such as `gemctl attach`, makes it \
                     interactive; `trust: true` on the server or a policy rule allows its tools)"
                }
                None => {
                    " (a client listening for confirmations, such as `gemctl attach`, makes it \
                     interactive; a policy rule can allow it)"
                }
            });
        }
        Some(Hidden { why, by_default: rule.is_none() })
    }

    fn stamp(&self, session: &str) -> u64 {
        match self.prepare(session) {
            Ok(p) => p.epoch * 2 + u64::from(p.interactive),
            Err(_) => 0,
        }
    }
}

impl crate::services::forget::Forget for ToolCallPolicy {
    fn forget(&self, session: &str) {
        ToolCallPolicy::forget(self, session);
    }
}
