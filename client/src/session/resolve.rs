//! The session a command acts for: `--session` (a whole id or enough of one), else the
//! current directory's default session.

use std::path::{Path, PathBuf};

use anyhow::Context;
use geminid_protocol::api::SessionApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::common::ClientEnv;
use geminid_protocol::session::{
    Session, SessionAttachParams, SessionCreateParams, SessionListParams,
};

use crate::error::call_error;

/// The environment gemctl sends with `session/create` and `session/attach`: a variable whose
/// name or value is not UTF-8 is left out (`std::env::vars` panicked on one).
pub fn client_env() -> ClientEnv {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

pub fn absolute(dir: Option<PathBuf>) -> anyhow::Result<String> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let dir = match dir {
        Some(d) if d.is_absolute() => d,
        Some(d) => cwd.join(d),
        None => cwd,
    };
    Ok(dir.to_string_lossy().into_owned())
}

/// The session a command acts for, attached to this connection: `id` (from `--session`) if
/// given, else the current directory's default session, created on first use. Every command
/// that acts for a session follows this convention.
pub async fn for_session(client: &Client, id: Option<String>) -> anyhow::Result<Session> {
    if let Some(id) = id {
        let id = resolve_id(client, id).await?;
        let params = SessionAttachParams { id, env: Some(client_env()) };
        return client.attach(params).await.map_err(call_error("session/attach"));
    }
    let params = SessionCreateParams {
        workspace: absolute(None)?,
        env: Some(client_env()),
        reuse_default: true,
        ..SessionCreateParams::default()
    };
    client.create(params).await.map_err(call_error("session/create"))
}

/// The default session of `dir` for clients that declare `upstream` (created on first use),
/// given this process's environment only if it has none (`gemctl mcp serve`).
pub async fn for_workspace(
    client: &Client,
    dir: &Path,
    upstream: Option<geminid_protocol::session::Declares>,
) -> anyhow::Result<Session> {
    let params = SessionCreateParams {
        workspace: absolute(Some(dir.to_path_buf()))?,
        env: Some(client_env()),
        env_if_unset: true,
        reuse_default: true,
        upstream,
        ..SessionCreateParams::default()
    };
    client.create(params).await.map_err(call_error("session/create"))
}

/// Every session (of `workspace`, if given), oldest first, page by page.
pub async fn all_sessions(
    client: &Client,
    workspace: Option<String>,
) -> anyhow::Result<Vec<Session>> {
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let params = SessionListParams { workspace: workspace.clone(), cursor, limit: None };
        let page = client.list(Some(params)).await.map_err(call_error("session/list"))?;
        all.extend(page.sessions);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(all),
        }
    }
}

/// A session id as given: a whole id, or enough of one to tell it from the others (its start,
/// or its end: ids begin with their creation time, so sessions created close together share
/// their first characters but not their last).
pub async fn resolve_id(client: &Client, given: String) -> anyhow::Result<String> {
    if given.len() >= 36 || given.len() < 4 {
        return Ok(given);
    }
    let all = all_sessions(client, None).await?;
    let by = |f: &dyn Fn(&str) -> bool| -> Vec<String> {
        all.iter().map(|s| s.id.clone()).filter(|id| f(id)).collect()
    };
    let mut found = by(&|id| id.starts_with(given.as_str()));
    if found.is_empty() {
        found = by(&|id| id.ends_with(given.as_str()));
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Ok(given), // the daemon says it does not exist, and what to do
        several => anyhow::bail!(
            "'{given}' fits {} sessions: {}; give more of the id",
            several.len(),
            several.join(", ")
        ),
    }
}
