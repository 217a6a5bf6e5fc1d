//! `gemctl mcp serve`: the session's catalog (or one of its servers') as one MCP server on
//! stdin/stdout. The daemon
//! serves the gateway on an upgraded connection of its socket (`geminid_protocol::gateway`).
//! On Unix stdin and stdout are offered to the daemon over that connection, which on Linux
//! takes and serves them itself, and this waits until the daemon closes the connection (the session ended);
//! elsewhere, with `--relay`, or for a daemon that does not take them, this relays bytes both
//! ways until the client or the daemon goes.

use std::path::{Path, PathBuf};

use crate::output::outln;
use anyhow::Context as _;
use clap::{Args, ValueEnum};
use geminid_protocol::gateway::{self, Confirm, Hooks, Names, Options};
use geminid_protocol::session::Declares;
use tokio::io::AsyncWriteExt as _;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve the default session of this directory [default: the current directory's, or
    /// --session]
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// How tools and prompts are named: `server` (<server>__<tool>), `fqn` (Gemini CLI's
    /// mcp_<server>_<tool>) or `own` (the server's own names; needs --server) [default: own
    /// with --server, else server]
    #[arg(long, value_enum)]
    pub names: Option<NamesArg>,
    /// Serve only this server of the session (its name exactly), under its own names: its
    /// client sees it as if it ran the server itself (`gemctl mcp import` writes one such entry
    /// per server)
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// Who confirms the calls geminid's policy asks about: `geminid` (the client as an
    /// elicitation if it can answer one, else `gemctl attach`, else the call is denied) or
    /// `client` (the client confirms calls itself, as Gemini CLI does: asked-about calls are
    /// allowed as confirmed by it; a deny stays a deny)
    #[arg(long, value_enum, default_value = "geminid")]
    pub confirm: ConfirmArg,
    /// Who runs the BeforeTool and AfterTool hooks of Gemini CLI's settings files and of the
    /// extensions: `geminid` (for each call) or `client` (the client runs them itself, as
    /// Gemini CLI does: geminid runs only the hooks of its own servers.json, and the audit says
    /// `hooks: by the client`). `gemctl mcp import` writes `client`
    #[arg(long, value_enum, default_value = "geminid")]
    pub hooks: HooksArg,
    /// Serve streamable HTTP on this loopback address instead of stdio (e.g. 127.0.0.1:8765;
    /// port 0 picks one), until Ctrl-C. Clients send `Authorization: Bearer <token>`: the token
    /// is printed the first time and kept in the daemon's data directory (0600)
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Relay stdin and stdout through this process. By default on Linux, when both are pipes or
    /// Unix sockets, they are handed to geminid, which reads and writes them itself while this
    /// process waits (a call then crosses one process fewer); a daemon that cannot take them
    /// (on other systems) gets the relay anyway
    #[arg(long, env = "GEMCTL_MCP_RELAY", value_parser = clap::builder::FalseyValueParser::new())]
    pub relay: bool,
}

/// `--names`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum NamesArg {
    /// <server>__<tool>
    Server,
    /// mcp_<server>_<tool>
    Fqn,
    /// The server's own names (with --server)
    Own,
}

/// `--confirm`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ConfirmArg {
    /// geminid asks (an elicitation, `gemctl attach`, else denied)
    Geminid,
    /// The client confirms calls itself
    Client,
}

/// `--hooks`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum HooksArg {
    /// geminid runs every hook for each call
    Geminid,
    /// The client runs the hooks it reads itself
    Client,
}

impl ServeArgs {
    /// What to ask the daemon for.
    pub fn options(&self) -> anyhow::Result<Options> {
        let names = match (self.names, &self.server) {
            (Some(NamesArg::Own), None) => {
                anyhow::bail!("--names own serves one server's own names: it needs --server NAME")
            }
            (Some(NamesArg::Server), _) => Names::Server,
            (Some(NamesArg::Fqn), _) => Names::Fqn,
            (Some(NamesArg::Own), Some(_)) | (None, Some(_)) => Names::Own,
            (None, None) => Names::Server,
        };
        let confirm = match self.confirm {
            ConfirmArg::Geminid => Confirm::Geminid,
            ConfirmArg::Client => Confirm::Client,
        };
        let hooks = match self.hooks {
            HooksArg::Geminid => Hooks::Geminid,
            HooksArg::Client => Hooks::Client,
        };
        let (server, http) = (self.server.clone(), self.http.clone());
        Ok(Options { names, server, confirm, hooks, http })
    }
}

