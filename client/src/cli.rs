//! gemctl's command line: its global options and its commands, as `gemctl --help` lists them.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use geminid_protocol::socket::SOCKET_ENV;

use crate::daemon::DaemonCommand;
use crate::help::{complete, examples};
use crate::session::SessionCommand;
use crate::{clients, config, extensions, mcp, policy, skills, tools};

/// The heading of the options every command takes.
pub const GLOBAL: &str = "Global options";

/// Control geminid, the per-user daemon for Gemini CLI's MCP servers, extensions, skills,
/// hooks and policy.
#[derive(Debug, Parser)]
#[command(version = geminid_protocol::VERSION_LINE)]
pub struct Cli {
    // Every subcommand's help repeats these (clap's global options): one short line each,
    // under their own heading (audit turn 4, P2: four long texts under every command).
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/geminid/geminid.sock]
    #[arg(long, global = true, env = SOCKET_ENV, value_name = "PATH")]
    #[arg(help_heading = GLOBAL)]
    pub socket: Option<PathBuf>,
    /// Print JSON on stdout instead of text
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,
    /// Fail instead of starting geminid when it is not running
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub no_autostart: bool,
    /// The session to act for (an id, or 4+ of its first or last characters) [default: this
    /// directory's]
    #[arg(long, global = true, env = "GEMINID_SESSION", value_name = "ID")]
    #[arg(help_heading = GLOBAL)]
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(crate::help::complete::sessions))]
    pub session: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
    Config(config::ConfigCommand),
    /// Manage MCP servers in Gemini CLI's settings files
    #[command(subcommand)]
    Mcp(mcp::settings::McpCommand),
    /// Give an MCP client (gemini, agy, claude-code, codex, vscode, cursor) geminid's servers
    /// through the gateway, in its own file, and take them back
    #[command(subcommand)]
    Clients(clients::ClientsCommand),
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
    Agents(skills::agents::AgentsCommand),
    /// Slash commands: list (command files, MCP prompts, skills)
    #[command(subcommand)]
    Commands(skills::commands::CommandsCommand),
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
        shell: complete::Shell,
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
    pub fn uses_session(&self) -> bool {
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
            Self::Clients(c) => c.as_gemini().is_some(),
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

/// gemctl's command line, with each command's examples (`--help`, man pages, completion).
pub fn command() -> clap::Command {
    examples::attach(<Cli as clap::CommandFactory>::command())
}

/// Gemini CLI's `gemini mcp enable|disable NAME --session` typed as it is: here `--session`
/// takes a session id, and the flag meant is `--session-only`.
pub fn gemini_flag_hint(argv: &[String]) -> Option<String> {
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
