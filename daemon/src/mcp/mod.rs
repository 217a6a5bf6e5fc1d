//! The MCP client: one owner for every server the sessions need (DESIGN "Shared servers").
//!
//! - `spec` resolves a session's entry into a launch spec and its identity;
//! - [`Supervisor`] (`supervisor`) keeps one `server::Server` per identity,
//!   reference-counted by the sessions that need it (started on `mcp/start` or a call,
//!   released when the session's last connection goes, stopped after a linger);
//! - `status` answers `mcp/listServers` from memory;
//! - `request` makes one request to a server (a tool call, a prompt, a read), failing at once
//!   when the server dies meanwhile;
//! - `server` is a server's shared state, and `task` the state machine behind it (backoff,
//!   crash-loop, needs-auth), reporting up through `server::Observer`; `catalog` is what a
//!   server listed;
//! - `long_calls` follows the tool calls a server turns into tasks;
//! - `asked` answers what servers ask of their client (elicitation, sampling, roots) for the
//!   session whose call caused it, and `roots` is what a session's roots are;
//! - `connect`, `child`, `stdio` and `sse` are the transports, and `era` finds which protocol
//!   era a stdio server speaks however long it takes to answer; `orphans` cleans up after a
//!   daemon that was killed; `log` keeps each server's stderr and events.
//!
//! What a session sees of the servers (names, filters, the tool table) is `crate::catalog`'s;
//! how a call goes through policy and hooks is [`crate::calls`]'s.

pub(crate) mod asked;
pub(crate) mod authed;
pub(crate) mod callers;
pub(crate) mod catalog;
pub(crate) mod child;
pub(crate) mod connect;
pub(crate) mod entries;
pub(crate) mod era;
pub(crate) mod error;
pub(crate) mod failure;
pub(crate) mod idle;
pub(crate) mod lifecycle;
mod listing;
pub(crate) mod log;
pub(crate) mod long_calls;
pub(crate) mod mailbox;
pub(crate) mod marked;
pub(crate) mod messages;
pub(crate) mod observer;
pub(crate) mod options;
pub(crate) mod order;
pub(crate) mod orphans;
pub(crate) mod pinned;
pub(crate) mod registry;
pub(crate) mod request;
pub(crate) mod roots;
pub(crate) mod server;
mod shape;
pub(crate) mod spec;
pub(crate) mod sse;
pub(crate) mod status;
pub(crate) mod stdio;
pub(crate) mod supervisor;
pub(crate) mod task;
pub(crate) mod usage;

pub(crate) use callers::{Caller, Callers, INPUT_KEY, Whose};
pub(crate) use entries::SessionView;
pub(crate) use error::McpError;
pub use options::McpOptions;
pub(crate) use options::{Budget, DEFAULT_RESTART_BUDGET, budget_arg, parse_budget};
pub(crate) use registry::Generation;
pub(crate) use supervisor::{RunningEntry, SessionServers, Supervisor};
