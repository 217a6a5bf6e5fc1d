//! `gemctl skills list|show|install|link|uninstall|enable|disable|activate`: Agent Skills as
//! the session sees them, with Gemini CLI's flags and list format.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use geminid_protocol::api::SkillsApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::common::Diagnostic;
use geminid_protocol::config::WriteScope;
use geminid_protocol::skills::{
    SkillActivateParams, SkillEnableParams, SkillInfo, SkillInstallParams, SkillInstallScope,
    SkillUninstallParams, SkillsListParams,
};

use crate::args::{absolute, ask_yes, parse_scope};
use crate::error::call_error;
use crate::output;
use crate::output::{errln, outln};

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// The skills this session sees, enabled or not, with where each comes from
    List {
        /// Built-in skills too
        #[arg(long)]
        all: bool,
    },
    /// One skill: its source, the copies it overrides, and its instructions
    Show {
        /// The skill
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::skills))]
        name: String,
    },
    /// The system prompt section listing the enabled skills (`<available_skills>`)
    Prompt,
    /// Install skills from a folder, a .skill archive or a git repository (each skill copied to
    /// <skills folder>/<name>, replacing one of that name)
    Install {
        /// A folder, a .skill file, or a git URL (https://..., git@...)
        source: String,
        /// user (default: ~/.gemini/skills) or workspace (.gemini/skills here)
        #[arg(short, long, default_value = "user", value_parser = parse_install_scope)]
        scope: SkillInstallScope,
        /// The folder inside the source that holds the skills
        #[arg(long)]
        path: Option<String>,
        /// Agree without being asked
        #[arg(long)]
        consent: bool,
    },
    /// Link the skills of a folder (edits there apply at once)
    Link {
        /// The folder
        path: std::path::PathBuf,
        /// user (default) or workspace
        #[arg(short, long, default_value = "user", value_parser = parse_install_scope)]
        scope: SkillInstallScope,
        /// Agree without being asked
        #[arg(long)]
        consent: bool,
    },
    /// Remove an installed skill
    Uninstall {
        /// The skill
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::skills))]
        name: String,
        /// user (default) or workspace
        #[arg(short, long, default_value = "user", value_parser = parse_install_scope)]
        scope: SkillInstallScope,
    },
    /// Enable a skill: take it off `skills.disabled` in the user's and the workspace's settings
    Enable {
        /// The skill
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::skills))]
        name: String,
    },
    /// Disable a skill: add it to the scope's `skills.disabled`
    Disable {
        /// The skill
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::skills))]
        name: String,
        /// workspace (default) or user
        #[arg(short, long, default_value = "workspace", value_parser = parse_scope)]
        scope: WriteScope,
    },
    /// Activate a skill in the session, as the person (policy may still deny it): prints what
    /// the model gets
    Activate {
        /// The skill
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::skills))]
        name: String,
    },
}

fn parse_install_scope(s: &str) -> Result<SkillInstallScope, String> {
    match s {
        "user" => Ok(SkillInstallScope::User),
        "workspace" | "project" => Ok(SkillInstallScope::Workspace),
        other => Err(format!("{other:?} is not a scope: user or workspace")),
    }
}

pub fn print_diagnostics(ds: &[Diagnostic]) {
    for d in ds {
        errln!("{}", output::diagnostic(d));
    }
}

fn source_words(s: &SkillInfo) -> String {
    use geminid_protocol::skills::SkillScope;
    match (s.source.scope, &s.source.extension, &s.source.server) {
        (SkillScope::Extension, Some(e), _) => format!("extension {e}"),
        (SkillScope::Mcp, _, Some(server)) => format!("MCP server {server}"),
        (SkillScope::BuiltIn, ..) => "built in".to_owned(),
        (SkillScope::User, ..) => "user".to_owned(),
        (SkillScope::Workspace, ..) => "workspace".to_owned(),
        _ => "?".to_owned(),
    }
}

/// Gemini CLI's list entry: `name [Enabled|Disabled][ [Built-in]]`, description, location.
fn print_skill(s: &SkillInfo) {
    let state = if s.enabled { "Enabled" } else { "Disabled" };
    let built_in = if s.built_in { " [Built-in]" } else { "" };
    outln!("{} [{state}]{built_in}", s.name);
    outln!("  Description: {}", s.description);
    outln!("  Location:    {}", s.location);
    outln!("  Source:      {}", source_words(s));
    for o in &s.overrides {
        outln!("  Overrides:   {}", o.location);
    }
}

