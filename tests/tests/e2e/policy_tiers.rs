//! The admin and workspace policy tiers against a real daemon (issue 68): admin rules from the
//! system settings' `adminPolicyPaths` (and from nobody else's), and a trusted workspace's
//! policy files loaded only once accepted, exactly as they were.

use std::path::Path;
use std::time::Duration;

use geminid_tests::mcp::{FAST, fixture, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use nix::sys::signal::Signal;
use serde_json::json;

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    Ok(std::fs::write(path, text)?)
}

fn rule(tool: &str, decision: &str, priority: u32) -> String {
    format!(
        "[[rule]]\nmcpName = \"fx\"\ntoolName = \"{tool}\"\ndecision = \"{decision}\"\npriority = {priority}\n"
    )
}

/// What a headless call of `tool` would get: its decision, then the reason.
fn decide(home: &TestHome, tool: &str) -> anyhow::Result<String> {
    let v = home.gemctl_json(&["policy", "check", tool, "--server", "fx", "--headless"])?;
    Ok(format!("{} {}", v["decision"].as_str().unwrap_or("?"), v["reason"]))
}

fn gemctl(home: &TestHome, args: &[&str]) -> anyhow::Result<(i32, String)> {
    let (code, out, err) = home.gemctl_run(args)?;
    Ok((code, format!("{out}{err}")))
}

/// Admin rules come from `adminPolicyPaths` in the system settings file (a folder or a file)
/// and outrank the user's; the same key in the user's or the workspace's settings is not
/// read, and neither is a `policies` folder beside `GEMINI_CLI_SYSTEM_SETTINGS_PATH` (Gemini
/// CLI's system folder is `/etc/gemini-cli/policies` whatever that variable says).
#[tokio::test]
async fn admin_policy_paths_come_from_the_system_settings_only() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let root = home.root();
    // The user allows both; the admin denies echo, by folder, and add, by file.
    write(
        &root.join("home/.gemini/policies/mine.toml"),
        &[rule("echo", "allow", 999), rule("add", "allow", 999), rule("crash", "deny", 1)].concat(),
    )?;
    write(&root.join("admin/deny.toml"), &rule("echo", "deny", 1))?;
    write(&root.join("admin-file.toml"), &rule("add", "deny", 1))?;
    // Who else names admin paths: their allow must not count.
    write(&root.join("fake-admin/allow.toml"), &rule("crash", "allow", 999))?;
    let fake = root.join("fake-admin").display().to_string();
    let user = root.join("home/.gemini/settings.json");
    let mut settings: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&user)?)?;
    settings["adminPolicyPaths"] = json!([fake]);
    write(&user, &settings.to_string())?;
    write(
        &home.workspace().join(".gemini/settings.json"),
        &json!({ "adminPolicyPaths": [fake] }).to_string(),
    )?;
    // Beside the system settings: not Gemini CLI's system folder.
    write(&root.join("etc/policies/beside.toml"), &rule("echo", "allow", 999))?;
    write(
        &root.join("etc/settings.json"),
        &json!({ "adminPolicyPaths": [root.join("admin"), "../admin-file.toml"] }).to_string(),
    )?;
    let _daemon = Daemon::start(&home, FAST).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");

    let echo = decide(&home, "mcp_fx_echo")?;
    assert!(echo.starts_with("deny") && echo.contains("admin tier"), "{echo}");
    assert!(echo.contains("admin/deny.toml"), "{echo}");
    let add = decide(&home, "mcp_fx_add")?;
    assert!(add.starts_with("deny") && add.contains("admin-file.toml"), "{add}");
    let crash = decide(&home, "mcp_fx_crash")?;
    assert!(crash.starts_with("deny") && crash.contains("user tier"), "{crash}");
    let listed = home.gemctl_json(&["policy", "list", "--tier", "admin"])?;
    let files: Vec<&str> = listed["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["source"]["file"].as_str())
        .collect();
    assert_eq!(files.len(), 2, "{listed}");
    assert!(files.iter().all(|f| !f.contains("fake-admin") && !f.contains("beside")), "{listed}");
    Ok(())
}

