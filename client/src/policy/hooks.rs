//! `gemctl hooks list|run|enable|disable|migrate`: the session's hooks, firing an event for
//! real, switching a hook off and on, and bringing Claude Code's hooks over.

use std::io::Read;

use clap::Subcommand;
use geminid_protocol::api::{HooksApiClient, ToolsApiClient};
use geminid_protocol::client::Client;
use geminid_protocol::config::WriteScope;
use geminid_protocol::hooks::{
    HooksEnableParams, HooksFireParams, HooksListParams, HooksMigrateParams,
};

use crate::error::call_error;
use crate::output;
use crate::output::shown;
use crate::output::{errln, outln};

#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Every hook of the session, in the order its event runs them, and the problems in their
    /// configuration
    List,
    /// Fire an event's hooks and print what each did (BeforeTool and AfterTool as a dry run of
    /// a call that is not made)
    Run {
        /// The event (SessionStart, BeforeAgent, Notification, ...; BeforeTool and AfterTool
        /// as a dry run: the hooks run, the tool is not called)
        event: String,
        /// The event's own fields as a JSON object (`{"source": "startup"}`), or `-` for stdin
        #[arg(long)]
        input: Option<String>,
        /// For BeforeTool and AfterTool: the tool, as the model calls it (`mcp_notes_delete`);
        /// AfterTool's `tool_response` goes in --input
        #[arg(long)]
        tool: Option<String>,
        /// For BeforeTool and AfterTool: the call's arguments as a JSON object
        #[arg(long, requires = "tool")]
        args: Option<String>,
    },
    /// Take a hook out of `hooksConfig.disabled` (by its name, or its command)
    Enable {
        /// The hook
        name: String,
        /// The settings file: user (default) or project
        #[arg(short, long, default_value = "user", value_parser = parse_scope)]
        scope: WriteScope,
    },
    /// Add a hook to `hooksConfig.disabled` (by its name, or its command)
    Disable {
        /// The hook
        name: String,
        /// The settings file: user (default) or project
        #[arg(short, long, default_value = "user", value_parser = parse_scope)]
        scope: WriteScope,
    },
    /// Add Claude Code's hooks of this workspace (.claude/settings.json and settings.local.json)
    /// to .gemini/settings.json: events, tool names and timeouts converted
    Migrate {
        /// Migrate from Claude Code (the one source there is)
        #[arg(long, required = true)]
        from_claude: bool,
        /// Print what would be written; change nothing
        #[arg(long)]
        dry_run: bool,
    },
}

fn parse_scope(s: &str) -> Result<WriteScope, String> {
    match s {
        "user" => Ok(WriteScope::User),
        "project" => Ok(WriteScope::Project),
        other => Err(format!("{other:?} is not a scope: user or project")),
    }
}

