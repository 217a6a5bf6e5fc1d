//! The event stream (`events/subscribe`). Every event has a kind, a timestamp and a payload;
//! the kind names the payload's shape.

use serde::{Deserialize, Serialize};

// `config/changed`'s payload lives with the rest of the configuration types (so `config`
// does not import `event`); it is re-exported here with the other payloads.
use crate::common::SessionId;
pub use crate::config::ConfigChanged;
use crate::mcp::{CatalogChanged, ServerStateChanged};
use crate::session::Session;

/// One event as delivered to subscribers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Position in the daemon's event sequence (starts at 1 with each daemon start), so a
    /// subscriber can tell that it missed some.
    pub seq: u64,
    /// When it happened (RFC 3339, UTC, milliseconds).
    pub timestamp: String,
    /// The kind and its payload.
    #[serde(flatten)]
    pub body: EventBody,
}

/// Every event kind (what `events/subscribe`'s `kinds` may name).
pub const KINDS: &[&str] = &[
    "session/created",
    "session/attached",
    "session/detached",
    "session/closed",
    "daemon/shuttingDown",
    "config/changed",
    "mcp/serverState",
    "catalog/changed",
    "tools/progress",
    "confirmation/requested",
    "elicitation/requested",
    "sampling/requested",
    "hooks/ran",
    "mcp/resourceUpdated",
    "extensions/tampered",
    "extensions/progress",
    "skills/changed",
    "commands/changed",
    "tools/discovered",
    "mcp/toolsChanged",
];

/// Event kinds and their payloads; serialized as `"kind": "...", "payload": {...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", content = "payload")]
#[non_exhaustive]
pub enum EventBody {
    /// A session was created.
    #[serde(rename = "session/created")]
    SessionCreated(Session),
    /// A connection attached to a session.
    #[serde(rename = "session/attached")]
    SessionAttached(Session),
    /// A connection detached from a session (explicitly or by disconnecting).
    #[serde(rename = "session/detached")]
    SessionDetached(Session),
    /// A session was closed and deleted.
    #[serde(rename = "session/closed")]
    SessionClosed(Session),
    /// The daemon is shutting down; subscriptions end after this event.
    #[serde(rename = "daemon/shuttingDown")]
    DaemonShuttingDown(ShuttingDown),
    /// A session's effective configuration changed (files edited, or `mcp/reload`).
    #[serde(rename = "config/changed")]
    ConfigChanged(ConfigChanged),
    /// An MCP server changed state (for every session using it).
    #[serde(rename = "mcp/serverState")]
    McpServerState(ServerStateChanged),
    /// A server's tools, prompts or resources changed (one event per refresh, however many
    /// `list_changed` notifications led to it).
    #[serde(rename = "catalog/changed")]
    CatalogChanged(CatalogChanged),
    /// A server reported progress on a tool call.
    #[serde(rename = "tools/progress")]
    ToolProgress(crate::tools::ToolProgress),
    /// A call waits for a person to confirm it (`confirmation/respond`); delivered to the
    /// calling session's subscribers and, for a derived session, its root's.
    #[serde(rename = "confirmation/requested")]
    ConfirmationRequested(crate::policy::ConfirmationRequested),
    /// A server asks the person behind a call to fill in a form or visit a URL (MCP
    /// elicitation); answered through `asks/respond` by a client listening for `elicitation`.
    #[serde(rename = "elicitation/requested")]
    ElicitationRequested(crate::mcp::ServerAsked),
    /// A server asks for a model's answer (MCP sampling); answered through `asks/respond` by a
    /// client listening for `sampling` (geminid never calls a model itself).
    #[serde(rename = "sampling/requested")]
    SamplingRequested(crate::mcp::ServerAsked),
    /// A hook ran for a session (in a call, or for `hooks/fire`).
    #[serde(rename = "hooks/ran")]
    HookRan(crate::hooks::HookRan),
    /// A server said a resource changed (`notifications/resources/updated`, for a subscription
    /// the gateway made for a client).
    #[serde(rename = "mcp/resourceUpdated")]
    ResourceUpdated(crate::mcp::ResourceUpdated),
    /// An extension's files no longer match its integrity record: it is not loaded.
    #[serde(rename = "extensions/tampered")]
    ExtensionTampered(crate::extensions::ExtensionTampered),
    /// A step of an extension's install or update.
    #[serde(rename = "extensions/progress")]
    ExtensionProgress(crate::extensions::ExtensionProgress),
    /// What a session's skills are changed (a `SKILL.md` edited, added or removed, an
    /// override, `skills.disabled`): its `skills/prompt` is different now.
    #[serde(rename = "skills/changed")]
    SkillsChanged(crate::skills::SkillsChanged),
    /// A session's slash commands are different now (a command file added, edited or
    /// removed; a skill or prompt that became one): fetch `commands/list` again.
    #[serde(rename = "commands/changed")]
    CommandsChanged(crate::commands::CommandsChanged),
    /// A session's custom tools were discovered (its first need, a changed
    /// `tools.discoveryCommand`, or `tools/refresh`): fetch `tools/list` again.
    #[serde(rename = "tools/discovered")]
    ToolsDiscovered(crate::tools::ToolsDiscovered),
    /// A server's definitions differ from their pins (changed or new: held until accepted,
    /// or said where its pinning is `warn`), or differ no longer.
    #[serde(rename = "mcp/toolsChanged")]
    ToolsChanged(crate::pins::ToolsChanged),
}

