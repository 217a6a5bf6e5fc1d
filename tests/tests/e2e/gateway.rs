//! The MCP gateway end to end: real `geminid`, real `gemctl mcp serve` processes, an MCP client
//! (rmcp's) speaking to them over their stdin and stdout, and the fixture server upstream.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use geminid_tests::mcp::stdio;
use geminid_tests::{Daemon, TestHome};
use rmcp::model::{
    CallToolRequestParams, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ProgressNotificationParam, ReadResourceRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// What the client heard besides answers.
#[derive(Debug, Clone, Default)]
pub(super) struct Heard {
    tools_changed: Arc<Mutex<u32>>,
    progress: Arc<Mutex<Vec<f64>>>,
    /// Declares elicitation, and answers every one so.
    pub(super) answer: Option<ElicitationAction>,
    updated: Arc<Mutex<Vec<String>>>,
    pub(super) asked: Arc<Mutex<Vec<String>>>,
    /// The servers' log messages passed on: (level, data).
    logs: Arc<Mutex<Vec<(String, String)>>>,
    /// Declares sampling, and answers every request with this model's "hello".
    samples: Option<&'static str>,
    /// Never answers an elicitation (a person who walked away).
    pub(super) hang: bool,
    /// Answers every elicitation with a JSON-RPC error.
    fail: bool,
}

impl Heard {
    /// A client that declares elicitation and accepts every one.
    pub(super) fn accepting() -> Self {
        Self { answer: Some(ElicitationAction::Accept), ..Self::default() }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ClientHandler for Heard {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        *lock(&self.tools_changed) += 1;
    }

    async fn on_progress(&self, p: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        lock(&self.progress).push(p.progress);
    }

    #[allow(
        deprecated,
        reason = "logging is SEP-2577-deprecated; this client is of the earlier eras"
    )]
    async fn on_logging_message(
        &self,
        p: rmcp::model::LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(p.level).unwrap_or_default();
        let data = p.data.as_str().unwrap_or_default().to_owned();
        lock(&self.logs).push((level.as_str().unwrap_or_default().to_owned(), data));
    }

    async fn on_resource_updated(
        &self,
        p: rmcp::model::ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        lock(&self.updated).push(p.uri);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let v = serde_json::to_value(&request).unwrap_or_default();
        lock(&self.asked).push(v["message"].as_str().unwrap_or_default().to_owned());
        if self.hang {
            futures::future::pending::<()>().await;
        }
        if self.fail {
            return Err(rmcp::ErrorData::internal_error("this client cannot ask", None));
        }
        let action = self.answer.clone().unwrap_or(ElicitationAction::Decline);
        serde_json::from_value(json!({ "action": action }))
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }

    #[allow(
        deprecated,
        reason = "sampling is SEP-2577-deprecated; this client is of the earlier eras"
    )]
    async fn create_message(
        &self,
        request: rmcp::model::CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let v = serde_json::to_value(&request).unwrap_or_default();
        lock(&self.asked)
            .push(v["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_owned());
        let reply = json!({ "role": "assistant", "content": { "type": "text", "text": "hello" }, "model": self.samples });
        serde_json::from_value(reply)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }

    #[allow(
        deprecated,
        reason = "sampling is SEP-2577-deprecated; this client is of the earlier eras"
    )]
    fn get_info(&self) -> ClientConfig {
        let mut c = ClientConfig::default();
        if self.answer.is_some() {
            c.capabilities.elicitation = Some(Default::default());
        }
        if self.samples.is_some() {
            c.capabilities.sampling = Some(Default::default());
        }
        c
    }
}

/// A client transport that writes down, in the order they come off the wire, the progress
/// notifications (`P`) and responses (`R`) it receives: what its client does with them later
/// (rmcp handles each notification on a task of its own) cannot reorder this.
struct Recorded<T> {
    inner: T,
    wire: Arc<Mutex<String>>,
}

impl<T: rmcp::transport::Transport<RoleClient>> rmcp::transport::Transport<RoleClient>
    for Recorded<T>
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        use rmcp::model::{JsonRpcMessage, ServerNotification};
        let m = self.inner.receive().await;
        match &m {
            Some(JsonRpcMessage::Notification(n))
                if matches!(n.notification, ServerNotification::ProgressNotification(_)) =>
            {
                lock(&self.wire).push('P');
            }
            Some(JsonRpcMessage::Response(_)) => lock(&self.wire).push('R'),
            _ => {}
        }
        m
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Call `name` (the fixture's `progress`) `rounds` times: each time, all its progress must come
/// off the wire before its result.
async fn progress_before_results(
    client: &RunningService<RoleClient, Heard>,
    wire: &Arc<Mutex<String>>,
    name: &str,
    rounds: usize,
) -> anyhow::Result<()> {
    for round in 0..rounds {
        lock(wire).clear();
        let mut p = CallToolRequestParams::new(name.to_owned());
        p.arguments = json!({"steps": 4, "gap_ms": 0}).as_object().cloned();
        client.call_tool(p).await?;
        assert_eq!(*lock(wire), "PPPPR", "round {round}: the wire's order");
    }
    Ok(())
}

pub(super) struct Served {
    pub(super) client: RunningService<RoleClient, Heard>,
    pub(super) heard: Heard,
    child: Child,
}

/// `gemctl mcp serve` in `dir` (default: the home's workspace), with extra arguments.
async fn serve(
    home: &TestHome,
    dir: Option<&std::path::Path>,
    extra: &[&str],
) -> anyhow::Result<Served> {
    serve_as(home, dir, extra, Heard::default()).await
}

/// `cmd` (a `gemctl mcp serve`) started with its stdin and stdout piped: the process (killed
/// when dropped) and its pipes, as an MCP client transport takes them.
fn piped(
    mut cmd: Command,
) -> anyhow::Result<(Child, (tokio::process::ChildStdout, tokio::process::ChildStdin))> {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).kill_on_drop(true).spawn()?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        anyhow::bail!("no pipes");
    };
    Ok((child, (stdout, stdin)))
}

/// The same, with a client that answers elicitations so (or declares none).
pub(super) async fn serve_as(
    home: &TestHome,
    dir: Option<&std::path::Path>,
    extra: &[&str],
    heard: Heard,
) -> anyhow::Result<Served> {
    let mut args = vec!["mcp", "serve"];
    args.extend_from_slice(extra);
    let mut cmd: Command = home.gemctl_cmd(&args).into();
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cmd.stderr(Stdio::inherit());
    let (child, pipes) = piped(cmd)?;
    let client = heard.clone().serve(pipes).await?;
    Ok(Served { client, heard, child })
}

async fn text_of(s: &Served, name: &str, args: Value) -> anyhow::Result<(bool, String)> {
    let mut p = CallToolRequestParams::new(name.to_owned());
    p.arguments = args.as_object().cloned();
    let r = s.client.call_tool(p).await?;
    let v = serde_json::to_value(&r)?;
    let text = v["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default();
    Ok((r.is_error == Some(true), text))
}

/// `gemctl mcp serve --http` on a free port: the process (killed when dropped), and the URL,
/// token and address it printed.
pub(super) async fn http_gateway(
    home: &TestHome,
) -> anyhow::Result<(Child, String, String, String)> {
    use tokio::io::AsyncBufReadExt as _;
    let mut cmd: Command =
        home.gemctl_cmd(&["--json", "mcp", "serve", "--http", "127.0.0.1:0"]).into();
    let mut child = cmd.stdout(Stdio::piped()).kill_on_drop(true).spawn()?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        tokio::io::BufReader::new(out).read_line(&mut line).await?;
    }
    let said: Value = serde_json::from_str(&line)?;
    let url = said["url"].as_str().unwrap_or_default().to_owned();
    let token = said["token"].as_str().unwrap_or_default().to_owned();
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    Ok((child, url, token, addr))
}

pub(super) fn settings(home: &TestHome, servers: Value) -> anyhow::Result<()> {
    std::fs::write(
        home.root().join("home/.gemini/settings.json"),
        serde_json::to_string(&json!({ "mcpServers": servers }))?,
    )?;
    Ok(())
}

