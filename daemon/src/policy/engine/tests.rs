//! The engine's cases, Gemini CLI's `policy-engine.test.ts` among them.
use serde_json::{Value, json};

use super::*;
use crate::policy::Tier;
use crate::policy::rule::Origin;

/// A rule as Gemini CLI's engine tests write them: a name, a decision, a priority, maybe
/// `mcpName`, an `argsPattern`, modes.
fn rule(name: &str, decision: Decision, priority: u32) -> Rule {
    let origin = Origin { file: "test.toml".into(), line: None, tier: Tier::User, priority };
    Rule::new(name.to_owned(), decision, origin)
}

fn with_mcp(mut r: Rule, server: &str) -> Rule {
    r.mcp_name = Some(server.to_owned());
    r
}

fn with_args(mut r: Rule, pattern: &str) -> Rule {
    r.args = Some(crate::policy::pattern::ArgsPattern::new(pattern).unwrap());
    r
}

fn check(set: &PolicySet, name: &str, server: Option<&str>, args: Option<Value>) -> Decision {
    let call = ToolCall {
        name,
        server,
        args: args.as_ref().and_then(Value::as_object),
        annotations: None,
        subagent: None,
    };
    set.verdict(&call, ApprovalMode::Default, true).decision
}

use Decision::{Allow, AskUser, Deny};

/// From `policy-engine.test.ts`: "should match tool by name", "should apply rules by
/// priority", "should match by args pattern", "should handle multiple matching rules with
/// different priorities".
#[test]
fn names_priorities_and_argument_patterns() {
    let set = PolicySet::new(vec![rule("shell", Allow, 0), rule("edit", Deny, 0)]);
    assert_eq!(check(&set, "shell", None, None), Allow);
    assert_eq!(check(&set, "edit", None, None), Deny);
    assert_eq!(check(&set, "other", None, None), AskUser);

    let set = PolicySet::new(vec![rule("shell", Deny, 1), rule("shell", Allow, 10)]);
    assert_eq!(check(&set, "shell", None, None), Allow, "the higher priority wins");

    let set =
        PolicySet::new(vec![with_args(rule("shell", Deny, 0), "rm -rf"), rule("shell", Allow, 0)]);
    assert_eq!(check(&set, "shell", None, Some(json!({"command": "rm -rf /"}))), Deny);
    assert_eq!(check(&set, "shell", None, Some(json!({"command": "ls -la"}))), Allow);

    let set = PolicySet::new(vec![
        rule("*", Deny, 0),
        rule("shell", AskUser, 5),
        with_args(rule("shell", Allow, 10), "\"command\":\"ls"),
    ]);
    assert_eq!(check(&set, "shell", None, Some(json!({"command": "ls -la"}))), Allow);
    assert_eq!(check(&set, "shell", None, Some(json!({"command": "rm x"}))), AskUser);
    assert_eq!(check(&set, "edit", None, None), Deny);
    assert_eq!(check(&set, "shell", None, None), AskUser, "a pattern needs arguments");
}

