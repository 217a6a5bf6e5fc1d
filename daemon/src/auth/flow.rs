//! The authorization-code step (COMPAT §3.3): PKCE (S256) and `state`, the authorization URL,
//! and the loopback callback that receives the code.
//!
//! The callback listens on 127.0.0.1 only (Gemini CLI listens on every interface): port
//! `OAUTH_CALLBACK_PORT`, else the port of `oauth.redirectUri`, else one the system picks;
//! path `/oauth/callback`. It checks `state`, reports the authorization server's `error`,
//! and checks `iss` against the issuer (RFC 9207) when the server sends it or says it will.
//! Nobody finishing within the timeout (5 minutes by default) is an error, and nothing is kept.

use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::discovery::OAuthEndpoints;

/// How long the user has to finish in the browser.
pub(crate) const CALLBACK_TIMEOUT: Duration = Duration::from_secs(300);

/// The callback path.
pub(crate) const CALLBACK_PATH: &str = "/oauth/callback";

/// base64url without padding (RFC 4648 §5).
pub(crate) fn base64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len() * 4 / 3 + 3);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// Random text of unreserved characters (hex of version-4 UUIDs: the OS's random source).
fn random_hex(uuids: usize) -> String {
    (0..uuids).map(|_| uuid::Uuid::new_v4().simple().to_string()).collect()
}

/// A PKCE pair and the `state` of one authorization attempt.
#[derive(Clone)]
pub(crate) struct Attempt {
    /// The code verifier (96 characters; kept until the code is exchanged).
    pub verifier: String,
    /// `state`.
    pub state: String,
}

impl std::fmt::Debug for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Attempt { [redacted] }")
    }
}

impl Attempt {
    /// A fresh verifier and state.
    pub(crate) fn new() -> Self {
        Self { verifier: random_hex(3), state: random_hex(1) }
    }

    /// The S256 challenge of the verifier.
    pub(crate) fn challenge(&self) -> String {
        challenge_of(&self.verifier)
    }
}

impl Default for Attempt {
    fn default() -> Self {
        Self::new()
    }
}

/// `BASE64URL(SHA256(verifier))`.
pub(crate) fn challenge_of(verifier: &str) -> String {
    base64url(&Sha256::digest(verifier.as_bytes()))
}

/// The authorization endpoint is not a URL: the endpoint and the parser's reason.
#[derive(Debug, thiserror::Error)]
#[error("the authorization endpoint {0:?} is not a URL: {1}")]
pub(crate) struct BadEndpoint(pub(crate) String, pub(crate) String);

/// The URL the user opens: COMPAT §3.3 step 5's parameters.
pub(crate) fn authorization_url(
    endpoints: &OAuthEndpoints,
    client_id: &str,
    redirect_uri: &str,
    attempt: &Attempt,
    audiences: &[String],
) -> Result<String, BadEndpoint> {
    let mut url = reqwest::Url::parse(&endpoints.authorization_url)
        .map_err(|e| BadEndpoint(endpoints.authorization_url.clone(), e.to_string()))?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("client_id", client_id)
            .append_pair("response_type", "code")
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("state", &attempt.state)
            .append_pair("code_challenge", &attempt.challenge())
            .append_pair("code_challenge_method", "S256");
        if !endpoints.scopes.is_empty() {
            q.append_pair("scope", &endpoints.scopes.join(" "));
        }
        if !audiences.is_empty() {
            q.append_pair("audience", &audiences.join(" "));
        }
        q.append_pair("resource", &endpoints.resource);
    }
    Ok(url.into())
}

/// Why the callback brought no code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CallbackError {
    /// The authorization server said no (`error`, `error_description`).
    #[error("the authorization server answered {0}")]
    Denied(String),
    /// `state` is not this attempt's: a forged or stale redirect.
    #[error(
        "the callback's state is not this sign-in's (a stale or forged redirect): nothing was kept"
    )]
    StateMismatch,
    /// `iss` is not the issuer (RFC 9207): a mix-up attack or a misconfigured server.
    #[error(
        "the callback comes from issuer {}, not {expected}: nothing was kept",
        .found.as_deref().map_or_else(|| "(none named)".to_owned(), |f| format!("{f:?}"))
    )]
    IssuerMismatch {
        /// The issuer discovery found.
        expected: String,
        /// What the callback said (`None`: nothing, where the server promised it).
        found: Option<String>,
    },
    /// Nobody finished in time.
    #[error("nobody finished signing in within {}; run it again when ready", humantime::format_duration(*.0))]
    TimedOut(Duration),
    /// The listener could not start.
    #[error("cannot listen for the sign-in's callback on 127.0.0.1:{0}: {1}")]
    Listen(u16, String),
}

