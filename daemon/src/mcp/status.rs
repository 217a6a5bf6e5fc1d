//! `mcp/listServers` from memory: each entry's state, as Gemini CLI shows it.

use std::sync::Arc;
use std::time::Duration;

use geminid_protocol::config::Scope;
use geminid_protocol::event::EventBody;
use geminid_protocol::mcp::{
    AtRest, ServerState, ServerStateChanged, ServerStatus, Transport as Wire,
};

use super::entries::{Binding, SessionView, resolve};
use super::error::McpError;
use super::registry::Inner;
use super::server::{Server, planned_transport};
use super::supervisor::Supervisor;
use crate::config::env::redact_urls;
use crate::naming;

/// The status of an entry nothing runs for.
fn not_running(name: &str, scope: Scope, transport: Wire, target: String) -> ServerStatus {
    ServerStatus {
        name: name.to_owned(),
        scope,
        extension: None,
        transport,
        target,
        state: ServerState::Disconnected,
        last_error: None,
        identity: None,
        pid: None,
        uptime_secs: None,
        unresponsive_secs: None,
        restarts: 0,
        tools: None,
        prompts: None,
        resources: None,
        protocol_version: None,
        problems: vec![],
        sessions: vec![],
        idle_secs: None,
        stops_in_secs: None,
        keep_warm: None,
        roots: vec![],
        told: None,
        rss_bytes: None,
        pins: None,
        artifact: None,
        usage: None,
        at_rest: None,
    }
}

impl Supervisor {
    /// What it says of its servers: `mcp/listServers`, one server's status, why a tool is missing, and the state and catalog events.
    pub(crate) fn status(&self) -> Status<'_> {
        Status { sup: self }
    }
}

/// The servers' status, read from the registry (see the module).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Status<'a> {
    sup: &'a Supervisor,
}

