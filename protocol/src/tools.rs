//! `tools/*`: a session's MCP tools as Gemini sees them, and calls.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::common::SessionId;

/// `tools/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsListParams {
    /// The session (its servers are started if it had not asked for them yet).
    pub session: SessionId,
    /// Also return each tool's MCP object as the server listed it.
    #[serde(default)]
    pub raw: bool,
    /// Also the tools policy hides from the session (each with `hidden`, why): the view of a
    /// person managing servers, not of the model.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}

/// One tool in a session's catalog.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    /// Its fully qualified name (`mcp_{server}_{tool}`, made valid and unique).
    pub name: String,
    /// The server's name in the session's settings.
    pub server: String,
    /// The tool's own name on the server.
    pub tool: String,
    /// The Gemini `FunctionDeclaration`.
    pub declaration: FunctionDeclaration,
    /// The MCP `Tool` object (with `raw: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<serde_json::Value>"))]
    pub raw: Option<Box<RawValue>>,
    /// Why policy hides it from the session (only with `all: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<String>,
    /// Where it comes from: an MCP server (left out) or `discovered` (a custom tool of
    /// `tools.discoveryCommand`; `server` is empty, `tool` is its own name).
    #[serde(default, skip_serializing_if = "ToolKind::is_mcp")]
    pub kind: ToolKind,
}

/// Where a tool comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ToolKind {
    /// A tool of an MCP server.
    #[default]
    Mcp,
    /// A custom tool: declared by `tools.discoveryCommand`, run by `tools.callCommand`.
    Discovered,
}

impl ToolKind {
    /// An MCP server's tool.
    pub fn is_mcp(&self) -> bool {
        *self == Self::Mcp
    }
}

/// `tools/refresh`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsRefreshParams {
    /// The session.
    pub session: SessionId,
}

/// Result of `tools/refresh`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsRefreshResult {
    /// The discovery that just ran; absent when the session's settings have no
    /// `tools.discoveryCommand`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<ToolDiscovery>,
}

/// One run of a session's `tools.discoveryCommand`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolDiscovery {
    /// The command, as the settings give it.
    pub command: String,
    /// `tools.callCommand`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_command: Option<String>,
    /// The tools it declared (`discovered_tool_<name>`), in its order.
    pub tools: Vec<String>,
    /// Declarations it skipped, and why.
    pub problems: Vec<String>,
    /// Why it gave no tools, when it failed (it could not start, exited non-zero, was
    /// stopped at its deadline or its output limit, printed no JSON array).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long it ran.
    pub took_ms: u64,
    /// When it finished (RFC 3339).
    pub at: String,
}

/// Payload of the `tools/discovered` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsDiscovered {
    /// The session whose custom tools these are now.
    pub session: SessionId,
    /// The run.
    pub discovery: ToolDiscovery,
}

/// A Gemini `FunctionDeclaration` (the schema is kept as JSON text: it is passed through).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FunctionDeclaration {
    /// The tool's fully qualified name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its input schema, transformed as Gemini CLI does.
    #[cfg_attr(feature = "schema", schemars(with = "serde_json::Value"))]
    pub parameters_json_schema: Box<RawValue>,
}

impl PartialEq for FunctionDeclaration {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.description == other.description
            && self.parameters_json_schema.get() == other.parameters_json_schema.get()
    }
}

/// Result of `tools/list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsListResult {
    /// Tools ordered by server name, then as the server listed them.
    #[cfg_attr(feature = "schema", schemars(with = "Vec<ToolEntry>"))]
    pub tools: ToolList,
    /// What a user should know: name collisions and how they were resolved, servers whose
    /// tools are missing because they are not connected, schemas that cannot be compiled.
    pub diagnostics: Vec<String>,
}

/// The tools of a `tools/list` result: reads as a slice of [`ToolEntry`]. The daemon builds a
/// list once for every session configured alike and keeps it serialized too, so listing it
/// again does not serialize it again; on the wire it is a plain array either way.
#[derive(Clone, Default)]
pub struct ToolList {
    entries: Arc<[ToolEntry]>,
    json: Option<Arc<RawValue>>,
}

impl ToolList {
    /// A list of `entries`, serialized on demand.
    pub fn new(entries: Arc<[ToolEntry]>) -> Self {
        Self { entries, json: None }
    }

    /// A list with its serialized form: exactly `entries` as a JSON array.
    pub fn serialized(entries: Arc<[ToolEntry]>) -> Result<Self, serde_json::Error> {
        let json = serde_json::value::to_raw_value(&*entries)?;
        Ok(Self { entries, json: Some(Arc::from(json)) })
    }
}

impl std::ops::Deref for ToolList {
    type Target = [ToolEntry];
    fn deref(&self) -> &[ToolEntry] {
        &self.entries
    }
}

impl std::fmt::Debug for ToolList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.entries.fmt(f)
    }
}

impl FromIterator<ToolEntry> for ToolList {
    fn from_iter<I: IntoIterator<Item = ToolEntry>>(iter: I) -> Self {
        Self::new(iter.into_iter().collect())
    }
}

impl Serialize for ToolList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.json {
            Some(json) => json.serialize(s),
            None => self.entries.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ToolList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Arc::<[ToolEntry]>::deserialize(d).map(Self::new)
    }
}

