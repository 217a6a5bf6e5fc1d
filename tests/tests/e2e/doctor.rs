//! `gemctl doctor` on a healthy setup and on each broken one; shell completion (loaded by a real
//! bash, names asked of the running daemon) and man pages.

use std::os::unix::fs::PermissionsExt;

use geminid_tests::mcp::{stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::{Value, json};

/// `gemctl doctor --json`: its exit code and findings.
fn doctor(home: &TestHome, extra: &[&str]) -> anyhow::Result<(i32, Vec<Value>)> {
    let mut args = vec!["--json", "doctor"];
    args.extend_from_slice(extra);
    let (code, out, err) = home.gemctl_run(&args)?;
    let v: Value = serde_json::from_str(&out).map_err(|e| anyhow::anyhow!("{e}: {out}{err}"))?;
    assert_eq!(v["ok"], code == 0, "{v}");
    Ok((code, v["findings"].as_array().cloned().unwrap_or_default()))
}

/// The finding of `check` whose message has `text`.
fn find<'a>(findings: &'a [Value], check: &str, text: &str) -> Option<&'a Value> {
    findings
        .iter()
        .find(|f| f["check"] == check && f["message"].as_str().is_some_and(|m| m.contains(text)))
}

#[tokio::test]
async fn a_healthy_setup_passes_and_each_broken_one_names_its_fix() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;

    // No daemon, and none may be started: that is the finding.
    let (code, f) = doctor(&home, &["--no-autostart"])?;
    assert_eq!(code, 1);
    let gone = find(&f, "socket", "not running").unwrap_or_else(|| panic!("{f:?}"));
    assert!(gone["fix"].as_str().is_some_and(|x| x.contains("gemctl daemon start")));

    let _daemon = Daemon::start(&home, &[]).await?;
    // Untrusted: a warning with its fix, not a failure.
    let (code, f) = doctor(&home, &[])?;
    assert_eq!(code, 0, "{f:?}");
    let trust = find(&f, "trust", "is not trusted").unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(trust["status"], "warning");
    assert!(trust["fix"].as_str().is_some_and(|x| x.starts_with("gemctl trust")));

    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, f) = doctor(&home, &[])?;
    assert_eq!(code, 0, "{f:?}");
    for (check, text) in [
        ("socket", "which only you can reach"),
        ("version", "are both"),
        ("trust", "is trusted"),
        ("config", "without problems"),
        ("command", "server 'fx' runs"),
    ] {
        let found = find(&f, check, text).unwrap_or_else(|| panic!("{check}: {f:?}"));
        assert_eq!(found["status"], "ok", "{found}");
    }
    // No Secret Service here (the test gives its daemon no session bus): the file, said as a
    // warning.
    assert_eq!(find(&f, "secrets", "").map(|s| s["status"].clone()), Some("warning".into()));

    // A program that is not there; one misspelt (audit M3); a remote server nobody listens for.
    let bin = home.root().join("bin");
    std::fs::create_dir_all(&bin)?;
    std::fs::write(bin.join("my-mcp-server"), "#!/bin/sh\n")?;
    std::fs::set_permissions(bin.join("my-mcp-server"), std::fs::Permissions::from_mode(0o755))?;
    std::fs::write(bin.join("notes.txt"), "not a program\n")?;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    write_user_settings(
        &home,
        json!({
            "fx": stdio(&[]),
            "gone": { "command": "geminid-no-such-program" },
            "typo": { "command": "my-mcp-sevrer", "env": { "PATH": bin.display().to_string() } },
            "abs": { "command": bin.join("nowhere/mcp-server").display().to_string() },
            "plain": { "command": bin.join("notes.txt").display().to_string() },
            "far": { "httpUrl": format!("http://user:hunter2@127.0.0.1:{closed}/mcp") }
        }),
    )?;
    assert!(home.gemctl(&["mcp", "reload"])?.status.success());
    let (code, f) = doctor(&home, &[])?;
    assert_eq!(code, 1);
    let missing = find(&f, "command", "geminid-no-such-program").unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(missing["status"], "error");
    assert!(missing["fix"].as_str().is_some_and(|x| x.contains("gemctl mcp restart gone")));
    assert!(!missing["message"].as_str().unwrap_or_default().contains("did you mean"), "{missing}");
    let typo = find(&f, "command", "my-mcp-sevrer").unwrap_or_else(|| panic!("{f:?}"));
    let said = typo["message"].as_str().unwrap_or_default();
    assert!(said.ends_with("(did you mean `my-mcp-server`?)"), "{typo}");
    // A full path is looked for there alone: the fix is the path, not the PATH (audit P7).
    let abs = find(&f, "command", "nowhere/mcp-server").unwrap_or_else(|| panic!("{f:?}"));
    let nowhere = bin.join("nowhere/mcp-server");
    assert_eq!(
        (abs["message"].as_str(), abs["fix"].as_str()),
        (
            Some(
                format!("server 'abs' runs `{}`, which does not exist", nowhere.display()).as_str()
            ),
            Some(
                format!(
                    "{} does not exist: install it there or correct the path in the entry's \
                     `command`, then `gemctl mcp restart abs`",
                    nowhere.display()
                )
                .as_str()
            )
        ),
        "{abs}"
    );
    let plain = find(&f, "command", "notes.txt").unwrap_or_else(|| panic!("{f:?}"));
    assert!(plain["message"].as_str().is_some_and(|m| m.ends_with("is not an executable file")));
    assert!(plain["fix"].as_str().is_some_and(|x| x.contains("chmod +x")), "{plain}");
    let far = find(&f, "remote", "cannot be reached").unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(far["status"], "error");
    assert!(!serde_json::to_string(&f)?.contains("hunter2"), "a URL password was shown");

    // A settings file that does not parse: where, and what to edit.
    let settings = home.root().join("home/.gemini/settings.json");
    std::fs::write(&settings, "{ \"mcpServers\": { \"fx\": ")?;
    assert!(home.gemctl(&["mcp", "reload"])?.status.success());
    let (code, f) = doctor(&home, &[])?;
    assert_eq!(code, 1);
    let bad = find(&f, "config", "settings.json:1:").unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(bad["status"], "error");
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;

    // A socket directory others may write to.
    let dir = home.socket().parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))?;
    let (code, f) = doctor(&home, &[])?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    assert_eq!(code, 1);
    let open = find(&f, "socket", "other users can write").unwrap_or_else(|| panic!("{f:?}"));
    assert!(open["fix"].as_str().is_some_and(|x| x.contains("chmod")));

    // The text form: one line per finding, its fix under it.
    let (code, out, _) = home.gemctl_run(&["doctor"])?;
    assert_eq!(code, 0, "{out}");
    assert!(out.lines().any(|l| l.starts_with("ok    socket")), "{out}");
    Ok(())
}

