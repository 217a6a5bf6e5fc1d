//! gemctl's command line on its own (no daemon). Having integration tests also makes
//! `cargo test --workspace` build the `gemctl` binary that the end-to-end tests drive.

use std::process::Command;

fn gemctl(args: &[&str], socket: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gemctl"))
        .args(args)
        .env("GEMINID_SOCKET", socket)
        .output()
        .unwrap_or_else(|e| panic!("cannot run gemctl: {e}"))
}

#[test]
fn help_lists_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = gemctl(&["--help"], &dir.path().join("s"));
    let help = String::from_utf8_lossy(&out.stdout);
    for cmd in ["status", "daemon", "session", "attach", "events", "rpc", "--json", "--session"] {
        assert!(help.contains(cmd), "--help lacks {cmd}:\n{help}");
    }
}

/// `gemctl mcp --help` lists its commands in the order a user reaches for them (audit turn 4,
/// P11: `reload` stood between `enable` and `disable`, `list` and `start` near the bottom).
#[test]
fn mcp_help_lists_commands_in_the_order_they_are_used() {
    let dir = tempfile::tempdir().unwrap();
    let out = gemctl(&["mcp", "--help"], &dir.path().join("s"));
    let help = String::from_utf8_lossy(&out.stdout);
    let listed: Vec<&str> = help
        .split("\nCommands:\n")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix("  ").filter(|l| !l.starts_with(' ')))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase()))
        .collect();
    let want = [
        "list",
        "add",
        "remove",
        "start",
        "stop",
        "restart",
        "logs",
        "tools",
        "describe",
        "prompts",
        "resources",
        "enable",
        "disable",
        "reload",
        "auth",
        "logout",
        "review",
        "accept",
        "reject",
        "update",
        "import",
        "unimport",
        "serve",
        "help",
    ];
    assert_eq!(listed, want, "{help}");
}

#[test]
fn status_without_a_daemon_exits_3_and_starts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("none.sock");
    let out = gemctl(&["--json", "status"], &socket);
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(v["running"], false);
    assert!(!socket.exists());
}

#[test]
fn an_unknown_command_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = gemctl(&["frobnicate"], &dir.path().join("s"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unrecognized subcommand"));
}

#[test]
fn gemini_clis_session_flag_points_at_session_only() {
    let dir = tempfile::tempdir().unwrap();
    for verb in ["disable", "enable"] {
        let out = gemctl(&["mcp", verb, "memory", "--session"], &dir.path().join("s"));
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("for Gemini CLI's `mcp {verb} NAME --session`")), "{err}");
        assert!(err.contains("write `--session-only`"), "{err}");
    }
    assert!(!dir.path().join("s").exists(), "nothing was started");
}

#[test]
fn session_on_a_command_that_acts_for_none_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--session", "abcd", "status"][..],
        &["daemon", "stop", "--session", "abcd"],
        &["--session", "abcd", "mcp", "list", "--all"],
        &["session", "list", "--session", "abcd"],
    ] {
        let out = gemctl(args, &dir.path().join("s"));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("`--session` means nothing for this command"), "{args:?}: {err}");
    }
    assert!(!dir.path().join("s").exists(), "nothing was started");
}
