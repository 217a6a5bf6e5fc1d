//! A server's catalog against its pins (`crate::pins`): what it listed is compared once per
//! listing, for every session at once, and what differs is held back from the catalog the
//! sessions and the gateway see (where its pinning is `enforce`).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use geminid_protocol::pins::{Change, DefinitionKind, HeldDefinition, PinMode, PinStatus};

use super::catalog::Catalog;
use super::server::{Observer, PinState, Server, Shown};
use super::supervisor::Supervisor;
use crate::pins::canon;
use crate::pins::{Differ, Verdict};

/// How many reviews of a server an accept may name by their digest.
const REVIEWS_KEPT: usize = 8;

/// One definition as a review shows it.
fn shown(d: &Differ) -> Shown {
    (d.def.kind, d.def.name.clone(), d.def.sha256.clone())
}

/// The digest of a review that showed `items` (what `mcp/accept --digest` names).
fn review_digest(items: &BTreeSet<Shown>) -> String {
    let mut h = Sha256::new();
    for (kind, name, sha256) in items {
        h.update(format!("{}\t{name}\t{sha256}\n", kind.label()).as_bytes());
    }
    canon::hex(&h.finalize()[..16])
}

/// What differs, as the protocol says it.
pub(crate) fn summary(differs: &[Differ], held: bool) -> Vec<HeldDefinition> {
    differs
        .iter()
        .map(|d| HeldDefinition {
            kind: d.def.kind,
            name: d.def.name.clone(),
            change: d.change,
            held,
            rejected: d.rejected,
        })
        .collect()
}

/// Why a call to `d` is refused.
pub(crate) fn refusal(server: &str, d: &Differ) -> String {
    let (kind, name) = (d.def.kind.label(), &d.def.name);
    let what = match (d.rejected, d.change) {
        (true, _) => "was rejected after review".to_owned(),
        (false, Change::Changed) => "changed since it was pinned".to_owned(),
        (false, Change::New) => "is new since the server's definitions were pinned".to_owned(),
        (false, Change::Unverified) => {
            "cannot be checked: the server's pin record failed its check".to_owned()
        }
    };
    format!(
        "{kind} '{name}' of MCP server '{server}' {what}, so it is held: `gemctl mcp review \
         {server}` shows what differs, `gemctl mcp accept {server} {name}` offers it again"
    )
}

impl Server {
    fn pin_state(&self) -> parking_lot::MutexGuard<'_, PinState> {
        self.pins.lock()
    }

    /// Its last comparison with its pins (none before it listed, or with pinning `off`).
    pub(crate) fn pin_verdict(&self) -> Option<Arc<Verdict>> {
        self.pin_state().verdict.clone()
    }

    /// Everything it listed, held definitions included.
    pub(crate) fn catalog_listed(&self) -> Arc<Catalog> {
        self.pin_state().listed.clone().unwrap_or_else(|| self.catalog())
    }

    /// Its pins as `mcp/listServers` shows them.
    pub(crate) fn pin_status(&self) -> Option<PinStatus> {
        let state = self.pin_state();
        let v = state.verdict.as_ref()?;
        Some(PinStatus {
            mode: self.pinning,
            pinned: u32::try_from(v.pinned).unwrap_or(u32::MAX),
            since_ms: v.since_ms,
            first_use: state.first_use,
            differs: summary(&v.differs, self.pinning == PinMode::Enforce),
        })
    }

    /// Why its tool `tool` may not be called, when it is held.
    pub(crate) fn held_tool(&self, tool: &str) -> Option<String> {
        if self.pinning != PinMode::Enforce {
            return None;
        }
        let v = self.pin_verdict()?;
        let d =
            v.differs.iter().find(|d| d.def.kind == DefinitionKind::Tool && d.def.name == tool)?;
        Some(refusal(&self.name, d))
    }
}

