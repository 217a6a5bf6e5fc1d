//! The soak: a real daemon with real servers while everything goes wrong at once. Eight clients
//! call tools without pause; a chaos task kills servers with SIGKILL, stops and continues them,
//! restarts the daemon (SIGTERM and SIGKILL), writes settings and policy files valid and
//! broken, opens and drops clients, floods the socket with garbage and fires hooks; a person
//! answers some confirmations and ignores others. Checked all along: every call answered or
//! failed with a clear error within its bound, no answer crossed to another call, every
//! session still there after each restart; at the end, no process left, the daemon's memory
//! high-water mark printed, and no canary secret in any log.
//!
//! `GEMINID_SOAK_SECS=120 cargo test -p geminid-tests --test e2e soak:: -- --ignored --nocapture`
//! (`.ci/run` runs it for two minutes; docs/RELIABILITY.md has longer runs).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use geminid_protocol::api::{
    ConfirmationApiClient, HooksApiClient, SessionApiClient, ToolsApiClient,
};
use geminid_protocol::asks::{AskKind, AskNotice, AsksListenParams};
use geminid_protocol::client::Client;
use geminid_protocol::hooks::HooksFireParams;
use geminid_protocol::policy::{ConfirmOutcome, ConfirmationRespondParams};
use geminid_protocol::session::{SessionAttachParams, SessionCreateParams, SessionIdParams};
use geminid_protocol::tools::ToolsCallParams;
use geminid_tests::mcp::{shell_env, stdio};
use geminid_tests::{Daemon, RELOADED, STILL_CHANGING, TestHome, eventually, lines_with};
use jsonrpsee::core::client::Error as ClientError;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

/// A secret in the sessions' environment and the settings: it must appear nowhere.
const CANARY: &str = "geminid-soak-canary-5f2c9e";
/// A call that takes longer than this is a violation (servers stopped for a while, a daemon
/// restarting and a confirmation waiting its 2 s are all well inside it).
const CALL_BOUND: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Record {
    calls: AtomicU64,
    answered: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    violations: Mutex<Vec<String>>,
    actions: Mutex<BTreeMap<&'static str, u64>>,
    rss_hwm_kib: AtomicU64,
}

impl Record {
    fn violation(&self, what: String) {
        eprintln!("VIOLATION {what}");
        self.violations.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(what);
    }

    fn error(&self, kind: String) {
        *self
            .errors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(kind)
            .or_default() += 1;
    }

    fn action(&self, what: &'static str) {
        *self
            .actions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(what)
            .or_default() += 1;
    }
}

/// The interop suite's `everything` server (a real third-party one), when
/// `tests/interop/run.sh` has installed it.
fn everything() -> Option<String> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.cache/interop/node_modules/.bin/mcp-server-everything");
    p.is_file().then(|| p.display().to_string())
}

fn settings(home: &TestHome, extra: bool, broken: bool) -> anyhow::Result<()> {
    let path = home.root().join("home/.gemini/settings.json");
    if broken {
        std::fs::write(&path, "{ \"mcpServers\": { \"fx\": ")?;
        return Ok(());
    }
    let mut servers = json!({
        "fx": stdio(&[]),
        "fx2": stdio(&["--asks"]),
        // Never reachable; its header holds the canary, which must never be shown.
        "remote": { "httpUrl": "http://127.0.0.1:9/mcp", "headers": { "Authorization": "Bearer $SOAK_CANARY" } }
    });
    if extra {
        servers["fx3"] = stdio(&[]);
    }
    if let Some(command) = everything() {
        servers["everything"] = json!({ "command": command, "timeout": 20000 });
    }
    let v = json!({
        "mcpServers": servers,
        "hooks": { "BeforeTool": [{ "matcher": "mcp_fx2_.*", "hooks": [{ "type": "command", "command": "true", "name": "soak" }] }] }
    });
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, v.to_string())?;
    std::fs::rename(tmp, path)?;
    Ok(())
}

