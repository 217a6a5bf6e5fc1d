//! The commands service: a session's slash commands (skills, MCP prompts, file commands) in
//! Gemini CLI's order, named after its conflict rules (`commands/list`), what one sends to the
//! model (`commands/expand`, its shell lines asked of the session's policy first), and
//! `commands/changed` after a reload (its [`Input`](super::reload::Input)).

use std::path::{Path, PathBuf};

use geminid_protocol::commands::{
    CommandInfo, CommandKind, CommandsExpandParams, CommandsExpandResult, CommandsListParams,
    CommandsListResult, ToolRequest,
};
use geminid_protocol::common::Diagnostic;
use geminid_protocol::policy::{
    ApprovalMode, PolicyCheckParams, PolicyCheckResult, PolicyDecision,
};
use geminid_protocol::skills::SkillScope;

use std::sync::Arc;

use super::configs::Configs;
use super::policy::SessionPolicy;
use super::services::Services;
use super::skills::Skills;
use super::skills::SkillsError;
use crate::commands::ExpandError;
use crate::commands::expand::{Part, ShellCommand};
use crate::commands::resolve::{Candidate, resolve};
use crate::commands::{expand, load, plain};
use crate::skills::SkillError;

/// Slash commands: each session's list, and what each session was last told of it.
#[derive(Debug)]
pub(crate) struct Commands {
    config: Arc<Configs>,
    services: Arc<Services>,
    /// A session's skills are commands too.
    skills: Arc<Skills>,
    /// Asked about a command's shell lines before they run.
    policy: Arc<SessionPolicy>,
    /// Every command file read.
    files: load::Cache,
    /// What each session was last told (for `commands/changed`).
    views: CommandViews,
}

impl Commands {
    pub(super) fn new(
        config: Arc<Configs>,
        services: Arc<Services>,
        skills: Arc<Skills>,
        policy: Arc<SessionPolicy>,
    ) -> Self {
        Self {
            config,
            services,
            skills,
            policy,
            files: load::Cache::default(),
            views: CommandViews::default(),
        }
    }