/// "should match any MCP tool when toolName is mcp_*", "should match MCP server wildcard
/// patterns", "should prioritize specific tool rules over server wildcards", and the
/// spoofed-server cases.
#[test]
fn mcp_wildcards_and_the_spoofed_server_cases() {
    let set = PolicySet::new(vec![rule("mcp_*", Allow, 10)]);
    let deny_default = |name, server| {
        let call = ToolCall { name, server, args: None, annotations: None, subagent: None };
        set.verdict(&call, ApprovalMode::Default, false).decision
    };
    assert_eq!(deny_default("mcp_mcp_tool", Some("mcp")), Allow);
    assert_eq!(deny_default("mcp_other_tool", Some("other")), Allow);
    assert_eq!(deny_default("read_file", None), Deny);

    let set = PolicySet::new(vec![
        with_mcp(rule("mcp_my-server_*", Allow, 10), "my-server"),
        with_mcp(rule("mcp_blocked-server_*", Deny, 20), "blocked-server"),
    ]);
    assert_eq!(check(&set, "mcp_my-server_tool1", Some("my-server"), None), Allow);
    assert_eq!(check(&set, "mcp_my-server_another_tool", Some("my-server"), None), Allow);
    assert_eq!(check(&set, "mcp_blocked-server_tool1", Some("blocked-server"), None), Deny);
    assert_eq!(check(&set, "mcp_other-server_tool", Some("other-server"), None), AskUser);
    assert_eq!(check(&set, "my-server-tool", None, None), AskUser);
    assert_eq!(check(&set, "my-server", None, None), AskUser);

    let set = PolicySet::new(vec![
        with_mcp(rule("mcp_my-server_*", Allow, 10), "my-server"),
        with_mcp(rule("mcp_my-server_dangerous-tool", Deny, 20), "my-server"),
    ]);
    assert_eq!(check(&set, "mcp_my-server_dangerous-tool", Some("my-server"), None), Deny);
    assert_eq!(check(&set, "mcp_my-server_safe-tool", Some("my-server"), None), Allow);

    let set = PolicySet::new(vec![with_mcp(rule("mcp_safe_server_*", Allow, 0), "safe_server")]);
    let spoofed = "mcp_mcp_safe_server_malicious_tool";
    assert_eq!(check(&set, spoofed, Some("mcp_safe_server_malicious"), None), AskUser);
    assert_eq!(check(&set, "mcp_other_server_tool", Some("safe_server"), None), AskUser);
    assert_eq!(check(&set, "mcp_safe_server_tool", Some("safe_server"), None), Allow);
    // And the case geminid's own names meet: server `safe_server_malicious`'s tool is
    // `mcp_safe_server_malicious_tool`, which the prefix alone would match.
    let ours = "mcp_safe_server_malicious_tool";
    assert_eq!(check(&set, ours, Some("safe_server_malicious"), None), AskUser);
}

/// "should match unqualified tool names with qualified rules when serverName is provided".
#[test]
fn short_and_qualified_mcp_names_match_each_other() {
    let set = PolicySet::new(vec![with_mcp(rule("mcp_my-server_tool", Allow, 0), "my-server")]);
    assert_eq!(check(&set, "tool", Some("my-server"), None), Allow);
    assert_eq!(check(&set, "mcp_my-server_tool", Some("my-server"), None), Allow);
    assert_eq!(check(&set, "tool", Some("elsewhere"), None), AskUser);
    // A short name with mcpName (as written in TOML before the loader qualifies it).
    let set = PolicySet::new(vec![with_mcp(rule("tool", Deny, 0), "srv")]);
    assert_eq!(check(&set, "mcp_srv_tool", Some("srv"), None), Deny);
}

/// "should handle non-interactive mode", the YOLO cases, and rules limited to modes or to
/// interactive sessions.
#[test]
fn modes_and_interactivity() {
    let mut yolo_only = rule("write_file", Allow, 50);
    yolo_only.modes = vec![ApprovalMode::Yolo];
    let mut headless_deny = rule("shell", Deny, 40);
    headless_deny.interactive = Some(false);
    let set = PolicySet::new(vec![yolo_only, headless_deny, rule("rm", Deny, 10)]);
    let at = |name, mode, interactive| {
        let call = ToolCall { name, server: None, args: None, annotations: None, subagent: None };
        set.verdict(&call, mode, interactive).decision
    };
    assert_eq!(at("write_file", ApprovalMode::Yolo, true), Allow);
    assert_eq!(at("write_file", ApprovalMode::Default, true), AskUser);
    assert_eq!(at("write_file", ApprovalMode::Default, false), Deny, "headless: no match denies");
    assert_eq!(at("other", ApprovalMode::Yolo, false), Allow, "YOLO allows what nothing matches");
    assert_eq!(at("rm", ApprovalMode::Yolo, true), Deny, "YOLO does not override a deny");
    assert_eq!(at("shell", ApprovalMode::Default, false), Deny);
    assert_eq!(
        at("shell", ApprovalMode::Default, true),
        AskUser,
        "that rule is for headless sessions"
    );
}