/// Run a hooks command for `session`: whether every hook ran.
pub async fn run(
    client: &Client,
    session: String,
    cmd: HooksCommand,
    json: bool,
) -> anyhow::Result<bool> {
    match cmd {
        HooksCommand::List => {
            let r = client
                .hooks_list(HooksListParams { session })
                .await
                .map_err(call_error("hooks/list"))?;
            if json {
                output::json(&r)?;
                return Ok(true);
            }
            if !r.enabled {
                outln!("Hooks are switched off (hooksConfig.enabled is false).");
            }
            let rows: Vec<Vec<String>> = r
                .hooks
                .iter()
                .map(|h| {
                    vec![
                        h.event.clone(),
                        h.name.clone().unwrap_or_else(|| h.command.clone()),
                        h.matcher.clone().unwrap_or_default(),
                        h.scope.clone(),
                        if h.enabled { "yes".into() } else { "disabled".into() },
                        format!("{} ms", h.timeout_ms),
                    ]
                })
                .collect();
            output::table_or(
                "No hooks.",
                &["EVENT", "HOOK", "MATCHER", "SCOPE", "ENABLED", "TIMEOUT"],
                &rows,
            );
            for w in r.warnings.iter().chain(&r.notice) {
                errln!("warning: {w}");
            }
            Ok(true)
        }
        HooksCommand::Run { event, input, tool, args } => {
            let text = match input.as_deref() {
                None => "{}".to_owned(),
                Some("-") => {
                    let mut s = String::new();
                    std::io::stdin().read_to_string(&mut s)?;
                    s
                }
                Some(t) => t.to_owned(),
            };
            let mut input = match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(serde_json::Value::Object(m)) => m,
                Ok(other) => {
                    anyhow::bail!("--input is a JSON object of the event's fields, not {other}")
                }
                Err(e) => anyhow::bail!(
                    "--input is not JSON ({e}); for example '{{\"source\": \"startup\"}}'"
                ),
            };
            let dry_run = ["BeforeTool", "AfterTool"].contains(&event.as_str());
            if tool.is_some() && !dry_run {
                anyhow::bail!("--tool and --args are for BeforeTool and AfterTool, not {event}");
            }
            if let Some(t) = &tool {
                if t.trim().is_empty() {
                    anyhow::bail!(
                        "--tool is the tool's name as the model calls it, e.g. mcp_notes_delete"
                    );
                }
                input.insert("tool_name".into(), t.clone().into());
            }
            if let Some(a) = args {
                match serde_json::from_str::<serde_json::Value>(&a) {
                    Ok(v @ serde_json::Value::Object(_)) => {
                        _ = input.insert("tool_input".into(), v)
                    }
                    _ => anyhow::bail!(
                        "--args is the call's arguments as a JSON object, e.g. '{{\"id\": 1}}'"
                    ),
                }
            }
            if let Some(t) = &tool {
                let p = geminid_protocol::tools::ToolsListParams {
                    session: session.clone(),
                    raw: false,
                    all: true,
                };
                let known =
                    client.tools_list(p).await.map(|r| r.tools.iter().any(|e| e.name == *t));
                if known.is_ok_and(|k| !k) {
                    errln!(
                        "note: this session has no tool named '{}': hooks matching the name ran all the same (`gemctl tools list` names the tools)",
                        shown::line(t)
                    );
                }
            }
            let r = client
                .hooks_fire(HooksFireParams { session, event, input })
                .await
                .map_err(call_error("hooks/fire"))?;
            if json {
                output::json(&r)?;
                return Ok(r.success);
            }
            if let Some(n) = &r.notice {
                errln!("warning: {n}");
            }
            if r.hooks.is_empty() {
                outln!("No hook matches.");
            }
            for h in &r.hooks {
                let who = h.name.clone().unwrap_or_else(|| h.command.clone());
                let how = match (&h.error, h.exit_code) {
                    (Some(e), _) => format!("failed: {e}"),
                    (None, Some(c)) => format!("exit {c}"),
                    (None, None) => "did not finish".to_owned(),
                };
                outln!("{who}: {how} in {} ms", h.duration_ms);
                if let Some(o) = &h.output {
                    outln!("  output: {}", serde_json::Value::Object(o.clone()));
                }
                if !h.stderr_tail.trim().is_empty() && h.output.is_none() {
                    outln!("  stderr: {}", h.stderr_tail.trim());
                }
            }
            if let Some(a) = &r.aggregated {
                outln!("aggregated: {}", serde_json::Value::Object(a.clone()));
            }
            if dry_run {
                outln!("(a dry run: the tool was not called)");
            }
            Ok(r.success)
        }
        HooksCommand::Migrate { from_claude: _, dry_run } => {
            let r = client
                .hooks_migrate(HooksMigrateParams { session, dry_run })
                .await
                .map_err(call_error("hooks/migrate"))?;
            if json {
                output::json(&r)?;
                return Ok(true);
            }
            for s in &r.sources {
                outln!("Read {s}.");
            }
            for n in &r.notes {
                errln!("note: {n}");
            }
            if r.hooks.is_empty() {
                outln!("No hooks to migrate.");
            } else if r.changed.is_empty() {
                outln!("Nothing to change: {} already has these hooks.", r.file);
            } else if dry_run {
                outln!("Would add to {} (events {}):", r.file, r.changed.join(", "));
                outln!("{}", serde_json::to_string_pretty(&serde_json::Value::Object(r.hooks))?);
            } else {
                outln!("Added to {}: {}. Review them there.", r.file, r.changed.join(", "));
            }
            Ok(true)
        }
        HooksCommand::Enable { name, scope } => set(client, session, name, scope, true, json).await,
        HooksCommand::Disable { name, scope } => {
            set(client, session, name, scope, false, json).await
        }
    }
}

async fn set(
    client: &Client,
    session: String,
    name: String,
    scope: WriteScope,
    enable: bool,
    json: bool,
) -> anyhow::Result<bool> {
    let p = HooksEnableParams { session, name: name.clone(), scope: Some(scope) };
    let r = if enable {
        client.hooks_enable(p).await.map_err(call_error("hooks/enable"))?
    } else {
        client.hooks_disable(p).await.map_err(call_error("hooks/disable"))?
    };
    if json {
        output::json(&r)?;
        return Ok(true);
    }
    outln!("Hook \"{name}\" {} in {}.", if enable { "enabled" } else { "disabled" }, r.file);
    for other in &r.still_disabled_in {
        errln!("warning: {other} still disables it (hooksConfig.disabled of every scope applies)");
    }
    Ok(true)
}
