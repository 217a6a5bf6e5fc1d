//! Hooks, as Gemini CLI runs them (COMPAT §4): programs a user configures to stop, rewrite or
//! annotate work at lifecycle boundaries.
//!
//! - [`registry`]: the hooks of a session (merged settings, then extensions), validated, with
//!   `hooksConfig` applied and every problem said;
//! - [`plan`]: which hooks an event runs (matchers, de-duplication, sequential or parallel);
//! - [`run`]: one hook's process (`bash -c`, stdin JSON, timeout, bounded output) and what its
//!   output means by exit code;
//! - [`aggregate`]: the outputs of an event's hooks as one, per event family;
//! - [`exec`]: a plan run in parallel or in sequence (each hook's changes passed on), then
//!   aggregated.

pub(crate) mod aggregate;
pub(crate) mod exec;
pub(crate) mod migrate;
pub(crate) mod plan;
pub(crate) mod registry;
pub(crate) mod run;
pub(crate) mod trusted;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The eleven events (Gemini CLI's `HookEventName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum HookEvent {
    /// Before a tool runs (before the policy check).
    BeforeTool,
    /// After a tool ran.
    AfterTool,
    /// Before the agent handles a prompt.
    BeforeAgent,
    /// After the agent answered.
    AfterAgent,
    /// A notification (a tool waiting for permission).
    Notification,
    /// A session started.
    SessionStart,
    /// A session ended.
    SessionEnd,
    /// Before the history is compressed.
    PreCompress,
    /// Before a model request.
    BeforeModel,
    /// After a model response.
    AfterModel,
    /// Before the model is told which tools it may call.
    BeforeToolSelection,
}

impl HookEvent {
    /// Every event.
    pub const ALL: [Self; 11] = [
        Self::BeforeTool,
        Self::AfterTool,
        Self::BeforeAgent,
        Self::AfterAgent,
        Self::Notification,
        Self::SessionStart,
        Self::SessionEnd,
        Self::PreCompress,
        Self::BeforeModel,
        Self::AfterModel,
        Self::BeforeToolSelection,
    ];

    /// Its name in settings files.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::BeforeTool => "BeforeTool",
            Self::AfterTool => "AfterTool",
            Self::BeforeAgent => "BeforeAgent",
            Self::AfterAgent => "AfterAgent",
            Self::Notification => "Notification",
            Self::SessionStart => "SessionStart",
            Self::SessionEnd => "SessionEnd",
            Self::PreCompress => "PreCompress",
            Self::BeforeModel => "BeforeModel",
            Self::AfterModel => "AfterModel",
            Self::BeforeToolSelection => "BeforeToolSelection",
        }
    }

    /// The event a settings key names (exactly: `beforeTool` or Claude's `PreToolUse` are
    /// not events).
    pub(crate) fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    /// How its matcher is read: against a tool's name (a regular expression), against the
    /// event's trigger (exactly), or not at all.
    pub(crate) fn matcher_kind(self) -> MatcherKind {
        match self {
            Self::BeforeTool | Self::AfterTool => MatcherKind::ToolName,
            Self::SessionStart | Self::SessionEnd | Self::PreCompress => MatcherKind::Trigger,
            _ => MatcherKind::None,
        }
    }
}

/// How an event's matchers are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatcherKind {
    /// An unanchored regular expression over the tool's name (an invalid one is compared
    /// literally).
    ToolName,
    /// Exactly the trigger (`startup`, `exit`, `manual`, ...).
    Trigger,
    /// Matchers are ignored.
    None,
}

/// Where a hook comes from, in the order Gemini CLI runs sources (lower first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HookSource {
    /// Every settings scope (Gemini CLI tags all merged settings hooks `Project`).
    Project = 1,
    /// An enabled extension's `hooks/hooks.json`.
    Extensions = 4,
}

/// One command hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookCommand {
    /// Its name (optional in settings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The command line, run by `bash -c`.
    pub command: String,
    /// What it does, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How long it may run, in milliseconds.
    pub timeout_ms: u64,
    /// Variables added to its environment.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Where it comes from.
    pub source: HookSource,
}

/// The default `timeout`, in milliseconds.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 60_000;

impl HookCommand {
    /// The name `hooksConfig.disabled` and messages know it by: its name, else its command.
    pub(crate) fn label(&self) -> &str {
        self.name.as_deref().filter(|n| !n.is_empty()).unwrap_or(&self.command)
    }

    /// Gemini CLI's de-duplication key, `name:command`.
    pub(crate) fn key(&self) -> String {
        format!("{}:{}", self.name.as_deref().unwrap_or(""), self.command)
    }
}
