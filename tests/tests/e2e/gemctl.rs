//! The real `gemctl` binary against the real daemon: every command, `--json`, auto-start,
//! and the `gemctl rpc` stdio bridge in both framings.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::Duration;

use geminid_tests::{Daemon, TestHome, alive};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

#[tokio::test]
async fn status_start_stop_and_autostart() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let out = home.gemctl(&["status"])?;
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("geminid is not running"));
    let out = home.gemctl(&["--json", "status"])?;
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout)?["running"], false);

    // `version` never starts one (it said "a similar subcommand exists: 'session'").
    let (code, out, _) = home.gemctl_run(&["version"])?;
    assert_eq!(code, 0);
    assert!(out.starts_with("gemctl 0.") && out.contains("geminid is not running on"), "{out}");
    assert!(!alive_daemon(&home), "version started a daemon");
    // --no-autostart refuses; a session command otherwise starts the daemon.
    let out = home.gemctl(&["--no-autostart", "session", "list"])?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-autostart"));
    // An error gemctl meets itself still has a name a script can test (audit polish).
    let out = home.gemctl(&["--json", "--no-autostart", "session", "list"])?;
    let err = serde_json::from_slice::<Value>(&out.stdout)?;
    assert_eq!(
        (&err["error"]["name"], &err["error"]["code"]),
        (&json!("notRunning"), &Value::Null)
    );
    assert_eq!(home.gemctl_json(&["session", "list"])?, Value::Array(vec![]));

    let started = home.gemctl_json(&["daemon", "start"])?;
    assert_eq!(started["started"], false, "already running after autostart");
    let pid = u32::try_from(started["pid"].as_u64().unwrap_or_default())?;
    assert!(alive(pid));
    let status = home.gemctl_json(&["status"])?;
    assert_eq!(status["pid"], pid);
    let (_, out, _) = home.gemctl_run(&["version"])?;
    assert!(out.contains(&format!("(protocol 2), pid {pid}\n")), "{out}");
    assert_eq!(status["running"], true);
    // The log an autostarted daemon writes and the database's files are the owner's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777);
    let log = std::path::PathBuf::from(format!("{}.log", home.socket().display()));
    assert_eq!(mode(&log)?, 0o600, "{}", log.display());
    let db_files: Vec<_> =
        std::fs::read_dir(home.data_dir())?.flatten().map(|e| e.path()).collect();
    assert!(!db_files.is_empty());
    for f in db_files {
        let want = if f.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&f)?, want, "{}", f.display());
    }

    let stopped = home.gemctl_json(&["daemon", "stop"])?;
    assert_eq!(stopped["stopped"], true);
    assert!(!home.socket().exists());
    assert!(geminid_tests::eventually(Duration::from_secs(5), || async { !alive(pid) }).await);
    assert_eq!(home.gemctl_json(&["daemon", "stop"])?["stopped"], false);
    let fresh = home.gemctl_json(&["daemon", "start"])?;
    assert_eq!(fresh["started"], true);
    home.gemctl_json(&["daemon", "stop"])?;
    Ok(())
}

/// Whether a daemon answers on the home's socket.
fn alive_daemon(home: &TestHome) -> bool {
    home.gemctl(&["--no-autostart", "status"]).is_ok_and(|o| o.status.success())
}

/// The process is gone, or has exited and waits to be reaped by whoever adopted it.
fn exited(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses.
    !alive(pid) || stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
}

