//! `gemctl policy check|list|review|accept`: what the session's tool-call policy decides, and
//! the workspace's policy files accepted.

use clap::Subcommand;
use geminid_protocol::api::PolicyApiClient;
use geminid_protocol::client::Client;
use geminid_protocol::policy::{
    ApprovalMode, PolicyCheckParams, PolicyDecision, PolicyListParams, PolicyReviewParams,
    PolicyReviewResult,
};
use std::path::PathBuf;

use crate::error::call_error;
use crate::output;
use crate::output::outln;
use crate::output::shown;
use geminid_protocol::policy::WorkspacePolicyState as State;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// What the session's rules decide for a call (without making it)
    Check {
        /// The tool's name as the model calls it (`mcp_server_tool`, `run_shell_command`, ...)
        tool: String,
        /// Its arguments, as a JSON object
        args: Option<String>,
        /// The MCP server the tool belongs to (default: the one the session lists it under,
        /// as the call would have it)
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
        /// Decide in this approval mode instead of the session's (default, autoEdit, yolo, plan)
        #[arg(long, value_parser = parse_mode)]
        mode: Option<ApprovalMode>,
        /// Decide as for an interactive session (someone can confirm)
        #[arg(long, conflicts_with = "headless")]
        interactive: bool,
        /// Decide as for a headless session (nobody can confirm)
        #[arg(long)]
        headless: bool,
    },
    /// Every rule that applies to the session, in the order they are tried
    List {
        /// Only this tier's (default, extension, workspace, user, admin)
        #[arg(long)]
        tier: Option<String>,
    },
    /// The workspace's policy files (`.gemini/policies/*.toml`) against what you accepted,
    /// and the rules accepting them would add (they are not loaded until you accept them)
    Review {
        /// The workspace (default: the session's, or the current folder's)
        workspace: Option<PathBuf>,
    },
    /// Accept the workspace's policy files: they are loaded until they change. With
    /// --digest (which `policy review` prints), only the files as reviewed; without it, the
    /// files as they are now, which it shows
    Accept {
        /// The workspace (default: the session's, or the current folder's)
        workspace: Option<PathBuf>,
        /// The digest `gemctl policy review` printed: files that changed since are refused
        #[arg(long, value_name = "DIGEST")]
        digest: Option<String>,
    },
}

impl PolicyCommand {
    /// The workspace the command names, if it names one.
    pub fn workspace(&self) -> Option<&PathBuf> {
        match self {
            Self::Review { workspace } | Self::Accept { workspace, .. } => workspace.as_ref(),
            _ => None,
        }
    }
}

pub fn parse_mode(s: &str) -> Result<ApprovalMode, String> {
    serde_json::from_value(serde_json::Value::String(s.to_owned()))
        .map_err(|_| format!("{s:?} is not a mode: default, autoEdit, yolo or plan"))
}

pub fn decision(d: PolicyDecision) -> &'static str {
    match d {
        PolicyDecision::Allow => "allow",
        PolicyDecision::Deny => "deny",
        PolicyDecision::AskUser => "ask_user",
    }
}