/// The most of the client's first message read before its session is chosen.
const MAX_FIRST_MESSAGE: usize = 1 << 20;

/// The client's first message (its `initialize`), read before the session is chosen, and what
/// it declares among what servers may ask: the session's servers are told the same, so they
/// list what they list for this client.
pub struct First {
    bytes: Vec<u8>,
    /// What the client declares; `None` when the first message does not say (its servers are
    /// told everything, as before).
    pub declares: Option<Declares>,
}

/// Read the client's first line (up to [`MAX_FIRST_MESSAGE`]) from `input`.
pub async fn read_first(input: &mut crate::mcp::stdio::Input) -> anyhow::Result<First> {
    use tokio::io::AsyncReadExt as _;
    let mut bytes = Vec::new();
    let mut b = [0u8; 1];
    while !bytes.ends_with(b"\n") && bytes.len() < MAX_FIRST_MESSAGE {
        if input.read(&mut b).await.context("cannot read stdin")? == 0 {
            break;
        }
        bytes.push(b[0]);
    }
    let message: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let params = &message["params"];
    // The handshake's capabilities, or a 2026-07-28 request's own.
    let capabilities = match message["method"].as_str() {
        Some("initialize") => Some(&params["capabilities"]),
        _ => params["_meta"].get("io.modelcontextprotocol/clientCapabilities"),
    };
    let declares = capabilities.filter(|c| c.is_object()).map(Declares::of_capabilities);
    Ok(First { bytes, declares })
}

/// Serve stdin and stdout (`end`, whose `first` message was read already) by the gateway of
/// `session` until either side ends: handed over where they can be (unless `relay`), else
/// relayed.
pub async fn run(
    socket: &Path,
    session: &str,
    options: &Options,
    end: crate::mcp::stdio::ClientEnd,
    first: First,
    relay: bool,
) -> anyhow::Result<()> {
    #[cfg(unix)]
    if !relay && end.pollable() {
        let (stream, taken) = gateway::open_handing(socket, session, options).await?;
        if taken {
            // `end` is held to the end: dropping it puts stdin's and stdout's flags back.
            let handed = hand_over(stream, &first.bytes).await;
            return match handed.context("the gateway connection to geminid failed")? {
                None => Ok(()),
                // What was read ahead is geminid's already: the relay goes on from there.
                Some((told, stream)) if told.relay => {
                    crate::output::errln!(
                        "gemctl mcp serve: geminid did not take stdin and stdout ({}); relaying \
                         them instead",
                        told.refused
                    );
                    relay_on(stream, end, First { bytes: Vec::new(), declares: None }).await
                }
                Some((told, _)) => anyhow::bail!(
                    "geminid refused the stdin and stdout this gemctl handed it: {}. `gemctl mcp \
                     serve --relay` (or GEMCTL_MCP_RELAY=1) relays them instead",
                    told.refused
                ),
            };
        }
        return relay_on(stream, end, first).await;
    }
    let _ = relay;
    let stream = gateway::open_with(socket, session, options).await?;
    relay_on(stream, end, first).await
}

