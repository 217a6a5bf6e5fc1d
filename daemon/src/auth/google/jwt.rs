//! The JWTs of the Google providers: a service account's assertion for the JWT-bearer grant
//! (RS256, RFC 7515/7523), and an ID token's `exp`.

use serde_json::{Value, json};

use crate::auth::flow::base64url;
use crate::secrets::Secret;

/// Decode base64 of either alphabet (standard or URL-safe), padded or not; whitespace is
/// skipped (PEM's line breaks).
pub(super) fn unbase64(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=') {
        acc = (acc << 6) | u32::from(value(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

/// The DER inside a PEM `PRIVATE KEY` block.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    let body = pem.split("-----BEGIN PRIVATE KEY-----").nth(1)?.split("-----END").next()?;
    unbase64(body)
}

/// Why a service account's assertion could not be signed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AssertionError {
    /// `private_key` holds no PEM `PRIVATE KEY` block.
    #[error("the service account's private_key is not a PEM \"PRIVATE KEY\"")]
    NotPem,
    /// The key is not an RSA key in PKCS #8.
    #[cfg(not(windows))]
    #[error("the service account's private_key is not an RSA key: {0}")]
    NotRsa(String),
    /// Signing failed.
    #[cfg(not(windows))]
    #[error("signing the service account's assertion failed")]
    Signing,
    /// Not on this platform.
    #[cfg(windows)]
    #[error(
        "service_account credentials files are not supported on Windows yet; use `gcloud auth application-default login` (authorized_user)"
    )]
    Unsupported,
}

/// The signed assertion a service account presents for a token (one hour).
pub(super) fn sign(
    email: &str,
    key_id: Option<&str>,
    scope: &str,
    audience: &str,
    now_secs: u64,
    private_key: &Secret<String>,
) -> Result<String, AssertionError> {
    let mut header = json!({ "alg": "RS256", "typ": "JWT" });
    if let Some(kid) = key_id {
        header["kid"] = json!(kid);
    }
    let claims = json!({
        "iss": email, "scope": scope, "aud": audience, "iat": now_secs, "exp": now_secs + 3600,
    });
    let input = format!(
        "{}.{}",
        base64url(header.to_string().as_bytes()),
        base64url(claims.to_string().as_bytes())
    );
    let der = pem_der(private_key.expose()).ok_or(AssertionError::NotPem)?;
    let signature = rs256(&der, input.as_bytes())?;
    Ok(format!("{input}.{}", base64url(&signature)))
}

#[cfg(not(windows))]
fn rs256(pkcs8: &[u8], message: &[u8]) -> Result<Vec<u8>, AssertionError> {
    use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
    let key = RsaKeyPair::from_pkcs8(pkcs8).map_err(|e| AssertionError::NotRsa(e.to_string()))?;
    let mut signature = vec![0u8; key.public_modulus_len()];
    key.sign(&RSA_PKCS1_SHA256, &aws_lc_rs::rand::SystemRandom::new(), message, &mut signature)
        .map_err(|_| AssertionError::Signing)?;
    Ok(signature)
}

#[cfg(windows)]
fn rs256(_: &[u8], _: &[u8]) -> Result<Vec<u8>, AssertionError> {
    Err(AssertionError::Unsupported)
}

/// A JWT's `exp`, in milliseconds since the Unix epoch.
pub(super) fn expiry_ms(token: &str) -> Option<u64> {
    let payload = token.split('.').nth(1)?;
    let claims: Value = serde_json::from_slice(&unbase64(payload)?).ok()?;
    claims.get("exp")?.as_u64()?.checked_mul(1000)
}