#[tokio::test]
async fn bash_completes_commands_and_the_daemons_names() -> anyhow::Result<()> {
    // No allow-all policy: the headless session's model sees none of fx's tools, and `gemctl
    // call` (a person) may still call them, so they complete (audit turn 4, C9).
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    assert!(home.gemctl(&["mcp", "start"])?.status.success());
    let script = home.root().join("complete.bash");
    let out = home.gemctl(&["completions", "bash"])?;
    std::fs::write(&script, &out.stdout)?;
    // A real bash loads it and asks for completions as it would on Tab.
    let complete = |line: &str| -> anyhow::Result<String> {
        let words: Vec<&str> = line.split(' ').collect();
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let program = format!(
            "source {}; complete -p gemctl >/dev/null || exit 9; COMP_WORDS=({}); \
             COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; \
             _clap_complete_gemctl gemctl '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            quoted.join(" "),
            words.len() - 1,
            words[words.len() - 1],
            words.get(words.len().wrapping_sub(2)).copied().unwrap_or(""),
        );
        // gemctl's environment for this home (its socket), in bash.
        let out = home.command("bash", &["-c", &program]).output()?;
        anyhow::ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let subcommands = complete("gemctl mc")?;
    assert!(subcommands.lines().any(|l| l.trim() == "mcp"), "{subcommands}");
    let servers = complete("gemctl mcp restart ")?;
    assert!(servers.lines().any(|l| l.trim() == "fx"), "{servers:?}");
    let tools = complete("gemctl call mcp_fx_e")?;
    assert!(tools.lines().any(|l| l.trim() == "mcp_fx_echo"), "{tools:?}");
    // Extension and skill names too (audit M5).
    let src = home.root().join("hello-ext");
    std::fs::create_dir_all(&src)?;
    std::fs::write(
        src.join("gemini-extension.json"),
        r#"{"name": "hello-ext", "version": "1.0.0"}"#,
    )?;
    let (code, out, err) =
        home.gemctl_run(&["extensions", "install", &src.display().to_string(), "--consent"])?;
    assert_eq!(code, 0, "{out}{err}");
    let skill = home.root().join("home/.gemini/skills/tidy-up");
    std::fs::create_dir_all(&skill)?;
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: tidy-up\ndescription: Tidies.\n---\nDo it.\n",
    )?;
    let extensions = complete("gemctl extensions uninstall hel")?;
    assert_eq!(extensions.trim(), "hello-ext", "{extensions:?}");
    let skills = complete("gemctl skills show ti")?;
    assert_eq!(skills.trim(), "tidy-up", "{skills:?}");

    for shell in ["zsh", "fish"] {
        let out = home.gemctl(&["completions", shell])?;
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("GEMCTL_COMPLETE"), "{shell}");
    }
    Ok(())
}

