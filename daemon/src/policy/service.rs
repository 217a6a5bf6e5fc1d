//! A session's policy: its places' rules and the rules its settings imply, as one set.

use std::path::Path;

use geminid_protocol::common::Diagnostic;
use geminid_protocol::policy as wire;

use super::engine::PolicySet;
use super::files::{Reader, places};
use super::rule::Rule;
use super::settings::settings_rules;
use super::{ApprovalMode, Decision};
use crate::config::{ConfigPaths, Effective};

/// Reads sessions' policies, keeping each file's last good rules.
#[derive(Debug, Default)]
pub struct Policies {
    reader: Reader,
}

/// A session's rules and the problems in its files.
#[derive(Debug)]
pub struct SessionPolicy {
    /// The rules.
    pub set: PolicySet,
    /// Problems in the policy files.
    pub problems: Vec<Diagnostic>,
}

impl Policies {
    /// The policy of a session whose configuration is `effective`, for an interactive
    /// session or not (headless sessions may auto-allow their servers).
    pub fn for_session(
        &self,
        paths: &ConfigPaths,
        effective: &Effective,
        interactive: bool,
    ) -> SessionPolicy {
        let public = &effective.public;
        let at =
            places(paths, Path::new(&public.workspace), public.trust.trusted, &public.settings);
        let (mut rules, problems) = self.reader.read(&at);
        // The servers as the session resolved them (every scope's, merged), for `trust`.
        let mut settings = public.settings.clone();
        if let Some(map) = settings.as_object_mut() {
            let servers: serde_json::Map<String, serde_json::Value> = effective
                .servers
                .iter()
                .map(|(name, spec)| {
                    (name.clone(), serde_json::json!({ "trust": spec.config.trust }))
                })
                .collect();
            map.insert("mcpServers".to_owned(), serde_json::Value::Object(servers));
        }
        rules.extend(settings_rules(&settings, interactive));
        SessionPolicy { set: PolicySet::new(rules), problems }
    }
}

/// Where a rule is written, on the wire.
pub fn source(r: &Rule) -> wire::PolicyRuleSource {
    wire::PolicyRuleSource {
        file: r.origin.file.clone(),
        line: r.origin.line,
        tier: r.origin.tier.name().to_owned(),
        priority: r.origin.priority,
        effective_priority: r.effective_priority(),
    }
}

/// A rule as `policy/list` shows it.
pub fn entry(r: &Rule) -> wire::PolicyRuleEntry {
    wire::PolicyRuleEntry {
        tool_name: r.tool_name.clone(),
        mcp_name: r.mcp_name.clone(),
        decision: r.decision,
        modes: r.modes.clone(),
        interactive: r.interactive,
        matches_args: r.args.is_some(),
        subagent: r.subagent.clone(),
        deny_message: r.deny_message.clone(),
        source: source(r),
    }
}

/// Why a verdict is what it is, in words.
pub fn reason(
    decision: Decision,
    rule: Option<&Rule>,
    mode: ApprovalMode,
    interactive: bool,
) -> String {
    match rule {
        Some(r) => {
            let at = match r.origin.line {
                Some(line) => format!("{}:{line}", r.origin.file),
                None => r.origin.file.clone(),
            };
            let base = format!(
                "{} by the rule in {at} ({} tier, priority {}, effective {})",
                match decision {
                    Decision::Allow => "allowed",
                    Decision::Deny => "denied",
                    Decision::AskUser => "to be confirmed",
                },
                r.origin.tier.name(),
                r.origin.priority,
                r.effective_priority()
            );
            match &r.deny_message {
                Some(m) if decision == Decision::Deny => format!("{base}: {m}"),
                _ => base,
            }
        }
        None if mode == ApprovalMode::Yolo => "no rule matches; YOLO mode allows it".to_owned(),
        None if interactive => {
            "no rule matches; the person is asked (the session is interactive)".to_owned()
        }
        None => "no rule matches, and the session is not interactive: denied".to_owned(),
    }
}
