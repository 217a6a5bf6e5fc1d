//! The token and registration endpoints over real loopback HTTP: what is sent, a JSON and a
//! form answer, rotation and a kept refresh token, invalid_grant, HTML, 5xx, a refused
//! registration; and no token in any error or Debug output.

use serde_json::json;

use super::*;
use crate::auth::test_site::Site;

const NOW: u64 = 1_000_000;

fn form_of(body: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(&format!("http://x/?{body}"))
        .map(|u| u.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
        .unwrap_or_default()
}

fn get<'a>(form: &'a [(String, String)], k: &str) -> Option<&'a str> {
    form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn a_code_is_exchanged_and_a_token_refreshed_keeping_what_the_answer_leaves_out() {
    let site = Site::start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/token", site.base);
    site.route("/token", (200, "application/json", json!({"access_token": "AT-secret-1", "refresh_token": "RT-secret-1", "expires_in": 3600, "scope": "read"}).to_string()));
    let secret = Secret::new("cs-secret".to_owned());
    let client = Client {
        id: "cid",
        secret: Some(&secret),
        auth: ClientAuth::Post,
        audiences: &["aud".into()],
        resource: Some("https://mcp.test/mcp"),
    };
    let t = exchange_code(
        &http,
        &url,
        &client,
        "the-code",
        "the-verifier",
        "http://127.0.0.1:9/oauth/callback",
        NOW,
    )
    .await
    .unwrap();
    assert_eq!(t.access.expose(), "AT-secret-1");
    assert_eq!(t.expires_at_ms, Some(NOW + 3_600_000));
    assert_eq!((t.token_type.as_str(), t.scope.as_deref()), ("Bearer", Some("read")));
    let sent = site.seen("/token");
    assert_eq!(sent[0].method, "POST");
    let form = form_of(&sent[0].body);
    for (k, v) in [
        ("grant_type", "authorization_code"),
        ("code", "the-code"),
        ("code_verifier", "the-verifier"),
        ("redirect_uri", "http://127.0.0.1:9/oauth/callback"),
        ("client_id", "cid"),
        ("client_secret", "cs-secret"),
        ("audience", "aud"),
        ("resource", "https://mcp.test/mcp"),
    ] {
        assert_eq!(get(&form, k), Some(v), "{k}");
    }
    assert!(sent[0].headers["accept"].contains("application/json"));
    let debug = format!("{t:?}");
    assert!(!debug.contains("secret"), "{debug}");

    // Expiry with the reference's margin.
    assert!(!t.is_expired(NOW + 3_600_000 - EXPIRY_MARGIN_MS - 1));
    assert!(t.is_expired(NOW + 3_600_000 - EXPIRY_MARGIN_MS));

    // A refresh answered as a form, without a new refresh token or scope: the old ones stay.
    site.route(
        "/token",
        (
            200,
            "application/x-www-form-urlencoded",
            "access_token=AT-secret-2&token_type=bearer&expires_in=60".into(),
        ),
    );
    let plain = Client { id: "cid", ..Client::default() };
    let t2 = refresh(&http, &url, &plain, &t, &["read".into(), "write".into()], NOW).await.unwrap();
    assert_eq!(t2.access.expose(), "AT-secret-2");
    assert_eq!(t2.refresh.as_ref().map(|r| r.expose().as_str()), Some("RT-secret-1"));
    assert_eq!(t2.scope.as_deref(), Some("read"));
    assert_eq!(t2.token_type, "bearer");
    let form = form_of(&site.seen("/token")[1].body);
    assert_eq!(
        (get(&form, "grant_type"), get(&form, "refresh_token"), get(&form, "scope")),
        (Some("refresh_token"), Some("RT-secret-1"), Some("read write"))
    );
    assert_eq!(get(&form, "client_secret"), None);
}

#[tokio::test]
async fn what_the_token_endpoint_refuses_is_told_apart_and_never_quotes_a_token() {
    let site = Site::start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/token", site.base);
    let old = Token {
        access: Secret::new("AT-old".into()),
        refresh: Some(Secret::new("RT-old".into())),
        expires_at_ms: Some(0),
        token_type: "Bearer".into(),
        scope: None,
    };
    let client = Client { id: "cid", ..Client::default() };
    let cases = [
        (
            (
                400,
                "application/json",
                json!({"error": "invalid_grant", "error_description": "refresh token reused"})
                    .to_string(),
            ),
            TokenError::InvalidGrant(Some("refresh token reused".into())),
        ),
        (
            (401, "application/json", json!({"error": "invalid_client"}).to_string()),
            TokenError::Rejected { error: "invalid_client".into(), description: None },
        ),
        (
            (200, "text/html", "<html>log in</html>".into()),
            TokenError::NotAToken { status: 200, kind: "text/html".into() },
        ),
    ];
    for (answer, want) in cases {
        site.route("/token", answer);
        let got = refresh(&http, &url, &client, &old, &[], NOW).await.unwrap_err();
        assert_eq!(got, want);
        assert!(!got.is_transient());
        let text = got.to_string();
        assert!(!text.contains("RT-old") && !text.contains("AT-old"), "{text}");
    }
    site.route("/token", (503, "text/plain", "busy".into()));
    let got = refresh(&http, &url, &client, &old, &[], NOW).await.unwrap_err();
    assert!(got.is_transient(), "{got:?}");
    // The server is gone.
    let gone =
        refresh(&http, "http://127.0.0.1:9/token", &client, &old, &[], NOW).await.unwrap_err();
    assert!(gone.is_transient(), "{gone:?}");
    // No refresh token: nothing to send.
    let none = Token { refresh: None, ..old.clone() };
    assert!(matches!(
        refresh(&http, &url, &client, &none, &[], NOW).await,
        Err(TokenError::InvalidGrant(_))
    ));
}

