//! PKCE against RFC 7636's example, the authorization URL's parameters, and the callback over
//! real loopback HTTP: the code, a state mismatch, the server's error, an `iss` mismatch, other
//! paths, and nobody finishing.

use std::time::Duration;

use super::*;

#[test]
fn pkce_matches_rfc_7636_and_verifiers_are_fresh() {
    // RFC 7636, appendix B.
    assert_eq!(
        challenge_of("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    );
    let (a, b) = (Attempt::new(), Attempt::new());
    assert_ne!(a.verifier, b.verifier);
    assert_ne!(a.state, b.state);
    assert!((43..=128).contains(&a.verifier.len()), "{}", a.verifier.len());
    assert_eq!(format!("{a:?}"), "Attempt { [redacted] }");
    assert_eq!(base64url(b""), "");
    assert_eq!(base64url(b"f"), "Zg");
    assert_eq!(base64url(b"fo"), "Zm8");
    assert_eq!(base64url(b"foo"), "Zm9v");
    assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
}

#[test]
fn the_authorization_url_carries_the_references_parameters() {
    let endpoints = OAuthEndpoints {
        authorization_url: "https://auth.test/authorize?tenant=a".into(),
        token_url: "https://auth.test/token".into(),
        registration_url: None,
        issuer: Some("https://auth.test".into()),
        scopes: vec!["read".into(), "write".into()],
        iss_supported: false,
        cimd_supported: false,
        auth_methods: vec![],
        resource: "https://mcp.test/mcp".into(),
    };
    let a = Attempt::new();
    let url = authorization_url(
        &endpoints,
        "cid",
        "http://127.0.0.1:9/oauth/callback",
        &a,
        &["aud1".into()],
    )
    .unwrap();
    let u = reqwest::Url::parse(&url).unwrap();
    let q: Vec<(String, String)> =
        u.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("tenant"), Some("a"), "the endpoint's own query is kept");
    assert_eq!(get("client_id"), Some("cid"));
    assert_eq!(get("response_type"), Some("code"));
    assert_eq!(get("redirect_uri"), Some("http://127.0.0.1:9/oauth/callback"));
    assert_eq!(get("state"), Some(a.state.as_str()));
    assert_eq!(get("code_challenge"), Some(a.challenge().as_str()));
    assert_eq!(get("code_challenge_method"), Some("S256"));
    assert_eq!(get("scope"), Some("read write"));
    assert_eq!(get("audience"), Some("aud1"));
    assert_eq!(get("resource"), Some("https://mcp.test/mcp"));
}

async fn visit(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn expect(state: &str) -> Expect {
    Expect { state: state.into(), issuer: Some("https://auth.test".into()), iss_required: false }
}

#[tokio::test]
async fn the_callback_takes_the_code_and_refuses_what_is_not_this_sign_in() {
    // The code, past a request for another path; `iss` as the issuer said it.
    let cb = Callback::bind(0).await.unwrap();
    let uri = cb.redirect_uri();
    assert!(uri.starts_with("http://127.0.0.1:") && uri.ends_with("/oauth/callback"), "{uri}");
    let base = uri.trim_end_matches("/oauth/callback").to_owned();
    let e = expect("s1");
    let waiting = tokio::spawn(async move { cb.code(&e, Duration::from_secs(10)).await });
    assert_eq!(visit(&format!("{base}/favicon.ico")).await.0, 404);
    let (status, page) =
        visit(&format!("{uri}?code=abc%2F1&state=s1&iss=https%3A%2F%2Fauth.test")).await;
    assert_eq!(status, 200);
    assert!(page.contains("Signed in"), "{page}");
    assert_eq!(waiting.await.unwrap(), Ok("abc/1".to_owned()));

    for (query, want) in [
        ("code=x&state=other", CallbackError::StateMismatch),
        (
            "error=access_denied&error_description=no%20thanks&state=s1",
            CallbackError::Denied("access_denied: no thanks".into()),
        ),
        (
            "code=x&state=s1&iss=https%3A%2F%2Fevil.test",
            CallbackError::IssuerMismatch {
                expected: "https://auth.test".into(),
                found: Some("https://evil.test".into()),
            },
        ),
    ] {
        let cb = Callback::bind(0).await.unwrap();
        let uri = cb.redirect_uri();
        let e = expect("s1");
        let waiting = tokio::spawn(async move { cb.code(&e, Duration::from_secs(10)).await });
        let (status, _) = visit(&format!("{uri}?{query}")).await;
        assert_eq!(status, if want == CallbackError::StateMismatch { 400 } else { 200 }, "{query}");
        assert_eq!(waiting.await.unwrap(), Err(want), "{query}");
    }

    // A server that promised `iss` and sent none.
    let cb = Callback::bind(0).await.unwrap();
    let uri = cb.redirect_uri();
    let e = Expect { iss_required: true, ..expect("s1") };
    let waiting = tokio::spawn(async move { cb.code(&e, Duration::from_secs(10)).await });
    visit(&format!("{uri}?code=x&state=s1")).await;
    assert!(matches!(
        waiting.await.unwrap(),
        Err(CallbackError::IssuerMismatch { found: None, .. })
    ));

    // Nobody finishes.
    let cb = Callback::bind(0).await.unwrap();
    let e = expect("s1");
    let r = cb.code(&e, Duration::from_millis(100)).await;
    assert_eq!(r, Err(CallbackError::TimedOut(Duration::from_millis(100))));
}
