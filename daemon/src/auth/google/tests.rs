use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::auth::settings::{OAuthSettings, Provider};
use crate::auth::test_site::Site;
use crate::auth::{Auth, AuthError, Target};
use crate::secrets::SecretStore;

fn auth(dir: &Path, adc: &serde_json::Value, iam: &str) -> Auth {
    let file = dir.join("adc.json");
    std::fs::write(&file, adc.to_string()).unwrap();
    let mut a = Auth::new(Arc::new(SecretStore::file_only(&dir.join("data"))), dir.join("gemini"));
    a.google.adc_file = Some(file);
    a.google.iam_url = iam.to_owned();
    a
}

fn target(url: &str, provider: Provider, scopes: &[&str]) -> Target {
    let settings = OAuthSettings {
        provider,
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        ..OAuthSettings::default()
    };
    Target { name: "g".into(), url: url.into(), settings }
}

fn user(site: &Site) -> serde_json::Value {
    json!({
        "type": "authorized_user", "client_id": "adc-client", "client_secret": "adc-secret",
        "refresh_token": "adc-refresh", "quota_project_id": "my-project",
        "token_uri": format!("{}/token", site.base),
    })
}

#[test]
fn the_allowed_hosts_are_gemini_clis() {
    // Gemini CLI's google-auth-provider.test.ts cases.
    for (url, ok) in [
        ("https://test.googleapis.com", true),
        ("https://luci.app", true),
        ("https://sub.luci.app", true),
        ("https://googleapis.com", false),
        ("https://example.com", false),
        ("http://127.0.0.1:9/mcp", false),
    ] {
        assert_eq!(host_allowed(url).is_ok(), ok, "{url}");
    }
    assert_eq!(
        host_allowed("https://example.com").unwrap_err().to_string(),
        "Host \"example.com\" is not an allowed host for Google Credential provider."
    );
}

#[test]
fn the_credentials_file_is_found_where_gcloud_writes_it() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())
    };
    let explicit = adc_path(env(&[("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"), ("HOME", "/h")]));
    assert_eq!(explicit, Some(PathBuf::from("/k.json")));
    if !cfg!(windows) {
        let home = adc_path(env(&[("HOME", "/h")]));
        assert_eq!(
            home,
            Some(PathBuf::from("/h/.config/gcloud/application_default_credentials.json"))
        );
        let sdk = adc_path(env(&[("CLOUDSDK_CONFIG", "/c"), ("HOME", "/h")]));
        assert_eq!(sdk, Some(PathBuf::from("/c/application_default_credentials.json")));
    }
}

#[tokio::test]
async fn an_authorized_user_is_refreshed_at_its_token_uri_and_cached() {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start().await;
    site.route(
        "/token",
        (
            200,
            "application/json",
            json!({"access_token": "ya29.one", "expires_in": 3600}).to_string(),
        ),
    );
    let a = auth(dir.path(), &user(&site), "http://127.0.0.1:1");
    let t = target("https://mcp.googleapis.com/mcp", Provider::GoogleCredentials, &["s1", "s2"]);
    assert_eq!(a.bearer(&t).await.unwrap().unwrap().expose(), "ya29.one");
    assert_eq!(a.bearer(&t).await.unwrap().unwrap().expose(), "ya29.one");
    let sent = site.seen("/token");
    assert_eq!(sent.len(), 1, "cached until 5 minutes before it expires");
    for part in [
        "grant_type=refresh_token",
        "refresh_token=adc-refresh",
        "client_id=adc-client",
        "client_secret=adc-secret",
        "scope=s1+s2",
    ] {
        assert!(sent[0].body.contains(part), "{part} in {}", sent[0].body);
    }
    assert_eq!(a.google.quota_project().as_deref(), Some("my-project"));
    // Refused by the server: made again.
    site.route(
        "/token",
        (
            200,
            "application/json",
            json!({"access_token": "ya29.two", "expires_in": 3600}).to_string(),
        ),
    );
    let again = a.rejected(&t, &Secret::new("ya29.one".into())).await.unwrap();
    assert_eq!(again.expose(), "ya29.two");
    assert!(
        !format!("{:?}", read_adc(&dir.path().join("adc.json")).unwrap()).contains("adc-secret")
    );
}

#[tokio::test]
async fn what_the_providers_need_is_said_when_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start().await;
    let a = auth(dir.path(), &user(&site), "http://127.0.0.1:1");
    let cases = [
        (
            target("http://127.0.0.1:9/mcp", Provider::GoogleCredentials, &["s"]),
            "not an allowed host",
        ),
        (
            target("https://x.googleapis.com/mcp", Provider::GoogleCredentials, &[]),
            "Scopes must be provided",
        ),
        (
            target(
                "http://127.0.0.1:9/mcp",
                Provider::Impersonation { audience: None, service_account: Some("sa".into()) },
                &[],
            ),
            "targetAudience must be provided",
        ),
        (
            target(
                "http://127.0.0.1:9/mcp",
                Provider::Impersonation { audience: Some("aud".into()), service_account: None },
                &[],
            ),
            "targetServiceAccount must be provided",
        ),
    ];
    for (t, want) in cases {
        let e = a.bearer(&t).await.unwrap_err();
        assert!(matches!(&e, AuthError::NeedsAuth(m) if m.contains(want)), "{want}: {e}");
    }
    assert!(site.seen("/token").is_empty(), "nothing was asked for");
    let mut none = auth(dir.path(), &user(&site), "");
    none.google.adc_file = Some(dir.path().join("absent.json"));
    let e =
        none.bearer(&target("https://x.googleapis.com", Provider::GoogleCredentials, &["s"])).await;
    assert!(format!("{e:?}").contains("gcloud auth application-default login"), "{e:?}");
}

