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
    /// The approval mode to decide in (default: the session's, as its calls are decided).
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
    /// The pattern the arguments' stable JSON form must match (a `commandPrefix` or
    /// `commandRegex` as the pattern it becomes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_pattern: Option<String>,
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

/// `policy/review` and `policy/accept`: the session's workspace policy folder.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyReviewParams {
    /// The session whose workspace it is.
    pub session: SessionId,
    /// `policy/accept` only: the digest `policy/review` showed; what changed since is refused
    /// (absent: what is there now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Where a workspace's policy files stand against what the user accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum WorkspacePolicyState {
    /// No policy files (or an untrusted folder, whose files are never read).
    None,
    /// Exactly the files accepted: loaded.
    Accepted,
    /// Never accepted: not loaded.
    New,
    /// Changed, added or removed since accepted: not loaded.
    Changed,
    /// The record of the acceptance fails its check (damaged, edited, or another key): not
    /// loaded.
    Unverified,
}

/// One workspace policy file in a review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkspacePolicyFile {
    /// Its name in the folder.
    pub name: String,
    /// `new`, `changed`, `same` or `removed`, against what was accepted.
    pub change: String,
}

/// `policy/review`'s and `policy/accept`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PolicyReviewResult {
    /// The workspace.
    pub workspace: String,
    /// Its policy folder.
    pub folder: String,
    /// Where it stands (after `policy/accept`: `accepted`).
    pub state: WorkspacePolicyState,
    /// Why, in words, with the command that changes it.
    pub reason: String,
    /// The files, by name.
    pub files: Vec<WorkspacePolicyFile>,
    /// The rules the files give (what accepting adds), in the order they are tried.
    pub rules: Vec<PolicyRuleEntry>,
    /// Problems in the files, and files refused (a link out of the folder).
    pub diagnostics: Vec<Diagnostic>,
    /// SHA-256 of the files as read (each name length-prefixed, each text by its SHA-256;
    /// not Gemini CLI's form, which is ambiguous); `policy/accept` takes it and refuses
    /// files that no longer digest to it.
    pub digest: String,
}

/// How long a person allowed a call for (`confirmation/respond`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ConfirmOutcome {
    /// This call only.
    Once,
    /// Calls to this tool, for the rest of the session (kept with the session).
    Session,
    /// Calls to this tool from now on: a rule in `~/.gemini/policies/auto-saved.toml`.
    Always,
    /// Refused.
    Deny,
}

/// Payload of `confirmation/requested`: a call waits for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConfirmationRequested {
    /// Its id, for `confirmation/respond` (the same as its ask's).
    pub id: String,
    /// The session calling (a derived session's own id).
    pub session: SessionId,
    /// The session whose clients answer: the calling session, or the root of a derived one.
    pub to: SessionId,
    /// The calling session's path label (`s-1/researcher`); the session id when not derived.
    pub path: String,
    /// The tool's fully qualified name.
    pub tool: String,
    /// Its server.
    pub server: String,
    /// The arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Map<String, serde_json::Value>>,
    /// The question, and why it is asked.
    pub details: String,
    /// When it is denied unanswered (milliseconds since the Unix epoch).
    pub deadline_ms: u64,
}

/// `confirmation/respond`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConfirmationRespondParams {
    /// The confirmation's id.
    pub id: String,
    /// The answer.
    pub outcome: ConfirmOutcome,
    /// Why (kept in the audit record; a denial's reason is told to the caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The session the answer is meant for: refused when the confirmation is another's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
}

/// `confirmation/respond`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConfirmationRespondResult {
    /// The session it was answered for.
    pub session: SessionId,
}

/// How the person answered a call's confirmation, in its audit record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum AuditConfirmation {
    /// Asked, and answered.
    Answered(ConfirmOutcome),
    /// Allowed by an earlier "session" or "always" answer.
    Remembered,
    /// The caller is the person (`gemctl call`): the call counts as confirmed.
    ByCaller,
    /// The gateway's client confirms calls itself (`gemctl mcp serve --confirm client`, as
    /// `gemctl mcp import` writes it for Gemini CLI): the call counts as confirmed by it.
    ByClient,
    /// Nobody answered before the deadline.
    TimedOut,
    /// Nobody could be asked (no interactive client).
    NoAnswerer,
    /// The client that was asked went before answering (the call is cancelled with it).
    AnswererGone,
}

/// Who ran a call's BeforeTool and AfterTool hooks, in its audit record (absent: geminid ran
/// every hook of the session that matched, as the record's error says when one blocked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum AuditHooks {
    /// The gateway's client runs the hooks it reads itself (`gemctl mcp serve --hooks
    /// client`, as `gemctl mcp import` writes it for Gemini CLI): geminid ran none of them,
    /// only the hooks of its own `servers.json`, if any matched.
    ByClient,
}

/// One call as the audit log keeps it. Argument values are not kept: their keys and a hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// Its number (grows with time).
    pub seq: u64,
    /// When the call started (RFC 3339, UTC).
    pub time: String,
    /// The session.
    pub session: SessionId,
    /// The tool's fully qualified name.
    pub tool: String,
    /// Its server.
    pub server: String,
    /// `tools/call` or `mcp/callTool`.
    pub origin: String,
    /// The argument names, sorted.
    pub arg_keys: Vec<String>,
    /// SHA-256 of the arguments' stable form (hex, first 16 bytes), to tell calls apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_hash: Option<String>,
    /// What policy decided (absent: the call ended before policy, e.g. a hook blocked it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<PolicyDecision>,
    /// The rule that decided (absent: the default, or no decision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<PolicyRuleSource>,
    /// How a confirmation went, when one was needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<AuditConfirmation>,
    /// Who ran the call's hooks, when not geminid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<AuditHooks>,
    /// How long the call took, in milliseconds.
    pub duration_ms: u64,
    /// Whether the tool answered without error.
    pub ok: bool,
    /// The error, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `audit/list`: every field optional.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditListParams {
    /// Only this session's calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// At most this many (default 50; a page holds at most 1,000, and `more` says whether
    /// older ones remain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Only records after this `seq`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// Only records before this `seq`: the next page, from the last `seq` of the one before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
}

/// `audit/list`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditListResult {
    /// Newest first.
    pub records: Vec<AuditRecord>,
    /// Older records than the last one match too (ask again with `before`).
    #[serde(default)]
    pub more: bool,
    /// How many records the log keeps; older ones are forgotten (0 from older daemons).
    #[serde(default)]
    pub keeps: u64,
}
