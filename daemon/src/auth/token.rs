//! Talking to the token endpoint (COMPAT §3.3 step 7, §3.5) and the registration endpoint
//! (§3.3 step 4): the code exchanged for a token, a token refreshed, a public client
//! registered. Tokens are `Secret`s: their Debug and Display print `[redacted]`, and error
//! messages quote the server's `error` and description, never a token.

use serde_json::{Value, json};

use crate::secrets::Secret;

/// A token is treated as expired this long before its `expires_in` says (the reference's
/// margin).
pub(crate) const EXPIRY_MARGIN_MS: u64 = 5 * 60 * 1000;

/// An access token and what came with it.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    /// `access_token`.
    pub access: Secret<String>,
    /// `refresh_token`, when the server gave one (or an earlier one it did not replace).
    pub refresh: Option<Secret<String>>,
    /// When it expires (milliseconds since the Unix epoch), when the server said.
    pub expires_at_ms: Option<u64>,
    /// `token_type` (default `Bearer`).
    pub token_type: String,
    /// `scope`, as granted.
    pub scope: Option<String>,
}

impl Token {
    /// Whether it is expired, or will be within [`EXPIRY_MARGIN_MS`]; one without an expiry
    /// never is.
    pub(crate) fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| now_ms.saturating_add(EXPIRY_MARGIN_MS) >= at)
    }
}

/// Why the token endpoint gave no token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    /// The grant (code or refresh token) was refused: `invalid_grant`. For a refresh, the
    /// stored credentials may be deleted, if they are still the ones that failed.
    #[error("the authorization server refused the grant (invalid_grant{})", .0.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    InvalidGrant(Option<String>),
    /// Another OAuth error.
    #[error("the authorization server answered {error}{}", .description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Rejected {
        /// `error`.
        error: String,
        /// `error_description`.
        description: Option<String>,
    },
    /// The answer is neither JSON nor a form (an HTML login or error page).
    #[error("the token endpoint answered {status} with {kind}, not a token (is tokenUrl right?)")]
    NotAToken {
        /// The HTTP status.
        status: u16,
        /// What it sent (`text/html`, ...).
        kind: String,
    },
    /// The server could not be reached, or answered 5xx: worth trying again later; nothing
    /// is deleted for it.
    #[error("the token endpoint could not be reached: {0}")]
    Unreachable(String),
}

impl TokenError {
    /// Whether it may pass with time (network, 5xx), so nothing stored should go for it.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, Self::Unreachable(_))
    }
}

/// How a client proves itself at the token endpoint (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    /// A public client: `client_id` in the form, no secret.
    #[default]
    None,
    /// `Authorization: Basic` of the id and secret (`client_secret_basic`).
    Basic,
    /// `client_id` and `client_secret` in the form (`client_secret_post`).
    Post,
}

impl ClientAuth {
    /// The method for a client with or without a secret, given the authorization server's
    /// `token_endpoint_auth_methods_supported` (absent: Basic, the RFC's default).
    pub(crate) fn choose(supported: &[String], has_secret: bool) -> Self {
        let offers = |m: &str| supported.iter().any(|s| s == m);
        match has_secret {
            false => Self::None,
            true if supported.is_empty() || offers("client_secret_basic") => Self::Basic,
            true if offers("client_secret_post") => Self::Post,
            true => Self::Basic,
        }
    }

    /// Its name in registration metadata.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Basic => "client_secret_basic",
            Self::Post => "client_secret_post",
        }
    }

    /// From its name (anything else: none).
    pub(crate) fn from_name(name: &str) -> Self {
        match name {
            "client_secret_basic" => Self::Basic,
            "client_secret_post" => Self::Post,
            _ => Self::None,
        }
    }
}

/// The form of a token request; `client_secret`, `audience`, `resource` when there are.
#[derive(Debug, Clone, Default)]
pub(crate) struct Client<'a> {
    /// `client_id`.
    pub id: &'a str,
    /// `client_secret`, for a confidential client.
    pub secret: Option<&'a Secret<String>>,
    /// How the secret is presented.
    pub auth: ClientAuth,
    /// `audience` (space-joined).
    pub audiences: &'a [String],
    /// `resource`: the MCP server URL without query or fragment.
    pub resource: Option<&'a str>,
}

