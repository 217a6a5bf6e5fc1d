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
use kinds::{ALL, Kind, Place, is_gateway};

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
        /// Connect the client's file of a project folder (default: the current one) instead
        /// of its user file: Claude Code's .mcp.json, Codex's .codex/config.toml, VS Code's
        /// .vscode/mcp.json, Cursor's .cursor/mcp.json, agy's .agents/mcp_config.json. Its
        /// servers move to the folder's .gemini/geminid/servers.json, which geminid reads only
        /// when the folder is trusted (`gemctl trust DIR`), so an untrusted folder is refused
        #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = ".")]
        project: Option<std::path::PathBuf>,
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
        /// Undo the connect of a project folder's file (default: the current folder)
        #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = ".")]
        project: Option<std::path::PathBuf>,
    },
}

impl ClientsCommand {
    /// Gemini CLI's connect and disconnect: `mcp import` and `mcp unimport`, which the daemon
    /// runs for a session.
    pub fn as_gemini(&self) -> Option<crate::mcp::settings::McpCommand> {
        use crate::mcp::settings::McpCommand;
        match self {
            Self::Connect { client: Kind::Gemini, command, project: None } => {
                Some(McpCommand::Import { dry_run: false, command: command.clone() })
            }
            Self::Disconnect { client: Kind::Gemini, project: None, .. } => {
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
        ClientsCommand::Connect { client, command, project } => {
            let place = place(client, project)?;
            let _lock = lock()?;
            connect::connect(&place, command, json)
        }
        ClientsCommand::Disconnect { client, force, project } => {
            let place = place(client, project)?;
            let _lock = lock()?;
            connect::disconnect(&place, force, json)
        }
    }
}

/// The client's file the command is about: a project folder's is named by its canonical
/// path, and the home folder is no project (its files are the user's).
pub fn place(kind: Kind, project: Option<std::path::PathBuf>) -> anyhow::Result<Place> {
    let Some(dir) = project else { return Ok(Place::user(kind)) };
    let canonical = std::fs::canonicalize(&dir)
        .map_err(|e| anyhow::anyhow!("cannot use {} as a project folder: {e}", dir.display()))?;
    if !canonical.is_dir() {
        anyhow::bail!("{} is not a folder", dir.display());
    }
    let home = kinds::gemini_dir().and_then(|g| g.parent().map(std::path::Path::to_path_buf));
    if home.and_then(|h| std::fs::canonicalize(h).ok()).as_ref() == Some(&canonical) {
        anyhow::bail!(
            "{} is the home folder, whose files are the user's: run the command without --project",
            dir.display()
        );
    }
    Ok(Place { kind, project: Some(canonical) })
}

/// A project's servers are served only in a trusted folder (geminid reads the folder's
/// servers.json only then, as Gemini CLI reads its workspace settings): connect refuses an
/// untrusted one, as the daemon decides trust, rather than leave its client without them.
pub async fn require_trusted(
    client: &geminid_protocol::client::Client,
    place: &Place,
) -> anyhow::Result<()> {
    use geminid_protocol::api::TrustApiClient;
    let Some(dir) = &place.project else { return Ok(()) };
    let path = dir.display().to_string();
    let got = client
        .trust_get(geminid_protocol::config::TrustGetParams { path: path.clone() })
        .await
        .map_err(crate::error::call_error("trust/get"))?;
    if !got.trust.trusted {
        anyhow::bail!(
            "{path} is not a trusted folder ({}): geminid serves a project's servers only in a \
             trusted folder, so connecting {}'s project file would leave it without them. \
             Nothing was changed. Trust the folder first (`gemctl trust {path}`), then connect \
             again",
            got.trust.reason,
            place.kind.label()
        );
    }
    Ok(())
}

/// The lock the daemon's `mcp/import` takes too, held from reading geminid's servers.json and
/// the client's file to the last write (so two connects at once do not lose one's servers).
fn lock() -> anyhow::Result<geminid_protocol::config_lock::ConfigLock> {
    let gemini = kinds::gemini_dir()
        .ok_or_else(|| anyhow::anyhow!("cannot find the home folder: set HOME"))?;
    Ok(geminid_protocol::config_lock::ConfigLock::take(&gemini.join("geminid"))?)
}

/// A line of `clients list`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    client: Kind,
    name: &'static str,
    file: String,
    /// The project folder, for a project's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    project: Option<String>,
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

fn listed(place: &Place) -> Option<Listed> {
    let kind = place.kind;
    let target = place.target()?;
    let mut l = Listed {
        client: kind,
        name: kind.label(),
        file: target.path.display().to_string(),
        project: place.project.as_ref().map(|d| d.display().to_string()),
        doc: if place.project.is_some() { kind.project_doc() } else { kind.doc() },
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
        _ => record::dir(place).is_ok_and(|d| d.exists()),
    };
    match record::load(place) {
        Ok(Some(saved)) => l.moved_to_geminid = saved.record.moved.keys().cloned().collect(),
        Ok(None) => {}
        Err(e) => l.problem = Some(format!("{e:#}")),
    }
    Some(l)
}

fn list(json: bool) -> anyhow::Result<()> {
    let mut places: Vec<Place> = ALL.iter().map(|k| Place::user(*k)).collect();
    for (word, dir) in record::projects() {
        if let Some(kind) = ALL.into_iter().find(|k| k.word() == word) {
            places.push(Place { kind, project: Some(dir) });
        }
    }
    let all: Vec<Listed> = places.iter().filter_map(listed).collect();
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
