//! Steps 4 and 5 of the pipeline: policy's decision, and the confirmation it (or a BeforeTool
//! hook) asks for, announced as `confirmation/requested` and remembered by the policy seat.

use geminid_protocol::event::EventBody;
use geminid_protocol::policy::{AuditConfirmation, ConfirmOutcome, ConfirmationRequested};
use serde_json::Value;

use super::{Call, CallError, Decision, Pipeline, Route};
use crate::asks::{AskError, AskKind, Confirmed};

/// A confirmation that did not allow its call: the call's error, and how it went for the
/// audit record.
#[derive(Debug)]
pub(super) struct Unconfirmed {
    pub(super) error: CallError,
    pub(super) how: AuditConfirmation,
}

impl Pipeline {
    /// Step 4: policy, and step 5 for the confirmation it asks for.
    pub(super) async fn policy(&self, call: &mut Call) -> Result<(), CallError> {
        self.policy_about(call, None).await
    }

    /// A call to one of the daemon's own tools (`activate_skill`): only policy's decision and
    /// the confirmation it asks for (which also shows `about`), audited as a call.
    pub(crate) async fn authorize(&self, call: &mut Call, about: &str) -> Result<(), CallError> {
        let started = std::time::Instant::now();
        let result = self.policy_about(call, Some(about)).await;
        if let Some(audit) = &self.seats.audit {
            let ended = match &result {
                Ok(()) => super::seats::Ended::Answered { is_error: false },
                Err(e) => super::seats::Ended::Failed(e.to_string()),
            };
            audit.record(call, &ended, started.elapsed());
        }
        result
    }

    async fn policy_about(&self, call: &mut Call, about: Option<&str>) -> Result<(), CallError> {
        let Some(policy) = &self.seats.policy else { return Ok(()) };
        let (decision, note) = policy.decide(call);
        call.policy = note;
        match decision {
            Decision::Allow => Ok(()),
            Decision::Deny(why) => Err(CallError::PolicyDenied(why)),
            Decision::Ask(question) => {
                let question = match about {
                    Some(about) => format!("{question}\n\n{about}"),
                    None => question,
                };
                let answered = self.confirm(call, question).await;
                let how = match &answered {
                    Ok(c) => AuditConfirmation::Answered(c.outcome()),
                    Err(u) => u.how,
                };
                if let Some(n) = call.policy.as_mut() {
                    n.confirmation = Some(how);
                }
                let confirmed = answered.map_err(|u| u.error)?;
                if let Err(why) = policy.remember(call, confirmed).await {
                    tracing::warn!(tool = %call.name, error = %why, "the approval is not remembered");
                }
                Ok(())
            }
        }
    }

    /// Step 5: ask the session's clients (a derived session's root's) to confirm the call:
    /// how long they allowed it for, or why it is not allowed and how that went.
    pub(super) async fn confirm(
        &self,
        call: &Call,
        question: String,
    ) -> Result<Confirmed, Unconfirmed> {
        // A span for the wait, with how it ended (`geminid.confirmation`: the answer, or
        // `timed_out`, `no_answerer`, `answerer_gone`).
        let span = crate::telemetry::child("confirmation", Vec::new);
        let answered = self.ask_to_confirm(call, question).await;
        if let Some(span) = span {
            let how = match &answered {
                Ok(c) => AuditConfirmation::Answered(c.outcome()),
                Err(u) => u.how,
            };
            let how = match how {
                AuditConfirmation::Answered(o) => match serde_json::to_value(o) {
                    Ok(Value::String(s)) => s,
                    _ => "answered".to_owned(),
                },
                AuditConfirmation::TimedOut => "timed_out".to_owned(),
                AuditConfirmation::NoAnswerer => "no_answerer".to_owned(),
                AuditConfirmation::AnswererGone => "answerer_gone".to_owned(),
                other => format!("{other:?}"),
            };
            span.set(opentelemetry::KeyValue::new("geminid.confirmation", how));
        }
        answered
    }