/// A bound callback listener, waiting to be used.
#[derive(Debug)]
pub(crate) struct Callback {
    listener: tokio::net::TcpListener,
    port: u16,
}

/// What the callback checks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Expect {
    /// The attempt's `state`.
    pub state: String,
    /// The issuer, when known.
    pub issuer: Option<String>,
    /// The server said it sends `iss` (`authorization_response_iss_parameter_supported`).
    pub iss_required: bool,
}

fn decode(s: &str) -> String {
    let bytes = s.replace('+', " ").into_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(h) = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok())
            && let Ok(b) = u8::from_str_radix(h, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query(target: &str) -> Vec<(String, String)> {
    target
        .split_once('?')
        .map(|(_, q)| q)
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

impl Callback {
    /// Listen on 127.0.0.1: `port` (0 lets the system pick).
    pub(crate) async fn bind(port: u16) -> Result<Self, CallbackError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| CallbackError::Listen(port, e.to_string()))?;
        let port =
            listener.local_addr().map_err(|e| CallbackError::Listen(port, e.to_string()))?.port();
        Ok(Self { listener, port })
    }

    /// The redirect URI to register and send.
    pub(crate) fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}{CALLBACK_PATH}", self.port)
    }

    /// Wait for the browser's redirect (other paths are answered 404 and waited past) and
    /// return the code, or why there is none.
    pub(crate) async fn code(
        self,
        expect: &Expect,
        within: Duration,
    ) -> Result<String, CallbackError> {
        let wait = async {
            loop {
                let Ok((mut stream, _)) = self.listener.accept().await else { continue };
                let mut buf = vec![0u8; 16 * 1024];
                let mut n = 0;
                while n < buf.len() && !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf[n..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(m) => n += m,
                    }
                }
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let target = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                if target.split('?').next() != Some(CALLBACK_PATH) {
                    let _ = reply(&mut stream, 404, "Not the sign-in callback.").await;
                    continue;
                }
                let outcome = judge(&query(&target), expect);
                let (status, page) = match &outcome {
                    Ok(_) => {
                        (200, "Signed in: you can close this tab and return to geminid.".to_owned())
                    }
                    Err(e @ CallbackError::StateMismatch) => (400, e.to_string()),
                    Err(e) => (200, format!("Sign-in failed: {e}")),
                };
                let _ = reply(&mut stream, status, &page).await;
                return outcome;
            }
        };
        tokio::time::timeout(within, wait).await.unwrap_or(Err(CallbackError::TimedOut(within)))
    }
}

/// The code, if the callback's parameters are this attempt's.
fn judge(params: &[(String, String)], expect: &Expect) -> Result<String, CallbackError> {
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if let Some(error) = get("error") {
        let why = get("error_description").map(|d| format!("{error}: {d}")).unwrap_or(error);
        return Err(CallbackError::Denied(why));
    }
    if get("state").as_deref() != Some(expect.state.as_str()) {
        return Err(CallbackError::StateMismatch);
    }
    if let Some(issuer) = &expect.issuer {
        let iss = get("iss");
        let bad = match &iss {
            // RFC 9207 §2.4: compared as strings; `https://as/` is not `https://as`.
            Some(found) => found != issuer,
            None => expect.iss_required,
        };
        if bad {
            return Err(CallbackError::IssuerMismatch { expected: issuer.clone(), found: iss });
        }
    }
    get("code").filter(|c| !c.is_empty()).ok_or_else(|| CallbackError::Denied("no code".into()))
}

async fn reply(stream: &mut tokio::net::TcpStream, status: u16, text: &str) -> std::io::Result<()> {
    let body = format!("<!doctype html><title>geminid</title><p>{}</p>", text.replace('<', "&lt;"));
    let head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        if status == 200 { "OK" } else { "Error" },
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await
}

#[cfg(test)]
mod tests;