/// `gemctl daemon restart` stops the daemon, waits until it has exited and starts a new one
/// on the same socket (or starts one when none runs); `gemctl daemon logs` prints the log
/// file of the daemon gemctl starts, its last lines with `-n`, new lines with `--follow`, and
/// says where the file will be before there is one (audit turn 4, M1).
#[tokio::test]
async fn daemon_restart_and_daemon_logs() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let log = format!("{}.log", home.socket().display());
    let (code, out, err) = home.gemctl_run(&["daemon", "logs"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("no daemon log yet at {log}: ")), "{out}");
    assert!(!alive_daemon(&home), "daemon logs started a daemon");

    let first = home.gemctl_json(&["daemon", "restart"])?;
    assert_eq!((&first["started"], &first["restarted"]), (&json!(true), &json!(false)), "{first}");
    let old = u32::try_from(first["pid"].as_u64().unwrap_or_default())?;
    // Following from the end, before the restart.
    let mut follower = home
        .gemctl_cmd(&["daemon", "logs", "--follow", "-n", "0"])
        .stdout(Stdio::piped())
        .spawn()?;
    let (tx, mut followed) = tokio::sync::mpsc::unbounded_channel();
    if let Some(out) = follower.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
    }
    let again = home.gemctl_json(&["daemon", "restart"])?;
    assert_eq!((&again["restarted"], &again["previousPid"]), (&json!(true), &json!(old)));
    let new = u32::try_from(again["pid"].as_u64().unwrap_or_default())?;
    assert_ne!(new, old, "{again}");
    assert!(exited(old), "restart returned before pid {old} exited");
    assert_eq!(home.gemctl_json(&["status"])?["pid"], json!(new));
    // The follower sees the new daemon's lines (the old one's last included).
    let started = format!("geminid started pid={new}");
    let seen = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = followed.recv().await {
            if line.contains(&started) {
                return true;
            }
        }
        false
    })
    .await;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(follower.id())?);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT)?;
    let ended = follower.wait()?;
    assert_eq!(seen, Ok(true), "--follow did not print {started:?}");
    assert!(ended.success(), "{ended}");

    // Stopped, so that the file no longer grows while it is compared.
    home.gemctl_json(&["daemon", "stop"])?;
    let (code, out, err) = home.gemctl_run(&["daemon", "logs", "-n", "2"])?;
    assert_eq!((code, out.lines().count()), (0, 2), "{out}{err}");
    let whole = std::fs::read_to_string(&log)?;
    assert!(whole.ends_with(&out), "the last 2 lines of {log}:\n{out}");
    let (code, out, _) = home.gemctl_run(&["daemon", "logs"])?;
    assert_eq!((code, out.as_str()), (0, whole.as_str()));
    Ok(())
}

#[tokio::test]
async fn the_command_after_daemon_stop_starts_a_fresh_daemon() -> anyhow::Result<()> {
    // A daemon gives up its socket first and its database and lock last (after stopping its
    // MCP servers). `daemon stop` returns only once the process has exited, so the next
    // command's autostart finds everything free instead of a locked database.
    let home = TestHome::new()?;
    geminid_tests::mcp::write_user_settings(
        &home,
        serde_json::json!({ "fx": geminid_tests::mcp::stdio(&[]) }),
    )?;
    home.gemctl_json(&["trust"])?;
    for round in 0..3 {
        let started = home.gemctl_json(&["mcp", "start"])?;
        assert_eq!(started[0]["state"], "connected", "round {round}: {started}");
        let pid = u32::try_from(home.gemctl_json(&["status"])?["pid"].as_u64().unwrap_or(0))?;
        assert_eq!(home.gemctl_json(&["daemon", "stop"])?["stopped"], true);
        assert!(exited(pid), "round {round}: daemon stop returned before pid {pid} exited");
    }
    let (code, _, err) = home.gemctl_run(&["mcp", "list"])?;
    assert_eq!(code, 0, "{err}");
    home.gemctl_json(&["daemon", "stop"])?;
    // The daemons gemctl started logged to a file: plain text, no terminal colours.
    let mut log = home.socket().into_os_string();
    log.push(".log");
    let log = std::fs::read_to_string(&log)?;
    assert!(log.contains("listening"), "{log}");
    assert!(!log.contains('\x1b'), "escape codes in the log file:\n{log}");
    Ok(())
}

