//! geminid: the per-user daemon that owns Gemini CLI's extensibility layer.
//!
//! Two modules are public. [`start`] is the whole process (`main.rs` calls
//! [`start::main`]); [`testing`] is what the tests crate and the bench reach. Everything else
//! is crate-private, laid out in layers that docs/ARCHITECTURE.md lists and a test holds: the
//! core (`core::Core`) is a plain struct built from a store that knows nothing of sockets or
//! JSON-RPC; `server` owns the control socket and the accept loop, and `rpc` translates
//! JSON-RPC calls into calls on the core.

#![warn(unreachable_pub)]

pub(crate) mod asks;
pub(crate) mod audit;
pub(crate) mod auth;
pub(crate) mod calls;
pub(crate) mod catalog;
#[cfg(test)]
mod circles;
pub(crate) mod clock;
pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod core;
pub(crate) mod discovered;
pub(crate) mod events;
pub(crate) mod extensions;
#[cfg(test)]
mod fuzz;
pub(crate) mod gateway;
pub(crate) mod heap;
pub(crate) mod hooks;
#[cfg(test)]
mod layers;
mod literal;
pub(crate) mod log_file;
pub(crate) mod mcp;
pub(crate) mod naming;
pub(crate) mod paths;
pub(crate) mod pins;
pub(crate) mod policy;
pub(crate) mod proc;
pub(crate) mod rpc;
pub(crate) mod secrets;
pub(crate) mod server;
pub(crate) mod services;
pub(crate) mod session;
pub(crate) mod settings_file;
#[cfg_attr(
    windows,
    allow(dead_code, reason = "hooks and custom commands run through bash on Unix only")
)]
pub(crate) mod shell;
pub(crate) mod skills;
pub mod start;
pub(crate) mod store;
#[cfg(test)]
mod structure;
pub(crate) mod systemd;
pub(crate) mod telemetry;
pub mod testing;
pub(crate) mod watch;

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
