//! `mcp/update`: a local server moved to its newest release on purpose. What is newest is
//! found where what it runs is (`npm.rs` asks the registry for what the entry's spec resolves
//! to now; any other command is its executable hashed again, `artifact.rs`), compared with
//! the record, and offered old → new (`mcp/review` shows it, `mcp/accept` takes it) or, with
//! `yes`, taken at once. Nothing runs before it is taken: the server keeps running what was
//! recorded.

use std::sync::Arc;

use geminid_protocol::pins::{PinMode, UpdateResult};

use super::artifact;
use super::npm::{Context, Found, Invocation};
use super::server::Server;
use super::spec::LaunchSpec;
use super::supervisor::Supervisor;
use crate::pins::artifact::Recorded;

/// Why `mcp/update` could not offer anything.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpdateError {
    /// Nothing it runs is pinned: a remote server, or artifact pinning off.
    #[error("{0}")]
    NotPinned(String),
    /// Its registry did not answer.
    #[error("{0}")]
    Unreachable(String),
    /// Anything else (the registry has no such package, an entry that names one version, a
    /// record that cannot be written).
    #[error("{0}")]
    Failed(String),
}

impl Supervisor {
    /// `mcp/update` of `server` (see the module).
    pub(crate) async fn update(
        &self,
        server: &Arc<Server>,
        yes: bool,
    ) -> Result<UpdateResult, UpdateError> {
        let s = &server.name;
        let LaunchSpec::Stdio { args, program: Some(program), env, cwd, .. } = &server.spec else {
            return Err(UpdateError::NotPinned(format!(
                "MCP server '{s}' is remote ({}): geminid runs nothing of it, so nothing is \
                 pinned to update",
                server.target
            )));
        };
        if server.artifact_pinning == PinMode::Off {
            return Err(UpdateError::NotPinned(format!(
                "MCP server '{s}' is not pinned: its artifactPinning is off (its entry in \
                 geminid's servers.json, or the daemon's --artifact-pinning), so what it runs is \
                 not recorded and any release runs"
            )));
        }
        let (pins, key) = (self.pins.clone(), server.pin_key.0.clone());
        let recorded = tokio::task::spawn_blocking(move || pins.artifact(&key))
            .await
            .unwrap_or_else(|e| Recorded::Unverified(format!("it could not be read: {e}")));
        let found = match Invocation::of(program, args) {
            Some(inv) => {
                let ctx = Context { env: env.expose(), cwd: cwd.as_deref() };
                match super::npm::newest(&inv, &ctx).await {
                    Ok(found) => found,
                    Err(e) if e.unreachable => {
                        let registry = super::npm::registry(&ctx, &inv.name).await;
                        let registry = registry.as_deref().unwrap_or("the registry npm is set to");
                        return Err(UpdateError::Unreachable(format!(
                            "MCP server '{s}': its registry {registry} did not answer ({}); \
                             check that it is up and reachable, or point npm at one that is \
                             (npm_config_registry in the server's env, or registry= in \
                             .npmrc), then `gemctl mcp update {s}` again",
                            e.message
                        )));
                    }
                    Err(e) => {
                        return Err(UpdateError::Failed(format!(
                            "MCP server '{s}': {}",
                            e.message
                        )));
                    }
                }
            }
            None => {
                let (program, path) = (program.clone(), env.expose().get("PATH").cloned());
                tokio::task::spawn_blocking(move || {
                    artifact::executable(&program, path.as_ref(), None)
                })
                .await
                .map_err(|e| UpdateError::Failed(format!("MCP server '{s}': {e}")))?
            }
        };
        let recorded = match recorded {
            Recorded::Verified(r) => Some(r.artifact),
            _ => None,
        };
        let newest = found.artifact.clone();
        let current = recorded.as_ref().is_some_and(|r| artifact::same(r, &newest));
        let mut result =
            UpdateResult { server: s.clone(), recorded, newest, current, accepted: false };
        if current {
            server.pins.lock().artifact_offer = None;
            return Ok(result);
        }
        offer(server, found);
        if yes {
            match artifact::accept(server, &self.pins).await {
                Some(Ok(_)) => result.accepted = true,
                Some(Err(e)) => {
                    return Err(UpdateError::Failed(format!(
                        "MCP server '{s}': the newest release could not be recorded: {e}"
                    )));
                }
                None => {}
            }
        }
        if let Some(audit) = &self.pins.audit {
            let verb = if result.accepted { "taken" } else { "offered" };
            let note = format!("artifact update {verb}: {}", artifact::line(&result.newest));
            audit.note(s, s, if result.accepted { "pins/accept" } else { "pins" }, Some(note));
        }
        Ok(result)
    }
}

/// Keep `found` as the offer `mcp/accept` takes.
fn offer(server: &Server, found: Found) {
    server.log.push(
        "geminid",
        &format!(
            "update offered (`gemctl mcp accept` takes it): {}",
            artifact::line(&found.artifact)
        ),
    );
    server.pins.lock().artifact_offer = Some((found.artifact, found.stats));
}
