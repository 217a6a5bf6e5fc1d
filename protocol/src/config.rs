//! Types of the `config/*`, `trust/*` and `mcp/*` configuration methods.

use serde::{Deserialize, Serialize};

use crate::common::SessionId;
pub use crate::common::{Diagnostic, Scope, Severity};

/// `config/get` and `config/diagnostics`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConfigParams {
    /// The session whose view is wanted (its workspace, trust and environment).
    pub session: SessionId,
    /// `config/get` only: show `settings` and each server's `config` as the daemon uses
    /// them, `$VAR`s expanded and nothing redacted. For a user at their own terminal
    /// (`gemctl config show --show-secrets` refuses to print them anywhere else).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub show_secrets: bool,
}

/// Whether a workspace is trusted, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TrustInfo {
    /// Trusted or not.
    pub trusted: bool,
    /// Why: e.g. `rule /home/u/src (TRUST_PARENT)`, `GEMINI_CLI_TRUST_WORKSPACE=true`,
    /// `folder trust disabled`, `no rule matches`.
    pub reason: String,
}

/// One settings file that was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SettingsFile {
    /// Its scope.
    pub scope: Scope,
    /// Its path.
    pub path: String,
    /// Whether it exists.
    pub exists: bool,
    /// Whether it is in effect (workspace files of untrusted folders are not; a file that
    /// fails to parse keeps its last good contents, if any).
    pub applied: bool,
}

/// Why a configured server will not be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum BlockReason {
    /// The folder is not trusted: no MCP servers at all.
    UntrustedFolder,
    /// `admin.mcp.enabled` is false.
    Admin,
    /// Not in `mcp.allowed`.
    Allowlist,
    /// In `mcp.excluded`.
    Excludelist,
    /// Disabled for this session.
    Session,
    /// Disabled in `mcp-server-enablement.json`.
    Enablement,
    /// Its configuration is invalid (see diagnostics).
    Invalid,
    /// It is geminid's own gateway (`gemctl mcp serve`), which geminid does not start.
    Gateway,
}

/// A server in the effective configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpServerEntry {
    /// Its name.
    pub name: String,
    /// The scope it came from.
    pub scope: Scope,
    /// The file it came from.
    pub file: String,
    /// `stdio`, `sse`, `http` (streamable HTTP, with SSE fallback when `url` has no `type`).
    pub transport: String,
    /// Its configuration as written (`$VAR`s not expanded), what looks secret in `env` and
    /// `headers` and the user information of URLs redacted; as used, with `showSecrets`.
    pub config: serde_json::Value,
    /// The extension that gives it (a settings entry of its name may override it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    /// Why it will not start; absent when it will.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<BlockReason>,
}

/// `context/files`: the context files a session's model instructions are made of.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContextFilesParams {
    /// The session.
    pub session: SessionId,
}

/// Where a context file comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ContextFileKind {
    /// `~/.gemini/<name>`.
    Global,
    /// The private project memory: `~/.gemini/tmp/<project>/memory/MEMORY.md`, or else a
    /// legacy `<name>` there, `<project>` the slug `~/.gemini/projects.json` gives the
    /// workspace (read in any folder, trusted or not).
    Memory,
    /// An enabled extension's `contextFileName`.
    Extension,
    /// The project's, from its root down to the session's folders (trusted folders only).
    Project,
}

/// What became of one `@path` import in a context file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum ContextImportState {
    /// Its text is inlined.
    Inlined,
    /// Already inlined further up the same chain (an import cycle): left out.
    Repeated,
    /// Not inlined: outside the project root, missing or unreadable (`error` says).
    Failed,
}

/// One `@path` import met in a context file (or in a file it imports).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContextImport {
    /// The path as written after the `@`.
    pub path: String,
    /// The file it is written in.
    pub from: String,
    /// What became of it.
    pub state: ContextImportState,
    /// Why it failed, as the model is told in `<!-- Import failed: PATH - WHY -->`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One context file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContextFile {
    /// Its path.
    pub path: String,
    /// Where it comes from.
    pub kind: ContextFileKind,
    /// The extension, for an extension's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    /// What the model gets from it: its text with the imports inlined, trimmed (a file that
    /// is empty then is not listed).
    #[serde(default)]
    pub text: String,
    /// The `@path` imports met, in the order they were processed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<ContextImport>,
    /// Why the file was not read (its `text` is then empty): not a regular file, larger than
    /// the cap, a link to a file outside the folder it was found in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Result of `context/files`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContextFilesResult {
    /// The file names looked for: `context.fileName`'s, then `GEMINI.md`.
    pub names: Vec<String>,
    /// The files, in the order they are loaded.
    pub files: Vec<ContextFile>,
}

/// Result of `config/get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EffectiveConfig {
    /// The session's workspace.
    pub workspace: String,
    /// Its trust.
    pub trust: TrustInfo,
    /// The files read, in merge order.
    pub files: Vec<SettingsFile>,
    /// MCP servers by name, sorted.
    pub mcp_servers: Vec<McpServerEntry>,
    /// The merged settings (without `mcpServers`, which is above).
    pub settings: serde_json::Value,
    /// Problems found.
    pub diagnostics: Vec<Diagnostic>,
}

/// Result of `config/diagnostics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticsResult {
    /// Every warning and error, errors first.
    pub diagnostics: Vec<Diagnostic>,
}

/// A trust rule's level, as written in `trustedFolders.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TrustLevel {
    /// The folder and everything below it.
    TrustFolder,
    /// The folder's parent and everything below it.
    TrustParent,
    /// Never trusted.
    DoNotTrust,
}

/// `trust/get`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TrustGetParams {
    /// An absolute path.
    pub path: String,
}

