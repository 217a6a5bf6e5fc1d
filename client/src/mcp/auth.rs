//! `gemctl mcp auth NAME`, `gemctl mcp auth --status`, `gemctl mcp logout NAME`: OAuth sign-in
//! to remote servers. The daemon runs the flow; this prints each step and opens the browser.

use anyhow::bail;
use geminid_protocol::api::AuthApiClient;
use geminid_protocol::auth::{
    AuthBeginParams, AuthLogoutParams, AuthProgressParams, AuthState, AuthStatusParams, AuthStep,
};
use geminid_protocol::client::Client;

use crate::error::call_error;
use crate::output;
use crate::output::{errln, outln};

/// `gemctl mcp auth NAME`.
pub async fn sign_in(
    client: &Client,
    session: String,
    name: String,
    json: bool,
) -> anyhow::Result<()> {
    let callback_port = match std::env::var("OAUTH_CALLBACK_PORT") {
        Ok(p) => match p.trim().parse::<u16>() {
            Ok(port) => Some(port),
            Err(_) => bail!("OAUTH_CALLBACK_PORT={p:?} is not a port number (1-65535)"),
        },
        Err(_) => None,
    };
    if !json {
        errln!("Signing in to MCP server '{name}'…");
        errln!("  discovering its authorization server");
    }
    let begun = client
        .auth_begin(AuthBeginParams { session, name: name.clone(), callback_port })
        .await
        .map_err(call_error("auth/begin"))?;
    if !json {
        let client_word = match begun.client.as_str() {
            "registered" => "registered as a new client",
            "metadata-document" => "identified by its client metadata document",
            _ => "using the configured client id",
        };
        match &begun.issuer {
            Some(issuer) => errln!("  authorization server: {issuer} ({client_word})"),
            None => errln!("  {client_word}"),
        }
        errln!("  open this URL to sign in (it is opened in your browser when there is one):");
        outln!("{}", begun.url);
    }
    crate::session::elicit::open_url(&begun.url);
    let mut after = 0;
    let last = loop {
        let p = client
            .auth_progress(AuthProgressParams { attempt: begun.attempt.clone(), after })
            .await
            .map_err(call_error("auth/progress"))?;
        if p.seq > after && !json {
            match p.step {
                AuthStep::WaitingForBrowser => errln!(
                    "  waiting for the browser (up to {})",
                    humantime::format_duration(std::time::Duration::from_millis(begun.timeout_ms))
                ),
                AuthStep::Exchanging => errln!("  exchanging the code for a token"),
                AuthStep::Reconnecting => errln!("  reconnecting with the new token"),
                AuthStep::Connected | AuthStep::Failed => {}
            }
        }
        after = p.seq;
        if p.step.is_done() {
            break p;
        }
    };
    if json {
        return output::json(&serde_json::json!({ "begun": begun, "outcome": last }));
    }
    match last.step {
        AuthStep::Connected => {
            errln!("✓ MCP server '{name}' is signed in and connected.");
            Ok(())
        }
        _ => {
            let why = last.message.unwrap_or_else(|| "no reason given".into());
            bail!("signing in to '{name}' failed: {why}")
        }
    }
}

/// `gemctl mcp auth --status`.
pub async fn status(client: &Client, session: String, json: bool) -> anyhow::Result<()> {
    let r = client
        .auth_status(AuthStatusParams { session })
        .await
        .map_err(call_error("auth/status"))?;
    if json {
        return output::json(&r);
    }
    output::warnings(&r.warnings);
    if r.servers.is_empty() {
        outln!("No remote MCP servers in this session.");
    }
    let now = output::now_ms();
    for s in &r.servers {
        let state = match s.state {
            AuthState::SignedIn => "signed in",
            AuthState::Expired => "expired (sign in again)",
            AuthState::None => "not signed in",
            AuthState::Google => "Google credentials",
            AuthState::Header => "sends the Authorization header its settings give (no sign-in)",
            AuthState::NotNeeded => "needs no sign-in (it connected without one)",
        };
        let mut line = format!("{}: {state}", s.name);
        if let Some(at) = s.expires_at_ms {
            let left = std::time::Duration::from_secs(at.saturating_sub(now) / 1000);
            if at > now {
                line.push_str(&format!(", expires in {}", humantime::format_duration(left)));
            }
            if s.refreshable {
                line.push_str(" (refreshed automatically)");
            }
        }
        if let Some(i) = &s.issuer {
            line.push_str(&format!(", from {i}"));
        }
        if s.origin.as_deref() == Some("imported") {
            line.push_str(", imported from Gemini CLI");
        }
        outln!("{line}  {}", s.url);
    }
    outln!("Tokens are kept in {}.", r.storage);
    Ok(())
}

/// `gemctl mcp logout NAME`.
pub async fn logout(
    client: &Client,
    session: String,
    name: String,
    json: bool,
) -> anyhow::Result<()> {
    let r = client
        .auth_logout(AuthLogoutParams { session, name: name.clone() })
        .await
        .map_err(call_error("auth/logout"))?;
    if json {
        return output::json(&r);
    }
    if r.removed {
        outln!("Signed out of '{name}': its OAuth credentials are removed.");
    } else {
        outln!("'{name}' had no stored OAuth credentials.");
    }
    Ok(())
}
