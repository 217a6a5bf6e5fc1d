//! `skills/*` and `agents/*`: Agent Skills (a folder with a `SKILL.md`) and agent definitions
//! (`agents/*.md`), as each session sees them.

use serde::{Deserialize, Serialize};

use crate::common::Diagnostic;
use crate::common::SessionId;
use crate::config::WriteScope;

/// Where a skill (or agent definition) comes from, in precedence order (later wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum SkillScope {
    /// Shipped with the daemon.
    BuiltIn,
    /// An enabled extension's `skills/` (or `agents/`).
    Extension,
    /// `~/.gemini/skills` or `~/.agents/skills` (`~/.gemini/agents`).
    User,
    /// An MCP server's, through the MCP Skills extension.
    Mcp,
    /// The trusted workspace's `.gemini/skills` or `.agents/skills` (`.gemini/agents`).
    Workspace,
}

/// A skill's source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillSource {
    /// Its kind.
    pub scope: SkillScope,
    /// The extension, for `extension`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    /// The MCP server, for `mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The folder it was found in.
    pub dir: String,
}

/// A copy of a skill that another overrides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillConflict {
    /// Its `SKILL.md`.
    pub location: String,
    /// Where it comes from.
    pub source: SkillSource,
}

/// One skill as a session sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillInfo {
    /// Its name (`:\/<>*?"|` in the frontmatter's become `-`).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its `SKILL.md`.
    pub location: String,
    /// The copy's source.
    pub source: SkillSource,
    /// Not named by any `skills.disabled`.
    pub enabled: bool,
    /// Shipped with the daemon (activated without a confirmation).
    pub built_in: bool,
    /// The copies of the same name it overrides, lowest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<SkillConflict>,
    /// Its instructions (the body of its `SKILL.md`), when asked for (`skills/list`'s
    /// `instructions`) and the skill is a file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// `skills/list`, `skills/prompt` and `agents/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillsListParams {
    /// The session (its workspace, trust, extensions and settings decide what it sees).
    pub session: SessionId,
    /// `skills/list`: each skill with its instructions.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub instructions: bool,
}

/// Result of `skills/list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillsListResult {
    /// Every skill found, by name, disabled ones included.
    pub skills: Vec<SkillInfo>,
    /// Skills are on (`skills.enabled` and `admin.skills.enabled` not false).
    pub skills_enabled: bool,
    /// Skills activated in the session.
    pub activated: Vec<String>,
    /// Files that did not load, overrides, a workspace whose skills are skipped (untrusted).
    pub diagnostics: Vec<Diagnostic>,
}

/// Result of `skills/prompt`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillsPromptResult {
    /// The system prompt's skills section (`<available_skills>`); empty with no enabled skill.
    pub prompt: String,
    /// The enabled skills' names, as `activate_skill`'s `name` may be.
    pub names: Vec<String>,
}

/// `skills/activate`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillActivateParams {
    /// The session.
    pub session: SessionId,
    /// The skill (its exact name, or the same without case).
    pub name: String,
    /// The caller's id for it (the confirmation's `callId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The caller is the person (`gemctl skills activate`): a confirmation counts as given.
    #[serde(default)]
    pub confirmed: bool,
}

/// Result of `skills/activate`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillActivateResult {
    /// The skill's name.
    pub name: String,
    /// Its folder, now among the session's allowed paths.
    pub dir: String,
    /// What the model gets: `<activated_skill>` with the instructions and the resources.
    pub text: String,
    /// The folder's tree.
    pub resources: String,
    /// It was already active in the session.
    pub already_active: bool,
}

/// Where `skills/install`, `skills/link` and `skills/uninstall` work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum SkillInstallScope {
    /// `~/.gemini/skills` (Gemini CLI's default).
    #[default]
    User,
    /// The session's workspace's `.gemini/skills`.
    Workspace,
}

/// `skills/install` and `skills/link`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillInstallParams {
    /// The session.
    pub session: SessionId,
    /// A folder (absolute, or relative to the workspace), a `.skill` archive, or a git URL
    /// (install only).
    pub source: String,
    /// Where to put it.
    #[serde(default)]
    pub scope: SkillInstallScope,
    /// A folder inside the source that holds the skills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The person agreed; without it nothing is written and the answer says what to agree to.
    #[serde(default)]
    pub consent: bool,
}

/// A skill `skills/install` placed (or would place).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct InstalledSkill {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its folder there.
    pub dir: String,
    /// A skill of that name was there and is replaced.
    pub replaces: bool,
}

/// Result of `skills/install` and `skills/link`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillInstallResult {
    /// Written (false: consent is needed first).
    pub installed: bool,
    /// What was (or would be) placed.
    pub skills: Vec<InstalledSkill>,
    /// What the person agrees to.
    pub consent: String,
    /// Where.
    pub target: String,
}

/// `skills/uninstall`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillUninstallParams {
    /// The session.
    pub session: SessionId,
    /// The skill.
    pub name: String,
    /// Which folder it is removed from.
    #[serde(default)]
    pub scope: SkillInstallScope,
}

/// Result of `skills/uninstall`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillUninstallResult {
    /// The skill.
    pub name: String,
    /// The folder (or link) removed.
    pub removed: String,
}

/// `skills/enable` and `skills/disable`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillEnableParams {
    /// The session (its workspace's settings for `project`).
    pub session: SessionId,
    /// The skill.
    pub name: String,
    /// For `disable`: the settings file whose `skills.disabled` gets the name (Gemini CLI's
    /// default is the workspace's). `enable` removes it from the user's and the workspace's.
    #[serde(default)]
    pub scope: WriteScope,
}

/// Result of `skills/enable` and `skills/disable`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillEnableResult {
    /// The skill.
    pub name: String,
    /// The settings files changed.
    pub files: Vec<String>,
    /// Enabled now, in the session.
    pub enabled: bool,
    /// Files whose `skills.disabled` still names it (system settings, which are not written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub still_disabled_in: Vec<String>,
}

/// A local agent runs in-process; a remote one is reached over A2A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum AgentKind {
    /// A system prompt with tools.
    #[default]
    Local,
    /// An A2A agent.
    Remote,
}

/// One agent definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentInfo {
    /// Its name (a slug).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Local or remote.
    pub kind: AgentKind,
    /// Its file.
    pub location: String,
    /// Where it comes from.
    pub source: SkillSource,
    /// The only tools it is given (absent: all); `session/derive` with `agent` takes these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Its model (absent: the caller's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Its turn limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u64>,
    /// Its time limit, in minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_mins: Option<u64>,
    /// The names of the MCP servers it declares (their settings are not shown: they may hold
    /// secrets).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
    /// The files of the same name it overrides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
}

/// Result of `agents/list`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentsListResult {
    /// Every agent definition, by name.
    pub agents: Vec<AgentInfo>,
    /// Files that did not load, and overrides.
    pub diagnostics: Vec<Diagnostic>,
}

/// Event `skills/changed`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkillsChanged {
    /// The session.
    pub session: SessionId,
    /// Its enabled skills now, by name.
    pub enabled: Vec<String>,
    /// Skills that came, went, or changed (description, location, enabled).
    pub changed: Vec<String>,
}
