//! `gemctl`: the command-line client of geminid.

#![allow(
    rustdoc::invalid_html_tags,
    reason = "doc comments on the command line's types are clap's help text, where `<server>` is a placeholder shown as written"
)]

mod daemon;
mod extensions;
mod help;
mod mcp;
mod output;
mod policy;
mod session;
mod skills;
mod tools;
mod top;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use geminid_protocol::DEFAULT_MAX_MESSAGE_SIZE;
use geminid_protocol::api::{DaemonApiClient, SessionApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::client::ConnectError;
use geminid_protocol::common::ClientEnv;
use geminid_protocol::error::code_name;
use geminid_protocol::session::{
    Session, SessionAttachParams, SessionCreateParams, SessionIdParams, SessionListParams,
};
use geminid_protocol::socket::{SOCKET_ENV, socket_path};

use crate::output::{errln, outln};

/// Exit code of `gemctl status` when no daemon is running.
const EXIT_NOT_RUNNING: u8 = 3;

/// The heading of the options every command takes.
const GLOBAL: &str = "Global options";

/// Control geminid, the per-user daemon for Gemini CLI's MCP servers, extensions, skills,
/// hooks and policy.
#[derive(Debug, Parser)]
#[command(version = geminid_protocol::VERSION_LINE)]
struct Cli {
    // Every subcommand's help repeats these (clap's global options): one short line each,
    // under their own heading (audit turn 4, P2: four long texts under every command).
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/geminid/geminid.sock]
    #[arg(long, global = true, env = SOCKET_ENV, value_name = "PATH")]
    #[arg(help_heading = GLOBAL)]
    socket: Option<PathBuf>,
    /// Print JSON on stdout instead of text
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,
    /// Fail instead of starting geminid when it is not running
    #[arg(long, global = true, help_heading = GLOBAL)]
    no_autostart: bool,
    /// The session to act for (an id, or 4+ of its first or last characters) [default: this
    /// directory's]
    #[arg(long, global = true, env = "GEMINID_SESSION", value_name = "ID")]
    #[arg(help_heading = GLOBAL)]
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::sessions))]
    session: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show the daemon's status (exit code 3 if it is not running)
    Status,
    /// gemctl's version and, if one is running, the daemon's (never starts one)
    Version,
    /// Start, stop or restart the daemon, show its log, run it as a service
    #[command(subcommand)]
    Daemon(DaemonCommand),
    /// Create, list, show and close sessions
    #[command(subcommand)]
    Session(SessionCommand),
    /// Attach to a session and stream its events until Ctrl-C; answer the confirmations its
    /// calls wait for (y once, s for the session, a always, n deny) and the forms its MCP
    /// servers ask for (field by field; `!decline`, `!cancel`)
    Attach {
        /// The session [default: the current directory's default session]
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::sessions))]
        id: Option<String>,
        /// Answer confirmations and elicitations from stdin, one answer per line [default:
        /// when stdin is a terminal]
        #[arg(long, conflicts_with = "no_answer")]
        answer: bool,
        /// Do not answer confirmations or elicitations (the session stays headless for this
        /// client)
        #[arg(long)]
        no_answer: bool,
    },
    /// Answer a confirmation a call waits for (from `gemctl attach` or a
    /// `confirmation/requested` event); without arguments, list the session's pending ones
    Confirm {
        /// The confirmation's id (`ask-N`)
        #[arg(requires = "outcome")]
        id: Option<String>,
        /// once, session, always or deny (or y, s, a, n)
        outcome: Option<String>,
        /// Why (a denial's reason is told to the caller)
        #[arg(long)]
        reason: Option<String>,
    },
    /// The audit log: the latest calls, newest first (every session's, or `--session`'s)
    Audit {
        /// How many
        #[arg(short = 'n', long, default_value_t = 20)]
        limit: u32,
        /// Only records after this number
        #[arg(long, value_name = "SEQ")]
        since: Option<u64>,
    },
    /// The session's MCP tasks (tool calls its servers run as tasks), newest first; `cancel ID`
    /// asks the server to cancel one
    Tasks {
        /// `cancel`
        #[arg(value_parser = ["cancel"])]
        action: Option<String>,
        /// The task's id (from the list)
        #[arg(requires = "action")]
        id: Option<String>,
    },
    /// Stream every event until Ctrl-C
    Events,
    /// Relay JSON-RPC between stdin/stdout and the daemon (for editors); newline-delimited or
    /// Content-Length framing, detected automatically
    Rpc,
    /// Show or check the effective configuration (Gemini CLI's settings files)
    #[command(subcommand)]
    Config(mcp::settings::ConfigCommand),
    /// Manage MCP servers in Gemini CLI's settings files
    #[command(subcommand)]
    Mcp(mcp::settings::McpCommand),
    /// Call a tool by its name as `gemctl mcp tools` lists it; prints its text (exit 1 if the
    /// tool reports an error)
    Call {
        /// The tool
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::tools))]
        tool: String,
        /// Its arguments as a JSON object, or `-` to read them from stdin [default: {}]
        args: Option<String>,
        /// Read the arguments from a file
        #[arg(long, value_name = "FILE", conflicts_with = "args")]
        args_file: Option<PathBuf>,
        /// Print the tool's progress on stderr [default: when stderr is a terminal]
        #[arg(long, conflicts_with = "no_progress")]
        progress: bool,
        /// Do not print the tool's progress
        #[arg(long)]
        no_progress: bool,
    },
    /// Get an MCP prompt as Gemini CLI's slash command would (`--key=value`, positionals) and
    /// print its text
    Prompt {
        /// The command name, as `gemctl mcp prompts` lists it
        name: String,
        /// Its arguments
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Read an MCP resource: `@server:uri` (or a URI one server lists)
    Read {
        /// The reference
        reference: String,
    },
    /// What the session's tool-call policy decides: `check` a call, `list` the rules
    #[command(subcommand)]
    Policy(policy::rules::PolicyCommand),
    /// The session's hooks: `list` them, `run` an event's hooks for real
    #[command(subcommand)]
    Hooks(policy::hooks::HooksCommand),
    /// Extensions: install, update, link, uninstall, list, enable, disable, verify, accept, new
    #[command(subcommand)]
    Extensions(extensions::manage::ExtensionsCommand),
    /// Agent Skills: list, show, prompt, install, link, uninstall, enable, disable, activate
    #[command(subcommand)]
    Skills(skills::manage::SkillsCommand),
    /// Agent definitions (subagents): list, show
    #[command(subcommand)]
    Agents(skills::manage::AgentsCommand),
    /// Slash commands: list (command files, MCP prompts, skills)
    #[command(subcommand)]
    Commands(skills::manage::CommandsCommand),
    /// The session's tools: list (custom tools beside MCP ones), refresh (run
    /// `tools.discoveryCommand` again)
    #[command(subcommand)]
    Tools(tools::list::ToolsCommand),
    /// Check the setup: the socket and versions, the secrets store, the folder's trust, the
    /// configuration's problems, the programs stdio servers run, remote servers' reachability,
    /// servers that need a sign-in or keep failing; each finding with its fix (exit 1 on an
    /// error)
    Doctor,
    /// A live view of everything the daemon holds: servers (state, CPU, memory, calls,
    /// errors), sessions, calls in flight, what waits for an answer, the audit tail; keys
    /// restart, stop and start servers, show logs and tools, cancel calls and answer (`?`
    /// lists them). Never starts a server by itself
    Top {
        /// Print one frame as text and exit (for scripts and bug reports)
        #[arg(long)]
        once: bool,
        /// How often to poll, besides refreshing on events
        #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
        interval: std::time::Duration,
    },
    /// Print the script that gives SHELL completion of gemctl's commands and of the running
    /// daemon's servers, tools and sessions: `source <(gemctl completions bash)` in ~/.bashrc,
    /// `source <(gemctl completions zsh)` in ~/.zshrc, `gemctl completions fish | source` in
    /// ~/.config/fish/config.fish
    Completions {
        /// The shell
        shell: help::complete::Shell,
    },
    /// Write gemctl's man pages (gemctl.1 and one per command) into DIR
    Man {
        /// Where [default: $XDG_DATA_HOME/man/man1, else ~/.local/share/man/man1]
        dir: Option<PathBuf>,
    },
    /// Trust a folder (default: the current directory)
    Trust {
        /// The folder
        path: Option<PathBuf>,
        /// Trust its parent and everything below it
        #[arg(long, conflicts_with = "never")]
        parent: bool,
        /// Never trust it
        #[arg(long)]
        never: bool,
    },
    /// Remove a folder's trust rule (default: the current directory)
    Untrust {
        /// The folder
        path: Option<PathBuf>,
    },
}