/// Result of `trust/get`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TrustGetResult {
    /// The path asked about (canonical).
    pub path: String,
    /// Whether it is trusted and why (trust rules only; a session's environment may override).
    pub trust: TrustInfo,
    /// The rule written for exactly this path, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<TrustLevel>,
}

/// `trust/set`: write (or, with `level` null, remove) the rule for `path`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TrustSetParams {
    /// An absolute path to an existing directory.
    pub path: String,
    /// The level; absent or null removes the rule.
    #[serde(default)]
    pub level: Option<TrustLevel>,
}

/// Result of `trust/set`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TrustSetResult {
    /// The path (canonical).
    pub path: String,
    /// The rule before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<TrustLevel>,
    /// The rule now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<TrustLevel>,
    /// The file written.
    pub file: String,
}

/// Which settings file `mcp/add` and `mcp/remove` edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum WriteScope {
    /// `~/.gemini/settings.json`.
    User,
    /// `<workspace>/.gemini/settings.json` (Gemini CLI's default).
    #[default]
    Project,
}

/// `mcp/add`: add or replace one server in a settings file.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpAddParams {
    /// The session (its workspace is the project).
    pub session: SessionId,
    /// The file to edit.
    #[serde(default)]
    pub scope: WriteScope,
    /// The server's name.
    pub name: String,
    /// Its configuration, an `mcpServers` entry.
    pub config: serde_json::Value,
}

/// Result of `mcp/add`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpAddResult {
    /// The file edited.
    pub file: String,
    /// Whether a server of that name was there and has been replaced.
    pub updated: bool,
    /// Its transport.
    pub transport: String,
}

/// `mcp/remove`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpRemoveParams {
    /// The session (its workspace is the project).
    pub session: SessionId,
    /// The file to edit.
    #[serde(default)]
    pub scope: WriteScope,
    /// The server's name.
    pub name: String,
}

/// Result of `mcp/remove`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpRemoveResult {
    /// The file.
    pub file: String,
    /// Whether it was there.
    pub removed: bool,
}

/// `mcp/enable` and `mcp/disable`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpEnableParams {
    /// The session.
    pub session: SessionId,
    /// The server's name.
    pub name: String,
    /// Only for this session (stored with the session, so it holds across processes and
    /// restarts) instead of in `mcp-server-enablement.json`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub session_only: bool,
}

/// Result of `mcp/enable` and `mcp/disable`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpEnableResult {
    /// The server's name.
    pub name: String,
    /// Whether it is now enabled for the session.
    pub enabled: bool,
    /// Whether the change was session-only.
    pub session_only: bool,
}

/// `mcp/reload`: re-read every input file now.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpReloadParams {
    /// Make sure this session is included (others known to the daemon always are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
}

/// Result of `mcp/reload`: the changes found (each also sent as a `config/changed` event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpReloadResult {
    /// One entry per session whose configuration changed.
    pub changes: Vec<ConfigChanged>,
}

/// Payload of `config/changed`: what changed in one session's effective configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConfigChanged {
    /// The session.
    pub session: SessionId,
    /// What applied the change: `watch` (a file changed), or the request that made it:
    /// `mcp/reload`, `mcp/enable`, `mcp/disable`, `mcp/add`, `mcp/remove`, `trust/set`.
    pub reason: String,
    /// Servers that appeared.
    pub servers_added: Vec<String>,
    /// Servers that disappeared.
    pub servers_removed: Vec<String>,
    /// Servers whose configuration changed (they need a restart).
    pub servers_changed: Vec<String>,
    /// Servers whose configuration is the same but which became blocked or unblocked.
    pub enablement_changed: Vec<String>,
    /// The folder's trust changed.
    pub trust_changed: bool,
    /// Other settings changed.
    pub settings_changed: bool,
    /// The diagnostics changed; these are the errors now (warnings via `config/diagnostics`).
    pub diagnostics_changed: bool,
    /// Current errors (a file that fails to parse shows up here while its last good contents
    /// stay in effect).
    pub errors: Vec<Diagnostic>,
}

/// `mcp/import`: move the user's Gemini CLI servers behind the gateway. Each server in
/// `~/.gemini/settings.json` moves to geminid's own servers file (which Gemini CLI does not
/// read), and one entry for the gateway takes their place, so Gemini CLI reaches them all
/// through geminid. The settings file is backed up first and otherwise kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpImportParams {
    /// The session (for the reload that follows).
    pub session: SessionId,
    /// The gateway entries' command (the absolute path of `gemctl`).
    pub command: String,
    /// Say what would change, and change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Put the servers back instead (`gemctl mcp unimport`): each gateway entry of one of
    /// geminid's servers is replaced by the server's entry, which leaves geminid's file.
    #[serde(default)]
    pub undo: bool,
}

/// `mcp/import`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpImportResult {
    /// Gemini CLI's settings file.
    pub from: String,
    /// geminid's servers file.
    pub to: String,
    /// The servers moved (or that would be); back to Gemini CLI's file for an undo.
    pub moved: Vec<String>,
    /// Of those, the ones geminid's file had already and are replaced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<String>,
    /// How Gemini CLI reaches each of geminid's servers: the command of its entry, named as
    /// the server (empty for an undo).
    pub gateway: String,
    /// The extensions' servers Gemini CLI reaches through the gateway from now on, as it does
    /// geminid's (an entry of their name in its file; for an undo: the entries taken out, so
    /// Gemini CLI starts them itself again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// The extensions' remote servers, which Gemini CLI keeps connecting to itself (its merge
    /// of a settings entry over an extension's keeps the extension's URL).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<String>,
    /// The copy of Gemini CLI's file made before it was changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// Files were written (false on a dry run, or when there was nothing to move).
    pub written: bool,
}