/// What `listed` offers the sessions: compared with the server's pins (pinned on first use),
/// held definitions left out where its pinning is `enforce`. Says what changed in its log and
/// through `sup` (an event and the audit log).
pub(super) async fn offer(
    server: &Arc<Server>,
    sup: &dyn Observer,
    listed: Arc<Catalog>,
) -> Arc<Catalog> {
    if server.pinning == PinMode::Off {
        *server.pin_state() = PinState::default();
        return listed;
    }
    let pins = sup.pins();
    let (key, source) = server.pin_key.clone();
    let name = server.name.clone();
    let l = listed.clone();
    let verdict = tokio::task::spawn_blocking(move || {
        let tools: Vec<&serde_json::Value> = l.tools.iter().map(|t| &t.raw).collect();
        pins.check(&key, &name, &source, &canon::items(&tools, &l.prompts, &l.templates))
    })
    .await
    .unwrap_or_else(|e| Verdict {
        problem: Some(format!("its definitions could not be compared with its pins: {e}")),
        ..Verdict::default()
    });
    let enforce = server.pinning == PinMode::Enforce;
    let before = server.pin_verdict().map(|v| summary(&v.differs, enforce)).unwrap_or_default();
    let now = summary(&verdict.differs, enforce);
    if verdict.first_use {
        server.log.push(
            "geminid",
            &format!(
                "pinned {} definitions on first use (trust on first use): a later change to one \
                 is {}",
                verdict.pinned,
                if enforce { "held until accepted" } else { "said, not held" }
            ),
        );
    }
    for d in verdict.differs.iter().filter(|d| {
        !before.iter().any(|b| b.name == d.def.name && b.kind == d.def.kind && b.change == d.change)
    }) {
        server.log.push(
            "geminid",
            &if enforce {
                refusal(&server.name, d)
            } else {
                format!(
                    "{} '{}' {} its pin (offered: pinning is {})",
                    d.def.kind.label(),
                    d.def.name,
                    if d.change == Change::New { "is new since" } else { "differs from" },
                    server.pinning.label()
                )
            },
        );
    }
    let fresh: Vec<HeldDefinition> = now.iter().filter(|d| !before.contains(d)).cloned().collect();
    let changed = before != now;
    let held: HashSet<(DefinitionKind, String)> = if enforce {
        verdict.differs.iter().map(|d| (d.def.kind, d.def.name.clone())).collect()
    } else {
        HashSet::new()
    };
    let offered = if held.is_empty() && verdict.problem.is_none() {
        listed.clone()
    } else {
        let is_held = |kind, v: &serde_json::Value, key: &str| {
            held.contains(&(
                kind,
                v.get(key).and_then(|n| n.as_str()).unwrap_or_default().to_owned(),
            ))
        };
        let mut c = (*listed).clone();
        c.tools.retain(|t| !held.contains(&(DefinitionKind::Tool, t.name.clone())));
        c.prompts.retain(|p| !is_held(DefinitionKind::Prompt, p, "name"));
        c.templates.retain(|t| !is_held(DefinitionKind::ResourceTemplate, t, "uriTemplate"));
        c.problems.extend(verdict.problem.clone());
        Arc::new(c)
    };
    {
        let mut state = server.pin_state();
        state.first_use |= verdict.first_use;
        state.listed = (!held.is_empty()).then(|| listed.clone());
        state.verdict = Some(Arc::new(verdict));
    }
    if changed {
        sup.pins_changed(server, &fresh);
    }
    offered
}

/// Why `mcp/review`, `mcp/accept` or `mcp/reject` could not be done.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReviewError {
    /// The server has no comparison to review (not listed yet, or pinning is off).
    #[error("{0}")]
    NothingListed(String),
    /// A definition to accept is listed otherwise than the review read showed it.
    #[error("{0}")]
    Unreviewed(String),
    /// See [`crate::pins::PinError`].
    #[error(transparent)]
    Pins(#[from] crate::pins::PinError),
}

impl Supervisor {
    /// Its servers' tool-definition pins: `mcp/review`, `mcp/accept`, `mcp/reject`.
    pub(crate) fn pinning(&self) -> Pinning<'_> {
        Pinning { sup: self }
    }
}

/// Review and settle what differs from a server's pins (see the module).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pinning<'a> {
    sup: &'a Supervisor,
}