    async fn ask_to_confirm(
        &self,
        call: &Call,
        question: String,
    ) -> Result<Confirmed, Unconfirmed> {
        let route = match &self.seats.policy {
            Some(p) => p.route(&call.session),
            None => Route { to: call.session.clone(), path: call.session.clone() },
        };
        let detail = serde_json::json!({
            "name": call.name,
            "server": call.server,
            "tool": call.tool,
            "args": call.args,
            "session": call.session,
            "path": route.path,
        });
        let announce = |ask: &geminid_protocol::asks::Ask| {
            self.events.emit(EventBody::ConfirmationRequested(ConfirmationRequested {
                id: ask.id.clone(),
                session: call.session.clone(),
                to: route.to.clone(),
                path: route.path.clone(),
                tool: call.name.clone(),
                server: call.server.clone(),
                args: call.args.clone(),
                details: ask.title.clone(),
                deadline_ms: ask.deadline_ms,
            }));
        };
        let asked = self.asks.ask_then(
            &route.to,
            call.call_id.as_deref(),
            AskKind::Confirmation,
            question,
            detail,
            self.confirm_deadline,
            announce,
        );
        let notify = async {
            if let Some(hooks) = &self.seats.before_tool {
                hooks.confirming(call).await;
            }
        };
        let (asked, ()) = futures::join!(asked, notify);
        let tool = &call.name;
        let answer = match asked {
            Ok(answer) => answer,
            Err(AskError::TimedOut(after)) => {
                let error = CallError::ConfirmationTimedOut(format!(
                    "nobody confirmed the call to '{tool}' within {}, so it is denied",
                    humantime::format_duration(after)
                ));
                return Err(Unconfirmed { error, how: AuditConfirmation::TimedOut });
            }
            // Whoever could answer went while asked (its gateway client gone without a word,
            // `gemctl attach` closed and not back): the call ends now, not at the deadline.
            Err(AskError::AnswererGone(_)) => {
                let error = CallError::Declined(format!(
                    "the call to '{tool}' was cancelled: it needs a confirmation, and the client \
                     that could answer went away. Keep `gemctl attach` open in the workspace to \
                     confirm calls, or allow it (`trust: true` on its server, or a policy rule)"
                ));
                return Err(Unconfirmed { error, how: AuditConfirmation::AnswererGone });
            }
            // Nobody can be asked: Gemini CLI's text for a call that needs a confirmation in
            // a headless run, then why here.
            Err(e @ AskError::NoAnswerer(_)) => {
                let error = CallError::Declined(format!(
                    "Tool execution for \"{tool}\" requires user confirmation, which is not \
                     supported in non-interactive mode. (geminid: the call needs a confirmation, \
                     and it is denied: {e})"
                ));
                return Err(Unconfirmed { error, how: AuditConfirmation::NoAnswerer });
            }
            Err(e) => {
                let how = AuditConfirmation::Answered(ConfirmOutcome::Deny);
                let error = CallError::Declined(format!(
                    "the call to '{tool}' needs a confirmation, and it is denied: {e}"
                ));
                return Err(Unconfirmed { error, how });
            }
        };
        let denied =
            |error| Unconfirmed { error, how: AuditConfirmation::Answered(ConfirmOutcome::Deny) };
        match Confirmed::parse(&answer) {
            Ok(Confirmed::Deny) => {
                let why = answer.get("reason").and_then(Value::as_str);
                Err(denied(CallError::Declined(match why {
                    Some(why) => format!("the call to '{tool}' was declined: {why}"),
                    None => format!("the call to '{tool}' was declined"),
                })))
            }
            Ok(confirmed) => Ok(confirmed),
            Err(e) => Err(denied(CallError::Declined(format!(
                "the call to '{tool}' was not confirmed: {e}"
            )))),
        }
    }
}
