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
    let (_, servers) = gemctl(&home, &["mcp", "list"])?;
    assert!(servers.contains("policy files") && servers.contains("not loaded"), "{servers}");
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
    assert!(!gemctl(&home, &["mcp", "list"])?.1.contains("policy files"));

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
    assert!(listed.contains("damaged (accept again)"), "{listed}");
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

/// A workspace's settings may not say where policy files are read from (issue 68, F1): its
/// `policyPaths` would load the repository's rules at the user tier, unaccepted, and drop the
/// user's own folder; it is ignored, and said in `policy list`, `config check` and `doctor`.
/// A `policyPaths` of the user's own naming a folder that does not exist is said too.
#[tokio::test]
async fn a_workspace_cannot_say_where_policy_files_are_read_from() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let ws = home.workspace();
    write(&home.root().join("home/.gemini/policies/mine.toml"), &rule("echo", "deny", 500))?;
    write(&ws.join(".gemini/pp/allow.toml"), &rule("echo", "allow", 900))?;
    write(
        &ws.join(".gemini/settings.json"),
        &json!({ "policyPaths": ["${PWD}/.gemini/pp", ws.join(".gemini/pp")] }).to_string(),
    )?;
    let _daemon = Daemon::start(&home, FAST).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");

    let echo = decide(&home, "mcp_fx_echo")?;
    assert!(echo.starts_with("deny") && echo.contains("mine.toml"), "{echo}");
    for args in [&["policy", "list"][..], &["config", "check"], &["doctor"]] {
        let (_, out) = gemctl(&home, args)?;
        assert!(
            out.contains(".gemini/settings.json") && out.contains("its policyPaths is ignored"),
            "{args:?}: {out}"
        );
    }

    // The user's own policyPaths, naming nothing: every user rule is gone, and that is said.
    let user = home.root().join("home/.gemini/settings.json");
    let mut settings: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&user)?)?;
    settings["policyPaths"] = json!([home.root().join("nowhere")]);
    write(&user, &settings.to_string())?;
    let (_, listed) = gemctl(&home, &["policy", "list"])?;
    assert!(listed.contains("nowhere") && listed.contains("does not exist"), "{listed}");
    Ok(())
}

/// `policy review` prints the digest of what it showed and the command that accepts only
/// that; files changed in between are refused (issue 68, F2).
#[tokio::test]
async fn policy_accept_takes_only_what_the_review_showed() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let file = home.workspace().join(".gemini/policies/b.toml");
    write(&file, &rule("echo", "deny", 200))?;
    let _daemon = Daemon::start(&home, FAST).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");

    let (code, review) = gemctl(&home, &["policy", "review"])?;
    assert_eq!(code, 0, "{review}");
    let digest =
        home.gemctl_json(&["policy", "review"])?["digest"].as_str().unwrap_or("").to_owned();
    assert!(review.contains(&format!("gemctl policy accept --digest {digest}")), "{review}");
    // The repository swaps the file between the review and the acceptance.
    write(&file, &rule("echo", "allow", 200))?;
    let (code, out) = gemctl(&home, &["policy", "accept", "--digest", &digest])?;
    assert!(code != 0 && out.contains("changed since they were reviewed"), "{out}");
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("deny"));
    let digest =
        home.gemctl_json(&["policy", "review"])?["digest"].as_str().unwrap_or("").to_owned();
    let (code, out) = gemctl(&home, &["policy", "accept", "--digest", &digest])?;
    assert_eq!(code, 0, "{out}");
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("allow"));
    // Without a digest: what is there now, and it says so.
    write(&file, &rule("echo", "ask_user", 200))?;
    let (code, out) = gemctl(&home, &["policy", "accept"])?;
    assert!(code == 0 && out.contains("no --digest was given"), "{out}");
    Ok(())
}

