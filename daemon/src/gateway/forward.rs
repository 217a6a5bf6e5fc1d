//! The requests the gateway passes to the server they belong to: completions (a prompt's
//! argument, by the prompt's served name; a resource template's, by the template) and resource
//! subscriptions (the server that lists the URI, or whose template matches it). A resource's
//! `notifications/resources/updated` comes back as an `mcp/resourceUpdated` event, which the
//! gateway forwards to the clients that subscribed.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, Reference, SubscribeRequestParams,
    UnsubscribeRequestParams,
};

use super::{Gateway, catalog_error};

impl Gateway {
    /// The server (entry name) offering a resource URI or template.
    pub(super) async fn owner_of_uri(&self, uri: &str) -> Result<String, McpError> {
        let owner = self.core.catalog.first_offering(&self.session, uri).await;
        owner.map_err(catalog_error)?.ok_or_else(|| {
            McpError::resource_not_found(format!("no server of this session offers {uri}"), None)
        })
    }

    pub(super) async fn forward_complete(
        &self,
        mut request: CompleteRequestParams,
    ) -> Result<CompleteResult, McpError> {
        let server = match &mut request.r#ref {
            Reference::Prompt(p) => {
                let list = self.prompt_list().await?;
                let Some((_, server, own, _)) = list.into_iter().find(|(n, ..)| *n == p.name)
                else {
                    return Err(McpError::invalid_params(
                        format!("no prompt named '{}' in this session", p.name),
                        None,
                    ));
                };
                p.name = own;
                server
            }
            Reference::Resource(r) => self.owner_of_uri(&r.uri).await?,
            _ => return Err(McpError::invalid_params("an unknown kind of reference", None)),
        };
        request.meta = None;
        let catalog = &self.core.catalog;
        catalog
            .on_server(&self.session, &server, |peer| async move { peer.complete(request).await })
            .await
            .map_err(catalog_error)
    }

    // `resources/subscribe` is the ≤ 2025-11-25 era's request, what the servers geminid connects
    // to take today; the 2026-07-28 era's `subscriptions/listen` is not forwarded yet.
    #[allow(deprecated)]
    pub(super) async fn forward_subscribe(&self, uri: String) -> Result<(), McpError> {
        let server = self.owner_of_uri(&uri).await?;
        let identity = self.core.catalog.identity_of(&self.session, &server).await;
        let params = SubscribeRequestParams::new(uri.clone());
        let catalog = &self.core.catalog;
        catalog
            .on_server(&self.session, &server, |peer| async move { peer.subscribe(params).await })
            .await
            .map_err(catalog_error)?;
        let key: String = identity.unwrap_or_default().chars().take(12).collect();
        self.subscribed().insert((key, uri));
        Ok(())
    }

    /// Only this client's interest ends: the upstream subscription, which other clients of the
    /// same server may share, stays (its updates to nobody are dropped here).
    pub(super) fn forward_unsubscribe(&self, request: &UnsubscribeRequestParams) {
        self.subscribed().retain(|(_, uri)| *uri != request.uri);
    }
}
