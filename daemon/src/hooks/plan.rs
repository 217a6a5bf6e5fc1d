//! Which hooks an event runs (Gemini CLI's `HookPlanner`): the event's enabled hooks, settings'
//! before extensions', whose matcher fits the context, de-duplicated by `name:command`;
//! sequential when any of them asks for it, else in parallel.

use std::collections::HashSet;

use super::registry::{Entry, Registry};
use super::{HookCommand, HookEvent};

/// What an event runs.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    /// The hooks, in order.
    pub hooks: Vec<&'a HookCommand>,
    /// One after the other (each sees the input the previous one changed), else all at once.
    pub sequential: bool,
}

/// The plan for `event` with its context (a tool's name, a trigger), or `None` when no hook
/// matches.
pub fn plan<'a>(reg: &'a Registry, event: HookEvent, context: Option<&str>) -> Option<Plan<'a>> {
    plan_of(reg, event, context, |_| true)
}

/// [`plan`] of the entries `keep` keeps (a gateway client that runs the hooks it reads itself
/// leaves geminid only the others).
pub(crate) fn plan_of<'a>(
    reg: &'a Registry,
    event: HookEvent,
    context: Option<&str>,
    keep: fn(&Entry) -> bool,
) -> Option<Plan<'a>> {
    if reg.switched_off {
        return None;
    }
    let mut seen = HashSet::new();
    let mut hooks = Vec::new();
    let mut sequential = false;
    let mut matching: Vec<_> = reg
        .entries
        .iter()
        .filter(|e| e.event == event && e.enabled && keep(e) && e.matcher.matches(context))
        .collect();
    matching.sort_by_key(|e| e.hook.source);
    for e in matching {
        if seen.insert(e.hook.key()) {
            sequential |= e.sequential;
            hooks.push(&e.hook);
        }
    }
    (!hooks.is_empty()).then_some(Plan { hooks, sequential })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::hooks::registry::ExtensionHooks;

    fn reg(hooks: serde_json::Value) -> Registry {
        Registry::new(&json!({ "hooks": hooks }), true, &[])
    }

    fn names(p: Option<Plan<'_>>) -> Vec<String> {
        p.map(|p| p.hooks.iter().map(|h| h.label().to_owned()).collect()).unwrap_or_default()
    }

    fn def(matcher: Option<&str>, commands: &[&str]) -> serde_json::Value {
        let hooks: Vec<_> =
            commands.iter().map(|c| json!({"type": "command", "command": c})).collect();
        match matcher {
            Some(m) => json!({ "matcher": m, "hooks": hooks }),
            None => json!({ "hooks": hooks }),
        }
    }

    /// Gemini CLI's `hookPlanner.test.ts` cases: matchers for tool events (unanchored
    /// regexes, invalid ones literal), exact triggers, context-free events, `*` and empty.
    #[test]
    fn matchers_as_gemini_cli_reads_them() {
        let r = reg(json!({
            "BeforeTool": [
                def(Some("read"), &["unanchored"]),
                def(Some("^write_file$"), &["anchored"]),
                def(Some("[invalid"), &["literal"]),
                def(Some("*"), &["star"]),
                def(Some(""), &["empty"]),
                def(None, &["none"]),
                def(Some(" mcp_.*_search "), &["trimmed"]),
            ],
            "SessionStart": [def(Some("startup"), &["on-startup"]), def(Some("start"), &["partial"])],
            "BeforeAgent": [def(Some("never-matches"), &["context-free"])],
        }));
        let tool = |name: &str| names(plan(&r, HookEvent::BeforeTool, Some(name)));
        assert_eq!(tool("read_file"), ["unanchored", "star", "empty", "none"]);
        assert_eq!(tool("mcp_x_read_y"), ["unanchored", "star", "empty", "none"]);
        assert_eq!(tool("write_file"), ["anchored", "star", "empty", "none"]);
        assert_eq!(tool("[invalid"), ["literal", "star", "empty", "none"]);
        assert_eq!(tool("mcp_docs_search"), ["star", "empty", "none", "trimmed"]);
        let start = |s: &str| names(plan(&r, HookEvent::SessionStart, Some(s)));
        assert_eq!(start("startup"), ["on-startup"]);
        assert_eq!(start("resume"), Vec::<String>::new());
        assert_eq!(names(plan(&r, HookEvent::BeforeAgent, None)), ["context-free"]);
        assert!(plan(&r, HookEvent::AfterTool, Some("x")).is_none());
    }

    #[test]
    fn duplicates_run_once_sequential_is_contagious_and_settings_run_before_extensions() {
        let ext = ExtensionHooks {
            name: "e".into(),
            hooks: json!({"BeforeTool": [def(None, &["from-ext", "dup"])]}),
            env: Default::default(),
        };
        let settings = json!({"hooks": {"BeforeTool": [
            def(None, &["dup"]),
            {"sequential": true, "matcher": "only_this", "hooks": [{"type": "command", "command": "seq"}]},
            def(None, &["dup"]),
        ]}});
        let r = Registry::new(&settings, true, &[ext]);
        let p = plan(&r, HookEvent::BeforeTool, Some("other")).unwrap();
        assert!(!p.sequential);
        assert_eq!(names(Some(p)), ["dup", "from-ext"]);
        let p = plan(&r, HookEvent::BeforeTool, Some("only_this")).unwrap();
        assert!(p.sequential, "one matching definition asks for it");
        assert_eq!(names(Some(p)), ["dup", "seq", "from-ext"]);
    }

    #[test]
    fn hooks_config_and_bad_entries() {
        let settings = json!({
            "hooksConfig": {"disabled": ["named", "echo off"]},
            "hooks": {
                "BeforeTool": [{"hooks": [
                    {"type": "command", "command": "x", "name": "named"},
                    {"type": "command", "command": "echo off"},
                    {"type": "Command", "command": "case"},
                    {"type": "command"},
                    {"type": "command", "command": "t", "timeout": "soon"},
                    {"type": "runtime", "name": "r"},
                    {"type": "command", "command": "kept"},
                ]}],
                "PreToolUse": [def(None, &["claude"])],
                "disabled": ["legacy key, not an event"],
            }
        });
        let r = Registry::new(&settings, true, &[]);
        assert_eq!(names(plan(&r, HookEvent::BeforeTool, Some("a"))), ["t", "kept"]);
        let text = r.warnings.join("\n");
        assert!(
            text.contains("hooks.BeforeTool[0].hooks[2]: type \"Command\" is not a hook type"),
            "{text}"
        );
        assert!(text.contains("hooks[3]: a command hook needs `command`"), "{text}");
        assert!(text.contains("hooks[4]: `timeout` is \"soon\""), "{text}");
        assert!(text.contains("type \"runtime\" hooks are not run"), "{text}");
        assert!(
            text.contains("invalid hook event name \"PreToolUse\" (Claude Code's name: BeforeTool"),
            "{text}"
        );
        assert!(!text.contains("\"disabled\""), "{text}");

        let off = Registry::new(
            &json!({"hooksConfig": {"enabled": false}, "hooks": {"BeforeTool": [def(None, &["x"])]}}),
            true,
            &[],
        );
        assert!(plan(&off, HookEvent::BeforeTool, Some("a")).is_none());

        let untrusted =
            Registry::new(&json!({"hooks": {"BeforeTool": [def(None, &["x"])]}}), false, &[]);
        assert!(untrusted.entries.is_empty());
        assert!(untrusted.warnings[0].contains("not trusted"), "{:?}", untrusted.warnings);
    }
}
