//! `commands/expand`: what one command sends to the model, its shell lines (`!{...}`) asked of
//! the session's policy first, the whole line and then each command of it on its own, and run
//! with the hook runner's shell through `proc.rs`.

use std::path::PathBuf;

use geminid_protocol::commands::{
    CommandKind, CommandsExpandParams, CommandsExpandResult, CommandsListParams, ToolRequest,
};
use geminid_protocol::policy::{
    ApprovalMode, PolicyCheckParams, PolicyCheckResult, PolicyDecision,
};

use crate::commands::ExpandError;
use crate::commands::expand::{Part, ShellCommand};
use crate::commands::{expand, load, plain};
use crate::services::skills::SkillsError;
use crate::skills::SkillError;

use super::Commands;

impl Commands {
    /// `commands/expand`.
    pub(crate) async fn expand(
        &self,
        p: CommandsExpandParams,
    ) -> Result<CommandsExpandResult, SkillsError> {
        let listed =
            self.list(&CommandsListParams { session: p.session.clone(), built_ins: Vec::new() })?;
        let name = p.name.strip_prefix('/').unwrap_or(&p.name);
        let Some(info) = listed.commands.iter().find(|c| c.name == name).cloned() else {
            let near = geminid_protocol::suggest::closest(
                name,
                listed.commands.iter().map(|c| c.name.as_str()),
            );
            let hint = match near {
                Some(n) => format!("did you mean /{n}?"),
                None => "`gemctl commands list` shows them".to_owned(),
            };
            return Err(SkillError::NotFound(format!(
                "no command named /{name} in this session ({hint})"
            ))
            .into());
        };
        let own = info.renamed_from.clone().unwrap_or_else(|| info.name.clone());
        match info.kind {
            CommandKind::Skill => {
                let mut args = serde_json::Map::new();
                args.insert("name".into(), own.clone().into());
                let typed = p.args.trim();
                let text = if typed.is_empty() {
                    format!("Use the skill {own}")
                } else {
                    typed.to_owned()
                };
                let tool = Some(ToolRequest {
                    name: crate::services::skills::ACTIVATE_SKILL.into(),
                    args,
                });
                Ok(CommandsExpandResult { text, tool, ..Default::default() })
            }
            CommandKind::McpPrompt => {
                let server = info.server.clone().unwrap_or_default();
                let (entries, _) = self
                    .catalog
                    .prompts(&p.session)
                    .await
                    .map_err(|e| SkillError::Io(e.to_string()))?;
                let entry = entries
                    .into_iter()
                    .map(|(e, _)| e)
                    .find(|e| {
                        e.server == server
                            && e.prompt.split_whitespace().collect::<Vec<_>>().join("-") == own
                    })
                    .ok_or_else(|| {
                        SkillError::NotFound(format!(
                            "the prompt of /{name} is gone from '{server}'"
                        ))
                    })?;
                let got = self
                    .catalog
                    .get_prompt(&p.session, &entry.name, Some(p.args.clone()), None)
                    .await
                    .map_err(|e| SkillError::Refused(e.to_string()))?;
                Ok(CommandsExpandResult { text: got.submit, ..Default::default() })
            }
            CommandKind::BuiltIn => {
                Err(SkillError::NotFound(format!("/{name} is the front-end's own")).into())
            }
            CommandKind::UserFile | CommandKind::WorkspaceFile | CommandKind::ExtensionFile => {
                let file = PathBuf::from(info.file.clone().unwrap_or_default());
                let prompt = crate::config::files::off_loop(|| load::prompt_of(&file))
                    .map_err(|d| SkillError::Refused(format!("{}: {}", d.file, d.message)))?;
                self.expand_file_command(&p, name, &prompt).await
            }
        }
    }

