//! `gemctl mcp serve`: the session's catalog as one MCP server on stdin/stdout. The daemon
//! serves the gateway on an upgraded connection of its socket (`geminid_protocol::gateway`);
//! this relays bytes both ways until the client or the daemon goes.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use geminid_protocol::gateway::{self, Names};
use tokio::io::AsyncWriteExt as _;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve the default session of this directory [default: the current directory's, or
    /// --session]
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// How tools and prompts are named: `server` (<server>__<tool>) or `fqn` (Gemini CLI's
    /// mcp_<server>_<tool>)
    #[arg(long, value_enum, default_value = "server")]
    pub names: NamesArg,
    /// Serve streamable HTTP on this loopback address instead of stdio (e.g. 127.0.0.1:8765;
    /// port 0 picks one), until Ctrl-C. Clients send `Authorization: Bearer <token>`: the token
    /// is printed the first time and kept in the daemon's data directory (0600)
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
}

/// `--names`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum NamesArg {
    /// <server>__<tool>
    Server,
    /// mcp_<server>_<tool>
    Fqn,
}

impl From<NamesArg> for Names {
    fn from(n: NamesArg) -> Self {
        match n {
            NamesArg::Server => Names::Server,
            NamesArg::Fqn => Names::Fqn,
        }
    }
}

/// Relay stdin and stdout to the gateway of `session` until either side ends.
pub async fn run(socket: &Path, session: &str, names: Names) -> anyhow::Result<()> {
    let stream = gateway::open(socket, session, names).await?;
    let (mut from_daemon, mut to_daemon) = tokio::io::split(stream);
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let up = async {
        let copied = tokio::io::copy(&mut stdin, &mut to_daemon).await;
        // The client closed its end: tell the daemon, which then ends the session's gateway.
        let _ = to_daemon.shutdown().await;
        copied
    };
    let down = async {
        let copied = tokio::io::copy(&mut from_daemon, &mut stdout).await;
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
    names: Names,
    addr: &str,
    json: bool,
) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt as _;
    let stream = gateway::open_with(socket, session, names, Some(addr)).await?;
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
        println!("Serving the session's catalog over streamable HTTP at {}", said.url);
        match &said.token {
            Some(t) => println!(
                "Bearer token (shown this once; kept in {}, mode 0600):\n{t}",
                said.token_file
            ),
            None => println!("Bearer token: in {} (mode 0600)", said.token_file),
        }
        println!("Ctrl-C stops it.");
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
