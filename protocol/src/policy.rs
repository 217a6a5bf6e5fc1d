//! `policy/*`: what the policy engine decides, asked without making a call.

use serde::{Deserialize, Serialize};

use crate::common::{Diagnostic, SessionId};

/// What a rule (or the default) decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PolicyDecision {
    /// Run it.
    Allow,
    /// Refuse it.
    Deny,
    /// Ask the person first.
    AskUser,
}

/// A session's approval mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ApprovalMode {
    /// Ask for what the rules do not allow.
    #[default]
    Default,
    /// Edits are allowed without asking.
    AutoEdit,
    /// Everything is allowed unless a rule denies it.
    Yolo,
    /// Read-only planning.
    Plan,
}

/// `policy/check`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyCheckParams {
    /// The session whose rules apply (its workspace, settings and trust).
    pub session: SessionId,
    /// The tool's name as the model calls it (`mcp_{server}_{tool}`, or a built-in such as
    /// `run_shell_command`).
    pub tool: String,
    /// The call's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    /// The MCP server, for an MCP tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// The approval mode to decide in (default: `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ApprovalMode>,
    /// Decide as for an interactive session or not (default: whether a client attached to the
    /// session listens for confirmations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive: Option<bool>,
    /// The subagent calling, if one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
}

/// Where a rule is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyRuleSource {
    /// The file, or `settings: <key>` for a rule settings imply.
    pub file: String,
    /// The rule's line in its file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// `default`, `extension`, `workspace`, `user` or `admin`.
    pub tier: String,
    /// Its priority as written (0–999).
    pub priority: u32,
    /// `tier + priority / 1000`: the higher wins.
    pub effective_priority: f64,
}

/// `policy/check`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyCheckResult {
    /// What would be decided.
    pub decision: PolicyDecision,
    /// The rule that decided it; absent when no rule matched (the default decided).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<PolicyRuleSource>,
    /// Why, in words (a deny rule's `denyMessage` included).
    pub reason: String,
}

/// `policy/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyListParams {
    /// The session whose rules are listed.
    pub session: SessionId,
    /// Only this tier's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
}

/// One rule as `policy/list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyRuleEntry {
    /// The tool name it matches (`*`, `mcp_*`, `mcp_{server}_*`, or a name).
    pub tool_name: String,
    /// Only this MCP server's tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_name: Option<String>,
    /// What it decides.
    pub decision: PolicyDecision,
    /// Only in these modes (empty: all).
    pub modes: Vec<ApprovalMode>,
    /// Only for interactive (or headless) sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactive: Option<bool>,
    /// It looks at the arguments (an `argsPattern`, `commandPrefix` or `commandRegex`).
    pub matches_args: bool,
    /// Only for this subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<String>,
    /// What a denial says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_message: Option<String>,
    /// Where it is written.
    pub source: PolicyRuleSource,
}

/// `policy/list`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyListResult {
    /// Every rule, in the order they are tried (highest effective priority first).
    pub rules: Vec<PolicyRuleEntry>,
    /// Problems in the policy files, errors first, with file, line and column.
    pub diagnostics: Vec<Diagnostic>,
}
