//! A call's progress notifications and log messages, in order and before its answer. rmcp
//! hands each notification a server sends to a task of its own and the response straight to
//! the caller, so progress could be routed out of order, or after its call had its answer (and
//! then be lost: the call has gone). [`Routed`] routes a connection's progress notifications
//! and log messages as they come off the wire instead, before the next message is read: in
//! the server's order, and all of them before the answer that follows them (a log message
//! goes on to rmcp too, for the server's log).

use std::sync::Weak;

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::server::Observer;

/// A client transport that routes the progress notifications and log messages it receives
/// (and passes every other message on, log messages too).
pub(crate) struct Routed<T> {
    inner: T,
    /// The server's identity (progress tokens are only unique per connection).
    identity: String,
    sup: Weak<dyn Observer>,
}

impl<T> Routed<T> {
    pub(crate) fn new(inner: T, identity: &str, sup: Weak<dyn Observer>) -> Self {
        Self { inner, identity: identity.to_owned(), sup }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Routed<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await;
            if let Some(JsonRpcMessage::Notification(n)) = &message
                && let ServerNotification::ProgressNotification(p) = &n.notification
            {
                if let Some(sup) = self.sup.upgrade() {
                    sup.progress(&self.identity, &p.params);
                }
                continue;
            }
            if let Some(JsonRpcMessage::Notification(n)) = &message
                && let ServerNotification::LoggingMessageNotification(m) = &n.notification
                && let Some(sup) = self.sup.upgrade()
            {
                sup.message(&self.identity, &m.params);
            }
            return message;
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
