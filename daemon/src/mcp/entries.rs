//! What each of a session's entries amounts to: a server it runs (by the identity of its
//! launch spec), or why it runs none (disabled, blocked, or an entry that cannot launch), with
//! what is shown of it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use geminid_protocol::config::{BlockReason, Scope};
use geminid_protocol::mcp::{ServerState, Transport as Wire};
use geminid_protocol::pins::PinMode;

use super::options::DEFAULT_REQUEST_TIMEOUT;
use super::roots;
use super::spec::{self, LaunchSpec, default_cwd, resolve as launch_spec};
use crate::config::Effective;
use crate::config::env::{Env, Redaction, redact_urls};

/// A session's view of its configuration, as the supervisor needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionView<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its effective configuration.
    pub config: &'a Effective,
    /// The environment its servers expand against and inherit.
    pub env: &'a Env,
}

/// What a session's entry amounts to.
#[derive(Debug, Clone)]
pub(super) enum Binding {
    /// It runs as (or shares) the server with this identity.
    Runs(String),
    /// It does not run: disabled, blocked, or its entry cannot be launched.
    NotRun { state: ServerState, reason: String, transport: Wire, target: String },
}

/// An entry, and for one that runs, its launch spec and configured `timeout`.
pub(super) type Resolved = BTreeMap<String, (Entry, Option<(LaunchSpec, Option<u64>, String)>)>;

#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) scope: Scope,
    pub(super) binding: Binding,
    /// The identity of its launch spec (what `binding` runs as, unless the server asks for
    /// roots: see `roots`); empty when it does not run.
    pub(super) base: String,
    /// The session's roots (see `roots::of`).
    pub(super) roots: roots::Roots,
    pub(super) include: Option<Vec<String>>,
    pub(super) exclude: Option<Vec<String>>,
    /// This session's `timeout` for requests to the server (its calls, prompts, reads).
    pub(super) timeout: Duration,
    /// Its `keepWarm`.
    pub(super) keep: geminid_protocol::mcp::KeepWarm,
    /// Its pinning (see `Server::pinning`).
    pub(super) pinning: geminid_protocol::pins::PinMode,
    /// Its artifact pinning (see `Server::artifact_pinning`).
    pub(super) artifact_pinning: geminid_protocol::pins::PinMode,
}

/// What each of a session's entries amounts to, resolving identities.
/// `modes`: the daemon's tool-definition and artifact pinning, for entries that say nothing.
pub(super) fn resolve(view: SessionView<'_>, modes: (PinMode, PinMode)) -> Resolved {
    let (pinning, artifact_pinning) = modes;
    let eff = view.config;
    let workspace = Path::new(&eff.public.workspace);
    let trusted = eff.public.trust.trusted;
    let redaction = Redaction::from_settings(&eff.public.settings);
    let session_roots = roots::of(workspace, &eff.public.settings, view.env);
    let mut out = BTreeMap::new();
    for (name, spec) in &eff.servers {
        let launch = launch_spec(
            name,
            &spec.config,
            view.env,
            &redaction,
            workspace,
            trusted,
            default_cwd(spec.scope, workspace, view.env).as_deref(),
        );
        let (binding, launch) = match (spec.blocked, launch) {
            (Some(reason), launch) => {
                let (state, text) = block_text(reason);
                let (transport, target) = config_target(&spec.shown);
                // A stdio entry in an untrusted folder says so in the reference's words.
                let text = match launch {
                    Err(e @ spec::ResolveError::Untrusted(_)) => e.to_string(),
                    _ => text.to_owned(),
                };
                (Binding::NotRun { state, reason: text, transport, target }, None)
            }
            (None, Err(e)) => {
                let (transport, target) = config_target(&spec.shown);
                let state = ServerState::Disconnected;
                (Binding::NotRun { state, reason: e.to_string(), transport, target }, None)
            }
            (None, Ok(l)) => {
                let l = l.telling(eff.upstream.unwrap_or_default());
                let target = config_target(&spec.shown).1;
                (Binding::Runs(l.identity()), Some((l, spec.config.timeout, target)))
            }
        };
        let base = match &binding {
            Binding::Runs(identity) => identity.clone(),
            Binding::NotRun { .. } => String::new(),
        };
        let entry = Entry {
            scope: spec.scope,
            binding,
            base,
            roots: session_roots.clone(),
            include: spec.config.include_tools.clone(),
            exclude: spec.config.exclude_tools.clone(),
            timeout: spec.config.timeout.map_or(DEFAULT_REQUEST_TIMEOUT, Duration::from_millis),
            keep: spec.config.keep_warm.unwrap_or_default(),
            pinning: match spec.config.pinning.unwrap_or(pinning) {
                PinMode::Enforce if spec.config.trust == Some(true) => PinMode::Warn,
                mode => mode,
            },
            artifact_pinning: match spec.config.artifact_pinning.unwrap_or(artifact_pinning) {
                PinMode::Enforce if spec.config.trust == Some(true) => PinMode::Warn,
                mode => mode,
            },
        };
        out.insert(name.clone(), (entry, launch));
    }
    out
}

/// `command args…` or the URL. As Gemini CLI prints it: a space after the command even with
/// no arguments (`gemini mcp list` shows `srv  (stdio)`).
fn stdio_target(command: &str, args: &[String]) -> String {
    format!("{command} {}", args.join(" "))
}

/// Transport and target of an entry as shown: pass the entry as written (`spec.shown`), so
/// a `$VAR` in its args or URL never shows the value it holds.
pub(super) fn config_target(c: &crate::config::mcp::McpServerConfig) -> (Wire, String) {
    use crate::config::mcp::TransportType;
    match (&c.http_url, &c.url, &c.command) {
        (Some(u), _, _) => (Wire::Http, redact_urls(u).into_owned()),
        (None, Some(u), _) if c.transport_type == Some(TransportType::Sse) => {
            (Wire::Sse, redact_urls(u).into_owned())
        }
        (None, Some(u), _) => (Wire::Http, redact_urls(u).into_owned()),
        (None, None, Some(cmd)) => {
            (Wire::Stdio, stdio_target(cmd, c.args.as_deref().unwrap_or_default()))
        }
        (None, None, None) => (Wire::Stdio, String::new()),
    }
}

/// The state and the words of an entry blocked for `reason`.
pub(super) fn block_text(reason: BlockReason) -> (ServerState, &'static str) {
    match reason {
        BlockReason::Session => (ServerState::Disabled, "disabled for this session"),
        BlockReason::Enablement => {
            (ServerState::Disabled, "disabled in mcp-server-enablement.json")
        }
        BlockReason::UntrustedFolder => {
            (ServerState::Disabled, "this folder is not trusted: `gemctl trust` trusts it")
        }
        BlockReason::Admin => {
            (ServerState::Blocked, "MCP servers are turned off by admin settings")
        }
        BlockReason::Allowlist => (ServerState::Blocked, "not in mcp.allowed"),
        BlockReason::Excludelist => (ServerState::Blocked, "listed in mcp.excluded"),
        BlockReason::Invalid => {
            (ServerState::Blocked, "its configuration is invalid (gemctl config check)")
        }
        BlockReason::Gateway => (
            ServerState::Blocked,
            "it is geminid's own gateway (gemctl mcp serve), for other clients; geminid does not serve itself",
        ),
    }
}