impl Command {
    /// Whether the command acts for a session (and so reads `--session`).
    fn uses_session(&self) -> bool {
        use mcp::runtime::RuntimeCommand;
        use mcp::settings::McpCommand;
        match self {
            Self::Status
            | Self::Version
            | Self::Daemon(_)
            | Self::Events
            | Self::Rpc
            | Self::Trust { .. }
            | Self::Completions { .. }
            | Self::Man { .. }
            | Self::Top { .. }
            | Self::Untrust { .. } => false,
            Self::Confirm { .. } => false,
            // `--session` filters the records (the whole log without it).
            Self::Audit { .. } => true,
            Self::Extensions(extensions::manage::ExtensionsCommand::New { .. }) => false,
            Self::Session(SessionCommand::Show { id }) | Self::Attach { id, .. } => id.is_none(),
            Self::Session(_) => false,
            Self::Mcp(McpCommand::Runtime(RuntimeCommand::List { all })) => !*all,
            Self::Mcp(_)
            | Self::Config(_)
            | Self::Call { .. }
            | Self::Policy(_)
            | Self::Hooks(_)
            | Self::Extensions(_)
            | Self::Skills(_)
            | Self::Agents(_)
            | Self::Commands(_)
            | Self::Tools(_)
            | Self::Doctor
            | Self::Prompt { .. }
            | Self::Read { .. }
            | Self::Tasks { .. } => true,
        }
    }
}

