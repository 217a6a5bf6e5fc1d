//! Sessions: `gemctl session`, `attach`, `events` and `confirm`.

pub mod attach;
pub mod elicit;
pub mod resolve;

use std::path::PathBuf;

use clap::Subcommand;
use geminid_protocol::api::SessionApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::session::{Session, SessionCreateParams, SessionIdParams};

use self::resolve::{absolute, all_sessions, client_env, for_session, resolve_id};
use crate::error::call_error;
use crate::output::{self, outln};
use crate::policy;

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Create a new session
    New {
        /// Its workspace [default: the current directory]
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// List sessions
    List {
        /// Only sessions of this workspace
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Show one session [default: the current directory's default session]
    Show {
        /// The session
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::sessions))]
        id: Option<String>,
    },
    /// Close a session (detach everyone and delete it, and the sessions derived from it)
    Close {
        /// The session
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::sessions))]
        id: String,
    },
    /// Create a subagent's session under a parent: its confirmations go to the parent's
    /// clients, labelled with its path
    Derive {
        /// The parent session
        parent: String,
        /// The subagent's name (rules with `subagent = "NAME"` apply to it) [default: the
        /// --agent's]
        #[arg(required_unless_present = "agent", default_value = "")]
        name: String,
        /// The only tools it sees, comma-separated; `mcp_server_*` for all of a server's
        /// [default: the --agent's, else all of the parent's]
        #[arg(long, value_delimiter = ',', value_name = "TOOLS")]
        tools: Option<Vec<String>>,
        /// Start from an agent definition (`gemctl agents list`): its name and tools
        #[arg(long)]
        agent: Option<String>,
    },
    /// Change a session's approval mode or interactivity
    Update {
        /// The session [default: the current directory's default session]
        id: Option<String>,
        /// default, autoEdit, yolo or plan
        #[arg(long, value_parser = policy::rules::parse_mode)]
        mode: Option<geminid_protocol::policy::ApprovalMode>,
        /// Interactive whatever its clients do (a person answers its confirmations)
        #[arg(long, conflicts_with_all = ["headless", "auto"])]
        interactive: bool,
        /// Headless whatever its clients do
        #[arg(long, conflicts_with = "auto")]
        headless: bool,
        /// Interactive while a client listens for confirmations (the default)
        #[arg(long)]
        auto: bool,
    },
}

pub async fn session(
    client: &Client,
    cmd: SessionCommand,
    selected: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let one = |s: &Session| {
        if json {
            return output::json(s);
        }
        output::sessions::session(s);
        Ok(())
    };
    match cmd {
        SessionCommand::New { workspace } => {
            let params = SessionCreateParams {
                workspace: absolute(workspace)?,
                env: Some(client_env()),
                reuse_default: false,
                ..SessionCreateParams::default()
            };
            let s = client.create(params).await.map_err(call_error("session/create"))?;
            if json { output::json(&s)? } else { outln!("{}", s.id) }
        }
        SessionCommand::List { workspace } => {
            let workspace = workspace.map(|w| absolute(Some(w))).transpose()?;
            let all = all_sessions(client, workspace).await?;
            if json { output::json(&all)? } else { output::sessions::sessions(&all) }
        }
        SessionCommand::Show { id } => {
            let s = match id {
                Some(id) => {
                    let id = resolve_id(client, id).await?;
                    client.get(SessionIdParams { id }).await.map_err(call_error("session/get"))?
                }
                None => {
                    // Attached to find it: its count is of the others (audit polish). Got
                    // again for what only `session/get` says (who listens).
                    let id = for_session(client, selected).await?.id;
                    let mut s = client
                        .get(SessionIdParams { id })
                        .await
                        .map_err(call_error("session/get"))?;
                    s.attached_connections = s.attached_connections.saturating_sub(1);
                    s
                }
            };
            one(&s)?;
        }
        SessionCommand::Close { id } => {
            let id = resolve_id(client, id).await?;
            let s =
                client.close(SessionIdParams { id }).await.map_err(call_error("session/close"))?;
            if json { output::json(&s)? } else { outln!("closed session {}", s.id) }
        }
        SessionCommand::Derive { parent, name, tools, agent } => {
            let parent = resolve_id(client, parent).await?;
            let p = geminid_protocol::session::SessionDeriveParams { parent, name, tools, agent };
            let s = client.derive(p).await.map_err(call_error("session/derive"))?;
            if json {
                output::json(&s)?
            } else {
                let path = s.state.derived.as_ref().map_or("", |d| d.path.as_str());
                outln!("{} {path}", s.id)
            }
        }
        SessionCommand::Update { id, mode, interactive, headless, auto } => {
            let id = match id.or(selected) {
                Some(id) => resolve_id(client, id).await?,
                None => for_session(client, None).await?.id,
            };
            let p = geminid_protocol::session::SessionUpdateParams {
                id,
                approval_mode: mode,
                interactive: (interactive || headless).then_some(interactive),
                interactive_auto: auto,
            };
            let s = client.update(p).await.map_err(call_error("session/update"))?;
            if json {
                output::json(&s)?
            } else {
                let how = match s.state.interactive {
                    Some(true) => "interactive",
                    Some(false) => "headless",
                    None => "interactive while a client answers confirmations",
                };
                let mode = serde_json::to_value(s.state.approval_mode).unwrap_or_default();
                outln!("session {}: mode {}, {how}", s.id, mode.as_str().unwrap_or("?"))
            }
        }
    }
    Ok(())
}