/// `session show` says the session's approval mode, whether a person answers its confirmations,
/// and the names (never the values) of the environment its servers inherit, and from whom
/// (issue 63, M2 and C5: a yolo session and a trimmed environment were invisible).
#[tokio::test]
async fn session_show_says_the_mode_who_answers_and_the_environments_names() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let secret = "v4lue-never-shown";
    let show = |extra: &[&str]| -> anyhow::Result<(String, String)> {
        let mut args = vec!["session", "show"];
        args.extend_from_slice(extra);
        let out = home.gemctl_cmd(&args).env("MY_SHELL_VAR", secret).output()?;
        anyhow::ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        Ok((
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        ))
    };
    let (text, _) = show(&[])?;
    assert!(text.contains("mode:       default"), "{text}");
    assert!(text.contains("interactive: no: no client listens"), "{text}");
    assert!(text.contains("a gemctl command's") && text.contains("MY_SHELL_VAR"), "{text}");
    assert!(!text.contains(secret), "{text}");
    let (code, _, err) =
        home.gemctl_run(&["session", "update", "--mode", "yolo", "--interactive"])?;
    assert_eq!(code, 0, "{err}");
    let (text, _) = show(&[])?;
    assert!(text.contains("mode:       yolo") && text.contains("interactive: yes (set"), "{text}");
    let (json, _) = show(&["--json"])?;
    let v: serde_json::Value = serde_json::from_str(&json)?;
    assert!(v["envKeys"].as_array().is_some_and(|k| k.iter().any(|k| k == "MY_SHELL_VAR")), "{v}");
    assert!(v["envSince"].is_string() && !json.contains(secret), "{v}");
    assert_eq!(v["listening"], false, "{v}");
    Ok(())
}

#[tokio::test]
async fn session_commands_and_the_default_session() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let default = home.gemctl_json(&["session", "show"])?;
    assert_eq!(default["isDefault"], true);
    // Its own connection is not counted (audit polish).
    assert_eq!(default["attachedConnections"], 0);
    assert_eq!(home.gemctl_json(&["session", "show"])?["id"], default["id"], "default not reused");
    let new = home.gemctl_json(&["session", "new"])?;
    assert_eq!(new["isDefault"], false);
    assert_eq!(new["envSource"], "client");
    let other = home.root().join("home");
    let elsewhere =
        home.gemctl_json(&["session", "new", "--workspace", &other.display().to_string()])?;
    let list = home.gemctl_json(&["session", "list"])?;
    assert_eq!(list.as_array().map(Vec::len), Some(3));
    let only_ws = home.gemctl_json(&["session", "list", "--workspace", "."])?;
    assert_eq!(only_ws.as_array().map(Vec::len), Some(2));
    // --session selects a session for commands that act for one.
    let new_id = new["id"].as_str().unwrap_or_default();
    assert_eq!(home.gemctl_json(&["--session", new_id, "session", "show"])?["id"], new["id"]);
    let out = home.gemctl(&["--json", "--session", "bogus", "session", "show"])?;
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout)?["error"]["name"], "sessionNotFound");
    // Enough of an id to tell it from the others: its end (ids created together share their
    // start), or its start when that is unique; an ambiguous part is refused with the choices.
    let tail = &new_id[new_id.len() - 6..];
    assert_eq!(home.gemctl_json(&["--session", tail, "session", "show"])?["id"], new["id"]);
    assert_eq!(home.gemctl_json(&["session", "show", tail])?["id"], new["id"]);
    let (code, _, err) = home.gemctl_run(&["session", "show", &new_id[..4]])?;
    assert_eq!(code, 1, "three sessions made in one second share their first characters");
    assert!(err.contains(&format!("'{}' fits 3 sessions: ", &new_id[..4])), "{err}");
    let id = elsewhere["id"].as_str().unwrap_or_default();
    assert_eq!(home.gemctl_json(&["session", "show", id])?["workspace"], elsewhere["workspace"]);
    assert_eq!(home.gemctl_json(&["session", "close", id])?["id"], id);

    // Errors: a clear message on stderr and, with --json, a machine-readable object.
    let out = home.gemctl(&["--json", "session", "show", id])?;
    assert!(!out.status.success());
    let err: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(err["error"]["name"], "sessionNotFound");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("no session with id \"{id}\"")));
    let out = home.gemctl(&["--json", "session", "new", "--workspace", "/no/such/dir"])?;
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout)?["error"]["name"], "invalidWorkspace");
    // Human output.
    let out = home.gemctl(&["session", "list"])?;
    let text = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = text.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(
        header,
        ["ID", "WORKSPACE", "DEFAULT", "ATTACHED", "LAST", "SEEN", "PARENT"],
        "{text}"
    );
    assert!(text.contains(" yes "), "{text}");
    // A subagent's session names its parent, in the list and in show.
    let parent = default["id"].as_str().unwrap_or_default();
    let sub = home.gemctl_json(&["session", "derive", parent, "helper"])?;
    let sub_id = sub["id"].as_str().unwrap_or_default();
    let text = String::from_utf8_lossy(&home.gemctl(&["session", "list"])?.stdout).into_owned();
    let row = text.lines().find(|l| l.starts_with(sub_id)).unwrap_or_default();
    assert!(row.ends_with(&format!("{parent} (helper)")), "{text}");
    let (_, shown, _) = home.gemctl_run(&["session", "show", sub_id])?;
    assert!(shown.contains(&format!("  subagent:   'helper' of {parent} (path ")), "{shown}");
    Ok(())
}

