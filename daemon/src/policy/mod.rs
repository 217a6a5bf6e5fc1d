//! Tool-call policy, as Gemini CLI's policy engine decides it (COMPAT §8): TOML rules in tiers,
//! matched against a call, the highest effective priority deciding.
//!
//! - [`stringify`](mod@stringify): the arguments' stable form that `argsPattern` is matched against;
//! - [`pattern`]: `argsPattern`, `commandPrefix`, `commandRegex` as regular expressions, and
//!   the patterns refused;
//! - [`rule`]: one rule and whether it matches a call;
//! - [`load`]: a policy file read into rules, with each problem said by file, line and column;
//! - [`files`]: where a session's policy files are (by tier), read with each file's last good rules kept;
//! - [`accept`]: a trusted workspace's policy files, loaded only once the user accepted them;
//! - [`settings`]: the rules settings imply (`mcp.excluded`, `tools.allowed`, a server's `trust`, ...);
//! - [`engine`]: a set of rules and its verdict for a call;
//! - [`build_files`]: Gemini CLI's build file protection, over an allowed call;
//! - [`session_rules`]: the rules a session is decided by (`SessionRules`: its places' rules
//!   and its settings' rules), and their wire forms.

pub(crate) mod accept;
pub(crate) mod build_files;
pub(crate) mod engine;
pub(crate) mod files;
pub(crate) mod load;
pub(crate) mod pattern;
pub(crate) mod rule;
pub(crate) mod saved;
pub(crate) mod session_rules;
pub(crate) mod settings;
pub(crate) mod stringify;

pub(crate) use geminid_protocol::policy::{ApprovalMode, PolicyDecision as Decision};

/// The approval mode a policy file names (`modes = [...]`): the wire names.
pub(crate) fn mode_named(name: &str) -> Option<ApprovalMode> {
    serde_json::from_value(serde_json::Value::String(name.to_owned())).ok()
}

/// Where a rule comes from: its tier (Gemini CLI's: default 1, extension 2, workspace 3, user 4,
/// admin 5); its effective priority is `tier + priority / 1000`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// geminid's own rules, giving Gemini CLI's default decisions.
    Default = 1,
    /// An extension's `policies/`.
    Extension = 2,
    /// The workspace's `.gemini/policies/`.
    Workspace = 3,
    /// `~/.gemini/policies/` (or `policyPaths`), and the rules settings imply.
    User = 4,
    /// The system policies directory.
    Admin = 5,
}

impl Tier {
    /// Its name, as Gemini CLI prints it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Extension => "extension",
            Self::Workspace => "workspace",
            Self::User => "user",
            Self::Admin => "admin",
        }
    }
}

/// A call as policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// The tool's name as the model called it (`mcp_{server}_{tool}` for an MCP tool, or a
    /// built-in's name such as `run_shell_command`).
    pub name: &'a str,
    /// The MCP server's name, for an MCP tool.
    pub server: Option<&'a str>,
    /// The arguments.
    pub args: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// The tool's annotations (`readOnlyHint`, ...).
    pub annotations: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// The subagent calling, if one is.
    pub subagent: Option<&'a str>,
}
