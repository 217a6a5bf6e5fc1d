//! `policy/check` and `policy/list`: the session's policy, asked without making a call.

use geminid_protocol::policy::{
    PolicyCheckParams, PolicyCheckResult, PolicyListParams, PolicyListResult,
};

use super::Core;
use crate::asks::AskKind;
use crate::policy::ToolCall;
use crate::policy::service::{entry, reason, source};
use crate::session::SessionError;

impl Core {
    /// Whether the session is interactive: a client attached to it listens for
    /// confirmations.
    pub fn interactive(&self, session: &str) -> bool {
        self.asks.answers(session, AskKind::Confirmation)
    }

    /// `policy/check`.
    pub fn policy_check(&self, p: PolicyCheckParams) -> Result<PolicyCheckResult, SessionError> {
        let effective = self.effective(&p.session)?;
        let interactive = p.interactive.unwrap_or_else(|| self.interactive(&p.session));
        let mode = p.mode.unwrap_or_default();
        let policy = self.policies.for_session(self.config.paths(), &effective, interactive);
        let call = ToolCall {
            name: &p.tool,
            server: p.server_name.as_deref(),
            args: p.args.as_ref(),
            annotations: None,
            subagent: p.subagent.as_deref(),
        };
        let v = policy.set.decide(&call, mode, interactive);
        Ok(PolicyCheckResult {
            decision: v.decision,
            rule: v.rule.map(source),
            reason: reason(v.decision, v.rule, mode, interactive),
        })
    }

    /// `policy/list`.
    pub fn policy_list(&self, p: PolicyListParams) -> Result<PolicyListResult, SessionError> {
        let effective = self.effective(&p.session)?;
        let interactive = self.interactive(&p.session);
        let policy = self.policies.for_session(self.config.paths(), &effective, interactive);
        let rules = policy
            .set
            .rules()
            .iter()
            .filter(|r| p.tier.as_deref().is_none_or(|t| t == r.origin.tier.name()))
            .map(entry)
            .collect();
        Ok(PolicyListResult { rules, diagnostics: policy.problems })
    }
}
