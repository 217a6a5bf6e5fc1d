//! `gemctl skills list|show|install|link|uninstall|enable|disable|activate` and `gemctl agents
//! list|show`: Agent Skills and agent definitions as the session sees them, with Gemini CLI's
//! flags and list format.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;
use geminid_protocol::api::{AgentsApiClient, SkillsApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::common::Diagnostic;
use geminid_protocol::config::WriteScope;
use geminid_protocol::skills::{
    AgentInfo, AgentKind, SkillActivateParams, SkillEnableParams, SkillInfo, SkillInstallParams,
    SkillInstallScope, SkillUninstallParams, SkillsListParams,
};

use crate::error::call_error;
use crate::extensions::manage::{absolute, ask_yes, parse_scope};
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

#[derive(Debug, Subcommand)]
pub enum CommandsCommand {
    /// The slash commands this session offers (command files, MCP prompts, skills), named
    /// after Gemini CLI's conflict rules
    List {
        /// A front-end's own command names, which keep theirs in a conflict (comma-separated)
        #[arg(long, value_delimiter = ',')]
        built_ins: Vec<String>,
    },
    /// What a command sends to the model, as the person running it (its shell commands run
    /// when policy allows or asks; a denied one fails)
    Expand {
        /// The command (`git:commit`, with or without `/`)
        name: String,
        /// Do not confirm: a shell command that policy would ask about is named and nothing
        /// runs (exit 1), as in `gemini -p`
        #[arg(long, conflicts_with = "yes")]
        no_confirm: bool,
        /// Confirm every shell command that policy asks about without being asked (from a
        /// script); without it, a terminal shows them and asks y/N, and nothing runs when
        /// stdin is not a terminal
        #[arg(long, short = 'y')]
        yes: bool,
        /// What follows the name
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

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

fn parse_install_scope(s: &str) -> Result<SkillInstallScope, String> {
    match s {
        "user" => Ok(SkillInstallScope::User),
        "workspace" | "project" => Ok(SkillInstallScope::Workspace),
        other => Err(format!("{other:?} is not a scope: user or workspace")),
    }
}

fn print_diagnostics(ds: &[Diagnostic]) {
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

/// Each shell command an expansion asks about, with why.
fn print_asks(r: &geminid_protocol::commands::CommandsExpandResult) {
    for c in &r.needs_confirmation {
        errln!("needs a confirmation: {c}");
        if let Some(a) = r.asks.iter().find(|a| &a.command == c) {
            errln!("  why: {}", a.reason);
        }
    }
}

/// On a terminal, the commands asked about shown and y/N asked; false when stdin is not one.
fn confirm_on_terminal(
    r: &geminid_protocol::commands::CommandsExpandResult,
) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    print_asks(r);
    crate::output::err!(
        "Run {}? [y/N] ",
        if r.needs_confirmation.len() == 1 { "it" } else { "them" }
    );
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Run a commands command for `session`.
pub async fn run_commands(
    client: &Client,
    session: String,
    cmd: CommandsCommand,
    json: bool,
) -> anyhow::Result<ExitCode> {
    use geminid_protocol::api::CommandsApiClient;
    use geminid_protocol::commands::{CommandKind, CommandsExpandParams, CommandsListParams};
    let built_ins = match cmd {
        CommandsCommand::List { built_ins } => built_ins,
        CommandsCommand::Expand { name, no_confirm, yes, args } => {
            let mut p = CommandsExpandParams {
                session,
                name,
                args: args.join(" "),
                confirmed: yes,
                interactive: !no_confirm,
            };
            let mut r =
                client.commands_expand(p.clone()).await.map_err(call_error("commands/expand"))?;
            let shown = !r.needs_confirmation.is_empty()
                && !no_confirm
                && !json
                && std::io::IsTerminal::is_terminal(&std::io::stdin());
            if shown && confirm_on_terminal(&r)? {
                p.confirmed = true;
                r = client.commands_expand(p).await.map_err(call_error("commands/expand"))?;
            }
            if json {
                output::json(&r)?;
            } else if !r.needs_confirmation.is_empty() {
                if !shown {
                    print_asks(&r);
                }
                if no_confirm {
                    errln!(
                        "nothing ran (--no-confirm): run it without --no-confirm from a terminal \
                         to be asked, or with --yes to confirm from a script"
                    );
                } else {
                    errln!(
                        "nothing ran: no one confirmed (stdin is not a terminal, or the answer \
                         was no); --yes confirms from a script"
                    );
                }
            } else {
                if let Some(t) = &r.tool {
                    errln!(
                        "first: the tool {} {}",
                        t.name,
                        serde_json::Value::Object(t.args.clone())
                    );
                }
                for n in &r.notes {
                    errln!("note: {n}");
                }
                outln!("{}", r.text);
            }
            if !r.needs_confirmation.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    let r = client
        .commands_list(CommandsListParams { session, built_ins })
        .await
        .map_err(call_error("commands/list"))?;
    if json {
        output::json(&r)?;
    } else if r.commands.is_empty() {
        outln!("No commands.");
    } else {
        for c in &r.commands {
            let kind = match c.kind {
                CommandKind::Skill => "skill",
                CommandKind::McpPrompt => "MCP prompt",
                CommandKind::UserFile => "user",
                CommandKind::WorkspaceFile => "workspace",
                CommandKind::ExtensionFile => "extension",
                CommandKind::BuiltIn => "built in",
            };
            let renamed = c.renamed_from.as_ref().map(|r| format!(", for {r}")).unwrap_or_default();
            outln!("/{} ({kind}{renamed})", c.name);
            outln!("  {}", c.description);
        }
    }
    print_diagnostics(&r.diagnostics);
    Ok(ExitCode::SUCCESS)
}
