//! `policy/check` and `policy/list` over a real core in a temporary home: the session's policy
//! files by tier and the rules its settings imply, decided as Gemini CLI decides.

use std::os::unix::fs::PermissionsExt;

use geminid_protocol::error::ErrorCode;
use geminid_tests::inproc::{InProcess, Seats};
use geminid_tests::mcp::fixture;
use serde_json::{Value, json};

async fn setup() -> anyhow::Result<InProcess> {
    let servers = json!({
        "fx": { "command": fixture(), "trust": true },
        "other": { "command": fixture() }
    });
    InProcess::new(servers, Seats::default()).await
}

fn write(p: &InProcess, rel: &str, text: &str) -> anyhow::Result<std::path::PathBuf> {
    let path = p.home.root().join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, text)?;
    Ok(path)
}

/// `policy/check` with `extra` params; the test fails on an error answer.
async fn check(p: &InProcess, extra: Value) -> Value {
    let mut params = extra;
    params["session"] = json!(p.session);
    match p.call("policy/check", params).await {
        Ok(v) => v,
        Err(e) => Value::String(format!("policy/check failed: {e:?}")),
    }
}

#[tokio::test]
async fn a_user_rule_settings_trust_and_the_defaults_decide_as_in_gemini_cli() -> anyhow::Result<()>
{
    let p = setup().await?;
    write(
        &p,
        "home/.gemini/policies/mine.toml",
        "# mine\n[[rule]]\nmcpName = \"fx\"\ntoolName = \"crash\"\ndecision = \"deny\"\npriority = 500\ndenyMessage = \"never crash it\"\n\n[[rule]]\nmcpName = \"fx\"\ntoolName = \"echo\"\ndecision = \"deny\"\npriority = 5\n",
    )?;
    let denied = check(&p, json!({"tool": "mcp_fx_crash", "serverName": "fx"})).await;
    assert_eq!(denied["decision"], "deny", "{denied}");
    let rule = &denied["rule"];
    assert!(rule["file"].as_str().unwrap().ends_with("mine.toml"), "{rule}");
    assert_eq!(
        (rule["line"].as_u64(), rule["tier"].as_str(), rule["priority"].as_u64()),
        (Some(2), Some("user"), Some(500))
    );
    assert_eq!(rule["effectivePriority"], 4.5);
    assert!(denied["reason"].as_str().unwrap().ends_with("never crash it"), "{denied}");

    // The server's `trust` (4.2) allows its other tools, in every mode but plan, over a user
    // rule of a lower priority (4.005), as in Gemini CLI.
    let trusted = check(&p, json!({"tool": "mcp_fx_echo", "serverName": "fx"})).await;
    assert_eq!(
        (trusted["decision"].as_str(), trusted["rule"]["file"].as_str()),
        (Some("allow"), Some("settings: mcpServers.fx.trust"))
    );
    let plan = check(
        &p,
        json!({"tool": "mcp_fx_echo", "serverName": "fx", "mode": "plan", "interactive": true}),
    )
    .await;
    // In plan mode the trust rule does not hold, and the lower user rule decides.
    assert_eq!(
        (plan["decision"].as_str(), plan["rule"]["line"].as_u64()),
        (Some("deny"), Some(9)),
        "{plan}"
    );

    // No rule: ask when interactive, deny when not (no client listens here), allow in YOLO.
    let untrusted = json!({"tool": "mcp_other_echo", "serverName": "other"});
    let headless = check(&p, untrusted.clone()).await;
    assert_eq!(headless["decision"], "deny");
    assert!(headless["reason"].as_str().unwrap().contains("not interactive"), "{headless}");
    assert!(headless.get("rule").is_none());
    let mut asked = untrusted.clone();
    asked["interactive"] = json!(true);
    assert_eq!(check(&p, asked).await["decision"], "ask_user");
    let mut yolo = untrusted;
    yolo["mode"] = json!("yolo");
    assert_eq!(check(&p, yolo).await["decision"], "allow");

    // A listening client makes the session interactive.
    let _listening = p
        .subscribe("asks/listen", json!({ "session": p.session, "kinds": ["confirmation"] }))
        .await
        .unwrap();
    assert_eq!(
        check(&p, json!({"tool": "mcp_other_echo", "serverName": "other"})).await["decision"],
        "ask_user"
    );

    // A shell prefix, as front-ends ask about their own tools.
    write(
        &p,
        "home/.gemini/policies/shell.toml",
        "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"git status\"\ndecision = \"allow\"\npriority = 10\n",
    )?;
    let git =
        check(&p, json!({"tool": "run_shell_command", "args": {"command": "git status -s"}})).await;
    assert_eq!(git["decision"], "allow");
    let rm = check(&p, json!({"tool": "run_shell_command", "args": {"command": "git statusx"}, "interactive": false})).await;
    assert_eq!(rm["decision"], "deny");
    p.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn policy_list_shows_every_rule_in_order_and_each_problem_with_its_line() -> anyhow::Result<()>
{
    let p = setup().await?;
    let user = write(
        &p,
        "home/.gemini/policies/a.toml",
        "[[rule]]\ntoolName = \"x\"\ndecision = \"allow\"\npriority = 7\n",
    )?;
    let list: Value = p.call("policy/list", json!({ "session": p.session })).await.unwrap();
    let rules = list["rules"].as_array().unwrap();
    let order: Vec<f64> =
        rules.iter().map(|r| r["source"]["effectivePriority"].as_f64().unwrap()).collect();
    assert!(order.windows(2).all(|w| w[0] >= w[1]), "{order:?}");
    assert!(rules.iter().any(|r| r["toolName"] == "x" && r["source"]["tier"] == "user"));
    assert!(rules.iter().any(|r| r["toolName"] == "mcp_fx_*" && r["mcpName"] == "fx"));

    // An editor mid-save: the file's last good rule stays, and the error names the line.
    std::fs::write(&user, "[[rule]]\ntoolName = \"x\"\ndecision = allow\n")?;
    let list: Value =
        p.call("policy/list", json!({ "session": p.session, "tier": "user" })).await.unwrap();
    assert!(list["rules"].as_array().unwrap().iter().any(|r| r["toolName"] == "x"), "{list}");
    let d = &list["diagnostics"][0];
    assert!(d["file"].as_str().unwrap().ends_with("a.toml") && d["line"] == 3, "{d}");
    assert!(d["message"].as_str().unwrap().contains("last good rules (1) stay in force"), "{d}");

    // An admin directory (the system settings' `adminPolicyPaths`) others may write is not
    // read, and is said.
    let admin = write(
        &p,
        "admin/admin.toml",
        "[[rule]]\ntoolName = \"*\"\ndecision = \"deny\"\npriority = 1\n",
    )?;
    write(&p, "etc/settings.json", &json!({ "adminPolicyPaths": ["../admin"] }).to_string())?;
    std::fs::set_permissions(admin.parent().unwrap(), std::fs::Permissions::from_mode(0o777))?;
    let list: Value =
        p.call("policy/list", json!({ "session": p.session, "tier": "admin" })).await.unwrap();
    assert_eq!(list["rules"], json!([]));
    assert!(list["diagnostics"].to_string().contains("chmod go-w"), "{list}");
    std::fs::set_permissions(admin.parent().unwrap(), std::fs::Permissions::from_mode(0o755))?;
    let list: Value =
        p.call("policy/list", json!({ "session": p.session, "tier": "admin" })).await.unwrap();
    assert_eq!(list["rules"][0]["source"]["effectivePriority"], 5.001);

    let (code, _) = p
        .call::<Value>("policy/check", json!({ "session": "nope", "tool": "x" }))
        .await
        .unwrap_err();
    assert_eq!(code, ErrorCode::SessionNotFound.code());
    p.shutdown().await;
    Ok(())
}

/// `gemctl policy check` and `gemctl policy list` against a real daemon.
#[tokio::test]
async fn gemctl_policy_check_and_list() -> anyhow::Result<()> {
    use geminid_tests::mcp::Setup;
    let s = Setup::new(json!({ "fx": { "command": fixture(), "trust": true } })).await?;
    let file = s.home.root().join("home/.gemini/policies/mine.toml");
    std::fs::create_dir_all(file.parent().unwrap_or(&file))?;
    std::fs::write(
        &file,
        "[[rule]]\nmcpName = \"fx\"\ntoolName = \"crash\"\ndecision = \"deny\"\npriority = 900\ndenyMessage = \"not here\"\n",
    )?;
    let session = ["--session", s.session.as_str()];
    let checked = s.home.gemctl_json(
        &[&session[..], &["policy", "check", "mcp_fx_crash", "--server", "fx"]].concat(),
    )?;
    assert_eq!(
        (checked["decision"].as_str(), checked["rule"]["line"].as_u64()),
        (Some("deny"), Some(1))
    );
    let (code, out, _) = s.home.gemctl_run(
        &[&session[..], &["policy", "check", "mcp_fx_echo", "--server", "fx"]].concat(),
    )?;
    assert_eq!(code, 0);
    assert!(out.starts_with("allow\n") && out.contains("settings: mcpServers.fx.trust"), "{out}");
    // Without `--server`, exactly as the call decides: the session knows whose tool it is.
    for (tool, want) in [("mcp_fx_crash", "deny"), ("mcp_fx_echo", "allow")] {
        let checked = s.home.gemctl_json(&[&session[..], &["policy", "check", tool]].concat())?;
        assert_eq!(checked["decision"], want, "{tool}: {checked}");
    }
    let (code, out, _) = s.home.gemctl_run(&[&session[..], &["policy", "list"]].concat())?;
    assert_eq!(code, 0);
    assert!(
        out.contains("PRIORITY") && out.contains("mcp_fx_crash") && out.contains("mine.toml:1"),
        "{out}"
    );
    let (code, _, err) =
        s.home.gemctl_run(&[&session[..], &["policy", "check", "x", "{not json"]].concat())?;
    assert_ne!(code, 0);
    assert!(err.contains("must be a JSON object"), "{err}");
    let (code, _, err) = s
        .home
        .gemctl_run(&[&session[..], &["policy", "check", "x", "--mode", "turbo"]].concat())?;
    assert_ne!(code, 0);
    assert!(err.contains("not a mode"), "{err}");
    Ok(())
}

/// `gemctl policy check` decides in the session's approval mode, as the session's calls are
/// decided (audit B5): a headless session's call to an MCP tool no rule names is denied by
/// default and allowed in `yolo`, and `policy check` says the same in each mode; `--mode`
/// still asks about another.
#[tokio::test]
async fn policy_check_decides_in_the_sessions_mode() -> anyhow::Result<()> {
    use geminid_protocol::api::ToolsApiClient;
    use geminid_protocol::tools::ToolsCallParams;
    use geminid_tests::mcp::{FAST, new_session, write_user_settings};
    use geminid_tests::{Daemon, TestHome};
    // A new user's home: no rule of theirs, so the mode and the defaults decide.
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": { "command": fixture() } }))?;
    let daemon = Daemon::start(&home, FAST).await?;
    anyhow::ensure!(home.gemctl(&["trust"])?.status.success(), "gemctl trust failed");
    let client = daemon.client().await?;
    let session = new_session(&client, &home).await?;
    let decide = |tool: &str, extra: &[&str]| -> anyhow::Result<String> {
        let args = [&["--session", session.as_str(), "policy", "check", tool][..], extra].concat();
        let v = home.gemctl_json(&args)?;
        Ok(format!("{} {}", v["decision"].as_str().unwrap_or("?"), v["reason"]))
    };
    let call = || {
        client.tools_call(ToolsCallParams {
            session: session.clone(),
            name: "mcp_fx_echo".into(),
            args: json!({ "text": "hi" }).as_object().cloned(),
            call_id: None,
            confirmed: false,
        })
    };
    // (mode, the MCP tool, write_file, run_shell_command)
    let modes = [
        ("default", "deny", "deny", "deny"),
        ("yolo", "allow", "allow", "allow"),
        ("autoEdit", "deny", "allow", "deny"),
        ("plan", "deny", "deny", "deny"),
    ];
    for (mode, mcp, write, shell) in modes {
        let (code, out, err) = home.gemctl_run(&["session", "update", &session, "--mode", mode])?;
        assert_eq!(code, 0, "{out}{err}");
        let got = [
            decide("mcp_fx_echo", &["--server", "fx"])?,
            decide("write_file", &[])?,
            decide("run_shell_command", &[])?,
        ];
        let words: Vec<&str> = got.iter().map(|g| g.split(' ').next().unwrap_or("")).collect();
        assert_eq!(words, [mcp, write, shell], "in {mode}: {got:#?}");
        // The call in that session agrees with the check.
        let called = call().await;
        assert_eq!(called.is_ok(), mcp == "allow", "in {mode}: {called:?}");
    }
    // Plan mode's refusal says why in Gemini CLI's words.
    assert!(decide("write_file", &[])?.contains("You are in Plan Mode"));
    // The flag still decides for another mode than the session's.
    let (code, out, err) = home.gemctl_run(&["session", "update", &session, "--mode", "yolo"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(decide("mcp_fx_echo", &["--server", "fx", "--mode", "default"])?.starts_with("deny"));
    assert!(decide("mcp_fx_echo", &["--server", "fx"])?.starts_with("allow"));
    Ok(())
}

/// Issue 63, B4 for policy files: one that does not parse when the daemon starts uses the
/// rules an earlier daemon read of it; with none known, every call is refused with where the
/// file breaks, rather than run without its deny rules.
#[tokio::test]
async fn a_policy_file_broken_at_start_keeps_its_deny_rules_or_refuses_calls() -> anyhow::Result<()>
{
    use geminid_tests::{Daemon, TestHome, eventually, mcp::stdio, mcp::write_user_settings};
    use nix::sys::signal::Signal;
    use std::time::Duration;
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;
    let file = home.root().join("home/.gemini/policies/mine.toml");
    std::fs::create_dir_all(file.parent().unwrap_or(&file))?;
    let deny = "[[rule]]\nmcpName = \"fx\"\ntoolName = \"echo\"\ndecision = \"deny\"\npriority = 500\ndenyMessage = \"no echo here\"\n";
    let broken = "[[rule]\nmcpName = \"fx\"\n";
    std::fs::write(&file, broken)?;
    let call = || -> anyhow::Result<(i32, String)> {
        let (code, out, err) = home.gemctl_run(&["call", "mcp_fx_echo", r#"{"text": "hi"}"#])?;
        Ok((code, format!("{out}{err}")))
    };
    let mut daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, said) = call()?;
    // From `~`: the text a model reads names no absolute path.
    let at = "~/.gemini/policies/mine.toml:1:";
    assert_ne!(code, 0, "the call ran without the file's rules: {said}");
    assert!(said.contains("Tool execution refused: ") && said.contains(at), "{said}");
    assert!(!said.contains(&home.root().display().to_string()), "{said}");
    assert!(said.contains("fix it and geminid reloads it"), "{said}");

    // Fixed: its deny rule holds.
    std::fs::write(&file, deny)?;
    let denied = || async { call().is_ok_and(|(c, said)| c != 0 && said.contains("no echo here")) };
    assert!(eventually(Duration::from_secs(10), denied).await, "{:?}", call()?);
    daemon.signal(Signal::SIGTERM)?;
    daemon.wait_exit(Duration::from_secs(20)).await?;

    // Broken again before the next start: the rules the last daemon read still deny.
    std::fs::write(&file, broken)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let (code, said) = call()?;
    assert!(code != 0 && said.contains("no echo here"), "{said}");
    let (_, listed, err) = home.gemctl_run(&["policy", "list"])?;
    let listed = format!("{listed}{err}");
    assert!(listed.contains("last good rules (1), as geminid read them at"), "{listed}");
    Ok(())
}