/// "should match args pattern regardless of property order", "should handle nested
/// objects in args with stable stringification", annotations and subagents.
#[test]
fn stable_arguments_annotations_and_subagents() {
    let set = PolicySet::new(vec![with_args(rule("t", Deny, 0), "\"a\":1.*\"b\":2")]);
    assert_eq!(check(&set, "t", None, Some(json!({"b": 2, "a": 1}))), Deny);
    let set = PolicySet::new(vec![with_args(rule("t", Deny, 0), "\"x\":\\{\"y\":1,\"z\":2\\}")]);
    assert_eq!(check(&set, "t", None, Some(json!({"x": {"z": 2, "y": 1}}))), Deny);

    let mut read_only = rule("*", Allow, 5);
    read_only.annotations = json!({"readOnlyHint": true}).as_object().cloned();
    let set = PolicySet::new(vec![read_only]);
    let hints = json!({"readOnlyHint": true}).as_object().cloned().unwrap();
    let call =
        ToolCall { name: "x", server: None, args: None, annotations: Some(&hints), subagent: None };
    assert_eq!(set.verdict(&call, ApprovalMode::Default, true).decision, Allow);
    let call = ToolCall { annotations: None, ..call };
    assert_eq!(set.verdict(&call, ApprovalMode::Default, true).decision, AskUser);

    let mut for_reviewer = rule("shell", Deny, 5);
    for_reviewer.subagent = Some("reviewer".into());
    let set = PolicySet::new(vec![for_reviewer]);
    let call = ToolCall {
        name: "shell",
        server: None,
        args: None,
        annotations: None,
        subagent: Some("reviewer"),
    };
    assert_eq!(set.verdict(&call, ApprovalMode::Default, true).decision, Deny);
    let call = ToolCall { subagent: None, ..call };
    assert_eq!(set.verdict(&call, ApprovalMode::Default, true).decision, AskUser);
}

#[test]
fn tiers_order_before_priorities_and_the_verdict_names_its_rule() {
    let mut admin = rule("shell", Deny, 0);
    admin.origin.tier = Tier::Admin;
    let mut user = rule("shell", Allow, 999);
    user.origin.tier = Tier::User;
    let set = PolicySet::new(vec![user, admin]);
    let call =
        ToolCall { name: "shell", server: None, args: None, annotations: None, subagent: None };
    let v = set.verdict(&call, ApprovalMode::Default, true);
    assert_eq!((v.decision, v.rule.map(|r| r.origin.tier)), (Deny, Some(Tier::Admin)));
    assert_eq!(set.rules()[0].effective_priority(), 5.0);
    assert_eq!(set.rules()[1].effective_priority(), 4.999);
}

/// The name index only skips rules that cannot match: a large set decides every call as
/// trying each rule in order would.
#[test]
fn the_name_index_decides_as_trying_every_rule() {
    let names = [
        "*",
        "mcp_*",
        "mcp_fx_*",
        "mcp_safe_*",
        "mcp_fx_echo",
        "echo",
        "mcp_other_echo",
        "run_shell_command",
        "read_file",
        "mcp_*_echo",
        "write_file",
        "mcp_safe_server_x",
    ];
    let mut rules = Vec::new();
    for (i, name) in names.iter().cycle().take(120).enumerate() {
        let decision = [Allow, Deny, AskUser][i % 3];
        let mut r = rule(name, decision, u32::try_from(i * 7 % 999).unwrap());
        if i % 5 == 0 {
            r.mcp_name = Some(["fx", "safe", "*"][i % 3].to_owned());
        }
        if i % 4 == 0 {
            r = with_args(r, "\"text\":\"x");
        }
        if i % 6 == 0 {
            r.modes = vec![ApprovalMode::Plan];
        }
        rules.push(r);
    }
    let set = PolicySet::new(rules);
    assert!(set.rules().len() >= INDEX_FROM);
    let calls: &[(&str, Option<&str>)] = &[
        ("mcp_fx_echo", Some("fx")),
        ("echo", Some("fx")),
        ("mcp_safe_server_x", Some("safe_server")),
        ("mcp_safe_server_x", Some("safe")),
        ("mcp_other_echo", Some("other")),
        ("run_shell_command", None),
        ("read_file", None),
        ("unknown", None),
        ("mcp_*_echo", Some("x")),
    ];
    for (name, server) in calls {
        for args in [None, Some(json!({"text": "x"})), Some(json!({"text": "y"}))] {
            for mode in [ApprovalMode::Default, ApprovalMode::Plan] {
                for interactive in [true, false] {
                    let args = args.as_ref().and_then(Value::as_object);
                    let call =
                        ToolCall { name, server: *server, args, annotations: None, subagent: None };
                    let stable = args.map(stable_stringify_map);
                    let linear = set
                        .rules()
                        .iter()
                        .position(|r| r.matches(&call, stable.as_deref(), mode, interactive));
                    // Every rule that matches is among the candidates.
                    let tried: Vec<*const Rule> =
                        set.candidates(&call).map(|r| r as *const Rule).collect();
                    for r in set.rules() {
                        if r.matches(&call, stable.as_deref(), mode, interactive) {
                            assert!(
                                tried.contains(&(r as *const Rule)),
                                "{} (mcpName {:?}) skipped for {name} {server:?}",
                                r.tool_name,
                                r.mcp_name
                            );
                        }
                    }
                    let got = set.verdict(&call, mode, interactive);
                    let at = got.rule.map(|r| set.rules().iter().position(|x| std::ptr::eq(x, r)));
                    assert_eq!(
                        at.flatten(),
                        linear,
                        "{name} {server:?} {args:?} {mode:?} {interactive}"
                    );
                }
            }
        }
    }
}