#[test]
fn man_pages_are_written_for_every_command() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let dir = home.root().join("man");
    let v = home.gemctl_json(&["man", &dir.display().to_string()])?;
    let written = v.as_array().map(Vec::len).unwrap_or_default();
    assert!(written > 20, "{v}");
    let top = std::fs::read_to_string(dir.join("gemctl.1"))?;
    assert!(top.starts_with(".ie \\n(.g .ds Aq") || top.contains(".TH gemctl 1"), "{top}");
    let restart = std::fs::read_to_string(dir.join("gemctl-mcp-restart.1"))?;
    assert!(restart.contains(".TH gemctl-mcp-restart"), "{restart}");
    // What one types in the synopsis, not the page's name; no "gemctl - gemctl:" (audit M7).
    assert!(restart.contains("\\fBgemctl mcp restart\\fR"), "{restart}");
    assert!(!top.contains("gemctl \\- gemctl:"), "{top}");
    // The commands a new user reaches for first have examples, in the page and in --help.
    let add = std::fs::read_to_string(dir.join("gemctl-mcp-add.1"))?;
    assert!(add.contains(".SH EXAMPLES") && add.contains("server\\-memory"), "{add}");
    let (_, help, _) = home.gemctl_run(&["mcp", "add", "--help"])?;
    assert!(help.contains("Examples:\n  gemctl mcp add -s user memory npx"), "{help}");

    // Without a directory: where man looks for a user's pages, and how to make it look.
    let out =
        home.gemctl_cmd(&["man"]).env("PATH", "/usr/bin:/bin").env_remove("MANPATH").output()?;
    let pages = home.root().join("home/.local/share/man/man1");
    assert!(pages.join("gemctl-mcp-add.1").is_file());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("export MANPATH=") && err.contains(".local/bin on PATH"), "{err}");
    let local_bin = home.root().join("home/.local/bin");
    std::fs::create_dir_all(&local_bin)?;
    let path = format!("{}:/usr/bin:/bin", local_bin.display());
    let out = home.gemctl_cmd(&["man"]).env("PATH", path).env_remove("MANPATH").output()?;
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "found through PATH: nothing to say");
    Ok(())
}

/// A policy rule that is not loaded is a problem `config check` (exit 1) and `doctor` report
/// with its file:line:col and the fix, as they report the settings' (issue 63, C6): both said
/// "no problems" while only `policy list` told.
#[tokio::test]
async fn config_check_and_doctor_report_a_policy_rule_not_loaded() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({}))?;
    let file = home.root().join("home/.gemini/policies/mine.toml");
    std::fs::create_dir_all(file.parent().unwrap_or(&file))?;
    std::fs::write(
        &file,
        "[[rule]]\ntoolName = \"mcp_time_now\"\ndecision = \"allow\"\npriority = 10\n\n\
         [[rule]]\nmcpName = \"time\"\ndecision = \"deny\"\npriority = 20\n",
    )?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let at = format!("{}:6:1: error: rule #2 is not loaded: toolName is required", file.display());
    let (code, out, err) = home.gemctl_run(&["config", "check"])?;
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains(&at) && out.contains("\"*\" matches every tool"), "{out}");
    let (code, f) = doctor(&home, &[])?;
    assert_eq!(code, 1, "{f:?}");
    let found = find(&f, "policy", &at[at.find(":6:1").unwrap_or(0)..].replace(" error:", ""))
        .unwrap_or_else(|| panic!("{f:?}"));
    assert_eq!(found["status"], "error", "{found}");
    assert!(found["fix"].as_str().is_some_and(|x| x.ends_with("mine.toml")), "{found}");
    Ok(())
}