fn policy(home: &TestHome, broken: bool) -> anyhow::Result<()> {
    let text = if broken {
        "[[rule]\ntoolName = "
    } else {
        "[[rule]]\ntoolName = \"echo\"\nmcpName = \"fx2\"\ndecision = \"ask_user\"\npriority = 500\n"
    };
    std::fs::write(home.root().join("home/.gemini/policies/soak.toml"), text)?;
    Ok(())
}

/// A session of the home's workspace whose environment holds the canary.
fn session_params(home: &TestHome) -> SessionCreateParams {
    SessionCreateParams {
        workspace: home.workspace().display().to_string(),
        env: Some(shell_env(home, &[("SOAK_CANARY", CANARY)])),
        ..Default::default()
    }
}

fn rss_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn connect(daemon: &Arc<tokio::sync::Mutex<Daemon>>) -> Option<Client> {
    geminid_tests::poll(Duration::from_secs(20), || async {
        let client = { daemon.lock().await.client().await };
        client.ok()
    })
    .await
}

/// One of the eight callers: its own session, calls without pause, checking each answer is its
/// own and the session outlives every restart.
async fn caller(
    n: usize,
    home: Arc<TestHome>,
    daemon: Arc<tokio::sync::Mutex<Daemon>>,
    rec: Arc<Record>,
    stop: Arc<AtomicBool>,
) {
    let Some(mut client) = connect(&daemon).await else {
        rec.violation(format!("caller {n}: the daemon never answered"));
        return;
    };
    let params = session_params(&home);
    let session = match client.create(params).await {
        Ok(s) => s.id,
        Err(e) => return rec.violation(format!("caller {n}: no session: {e}")),
    };
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let text = format!("c{n}-{i}");
        let real = everything().is_some() && i.is_multiple_of(7);
        let tool = match () {
            () if real => "mcp_everything_echo",
            () if i.is_multiple_of(5) => "mcp_fx2_pid",
            () => "mcp_fx_echo",
        };
        let p = ToolsCallParams {
            session: session.clone(),
            name: tool.into(),
            args: if real { json!({ "message": text }) } else { json!({ "text": text }) }
                .as_object()
                .cloned(),
            call_id: None,
            confirmed: false,
        };
        rec.calls.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(CALL_BOUND, client.tools_call(p)).await {
            Err(_) => rec.violation(format!("caller {n}: {tool} unanswered after {CALL_BOUND:?}")),
            Ok(Ok(r)) => {
                rec.answered.fetch_add(1, Ordering::Relaxed);
                if tool == "mcp_fx_echo" && !r.is_error && r.display != text {
                    rec.violation(format!("caller {n}: asked {text}, answered {}", r.display));
                }
                if real && !r.is_error && !r.display.trim().ends_with(&format!(" {text}")) {
                    rec.violation(format!(
                        "caller {n}: everything asked {text}, answered {}",
                        r.display
                    ));
                }
            }
            Ok(Err(ClientError::Call(e))) => {
                // A clear error: a code of the protocol's and a message saying why.
                let kind = match geminid_protocol::error::ErrorCode::from_code(e.code()) {
                    Some(code) => format!("{code:?}"),
                    None => format!("code {}", e.code()),
                };
                if e.message().is_empty() {
                    rec.violation(format!("caller {n}: error {kind} without a message"));
                }
                rec.error(kind);
            }
            Ok(Err(_)) => {
                // The connection went (the daemon restarting): reconnect, and find the
                // session still there.
                rec.error("connection lost (daemon restarting)".into());
                match connect(&daemon).await {
                    Some(c) => client = c,
                    None => return rec.violation(format!("caller {n}: could not reconnect")),
                }
                let again = SessionAttachParams { id: session.clone(), env: None };
                if let Err(e) = client.attach(again).await {
                    rec.violation(format!("caller {n}: session {session} lost: {e}"));
                    return;
                }
            }
        }
    }
}

