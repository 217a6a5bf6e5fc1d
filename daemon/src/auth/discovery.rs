//! OAuth discovery for a remote MCP server (COMPAT §3.2, the MCP authorization spec): from a
//! 401's `WWW-Authenticate` (or the server URL alone) to the authorization server's endpoints.
//!
//! 1. Protected-resource metadata (RFC 9728): the challenge's `resource_metadata` URL, else
//!    `/.well-known/oauth-protected-resource` with the server's path inserted after the host,
//!    then at the root. Its `resource` must be the server URL (scheme, host, port, path; no
//!    query or fragment; a root with or without its slash): otherwise discovery stops with
//!    [`DiscoveryError::ResourceMismatch`], as Gemini CLI's does.
//! 2. Authorization-server metadata of its first `authorization_servers` entry (else of the
//!    server's own origin), tried in the reference's order ([`authorization_server_urls`]).

use std::time::Duration;

use serde_json::Value;

/// How long each metadata request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// What discovery found: where to send the user and where to get tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OAuthEndpoints {
    /// `authorization_endpoint`.
    pub authorization_url: String,
    /// `token_endpoint`.
    pub token_url: String,
    /// `registration_endpoint`, for dynamic client registration.
    pub registration_url: Option<String>,
    /// `issuer` (the callback's `iss` must be this, RFC 9207).
    pub issuer: Option<String>,
    /// The challenge's `scope`, else the protected-resource metadata's `scopes_supported`
    /// (the MCP authorization spec's order); empty: no `scope` is sent.
    pub scopes: Vec<String>,
    /// `authorization_response_iss_parameter_supported`: the callback must carry `iss`.
    pub iss_supported: bool,
    /// `client_id_metadata_document_supported`: a client id may be a metadata document's URL.
    pub cimd_supported: bool,
    /// `token_endpoint_auth_methods_supported` (empty: not said).
    pub auth_methods: Vec<String>,
    /// The `resource` parameter to send: the server URL without query or fragment.
    pub resource: String,
}

/// Why discovery failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DiscoveryError {
    /// The protected-resource metadata names another resource: a hard failure (a server must
    /// not obtain tokens meant for another).
    #[error(
        "the server's protected-resource metadata is for {found}, not {expected}: refusing to \
         authorize it (a misconfigured server, or one asking for another's tokens)"
    )]
    ResourceMismatch {
        /// What the server URL is.
        expected: String,
        /// What the metadata says.
        found: String,
    },
    /// The authorization-server metadata names another issuer than the one it was fetched
    /// for (RFC 8414 §3.3): a misconfiguration or an impersonation.
    #[error(
        "the authorization server's metadata names issuer {found:?}, not {expected:?}: refusing \
         to use it"
    )]
    IssuerMismatch {
        /// The issuer asked for.
        expected: String,
        /// What the metadata says.
        found: String,
    },
    /// No metadata document answered.
    #[error("no OAuth metadata found for {0} (tried: {1})")]
    NotFound(String, String),
    /// The server URL is not an http(s) URL.
    #[error("{0:?} is not an http:// or https:// URL")]
    BadUrl(String),
}

fn parse(url: &str) -> Result<reqwest::Url, DiscoveryError> {
    reqwest::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
        .ok_or_else(|| DiscoveryError::BadUrl(url.to_owned()))
}

/// `scheme://host[:port]`.
fn origin(u: &reqwest::Url) -> String {
    let mut o = format!("{}://{}", u.scheme(), u.host_str().unwrap_or_default());
    if let Some(port) = u.port() {
        o.push_str(&format!(":{port}"));
    }
    o
}

/// The path without its trailing slash (`""` for the root).
fn path_of(u: &reqwest::Url) -> String {
    u.path().trim_end_matches('/').to_owned()
}

/// The `resource` parameter for a server URL: without query or fragment.
pub(crate) fn resource_parameter(server_url: &str) -> Result<String, DiscoveryError> {
    let u = parse(server_url)?;
    Ok(format!("{}{}", origin(&u), u.path()))
}

/// Protected-resource metadata locations: the path inserted after the host, then the root.
pub(crate) fn protected_resource_urls(server_url: &str) -> Result<Vec<String>, DiscoveryError> {
    let u = parse(server_url)?;
    let (o, p) = (origin(&u), path_of(&u));
    let root = format!("{o}/.well-known/oauth-protected-resource");
    Ok(if p.is_empty() { vec![root] } else { vec![format!("{root}{p}"), root] })
}

/// Authorization-server metadata locations for an issuer, in the reference's order: with a
/// path P, `/.well-known/oauth-authorization-server/P`, `/.well-known/openid-configuration/P`,
/// `P/.well-known/openid-configuration`, then the two at the root.
pub(crate) fn authorization_server_urls(issuer: &str) -> Result<Vec<String>, DiscoveryError> {
    let u = parse(issuer)?;
    let (o, p) = (origin(&u), path_of(&u));
    let oauth = format!("{o}/.well-known/oauth-authorization-server");
    let oidc = format!("{o}/.well-known/openid-configuration");
    Ok(if p.is_empty() {
        vec![oauth, oidc]
    } else {
        vec![
            format!("{oauth}{p}"),
            format!("{oidc}{p}"),
            format!("{o}{p}/.well-known/openid-configuration"),
            oauth,
            oidc,
        ]
    })
}