/// Lines of a child's stdout, read on a thread so that waiting for one can time out.
fn line_reader(out: impl Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[tokio::test]
async fn events_and_attach_stream_json_lines() -> anyhow::Result<()> {
    use geminid_protocol::api::DaemonApiClient;
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let watcher = daemon.client().await?;
    let subscribers = |n: u32| {
        let watcher = &watcher;
        async move {
            geminid_tests::eventually(Duration::from_secs(10), || async {
                watcher.status().await.is_ok_and(|s| s.subscribers == n)
            })
            .await
        }
    };
    let mut events = home.gemctl_cmd(&["--json", "events"]).stdout(Stdio::piped()).spawn()?;
    let lines = line_reader(events.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?);
    assert!(subscribers(1).await, "gemctl events never subscribed");
    // `attach` without an id attaches the default session: created, then the events stream.
    let mut attach = home.gemctl_cmd(&["--json", "attach"]).stdout(Stdio::piped()).spawn()?;
    let first: Value = serde_json::from_str(&lines.recv_timeout(Duration::from_secs(10))?)?;
    assert_eq!(first["kind"], "session/created");
    assert_eq!(first["payload"]["isDefault"], true);
    assert!(subscribers(2).await, "gemctl attach never subscribed");
    drop(watcher);
    home.gemctl_json(&["daemon", "stop"])?;
    let mut kinds = Vec::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(10)) {
        let v: Value = serde_json::from_str(&line)?;
        kinds.push(v["kind"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(kinds.last().map(String::as_str), Some("daemon/shuttingDown"), "{kinds:?}");
    assert!(events.wait()?.success());
    let mut attach_out = String::new();
    attach.stdout.take().map(|mut s| s.read_to_string(&mut attach_out));
    assert!(attach.wait()?.success());
    assert!(attach_out.contains("daemon/shuttingDown"), "{attach_out}");
    Ok(())
}

fn bridge(home: &TestHome) -> anyhow::Result<std::process::Child> {
    Ok(home.gemctl_cmd(&["rpc"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?)
}

#[tokio::test]
async fn rpc_bridge_relays_lines_and_subscriptions() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let mut child = bridge(&home)?;
    let mut stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
    let out = line_reader(child.stdout.take().ok_or_else(|| anyhow::anyhow!("stdout"))?);
    let next = || -> anyhow::Result<Value> {
        Ok(serde_json::from_str(&out.recv_timeout(Duration::from_secs(10))?)?)
    };
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"daemon/hello","params":{{"protocolVersion":2}}}}"#
    )?;
    assert_eq!(next()?["result"]["pid"], daemon.pid());
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":2,"method":"events/subscribe","params":{{"kinds":["session/created"]}}}}"#
    )?;
    let sub = next()?;
    assert!(sub["result"].is_string() || sub["result"].is_number(), "{sub}");
    let ws = home.workspace().display().to_string();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":3,"method":"session/create","params":{{"workspace":"{ws}"}}}}"#
    )?;
    let (mut reply, mut notification) = (None, None);
    for _ in 0..2 {
        let msg = next()?;
        if msg.get("method").is_some() { notification = Some(msg) } else { reply = Some(msg) }
    }
    let (reply, notification) = (reply.unwrap_or_default(), notification.unwrap_or_default());
    assert_eq!(notification["method"], "events/event");
    assert_eq!(notification["params"]["result"]["payload"]["id"], reply["result"]["id"]);
    // As docs/PROTOCOL.md has it: the subscription ends by its id, named or positional.
    let id = sub["result"].clone();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 10, "method": "events/unsubscribe", "params": {"subscription": id}})
    )?;
    assert_eq!(next()?["result"], true);
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 11, "method": "events/unsubscribe", "params": [id]})
    )?;
    assert_eq!(next()?["result"], false, "already ended");
    // An event kind that does not exist, and a page too large, are refused, not ignored.
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":12,"method":"events/subscribe","params":{{"kinds":["session/created","tool/progress"]}}}}"#
    )?;
    let e = next()?;
    assert_eq!(e["error"]["code"], -32602, "{e}");
    assert!(
        e["error"]["message"].as_str().is_some_and(
            |m| m.contains("no event kind 'tool/progress'; the kinds are session/created")
        ),
        "{e}"
    );
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":13,"method":"session/list","params":{{"limit":501}}}}"#
    )?;
    let e = next()?;
    assert_eq!(e["error"]["code"], -32602, "{e}");
    assert!(e["error"]["message"].as_str().is_some_and(|m| m.contains("1 to 500")), "{e}");
    writeln!(stdin, "{{broken")?;
    assert_eq!(next()?["error"]["code"], -32700);
    // End of input: the bridge delivers what is owed and exits.
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":4,"method":"daemon/status"}}"#)?;
    drop(stdin);
    assert_eq!(next()?["id"], 4);
    assert!(child.wait()?.success());
    Ok(())
}

