//! The MCP client: one owner for every server the sessions need (DESIGN "Shared servers").
//!
//! - `spec` resolves a session's entry into a launch spec and its identity, and `entries` what
//!   each entry amounts to (a server it runs, or why none);
//! - [`Supervisor`] (`supervisor`) owns the registry of servers (`registry`: one
//!   `server::Server` per identity, reference-counted by the sessions that need it) and lends
//!   it to one view per concern: `lifecycle` (started on `mcp/start` or a call, released when
//!   the session's last connection goes, restarted, settled, shut down), `idle` (kept warm
//!   after a linger, within a memory budget; `mcp/stop`), `status` (`mcp/listServers` from
//!   memory, state events), `request` (one request to a server, failing at once when it dies
//!   meanwhile), `long_calls` (the tool calls a server turns into tasks), `pinned` (a
//!   listing against its pins; review and accept) and `asked` (what servers ask of their client
//!   (elicitation, sampling, roots) answered for the session whose call caused it; `roots` is
//!   what a session's roots are);
//! - `server` is a server's shared state, and `task` the state machine behind it (one function
//!   per state: held, connecting, listing, ready, backoff, needs-auth, crash-loop, stopped),
//!   told through `mailbox` and reporting up through `server::Observer` (`observer`);
//!   `catalog` is what a server listed;
//! - `connect`, `child`, `stdio` and `sse` are the transports, and `era` finds which protocol
//!   era a stdio server speaks however long it takes to answer; `orphans` cleans up after a
//!   daemon that was killed; `log` keeps each server's stderr and events;
//! - `artifact` checks what a local server runs against what was recorded on its first start
//!   before every start (`npm` for packages npx and `npm exec` run), holding a changed one;
//! - `options` are the `--mcp-*` flags, `callers` what the supervisor needs from the sessions.
//!
//! This file holds no item of its own, only the modules and what the rest of the daemon
//! imports: no file of `mcp/` imports it, and no two import each other, directly or round a
//! circle.
//!
//! What a session sees of the servers (names, filters, the tool table) is `crate::catalog`'s;
//! how a call goes through policy and hooks is [`crate::calls`]'s.

pub(crate) mod artifact;
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
mod npm;
pub(crate) mod observer;
pub(crate) mod options;
pub(crate) mod order;
pub(crate) mod orphans;
pub(crate) mod pinned;
mod pypi;
mod pypi_index;
pub(crate) mod registry;
pub(crate) mod request;
pub(crate) mod roots;
pub(crate) mod server;
mod shape;
pub(crate) mod spec;
pub(crate) mod sse;
pub(crate) mod started;
pub(crate) mod status;
pub(crate) mod stdio;
pub(crate) mod supervisor;
pub(crate) mod task;
pub(crate) mod update;
pub(crate) mod usage;

pub(crate) use callers::{Caller, Callers, INPUT_KEY, Whose};
pub(crate) use entries::SessionView;
pub(crate) use error::McpError;
pub use options::McpOptions;
pub(crate) use options::{Budget, DEFAULT_RESTART_BUDGET, budget_arg, parse_budget};
pub(crate) use registry::Generation;
pub(crate) use supervisor::{RunningEntry, SessionServers, Supervisor};
