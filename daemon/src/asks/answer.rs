//! An ask's answer: its shape checked for its kind, and a confirmation's read.

use serde_json::Value;

use super::{AskError, AskKind};

/// A confirmation's answer: how long the person allowed the call for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmed {
    /// This call only.
    Once,
    /// Calls like it, for the rest of the session.
    Session,
    /// Calls like it, from now on.
    Always,
    /// Refused.
    Deny,
}

impl Confirmed {
    /// Its name on the wire.
    pub(crate) fn outcome(self) -> geminid_protocol::policy::ConfirmOutcome {
        use geminid_protocol::policy::ConfirmOutcome as O;
        match self {
            Self::Once => O::Once,
            Self::Session => O::Session,
            Self::Always => O::Always,
            Self::Deny => O::Deny,
        }
    }

    /// `{"outcome": "once" | "session" | "always" | "deny"}`.
    pub(crate) fn parse(answer: &Value) -> Result<Self, AskError> {
        match answer.get("outcome").and_then(Value::as_str) {
            Some("once") => Ok(Self::Once),
            Some("session") => Ok(Self::Session),
            Some("always") => Ok(Self::Always),
            Some("deny") => Ok(Self::Deny),
            _ => Err(AskError::BadAnswer(format!(
                "a confirmation answer is {{\"outcome\": \"once\" | \"session\" | \"always\" | \
                 \"deny\"}}, not {answer}"
            ))),
        }
    }
}

/// The kind's name on the wire.
pub(crate) fn kind_name(kind: AskKind) -> &'static str {
    match kind {
        AskKind::Confirmation => "confirmation",
        AskKind::Elicitation => "elicitation",
        AskKind::Sampling => "sampling",
        AskKind::OpenUrl => "openUrl",
    }
}

/// Check an answer's shape before it settles its ask (a bad one leaves the ask pending).
pub(super) fn check(kind: AskKind, answer: &Value) -> Result<(), AskError> {
    let bad = |what: &str| {
        Err(AskError::BadAnswer(format!("{} answer is {what}, not {answer}", kind_name(kind))))
    };
    match kind {
        AskKind::Confirmation => Confirmed::parse(answer).map(|_| ()),
        AskKind::Elicitation => match answer.get("action").and_then(Value::as_str) {
            Some("accept" | "decline" | "cancel") => Ok(()),
            _ => bad(
                "an ElicitResult ({\"action\": \"accept\" | \"decline\" | \"cancel\", \"content\"?})",
            ),
        },
        AskKind::Sampling => match answer.get("role").zip(answer.get("content")) {
            Some(_) => Ok(()),
            None => bad("a CreateMessageResult ({role, content, model, stopReason?})"),
        },
        AskKind::OpenUrl => match answer.get("opened") {
            Some(Value::Bool(_)) => Ok(()),
            _ => bad("{\"opened\": true | false}"),
        },
    }
}
