//! `daemon/*`.

use geminid_protocol::api::DaemonApiServer;
use geminid_protocol::daemon::{
    DoctorParams, DoctorResult, HelloParams, HelloResult, ShutdownResult, StatusResult,
};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::{DAEMON_VERSION, PROTOCOL_VERSION};
use jsonrpsee::core::{RpcResult, async_trait};

use super::Handler;

#[async_trait]
impl DaemonApiServer for Handler {
    async fn hello(&self, params: HelloParams) -> RpcResult<HelloResult> {
        let client = params.client.as_ref().map_or("unknown client", |c| c.name.as_str());
        if params.protocol_version != PROTOCOL_VERSION {
            tracing::warn!(client, theirs = params.protocol_version, "protocol version mismatch");
            // Who is behind says what helps: an older client is updated, an older daemon
            // restarted from the client's release.
            let fix = if params.protocol_version < PROTOCOL_VERSION {
                format!(
                    "the client is older than the daemon: use the gemctl of this release, or \
                     have the editor integration send `protocolVersion: {PROTOCOL_VERSION}` in \
                     `daemon/hello` (docs/PROTOCOL.md)"
                )
            } else {
                "the daemon is older than the client: restart it from the client's release \
                 (`gemctl daemon stop`, then start it again)"
                    .to_owned()
            };
            return Err(ErrorCode::VersionMismatch.error_with(
                format!(
                    "protocol version mismatch: {client} speaks version {}, this geminid \
                     ({DAEMON_VERSION}) speaks version {PROTOCOL_VERSION}; {fix}",
                    params.protocol_version
                ),
                serde_json::json!({
                    "clientVersion": params.protocol_version,
                    "daemonVersion": PROTOCOL_VERSION,
                }),
            ));
        }
        tracing::debug!(client, "hello");
        Ok(HelloResult {
            protocol_version: PROTOCOL_VERSION,
            daemon_version: DAEMON_VERSION.to_owned(),
            pid: std::process::id(),
            max_message_size: Some(self.core.limits().max_message_size),
        })
    }

    async fn status(&self) -> RpcResult<StatusResult> {
        Ok(self.core.status())
    }

    async fn doctor(&self, p: DoctorParams) -> RpcResult<DoctorResult> {
        self.core.doctor(&p.session).await.map_err(super::errors::rpc_error)
    }

    async fn shutdown(&self) -> RpcResult<ShutdownResult> {
        // In-flight calls, this reply included, are finished before connections close.
        self.core.request_shutdown("daemon/shutdown");
        Ok(ShutdownResult { pid: std::process::id() })
    }
}
