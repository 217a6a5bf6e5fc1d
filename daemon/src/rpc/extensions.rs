//! `extensions/*`: translation to the core's extensions.

use geminid_protocol::api::ExtensionsApiServer;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::extensions::{
    ExtensionEnableParams, ExtensionEnableResult, ExtensionInfo, ExtensionInstallParams,
    ExtensionInstallResult, ExtensionNameParams, ExtensionUninstallResult, ExtensionUpdateParams,
    ExtensionUpdateResult, ExtensionsListParams, ExtensionsListResult, ExtensionsVerifyParams,
};
use jsonrpsee::core::{RpcResult, async_trait};
use jsonrpsee::types::ErrorObjectOwned;

use super::Handler;
use super::errors::rpc_error;
use crate::extensions::ExtensionError;
use crate::services::extensions::ExtensionsError;

fn extensions_error(e: ExtensionsError) -> ErrorObjectOwned {
    match e {
        ExtensionsError::Session(e) => rpc_error(e),
        ExtensionsError::Extension(e) => {
            let code = match &e {
                ExtensionError::NotFound(_) => ErrorCode::ExtensionNotFound,
                ExtensionError::Refused(_) => ErrorCode::ConfigRefused,
                ExtensionError::Integrity(_) => ErrorCode::IntegrityFailed,
                ExtensionError::Io(_) => ErrorCode::ConfigWrite,
            };
            code.error(e.to_string())
        }
    }
}

#[async_trait]
impl ExtensionsApiServer for Handler {
    async fn extensions_list(&self, p: ExtensionsListParams) -> RpcResult<ExtensionsListResult> {
        self.extensions.list(&p.session).map_err(extensions_error)
    }

    async fn extensions_verify(
        &self,
        p: ExtensionsVerifyParams,
    ) -> RpcResult<ExtensionsListResult> {
        self.extensions.verify(&p.session, p.name.as_deref()).await.map_err(extensions_error)
    }

    async fn extensions_accept(&self, p: ExtensionNameParams) -> RpcResult<ExtensionInfo> {
        self.extensions.accept(&p.session, &p.name).await.map_err(extensions_error)
    }

    async fn extensions_enable(
        &self,
        p: ExtensionEnableParams,
    ) -> RpcResult<ExtensionEnableResult> {
        let r = self.extensions.set_enabled(&p.session, &p.name, true, p.scope).await;
        r.map_err(extensions_error)
    }

    async fn extensions_disable(
        &self,
        p: ExtensionEnableParams,
    ) -> RpcResult<ExtensionEnableResult> {
        let r = self.extensions.set_enabled(&p.session, &p.name, false, p.scope).await;
        r.map_err(extensions_error)
    }

    async fn extensions_install(
        &self,
        p: ExtensionInstallParams,
    ) -> RpcResult<ExtensionInstallResult> {
        let r = self.extensions.install(&p.session, &p.clone(), false).await;
        r.map_err(extensions_error)
    }

    async fn extensions_link(
        &self,
        p: ExtensionInstallParams,
    ) -> RpcResult<ExtensionInstallResult> {
        let r = self.extensions.install(&p.session, &p.clone(), true).await;
        r.map_err(extensions_error)
    }

    async fn extensions_update(
        &self,
        p: ExtensionUpdateParams,
    ) -> RpcResult<ExtensionUpdateResult> {
        self.extensions.update(&p).await.map_err(extensions_error)
    }

    async fn extensions_uninstall(
        &self,
        p: ExtensionNameParams,
    ) -> RpcResult<ExtensionUninstallResult> {
        self.extensions.uninstall(&p.session, &p.name).await.map_err(extensions_error)
    }
}
