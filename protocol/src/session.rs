//! `session/*`: sessions, their attachments and their state.

use serde::{Deserialize, Serialize};

use crate::common::{ClientEnv, SessionId};
use crate::policy::ApprovalMode;

/// `session/create`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionCreateParams {
    /// Absolute path of the workspace directory; it must exist.
    pub workspace: String,
    /// The client's environment, used for `${VAR}` expansion and as the inherited environment
    /// of the session's stdio servers. Memory only. Absent: the daemon's own environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<ClientEnv>,
    /// Give `env` only to a session that has none yet (created now, or given none since the
    /// daemon started); one it has stays. `gemctl mcp serve` asks this: an MCP client starts it
    /// with the client's own, often trimmed, environment, which must not replace the one the
    /// session's servers were started with.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub env_if_unset: bool,
    /// Return the workspace's default session (creating it if there is none) instead of a new
    /// one. This is what `gemctl` does when no `--session` is given.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reuse_default: bool,
    /// The session's approval mode (default `default`). With `reuseDefault`, it is set on the
    /// default session only when the session is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_mode: Option<ApprovalMode>,
    /// Whether the session is interactive (a person answers its confirmations) whatever its
    /// clients say. Absent: interactive while a client attached to it listens for
    /// confirmations (`asks/listen`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive: Option<bool>,
    /// What the session's MCP servers are told its clients can answer. Absent: everything
    /// geminid routes (the default). With `reuseDefault`, the workspace's default session for
    /// clients that declare exactly this (`gemctl mcp serve` over stdio asks for its client's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Declares>,
}

/// What an MCP client declares it answers among what servers may ask (its `initialize`
/// capabilities): the session's servers are told the same, so they list the tools they list
/// for such a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Declares {
    /// It answers elicitations.
    pub elicitation: bool,
    /// It answers sampling requests.
    pub sampling: bool,
}

impl Declares {
    /// Everything geminid routes: what servers are told by default.
    pub const ALL: Self = Self { elicitation: true, sampling: true };

    /// Whether this is [`Declares::ALL`].
    pub fn is_all(&self) -> bool {
        *self == Self::ALL
    }

    /// What an MCP `initialize` request's `capabilities` declare.
    pub fn of_capabilities(capabilities: &serde_json::Value) -> Self {
        let has = |k: &str| capabilities.get(k).is_some_and(|v| !v.is_null());
        Self { elicitation: has("elicitation"), sampling: has("sampling") }
    }

    /// How it is shown: `all`, or what is left out (`no elicitation, no sampling`).
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        if !self.elicitation {
            out.push("no elicitation");
        }
        if !self.sampling {
            out.push("no sampling");
        }
        match out.is_empty() {
            true => "all".into(),
            false => out.join(", "),
        }
    }
}

impl Default for Declares {
    fn default() -> Self {
        Self::ALL
    }
}

/// `session/update`: change a session's approval mode or interactivity; absent fields stay.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionUpdateParams {
    /// The session.
    pub id: SessionId,
    /// The new approval mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_mode: Option<ApprovalMode>,
    /// Interactive (or headless) whatever its clients say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive: Option<bool>,
    /// Interactive again while a client listens for confirmations (drops `interactive`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interactive_auto: bool,
}

/// `session/derive`: a subagent's session under a parent session.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionDeriveParams {
    /// The parent session (itself derived or not).
    pub parent: SessionId,
    /// The subagent's name: rules with `subagent = "name"` apply to its calls, and its
    /// confirmations are labelled `parent/name`.
    pub name: String,
    /// The only tools it sees, by their names in the parent's table (absent: all of them);
    /// a name ending in `*` stands for every tool it begins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// An agent definition the parent's session sees (`agents/list`): its tools are taken
    /// when `tools` is absent, and `name` may be left empty to take its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// `session/attach`: attach an existing session to this connection.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionAttachParams {
    /// The session.
    pub id: SessionId,
    /// The client's environment, as in `session/create`; it replaces the one held before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<ClientEnv>,
}

/// Methods that name one session: `session/get`, `session/detach`, `session/close`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionIdParams {
    /// The session.
    pub id: SessionId,
}

/// `session/list`: every field optional.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionListParams {
    /// Only sessions of this workspace (absolute path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Continue after this cursor (a `nextCursor` from the previous page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Page size; default and maximum [`SESSION_LIST_MAX_PAGE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Result of `session/list`, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionListResult {
    /// This page.
    pub sessions: Vec<Session>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Where a session's environment comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum EnvSource {
    /// A client sent its environment (held in memory).
    Client,
    /// No client sent one since the daemon started: the daemon's own is used.
    Daemon,
}

/// A session: one agent front-end's view of the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// Its id.
    pub id: SessionId,
    /// Canonical absolute path of its workspace.
    pub workspace: String,
    /// Whether it is its workspace's default session.
    pub is_default: bool,
    /// When it was created (RFC 3339, UTC).
    pub created_at: String,
    /// When a client last created, attached or detached it (RFC 3339, UTC).
    pub last_seen_at: String,
    /// Connections attached to it now.
    pub attached_connections: u32,
    /// Where its environment comes from (the values are never returned).
    pub env_source: EnvSource,
    /// The names of the variables its environment holds (a client's), sorted; never their
    /// values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_keys: Vec<String>,
    /// When a client gave the environment it holds (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_since: Option<String>,
    /// The environment came from an MCP client (`gemctl mcp serve`, started with the client's
    /// own, often trimmed, environment) rather than from a `gemctl` command or an editor.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub env_from_mcp_client: bool,
    /// Whether a client attached to it (or to the session its confirmations go to) listens
    /// for confirmations now; `session/get` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listening: Option<bool>,
    /// Session-scoped overrides.
    pub state: SessionState,
}

/// Session-scoped state that survives restarts. Later subsystems add their parts here.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct SessionState {
    /// MCP servers disabled for this session only.
    pub disabled_servers: Vec<String>,
    /// Tool calls approved for the rest of this session ("always allow").
    pub approvals: Vec<String>,
    /// Skills activated in this session.
    pub activated_skills: Vec<String>,
    /// Folders the session may read beyond its workspace: each activated skill's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_paths: Vec<String>,
    /// Its approval mode.
    pub approval_mode: ApprovalMode,
    /// Interactive (or headless) whatever its clients say; absent: interactive while a client
    /// attached to it listens for confirmations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interactive: Option<bool>,
    /// For a derived (subagent) session: where it sits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derived: Option<Derived>,
    /// What its servers are told its clients answer; absent: everything (see
    /// [`SessionCreateParams::upstream`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<Declares>,
}

/// A derived session's place under its parent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Derived {
    /// The parent session.
    pub parent: SessionId,
    /// The session at the top of the chain, whose clients answer its confirmations.
    pub root: SessionId,
    /// The subagent's name.
    pub name: String,
    /// Its path label: the root's id, then each subagent's name (`s-1/researcher/reader`).
    pub path: String,
    /// The only tools it sees (absent: all of its parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// Largest `session/list` page.
pub const SESSION_LIST_MAX_PAGE: u32 = 500;
