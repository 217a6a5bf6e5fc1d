//! `gemctl commands`: slash commands (command files, MCP prompts, skills), listed and expanded
//! as Gemini CLI would.

use std::process::ExitCode;

use clap::Subcommand;
use geminid_protocol::client::Client;

use crate::error::call_error;
use crate::output;
use crate::output::{errln, outln};
use crate::skills::manage::print_diagnostics;

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
