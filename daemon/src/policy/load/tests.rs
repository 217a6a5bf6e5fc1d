use super::*;
use crate::policy::stringify::stable_stringify;
use serde_json::json;

fn ok(text: &str) -> Vec<Rule> {
    let l = load("p.toml", text, Tier::User);
    let errors: Vec<&Diagnostic> =
        l.problems.iter().filter(|d| d.severity == Severity::Error).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    l.rules
}

/// The one error a text gives, and its line.
fn error(text: &str) -> (String, Option<u32>) {
    let l = load("p.toml", text, Tier::User);
    let errors: Vec<&Diagnostic> =
        l.problems.iter().filter(|d| d.severity == Severity::Error).collect();
    assert_eq!(errors.len(), 1, "{:#?}", l.problems);
    assert_eq!(errors[0].file, "p.toml");
    (errors[0].message.clone(), errors[0].line)
}

fn cmd(c: &str) -> String {
    stable_stringify(&json!({ "command": c }))
}

/// Gemini CLI's `toml-loader.test.ts`: a simple file, `commandPrefix` and `toolName` lists,
/// annotations, `mcpName` forms, `commandRegex`, modes, the snake_case aliases.
#[test]
fn rules_load_as_gemini_cli_loads_them() {
    let r = ok(r#"
[[rule]]
toolName = "glob"
decision = "allow"
priority = 100
"#);
    assert_eq!((r.len(), r[0].tool_name.as_str(), r[0].decision), (1, "glob", Decision::Allow));
    assert_eq!((r[0].effective_priority(), r[0].origin.line), (4.1, Some(2)));

    let r = ok(r#"
[[rule]]
toolName = "run_shell_command"
commandPrefix = ["git status", "git log"]
decision = "allow"
priority = 100
"#);
    assert_eq!(r.len(), 2);
    assert!(r[0].args.as_ref().unwrap().is_match(&cmd("git status")).unwrap());
    assert!(r[1].args.as_ref().unwrap().is_match(&cmd("git log")).unwrap());
    assert!(!r[0].args.as_ref().unwrap().is_match(&cmd("git log")).unwrap());

    let r = ok(r#"
[[rule]]
toolName = "annotated-tool"
toolAnnotations = { readOnlyHint = true, custom = "value" }
decision = "allow"
priority = 70
"#);
    assert_eq!(
        r[0].annotations.as_ref().map(|a| Value::Object(a.clone())),
        Some(json!({"readOnlyHint": true, "custom": "value"}))
    );

    let names = |text: &str| ok(text).iter().map(|r| r.tool_name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(
            "[[rule]]\ntoolName = \"*\"\nmcpName = \"*\"\ndecision = \"ask_user\"\npriority = 10\n"
        ),
        ["mcp_*"]
    );
    assert_eq!(
        names(
            "[[rule]]\nmcpName = \"*\"\ntoolName = \"search\"\ndecision = \"allow\"\npriority = 10\n"
        ),
        ["mcp_*_search"]
    );
    assert_eq!(
        names(
            "[[rule]]\ntoolName = [\"glob\", \"grep\", \"read\"]\ndecision = \"allow\"\npriority = 100\n"
        ),
        ["glob", "grep", "read"]
    );
    assert_eq!(
        names(
            "[[rule]]\nmcpName = \"google-workspace\"\ntoolName = [\"calendar.list\", \"calendar.get\"]\ndecision = \"allow\"\npriority = 100\n"
        ),
        ["mcp_google-workspace_calendar.list", "mcp_google-workspace_calendar.get"]
    );

    let r = ok(r#"
[[rule]]
toolName = "run_shell_command"
commandRegex = "git (status|log).*"
decision = "allow"
priority = 100
"#);
    let p = r[0].args.as_ref().unwrap();
    assert!(
        p.is_match(&cmd("git status")).unwrap()
            && p.is_match(&cmd("git log --all")).unwrap()
            && !p.is_match(&cmd("git branch")).unwrap()
    );
    let r = ok(
        "[[rule]]\ntoolName = \"run_shell_command\"\ncommandRegex = \"^git status\"\ndecision = \"allow\"\npriority = 100\n",
    );
    assert!(
        !r[0].args.as_ref().unwrap().is_match(&cmd("git status")).unwrap(),
        "^ anchors at the whole JSON"
    );

    let r = ok(r#"
[[rule]]
toolName = "write_file"
modes = ["autoEdit", "yolo"]
interactive = true
allow_redirection = true
deny_message = "no writes"
decision = "deny"
priority = 5
"#);
    assert_eq!(r[0].modes, [ApprovalMode::AutoEdit, ApprovalMode::Yolo]);
    assert_eq!((r[0].interactive, r[0].allow_redirection), (Some(true), Some(true)));
    assert_eq!(r[0].deny_message.as_deref(), Some("no writes"));
    let r = ok(
        "[[rule]]\ntoolName = \"x\"\nallowRedirection = false\ndenyMessage = \"m\"\ndecision = \"deny\"\npriority = 5\n",
    );
    assert_eq!((r[0].allow_redirection, r[0].deny_message.as_deref()), (Some(false), Some("m")));

    let r = ok(
        "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"echo (a)\"\ndecision = \"allow\"\npriority = 1\n",
    );
    assert!(
        r[0].args.as_ref().unwrap().is_match(&cmd("echo (a) b")).unwrap(),
        "special characters are escaped"
    );
}

/// The bad input the policy issue names, each a clear error with its line, and the file's
/// other rules still loaded.
#[test]
fn a_bad_rule_is_said_with_its_line_and_costs_only_itself() {
    let cases = [
        ("toolName = \"x\"\ndecision = \"allow\"\npriority = 1000", "priority must be <= 999", 3),
        ("toolName = \"x\"\ndecision = \"allow\"\npriority = -1", "priority must be >= 0", 3),
        (
            "toolName = \"x\"\ndecision = \"allow\"\npriority = 1.5",
            "priority must be an integer",
            3,
        ),
        ("toolName = \"x\"\ndecision = \"allow\"", "priority is required", 0),
        ("toolName = \"x\"\ndecision = \"maybe\"\npriority = 1", "decision must be", 2),
        ("decision = \"allow\"\npriority = 1", "toolName is required", 0),
        (
            "toolName = \"\"\ndecision = \"allow\"\npriority = 1",
            "toolName cannot be an empty string",
            1,
        ),
        (
            "toolName = 7\ndecision = \"allow\"\npriority = 1",
            "toolName must be a string or a list",
            1,
        ),
        (
            "toolName = \"read_file\"\ncommandPrefix = \"ls\"\ndecision = \"allow\"\npriority = 1",
            "only be used with toolName = \"run_shell_command\"",
            2,
        ),
        (
            "toolName = \"run_shell_command\"\nargsPattern = \"a\"\ncommandRegex = \"b\"\ndecision = \"allow\"\npriority = 1",
            "cannot be used together",
            2,
        ),
        (
            "toolName = \"run_shell_command\"\ncommandPrefix = \"a\"\ncommandRegex = \"b\"\ndecision = \"allow\"\npriority = 1",
            "commandPrefix and commandRegex cannot be used together",
            3,
        ),
        (
            "toolName = \"x\"\nargsPattern = \"(a+)+\"\ndecision = \"allow\"\npriority = 1",
            "nested quantifier",
            2,
        ),
        (
            "toolName = \"x\"\nargsPattern = \"(unclosed\"\ndecision = \"allow\"\npriority = 1",
            "its pattern cannot be used",
            2,
        ),
        (
            "toolName = \"x\"\nmodes = [\"turbo\"]\ndecision = \"allow\"\npriority = 1",
            "modes must be a list",
            2,
        ),
    ];
    for (body, expected, line) in cases {
        let text = format!(
            "[[rule]]\ntoolName = \"kept\"\ndecision = \"deny\"\npriority = 3\n\n[[rule]]\n{body}\n"
        );
        let l = load("p.toml", &text, Tier::User);
        let (message, at) = error(&text);
        assert!(message.contains("rule #2") && message.contains(expected), "{body}: {message}");
        assert_eq!(at, Some(line + 6), "{body}: {message} (the line of the field, or of [[rule]])");
        assert_eq!(l.rules.len(), 1, "{body}: the first rule still loads");
        assert_eq!(l.rules[0].tool_name, "kept");
        assert!(!l.unreadable);
    }
}

#[test]
fn a_file_that_is_not_toml_is_said_at_its_position_and_loads_nothing() {
    let l = load("broken.toml", "[[rule]]\ntoolName = \"x\"\ndecision = allow\n", Tier::User);
    assert!(l.unreadable && l.rules.is_empty());
    let d = &l.problems[0];
    assert_eq!((d.severity, d.file.as_str(), d.line), (Severity::Error, "broken.toml", Some(3)));
    assert!(d.message.starts_with("TOML parsing failed"), "{}", d.message);
    assert!(d.column.is_some());
}

#[test]
fn warnings_do_not_stop_a_rule() {
    let l = load(
        "p.toml",
        "[[rule]]\ntoolName = \"srv__tool\"\nsurprise = 1\ndecision = \"allow\"\npriority = 1\n\n[[safety_checker]]\ntoolName = \"x\"\n",
        Tier::User,
    );
    assert_eq!(l.rules.len(), 1);
    let text: Vec<&str> = l.problems.iter().map(|d| d.message.as_str()).collect();
    assert!(text.iter().any(|m| m.contains("\"__\" syntax")), "{text:?}");
    assert!(text.iter().any(|m| m.ends_with("unknown field 'surprise'; ignored")), "{text:?}");
    assert!(text.iter().any(|m| m.contains("safety_checker")), "{text:?}");
    assert!(l.problems.iter().all(|d| d.severity == Severity::Warning));
}

#[test]
fn lines_give_what_counting_from_the_start_gives() {
    // Counted the slow way, as before: the newlines before, and the characters since the last.
    fn counted(text: &str, offset: usize) -> (u32, u32) {
        let before = &text[..offset.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line as u32, column as u32)
    }
    for text in ["", "a", "\n", "ab\ncd\n", "\n\nx", "é\nüñ\n[[rule]]\ntoolName = \"ä\"\n"] {
        let lines = Lines::new(text);
        for offset in (0..=text.len() + 2).filter(|&o| o > text.len() || text.is_char_boundary(o)) {
            assert_eq!(lines.position(offset), counted(text, offset), "{text:?} at {offset}");
        }
    }
}

/// A file read one `[[rule]]` at a time gives exactly what it gives read whole: the same rules
/// from the same lines, the same problems at the same places; and what cannot be read a rule at
/// a time (a `[[rule]]` line inside a multi-line string, other tables, keys before the first
/// rule, a file that does not parse) is read whole.
#[test]
fn reading_rule_by_rule_gives_what_reading_whole_gives() {
    fn read_whole(text: &str) -> Loaded {
        let mut r =
            Reader { file: "p.toml", lines: Lines::new(text), base: 0, out: Loaded::default() };
        whole(&mut r, text, Tier::User);
        r.out.problems.sort_by_key(|d| std::cmp::Reverse(d.severity));
        r.out
    }
    fn seen(l: &Loaded) -> Vec<(String, Option<u32>, String, bool)> {
        l.rules
            .iter()
            .map(|r| {
                (r.tool_name.clone(), r.origin.line, format!("{:?}", r.decision), r.args.is_some())
            })
            .collect()
    }
    let cases: &[(&str, bool)] = &[
        (
            "# comment\n\n[[rule]]\ntoolName = \"a\"\ndecision = \"allow\"\npriority = 1\n\n  [[rule]]  \ntoolName = \"b\"\ndecision = \"maybe\"\npriority = 2\n[[rule]]\ntoolName = [\"c\", \"d\"]\nargsPattern = \"x\"\ndecision = \"deny\"\npriority = 3\nbogus = 1\n[[rule]]\ntoolName = \"e\"\ndecision = \"deny\"\npriority = 4000\n",
            true,
        ),
        (
            "[[rule]]\ntoolName = \"a\"\ndecision = \"deny\"\npriority = 1\ndenyMessage = \"\"\"\n[[rule]]\n\"\"\"\n[[rule]]\ntoolName = \"b\"\ndecision = \"deny\"\npriority = 1\n",
            false,
        ),
        (
            "[[rule]]\ntoolName = \"a\"\ndecision = \"deny\"\npriority = 1\n[rule.toolAnnotations]\nreadOnlyHint = true\n[[rule]]\ntoolName = \"b\"\ndecision = \"deny\"\npriority = 1\n",
            true,
        ),
        (
            "[[rule]]\ntoolName = \"a\"\ndecision = \"deny\"\npriority = 1\n[[safety_checker]]\nx = 1\n[other]\ny = 2\n",
            false,
        ),
        ("x = 1\n[[rule]]\ntoolName = \"a\"\ndecision = \"deny\"\npriority = 1\n", false),
        ("[[rule]]\ntoolName = \"a\"\ndecision = \n[[rule]]\ntoolName = \"b\"\n", false),
        ("rule = 3\n", false),
        ("", false),
    ];
    for (text, split) in cases {
        assert_eq!(
            rule_starts(text).is_some()
                && by_rule(
                    &mut Reader {
                        file: "p.toml",
                        lines: Lines::new(text),
                        base: 0,
                        out: Loaded::default()
                    },
                    text,
                    Tier::User
                ),
            *split,
            "{text}"
        );
        let (by, all) = (load("p.toml", text, Tier::User), read_whole(text));
        assert_eq!(by.problems, all.problems, "{text}");
        assert_eq!(seen(&by), seen(&all), "{text}");
        assert_eq!(by.unreadable, all.unreadable, "{text}");
    }
    // The first case's problems are where they are in the file.
    let lines: Vec<Option<u32>> =
        load("p.toml", cases[0].0, Tier::User).problems.iter().map(|d| d.line).collect();
    assert_eq!(lines, [Some(10), Some(21), Some(17)]);
}

/// A misspelt field names the one likely meant (new-user audit M7): `toolname` left the rule
/// without its `toolName`, which is all the error said.
#[test]
fn a_misspelt_field_names_the_one_likely_meant() {
    let l = load(
        "p.toml",
        "[[rule]]\ntoolname = \"mcp_srv_tool\"\ndecision = \"deny\"\npriority = 1\n",
        Tier::User,
    );
    let text: Vec<&str> = l.problems.iter().map(|d| d.message.as_str()).collect();
    assert!(
        text.contains(&"rule #1: unknown field 'toolname'; ignored (did you mean 'toolName'?)"),
        "{text:?}"
    );
}
