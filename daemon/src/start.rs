//! The process: `geminid`'s flags (with the settings file's values as their defaults), its
//! logging, and the start-up that claims the socket, opens the store, builds the core and
//! runs the server until it shuts down. `main.rs` is only [`main`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::config::{ConfigPaths, Loader};
use crate::core::{Core, DaemonInfo};
use crate::events::DEFAULT_SUBSCRIBER_BUFFER;
use crate::mcp::{self, McpOptions};
use crate::server::{self, DEFAULT_MAX_CONNECTIONS};
use crate::{log_file, paths, settings_file, store::Store};
use anyhow::Context;
use clap::{Parser, ValueEnum};
use geminid_protocol::DEFAULT_MAX_MESSAGE_SIZE;
use geminid_protocol::daemon::Limits;
use geminid_protocol::socket::{SOCKET_ENV, socket_path};
use tracing_subscriber::EnvFilter;

/// How often idle default sessions are looked for (besides at start).
const SESSION_PRUNE_EVERY: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// `--secrets`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SecretsArg {
    /// The OS keyring when it answers, else the file.
    Auto,
    /// Always the 0600 file.
    File,
}

/// geminid: one per-user daemon for Gemini CLI's MCP servers, extensions, skills, hooks and
/// policy. Clients (gemctl, editors) speak JSON-RPC 2.0 to it over a local socket.
#[derive(Debug, Parser)]
#[command(version = geminid_protocol::VERSION_LINE)]
struct Args {
    /// Settings file: each `flag-name = value` in it is that flag's default [default:
    /// $XDG_CONFIG_HOME/geminid/config.toml, else ~/.config/geminid/config.toml]
    #[arg(long, env = settings_file::CONFIG_ENV, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Control socket [default: $XDG_RUNTIME_DIR/geminid/geminid.sock (without it, /run/user/UID when it is yours), else ~/.gemini/run/geminid.sock]
    #[arg(long, env = SOCKET_ENV, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Database directory [default: $XDG_STATE_HOME/geminid, else ~/.local/state/geminid]
    #[arg(long, env = "GEMINID_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Log format on stderr (filter with RUST_LOG, default `info`)
    #[arg(long, env = "GEMINID_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Write the log to FILE (stderr too) instead of stderr; past --log-max-size it becomes
    /// FILE.1, replacing the previous one, and a new FILE begins. gemctl's autostart uses the
    /// socket's path with `.log`
    #[arg(long, env = "GEMINID_LOG_FILE", value_name = "FILE")]
    log_file: Option<PathBuf>,
    /// Size at which --log-file is rotated; `unlimited` never rotates it
    #[arg(long, env = "GEMINID_LOG_MAX_SIZE", default_value = "10MiB", value_parser = log_max_size, value_name = "SIZE")]
    log_max_size: LogMaxSize,
    /// Most client connections served at once
    #[arg(long, env = "GEMINID_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    max_connections: u32,
    /// Largest JSON-RPC message accepted or sent, in bytes
    #[arg(long, env = "GEMINID_MAX_MESSAGE_SIZE", default_value_t = DEFAULT_MAX_MESSAGE_SIZE, value_name = "BYTES")]
    max_message_size: u32,
    /// Events buffered per subscriber before a slow one is dropped
    #[arg(long, env = "GEMINID_SUBSCRIBER_BUFFER", default_value_t = DEFAULT_SUBSCRIBER_BUFFER as u32, value_name = "N")]
    subscriber_buffer: u32,
    /// How long an MCP server keeps running after no session needs it
    #[arg(long, env = "GEMINID_MCP_LINGER", default_value = "8h", value_parser = humantime::parse_duration, value_name = "DURATION")]
    mcp_linger: Duration,
    /// Resident memory idle MCP servers (no session uses them) may hold together; past it the
    /// least recently used stops first. `auto`: an eighth of the machine's memory, at least
    /// 2 GiB; `unlimited` removes the bound
    #[arg(long, env = "GEMINID_MCP_IDLE_MEMORY", default_value = "auto", value_parser = mcp::budget_arg, value_name = "SIZE")]
    mcp_idle_memory: mcp::Budget,
    /// An MCP server used within this long is never stopped for --mcp-idle-memory
    #[arg(long, env = "GEMINID_MCP_IDLE_MEMORY_AFTER", default_value = "5m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    mcp_idle_memory_after: Duration,
    /// At start, the servers of this many recently used workspaces are started in the
    /// background (their environments are kept with the secrets); `0` turns it off
    #[arg(long, env = "GEMINID_MCP_WARM_WORKSPACES", default_value_t = 8, value_name = "N")]
    mcp_warm_workspaces: u32,
    /// What a tool, prompt or resource template that differs from the definition pinned on its
    /// server's first use meets: `enforce` holds it until `gemctl mcp accept`, `warn` offers it
    /// and says so, `off` pins nothing. A server's `pinning` in servers.json decides for it
    #[arg(long, env = "GEMINID_TOOL_PINNING", default_value = "enforce", value_parser = pin_mode, value_name = "MODE")]
    tool_pinning: geminid_protocol::pins::PinMode,
    /// What a local server meets when what it runs differs from what was recorded on its first
    /// start (an npm package's version or integrity, an executable's SHA-256): `enforce` holds
    /// it, not started, until `gemctl mcp accept`, `warn` starts it and says so, `off` records
    /// nothing. A server's `artifactPinning` in servers.json decides for it
    #[arg(long, env = "GEMINID_ARTIFACT_PINNING", default_value = "enforce", value_parser = pin_mode, value_name = "MODE")]
    artifact_pinning: geminid_protocol::pins::PinMode,
    /// With OpenTelemetry export on (Gemini CLI's `telemetry` settings, `GEMINI_TELEMETRY_*`,
    /// `OTEL_*`): put tools' arguments and results in spans (`gen_ai.tool.call.arguments`,
    /// `gen_ai.tool.call.result`), which may hold what a user would not share
    #[arg(long, env = "GEMINID_TELEMETRY_TOOL_IO", value_name = "BOOL", default_value_t = false, action = clap::ArgAction::Set)]
    telemetry_tool_io: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics (a loopback address only, e.g.
    /// 127.0.0.1:9464): the MCP operation and session histograms and the daemon's gauges,
    /// whether or not OTLP export is on. Off unless given
    #[arg(long, env = "GEMINID_METRICS_LISTEN", value_parser = crate::telemetry::scrape::loopback, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// First delay before restarting a failed MCP server (doubles per failure in a row)
    #[arg(long, env = "GEMINID_MCP_BACKOFF", default_value = "1s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    mcp_backoff: Duration,
    /// Longest delay between restarts
    #[arg(long, env = "GEMINID_MCP_BACKOFF_MAX", default_value = "60s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    mcp_backoff_max: Duration,
    /// Failures in a row before a server is parked in crash-loop
    #[arg(long, env = "GEMINID_MCP_RESTART_BUDGET", default_value_t = mcp::DEFAULT_RESTART_BUDGET, value_name = "N")]
    mcp_restart_budget: u32,
    /// A server connected this long starts counting failures afresh
    #[arg(long, env = "GEMINID_MCP_STABLE_AFTER", default_value = "60s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    mcp_stable_after: Duration,
    /// Between SIGTERM and SIGKILL when stopping a server's process group
    #[arg(long, env = "GEMINID_MCP_STOP_GRACE", default_value = "3s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    mcp_stop_grace: Duration,
    /// Start-up limit for servers without a `timeout` setting
    #[arg(long, env = "GEMINID_MCP_STARTUP_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    mcp_startup_timeout: Duration,
    /// How often a connected server is pinged; one that does not answer within this (or its
    /// start-up timeout, if shorter) is shown as unresponsive. `0s` turns pings off
    #[arg(long, env = "GEMINID_MCP_PING_EVERY", default_value = "30s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    mcp_ping_every: Duration,
    /// Default sessions (one per directory gemctl ever ran in) unused this long, and holding
    /// nothing of their own, are closed; checked at start and hourly. `0s` keeps them all
    #[arg(long, env = "GEMINID_SESSION_PRUNE_AFTER", default_value = "30d", value_parser = humantime::parse_duration, value_name = "DURATION")]
    session_prune_after: Duration,
    /// How long a tool call policy asks about waits for a person to confirm it before it is
    /// denied
    #[arg(long, env = "GEMINID_CONFIRM_TIMEOUT", default_value = "5m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    confirm_timeout: Duration,
    /// How long `gemctl mcp auth` waits for the browser to come back
    #[arg(long, env = "GEMINID_OAUTH_TIMEOUT", default_value = "5m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    oauth_timeout: Duration,
    /// How long `tools.discoveryCommand` may run before it is stopped (its process group)
    #[arg(long, env = "GEMINID_TOOL_DISCOVERY_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    tool_discovery_timeout: Duration,
    /// Exit after nothing has needed the daemon for this long (no client connected, no session
    /// attached, no MCP server running); `0s` never. For on-demand starts (gemctl's autostart,
    /// socket activation): a plain service keeps running
    #[arg(long, env = "GEMINID_IDLE_EXIT", default_value = "0s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    idle_exit: Duration,
    /// How long one call of a custom tool (`tools.callCommand`) may run before it is stopped
    #[arg(long, env = "GEMINID_TOOL_CALL_TIMEOUT", default_value = "10m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    tool_call_timeout: Duration,
    /// Where OAuth tokens and other secrets are kept: `auto` (the OS keyring, else a 0600
    /// file in the data directory) or `file` (always the file)
    #[arg(long, env = "GEMINID_SECRETS", value_enum, default_value_t = SecretsArg::Auto)]
    secrets: SecretsArg,
    /// Threads running the event loop. One serves a user's sessions with the fewest thread
    /// wake-ups per call (see BENCHMARKS.md); raise it if many sessions do CPU-heavy work at
    /// once. Blocking work (the database, schema compiling) has its own threads either way.
    #[arg(long, env = "GEMINID_WORKER_THREADS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256), value_name = "N")]
    worker_threads: u16,
}

/// `--log-max-size`: a size, or `None` for `unlimited`.
#[derive(Debug, Clone, Copy)]
struct LogMaxSize(Option<u64>);

fn log_max_size(text: &str) -> Result<LogMaxSize, String> {
    let size = mcp::parse_budget(text)?;
    if size.is_some_and(|s| s < log_file::MIN_MAX_SIZE) {
        return Err(format!("'{text}' is too small: at least {} bytes", log_file::MIN_MAX_SIZE));
    }
    Ok(LogMaxSize(size))
}

/// The daemon, from its command line to its exit.
pub fn main() -> ExitCode {
    crate::heap::settle_large_allocations();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("geminid: {e}");
            return ExitCode::from(2);
        }
    };
    let log = match &args.log_file {
        None => None,
        // Absolute, since the daemon leaves the folder it was started in (rotation reopens it).
        Some(path) => match std::path::absolute(path)
            .and_then(|path| log_file::RotatingLog::open(&path, args.log_max_size.0))
        {
            Ok(log) => Some(log),
            Err(e) => {
                eprintln!("geminid: cannot open the log file {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
    };
    init_logging(args.log_format, log);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::from(args.worker_threads))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("geminid: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The flags, with the settings file's values as their defaults (a flag given, or its
/// `GEMINID_*` variable, wins over the file).
fn parse_args() -> Result<Args, settings_file::FileError> {
    use clap::{CommandFactory, FromArgMatches};
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cmd = Args::command();
    // `--help` and `--version` answer whatever the settings file is (a GEMINID_CONFIG naming a
    // file not there yet, one that does not parse): they read nothing else.
    let asks = argv
        .iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| matches!(a.to_str(), Some("-h" | "--help" | "-V" | "--version")));
    if let Some((path, named)) = settings_file::locate(&argv, |k| std::env::var_os(k)) {
        match settings_file::read(&path, named)
            .and_then(|pairs| settings_file::apply(cmd.clone(), &path, &pairs))
        {
            Ok(with_file) => cmd = with_file,
            Err(_) if asks => {}
            Err(e) => return Err(e),
        }
    }
    let matches = cmd.get_matches_from(argv);
    Ok(Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit()))
}

/// Whether stderr is systemd's journal stream (`JOURNAL_STREAM` names its device and inode).
#[cfg(unix)]
fn stderr_is_journal() -> bool {
    let Some((dev, ino)) = std::env::var("JOURNAL_STREAM")
        .ok()
        .and_then(|v| v.split_once(':').map(|(d, i)| (d.parse::<u64>(), i.parse::<u64>())))
    else {
        return false;
    };
    let Ok(st) = nix::sys::stat::fstat(std::io::stderr()) else { return false };
    #[allow(clippy::useless_conversion, reason = "the types differ between platforms")]
    let same = dev == Ok(u64::from(st.st_dev)) && ino == Ok(u64::from(st.st_ino));
    same
}

/// The log's filter without `RUST_LOG`: geminid's own events at `info`; rmcp's at `warn`, since
/// at `info` it logs every list-change notification and each server's whole `peer_info`
/// (a third of a busy log; audit P8), which geminid says in its own words where it matters.
const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

/// A log's writer that takes the secrets out of the URLs in what it writes (a dependency's
/// error message, rmcp's among them, may hold a server's URL with its key in the query).
struct Redacting<W>(W);

impl<W: std::io::Write> std::io::Write for Redacting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // tracing writes one whole event per call.
        match std::str::from_utf8(buf) {
            Ok(text) => {
                self.0.write_all(crate::config::env::redact_urls(text).as_bytes())?;
                Ok(buf.len())
            }
            Err(_) => self.0.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

fn init_logging(format: LogFormat, file: Option<log_file::RotatingLog>) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    if let Some(file) = file {
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            // std's Mutex: tracing-subscriber implements `MakeWriter` for it, not parking_lot's.
            .with_writer(std::sync::Mutex::new(Redacting(file)))
            .with_ansi(false);
        match format {
            LogFormat::Text => builder.init(),
            LogFormat::Json => builder.json().init(),
        }
        return;
    }
    // Under systemd, text logs go to journald itself, with each event's fields as journal
    // fields (SESSION=, SERVER=, ...: `journalctl --user -u geminid SERVER=github`).
    #[cfg(unix)]
    if format == LogFormat::Text
        && stderr_is_journal()
        && let Ok(journal) = tracing_journald::layer()
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let journal = journal.with_field_prefix(None).with_syslog_identifier("geminid".to_owned());
        tracing_subscriber::registry().with(filter).with(journal).init();
        return;
    }
    // Colours only on a terminal: under systemd, or started by gemctl, stderr is the journal
    // or a log file, where escape codes are noise.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| Redacting(std::io::stderr()))
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    // A debug build whose tests drive its clock (`testing/advanceClock`).
    #[cfg(debug_assertions)]
    crate::clock::driven::from_env();
    // Absolute, since the daemon leaves the folder it was started in (below).
    let socket = std::path::absolute(socket_path(args.socket.as_deref())?)?;
    let data_dir =
        std::path::absolute(paths::data_dir_from(args.data_dir, |k| std::env::var_os(k))?)?;
    if args.max_connections == 0 || args.subscriber_buffer == 0 || args.max_message_size < 1024 {
        anyhow::bail!(
            "--max-connections and --subscriber-buffer must be at least 1 and \
             --max-message-size at least 1024"
        );
    }
    paths::create_private_dir(&data_dir)
        .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
    // Claim the socket before opening the database, so that a second daemon reports the
    // running one instead of a database lock error. Under socket activation, the one systemd
    // passed (its path is the daemon's socket, whatever --socket says).
    let env = |k: &str| std::env::var(k).ok();
    let notifier = crate::systemd::Notifier::from_env(env);
    #[cfg(unix)]
    let passed = crate::systemd::listen_fd(env).map_err(anyhow::Error::msg)?;
    #[cfg(not(unix))]
    let passed: Option<()> = None;
    let (bound, socket) = match passed {
        #[cfg(unix)]
        Some(fd) => {
            let path = crate::systemd::socket_path(&fd).unwrap_or_else(|| socket.clone());
            if path != socket {
                tracing::warn!(passed = %path.display(), expected = %socket.display(), "systemd passed a socket at another path than gemctl looks for; set GEMINID_SOCKET for gemctl");
            }
            (server::adopt(fd, &path, &server::lock_path(&path, &data_dir))?, path)
        }
        _ => (server::bind(&socket, &server::lock_path(&socket, &data_dir))?, socket),
    };
    // A daemon on another socket may use the same data directory: say who, not sled's error.
    let _data_lock = crate::store::lock_dir(&data_dir, &socket)?;
    let store = Store::open(&data_dir)?;
    if let Some(damage) = store.damage() {
        tracing::error!(kept = %damage.kept.display(), "{}", damage.message());
    }
    let mcp = McpOptions {
        linger: args.mcp_linger,
        idle_memory: args.mcp_idle_memory.0,
        budget_min_idle: args.mcp_idle_memory_after,
        backoff_initial: args.mcp_backoff,
        backoff_max: args.mcp_backoff_max.max(args.mcp_backoff),
        restart_budget: args.mcp_restart_budget,
        stable_after: args.mcp_stable_after,
        stop_grace: args.mcp_stop_grace,
        startup_timeout: args.mcp_startup_timeout,
        ping_every: args.mcp_ping_every,
        oauth_timeout: args.oauth_timeout,
    };
    let paths = ConfigPaths::from_env(|k| std::env::var_os(k))?;
    let metrics = start_telemetry(&paths, args.telemetry_tool_io, args.metrics_listen).await?;
    let config = Loader::new(paths);
    // The daemon works in its own folder, never the one it was started in (a repository the
    // user just cloned, whose `.git/config` a git run there would read; issue 64, item 2).
    std::env::set_current_dir(&data_dir)
        .with_context(|| format!("cannot enter the data directory {}", data_dir.display()))?;
    let core = Core::new(
        store,
        DaemonInfo {
            socket: socket.clone(),
            data_dir: data_dir.clone(),
            limits: Limits {
                max_connections: args.max_connections,
                max_message_size: args.max_message_size,
                subscriber_buffer: args.subscriber_buffer,
            },
            mcp,
            confirm_timeout: args.confirm_timeout,
            secrets_file_only: args.secrets == SecretsArg::File,
            custom_tools: crate::discovered::Options {
                discovery_timeout: args.tool_discovery_timeout,
                call_timeout: args.tool_call_timeout,
            },
            warm_workspaces: usize::try_from(args.mcp_warm_workspaces).unwrap_or(usize::MAX),
            tool_pinning: args.tool_pinning,
            artifact_pinning: args.artifact_pinning,
        },
        config,
    );
    // Children of a daemon that was killed: stopped in the background, all at once; a server
    // starts once its own left-behind copy is gone, and clients are answered meanwhile.
    core.services().mcp.lifecycle().clean_orphans(mcp.stop_grace);
    serve_metrics(&core, metrics);
    // Recent workspaces' servers, in the background: the socket answers meanwhile.
    core.warm_up();
    tracing::info!(
        pid = std::process::id(),
        version = geminid_protocol::DAEMON_VERSION,
        data_dir = %data_dir.display(),
        "geminid started"
    );
    spawn_signal_handler(core.clone())?;
    crate::watch::spawn(core.reloader().clone()).context("cannot start the file watcher")?;
    if !args.session_prune_after.is_zero() {
        let (core, age) = (core.clone(), args.session_prune_after);
        if let Err(e) = core.prune_sessions(age).await {
            tracing::warn!(error = %e, "could not close idle default sessions");
        }
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SESSION_PRUNE_EVERY).await;
                if let Err(e) = core.prune_sessions(age).await {
                    tracing::warn!(error = %e, "could not close idle default sessions");
                }
            }
        });
    }
    server::lifecycle::spawn(core.clone(), notifier, Some(args.idle_exit));
    let ran = server::run(core, bound).await;
    crate::telemetry::stop().await;
    ran
}