impl Pinning<'_> {
    /// Say that what differs of `server` changed: an `mcp/toolsChanged` event, a log line, and
    /// an audit record per definition that differs newly.
    pub(super) fn announce_pins(self, server: &Arc<Server>, fresh: &[HeldDefinition]) {
        let sessions = self.sup.registry.lock().users(&server.identity);
        let differs = server.pin_status().map(|p| p.differs).unwrap_or_default();
        for d in fresh {
            tracing::warn!(server = %server.name, kind = d.kind.label(), name = %d.name, change = d.change.label(), held = d.held, "a definition differs from its pin");
        }
        if let Some(audit) = &self.sup.pins.audit {
            let problem = server.pin_verdict().and_then(|v| v.problem.clone());
            for d in fresh {
                let why = match (&problem, d.change, d.held) {
                    (Some(p), Change::Unverified, _) => p.as_str(),
                    (_, _, true) => "`gemctl mcp review` shows it",
                    (_, _, false) => "pinning is warn",
                };
                let what = format!(
                    "{} {} ({}): {why}",
                    d.kind.label(),
                    d.change.label(),
                    if d.held { "held" } else { "offered" },
                );
                audit.note(&server.name, &audit_name(server, d), "pins", Some(what));
            }
        }
        self.sup.events.emit(geminid_protocol::event::EventBody::ToolsChanged(
            geminid_protocol::pins::ToolsChanged {
                server: server.name.clone(),
                identity: server.identity[..12].to_owned(),
                sessions,
                differs,
            },
        ));
    }

    /// `mcp/review`.
    pub(crate) fn review(
        &self,
        server: &Server,
    ) -> Result<geminid_protocol::pins::ReviewResult, ReviewError> {
        let artifact = server.artifact_status();
        let v = match (verdict_of(server), &artifact) {
            (Ok(v), _) => v,
            (Err(_), Some(_)) => Arc::new(Verdict::default()),
            (Err(e), None) => return Err(e),
        };
        let held = server.pinning == PinMode::Enforce;
        let seen: BTreeSet<Shown> = v.differs.iter().map(shown).collect();
        let digest = if seen.is_empty() { String::new() } else { review_digest(&seen) };
        if !seen.is_empty() {
            let reviews = &mut server.pin_state().reviews;
            reviews.retain(|(d, _)| *d != digest);
            reviews.push_back((digest.clone(), seen));
            while reviews.len() > REVIEWS_KEPT {
                reviews.pop_front();
            }
        }
        let items = v
            .differs
            .iter()
            .zip(summary(&v.differs, held))
            .map(|(d, definition)| geminid_protocol::pins::ReviewItem {
                definition,
                pinned: d.pinned.clone(),
                listed: d.def.canon.clone(),
                findings: canon::findings(&d.def.canon),
            })
            .collect();
        Ok(geminid_protocol::pins::ReviewResult {
            server: server.name.clone(),
            mode: server.pinning,
            items,
            digest,
            problem: v.problem.clone(),
            artifact,
        })
    }

    /// `mcp/accept` (`accept`) or `mcp/reject`: then the server's catalog is offered anew.
    pub(crate) async fn settle_pins(
        &self,
        server: &Arc<Server>,
        names: Vec<String>,
        digest: Option<String>,
        accept: bool,
    ) -> Result<geminid_protocol::pins::PinsResult, ReviewError> {
        if accept && let Some(taken) = super::artifact::accept(server, &self.sup.pins).await {
            let taken = taken.map_err(|e| {
                ReviewError::NothingListed(format!(
                    "MCP server '{}': its artifact could not be recorded: {e}",
                    server.name
                ))
            })?;
            let line = super::artifact::line(&taken);
            if let Some(audit) = &self.sup.pins.audit {
                audit.note(
                    &server.name,
                    &server.name,
                    "pins/accept",
                    Some(format!("artifact {line}")),
                );
            }
            return Ok(geminid_protocol::pins::PinsResult {
                server: server.name.clone(),
                done: vec![format!("artifact {line}")],
                differs: Vec::new(),
                unreviewed: false,
            });
        }
        let v = verdict_of(server)?;
        let unreviewed = accept && {
            let chosen: Vec<&Differ> = v
                .differs
                .iter()
                .filter(|d| names.is_empty() || names.contains(&d.def.name))
                .collect();
            reviewed(server, &v.differs, &chosen, digest.as_deref())?
        };
        let (pins, s) = (self.sup.pins.clone(), server.clone());
        let chosen = names.clone();
        let done = tokio::task::spawn_blocking(move || {
            let (key, source) = &s.pin_key;
            if accept {
                pins.accept(key, &s.name, source, &v.differs, &chosen)
            } else {
                pins.reject(key, &s.name, &v.differs, &chosen)
            }
        })
        .await
        .map_err(crate::pins::KeepError::from)
        .map_err(crate::pins::PinError::from)??;
        tracing::info!(server = %server.name, accepted = accept, names = ?done, "pins settled");
        if let Some(audit) = &self.sup.pins.audit {
            let origin = if accept { "pins/accept" } else { "pins/reject" };
            for name in &done {
                let tool = if server.catalog_listed().tool(name).is_some() {
                    crate::naming::fqn(&server.name, name)
                } else {
                    name.clone()
                };
                audit.note(&server.name, &tool, origin, None);
            }
        }
        server.log.push(
            "geminid",
            &format!(
                "{} by request: {}",
                if accept { "pinned anew" } else { "rejected" },
                done.join(", ")
            ),
        );
        let listed = server.catalog_listed();
        server.set_catalog(offer(server, self.sup, listed).await);
        self.sup.status().catalog_changed(server);
        let differs = server.pin_status().map(|p| p.differs).unwrap_or_default();
        Ok(geminid_protocol::pins::PinsResult {
            server: server.name.clone(),
            done,
            differs,
            unreviewed,
        })
    }
}