/// Run a skills command for `session`.
pub async fn run(
    client: &Client,
    session: String,
    cmd: SkillsCommand,
    json: bool,
) -> anyhow::Result<ExitCode> {
    match cmd {
        SkillsCommand::List { all } => {
            let r = client
                .skills_list(SkillsListParams { session, instructions: false })
                .await
                .map_err(call_error("skills/list"))?;
            if json {
                output::json(&r)?;
            } else {
                // Turned off, Gemini CLI discovers none (`--json` still lists them, for editors).
                let mut shown: Vec<&SkillInfo> =
                    r.skills.iter().filter(|s| r.skills_enabled && (all || !s.built_in)).collect();
                // Gemini CLI's order: built-in ones last, then by name (`localeCompare`).
                shown.sort_by(|a, b| {
                    a.built_in
                        .cmp(&b.built_in)
                        .then_with(|| geminid_protocol::collate::locale_compare(&a.name, &b.name))
                });
                if shown.is_empty() {
                    outln!("No skills discovered.");
                } else {
                    outln!("Discovered Agent Skills:\n");
                }
                for s in shown {
                    print_skill(s);
                    outln!("");
                }
                if !r.skills_enabled {
                    errln!(
                        "note: skills are turned off (skills.enabled or admin.skills.enabled is false)"
                    );
                }
            }
            print_diagnostics(&r.diagnostics);
            Ok(ExitCode::SUCCESS)
        }
        SkillsCommand::Show { name } => {
            let r = client
                .skills_list(SkillsListParams { session, instructions: true })
                .await
                .map_err(call_error("skills/list"))?;
            let lower = name.to_lowercase();
            let Some(s) =
                r.skills.iter().find(|s| s.name == name || s.name.to_lowercase() == lower)
            else {
                let names: Vec<&str> = r.skills.iter().map(|s| s.name.as_str()).collect();
                match geminid_protocol::suggest::closest(&name, names.iter().copied()) {
                    Some(n) => {
                        errln!("gemctl: no skill named \"{name}\" here (did you mean \"{n}\"?)")
                    }
                    None => errln!(
                        "gemctl: no skill named \"{name}\" here (skills: {})",
                        names.join(", ")
                    ),
                }
                return Ok(ExitCode::from(1));
            };
            if json {
                output::json(s)?;
            } else {
                print_skill(s);
                if r.activated.contains(&s.name) {
                    outln!("  Activated in this session.");
                }
                if let Some(text) = &s.instructions {
                    outln!("  Instructions:");
                    for line in text.lines() {
                        outln!("    {line}");
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SkillsCommand::Prompt => {
            let r = client
                .skills_prompt(SkillsListParams { session, instructions: false })
                .await
                .map_err(call_error("skills/prompt"))?;
            if json {
                output::json(&r)?;
            } else {
                outln!("{}", r.prompt);
            }
            Ok(ExitCode::SUCCESS)
        }
        SkillsCommand::Install { source, scope, path, consent } => {
            let local = !source.contains("://") && !source.contains('@');
            let source = if local { absolute(Path::new(&source))? } else { source };
            let p = SkillInstallParams { session, source, scope, path, consent };
            install(client, p, false, json).await
        }
        SkillsCommand::Link { path, scope, consent } => {
            let p = SkillInstallParams {
                session,
                source: absolute(&path)?,
                scope,
                path: None,
                consent,
            };
            install(client, p, true, json).await
        }
        SkillsCommand::Uninstall { name, scope } => {
            let r = client
                .skills_uninstall(SkillUninstallParams { session, name, scope })
                .await
                .map_err(call_error("skills/uninstall"))?;
            if json {
                output::json(&r)?;
            } else {
                outln!("Skill \"{}\" uninstalled ({} removed).", r.name, r.removed);
            }
            Ok(ExitCode::SUCCESS)
        }
        SkillsCommand::Enable { name } => {
            set_enabled(client, session, name, WriteScope::User, true, json).await
        }
        SkillsCommand::Disable { name, scope } => {
            set_enabled(client, session, name, scope, false, json).await
        }
        SkillsCommand::Activate { name } => {
            let p = SkillActivateParams { session, name, call_id: None, confirmed: true };
            let r = client.skills_activate(p).await.map_err(call_error("skills/activate"))?;
            if json {
                output::json(&r)?;
            } else {
                outln!("{}", r.text);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn install(
    client: &Client,
    mut p: SkillInstallParams,
    link: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let method = if link { "skills/link" } else { "skills/install" };
    let call = |p: SkillInstallParams| async move {
        if link { client.skills_link(p).await } else { client.skills_install(p).await }
    };
    let mut r = call(p.clone()).await.map_err(call_error(method))?;
    if !r.installed {
        errln!("{}", r.consent);
        if !ask_yes("Do you want to continue?")? {
            errln!(
                "gemctl: not installed: nothing was agreed to (--consent agrees without asking)"
            );
            return Ok(ExitCode::from(1));
        }
        p.consent = true;
        r = call(p).await.map_err(call_error(method))?;
    }
    if json {
        output::json(&r)?;
    } else {
        for s in &r.skills {
            let verb = if link {
                "linked"
            } else if s.replaces {
                "replaced"
            } else {
                "installed"
            };
            outln!("Skill \"{}\" {verb}: {}", s.name, s.dir);
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn set_enabled(
    client: &Client,
    session: String,
    name: String,
    scope: WriteScope,
    enabled: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let p = SkillEnableParams { session, name, scope };
    let (method, r) = if enabled {
        ("skills/enable", client.skills_enable(p).await)
    } else {
        ("skills/disable", client.skills_disable(p).await)
    };
    let r = r.map_err(call_error(method))?;
    if json {
        output::json(&r)?;
    } else {
        let state = if r.enabled { "enabled" } else { "disabled" };
        let files =
            if r.files.is_empty() { "no file changed".to_owned() } else { r.files.join(", ") };
        outln!("Skill \"{}\" {state} ({files}).", r.name);
        for f in &r.still_disabled_in {
            errln!("note: {f} still disables it (geminid does not write that file)");
        }
    }
    Ok(ExitCode::SUCCESS)
}