#[tokio::test]
async fn rpc_bridge_speaks_content_length_framing() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let mut child = bridge(&home)?;
    let mut stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
    for (id, method) in [(1, "daemon/status"), (2, "session/list")] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#);
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    }
    drop(stdin);
    let mut raw = String::new();
    child.stdout.take().ok_or_else(|| anyhow::anyhow!("stdout"))?.read_to_string(&mut raw)?;
    assert!(child.wait()?.success());
    let mut replies = Vec::new();
    let mut rest = raw.as_str();
    while let Some((header, after)) = rest.split_once("\r\n\r\n") {
        let len: usize = header.trim().strip_prefix("Content-Length: ").unwrap_or("0").parse()?;
        replies.push(serde_json::from_str::<Value>(&after[..len])?);
        rest = &after[len..];
    }
    assert_eq!(replies.len(), 2, "{raw}");
    let status = replies.iter().find(|r| r["id"] == 1).cloned().unwrap_or_default();
    assert_eq!(status["result"]["pid"], daemon.pid());
    assert!(replies.iter().any(|r| r["id"] == 2 && r["result"]["sessions"].is_array()));
    Ok(())
}

#[tokio::test]
async fn a_daemon_gemctl_starts_reads_the_settings_file() -> anyhow::Result<()> {
    use geminid_tests::mcp::{stdio, write_user_settings};
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;
    let dir = home.root().join("config/geminid");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("config.toml"),
        "# geminid\nmcp-linger = \"200ms\"\nmcp_stop_grace = \"1s\"\n",
    )?;
    // Autostarted by gemctl, not started by hand: the file is what carries the knobs.
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, out, err) = home.gemctl_run(&["mcp", "start"])?;
    assert_eq!(code, 0, "{out}{err}");
    let lingered = geminid_tests::eventually(Duration::from_secs(5), || async {
        home.gemctl_json(&["mcp", "list", "--all"])
            .is_ok_and(|v| v.as_array().is_some_and(Vec::is_empty))
    })
    .await;
    assert!(lingered, "the 200ms linger from the file did not apply");
    home.gemctl_json(&["daemon", "stop"])?;
    // An autostart that fails shows its own lines, not the previous daemon's (audit C3).
    std::fs::write(dir.join("config.toml"), "mcp-lingr = \"1s\"\n")?;
    let (code, _, err) = home.gemctl_run(&["mcp", "list"])?;
    assert_ne!(code, 0);
    assert!(err.contains("unknown setting `mcp-lingr`"), "{err}");
    assert!(!err.contains("geminid started") && !err.contains("stopped"), "{err}");

    // A setting that is no flag, or a bad value: the daemon says where, and does not start.
    for (text, want) in [
        (
            "mcp-lingr = \"1s\"\n",
            "unknown setting `mcp-lingr` (did you mean `mcp-linger`?); the settings are: data-dir, log-format",
        ),
        ("mcp-linger = \"soon\"\n", "invalid value 'soon' for '--mcp-linger <DURATION>'"),
        ("[mcp]\nlinger = 1\n", "is a table"),
    ] {
        std::fs::write(dir.join("config.toml"), text)?;
        let mut d = geminid_tests::Daemon::spawn(&home, &[])?;
        let status = d.wait_exit(Duration::from_secs(10)).await?;
        assert_eq!(status.code(), Some(2), "{text}");
        assert!(d.log().contains(want), "{text}: {}", d.log());
    }
    // A flag wins over the file.
    std::fs::write(dir.join("config.toml"), "max-connections = 0\n")?;
    let d = geminid_tests::Daemon::start(&home, &["--max-connections", "8"]).await?;
    drop(d);
    Ok(())
}

