//! Google providers (COMPAT §3.6): tokens from Application Default Credentials, without a
//! sign-in. `google_credentials`: an access token for `oauth.scopes`, for hosts under
//! `googleapis.com` or `luci.app` only. `service_account_impersonation`: an ID token for
//! `targetAudience`, minted for `targetServiceAccount` by the IAM Credentials API.
//!
//! The credentials file is `GOOGLE_APPLICATION_CREDENTIALS` (the daemon's environment), else
//! gcloud's `application_default_credentials.json`; `authorized_user` files are refreshed
//! with their refresh token, `service_account` files sign a JWT (RS256) for the JWT-bearer
//! grant; each at its own `token_uri`. The IAM endpoint is `GEMINID_GOOGLE_IAM_URL` when set
//! (tests run against a local server). Tokens are cached until 5 minutes before they expire.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::token::{self, ClientAuth, EXPIRY_MARGIN_MS, Token, TokenError};
use crate::clock;
use crate::secrets::Secret;

/// Where Google's token endpoint is, when the file does not say.
pub(crate) const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The IAM Credentials API.
pub(crate) const IAM_URL: &str = "https://iamcredentials.googleapis.com";

/// The scope the ADC token for the IAM call is asked for.
const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Why a Google provider has no token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GoogleError {
    /// `google_credentials` sends tokens only to Google's hosts (Gemini CLI's words).
    #[error("Host \"{0}\" is not an allowed host for Google Credential provider.")]
    HostNotAllowed(String),
    /// The credentials file could not be read.
    #[error("cannot read Google Application Default Credentials at {}: {source} (`gcloud auth application-default login` writes them)", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not JSON.
    #[error("{}: not a credentials file ({source})", path.display())]
    NotCredentials {
        /// The file.
        path: PathBuf,
        /// Where it stopped parsing.
        source: serde_json::Error,
    },
    /// The file lacks a field its type needs.
    #[error("{}: no \"{field}\"", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
        /// The field.
        field: &'static str,
    },
    /// Credentials of a type geminid does not read.
    #[error("{}: credentials of type {kind:?} are not supported (authorized_user and service_account are)", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// Its `type`, if any.
        kind: Option<String>,
    },
    /// The service account's assertion could not be signed (its key).
    #[error(transparent)]
    Assertion(#[from] jwt::AssertionError),
    /// Google's token endpoint gave no token.
    #[error("Google's token endpoint {url}: {source}")]
    TokenEndpoint {
        /// The endpoint (the file's `token_uri`).
        url: String,
        /// What it answered.
        source: TokenError,
    },
    /// The IAM Credentials API could not be reached.
    #[error("the IAM Credentials API could not be reached: {0}")]
    IamUnreachable(reqwest::Error),
    /// The IAM Credentials API gave no ID token.
    #[error("the IAM Credentials API refused an ID token for {account} ({status}): {why}")]
    IamRefused {
        /// The service account it was asked for.
        account: String,
        /// The HTTP status.
        status: reqwest::StatusCode,
        /// Its `error.message`, or that the answer held no token.
        why: String,
    },
}

/// Whether `google_credentials` may send a token to `url`'s host (Gemini CLI's list).
pub(crate) fn host_allowed(url: &str) -> Result<(), GoogleError> {
    let host = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let google = host.strip_suffix(".googleapis.com").is_some_and(|p| !p.is_empty());
    let luci = host == "luci.app" || host.ends_with(".luci.app");
    if google || luci { Ok(()) } else { Err(GoogleError::HostNotAllowed(host)) }
}

/// Application Default Credentials, as read from their file.
#[derive(Debug, Clone)]
pub(crate) enum Adc {
    /// `"type": "authorized_user"` (`gcloud auth application-default login`).
    AuthorizedUser {
        /// `client_id`.
        client_id: String,
        /// `client_secret`.
        client_secret: Secret<String>,
        /// `refresh_token`.
        refresh_token: Secret<String>,
        /// `token_uri`.
        token_uri: String,
        /// `quota_project_id`.
        quota_project: Option<String>,
    },
    /// `"type": "service_account"` (a key file).
    ServiceAccount {
        /// `client_email`.
        email: String,
        /// `private_key` (PEM, PKCS #8).
        private_key: Secret<String>,
        /// `private_key_id`.
        key_id: Option<String>,
        /// `token_uri`.
        token_uri: String,
        /// `quota_project_id`.
        quota_project: Option<String>,
    },
}

impl Adc {
    /// The project billed for quota, when the file names one.
    pub(crate) fn quota_project(&self) -> Option<&str> {
        match self {
            Self::AuthorizedUser { quota_project, .. }
            | Self::ServiceAccount { quota_project, .. } => quota_project.as_deref(),
        }
    }
}