    async fn expand_file_command(
        &self,
        p: &CommandsExpandParams,
        name: &str,
        prompt: &str,
    ) -> Result<CommandsExpandResult, SkillsError> {
        let refused =
            |why: ExpandError| SkillsError::from(SkillError::Refused(format!("/{name}: {why}")));
        let workspace = PathBuf::from(self.sessions.record(&p.session)?.workspace);
        let mut out = CommandsExpandResult::default();
        let args = expand::normalized_args(&p.args);
        // Gemini CLI's processors: shell injections and arguments are looked for only when the
        // prompt itself has them, and only in its own text (never in an included file).
        let uses_args = prompt.contains(expand::ARGS);
        let processed = uses_args || prompt.contains("!{");
        crate::commands::check_nesting(prompt).map_err(refused)?;
        // 1. `@{path}`.
        let parts = if prompt.contains("@{") {
            crate::config::files::off_loop(|| expand::at_files(prompt, &workspace, &mut out.notes))
                .map_err(refused)?
        } else {
            vec![Part::Prompt(prompt.to_owned())]
        };
        // 2. `!{cmd}`: each checked as `run_shell_command` first; none runs while one is
        // denied or waits for a person.
        let mut commands = Vec::new();
        let mut counts = Vec::new();
        for part in &parts {
            let found = match part {
                Part::Prompt(t) if processed => {
                    expand::shell_commands(t, &args).map_err(refused)?
                }
                _ => Vec::new(),
            };
            counts.push(found.len());
            commands.extend(found.into_iter().map(|(_, c)| c));
        }
        self.check_shell(p, name, &commands, &args, &mut out)?;
        if !out.needs_confirmation.is_empty() {
            return Ok(out);
        }
        let mut env = (*self.config.session_env(&p.session)).clone();
        env.insert(expand::ARGS_VAR.to_owned(), args.clone());
        let mut outputs = Vec::new();
        for ShellCommand { shown: cmd, run } in &commands {
            let (run, text) = expand::run_shell(cmd, run, &workspace, &env).await;
            tracing::info!(session = %p.session, command = %name, shell = %cmd, exit = ?run.exit_code, "a command's shell injection ran");
            out.ran.push(run);
            outputs.push(text);
        }
        let text = assemble(&parts, &counts, &outputs, processed, &args).map_err(refused)?;
        out.text = expand::default_args(text, uses_args, name, &p.args);
        Ok(out)
    }

