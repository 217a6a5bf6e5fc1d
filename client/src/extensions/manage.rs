//! `gemctl extensions install|uninstall|list|enable|disable|link|verify|accept|new`: Gemini
//! CLI's extensions, installed, checked and switched through the daemon (`new` writes a
//! starter extension here, without it).

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use geminid_protocol::api::ExtensionsApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::config::{Severity, WriteScope};
use geminid_protocol::event::{EventBody, EventsSubscribeParams};
use geminid_protocol::extensions::{
    ExtensionEnableParams, ExtensionInfo, ExtensionInstallParams, ExtensionNameParams,
    ExtensionUpdateParams, ExtensionsListParams, ExtensionsVerifyParams, IntegrityState,
};

use crate::args::{absolute, ask_yes, parse_scope};
use crate::error::call_error;
use crate::output;
use crate::output::{err, errln, outln};

#[derive(Debug, Subcommand)]
pub enum ExtensionsCommand {
    /// Every installed extension: version, enabled here, integrity, what it brings
    List,
    /// Install an extension from a folder, a .tar.gz or .zip release archive, or a git
    /// repository (copied or cloned, checked, then signed)
    Install {
        /// A folder (with a gemini-extension.json), an archive, or a git URL (https://...,
        /// git@..., file://..., github:owner/repo)
        source: String,
        /// For a git source: the branch, tag or commit (default: its HEAD)
        #[arg(long = "ref")]
        reference: Option<String>,
        /// Agree to what the extension brings without being asked
        #[arg(long)]
        consent: bool,
        /// A value of one of its settings, `ENV_VAR=value` (repeatable); the others are asked
        /// for at a terminal
        #[arg(long = "setting", value_name = "ENV_VAR=VALUE", value_parser = parse_setting)]
        settings: Vec<(String, String)>,
    },
    /// Update an extension (or --all) from where it was installed; the installed version stays
    /// if the new one fails to install or load
    Update {
        /// The extension
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::extensions), required_unless_present = "all")]
        name: Option<String>,
        /// Every installed extension (linked ones excepted)
        #[arg(long, conflicts_with = "name")]
        all: bool,
        /// Only say which have updates
        #[arg(long)]
        check: bool,
        /// Agree to what a new version brings, when that changed, without being asked
        #[arg(long)]
        consent: bool,
        /// For an extension installed from git: follow this tag, branch or commit from now on
        /// (an install pinned to a tag never moves by itself)
        #[arg(long = "ref", value_name = "REF", conflicts_with = "all")]
        reference: Option<String>,
    },
    /// Link a development folder as an extension: read in place, not verified
    Link {
        /// The folder (with a gemini-extension.json)
        path: PathBuf,
        /// Agree to what the extension brings without being asked
        #[arg(long)]
        consent: bool,
    },
    /// Remove an installed extension with its integrity records and enablement rules
    Uninstall {
        /// The extension
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::extensions))]
        name: String,
    },
    /// Enable an extension: in every folder under your home folder (Gemini CLI's user scope),
    /// or here and below with --scope workspace
    Enable {
        /// The extension
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::extensions))]
        name: String,
        /// user (default) or workspace
        #[arg(short, long, default_value = "user", value_parser = parse_scope)]
        scope: WriteScope,
    },
    /// Disable an extension: in every folder under your home folder (Gemini CLI's user scope),
    /// or here and below with --scope workspace
    Disable {
        /// The extension
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::extensions))]
        name: String,
        /// user (default) or workspace
        #[arg(short, long, default_value = "user", value_parser = parse_scope)]
        scope: WriteScope,
    },
    /// Hash every file of the extensions (or one) again and report what differs from their
    /// records (exit 1 when one does)
    Verify {
        /// One extension
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::extensions))]
        name: Option<String>,
    },
    /// Re-sign an extension's files as they are now, after an edit you made on purpose
    Accept {
        /// The extension
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::extensions))]
        name: String,
    },
    /// Write a starter extension into a new folder (then `gemctl extensions link PATH`)
    New {
        /// The folder to create (its name is the extension's)
        path: PathBuf,
        /// context (default), custom-commands, exclude-tools, hooks, mcp-server, policies or
        /// skills
        template: Option<String>,
    },
}

fn parse_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not ENV_VAR=value")),
    }
}

