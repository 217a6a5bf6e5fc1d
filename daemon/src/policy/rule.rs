//! One policy rule, and whether it matches a call (Gemini CLI's `ruleMatches`).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::pattern::ArgsPattern;
use super::{ApprovalMode, Decision, Tier, ToolCall};

/// Where a rule was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file (or the setting, for a rule settings imply).
    pub file: String,
    /// Its 1-based line, when it came from a file.
    pub line: Option<u32>,
    /// Its tier.
    pub tier: Tier,
    /// Its priority as written (0–999).
    pub priority: u32,
}

/// A rule, compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The tool name it matches: exact, `*`, `mcp_*`, `mcp_{server}_*`, or an MCP tool's short
    /// name with `mcp_name`. One per name of a `toolName` list.
    pub tool_name: String,
    /// Only for calls by this subagent.
    pub subagent: Option<String>,
    /// Only for this MCP server's tools (`*`: any MCP tool).
    pub mcp_name: Option<String>,
    /// Matched against the arguments' stable form.
    pub args: Option<Arc<ArgsPattern>>,
    /// What it decides.
    pub decision: Decision,
    /// Only in these modes (empty: every mode).
    pub modes: Vec<ApprovalMode>,
    /// Only when the session is (or is not) interactive.
    pub interactive: Option<bool>,
    /// Every one of these annotations must equal the tool's.
    pub annotations: Option<Map<String, Value>>,
    /// For shell commands: redirection allowed (kept for the shell tool's own checks).
    pub allow_redirection: Option<bool>,
    /// The message a denial gives.
    pub deny_message: Option<String>,
    /// Where it was written.
    pub origin: Origin,
}

const MCP_PREFIX: &str = "mcp_";

/// Every custom tool (`discovered_tool_<name>`), as a rule's `toolName`.
const DISCOVERED_ALL: &str = "discovered_tool_*";

/// `mcp_{server}_{tool}`, as the rule side names MCP tools (Gemini CLI's `formatMcpToolName`:
/// not sanitized; `*` for both is `mcp_*`, a `*` tool `mcp_{server}_*`).
pub(crate) fn mcp_name(server: &str, tool: &str) -> String {
    match (server, tool) {
        ("*", "*") => format!("{MCP_PREFIX}*"),
        ("*", tool) => format!("{MCP_PREFIX}*_{tool}"),
        (server, "*") => format!("{MCP_PREFIX}{server}_*"),
        (server, tool) => format!("{MCP_PREFIX}{server}_{tool}"),
    }
}

impl Rule {
    /// A rule for `tool_name` deciding `decision`, with no other condition.
    pub(crate) fn new(tool_name: String, decision: Decision, origin: Origin) -> Self {
        Self {
            tool_name,
            subagent: None,
            mcp_name: None,
            args: None,
            decision,
            modes: vec![],
            interactive: None,
            annotations: None,
            allow_redirection: None,
            deny_message: None,
            origin,
        }
    }

    /// `tier + priority / 1000`.
    pub(crate) fn effective_priority(&self) -> f64 {
        f64::from(self.origin.tier as u8) + f64::from(self.origin.priority) / 1000.0
    }

    /// Whether the rule applies to `call` in `mode`; `stable_args` is the call's arguments'
    /// stable form (computed once per decision).
    pub(crate) fn matches(
        &self,
        call: &ToolCall<'_>,
        stable_args: Option<&str>,
        mode: ApprovalMode,
        interactive: bool,
    ) -> bool {
        self.matches_ignoring_args(call, mode, interactive)
            && self.args.as_ref().is_none_or(|pattern| match (call.args, stable_args) {
                // A pattern that cannot be built fails closed: its rule denies (or asks)
                // and never allows.
                (Some(_), Some(text)) => {
                    pattern.is_match(text).unwrap_or(self.decision != Decision::Allow)
                }
                _ => false,
            })
    }

    /// Whether the rule applies to `call` in `mode`, whatever its arguments.
    pub(crate) fn matches_ignoring_args(
        &self,
        call: &ToolCall<'_>,
        mode: ApprovalMode,
        interactive: bool,
    ) -> bool {
        if !self.modes.is_empty() && !self.modes.contains(&mode) {
            return false;
        }
        if self.subagent.is_some() && self.subagent.as_deref() != call.subagent {
            return false;
        }
        match self.mcp_name.as_deref() {
            Some("*") if call.server.is_none() => return false,
            Some("*") | None => {}
            Some(server) if call.server != Some(server) => return false,
            Some(_) => {}
        }
        if !self.name_matches(call) {
            return false;
        }
        if let Some(wanted) = &self.annotations {
            let Some(have) = call.annotations else { return false };
            if wanted.iter().any(|(k, v)| have.get(k) != Some(v)) {
                return false;
            }
        }
        match self.interactive {
            Some(true) if !interactive => false,
            Some(false) if interactive => false,
            _ => true,
        }
    }

    fn name_matches(&self, call: &ToolCall<'_>) -> bool {
        let rule = self.tool_name.as_str();
        if rule == "*" {
            return true;
        }
        if rule.contains('*') {
            if rule == "mcp_*" {
                return call.server.is_some();
            }
            if let Some(server) = rule.strip_prefix(MCP_PREFIX).and_then(|r| r.strip_suffix("_*")) {
                // An MCP tool of exactly that server, properly qualified by it: a server
                // named `safe_server` does not give `mcp_safe_server_*` to the tools of
                // `safe_server_malicious`.
                return call.server == Some(server)
                    && call.name.starts_with(&format!("{MCP_PREFIX}{server}_"));
            }
            // Custom tools: Gemini CLI's own default rules name them so, but its engine compares
            // the pattern as written and so never matches one (its defaults decide as no rule
            // would). geminid makes the pattern mean what it says, for a tool of no server.
            if rule == DISCOVERED_ALL {
                return call.server.is_none()
                    && call.name.starts_with(&DISCOVERED_ALL[..DISCOVERED_ALL.len() - 1]);
            }
            // Any other `*` (such as `mcp_*_search`, from `mcpName = "*"` and a tool name) is
            // compared as written, as Gemini CLI does: it matches no real tool.
            return call.name == rule;
        }
        if call.name == rule {
            return true;
        }
        let Some(server) = call.server else { return false };
        // A short name with `mcpName` matches the fully qualified call; a fully qualified
        // rule matches a short call of that server.
        if let Some(rule_server) = &self.mcp_name
            && !rule.starts_with(MCP_PREFIX)
            && call.name == mcp_name(rule_server, rule)
        {
            return true;
        }
        rule.starts_with(MCP_PREFIX) && rule == mcp_name(server, call.name)
    }
}
