//! MCP servers: resolving what to launch and (with issue 4) owning the processes and
//! connections, shared across sessions.

pub mod spec;
