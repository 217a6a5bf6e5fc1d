//! A session's tools: `gemctl tools`, `call`, `prompt`, `read` and `tasks`.

pub mod list;
