//! `gemctl config`, `gemctl trust|untrust` and `gemctl mcp add|remove|enable|disable`: the
//! flags and messages of `gemini mcp` (COMPAT §1.7), over the daemon's configuration methods.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::{Args, Subcommand, ValueEnum};
use geminid_protocol::api::{ConfigApiClient, McpApiClient, TrustApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::config::{
    ConfigParams, McpAddParams, McpEnableParams, McpReloadParams, McpRemoveParams, Severity,
    TrustLevel, TrustSetParams, WriteScope,
};
use serde_json::{Map, Value, json};

use crate::error::call_error;
use crate::output;
use crate::output::{errln, outln};

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Show the session's effective configuration (as written: `$VAR`s not expanded, secrets
    /// redacted)
    Show {
        /// Show settings and servers as the daemon uses them: `$VAR`s expanded, nothing
        /// redacted. Only to a terminal
        #[arg(long)]
        show_secrets: bool,
    },
    /// Check every input file; exit code 1 if there are errors
    Check,
    /// The context files the model's instructions are made of, in the order they load
    /// (global, extensions', the project's)
    Context,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScopeArg {
    User,
    Project,
}

impl ScopeArg {
    fn wire(self) -> WriteScope {
        match self {
            Self::User => WriteScope::User,
            Self::Project => WriteScope::Project,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TransportArg {
    Stdio,
    Sse,
    Http,
}

/// `gemctl mcp add`, with `gemini mcp add`'s flags.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// Settings file to edit
    #[arg(short, long, value_enum, default_value = "project")]
    scope: ScopeArg,
    /// Transport
    #[arg(short, long, visible_alias = "type", value_enum, default_value = "stdio")]
    transport: TransportArg,
    /// Environment variable for a stdio server (repeatable)
    #[arg(short, long = "env", value_name = "KEY=value")]
    env: Vec<String>,
    /// HTTP header for a network server (repeatable)
    #[arg(short = 'H', long = "header", value_name = "Key: value")]
    header: Vec<String>,
    /// Timeout in milliseconds
    #[arg(long)]
    timeout: Option<u64>,
    /// Trust the server (skip tool-call confirmations)
    #[arg(long)]
    trust: bool,
    /// Description
    #[arg(long)]
    description: Option<String>,
    /// Only these tools (comma-separated, or repeat the flag)
    #[arg(long = "include-tools", value_name = "TOOL[,TOOL]")]
    include_tools: Vec<String>,
    /// Not these tools (comma-separated, or repeat the flag)
    #[arg(long = "exclude-tools", value_name = "TOOL[,TOOL]")]
    exclude_tools: Vec<String>,
    /// Server name
    name: String,
    /// Command (stdio) or URL (sse, http)
    command_or_url: String,
    /// Arguments for the server command (put them after `--` if they start with `-`)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

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
    #[command(display_order = 20)]
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
    #[command(display_order = 21)]
    Unimport {
        /// Print what would move back; change nothing
        #[arg(long)]
        dry_run: bool,
    },
    /// Serve the session's whole catalog as one MCP server on stdin/stdout, for any MCP client:
    /// {"command": "gemctl", "args": ["mcp", "serve"]}. Calls go through geminid (shared
    /// servers, policy, hooks, the audit log)
    #[command(display_order = 22)]
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

/// A parsed `KEY=value` or `Key: value` flag; `None` when the value is empty (dropped, as
/// `gemini mcp add` does).
pub type Pair = Option<(String, String)>;

/// `KEY=value` → (key, value); the value is everything after the first `=`.
pub fn parse_env(raw: &str) -> anyhow::Result<Pair> {
    match raw.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => {
            Ok((!v.is_empty()).then(|| (k.trim().to_owned(), v.to_owned())))
        }
        _ => bail!("invalid --env {raw:?}: expected KEY=value"),
    }
}

/// `Key: value` → (key, value), split at the first `:` and trimmed.
pub fn parse_header(raw: &str) -> anyhow::Result<Pair> {
    match raw.split_once(':') {
        Some((k, v)) if !k.trim().is_empty() => {
            Ok((!v.trim().is_empty()).then(|| (k.trim().to_owned(), v.trim().to_owned())))
        }
        _ => bail!("invalid --header {raw:?}: expected \"Key: value\""),
    }
}

/// Parse repeated `KEY=value` / `Key: value` flags into a map, in the order given (a key
/// given twice keeps its first place and its last value, as Gemini CLI writes them); entries
/// the parser drops (an empty value) are left out, malformed ones are an error.
fn pairs(
    items: &[String],
    parse: fn(&str) -> anyhow::Result<Pair>,
) -> anyhow::Result<Map<String, Value>> {
    let mut out = Map::new();
    for item in items {
        if let Some((k, v)) = parse(item)? {
            out.insert(k, Value::String(v));
        }
    }
    Ok(out)
}

/// The `mcpServers` entry `gemini mcp add` would write.
pub fn server_object(a: &AddArgs) -> anyhow::Result<Value> {
    let mut o = Map::new();
    // A flag that would do nothing is a mistake worth saying (Gemini CLI drops it silently).
    if a.transport == TransportArg::Stdio && !a.header.is_empty() {
        bail!("--header only applies to network servers (-t sse or -t http), not stdio");
    }
    if a.transport != TransportArg::Stdio && !a.env.is_empty() {
        bail!("--env only applies to stdio servers; a network server gets headers (-H)");
    }
    if a.transport == TransportArg::Stdio {
        o.insert("command".into(), json!(a.command_or_url));
        // `name cmd arg -- --flag value`: the `--` is a separator, as in Gemini CLI (yargs'
        // `populate--`), not an argument. Only the first one: a second `--` is the server's.
        let mut args = a.args.clone();
        if let Some(i) = args.iter().position(|x| x == "--") {
            args.remove(i);
        }
        o.insert("args".into(), json!(args));
        let env = pairs(&a.env, parse_env)?;
        if !env.is_empty() {
            o.insert("env".into(), json!(env));
        }
    } else {
        if !a.args.is_empty() {
            bail!("server arguments only apply to stdio servers, not {:?}", a.transport);
        }
        o.insert("url".into(), json!(a.command_or_url));
        o.insert(
            "type".into(),
            json!(if a.transport == TransportArg::Sse { "sse" } else { "http" }),
        );
        let headers = pairs(&a.header, parse_header)?;
        if !headers.is_empty() {
            o.insert("headers".into(), json!(headers));
        }
    }
    if let Some(t) = a.timeout {
        o.insert("timeout".into(), json!(t));
    }
    if a.trust {
        o.insert("trust".into(), json!(true));
    }
    if let Some(d) = &a.description {
        o.insert("description".into(), json!(d));
    }
    // Gemini CLI's docs give these comma-separated (`--include-tools a,b`); repeating the
    // flag works too.
    let split = |v: &[String]| -> Vec<String> {
        v.iter()
            .flat_map(|x| x.split(','))
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (include, exclude) = (split(&a.include_tools), split(&a.exclude_tools));
    if !include.is_empty() {
        o.insert("includeTools".into(), json!(include));
    }
    if !exclude.is_empty() {
        o.insert("excludeTools".into(), json!(exclude));
    }
    Ok(Value::Object(o))
}

pub async fn config(
    client: &Client,
    session: String,
    cmd: ConfigCommand,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let params = ConfigParams { session, show_secrets: false };
    match cmd {
        ConfigCommand::Show { show_secrets } => {
            if show_secrets && !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                anyhow::bail!(
                    "--show-secrets prints secrets, so only to a terminal; stdout is not one \
                     (run it at your own terminal, without a pipe or redirection)"
                );
            }
            let params = ConfigParams { show_secrets, ..params };
            let c = client.config_get(params).await.map_err(call_error("config/get"))?;
            if json {
                output::json(&c)?;
                return Ok(ExitCode::SUCCESS);
            }
            outln!("workspace: {}", c.workspace);
            outln!(
                "trusted:   {} ({})",
                if c.trust.trusted { "yes" } else { "no" },
                c.trust.reason
            );
            outln!("files:");
            for f in &c.files {
                let state = if f.applied {
                    "applied"
                } else if f.exists {
                    "not applied"
                } else {
                    "missing"
                };
                outln!("  {:<15} {} ({state})", format!("{:?}", f.scope).to_lowercase(), f.path);
            }
            if !c.trust.trusted && c.files.iter().any(|f| f.exists && !f.applied) {
                outln!(
                    "The workspace settings are ignored and no MCP server starts because this folder is not trusted; `gemctl trust` trusts it."
                );
            }
            let rows: Vec<Vec<String>> = c
                .mcp_servers
                .iter()
                .map(|s| {
                    let state = s.blocked.map_or("enabled".to_owned(), |b| {
                        format!(
                            "blocked: {}",
                            serde_json::to_value(b)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_owned))
                                .unwrap_or_default()
                        )
                    });
                    vec![
                        s.name.clone(),
                        s.transport.clone(),
                        format!("{:?}", s.scope).to_lowercase(),
                        state,
                    ]
                })
                .collect();
            output::table_or(
                "No MCP servers configured.",
                &["SERVER", "TRANSPORT", "SCOPE", "STATE"],
                &rows,
            );
            if show_secrets {
                for s in &c.mcp_servers {
                    outln!("{}: {}", s.name, s.config);
                }
            }
            if !c.diagnostics.is_empty() {
                outln!("{} problem(s); `gemctl config check` lists them", c.diagnostics.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Context => {
            use geminid_protocol::api::ContextApiClient;
            use geminid_protocol::config::{
                ContextFileKind, ContextFilesParams, ContextImportState,
            };
            let r = client
                .context_files(ContextFilesParams { session: params.session })
                .await
                .map_err(call_error("context/files"))?;
            if json {
                output::json(&r)?;
            } else if r.files.is_empty() {
                outln!("No context files ({} found nowhere).", r.names.join(", "));
            } else {
                for f in &r.files {
                    let from = match (f.kind, &f.extension) {
                        (ContextFileKind::Global, _) => "global".to_owned(),
                        (ContextFileKind::Extension, Some(e)) => format!("extension {e}"),
                        (ContextFileKind::Extension, None) => "extension".to_owned(),
                        (ContextFileKind::Project, _) => "project".to_owned(),
                        (ContextFileKind::Memory, _) => "private project memory".to_owned(),
                    };
                    match &f.error {
                        Some(why) => outln!("{}  ({from}; not read: {why})", f.path),
                        None => outln!("{}  ({from})", f.path),
                    }
                    for i in &f.imports {
                        let what = match (i.state, &i.error) {
                            (ContextImportState::Inlined, _) => "inlined".to_owned(),
                            (ContextImportState::Repeated, _) => "already inlined above".to_owned(),
                            (ContextImportState::Failed, Some(e)) => format!("failed: {e}"),
                            (ContextImportState::Failed, None) => "failed".to_owned(),
                        };
                        outln!("    @{}  ({what}, in {})", i.path, i.from);
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Check => {
            let d = client
                .config_diagnostics(params)
                .await
                .map_err(call_error("config/diagnostics"))?;
            let errors = d.diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
            if json {
                output::json(&d)?;
            } else if d.diagnostics.is_empty() {
                outln!("No problems found.");
            } else {
                for x in &d.diagnostics {
                    outln!("{}", output::diagnostic(x));
                }
            }
            Ok(if errors > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
    }
}

pub async fn trust(
    client: &Client,
    path: Option<PathBuf>,
    level: Option<TrustLevel>,
    json: bool,
) -> anyhow::Result<()> {
    let path = crate::session::resolve::absolute(path)?;
    let r =
        client.trust_set(TrustSetParams { path, level }).await.map_err(call_error("trust/set"))?;
    if json {
        return output::json(&r);
    }
    match r.level {
        Some(TrustLevel::TrustFolder) => outln!("Trusted {}", r.path),
        Some(TrustLevel::TrustParent) => {
            outln!("Trusted the parent of {} and everything below it", r.path)
        }
        Some(TrustLevel::DoNotTrust) => outln!("Marked {} as never trusted", r.path),
        None if r.previous.is_some() => outln!("Removed the trust rule for {}", r.path),
        None => outln!("There was no trust rule for {}", r.path),
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_and_header_parsing() {
        assert_eq!(parse_env("A=b=c").ok().flatten(), Some(("A".into(), "b=c".into())));
        assert_eq!(parse_env("A=").ok().flatten(), None);
        assert!(parse_env("NOEQUALS").is_err());
        assert!(parse_env("=v").is_err());
        assert_eq!(
            parse_header("Authorization: Bearer x:y").ok().flatten(),
            Some(("Authorization".into(), "Bearer x:y".into()))
        );
        assert!(parse_header("NoColon").is_err());
        assert!(parse_header(": v").is_err());
    }

    #[test]
    fn pairs_keep_the_order_given_as_gemini_cli_writes_them() {
        let items = ["FOO=bar", "BAZ=qux", "FOO=again"].map(str::to_owned);
        let got = pairs(&items, parse_env).unwrap_or_default();
        assert_eq!(Value::Object(got).to_string(), r#"{"FOO":"again","BAZ":"qux"}"#);
    }
}