/// A workspace an MCP client reaches first (its `gemctl mcp serve` started with the client's
/// trimmed environment, as Gemini CLI and editors start it) runs its servers with the user's
/// shell environment, completed by what only the client sets (issue 63, C5: they ran without
/// the shell's tokens, and `$VAR` in an entry expanded to nothing).
#[tokio::test]
async fn an_mcp_clients_trimmed_environment_does_not_drop_the_shells_tokens() -> anyhow::Result<()>
{
    let home = TestHome::allowing_mcp()?;
    let mut fx = stdio(&[]);
    fx["env"] = json!({"ENTRY_TOKEN": "$NOTES_TOKEN", "WHERE": "$PWD"});
    settings(&home, json!({ "fx": fx }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    // The user's shell, in another folder.
    let out = home
        .gemctl_cmd(&["session", "show"])
        .env("NOTES_TOKEN", "from-shell")
        .env("SHELL_ONLY", "from-shell")
        .env("PWD", "/the/shells/project")
        .output()?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // An MCP client in a new folder (trusted through its parent), without the token.
    let fresh = home.workspace().join("fresh");
    std::fs::create_dir_all(&fresh)?;
    let mut cmd: Command = home.gemctl_cmd(&["mcp", "serve"]).into();
    cmd.current_dir(&fresh).env_remove("NOTES_TOKEN").env("CLIENT_ONLY", "from-client");
    cmd.env("PWD", &fresh);
    cmd.stderr(Stdio::inherit());
    let (child, pipes) = piped(cmd)?;
    let heard = Heard::default();
    let s = Served { client: heard.clone().serve(pipes).await?, heard, child };
    let env_of = async |name: &str| text_of(&s, "fx__env", json!({ "name": name })).await;
    assert_eq!(env_of("ENTRY_TOKEN").await?, (false, "from-shell".to_owned()));
    // Inherited (a token-named one is not, as in Gemini CLI: only an entry's `env` passes it).
    assert_eq!(env_of("SHELL_ONLY").await?, (false, "from-shell".to_owned()));
    assert_eq!(env_of("CLIENT_ONLY").await?, (false, "from-client".to_owned()));
    // Where the client is stays the client's (attacked: `$PWD` named the shell's project).
    assert_eq!(env_of("WHERE").await?, (false, fresh.display().to_string()));
    let shown =
        home.gemctl_cmd(&["--json", "session", "list", "--workspace"]).arg(&fresh).output()?;
    let listed: Value = serde_json::from_slice(&shown.stdout)?;
    assert_eq!(listed[0]["envFromMcpClient"], true, "{listed}");
    Ok(())
}

#[tokio::test]
async fn a_client_lists_and_calls_the_sessions_catalog_through_the_pipeline() -> anyhow::Result<()>
{
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&["--rich"]) }))?;
    // A policy that denies one tool outright (not served), and one call by its arguments (a
    // tool error the model reads).
    std::fs::write(
        home.root().join("home/.gemini/policies/deny.toml"),
        "[[rule]]\nmcpName = \"fx\"\ntoolName = \"fail\"\ndecision = \"deny\"\npriority = 500\n\n[[rule]]\nmcpName = \"fx\"\ntoolName = \"echo\"\nargsPattern = \"forbidden\"\ndecision = \"deny\"\ndenyMessage = \"not that\"\npriority = 500\n",
    )?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve(&home, None, &[]).await?;
    let info = serde_json::to_value(s.client.peer_info().as_deref())?;
    assert_eq!(info["serverInfo"]["name"], "geminid", "{info}");

    let tools = s.client.list_all_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"fx__echo") && names.contains(&"fx__progress"), "{names:?}");
    assert!(!names.contains(&"fx__fail"), "a tool policy denies is not served: {names:?}");
    // The upstream tool as its server lists it, renamed only.
    let typed =
        tools.iter().find(|t| t.name == "fx__typed").map(|t| serde_json::to_value(t).unwrap());
    assert!(typed.is_some_and(|t| t["inputSchema"]["properties"].is_object()));

    assert_eq!(
        text_of(&s, "fx__echo", json!({"text": "through"})).await?,
        (false, "through".into())
    );
    // Arguments are checked against the schema, as for every call.
    let bad = s
        .client
        .call_tool({
            let mut p = CallToolRequestParams::new("fx__typed");
            p.arguments = json!({"n": "not a number"}).as_object().cloned();
            p
        })
        .await;
    assert!(bad.is_err(), "{bad:?}");
    let unknown = s.client.call_tool(CallToolRequestParams::new("nope")).await;
    assert!(format!("{unknown:?}").contains("no tool named 'nope'"), "{unknown:?}");
    // A call policy refuses on its arguments is a tool error the model can read.
    let (is_error, text) = text_of(&s, "fx__echo", json!({"text": "forbidden"})).await?;
    assert!(is_error && text.contains("not that"), "{text}");

    // The call went through the audit log as the gateway's.
    let audit = home.gemctl_json(&["audit", "-n", "5"])?;
    assert!(audit.to_string().contains("\"origin\":\"gateway\""), "{audit}");

    // Prompts and resources.
    let prompts = s.client.list_all_prompts().await?;
    assert!(prompts.iter().any(|p| p.name == "fx__greet"), "{prompts:?}");
    let got = s
        .client
        .get_prompt({
            let mut p = rmcp::model::GetPromptRequestParams::new("fx__plain");
            p.arguments = json!({"x": "1"}).as_object().cloned();
            p
        })
        .await?;
    assert!(serde_json::to_string(&got)?.contains("plain"), "{got:?}");
    let resources = s.client.list_all_resources().await?;
    assert!(resources.iter().any(|r| r.uri == "file:///notes.txt"));
    let read = s.client.read_resource(ReadResourceRequestParams::new("file:///notes.txt")).await?;
    assert!(serde_json::to_string(&read)?.contains("remember the milk"));
    let templates = s.client.list_all_resource_templates().await?;
    assert_eq!(templates.len(), 1);

    // The gateway's connection holds the session attached; when the client goes, it is not.
    // (`session list` does not attach, as `session show` would for the current directory.)
    let attached = || -> anyhow::Result<u64> {
        let v = home.gemctl_json(&["session", "list"])?;
        Ok(v[0]["attachedConnections"].as_u64().unwrap_or(99))
    };
    assert!(attached()? >= 1);
    let Served { client, mut child, .. } = s;
    client.cancel().await?;
    tokio::time::timeout(Duration::from_secs(10), child.wait()).await??;
    assert!(
        geminid_tests::eventually(Duration::from_secs(5), || async { attached().ok() == Some(0) })
            .await
    );
    Ok(())
}

#[tokio::test]
async fn list_changed_progress_and_cancellation_pass_through() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&["--rich"]) }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve(&home, None, &["--names", "fqn"]).await?;
    let before = s.client.list_all_tools().await?;
    assert!(before.iter().any(|t| t.name == "mcp_fx_echo"), "Gemini's names: {before:?}");

    // A settings edit adds a server: the client is told, and sees its tools.
    settings(&home, json!({ "fx": stdio(&["--rich"]), "fy": stdio(&[]) }))?;
    let told = || async { *lock(&s.heard.tools_changed) > 0 };
    assert!(
        geminid_tests::eventually(Duration::from_secs(15), told).await,
        "no tools/list_changed"
    );
    let after = s.client.list_all_tools().await?;
    assert!(after.iter().any(|t| t.name == "mcp_fy_echo"), "{after:?}");

    // Progress reaches the client under its own token, all of it before the result (the
    // server sends its last one right before its result).
    let (_child, (stdout, stdin)) =
        piped(home.gemctl_cmd(&["mcp", "serve", "--names", "fqn"]).into())?;
    let wire = Arc::new(Mutex::new(String::new()));
    let inner = rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin);
    let recorded = Recorded { inner, wire: wire.clone() };
    let watched = Heard::default().serve(recorded).await?;
    progress_before_results(&watched, &wire, "mcp_fx_progress", 10).await?;

    // A call the client cancels is cancelled upstream too.
    let mut p = CallToolRequestParams::new("mcp_fx_wait");
    p.arguments = json!({"ms": 60000}).as_object().cloned();
    let handle = s
        .client
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::Request::new(p)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await?;
    let watcher = daemon.client().await?;
    let running = geminid_tests::mcp::logged(
        &watcher,
        None,
        "fx",
        "waiting 60000 ms",
        Duration::from_secs(10),
    );
    assert!(running.await, "the call never reached the server");
    handle.cancel(Some("the user pressed Esc".into())).await?;
    let cancelled = || async {
        text_of(&s, "mcp_fx_cancelled", json!({})).await.is_ok_and(|(_, t)| t.trim() != "0")
    };
    assert!(
        geminid_tests::eventually(Duration::from_secs(10), cancelled).await,
        "upstream never saw the cancel"
    );
    Ok(())
}

#[tokio::test]
async fn four_clients_in_two_workspaces_share_one_upstream_process() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&[]) }))?;
    let ws2 = home.root().join("ws2");
    std::fs::create_dir(&ws2)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    assert!(home.gemctl(&["trust", ws2.to_str().unwrap_or_default()])?.status.success());
    let mut clients = Vec::new();
    for dir in [None, None, Some(ws2.as_path()), Some(ws2.as_path())] {
        clients.push(serve(&home, dir, &[]).await?);
    }
    let mut pids = std::collections::BTreeSet::new();
    for c in &clients {
        let (is_error, pid) = text_of(c, "fx__pid", json!({})).await?;
        assert!(!is_error, "{pid}");
        pids.insert(pid);
    }
    assert_eq!(pids.len(), 1, "one upstream process for all four: {pids:?}");
    let sessions = home.gemctl_json(&["session", "list"])?;
    let attached: Vec<u64> = sessions
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["attachedConnections"].as_u64().unwrap_or_default())
        .collect();
    assert_eq!(attached, vec![2, 2], "two sessions, each with its two clients: {sessions}");
    Ok(())
}

/// Whether `fd`'s open file is in non-blocking mode.
fn nonblocking(fd: &std::os::fd::OwnedFd) -> anyhow::Result<bool> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    Ok(OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?).contains(OFlag::O_NONBLOCK))
}

#[tokio::test]
async fn the_relay_reads_pipes_and_socket_pairs_on_its_reactor_and_puts_their_flags_back()
-> anyhow::Result<()> {
    use std::os::fd::OwnedFd;
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&[]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let serve = || -> anyhow::Result<Command> {
        let mut cmd: Command = home.gemctl_cmd(&["mcp", "serve"]).into();
        cmd.stderr(Stdio::inherit()).kill_on_drop(true);
        Ok(cmd)
    };
    let call = |client: RunningService<RoleClient, ()>| async move {
        let mut p = CallToolRequestParams::new("fx__echo");
        p.arguments = json!({ "text": "relayed" }).as_object().cloned();
        let r = serde_json::to_value(client.call_tool(p).await?)?;
        assert_eq!(r["content"][0]["text"], "relayed", "{r}");
        // The client closes its end: the relay ends.
        client.cancel().await?;
        anyhow::Ok(())
    };

    // Node's child_process (Gemini CLI, Claude Code) gives a child one end of a socket pair.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let kept = OwnedFd::from(theirs.try_clone()?);
    assert!(!nonblocking(&kept)?);
    let mut child = serve()?
        .stdin(Stdio::from(OwnedFd::from(theirs.try_clone()?)))
        .stdout(Stdio::from(OwnedFd::from(theirs)))
        .spawn()?;
    ours.set_nonblocking(true)?;
    let client = ().serve(tokio::net::UnixStream::from_std(ours)?).await?;
    assert!(nonblocking(&kept)?, "the socket is read on the relay's reactor");
    call(client).await?;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await??;
    assert!(status.success(), "{status}");
    assert!(!nonblocking(&kept)?, "the socket's flags are as they were found");

    // Python's subprocess gives pipes.
    let (in_r, in_w) = std::io::pipe()?;
    let (out_r, out_w) = std::io::pipe()?;
    let (kept_in, kept_out) = (OwnedFd::from(in_r.try_clone()?), OwnedFd::from(out_w.try_clone()?));
    let mut child = serve()?.stdin(Stdio::from(in_r)).stdout(Stdio::from(out_w)).spawn()?;
    let to = tokio::net::unix::pipe::Sender::from_owned_fd(OwnedFd::from(in_w))?;
    let from = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(out_r))?;
    let client = ().serve((from, to)).await?;
    assert!(nonblocking(&kept_in)? && nonblocking(&kept_out)?, "both pipes on the reactor");
    call(client).await?;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await??;
    assert!(status.success(), "{status}");
    assert!(!nonblocking(&kept_in)? && !nonblocking(&kept_out)?, "flags as they were found");
    Ok(())
}

