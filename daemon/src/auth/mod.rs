//! OAuth for remote MCP servers (issue 21), begun: `discovery` finds a server's authorization
//! server from its 401 (COMPAT §3.2); `flow` makes the PKCE pair, `state` and the
//! authorization URL, and receives the code on a loopback callback (COMPAT §3.3); `token`
//! exchanges the code, refreshes, and registers a public client (§3.3 step 4, §3.5); `import`
//! reads Gemini CLI's token file (§3.4). The token
//! store, single-flight refresh, wiring into connect, `gemctl mcp auth` and the Google providers
//! are still to come (see the notes).

pub mod discovery;
pub mod flow;
pub mod import;
#[cfg(test)]
mod test_site;
pub mod token;
