//! `commands/*`: the slash commands a front-end offers: custom commands from `.toml` files, MCP
//! prompts and skills, named after Gemini CLI's conflict rules.

use serde::{Deserialize, Serialize};

use crate::common::{Diagnostic, SessionId};

/// Where a slash command comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum CommandKind {
    /// The front-end's own (named in `commands/list`'s `builtIns`).
    BuiltIn,
    /// A skill (`/name` activates it).
    Skill,
    /// An MCP server's prompt.
    McpPrompt,
    /// A `.toml` file in `~/.gemini/commands`.
    UserFile,
    /// A `.toml` file in the workspace's `.gemini/commands`.
    WorkspaceFile,
    /// A `.toml` file in an enabled extension's `commands/`.
    ExtensionFile,
}

/// `commands/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandsListParams {
    /// The session.
    pub session: SessionId,
    /// The front-end's own command names: they keep their names in a conflict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub built_ins: Vec<String>,
}

/// One slash command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandInfo {
    /// Its name after the conflict rules (`git:commit`, `user.deploy`, `ext:skill`).
    pub name: String,
    /// The name it asked for, when it was renamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
    /// Its description.
    pub description: String,
    /// Where it comes from.
    pub kind: CommandKind,
    /// Its file (file commands) or `SKILL.md` (skills).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    /// Its MCP server (prompts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// A name two commands claimed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandConflict {
    /// The name claimed.
    pub name: String,
    /// What the one that lost it is called now.
    pub renamed_to: String,
    /// The kind of the one renamed.
    pub loser_kind: CommandKind,
    /// The kind of the one that caused it.
    pub winner_kind: CommandKind,
}

/// Result of `commands/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandsListResult {
    /// Every command but the built-ins, by name.
    pub commands: Vec<CommandInfo>,
    /// Names claimed twice and what became of them.
    pub conflicts: Vec<CommandConflict>,
    /// Command files that did not load; an untrusted workspace's commands skipped.
    pub diagnostics: Vec<Diagnostic>,
}

/// `commands/expand`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandsExpandParams {
    /// The session.
    pub session: SessionId,
    /// The command, as `commands/list` names it (without `/`).
    pub name: String,
    /// What the person typed after the name.
    #[serde(default)]
    pub args: String,
    /// The person confirmed the shell commands it runs (`needsConfirmation` of an earlier
    /// answer).
    #[serde(default)]
    pub confirmed: bool,
    /// A person is there to be asked: decided as for an interactive session, and what policy
    /// asks about comes back in `needsConfirmation` (with `asks`) instead of being refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interactive: bool,
}

/// A shell command policy asks about, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ShellAsk {
    /// The command, `{{args}}` substituted.
    pub command: String,
    /// Why it is asked about, and how to run it.
    pub reason: String,
}

/// A shell command an expansion ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ShellRun {
    /// The command, `{{args}}` substituted.
    pub command: String,
    /// Its exit code (absent: killed by a signal, or stopped at the time limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Bytes of output it gave.
    pub output_bytes: u64,
}

/// A tool the front-end calls for the command (a skill: `activate_skill`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolRequest {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub args: serde_json::Map<String, serde_json::Value>,
}

/// Result of `commands/expand`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandsExpandResult {
    /// The text to send to the model (empty while `needsConfirmation` is not).
    pub text: String,
    /// A tool to call first (skills), then send `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolRequest>,
    /// Shell commands policy asks a person to confirm: nothing ran; call again with
    /// `confirmed` once they are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs_confirmation: Vec<String>,
    /// Each of `needsConfirmation` with why it is asked about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asks: Vec<ShellAsk>,
    /// The shell commands that ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ran: Vec<ShellRun>,
    /// What could not be included (an `@{path}` outside the workspace or missing: its
    /// placeholder is left in the text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Event `commands/changed`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandsChanged {
    /// The session.
    pub session: SessionId,
    /// Commands that came, went, or changed (description, source), by name.
    pub changed: Vec<String>,
}