/// A person: answers some confirmations, ignores others (they time out), while its session
/// makes calls that ask.
async fn person(
    home: Arc<TestHome>,
    daemon: Arc<tokio::sync::Mutex<Daemon>>,
    rec: Arc<Record>,
    stop: Arc<AtomicBool>,
) {
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let Some(client) = connect(&daemon).await else { return };
        let client = Arc::new(client);
        let Ok(session) = client.create(session_params(&home)).await else { continue };
        let Ok(mut asks) = client
            .asks_listen(AsksListenParams {
                session: session.id.clone(),
                kinds: vec![AskKind::Confirmation],
            })
            .await
        else {
            continue;
        };
        let call = {
            let (client, id) = (client.clone(), session.id.clone());
            tokio::spawn(async move {
                let p = ToolsCallParams {
                    session: id,
                    name: "mcp_fx2_echo".into(),
                    args: json!({"text": "asked"}).as_object().cloned(),
                    call_id: None,
                    confirmed: false,
                };
                tokio::time::timeout(CALL_BOUND, client.tools_call(p)).await
            })
        };
        if let Ok(Some(Ok(AskNotice::Asked { ask }))) =
            tokio::time::timeout(Duration::from_secs(10), asks.next()).await
        {
            let outcome = match round % 3 {
                0 => Some(ConfirmOutcome::Once),
                1 => Some(ConfirmOutcome::Deny),
                _ => None,
            };
            if let Some(outcome) = outcome {
                let p =
                    ConfirmationRespondParams { id: ask.id, outcome, reason: None, session: None };
                let _ = client.confirmation_respond(p).await;
            }
            rec.action("confirmation asked");
        }
        if let Ok(Err(_)) = call.await {
            rec.violation("a call that asked was unanswered".into());
        }
    }
}

/// A session whose call to `mcp_fx2_echo` was confirmed "for this session".
async fn approve(
    home: &TestHome,
    daemon: &Arc<tokio::sync::Mutex<Daemon>>,
) -> anyhow::Result<String> {
    let client = Arc::new(connect(daemon).await.ok_or_else(|| anyhow::anyhow!("no daemon"))?);
    let params = session_params(home);
    let session = client.create(params).await?.id;
    let listen = AsksListenParams { session: session.clone(), kinds: vec![AskKind::Confirmation] };
    let mut asks = client.asks_listen(listen).await?;
    let call = {
        let (client, id) = (client.clone(), session.clone());
        tokio::spawn(async move {
            let p = ToolsCallParams {
                session: id,
                name: "mcp_fx2_echo".into(),
                args: json!({"text": "approve"}).as_object().cloned(),
                call_id: None,
                confirmed: false,
            };
            client.tools_call(p).await
        })
    };
    let ask = loop {
        match tokio::time::timeout(Duration::from_secs(20), asks.next()).await {
            Ok(Some(Ok(AskNotice::Asked { ask }))) => break ask,
            Ok(Some(Ok(_))) => continue,
            Ok(other) => anyhow::bail!("no confirmation asked: {other:?}"),
            Err(_) => {
                let call = if call.is_finished() { Some(call.await) } else { None };
                anyhow::bail!("no confirmation asked within 20 s; the call: {call:?}");
            }
        }
    };
    let p = ConfirmationRespondParams {
        id: ask.id,
        outcome: ConfirmOutcome::Session,
        reason: None,
        session: None,
    };
    client.confirmation_respond(p).await?;
    call.await??;
    Ok(session)
}

/// Start the daemon again after the chaos stopped it. A start that fails is a violation,
/// reported with the end of its log (a whole log would bury the report); two more tries
/// follow so that the rest of the soak still checks something.
async fn restart(home: &TestHome, args: &[&str], rec: &Record) -> anyhow::Result<Daemon> {
    let mut tries = 0;
    loop {
        tries += 1;
        let failure = match Daemon::spawn(home, args) {
            Ok(d) => match d.wait_ready().await {
                Ok(()) => return Ok(d),
                Err(e) => {
                    let first = e.to_string().lines().next().unwrap_or_default().to_owned();
                    let log = d.log();
                    let tail: Vec<&str> = log.lines().rev().take(20).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    format!("the daemon did not come up: {first}\n{}", tail.join("\n"))
                }
            },
            Err(e) => format!("the daemon could not be spawned: {e}"),
        };
        rec.violation(failure.clone());
        if tries == 3 {
            anyhow::bail!("three starts in a row failed; the last: {failure}");
        }
    }
}

