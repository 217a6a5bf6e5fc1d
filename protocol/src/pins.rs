//! Tool-definition pins (`mcp/review`, `mcp/accept`, `mcp/reject`, the `mcp/toolsChanged`
//! event): the first catalog a server lists is pinned (each tool's, prompt's and resource
//! template's canonical form, hashed and signed); a later definition that differs, or one that
//! is new, is held (not offered to any session) until it is accepted.

use serde::{Deserialize, Serialize};

use crate::common::SessionId;
use crate::mcp::ServerParams;

/// What the daemon does when a server's definitions differ from their pins (the daemon's
/// `--tool-pinning`, or a server's `pinning` in geminid's own `servers.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum PinMode {
    /// Pin on first use; hold a changed or new definition until it is accepted.
    #[default]
    Enforce,
    /// Pin on first use; say when a definition changed, but offer it.
    Warn,
    /// No pins.
    Off,
}

impl PinMode {
    /// As it is written in settings and flags.
    pub fn label(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Warn => "warn",
            Self::Off => "off",
        }
    }
}

/// A character a reader does not see ([`crate::text::invisible`], by Unicode property).
pub use crate::text::invisible;

/// What kind of definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum DefinitionKind {
    /// A tool (by its name).
    Tool,
    /// A prompt (by its name).
    Prompt,
    /// A resource template (by its `uriTemplate`).
    ResourceTemplate,
}

impl DefinitionKind {
    /// In words.
    pub fn label(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::ResourceTemplate => "resource template",
        }
    }
}

/// How a definition differs from its pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// It was not there when the server was pinned.
    New,
    /// Its canonical form differs from the pinned one.
    Changed,
    /// The server's pin record failed its check (it does not verify under the integrity key,
    /// does not parse, cannot be read, or is gone from the store): nothing of it is taken as
    /// pinned.
    Unverified,
}

impl Change {
    /// In words.
    pub fn label(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Changed => "changed",
            Self::Unverified => "pins unverified",
        }
    }
}

/// One definition that differs from its pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HeldDefinition {
    /// What it is.
    pub kind: DefinitionKind,
    /// Its name (a template's `uriTemplate`).
    pub name: String,
    /// How it differs.
    pub change: Change,
    /// Held: not offered to any session, calls refused (`toolHeld`). False where the server's
    /// pinning is `warn` or it has `trust: true`: it is offered, and said.
    pub held: bool,
    /// Someone looked and said no (`mcp/reject`); it stays held.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rejected: bool,
}

/// A server's pins as `mcp/listServers` shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PinStatus {
    /// Its pinning (`trust: true` makes `enforce` a `warn`).
    pub mode: PinMode,
    /// Definitions pinned.
    pub pinned: u32,
    /// When they were first pinned (milliseconds since the epoch).
    pub since_ms: u64,
    /// They were pinned by this daemon run, on first use (trust on first use).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub first_use: bool,
    /// What differs from the pins, in the server's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differs: Vec<HeldDefinition>,
}

/// What kind of artifact a local server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ArtifactKind {
    /// A package from an npm registry, run by `npx` or `npm exec`.
    Npm,
    /// A package from a Python package index (PEP 503 / PEP 691), run by `uvx`, `uv tool
    /// run` or `pipx run`: its exact version and its distribution file's `sha256:<hex>`.
    Pypi,
    /// Any other command: the executable file (and a script's `#!` interpreter).
    Executable,
}

/// What a local server runs: recorded on its first start, compared at every later one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// What it is.
    pub kind: ArtifactKind,
    /// The package's name, or the executable's path.
    pub name: String,
    /// The package's exact version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The package's `dist.integrity` (`sha512-…`), or the file's `sha256:<hex>`.
    pub digest: String,
    /// When the registry says this version was published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
    /// A script's interpreter (its `#!` line's program, found on `PATH` for `env`), with its
    /// `sha256:<hex>`: `/usr/bin/python3 sha256:…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<String>,
}