/// Gemini CLI's `getExcludedTools` cases (`policy-engine.test.ts`), as data: the rules,
/// the mode, whether the session is headless, the tools (with their servers), and which
/// are excluded.
#[test]
fn excluded_tools_as_gemini_cli_computes_them() {
    let cases = by_decision_and_priority().into_iter().chain(by_session());
    for (what, rules, mode, headless, tools, want) in cases {
        let set = PolicySet::new(rules);
        let got: Vec<&str> = tools
            .iter()
            .filter(|(name, server)| {
                let call = ToolCall {
                    name,
                    server: *server,
                    args: None,
                    annotations: None,
                    subagent: None,
                };
                set.excludes(&call, mode, !headless).is_some()
            })
            .map(|(name, _)| *name)
            .collect();
        assert_eq!(got, want, "{what}");
    }
}

/// One `getExcludedTools` case: what it shows, the rules, the mode, whether the session is
/// headless, the tools (with their servers), and which are excluded.
type Case = (
    &'static str,
    Vec<Rule>,
    ApprovalMode,
    bool,
    Vec<(&'static str, Option<&'static str>)>,
    Vec<&'static str>,
);

fn in_modes(mut r: Rule, m: &[ApprovalMode]) -> Rule {
    r.modes = m.to_vec();
    r
}

fn interactive_only(mut r: Rule, i: bool) -> Rule {
    r.interactive = Some(i);
    r
}

/// The cases a rule's decision and priority decide.
fn by_decision_and_priority() -> Vec<Case> {
    use ApprovalMode::Default as Normal;
    vec![
        ("no rules", vec![], Normal, false, vec![("tool1", None)], vec![]),
        (
            "rules without modes apply in every mode",
            vec![rule("tool1", Deny, 0)],
            Normal,
            false,
            vec![("tool1", None), ("tool2", None)],
            vec!["tool1"],
        ),
        (
            "a higher argsPattern allow keeps a tool",
            vec![
                in_modes(with_args(rule("tool1", Allow, 100), "safe"), &[Normal]),
                in_modes(rule("tool1", Deny, 10), &[Normal]),
            ],
            Normal,
            false,
            vec![("tool1", None)],
            vec![],
        ),
        (
            "deny decisions",
            vec![
                in_modes(rule("tool1", Deny, 0), &[Normal]),
                in_modes(rule("tool2", Allow, 0), &[Normal]),
            ],
            Normal,
            false,
            vec![("tool1", None), ("tool2", None), ("tool3", None)],
            vec!["tool1"],
        ),
        (
            "priority: deny wins",
            vec![
                in_modes(rule("tool1", Deny, 100), &[Normal]),
                in_modes(rule("tool1", Allow, 10), &[Normal]),
            ],
            Normal,
            false,
            vec![("tool1", None)],
            vec!["tool1"],
        ),
        (
            "priority: allow wins",
            vec![
                in_modes(rule("tool1", Allow, 100), &[Normal]),
                in_modes(rule("tool1", Deny, 10), &[Normal]),
            ],
            Normal,
            false,
            vec![("tool1", None)],
            vec![],
        ),
    ]
}

