//! The requests the gateway passes to the server they belong to: a prompt got and a resource
//! read, completions (a prompt's
//! argument, by the prompt's served name; a resource template's, by the template) and resource
//! subscriptions (the server that lists the URI, or whose template matches it). A resource's
//! `notifications/resources/updated` comes back as an `mcp/resourceUpdated` event, which the
//! gateway forwards to the clients that subscribed.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Reference, ResultType, SubscribeRequestParams, UnsubscribeRequestParams,
};

use super::{Gateway, catalog_error};
use crate::catalog::CatalogError;
use crate::catalog::view::ResourceRef;

impl Gateway {
    /// `prompts/get`: the prompt of that served name, got from its server.
    pub(super) async fn forward_prompt(
        &self,
        request: GetPromptRequestParams,
    ) -> Result<GetPromptResponse, McpError> {
        let list = self.prompt_list().await?;
        let Some((_, server, own, _)) = list.into_iter().find(|(n, ..)| *n == request.name) else {
            return Err(McpError::invalid_params(
                format!("no prompt named '{}' in this session", request.name),
                None,
            ));
        };
        let raw = self
            .services
            .catalog
            .get_prompt_raw(&self.session, &server, &own, request.arguments)
            .await
            .map_err(catalog_error)?;
        serde_json::from_value::<GetPromptResult>(raw)
            .map(|mut r| {
                r.result_type = Some(ResultType::COMPLETE);
                r.into()
            })
            .map_err(|e| McpError::internal_error(format!("the prompt does not parse: {e}"), None))
    }

    /// `resources/read`: the first server (by name) that offers the URI reads it, as the list
    /// shows it.
    pub(super) async fn forward_read(
        &self,
        request: ReadResourceRequestParams,
    ) -> Result<ReadResourceResponse, McpError> {
        let server = self.owner_of_uri(&request.uri).await?;
        let which =
            ResourceRef { server: Some(server), uri: Some(request.uri.clone()), reference: None };
        let read = self.services.catalog.read_resource(&self.session, which).await;
        let read = read.map_err(|e| match e {
            CatalogError::NotInCatalog(m) => {
                McpError::resource_not_found(m, Some(serde_json::json!({ "uri": request.uri })))
            }
            other => catalog_error(other),
        })?;
        let contents =
            read.contents.into_iter().filter_map(|c| serde_json::from_value(c).ok()).collect();
        Ok(ReadResourceResult::new(contents).into())
    }

    /// The server (entry name) offering a resource URI or template.
    pub(super) async fn owner_of_uri(&self, uri: &str) -> Result<String, McpError> {
        let among = self.serving.server.as_deref();
        let owner = self.services.catalog.first_offering(&self.session, uri, among).await;
        owner.map_err(catalog_error)?.ok_or_else(|| {
            let data = Some(serde_json::json!({ "uri": uri }));
            McpError::resource_not_found(format!("no server here offers {uri}"), data)
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
        let catalog = &self.services.catalog;
        let mut done = catalog
            .on_server(&self.session, &server, |peer| async move { peer.complete(request).await })
            .await
            .map_err(catalog_error)?;
        done.result_type = Some(rmcp::model::ResultType::COMPLETE);
        Ok(done)
    }

    /// A subscription on the server that offers `uri`: `resources/subscribe` to one of the
    /// eras before 2026-07-28, a `subscriptions/listen` stream for the URI to one of that era
    /// (its updates emitted as the earlier eras' are, `mcp/resourceUpdated`, until the
    /// connection ends).
    #[allow(
        deprecated,
        reason = "resources/subscribe is the request of the eras before 2026-07-28"
    )]
    pub(super) async fn forward_subscribe(&self, uri: String) -> Result<(), McpError> {
        let server = self.owner_of_uri(&uri).await?;
        let identity = self.services.catalog.identity_of(&self.session, &server).await;
        let key: String = identity.unwrap_or_default().chars().take(12).collect();
        let params = SubscribeRequestParams::new(uri.clone());
        let catalog = &self.services.catalog;
        let listened = catalog
            .on_server(&self.session, &server, |peer| async move {
                if crate::mcp::connect::is_modern(&peer) {
                    let filter = rmcp::model::SubscriptionFilter::builder()
                        .resource_subscription(params.uri.clone())
                        .build();
                    peer.listen(filter).await.map(Some)
                } else {
                    peer.subscribe(params).await.map(|()| None)
                }
            })
            .await
            .map_err(catalog_error)?;
        if let Some(mut sub) = listened {
            let (events, server, key) = (self.services.events.clone(), server.clone(), key.clone());
            tokio::spawn(async move {
                while let Ok(Some(n)) = sub.next().await {
                    if let rmcp::model::ServerNotification::ResourceUpdatedNotification(u) = n {
                        let updated = geminid_protocol::mcp::ResourceUpdated {
                            server: server.clone(),
                            identity: key.clone(),
                            uri: u.params.uri,
                        };
                        events.emit(geminid_protocol::event::EventBody::ResourceUpdated(updated));
                    }
                }
            });
        }
        self.subscribed().insert((key, uri));
        Ok(())
    }

    /// Only this client's interest ends: the upstream subscription, which other clients of the
    /// same server may share, stays (its updates to nobody are dropped here).
    pub(super) fn forward_unsubscribe(&self, request: &UnsubscribeRequestParams) {
        self.subscribed().retain(|(_, uri)| *uri != request.uri);
    }
}