/// A trusted workspace's policy files are not loaded until accepted, and not after they
/// change, gain or lose a file; a link out of the folder is never read; an untrusted folder's
/// files are not read even when accepted; a damaged record of an acceptance loads nothing.
/// Each is said in `policy list` and `doctor`, with the command.
#[tokio::test]
async fn workspace_policy_files_load_only_as_accepted() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let ws = home.workspace();
    let dir = ws.join(".gemini/policies");
    // A cloned repository allows its MCP tool, headless.
    write(&dir.join("repo.toml"), &rule("echo", "allow", 1))?;
    let mut daemon = Daemon::start(&home, FAST).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");

    let before = decide(&home, "mcp_fx_echo")?;
    assert!(before.starts_with("deny"), "loaded without an acceptance: {before}");
    let (_, listed) = gemctl(&home, &["policy", "list"])?;
    assert!(
        listed.contains("not loaded: they were never accepted")
            && listed.contains("gemctl policy accept"),
        "{listed}"
    );
    let (_, doctor) = gemctl(&home, &["doctor"])?;
    assert!(doctor.contains("gemctl policy review"), "{doctor}");
    let (code, review) = gemctl(&home, &["policy", "review"])?;
    assert_eq!(code, 0, "{review}");
    assert!(
        review.contains("new      repo.toml") && review.contains("allow mcp_fx_echo (server fx)"),
        "{review}"
    );

    let (code, out) = gemctl(&home, &["policy", "accept"])?;
    assert_eq!(code, 0, "{out}");
    let accepted = decide(&home, "mcp_fx_echo")?;
    assert!(accepted.starts_with("allow") && accepted.contains("workspace tier"), "{accepted}");

    // Changed after acceptance: not loaded.
    write(
        &dir.join("repo.toml"),
        &format!("{}{}", rule("echo", "allow", 1), rule("add", "allow", 1)),
    )?;
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("deny"));
    let (_, review) = gemctl(&home, &["policy", "review"])?;
    assert!(review.contains("changed  repo.toml"), "{review}");
    assert!(gemctl(&home, &["policy", "accept"])?.0 == 0);
    assert!(decide(&home, "mcp_fx_add")?.starts_with("allow"));

    // A file added: not loaded.
    write(&dir.join("more.toml"), &rule("crash", "allow", 1))?;
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("deny"));
    assert!(gemctl(&home, &["policy", "review"])?.1.contains("new      more.toml"));
    assert!(gemctl(&home, &["policy", "accept"])?.0 == 0);
    assert!(decide(&home, "mcp_fx_crash")?.starts_with("allow"));

    // A file deleted: not loaded.
    std::fs::remove_file(dir.join("more.toml"))?;
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("deny"));
    assert!(gemctl(&home, &["policy", "review"])?.1.contains("removed  more.toml"));
    assert!(gemctl(&home, &["policy", "accept"])?.0 == 0);
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("allow"));

    // A link out of the folder: never read, accepted or not.
    let outside = home.root().join("outside.toml");
    write(&outside, &rule("crash", "allow", 1))?;
    std::os::unix::fs::symlink(&outside, dir.join("link.toml"))?;
    let (_, review) = gemctl(&home, &["policy", "review"])?;
    assert!(review.contains("leads out of the workspace's policy folder"), "{review}");
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("allow"), "the link is not part of it");
    assert!(gemctl(&home, &["policy", "accept"])?.0 == 0);
    assert!(decide(&home, "mcp_fx_crash")?.starts_with("deny"));
    std::fs::remove_file(dir.join("link.toml"))?;

    // Untrusted: nothing of the folder is read, and it cannot be accepted.
    assert!(home.gemctl(&["untrust"])?.status.success());
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("deny"));
    let (code, out) = gemctl(&home, &["policy", "accept"])?;
    assert!(code != 0 && out.contains("not trusted"), "{out}");
    assert!(home.gemctl(&["trust"])?.status.success());
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("allow"));

    // A damaged record of the acceptance: nothing loads, and it says why.
    let reviewed = home.gemctl_json(&["policy", "review"])?;
    let key = reviewed["workspace"].as_str().unwrap_or_default().to_owned();
    daemon.signal(Signal::SIGTERM)?;
    daemon.wait_exit(Duration::from_secs(20)).await?;
    {
        let store = geminid::testing::Store::open(&home.data_dir())?;
        let record = store.policy_accepted_record(&key)?.unwrap_or_default();
        let record = String::from_utf8(record)?;
        assert!(record.contains("\"digest\""), "{record}");
        let edited = record.replacen("\"acceptedMs\":1", "\"acceptedMs\":2", 1);
        assert_ne!(edited, record);
        store.put_policy_accepted_record(&key, edited.as_bytes())?;
    }
    let _daemon = Daemon::start(&home, FAST).await?;
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("deny"));
    let (_, listed) = gemctl(&home, &["policy", "list"])?;
    assert!(listed.contains("fails its check"), "{listed}");
    assert!(gemctl(&home, &["policy", "accept"])?.0 == 0);
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("allow"));
    Ok(())
}

/// Gemini CLI's build file protection, in every mode: an edit of a build file the rules
/// allow is asked about, or denied headless (yolo too); other files are not touched.
#[tokio::test]
async fn an_edit_of_a_build_file_is_never_allowed_without_the_person() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({}))?;
    let _daemon = Daemon::start(&home, FAST).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let check = |file: &str, mode: &str, how: &str| -> anyhow::Result<String> {
        let args = json!({ "file_path": file }).to_string();
        let v = home.gemctl_json(&["policy", "check", "write_file", &args, "--mode", mode, how])?;
        Ok(format!("{} {}", v["decision"].as_str().unwrap_or("?"), v["reason"]))
    };
    for mode in ["yolo", "autoEdit"] {
        let headless = check("package.json", mode, "--headless")?;
        assert!(headless.starts_with("deny") && headless.contains("build file"), "{headless}");
        let asked = check("sub/Makefile", mode, "--interactive")?;
        assert!(asked.starts_with("ask_user"), "{mode}: {asked}");
        assert!(check("src/main.rs", mode, "--headless")?.starts_with("allow"), "{mode}");
    }
    Ok(())
}
