//! Gemini CLI's configuration, read in place: every settings scope, their merge, env expansion
//! and redaction, folder trust and MCP enablement (COMPAT §0–§1).

pub mod env;
