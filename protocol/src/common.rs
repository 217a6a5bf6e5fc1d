//! What every namespace uses: ids, scopes, diagnostics, the client environment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A session's id (a UUIDv7 string, so ids sort by creation time).
pub type SessionId = String;

/// Environment variables sent by a client. Held in the daemon's memory only, never persisted.
pub type ClientEnv = BTreeMap<String, String>;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    /// Applied anyway (e.g. an unknown field).
    Warning,
    /// Not applied (the file, or the part named, is ignored).
    Error,
}

/// One problem found in an input file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Diagnostic {
    /// Warning or error.
    pub severity: Severity,
    /// The file.
    pub file: String,
    /// 1-based line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// What is wrong and, where possible, how to fix it.
    pub message: String,
}

impl Diagnostic {
    /// An error about a whole file (no line or column).
    pub fn error(file: &std::path::Path, message: String) -> Self {
        Diagnostic {
            severity: Severity::Error,
            file: file.display().to_string(),
            line: None,
            column: None,
            message,
        }
    }
}

/// A settings scope, in merge order (later wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Scope {
    /// `system-defaults.json`.
    SystemDefaults,
    /// geminid's own servers file (`~/.gemini/geminid/servers.json`): servers moved behind
    /// the gateway by `gemctl mcp import`, which Gemini CLI does not read.
    Geminid,
    /// Antigravity CLI's user servers file, `~/.gemini/config/mcp_config.json` (its
    /// `mcpServers` only; below `~/.gemini/settings.json`).
    Antigravity,
    /// `~/.gemini/settings.json`.
    User,
    /// Antigravity CLI's workspace servers file, `<workspace>/.agents/mcp_config.json`
    /// (trusted folders only; below the workspace's settings).
    AntigravityWorkspace,
    /// `<workspace>/.gemini/settings.json` (trusted folders only).
    Workspace,
    /// The system `settings.json` (overrides everything).
    System,
    /// An installed extension's `gemini-extension.json` (its servers; a settings entry of
    /// the same name overrides it field by field).
    Extension,
}
