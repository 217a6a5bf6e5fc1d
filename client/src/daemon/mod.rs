//! The daemon: `gemctl status`, `version`, `daemon`, `doctor` and `rpc`.

pub mod bridge;
pub mod commands;
pub mod connect;
pub mod doctor;
pub mod service;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum DaemonCommand {
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
