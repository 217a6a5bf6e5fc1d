//! `prompts/*`, `resources/*` and `tools/instructions`: translation to [`crate::catalog`].

use geminid_protocol::api::{PromptsApiServer, ResourcesApiServer};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::tools::{
    CatalogParams, InstructionsResult, PromptsGetParams, PromptsGetResult, PromptsListResult,
    ResourcesListResult, ResourcesReadParams, ResourcesReadResult,
};
use jsonrpsee::core::{RpcResult, async_trait};
use jsonrpsee::types::ErrorObjectOwned;

use super::Handler;
use super::mcp::mcp_error;
use super::session::rpc_error;
use crate::catalog::{CatalogError, ResourceRef};

/// A failed catalog request as the protocol says it.
pub(super) fn catalog_error(e: CatalogError) -> ErrorObjectOwned {
    let code = match e {
        CatalogError::Session(e) => return rpc_error(e),
        CatalogError::Mcp(e) => return mcp_error(e),
        CatalogError::NotInCatalog(_) => ErrorCode::NotInCatalog,
        CatalogError::MissingArguments(_) => ErrorCode::MissingArguments,
        CatalogError::Unusable(_) => ErrorCode::ServerError,
    };
    code.error(e.to_string())
}

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
