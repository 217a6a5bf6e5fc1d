//! `extensions/*`: the installed extensions, their integrity, enablement and installation.

use serde::{Deserialize, Serialize};

use crate::common::{Diagnostic, SessionId};
use crate::config::WriteScope;

/// What geminid's check of an extension's files found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum IntegrityState {
    /// Every file matches the signed record.
    Verified,
    /// Seen for the first time (installed by Gemini CLI, say): its files were recorded now,
    /// and are verified from now on.
    Recorded,
    /// A linked extension (`gemctl extensions link`): a development folder, not verified by
    /// design.
    Linked,
    /// Its files, its install metadata or its records do not match: not loaded until
    /// `gemctl extensions accept NAME` (after a deliberate edit) or a reinstall.
    Tampered,
    /// It could not be checked (no integrity key, an unreadable folder): not loaded.
    Unverifiable,
}

/// Files that differ from an extension's record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FileChanges {
    /// Files whose contents changed.
    pub changed: Vec<String>,
    /// Files that were not there.
    pub added: Vec<String>,
    /// Files that are gone.
    pub removed: Vec<String>,
}

/// One installed extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionInfo {
    /// Its name (the folder's, when its manifest cannot be read).
    pub name: String,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Its description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where it is installed.
    pub path: String,
    /// Where it came from (install metadata `source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `local`, `link`, `git` or `github-release`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_type: Option<String>,
    /// Enabled for the session's workspace (`extension-enablement.json`).
    pub enabled: bool,
    /// Loaded for the session: enabled, readable and verified.
    pub active: bool,
    /// What the integrity check found.
    pub integrity: IntegrityState,
    /// The files that differ, when tampered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<FileChanges>,
    /// Why it is not active, when it is not (in words that name the fix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_inactive: Option<String>,
    /// The MCP servers it brings.
    pub servers: Vec<String>,
    /// Its context files that exist.
    pub context_files: Vec<String>,
    /// Tools it excludes everywhere.
    pub exclude_tools: Vec<String>,
    /// How many hooks it brings.
    pub hooks: u32,
    /// Its agent skills (the folders under `skills/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// Its custom commands, as one types them (`/git:commit`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// The git ref it was installed at (install metadata `ref`), if one was given.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Problems with its files, each with file, line and column.
    pub diagnostics: Vec<Diagnostic>,
}

/// `extensions/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionsListParams {
    /// The session whose workspace decides enablement.
    pub session: SessionId,
}

/// Result of `extensions/list`, `extensions/verify`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionsListResult {
    /// Every installed extension, by name.
    pub extensions: Vec<ExtensionInfo>,
    /// Problems with the extensions folder as a whole (a name installed twice, an unreadable
    /// enablement or integrity file).
    pub diagnostics: Vec<Diagnostic>,
}

/// `extensions/verify`: check the files again now, whatever their times say.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionsVerifyParams {
    /// The session whose workspace decides enablement.
    pub session: SessionId,
    /// One extension; all without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `extensions/accept`, `extensions/uninstall`: one extension by name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionNameParams {
    /// The session (for the answer's enablement, and whose configuration is reloaded).
    pub session: SessionId,
    /// The extension's name (case-insensitive).
    pub name: String,
}

/// `extensions/enable`, `extensions/disable`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionEnableParams {
    /// The session: its workspace is the `workspace` scope.
    pub session: SessionId,
    /// The extension's name (case-insensitive).
    pub name: String,
    /// `user` (everywhere under the home directory) or `project` (the session's workspace
    /// and below; Gemini CLI's `--scope workspace`).
    pub scope: WriteScope,
}

/// Result of `extensions/enable` and `extensions/disable`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionEnableResult {
    /// The extension.
    pub name: String,
    /// The rule written to `extension-enablement.json`.
    pub rule: String,
    /// Whether it is now enabled for the session's workspace.
    pub enabled: bool,
}

/// `extensions/install` and `extensions/link`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionInstallParams {
    /// The session (its workspace's trust, and whose configuration is reloaded).
    pub session: SessionId,
    /// A local folder or a `.tar.gz`/`.zip` release archive (absolute, or relative to the
    /// session's workspace), or a git URL (`https://`, `git@`, `ssh://`, `file://`,
    /// `github:owner/repo`, ...).
    pub source: String,
    /// For a git source: the branch, tag or commit (default: the repository's HEAD).
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The person agreed to what the extension brings (`--consent`, or yes at the prompt).
    /// Without it nothing is installed and the answer carries what to agree to.
    #[serde(default)]
    pub consent: bool,
    /// Values of the extension's settings, by their `envVar` (each must be one it declares):
    /// plain ones go to its `.env`, sensitive ones to Gemini CLI's keychain.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub settings: std::collections::BTreeMap<String, String>,
}

/// A setting an extension declares (`settings` in its manifest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionSetting {
    /// Its name, to show.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The variable it becomes.
    pub env_var: String,
    /// Kept in the keychain, not in `.env`; not to be echoed when typed.
    pub sensitive: bool,
}

/// Result of `extensions/install` and `extensions/link`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionInstallResult {
    /// Installed (false: consent is needed first).
    pub installed: bool,
    /// What the extension brings, as the person is asked to agree to it.
    pub consent: String,
    /// The settings it declares (to ask for those not given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<ExtensionSetting>,
    /// The extension, when installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<ExtensionInfo>,
}

/// Result of `extensions/uninstall`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionUninstallResult {
    /// The extension removed.
    pub name: String,
    /// The folder removed.
    pub path: String,
}

/// `extensions/update`: check for updates, or update one extension or all.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionUpdateParams {
    /// The session (whose configuration is reloaded).
    pub session: SessionId,
    /// One extension; with `all`, every one (linked ones excepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Every installed extension.
    #[serde(default)]
    pub all: bool,
    /// Only say which have updates; change nothing.
    #[serde(default)]
    pub check: bool,
    /// The person agreed to what a new version brings when that changed.
    #[serde(default)]
    pub consent: bool,
    /// For one extension installed from git: follow this ref (a tag, branch or commit) from
    /// now on instead of the one recorded.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// One extension's line in `extensions/update`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionUpdateEntry {
    /// The extension.
    pub name: String,
    /// Its version before.
    pub version: String,
    /// What an update brings (a version, a commit, `migrated to URL`); absent: up to date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<String>,
    /// Updated now.
    pub updated: bool,
    /// The version now, when updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// What the new version brings, when that changed (not updated without consent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consent: Option<String>,
    /// Why it could not be checked or updated (the installed version stays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The git ref its install follows, when one was given (`--ref`): a tag never moves, so
    /// newer tags are not updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<String>,
}

/// Result of `extensions/update`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionUpdateResult {
    /// One line per extension checked or updated.
    pub extensions: Vec<ExtensionUpdateEntry>,
}

/// Payload of `extensions/progress`: a step of an install or update under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionProgress {
    /// The session that asked.
    pub session: SessionId,
    /// What is being installed or updated (the source, or the extension's name).
    pub what: String,
    /// The step: `cloning URL`, `unpacking FILE`, `copying DIR`, `signing its files`, ...
    pub step: String,
}

/// Payload of `extensions/tampered`: an extension's files no longer match its record, so it
/// is not loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExtensionTampered {
    /// The extension.
    pub name: String,
    /// What differs.
    pub changes: FileChanges,
    /// Why, in words that name the fix.
    pub message: String,
}
