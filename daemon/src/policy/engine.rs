//! A set of rules and the decision for a call: the first matching rule by effective priority
//! (highest first; equal priorities in the order they were read), else the default — allow in
//! YOLO mode, ask the person when the session is interactive, deny when it is not.

use std::collections::HashMap;

use super::rule::{Rule, mcp_name};
use super::stringify::stable_stringify_map;
use super::{ApprovalMode, Decision, ToolCall};

/// Below this many rules a call tries them all: the index costs more than it saves.
const INDEX_FROM: usize = 32;

/// Rules, highest effective priority first, indexed by the names they match.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    rules: Vec<Rule>,
    /// Positions in `rules` by the tool name a rule is written for, when it has no `*`.
    by_name: HashMap<String, Vec<usize>>,
    /// Positions of the rules for every tool of one server (`mcp_{server}_*`), by server.
    by_server: HashMap<String, Vec<usize>>,
    /// Positions of the other rules whose name has a `*` (`*`, `mcp_*`): tried for every
    /// call.
    wild: Vec<usize>,
}

/// A decision and the rule that made it (`None`: the default).
#[derive(Debug, Clone, Copy)]
pub struct Verdict<'a> {
    /// What was decided.
    pub decision: Decision,
    /// The rule, if one matched.
    pub rule: Option<&'a Rule>,
}

impl PolicySet {
    /// A set of these rules.
    pub fn new(mut rules: Vec<Rule>) -> Self {
        // A stable sort: equal priorities keep the order they were read in, as in Gemini CLI.
        rules.sort_by(|a, b| b.effective_priority().total_cmp(&a.effective_priority()));
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_server: HashMap<String, Vec<usize>> = HashMap::new();
        let mut wild = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let server = r.tool_name.strip_prefix("mcp_").and_then(|t| t.strip_suffix("_*"));
            match server {
                Some(s) if !s.contains('*') => {
                    by_server.entry(s.to_owned()).or_default().push(i);
                    continue;
                }
                _ if r.tool_name.contains('*') => {
                    wild.push(i);
                    continue;
                }
                _ => {}
            }
            by_name.entry(r.tool_name.clone()).or_default().push(i);
            // A short name with `mcpName` also matches the call by its qualified name.
            if let Some(server) = &r.mcp_name
                && !r.tool_name.starts_with("mcp_")
            {
                by_name.entry(mcp_name(server, &r.tool_name)).or_default().push(i);
            }
        }
        Self { rules, by_name, by_server, wild }
    }

    /// The rules that may match a call's name, in the order they are tried: every rule of a
    /// small set; else the wildcards, the rules for every tool of the call's server, and the
    /// rules indexed under the call's name or, for a short call with its server, its
    /// qualified name (a short rule with `mcpName` is indexed under its qualified name too). Whether each matches is still decided by
    /// [`Rule::matches`].
    fn candidates<'a>(&'a self, call: &ToolCall<'_>) -> Box<dyn Iterator<Item = &'a Rule> + 'a> {
        if self.rules.len() < INDEX_FROM {
            return Box::new(self.rules.iter());
        }
        let mut at: Vec<usize> = self.wild.clone();
        let mut add = |name: &str| {
            if let Some(found) = self.by_name.get(name) {
                at.extend_from_slice(found);
            }
        };
        add(call.name);
        if let Some(server) = call.server {
            add(&mcp_name(server, call.name));
            if let Some(found) = self.by_server.get(server) {
                at.extend_from_slice(found);
            }
        }
        at.sort_unstable();
        at.dedup();
        Box::new(at.into_iter().map(|i| &self.rules[i]))
    }

    /// Every rule, in the order they are tried.
    pub(crate) fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The verdict for a call: the first rule that matches it (by priority), else the mode's
    /// default, with the build-file protection over an allow. The policy seat
    /// (`services/policy/tool_calls.rs`) maps it to the call's decision.
    pub fn verdict(
        &self,
        call: &ToolCall<'_>,
        mode: ApprovalMode,
        interactive: bool,
    ) -> Verdict<'_> {
        // The arguments' stable form, made once the first rule that looks at arguments is
        // reached.
        let mut stable: Option<String> = None;
        for rule in self.candidates(call) {
            let text = match (&rule.args, call.args) {
                (Some(_), Some(args)) => {
                    Some(stable.get_or_insert_with(|| stable_stringify_map(args)).as_str())
                }
                _ => None,
            };
            if rule.matches(call, text, mode, interactive) {
                return protected(
                    Verdict { decision: rule.decision, rule: Some(rule) },
                    call,
                    interactive,
                );
            }
        }
        let decision = match (mode, interactive) {
            (ApprovalMode::Yolo, _) => Decision::Allow,
            (_, true) => Decision::AskUser,
            (_, false) => Decision::Deny,
        };
        protected(Verdict { decision, rule: None }, call, interactive)
    }
}

/// An allowed call that edits a build file is asked about (denied, headless), as Gemini CLI's
/// build file protection does (`build_files.rs`).
fn protected<'a>(v: Verdict<'a>, call: &ToolCall<'_>, interactive: bool) -> Verdict<'a> {
    if v.decision != Decision::Allow || !super::build_files::protects(call) {
        return v;
    }
    let rule = super::build_files::rule(interactive);
    Verdict { decision: rule.decision, rule: Some(rule) }
}

impl PolicySet {
    /// Whether a tool is denied whatever its arguments (Gemini CLI's `getExcludedTools`): the
    /// first rule that applies to it without looking at arguments decides, skipping deny
    /// rules that look at arguments (they deny only some calls) and stopping at any other
    /// that does (it allows or asks about some); with none, the default does. `Some` holds
    /// the deciding rule (`None` inside: the default denied it).
    pub(crate) fn excludes(
        &self,
        call: &ToolCall<'_>,
        mode: ApprovalMode,
        interactive: bool,
    ) -> Option<Option<&Rule>> {
        let bare = ToolCall { args: None, ..*call };
        for rule in self.candidates(&bare) {
            if !rule.matches_ignoring_args(&bare, mode, interactive) {
                continue;
            }
            return match (rule.args.is_some(), rule.decision) {
                (true, Decision::Deny) => continue,
                (true, _) => None,
                (false, Decision::Deny) => Some(Some(rule)),
                (false, _) => None,
            };
        }
        match (mode, interactive) {
            (ApprovalMode::Yolo, _) | (_, true) => None,
            (_, false) => Some(None),
        }
    }
}

#[cfg(test)]
mod tests;