    /// `commands/list`.
    pub(crate) fn list(&self, p: &CommandsListParams) -> Result<CommandsListResult, SkillsError> {
        let (reg, e) = self.skills.registry(&p.session)?;
        let c = &e.public;
        let ws = Path::new(&c.workspace);
        let home = self.config.paths().home.clone();
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut infos: Vec<CommandInfo> = Vec::new();
        let mut diagnostics: Vec<Diagnostic> = Vec::new();
        let mut push = |cand: Candidate, info: CommandInfo| {
            candidates.push(cand);
            infos.push(info);
        };
        for name in &p.built_ins {
            let cand = Candidate {
                name: name.clone(),
                kind: CommandKind::BuiltIn,
                extension: None,
                server: None,
            };
            let info = CommandInfo {
                name: name.clone(),
                renamed_from: None,
                description: String::new(),
                kind: CommandKind::BuiltIn,
                file: None,
                extension: None,
                server: None,
            };
            push(cand, info);
        }
        // Skills a person may run as `/name`: the enabled ones that are not built in.
        for entry in reg.enabled().filter(|x| x.place.scope != SkillScope::BuiltIn) {
            let s = &entry.skill;
            let name = s.name.split_whitespace().collect::<Vec<_>>().join("-");
            let extension =
                entry.place.owner.clone().filter(|_| entry.place.scope == SkillScope::Extension);
            let description = if s.description.is_empty() {
                format!("Activate the {} skill", s.name)
            } else {
                s.description.clone()
            };
            let cand = Candidate {
                name: name.clone(),
                kind: CommandKind::Skill,
                extension: extension.clone(),
                server: None,
            };
            let info = CommandInfo {
                name,
                renamed_from: None,
                description,
                kind: CommandKind::Skill,
                file: Some(s.location.display().to_string()),
                extension,
                server: entry.place.owner.clone().filter(|_| entry.place.scope == SkillScope::Mcp),
            };
            push(cand, info);
        }
        // MCP prompts of the session's connected servers (none are started for this).
        if let Ok((servers, _)) = self.services.mcp.session_servers(&p.session) {
            for (server, s) in servers {
                for prompt in &s.catalog().prompts {
                    let Some(raw) = prompt["name"].as_str() else { continue };
                    let name = raw.split_whitespace().collect::<Vec<_>>().join("-");
                    let description = prompt["description"]
                        .as_str()
                        .filter(|d| !d.is_empty())
                        .map_or_else(|| format!("Invoke prompt {raw}"), str::to_owned);
                    let cand = Candidate {
                        name: name.clone(),
                        kind: CommandKind::McpPrompt,
                        extension: None,
                        server: Some(server.clone()),
                    };
                    let info = CommandInfo {
                        name,
                        renamed_from: None,
                        description,
                        kind: CommandKind::McpPrompt,
                        file: None,
                        extension: None,
                        server: Some(server.clone()),
                    };
                    push(cand, info);
                }
            }
        }
        // Command files: the user's, the trusted workspace's (not the home's), the enabled
        // extensions' in name order. Gemini CLI loads none of them in an untrusted folder.
        if c.trust.trusted {
            let mut dirs: Vec<(PathBuf, CommandKind, Option<String>)> =
                vec![(home.join(".gemini").join("commands"), CommandKind::UserFile, None)];
            if ws != home {
                dirs.push((ws.join(".gemini").join("commands"), CommandKind::WorkspaceFile, None));
            }
            let mut exts: Vec<(String, PathBuf)> = e
                .extensions
                .iter()
                .filter_map(|x| Some((x.name.clone(), x.commands.clone()?)))
                .collect();
            exts.sort();
            dirs.extend(exts.into_iter().map(|(n, d)| (d, CommandKind::ExtensionFile, Some(n))));
            for (dir, kind, ext) in dirs {
                let folder = crate::config::files::off_loop(|| self.files.folder(&dir));
                diagnostics.extend(folder.diagnostics);
                for f in folder.commands {
                    let description = match &ext {
                        Some(x) => format!("[{x}] {}", f.description),
                        None => f.description.clone(),
                    };
                    let cand = Candidate {
                        name: f.name.clone(),
                        kind,
                        extension: ext.clone(),
                        server: None,
                    };
                    let info = CommandInfo {
                        name: f.name.clone(),
                        renamed_from: None,
                        description,
                        kind,
                        file: Some(f.file.display().to_string()),
                        extension: ext.clone(),
                        server: None,
                    };
                    push(cand, info);
                }
            }
        } else if (ws != home && ws.join(".gemini").join("commands").is_dir())
            || home.join(".gemini").join("commands").is_dir()
        {
            diagnostics.push(Diagnostic {
                severity: geminid_protocol::common::Severity::Warning,
                file: c.workspace.clone(),
                line: None,
                column: None,
                message: format!(
                    "custom commands are not loaded: the folder is not trusted ({}){}",
                    c.trust.reason,
                    if c.trust.reason.contains("gemctl trust") {
                        ""
                    } else {
                        "; `gemctl trust` trusts it"
                    }
                ),
            });
        }
        let (names, conflicts) = resolve(&candidates);
        let mut commands: Vec<CommandInfo> = Vec::new();
        for (name, i) in names {
            let mut info = infos[i].clone();
            if info.kind == CommandKind::BuiltIn {
                continue;
            }
            if info.name != name {
                info.renamed_from = Some(std::mem::replace(&mut info.name, name));
            }
            commands.push(info);
        }
        let result = CommandsListResult { commands, conflicts, diagnostics };
        // What a client was told: changes from here on are announced.
        self.views.lock().entry(p.session.clone()).or_insert_with(|| listed_of(&result));
        Ok(result)
    }
}

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
                let tool = Some(ToolRequest { name: super::skills::ACTIVATE_SKILL.into(), args });
                Ok(CommandsExpandResult { text, tool, ..Default::default() })
            }
            CommandKind::McpPrompt => {
                let server = info.server.clone().unwrap_or_default();
                let (entries, _) = self
                    .services
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
                    .services
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
        let workspace = PathBuf::from(self.services.sessions.record(&p.session)?.workspace);
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
        for c in &commands {
            let cmd = &c.shown;
            let v = self.shell_decision(p, c, &args)?;
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
        let mut text = String::new();
        let mut outputs = outputs.as_slice();
        for (part, n) in parts.iter().zip(counts) {
            match part {
                Part::Prompt(t) if processed => {
                    let (mine, rest) = outputs.split_at(n.min(outputs.len()));
                    text.push_str(&expand::assemble(t, &args, mine).map_err(refused)?);
                    outputs = rest;
                }
                Part::Prompt(t) | Part::Included(t) => text.push_str(t),
            }
        }
        out.text = expand::default_args(text, uses_args, name, &p.args);
        Ok(out)
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

/// A session's commands as announced: name to (kind, description, file).
type Listed = std::collections::BTreeMap<String, (CommandKind, String, Option<String>)>;

fn listed_of(list: &CommandsListResult) -> Listed {
    list.commands
        .iter()
        .map(|c| (c.name.clone(), (c.kind, c.description.clone(), c.file.clone())))
        .collect()
}

/// Each session's [`Listed`].
#[derive(Debug, Default)]
pub(crate) struct CommandViews(parking_lot::Mutex<std::collections::HashMap<String, Listed>>);

impl CommandViews {
    fn lock(&self) -> parking_lot::MutexGuard<'_, std::collections::HashMap<String, Listed>> {
        self.0.lock()
    }
}

impl Commands {
    /// Announce `commands/changed` for each of `ids` whose commands differ from what was last
    /// seen (the first look only records).
    pub(crate) fn check(&self, ids: &[String]) {
        for id in ids {
            let p = CommandsListParams { session: id.clone(), built_ins: Vec::new() };
            let Ok(list) = self.list(&p) else {
                self.views.lock().remove(id);
                continue;
            };
            let now = listed_of(&list);
            let Some(old) = self.views.lock().insert(id.clone(), now.clone()) else {
                continue;
            };
            let names: std::collections::BTreeSet<&String> = old.keys().chain(now.keys()).collect();
            let changed: Vec<String> =
                names.into_iter().filter(|n| old.get(*n) != now.get(*n)).cloned().collect();
            if !changed.is_empty() {
                tracing::info!(session = %id, ?changed, "commands changed");
                self.services.events.emit(geminid_protocol::event::EventBody::CommandsChanged(
                    geminid_protocol::commands::CommandsChanged { session: id.clone(), changed },
                ));
            }
        }
    }

    /// Forget a closed session's announced commands.
    pub(crate) fn forget(&self, session: &str) {
        self.views.lock().remove(session);
    }

    /// Every commands folder of the known sessions, and every folder in them.
    pub(crate) fn dirs(&self) -> Vec<PathBuf> {
        let home = self.config.paths().home.clone();
        let mut roots = vec![home.join(".gemini").join("commands")];
        for e in self.config.baselines().values() {
            let ws = PathBuf::from(&e.public.workspace);
            if e.public.trust.trusted && ws != home {
                roots.push(ws.join(".gemini").join("commands"));
            }
            roots.extend(e.extensions.iter().filter_map(|x| x.commands.clone()));
        }
        let mut out = Vec::new();
        for root in roots {
            let mut pending = vec![root];
            while let Some(d) = pending.pop() {
                if out.len() > load::MAX_FILES {
                    break;
                }
                for entry in std::fs::read_dir(&d).into_iter().flatten().filter_map(Result::ok) {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        pending.push(entry.path());
                    }
                }
                out.push(d);
            }
        }
        out
    }
}

/// Custom commands as an input: their folders (and each folder in them); after a reload,
/// `commands/changed` for each session whose commands differ.
#[derive(Debug)]
pub(super) struct CommandsInput(pub(super) Arc<Commands>);

impl super::reload::Input for CommandsInput {
    fn name(&self) -> &'static str {
        "commands"
    }

    fn watch(&self, _: &[crate::config::Effective], into: &mut super::reload::Watched) {
        into.dirs.extend(self.0.dirs());
    }

    fn after(&self, known: &[String]) {
        self.0.check(known);
    }
}
