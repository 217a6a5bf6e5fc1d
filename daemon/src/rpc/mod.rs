//! The JSON-RPC surface: one file per namespace, each translating calls into calls of the
//! services (reads, calls, asks, events), of the feature services the core built (skills,
//! commands, policy, settings, extensions, reloads, sessions' servers, sign-ins), or, for the
//! sessions' lifecycle, status and the doctor, of the [`Core`]. No logic lives here beyond
//! argument plumbing and error mapping.

mod asks;
mod auth;
mod catalog;
mod config;
mod daemon;
mod errors;
mod events;
mod extensions;
mod hooks;
mod mcp;
mod params;
mod policy;
mod session;
mod skills;
mod tasks;
mod tools;

use std::sync::Arc;

use geminid_protocol::api::{
    AgentsApiServer, AsksApiServer, AuditApiServer, AuthApiServer, ConfigApiServer,
    ConfirmationApiServer, ContextApiServer, DaemonApiServer, ElicitationApiServer,
    EventsApiServer, ExtensionsApiServer, HooksApiServer, McpApiServer, McpLogsApiServer,
    PolicyApiServer, PromptsApiServer, ResourcesApiServer, SamplingApiServer, SessionApiServer,
    SkillsApiServer, TasksApiServer, ToolsApiServer, TrustApiServer,
};
use jsonrpsee::{Extensions, Methods, RpcModule};

pub(crate) use params::Intake;

use crate::core::Core;
use crate::services::Services;
use crate::services::auth::SignIns;
use crate::services::commands::Commands;
use crate::services::configs::Configs;
use crate::services::extensions::ExtensionService;
use crate::services::policy::requests::PolicyRequests;
use crate::services::reload::Reloader;
use crate::services::servers::SessionServers;
use crate::services::settings::Settings;
use crate::services::skills::Skills;
use crate::session::ConnId;

/// Implements every namespace's server trait over the services and the core.
#[derive(Debug, Clone)]
pub(crate) struct Handler {
    /// The services a method uses directly.
    services: Arc<Services>,
    /// Skills and agent definitions.
    skills: Arc<Skills>,
    /// Slash commands.
    commands: Arc<Commands>,
    /// Each session's policy, asked outside a call.
    policy: Arc<PolicyRequests>,
    /// Extensions installed, updated, enabled and removed.
    extensions: Arc<ExtensionService>,
    /// Gemini CLI's files read and changed.
    settings: Arc<Settings>,
    /// Reloads (`mcp/reload`, and what a change made through the daemon asks).
    reloader: Arc<Reloader>,
    /// Each session's effective configuration.
    config: Arc<Configs>,
    /// Sessions' servers, listed and started.
    servers: Arc<SessionServers>,
    /// Sign-ins to remote servers.
    sign_ins: Arc<SignIns>,
    /// The sessions' lifecycle, status and the doctor.
    core: Arc<Core>,
}

/// Every method the daemon serves.
pub(crate) fn methods(core: Arc<Core>) -> Result<Methods, jsonrpsee::core::RegisterMethodError> {
    let handler = Handler {
        services: core.services().clone(),
        skills: core.skills().clone(),
        commands: core.commands().clone(),
        policy: core.policy().clone(),
        extensions: core.extensions().clone(),
        settings: core.settings().clone(),
        reloader: core.reloader().clone(),
        config: core.configs().clone(),
        servers: core.servers().clone(),
        sign_ins: core.sign_ins().clone(),
        core,
    };
    let mut module = RpcModule::new(());
    module.merge(DaemonApiServer::into_rpc(handler.clone()))?;
    module.merge(SessionApiServer::into_rpc(handler.clone()))?;
    module.merge(EventsApiServer::into_rpc(handler.clone()))?;
    module.merge(ConfigApiServer::into_rpc(handler.clone()))?;
    module.merge(TrustApiServer::into_rpc(handler.clone()))?;
    module.merge(ContextApiServer::into_rpc(handler.clone()))?;
    module.merge(McpApiServer::into_rpc(handler.clone()))?;
    module.merge(McpLogsApiServer::into_rpc(handler.clone()))?;
    module.merge(ToolsApiServer::into_rpc(handler.clone()))?;
    module.merge(PromptsApiServer::into_rpc(handler.clone()))?;
    module.merge(ElicitationApiServer::into_rpc(handler.clone()))?;
    module.merge(SamplingApiServer::into_rpc(handler.clone()))?;
    module.merge(TasksApiServer::into_rpc(handler.clone()))?;
    module.merge(geminid_protocol::api::CallsApiServer::into_rpc(handler.clone()))?;
    module.merge(ResourcesApiServer::into_rpc(handler.clone()))?;
    module.merge(AsksApiServer::into_rpc(handler.clone()))?;
    module.merge(AuthApiServer::into_rpc(handler.clone()))?;
    module.merge(PolicyApiServer::into_rpc(handler.clone()))?;
    module.merge(ConfirmationApiServer::into_rpc(handler.clone()))?;
    module.merge(AuditApiServer::into_rpc(handler.clone()))?;
    module.merge(ExtensionsApiServer::into_rpc(handler.clone()))?;
    module.merge(SkillsApiServer::into_rpc(handler.clone()))?;
    module.merge(AgentsApiServer::into_rpc(handler.clone()))?;
    module.merge(geminid_protocol::api::CommandsApiServer::into_rpc(handler.clone()))?;
    module.merge(HooksApiServer::into_rpc(handler))?;
    #[cfg(debug_assertions)]
    if crate::clock::driven::on() {
        module.merge(advance_clock()?)?;
    }
    Ok(module.into())
}

