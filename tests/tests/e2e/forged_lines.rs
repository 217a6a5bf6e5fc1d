//! A server's words cannot forge gemctl's lines or colours (attack report of issue 68, finding
//! 7): `gemctl mcp tools`' notes quoted a server's tool names and property keys with their
//! line breaks and ESC sequences, so a key printed a fake "✓ fake: connected" line; `gemctl
//! call`'s result and a policy rule's `denyMessage` let gemctl's own colour codes through. On a
//! terminal they are escaped now; `gemctl call`'s result piped is the server's text as sent.

use std::process::Command;

use geminid_tests::mcp::{stdio, write_user_settings};
use geminid_tests::{Daemon, TestHome};
use serde_json::json;

/// What a server writes to paint red and start a line of its own.
const FORGED: &str = "\u{1b}[31mRED\u{1b}[0m\n✓ fake: connected";

/// `gemctl ARGS` on a terminal (a pseudo-terminal `script(1)` opens): what it showed, stdout
/// and stderr together.
fn on_terminal(home: &TestHome, args: &[&str]) -> anyhow::Result<String> {
    let inner = home.gemctl_cmd(args);
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let line = std::iter::once(inner.get_program().to_string_lossy().into_owned())
        .chain(args.iter().map(|a| (*a).to_owned()))
        .map(|a| quote(&a))
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = Command::new("script");
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    if let Some(dir) = inner.get_current_dir() {
        cmd.current_dir(dir);
    }
    // No colour of gemctl's own: what is left of ESC is the server's.
    cmd.env("NO_COLOR", "1");
    let out = cmd.args(["-qec", &line, "/dev/null"]).stdin(std::process::Stdio::null()).output()?;
    Ok(String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"))
}

/// No raw ESC, and no line of the server's making.
fn assert_unforged(what: &str, shown: &str) {
    assert!(!shown.contains('\u{1b}'), "{what} wrote ESC raw:\n{shown:?}");
    assert!(
        !shown.lines().any(|l| l.trim_start().starts_with("✓ fake")),
        "{what} let the server start a line:\n{shown}"
    );
}

#[tokio::test]
async fn server_text_cannot_forge_lines_or_colours_on_a_terminal() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let listing = home.root().join("listing.json");
    let text = |t: &str| json!({ "content": [{ "type": "text", "text": t }] });
    let object = json!({ "type": "object" });
    std::fs::write(
        &listing,
        json!({
            "tools": [
                { "name": format!("k{FORGED}"), "description": "a forged name",
                  "inputSchema": object },
                { "name": "keys", "description": "a forged property key",
                  "inputSchema": { "type": "object",
                                   "properties": { format!("k{FORGED}"): 5 } } },
                { "name": format!("b{FORGED}"), "description": "left out, named",
                  "inputSchema": { "type": "array" } },
                { "name": "paint", "description": "answers in colour", "inputSchema": object },
                { "name": "denied", "description": "denied by a rule", "inputSchema": object },
            ],
            "results": {
                "paint": text(&format!("before\t{FORGED}\nafter")),
            }
        })
        .to_string(),
    )?;
    let path = listing.display().to_string();
    let mut raw = stdio(&["--raw", "--listing", &path]);
    raw["trust"] = json!(true);
    write_user_settings(&home, json!({ "raw": raw }))?;
    let rule = format!(
        "[[rule]]\nmcpName = \"raw\"\ntoolName = \"denied\"\ndecision = \"deny\"\npriority = 500\n\
         denyMessage = {}\n",
        serde_json::to_string(FORGED)?
    );
    let policies = home.root().join("home/.gemini/policies");
    std::fs::create_dir_all(&policies)?;
    std::fs::write(policies.join("forged.toml"), rule)?;
    let _daemon = Daemon::start(&home, &["--mcp-backoff", "50ms"]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, _, err) = home.gemctl_run(&["mcp", "start"])?;
    assert_eq!(code, 0, "{err}");

    let tools = on_terminal(&home, &["mcp", "tools", "raw"])?;
    for said in [
        "its tool 'keys' is left out: its inputSchema's property 'k⟨ESC⟩[31mRED⟨ESC⟩[0m⟨LF⟩✓ fake: connected' is not an object",
        "its tool 'b⟨ESC⟩[31mRED⟨ESC⟩[0m⟨LF⟩✓ fake: connected' is left out",
        "(user tier, priority 500, effective 4.5): ⟨ESC⟩[31mRED⟨ESC⟩[0m⟨LF⟩✓ fake: connected",
    ] {
        assert!(tools.contains(said), "{said}\n{tools}");
    }
    assert_unforged("mcp tools", &tools);

    let call = on_terminal(&home, &["call", "mcp_raw_paint", "{}"])?;
    assert!(call.contains("before\t⟨ESC⟩[31mRED⟨ESC⟩[0m\n✓ fake: connected\nafter"), "{call:?}");
    assert!(!call.contains('\u{1b}'), "{call:?}");

    let denied = on_terminal(&home, &["call", "mcp_raw_denied", "{}"])?;
    assert!(denied.contains("⟨ESC⟩[31mRED⟨ESC⟩[0m"), "{denied:?}");
    assert!(!denied.contains('\u{1b}'), "{denied:?}");

    // Piped, the result is the server's text as it sent it (for scripts).
    let (code, out, err) = home.gemctl_run(&["call", "mcp_raw_paint", "{}"])?;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("before\t{FORGED}\nafter\n"));
    Ok(())
}
