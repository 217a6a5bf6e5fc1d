//! What a server task reports and asks ([`Observer`]), answered by the supervisor: state and
//! catalog changes become events (`status`), progress and log messages go up to the sessions,
//! what a server asks is answered for the caller's session (`asked`), and what differs from
//! its pins is said (`pinning`).

use std::sync::Arc;

use geminid_protocol::event::EventBody;
use geminid_protocol::mcp::ServerState;

use super::messages::ServerMessage;
use super::orphans;
use super::roots;
use super::server::{Observer, Server};
use super::supervisor::Supervisor;
use crate::store::Store;

/// What a server task reports and asks, through [`Observer`].
#[allow(
    deprecated,
    reason = "sampling and roots are SEP-2577-deprecated; servers of the eras before 2026-07-28 use them"
)]
impl Observer for Supervisor {
    fn state_changed(&self, server: &Arc<Server>, previous: ServerState) {
        self.status().announce(server, previous);
    }

    fn catalog_changed(&self, server: &Arc<Server>) {
        self.status().catalog_changed(server);
    }

    fn progress(&self, identity: &str, params: &rmcp::model::ProgressNotificationParam) {
        self.callers.progress(identity, params);
    }

    fn elicit(
        &self,
        identity: &str,
        origin: Option<rmcp::model::RequestId>,
        params: rmcp::model::ElicitRequestParams,
    ) -> futures::future::BoxFuture<'static, rmcp::model::ElicitResult> {
        self.asked().elicit_for(identity, origin.as_ref(), params)
    }

    fn sample(
        &self,
        identity: &str,
        origin: Option<rmcp::model::RequestId>,
        params: rmcp::model::CreateMessageRequestParams,
    ) -> futures::future::BoxFuture<
        'static,
        Result<rmcp::model::CreateMessageResult, rmcp::ErrorData>,
    > {
        self.asked().sample_for(identity, origin.as_ref(), params)
    }

    fn roots(
        &self,
        identity: &str,
        origin: Option<rmcp::model::RequestId>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        Ok(roots::result(&self.asked().roots_for(identity, origin.as_ref())))
    }

    fn message(&self, identity: &str, params: &rmcp::model::LoggingMessageNotificationParam) {
        if self.messages.receiver_count() > 0 {
            let m = ServerMessage {
                identity: identity.to_owned(),
                params: params.clone(),
                calls: self.callers.in_flight(identity),
            };
            let _ = self.messages.send(Arc::new(m));
        }
    }

    fn resource_updated(&self, identity: &str, uri: &str) {
        let name =
            self.registry.lock().servers.get(identity).map(|s| s.name.clone()).unwrap_or_default();
        self.events.emit(EventBody::ResourceUpdated(geminid_protocol::mcp::ResourceUpdated {
            server: name,
            identity: identity.chars().take(12).collect(),
            uri: uri.to_owned(),
        }));
    }

    fn store(&self) -> &Store {
        Supervisor::store(self)
    }

    fn auth(&self) -> Arc<crate::auth::Auth> {
        self.auth.clone()
    }

    fn start_gate(&self) -> tokio::sync::watch::Receiver<orphans::Held> {
        self.start_gate.subscribe()
    }

    fn pins(&self) -> Arc<crate::pins::Pins> {
        self.pins.clone()
    }

    fn pins_changed(&self, server: &Arc<Server>, fresh: &[geminid_protocol::pins::HeldDefinition]) {
        self.pinning().announce_pins(server, fresh);
    }
}
