//! `gemctl`: the command-line client of geminid.
//!
//! The sources read like `gemctl --help`: one folder (or file) per family of commands, then
//! what they share. Nothing uses this file; it starts the runtime and hands each command to
//! its family.
//!
//! | Where | Commands |
//! |---|---|
//! | `cli.rs` | the command line itself: global options, every command and its help |
//! | `daemon/` | `status`, `version`, `daemon start\|stop\|restart\|logs` (`commands.rs`), `daemon install-service\|uninstall-service` (`service.rs`), `doctor`, `rpc` (`bridge.rs`); `connect.rs` reaches or starts geminid for every command |
//! | `session/` | `session` (`mod.rs`), `attach`, `events`, `confirm` (`attach.rs`, with the forms of `elicit.rs`); `resolve.rs`: which session a command acts for |
//! | `clients/` | `clients list\|connect\|disconnect`: each MCP client's own file given geminid's servers through the gateway (`kinds.rs`: the clients; `edit.rs`: files edited in place; `record.rs`: what disconnect gives back; `connect.rs`) |
//! | `config.rs` | `config show\|check\|context`, `trust`, `untrust` |
//! | `mcp/` | `mcp add` (`add.rs`), `remove\|enable\|disable\|reload\|import\|unimport` (`settings.rs`), `auth\|logout` (`auth.rs`), `list\|start\|stop\|restart\|logs` (`runtime.rs`), `review\|accept\|reject` (`pins.rs`), `serve` (`serve.rs`, `stdio.rs`) |
//! | `tools/` | `tools`, `mcp tools\|describe` (`list.rs`), `call`, `tasks` (`call.rs`), `prompt`, `read`, `mcp prompts\|resources` (`prompts.rs`) |
//! | `policy/` | `policy` (`rules.rs`), `audit` (`audit.rs`), `hooks` (`hooks.rs`) |
//! | `extensions/` | `extensions` (`manage.rs`), `extensions new` (`new.rs`) |
//! | `skills/` | `skills` (`manage.rs`), `agents`, `commands` |
//! | `top/` | `top`: its state, its view, the keys that act |
//! | `help/` | `completions`, `man` (`complete.rs`), the examples `--help` shows |
//! | `output/` | how everything prints: the macros every word passes (`print.rs`), the sanitiser (`shown.rs`), colour, tables, and the lines for servers, sessions, events, progress, ages |
//! | `error.rs` | how a failed command is told (and `--json`'s error object) |
//! | `args.rs` | what extensions and skills share: a scope, a path, a yes |
//! | `layout.rs` | tests that hold this layout: files under 600 lines, no circle between files, this map |

#![allow(
    rustdoc::invalid_html_tags,
    reason = "doc comments on the command line's types are clap's help text, where `<server>` is a placeholder shown as written"
)]

mod args;
mod cli;
mod clients;
mod config;
mod daemon;
mod error;
mod extensions;
mod help;
#[cfg(test)]
mod layout;
mod mcp;
mod output;
mod policy;
mod session;
mod skills;
mod tools;
mod top;

use std::path::Path;
use std::process::ExitCode;

use geminid_protocol::DEFAULT_MAX_MESSAGE_SIZE;
use geminid_protocol::socket::socket_path;

use crate::cli::{Cli, Command, command, gemini_flag_hint};
use crate::daemon::DaemonCommand;
use crate::error::{Failed, not_here, report};
use crate::output::{errln, outln};
use crate::session::resolve::{for_session, for_workspace, resolve_id};

