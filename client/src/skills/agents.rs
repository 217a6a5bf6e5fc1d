//! `gemctl agents list|show`: agent definitions (subagents) as the session sees them.

use std::process::ExitCode;

use clap::Subcommand;
use geminid_protocol::api::AgentsApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::skills::{AgentInfo, AgentKind, SkillsListParams};

use crate::error::call_error;
use crate::output;
use crate::output::{errln, outln};
use crate::skills::manage::print_diagnostics;

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// The agent definitions this session sees
    List,
    /// One agent definition
    Show {
        /// The agent
        name: String,
    },
}

fn print_agent(a: &AgentInfo, full: bool) {
    let kind = if a.kind == AgentKind::Remote { " [remote]" } else { "" };
    outln!("{}{kind}", a.name);
    outln!("  Description: {}", a.description);
    outln!("  Location:    {}", a.location);
    if let Some(t) = &a.tools {
        outln!("  Tools:       {}", t.join(", "));
    }
    if full {
        if let Some(m) = &a.model {
            outln!("  Model:       {m}");
        }
        if !a.mcp_servers.is_empty() {
            outln!("  MCP servers: {}", a.mcp_servers.join(", "));
        }
        for o in &a.overrides {
            outln!("  Overrides:   {o}");
        }
    }
}

/// Run an agents command for `session`.
pub async fn run_agents(
    client: &Client,
    session: String,
    cmd: AgentsCommand,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let r = client
        .agents_list(SkillsListParams { session, instructions: false })
        .await
        .map_err(call_error("agents/list"))?;
    match cmd {
        AgentsCommand::List => {
            if json {
                output::json(&r)?;
            } else if r.agents.is_empty() {
                outln!("No agent definitions found.");
            } else {
                r.agents.iter().for_each(|a| print_agent(a, false));
            }
            print_diagnostics(&r.diagnostics);
            Ok(ExitCode::SUCCESS)
        }
        AgentsCommand::Show { name } => {
            let Some(a) = r.agents.iter().find(|a| a.name == name) else {
                errln!("gemctl: no agent definition named \"{name}\" here");
                print_diagnostics(&r.diagnostics);
                return Ok(ExitCode::from(1));
            };
            if json {
                output::json(a)?;
            } else {
                print_agent(a, true);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