#[tokio::test]
async fn a_gateway_for_what_does_not_exist_says_so() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let daemon = Daemon::start(&home, &[]).await?;
    let (code, _, err) = home.gemctl_run(&["mcp", "serve", "--session", "0000-nope"])?;
    assert_ne!(code, 0);
    assert!(err.contains("session"), "{err}");
    let (code, _, err) = home.gemctl_run(&["mcp", "serve", "--names", "short"])?;
    assert_ne!(code, 0);
    assert!(err.contains("server") && err.contains("fqn"), "{err}");
    use geminid_protocol::gateway::{Names, OpenError, open};
    match open(daemon.socket(), "not-a-session", Names::Server).await {
        Err(OpenError::Refused { status: 404, body }) => {
            assert!(body.contains("not-a-session"), "{body}")
        }
        other => anyhow::bail!("{other:?}"),
    }
    // JSON-RPC on the same socket is untouched by the gateway's door.
    assert!(home.gemctl(&["status"])?.status.success());
    Ok(())
}

#[tokio::test]
async fn a_confirmation_is_asked_of_a_client_that_elicits() -> anyhow::Result<()> {
    // No policy of the user's: an MCP tool needs a confirmation.
    let home = TestHome::new()?;
    settings(&home, json!({ "fx": stdio(&[]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());

    // A client that cannot elicit: the session is headless, and the tool is not served.
    let plain = serve(&home, None, &[]).await?;
    let names: Vec<String> =
        plain.client.list_all_tools().await?.into_iter().map(|t| t.name.to_string()).collect();
    assert!(!names.contains(&"fx__echo".to_owned()), "{names:?}");
    plain.client.cancel().await?;

    let yes = Heard { answer: Some(ElicitationAction::Accept), ..Heard::default() };
    let s = serve_as(&home, None, &[], yes.clone()).await?;
    let listed = || async {
        s.client.list_all_tools().await.is_ok_and(|t| t.iter().any(|t| t.name == "fx__echo"))
    };
    assert!(
        geminid_tests::eventually(Duration::from_secs(5), listed).await,
        "served once it elicits"
    );
    assert_eq!(text_of(&s, "fx__echo", json!({"text": "asked"})).await?, (false, "asked".into()));
    let asked = lock(&yes.asked).clone();
    assert!(asked.len() == 1 && asked[0].contains("echo"), "{asked:?}");
    let audit = home.gemctl_json(&["audit", "-n", "1"])?;
    assert!(audit.to_string().contains("once"), "{audit}");
    s.client.cancel().await?;

    let no = Heard { answer: Some(ElicitationAction::Decline), ..Heard::default() };
    let s = serve_as(&home, None, &[], no).await?;
    assert!(
        geminid_tests::eventually(Duration::from_secs(5), || async {
            s.client.list_all_tools().await.is_ok_and(|t| t.iter().any(|t| t.name == "fx__echo"))
        })
        .await
    );
    let (is_error, text) = text_of(&s, "fx__echo", json!({"text": "no"})).await?;
    assert!(is_error && text.contains("declined"), "{text}");
    Ok(())
}

#[tokio::test]
async fn a_servers_elicitation_and_sampling_reach_the_gateway_client_that_called()
-> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&["--asks"]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let heard = Heard {
        answer: Some(ElicitationAction::Accept),
        samples: Some("gateway-model"),
        ..Heard::default()
    };
    let s = serve_as(&home, None, &[], heard.clone()).await?;
    let (is_error, text) = text_of(&s, "fx__ask", json!({ "message": "From the gateway" })).await?;
    assert!(!is_error, "{text}");
    // The client accepted without content: the schema's defaults are what the server gets.
    let got: Value = serde_json::from_str(&text)?;
    assert_eq!(
        got,
        json!({ "action": "accept", "content": { "age": 36, "colour": "green", "subscribe": false } })
    );
    let (is_error, text) = text_of(&s, "fx__sample", json!({ "prompt": "Hi there" })).await?;
    assert!(!is_error, "{text}");
    let got: Value = serde_json::from_str(&text)?;
    assert_eq!(
        (got["model"].as_str(), got["content"]["text"].as_str()),
        (Some("gateway-model"), Some("hello"))
    );
    assert_eq!(lock(&heard.asked).clone(), ["From the gateway", "Hi there"]);
    s.client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn the_gateway_over_streamable_http_needs_its_token() -> anyhow::Result<()> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use tokio::io::AsyncBufReadExt as _;
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&["--rich"]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, _, err) = home.gemctl_run(&["mcp", "serve", "--http", "0.0.0.0:0"])?;
    assert_ne!(code, 0);
    assert!(err.contains("not a loopback address"), "{err}");

    let listen = |home: &TestHome| -> anyhow::Result<Child> {
        let mut cmd: Command =
            home.gemctl_cmd(&["--json", "mcp", "serve", "--http", "127.0.0.1:0"]).into();
        Ok(cmd.stdout(Stdio::piped()).kill_on_drop(true).spawn()?)
    };
    let first_line = |child: &mut Child| {
        let out = child.stdout.take();
        async move {
            let mut line = String::new();
            if let Some(out) = out {
                tokio::io::BufReader::new(out).read_line(&mut line).await?;
            }
            anyhow::Ok(serde_json::from_str::<Value>(&line)?)
        }
    };
    let mut child = listen(&home)?;
    let said = first_line(&mut child).await?;
    let url = said["url"].as_str().unwrap_or_default().to_owned();
    let token = said["token"].as_str().unwrap_or_default().to_owned();
    assert!(url.starts_with("http://127.0.0.1:") && token.len() > 32, "{said}");
    let file = std::path::PathBuf::from(said["tokenFile"].as_str().unwrap_or_default());
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&file)?.permissions().mode() & 0o777, 0o600);

    let config =
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token.clone());
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await?;
    let tools = client.list_all_tools().await?;
    assert!(tools.iter().any(|t| t.name == "fx__echo"), "{tools:?}");
    let mut p = CallToolRequestParams::new("fx__echo");
    p.arguments = json!({"text": "over http"}).as_object().cloned();
    let r = serde_json::to_value(client.call_tool(p).await?)?;
    assert_eq!(r["content"][0]["text"], "over http");
    // Over HTTP too, all of a call's progress comes before its result.
    let wire = Arc::new(Mutex::new(String::new()));
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token.clone());
    let inner = StreamableHttpClientTransport::from_config(config);
    let watched = Heard::default().serve(Recorded { inner, wire: wire.clone() }).await?;
    progress_before_results(&watched, &wire, "fx__progress", 10).await?;
    watched.cancel().await?;

    // Without the token, or with another, nothing is served.
    for auth in [None, Some("wrong")] {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
        if let Some(a) = auth {
            config = config.auth_header(a);
        }
        let refused = ().serve(StreamableHttpClientTransport::from_config(config)).await;
        assert!(refused.is_err(), "{auth:?} was let in");
    }
    client.cancel().await?;

    // The token is shown once; the next listener says where it is. When gemctl goes, the
    // listener goes with it.
    drop(child);
    let mut again = listen(&home)?;
    let said = first_line(&mut again).await?;
    assert_eq!(said.get("token"), None, "{said}");
    assert_eq!(std::fs::read_to_string(&file)?.trim(), token);
    let url2 = said["url"].as_str().unwrap_or_default().to_owned();
    again.kill().await?;
    let _ = again.wait().await;
    let gone = || async {
        let config =
            StreamableHttpClientTransportConfig::with_uri(url2.clone()).auth_header(token.clone());
        ().serve(StreamableHttpClientTransport::from_config(config)).await.is_err()
    };
    assert!(geminid_tests::eventually(Duration::from_secs(5), gone).await, "still listening");
    Ok(())
}

#[tokio::test]
async fn a_client_with_another_environment_does_not_replace_the_sessions() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&[]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    // The user's shell starts the session's servers with its environment.
    let mut shell = home.gemctl_cmd(&["mcp", "start"]);
    assert!(shell.env("GEMINID_TEST_MARK", "from the shell").output()?.status.success());
    // An MCP client runs gemctl mcp serve with an environment of its own (here one variable
    // different, as a client that trims or changes it would).
    let mut cmd: Command = home.gemctl_cmd(&["mcp", "serve"]).into();
    cmd.env("GEMINID_TEST_MARK", "from the client");
    let (child, (stdout, stdin)) = piped(cmd)?;
    let heard = Heard::default();
    let client = heard.clone().serve((stdout, stdin)).await?;
    let s = Served { client, heard, child };
    let (_, pid_before) = text_of(&s, "fx__pid", json!({})).await?;
    let (_, mark) = text_of(&s, "fx__env", json!({"name": "GEMINID_TEST_MARK"})).await?;
    assert_eq!(mark, "from the shell", "the session's servers keep their environment");
    let list = home.gemctl_json(&["mcp", "list"])?;
    assert_eq!(list[0]["pid"].to_string(), pid_before, "and their process: {list}");
    Ok(())
}

/// Gemini CLI's file, comments dropped.
fn gemini_settings(home: &TestHome) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(home.root().join("home/.gemini/settings.json"))?;
    jsonc(&text)
}

/// `mcp import` does not write a build tree's gemctl into Gemini CLI's file when an installed one
/// is on PATH, and says so when it must (audit turn 4, C10: `cargo clean` broke every server).
#[tokio::test]
async fn import_writes_an_installed_gemctl_not_the_build_trees() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let user = home.root().join("home/.gemini/settings.json");
    std::fs::write(&user, format!("{{\"mcpServers\": {{\"fx\": {}}}}}\n", stdio(&[])))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let command_of = || -> anyhow::Result<String> {
        Ok(gemini_settings(&home)?["mcpServers"]["fx"]["command"].as_str().unwrap_or("").into())
    };
    // Only the build tree's gemctl: written, and said with the fix.
    let bare =
        std::env::join_paths([std::path::Path::new("/usr/bin"), std::path::Path::new("/bin")])?;
    let out = home.gemctl_cmd(&["mcp", "import", "--dry-run"]).env("PATH", &bare).output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("inside a cargo build tree") && err.contains("cargo install"), "{err}");
    // An installed gemctl on PATH: that one is written, as PATH names it.
    let bin = home.root().join("installed-bin");
    std::fs::create_dir_all(&bin)?;
    let installed = bin.join("gemctl");
    std::fs::write(&installed, "#!/bin/sh\nexit 0\n")?;
    std::fs::set_permissions(&installed, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let path = std::env::join_paths([
        bin.as_path(),
        std::path::Path::new("/usr/bin"),
        std::path::Path::new("/bin"),
    ])?;
    let out = home.gemctl_cmd(&["mcp", "import"]).env("PATH", &path).output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("build tree"), "{err}");
    assert_eq!(command_of()?, installed.display().to_string());
    // An explicit --command that is no program: refused, nothing written.
    let (code, _, err) = home.gemctl_run(&["mcp", "unimport"])?;
    assert_eq!(code, 0, "{err}");
    let before = std::fs::read_to_string(&user)?;
    let (code, _, err) = home.gemctl_run(&["mcp", "import", "--command", "/nonexistent/gemctl"])?;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--command") && err.contains("not an executable"), "{err}");
    // A program not named gemctl: its entries would not be known as the gateway's, and a
    // second import would move them as the user's servers (attacked: it did).
    let copy = bin.join("gemctl-copy");
    std::fs::copy(&installed, &copy)?;
    let (code, _, err) =
        home.gemctl_run(&["mcp", "import", "--command", &copy.display().to_string()])?;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not named gemctl"), "{err}");
    assert_eq!(std::fs::read_to_string(&user)?, before, "nothing written");
    Ok(())
}

