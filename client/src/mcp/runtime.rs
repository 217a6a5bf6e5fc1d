//! `gemctl mcp list|start|stop|restart|logs|review|accept|reject|update`: the running servers.

use clap::Subcommand;
use geminid_protocol::api::McpApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::mcp::{
    ListServersParams, LogsParams, ServerParams, ServerState, ServerStatus, StartParams,
};

use crate::error::call_error;
use crate::output;

// `display_order`: placed among `McpCommand`'s (see there).
#[derive(Debug, Clone, Subcommand)]
pub enum RuntimeCommand {
    /// List the session's servers and their state (starts nothing)
    #[command(display_order = 1)]
    List {
        /// Every server the daemon runs, for all sessions
        #[arg(long)]
        all: bool,
    },
    /// Start the session's servers now and wait until each has connected or failed
    #[command(display_order = 4)]
    Start,
    /// Stop a running server now; it stays stopped until `gemctl mcp restart` (or its
    /// session's next start)
    #[command(display_order = 5)]
    Stop {
        /// Server name
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::servers))]
        name: String,
    },
    /// Restart a running server (also ends crash-loop and needs-auth)
    #[command(display_order = 6)]
    Restart {
        /// Server name
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::servers))]
        name: String,
    },
    /// List the session's tools (their names as Gemini sees them)
    #[command(display_order = 8)]
    Tools {
        /// Only this server's
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::servers))]
        server: Option<String>,
    },
    /// Show a tool's declaration (schema) and its MCP object
    #[command(display_order = 9)]
    Describe {
        /// The tool (its full name, or its name on the server)
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::tools))]
        tool: String,
    },
    /// List the session's MCP prompts as slash commands
    #[command(display_order = 10)]
    Prompts,
    /// List the session's MCP resources (`@server:uri` references)
    #[command(display_order = 11)]
    Resources,
    /// Show what of a server's tools, prompts and resource templates differs from the
    /// definitions pinned on its first use (held until accepted): a diff, hidden text shown
    #[command(display_order = 17)]
    Review {
        /// Server name
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::servers))]
        name: String,
    },
    /// Pin a server's differing definitions as it lists them now (all, or those named), so
    /// the held ones are offered again
    #[command(display_order = 18)]
    Accept {
        /// Server name
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::servers))]
        name: String,
        /// Only these (tool, prompt or resource template names)
        definitions: Vec<String>,
        /// The digest `gemctl mcp review` printed: pin only what that review showed (refused
        /// if the server lists it otherwise now). Without it, refused when the server lists a
        /// definition otherwise than its last review showed
        #[arg(long)]
        digest: Option<String>,
    },
    /// Say no to a server's differing definitions (all, or those named): they stay held
    #[command(display_order = 19)]
    Reject {
        /// Server name
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::servers))]
        name: String,
        /// Only these (tool, prompt or resource template names)
        definitions: Vec<String>,
    },
    /// Move a local server to its newest release on purpose (npm's `latest`, or its
    /// executable as it is now): shown old → new as a review that `gemctl mcp accept` takes;
    /// it keeps running what was recorded until then
    #[command(display_order = 20)]
    Update {
        /// Server name
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::servers))]
        name: String,
        /// Take it at once: record it and restart the server on it
        #[arg(short, long)]
        yes: bool,
    },
    /// Show a server's log: its stderr and what geminid did
    #[command(display_order = 7)]
    Logs {
        /// Server name
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::servers))]
        name: String,
        /// Keep printing new lines until Ctrl-C
        #[arg(short, long)]
        follow: bool,
        /// Only the newest N lines
        #[arg(short = 'n', long, value_name = "N")]
        lines: Option<u32>,
    },
}

/// A server that was meant to run and did not (a disabled or blocked one is not a failure).
fn failed(s: &ServerStatus) -> bool {
    failed_state(s.state)
}

