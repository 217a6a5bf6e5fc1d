//! `hooks/*`: translation to the core's hooks.

use geminid_protocol::api::HooksApiServer;
use geminid_protocol::config::WriteScope;
use geminid_protocol::error::ErrorCode;
use geminid_protocol::hooks::{
    HooksEnableParams, HooksEnableResult, HooksFireParams, HooksFireResult, HooksListParams,
    HooksListResult, HooksMigrateParams, HooksMigrateResult,
};
use jsonrpsee::core::{RpcResult, async_trait};

use super::Handler;
use super::errors::rpc_error;
use crate::hooks::HookEvent;

#[async_trait]
impl HooksApiServer for Handler {
    async fn hooks_list(&self, p: HooksListParams) -> RpcResult<HooksListResult> {
        self.services.hooks.list(&p.session).map_err(rpc_error)
    }

    async fn hooks_fire(&self, p: HooksFireParams) -> RpcResult<HooksFireResult> {
        let names = || HookEvent::ALL.map(HookEvent::name).join(", ");
        let Some(event) = HookEvent::named(&p.event) else {
            return Err(ErrorCode::InvalidArguments.error(format!(
                "\"{}\" is not a hook event: {}",
                p.event,
                names()
            )));
        };
        // A tool's hooks run inside tools/call; fired here they are a dry run for a call that
        // is not made, which needs the tool (issue 63, C14).
        let tool_event = matches!(event, HookEvent::BeforeTool | HookEvent::AfterTool);
        if tool_event && !p.input.get("tool_name").is_some_and(serde_json::Value::is_string) {
            return Err(ErrorCode::InvalidArguments.error(format!(
                "a dry run of {} hooks needs the call: input.tool_name (the tool as the model \
                 calls it) and input.tool_input (its arguments), e.g. `gemctl hooks run {} \
                 --tool mcp_notes_delete --args '{{\"id\": 1}}'`; nothing is called",
                event.name(),
                event.name()
            )));
        }
        self.services.sessions.record(&p.session).map_err(rpc_error)?;
        self.services.hooks.fire_event(&p.session, event, p.input).await.map_err(rpc_error)
    }

    async fn hooks_enable(&self, p: HooksEnableParams) -> RpcResult<HooksEnableResult> {
        let scope = p.scope.unwrap_or(WriteScope::User);
        let changed = self.settings.set_hook_enabled(&p.session, scope, &p.name, true).await;
        changed.map_err(super::config::change_error)
    }

    async fn hooks_disable(&self, p: HooksEnableParams) -> RpcResult<HooksEnableResult> {
        let scope = p.scope.unwrap_or(WriteScope::User);
        let changed = self.settings.set_hook_enabled(&p.session, scope, &p.name, false).await;
        changed.map_err(super::config::change_error)
    }

    async fn hooks_migrate(&self, p: HooksMigrateParams) -> RpcResult<HooksMigrateResult> {
        let migrated = self.settings.hooks_migrate(&p.session, p.dry_run).await;
        migrated.map_err(super::config::change_error)
    }
}
