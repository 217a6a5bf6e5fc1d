//! OAuth for remote MCP servers (issue 21), begun: `discovery` finds a server's authorization
//! server from its 401 (COMPAT §3.2). The browser step, token store, refresh and the Google
//! providers are still to come (see the notes).

pub mod discovery;
