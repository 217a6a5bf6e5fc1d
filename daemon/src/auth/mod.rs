//! OAuth for remote MCP servers (issue 21). `discovery` finds a server's authorization server
//! from its 401 (COMPAT §3.2); `flow` makes the PKCE pair, `state` and the authorization URL,
//! and receives the code on a loopback callback (§3.3); `token` exchanges the code, refreshes,
//! and registers a public client (§3.3 step 4, §3.5); `import` reads Gemini CLI's token file
//! (§3.4); `store` keeps credentials in the secrets store with compare-and-swap; `service`
//! ([`Auth`]) owns them all: single-flight refresh, sign-in and sign-out; `settings` reads an
//! entry's `oauth` object.

pub(crate) mod discovery;
pub(crate) mod flow;
pub(crate) mod google;
pub(crate) mod google_seat;
pub(crate) mod import;
pub(crate) mod service;
pub(crate) mod settings;
pub(crate) mod sign_in;
pub(crate) mod store;
#[cfg(test)]
mod test_site;
pub(crate) mod token;

pub(crate) use service::{Auth, AuthError, Target};
pub(crate) use settings::OAuthSettings;