#[tokio::test]
async fn the_log_of_a_daemon_gemctl_starts_is_rotated() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let dir = home.root().join("config/geminid");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("config.toml"), "log-max-size = \"4KiB\"\n")?;
    let log = std::path::PathBuf::from(format!("{}.log", home.socket().display()));
    let old = std::path::PathBuf::from(format!("{}.log.1", home.socket().display()));
    // An earlier run's log, already past the size: rotated as the daemon opens it.
    std::fs::create_dir_all(home.socket().parent().unwrap_or(home.root()))?;
    std::fs::write(&log, "an earlier daemon's line\n".repeat(200))?;
    // Each new session is a line at the default level; a plain command attaching the
    // directory's session is not (it was a pair of lines per command).
    for _ in 0..3 {
        assert!(home.gemctl(&["session", "list"])?.status.success());
    }
    assert!(std::fs::read_to_string(&old)?.starts_with("an earlier daemon's line"));
    let quiet = std::fs::read_to_string(&log)?;
    assert!(!quiet.contains("session attached"), "{quiet}");
    for _ in 0..60 {
        assert!(home.gemctl(&["session", "new"])?.status.success());
    }
    let (now, before) = (std::fs::read_to_string(&log)?, std::fs::read_to_string(&old)?);
    assert!(!before.contains("an earlier daemon's line"), "rotated only once: {before}");
    assert!(before.contains("session created"), "{before}");
    for text in [&now, &before] {
        assert!(text.len() <= 4096, "{} bytes", text.len());
        assert!(text.is_empty() || text.ends_with('\n'), "a line was split: {text}");
    }
    // Nothing else beside the two files.
    let logs = std::fs::read_dir(home.socket().parent().unwrap_or(home.root()))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".log"))
        .count();
    assert_eq!(logs, 2);
    // Its last lines go to the current file.
    home.gemctl_json(&["daemon", "stop"])?;
    assert!(std::fs::read_to_string(&log)?.contains("stopped"));
    Ok(())
}

#[tokio::test]
async fn idle_default_sessions_are_closed_and_nothing_else() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    geminid_tests::mcp::write_user_settings(&home, json!({ "x": geminid_tests::mcp::stdio(&[]) }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    let idle = home.gemctl_json(&["session", "show"])?;
    let explicit = home.gemctl_json(&["session", "new"])?;
    let other = home.root().join("home");
    // A default session with state of its own (a session-only disable) is kept too.
    let with_state = home
        .gemctl_cmd(&["--json", "mcp", "disable", "x", "--session-only"])
        .current_dir(&other)
        .output()?;
    assert!(with_state.status.success(), "{}", String::from_utf8_lossy(&with_state.stderr));
    drop(daemon);
    // Unused for longer than a millisecond by the time the next daemon starts.
    let daemon = Daemon::start(&home, &["--session-prune-after", "1ms"]).await?;
    let ids: Vec<Value> = home
        .gemctl_json(&["session", "list"])?
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| s["id"].clone())
        .collect();
    assert!(!ids.contains(&idle["id"]), "the idle default session was not closed: {ids:?}");
    assert!(ids.contains(&explicit["id"]), "a session made with `session new` is never closed");
    assert_eq!(ids.len(), 2, "the explicit one and the default one with state: {ids:?}");
    assert!(daemon.log().contains("closed idle default sessions"), "{}", daemon.log());
    Ok(())
}

