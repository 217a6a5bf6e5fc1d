//! Connecting to the daemon: the local socket, the WebSocket upgrade over it, the typed
//! [`Client`] and the `daemon/hello` handshake. This is the only I/O in the protocol crate.

mod rpc;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use interprocess::local_socket::tokio::Stream;
use interprocess::local_socket::tokio::prelude::*;
use interprocess::local_socket::{GenericFilePath, ToFsName};
use jsonrpsee::client_transport::ws::{
    Receiver, Sender, Url, WsHandshakeError, WsTransportClientBuilder,
};
use jsonrpsee::core::client::Error as RpcError;
use tokio_util::compat::Compat;

use crate::api::DaemonApiClient;
use crate::daemon::{ClientInfo, HelloParams, HelloResult};
use crate::error::{ErrorCode, VERSION_MISMATCH_V1};
use crate::{DEFAULT_MAX_MESSAGE_SIZE, PROTOCOL_VERSION};

pub use rpc::{Client, Subscription};

/// Default per-request timeout of the client.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// Default number of notifications a subscription buffers before it is dropped as too slow.
pub const DEFAULT_SUBSCRIPTION_BUFFER: usize = 1024;
/// Default time allowed for the WebSocket upgrade.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The raw WebSocket halves over the local socket, for relays such as `gemctl rpc`.
pub type RawSender = Sender<Compat<Stream>>;
/// See [`RawSender`].
pub type RawReceiver = Receiver<Compat<Stream>>;

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Who is connecting (sent in `daemon/hello`).
    pub client: ClientInfo,
    /// Largest message in either direction.
    pub max_message_size: u32,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Notifications a subscription may buffer; a subscriber that falls further behind is
    /// dropped (its stream ends with an error) rather than stalling the connection.
    pub subscription_buffer: usize,
}

impl ConnectOptions {
    /// Defaults for a client called `name`.
    pub fn new(name: &str, version: &str) -> Self {
        Self {
            client: ClientInfo { name: name.to_owned(), version: version.to_owned() },
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            subscription_buffer: DEFAULT_SUBSCRIPTION_BUFFER,
        }
    }
}

/// Why connecting failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Nothing listens on the socket.
    #[error("geminid is not running (no daemon at {}): start it with `gemctl daemon start`", socket.display())]
    NotRunning {
        /// The socket tried.
        socket: PathBuf,
        /// The OS error (not found, or refused), kept for logs; the message says it all.
        cause: io::Error,
    },
    /// The socket exists but could not be opened.
    #[error("cannot connect to {}: {source}", socket.display())]
    Io {
        /// The socket tried.
        socket: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The daemon refused the WebSocket upgrade (e.g. its connection limit is reached).
    #[error("geminid at {} refused the connection: {source}", socket.display())]
    Handshake {
        /// The socket tried.
        socket: PathBuf,
        /// What the handshake said.
        #[source]
        source: WsHandshakeError,
    },
    /// Client and daemon speak different protocol versions.
    #[error("{0}")]
    VersionMismatch(String),
    /// The hello call failed for another reason.
    #[error("daemon/hello failed: {0}")]
    Rpc(#[source] RpcError),
}

/// Open the socket and upgrade to WebSocket, returning the raw message halves.
pub async fn connect_raw(
    socket: &Path,
    max_message_size: u32,
) -> Result<(RawSender, RawReceiver), ConnectError> {
    let name = socket
        .to_fs_name::<GenericFilePath>()
        .map_err(|source| ConnectError::Io { socket: socket.to_path_buf(), source })?;
    let stream = Stream::connect(name).await.map_err(|source| match source.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
            ConnectError::NotRunning { socket: socket.to_path_buf(), cause: source }
        }
        _ => ConnectError::Io { socket: socket.to_path_buf(), source },
    })?;
    // The host is never resolved: the stream is already connected.
    let url = Url::parse("ws://localhost/").map_err(|e| ConnectError::Handshake {
        socket: socket.to_path_buf(),
        source: WsHandshakeError::Url(e.to_string().into()),
    })?;
    WsTransportClientBuilder::default()
        .max_request_size(max_message_size)
        .max_response_size(max_message_size)
        .connection_timeout(DEFAULT_HANDSHAKE_TIMEOUT)
        .build_with_stream(url, stream)
        .await
        .map_err(|source| ConnectError::Handshake { socket: socket.to_path_buf(), source })
}

/// Open a typed client without the handshake. Call [`handshake`] before relying on any other
/// result; sending it together with the first call saves a round trip.
pub async fn open(socket: &Path, opts: &ConnectOptions) -> Result<Client, ConnectError> {
    let (tx, rx) = connect_raw(socket, opts.max_message_size).await?;
    Ok(Client::new(tx, rx, opts.request_timeout, opts.subscription_buffer))
}

/// The `daemon/hello` handshake: a version mismatch becomes [`ConnectError::VersionMismatch`].
pub async fn handshake(
    client: &Client,
    opts: &ConnectOptions,
) -> Result<HelloResult, ConnectError> {
    let params =
        HelloParams { protocol_version: PROTOCOL_VERSION, client: Some(opts.client.clone()) };
    match client.hello(params).await {
        Ok(hello) => {
            if let Some(limit) = hello.max_message_size {
                client.set_peer_limit(limit);
            }
            Ok(hello)
        }
        Err(RpcError::Call(e))
            if e.code() == ErrorCode::VersionMismatch.code() || e.code() == VERSION_MISMATCH_V1 =>
        {
            Err(ConnectError::VersionMismatch(e.message().to_owned()))
        }
        Err(e) => Err(ConnectError::Rpc(e)),
    }
}

/// Connect, build a typed client and run the `daemon/hello` handshake.
pub async fn connect(
    socket: &Path,
    opts: &ConnectOptions,
) -> Result<(Client, HelloResult), ConnectError> {
    let client = open(socket, opts).await?;
    let hello = handshake(&client, opts).await?;
    Ok((client, hello))
}
