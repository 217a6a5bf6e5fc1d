//! `skills/*` and `agents/*`: translation to the core's skills.

use geminid_protocol::api::{AgentsApiServer, SkillsApiServer};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::skills::{
    AgentsListResult, SkillActivateParams, SkillActivateResult, SkillEnableParams,
    SkillEnableResult, SkillInstallParams, SkillInstallResult, SkillUninstallParams,
    SkillUninstallResult, SkillsListParams, SkillsListResult, SkillsPromptResult,
};
use jsonrpsee::core::{RpcResult, async_trait};
use jsonrpsee::types::ErrorObjectOwned;

use super::Handler;
use super::errors::call_error;
use super::errors::rpc_error;
use crate::services::skills::SkillsError;
use crate::skills::SkillError;

fn skills_error(e: SkillsError) -> ErrorObjectOwned {
    match e {
        SkillsError::Session(e) => rpc_error(e),
        SkillsError::Call(e) => call_error(e),
        SkillsError::Skill(e) => {
            let code = match &e {
                SkillError::NotFound(_) => ErrorCode::SkillNotFound,
                SkillError::Refused(_) => ErrorCode::ConfigRefused,
                SkillError::Io(_) => ErrorCode::ConfigWrite,
            };
            code.error(e.to_string())
        }
    }
}

#[async_trait]
impl SkillsApiServer for Handler {
    async fn skills_list(&self, p: SkillsListParams) -> RpcResult<SkillsListResult> {
        self.skills.list(&p.session, p.instructions).map_err(skills_error)
    }

    async fn skills_prompt(&self, p: SkillsListParams) -> RpcResult<SkillsPromptResult> {
        self.skills.prompt(&p.session).map_err(skills_error)
    }

    async fn skills_activate(&self, p: SkillActivateParams) -> RpcResult<SkillActivateResult> {
        self.skills.activate(p).await.map_err(skills_error)
    }

    async fn skills_install(&self, p: SkillInstallParams) -> RpcResult<SkillInstallResult> {
        self.skills.install(p, false).await.map_err(skills_error)
    }

    async fn skills_link(&self, p: SkillInstallParams) -> RpcResult<SkillInstallResult> {
        self.skills.install(p, true).await.map_err(skills_error)
    }

    async fn skills_uninstall(&self, p: SkillUninstallParams) -> RpcResult<SkillUninstallResult> {
        self.skills.uninstall(&p.session, &p.name, p.scope).await.map_err(skills_error)
    }

    async fn skills_enable(&self, p: SkillEnableParams) -> RpcResult<SkillEnableResult> {
        let r = self.skills.set_enabled(&self.reloader, &p.session, &p.name, true, p.scope).await;
        r.map_err(skills_error)
    }

    async fn skills_disable(&self, p: SkillEnableParams) -> RpcResult<SkillEnableResult> {
        let r = self.skills.set_enabled(&self.reloader, &p.session, &p.name, false, p.scope).await;
        r.map_err(skills_error)
    }
}

#[async_trait]
impl AgentsApiServer for Handler {
    async fn agents_list(&self, p: SkillsListParams) -> RpcResult<AgentsListResult> {
        self.skills.agents(&p.session).map_err(skills_error)
    }
}

#[async_trait]
impl geminid_protocol::api::CommandsApiServer for Handler {
    async fn commands_list(
        &self,
        p: geminid_protocol::commands::CommandsListParams,
    ) -> RpcResult<geminid_protocol::commands::CommandsListResult> {
        self.commands.list(&p).map_err(skills_error)
    }

    async fn commands_expand(
        &self,
        p: geminid_protocol::commands::CommandsExpandParams,
    ) -> RpcResult<geminid_protocol::commands::CommandsExpandResult> {
        self.commands.expand(p).await.map_err(skills_error)
    }
}