/// Payload of `daemon/shuttingDown`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ShuttingDown {
    /// Why: `signal SIGTERM`, `signal SIGINT` or `daemon/shutdown`.
    pub reason: String,
}

impl EventBody {
    /// The kind string as it appears on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SessionCreated(_) => "session/created",
            Self::SessionAttached(_) => "session/attached",
            Self::SessionDetached(_) => "session/detached",
            Self::SessionClosed(_) => "session/closed",
            Self::DaemonShuttingDown(_) => "daemon/shuttingDown",
            Self::ConfigChanged(_) => "config/changed",
            Self::McpServerState(_) => "mcp/serverState",
            Self::CatalogChanged(_) => "catalog/changed",
            Self::ToolProgress(_) => "tools/progress",
            Self::ConfirmationRequested(_) => "confirmation/requested",
            Self::ElicitationRequested(_) => "elicitation/requested",
            Self::SamplingRequested(_) => "sampling/requested",
            Self::HookRan(_) => "hooks/ran",
            Self::ResourceUpdated(_) => "mcp/resourceUpdated",
            Self::ExtensionTampered(_) => "extensions/tampered",
            Self::ExtensionProgress(_) => "extensions/progress",
            Self::SkillsChanged(_) => "skills/changed",
            Self::CommandsChanged(_) => "commands/changed",
            Self::ToolsDiscovered(_) => "tools/discovered",
            Self::ToolsChanged(_) => "mcp/toolsChanged",
        }
    }

    /// The session this event is about; `None` for daemon-wide events.
    ///
    /// (Also where a new kind must be added to [`KINDS`]: `kind()` above names each.)
    pub fn session(&self) -> Option<&SessionId> {
        match self {
            Self::SessionCreated(s)
            | Self::SessionAttached(s)
            | Self::SessionDetached(s)
            | Self::SessionClosed(s) => Some(&s.id),
            Self::ConfigChanged(c) => Some(&c.session),
            Self::ToolProgress(p) => Some(&p.session),
            Self::ConfirmationRequested(c) => Some(&c.session),
            Self::ElicitationRequested(a) | Self::SamplingRequested(a) => Some(&a.session),
            Self::HookRan(h) => Some(&h.session),
            Self::ExtensionProgress(p) => Some(&p.session),
            Self::SkillsChanged(c) => Some(&c.session),
            Self::CommandsChanged(c) => Some(&c.session),
            Self::ToolsDiscovered(d) => Some(&d.session),
            Self::DaemonShuttingDown(_)
            | Self::McpServerState(_)
            | Self::CatalogChanged(_)
            | Self::ToolsChanged(_)
            | Self::ResourceUpdated(_)
            | Self::ExtensionTampered(_) => None,
        }
    }

    /// Whether a subscriber filtering on `session` gets this event: events about it, events
    /// about a server it uses, and daemon-wide events.
    pub fn concerns(&self, session: &str) -> bool {
        match self {
            Self::McpServerState(s) => s.server.sessions.iter().any(|id| id == session),
            Self::CatalogChanged(c) => c.sessions.iter().any(|id| id == session),
            Self::ToolsChanged(c) => c.sessions.iter().any(|id| id == session),
            Self::ConfirmationRequested(c) => c.session == session || c.to == session,
            other => other.session().is_none_or(|id| id == session),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_matches_serialized_tag() {
        let body = EventBody::DaemonShuttingDown(ShuttingDown { reason: "test".into() });
        let ev = Event { seq: 1, timestamp: "t".into(), body };
        let json = serde_json::to_value(&ev).unwrap_or_default();
        assert_eq!(json["kind"], ev.body.kind());
        assert_eq!(json["payload"]["reason"], "test");
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, ev);
    }
}

/// `events/subscribe`: every field optional.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EventsSubscribeParams {
    /// Only events about this session (daemon-wide events are always delivered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// Only these kinds (e.g. `["session/closed"]`); absent means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
}
