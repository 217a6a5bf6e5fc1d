//! The commands service: a session's slash commands (skills, MCP prompts, file commands) in
//! Gemini CLI's order, named after its conflict rules (`commands/list`), what one sends to the
//! model (`commands/expand`, its shell lines asked of the session's policy first), and
//! `commands/changed` after a reload (its [`Input`](crate::services::reload::Input)).

use std::path::{Path, PathBuf};

use geminid_protocol::commands::{
    CommandInfo, CommandKind, CommandsListParams, CommandsListResult,
};
use geminid_protocol::common::Diagnostic;
use geminid_protocol::skills::SkillScope;

use std::sync::Arc;

use crate::commands::load;
use crate::commands::resolve::{Candidate, resolve};
use crate::services::configs::Configs;
use crate::services::policy::requests::PolicyRequests;
use crate::services::skills::Skills;
use crate::services::skills::SkillsError;

mod expansion;

/// Slash commands: each session's list, and what each session was last told of it.
#[derive(Debug)]
pub(crate) struct Commands {
    config: Arc<Configs>,
    /// Sessions.
    sessions: Arc<crate::session::Sessions>,
    /// The MCP servers.
    mcp: Arc<crate::mcp::Supervisor>,
    /// The event bus.
    events: Arc<crate::events::EventBus>,
    /// Each session's tools and prompts.
    catalog: Arc<crate::catalog::Catalog>,
    /// A session's skills are commands too.
    skills: Arc<Skills>,
    /// Asked about a command's shell lines before they run.
    policy: Arc<PolicyRequests>,
    /// Every command file read.
    files: load::Cache,
    /// What each session was last told (for `commands/changed`).
    views: CommandViews,
}

impl Commands {
    pub(crate) fn new(
        config: Arc<Configs>,
        sessions: Arc<crate::session::Sessions>,
        mcp: Arc<crate::mcp::Supervisor>,
        events: Arc<crate::events::EventBus>,
        catalog: Arc<crate::catalog::Catalog>,
        skills: Arc<Skills>,
        policy: Arc<PolicyRequests>,
    ) -> Self {
        Self {
            config,
            sessions,
            mcp,
            events,
            catalog,
            skills,
            policy,
            files: load::Cache::default(),
            views: CommandViews::default(),
        }
    }

    /// `commands/list`.
    pub(crate) fn list(&self, p: &CommandsListParams) -> Result<CommandsListResult, SkillsError> {
        let (reg, e) = self.skills.registry(&p.session)?;
        let mut found = Found::default();
        for name in &p.built_ins {
            found.push(name.clone(), CommandKind::BuiltIn, String::new(), None, None, None);
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
            let file = Some(s.location.display().to_string());
            let server = entry.place.owner.clone().filter(|_| entry.place.scope == SkillScope::Mcp);
            found.push(name, CommandKind::Skill, description, file, extension, None);
            // The server that serves a skill is told, but it is no part of how names resolve.
            if let Some(info) = found.infos.last_mut() {
                info.server = server;
            }
        }
        self.prompts(&p.session, &mut found);
        self.files(&e, &mut found);
        let Found { candidates, infos, diagnostics } = found;
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

    /// MCP prompts of the session's connected servers (none are started for this).
    fn prompts(&self, session: &str, found: &mut Found) {
        let Ok((servers, _)) = self.mcp.session_servers(session) else { return };
        for (server, s) in servers {
            for prompt in &s.catalog().prompts {
                let Some(raw) = prompt["name"].as_str() else { continue };
                let name = raw.split_whitespace().collect::<Vec<_>>().join("-");
                let description = prompt["description"]
                    .as_str()
                    .filter(|d| !d.is_empty())
                    .map_or_else(|| format!("Invoke prompt {raw}"), str::to_owned);
                let server = Some(server.clone());
                found.push(name, CommandKind::McpPrompt, description, None, None, server);
            }
        }
    }

    /// Command files: the user's, the trusted workspace's (not the home's), the enabled
    /// extensions' in name order. Gemini CLI loads none of them in an untrusted folder.
    fn files(&self, e: &crate::config::Effective, found: &mut Found) {
        let c = &e.public;
        let ws = Path::new(&c.workspace);
        let home = self.config.paths().home.clone();
        if !c.trust.trusted {
            if (ws != home && ws.join(".gemini").join("commands").is_dir())
                || home.join(".gemini").join("commands").is_dir()
            {
                found.diagnostics.push(untrusted(c));
            }
            return;
        }
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
            found.diagnostics.extend(folder.diagnostics);
            for f in folder.commands {
                let description = match &ext {
                    Some(x) => format!("[{x}] {}", f.description),
                    None => f.description.clone(),
                };
                let file = Some(f.file.display().to_string());
                found.push(f.name.clone(), kind, description, file, ext.clone(), None);
            }
        }
    }
}

/// The commands found for a list, each as a candidate for Gemini CLI's resolver and as told.
#[derive(Default)]
struct Found {
    candidates: Vec<Candidate>,
    infos: Vec<CommandInfo>,
    diagnostics: Vec<Diagnostic>,
}

impl Found {
    fn push(
        &mut self,
        name: String,
        kind: CommandKind,
        description: String,
        file: Option<String>,
        extension: Option<String>,
        server: Option<String>,
    ) {
        self.candidates.push(Candidate {
            name: name.clone(),
            kind,
            extension: extension.clone(),
            server: server.clone(),
        });
        let renamed_from = None;
        self.infos.push(CommandInfo {
            name,
            renamed_from,
            description,
            kind,
            file,
            extension,
            server,
        });
    }
}

/// Why an untrusted folder's command files are not listed.
fn untrusted(c: &geminid_protocol::config::EffectiveConfig) -> Diagnostic {
    Diagnostic {
        severity: geminid_protocol::common::Severity::Warning,
        file: c.workspace.clone(),
        line: None,
        column: None,
        message: format!(
            "custom commands are not loaded: the folder is not trusted ({}){}",
            c.trust.reason,
            if c.trust.reason.contains("gemctl trust") { "" } else { "; `gemctl trust` trusts it" }
        ),
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
                self.events.emit(geminid_protocol::event::EventBody::CommandsChanged(
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
pub(crate) struct CommandsInput(pub(crate) Arc<Commands>);

impl crate::services::reload::Input for CommandsInput {
    fn name(&self) -> &'static str {
        "commands"
    }

    fn watch(&self, _: &[crate::config::Effective], into: &mut crate::services::reload::Watched) {
        into.dirs.extend(self.0.dirs());
    }

    fn after(&self, known: &[String]) {
        self.0.check(known);
    }
}

impl crate::services::forget::Forget for Commands {
    fn forget(&self, session: &str) {
        Commands::forget(self, session);
    }
}