/// Run a policy command for `session`.
pub async fn run(
    client: &Client,
    session: String,
    cmd: PolicyCommand,
    json: bool,
) -> anyhow::Result<()> {
    match cmd {
        PolicyCommand::Check { tool, args, server, mode, interactive, headless } => {
            let args = match args {
                Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                    anyhow::anyhow!(
                        "the arguments must be a JSON object ({e}), as in '{{\"command\": \"ls\"}}'"
                    )
                })?),
                None => None,
            };
            let interactive = match (interactive, headless) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            };
            let params = PolicyCheckParams {
                session,
                tool,
                args,
                server_name: server,
                mode,
                interactive,
                subagent: None,
            };
            let r = client.policy_check(params).await.map_err(call_error("policy/check"))?;
            if json {
                return output::json(&r);
            }
            outln!("{}", decision(r.decision));
            outln!("  {}", r.reason);
            Ok(())
        }
        PolicyCommand::Review { workspace } => {
            let params = PolicyReviewParams { session, digest: None };
            let r = client.policy_review(params).await.map_err(call_error("policy/review"))?;
            if json {
                return output::json(&r);
            }
            review(&r);
            if !matches!(r.state, State::None | State::Accepted) {
                let named = workspace
                    .map(|w| format!(" {}", shown::line(&w.display().to_string())))
                    .unwrap_or_default();
                outln!(
                    "\n`gemctl policy accept{named} --digest {}` accepts them as shown here \
                     (refused if they change first).",
                    r.digest
                );
            }
            Ok(())
        }
        PolicyCommand::Accept { digest, .. } => {
            let unreviewed = digest.is_none();
            let params = PolicyReviewParams { session, digest };
            let r = client.policy_accept(params).await.map_err(call_error("policy/accept"))?;
            if json {
                return output::json(&r);
            }
            if unreviewed {
                outln!(
                    "Accepted as they are now (no --digest was given; `gemctl policy review` \
                     prints the command that accepts only what it shows):"
                );
            }
            review(&r);
            Ok(())
        }
        PolicyCommand::List { tier } => {
            let r = client
                .policy_list(PolicyListParams { session, tier })
                .await
                .map_err(call_error("policy/list"))?;
            if json {
                return output::json(&r);
            }
            let rows: Vec<Vec<String>> = r
                .rules
                .iter()
                .map(|rule| {
                    let at = match rule.source.line {
                        Some(l) => format!("{}:{l}", rule.source.file),
                        None => rule.source.file.clone(),
                    };
                    let mut when = Vec::new();
                    if !rule.modes.is_empty() {
                        let modes: Vec<String> = rule
                            .modes
                            .iter()
                            .filter_map(|m| serde_json::to_value(m).ok())
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect();
                        when.push(format!("modes {}", modes.join(",")));
                    }
                    if let Some(i) = rule.interactive {
                        when.push(if i { "interactive".to_owned() } else { "headless".to_owned() });
                    }
                    if rule.matches_args {
                        when.push("arguments".to_owned());
                    }
                    vec![
                        format!("{:.3}", rule.source.effective_priority),
                        decision(rule.decision).to_owned(),
                        rule.tool_name.clone(),
                        when.join(" "),
                        at,
                    ]
                })
                .collect();
            output::table_or(
                "No rules.",
                &["PRIORITY", "DECISION", "TOOL", "WHEN", "WHERE"],
                &rows,
            );
            for d in &r.diagnostics {
                outln!("{}", output::diagnostic(d));
            }
            Ok(())
        }
    }
}

/// A review (or an acceptance) in words: where the folder stands, its files, its rules.
fn review(r: &PolicyReviewResult) {
    outln!("{}: {}", r.folder, r.reason);
    for f in &r.files {
        outln!("  {:<8} {}", f.change, f.name);
    }
    if !r.rules.is_empty() {
        outln!("The rules they give (workspace tier, under your own and the admin's):");
        for rule in &r.rules {
            let at = match rule.source.line {
                Some(l) => format!("{}:{l}", rule.source.file),
                None => rule.source.file.clone(),
            };
            let server = rule
                .mcp_name
                .as_deref()
                .map(|s| format!(" (server {})", shown::line(s)))
                .unwrap_or_default();
            outln!(
                "  {} {}{server}  {}",
                decision(rule.decision),
                shown::line(&rule.tool_name),
                shown::line(&at)
            );
            outln!("      {}", conditions(rule));
        }
    }
    for d in &r.diagnostics {
        outln!("{}", output::diagnostic(d));
    }
}

/// One line under `mcp list` when the session's workspace has policy files that are not
/// loaded (never accepted, changed since, or their record damaged); nothing otherwise.
pub async fn unaccepted_note(client: &Client, session: String) {
    let params = PolicyReviewParams { session, digest: None };
    let Ok(r) = client.policy_review(params).await else { return };
    if matches!(r.state, State::New | State::Changed | State::Unverified) {
        outln!(
            "\nThis workspace's policy files ({}) are not loaded until you accept them: \
             `gemctl policy review`.",
            shown::line(&r.folder)
        );
    }
}

/// Everything a rule is decided by, in words: priority, modes, interactivity, subagent,
/// the pattern its arguments must match.
fn conditions(rule: &geminid_protocol::policy::PolicyRuleEntry) -> String {
    let mut out = vec![format!(
        "priority {} (effective {:.3})",
        rule.source.priority, rule.source.effective_priority
    )];
    let modes: Vec<String> = rule
        .modes
        .iter()
        .filter_map(|m| serde_json::to_value(m).ok()?.as_str().map(str::to_owned))
        .collect();
    out.push(if modes.is_empty() {
        "every mode".to_owned()
    } else {
        format!("modes {}", modes.join(","))
    });
    out.push(match rule.interactive {
        Some(true) => "interactive only".to_owned(),
        Some(false) => "headless only".to_owned(),
        None => "interactive and headless".to_owned(),
    });
    if let Some(a) = &rule.subagent {
        out.push(format!("subagent {}", shown::line(a)));
    }
    out.push(match &rule.args_pattern {
        Some(p) => format!("arguments matching /{}/", shown::line(p)),
        None => "any arguments".to_owned(),
    });
    out.join("; ")
}
