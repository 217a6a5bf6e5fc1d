//! geminid: the per-user daemon that owns Gemini CLI's extensibility layer.
//!
//! The daemon's core ([`core::Core`]) is a plain struct built from a [`store::Store`]; it knows
//! nothing of sockets or JSON-RPC, so unit tests construct it directly. [`server`] owns the
//! control socket and the accept loop, and [`rpc`] translates JSON-RPC calls into core calls.

pub mod asks;
pub mod calls;
pub mod catalog;
pub mod clock;
pub mod config;
pub mod core;
pub mod events;
mod literal;
pub mod mcp;
pub mod paths;
pub mod rpc;
pub mod secrets;
pub mod server;
pub mod session;
pub mod settings_file;
pub mod store;
pub mod watch;