#[tokio::test]
async fn import_moves_gemini_clis_servers_behind_the_gateway() -> anyhow::Result<()> {
    // A Gemini CLI user's world: no policy of their own, servers in their settings, and an
    // earlier import's whole-catalog entry.
    let home = TestHome::new()?;
    let user = home.root().join("home/.gemini/settings.json");
    let mut fx = stdio(&[]);
    fx["timeout"] = json!(30000);
    fx["excludeTools"] = json!(["crash"]);
    let before = format!(
        "{{\n  // the user's own comment\n  \"ui\": {{\"theme\": \"dark\"}},\n  \"mcpServers\": {{\n    \"fx\": {fx},\n    \"fy\": {},\n    \"geminid\": {{\"command\": \"gemctl\", \"args\": [\"mcp\", \"serve\"]}}\n  }}\n}}\n",
        stdio(&["--rich"])
    );
    std::fs::write(&user, &before)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());

    let (code, out, err) = home.gemctl_run(&["mcp", "import", "--dry-run"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Would move") && out.contains("fx, fy"), "{out}");
    assert_eq!(std::fs::read_to_string(&user)?, before, "a dry run changes nothing");

    let (code, out, err) = home.gemctl_run(&["mcp", "import"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Moved") && out.contains("--confirm client"), "{out}");
    let now = std::fs::read_to_string(&user)?;
    assert!(now.contains("// the user's own comment") && now.contains("\"theme\""), "{now}");
    assert!(!now.contains("mcp-fixture"), "Gemini CLI no longer starts them: {now}");
    // Each server is an entry of its own name: the gateway of that server alone, confirmed by
    // Gemini CLI, with what Gemini CLI read of the entry kept on it.
    let parsed = gemini_settings(&home)?;
    let entry = &parsed["mcpServers"]["fx"];
    let gateway = ["mcp", "serve", "--server", "fx", "--confirm", "client", "--hooks", "client"];
    assert_eq!(entry["args"], json!(gateway));
    assert!(entry["command"].as_str().is_some_and(|c| c.ends_with("gemctl")), "{entry}");
    assert_eq!((&entry["timeout"], &entry["excludeTools"]), (&json!(30000), &json!(["crash"])));
    assert!(parsed["mcpServers"]["fy"].is_object(), "{parsed}");
    assert!(parsed["mcpServers"].get("geminid").is_none(), "the whole-catalog entry goes: {now}");
    let own = std::fs::read_to_string(home.root().join("home/.gemini/geminid/servers.json"))?;
    assert!(own.contains("\"fx\"") && own.contains("\"fy\""), "{own}");

    // geminid runs its own entries, not the gateway entries named as them.
    let listed = home.gemctl_json(&["mcp", "list"])?;
    let by_name =
        |n: &str| listed.as_array().and_then(|a| a.iter().find(|s| s["name"] == n)).cloned();
    let fx_listed = by_name("fx").unwrap_or_default();
    assert_eq!(fx_listed["scope"], "geminid", "{listed}");
    assert_ne!(fx_listed["state"], "blocked", "{listed}");

    // What Gemini CLI gets, started as the entry says, declaring no elicitation: fx's own
    // tool names (Gemini CLI makes them mcp_fx_*, as before), none hidden for want of a
    // confirmation, and a call confirmed by the client.
    let s = serve(&home, None, &["--server", "fx", "--confirm", "client"]).await?;
    let names: Vec<String> =
        s.client.list_all_tools().await?.into_iter().map(|t| t.name.to_string()).collect();
    assert!(names.contains(&"echo".to_owned()) && names.contains(&"pid".to_owned()), "{names:?}");
    assert!(!names.contains(&"crash".to_owned()), "excludeTools still holds: {names:?}");
    assert!(!names.iter().any(|n| n.contains("__")), "{names:?}");
    let (is_error, text) = text_of(&s, "echo", json!({"text": "as before"})).await?;
    assert!(!is_error && text.contains("as before"), "{text}");
    let audit = home.gemctl_json(&["audit", "-n", "1"])?;
    let last = &audit["records"][0];
    assert_eq!((&last["tool"], &last["confirmation"]), (&json!("mcp_fx_echo"), &json!("byClient")));
    // Arguments the schema refuses: the error names the tool as the client called it.
    let bad = format!("{:?}", text_of(&s, "echo", json!({"text": 5})).await);
    assert!(bad.contains("tool 'echo'") && !bad.contains("mcp_fx_echo"), "{bad}");
    // The same session's whole catalog, served as before (geminid confirms): nobody would, so
    // no MCP tool is served.
    let whole = serve(&home, None, &[]).await?;
    let names: Vec<String> =
        whole.client.list_all_tools().await?.into_iter().map(|t| t.name.to_string()).collect();
    assert!(!names.iter().any(|n| n.starts_with("fx__")), "{names:?}");

    // A deny stays a deny when the client confirms.
    let policies = home.root().join("home/.gemini/policies");
    std::fs::create_dir_all(&policies)?;
    std::fs::write(
        policies.join("deny.toml"),
        "[[rule]]\nmcpName = \"fx\"\ntoolName = \"pid\"\ndecision = \"deny\"\npriority = 500\n",
    )?;
    let gone = || async {
        s.client.list_all_tools().await.is_ok_and(|t| !t.iter().any(|t| t.name == "pid"))
    };
    assert!(geminid_tests::eventually(Duration::from_secs(10), gone).await, "pid still served");
    let denied = text_of(&s, "pid", json!({})).await;
    assert!(denied.is_err() || denied.as_ref().is_ok_and(|(e, _)| *e), "{denied:?}");

    // Again: nothing to do.
    let (code, out, _) = home.gemctl_run(&["mcp", "import"])?;
    assert_eq!(code, 0);
    assert!(out.contains("already reaches"), "{out}");

    // A server added to Gemini CLI's file after the import: Gemini CLI starts it itself, and
    // that is said with the fix (issue 63, C10).
    let (code, _, err) =
        home.gemctl_run(&["mcp", "add", "-s", "user", "later", &geminid_tests::mcp::fixture()])?;
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("Gemini CLI starts \"later\" itself") && err.contains("mcp import"),
        "{err}"
    );
    let (code, _, err) = home.gemctl_run(&["mcp", "remove", "-s", "user", "later"])?;
    assert_eq!(code, 0, "{err}");

    // Undone: the servers are Gemini CLI's again, as they were.
    let (code, out, err) = home.gemctl_run(&["mcp", "unimport"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fx, fy"), "{out}");
    let parsed = gemini_settings(&home)?;
    assert_eq!(parsed["mcpServers"]["fx"], fx, "{parsed}");
    let own = std::fs::read_to_string(home.root().join("home/.gemini/geminid/servers.json"))?;
    assert!(!own.contains("\"fx\"") && !own.contains("\"fy\""), "{own}");
    Ok(())
}

#[tokio::test]
async fn import_gives_the_extensions_servers_through_the_gateway_too() -> anyhow::Result<()> {
    // A Gemini CLI user with an extension: a server it starts in its own folder, and a remote
    // one. No settings servers, no policy of theirs.
    let home = TestHome::new()?;
    let src = home.root().join("ex-src");
    std::fs::create_dir_all(&src)?;
    let mut xs = stdio(&[]);
    xs["cwd"] = json!("${extensionPath}");
    let manifest = json!({"name": "ex", "version": "1.0.0", "mcpServers": {
        "xs": xs, "xr": {"httpUrl": "http://127.0.0.1:9/mcp"}}});
    std::fs::write(src.join("gemini-extension.json"), manifest.to_string())?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (code, _, err) =
        home.gemctl_run(&["extensions", "install", &src.display().to_string(), "--consent"])?;
    assert_eq!(code, 0, "{err}");

    let (code, out, err) = home.gemctl_run(&["mcp", "import"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("extensions' servers through geminid too: xs"), "{out}");
    assert!(out.contains("stay with Gemini CLI") && out.contains("xr"), "{out}");
    // An entry of the server's name, which Gemini CLI merges over the extension's: the
    // gateway's command, run in Gemini CLI's folder rather than the extension's.
    let parsed = gemini_settings(&home)?;
    let entry = &parsed["mcpServers"]["xs"];
    let gateway = ["mcp", "serve", "--server", "xs", "--confirm", "client", "--hooks", "client"];
    assert_eq!(entry["args"], json!(gateway));
    assert_eq!(entry["cwd"], ".", "{entry}");
    assert!(parsed["mcpServers"].get("xr").is_none(), "{parsed}");

    // geminid runs the extension's server, not the gateway entry named as it.
    let listed = home.gemctl_json(&["mcp", "list"])?;
    let xs_listed = listed
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "xs"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(xs_listed["extension"], "ex", "{listed}");
    assert_ne!(xs_listed["state"], "blocked", "{listed}");
    let s = serve(&home, None, &["--server", "xs", "--confirm", "client"]).await?;
    let (is_error, text) = text_of(&s, "echo", json!({"text": "from the extension"})).await?;
    assert!(!is_error && text.contains("from the extension"), "{text}");
    drop(s);

    // Where the extension is disabled Gemini CLI has no such server: the entry serves nothing,
    // and geminid lists no gateway entry in its place.
    let (code, _, err) =
        home.gemctl_run(&["extensions", "disable", "ex", "--scope", "workspace"])?;
    assert_eq!(code, 0, "{err}");
    let listed = home.gemctl_json(&["mcp", "list"])?;
    assert!(!listed.to_string().contains("\"xs\""), "{listed}");
    let s = serve(&home, None, &["--server", "xs", "--confirm", "client"]).await?;
    assert!(s.client.list_all_tools().await?.is_empty());
    drop(s);

    // Undone: the entry goes, and Gemini CLI starts the extension's server itself again.
    let undone = home.gemctl_json(&["mcp", "unimport"])?;
    assert_eq!(undone["extensions"], json!(["xs"]), "{undone}");
    let parsed = gemini_settings(&home)?;
    assert!(parsed["mcpServers"].get("xs").is_none(), "{parsed}");
    Ok(())
}

#[tokio::test]
async fn one_servers_gateway_names_it_exactly() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    settings(&home, json!({ "fx": stdio(&[]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    for (args, says) in [
        (&["--server", "nope"][..], "no MCP server named 'nope'"),
        (&["--server", "FX"][..], "did you mean 'fx'"),
        (&["--names", "own"][..], "needs --server"),
        (&["--confirm", "someone"][..], "geminid"),
    ] {
        let mut all = vec!["mcp", "serve"];
        all.extend_from_slice(args);
        let (code, _, err) = home.gemctl_run(&all)?;
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    Ok(())
}

#[tokio::test]
#[allow(deprecated, reason = "logging is SEP-2577-deprecated; this client is of the earlier eras")]
async fn the_servers_log_messages_reach_the_client_at_its_level() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    // Two servers (two processes: their commands differ).
    settings(&home, json!({ "fx": stdio(&[]), "fy": stdio(&["--rich"]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve(&home, None, &[]).await?;
    let info = s.client.peer_info().map(|i| i.capabilities.logging.is_some());
    assert_eq!(info, Some(true), "the logging capability is declared");
    // Every level until the client sets one.
    text_of(&s, "fx__sleep", json!({"ms": 1})).await?;
    let heard = || async { lock(&s.heard.logs).iter().any(|(_, d)| d == "sleeping 1 ms") };
    assert!(geminid_tests::eventually(Duration::from_secs(5), heard).await);
    let level = |l: &str| {
        serde_json::from_value::<rmcp::model::SetLevelRequestParams>(json!({ "level": l }))
    };
    s.client.set_level(level("warning")?).await?;
    text_of(&s, "fx__sleep", json!({"ms": 2})).await?;
    s.client.set_level(level("info")?).await?;
    text_of(&s, "fx__sleep", json!({"ms": 3})).await?;
    let third = || async { lock(&s.heard.logs).iter().any(|(_, d)| d == "sleeping 3 ms") };
    assert!(geminid_tests::eventually(Duration::from_secs(5), third).await);
    let logs = lock(&s.heard.logs).clone();
    assert!(!logs.iter().any(|(_, d)| d == "sleeping 2 ms"), "below the level: {logs:?}");
    assert!(logs.iter().all(|(l, _)| l == "info"), "{logs:?}");

    // One server's gateway passes on that server's messages only.
    let one = serve(&home, None, &["--server", "fy"]).await?;
    text_of(&s, "fx__sleep", json!({"ms": 4})).await?;
    text_of(&one, "sleep", json!({"ms": 5})).await?;
    let fifth = || async { lock(&one.heard.logs).iter().any(|(_, d)| d == "sleeping 5 ms") };
    assert!(geminid_tests::eventually(Duration::from_secs(5), fifth).await);
    let theirs = lock(&one.heard.logs).clone();
    assert!(!theirs.iter().any(|(_, d)| d == "sleeping 4 ms"), "fx's: {theirs:?}");
    Ok(())
}

/// A client of 2026-07-28 has no session to set a log level on: it asks for a call's log
/// messages with the request (`io.modelcontextprotocol/logLevel` in its `_meta`), and gets
/// those at or above that level on the request's own stream, before the result; none when it
/// asks for none. Both ways a call of that era goes: plain, and by multi round-trip (a client
/// that elicits). (Issue 65, item 6: it got none at all.)
#[tokio::test]
async fn a_new_era_client_gets_its_calls_log_messages_at_the_level_it_asks() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&["--flood"]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (_gateway, url, token, _) = http_gateway(&home).await?;
    let flood = |level: Option<&str>, elicits: bool| {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities":
                if elicits { json!({ "elicitation": { "form": {} } }) } else { json!({}) },
            "io.modelcontextprotocol/clientInfo": { "name": "e2e", "version": "1" },
        });
        if let Some(l) = level {
            meta["io.modelcontextprotocol/logLevel"] = json!(l);
        }
        let args = json!({ "count": 4, "levels": ["debug", "info", "warning", "error"] });
        let params = json!({ "name": "fx__flood", "arguments": args, "_meta": meta });
        let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params });
        let (url, token) = (url.clone(), token.clone());
        async move {
            let text = reqwest::Client::new()
                .post(&url)
                .bearer_auth(&token)
                .header("Accept", "application/json, text/event-stream")
                .header("MCP-Protocol-Version", "2026-07-28")
                .header("Mcp-Method", "tools/call")
                .header("Mcp-Name", "fx__flood")
                .json(&body)
                .send()
                .await?
                .text()
                .await?;
            // A JSON body, or an event stream of messages: (each log message's level and data,
            // the result's text).
            let mut said: Vec<Value> = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .filter(|d| d.starts_with('{'))
                .map(serde_json::from_str)
                .collect::<Result<_, _>>()?;
            if said.is_empty() {
                said.push(serde_json::from_str(&text)?);
            }
            let last = said.pop().unwrap_or_default();
            let logs: Vec<(String, String)> = said
                .iter()
                .filter(|m| m["method"] == "notifications/message")
                .map(|m| (m["params"]["level"].to_string(), m["params"]["data"].to_string()))
                .collect();
            anyhow::Ok((logs, last["result"]["content"][0]["text"].clone(), text))
        }
    };
    let at = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs.iter().map(|(l, d)| (json!(l).to_string(), json!(d).to_string())).collect()
    };
    let (logs, result, text) = flood(Some("warning"), false).await?;
    assert_eq!(result, "flooded 4", "{text}");
    assert_eq!(logs, at(&[("warning", "flood 2"), ("error", "flood 3")]), "{text}");
    let (logs, result, text) = flood(Some("debug"), true).await?;
    assert_eq!(result, "flooded 4", "{text}");
    let all =
        [("debug", "flood 0"), ("info", "flood 1"), ("warning", "flood 2"), ("error", "flood 3")];
    assert_eq!(logs, at(&all), "{text}");
    for elicits in [false, true] {
        let (logs, result, text) = flood(None, elicits).await?;
        assert_eq!((logs, result), (vec![], json!("flooded 4")), "asked for none: {text}");
    }
    Ok(())
}

#[tokio::test]
async fn a_client_of_the_new_era_gets_result_types_and_listens_for_changes() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&["--rich"]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (_child, pipes) = piped(home.gemctl_cmd(&["mcp", "serve"]).into())?;
    let modern = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    use rmcp::service::ClientServiceExt as _;
    let client = Heard::default().serve_with_lifecycle(pipes, modern).await?;
    let version = client.peer_info().map(|i| i.protocol_version.clone());
    assert_eq!(version, Some(rmcp::model::ProtocolVersion::V_2026_07_28));
    let mut p = CallToolRequestParams::new("fx__echo");
    p.arguments = json!({"text": "new era"}).as_object().cloned();
    let r = client.call_tool(p).await?;
    assert_eq!(r.result_type, Some(rmcp::model::ResultType::COMPLETE), "{r:?}");
    let prompt = serde_json::from_value(json!({"name": "fx__plain"}))?;
    let got = client.get_prompt(prompt).await?;
    assert_eq!(got.result_type, Some(rmcp::model::ResultType::COMPLETE), "{got:?}");
    let complete = serde_json::from_value(json!({
        "ref": {"type": "ref/prompt", "name": "fx__greet"},
        "argument": {"name": "name", "value": "Ad"}
    }))?;
    let done = client.complete(complete).await?;
    assert_eq!(done.result_type, Some(rmcp::model::ResultType::COMPLETE), "{done:?}");
    assert!(done.completion.values.iter().any(|v| v.starts_with("Ad")), "{done:?}");

    // List changes come on a subscriptions/listen stream.
    let filter = rmcp::model::SubscriptionFilter::builder().tools_list_changed().build();
    let mut sub = client.listen(filter).await?;
    settings(&home, json!({ "fx": stdio(&["--rich"]), "fy": stdio(&[]) }))?;
    let next = tokio::time::timeout(Duration::from_secs(15), sub.next()).await;
    assert!(
        matches!(
            next,
            Ok(Ok(Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))))
        ),
        "{next:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_client_of_the_new_era_answers_what_a_call_asks_by_multi_round_trip() -> anyhow::Result<()>
{
    use rmcp::model::{CallToolResponse, InputRequest};
    use rmcp::service::ClientServiceExt as _;
    // A new user's home: no policy of theirs, so a call is confirmed first; geminid confirms
    // (the gateway's default), and the client cannot be sent requests in its era.
    let home = TestHome::new()?;
    settings(&home, json!({ "fx": stdio(&["--asks"]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let modern = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let (_child, pipes) = piped(home.gemctl_cmd(&["mcp", "serve"]).into())?;
    let heard = Heard {
        answer: Some(ElicitationAction::Accept),
        samples: Some("gateway-model"),
        ..Heard::default()
    };
    let client = heard.clone().serve_with_lifecycle(pipes, modern).await?;
    let call = |name: &str, args: Value| {
        let mut p = CallToolRequestParams::new(name.to_owned());
        p.arguments = args.as_object().cloned();
        p
    };
    // Each ask ends the request with `input_required`; each retry answers and waits again.
    let asked = |r: &CallToolResponse| match r {
        CallToolResponse::InputRequired(i) => {
            let requests = i.input_requests.clone().unwrap_or_default();
            let (key, request) = requests.into_iter().next()?;
            let InputRequest::Elicitation(e) = request else { return None };
            let message = serde_json::to_value(&e.params).ok()?["message"].as_str()?.to_owned();
            Some((key, message, i.request_state.clone()?))
        }
        _ => None,
    };
    let first = client.call_tool_once(call("fx__ask", json!({"message": "Your name?"}))).await?;
    let (key, message, state) = asked(&first).ok_or_else(|| anyhow::anyhow!("{first:?}"))?;
    assert!(message.contains("ask") && message != "Your name?", "the confirmation: {message}");
    // A state it was not given is refused, and spends nothing.
    let mut forged = call("fx__ask", json!({"message": "Your name?"}));
    forged.request_state = Some("0123456789abcdef".into());
    let refused = format!("{:?}", client.call_tool_once(forged).await);
    assert!(refused.contains("requestState is unknown"), "{refused}");
    let mut retry = call("fx__ask", json!({"message": "Your name?"}));
    retry.request_state = Some(state);
    retry.input_responses = Some([(key, json!({"action": "accept"}))].into_iter().collect());
    let second = client.call_tool_once(retry).await?;
    let (key, message, state) = asked(&second).ok_or_else(|| anyhow::anyhow!("{second:?}"))?;
    assert_eq!(message, "Your name?", "the server's own elicitation");
    // Spent: the first state is not taken twice.
    let mut again = call("fx__ask", json!({"message": "Your name?"}));
    again.request_state = Some(state.clone());
    again.input_responses = Some(
        [(key.clone(), json!({"action": "accept", "content": {"name": "Ada", "age": 36}}))]
            .into_iter()
            .collect(),
    );
    let done = client.call_tool_once(again).await?;
    let CallToolResponse::Complete(result) = done else { anyhow::bail!("{done:?}") };
    let text = serde_json::to_value(&result.content)?.to_string();
    assert!(text.contains("Ada"), "{text}");
    let mut twice = call("fx__ask", json!({"message": "Your name?"}));
    twice.request_state = Some(state);
    let spent = format!("{:?}", client.call_tool_once(twice).await);
    assert!(spent.contains("requestState is unknown"), "{spent}");

    // rmcp's own client drives the rounds with its handler: a confirmation and a sampling
    // request, answered there.
    let r = client.call_tool(call("fx__sample", json!({"prompt": "Hi there"}))).await?;
    let text = serde_json::to_value(&r.content)?.to_string();
    assert!(text.contains("gateway-model"), "{text}");
    assert!(lock(&heard.asked).iter().any(|m| m.contains("sample")), "{:?}", lock(&heard.asked));
    let audit = home.gemctl_json(&["audit", "-n", "1"])?;
    assert_eq!(audit["records"][0]["tool"], "mcp_fx_sample", "{audit}");
    assert_eq!(audit["records"][0]["ok"], true, "{audit}");
    Ok(())
}

/// `config-examples/clients/`, as each client reads its file.
fn example(name: &str) -> anyhow::Result<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config-examples/clients");
    Ok(std::fs::read_to_string(dir.join(name))?)
}

/// JSON with `//` line comments (what Gemini CLI and VS Code accept).
fn jsonc(text: &str) -> anyhow::Result<Value> {
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
    Ok(serde_json::from_str(&kept.join("\n"))?)
}

#[tokio::test]
async fn the_client_examples_are_what_their_clients_read_and_they_work() -> anyhow::Result<()> {
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&[]) }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    // Claude Code and Cursor read strict JSON; Gemini CLI and VS Code allow comments.
    let entries = [
        ("gemini-cli.settings.json", jsonc(&example("gemini-cli.settings.json")?)?["mcpServers"]["geminid"].clone()),
        ("claude-code.mcp.json", serde_json::from_str::<Value>(&example("claude-code.mcp.json")?)?["mcpServers"]["geminid"].clone()),
        ("cursor.mcp.json", serde_json::from_str::<Value>(&example("cursor.mcp.json")?)?["mcpServers"]["geminid"].clone()),
        ("vscode.mcp.json", jsonc(&example("vscode.mcp.json")?)?["servers"]["geminid"].clone()),
    ];
    for (file, entry) in &entries {
        assert_eq!(entry["command"], "gemctl", "{file}");
        assert!(entry.get("type").is_none_or(|t| t == "stdio"), "{file}: {entry}");
        let args: Vec<String> = serde_json::from_value(entry["args"].clone())?;
        // Started as the client would start it (gemctl from the PATH is this build's).
        let mut cmd: Command =
            home.gemctl_cmd(&args.iter().map(String::as_str).collect::<Vec<_>>()).into();
        let mut child =
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).kill_on_drop(true).spawn()?;
        let (Some(out), Some(inp)) = (child.stdout.take(), child.stdin.take()) else {
            anyhow::bail!("pipes")
        };
        let client = ().serve((out, inp)).await?;
        let tools = client.list_all_tools().await?;
        assert!(tools.iter().any(|t| t.name == "fx__echo"), "{file}: {tools:?}");
        client.cancel().await?;
    }
    let http = jsonc(&example("vscode.mcp.json")?)?;
    assert_eq!(http["servers"]["geminid-http"]["url"], "http://127.0.0.1:8765/mcp");
    assert!(
        http["servers"]["geminid-http"]["headers"]["Authorization"]
            .as_str()
            .is_some_and(|a| a.starts_with("Bearer "))
    );

    // Neovim's requests, sent as it sends them, through gemctl rpc.
    let lua = example("neovim.lua")?;
    let ws = home.workspace().display().to_string();
    let mut lines: Vec<String> = lua
        .lines()
        .filter_map(|l| l.trim().strip_prefix("[[").and_then(|l| l.strip_suffix("]],")))
        .map(|l| l.replace("$CWD", &ws))
        .collect();
    assert_eq!(lines.len(), 2, "{lua}");
    lines.push(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"session":"SESSION"}}"#.into(),
    );
    let mut rpc = home.gemctl_cmd(&["rpc"]);
    let mut child = rpc.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
    use std::io::{BufRead as _, Write as _};
    let mut input = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
    let mut output =
        std::io::BufReader::new(child.stdout.take().ok_or_else(|| anyhow::anyhow!("stdout"))?);
    let mut session = String::new();
    for line in &lines {
        writeln!(input, "{}", line.replace("SESSION", &session))?;
        let mut answer = String::new();
        output.read_line(&mut answer)?;
        let v: Value = serde_json::from_str(&answer)?;
        assert!(v.get("result").is_some(), "{line} -> {answer}");
        if v["id"] == 2 {
            session = v["result"]["id"].as_str().unwrap_or_default().to_owned();
        }
        if v["id"] == 3 {
            assert!(answer.contains("mcp_fx_echo"), "{answer}");
        }
    }
    drop(input);
    child.wait()?;
    drop(daemon);
    Ok(())
}

#[tokio::test]
// `resources/subscribe` is what clients of the ≤ 2025-11-25 era send, as rmcp's client does here.
#[allow(deprecated)]
async fn completions_and_resource_subscriptions_reach_the_server_they_belong_to()
-> anyhow::Result<()> {
    use rmcp::model::{ArgumentInfo, CompleteRequestParams, Reference, SubscribeRequestParams};
    let home = TestHome::new()?;
    settings(&home, json!({ "fx": stdio(&["--rich"]), "plain": stdio(&[]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve(&home, None, &[]).await?;
    let caps = serde_json::to_value(s.client.peer_info().as_deref())?;
    assert!(caps["capabilities"]["completions"].is_object(), "{caps}");
    assert_eq!(caps["capabilities"]["resources"]["subscribe"], true, "{caps}");

    // By the prompt's served name; the server gets its own name.
    let arg = || ArgumentInfo::new("name", "An");
    let done = s
        .client
        .complete(CompleteRequestParams::new(Reference::for_prompt("fx__greet"), arg()))
        .await?;
    let values = serde_json::to_value(&done)?;
    assert_eq!(values["completion"]["values"][0], "An1 (prompt greet)", "{values}");
    let template =
        Reference::Resource(rmcp::model::ResourceTemplateReference::new("file:///logs/{day}.log"));
    let done = s.client.complete(CompleteRequestParams::new(template, arg())).await?;
    assert!(serde_json::to_string(&done)?.contains("resource file:///logs/{day}.log"));
    let nobody =
        s.client.complete(CompleteRequestParams::new(Reference::for_prompt("nope"), arg())).await;
    assert!(format!("{nobody:?}").contains("no prompt named 'nope'"), "{nobody:?}");

    // A subscription goes to the server that lists the URI, and its update comes back.
    s.client.subscribe(SubscribeRequestParams::new("file:///notes.txt")).await?;
    let heard = || async { lock(&s.heard.updated).iter().any(|u| u == "file:///notes.txt") };
    assert!(
        geminid_tests::eventually(Duration::from_secs(10), heard).await,
        "no resources/updated"
    );
    let unknown = s.client.subscribe(SubscribeRequestParams::new("file:///not-offered")).await;
    assert!(unknown.is_err());
    Ok(())
}

#[tokio::test]
#[allow(deprecated)]
async fn a_subscription_to_a_server_of_the_new_era_is_a_subscriptions_listen_stream()
-> anyhow::Result<()> {
    use rmcp::model::SubscribeRequestParams;
    let home = TestHome::new()?;
    settings(&home, json!({ "fm": stdio(&["--rich", "--modern"]) }))?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve(&home, None, &[]).await?;
    s.client.subscribe(SubscribeRequestParams::new("file:///notes.txt")).await?;
    let heard = || async { lock(&s.heard.updated).iter().any(|u| u == "file:///notes.txt") };
    assert!(
        geminid_tests::eventually(Duration::from_secs(10), heard).await,
        "no resources/updated from the listen stream"
    );
    Ok(())
}

#[tokio::test]
async fn custom_tools_are_served_beside_the_servers_tools() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let home = TestHome::allowing_mcp()?;
    let bin = home.root().join("bin");
    std::fs::create_dir_all(&bin)?;
    let script = |name: &str, body: &str| -> anyhow::Result<String> {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(path.display().to_string())
    };
    let decls = json!([{"name": "shout", "description": "Shouts.", "parametersJsonSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}, {"name": "bare"}]);
    let discover = script("discover", &format!("echo '{decls}'"))?;
    let call =
        script("call", r#"[ "$1" = shout ] && tr a-z A-Z || { echo "no $1" >&2; exit 2; }"#)?;
    std::fs::write(
        home.root().join("home/.gemini/settings.json"),
        json!({ "mcpServers": { "fx": stdio(&[]) }, "tools": { "discoveryCommand": discover, "callCommand": call } }).to_string(),
    )?;
    std::fs::write(
        home.root().join("home/.gemini/policies/custom.toml"),
        "[[rule]]\ntoolName = \"discovered_tool_*\"\ndecision = \"allow\"\npriority = 10\n",
    )?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve(&home, None, &[]).await?;
    let tools = s.client.list_all_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(&names[..2], ["discovered_tool_shout", "discovered_tool_bare"], "{names:?}");
    assert!(names.contains(&"fx__echo"), "{names:?}");
    let bare = serde_json::to_value(&tools[1])?;
    // Declared without parameters (`{}`): served as the object schema MCP clients require.
    assert_eq!(bare["inputSchema"], json!({"type": "object"}), "{bare}");
    assert_eq!(
        text_of(&s, "discovered_tool_shout", json!({"text": "hi"})).await?,
        (false, "{\"TEXT\":\"HI\"}".into())
    );
    let (failed, text) = text_of(&s, "discovered_tool_bare", json!({})).await?;
    assert!(failed);
    assert_eq!(
        text,
        "Stdout: (empty)\nStderr: no bare\n\nError: (none)\nExit Code: 2\nSignal: (none)"
    );
    Ok(())
}

/// Any local user can connect to the HTTP gateway's port: 1,100 bare connections to a daemon
/// with a user service's 1,024 descriptors leave the Unix socket answering, a half-sent
/// request is closed, the token is checked before any work, a foreign `Origin` is refused even
/// with the token, and once the flood is gone a real client is served again.
#[tokio::test]
async fn the_http_gateway_bounds_connections_and_serves_local_origins_only() -> anyhow::Result<()> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let home = TestHome::new()?;
    settings(&home, json!({ "fx": stdio(&[]) }))?;
    let daemon = Daemon::launch(&home).under(&["prlimit", "--nofile=1024:1024"]).start().await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (_child, url, token, addr) = http_gateway(&home).await?;

    let mut flood = Vec::new();
    for _ in 0..1100 {
        match tokio::net::TcpStream::connect(&addr).await {
            Ok(s) => flood.push(s),
            Err(_) => break,
        }
    }
    let started = std::time::Instant::now();
    let (code, out, err) = home.gemctl_run(&["--no-autostart", "status"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "status took {:?}", started.elapsed());

    // The oldest bare connections are closed to make room for newer ones; the rest when no
    // request with the token comes in time.
    let closed = |mut s: tokio::net::TcpStream| async move {
        let mut buf = [0u8; 256];
        matches!(
            tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    };
    let last = flood.pop().ok_or_else(|| anyhow::anyhow!("no connection was made"))?;
    assert!(closed(last).await, "a connection beyond the bound stayed open");
    drop(flood);
    // The daemon has closed the flood's connections (its descriptors are back below the
    // bound), so that the next one is not taken for one beyond it.
    let pid = daemon.pid();
    let fds =
        move || std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(usize::MAX, Iterator::count);
    let closed_all = geminid_tests::eventually(Duration::from_secs(10), || async { fds() < 256 });
    assert!(closed_all.await, "the flood's connections stayed open: {} descriptors", fds());
    let mut half = tokio::net::TcpStream::connect(&addr).await?;
    half.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n").await?;
    let started = std::time::Instant::now();
    assert!(closed(half).await, "a half-sent request was kept open");
    assert!(started.elapsed() > Duration::from_secs(2), "closed before its headers were due");

    // Origins: a web page elsewhere is refused even with the token; a local one is not.
    let post = |origin: Option<&str>| {
        let (addr, token) = (addr.clone(), token.clone());
        let origin = origin.map(str::to_owned);
        async move {
            let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
            let origin = origin.map(|o| format!("Origin: {o}\r\n")).unwrap_or_default();
            let req = format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n{origin}\
                 Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let mut s = tokio::net::TcpStream::connect(&addr).await?;
            s.write_all(req.as_bytes()).await?;
            let mut out = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
            anyhow::Ok(String::from_utf8_lossy(&out).lines().next().unwrap_or_default().to_owned())
        }
    };
    for foreign in ["https://evil.example", "null", "http://127.0.0.1.evil.example:80"] {
        let status = post(Some(foreign)).await?;
        assert!(status.contains(" 403 "), "{foreign}: {status}");
    }
    for local in ["http://localhost:6274", "http://127.0.0.1:9", "http://[::1]:80"] {
        let status = post(Some(local)).await?;
        assert!(!status.contains(" 403 "), "{local}: {status}");
    }

    let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await?;
    client.list_all_tools().await?;
    client.cancel().await?;
    Ok(())
}

/// Bare connections cannot lock the token holder out of the HTTP gateway (issue 64, item 1): with
/// more of them held open than the gateway keeps for anyone, a client with the token connects,
/// lists and calls; more still, opened while it is connected, leave it served. A limit that
/// closed connections before reading the token let any local user deny the token holder.
#[tokio::test]
async fn bare_connections_never_lock_the_token_holder_out_of_the_http_gateway() -> anyhow::Result<()>
{
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let home = TestHome::allowing_mcp()?;
    settings(&home, json!({ "fx": stdio(&[]) }))?;
    let _daemon = Daemon::launch(&home).under(&["prlimit", "--nofile=1024:1024"]).start().await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let (_child, url, token, addr) = http_gateway(&home).await?;
    let mut flood = Vec::new();
    for _ in 0..300 {
        flood.push(tokio::net::TcpStream::connect(&addr).await?);
    }

    let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await?;
    let tools = client.list_all_tools().await?;
    assert!(tools.iter().any(|t| t.name == "fx__echo"), "{tools:?}");
    for _ in 0..300 {
        flood.push(tokio::net::TcpStream::connect(&addr).await?);
    }
    let mut p = CallToolRequestParams::new("fx__echo");
    p.arguments = json!({"text": "still served"}).as_object().cloned();
    let r = serde_json::to_value(client.call_tool(p).await?)?;
    assert_eq!(r["content"][0]["text"], "still served");
    client.cancel().await?;
    drop(flood);
    Ok(())
}

/// A confirmation raised by one gateway client's call is that client's: another client that
/// accepts everything is never asked it, and when the asking client goes, its call goes with
/// it and never runs. A client that answers the elicitation with an error has declined, at
/// once.
#[tokio::test]
async fn a_confirmation_goes_with_the_client_whose_call_raised_it() -> anyhow::Result<()> {
    use geminid_protocol::api::CallsApiClient as _;
    let home = TestHome::new()?;
    let log = home.root().join("calls.log");
    let fx = json!({ "command": geminid_tests::mcp::fixture(), "env": { "FIXTURE_CALL_LOG": log.display().to_string() } });
    settings(&home, json!({ "fx": fx }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let accept = Some(ElicitationAction::Accept);
    let away = serve_as(
        &home,
        None,
        &[],
        Heard { answer: accept.clone(), hang: true, ..Heard::default() },
    )
    .await?;
    let yes =
        serve_as(&home, None, &[], Heard { answer: accept.clone(), ..Heard::default() }).await?;
    let peer = away.client.peer().clone();
    let call = tokio::spawn(async move {
        let mut p = CallToolRequestParams::new("fx__echo");
        p.arguments = json!({"text": "never"}).as_object().cloned();
        peer.call_tool(p).await
    });
    let asked = || async { !lock(&away.heard.asked).is_empty() };
    assert!(geminid_tests::eventually(Duration::from_secs(10), asked).await, "never asked");
    // An ask sent to the other client too (with this one's) would reach it before the answer
    // to a request it makes now.
    yes.client.list_all_tools().await?;
    assert!(
        lock(&yes.heard.asked).is_empty(),
        "another client was asked: {:?}",
        lock(&yes.heard.asked)
    );
    // The asking client goes (its stdio closes).
    let Served { client, mut child, .. } = away;
    drop(client);
    let _ = child.kill().await;
    let _ = call.await;
    // The daemon has let the call go (it would be in flight still, or have run, had its ask
    // gone to another client); then what it sent the other client has arrived.
    let watcher = daemon.client().await?;
    let ended = geminid_tests::eventually(Duration::from_secs(10), || async {
        watcher.calls_list(None).await.is_ok_and(|l| l.calls.is_empty())
    });
    assert!(ended.await, "the departed client's call stayed in flight");
    yes.client.list_all_tools().await?;
    assert!(
        lock(&yes.heard.asked).is_empty(),
        "the departed client's ask went to another: {:?}",
        lock(&yes.heard.asked)
    );
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!ran.contains("echo"), "the departed client's call ran: {ran}");

    // An error for an answer: declined at once.
    let failing =
        serve_as(&home, None, &[], Heard { answer: accept, fail: true, ..Heard::default() })
            .await?;
    let started = std::time::Instant::now();
    let (is_error, text) = text_of(&failing, "fx__echo", json!({"text": "no"})).await?;
    assert!(is_error && text.contains("declined"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!ran.contains("echo"), "a declined call ran: {ran}");
    drop(yes);
    Ok(())
}

#[tokio::test]
async fn a_server_that_takes_45_seconds_to_answer_is_served_in_either_era() -> anyhow::Result<()> {
    // A JVM, a docker pull, a first `npx` on a busy machine: far past the era probe's patience
    // (10 s), within the limit the user gave (issue 63, B2).
    let home = TestHome::allowing_mcp()?;
    let slow = |era: &[&str]| {
        let mut args = era.to_vec();
        args.extend(["--startup-delay-ms", "45000"]);
        stdio(&args)
    };
    settings(&home, json!({ "legacy": slow(&[]), "modern": slow(&["--modern"]) }))?;
    let _daemon = Daemon::start(&home, &["--mcp-startup-timeout", "2m"]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let s = serve(&home, None, &[]).await?;
    let both = || async {
        s.client.list_all_tools().await.is_ok_and(|t| {
            ["legacy__echo", "modern__echo"].iter().all(|n| t.iter().any(|t| t.name == *n))
        })
    };
    assert!(geminid_tests::eventually(Duration::from_secs(110), both).await, "both listed");
    for server in ["legacy", "modern"] {
        let answer = text_of(&s, &format!("{server}__echo"), json!({"text": "late"})).await?;
        assert_eq!(answer, (false, "late".into()), "{server}");
        let starts = geminid_tests::mcp::starts(&home, server)?;
        assert_eq!(starts, 1, "{server} connected on its first start");
    }
    s.client.cancel().await?;
    Ok(())
}

/// A `tools/call` of a client of 2026-07-28 over the HTTP gateway at `url` (no session: each
/// request declares its era and capabilities), retried with `retry` (its `requestState` and
/// `inputResponses`) when given: the JSON-RPC response.
async fn modern_call(url: &str, token: &str, tool: &str, retry: Value) -> anyhow::Result<Value> {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": { "form": {} } },
        "io.modelcontextprotocol/clientInfo": { "name": "e2e", "version": "1" },
    });
    let mut params = json!({ "name": tool, "arguments": { "text": "for nobody" }, "_meta": meta });
    if let (Some(p), Some(r)) = (params.as_object_mut(), retry.as_object()) {
        p.extend(r.clone());
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
    let text = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
        .json(&body)
        .send()
        .await?
        .text()
        .await?;
    // A JSON body, or an event stream whose last data line is the response.
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .rfind(|d| d.starts_with('{'))
        .unwrap_or(text.trim());
    serde_json::from_str(json).map_err(|e| anyhow::anyhow!("{e}: {text}"))
}

/// A call of a client of 2026-07-28 waiting on an ask goes with the HTTP gateway that raised
/// it: when `gemctl mcp serve --http` goes, the call is cancelled (and audited so) and its ask
/// withdrawn at once; a late answer is refused, saying why, and the tool never runs. (Issue
/// 64, item 5: the call and its ask waited out the 5-minute confirmation deadline, and an
/// answer from anywhere ran the tool for a client that was gone.)
#[tokio::test]
async fn a_new_era_call_waiting_on_an_ask_goes_with_its_http_gateway() -> anyhow::Result<()> {
    use geminid_protocol::api::ConfirmationApiClient as _;
    use geminid_protocol::asks::AsksPendingParams;
    use geminid_protocol::policy::{ConfirmOutcome, ConfirmationRespondParams};
    use tokio::io::AsyncBufReadExt as _;
    // A new user's home: no policy of theirs, so the call is confirmed first.
    let home = TestHome::new()?;
    let log = home.root().join("calls.log");
    let fx = json!({ "command": geminid_tests::mcp::fixture(), "env": { "FIXTURE_CALL_LOG": log.display().to_string() } });
    settings(&home, json!({ "fx": fx }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    let rpc = daemon.client().await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let listen = || -> anyhow::Result<Child> {
        let mut cmd: Command =
            home.gemctl_cmd(&["--json", "mcp", "serve", "--http", "127.0.0.1:0"]).into();
        Ok(cmd.stdout(Stdio::piped()).kill_on_drop(true).spawn()?)
    };
    let said = |child: &mut Child| {
        let out = child.stdout.take();
        async move {
            let mut line = String::new();
            if let Some(out) = out {
                tokio::io::BufReader::new(out).read_line(&mut line).await?;
            }
            anyhow::Ok(serde_json::from_str::<Value>(&line)?)
        }
    };
    let mut gateway = listen()?;
    let first = said(&mut gateway).await?;
    let url = first["url"].as_str().unwrap_or_default().to_owned();
    let token = std::fs::read_to_string(first["tokenFile"].as_str().unwrap_or_default())?;
    let token = token.trim().to_owned();

    let asked = modern_call(&url, &token, "fx__echo", json!({})).await?;
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let state = result["requestState"].as_str().unwrap_or_default().to_owned();
    let key = result["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .ok_or_else(|| anyhow::anyhow!("no input request: {asked}"))?;
    let pending = rpc.asks_pending(AsksPendingParams { session: None }).await?.asks;
    let [ask] = pending.as_slice() else { anyhow::bail!("pending: {pending:?}") };
    let ask = ask.id.clone();

    // The gateway goes: the call ends as cancelled, at once (not at the ask's deadline).
    gateway.kill().await?;
    let _ = gateway.wait().await;
    let cancelled = geminid_tests::eventually(Duration::from_secs(30), || async {
        home.gemctl_json(&["audit", "-n", "1"]).is_ok_and(|a| {
            a["records"][0]["tool"] == "mcp_fx_echo"
                && a["records"][0]["ok"] == false
                && a["records"][0]["error"].to_string().contains("cancelled")
        })
    })
    .await;
    let audit = home.gemctl_json(&["audit", "-n", "1"])?;
    assert!(cancelled, "the call outlived its gateway: {audit}");
    let pending = rpc.asks_pending(AsksPendingParams { session: None }).await?.asks;
    assert_eq!(pending, [], "its ask outlived the gateway");

    // A late answer, from anywhere, is refused and says why.
    let respond = ConfirmationRespondParams {
        id: ask.clone(),
        outcome: ConfirmOutcome::Once,
        reason: None,
        session: None,
    };
    let refused = rpc.confirmation_respond(respond).await;
    let refused = format!("{refused:?}");
    assert!(refused.contains(&format!("confirmation {ask} was already cancelled")), "{refused}");
    // So is the retry through another gateway.
    let mut again = listen()?;
    let url = said(&mut again).await?["url"].as_str().unwrap_or_default().to_owned();
    let retry = json!({ "requestState": state, "inputResponses": { key: { "action": "accept" } } });
    let retried = modern_call(&url, &token, "fx__echo", retry).await?;
    assert!(
        retried["error"]["message"].to_string().contains("requestState is unknown"),
        "{retried}"
    );

    // A stdio client's call goes with its `gemctl mcp serve` the same way.
    use rmcp::service::ClientServiceExt as _;
    let modern = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let (mut child, pipes) = piped(home.gemctl_cmd(&["mcp", "serve"]).into())?;
    let heard = Heard { answer: Some(ElicitationAction::Accept), ..Heard::default() };
    let client = heard.serve_with_lifecycle(pipes, modern).await?;
    let mut p = CallToolRequestParams::new("fx__echo");
    p.arguments = json!({"text": "for nobody"}).as_object().cloned();
    let first = client.call_tool_once(p).await?;
    assert!(matches!(first, rmcp::model::CallToolResponse::InputRequired(_)), "{first:?}");
    let pending = rpc.asks_pending(AsksPendingParams { session: None }).await?.asks;
    assert_eq!(pending.len(), 1, "{pending:?}");
    child.kill().await?;
    let _ = child.wait().await;
    let withdrawn = geminid_tests::eventually(Duration::from_secs(30), || async {
        rpc.asks_pending(AsksPendingParams { session: None }).await.is_ok_and(|a| a.asks.is_empty())
    })
    .await;
    assert!(withdrawn, "the stdio client's ask outlived it");
    let audit = home.gemctl_json(&["audit", "-n", "2"])?;
    let cancelled = audit["records"].as_array().map_or(0, |r| {
        r.iter()
            .filter(|r| r["ok"] == false && r["error"].to_string().contains("cancelled"))
            .count()
    });
    assert_eq!(cancelled, 2, "{audit}");
    drop(client);
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!ran.contains("echo"), "the tool ran for a client that was gone: {ran}");
    Ok(())
}

/// A gateway whose client runs the hooks it reads itself (`--hooks client`, as `gemctl mcp
/// import` writes for Gemini CLI) runs none of the settings files' hooks for its calls, only
/// those of geminid's own servers.json, and the audit says the client ran them; without it,
/// geminid runs each hook once (issue 65, item 3: a user's hooks ran twice per call after
/// import, once in Gemini CLI and once in geminid).
#[tokio::test]
async fn a_client_that_runs_its_own_hooks_gets_none_run_again_by_geminid() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let log = home.root().join("hooks.log");
    let logs = |what: &str| {
        let hook = json!({"type": "command", "command": format!("printf '{what}\\n' >> {}", log.display())});
        json!([{"matcher": "mcp_fx_echo", "hooks": [hook]}])
    };
    std::fs::write(
        home.root().join("home/.gemini/settings.json"),
        serde_json::to_string(&json!({
            "mcpServers": { "fx": stdio(&[]) },
            "hooks": { "BeforeTool": logs("user-before"), "AfterTool": logs("user-after") },
        }))?,
    )?;
    // geminid's own file: Gemini CLI never reads it, so its hooks are geminid's to run.
    let own = home.root().join("home/.gemini/geminid/servers.json");
    std::fs::create_dir_all(own.parent().unwrap_or(home.root()))?;
    let own_hooks = json!({ "BeforeTool": logs("own-before"), "AfterTool": logs("own-after") });
    std::fs::write(&own, serde_json::to_string(&json!({ "hooks": own_hooks }))?)?;
    let _daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    let ran = || -> anyhow::Result<Vec<String>> {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        std::fs::write(&log, "")?;
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.sort();
        Ok(lines)
    };

    let s =
        serve(&home, None, &["--server", "fx", "--confirm", "client", "--hooks", "client"]).await?;
    let (is_error, text) = text_of(&s, "echo", json!({"text": "once"})).await?;
    assert!(!is_error && text.contains("once"), "{text}");
    assert_eq!(ran()?, ["own-after", "own-before"], "the client ran the settings' hooks");
    let audit = home.gemctl_json(&["audit", "-n", "1"])?;
    let last = &audit["records"][0];
    assert_eq!((&last["tool"], &last["hooks"]), (&json!("mcp_fx_echo"), &json!("byClient")));
    let (_, shown, _) = home.gemctl_run(&["audit", "-n", "1"])?;
    let row = shown.lines().find(|l| l.contains("mcp_fx_echo")).unwrap_or_default();
    assert!(shown.contains("HOOKS") && row.matches("by the client").count() == 2, "{shown}");
    drop(s);

    // A client that runs no hooks of its own: geminid runs every one, once.
    let s = serve(&home, None, &["--server", "fx", "--confirm", "client"]).await?;
    let (is_error, text) = text_of(&s, "echo", json!({"text": "twice?"})).await?;
    assert!(!is_error && text.contains("twice?"), "{text}");
    assert_eq!(ran()?, ["own-after", "own-before", "user-after", "user-before"]);
    let audit = home.gemctl_json(&["audit", "-n", "1"])?;
    assert_eq!(audit["records"][0].get("hooks"), None, "{audit}");

    // An entry an earlier import wrote (no --hooks): the doctor says so, and the fix.
    let old = json!({"command": "gemctl", "args": ["mcp", "serve", "--server", "fx", "--confirm", "client"]});
    settings(&home, json!({ "old": old }))?;
    let doctor = home.gemctl_json(&["doctor"])?;
    let said = doctor.to_string();
    assert!(said.contains("'old'") || said.contains("entries old"), "{said}");
    assert!(said.contains("run twice") && said.contains("gemctl mcp import"), "{said}");
    Ok(())
}