fn integrity_word(i: IntegrityState) -> &'static str {
    match i {
        IntegrityState::Verified => "verified",
        IntegrityState::Recorded => "recorded now",
        IntegrityState::Linked => "linked (not verified)",
        IntegrityState::Tampered => "TAMPERED",
        IntegrityState::Unverifiable => "cannot verify",
    }
}

/// The files that differ from an extension's record, one a line.
fn print_changes(e: &ExtensionInfo) {
    let Some(c) = &e.changes else { return };
    for (what, files) in [("changed", &c.changed), ("added", &c.added), ("removed", &c.removed)] {
        for f in files {
            outln!("  {what}: {f}");
        }
    }
}

fn print_one(e: &ExtensionInfo) {
    let version = e.version.as_deref().unwrap_or("?");
    let state = if e.active {
        "active"
    } else if e.enabled {
        "not loaded"
    } else {
        "disabled"
    };
    outln!("{} {version} ({state}; {})", e.name, integrity_word(e.integrity));
    outln!("  path: {}", e.path);
    if let Some(s) = &e.source {
        outln!("  source: {s} ({})", e.install_type.as_deref().unwrap_or("?"));
    }
    if let Some(r) = &e.reference {
        outln!("  ref: {r}");
    }
    if !e.servers.is_empty() {
        outln!("  MCP servers: {}", e.servers.join(", "));
    }
    if !e.context_files.is_empty() {
        outln!("  context files: {}", e.context_files.join(", "));
    }
    if !e.exclude_tools.is_empty() {
        outln!("  excluded tools: {}", e.exclude_tools.join(", "));
    }
    if e.hooks > 0 {
        outln!("  hooks: {}", e.hooks);
    }
    if !e.skills.is_empty() {
        outln!("  agent skills: {}", e.skills.join(", "));
    }
    if !e.commands.is_empty() {
        outln!("  custom commands: {}", e.commands.join(", "));
    }
    print_changes(e);
    if let Some(why) = &e.why_inactive {
        outln!("  why: {why}");
    }
    for d in &e.diagnostics {
        let pos = match (d.line, d.column) {
            (Some(l), Some(c)) => format!(":{l}:{c}"),
            _ => String::new(),
        };
        let sev = if d.severity == Severity::Error { "error" } else { "warning" };
        outln!("  {}{pos}: {sev}: {}", d.file, d.message);
    }
}

/// Asks the person at the terminal for a setting's value (not echoed when sensitive); none
/// when nobody can answer or the answer is empty.
fn ask_setting(
    s: &geminid_protocol::extensions::ExtensionSetting,
) -> anyhow::Result<Option<String>> {
    if !std::io::stdin().is_terminal() {
        return Ok(None);
    }
    let about =
        if s.description.is_empty() { String::new() } else { format!(" ({})", s.description) };
    err!("{}{about}: ", s.name);
    std::io::stderr().flush()?;
    let stty = |arg: &str| {
        std::process::Command::new("stty").arg(arg).stdin(std::process::Stdio::inherit()).status()
    };
    if s.sensitive {
        let _ = stty("-echo");
    }
    let mut line = String::new();
    let read = std::io::stdin().lock().read_line(&mut line);
    if s.sensitive {
        let _ = stty("echo");
        errln!();
    }
    read?;
    let v = line.trim_end_matches(['\n', '\r']).to_owned();
    Ok((!v.is_empty()).then_some(v))
}