/// `tools/call`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsCallParams {
    /// The session.
    pub session: SessionId,
    /// The tool's fully qualified name, as `tools/list` gives it.
    pub name: String,
    /// Its arguments (validated against its input schema first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
    /// An id the caller picks, to cancel the call (`tools/cancel`) and to match its
    /// `tools/progress` events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The caller is the person (as `gemctl call`): a call policy would ask about counts as
    /// confirmed (the audit record says so); deny rules still apply.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirmed: bool,
}

/// `tools/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsCancelParams {
    /// The session.
    pub session: SessionId,
    /// The `callId` the call was made with.
    pub call_id: String,
}

/// Result of `tools/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolsCancelResult {
    /// Whether a call with that id was running (it now fails with `cancelled`, and the server
    /// was sent `notifications/cancelled`).
    pub cancelled: bool,
}

/// Payload of the `tools/progress` event: a server's progress notification for a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolProgress {
    /// The session that made the call.
    pub session: SessionId,
    /// The call's `callId`, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool's fully qualified name.
    pub name: String,
    /// Progress so far.
    pub progress: f64,
    /// The total, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// The server's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Result of `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// The `seq` of the last `tools/progress` event of this call, when it had progress. The
    /// event and this answer travel separately: a subscriber that shows every step reads its
    /// subscription up to this `seq` before it takes the answer as the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_progress: Option<u64>,
}

/// `prompts/list`, `resources/list`, `server/instructions`: one session.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CatalogParams {
    /// The session (its servers are started if it had not asked for them yet).
    pub session: SessionId,
}

/// One prompt as a slash command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PromptEntry {
    /// The command name (`<server>.<name>` when servers offer the same name).
    pub name: String,
    /// The server's name.
    pub server: String,
    /// The prompt's own name.
    pub prompt: String,
    /// Its description, or `Invoke prompt <name>`.
    pub description: String,
    /// Its arguments as the server declared them (`{name, description?, required?}`).
    pub arguments: Vec<Value>,
}

/// Result of `prompts/list`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PromptsListResult {
    /// Servers by name, prompts in server order.
    pub prompts: Vec<PromptEntry>,
    /// Servers whose prompts are missing because they are not connected.
    pub diagnostics: Vec<String>,
}

/// `prompts/get`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PromptsGetParams {
    /// The session.
    pub session: SessionId,
    /// The command name, as `prompts/list` gives it.
    pub name: String,
    /// What the user typed after the command (`--key=value`, `--key="a b"`, positionals),
    /// parsed as Gemini CLI does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<String>,
    /// Arguments by name instead (no parsing; merged over `args`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
}

/// Result of `prompts/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PromptsGetResult {
    /// The server's name.
    pub server: String,
    /// The prompt's own name.
    pub prompt: String,
    /// The arguments sent.
    pub arguments: Map<String, Value>,
    /// The server's `GetPromptResult`.
    pub result: Value,
    /// What Gemini CLI submits: the first message's text as a JSON string literal.
    pub submit: String,
}

/// One resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourceEntry {
    /// The server's name.
    pub server: String,
    /// `@server:uri`, as a user types it.
    pub reference: String,
    /// The MCP `Resource` object.
    pub resource: Value,
}

/// Result of `resources/list`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourcesListResult {
    /// Servers by name, resources in server order.
    pub resources: Vec<ResourceEntry>,
    /// Resource templates (`{server, template}`).
    pub templates: Vec<Value>,
    /// Servers whose resources are missing because they are not connected.
    pub diagnostics: Vec<String>,
}

/// `resources/read`: by `server` + `uri`, or by `reference` (`@server:uri`, or a bare URI that
/// one server lists).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourcesReadParams {
    /// The session.
    pub session: SessionId,
    /// The server's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The resource's URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// `@server:uri`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// Result of `resources/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ResourcesReadResult {
    /// The server's name.
    pub server: String,
    /// The URI read.
    pub uri: String,
    /// The server's `contents`.
    pub contents: Vec<Value>,
    /// As Gemini parts: a `Content from @uri:` header, texts, binary contents summarized.
    pub parts: Vec<Value>,
}

/// Result of `server/instructions`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstructionsResult {
    /// Each connected server's instructions, by server name.
    pub servers: Vec<(String, String)>,
    /// All of them formatted as Gemini CLI appends them to its system prompt.
    pub system_prompt: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> ToolEntry {
        ToolEntry {
            name: format!("mcp_s_{name}"),
            server: "s".into(),
            tool: name.into(),
            declaration: FunctionDeclaration {
                name: format!("mcp_s_{name}"),
                description: "say \"hi\"\n".into(),
                parameters_json_schema: RawValue::from_string(r#"{"type":"object"}"#.into())
                    .unwrap(),
            },
            raw: None,
            hidden: None,
            kind: ToolKind::Mcp,
        }
    }

    #[test]
    fn a_serialized_tool_list_is_the_same_json() -> Result<(), serde_json::Error> {
        let entries: Arc<[ToolEntry]> = vec![entry("a"), entry("b")].into();
        let plain = ToolsListResult { tools: ToolList::new(entries.clone()), diagnostics: vec![] };
        let kept = ToolsListResult { tools: ToolList::serialized(entries)?, diagnostics: vec![] };
        let text = serde_json::to_string(&kept)?;
        assert_eq!(text, serde_json::to_string(&plain)?);
        let back: ToolsListResult = serde_json::from_str(&text)?;
        assert_eq!(back.tools.len(), 2);
        assert_eq!(back.tools[1].declaration, kept.tools[1].declaration);
        Ok(())
    }
}
