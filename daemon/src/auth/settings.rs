//! A server entry's `oauth` object (COMPAT §3; Gemini CLI's `MCPOAuthConfig`), read leniently:
//! a field of the wrong type is as if absent (the settings loader reports unknown keys).

use serde::Serialize;
use serde_json::{Map, Value};

use crate::secrets::Secret;

/// Where a server's tokens come from (`authProviderType`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Provider {
    /// OAuth with discovery and a sign-in (`dynamic_discovery`, the default).
    #[default]
    Dynamic,
    /// Google Application Default Credentials, for `oauth.scopes` (`google_credentials`).
    GoogleCredentials,
    /// An ID token for `audience`, minted for `service_account` by the IAM Credentials API with
    /// the Application Default Credentials (`service_account_impersonation`).
    Impersonation {
        /// `targetAudience`.
        audience: Option<String>,
        /// `targetServiceAccount`.
        service_account: Option<String>,
    },
}

/// What the user configured for a server's OAuth; all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OAuthSettings {
    /// `enabled`: Gemini CLI starts the browser flow on a 401 only with it; geminid never
    /// opens a browser from the daemon and says to run `gemctl mcp auth` either way.
    pub enabled: bool,
    /// `clientId`: a pre-registered client (no dynamic registration).
    pub client_id: Option<String>,
    /// `clientSecret`, for a confidential client.
    #[serde(serialize_with = "crate::secrets::expose")]
    pub client_secret: Secret<Option<String>>,
    /// `authorizationUrl` and `tokenUrl`: both set skips discovery.
    pub authorization_url: Option<String>,
    /// See `authorization_url`.
    pub token_url: Option<String>,
    /// `registrationUrl`: where to register when discovery does not say.
    pub registration_url: Option<String>,
    /// `scopes`: win over the challenge's and the metadata's.
    pub scopes: Vec<String>,
    /// `audiences`.
    pub audiences: Vec<String>,
    /// `redirectUri`: its port is the callback's (after `OAUTH_CALLBACK_PORT`).
    pub redirect_uri: Option<String>,
    /// `clientMetadataUrl` (geminid's own): a Client ID Metadata Document's URL, used as the
    /// client id where the authorization server supports them.
    pub client_metadata_url: Option<String>,
    /// `authProviderType` (with `targetAudience` and `targetServiceAccount`).
    pub provider: Provider,
}

fn text(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

fn list(map: &Map<String, Value>, key: &str) -> Vec<String> {
    match map.get(key) {
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

impl OAuthSettings {
    /// From an entry: its `oauth` object, `authProviderType`, `targetAudience` and
    /// `targetServiceAccount`.
    pub(crate) fn of_entry(c: &crate::config::mcp::McpServerConfig) -> Self {
        use crate::config::mcp::AuthProviderType as T;
        let provider = match c.auth_provider_type {
            None | Some(T::DynamicDiscovery) => Provider::Dynamic,
            Some(T::GoogleCredentials) => Provider::GoogleCredentials,
            Some(T::ServiceAccountImpersonation) => Provider::Impersonation {
                audience: c.target_audience.clone(),
                service_account: c.target_service_account.clone(),
            },
        };
        Self { provider, ..Self::from_config(c.oauth.as_ref()) }
    }

    /// From an entry's `oauth` object (none: all defaults).
    pub(crate) fn from_config(map: Option<&Map<String, Value>>) -> Self {
        let Some(m) = map else { return Self::default() };
        Self {
            enabled: m.get("enabled").and_then(Value::as_bool).unwrap_or(false),
            client_id: text(m, "clientId"),
            client_secret: Secret::new(text(m, "clientSecret")),
            authorization_url: text(m, "authorizationUrl"),
            token_url: text(m, "tokenUrl"),
            registration_url: text(m, "registrationUrl"),
            scopes: list(m, "scopes"),
            audiences: list(m, "audiences"),
            redirect_uri: text(m, "redirectUri"),
            client_metadata_url: text(m, "clientMetadataUrl"),
            provider: Provider::Dynamic,
        }
    }

    /// The port `redirectUri` names, if any.
    pub(crate) fn redirect_port(&self) -> Option<u16> {
        let u = reqwest::Url::parse(self.redirect_uri.as_deref()?).ok()?;
        u.port_or_known_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oauth_object_is_read_leniently_and_its_secret_is_not_printed() {
        let v = serde_json::json!({
            "enabled": true, "clientId": "cid", "clientSecret": "s3cret",
            "scopes": ["a", "b"], "audiences": "x y", "redirectUri": "http://localhost:7777/cb",
            "tokenUrl": 5
        });
        let s = OAuthSettings::from_config(v.as_object());
        assert!(s.enabled);
        assert_eq!(s.client_id.as_deref(), Some("cid"));
        assert_eq!(s.scopes, ["a", "b"]);
        assert_eq!(s.audiences, ["x", "y"]);
        assert_eq!(s.token_url, None, "a number is no URL");
        assert_eq!(s.redirect_port(), Some(7777));
        assert!(!format!("{s:?}").contains("s3cret"));
        assert_eq!(OAuthSettings::from_config(None), OAuthSettings::default());
    }
}
