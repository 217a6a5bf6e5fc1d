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
