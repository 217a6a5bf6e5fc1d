//! Helpers for tests that run MCP servers through the daemon.

use std::collections::BTreeMap;

use geminid_protocol::api::{McpApiClient, SessionApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::common::ClientEnv;
use geminid_protocol::session::SessionCreateParams;
use serde_json::{Value, json};

use crate::{Daemon, TestHome, bin};

/// Fast supervision so faults play out in milliseconds.
pub const FAST: &[&str] = &[
    "--mcp-backoff",
    "50ms",
    "--mcp-backoff-max",
    "200ms",
    "--mcp-restart-budget",
    "3",
    "--mcp-linger",
    "300ms",
    "--mcp-stop-grace",
    "500ms",
    "--mcp-startup-timeout",
    "10s",
];

/// The fixture MCP server's path.
pub fn fixture() -> String {
    bin("mcp-fixture").display().to_string()
}

/// A stdio entry running the fixture with `args`.
pub fn stdio(args: &[&str]) -> Value {
    json!({ "command": fixture(), "args": args })
}

/// A stdio entry for a fixture that adds tools as it runs (`grow`), trusted to (`trust: true`):
/// a tool it adds is offered (and said) rather than held for review, as tool-definition pins
/// would hold a new tool of any other server. For tests about list changes themselves.
pub fn growing(args: &[&str]) -> Value {
    json!({ "command": fixture(), "args": args, "trust": true })
}

/// A session environment as a user's shell would send it, trusted, marked with the home so the
/// harness finds every process that inherits it.
pub fn shell_env(home: &TestHome, extra: &[(&str, &str)]) -> ClientEnv {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    env.insert("PATH".into(), std::env::var("PATH").unwrap_or_default());
    env.insert("HOME".into(), home.root().join("home").display().to_string());
    env.insert("GEMINID_TEST_HOME".into(), home.root().display().to_string());
    env.insert("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into());
    for (k, v) in extra {
        env.insert((*k).into(), (*v).into());
    }
    env.into_iter().collect()
}

/// Replace the user settings' `mcpServers` (write to a temporary file and rename, as editors
/// do: the watcher sees one change).
pub fn write_user_settings(home: &TestHome, servers: Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(&json!({ "mcpServers": servers }))?;
    let path = home.root().join("home/.gemini/settings.json");
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, path)?;
    Ok(())
}

/// A daemon (with [`FAST`] supervision) in a temporary home whose user settings hold
/// `mcpServers`, a client, and a trusted session of the home's workspace.
#[derive(Debug)]
pub struct Setup {
    /// The home (dropped last: it checks nothing is left running).
    pub home: TestHome,
    /// The daemon.
    pub daemon: Daemon,
    /// A client attached to `session`.
    pub client: Client,
    /// The session.
    pub session: String,
}

impl Setup {
    /// Start it.
    pub async fn new(servers: Value) -> anyhow::Result<Self> {
        Self::with_args(servers, &[]).await
    }

    /// Start it with `extra` daemon flags after [`FAST`].
    pub async fn with_args(servers: Value, extra: &[&str]) -> anyhow::Result<Self> {
        let home = TestHome::allowing_mcp()?;
        write_user_settings(&home, servers)?;
        let args = [FAST, extra].concat();
        let daemon = Daemon::start(&home, &args).await?;
        let client = daemon.client().await?;
        let session = new_session(&client, &home).await?;
        Ok(Self { home, daemon, client, session })
    }
}

/// How many processes geminid has started for `server` (its log says each start).
pub fn starts(home: &TestHome, server: &str) -> anyhow::Result<usize> {
    let (code, out, err) = home.gemctl_run(&["mcp", "logs", server])?;
    anyhow::ensure!(code == 0, "mcp logs {server}: {out}{err}");
    Ok(out.lines().filter(|l| l.contains("[geminid] started ")).count())
}

/// Wait (up to `within`) until the log of `server` (of `session`, or of any session) has a
/// line containing `needle`: the fixture says `sleeping N ms` once a call sleeps on it, so a
/// test knows the call reached the server. Whether it came.
pub async fn logged(
    client: &Client,
    session: Option<&str>,
    server: &str,
    needle: &str,
    within: std::time::Duration,
) -> bool {
    use geminid_protocol::mcp::{LogsParams, ServerParams};
    crate::eventually(within, || async {
        let server = ServerParams { session: session.map(str::to_owned), name: server.into() };
        client
            .mcp_logs(LogsParams { server, lines: None })
            .await
            .is_ok_and(|l| l.lines.iter().any(|l| l.text.contains(needle)))
    })
    .await
}

/// A new session of `home`'s workspace with a user's shell environment ([`shell_env`]),
/// attached to `client`: its id.
pub async fn new_session(client: &Client, home: &TestHome) -> anyhow::Result<String> {
    let s = client
        .create(SessionCreateParams {
            workspace: home.workspace().display().to_string(),
            env: Some(shell_env(home, &[])),
            reuse_default: false,
            ..Default::default()
        })
        .await?;
    Ok(s.id)
}

/// The fixture over a network transport on loopback (`--http` or `--sse`, after `flags`),
/// killed when dropped.
#[derive(Debug)]
pub struct NetFixture {
    child: std::process::Child,
    /// What it printed after `LISTENING`.
    pub url: String,
}

impl NetFixture {
    /// Start it with `mode` (`--http` or `--sse`) and these extra flags.
    pub fn start(mode: &str, flags: &[&str]) -> anyhow::Result<Self> {
        use std::io::BufRead;
        let mut child = crate::sealed(&mut std::process::Command::new(fixture()))
            .args(flags)
            .args([mode, "127.0.0.1:0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(std::time::Duration::from_secs(10))?;
        let url = line
            .trim()
            .strip_prefix("LISTENING ")
            .ok_or_else(|| anyhow::anyhow!("fixture printed {line:?}"))?
            .to_owned();
        Ok(Self { child, url })
    }
}

impl Drop for NetFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
