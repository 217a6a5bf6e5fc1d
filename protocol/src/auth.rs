//! OAuth for remote MCP servers: `auth/begin`, `auth/progress`, `auth/status`, `auth/logout`.
//! No result ever holds a token: only whether there is one, whom it is from and when it
//! expires.

use serde::{Deserialize, Serialize};

use crate::common::SessionId;
use crate::mcp::ServerStatus;

/// `auth/begin`: start signing in to a server.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthBeginParams {
    /// The session whose server `name` means (its servers are started if they are not).
    pub session: SessionId,
    /// The server's name.
    pub name: String,
    /// The loopback port for the browser's redirect (the client's `OAUTH_CALLBACK_PORT`);
    /// else the port of the entry's `oauth.redirectUri`, else any free one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_port: Option<u16>,
}

/// What `auth/begin` prepared: the URL to open. The daemon waits for the browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthBegun {
    /// The sign-in, for `auth/progress`.
    pub attempt: String,
    /// The authorization URL to open in a browser.
    pub url: String,
    /// Where the browser comes back to (a listener on 127.0.0.1).
    pub redirect_uri: String,
    /// The authorization server's issuer, when discovery found one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// How geminid identifies itself to it: `configured` (`oauth.clientId`),
    /// `metadata-document` (a Client ID Metadata Document URL) or `registered` (dynamic
    /// client registration).
    pub client: String,
    /// How long the daemon waits for the browser, in milliseconds.
    pub timeout_ms: u64,
}

/// `auth/progress`: wait for the sign-in to pass step `after`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthProgressParams {
    /// From `auth/begin`.
    pub attempt: String,
    /// The last step seen (`seq`); the answer comes once there is a later one.
    #[serde(default)]
    pub after: u32,
}

/// A step of a sign-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum AuthStep {
    /// Waiting for the browser to come back with a code.
    WaitingForBrowser,
    /// Exchanging the code for a token.
    Exchanging,
    /// Token stored; the server is being restarted with it.
    Reconnecting,
    /// Done: the server is connected.
    Connected,
    /// Done: it failed (`message` says why; nothing was stored unless the step was
    /// `reconnecting`).
    Failed,
}

impl AuthStep {
    /// Whether the sign-in is over.
    pub fn is_done(self) -> bool {
        matches!(self, Self::Connected | Self::Failed)
    }
}

/// Where a sign-in is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthProgress {
    /// Increases with each step.
    pub seq: u32,
    /// The step.
    pub step: AuthStep,
    /// Why it failed, or what the step is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The server once it was restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerStatus>,
}

/// `auth/status`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthStatusParams {
    /// The session whose remote servers are listed.
    pub session: SessionId,
}

/// One remote server's credentials, as far as they may be shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum AuthState {
    /// A token that is valid (or will be refreshed when it is not).
    SignedIn,
    /// A token past its expiry with no refresh token: `gemctl mcp auth NAME`.
    Expired,
    /// No stored credentials.
    None,
    /// Uses Google credentials, not a stored token.
    Google,
    /// Sends the `Authorization` header its settings give: nothing to sign in to.
    Header,
    /// No stored credentials, and none needed: it connected without a token.
    NotNeeded,
}

/// A row of `auth/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthEntry {
    /// The server's name.
    pub name: String,
    /// Its URL (without user information).
    pub url: String,
    /// Its credentials' state.
    pub state: AuthState,
    /// The issuer they came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// When the access token expires (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// Whether a refresh token is held.
    pub refreshable: bool,
    /// The scopes granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// `signed-in`, or `imported` from Gemini CLI's token file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// `auth/status`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthStatusResult {
    /// Where tokens are kept: the OS keyring, or the file (and why).
    pub storage: String,
    /// Each remote server of the session.
    pub servers: Vec<AuthEntry>,
    /// Problems met reading Gemini CLI's token file for import (nothing imported from it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `auth/logout`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthLogoutParams {
    /// The session whose server `name` means.
    pub session: SessionId,
    /// The server's name.
    pub name: String,
}

/// `auth/logout`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuthLogoutResult {
    /// The server's name.
    pub name: String,
    /// Whether credentials were stored (and are now gone).
    pub removed: bool,
}
