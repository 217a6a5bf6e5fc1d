//! `gemctl config` (the effective configuration: show, check, context) and `gemctl
//! trust|untrust` (a folder's trust rule), over the daemon's configuration methods.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use geminid_protocol::api::{ConfigApiClient, TrustApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::config::{ConfigParams, Severity, TrustLevel, TrustSetParams};

use crate::error::call_error;
use crate::output;
use crate::output::outln;

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
                outln!("  {:<15} {} ({state})", scope_word(f.scope), f.path);
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
                    vec![s.name.clone(), s.transport.clone(), scope_word(s.scope).to_owned(), state]
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

/// A scope as `config show` names it (Antigravity CLI's files as `agy-user`, `agy-workspace`).
fn scope_word(s: geminid_protocol::common::Scope) -> &'static str {
    use geminid_protocol::common::Scope;
    match s {
        Scope::SystemDefaults => "systemdefaults",
        Scope::Geminid => "geminid",
        Scope::Antigravity => "agy-user",
        Scope::User => "user",
        Scope::AntigravityWorkspace => "agy-workspace",
        Scope::Workspace => "workspace",
        Scope::System => "system",
        Scope::Extension => "extension",
    }
}