impl Status<'_> {
    /// The server a session's entry `name` resolves to when the session runs none (its
    /// settings in `view`): the one of that identity running for others, or stopped lately.
    pub(crate) fn find_planned(
        &self,
        view: SessionView<'_>,
        name: &str,
    ) -> Result<Arc<Server>, McpError> {
        let resolved = resolve(view, (self.sup.pins.mode, self.sup.pins.artifact_mode));
        let Some((entry, _)) = resolved.get(name) else {
            let near =
                geminid_protocol::suggest::did_you_mean(name, resolved.keys().map(|k| k.as_str()));
            return Err(McpError::NotFound(format!(
                "no MCP server named '{name}' in this session{near}"
            )));
        };
        let inner = self.sup.registry.lock();
        let entry = inner.planned(entry.clone());
        inner.bound(name, &entry.binding)
    }

    pub(super) fn status_of(
        &self,
        inner: &Inner,
        server: &Server,
        name: &str,
        scope: Scope,
    ) -> ServerStatus {
        let s = server.snapshot();
        let sessions = inner.users(&server.identity);
        let (tools, prompts, resources) = match server.counts() {
            Some((t, p, r)) => (Some(t), Some(p), Some(r)),
            None => (None, None, None),
        };
        let mut status = ServerStatus {
            name: name.to_owned(),
            scope,
            extension: None,
            transport: s.transport,
            target: server.target.clone(),
            state: s.state,
            last_error: s.last_error.map(|e| redact_urls(&e).into_owned()),
            identity: Some(server.identity[..12].to_owned()),
            pid: s.pid,
            uptime_secs: s.connected_at.map(|t| t.elapsed().as_secs()),
            unresponsive_secs: s.unresponsive_since.map(|t| t.elapsed().as_secs()),
            restarts: s.restarts,
            tools,
            prompts,
            resources,
            protocol_version: (s.state == ServerState::Connected)
                .then(|| server.catalog().protocol_version.clone())
                .flatten(),
            problems: if s.state == ServerState::Connected {
                server.catalog().problems.clone()
            } else {
                Vec::new()
            },
            sessions,
            idle_secs: None,
            stops_in_secs: None,
            keep_warm: None,
            roots: inner
                .given_roots
                .get(&server.identity)
                .map(|r| r.iter().map(|r| r.uri.clone()).collect())
                .unwrap_or_default(),
            told: Some(server.spec.declares()).filter(|d| !d.is_all()),
            rss_bytes: None,
            pins: server.pin_status(),
            artifact: server.artifact_status().map(Box::new),
            usage: None,
            at_rest: None,
        };
        inner.idle.describe(&server.identity, self.sup.opts.linger, &mut status);
        status
    }

    /// Every running server (for `mcp/listServers` without a session).
    pub(crate) fn list_all(self) -> Vec<ServerStatus> {
        let inner = self.sup.registry.lock();
        let mut out: Vec<ServerStatus> =
            inner.servers.values().map(|s| self.status_of(&inner, s, &s.name, s.scope)).collect();
        out.sort_by(|a, b| (a.scope, &a.name).cmp(&(b.scope, &b.name)));
        out
    }

    /// [`Status::list_all`], each with its usage: its calls, and what its process tree
    /// holds (one pass over the process table for all of them, outside the lock).
    pub(crate) fn list_all_with_usage(self) -> Vec<ServerStatus> {
        let servers: Vec<Arc<Server>> =
            self.sup.registry.lock().servers.values().cloned().collect();
        let held = super::usage::of_groups(servers.iter().filter_map(|s| s.snapshot().pid));
        // Outside the lock: collecting runs the gauges, which take it.
        let latencies = crate::telemetry::latencies();
        let micros = |s: f64| Some((s * 1e6).round() as u64);
        let inner = self.sup.registry.lock();
        let mut out: Vec<ServerStatus> = servers
            .iter()
            .map(|s| {
                let mut status = self.status_of(&inner, s, &s.name, s.scope);
                let mut usage = s.calls.usage(status.pid.and_then(|p| held.get(&p)));
                if let Some((p50, p99)) = latencies.get(&s.name) {
                    (usage.p50_us, usage.p99_us) = (micros(*p50), micros(*p99));
                }
                status.usage = Some(usage);
                status
            })
            .collect();
        out.sort_by(|a, b| (a.scope, &a.name).cmp(&(b.scope, &b.name)));
        out
    }

    /// A session's entries and their state. Never starts anything: an entry of a session that
    /// has not asked for its servers shows the state of a server another session runs for the
    /// same identity, else `disconnected`.
    pub(crate) fn list_session(self, view: SessionView<'_>) -> Vec<ServerStatus> {
        let inner = self.sup.registry.lock();
        let active = inner.sessions.get(view.id);
        let resolved = resolve(view, (self.sup.pins.mode, self.sup.pins.artifact_mode));
        let mut out = Vec::new();
        for (name, (entry, launch)) in resolved {
            // A session that runs its servers reports what it runs (which may lag a config
            // edit by one reload); otherwise what the files say now.
            let entry = match active.and_then(|a| a.get(&name)) {
                Some(running) => running.clone(),
                None => inner.planned(entry),
            };
            let status = match &entry.binding {
                Binding::Runs(identity) => match inner.servers.get(identity) {
                    Some(server) => {
                        let mut s = self.status_of(&inner, server, &name, entry.scope);
                        // The tools this entry exposes, after its include/exclude lists.
                        if s.tools.is_some() && (entry.include.is_some() || entry.exclude.is_some())
                        {
                            let n = server
                                .catalog()
                                .tools
                                .iter()
                                .filter(|t| {
                                    naming::enabled(
                                        &t.name,
                                        entry.include.as_deref(),
                                        entry.exclude.as_deref(),
                                    )
                                })
                                .count();
                            s.tools = Some(u32::try_from(n).unwrap_or(u32::MAX));
                        }
                        s
                    }
                    None => {
                        let (transport, tgt) = launch
                            .as_ref()
                            .map(|(l, _, shown)| (planned_transport(l), shown.clone()))
                            .unwrap_or((Wire::Stdio, String::new()));
                        let mut s = not_running(&name, entry.scope, transport, tgt);
                        s.identity = Some(identity[..12].to_owned());
                        // Not a failure: said as such, not as a disconnection.
                        s.at_rest = Some(match inner.retired(identity) {
                            Some(_) => AtRest::Stopped,
                            None => AtRest::NotStarted,
                        });
                        s.last_error = Some(match inner.retired(identity) {
                            Some(r) => format!(
                                "stopped {} ago: {}",
                                humantime::format_duration(Duration::from_secs(
                                    r.at.elapsed().as_secs()
                                )),
                                r.why
                            ),
                            None => "not started yet: it starts with the session's first call \
                                     or `gemctl mcp start`"
                                .to_owned(),
                        });
                        s
                    }
                },
                Binding::NotRun { state, reason, transport, target } => {
                    let mut s = not_running(&name, entry.scope, *transport, target.clone());
                    s.state = *state;
                    s.last_error = Some(redact_urls(reason).into_owned());
                    s
                }
            };
            let mut status = status;
            status.extension = view.config.servers.get(&name).and_then(|s| s.extension.clone());
            out.push(status);
        }
        // In the order of the settings files, as Gemini CLI lists them.
        let written = &view.config.public.mcp_servers;
        let place = |name: &str| written.iter().position(|e| e.name == name);
        out.sort_by_cached_key(|s| (place(&s.name).unwrap_or(usize::MAX), s.name.clone()));
        out
    }

    /// One server's status, named as it was started.
    pub(crate) fn of(self, server: &Arc<Server>) -> ServerStatus {
        self.status_of(&self.sup.registry.lock(), server, &server.name, server.scope)
    }

    /// Why the session's tool `fqn` is not in its table, when it is held for differing from
    /// its pin.
    pub(crate) fn held_in_session(self, session: &str, fqn: &str) -> Option<String> {
        let inner = self.sup.registry.lock();
        let entries = inner.sessions.get(session)?;
        entries.iter().find_map(|(name, entry)| {
            let Binding::Runs(identity) = &entry.binding else { return None };
            let server = inner.servers.get(identity)?;
            let v = server.pin_verdict()?;
            let d = v.differs.iter().find(|d| {
                d.def.kind == geminid_protocol::pins::DefinitionKind::Tool
                    && naming::fqn(name, &d.def.name) == fqn
            })?;
            server.held_tool(&d.def.name)
        })
    }

    /// Why a session has no tool named `fqn`, when one of its servers would be the one to
    /// have it: the server's state and the `gemctl` command that helps. `None` when no entry's
    /// name fits the tool's.
    pub(crate) fn explain_missing_tool(
        &self,
        session: &str,
        fqn: &str,
    ) -> Option<(ServerState, String)> {
        let inner = self.sup.registry.lock();
        let entries = inner.sessions.get(session)?;
        // The longest fitting prefix wins: `mcp_a_b_x` is server `a_b`'s before server `a`'s.
        let (name, entry) = entries
            .iter()
            .filter(|(name, _)| naming::is_of_server(fqn, name))
            .max_by_key(|(name, _)| name.len())?;
        let (state, why) = match &entry.binding {
            Binding::NotRun { state, reason, .. } => (*state, Some(reason.clone())),
            Binding::Runs(identity) => match inner.servers.get(identity) {
                Some(server) => {
                    let snap = server.snapshot();
                    (snap.state, snap.last_error)
                }
                None => (ServerState::Disconnected, None),
            },
        };
        let what = state.phrase();
        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
        let text = match state {
            ServerState::Connected => format!(
                "MCP server '{name}' is connected but has no tool that is named '{fqn}' in this \
                 session; `gemctl mcp tools {name}` lists its tools"
            ),
            ServerState::Disabled => {
                format!(
                    "MCP server '{name}' is disabled{why}; `gemctl mcp enable {name}` enables it"
                )
            }
            ServerState::Blocked => format!("MCP server '{name}' is blocked{why}"),
            ServerState::Connecting => format!(
                "MCP server '{name}' is still starting; try again in a moment (`gemctl mcp list` \
                 shows when it is connected)"
            ),
            ServerState::NeedsAuth => format!(
                "MCP server '{name}' needs authentication{why}; `gemctl mcp logs {name}` shows \
                 its answer, `gemctl mcp restart {name}` tries again"
            ),
            ServerState::Disconnected | ServerState::CrashLoop => format!(
                "MCP server '{name}' is {what}{why}; `gemctl mcp logs {name}` shows why, \
                 `gemctl mcp restart {name}` starts it again"
            ),
        };
        Some((state, text))
    }

    /// Announce a state change to every session using the server.
    pub(super) fn announce(self, server: &Arc<Server>, previous: ServerState) {
        self.sup.registry.servers_changed();
        if server.snapshot().state == ServerState::Connected {
            self.sup.long_calls().resume_tasks(server);
        }
        let status = self.status_of(&self.sup.registry.lock(), server, &server.name, server.scope);
        tracing::info!(server = %server.name, from = ?previous, to = ?status.state, error = status.last_error.as_deref().unwrap_or(""), "MCP server state");
        self.sup
            .events
            .emit(EventBody::McpServerState(ServerStateChanged { server: status, previous }));
    }

    /// Announce a new catalog to every session using the server.
    pub(super) fn catalog_changed(self, server: &Arc<Server>) {
        self.sup.registry.servers_changed();
        let sessions = self.sup.registry.lock().users(&server.identity);
        let (tools, prompts, resources) = server.catalog().counts();
        tracing::info!(server = %server.name, tools, prompts, resources, "catalog changed");
        self.sup.events.emit(EventBody::CatalogChanged(geminid_protocol::mcp::CatalogChanged {
            server: server.name.clone(),
            identity: server.identity[..12].to_owned(),
            sessions,
            tools,
            prompts,
            resources,
        }));
    }
}