#[derive(Debug, Subcommand)]
enum DaemonCommand {
    /// Start geminid in the background if it is not running
    Start,
    /// Stop geminid gracefully and wait for it to exit
    Stop,
    /// Stop geminid, wait for it to exit and start it again (to read config.toml anew, or
    /// after an upgrade); one the systemd user service runs is restarted by systemd
    Restart,
    /// Print the log of the geminid gemctl starts (<socket>.log); under systemd, say where
    /// the journal has it
    Logs {
        /// Keep printing new lines until Ctrl-C
        #[arg(short, long)]
        follow: bool,
        /// Only the newest N lines
        #[arg(short = 'n', long, value_name = "N")]
        lines: Option<usize>,
    },
    /// Run geminid as a systemd user service: write geminid.service (and, with
    /// --socket-activation, geminid.socket) to ~/.config/systemd/user, then enable and start it
    InstallService {
        /// systemd listens on the socket and starts geminid on the first connection; geminid
        /// exits after 30 idle minutes
        #[arg(long)]
        socket_activation: bool,
        /// Only write the units (and say how to enable them)
        #[arg(long)]
        no_enable: bool,
    },
    /// Stop and disable the user service and remove its units
    UninstallService,
}

#[derive(Debug, Subcommand)]
enum SessionCommand {
    /// Create a new session
    New {
        /// Its workspace [default: the current directory]
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// List sessions
    List {
        /// Only sessions of this workspace
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Show one session [default: the current directory's default session]
    Show {
        /// The session
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::sessions))]
        id: Option<String>,
    },
    /// Close a session (detach everyone and delete it, and the sessions derived from it)
    Close {
        /// The session
        #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::sessions))]
        id: String,
    },
    /// Create a subagent's session under a parent: its confirmations go to the parent's
    /// clients, labelled with its path
    Derive {
        /// The parent session
        parent: String,
        /// The subagent's name (rules with `subagent = "NAME"` apply to it) [default: the
        /// --agent's]
        #[arg(required_unless_present = "agent", default_value = "")]
        name: String,
        /// The only tools it sees, comma-separated; `mcp_server_*` for all of a server's
        /// [default: the --agent's, else all of the parent's]
        #[arg(long, value_delimiter = ',', value_name = "TOOLS")]
        tools: Option<Vec<String>>,
        /// Start from an agent definition (`gemctl agents list`): its name and tools
        #[arg(long)]
        agent: Option<String>,
    },
    /// Change a session's approval mode or interactivity
    Update {
        /// The session [default: the current directory's default session]
        id: Option<String>,
        /// default, autoEdit, yolo or plan
        #[arg(long, value_parser = policy::rules::parse_mode)]
        mode: Option<geminid_protocol::policy::ApprovalMode>,
        /// Interactive whatever its clients do (a person answers its confirmations)
        #[arg(long, conflicts_with_all = ["headless", "auto"])]
        interactive: bool,
        /// Headless whatever its clients do
        #[arg(long, conflicts_with = "auto")]
        headless: bool,
        /// Interactive while a client listens for confirmations (the default)
        #[arg(long)]
        auto: bool,
    },
}