/// `mcp logs NAME` and `mcp restart NAME` take this directory's server of that name when
/// servers of that name run for other folders too (and another folder's by `--session`).
#[tokio::test]
async fn logs_and_restart_by_name_take_this_directorys_server() -> anyhow::Result<()> {
    use geminid_tests::mcp::{stdio, write_user_settings};
    let home = TestHome::new()?;
    // The user's fx, and a project's own fx (other arguments: another process).
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;
    let project = home.root().join("project");
    std::fs::create_dir_all(project.join(".gemini"))?;
    let settings = json!({ "mcpServers": { "fx": stdio(&["--rich"]) } });
    std::fs::write(project.join(".gemini/settings.json"), settings.to_string())?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let in_dir = |dir: &std::path::Path, args: &[&str]| -> anyhow::Result<(i32, String, String)> {
        let out = home.gemctl_cmd(args).current_dir(dir).output()?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Ok((out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr)))
    };
    let pid_in = |dir: &std::path::Path| -> anyhow::Result<u64> {
        let (_, out, _) = in_dir(dir, &["--json", "mcp", "list"])?;
        let v: Value = serde_json::from_str(&out)?;
        let fx = v.as_array().and_then(|a| a.iter().find(|s| s["name"] == "fx")).cloned();
        fx.and_then(|s| s["pid"].as_u64()).ok_or_else(|| anyhow::anyhow!("no fx pid: {v}"))
    };
    let ws = home.workspace();
    for dir in [&ws, &project] {
        assert_eq!(in_dir(dir, &["trust"])?.0, 0);
        let (code, _, err) = in_dir(dir, &["mcp", "start"])?;
        assert_eq!(code, 0, "{err}");
    }
    let (mine, theirs) = (pid_in(&ws)?, pid_in(&project)?);
    assert_ne!(mine, theirs);

    let (code, out, err) = in_dir(&ws, &["mcp", "logs", "fx", "-n", "50"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("starting (pid {mine})")), "this folder's fx: {out}");
    let (code, _, err) = in_dir(&project, &["mcp", "restart", "fx"])?;
    assert_eq!(code, 0, "{err}");
    assert_eq!(pid_in(&ws)?, mine, "the other folder's fx is left alone");
    assert_ne!(pid_in(&project)?, theirs, "the project's fx restarted");
    // From a folder with neither, the name is ambiguous, and the error says what helps.
    let (code, _, err) = in_dir(&home.root().join("home"), &["mcp", "logs", "fx"])?;
    assert_eq!(code, 1);
    assert!(err.contains("name a session") && err.contains("--session"), "{err}");
    Ok(())
}

