//! `prompts/*`, `resources/*` and `tools/instructions`: translation to [`crate::catalog`].

use geminid_protocol::api::{PromptsApiServer, ResourcesApiServer};
use geminid_protocol::tools::{
    CatalogParams, InstructionsResult, PromptsGetParams, PromptsGetResult, PromptsListResult,
    ResourcesListResult, ResourcesReadParams, ResourcesReadResult,
};
use jsonrpsee::core::{RpcResult, async_trait};

use super::Handler;
use super::errors::catalog_error;
use crate::catalog::ResourceRef;

impl Handler {
    pub(super) async fn instructions(&self, p: CatalogParams) -> RpcResult<InstructionsResult> {
        self.services.catalog.instructions(&p.session).await.map_err(catalog_error)
    }
}

#[async_trait]
impl PromptsApiServer for Handler {
    async fn prompts_list(&self, p: CatalogParams) -> RpcResult<PromptsListResult> {
        let (entries, diagnostics) =
            self.services.catalog.prompts(&p.session).await.map_err(catalog_error)?;
        Ok(PromptsListResult {
            prompts: entries.into_iter().map(|(e, _)| e).collect(),
            diagnostics,
        })
    }

    async fn prompts_get(&self, p: PromptsGetParams) -> RpcResult<PromptsGetResult> {
        let got = self.services.catalog.get_prompt(&p.session, &p.name, p.args, p.arguments);
        got.await.map_err(catalog_error)
    }
}

#[async_trait]
impl ResourcesApiServer for Handler {
    async fn resources_list(&self, p: CatalogParams) -> RpcResult<ResourcesListResult> {
        self.services.catalog.resources(&p.session).await.map_err(catalog_error)
    }

    async fn resources_read(&self, p: ResourcesReadParams) -> RpcResult<ResourcesReadResult> {
        let which = ResourceRef { server: p.server, uri: p.uri, reference: p.reference };
        self.services.catalog.read_resource(&p.session, which).await.map_err(catalog_error)
    }
}