#[tokio::test]
async fn impersonation_mints_an_id_token_with_the_adc_token_and_reads_its_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start().await;
    site.route(
        "/token",
        (
            200,
            "application/json",
            json!({"access_token": "ya29.adc", "expires_in": 3600}).to_string(),
        ),
    );
    let exp = clock::now_ms() / 1000 + 3600;
    let payload =
        crate::auth::flow::base64url(json!({"aud": "aud-1", "exp": exp}).to_string().as_bytes());
    let id_token = format!("eyJhbGciOiJSUzI1NiJ9.{payload}.c2ln");
    let iam = "/v1/projects/-/serviceAccounts/sa%40p.iam.gserviceaccount.com:generateIdToken";
    site.route(iam, (200, "application/json", json!({ "token": id_token }).to_string()));
    let a = auth(dir.path(), &user(&site), &site.base);
    let provider = Provider::Impersonation {
        audience: Some("aud-1".into()),
        service_account: Some("sa@p.iam.gserviceaccount.com".into()),
    };
    let t = target("https://run.example/mcp", provider, &[]);
    assert_eq!(a.bearer(&t).await.unwrap().unwrap().expose(), &id_token);
    let asked = site.seen(iam);
    assert_eq!(asked[0].headers["authorization"], "Bearer ya29.adc");
    let body: serde_json::Value = serde_json::from_str(&asked[0].body).unwrap();
    assert_eq!(body, json!({"audience": "aud-1", "includeEmail": true}));
    assert_eq!(jwt::expiry_ms(&id_token), Some(exp * 1000));
    a.bearer(&t).await.unwrap();
    assert_eq!(site.seen(iam).len(), 1, "cached by its exp");
}

#[cfg(not(windows))]
#[tokio::test]
async fn a_service_account_signs_its_assertion_with_rs256() {
    use aws_lc_rs::encoding::AsDer;
    use aws_lc_rs::signature::KeyPair;
    let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let der: aws_lc_rs::encoding::Pkcs8V1Der<'_> = key.as_der().unwrap();
    // Standard base64 of the DER, in PEM's 64-column lines.
    let b64 = crate::auth::token::base64(der.as_ref())
        .as_bytes()
        .chunks(64)
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{b64}\n-----END PRIVATE KEY-----\n");
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start().await;
    site.route(
        "/token",
        (
            200,
            "application/json",
            json!({"access_token": "ya29.sa", "expires_in": 3600}).to_string(),
        ),
    );
    let adc = json!({
        "type": "service_account", "client_email": "sa@p.iam.gserviceaccount.com",
        "private_key": pem, "private_key_id": "kid-1", "token_uri": format!("{}/token", site.base),
    });
    let a = auth(dir.path(), &adc, "");
    let t = target("https://x.googleapis.com/mcp", Provider::GoogleCredentials, &["s1"]);
    assert_eq!(a.bearer(&t).await.unwrap().unwrap().expose(), "ya29.sa");
    let body = &site.seen("/token")[0].body;
    assert!(
        body.contains("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"),
        "{body}"
    );
    let assertion = body.split("assertion=").nth(1).unwrap().split('&').next().unwrap();
    let parts: Vec<&str> = assertion.split('.').collect();
    let header: serde_json::Value =
        serde_json::from_slice(&jwt::unbase64(parts[0]).unwrap()).unwrap();
    assert_eq!(header, json!({"alg": "RS256", "typ": "JWT", "kid": "kid-1"}));
    let claims: serde_json::Value =
        serde_json::from_slice(&jwt::unbase64(parts[1]).unwrap()).unwrap();
    assert_eq!(
        (claims["iss"].as_str(), claims["scope"].as_str()),
        (Some("sa@p.iam.gserviceaccount.com"), Some("s1"))
    );
    assert_eq!(claims["aud"], json!(format!("{}/token", site.base)));
    let signed = format!("{}.{}", parts[0], parts[1]);
    let public = aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
        key.public_key().as_ref(),
    );
    public
        .verify(signed.as_bytes(), &jwt::unbase64(parts[2]).unwrap())
        .expect("a valid RS256 signature");
}

#[test]
fn a_credentials_file_that_cannot_be_used_says_why_and_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("adc.json");
    type Is = fn(&GoogleError) -> bool;
    let cases: [(&str, Is, &str); 3] = [
        ("{", |e| matches!(e, GoogleError::NotCredentials { .. }), "not a credentials file"),
        (
            r#"{"type": "authorized_user", "client_id": "c", "client_secret": "s"}"#,
            |e| matches!(e, GoogleError::Missing { field: "refresh_token", .. }),
            "no \"refresh_token\"",
        ),
        (
            r#"{"type": "external_account"}"#,
            |e| matches!(e, GoogleError::Unsupported { kind: Some(k), .. } if k == "external_account"),
            "authorized_user and service_account are",
        ),
    ];
    for (text, kind, words) in cases {
        std::fs::write(&path, text).unwrap();
        let e = read_adc(&path).unwrap_err();
        assert!(kind(&e), "{text}: {e:?}");
        let said = e.to_string();
        assert!(said.contains(words) && said.contains("adc.json"), "{text}: {said}");
    }
    // A key that is no PEM is read (as Gemini CLI reads it) and refused when it signs.
    let e = jwt::sign("e", None, "s", "http://t", 0, &Secret::new("k".into())).unwrap_err();
    assert!(matches!(e, jwt::AssertionError::NotPem), "{e:?}");
    let e = read_adc(&dir.path().join("absent.json")).unwrap_err();
    assert!(matches!(e, GoogleError::Unreadable { .. }), "{e:?}");
    assert!(e.to_string().contains("gcloud auth application-default login"), "{e}");
}