/// The credentials file: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's.
pub(crate) fn adc_path(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(p) = env("GOOGLE_APPLICATION_CREDENTIALS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let base = if cfg!(windows) {
        PathBuf::from(env("APPDATA")?)
    } else {
        match env("CLOUDSDK_CONFIG") {
            Some(dir) => return Some(Path::new(&dir).join("application_default_credentials.json")),
            None => Path::new(&env("HOME")?).join(".config"),
        }
    };
    Some(base.join("gcloud").join("application_default_credentials.json"))
}

/// Read a credentials file.
pub(crate) fn read_adc(path: &Path) -> Result<Adc, GoogleError> {
    let path_buf = || path.to_path_buf();
    let text = std::fs::read_to_string(path)
        .map_err(|source| GoogleError::Unreadable { path: path_buf(), source })?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|source| GoogleError::NotCredentials { path: path_buf(), source })?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let need = |field: &'static str| {
        s(field).ok_or_else(|| GoogleError::Missing { path: path_buf(), field })
    };
    let token_uri = s("token_uri").unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned());
    match s("type").as_deref() {
        Some("authorized_user") => Ok(Adc::AuthorizedUser {
            client_id: need("client_id")?,
            client_secret: Secret::new(need("client_secret")?),
            refresh_token: Secret::new(need("refresh_token")?),
            token_uri,
            quota_project: s("quota_project_id"),
        }),
        Some("service_account") => Ok(Adc::ServiceAccount {
            email: need("client_email")?,
            private_key: Secret::new(need("private_key")?),
            key_id: s("private_key_id"),
            token_uri,
            quota_project: s("quota_project_id"),
        }),
        other => Err(GoogleError::Unsupported { path: path_buf(), kind: other.map(str::to_owned) }),
    }
}

/// An access token from the credentials, for `scopes`: the token and when it expires.
pub(crate) async fn access_token(
    http: &reqwest::Client,
    adc: &Adc,
    scopes: &[String],
) -> Result<Token, GoogleError> {
    let endpoint =
        |source| GoogleError::TokenEndpoint { url: token_uri_of(adc).to_owned(), source };
    let now = clock::now_ms();
    match adc {
        Adc::AuthorizedUser { client_id, client_secret, refresh_token, token_uri, .. } => {
            let client = token::Client {
                id: client_id,
                secret: Some(client_secret),
                auth: ClientAuth::Post,
                ..token::Client::default()
            };
            let old = Token {
                access: Secret::new(String::new()),
                refresh: Some(refresh_token.clone()),
                expires_at_ms: None,
                token_type: "Bearer".into(),
                scope: None,
            };
            token::refresh(http, token_uri, &client, &old, scopes, now).await.map_err(endpoint)
        }
        Adc::ServiceAccount { email, private_key, key_id, token_uri, .. } => {
            let scope =
                if scopes.is_empty() { CLOUD_PLATFORM.to_owned() } else { scopes.join(" ") };
            let assertion =
                jwt::sign(email, key_id.as_deref(), &scope, token_uri, now / 1000, private_key)?;
            token::jwt_bearer(http, token_uri, &assertion, now).await.map_err(endpoint)
        }
    }
}

/// An ID token for `audience`, minted for `service_account` with an ADC access token.
pub(crate) async fn id_token(
    http: &reqwest::Client,
    iam_url: &str,
    adc: &Adc,
    audience: &str,
    service_account: &str,
) -> Result<Token, GoogleError> {
    let access = access_token(http, adc, &[CLOUD_PLATFORM.to_owned()]).await?;
    let sa: String = url_escape(service_account);
    let url = format!(
        "{}/v1/projects/-/serviceAccounts/{sa}:generateIdToken",
        iam_url.trim_end_matches('/')
    );
    let r = http
        .post(&url)
        .bearer_auth(access.access.expose())
        .json(&json!({ "audience": audience, "includeEmail": true }))
        .send()
        .await
        .map_err(GoogleError::IamUnreachable)?;
    let status = r.status();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    let Some(token) = body.get("token").and_then(Value::as_str).filter(|t| !t.is_empty()) else {
        let why = body["error"]["message"].as_str().unwrap_or("no token in the answer");
        return Err(GoogleError::IamRefused {
            account: service_account.to_owned(),
            status,
            why: why.to_owned(),
        });
    };
    Ok(Token {
        expires_at_ms: jwt::expiry_ms(token),
        access: Secret::new(token.to_owned()),
        refresh: None,
        token_type: "Bearer".into(),
        scope: None,
    })
}

/// The token endpoint the credentials name.
fn token_uri_of(adc: &Adc) -> &str {
    match adc {
        Adc::AuthorizedUser { token_uri, .. } | Adc::ServiceAccount { token_uri, .. } => token_uri,
    }
}

/// Whether a cached token may still be sent.
pub(crate) fn fresh(t: &Token) -> bool {
    t.expires_at_ms.is_some_and(|at| clock::now_ms().saturating_add(EXPIRY_MARGIN_MS) < at)
}

fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

mod jwt;

#[cfg(test)]
mod tests;
