//! MCP servers: `gemctl mcp` (the settings files' servers, the running ones, their pins and
//! sign-ins, `mcp serve`).

pub mod add;
pub mod auth;
pub mod import_path;
pub mod pins;
pub mod runtime;
pub mod serve;
pub mod settings;
pub mod stdio;