/// An accepted workspace file that stops parsing gives nothing: not its rules of before the
/// acceptance (issue 68, F4); the review says it does not parse, and shows each rule's
/// conditions; a damaged record says to accept again; doctor's fix names the commands.
#[tokio::test]
async fn an_accepted_file_that_does_not_parse_loads_nothing() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let file = home.workspace().join(".gemini/policies/p.toml");
    let narrow = "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"git log\"\n\
                  decision = \"allow\"\npriority = 300\nmodes = [\"autoEdit\"]\n";
    write(&file, &format!("{}{narrow}", rule("echo", "allow", 1)))?;
    let _daemon = Daemon::start(&home, FAST).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let (_, doctor) = gemctl(&home, &["doctor"])?;
    assert!(!doctor.contains("fix: edit"), "{doctor}");
    let (_, review) = gemctl(&home, &["policy", "review"])?;
    assert!(
        review.contains("priority 300")
            && review.contains("modes autoEdit")
            && review.contains("arguments matching /")
            && review.contains(r"git\ log"),
        "{review}"
    );
    assert!(gemctl(&home, &["policy", "accept"])?.0 == 0);
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("allow"));

    write(&file, "[[rule]\ntoolName = \"mcp_fx_echo\"\n")?;
    let (_, review) = gemctl(&home, &["policy", "review"])?;
    assert!(review.contains("does not parse"), "{review}");
    assert!(gemctl(&home, &["policy", "accept"])?.0 == 0);
    let echo = decide(&home, "mcp_fx_echo")?;
    assert!(echo.starts_with("deny"), "the rules of before the acceptance still load: {echo}");
    Ok(())
}

/// The admin tier is read from a system settings file only while neither it nor its folder
/// may be written by others (Gemini CLI skips such a file; issue 68, F5).
#[tokio::test]
async fn a_system_settings_file_others_may_write_names_no_admin_policies() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let root = home.root();
    write(&root.join("home/.gemini/policies/mine.toml"), &rule("echo", "allow", 999))?;
    write(&root.join("admin/deny.toml"), &rule("echo", "deny", 1))?;
    let system = root.join("etc/settings.json");
    write(&system, &json!({ "adminPolicyPaths": [root.join("admin")] }).to_string())?;
    let _daemon = Daemon::start(&home, FAST).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    assert!(decide(&home, "mcp_fx_echo")?.starts_with("deny"));

    for (path, mode) in [(&system, 0o666), (&root.join("etc"), 0o777)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        let echo = decide(&home, "mcp_fx_echo")?;
        assert!(echo.starts_with("allow"), "{}: {echo}", path.display());
        let (_, listed) = gemctl(&home, &["policy", "list"])?;
        assert!(listed.contains("adminPolicyPaths are not read"), "{listed}");
        let (_, doctor) = gemctl(&home, &["doctor"])?;
        assert!(doctor.contains("adminPolicyPaths are not read"), "{doctor}");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o755))?;
        assert!(decide(&home, "mcp_fx_echo")?.starts_with("deny"));
    }
    Ok(())
}

/// In a trusted home, `~/.gemini/policies` is the user's own folder, never reported as a
/// workspace's unaccepted one (issue 68, F7).
#[tokio::test]
async fn the_home_has_no_workspace_tier() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let user_home = home.root().join("home");
    write(&user_home.join(".gemini/policies/mine.toml"), &rule("echo", "allow", 1))?;
    let _daemon = Daemon::start(&home, FAST).await?;
    let at = user_home.display().to_string();
    anyhow::ensure!(home.gemctl(&["trust", &at])?.status.success(), "gemctl trust failed");
    let (code, review) = gemctl(&home, &["policy", "review", &at])?;
    assert!(code == 0 && review.contains("is your home"), "{review}");
    assert!(!review.contains("not loaded"), "{review}");
    let (code, out) = gemctl(&home, &["policy", "accept", &at])?;
    assert!(code != 0, "{out}");
    Ok(())
}