impl RuntimeCommand {
    /// Whether it needs a session (the current directory's default one unless `--session`).
    /// Restart and logs find a running server by name across sessions unless one is given.
    /// Restart and logs: a server by name, this directory's first (`--session` names another).
    pub fn by_name(&self) -> bool {
        matches!(
            self,
            Self::Restart { .. }
                | Self::Stop { .. }
                | Self::Logs { .. }
                | Self::Review { .. }
                | Self::Accept { .. }
                | Self::Reject { .. }
                | Self::Update { .. }
        )
    }

    pub fn needs_session(&self) -> bool {
        matches!(
            self,
            Self::List { all: false }
                | Self::Start
                | Self::Tools { .. }
                | Self::Describe { .. }
                | Self::Prompts
                | Self::Resources
        )
    }
}

pub async fn run(
    client: &Client,
    session: Option<String>,
    cmd: RuntimeCommand,
    json: bool,
) -> anyhow::Result<()> {
    match cmd {
        RuntimeCommand::List { all } => {
            let session = if all { None } else { session };
            let r = client
                .mcp_list_servers(Some(ListServersParams {
                    session: session.clone(),
                    usage: false,
                }))
                .await
                .map_err(call_error("mcp/listServers"))?;
            if json {
                // Scripts get one shape, the array; what a person should read goes to stderr.
                output::warnings_to_stderr(&r.warnings);
                output::json(&r.servers)?
            } else if all {
                output::servers::running_servers(&r.servers)
            } else {
                output::warnings(&r.warnings);
                output::servers::servers(&r.servers);
                if let Some(s) = session {
                    crate::policy::rules::unaccepted_note(client, s).await;
                }
            }
        }
        RuntimeCommand::Tools { server } => {
            crate::tools::list::tools(client, session.unwrap_or_default(), server, json).await?;
        }
        RuntimeCommand::Describe { tool } => {
            crate::tools::list::describe(client, session.unwrap_or_default(), tool).await?;
        }
        RuntimeCommand::Prompts => {
            crate::tools::prompts::prompts(client, session.unwrap_or_default(), json).await?;
        }
        RuntimeCommand::Resources => {
            crate::tools::prompts::resources(client, session.unwrap_or_default(), json).await?;
        }
        RuntimeCommand::Start => {
            let session = session.unwrap_or_default();
            let mut shown = crate::output::progress::Progress::on_stderr();
            let start = client.mcp_start(StartParams { session: session.clone(), wait: true });
            let r = if shown.is_live() && !json {
                starting(client, &session, start, &mut shown).await
            } else {
                start.await
            }
            .map_err(call_error("mcp/start"))?;
            shown.finish();
            if json {
                output::warnings_to_stderr(&r.warnings);
                output::json(&r.servers)?
            } else {
                output::warnings(&r.warnings);
                output::servers::servers(&r.servers)
            }
            if r.servers.iter().any(failed) {
                return Err(crate::error::Failed.into());
            }
        }
        RuntimeCommand::Restart { name } => {
            let s = client
                .mcp_restart(ServerParams { session, name })
                .await
                .map_err(call_error("mcp/restart"))?;
            if json {
                output::json(&s)?;
            } else {
                output::servers::server(&s);
            }
            if s.state != ServerState::Connected {
                return Err(crate::error::Failed.into());
            }
        }
        RuntimeCommand::Stop { name } => {
            let s = client
                .mcp_stop(ServerParams { session, name })
                .await
                .map_err(call_error("mcp/stop"))?;
            if json {
                output::json(&s)?;
            } else {
                output::servers::server(&s);
            }
        }
        RuntimeCommand::Review { name } => {
            crate::mcp::pins::review(client, ServerParams { session, name }, json).await?;
        }
        RuntimeCommand::Accept { name, definitions, digest } => {
            let server = ServerParams { session, name };
            crate::mcp::pins::settle(client, server, definitions, digest, true, json).await?;
        }
        RuntimeCommand::Reject { name, definitions } => {
            let server = ServerParams { session, name };
            crate::mcp::pins::settle(client, server, definitions, None, false, json).await?;
        }
        RuntimeCommand::Update { name, yes } => {
            crate::mcp::pins::update(client, ServerParams { session, name }, yes, json).await?;
        }
        RuntimeCommand::Logs { name, follow, lines } => {
            let server = ServerParams { session, name };
            // Subscribe first, so no line falls between the tail and the stream.
            let sub = if follow {
                Some(
                    client
                        .mcp_follow_logs(server.clone())
                        .await
                        .map_err(call_error("mcp/followLogs"))?,
                )
            } else {
                None
            };
            let r = client
                .mcp_logs(LogsParams { server, lines })
                .await
                .map_err(call_error("mcp/logs"))?;
            if json && sub.is_none() {
                return output::json(&r);
            }
            for l in &r.lines {
                if json { output::json_line(l)? } else { output::servers::log_line(l) }
            }
            let Some(mut sub) = sub else { return Ok(()) };
            let mut skipping = !r.lines.is_empty();
            // One listener for the whole loop, or a Ctrl-C while a line is printed is missed.
            let ctrl_c = tokio::signal::ctrl_c();
            tokio::pin!(ctrl_c);
            loop {
                let item = tokio::select! {
                    _ = &mut ctrl_c => return Ok(()),
                    item = sub.next() => item,
                };
                let line = match item {
                    Some(Ok(l)) => l,
                    Some(Err(e)) => return Err(anyhow::Error::new(e).context("log stream")),
                    None => return Ok(()),
                };
                // Lines written between subscribing and reading the tail arrive again on the
                // stream: skip those already printed.
                if skipping && r.lines.contains(&line) {
                    continue;
                }
                skipping = false;
                if json { output::json_line(&line)? } else { output::servers::log_line(&line) }
            }
        }
    }
    Ok(())
}

