//! The in-process harness: a real core ([`Daemon`]) over a temporary home and store, with the daemon's
//! RPC methods driven without a socket. For matrices (policy rules, hook outcomes, asks) that
//! must run in milliseconds; the MCP servers behind it are real (the fixture, over stdio).

use std::time::Duration;

use anyhow::Context;
use geminid::testing::{ConfigPaths, ConnId, CustomTools, Daemon, DaemonInfo, McpOptions, Store};
use geminid_protocol::daemon::Limits;
use geminid_protocol::session::SessionCreateParams;
use jsonrpsee::Methods;
use jsonrpsee::types::ErrorObjectOwned;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use geminid::testing::calls::Seats;

use crate::TestHome;
use crate::mcp::{shell_env, write_user_settings};

/// How long a confirmation waits in [`InProcess::new`].
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(300);

/// The connection every in-process request arrives on (jsonrpsee's direct calls use 0).
pub const CONN: ConnId = ConnId(0);

/// A core in a temporary home whose user settings hold `mcpServers`, and a trusted session of
/// the home's workspace, attached on [`CONN`].
#[derive(Debug)]
pub struct InProcess {
    /// The core.
    pub core: Daemon,
    /// The session.
    pub session: String,
    methods: Methods,
    /// Dropped last: it checks nothing is left running.
    pub home: TestHome,
}

/// A failed request: its code and message.
pub type CallFailure = (i32, String);

impl InProcess {
    /// Build one with these seats (and no others).
    pub async fn new(servers: Value, seats: Seats) -> anyhow::Result<Self> {
        Self::build(servers, Some(seats), CONFIRM_TIMEOUT).await
    }

    /// Build one as the daemon is built: its own policy and audit log in the seats, and
    /// confirmations waiting `confirm_timeout`.
    pub async fn daemon(servers: Value, confirm_timeout: Duration) -> anyhow::Result<Self> {
        Self::build(servers, None, confirm_timeout).await
    }

    async fn build(
        servers: Value,
        seats: Option<Seats>,
        confirm_timeout: Duration,
    ) -> anyhow::Result<Self> {
        let home = TestHome::new()?;
        write_user_settings(&home, servers)?;
        let root = home.root().to_owned();
        let paths = ConfigPaths::from_env(|k| match k {
            "HOME" => Some(root.join("home").into()),
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH" => Some(root.join("etc/settings.json").into()),
            _ => None,
        })?;
        let data_dir = home.data_dir();
        std::fs::create_dir_all(&data_dir)?;
        let info = DaemonInfo {
            socket: home.socket(),
            data_dir: data_dir.clone(),
            limits: Limits {
                max_connections: 8,
                max_message_size: 1 << 24,
                subscriber_buffer: 256,
            },
            mcp: McpOptions {
                linger: Duration::from_millis(300),
                stop_grace: Duration::from_millis(500),
                startup_timeout: Duration::from_secs(10),
                ..McpOptions::default()
            },
            confirm_timeout,
            // In the test process itself, whose session bus (on a developer's desktop) is the
            // real one: the daemon-starting harness (`TestHome`) runs the default store.
            secrets_file_only: true,
            custom_tools: CustomTools::default(),
            warm_workspaces: 0,
            tool_pinning: Default::default(),
            artifact_pinning: Default::default(),
        };
        let store = Store::open(&data_dir)?;
        let core = Daemon::new(store, info, paths, seats);
        core.connection_opened(CONN);
        let methods = core.methods().context("registering the methods")?;
        let mut me = Self { core, session: String::new(), methods, home };
        let params = SessionCreateParams {
            workspace: me.home.workspace().display().to_string(),
            env: Some(shell_env(&me.home, &[])),
            reuse_default: false,
            ..SessionCreateParams::default()
        };
        let s: Value =
            me.call("session/create", params).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        me.session = s["id"].as_str().unwrap_or_default().to_owned();
        Ok(me)
    }

    /// Call a method as a client on [`CONN`] would (the params positional, as the daemon's
    /// intake middleware, which a direct call skips, would make them).
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<T, CallFailure> {
        let request = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": [params] });
        let (raw, _) = self
            .methods
            .raw_json_request(&request.to_string(), 16)
            .await
            .map_err(|e| (0, format!("not a request: {e}")))?;
        let answer: Value = serde_json::from_str(raw.get()).map_err(|e| (0, e.to_string()))?;
        if let Some(e) = answer.get("error") {
            let e: ErrorObjectOwned =
                serde_json::from_value(e.clone()).map_err(|e| (0, e.to_string()))?;
            return Err((e.code(), e.message().to_owned()));
        }
        serde_json::from_value(answer["result"].clone()).map_err(|e| (0, e.to_string()))
    }

    /// Subscribe as a client on [`CONN`] would: the notifications' `result`s, in order.
    pub async fn subscribe(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<tokio::sync::mpsc::Receiver<Value>, CallFailure> {
        let request = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": [params] });
        let (raw, mut rx) = self
            .methods
            .raw_json_request(&request.to_string(), 64)
            .await
            .map_err(|e| (0, format!("not a request: {e}")))?;
        let answer: Value = serde_json::from_str(raw.get()).map_err(|e| (0, e.to_string()))?;
        if let Some(e) = answer.get("error") {
            return Err((e["code"].as_i64().unwrap_or(0) as i32, e["message"].to_string()));
        }
        let (tx, out) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            while let Some(n) = rx.recv().await {
                let Ok(v) = serde_json::from_str::<Value>(n.get()) else { continue };
                if tx.send(v["params"]["result"].clone()).await.is_err() {
                    return;
                }
            }
        });
        Ok(out)
    }

    /// Stop every server (and wait for their processes to be gone).
    pub async fn shutdown(&self) {
        self.core.shutdown().await;
    }
}