/// Run an extensions command for `session`.
pub async fn run(
    client: &Client,
    session: String,
    cmd: ExtensionsCommand,
    json: bool,
) -> anyhow::Result<ExitCode> {
    match cmd {
        ExtensionsCommand::List => {
            let r = client
                .extensions_list(ExtensionsListParams { session })
                .await
                .map_err(call_error("extensions/list"))?;
            if json {
                output::json(&r)?;
            } else if r.extensions.is_empty() {
                outln!("No extensions installed.");
            } else {
                r.extensions.iter().for_each(print_one);
            }
            for d in &r.diagnostics {
                errln!("warning: {}: {}", d.file, d.message);
            }
            Ok(ExitCode::SUCCESS)
        }
        ExtensionsCommand::Install { source, reference, consent, settings } => {
            // A path is made absolute here (the daemon's working directory is not this one);
            // a URL is passed as it is.
            let local = !source.contains("://") && !source.contains('@') && !source.contains(':');
            let source = if local { absolute(Path::new(&source))? } else { source };
            let settings = settings.into_iter().collect();
            let p = ExtensionInstallParams { session, source, reference, consent, settings };
            install(client, p, false, json).await
        }
        ExtensionsCommand::Link { path, consent } => {
            let p = ExtensionInstallParams {
                session,
                source: absolute(&path)?,
                reference: None,
                consent,
                settings: Default::default(),
            };
            install(client, p, true, json).await
        }
        ExtensionsCommand::Update { name, all, check, consent, reference } => {
            let p = ExtensionUpdateParams { session, name, all, check, consent, reference };
            update(client, p, json).await
        }
        ExtensionsCommand::Uninstall { name } => {
            let r = client
                .extensions_uninstall(ExtensionNameParams { session, name })
                .await
                .map_err(call_error("extensions/uninstall"))?;
            if json {
                output::json(&r)?;
            } else {
                outln!("Extension \"{}\" uninstalled ({} removed).", r.name, r.path);
            }
            Ok(ExitCode::SUCCESS)
        }
        ExtensionsCommand::Enable { name, scope } => {
            set_enabled(client, session, name, scope, true, json).await
        }
        ExtensionsCommand::Disable { name, scope } => {
            set_enabled(client, session, name, scope, false, json).await
        }
        ExtensionsCommand::Verify { name } => {
            let r = client
                .extensions_verify(ExtensionsVerifyParams { session, name })
                .await
                .map_err(call_error("extensions/verify"))?;
            let bad = r.extensions.iter().any(|e| {
                matches!(e.integrity, IntegrityState::Tampered | IntegrityState::Unverifiable)
            });
            if json {
                output::json(&r)?;
            } else if r.extensions.is_empty() {
                outln!("No extensions installed.");
            } else {
                for e in &r.extensions {
                    outln!("{}: {}", e.name, integrity_word(e.integrity));
                    print_changes(e);
                    if matches!(
                        e.integrity,
                        IntegrityState::Tampered | IntegrityState::Unverifiable
                    ) && let Some(why) = &e.why_inactive
                    {
                        outln!("  {why}");
                    }
                }
            }
            Ok(if bad { ExitCode::FAILURE } else { ExitCode::SUCCESS })
        }
        ExtensionsCommand::Accept { name } => {
            let r = client
                .extensions_accept(ExtensionNameParams { session, name })
                .await
                .map_err(call_error("extensions/accept"))?;
            if json {
                output::json(&r)?;
            } else {
                outln!("Extension \"{}\": its files as they are now are signed.", r.name);
            }
            Ok(ExitCode::SUCCESS)
        }
        ExtensionsCommand::New { path, template } => {
            crate::extensions::new::new_here(&path, template.as_deref(), json)
        }
    }
}

/// Runs `call` while printing the session's `extensions/progress` steps on stderr.
async fn with_progress<T>(
    client: &Client,
    session: &str,
    call: impl std::future::Future<Output = T>,
) -> anyhow::Result<T> {
    let kinds = Some(vec!["extensions/progress".to_owned()]);
    let params = EventsSubscribeParams { session: Some(session.to_owned()), kinds };
    let mut sub =
        client.subscribe_events(Some(params)).await.map_err(call_error("events/subscribe"))?;
    tokio::pin!(call);
    // On a terminal one line redrawn, cleared at the end; elsewhere a line per step.
    let mut shown = crate::output::progress::Progress::on_stderr();
    let mut show = |e: &geminid_protocol::event::Event| {
        if let EventBody::ExtensionProgress(p) = &e.body {
            let step = format!("{}: {}", p.what, p.step);
            if shown.is_live() { shown.status(&step) } else { errln!("{step}") }
        }
    };
    loop {
        tokio::select! {
            r = &mut call => {
                while let Ok(Some(Ok(e))) = tokio::time::timeout(std::time::Duration::ZERO, sub.next()).await {
                    show(&e);
                }
                return Ok(r);
            }
            e = sub.next() => match e {
                Some(Ok(e)) => show(&e),
                _ => return Ok(call.await),
            },
        }
    }
}

