//! Gemini CLI's `oauth-utils.test.ts` cases as data, and discovery against a real HTTP server
//! on 127.0.0.1.

use serde_json::json;

use super::*;
use crate::auth::test_site::{Answer, Site};

#[test]
fn protected_resource_locations_insert_the_path_then_try_the_root() {
    // (server URL, expected URLs): Gemini CLI's buildWellKnownUrls cases.
    let cases = [
        (
            "https://example.com/mcp",
            vec![
                "https://example.com/.well-known/oauth-protected-resource/mcp",
                "https://example.com/.well-known/oauth-protected-resource",
            ],
        ),
        ("https://example.com", vec!["https://example.com/.well-known/oauth-protected-resource"]),
        (
            "https://example.com/mcp/",
            vec![
                "https://example.com/.well-known/oauth-protected-resource/mcp",
                "https://example.com/.well-known/oauth-protected-resource",
            ],
        ),
        (
            "https://app.mintmcp.com/s/g_2lj2CNDoJdf3xnbFeeF6vx/mcp",
            vec![
                "https://app.mintmcp.com/.well-known/oauth-protected-resource/s/g_2lj2CNDoJdf3xnbFeeF6vx/mcp",
                "https://app.mintmcp.com/.well-known/oauth-protected-resource",
            ],
        ),
        (
            "http://127.0.0.1:8080/mcp?x=1",
            vec![
                "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
                "http://127.0.0.1:8080/.well-known/oauth-protected-resource",
            ],
        ),
    ];
    for (url, want) in cases {
        assert_eq!(protected_resource_urls(url).unwrap(), want, "{url}");
    }
}

#[test]
fn authorization_server_locations_follow_the_reference_order() {
    assert_eq!(
        authorization_server_urls("https://auth.example.com/").unwrap(),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com/.well-known/openid-configuration",
        ]
    );
    assert_eq!(
        authorization_server_urls("https://auth.example.com/mcp").unwrap(),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server/mcp",
            "https://auth.example.com/.well-known/openid-configuration/mcp",
            "https://auth.example.com/mcp/.well-known/openid-configuration",
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com/.well-known/openid-configuration",
        ]
    );
}