/// OpenTelemetry export, if the user turned it on (`telemetry::settings`): the settings files'
/// `telemetry` objects (system defaults, the user's, the system's) under the variables.
async fn start_telemetry(
    paths: &ConfigPaths,
    tool_io: bool,
    metrics: Option<std::net::SocketAddr>,
) -> anyhow::Result<Option<(tokio::net::TcpListener, crate::telemetry::scrape::Shared)>> {
    // Bound first: a daemon asked for /metrics that cannot serve it does not start.
    let listener = match metrics {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for --metrics-listen"))?,
        ),
        None => None,
    };
    let read = |p: &std::path::Path| {
        crate::config::files::read_input(p)
            .ok()
            .flatten()
            .and_then(|text| crate::config::files::parse_object(&text).ok())
            .unwrap_or(serde_json::Value::Null)
    };
    let files = [read(&paths.system_defaults), read(&paths.user), read(&paths.system)];
    let telemetry = crate::telemetry::settings::merged(&files);
    let settings = crate::telemetry::settings::resolve(|k| std::env::var(k).ok(), &telemetry);
    let reader = crate::telemetry::init(
        settings,
        tokio::runtime::Handle::current(),
        tool_io,
        listener.is_some(),
    );
    if let Some(l) = &listener {
        let at = l.local_addr().map(|a| a.to_string()).unwrap_or_default();
        tracing::info!(url = %format!("http://{at}/metrics"), "Prometheus metrics served");
    }
    Ok(listener.zip(reader))
}

