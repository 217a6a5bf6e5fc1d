use serde_json::json;

use super::*;
use crate::auth::OAuthSettings;
use crate::auth::test_site::Site;
use crate::auth::token::Token;

fn auth(dir: &std::path::Path) -> Auth {
    let secrets = Arc::new(SecretStore::file_only(&dir.join("data")));
    let mut a = Auth::new(secrets, dir.join("gemini"));
    a.backoff = Duration::from_millis(5);
    a
}

fn target(url: &str) -> Target {
    Target { name: "remote".into(), url: url.into(), settings: OAuthSettings::default() }
}

fn expired(site: &Site, resource: &str, access: &str, refresh: &str) -> Credential {
    Credential {
        resource: resource.into(),
        token_resource: resource.into(),
        issuer: Some(site.base.clone()),
        client_id: "cid".into(),
        client_secret: None,
        client_auth: token::ClientAuth::None,
        token_url: format!("{}/token", site.base),
        token: Token {
            access: Secret::new(access.into()),
            refresh: Some(Secret::new(refresh.into())),
            expires_at_ms: Some(clock::now_ms()),
            token_type: "Bearer".into(),
            scope: None,
        },
        updated_at_ms: 1,
        origin: "signed-in".into(),
    }
}

fn token_answer(access: &str) -> (u16, &'static str, String) {
    (200, "application/json", json!({"access_token": access, "expires_in": 3600}).to_string())
}

#[tokio::test]
async fn fifty_callers_with_an_expired_token_cause_one_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start().await;
    site.route("/token", token_answer("AT-new"));
    let a = Arc::new(auth(dir.path()));
    let t = target(&format!("{}/mcp", site.base));
    a.store.put(&expired(&site, &t.resource().unwrap(), "AT-old", "RT-1")).unwrap();
    let calls = (0..50).map(|_| {
        let (a, t) = (a.clone(), t.clone());
        tokio::spawn(async move { a.bearer(&t).await })
    });
    for got in futures::future::join_all(calls).await {
        assert_eq!(got.unwrap().unwrap().unwrap().expose(), "AT-new");
    }
    let sent = site.seen("/token");
    assert_eq!(sent.len(), 1, "exactly one refresh request");
    assert!(sent[0].body.contains("grant_type=refresh_token") && sent[0].body.contains("RT-1"));
    assert!(sent[0].body.contains("resource="), "{}", sent[0].body);
    let stored = a.store.get(&t.resource().unwrap()).unwrap().unwrap();
    assert_eq!(stored.token.access.expose(), "AT-new");
    assert_eq!(
        stored.token.refresh.as_ref().map(|r| r.expose().as_str()),
        Some("RT-1"),
        "a refresh without a new refresh token keeps the old one"
    );
    // A 401 to the old token is answered with the new one, without another refresh.
    let again = a.rejected(&t, &Secret::new("AT-old".into())).await.unwrap();
    assert_eq!(again.expose(), "AT-new");
    assert_eq!(site.seen("/token").len(), 1);
    // A 401 to the new one refreshes (once for all callers).
    site.route("/token", token_answer("AT-newer"));
    let sent = Secret::new("AT-new".to_owned());
    let calls = (0..20).map(|_| {
        let (a, t, sent) = (a.clone(), t.clone(), sent.clone());
        tokio::spawn(async move { a.rejected(&t, &sent).await })
    });
    for got in futures::future::join_all(calls).await {
        assert_eq!(got.unwrap().unwrap().expose(), "AT-newer");
    }
    assert_eq!(site.seen("/token").len(), 2);
}

#[tokio::test]
async fn a_refused_refresh_deletes_only_the_token_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start().await;
    site.route("/token", (400, "application/json", json!({"error": "invalid_grant"}).to_string()));
    let a = auth(dir.path());
    let t = target(&format!("{}/mcp", site.base));
    let resource = t.resource().unwrap();
    a.store.put(&expired(&site, &resource, "AT-old", "RT-used")).unwrap();
    // Cached, then replaced behind the daemon's back (another process signed in).
    a.credential(&t).await.unwrap().unwrap();
    let mut other = expired(&site, &resource, "AT-other", "RT-other");
    other.token.expires_at_ms = None;
    a.store.put(&other).unwrap();
    let got = a.bearer(&t).await.unwrap().unwrap();
    assert_eq!(got.expose(), "AT-other", "the refused one was not the stored one: kept");
    assert_eq!(a.store.get(&resource).unwrap().unwrap().token.access.expose(), "AT-other");
    // Now the stored one itself is refused: deleted, and the error names the fix.
    a.store.put(&expired(&site, &resource, "AT-x", "RT-x")).unwrap();
    let b = auth(dir.path());
    let e = b.bearer(&t).await.unwrap_err();
    assert!(matches!(&e, AuthError::NeedsAuth(m) if m.contains("gemctl mcp auth remote")), "{e}");
    assert!(b.store.get(&resource).unwrap().is_none());
    assert!(!e.to_string().contains("RT-x"));
}

#[tokio::test]
async fn a_refresh_that_cannot_reach_the_server_is_retried_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let site = Site::start().await;
    site.route("/token", (503, "text/plain", "busy".into()));
    let a = auth(dir.path());
    let t = target(&format!("{}/mcp", site.base));
    let resource = t.resource().unwrap();
    a.store.put(&expired(&site, &resource, "AT-old", "RT-1")).unwrap();
    let e = a.bearer(&t).await.unwrap_err();
    assert!(matches!(&e, AuthError::Unavailable(m) if m.contains("nothing was removed")), "{e}");
    assert_eq!(site.seen("/token").len(), REFRESH_TRIES as usize);
    assert!(a.store.get(&resource).unwrap().is_some());
    // HTML where a token should be: not a token, and nothing deleted either.
    site.route("/token", (200, "text/html", "<html>login</html>".into()));
    let e = a.bearer(&t).await.unwrap_err();
    assert!(e.to_string().contains("not a token") && e.to_string().contains("is kept"), "{e}");
    assert!(a.store.get(&resource).unwrap().is_some());
}

#[tokio::test]
async fn gemini_clis_token_is_imported_once_and_left_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let gemini = dir.path().join("gemini");
    std::fs::create_dir_all(&gemini).unwrap();
    let file = gemini.join("mcp-oauth-tokens.json");
    let text = json!([{
        "serverName": "remote",
        "token": {"accessToken": "AT-gemini", "refreshToken": "RT-gemini", "tokenType": "Bearer"},
        "clientId": "cid", "tokenUrl": "http://127.0.0.1:9/token",
        "mcpServerUrl": "http://127.0.0.1:9/mcp", "updatedAt": 1
    }])
    .to_string();
    std::fs::write(&file, &text).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let a = auth(dir.path());
    let t = target("http://127.0.0.1:9/mcp");
    assert_eq!(a.bearer(&t).await.unwrap().unwrap().expose(), "AT-gemini");
    let c = a.credential(&t).await.unwrap().unwrap();
    assert_eq!(c.origin, "imported");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "left in place");
    // Another server of that name elsewhere is not given it.
    assert!(a.bearer(&target("http://127.0.0.1:9/other")).await.unwrap().is_none());
    assert!(a.logout(&t).await.unwrap());
    let fresh = auth(dir.path());
    assert!(fresh.bearer(&t).await.unwrap().is_none(), "not imported again after sign-out");
}