/// The cases the session decides: headless, plan and YOLO modes, servers.
fn by_session() -> Vec<Case> {
    use ApprovalMode::{Default as Normal, Plan, Yolo};
    vec![
        (
            "headless: the interactive-false deny",
            vec![
                interactive_only(in_modes(rule("tool1", AskUser, 0), &[Normal]), true),
                interactive_only(in_modes(rule("tool1", Deny, 0), &[Normal]), false),
            ],
            Normal,
            true,
            vec![("tool1", None)],
            vec!["tool1"],
        ),
        (
            "ask_user in a headless session",
            vec![interactive_only(rule("ask_user", Deny, 0), false), rule("read_file", Allow, 0)],
            Normal,
            true,
            vec![("ask_user", None), ("read_file", None)],
            vec!["ask_user"],
        ),
        (
            "a deny with argsPattern is ignored",
            vec![in_modes(with_args(rule("tool1", Deny, 0), "something"), &[Normal])],
            Normal,
            false,
            vec![("tool1", None)],
            vec![],
        ),
        (
            "plan mode",
            vec![in_modes(rule("tool1", Deny, 0), &[Plan])],
            Plan,
            false,
            vec![("tool1", None)],
            vec!["tool1"],
        ),
        (
            "a plan rule in default mode",
            vec![in_modes(rule("tool1", Deny, 0), &[Plan])],
            Normal,
            false,
            vec![("tool1", None)],
            vec![],
        ),
        (
            "a YOLO wildcard allow",
            vec![
                in_modes(rule("*", Allow, 999), &[Yolo]),
                in_modes(rule("dangerous-tool", Deny, 10), &[Yolo]),
            ],
            Yolo,
            false,
            vec![("dangerous-tool", None), ("safe-tool", None)],
            vec![],
        ),
        (
            "a server wildcard deny",
            vec![in_modes(with_mcp(rule("mcp_server_*", Deny, 0), "server"), &[Normal])],
            Normal,
            false,
            vec![
                ("mcp_server_tool1", Some("server")),
                ("mcp_server_tool2", Some("server")),
                ("mcp_other_tool", Some("other")),
            ],
            vec!["mcp_server_tool1", "mcp_server_tool2"],
        ),
        (
            "a server wildcard before a tool's own rule",
            vec![
                in_modes(with_mcp(rule("mcp_server_*", Deny, 100), "server"), &[Normal]),
                in_modes(with_mcp(rule("mcp_server_tool1", Deny, 10), "server"), &[Normal]),
            ],
            Normal,
            false,
            vec![("mcp_server_tool1", Some("server")), ("mcp_server_tool2", Some("server"))],
            vec!["mcp_server_tool1", "mcp_server_tool2"],
        ),
    ]
}

/// `discovered_tool_*` (Gemini CLI's default rules for custom tools) means every custom tool:
/// geminid's difference, since Gemini CLI's engine compares it as written and matches none. It
/// gives nothing to an MCP tool, nor to a name that merely contains it.
#[test]
fn discovered_tool_star_means_every_custom_tool() {
    let set = PolicySet::new(vec![rule("discovered_tool_*", Allow, 10), rule("*", Deny, 1)]);
    assert_eq!(check(&set, "discovered_tool_lint", None, None), Allow);
    assert_eq!(check(&set, "discovered_tool_", None, None), Allow);
    assert_eq!(check(&set, "discovered_tool_lint", Some("srv"), None), Deny);
    assert_eq!(check(&set, "mcp_srv_discovered_tool_x", Some("srv"), None), Deny);
    assert_eq!(check(&set, "my_discovered_tool_x", None, None), Deny);
    // Other patterns with a `*` stay as Gemini CLI reads them: matching nothing.
    let set = PolicySet::new(vec![rule("run_shell*", Allow, 10)]);
    assert_eq!(check(&set, "run_shell_command", None, None), AskUser);
}

/// A pattern too large to build (found only when first matched, issue 39's lazy patterns)
/// fails closed: its deny rule denies and its ask rule asks every call it names, and its
/// allow rule allows none.
#[test]
fn a_pattern_that_cannot_be_built_never_allows() {
    let huge = "\\w{1000}\\w{1000}";
    let args = Some(json!({"x": "y"}));
    let deny = PolicySet::new(vec![with_args(rule("t", Deny, 5), huge), rule("t", Allow, 1)]);
    assert_eq!(check(&deny, "t", None, args.clone()), Deny);
    let ask = PolicySet::new(vec![with_args(rule("t", AskUser, 5), huge), rule("t", Allow, 1)]);
    assert_eq!(check(&ask, "t", None, args.clone()), AskUser);
    let allow = PolicySet::new(vec![with_args(rule("t", Allow, 5), huge), rule("t", Deny, 1)]);
    assert_eq!(check(&allow, "t", None, args), Deny);
}