/// A local server's artifact pin as `mcp/listServers` and `mcp/review` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ArtifactStatus {
    /// Its artifact pinning (`trust: true` makes `enforce` a `warn`).
    pub mode: PinMode,
    /// What was recorded (absent before its first start, or when the record failed its
    /// check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Artifact>,
    /// What it resolves to now, when that differs from `pinned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub differs: Option<Artifact>,
    /// It is held: not started until `gemctl mcp accept` (`differs` is set, or the record
    /// failed its check, and the pinning is `enforce`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    /// It was recorded by this daemon run, on first start (trust on first use).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub first_use: bool,
    /// Why it could not be resolved, recorded or checked, when that is so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The newest release `mcp/update` found, not taken yet: `mcp/accept` records it and
    /// restarts the server on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered: Option<Artifact>,
}

/// `mcp/toolsChanged`: a server listed definitions that differ from their pins (on a
/// reconnect, a `list_changed`, a `ttlMs` relist, a daemon restart), or differs no longer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsChanged {
    /// The server's name.
    pub server: String,
    /// The first 12 hex digits of its identity.
    pub identity: String,
    /// The sessions using it.
    pub sessions: Vec<SessionId>,
    /// What differs now (empty: everything is as pinned again).
    pub differs: Vec<HeldDefinition>,
}

/// `mcp/review`'s answer for one definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReviewItem {
    /// What differs.
    #[serde(flatten)]
    pub definition: HeldDefinition,
    /// The pinned canonical form (absent for a new one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<serde_json::Value>,
    /// The canonical form the server lists now.
    pub listed: serde_json::Value,
    /// What a reader may miss in the listed text: invisible characters (zero-width, bidi
    /// controls), HTML comments, ANSI escapes; one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
}

/// Result of `mcp/review`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReviewResult {
    /// The server's name.
    pub server: String,
    /// Its pinning.
    pub mode: PinMode,
    /// Each definition that differs from its pin.
    pub items: Vec<ReviewItem>,
    /// Names exactly what these items show (each definition's kind, name and listed form):
    /// `mcp/accept` given it pins only what this review showed (empty: nothing differs).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// Why nothing of the server counts as pinned, when its pin record failed its check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Its artifact pin, when what it runs is recorded or differs (`differs`: old → new).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactStatus>,
}

/// `mcp/accept` and `mcp/reject`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PinsParams {
    /// Which server.
    #[serde(flatten)]
    pub server: ServerParams,
    /// Which of its differing definitions, by name; empty: all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// `mcp/accept` only: the `digest` of the `mcp/review` the person read. The accept is
    /// refused (`toolHeld`: it stays held) when a definition to pin is listed otherwise than
    /// that review showed it. Without it, the accept is refused when one is listed otherwise
    /// than the server's last review showed it, and pins what a review shows now when there
    /// was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Result of `mcp/accept` and `mcp/reject`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PinsResult {
    /// The server's name.
    pub server: String,
    /// The definitions pinned anew (accept) or marked rejected (reject).
    pub done: Vec<String>,
    /// What still differs.
    pub differs: Vec<HeldDefinition>,
    /// An accept without a digest, of a server no review was asked of: what was pinned is
    /// what `mcp/review` would have shown, unseen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unreviewed: bool,
}

/// `mcp/update`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UpdateParams {
    /// Which server.
    #[serde(flatten)]
    pub server: ServerParams,
    /// Take the newest release at once (record it and restart the server on it), as
    /// `mcp/accept` after the review would.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub yes: bool,
}

/// Result of `mcp/update`: the server's recorded artifact and the newest release, old → new.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UpdateResult {
    /// The server's name.
    pub server: String,
    /// What is recorded now (absent when nothing is recorded that verifies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Artifact>,
    /// The newest release: for an npm package, what the registry resolves its entry's spec
    /// to now (the `latest` dist-tag for a bare name); for an executable, the file as it is
    /// now.
    pub newest: Artifact,
    /// The recorded artifact is the newest: nothing to take.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub current: bool,
    /// It was taken (`yes`): recorded, and the server restarted on it. Otherwise it is
    /// offered: `mcp/review` shows it and `mcp/accept` takes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accepted: bool,
}
