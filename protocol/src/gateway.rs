//! The MCP gateway on the daemon's socket: a client asks, with an HTTP/1.1 upgrade, for one
//! session's catalog as an MCP server; after `101 Switching Protocols` the connection carries
//! MCP's stdio framing (one JSON-RPC message per line) both ways. `gemctl mcp serve` relays its
//! stdin and stdout to such a connection.
//!
//! ```text
//! GET /mcp?session=<id>&names=server[&server=<name>][&confirm=client][&hooks=client][&http=<addr>] HTTP/1.1
//! Host: localhost
//! Connection: upgrade
//! Upgrade: geminid-mcp
//! ```
//!
//! A refusal is an ordinary HTTP response whose body says why (an unknown session: 404).

use std::io;
use std::path::{Path, PathBuf};

#[cfg(not(unix))]
use interprocess::local_socket::traits::tokio::Stream as _;
#[cfg(not(unix))]
use interprocess::local_socket::{GenericFilePath, ToFsName as _};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The request's path.
pub const PATH: &str = "/mcp";
/// The `Upgrade` protocol token.
pub const UPGRADE: &str = "geminid-mcp";
/// The query parameter (`fds=1`) with which a client on Unix offers to hand the daemon its own
/// client's stdin and stdout, and the header of the daemon's `101` that takes the offer. The
/// daemon then writes one byte (`\n`) when it reads the connection itself; the client sends
/// both descriptors in one `SCM_RIGHTS` message whose data is the length of what it read of its
/// stdin already (8 bytes, little-endian), followed by those bytes; and the connection then
/// carries nothing until the daemon closes it when the session ends (or the client closes it
/// when it goes, which ends the session as its stdin closing would).
///
/// A client that also asks `refused=say` is told when the daemon does not take what it sent:
/// one line, a [`HandRefused`] in JSON, before anything else. With `relay: true` (descriptors
/// the daemon cannot take: a kind it does not serve, its own limit on open descriptors) the
/// connection then carries the session's MCP stream as without `fds=1` (what was read ahead
/// is the daemon's already: the client relays from there); with `relay: false` (an exchange
/// the daemon does not trust) it closes. A client that did not ask is closed without a word.
pub const HAND_HEADER: &str = "geminid-fds";
/// The query parameter with which a client asks to be told of a refused handover.
pub const REFUSED_SAY: &str = "refused=say";

/// Why the daemon did not take the descriptors handed to it, and whether it relays instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HandRefused {
    /// Why, for the user.
    pub refused: String,
    /// The connection carries the session's MCP stream now (the client relays).
    pub relay: bool,
}
/// The longest response head the client reads before giving up.
const MAX_HEAD: usize = 16 * 1024;

/// How the gateway names the tools and prompts it serves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Names {
    /// `<server>__<tool>`: short, and reads well inside a client that prefixes its own server
    /// name (Gemini CLI shows `mcp_gemctl_github__create_issue`).
    #[default]
    Server,
    /// Gemini CLI's own names (`mcp_<server>_<tool>`), as `gemctl mcp tools` lists them.
    Fqn,
    /// The server's own names, unchanged: for a gateway of one server (`server=<name>`),
    /// which its client names as it would name the server itself (Gemini CLI:
    /// `mcp_<entry>_<tool>`).
    Own,
}

/// Who confirms the calls policy asks about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Confirm {
    /// geminid asks: the client as an elicitation if it can answer one, else a client
    /// attached to the session (`gemctl attach`), else nobody (the call is denied, and a tool
    /// that is only ever asked about is not listed).
    #[default]
    Geminid,
    /// The client confirms calls itself (Gemini CLI does): what policy would ask about is
    /// allowed as confirmed by the client (and audited so); a deny stays a deny.
    Client,
}

/// `as_str` and `parse` for a choice of who does something, `geminid` or `client` in the
/// gateway's query.
macro_rules! geminid_or_client {
    ($t:ty) => {
        impl $t {
            /// The query value.
            pub fn as_str(self) -> &'static str {
                match self {
                    Self::Geminid => "geminid",
                    Self::Client => "client",
                }
            }

            /// From the query value.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    "geminid" => Some(Self::Geminid),
                    "client" => Some(Self::Client),
                    _ => None,
                }
            }
        }
    };
}

geminid_or_client!(Confirm);

/// Who runs the BeforeTool and AfterTool hooks of the sources Gemini CLI reads too (the
/// settings files of every scope and the extensions' hooks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Hooks {
    /// geminid runs every hook of the session for each call.
    #[default]
    Geminid,
    /// The client runs those hooks itself (Gemini CLI does, for every tool it calls, MCP
    /// tools included): geminid runs only the hooks its client cannot know (those of
    /// geminid's own `servers.json`), and audits the call's hooks as run by the client.
    Client,
}

geminid_or_client!(Hooks);

/// What a gateway serves, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// How tools and prompts are named.
    pub names: Names,
    /// Only this server of the session (its entry name, exactly), named by [`Names::Own`]
    /// unless told otherwise.
    pub server: Option<String>,
    /// Who confirms.
    pub confirm: Confirm,
    /// Who runs the hooks the client reads too.
    pub hooks: Hooks,
    /// Listen for streamable HTTP clients here instead (see [`open_with`]).
    pub http: Option<String>,
}

