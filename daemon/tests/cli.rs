//! geminid's command line on its own. Having integration tests also makes
//! `cargo test --workspace` build the `geminid` binary that the end-to-end tests drive.

use std::process::Command;

#[test]
fn help_names_the_flags() {
    // Whatever the environment the tests run in names (a GEMINID_CONFIG not there), help
    // answers.
    let out = Command::new(env!("CARGO_BIN_EXE_geminid"))
        .arg("--help")
        .env("GEMINID_CONFIG", "/nonexistent/geminid-config.toml")
        .output();
    let out = out.unwrap_or_else(|e| panic!("cannot run geminid: {e}"));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in
        ["--socket", "--data-dir", "--log-format", "--max-connections", "--max-message-size"]
    {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn nonsense_limits_are_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run").join("g.sock");
    let out = Command::new(env!("CARGO_BIN_EXE_geminid"))
        .arg("--socket")
        .arg(&socket)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--max-connections", "0"])
        // Sealed from the environment the tests run in (its GEMINID_*, its config file).
        .env_clear()
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run geminid: {e}"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-connections"));
    assert!(!socket.exists());
}