/// `application/x-www-form-urlencoded` of the pairs.
fn form_body(pairs: &[(&str, String)]) -> String {
    let mut u = match reqwest::Url::parse("http://form.invalid/") {
        Ok(u) => u,
        Err(_) => return String::new(),
    };
    u.query_pairs_mut().extend_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
    u.query().unwrap_or_default().to_owned()
}

/// One value form-encoded.
fn form_body_value(v: &str) -> String {
    form_body(&[("v", v.to_owned())]).trim_start_matches("v=").to_owned()
}

/// Standard base64 with padding (RFC 4648 §4).
pub(crate) fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                char::from(A[((n >> (18 - 6 * i)) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

async fn post_form(
    http: &reqwest::Client,
    url: &str,
    mut form: Vec<(&str, String)>,
    client: &Client<'_>,
    now_ms: u64,
    previous_refresh: Option<&Secret<String>>,
) -> Result<Token, TokenError> {
    let mut basic = None;
    match (client.auth, client.secret) {
        (ClientAuth::Basic, Some(s)) => {
            // RFC 6749 §2.3.1: each form-encoded, then joined by a colon.
            let pair = format!("{}:{}", form_body_value(client.id), form_body_value(s.expose()));
            basic = Some(format!("Basic {}", base64(pair.as_bytes())));
            // The id in the body too (not a second authentication, which the secret would be):
            // servers that read it only there (FastMCP's) refuse the exchange without it.
            form.push(("client_id", client.id.to_owned()));
        }
        (ClientAuth::Post, Some(s)) => {
            form.push(("client_id", client.id.to_owned()));
            form.push(("client_secret", s.expose().clone()));
        }
        _ => form.push(("client_id", client.id.to_owned())),
    }
    if !client.audiences.is_empty() {
        form.push(("audience", client.audiences.join(" ")));
    }
    if let Some(r) = client.resource {
        form.push(("resource", r.to_owned()));
    }
    let mut request = http
        .post(url)
        .header(reqwest::header::ACCEPT, "application/json, application/x-www-form-urlencoded")
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(b) = basic {
        request = request.header(reqwest::header::AUTHORIZATION, b);
    }
    let r = request.body(form_body(&form)).send().await.map_err(|e| {
        TokenError::Unreachable(crate::config::env::redact_urls(&e.to_string()).into_owned())
    })?;
    answer(r, now_ms, previous_refresh).await
}

/// The JWT-bearer grant (RFC 7523): a signed assertion for a token.
pub(crate) async fn jwt_bearer(
    http: &reqwest::Client,
    url: &str,
    assertion: &str,
    now_ms: u64,
) -> Result<Token, TokenError> {
    let form = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer".to_owned()),
        ("assertion", assertion.to_owned()),
    ];
    let r = http
        .post(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form_body(&form))
        .send()
        .await
        .map_err(|e| {
            TokenError::Unreachable(crate::config::env::redact_urls(&e.to_string()).into_owned())
        })?;
    answer(r, now_ms, None).await
}

/// A token endpoint's answer: a token, or why not.
async fn answer(
    r: reqwest::Response,
    now_ms: u64,
    previous_refresh: Option<&Secret<String>>,
) -> Result<Token, TokenError> {
    let status = r.status().as_u16();
    let kind = r
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let text = r.text().await.map_err(|e| TokenError::Unreachable(e.to_string()))?;
    if status >= 500 {
        return Err(TokenError::Unreachable(format!("it answered {status}")));
    }
    let body: Value = serde_json::from_str(&text)
        .ok()
        .filter(Value::is_object)
        .or_else(|| {
            kind.contains("x-www-form-urlencoded").then(|| {
                let pairs = reqwest::Url::parse(&format!("http://x/?{text}")).ok()?;
                Some(Value::Object(
                    pairs.query_pairs().map(|(k, v)| (k.into_owned(), json!(v))).collect(),
                ))
            })?
        })
        .ok_or_else(|| TokenError::NotAToken {
            status,
            kind: if kind.is_empty() { "no content type".into() } else { kind.clone() },
        })?;
    let s = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    if let Some(error) = s("error") {
        let description = s("error_description");
        return Err(if error == "invalid_grant" {
            TokenError::InvalidGrant(description)
        } else {
            TokenError::Rejected { error, description }
        });
    }
    let Some(access) = s("access_token") else {
        return Err(TokenError::Rejected {
            error: format!("{status} without an access_token"),
            description: None,
        });
    };
    let expires_in =
        body.get("expires_in").and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()));
    Ok(Token {
        access: Secret::new(access),
        refresh: s("refresh_token").map(Secret::new).or_else(|| previous_refresh.cloned()),
        expires_at_ms: expires_in.map(|secs| now_ms.saturating_add(secs.saturating_mul(1000))),
        token_type: s("token_type").unwrap_or_else(|| "Bearer".into()),
        scope: s("scope"),
    })
}

