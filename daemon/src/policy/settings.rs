//! The rules Gemini CLI derives from settings (its `createPolicyEngineConfig`), in the user
//! tier at fixed priorities: `mcp.excluded` 4.9, `tools.exclude` 4.4, `tools.confirmationRequired`
//! 4.35, `tools.allowed` 4.3 (with a 4.29 deny narrowing a shell allow to its prefixes),
//! `tools.core` 4.25 (with a 4.24 deny of everything else), a server's `trust` 4.2,
//! `mcp.allowed` 4.1, and in headless sessions with `mcp.autoAllowInHeadless` every
//! configured server 4.1. The server allows and `tools.core` hold in every mode but plan.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::load::SHELL_TOOL;
use super::pattern::{ArgsPattern, args_patterns};
use super::rule::{Origin, Rule, mcp_name};
use super::{ApprovalMode, Decision, Tier};

/// The shell tool's names (Gemini CLI's `SHELL_TOOL_NAMES`): the legacy one is normalized.
const SHELL_NAMES: &[&str] = &[SHELL_TOOL, "ShellTool"];

fn shell_normalized(name: &str) -> String {
    if SHELL_NAMES.contains(&name) { SHELL_TOOL.to_owned() } else { name.to_owned() }
}

fn list<'a>(settings: &'a Value, pointer: &str) -> Vec<&'a str> {
    settings
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

const NON_PLAN: [ApprovalMode; 3] =
    [ApprovalMode::Default, ApprovalMode::AutoEdit, ApprovalMode::Yolo];

struct Out(Vec<Rule>);

impl Out {
    fn push(
        &mut self,
        setting: &str,
        name: String,
        decision: Decision,
        priority: u32,
    ) -> &mut Rule {
        let origin =
            Origin { file: format!("settings: {setting}"), line: None, tier: Tier::User, priority };
        self.0.push(Rule::new(name, decision, origin));
        let n = self.0.len() - 1;
        &mut self.0[n]
    }

    fn server(&mut self, setting: &str, server: &str, decision: Decision, priority: u32) {
        let name = if server == "*" { "mcp_*".to_owned() } else { mcp_name(server, "*") };
        let r = self.push(setting, name, decision, priority);
        r.mcp_name = Some(server.to_owned());
        if decision == Decision::Allow {
            r.modes = NON_PLAN.to_vec();
        }
    }

    /// `tools.allowed` / `tools.core` entries: a name, or the legacy `tool(args)`, whose args
    /// are a command prefix for the shell and ignored for other tools.
    fn allows(
        &mut self,
        setting: &str,
        tools: &[&str],
        priority: u32,
        modes: &[ApprovalMode],
        narrow: bool,
    ) {
        static LEGACY: LazyLock<Regex> =
            LazyLock::new(|| crate::literal::regex(r"^([a-zA-Z0-9_-]+)\((.*)\)$"));
        let mut narrowed = Vec::new();
        for tool in tools {
            let Some(c) = LEGACY.captures(tool) else {
                self.push(setting, shell_normalized(tool), Decision::Allow, priority).modes =
                    modes.to_vec();
                continue;
            };
            let name = shell_normalized(&c[1]);
            if name != SHELL_TOOL {
                self.push(setting, name, Decision::Allow, priority).modes = modes.to_vec();
                continue;
            }
            if !narrowed.contains(&name) {
                narrowed.push(name.clone());
            }
            for p in args_patterns(None, Some(&[c[2].to_owned()]), None).into_iter().flatten() {
                match ArgsPattern::new(&p) {
                    Ok(re) => {
                        let r = self.push(setting, name.clone(), Decision::Allow, priority);
                        r.args = Some(re);
                        r.modes = modes.to_vec();
                    }
                    Err(e) => {
                        tracing::warn!(setting, entry = %tool, error = %e, "a tools setting entry cannot be used")
                    }
                }
            }
        }
        if narrow {
            for name in narrowed {
                self.push(setting, name, Decision::Deny, priority - 10).modes = modes.to_vec();
            }
        }
    }
}

