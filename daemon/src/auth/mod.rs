//! OAuth for remote MCP servers (issue 21). `discovery` finds a server's authorization server
//! from its 401 (COMPAT §3.2); `flow` makes the PKCE pair, `state` and the authorization URL,
//! and receives the code on a loopback callback (§3.3); `token` exchanges the code, refreshes,
//! and registers a public client (§3.3 step 4, §3.5); `import` reads Gemini CLI's token file
//! (§3.4); `store` keeps credentials in the secrets store with compare-and-swap; `service`
//! ([`Auth`]) owns them all: single-flight refresh, sign-in and sign-out; `settings` reads an
//! entry's `oauth` object.

pub mod discovery;
pub mod flow;
pub mod google;
pub mod google_seat;
pub mod import;
pub mod service;
pub mod settings;
pub mod sign_in;
pub mod store;
#[cfg(test)]
mod test_site;
pub mod token;

pub use service::{Auth, AuthError, Target};
pub use settings::OAuthSettings;
pub use sign_in::SignIn;