fn verdict_of(server: &Server) -> Result<Arc<Verdict>, ReviewError> {
    if server.pinning == PinMode::Off {
        return Err(ReviewError::NothingListed(format!(
            "MCP server '{}' is not pinned (its pinning is off)",
            server.name
        )));
    }
    server.pin_verdict().ok_or_else(|| {
        ReviewError::NothingListed(format!(
            "MCP server '{}' has not listed its definitions yet ({}); `gemctl mcp list` \
             shows when it is connected",
            server.name,
            server.snapshot().state.phrase()
        ))
    })
}

/// Whether `chosen` (of `differs`) may be pinned: each must be listed as the review named
/// by `digest` showed it (or, without one, as the server's last review did). `Ok(true)`:
/// no review was asked of the server, so what is pinned is what one would show now.
fn reviewed(
    server: &Server,
    differs: &[Differ],
    chosen: &[&Differ],
    digest: Option<&str>,
) -> Result<bool, ReviewError> {
    let s = &server.name;
    let now: BTreeSet<Shown> = differs.iter().map(shown).collect();
    let state = server.pin_state();
    let basis = match digest {
        Some(d) if d == review_digest(&now) => return Ok(false),
        Some(d) => match state.reviews.iter().find(|(r, _)| r == d) {
            Some((_, seen)) => seen,
            None => {
                return Err(ReviewError::Unreviewed(format!(
                    "MCP server '{s}' lists its definitions otherwise than the review of \
                     digest {d} showed them (or this geminid did not show that review): \
                     nothing was pinned; `gemctl mcp review {s}` shows them as listed now, \
                     then accept with the digest it prints"
                )));
            }
        },
        None => match state.reviews.back() {
            Some((_, seen)) => seen,
            None => return Ok(true),
        },
    };
    let unseen: Vec<String> = chosen
        .iter()
        .filter(|d| !basis.contains(&shown(d)))
        .map(|d| format!("{} {}", d.def.kind.label(), d.def.name))
        .collect();
    if unseen.is_empty() {
        return Ok(false);
    }
    Err(ReviewError::Unreviewed(format!(
        "MCP server '{s}' lists {} otherwise than `gemctl mcp review {s}` showed {}: \
         nothing was pinned; review again (`gemctl mcp review {s}`), then `gemctl mcp \
         accept {s} --digest D` with the digest that review prints",
        unseen.join(", "),
        if digest.is_some() { "under that digest" } else { "last" }
    )))
}

/// How the audit log names a definition: a tool by its fully qualified name.
fn audit_name(server: &Server, d: &HeldDefinition) -> String {
    match d.kind {
        DefinitionKind::Tool => crate::naming::fqn(&server.name, &d.name),
        _ => format!("{} {}", d.kind.label(), d.name),
    }
}