impl Names {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Fqn => "fqn",
            Self::Own => "own",
        }
    }

    /// From the query value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "server" => Some(Self::Server),
            "fqn" => Some(Self::Fqn),
            "own" => Some(Self::Own),
            _ => None,
        }
    }
}

/// Why the gateway could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Nothing listens on the socket.
    #[error("geminid is not running (no daemon at {}): start it with `gemctl daemon start`", socket.display())]
    NotRunning {
        /// The socket tried.
        socket: PathBuf,
    },
    /// An OS call failed.
    #[error("cannot open the gateway at {}: {source}", socket.display())]
    Io {
        /// The socket tried.
        socket: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The daemon answered the upgrade with something else.
    #[error("geminid refused the gateway: {status}: {body}")]
    Refused {
        /// The HTTP status line's code.
        status: u16,
        /// What it said.
        body: String,
    },
}

/// Percent-encode a query value (ids and the names mode are plain, but be safe).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The gateway's connection: on Unix a plain Unix socket stream, whose `shutdown` closes the
/// write half (the client's end of input must reach the daemon while its answers still come);
/// elsewhere the local socket (a named pipe).
#[cfg(unix)]
pub type Stream = tokio::net::UnixStream;
/// See the Unix definition.
#[cfg(not(unix))]
pub type Stream = interprocess::local_socket::tokio::Stream;

#[cfg(unix)]
async fn connect(socket: &Path) -> io::Result<Stream> {
    tokio::net::UnixStream::connect(socket).await
}

#[cfg(not(unix))]
async fn connect(socket: &Path) -> io::Result<Stream> {
    Stream::connect(socket.to_fs_name::<GenericFilePath>()?).await
}

/// Open the gateway for `session` on the daemon at `socket`: the connection, upgraded.
pub async fn open(socket: &Path, session: &str, names: Names) -> Result<Stream, OpenError> {
    open_with(socket, session, &Options { names, ..Options::default() }).await
}

/// What the daemon says first on a connection that asked for the HTTP gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listening {
    /// The gateway's URL (`http://127.0.0.1:PORT/mcp`).
    #[serde(default)]
    pub url: String,
    /// The bearer token, when it was made now (shown once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Where the token is kept (0600).
    #[serde(default)]
    pub token_file: String,
    /// Why it could not listen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// [`open`] with all of [`Options`]. With `http` (`127.0.0.1:PORT`, loopback only) the daemon
/// listens there for streamable HTTP clients for as long as the returned connection stays
/// open; its first line is a [`Listening`].
pub async fn open_with(
    socket: &Path,
    session: &str,
    options: &Options,
) -> Result<Stream, OpenError> {
    open_asking(socket, session, options, false).await.map(|(s, _)| s)
}

/// [`open_with`], offering to hand over the descriptors ([`HAND_HEADER`]); with whether the
/// daemon took the offer (one that does not know it serves the connection as usual).
pub async fn open_handing(
    socket: &Path,
    session: &str,
    options: &Options,
) -> Result<(Stream, bool), OpenError> {
    open_asking(socket, session, options, true).await
}

async fn open_asking(
    socket: &Path,
    session: &str,
    options: &Options,
    hand: bool,
) -> Result<(Stream, bool), OpenError> {
    let io = |source: io::Error| OpenError::Io { socket: socket.to_path_buf(), source };
    let mut stream = connect(socket).await.map_err(|source| match source.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
            OpenError::NotRunning { socket: socket.to_path_buf() }
        }
        _ => io(source),
    })?;
    let mut query = format!("session={}&names={}", encode(session), options.names.as_str());
    if let Some(server) = &options.server {
        query.push_str(&format!("&server={}", encode(server)));
    }
    if options.confirm != Confirm::default() {
        query.push_str(&format!("&confirm={}", options.confirm.as_str()));
    }
    if options.hooks != Hooks::default() {
        query.push_str(&format!("&hooks={}", options.hooks.as_str()));
    }
    if let Some(addr) = &options.http {
        query.push_str(&format!("&http={}", encode(addr)));
    }
    if hand {
        query.push_str("&fds=1&");
        query.push_str(REFUSED_SAY);
    }
    let request = format!(
        "GET {PATH}?{query} HTTP/1.1\r\nHost: localhost\r\n\
         Connection: upgrade\r\nUpgrade: {UPGRADE}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.map_err(io)?;
    // Byte by byte up to the blank line: whatever follows it is the MCP stream's.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Err(OpenError::Refused { status: 0, body: "an oversized answer".into() });
        }
        let mut b = [0u8; 1];
        if stream.read(&mut b).await.map_err(io)? == 0 {
            return Err(OpenError::Refused {
                status: 0,
                body: "the daemon closed the connection".into(),
            });
        }
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status =
        head.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok()).unwrap_or_default();
    if status == 101 {
        let taken = head.lines().any(|l| {
            l.split_once(':').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case(HAND_HEADER) && v.trim() == "ready"
            })
        });
        return Ok((stream, taken));
    }
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0)
        .min(MAX_HEAD);
    let mut body = vec![0u8; length];
    let _ = stream.read_exact(&mut body).await;
    Err(OpenError::Refused { status, body: String::from_utf8_lossy(&body).trim().to_owned() })
}