fn main() -> ExitCode {
    // A shell asking for completions (`GEMCTL_COMPLETE=bash gemctl -- WORDS`): answer and exit
    // (before the runtime: a completer that asks the daemon runs its own).
    clap_complete::CompleteEnv::with_factory(command).var(help::complete::VAR).complete();
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => {
            let code = rt.block_on(gemctl_main());
            // Not waiting for blocking reads: `attach` reading stdin would hold the exit until
            // the next line (Ctrl-C, or the daemon going away, would not end it).
            rt.shutdown_background();
            code
        }
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn gemctl_main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if let Some(hint) = gemini_flag_hint(&argv) {
        errln!("error: {hint}");
        return ExitCode::from(2);
    }
    let matches = command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // `--session` is global (it may stand before or after the command), so every command's
    // help shows it; given on the command line to a command that acts for no session, it is
    // refused rather than ignored. (From GEMINID_SESSION it is simply not used there.)
    let typed = matches.value_source("session") == Some(clap::parser::ValueSource::CommandLine);
    if typed && !cli.command.uses_session() {
        errln!(
            "error: `--session` means nothing for this command (it acts for no session); drop it"
        );
        return ExitCode::from(2);
    }
    let json = cli.json;
    match run(cli).await {
        Ok(code) => code,
        // What failed has been printed with the result.
        Err(e) if e.is::<Failed>() => ExitCode::FAILURE,
        Err(e) => {
            report(&e, json);
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let socket = socket_path(cli.socket.as_deref())?;
    let autostart = !cli.no_autostart;
    match cli.command {
        Command::Status => daemon::commands::status(&socket, cli.json).await,
        Command::Version => daemon::commands::version(&socket, cli.json).await,
        Command::Daemon(DaemonCommand::Start) => {
            daemon::commands::daemon_start(&socket, cli.json).await
        }
        Command::Daemon(DaemonCommand::Stop) => {
            daemon::commands::daemon_stop(&socket, cli.json).await
        }
        Command::Daemon(DaemonCommand::Restart) => {
            daemon::commands::restart(&socket, cli.json).await
        }
        Command::Daemon(DaemonCommand::Logs { follow, lines }) => {
            daemon::commands::logs(&socket, lines, follow, cli.json).await
        }
        Command::Daemon(DaemonCommand::InstallService { socket_activation, no_enable }) => {
            // The units' `Documentation=man:gemctl(1)`, which `systemd-analyze verify` looks
            // up, names pages that must exist: written first, where `gemctl man` writes them.
            if let Err(e) = help::complete::user_man_dir()
                .and_then(|d| help::complete::man_pages(command(), &d))
            {
                errln!("note: the man pages the units name were not written: {e:#}");
            }
            daemon::service::install(&socket, socket_activation, !no_enable, cli.json).await
        }
        Command::Daemon(DaemonCommand::UninstallService) => daemon::service::uninstall(cli.json),
        Command::Session(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            session::session(&client, cmd, cli.session, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Attach { id, answer, no_answer } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, id.or(cli.session)).await?;
            use std::io::IsTerminal;
            let answering = answer || (!no_answer && std::io::stdin().is_terminal());
            let announce = (!cli.json).then(|| {
                let how = if answering {
                    "; confirmations and elicitations are answered here"
                } else {
                    ""
                };
                format!(
                    "attached to session {} ({}){how}; Ctrl-C to detach",
                    session.id, session.workspace
                )
            });
            let id = Some(session.id);
            session::attach::stream_events(&client, id, true, answering, cli.json, announce).await
        }
        Command::Events => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            session::attach::stream_events(&client, None, false, false, cli.json, None).await
        }
        Command::Confirm { id, outcome, reason } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            match (id, outcome) {
                (Some(id), Some(outcome)) => {
                    session::attach::confirm(&client, id, outcome, reason, cli.json).await?
                }
                _ => {
                    let session = for_session(&client, cli.session).await?.id;
                    session::attach::pending(&client, session, cli.json).await?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tasks { action, id } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            tools::call::tasks(&client, session, action, id, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit { limit, since } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = match cli.session {
                Some(id) => Some(resolve_id(&client, id).await?),
                None => None,
            };
            policy::audit::audit(&client, session, limit, since, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Config(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            config::config(&client, session, cmd, cli.json).await
        }
        Command::Clients(cmd) => {
            match cmd.as_gemini() {
                Some(import) => {
                    let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
                    let session = for_session(&client, cli.session).await?.id;
                    mcp::settings::mcp(&client, session, import, cli.json).await?;
                }
                None => {
                    if let clients::ClientsCommand::Connect { client: kind, project, .. } = &cmd
                        && project.is_some()
                    {
                        let place = clients::place(*kind, project.clone())?;
                        let (client, _) =
                            daemon::connect::connect_or_start(&socket, autostart).await?;
                        clients::require_trusted(&client, &place).await?;
                    }
                    clients::run(cmd, cli.json)?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(mcp::settings::McpCommand::Serve(args)) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            // Over stdio, the client's initialize first: a client that confirms calls itself
            // and declares less than everything servers may ask gets the default session of
            // its kind, whose servers are told what it declares. Others share the directory's
            // session with `gemctl attach`, which answers for them (an HTTP gateway serves
            // many clients): its servers are told everything.
            let mut end = None;
            let mut upstream = None;
            if args.http.is_none() {
                let mut opened = crate::mcp::stdio::ClientEnd::open();
                let first = mcp::serve::read_first(&mut opened.input).await?;
                if matches!(args.confirm, mcp::serve::ConfirmArg::Client) {
                    upstream = first.declares;
                }
                end = Some((opened, first));
            }
            // An MCP client starts this with its own environment (often trimmed): a session
            // keeps the environment it has, and gets this one only if it has none.
            let session = match (&args.workspace, cli.session) {
                (Some(dir), _) => for_workspace(&client, dir, upstream).await?.id,
                (None, Some(id)) => resolve_id(&client, id).await?,
                (None, None) => for_workspace(&client, Path::new("."), upstream).await?.id,
            };
            // The gateway's own connection attaches to the session; this one can go.
            drop(client);
            let options = args.options()?;
            if options.confirm == geminid_protocol::gateway::Confirm::Client {
                // On stderr: stdout is the MCP stream.
                errln!(
                    "gemctl mcp serve: the client confirms calls itself (--confirm client): \
                     what geminid's policy asks about is allowed as confirmed by it"
                );
            }
            if options.hooks == geminid_protocol::gateway::Hooks::Client {
                errln!(
                    "gemctl mcp serve: the client runs the hooks of its settings and extensions \
                     itself (--hooks client): geminid runs only those of its own servers.json"
                );
            }
            match end {
                None => mcp::serve::run_http(&socket, &session, &options, cli.json).await?,
                Some((end, first)) => {
                    mcp::serve::run(&socket, &session, &options, end, first, args.relay).await?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(mcp::settings::McpCommand::Runtime(cmd)) if !cmd.needs_session() => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            // A server by name: this directory's, else the one of that name running anywhere.
            if cli.session.is_none() && cmd.by_name() {
                let here = for_session(&client, None).await?.id;
                match mcp::runtime::run(&client, Some(here), cmd.clone(), cli.json).await {
                    Err(e) if not_here(&e) => {
                        mcp::runtime::run(&client, None, cmd, cli.json).await?
                    }
                    r => r?,
                }
                return Ok(ExitCode::SUCCESS);
            }
            // A short id (as `top` and `audit` show it) names the session as a whole one does.
            let session = match cli.session {
                Some(id) => Some(resolve_id(&client, id).await?),
                None => None,
            };
            mcp::runtime::run(&client, session, cmd, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            mcp::settings::mcp(&client, session, cmd, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call { tool, args, args_file, progress, no_progress } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            let progress =
                progress || (!no_progress && std::io::IsTerminal::is_terminal(&std::io::stderr()));
            tools::call::call(&client, session, tool, args, args_file, progress, cli.json).await
        }
        Command::Prompt { name, args } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            tools::prompts::prompt(&client, session, name, args, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Read { reference } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            tools::prompts::read(&client, session, reference, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = match cmd.workspace() {
                Some(dir) => for_workspace(&client, dir, None).await?.id,
                None => for_session(&client, cli.session).await?.id,
            };
            policy::rules::run(&client, session, cmd, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Hooks(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            let ok = policy::hooks::run(&client, session, cmd, cli.json).await?;
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Extensions(extensions::manage::ExtensionsCommand::New { path, template }) => {
            extensions::new::new_here(&path, template.as_deref(), cli.json)
        }
        Command::Extensions(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            extensions::manage::run(&client, session, cmd, cli.json).await
        }
        Command::Skills(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            skills::manage::run(&client, session, cmd, cli.json).await
        }
        Command::Commands(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            skills::commands::run_commands(&client, session, cmd, cli.json).await
        }
        Command::Tools(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            tools::list::run(&client, session, cmd, cli.json).await
        }
        Command::Agents(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            skills::agents::run_agents(&client, session, cmd, cli.json).await
        }
        Command::Doctor => daemon::doctor::run(&socket, autostart, cli.session, cli.json).await,
        Command::Top { once, interval } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            top::run(&client, once, interval).await
        }
        Command::Completions { shell } => {
            help::complete::registration(shell)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            let dir = match dir {
                Some(d) => d,
                None => help::complete::user_man_dir()?,
            };
            let written = help::complete::man_pages(command(), &dir)?;
            if cli.json {
                output::json(&written)?;
            } else {
                outln!("wrote {} man pages in {}", written.len(), dir.display());
                if let Some(hint) = help::complete::man_path_hint(&dir) {
                    errln!("note: {hint}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Trust { path, parent, never } => {
            use geminid_protocol::config::TrustLevel;
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let level = match (parent, never) {
                (true, _) => TrustLevel::TrustParent,
                (_, true) => TrustLevel::DoNotTrust,
                _ => TrustLevel::TrustFolder,
            };
            config::trust(&client, path, Some(level), cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Untrust { path } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            config::trust(&client, path, None, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Rpc => {
            if autostart {
                daemon::connect::connect_or_start(&socket, true).await?;
            }
            daemon::bridge::run(&socket, DEFAULT_MAX_MESSAGE_SIZE).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
