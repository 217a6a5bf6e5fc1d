//! `tools/*`: a session's MCP tools as Gemini sees them, and calls.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::types::SessionId;

/// `tools/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsListParams {
    /// The session (its servers are started if it had not asked for them yet).
    pub session: SessionId,
    /// Also return each tool's MCP object as the server listed it.
    #[serde(default)]
    pub raw: bool,
}

/// One tool in a session's catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    /// Its fully qualified name (`mcp_{server}_{tool}`, made valid and unique).
    pub name: String,
    /// The server's name in the session's settings.
    pub server: String,
    /// The tool's own name on the server.
    pub tool: String,
    /// The Gemini `FunctionDeclaration`: `{name, description, parametersJsonSchema}`.
    pub declaration: Value,
    /// The MCP `Tool` object (with `raw: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
}

/// Result of `tools/list`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsListResult {
    /// Tools ordered by server name, then as the server listed them.
    pub tools: Vec<ToolEntry>,
    /// What a user should know: name collisions and how they were resolved, servers whose
    /// tools are missing because they are not connected, schemas that cannot be compiled.
    pub diagnostics: Vec<String>,
}

/// `tools/call`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsCallParams {
    /// The session.
    pub session: SessionId,
    /// The tool's fully qualified name, as `tools/list` gives it.
    pub name: String,
    /// Its arguments (validated against its input schema first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
}

/// Result of `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsCallResult {
    /// The fully qualified name called.
    pub name: String,
    /// The server's name.
    pub server: String,
    /// The tool's own name.
    pub tool: String,
    /// The tool reported an error (`isError`).
    pub is_error: bool,
    /// The MCP `CallToolResult` as the server sent it.
    pub result: Value,
    /// Its content as Gemini `Part`s (text wrapped as untrusted context, inline data, ...).
    pub parts: Vec<Value>,
    /// The `functionResponse` part to send to the model.
    pub function_response: Value,
    /// What a user interface shows.
    pub display: String,
}