async fn install(
    client: &Client,
    mut p: ExtensionInstallParams,
    link: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let method = if link { "extensions/link" } else { "extensions/install" };
    let session = p.session.clone();
    let call = |p: ExtensionInstallParams| async move {
        if link { client.extensions_link(p).await } else { client.extensions_install(p).await }
    };
    let mut r =
        with_progress(client, &session, call(p.clone())).await?.map_err(call_error(method))?;
    if !r.installed {
        errln!("{}", r.consent);
        if !ask_yes("Do you want to continue?")? {
            anyhow::bail!(
                "not installed: nobody agreed to what it brings (answer y at the prompt, or pass \
                 --consent)"
            );
        }
        for s in &r.settings {
            if !p.settings.contains_key(&s.env_var)
                && let Some(v) = ask_setting(s)?
            {
                p.settings.insert(s.env_var.clone(), v);
            }
        }
        p.consent = true;
        r = with_progress(client, &session, call(p)).await?.map_err(call_error(method))?;
    }
    if json {
        output::json(&r)?;
    } else if let Some(e) = &r.extension {
        let how = if link { "linked" } else { "installed" };
        outln!("Extension \"{}\" {how}.", e.name);
        print_one(e);
    }
    Ok(ExitCode::SUCCESS)
}

async fn update(
    client: &Client,
    mut p: ExtensionUpdateParams,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let session = p.session.clone();
    let mut r = with_progress(client, &session, client.extensions_update(p.clone()))
        .await?
        .map_err(call_error("extensions/update"))?;
    let wanting: Vec<&str> = r
        .extensions
        .iter()
        .filter(|e| !e.updated && e.consent.is_some() && e.error.is_none())
        .map(|e| e.name.as_str())
        .collect();
    if !p.check && !p.consent && !wanting.is_empty() {
        for e in r.extensions.iter().filter_map(|e| e.consent.as_ref()) {
            errln!("{e}");
        }
        if ask_yes("The new versions bring the above. Update?")? {
            p.consent = true;
            r = with_progress(client, &session, client.extensions_update(p.clone()))
                .await?
                .map_err(call_error("extensions/update"))?;
        }
    }
    let failed = r.extensions.iter().any(|e| e.error.is_some());
    let unconsented = r.extensions.iter().any(|e| !e.updated && e.consent.is_some() && !p.check);
    if json {
        output::json(&r)?;
    } else if r.extensions.is_empty() {
        outln!("No extensions to update.");
    } else {
        for e in &r.extensions {
            let line = match (&e.error, e.updated, &e.available) {
                (Some(err), _, _) => format!("{}: {err}", e.name),
                (None, true, _) => format!(
                    "{}: updated {} -> {}",
                    e.name,
                    e.version,
                    e.to.as_deref().unwrap_or("?")
                ),
                (None, false, Some(a)) if p.check => {
                    format!("{}: {} installed, update available ({a})", e.name, e.version)
                }
                (None, false, Some(_)) => format!(
                    "{}: not updated: the new version brings other things (pass --consent to \
                     agree)",
                    e.name
                ),
                (None, false, None) => match &e.pinned {
                    Some(r) => format!(
                        "{}: {} is up to date with {r}, the ref it is pinned to (`gemctl \
                         extensions update {} --ref REF` follows another)",
                        e.name, e.version, e.name
                    ),
                    None => format!("{}: {} is up to date", e.name, e.version),
                },
            };
            outln!("{line}");
        }
    }
    Ok(if failed || unconsented { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

async fn set_enabled(
    client: &Client,
    session: String,
    name: String,
    scope: WriteScope,
    enabled: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let p = ExtensionEnableParams { session, name, scope };
    let r = if enabled {
        client.extensions_enable(p).await.map_err(call_error("extensions/enable"))?
    } else {
        client.extensions_disable(p).await.map_err(call_error("extensions/disable"))?
    };
    if json {
        output::json(&r)?;
    } else {
        let now = if r.enabled { "enabled" } else { "disabled" };
        outln!("Extension \"{}\": rule {} written; here it is {now}.", r.name, r.rule);
        // The user scope is Gemini CLI's: every folder under the home folder, no other.
        if r.enabled != enabled {
            errln!(
                "note: the user scope covers the folders under your home folder; this one is \
                 not among them: `--scope workspace` {} it here",
                if enabled { "enables" } else { "disables" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
