//! `hooks/*`: the session's hooks, and firing the events the agent front-end owns.

use serde::{Deserialize, Serialize};

use crate::common::SessionId;

/// `hooks/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HooksListParams {
    /// The session.
    pub session: SessionId,
}

/// One registered hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HookEntry {
    /// Its event (`BeforeTool`, ...).
    pub event: String,
    /// Its name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its command line.
    pub command: String,
    /// `project` (every settings scope) or `extensions`.
    pub source: String,
    /// Its definition's matcher, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// Its definition runs its event's hooks one after the other.
    pub sequential: bool,
    /// Not disabled by `hooksConfig.disabled`.
    pub enabled: bool,
    /// Its timeout in milliseconds.
    pub timeout_ms: u64,
    /// Where it is written.
    pub at: String,
    /// The settings file's scope it is written in (`user`, `workspace`, `system`,
    /// `system-defaults`), or `extension NAME` (`source` is Gemini CLI's tag, `project` for
    /// every settings file).
    #[serde(default)]
    pub scope: String,
}

/// `hooks/list`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HooksListResult {
    /// `hooksConfig.enabled` (false: no hook runs).
    pub enabled: bool,
    /// Every hook, in the order its event runs them.
    pub hooks: Vec<HookEntry>,
    /// Problems in the configuration, each naming where it is.
    pub warnings: Vec<String>,
    /// The one-time warning about project hooks this workspace's settings added since the
    /// user was last told (Gemini CLI's `trusted_hooks.json`); carried by the first answer only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// `hooks/fire`: an event the front-end owns (not `BeforeTool`/`AfterTool`, which `tools/call`
/// fires).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HooksFireParams {
    /// The session.
    pub session: SessionId,
    /// The event (`BeforeAgent`, `SessionStart`, ...).
    pub event: String,
    /// The event's own fields (`prompt`, `source`, `llm_request`, ...); the daemon adds
    /// `session_id`, `cwd`, `hook_event_name` and `timestamp` (and `transcript_path` when
    /// absent).
    #[serde(default)]
    pub input: serde_json::Map<String, serde_json::Value>,
}

/// One hook's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HookRun {
    /// Its name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its command line.
    pub command: String,
    /// `project` or `extensions`.
    pub source: String,
    /// How long it ran.
    pub duration_ms: u64,
    /// Its exit code (a signal reads as 0, as in Gemini CLI); absent when it did not run or
    /// timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Exit code 0.
    pub success: bool,
    /// What it decided, if it said anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Map<String, serde_json::Value>>,
    /// The end of its stderr (at most 2 KiB).
    pub stderr_tail: String,
    /// Why it failed to run: timed out, could not start, refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What else to know (an output stream was cut).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `hooks/fire`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HooksFireResult {
    /// Every hook's output as one (Gemini CLI's aggregation for the event); absent when no
    /// hook said anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregated: Option<serde_json::Map<String, serde_json::Value>>,
    /// No hook failed to run.
    pub success: bool,
    /// Each hook's run, in the order they were planned.
    pub hooks: Vec<HookRun>,
    /// The one-time warning about project hooks this workspace's settings added since the
    /// user was last told (Gemini CLI's `trusted_hooks.json`); carried by the first answer only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// Payload of `hooks/ran`: a hook ran for a session (its output is not in the event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HookRan {
    /// The session.
    pub session: SessionId,
    /// The event.
    pub event: String,
    /// The hook's name, or its command.
    pub hook: String,
    /// `project` or `extensions`.
    pub source: String,
    /// How long it ran.
    pub duration_ms: u64,
    /// Its exit code, when it ran to the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Exit code 0.
    pub success: bool,
    /// Why it failed to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `hooks/enable` and `hooks/disable`: `hooksConfig.disabled` in one settings file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HooksEnableParams {
    /// The session (its workspace, for the project scope).
    pub session: SessionId,
    /// The hook's name, or its command when it has none (as `hooks/list` shows it).
    pub name: String,
    /// The settings file to write (default `user`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<crate::config::WriteScope>,
}

/// `hooks/enable` and `hooks/disable`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HooksEnableResult {
    /// The file written.
    pub file: String,
    /// Its `hooksConfig.disabled` now.
    pub disabled: Vec<String>,
    /// Other files that still disable it (the lists of every scope are joined).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub still_disabled_in: Vec<String>,
}

/// `hooks/migrate`: Claude Code's hooks in the session's workspace (`.claude/settings.json`,
/// then `.claude/settings.local.json`) added to its `.gemini/settings.json`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HooksMigrateParams {
    /// The session (its workspace holds both files).
    pub session: SessionId,
    /// Say what would be written, and write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// `hooks/migrate`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HooksMigrateResult {
    /// The Claude Code files read.
    pub sources: Vec<String>,
    /// The settings file written (or that would be).
    pub file: String,
    /// The hooks as Gemini CLI's, by event (what was migrated, before merging).
    pub hooks: serde_json::Map<String, serde_json::Value>,
    /// The events whose definitions in `file` changed (definitions already there are not
    /// added again).
    pub changed: Vec<String>,
    /// What was left out or needs a look.
    pub notes: Vec<String>,
    /// The file was written (false on a dry run, or when nothing changed).
    pub written: bool,
}