/// Exchange an authorization code (with its PKCE verifier).
pub(crate) async fn exchange_code(
    http: &reqwest::Client,
    token_url: &str,
    client: &Client<'_>,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
    now_ms: u64,
) -> Result<Token, TokenError> {
    let form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code.to_owned()),
        ("redirect_uri", redirect_uri.to_owned()),
        ("code_verifier", verifier.to_owned()),
    ];
    post_form(http, token_url, form, client, now_ms, None).await
}

/// Refresh a token; a response without a new refresh token keeps the old one (and without a
/// scope, the old scope).
pub(crate) async fn refresh(
    http: &reqwest::Client,
    token_url: &str,
    client: &Client<'_>,
    old: &Token,
    scopes: &[String],
    now_ms: u64,
) -> Result<Token, TokenError> {
    let Some(refresh_token) = &old.refresh else {
        return Err(TokenError::InvalidGrant(Some("there is no refresh token".into())));
    };
    let mut form = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", refresh_token.expose().clone()),
    ];
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    let mut t = post_form(http, token_url, form, client, now_ms, old.refresh.as_ref()).await?;
    if t.scope.is_none() {
        t.scope.clone_from(&old.scope);
    }
    Ok(t)
}

/// A client dynamic registration made.
#[derive(Debug, Clone)]
pub(crate) struct Registered {
    /// `client_id`.
    pub id: String,
    /// `client_secret`, when the server made a confidential client.
    pub secret: Option<Secret<String>>,
    /// How it authenticates at the token endpoint.
    pub auth: ClientAuth,
}

/// Register geminid (dynamic client registration): a public client (`none`) where the
/// authorization server takes one, else the confidential method it offers, whose secret is
/// kept with the token (Gemini CLI registers public clients only).
pub(crate) async fn register(
    http: &reqwest::Client,
    registration_url: &str,
    redirect_uri: &str,
    scopes: &[String],
    supported: &[String],
) -> Result<Registered, TokenError> {
    let public = supported.is_empty() || supported.iter().any(|m| m == "none");
    let wanted = if public { ClientAuth::None } else { ClientAuth::choose(supported, true) };
    let mut body = json!({
        "client_name": "geminid",
        // A program on the user's machine with a loopback redirect (SEP-837, RFC 8252).
        "application_type": "native",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": wanted.name(),
    });
    if !scopes.is_empty() {
        body["scope"] = json!(scopes.join(" "));
    }
    let r = http
        .post(registration_url)
        .json(&body)
        .send()
        .await
        .map_err(|e| TokenError::Unreachable(e.to_string()))?;
    let status = r.status().as_u16();
    let answer: Value = r.json().await.unwrap_or(Value::Null);
    if let Some(id) = answer.get("client_id").and_then(Value::as_str).filter(|_| status < 300) {
        let secret =
            answer.get("client_secret").and_then(Value::as_str).map(|s| Secret::new(s.to_owned()));
        let auth = match answer.get("token_endpoint_auth_method").and_then(Value::as_str) {
            Some(m) => ClientAuth::from_name(m),
            None if secret.is_some() => ClientAuth::choose(supported, true),
            None => ClientAuth::None,
        };
        return Ok(Registered { id: id.to_owned(), secret, auth });
    }
    let s = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_owned);
    Err(TokenError::Rejected {
        error: s("error").unwrap_or_else(|| format!("registration refused ({status})")),
        description: s("error_description"),
    })
}

#[cfg(test)]
mod tests;