/// Ctrl-C on `gemctl call` cancels the call on its server and says so; a call whose caller
/// goes away without a word (killed) is cancelled too; the audit log records both, saying so.
#[tokio::test]
async fn a_call_whose_caller_goes_away_is_audited() -> anyhow::Result<()> {
    use geminid_protocol::api::CallsApiClient;
    use geminid_tests::mcp::{stdio, write_user_settings};
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": stdio(&["--rich"]) }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    let client = daemon.client().await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, _, err) = home.gemctl_run(&["mcp", "start"])?;
    assert_eq!(code, 0, "{err}");
    // Ctrl-C while the call runs (in flight in the daemon: `wait` waits 10 min unless
    // cancelled): gemctl cancels it and says so, with a shell's code for Ctrl-C (audit turn 4,
    // P5: it ended with 130 without a word), and the server is told.
    let caller = home
        .gemctl_cmd(&["call", "mcp_fx_wait", r#"{"ms": 600000}"#])
        .stderr(Stdio::piped())
        .spawn()?;
    let in_flight = geminid_tests::eventually(Duration::from_secs(60), || async {
        client.calls_list(None).await.is_ok_and(|r| r.calls.iter().any(|c| c.tool == "mcp_fx_wait"))
    })
    .await;
    assert!(in_flight, "the call did not reach the daemon");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(caller.id())?);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT)?;
    let out = caller.wait_with_output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert_eq!(err, "cancelled: mcp_fx_wait (geminid told its server to stop it)\n");
    let told = geminid_tests::eventually(Duration::from_secs(60), || async {
        home.gemctl_run(&["call", "mcp_fx_cancelled"]).is_ok_and(|(_, out, _)| out == "1\n")
    })
    .await;
    assert!(told, "the server never saw the cancellation");
    let audit = home.gemctl_json(&["audit", "-n", "5"])?;
    let records = audit["records"].as_array().cloned().unwrap_or_default();
    let waited = records.iter().find(|r| r["tool"] == "mcp_fx_wait");
    assert!(
        waited.is_some_and(|r| r["ok"] == false && r["error"].to_string().contains("cancelled")),
        "{audit}"
    );

    // Killed: longer than any busy machine takes to get here, the call must end by the kill.
    let mut caller = home.gemctl_cmd(&["call", "mcp_fx_sleep", r#"{"ms": 600000}"#]).spawn()?;
    // Running on the server (the fixture's log says it sleeps), then the caller is gone.
    let sleeping = geminid_tests::eventually(Duration::from_secs(60), || async {
        home.gemctl_run(&["mcp", "logs", "fx", "-n", "20"])
            .is_ok_and(|(_, out, _)| out.contains("sleeping 600000 ms"))
    })
    .await;
    assert!(sleeping, "the call did not reach the server");
    caller.kill()?;
    caller.wait()?;
    let recorded = geminid_tests::eventually(Duration::from_secs(60), || async {
        home.gemctl_json(&["audit", "-n", "1"])
            .is_ok_and(|a| a["records"][0]["tool"] == "mcp_fx_sleep")
    })
    .await;
    let audit = home.gemctl_json(&["audit", "-n", "1"])?;
    assert!(recorded, "the call is missing from the audit log: {audit}");
    let record = &audit["records"][0];
    assert_eq!(record["ok"], false, "{record}");
    assert!(record.to_string().contains("the caller went away"), "{record}");
    // `audit --session` (as its help says) keeps that session's records only.
    let id = home.gemctl_json(&["session", "show"])?["id"].as_str().unwrap_or_default().to_owned();
    let mine = home.gemctl_json(&["--session", &id, "audit", "-n", "5"])?;
    assert_eq!(mine["records"][0]["tool"], "mcp_fx_sleep", "{mine}");
    let other =
        home.gemctl_json(&["session", "new"])?["id"].as_str().unwrap_or_default().to_owned();
    let theirs = home.gemctl_json(&["--session", &other, "audit", "-n", "5"])?;
    assert_eq!(theirs["records"], json!([]), "{theirs}");
    Ok(())
}

/// Whether `child` ends within `limit`.
async fn ends_within(child: &mut std::process::Child, limit: Duration) -> anyhow::Result<bool> {
    let ended = geminid_tests::poll(limit, || std::future::ready(child.try_wait().transpose()));
    Ok(ended.await.transpose()?.is_some())
}

/// `gemctl attach` answering from its stdin ends at Ctrl-C, and when the daemon stops, though
/// nothing was typed (a read of stdin no longer holds it).
#[tokio::test]
async fn attach_ends_at_ctrl_c_and_when_the_daemon_stops() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let _daemon = Daemon::start(&home, &[]).await?;
    let attach = || {
        home.gemctl_cmd(&["attach", "--answer"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
    };
    // Started as a shell starts a background job, with SIGINT ignored: the Ctrl-C pressed as
    // soon as attach says to detach with it must still detach it.
    let gemctl = geminid_tests::bin("gemctl").display().to_string();
    let mut first = home
        .command("sh", &["-c", "trap '' INT; exec \"$0\" attach --answer", &gemctl])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    let mut err = geminid_tests::stderr_lines(&mut first);
    geminid_tests::line_with(&mut err, "are answered here").await?;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(first.id())?);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT)?;
    // Generous: a loaded machine takes seconds to run a process at all; one that missed the
    // Ctrl-C runs for ever.
    let ended = ends_within(&mut first, Duration::from_secs(30)).await?;
    let _ = first.kill();
    assert!(ended, "attach still runs 30 s after Ctrl-C");

    let mut second = attach()?;
    let mut err = geminid_tests::stderr_lines(&mut second);
    geminid_tests::line_with(&mut err, "are answered here").await?;
    assert!(home.gemctl(&["daemon", "stop"])?.status.success());
    let ended = ends_within(&mut second, Duration::from_secs(30)).await?;
    let _ = second.kill();
    assert!(ended, "attach still runs 30 s after the daemon stopped");
    Ok(())
}
