//! `gemctl mcp add|remove|enable|disable|auth|import|...`: the servers of the settings files,
//! with the flags and messages of `gemini mcp` (COMPAT §1.7), over the daemon's configuration
//! methods; the running servers' commands are flattened in from runtime.rs.

use clap::Subcommand;
use geminid_protocol::api::{ConfigApiClient, McpApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::config::{
    ConfigParams, McpAddParams, McpEnableParams, McpReloadParams, McpRemoveParams,
};

use crate::error::call_error;
use crate::mcp::add::{AddArgs, ScopeArg, server_object};
use crate::output;
use crate::output::{errln, outln};

// `display_order`: `gemctl mcp --help` (and its man page) lists the commands in the order a
// user reaches for them, across this enum and `RuntimeCommand`, flattened in below (it listed
// them as declared: `reload` between `enable` and `disable`, `list` and `start` last).
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Add (or replace) a server in the project or user settings
    #[command(display_order = 2)]
    Add(AddArgs),
    /// Remove a server from the project or user settings
    #[command(display_order = 3)]
    Remove {
        /// Settings file to edit
        #[arg(short, long, value_enum, default_value = "project")]
        scope: ScopeArg,
        /// Server name
        name: String,
    },
    /// Enable a server
    #[command(display_order = 12)]
    Enable {
        /// Server name
        name: String,
        /// Only clear a disable made for this session
        #[arg(long)]
        session_only: bool,
    },
    /// Re-read every settings file now (changes are also picked up automatically)
    #[command(display_order = 14)]
    Reload,
    /// Disable a server
    #[command(display_order = 13)]
    Disable {
        /// Server name
        name: String,
        /// Only for this session (kept with the session across clients and restarts)
        #[arg(long)]
        session_only: bool,
    },
    /// Move your Gemini CLI servers behind the gateway: each server in ~/.gemini/settings.json
    /// moves to geminid's own servers file, and an entry of the same name running `gemctl mcp
    /// serve --server NAME --confirm client` takes its place, so Gemini CLI sees the same tools
    /// under the same names and confirms calls itself as before (the file is backed up first)
    #[command(display_order = 21)]
    Import {
        /// Print what would move; change nothing
        #[arg(long)]
        dry_run: bool,
        /// The gemctl Gemini CLI runs (default: this one, or the `gemctl` on PATH when this one
        /// lies in a cargo build tree, which `cargo clean` or moving the checkout breaks)
        #[arg(long, value_name = "PATH")]
        command: Option<std::path::PathBuf>,
    },
    /// Undo `gemctl mcp import`: each server Gemini CLI reaches through the gateway goes back to
    /// ~/.gemini/settings.json, and Gemini CLI starts it itself again (the file is backed up
    /// first)
    #[command(display_order = 22)]
    Unimport {
        /// Print what would move back; change nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// Serve the session's whole catalog as one MCP server on stdin/stdout, for any MCP client:
    /// {"command": "gemctl", "args": ["mcp", "serve"]}. Calls go through geminid (shared
    /// servers, policy, hooks, the audit log)
    #[command(display_order = 23)]
    Serve(crate::mcp::serve::ServeArgs),
    /// Sign in to a remote server with OAuth (discovery, the browser, the token), then
    /// reconnect it; `--status` lists every remote server's sign-in state instead
    #[command(display_order = 15)]
    Auth {
        /// Server name
        #[arg(required_unless_present = "status")]
        name: Option<String>,
        /// List each remote server's credentials: state, issuer, expiry (never a token)
        #[arg(long, conflicts_with = "name")]
        status: bool,
    },
    /// Forget a remote server's OAuth credentials
    #[command(display_order = 16)]
    Logout {
        /// Server name
        name: String,
    },
    #[command(flatten)]
    Runtime(crate::mcp::runtime::RuntimeCommand),
}

pub async fn mcp(
    client: &Client,
    session: String,
    cmd: McpCommand,
    json: bool,
) -> anyhow::Result<()> {
    match cmd {
        McpCommand::Auth { name: Some(name), .. } => {
            crate::mcp::auth::sign_in(client, session, name, json).await?;
        }
        McpCommand::Auth { name: None, .. } => {
            crate::mcp::auth::status(client, session, json).await?
        }
        McpCommand::Logout { name } => {
            crate::mcp::auth::logout(client, session, name, json).await?
        }
        McpCommand::Add(a) => {
            let config = server_object(&a)?;
            let session_again = session.clone();
            let p = McpAddParams { session, scope: a.scope.wire(), name: a.name.clone(), config };
            let r = client.mcp_add(p).await.map_err(call_error("mcp/add"))?;
            if json {
                return output::json(&r);
            }
            let (n, s) = (&a.name, a.scope.word());
            if r.updated {
                outln!("MCP server \"{n}\" is already configured within {s} settings.");
                outln!("MCP server \"{n}\" updated in {s} settings.");
            } else {
                outln!("MCP server \"{n}\" added to {s} settings. ({})", r.transport);
            }
            // After `mcp import`, Gemini CLI reaches geminid's servers through the gateway, but
            // starts one added to its own settings itself (audit turn 4, C10).
            let imported = |c: &geminid_protocol::config::EffectiveConfig| {
                c.mcp_servers.iter().any(|e| e.scope == geminid_protocol::common::Scope::Geminid)
            };
            let p = ConfigParams { session: session_again, show_secrets: false };
            if client.config_get(p).await.ok().is_some_and(|c| imported(&c)) {
                errln!(
                    "note: Gemini CLI starts \"{n}\" itself (it reads this file), not through \
                     geminid: `gemctl mcp import` moves it behind geminid with the others"
                );
            }
        }
        McpCommand::Remove { scope, name } => {
            let p = McpRemoveParams {
                session: session.clone(),
                scope: scope.wire(),
                name: name.clone(),
            };
            let r = client.mcp_remove(p).await.map_err(call_error("mcp/remove"))?;
            if json {
                return output::json(&r);
            }
            let s = scope.word();
            if r.removed {
                outln!("Server \"{name}\" removed from {s} settings.");
            } else {
                // Gemini CLI's words, then where the server is written, when somewhere else.
                outln!("Server \"{name}\" not found in {s} settings.");
                let p = ConfigParams { session: session.clone(), show_secrets: false };
                let found = client.config_get(p).await.ok().and_then(|c| {
                    c.mcp_servers.into_iter().find(|e| e.name == name).map(|e| (e.scope, e.file))
                });
                use geminid_protocol::common::Scope as Where;
                match found {
                    Some((Where::User, file)) => errln!(
                        "note: it is in user settings ({file}): `gemctl mcp remove -s user {name}`"
                    ),
                    Some((Where::Workspace, file)) => errln!(
                        "note: it is in project settings ({file}): `gemctl mcp remove {name}` in \
                         that project"
                    ),
                    Some((other, file)) => errln!(
                        "note: it comes from {file} ({other:?}), which `mcp remove` does not \
                         edit"
                    ),
                    None => {}
                }
            }
        }
        McpCommand::Enable { name, session_only } => {
            let r = client
                .mcp_enable(McpEnableParams { session, name, session_only })
                .await
                .map_err(call_error("mcp/enable"))?;
            if json {
                return output::json(&r);
            }
            if session_only {
                outln!("✓ Session disable cleared for '{}'.", r.name);
            } else {
                outln!("✓ MCP server '{}' enabled.", r.name);
            }
        }
        McpCommand::Reload => {
            let params = McpReloadParams { session: Some(session) };
            let r = client.mcp_reload(Some(params)).await.map_err(call_error("mcp/reload"))?;
            if json {
                return output::json(&r);
            }
            if r.changes.is_empty() {
                outln!("Reloaded; nothing changed.");
            }
            for c in &r.changes {
                outln!("Reloaded session {}: {}", c.session, output::events::describe_change(c));
            }
        }
        McpCommand::Disable { name, session_only } => {
            let r = client
                .mcp_disable(McpEnableParams { session, name, session_only })
                .await
                .map_err(call_error("mcp/disable"))?;
            if json {
                return output::json(&r);
            }
            let suffix = if session_only { " for this session" } else { "" };
            outln!("✓ MCP server '{}' disabled{suffix}.", r.name);
        }
        McpCommand::Runtime(cmd) => {
            crate::mcp::runtime::run(client, Some(session), cmd, json).await?
        }
        McpCommand::Import { dry_run, command } => {
            let exe = crate::mcp::import_path::choose(command)?;
            let p = geminid_protocol::config::McpImportParams {
                session,
                command: exe.display().to_string(),
                dry_run,
                undo: false,
            };
            let r = client.mcp_import(p).await.map_err(call_error("mcp/import"))?;
            if json {
                return output::json(&r);
            }
            if r.moved.is_empty() {
                outln!("No server to move in {}.", r.from);
            } else {
                let verb = if dry_run { "Would move" } else { "Moved" };
                outln!("{verb} to {}: {}", r.to, r.moved.join(", "));
                for n in &r.replaced {
                    outln!("  ('{n}' replaces the one already there)");
                }
            }
            if !r.extensions.is_empty() {
                let verb = if dry_run { "would reach" } else { "reaches" };
                outln!(
                    "Gemini CLI {verb} the extensions' servers through geminid too: {}",
                    r.extensions.join(", ")
                );
            }
            if !r.kept.is_empty() {
                outln!(
                    "The extensions' remote servers stay with Gemini CLI (it connects to their \
                     URL itself): {}",
                    r.kept.join(", ")
                );
            }
            let how = "an entry of its own name running `gemctl mcp serve --server <name> \
                       --confirm client`: the same tools under the same names, and Gemini CLI \
                       confirms calls itself (geminid's deny rules and hooks still apply)";
            match (&r.backup, r.written, dry_run) {
                (_, _, true) => {
                    outln!("Would give Gemini CLI each server through {how}. Nothing was changed.")
                }
                (Some(b), true, _) => outln!(
                    "Gemini CLI reaches each server through {how}. {} as it was: {b}. \
                     `gemctl mcp unimport` undoes it.",
                    r.from
                ),
                (None, true, _) => outln!("Gemini CLI reaches each server through {how}."),
                _ => outln!(
                    "{} already reaches each of geminid's servers through the gateway.",
                    r.from
                ),
            }
        }
        McpCommand::Unimport { dry_run } => {
            let p = geminid_protocol::config::McpImportParams {
                session,
                command: String::new(),
                dry_run,
                undo: true,
            };
            let r = client.mcp_import(p).await.map_err(call_error("mcp/import"))?;
            if json {
                return output::json(&r);
            }
            if !r.extensions.is_empty() {
                let verb = if dry_run { "would start" } else { "starts" };
                outln!(
                    "Gemini CLI {verb} the extensions' servers itself again: {}",
                    r.extensions.join(", ")
                );
            }
            match (r.moved.is_empty(), dry_run, &r.backup) {
                (true, _, backup) if !r.extensions.is_empty() => {
                    if let Some(b) = backup {
                        outln!("The file as it was: {b}.");
                    }
                }
                (true, _, _) => {
                    outln!("No server of geminid's reached through the gateway in {}.", r.from)
                }
                (false, true, _) => outln!(
                    "Would move back to {}: {}. Nothing was changed.",
                    r.from,
                    r.moved.join(", ")
                ),
                (false, false, backup) => {
                    outln!(
                        "Moved back to {}: {}; Gemini CLI starts them itself again.",
                        r.from,
                        r.moved.join(", ")
                    );
                    if let Some(b) = backup {
                        outln!("The file as it was: {b}.");
                    }
                }
            }
        }
        // main.rs runs it: it needs the socket, not a client.
        McpCommand::Serve(_) => anyhow::bail!("`gemctl mcp serve` runs on its own connection"),
    }
    Ok(())
}
