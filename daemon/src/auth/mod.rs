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

pub(crate) use service::Auth;
pub(crate) use settings::OAuthSettings;

/// Why no token could be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AuthError {
    /// Only a sign-in helps (`gemctl mcp auth NAME`); the message says why.
    #[error("{0}")]
    NeedsAuth(String),
    /// It may pass (the authorization server unreachable); nothing was deleted.
    #[error("{0}")]
    Unavailable(String),
}

/// The server a token is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Target {
    /// Its name (for messages and for import from Gemini CLI).
    pub name: String,
    /// Its URL.
    pub url: String,
    /// Its `oauth` settings.
    pub settings: OAuthSettings,
}

impl Target {
    /// The `resource` of its tokens (the URL without query or fragment); `None` for a URL
    /// that is not http(s), which connects to nothing anyway.
    pub(crate) fn resource(&self) -> Option<String> {
        discovery::resource_parameter(&self.url).ok()
    }

    pub(super) fn sign_in_hint(&self) -> String {
        format!("run `gemctl mcp auth {}`", self.name)
    }
}