fn fixtures(home: &TestHome) -> Vec<u32> {
    home.processes()
        .into_iter()
        .filter(|(_, c)| c.contains("mcp-fixture"))
        .map(|(p, _)| p)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the soak runs on its own: GEMINID_SOAK_SECS=120 cargo test -p geminid-tests --test e2e soak:: -- --ignored"]
async fn everything_at_once_and_nothing_lost() -> anyhow::Result<()> {
    let secs: u64 =
        std::env::var("GEMINID_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(120);
    // Eight headless callers: the soak allows every MCP tool, and asks for one of them.
    let home = Arc::new(TestHome::allowing_mcp()?);
    settings(&home, false, false)?;
    policy(&home, false)?;
    let args = ["--confirm-timeout", "2s", "--mcp-backoff", "50ms", "--mcp-backoff-max", "500ms"];
    let daemon = Arc::new(tokio::sync::Mutex::new(Daemon::start(&home, &args).await?));
    assert!(home.gemctl(&["trust"])?.status.success());
    let rec = Arc::new(Record::default());
    let stop = Arc::new(AtomicBool::new(false));
    if everything().is_none() {
        eprintln!(
            "soak: the interop suite's servers are not installed (tests/interop/run.sh): the fixture only"
        );
    }
    let mut tasks = Vec::new();
    for n in 0..8 {
        tasks.push(tokio::spawn(caller(
            n,
            home.clone(),
            daemon.clone(),
            rec.clone(),
            stop.clone(),
        )));
    }
    tasks.push(tokio::spawn(person(home.clone(), daemon.clone(), rec.clone(), stop.clone())));

    // A session whose person said "for this session": its approval must survive every
    // restart of the daemon.
    let approved = approve(&home, &daemon).await?;
    let until = Instant::now() + Duration::from_secs(secs);
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ u64::from(std::process::id());
    let mut rand = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut held: Vec<Client> = Vec::new();
    // The daemon has read an input file: found it still changing, or reloaded with it.
    let read = [STILL_CHANGING, RELOADED, "reload failed"];
    while Instant::now() < until {
        // The soak's random rhythm: a random number of calls between two actions.
        let calls = rec.calls.load(Ordering::Relaxed) + 8 + rand(40);
        eventually(Duration::from_secs(30), || async {
            rec.calls.load(Ordering::Relaxed) >= calls
        })
        .await;
        let pid = daemon.lock().await.pid();
        rec.rss_hwm_kib.fetch_max(rss_hwm_kib(pid), Ordering::Relaxed);
        match rand(12) {
            0 | 1 => {
                if let Some(p) = fixtures(&home).get(rand(4) as usize) {
                    let _ = kill(Pid::from_raw(*p as i32), Signal::SIGKILL);
                    rec.action("server SIGKILL");
                }
            }
            2 => {
                if let Some(p) = fixtures(&home).first().copied() {
                    let _ = kill(Pid::from_raw(p as i32), Signal::SIGSTOP);
                    // Stopped while the callers make a few calls (those to it hang).
                    let calls = rec.calls.load(Ordering::Relaxed) + 8;
                    eventually(Duration::from_secs(10), || async {
                        rec.calls.load(Ordering::Relaxed) >= calls
                    })
                    .await;
                    let _ = kill(Pid::from_raw(p as i32), Signal::SIGCONT);
                    rec.action("server SIGSTOP/SIGCONT");
                }
            }
            3 => {
                let mut d = daemon.lock().await;
                let hard = rand(2) == 0;
                if hard {
                    d.kill9().await?;
                } else {
                    d.signal(Signal::SIGTERM)?;
                    if d.wait_exit(Duration::from_secs(20)).await.is_err() {
                        rec.violation("the daemon did not stop within 20 s of SIGTERM".into());
                    }
                }
                *d = restart(&home, &args, &rec).await?;
                let kept = match d.client().await {
                    Ok(c) => c.get(SessionIdParams { id: approved.clone() }).await.ok(),
                    Err(_) => None,
                };
                if !kept.is_some_and(|s| s.state.approvals.iter().any(|a| a == "mcp_fx2_echo")) {
                    rec.violation(format!("session {approved} lost its approval over a restart"));
                }
                rec.action(if hard { "daemon SIGKILL + start" } else { "daemon SIGTERM + start" });
            }
            4 => {
                let log = daemon.lock().await.log_path();
                let seen = lines_with(&log, &read);
                settings(&home, rand(2) == 0, true)?;
                // Broken until the daemon has read it.
                eventually(Duration::from_secs(20), || async { lines_with(&log, &read) > seen })
                    .await;
                settings(&home, rand(2) == 0, false)?;
                rec.action("settings broken, then valid");
            }
            5 => {
                settings(&home, rand(2) == 0, false)?;
                rec.action("settings edited (a server added or removed)");
            }
            6 => {
                let log = daemon.lock().await.log_path();
                let seen = lines_with(&log, &read);
                policy(&home, true)?;
                // Broken until the daemon has read it.
                eventually(Duration::from_secs(20), || async { lines_with(&log, &read) > seen })
                    .await;
                policy(&home, false)?;
                rec.action("policy broken, then valid");
            }
            7 => {
                if let Some(c) = connect(&daemon).await {
                    held.push(c);
                }
                if held.len() > 4 || rand(2) == 0 {
                    held.clear();
                }
                rec.action("clients opened and dropped");
            }
            8 => {
                if let Ok(mut s) = std::os::unix::net::UnixStream::connect(home.socket()) {
                    let junk: Vec<u8> = (0..4096).map(|_| rand(256) as u8).collect();
                    let _ = s.write_all(b"POST / HTTP/1.1\r\nContent-Length: 999999\r\n\r\n");
                    let _ = s.write_all(&junk);
                }
                rec.action("garbage on the socket");
            }
            _ => {
                // (Never gemctl here: during a restart it would start a second daemon.)
                if let Some(c) = connect(&daemon).await {
                    let params = session_params(&home);
                    if let Ok(s) = c.create(params).await {
                        let p = HooksFireParams {
                            session: s.id,
                            event: "SessionStart".into(),
                            input: Default::default(),
                        };
                        match tokio::time::timeout(CALL_BOUND, c.hooks_fire(p)).await {
                            Err(_) => rec.violation("hooks/fire unanswered".into()),
                            Ok(_) => rec.action("hooks fired"),
                        }
                    }
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = tokio::time::timeout(CALL_BOUND * 2, t).await;
    }
    drop(held);
    let pid = daemon.lock().await.pid();
    rec.rss_hwm_kib.fetch_max(rss_hwm_kib(pid), Ordering::Relaxed);
    let logs: String = std::fs::read_dir(home.root())?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    {
        let mut d = daemon.lock().await;
        d.signal(Signal::SIGTERM)?;
        d.wait_exit(Duration::from_secs(20)).await?;
    }
    geminid_tests::eventually(Duration::from_millis(500), || async { home.processes().is_empty() })
        .await;
    let left = home.processes();
    if !left.is_empty() {
        rec.violation(format!("processes left behind: {left:?}"));
    }
    if logs.contains(CANARY) {
        rec.violation("the canary secret is in a daemon log".into());
    }
    eprintln!(
        "soak: {secs} s, {} calls ({} answered), RSS high-water mark {} KiB",
        rec.calls.load(Ordering::Relaxed),
        rec.answered.load(Ordering::Relaxed),
        rec.rss_hwm_kib.load(Ordering::Relaxed)
    );
    eprintln!(
        "soak: actions {:?}",
        rec.actions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    );
    eprintln!(
        "soak: errors {:?}",
        rec.errors.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    );
    let violations =
        rec.violations.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    assert!(rec.answered.load(Ordering::Relaxed) > 0, "no call was answered");
    assert!(
        violations.is_empty(),
        "{} invariant violations:\n- {}",
        violations.len(),
        violations.join("\n- ")
    );
    Ok(())
}
