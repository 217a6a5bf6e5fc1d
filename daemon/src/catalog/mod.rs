//! The session's view of what it can use, above the sources that offer it: tools, prompts
//! and resources by the names Gemini CLI gives them.
//!
//! - [`naming`]: fully qualified tool names, include/exclude, the schema transforms;
//! - [`tools`]: a session's tool table, built from its sources (MCP servers today; custom
//!   tools and subagents later) and shared by every session configured alike;
//! - [`prompts`]: prompt command names, command-line arguments, resource references.
//!
//! Policy's static filter (tools a rule denies outright are not listed) sits in
//! [`tools::Tables::session`], where every table is built.

pub mod naming;
pub mod prompts;
pub mod tools;

pub use tools::{SessionTool, SessionTools, Source, Tables};
