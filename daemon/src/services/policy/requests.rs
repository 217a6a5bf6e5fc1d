//! The policy service: a session's policy asked without making a call (`policy/check`,
//! `policy/list`, a command's shell lines), confirmations answered, and the session settings
//! the policy reads (`session/update`). `session/derive`, which reads the agent definitions
//! and the parent's tools, is the core's (`core/sessions.rs`).

use geminid_protocol::policy::{
    PolicyCheckParams, PolicyCheckResult, PolicyListParams, PolicyListResult, PolicyReviewParams,
    PolicyReviewResult,
};

use geminid_protocol::policy::{ConfirmOutcome, ConfirmationRespondParams};
use geminid_protocol::session::SessionUpdateParams;

use std::sync::Arc;

use crate::asks::{AskKind, RespondError};
use crate::policy::session_rules::Policies;
use crate::policy::session_rules::{entry, reason, source};
use crate::policy::{ApprovalMode, ToolCall};
use crate::services::configs::Configs;
use crate::services::policy::tool_calls::ToolCallPolicy;
use crate::session::SessionError;

/// Each session's policy, asked and answered outside a call.
#[derive(Debug)]
pub(crate) struct PolicyRequests {
    config: Arc<Configs>,
    /// Sessions.
    sessions: Arc<crate::session::Sessions>,
    /// Questions to a person.
    asks: Arc<crate::asks::Asks>,
    /// Each session's tools.
    catalog: Arc<crate::catalog::Catalog>,
    /// Sessions' tool-call policies (their files' last good rules).
    policies: Arc<Policies>,
    /// The pipeline's policy seat, with each session's rules prepared.
    guard: Arc<ToolCallPolicy>,
}

impl PolicyRequests {
    pub(crate) fn new(
        config: Arc<Configs>,
        sessions: Arc<crate::session::Sessions>,
        asks: Arc<crate::asks::Asks>,
        catalog: Arc<crate::catalog::Catalog>,
        policies: Arc<Policies>,
        guard: Arc<ToolCallPolicy>,
    ) -> Self {
        Self { config, sessions, asks, catalog, policies, guard }
    }

    /// The session's approval mode (`session/create`, `session/update`) and whether it is
    /// interactive: as it was set, else whether a client attached to it (to its root, for a
    /// derived session) listens for confirmations. The same the session's calls are decided
    /// with ([`ToolCallPolicy::standing`]).
    pub(crate) fn standing(&self, session: &str) -> (ApprovalMode, bool) {
        self.guard.standing(session).unwrap_or_else(|_| {
            (ApprovalMode::default(), self.asks.answers_all(session, AskKind::Confirmation))
        })
    }

    /// `session/update`.
    pub(crate) async fn update_session(
        &self,
        p: SessionUpdateParams,
    ) -> Result<geminid_protocol::session::Session, SessionError> {
        let changed = self
            .sessions
            .update_state(&p.id, |s| {
                if let Some(mode) = p.approval_mode {
                    s.approval_mode = mode;
                }
                if p.interactive_auto {
                    s.interactive = None;
                }
                if let Some(i) = p.interactive {
                    s.interactive = Some(i);
                }
                Ok::<(), std::convert::Infallible>(())
            })
            .await?;
        self.guard.changed();
        let Ok(session) = changed;
        tracing::info!(session = %p.id, mode = ?session.state.approval_mode, interactive = ?session.state.interactive, "session updated");
        Ok(session)
    }

    /// `confirmation/respond`: the session it was answered for. An "always" is refused (the
    /// confirmation stays pending) while the file it would be saved in cannot take it.
    pub(crate) fn confirm(&self, p: ConfirmationRespondParams) -> Result<String, ConfirmError> {
        if p.outcome == ConfirmOutcome::Always {
            crate::policy::saved::check(&crate::policy::saved::path(self.config.paths()))
                .map_err(ConfirmError::CannotSave)?;
        }
        // The asks channel's confirmation answer: the outcome by its wire name.
        let mut answer = serde_json::json!({ "outcome": p.outcome });
        if let Some(reason) = p.reason {
            answer["reason"] = serde_json::Value::String(reason);
        }
        Ok(self.asks.respond_by_id(p.session.as_deref(), &p.id, answer)?)
    }

