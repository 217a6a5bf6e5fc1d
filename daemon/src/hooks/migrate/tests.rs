//! Gemini CLI's `migrate.test.ts` cases as data, and where geminid answers differently.

use serde_json::{Value, json};

use super::*;

fn hooks(claude: Value) -> Value {
    Value::Object(from_claude(&json!({ "hooks": claude })).hooks)
}

fn one(command: &str) -> Value {
    json!([{ "hooks": [{ "type": "command", "command": command }] }])
}

#[test]
fn the_reference_cases() {
    // Each: Claude's hooks, and what the reference writes for them (timeouts aside, below).
    let cases: Vec<(Value, Value)> = vec![
        (
            json!({"PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "echo \"Before Edit\""}]}]}),
            json!({"BeforeTool": [{"matcher": "replace", "hooks": [{"type": "command", "command": "echo \"Before Edit\""}]}]}),
        ),
        (
            json!({
                "PreToolUse": one("echo 1"), "PostToolUse": one("echo 2"),
                "UserPromptSubmit": one("echo 3"), "Stop": one("echo 4"),
                "SessionStart": one("echo 6"), "SessionEnd": one("echo 7"),
                "PreCompact": one("echo 8"), "Notification": one("echo 9"),
            }),
            json!({
                "BeforeTool": one("echo 1"), "AfterTool": one("echo 2"),
                "BeforeAgent": one("echo 3"), "AfterAgent": one("echo 4"),
                "SessionStart": one("echo 6"), "SessionEnd": one("echo 7"),
                "PreCompress": one("echo 8"), "Notification": one("echo 9"),
            }),
        ),
        (
            json!({"PreToolUse": [{"matcher": "Edit|Bash|Read|Write|Glob|Grep", "hooks": []}]}),
            json!({"BeforeTool": [{"matcher": "replace|run_shell_command|read_file|write_file|glob|grep", "hooks": []}]}),
        ),
        (
            json!({"PreToolUse": one("cd $CLAUDE_PROJECT_DIR && ls")}),
            json!({"BeforeTool": one("cd $GEMINI_PROJECT_DIR && ls")}),
        ),
        (
            json!({"PreToolUse": [{"sequential": true, "hooks": []}]}),
            json!({"BeforeTool": [{"sequential": true, "hooks": []}]}),
        ),
        // A hook with no command is copied (Gemini CLI's loader then skips it, and says so).
        (
            json!({"PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command"}]}]}),
            json!({"BeforeTool": [{"matcher": "replace", "hooks": [{"type": "command"}]}]}),
        ),
        (json!({"PreToolUse": [{"hooks": []}]}), json!({"BeforeTool": [{"hooks": []}]})),
        // An event whose value is not an array is left out.
        (json!({"PreToolUse": "not an array"}), json!({})),
        (json!({}), json!({})),
    ];
    for (claude, gemini) in cases {
        assert_eq!(hooks(claude.clone()), gemini, "{claude}");
    }
}

#[test]
fn where_geminid_differs() {
    // Timeouts: Claude's are seconds, Gemini's milliseconds (the reference copies 60 as 60).
    let t = hooks(json!({"PreToolUse": [{"hooks": [
        {"type": "command", "command": "a", "timeout": 60},
        {"type": "command", "command": "b", "timeout": 1.5},
        {"type": "command", "command": "c", "timeout": "soon"}
    ]}]}));
    assert_eq!(t["BeforeTool"][0]["hooks"][0]["timeout"], json!(60000));
    assert_eq!(t["BeforeTool"][0]["hooks"][1]["timeout"], json!(1500));
    assert_eq!(t["BeforeTool"][0]["hooks"][2].get("timeout"), None);

    // Claude's real spelling SubagentStop maps too; with Stop, both are kept.
    let both = hooks(json!({"Stop": one("stop"), "SubagentStop": one("sub")}));
    assert_eq!(both["AfterAgent"].as_array().map(Vec::len), Some(2), "{both}");

    // Events Gemini CLI lacks, and prompt hooks, are left out and said.
    let m = from_claude(&json!({"hooks": {
        "PermissionRequest": one("x"),
        "PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "is it safe?"}]}],
        "BeforeModel": one("already gemini")
    }}));
    assert_eq!(m.hooks.get("PermissionRequest"), None);
    assert_eq!(m.hooks["BeforeTool"], json!([{"hooks": []}]));
    assert_eq!(m.hooks["BeforeModel"], one("already gemini"));
    let notes = m.notes.join("\n");
    assert!(notes.contains("hooks.PermissionRequest: Gemini CLI has no such event"), "{notes}");
    assert!(notes.contains("hooks.PreToolUse[0].hooks[0]: a \"prompt\" hook"), "{notes}");

    // More tool names, whole words only, MCP names, and the braced variable.
    assert_eq!(
        matcher("MultiEdit|WebFetch|WebSearch|LSP|Editor"),
        "replace|web_fetch|google_web_search|LSP|Editor"
    );
    assert_eq!(matcher("mcp__github__.*|mcp__my_db__query"), "mcp_github_.*|mcp_my_db_query");
    assert_eq!(command("\"${CLAUDE_PROJECT_DIR}\"/x.sh"), "\"${GEMINI_PROJECT_DIR}\"/x.sh");
}

#[test]
fn merging_keeps_the_files_own_hooks_and_is_idempotent() {
    let migrated = from_claude(&json!({"hooks": {"PreToolUse": one("claude")}})).hooks;
    let existing = json!({"BeforeTool": one("mine"), "AfterTool": one("existing")});
    let changed = merge(Some(&existing), &migrated);
    assert_eq!(changed["BeforeTool"], json!([one("mine")[0], one("claude")[0]]));
    assert_eq!(changed.get("AfterTool"), None, "untouched events are not rewritten");
    let again = json!({"BeforeTool": changed["BeforeTool"], "AfterTool": one("existing")});
    assert!(merge(Some(&again), &migrated).is_empty(), "a second run changes nothing");
    assert_eq!(merge(None, &migrated)["BeforeTool"], one("claude"));
}