#[tokio::test]
async fn a_confidential_client_authenticates_as_the_server_offers() {
    assert_eq!(ClientAuth::choose(&[], false), ClientAuth::None);
    assert_eq!(ClientAuth::choose(&[], true), ClientAuth::Basic, "the RFC's default");
    assert_eq!(ClientAuth::choose(&["client_secret_post".into()], true), ClientAuth::Post);
    let both = ["client_secret_post".to_owned(), "client_secret_basic".to_owned()];
    assert_eq!(ClientAuth::choose(&both, true), ClientAuth::Basic);
    let site = Site::start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/token", site.base);
    site.route("/token", (200, "application/json", json!({"access_token": "AT"}).to_string()));
    let secret = Secret::new("s3:cr&t".to_owned());
    let client =
        Client { id: "c id", secret: Some(&secret), auth: ClientAuth::Basic, ..Client::default() };
    exchange_code(&http, &url, &client, "c", "v", "http://127.0.0.1:9/cb", NOW).await.unwrap();
    let sent = &site.seen("/token")[0];
    // base64("c+id:s3%3Acr%26t"): each part form-encoded first (RFC 6749 §2.3.1).
    assert_eq!(sent.headers["authorization"], "Basic YytpZDpzMyUzQWNyJTI2dA==");
    let form = form_of(&sent.body);
    assert!(!form.iter().any(|(k, _)| k == "client_secret"), "one authentication: {form:?}");
    // The id in the body as well, for servers that read it only there (FastMCP).
    assert!(form.iter().any(|(k, v)| k == "client_id" && v == "c id"), "{form:?}");
    assert_eq!(base64(b"a"), "YQ==");
    assert_eq!(base64(b"ab"), "YWI=");
}

#[tokio::test]
async fn registration_asks_for_a_public_client_unless_the_server_takes_none() {
    let site = Site::start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/register", site.base);
    site.route(
        "/register",
        (
            201,
            "application/json",
            json!({"client_id": "new-client", "client_secret": "not-kept"}).to_string(),
        ),
    );
    let r = register(&http, &url, "http://127.0.0.1:9/oauth/callback", &["read".into()], &[])
        .await
        .unwrap();
    assert_eq!((r.id.as_str(), r.auth), ("new-client", ClientAuth::Basic), "a secret came back");
    let sent: serde_json::Value = serde_json::from_str(&site.seen("/register")[0].body).unwrap();
    assert_eq!(sent["redirect_uris"], json!(["http://127.0.0.1:9/oauth/callback"]));
    assert_eq!(sent["token_endpoint_auth_method"], "none");
    assert_eq!(sent["application_type"], "native");
    assert_eq!(sent["grant_types"], json!(["authorization_code", "refresh_token"]));
    assert_eq!(sent["scope"], "read");
    site.route(
        "/register",
        (400, "application/json", json!({"error": "invalid_redirect_uri"}).to_string()),
    );
    let refused =
        register(&http, &url, "http://127.0.0.1:9/oauth/callback", &[], &[]).await.unwrap_err();
    assert_eq!(
        refused,
        TokenError::Rejected { error: "invalid_redirect_uri".into(), description: None }
    );
    // A server that only takes confidential clients is asked for one.
    site.route(
        "/register",
        (201, "application/json", json!({"client_id": "c2", "client_secret": "k"}).to_string()),
    );
    let post = ["client_secret_post".to_owned()];
    let r = register(&http, &url, "http://127.0.0.1:9/cb", &[], &post).await.unwrap();
    assert_eq!(r.auth, ClientAuth::Post);
    assert_eq!(r.secret.as_ref().map(|s| s.expose().as_str()), Some("k"));
    let sent: serde_json::Value = serde_json::from_str(&site.seen("/register")[2].body).unwrap();
    assert_eq!(sent["token_endpoint_auth_method"], "client_secret_post");
    assert!(sent.get("scope").is_none(), "no scope: none asked for");
}
