//! `gemctl clients list|connect|disconnect CLIENT`: one command per MCP client (issue 69, item
//! 3). `connect` moves the client's own servers into geminid's servers.json and gives the
//! client, under the same names, entries that reach them through the gateway (`gemctl mcp
//! serve --server NAME`), editing the client's own file in place; `disconnect` gives the file
//! back byte for byte. Gemini CLI's is `gemctl mcp import`/`unimport`, run as they are.
//! `kinds.rs`: the clients and their files; `edit.rs`: reading and editing a file in place;
//! `record.rs`: what is kept for `disconnect`; `connect.rs`: the two commands.

mod connect;
mod edit;
pub mod kinds;
mod record;

use clap::Subcommand;
use serde::Serialize;

use crate::output::{self, outln};
use kinds::{ALL, Kind, is_gateway};

#[derive(Debug, Subcommand)]
pub enum ClientsCommand {
    /// Each client: its file, whether it reaches geminid's servers through the gateway, and the
    /// servers it still starts itself
    List,
    /// Give a client geminid's servers through the gateway: its own servers move to geminid
    /// (~/.gemini/geminid/servers.json) and an entry of the same name running `gemctl mcp serve
    /// --server NAME` takes each one's place in the client's file (comments and everything else
    /// kept; the file as it was is kept for `disconnect`)
    Connect {
        /// gemini, agy, claude-code, codex, vscode or cursor
        #[arg(value_enum)]
        client: Kind,
        /// The gemctl the client runs (default: this one, or the `gemctl` on PATH when this one
        /// lies in a cargo build tree)
        #[arg(long, value_name = "PATH")]
        command: Option<std::path::PathBuf>,
    },
    /// Undo `connect`: the client's file as it was, byte for byte, and its servers out of
    /// geminid's file again
    Disconnect {
        #[arg(value_enum)]
        client: Kind,
        /// Put the file back as it was even though its servers were changed since connect
        /// (the file as it is now is kept beside the record)
        #[arg(long)]
        force: bool,
    },
}

impl ClientsCommand {
    /// Gemini CLI's connect and disconnect: `mcp import` and `mcp unimport`, which the daemon
    /// runs for a session.
    pub fn as_gemini(&self) -> Option<crate::mcp::settings::McpCommand> {
        use crate::mcp::settings::McpCommand;
        match self {
            Self::Connect { client: Kind::Gemini, command } => {
                Some(McpCommand::Import { dry_run: false, command: command.clone() })
            }
            Self::Disconnect { client: Kind::Gemini, .. } => {
                Some(McpCommand::Unimport { dry_run: false })
            }
            _ => None,
        }
    }
}

/// Run a command for every client but Gemini CLI's connect and disconnect.
pub fn run(cmd: ClientsCommand, json: bool) -> anyhow::Result<()> {
    match cmd {
        ClientsCommand::List => list(json),
        ClientsCommand::Connect { client, command } => connect::connect(client, command, json),
        ClientsCommand::Disconnect { client, force } => connect::disconnect(client, force, json),
    }
}

/// A line of `clients list`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    client: Kind,
    name: &'static str,
    file: String,
    /// The documentation of the file's format followed.
    doc: &'static str,
    installed: bool,
    connected: bool,
    /// The servers reached through geminid's gateway.
    through_geminid: Vec<String>,
    /// The servers the client starts (or connects to) itself.
    starts_itself: Vec<String>,
    /// The client's own servers that `connect` moved to geminid: those it would start itself
    /// again after `disconnect`.
    moved_to_geminid: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

fn listed(kind: Kind) -> Option<Listed> {
    let target = kind.target()?;
    let mut l = Listed {
        client: kind,
        name: kind.label(),
        file: target.path.display().to_string(),
        doc: kind.doc(),
        installed: kind.installed(&target),
        connected: false,
        through_geminid: Vec::new(),
        starts_itself: Vec::new(),
        moved_to_geminid: Vec::new(),
        problem: None,
    };
    let text = record::read(&target.path).and_then(|t| {
        edit::servers(target.format, target.key, &t.unwrap_or_default())
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", target.path.display()))
    });
    match text {
        Ok(servers) => {
            for (name, entry) in servers {
                let off = kind.as_geminid(&entry).is_err_and(|why| why.contains("switched off"));
                match (is_gateway(&entry), off) {
                    (true, _) => l.through_geminid.push(name),
                    (false, false) => l.starts_itself.push(name),
                    (false, true) => {}
                }
            }
        }
        Err(e) => l.problem = Some(format!("{e:#}")),
    }
    l.connected = match kind {
        Kind::Gemini => !l.through_geminid.is_empty(),
        _ => record::dir(kind).is_ok_and(|d| d.exists()),
    };
    match record::load(kind) {
        Ok(Some(saved)) => l.moved_to_geminid = saved.record.moved.keys().cloned().collect(),
        Ok(None) => {}
        Err(e) => l.problem = Some(format!("{e:#}")),
    }
    Some(l)
}

fn list(json: bool) -> anyhow::Result<()> {
    let all: Vec<Listed> = ALL.iter().filter_map(|k| listed(*k)).collect();
    if json {
        return output::json(&all);
    }
    for l in &all {
        let state = match (l.connected, l.installed) {
            (true, _) => "connected",
            (false, true) => "not connected",
            (false, false) => "not installed",
        };
        outln!("{:<12} {:<14} {}", l.client.word(), state, l.file);
        if !l.through_geminid.is_empty() {
            outln!("    through geminid: {}", l.through_geminid.join(", "));
        }
        if !l.moved_to_geminid.is_empty() {
            outln!(
                "    moved to geminid (it starts them itself after disconnect): {}",
                l.moved_to_geminid.join(", ")
            );
        }
        if !l.starts_itself.is_empty() {
            outln!("    starts itself:   {}", l.starts_itself.join(", "));
        }
        if let Some(p) = &l.problem {
            outln!("    problem: {p}");
        }
    }
    Ok(())
}
