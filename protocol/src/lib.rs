//! The wire contract between `geminid` and its clients (`gemctl`, editors, agent front-ends).
//!
//! Everything a client needs to speak to the daemon lives here and nothing else: the JSON-RPC
//! method traits ([`api`]); their parameter and result types, one module per namespace
//! ([`daemon`], [`session`], [`config`], [`mcp`], [`tools`], [`asks`], [`policy`],
//! [`extensions`], ...), with [`common`] for
//! ids, scopes and diagnostics; the event stream ([`event`]); the error-code table
//! ([`error`]); where the socket is ([`socket`]) and how to connect to it ([`client`]); the
//! lock the writers of geminid's servers.json share ([`config_lock`]).
//! Methods are named `<namespace>/<method>`, fields are camelCase.

pub mod api;
pub mod asks;
pub mod auth;
pub mod calls;
pub mod client;
pub mod collate;
pub mod commands;
pub mod common;
pub mod config;
pub mod config_lock;
pub mod daemon;
pub mod error;
pub mod event;
pub mod extensions;
pub mod gateway;
pub mod hooks;
pub mod mcp;
pub mod pins;
pub mod policy;
pub mod session;
pub mod skills;
pub mod socket;
pub mod suggest;
pub mod text;
pub mod tools;

/// The protocol version. Bumped on any incompatible change to a method, type or event; a client
/// whose version differs is refused by `daemon/hello` with an error naming both versions.
/// Version 2 moved geminid's error codes out of jsonrpsee's range (see [`error`]).
pub const PROTOCOL_VERSION: u32 = 2;

/// The version of this crate, which the daemon reports in `daemon/status`.
pub const DAEMON_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What `geminid --version` and `gemctl --version` print after their names: the version and
/// the protocol version (the second number must be [`PROTOCOL_VERSION`]; a test holds them
/// together).
pub const VERSION_LINE: &str = concat!(env!("CARGO_PKG_VERSION"), " (protocol 2)");

/// Default limit for one JSON-RPC message in either direction (tool results can be large).
pub const DEFAULT_MAX_MESSAGE_SIZE: u32 = 64 * 1024 * 1024;

#[cfg(test)]
mod version_tests {
    #[test]
    fn the_version_line_names_the_protocol_version() {
        let want = format!("{} (protocol {})", super::DAEMON_VERSION, super::PROTOCOL_VERSION);
        assert_eq!(super::VERSION_LINE, want);
    }

    /// PROTOCOL.md names the version a client written from it must send.
    #[test]
    fn the_protocol_document_names_the_protocol_version() {
        let doc = include_str!("../../docs/PROTOCOL.md");
        let first = doc.lines().next().unwrap_or_default();
        assert_eq!(first, format!("# geminid protocol (version {})", super::PROTOCOL_VERSION));
    }
}