/// The rules `settings` (the merged settings object) imply for a session that is (or is
/// not) interactive.
pub(crate) fn settings_rules(settings: &Value, interactive: bool) -> Vec<Rule> {
    let mut out = Out(Vec::new());
    for server in list(settings, "/mcp/excluded") {
        out.server("mcp.excluded", server, Decision::Deny, 900);
    }
    for tool in list(settings, "/tools/exclude") {
        out.push("tools.exclude", tool.to_owned(), Decision::Deny, 400);
    }
    out.allows("tools.allowed", &list(settings, "/tools/allowed"), 300, &[], true);
    for tool in list(settings, "/tools/confirmationRequired") {
        out.push("tools.confirmationRequired", shell_normalized(tool), Decision::AskUser, 350);
    }
    if settings.pointer("/tools/core").and_then(Value::as_array).is_some() {
        out.allows("tools.core", &list(settings, "/tools/core"), 250, &NON_PLAN, false);
        out.push("tools.core", "*".to_owned(), Decision::Deny, 240).modes = NON_PLAN.to_vec();
    }
    let servers = settings.get("mcpServers").and_then(Value::as_object);
    for (name, config) in servers.into_iter().flatten() {
        if config.get("trust").and_then(Value::as_bool) == Some(true) {
            out.server(&format!("mcpServers.{name}.trust"), name, Decision::Allow, 200);
        }
    }
    let allowed = list(settings, "/mcp/allowed");
    for server in &allowed {
        out.server("mcp.allowed", server, Decision::Allow, 100);
    }
    let auto = settings.pointer("/mcp/autoAllowInHeadless").and_then(Value::as_bool) == Some(true);
    if !interactive && auto {
        for (name, config) in servers.into_iter().flatten() {
            let trusted = config.get("trust").and_then(Value::as_bool) == Some(true);
            if allowed.contains(&name.as_str()) || allowed.contains(&"*") || trusted {
                continue;
            }
            out.server("mcp.autoAllowInHeadless", name, Decision::Allow, 100);
        }
    }
    out.0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::ToolCall;
    use crate::policy::engine::PolicySet;

    fn find<'a>(rules: &'a [Rule], name: &str, decision: Decision) -> Option<&'a Rule> {
        rules.iter().find(|r| r.tool_name == name && r.decision == decision)
    }

    fn by_server<'a>(rules: &'a [Rule], server: &str, decision: Decision) -> Option<&'a Rule> {
        rules.iter().find(|r| r.mcp_name.as_deref() == Some(server) && r.decision == decision)
    }

    /// Gemini CLI's `config.test.ts`: each setting's rule and its priority.
    #[test]
    fn each_setting_gives_its_rule_at_its_priority() {
        let p = |r: Option<&Rule>| r.map(Rule::effective_priority);
        let rules = settings_rules(&json!({"tools": {"allowed": ["run_shell_command"]}}), true);
        assert_eq!(p(find(&rules, "run_shell_command", Decision::Allow)), Some(4.3));
        let rules = settings_rules(&json!({"tools": {"exclude": ["run_shell_command"]}}), true);
        assert_eq!(p(find(&rules, "run_shell_command", Decision::Deny)), Some(4.4));
        let rules = settings_rules(&json!({"mcp": {"allowed": ["my-server"]}}), true);
        assert_eq!(p(by_server(&rules, "my-server", Decision::Allow)), Some(4.1));
        let rules = settings_rules(&json!({"mcp": {"excluded": ["my-server"]}}), true);
        assert_eq!(p(by_server(&rules, "my-server", Decision::Deny)), Some(4.9));
        let rules = settings_rules(
            &json!({"mcpServers": {"trusted-server": {"trust": true}, "untrusted-server": {"trust": false}, "plain": {}}}),
            true,
        );
        assert_eq!(p(by_server(&rules, "trusted-server", Decision::Allow)), Some(4.2));
        assert!(by_server(&rules, "untrusted-server", Decision::Allow).is_none());
        assert!(by_server(&rules, "plain", Decision::Allow).is_none());
        let rules =
            settings_rules(&json!({"tools": {"confirmationRequired": ["ShellTool"]}}), true);
        assert_eq!(p(find(&rules, "run_shell_command", Decision::AskUser)), Some(4.35));
        let rules = settings_rules(&json!({"tools": {"core": ["read_file"]}}), true);
        assert_eq!(p(find(&rules, "read_file", Decision::Allow)), Some(4.25));
        assert_eq!(p(find(&rules, "*", Decision::Deny)), Some(4.24));
        assert!(!find(&rules, "*", Decision::Deny).unwrap().modes.contains(&ApprovalMode::Plan));
    }

    /// "should NOT / should automatically allow configured MCP servers in non-interactive
    /// mode", "should NOT duplicate allow rules ...", "should use correct tool name pattern
    /// for wildcard server in headless auto-allow".
    #[test]
    fn headless_auto_allow() {
        let servers = json!({"mcpServers": {"server-1": {"command": "node"}}});
        assert!(by_server(&settings_rules(&servers, false), "server-1", Decision::Allow).is_none());
        let opted = json!({"mcp": {"autoAllowInHeadless": true}, "mcpServers": {"server-1": {"command": "node"}}});
        let r = settings_rules(&opted, false);
        assert_eq!(
            by_server(&r, "server-1", Decision::Allow).map(|r| r.tool_name.as_str()),
            Some("mcp_server-1_*")
        );
        assert!(
            by_server(&settings_rules(&opted, true), "server-1", Decision::Allow).is_none(),
            "interactive: no"
        );
        let dup = json!({
            "mcp": {"autoAllowInHeadless": true, "allowed": ["a"]},
            "mcpServers": {"a": {}, "b": {"trust": true}, "c": {}}
        });
        let r = settings_rules(&dup, false);
        let count = |s: &str| {
            r.iter()
                .filter(|x| x.mcp_name.as_deref() == Some(s) && x.decision == Decision::Allow)
                .count()
        };
        assert_eq!((count("a"), count("b"), count("c")), (1, 1, 1));
        let wildcard = json!({"mcp": {"excluded": ["*"]}});
        assert_eq!(settings_rules(&wildcard, true)[0].tool_name, "mcp_*");
    }

    /// The legacy `tool(args)` form: a shell prefix with its narrowing deny; args of other
    /// tools ignored.
    #[test]
    fn legacy_tool_arguments_in_tools_allowed() {
        let rules = settings_rules(
            &json!({"tools": {"allowed": ["run_shell_command(git status)", "read_file(/x)"]}}),
            true,
        );
        let set = PolicySet::new(rules);
        let decide = |name: &str, args: Value| {
            let call = ToolCall {
                name,
                server: None,
                args: args.as_object(),
                annotations: None,
                subagent: None,
            };
            set.verdict(&call, ApprovalMode::Default, true).decision
        };
        assert_eq!(decide("run_shell_command", json!({"command": "git status"})), Decision::Allow);
        assert_eq!(
            decide("run_shell_command", json!({"command": "rm -rf /"})),
            Decision::Deny,
            "narrowed at 4.29"
        );
        assert_eq!(decide("read_file", json!({"path": "/elsewhere"})), Decision::Allow);
    }

    /// "should prioritize exclude over allow", "... specific tool allows over MCP server
    /// excludes", "... MCP server allows and tool excludes", and the plan-mode limit on trust.
    #[test]
    fn the_priorities_between_settings() {
        let settings = json!({
            "tools": {"allowed": ["run_shell_command", "mcp_my-server_specific-tool"], "exclude": ["run_shell_command", "mcp_ok_dangerous-tool"]},
            "mcp": {"excluded": ["my-server"], "allowed": ["ok"]},
            "mcpServers": {"ok": {"trust": true}}
        });
        let set = PolicySet::new(settings_rules(&settings, true));
        let decide = |name: &str, server: Option<&str>, mode| {
            let call = ToolCall { name, server, args: None, annotations: None, subagent: None };
            set.verdict(&call, mode, true).decision
        };
        let d = ApprovalMode::Default;
        assert_eq!(
            decide("run_shell_command", None, d),
            Decision::Deny,
            "exclude 4.4 over allow 4.3"
        );
        assert_eq!(
            decide("mcp_my-server_specific-tool", Some("my-server"), d),
            Decision::Deny,
            "server exclude 4.9 wins"
        );
        assert_eq!(
            decide("mcp_ok_dangerous-tool", Some("ok"), d),
            Decision::Deny,
            "tool exclude 4.4 over trust 4.2"
        );
        assert_eq!(decide("mcp_ok_fine", Some("ok"), d), Decision::Allow);
        assert_eq!(
            decide("mcp_ok_fine", Some("ok"), ApprovalMode::Plan),
            Decision::AskUser,
            "trust does not hold in plan mode"
        );
    }
}