    /// Step 2 of a file command: each `!{cmd}` checked as `run_shell_command`; a deny refuses
    /// the whole command, an ask is added to `out` (none runs while one waits for a person).
    fn check_shell(
        &self,
        p: &CommandsExpandParams,
        name: &str,
        commands: &[ShellCommand],
        args: &str,
        out: &mut CommandsExpandResult,
    ) -> Result<(), SkillsError> {
        for c in commands {
            let cmd = &c.shown;
            let v = self.shell_decision(p, c, args)?;
            match v.decision {
                PolicyDecision::Allow => {}
                PolicyDecision::Deny => {
                    return Err(SkillsError::Call(crate::calls::CallError::PolicyDenied(format!(
                        "/{name}: the shell command \"{cmd}\" is blocked by policy ({}); nothing \
                         ran. To run it, a person confirms it (`gemctl commands expand` from a \
                         terminal, or with --yes) where a rule asks rather than denies, or a rule \
                         of your own allows it (`gemctl policy`), or the command is rewritten",
                        v.reason
                    ))));
                }
                PolicyDecision::AskUser if p.confirmed => {}
                PolicyDecision::AskUser => {
                    if !out.needs_confirmation.contains(cmd) {
                        out.needs_confirmation.push(cmd.clone());
                        let reason = v.reason.clone();
                        out.asks.push(geminid_protocol::commands::ShellAsk {
                            command: cmd.clone(),
                            reason,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// What policy decides for a command's `!{cmd}`, as Gemini CLI decides a shell command,
    /// and never looser: the whole line, both as bash runs it (`{{args}}` a reference to
    /// `GEMINID_ARGS`) and with the arguments pasted in (the stricter answer); then, unless it
    /// is denied, a line that is not plain ([`crate::commands::plain`]) is asked about outside
    /// `yolo` whatever allowed it (its commands that Gemini CLI's splitter finds are still
    /// looked at for a deny); a plain line's commands are each checked on their own, in both
    /// forms and with the first word unquoted (a prefix matches the name bash runs), so an
    /// allowed prefix does not let a chain through; a redirection asks outside `autoEdit` and
    /// `yolo`. Every check goes through the session's policy service (its approval mode).
    fn shell_decision(
        &self,
        p: &CommandsExpandParams,
        c: &ShellCommand,
        args: &str,
    ) -> Result<PolicyCheckResult, SkillsError> {
        let check = |command: &str| {
            self.policy.check(PolicyCheckParams {
                session: p.session.clone(),
                tool: "run_shell_command".into(),
                args: Some(serde_json::json!({ "command": command })),
                // A person is there to confirm: decided as for an interactive session.
                interactive: (p.confirmed || p.interactive).then_some(true),
                ..Default::default()
            })
        };
        let strictest = |first: &str, more: &[&str]| -> Result<PolicyCheckResult, SkillsError> {
            let mut best = check(first)?;
            for (k, t) in more.iter().enumerate() {
                if *t == first || more[..k].contains(t) {
                    continue;
                }
                let v = check(t)?;
                if plain::strictness(v.decision) > plain::strictness(best.decision) {
                    best = v;
                }
            }
            Ok(best)
        };
        let cmd = c.shown.as_str();
        let whole = strictest(cmd, &[&c.run])?;
        if whole.decision == PolicyDecision::Deny {
            return Ok(whole);
        }
        let (mode, _) = self.policy.standing(&p.session);
        let lenient = matches!(mode, ApprovalMode::AutoEdit | ApprovalMode::Yolo);
        let ask = |reason: String| PolicyCheckResult {
            decision: PolicyDecision::AskUser,
            rule: None,
            reason,
        };
        let in_it = |sub: &str, v: PolicyCheckResult| PolicyCheckResult {
            reason: format!("\"{sub}\" in it: {}", v.reason),
            ..v
        };
        let lexed = match plain::lex(&c.run, &expand::args_reference()) {
            Ok(plain) => plain,
            Err(why) => {
                for sub in crate::shell::parse(cmd).map(|p| p.commands).unwrap_or_default() {
                    let v = check(&sub)?;
                    if v.decision == PolicyDecision::Deny {
                        return Ok(in_it(&sub, v));
                    }
                }
                if mode == ApprovalMode::Yolo || whole.decision != PolicyDecision::Allow {
                    return Ok(whole);
                }
                return Ok(ask(why.reason(cmd)));
            }
        };
        let mut verdict = whole;
        // Each command Gemini CLI's splitter finds with the arguments pasted in, on its own.
        for sub in crate::shell::parse(cmd).map(|p| p.commands).unwrap_or_default() {
            let v = check(&sub)?;
            match v.decision {
                PolicyDecision::Deny => return Ok(in_it(&sub, v)),
                PolicyDecision::AskUser if verdict.decision == PolicyDecision::Allow => {
                    verdict = in_it(&sub, v);
                }
                _ => {}
            }
        }
        if lexed.redirection && !lenient && verdict.decision == PolicyDecision::Allow {
            verdict = ask(format!(
                "\"{cmd}\" redirects input or output (allowed in autoEdit and yolo, or when a \
                 person confirms it)"
            ));
        }
        for sub in &lexed.commands {
            let shown = expand::pasted(&sub.text, args);
            let v = strictest(&sub.text, &[&shown, &expand::pasted(&sub.named, args)])?;
            match v.decision {
                PolicyDecision::Deny => return Ok(in_it(&shown, v)),
                PolicyDecision::AskUser if verdict.decision == PolicyDecision::Allow => {
                    verdict = in_it(&shown, v);
                }
                _ => {}
            }
        }
        Ok(verdict)
    }
}

/// The prompt's parts joined, each processed part with its shell commands' outputs in place.
fn assemble(
    parts: &[Part],
    counts: &[usize],
    outputs: &[String],
    processed: bool,
    args: &str,
) -> Result<String, ExpandError> {
    let mut text = String::new();
    let mut outputs = outputs;
    for (part, n) in parts.iter().zip(counts) {
        match part {
            Part::Prompt(t) if processed => {
                let (mine, rest) = outputs.split_at((*n).min(outputs.len()));
                text.push_str(&expand::assemble(t, args, mine)?);
                outputs = rest;
            }
            Part::Prompt(t) | Part::Included(t) => text.push_str(t),
        }
    }
    Ok(text)
}