    /// `policy/check`.
    pub(crate) fn check(&self, p: PolicyCheckParams) -> Result<PolicyCheckResult, SessionError> {
        let effective = self.config.effective(&p.session)?;
        // The session's, unless the request says otherwise (`gemctl policy check --mode`).
        let (mode, interactive) = self.standing(&p.session);
        let (mode, interactive) = (p.mode.unwrap_or(mode), p.interactive.unwrap_or(interactive));
        let policy = self.policies.for_session(self.config.paths(), &effective, interactive);
        // Without `serverName`, the server (and annotations) the call would have: the one the
        // session's table lists the tool under, else the configured server whose `mcp_<name>_`
        // prefix it carries (the longest).
        let listed = p.server_name.is_none().then(|| self.catalog.tools_now(&p.session).ok());
        let listed = listed.flatten();
        let found = listed
            .as_ref()
            .and_then(|st| st.get(&p.tool).or_else(|| st.hidden.get(&p.tool).map(|(_, t)| t)));
        let annotations = found.and_then(|t| t.tool().raw.get("annotations")?.as_object());
        let configured = || {
            effective
                .servers
                .keys()
                .filter(|s| {
                    p.tool.strip_prefix("mcp_").is_some_and(|r| r.starts_with(&format!("{s}_")))
                })
                .max_by_key(|s| s.len())
                .cloned()
        };
        let server = match (&p.server_name, found) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(t)) => Some(t.server_name.clone()).filter(|s| !s.is_empty()),
            (None, None) => configured(),
        };
        let call = ToolCall {
            name: &p.tool,
            server: server.as_deref(),
            args: p.args.as_ref().and_then(serde_json::Value::as_object),
            annotations,
            subagent: p.subagent.as_deref(),
        };
        let v = policy.set.verdict(&call, mode, interactive);
        Ok(PolicyCheckResult {
            decision: v.decision,
            rule: v.rule.map(source),
            reason: reason(v.decision, v.rule, mode, interactive),
        })
    }

    /// `policy/review`: the session's workspace policy folder against what was accepted.
    pub(crate) fn review(&self, p: PolicyReviewParams) -> Result<PolicyReviewResult, SessionError> {
        let effective = self.config.effective(&p.session)?;
        let c = &effective.public;
        Ok(self.policies.review(&c.workspace, c.trust.trusted, self.is_home(&c.workspace)))
    }

    /// The workspace is the home: its `.gemini` is the user's, and there is no workspace tier.
    fn is_home(&self, workspace: &str) -> bool {
        self.config.paths().workspace_settings(std::path::Path::new(workspace)).is_none()
    }

    /// `policy/accept`: the session's workspace policy folder accepted as it is (as reviewed,
    /// when `digest` is given); every session's rules are prepared again.
    pub(crate) fn accept(
        &self,
        p: PolicyReviewParams,
    ) -> Result<Result<PolicyReviewResult, String>, SessionError> {
        let effective = self.config.effective(&p.session)?;
        let c = &effective.public;
        let home = self.is_home(&c.workspace);
        let accepted =
            self.policies.accept(&c.workspace, c.trust.trusted, home, p.digest.as_deref());
        if accepted.is_ok() {
            self.guard.changed();
            tracing::info!(workspace = %c.workspace, "workspace policy files accepted");
        }
        Ok(accepted)
    }

    /// `policy/list`.
    pub(crate) fn list(&self, p: PolicyListParams) -> Result<PolicyListResult, SessionError> {
        let effective = self.config.effective(&p.session)?;
        let (_, interactive) = self.standing(&p.session);
        let policy = self.policies.for_session(self.config.paths(), &effective, interactive);
        let rules = policy
            .set
            .rules()
            .iter()
            .filter(|r| p.tier.as_deref().is_none_or(|t| t == r.origin.tier.name()))
            .map(entry)
            .collect();
        let mut diagnostics = policy.problems;
        // A workspace's settings that name policy places: ignored, and said here too.
        let ignored = crate::config::merge::policy_places_ignored(&[]);
        let marker = ignored.split_once(": ").map_or("", |(_, why)| why);
        diagnostics.extend(
            effective.public.diagnostics.iter().filter(|d| d.message.contains(marker)).cloned(),
        );
        Ok(PolicyListResult { rules, diagnostics })
    }
}

/// Why `confirmation/respond` refused an answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfirmError {
    /// Not pending, another session's, or a bad answer.
    #[error(transparent)]
    Respond(#[from] RespondError),
    /// "Always" cannot be saved.
    #[error("{0}; answer once, session or deny instead")]
    CannotSave(crate::policy::saved::SaveError),
}

/// Policy files as an input: the user's and the system's policy folders, and each known
/// session's policy places (a `.toml` file by name, a folder by its entries). They are read
/// when a session's rules are prepared, so before a reload every prepared set is dropped.
#[derive(Debug)]
pub(crate) struct PolicyInput {
    pub(crate) config: std::sync::Arc<crate::services::configs::Configs>,
    pub(crate) guard: std::sync::Arc<crate::services::policy::tool_calls::ToolCallPolicy>,
}

impl crate::services::reload::Input for PolicyInput {
    fn name(&self) -> &'static str {
        "policy"
    }

    fn watch(
        &self,
        known: &[crate::config::Effective],
        into: &mut crate::services::reload::Watched,
    ) {
        let p = self.config.paths();
        into.dirs.insert(p.home.join(".gemini").join("policies"));
        into.dirs.insert(crate::policy::files::system_policies());
        for e in known {
            let c = &e.public;
            let workspace = std::path::Path::new(&c.workspace);
            let (places, _) =
                crate::policy::files::places(p, workspace, c.trust.trusted, &c.settings);
            for place in places {
                if place.path.extension().is_some_and(|x| x == "toml") {
                    into.files.insert(place.path);
                } else {
                    into.dirs.insert(place.path);
                }
            }
        }
    }

    fn before(&self) -> futures::future::BoxFuture<'_, ()> {
        self.guard.changed();
        Box::pin(std::future::ready(()))
    }
}