/// `/metrics` served from `metrics` (`--metrics-listen`), its gauges reading `core`, until
/// the daemon shuts down.
fn serve_metrics(
    core: &std::sync::Arc<Core>,
    metrics: Option<(tokio::net::TcpListener, crate::telemetry::scrape::Shared)>,
) {
    let Some((listener, reader)) = metrics else { return };
    crate::telemetry::gauges_from(crate::core::status::gauges(core.services()));
    let stop = core.services().shutdown.clone();
    tokio::spawn(crate::telemetry::scrape::serve(listener, reader, stop));
}

/// SIGTERM and SIGINT both start a graceful shutdown.
#[cfg(unix)]
fn spawn_signal_handler(core: std::sync::Arc<Core>) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    tokio::spawn(async move {
        let reason = tokio::select! {
            _ = term.recv() => "signal SIGTERM",
            _ = int.recv() => "signal SIGINT",
        };
        core.request_shutdown(reason);
    });
    Ok(())
}

#[cfg(windows)]
fn spawn_signal_handler(core: std::sync::Arc<Core>) -> anyhow::Result<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            core.request_shutdown("ctrl-c");
        }
    });
    Ok(())
}

/// `--tool-pinning`.
fn pin_mode(text: &str) -> Result<geminid_protocol::pins::PinMode, String> {
    use geminid_protocol::pins::PinMode;
    [PinMode::Enforce, PinMode::Warn, PinMode::Off]
        .into_iter()
        .find(|m| m.label() == text)
        .ok_or_else(|| format!("'{text}' is not a pinning: use enforce, warn or off"))
}
