//! `asks/*`: questions the daemon puts to a person through a session's clients (confirm a tool
//! call, fill in a server's form, approve a sampling request, open a login URL).
//!
//! A client that can answer some kinds listens (`asks/listen`) on a session it is attached to;
//! it is sent each pending ask of those kinds at once, then every new one, and a notice when
//! one is settled (answered by any client, cancelled with its call, or timed out). The first
//! `asks/respond` wins.

use serde::{Deserialize, Serialize};

use crate::common::SessionId;

/// What is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum AskKind {
    /// Confirm a tool call. Answer `{"outcome": "once" | "session" | "always" | "deny"}`.
    Confirmation,
    /// A server's elicitation form. Answer `{"action": "accept" | "decline" | "cancel",
    /// "content"?}`, as MCP's `ElicitResult`.
    Elicitation,
    /// A server's sampling request. Answer as MCP's `CreateMessageResult`.
    Sampling,
    /// Open a URL (an OAuth login). Answer `{"opened": bool}`.
    OpenUrl,
}

impl AskKind {
    /// Every kind.
    pub const ALL: [AskKind; 4] =
        [Self::Confirmation, Self::Elicitation, Self::Sampling, Self::OpenUrl];
}

/// One question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Ask {
    /// Its id, for `asks/respond`.
    pub id: String,
    /// The session it belongs to.
    pub session: SessionId,
    /// The call that caused it, when the caller gave the call an id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// What is asked.
    pub kind: AskKind,
    /// The question, in words.
    pub title: String,
    /// What the question is about (for a confirmation: `{name, server, tool, args}`).
    pub detail: serde_json::Value,
    /// When it times out (milliseconds since the Unix epoch).
    pub deadline_ms: u64,
}

/// How an ask was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Settled {
    /// A client answered it.
    Answered,
    /// Its call ended first (cancelled, or its caller went away).
    Cancelled,
    /// Nobody answered before its deadline.
    TimedOut,
}

/// What a listener is sent (notifications `asks/notice`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AskNotice {
    /// A new (or, on listening, a pending) ask.
    Asked {
        /// The ask.
        ask: Ask,
    },
    /// An ask is no longer pending: a dialog showing it can close.
    Settled {
        /// Its id.
        id: String,
        /// How.
        how: Settled,
    },
}

/// `asks/listen`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AsksListenParams {
    /// A session this connection is attached to.
    pub session: SessionId,
    /// The kinds this client can answer.
    pub kinds: Vec<AskKind>,
}

/// `asks/respond`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AsksRespondParams {
    /// The session.
    pub session: SessionId,
    /// The ask's id.
    pub id: String,
    /// The answer (its shape depends on the kind, see [`AskKind`]).
    pub answer: serde_json::Value,
}

/// `asks/respond`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AsksRespondResult {
    /// `false` when the ask was already settled (another client answered first, its call
    /// ended, or it timed out) or never existed.
    pub accepted: bool,
}

/// `asks/pending`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AsksPendingParams {
    /// The session; without it, every session's pending asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
}

/// `asks/pending`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AsksPendingResult {
    /// The pending asks, oldest first.
    pub asks: Vec<Ask>,
}
