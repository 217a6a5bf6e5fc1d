//! Signing in the way a person with a browser would, without one: `auth/begin`, a GET of the
//! URL it gives (the authorization server redirects to geminid's loopback callback), then
//! `auth/progress` until the attempt ends. Shared by the conformance adapter and the benchmarks.

use std::time::Duration;

use anyhow::bail;
use geminid_protocol::api::{AuthApiClient, McpApiClient};
use geminid_protocol::auth::{AuthBeginParams, AuthProgressParams, AuthStep};
use geminid_protocol::client::Client;
use geminid_protocol::mcp::{ListServersParams, ServerState, ServerStatus};

/// One sign-in of `server` for `session`, to its end: Ok once geminid says the server is
/// connected with the new token, the failure's message otherwise.
pub async fn sign_in(client: &Client, session: &str, server: &str) -> anyhow::Result<()> {
    let begun = client
        .auth_begin(AuthBeginParams {
            session: session.to_owned(),
            name: server.to_owned(),
            callback_port: None,
        })
        .await?;
    eprintln!("oauth: signing in {server} ({}) at {}", begun.client, begun.url);
    let browser = reqwest::Client::new().get(&begun.url).send().await;
    eprintln!("oauth: the browser: {:?}", browser.map(|r| r.status()));
    let mut after = 0;
    loop {
        let p = client
            .auth_progress(AuthProgressParams { attempt: begun.attempt.clone(), after })
            .await?;
        after = p.seq;
        match p.step {
            AuthStep::Connected => return Ok(()),
            AuthStep::Failed => bail!("signing in failed: {:?}", p.message),
            _ => {}
        }
    }
}

/// Waits (up to `limit`) until `server` of `session` has settled: connected, or wanting a
/// sign-in, or failed for good. A server that closed its connection after a mid-session 401 is
/// `disconnected` for a moment on its way to `needs-auth`; callers must not judge it then.
pub async fn settled(
    client: &Client,
    session: &str,
    server: &str,
    limit: Duration,
) -> anyhow::Result<ServerStatus> {
    let last = std::cell::RefCell::new(None);
    let found = crate::poll(limit, || async {
        let params = ListServersParams { session: Some(session.to_owned()), usage: false };
        let listed = match client.mcp_list_servers(Some(params)).await {
            Ok(listed) => listed,
            Err(e) => return Some(Err(anyhow::Error::from(e))),
        };
        let Some(status) = listed.servers.into_iter().find(|s| s.name == server) else {
            return Some(Err(anyhow::anyhow!("the session has no server {server}")));
        };
        let settled = matches!(
            status.state,
            ServerState::Connected
                | ServerState::NeedsAuth
                | ServerState::CrashLoop
                | ServerState::Blocked
                | ServerState::Disabled
        );
        if settled {
            return Some(Ok(status));
        }
        *last.borrow_mut() = Some(status);
        None
    })
    .await;
    match found {
        Some(settled) => settled,
        None => last.take().ok_or_else(|| anyhow::anyhow!("{server} was never listed")),
    }
}