/// gemctl's command line, with each command's examples (`--help`, man pages, completion).
fn command() -> clap::Command {
    help::examples::attach(<Cli as clap::CommandFactory>::command())
}

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

/// Gemini CLI's `gemini mcp enable|disable NAME --session` typed as it is: here `--session`
/// takes a session id, and the flag meant is `--session-only`.
fn gemini_flag_hint(argv: &[String]) -> Option<String> {
    let verb = argv.iter().position(|a| a == "enable" || a == "disable")?;
    let is_mcp = verb > 0 && argv[verb - 1] == "mcp";
    let trailing = argv.last().is_some_and(|a| a == "--session");
    (is_mcp && trailing).then(|| {
        format!(
            "`--session` selects a session here (it takes an id); for Gemini CLI's `mcp {} NAME \
             --session` (only for this session) write `--session-only`",
            argv[verb]
        )
    })
}

/// The command printed its result, and that result is a failure (a server that did not
/// start, say): exit 1 without another message.
#[derive(Debug)]
pub struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the command's result is a failure")
    }
}

impl std::error::Error for Failed {}

/// An error the daemon returned for a call: its message is meant for people as it is.
#[derive(Debug)]
struct CallError {
    code: i32,
    message: String,
    /// The hooks that blocked the call or stopped the turn (the error's `data.hooks`).
    hooks: Vec<String>,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

/// Turn a client error into one that prints well: the daemon's own message for a call error,
/// otherwise the transport error with the method named.
fn call_error(
    method: &'static str,
) -> impl FnOnce(jsonrpsee::core::client::Error) -> anyhow::Error {
    move |e| match e {
        jsonrpsee::core::client::Error::Call(obj) => {
            let hooks = obj
                .data()
                .and_then(|d| serde_json::from_str::<serde_json::Value>(d.get()).ok())
                .and_then(|d| serde_json::from_value::<Vec<String>>(d["hooks"].clone()).ok())
                .unwrap_or_default();
            anyhow::Error::new(CallError {
                code: obj.code(),
                message: obj.message().to_owned(),
                hooks,
            })
        }
        other => anyhow::Error::new(other).context(method),
    }
}

/// Whether `e` says the session has no such server, or has not started it.
fn not_here(e: &anyhow::Error) -> bool {
    use geminid_protocol::error::ErrorCode;
    let code = e.chain().find_map(|c| c.downcast_ref::<CallError>().map(|c| c.code));
    [ErrorCode::ServerNotFound, ErrorCode::ServerUnavailable].iter().any(|c| code == Some(c.code()))
}

/// An error's JSON-RPC code and its name: the daemon's, or for what gemctl met itself,
/// `notRunning`, `cannotConnect` or `clientError` (no code: it never reached the daemon).
fn error_kind(e: &anyhow::Error) -> (Option<i32>, &'static str) {
    use geminid_protocol::client::ConnectError;
    use geminid_protocol::error::ErrorCode;
    for cause in e.chain() {
        if let Some(call) = cause.downcast_ref::<CallError>() {
            return (Some(call.code), code_name(call.code).unwrap_or("clientError"));
        }
        if let Some(connect) = cause.downcast_ref::<ConnectError>() {
            return match connect {
                ConnectError::NotRunning { .. } => (None, "notRunning"),
                ConnectError::VersionMismatch(_) => {
                    let code = ErrorCode::VersionMismatch;
                    (Some(code.code()), code.name())
                }
                ConnectError::Rpc(jsonrpsee::core::client::Error::Call(obj)) => {
                    (Some(obj.code()), code_name(obj.code()).unwrap_or("clientError"))
                }
                _ => (None, "cannotConnect"),
            };
        }
    }
    (None, "clientError")
}

/// Errors go to stderr; with `--json` also as `{"error": {...}}` on stdout.
fn report(e: &anyhow::Error, json: bool) {
    // The error may quote a server or a rule (a denyMessage): its colour codes are escaped,
    // gemctl's own too, as no part of the message is gemctl's colouring.
    let message = format!("{e:#}");
    errln!(
        "{} {}",
        output::color::paint_err("gemctl:", output::color::Tone::Bad),
        output::shown::block(&message)
    );
    // Which hook decided, and how to turn it off: the message is what the model reads.
    let hooks = e.chain().find_map(|c| c.downcast_ref::<CallError>()).map(|c| &c.hooks);
    for hook in hooks.into_iter().flatten() {
        let word = if hook.contains(char::is_whitespace) {
            format!("'{}'", hook.replace('\'', "'\\''"))
        } else {
            hook.clone()
        };
        errln!("note: decided by the hook '{hook}' (`gemctl hooks disable {word}` turns it off)");
    }
    if json {
        let (code, name) = error_kind(e);
        let body = serde_json::json!({ "error": { "message": format!("{e:#}"), "code": code, "name": name } });
        outln!("{body}");
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let socket = socket_path(cli.socket.as_deref())?;
    let autostart = !cli.no_autostart;
    match cli.command {
        Command::Status => status(&socket, cli.json).await,
        Command::Version => version(&socket, cli.json).await,
        Command::Daemon(DaemonCommand::Start) => daemon_start(&socket, cli.json).await,
        Command::Daemon(DaemonCommand::Stop) => daemon_stop(&socket, cli.json).await,
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
            session(&client, cmd, cli.session, cli.json).await?;
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
            tools::list::tasks(&client, session, action, id, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit { limit, since } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = match cli.session {
                Some(id) => Some(resolve_id(&client, id).await?),
                None => None,
            };
            policy::rules::audit(&client, session, limit, since, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Config(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            mcp::settings::config(&client, session, cmd, cli.json).await
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
                    mcp::serve::run(&socket, &session, &options, end, first).await?
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
            tools::list::call(&client, session, tool, args, args_file, progress, cli.json).await
        }
        Command::Prompt { name, args } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            tools::list::prompt(&client, session, name, args, cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Read { reference } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            tools::list::read(&client, session, reference, cli.json).await?;
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
            let cmd = extensions::manage::ExtensionsCommand::New { path, template };
            extensions::manage::new_here(cmd, cli.json)
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
            skills::manage::run_commands(&client, session, cmd, cli.json).await
        }
        Command::Tools(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            tools::list::run(&client, session, cmd, cli.json).await
        }
        Command::Agents(cmd) => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            let session = for_session(&client, cli.session).await?.id;
            skills::manage::run_agents(&client, session, cmd, cli.json).await
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
            mcp::settings::trust(&client, path, Some(level), cli.json).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Untrust { path } => {
            let (client, _) = daemon::connect::connect_or_start(&socket, autostart).await?;
            mcp::settings::trust(&client, path, None, cli.json).await?;
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

/// The environment gemctl sends with `session/create` and `session/attach`: a variable whose
/// name or value is not UTF-8 is left out (`std::env::vars` panicked on one).
fn client_env() -> ClientEnv {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn absolute(dir: Option<PathBuf>) -> anyhow::Result<String> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let dir = match dir {
        Some(d) if d.is_absolute() => d,
        Some(d) => cwd.join(d),
        None => cwd,
    };
    Ok(dir.to_string_lossy().into_owned())
}

/// The session a command acts for, attached to this connection: `id` (from `--session`) if
/// given, else the current directory's default session, created on first use. Every command
/// that acts for a session follows this convention.
async fn for_session(client: &Client, id: Option<String>) -> anyhow::Result<Session> {
    if let Some(id) = id {
        let id = resolve_id(client, id).await?;
        let params = SessionAttachParams { id, env: Some(client_env()) };
        return client.attach(params).await.map_err(call_error("session/attach"));
    }
    let params = SessionCreateParams {
        workspace: absolute(None)?,
        env: Some(client_env()),
        reuse_default: true,
        ..SessionCreateParams::default()
    };
    client.create(params).await.map_err(call_error("session/create"))
}

/// The default session of `dir` for clients that declare `upstream` (created on first use),
/// given this process's environment only if it has none (`gemctl mcp serve`).
async fn for_workspace(
    client: &Client,
    dir: &Path,
    upstream: Option<geminid_protocol::session::Declares>,
) -> anyhow::Result<Session> {
    let params = SessionCreateParams {
        workspace: absolute(Some(dir.to_path_buf()))?,
        env: Some(client_env()),
        env_if_unset: true,
        reuse_default: true,
        upstream,
        ..SessionCreateParams::default()
    };
    client.create(params).await.map_err(call_error("session/create"))
}

/// Every session (of `workspace`, if given), oldest first, page by page.
async fn all_sessions(client: &Client, workspace: Option<String>) -> anyhow::Result<Vec<Session>> {
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let params = SessionListParams { workspace: workspace.clone(), cursor, limit: None };
        let page = client.list(Some(params)).await.map_err(call_error("session/list"))?;
        all.extend(page.sessions);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(all),
        }
    }
}

/// A session id as given: a whole id, or enough of one to tell it from the others (its start,
/// or its end: ids begin with their creation time, so sessions created close together share
/// their first characters but not their last).
async fn resolve_id(client: &Client, given: String) -> anyhow::Result<String> {
    if given.len() >= 36 || given.len() < 4 {
        return Ok(given);
    }
    let all = all_sessions(client, None).await?;
    let by = |f: &dyn Fn(&str) -> bool| -> Vec<String> {
        all.iter().map(|s| s.id.clone()).filter(|id| f(id)).collect()
    };
    let mut found = by(&|id| id.starts_with(given.as_str()));
    if found.is_empty() {
        found = by(&|id| id.ends_with(given.as_str()));
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Ok(given), // the daemon says it does not exist, and what to do
        several => anyhow::bail!(
            "'{given}' fits {} sessions: {}; give more of the id",
            several.len(),
            several.join(", ")
        ),
    }
}

async fn status(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let opts = daemon::connect::options();
    let client = match geminid_protocol::client::open(socket, &opts).await {
        Ok(c) => c,
        Err(e @ ConnectError::NotRunning { .. }) => {
            if json {
                output::json(&serde_json::json!({ "running": false, "socket": socket }))?;
            } else {
                outln!("{e}");
            }
            return Ok(ExitCode::from(EXIT_NOT_RUNNING));
        }
        Err(e) => return Err(e.into()),
    };
    // Hello and status go out together (one round trip less); hello is checked first, so a
    // version mismatch is still reported as such.
    use geminid_protocol::api::McpApiClient;
    let (hello, status, servers) = tokio::join!(
        geminid_protocol::client::handshake(&client, &opts),
        client.status(),
        client.mcp_list_servers(None)
    );
    hello?;
    let status = status.map_err(call_error("daemon/status"))?;
    // Every server the daemon runs, summed up (`mcp list --all` has them one by one).
    let servers = servers.map_err(call_error("mcp/listServers"))?.servers;
    let summary = output::ServersSummary::of(&servers);
    if json {
        let mut v = serde_json::to_value(&status)?;
        v["running"] = true.into();
        v["servers"] = serde_json::to_value(&summary)?;
        output::json(&v)?;
    } else {
        output::status(&status, &summary);
    }
    Ok(ExitCode::SUCCESS)
}

async fn version(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let daemon = match daemon::connect::connect_running(socket).await {
        Ok((_, hello)) => Some(hello),
        Err(ConnectError::NotRunning { .. }) => None,
        // Versions that do not match are what this command is asked for to see.
        Err(ConnectError::VersionMismatch(why)) if !json => {
            outln!("gemctl {}", geminid_protocol::VERSION_LINE);
            outln!("{why}");
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        output::json(&serde_json::json!({
            "gemctl": geminid_protocol::DAEMON_VERSION,
            "protocolVersion": geminid_protocol::PROTOCOL_VERSION,
            "daemon": daemon,
        }))?;
    } else {
        outln!("gemctl {}", geminid_protocol::VERSION_LINE);
        match daemon {
            Some(h) => outln!(
                "geminid {} (protocol {}), pid {}",
                h.daemon_version,
                h.protocol_version,
                h.pid
            ),
            None => outln!("geminid is not running on {}", socket.display()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn daemon_start(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let (hello, started) = match daemon::connect::connect_running(socket).await {
        Ok((_, hello)) => (hello, false),
        Err(ConnectError::NotRunning { .. }) => (daemon::connect::start(socket, None).await?, true),
        Err(e) => return Err(e.into()),
    };
    if json {
        output::json(&serde_json::json!({
            "running": true, "started": started, "pid": hello.pid, "socket": socket,
        }))?;
    } else if started {
        outln!("geminid started (pid {}) on {}", hello.pid, socket.display());
    } else {
        outln!("geminid is already running (pid {}) on {}", hello.pid, socket.display());
    }
    Ok(ExitCode::SUCCESS)
}

async fn daemon_stop(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    // No hello: `daemon/shutdown` is the same in every protocol version, so a gemctl of a
    // newer release stops the older daemon it is replacing.
    let client = match geminid_protocol::client::open(socket, &daemon::connect::options()).await {
        Ok(c) => c,
        Err(ConnectError::NotRunning { .. }) => {
            if json {
                output::json(&serde_json::json!({ "running": false, "stopped": false }))?;
            } else {
                outln!("geminid is not running");
            }
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    let result = client.shutdown().await.map_err(call_error("daemon/shutdown"))?;
    daemon::connect::wait_stopped(socket).await?;
    if json {
        output::json(&serde_json::json!({ "running": false, "stopped": true, "pid": result.pid }))?;
    } else {
        outln!("geminid (pid {}) stopped", result.pid);
    }
    Ok(ExitCode::SUCCESS)
}

async fn session(
    client: &Client,
    cmd: SessionCommand,
    selected: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let one = |s: &Session| {
        if json {
            return output::json(s);
        }
        output::session(s);
        Ok(())
    };
    match cmd {
        SessionCommand::New { workspace } => {
            let params = SessionCreateParams {
                workspace: absolute(workspace)?,
                env: Some(client_env()),
                reuse_default: false,
                ..SessionCreateParams::default()
            };
            let s = client.create(params).await.map_err(call_error("session/create"))?;
            if json { output::json(&s)? } else { outln!("{}", s.id) }
        }
        SessionCommand::List { workspace } => {
            let workspace = workspace.map(|w| absolute(Some(w))).transpose()?;
            let all = all_sessions(client, workspace).await?;
            if json { output::json(&all)? } else { output::sessions(&all) }
        }
        SessionCommand::Show { id } => {
            let s = match id {
                Some(id) => {
                    let id = resolve_id(client, id).await?;
                    client.get(SessionIdParams { id }).await.map_err(call_error("session/get"))?
                }
                None => {
                    // Attached to find it: its count is of the others (audit polish). Got
                    // again for what only `session/get` says (who listens).
                    let id = for_session(client, selected).await?.id;
                    let mut s = client
                        .get(SessionIdParams { id })
                        .await
                        .map_err(call_error("session/get"))?;
                    s.attached_connections = s.attached_connections.saturating_sub(1);
                    s
                }
            };
            one(&s)?;
        }
        SessionCommand::Close { id } => {
            let id = resolve_id(client, id).await?;
            let s =
                client.close(SessionIdParams { id }).await.map_err(call_error("session/close"))?;
            if json { output::json(&s)? } else { outln!("closed session {}", s.id) }
        }
        SessionCommand::Derive { parent, name, tools, agent } => {
            let parent = resolve_id(client, parent).await?;
            let p = geminid_protocol::session::SessionDeriveParams { parent, name, tools, agent };
            let s = client.derive(p).await.map_err(call_error("session/derive"))?;
            if json {
                output::json(&s)?
            } else {
                let path = s.state.derived.as_ref().map_or("", |d| d.path.as_str());
                outln!("{} {path}", s.id)
            }
        }
        SessionCommand::Update { id, mode, interactive, headless, auto } => {
            let id = match id.or(selected) {
                Some(id) => resolve_id(client, id).await?,
                None => for_session(client, None).await?.id,
            };
            let p = geminid_protocol::session::SessionUpdateParams {
                id,
                approval_mode: mode,
                interactive: (interactive || headless).then_some(interactive),
                interactive_auto: auto,
            };
            let s = client.update(p).await.map_err(call_error("session/update"))?;
            if json {
                output::json(&s)?
            } else {
                let how = match s.state.interactive {
                    Some(true) => "interactive",
                    Some(false) => "headless",
                    None => "interactive while a client answers confirmations",
                };
                let mode = serde_json::to_value(s.state.approval_mode).unwrap_or_default();
                outln!("session {}: mode {}, {how}", s.id, mode.as_str().unwrap_or("?"))
            }
        }
    }
    Ok(())
}