/// A parameter of a `WWW-Authenticate: Bearer ...` challenge (`resource_metadata`, `scope`).
pub(crate) fn challenge_param(header: &str, name: &str) -> Option<String> {
    let mut rest = header;
    while let Some(at) = rest.find(name) {
        let before = rest[..at].chars().last();
        let after = &rest[at + name.len()..];
        rest = after;
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let Some(value) = after.trim_start().strip_prefix('=') else { continue };
        let value = value.trim_start();
        return Some(match value.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or_default().to_owned(),
            None => value.split([',', ' ']).next().unwrap_or_default().to_owned(),
        });
    }
    None
}

/// Whether the metadata's `resource` covers the server URL: the same origin, and its path
/// the server's or a parent of it by whole segments (RFC 9728 §3.3 with the MCP SDKs' rule; a
/// root with or without its slash). Gemini CLI asks for equality, which refuses a server whose
/// metadata is at the root and names the origin.
fn covers(found: &str, expected: &str) -> bool {
    let (Ok(f), Ok(e)) = (reqwest::Url::parse(found), reqwest::Url::parse(expected)) else {
        return found.trim_end_matches('/') == expected.trim_end_matches('/');
    };
    let (fp, ep) = (path_of(&f), path_of(&e));
    origin(&f) == origin(&e) && (fp.is_empty() || ep == fp || ep.starts_with(&format!("{fp}/")))
}

async fn fetch_json(client: &reqwest::Client, url: &str) -> Option<Value> {
    let r = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(FETCH_TIMEOUT)
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    // A page that is not JSON (an HTML error page served with 200) is no metadata.
    r.json::<Value>().await.ok().filter(Value::is_object)
}

fn strings(doc: &Value, key: &str) -> Vec<String> {
    doc.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn endpoints(meta: &Value, scopes: Vec<String>, resource: String) -> Option<OAuthEndpoints> {
    let s = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_owned);
    let flag = |k: &str| meta.get(k).and_then(Value::as_bool).unwrap_or(false);
    Some(OAuthEndpoints {
        authorization_url: s("authorization_endpoint")?,
        token_url: s("token_endpoint")?,
        registration_url: s("registration_endpoint"),
        issuer: s("issuer"),
        scopes,
        iss_supported: flag("authorization_response_iss_parameter_supported"),
        cimd_supported: flag("client_id_metadata_document_supported"),
        auth_methods: strings(meta, "token_endpoint_auth_methods_supported"),
        resource,
    })
}

/// Discover where a server's users authorize and get tokens, from its 401 challenge (if any).
pub(crate) async fn discover(
    client: &reqwest::Client,
    server_url: &str,
    challenge: Option<&str>,
) -> Result<OAuthEndpoints, DiscoveryError> {
    let resource = resource_parameter(server_url)?;
    let challenged_scopes: Vec<String> = challenge
        .and_then(|h| challenge_param(h, "scope"))
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let mut tried = Vec::new();
    let mut prm_urls: Vec<String> =
        challenge.and_then(|h| challenge_param(h, "resource_metadata")).into_iter().collect();
    prm_urls.extend(protected_resource_urls(server_url)?);
    let mut issuer = None;
    let mut scopes = challenged_scopes;
    let mut resource = resource;
    for url in prm_urls {
        tried.push(url.clone());
        let Some(prm) = fetch_json(client, &url).await else { continue };
        if let Some(found) = prm.get("resource").and_then(Value::as_str) {
            if !covers(found, &resource) {
                return Err(DiscoveryError::ResourceMismatch {
                    expected: resource,
                    found: found.to_owned(),
                });
            }
            // Tokens are asked for the resource the server names (RFC 8707).
            found.clone_into(&mut resource);
        }
        issuer = prm
            .get("authorization_servers")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .map(str::to_owned);
        if scopes.is_empty() {
            scopes = strings(&prm, "scopes_supported");
        }
        break;
    }
    // Without protected-resource metadata, the server's own origin may be its issuer.
    let issuer = match issuer {
        Some(i) => i,
        None => origin(&parse(server_url)?),
    };
    for url in authorization_server_urls(&issuer)? {
        tried.push(url.clone());
        let Some(meta) = fetch_json(client, &url).await else { continue };
        // RFC 8414 §3.3: metadata naming another issuer is not this one's.
        if let Some(named) = meta.get("issuer").and_then(Value::as_str)
            && named.trim_end_matches('/') != issuer.trim_end_matches('/')
        {
            return Err(DiscoveryError::IssuerMismatch {
                expected: issuer,
                found: named.to_owned(),
            });
        }
        if let Some(found) = endpoints(&meta, scopes.clone(), resource.clone()) {
            return Ok(found);
        }
    }
    Err(DiscoveryError::NotFound(server_url.to_owned(), tried.join(", ")))
}

#[cfg(test)]
mod tests;
