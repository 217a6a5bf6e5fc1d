//! A session's tools: `gemctl tools`, `call`, `tasks`, `prompt` and `read`, and the lists of
//! `gemctl mcp tools|describe|prompts|resources`.

pub mod call;
pub mod list;
pub mod prompts;
