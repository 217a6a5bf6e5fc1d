//! `commands/list` for the core: a session's slash commands (skills, MCP prompts, file
//! commands) in Gemini CLI's order, named after its conflict rules.

use std::path::{Path, PathBuf};

use geminid_protocol::commands::{
    CommandInfo, CommandKind, CommandsListParams, CommandsListResult,
};
use geminid_protocol::common::Diagnostic;
use geminid_protocol::skills::SkillScope;

use super::Core;
use super::skills::SkillsError;
use crate::commands::resolve::{Candidate, resolve};

impl Core {
    /// `commands/list`.
    pub(crate) fn commands_list(
        &self,
        p: &CommandsListParams,
    ) -> Result<CommandsListResult, SkillsError> {
        let (reg, e) = self.skill_registry(&p.session)?;
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
        if let Ok((servers, _)) = self.mcp.session_servers(&p.session) {
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
                let folder = crate::config::files::off_loop(|| self.command_cache.folder(&dir));
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
                    "custom commands are not loaded: the folder is not trusted ({}); `gemctl trust` trusts it",
                    c.trust.reason
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
        Ok(CommandsListResult { commands, conflicts, diagnostics })
    }
}