/// Hand stdin and stdout to the daemon on `stream` (with the `first` bytes read of stdin),
/// then wait until it closes the connection: the session ended, or the daemon went (`None`).
/// A daemon that does not take them says why first, and whether the connection carries the
/// session for this process to relay.
#[cfg(unix)]
async fn hand_over(
    mut stream: gateway::Stream,
    first: &[u8],
) -> std::io::Result<Option<(gateway::HandRefused, gateway::Stream)>> {
    use std::os::fd::{AsFd as _, AsRawFd as _};

    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use tokio::io::AsyncReadExt as _;

    // The daemon reads the connection itself now.
    let mut ready = [0u8; 1];
    stream.read_exact(&mut ready).await?;
    let len = (first.len() as u64).to_le_bytes();
    let fds = [std::io::stdin().as_fd().as_raw_fd(), std::io::stdout().as_fd().as_raw_fd()];
    let sent = stream
        .async_io(tokio::io::Interest::WRITABLE, || {
            let iov = [std::io::IoSlice::new(&len)];
            let rights = [ControlMessage::ScmRights(&fds)];
            sendmsg::<()>(stream.as_raw_fd(), &iov, &rights, MsgFlags::empty(), None)
                .map_err(std::io::Error::from)
        })
        .await?;
    stream.write_all(&len[sent..]).await?;
    stream.write_all(first).await?;
    // Nothing comes but a refusal (one line, byte by byte: what follows it is the session's):
    // the end of the connection is the end of the session.
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while stream.read(&mut b).await? != 0 {
        if b[0] == b'\n' {
            let told = serde_json::from_slice(&line).map_err(std::io::Error::other)?;
            return Ok(Some((told, stream)));
        }
        if line.len() < 4096 {
            line.push(b[0]);
        }
    }
    Ok(None)
}

/// Relay stdin and stdout (`end`, whose `first` message was read already) to the gateway on
/// `stream` until either side ends.
async fn relay_on(
    stream: gateway::Stream,
    mut end: crate::mcp::stdio::ClientEnd,
    first: First,
) -> anyhow::Result<()> {
    let (mut from_daemon, mut to_daemon) = tokio::io::split(stream);
    // `end` is held whole to the end: dropping it puts stdin's and stdout's flags back.
    let (stdin, stdout) = (&mut end.input, &mut end.output);
    let up = async {
        to_daemon.write_all(&first.bytes).await?;
        let copied = tokio::io::copy(stdin, &mut to_daemon).await;
        // The client closed its end: tell the daemon, which then ends the session's gateway.
        let _ = to_daemon.shutdown().await;
        copied
    };
    let down = async {
        let copied = tokio::io::copy(&mut from_daemon, stdout).await;
        let _ = stdout.flush().await;
        copied
    };
    tokio::pin!(up, down);
    tokio::select! {
        // The daemon went (or closed the gateway): nothing more will come.
        r = &mut down => {
            r.context("the gateway connection to geminid failed")?;
        }
        r = &mut up => {
            r.context("cannot read stdin")?;
            // Let the daemon's last answers out.
            down.await.context("the gateway connection to geminid failed")?;
        }
    }
    Ok(())
}

/// `--http`: ask the daemon to listen, say where, and keep the connection (and so the
/// listener) until Ctrl-C or the daemon goes.
pub async fn run_http(
    socket: &Path,
    session: &str,
    options: &Options,
    json: bool,
) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt as _;
    let stream = gateway::open_with(socket, session, options).await?;
    let mut reader = tokio::io::BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await.context("geminid did not say where it listens")?;
    let said: gateway::Listening =
        serde_json::from_str(&line).with_context(|| format!("geminid said: {line}"))?;
    if let Some(why) = &said.error {
        anyhow::bail!("{why}");
    }
    if json {
        crate::output::json_line(&said)?;
    } else {
        outln!("Serving the session's catalog over streamable HTTP at {}", said.url);
        match &said.token {
            Some(t) => outln!(
                "Bearer token (shown this once; kept in {}, mode 0600):\n{t}",
                said.token_file
            ),
            None => outln!("Bearer token: in {} (mode 0600)", said.token_file),
        }
        outln!("Ctrl-C stops it.");
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let mut rest = [0u8; 64];
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        // The daemon stopped.
        _ = tokio::io::AsyncReadExt::read(&mut reader, &mut rest) => {
            anyhow::bail!("geminid closed the gateway (it is shutting down)");
        }
    }
    Ok(())
}