/// Wait for `start` while saying, on one line, how many of the session's servers are ready
/// and which are still awaited (`mcp start` on a terminal).
async fn starting<T>(
    client: &Client,
    session: &str,
    start: impl std::future::Future<Output = Result<T, jsonrpsee::core::client::Error>>,
    shown: &mut crate::output::progress::Progress,
) -> Result<T, jsonrpsee::core::client::Error> {
    use geminid_protocol::event::{EventBody, EventsSubscribeParams};
    let kinds = Some(vec!["mcp/serverState".to_owned()]);
    let params = EventsSubscribeParams { session: Some(session.to_owned()), kinds };
    let (sub, listed) = tokio::join!(
        client.subscribe_events(Some(params)),
        client.mcp_list_servers(Some(ListServersParams {
            session: Some(session.to_owned()),
            usage: false
        }))
    );
    let (Ok(mut sub), Ok(listed)) = (sub, listed) else { return start.await };
    // What will start, and where each stands.
    let mut states: std::collections::BTreeMap<String, ServerState> = listed
        .servers
        .into_iter()
        .filter(|s| !matches!(s.state, ServerState::Disabled | ServerState::Blocked))
        .map(|s| (s.name, ServerState::Connecting))
        .collect();
    if states.is_empty() {
        return start.await;
    }
    tokio::pin!(start);
    loop {
        let ready = states.values().filter(|s| **s == ServerState::Connected).count();
        let failed = states.values().filter(|s| failed_state(**s)).count();
        let waiting: Vec<&str> = states
            .iter()
            .filter(|(_, s)| **s == ServerState::Connecting)
            .map(|(n, _)| n.as_str())
            .collect();
        let failed = if failed > 0 { format!(", {failed} failed") } else { String::new() };
        shown.status(&format!(
            "starting: {ready} of {} ready{failed}; waiting for {}",
            states.len(),
            waiting.join(", ")
        ));
        tokio::select! {
            r = &mut start => return r,
            event = sub.next() => match event {
                Some(Ok(event)) => {
                    if let EventBody::McpServerState(s) = event.body
                        && let Some(state) = states.get_mut(&s.server.name)
                    {
                        *state = s.server.state;
                    }
                }
                _ => return start.await,
            },
        }
    }
}

fn failed_state(s: ServerState) -> bool {
    matches!(s, ServerState::Disconnected | ServerState::CrashLoop | ServerState::NeedsAuth)
}