#[test]
fn challenge_parameters_and_the_resource_parameter() {
    let h = r#"Bearer realm="example", resource_metadata="https://example.com/.well-known/oauth-protected-resource""#;
    assert_eq!(
        challenge_param(h, "resource_metadata").as_deref(),
        Some("https://example.com/.well-known/oauth-protected-resource")
    );
    assert_eq!(challenge_param(r#"Bearer realm="example""#, "resource_metadata"), None);
    let h = r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata=https://x.test/prm"#;
    assert_eq!(challenge_param(h, "scope").as_deref(), Some("files:read files:write"));
    assert_eq!(challenge_param(h, "resource_metadata").as_deref(), Some("https://x.test/prm"));
    // `xscope` is not `scope`.
    assert_eq!(challenge_param(r#"Bearer xscope="a""#, "scope"), None);
    // Gemini CLI's buildResourceParameter cases.
    for (url, want) in [
        ("https://example.com/oauth/token", "https://example.com/oauth/token"),
        ("https://example.com:8080/oauth/token", "https://example.com:8080/oauth/token"),
        ("https://example.com/api/v1/data?user=123&scope=read", "https://example.com/api/v1/data"),
        ("https://example.com/api/v1/data#section-one", "https://example.com/api/v1/data"),
    ] {
        assert_eq!(resource_parameter(url).unwrap(), want);
    }
    assert_eq!(resource_parameter("not-a-url"), Err(DiscoveryError::BadUrl("not-a-url".into())));
    // A resource covers the server URL, or a parent of it by whole segments, on its origin.
    for (found, server, covered) in [
        ("https://example.com", "https://example.com/", true),
        ("https://example.com/", "https://example.com/mcp", true),
        ("https://example.com/mcp", "https://example.com/mcp", true),
        ("https://example.com/mcp/", "https://example.com/mcp", true),
        ("https://example.com/api", "https://example.com/api/mcp", true),
        ("https://example.com/ap", "https://example.com/api/mcp", false),
        ("https://example.com/mcp", "https://example.com/", false),
        ("https://evil.example.com/mcp", "https://example.com/mcp", false),
        ("http://example.com/mcp", "https://example.com/mcp", false),
        ("https://example.com:8443/mcp", "https://example.com/mcp", false),
    ] {
        assert_eq!(covers(found, server), covered, "{found} for {server}");
    }
}

fn doc(v: serde_json::Value) -> Answer {
    (200, "application/json", v.to_string())
}

#[tokio::test]
async fn discovery_follows_the_metadata_and_refuses_another_resource() {
    let (auth, mcp) = (Site::start().await, Site::start().await);
    let (a, m) = (&auth.base, &mcp.base);
    // The authorization server has a path; its metadata is at the OpenID location only, and an
    // HTML page at the first location is no metadata.
    auth.route(
        "/.well-known/oauth-authorization-server/tenant",
        (200, "text/html", "<html>sign in</html>".into()),
    );
    auth.route(
        "/.well-known/openid-configuration/tenant",
        doc(json!({
            "issuer": format!("{a}/tenant"),
            "authorization_endpoint": format!("{a}/authorize"),
            "token_endpoint": format!("{a}/token"),
            "registration_endpoint": format!("{a}/register"),
            "scopes_supported": ["everything"],
            "authorization_response_iss_parameter_supported": true,
        })),
    );
    let issuer = format!("{a}/tenant");
    mcp.route(
        "/.well-known/oauth-protected-resource/mcp",
        doc(json!({ "resource": format!("{m}/mcp"), "authorization_servers": [issuer] })),
    );
    mcp.route(
        "/.well-known/oauth-protected-resource/other",
        doc(json!({ "resource": "https://evil.example.com/other", "authorization_servers": [issuer] })),
    );
    mcp.route(
        "/.well-known/oauth-protected-resource/scoped",
        doc(json!({ "resource": format!("{m}/scoped"), "authorization_servers": [issuer], "scopes_supported": ["mcp:tools"] })),
    );

    let client = reqwest::Client::new();
    let found = discover(&client, &format!("{m}/mcp?session=1"), None).await.unwrap();
    assert_eq!(found.authorization_url, format!("{a}/authorize"));
    assert_eq!(found.token_url, format!("{a}/token"));
    assert_eq!(found.registration_url, Some(format!("{a}/register")));
    assert_eq!(found.issuer, Some(issuer.clone()));
    assert_eq!(found.resource, format!("{m}/mcp"), "no query in the resource");
    // Not the authorization server's `scopes_supported` (Gemini CLI asks for all of those):
    // without a challenge scope or the resource's own list, no scope is sent (README).
    assert!(found.scopes.is_empty());
    assert!(found.iss_supported && !found.cimd_supported);
    let scoped = discover(&client, &format!("{m}/scoped"), None).await.unwrap();
    assert_eq!(scoped.scopes, ["mcp:tools"], "the resource's scopes_supported");
    // The challenge's metadata URL and scope.
    let challenge = format!(
        r#"Bearer resource_metadata="{m}/.well-known/oauth-protected-resource/mcp", scope="read write""#
    );
    let found = discover(&client, &format!("{m}/mcp"), Some(&challenge)).await.unwrap();
    assert_eq!(found.scopes, ["read", "write"]);

    // Metadata that names another issuer than the one it was fetched for (RFC 8414 §3.3).
    mcp.route(
        "/.well-known/oauth-protected-resource/impostor",
        doc(json!({ "resource": format!("{m}/impostor"), "authorization_servers": [format!("{a}/impostor")] })),
    );
    auth.route(
        "/.well-known/oauth-authorization-server/impostor",
        doc(json!({
            "issuer": "https://real.example/as",
            "authorization_endpoint": format!("{a}/authorize"),
            "token_endpoint": format!("{a}/token"),
        })),
    );
    let impostor = discover(&client, &format!("{m}/impostor"), None).await;
    assert!(
        matches!(&impostor, Err(DiscoveryError::IssuerMismatch { found, .. }) if found == "https://real.example/as"),
        "{impostor:?}"
    );
    let refused = discover(&client, &format!("{m}/other"), None).await;
    assert!(
        matches!(&refused, Err(DiscoveryError::ResourceMismatch { found, .. }) if found == "https://evil.example.com/other"),
        "{refused:?}"
    );
    let nothing = discover(&client, &format!("{m}/nothing"), None).await;
    let Err(DiscoveryError::NotFound(_, tried)) = nothing else { panic!("{nothing:?}") };
    assert!(
        tried.contains("/.well-known/oauth-protected-resource/nothing")
            && tried.contains("openid-configuration"),
        "{tried}"
    );
}
