//! geminid: the per-user daemon that owns Gemini CLI's extensibility layer.
//!
//! The daemon's core ([`core::Core`]) is a plain struct built from a [`store::Store`]; it knows
//! nothing of sockets or JSON-RPC, so unit tests construct it directly. [`server`] owns the
//! control socket and the accept loop, and [`rpc`] translates JSON-RPC calls into core calls.

#![warn(unreachable_pub)]

pub(crate) mod asks;
pub(crate) mod audit;
pub(crate) mod auth;
pub mod calls;
pub(crate) mod catalog;
pub(crate) mod clock;
pub mod commands;
pub mod config;
pub mod core;
pub mod discovered;
pub mod events;
pub mod extensions;
#[cfg(test)]
mod fuzz;
pub(crate) mod gateway;
pub mod heap;
pub mod hooks;
#[cfg(test)]
mod layers;
mod literal;
pub mod log_file;
pub mod mcp;
pub(crate) mod naming;
pub mod paths;
pub mod pins;
pub mod policy;
pub(crate) mod proc;
pub mod rpc;
pub(crate) mod secrets;
pub mod server;
pub mod session;
pub mod settings_file;
#[cfg_attr(
    windows,
    allow(dead_code, reason = "hooks and custom commands run through bash on Unix only")
)]
pub(crate) mod shell;
pub mod skills;
pub mod store;
pub mod systemd;
pub mod watch;

/// What a caught panic said (its message, when it was text), for an error answer or a log line.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    /// Files of one concern stay short enough to read whole; past 600 lines, one is holding
    /// two things (docs/ARCHITECTURE.md names each file's concern).
    #[test]
    fn no_source_file_reaches_600_lines() {
        let src = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
        let mut long = Vec::new();
        for path in crate::layers::rust_files(src) {
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            if lines >= 600 {
                long.push(format!("{} ({lines} lines)", path.display()));
            }
        }
        assert!(long.is_empty(), "split these by concern: {long:?}");
    }
}