/// `testing/advanceClock {"ms": N}`: the daemon's clock moved forward, answered once every
/// timer on it has seen the new time. Served only by a debug build whose tests drive its clock
/// (`clock::driven`); not part of the protocol.
#[cfg(debug_assertions)]
fn advance_clock() -> Result<RpcModule<()>, jsonrpsee::core::RegisterMethodError> {
    let mut module = RpcModule::new(());
    module.register_async_method("testing/advanceClock", |params, _, _| async move {
        #[derive(serde::Deserialize)]
        struct Advance {
            ms: u64,
        }
        // (`params.rs` hands every method its object as `[object]`.)
        let Advance { ms } = params.one::<Advance>()?;
        crate::clock::driven::advance(std::time::Duration::from_millis(ms)).await;
        Ok::<_, jsonrpsee::types::ErrorObjectOwned>(())
    })?;
    Ok(module)
}

/// The connection a call arrived on (set by the accept loop through jsonrpsee).
fn conn_id(ext: &Extensions) -> ConnId {
    let id = ext.get::<jsonrpsee::ConnectionId>().map_or(0, |c| c.0);
    ConnId(u32::try_from(id).unwrap_or(u32::MAX))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const DOC: &str = include_str!("../../../docs/PROTOCOL.md");

    /// The lines of the section under `## {title}`.
    fn section(title: &str) -> Vec<&'static str> {
        let start = format!("## {title}");
        DOC.lines()
            .skip_while(|l| *l != start)
            .skip(1)
            .take_while(|l| !l.starts_with("## "))
            .collect()
    }

    /// Every `backticked` word in the first cell of a table's rows; the rows must be one
    /// table (a blank line inside would make the rest render as text).
    fn first_cells(lines: &[&str], header: &str) -> BTreeSet<String> {
        let rows: Vec<&str> = lines
            .iter()
            .skip_while(|l| !l.starts_with(header))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .copied()
            .collect();
        let after: Vec<&&str> =
            lines.iter().skip_while(|l| !l.starts_with(header)).skip(2 + rows.len()).collect();
        assert!(
            !after
                .iter()
                .take_while(|l| !l.starts_with('`') && !l.starts_with('#'))
                .any(|l| l.starts_with("| `")),
            "a blank line cuts the table under {header:?}"
        );
        rows.iter()
            .filter_map(|r| r.split('|').nth(1))
            .flat_map(|cell| {
                cell.split('`').skip(1).step_by(2).map(str::to_owned).collect::<Vec<_>>()
            })
            .collect()
    }

    /// A core over a temporary home and an in-memory store (the directory must outlive it).
    pub(crate) fn core() -> anyhow::Result<(tempfile::TempDir, Arc<Core>)> {
        let dir = tempfile::tempdir()?;
        let home = dir.path().to_path_buf();
        let paths =
            crate::config::ConfigPaths::from_env(|k| (k == "HOME").then(|| home.clone().into()))?;
        let info = crate::core::DaemonInfo {
            socket: dir.path().join("s"),
            data_dir: dir.path().to_path_buf(),
            limits: geminid_protocol::daemon::Limits {
                max_connections: 1,
                max_message_size: 1024,
                subscriber_buffer: 1,
            },
            mcp: crate::mcp::McpOptions::default(),
            secrets_file_only: true,
            confirm_timeout: std::time::Duration::from_secs(300),
            custom_tools: crate::discovered::Options::default(),
            warm_workspaces: 0,
            tool_pinning: Default::default(),
            artifact_pinning: Default::default(),
        };
        let core =
            Core::new(crate::store::Store::temporary()?, info, crate::config::Loader::new(paths));
        Ok((dir, core))
    }

    #[tokio::test]
    async fn the_protocol_page_matches_what_the_daemon_serves() -> anyhow::Result<()> {
        let (_dir, core) = core()?;
        let served: BTreeSet<String> = methods(core)?.method_names().map(str::to_owned).collect();
        let documented = first_cells(&section("Methods"), "| method |");
        assert_eq!(documented, served, "docs/PROTOCOL.md's methods table and the daemon differ");

        let codes: BTreeSet<String> = first_cells(&section("Errors"), "| code |")
            .into_iter()
            .chain(
                section("Errors")
                    .iter()
                    .filter_map(|l| l.split('|').nth(1))
                    .map(|c| c.trim().to_owned()),
            )
            .collect();
        for c in geminid_protocol::error::ErrorCode::ALL {
            assert!(
                codes.contains(&c.code().to_string()),
                "error {} ({}) is not documented",
                c.code(),
                c.name()
            );
        }
        for (code, name) in geminid_protocol::error::TRANSPORT_CODES {
            assert!(
                codes.contains(&code.to_string()),
                "transport error {code} ({name}) is not documented"
            );
        }
        let kinds = first_cells(&section("Events"), "| kind |");
        let want: BTreeSet<String> =
            geminid_protocol::event::KINDS.iter().map(|k| (*k).to_owned()).collect();
        assert_eq!(kinds, want, "docs/PROTOCOL.md's events table and the event kinds differ");
        Ok(())
    }
}
