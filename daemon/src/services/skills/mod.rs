//! The skills service (`skills/*` and `agents/*`): each session's registries, read through its
//! skill cache (a `SKILL.md` is parsed again only when it changed), activation through the call
//! pipeline's policy step as Gemini CLI's `activate_skill` tool, installs, and `skills/changed`
//! after a reload (its [`Input`](crate::services::reload::Input)).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use geminid_protocol::common::{Diagnostic, Severity};
use geminid_protocol::skills::{
    AgentsListResult, SkillActivateParams, SkillActivateResult, SkillScope, SkillsListResult,
    SkillsPromptResult,
};
use serde_json::Value;

mod install;

use crate::calls::{Call, CallError, Origin};
use crate::config::Effective;
use crate::services::configs::Configs;
use crate::session::SessionError;
use crate::skills::load::Skill;
use crate::skills::registry::{self, Place, Registry};
use crate::skills::{SkillError, agents, tree};

/// The tool name skills are activated as (policy rules name it).
pub(crate) const ACTIVATE_SKILL: &str = "activate_skill";

/// Why a `skills/*` or `agents/*` request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SkillsError {
    /// The session is unknown.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The skills refused or failed.
    #[error(transparent)]
    Skill(#[from] SkillError),
    /// Policy or the person did not allow the activation.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// Whether skills are on: `skills.enabled` and `admin.skills.enabled` not false.
fn skills_on(settings: &Value) -> bool {
    ["/skills/enabled", "/admin/skills/enabled"]
        .iter()
        .all(|p| settings.pointer(p).and_then(Value::as_bool) != Some(false))
}

fn disabled_names(settings: &Value) -> Vec<String> {
    settings
        .pointer("/skills/disabled")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// Skills and agent definitions: what a session has, its activations and installs, and what
/// each session was last told of them.
#[derive(Debug)]
pub(crate) struct Skills {
    config: Arc<Configs>,
    /// Sessions.
    sessions: Arc<crate::session::Sessions>,
    /// The MCP servers.
    mcp: Arc<crate::mcp::Supervisor>,
    /// The call pipeline.
    calls: Arc<crate::calls::Pipeline>,
    /// The event bus.
    events: Arc<crate::events::EventBus>,
    /// Every `SKILL.md` read.
    files: crate::skills::load::Cache,
    /// What each session was last told (for `skills/changed`).
    views: Views,
}

impl Skills {
    pub(crate) fn new(
        config: Arc<Configs>,
        sessions: Arc<crate::session::Sessions>,
        mcp: Arc<crate::mcp::Supervisor>,
        calls: Arc<crate::calls::Pipeline>,
        events: Arc<crate::events::EventBus>,
    ) -> Self {
        Self {
            config,
            sessions,
            mcp,
            calls,
            events,
            files: Default::default(),
            views: Views::default(),
        }
    }

    fn home(&self) -> PathBuf {
        self.config.paths().home.clone()
    }

    /// A note when an untrusted workspace has folders of `kind` that are skipped.
    fn untrusted_note(e: &Effective, dirs: &[PathBuf], kind: &str) -> Option<Diagnostic> {
        let c = &e.public;
        let present: Vec<&PathBuf> = dirs.iter().filter(|d| d.is_dir()).collect();
        if c.trust.trusted || present.is_empty() {
            return None;
        }
        Some(Diagnostic {
            severity: Severity::Warning,
            file: present[0].display().to_string(),
            line: None,
            column: None,
            message: format!(
                "the workspace's {kind} are skipped: the folder is not trusted ({}); `gemctl trust` \
                 trusts it",
                c.trust.reason
            ),
        })
    }

    /// A session's skills, and notes about what was skipped.
    pub(crate) fn registry(&self, session: &str) -> Result<(Registry, Effective), SessionError> {
        let e = self.config.effective(session)?;
        let c = &e.public;
        let ws = Path::new(&c.workspace);
        let exts: Vec<(String, PathBuf)> =
            e.extensions.iter().filter_map(|x| Some((x.name.clone(), x.skills.clone()?))).collect();
        let places = registry::places(&self.home(), ws, c.trust.trusted, &exts);
        let (served, notes) = self.served(session);
        let disabled = disabled_names(&c.settings);
        let mut reg = crate::config::files::off_loop(|| {
            Registry::resolve_with(&self.files, &places, served, &disabled)
        });
        reg.diagnostics.extend(notes);
        let ws_dirs = [ws.join(".gemini").join("skills"), ws.join(".agents").join("skills")];
        if ws != self.home() {
            reg.diagnostics.extend(Self::untrusted_note(&e, &ws_dirs, "skills"));
        }
        if !skills_on(&c.settings) {
            for entry in reg.skills.values_mut() {
                entry.enabled = false;
            }
        }
        Ok((reg, e))
    }

    /// The skills the session's connected MCP servers serve (MCP Skills extension), and their
    /// servers' failures to list them. Servers are not started for this: a session whose
    /// servers are not running has none.
    fn served(&self, session: &str) -> (Vec<(Arc<Skill>, Place)>, Vec<Diagnostic>) {
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        let Ok((servers, _)) = self.mcp.session_servers(session) else {
            return (out, notes);
        };
        for (name, server) in servers {
            let catalog = server.catalog();
            for problem in catalog.problems.iter().filter(|p| p.contains("its skills")) {
                notes.push(Diagnostic {
                    severity: Severity::Warning,
                    file: format!("MCP server '{name}'"),
                    line: None,
                    column: None,
                    message: problem.clone(),
                });
            }
            for v in &catalog.skills {
                let (Some(uri), Some(n), Some(d)) = (
                    v["uri"].as_str(),
                    v["frontmatter"]["name"].as_str(),
                    v["frontmatter"]["description"].as_str(),
                ) else {
                    continue;
                };
                let dir = uri.rsplit_once('/').map_or(uri, |(d, _)| d);
                let skill = Skill {
                    name: crate::skills::frontmatter::sanitize_name(n),
                    description: d.to_owned(),
                    location: PathBuf::from(uri),
                    body: String::new(),
                };
                let place = Place {
                    scope: SkillScope::Mcp,
                    owner: Some(name.clone()),
                    dir: PathBuf::from(dir),
                };
                out.push((Arc::new(skill), place));
            }
        }
        (out, notes)
    }

    /// An MCP server's skill: its `SKILL.md` read over `resources/read` (checked against the
    /// digest the server listed), its body, and its files as the tree.
    async fn read_served(
        &self,
        session: &str,
        server_name: &str,
        uri: &str,
    ) -> Result<(String, String), SkillsError> {
        let (servers, _) =
            self.mcp.session_servers(session).map_err(|e| SkillError::Io(e.to_string()))?;
        let Some((_, server)) = servers.into_iter().find(|(n, _)| n == server_name) else {
            return Err(
                SkillError::Io(format!("MCP server '{server_name}' is not connected")).into()
            );
        };
        let listed = server.catalog().skills.iter().find(|v| v["uri"] == uri).cloned();
        let files: Vec<Value> =
            listed.as_ref().and_then(|v| v["resources"].as_array().cloned()).unwrap_or_default();
        let params = rmcp::model::ReadResourceRequestParams::new(uri.to_owned());
        let timeout = self.mcp.timeout_for(session, &server);
        let read = self
            .mcp
            .requests()
            .request(&server, timeout, |peer| async move { peer.read_resource(params).await })
            .await
            .map_err(|e| {
                SkillError::Io(format!("reading {uri} from '{server_name}' failed: {e}"))
            })?;
        let read = serde_json::to_value(read).unwrap_or_default();
        let text = read["contents"]
            .as_array()
            .and_then(|c| c.iter().find_map(|x| x["text"].as_str()))
            .ok_or_else(|| SkillError::Io(format!("'{server_name}' sent no text for {uri}")))?
            .to_owned();
        if let Some(entry) = files.iter().find(|f| f["uri"] == uri) {
            let digest = rmcp::model::sha256_digest(text.as_bytes());
            if entry["digest"].as_str() != Some(digest.as_str()) {
                return Err(SkillError::Refused(format!(
                    "{uri} from '{server_name}' does not match the digest it listed; not activated"
                ))
                .into());
            }
        }
        let body = crate::skills::frontmatter::split(&text)
            .and_then(|s| s.body)
            .unwrap_or(&text)
            .trim()
            .to_owned();
        let mut tree = format!(
            "Files of the skill, served by MCP server '{server_name}' (read them with resources/read):\n"
        );
        if files.is_empty() {
            tree.push_str("(the server lists them as they change)");
        }
        for f in &files {
            tree.push_str(&format!("- {}\n", f["uri"].as_str().unwrap_or_default()));
        }
        Ok((body, tree.trim_end().to_owned()))
    }

    /// What a client was told: changes from here on are announced.
    fn seen(&self, session: &str, reg: &Registry) {
        self.views.lock().entry(session.to_owned()).or_insert_with(|| view_of(reg));
    }

    /// `skills/list`.
    /// With `instructions`, each skill's body too.
    pub(crate) fn list(
        &self,
        session: &str,
        instructions: bool,
    ) -> Result<SkillsListResult, SkillsError> {
        let (reg, e) = self.registry(session)?;
        self.seen(session, &reg);
        let activated = self.sessions.record(session)?.state.activated_skills;
        let info = |entry: &registry::Entry| {
            let mut i = entry.info();
            if instructions && !entry.skill.body.is_empty() {
                i.instructions = Some(entry.skill.body.clone());
            }
            i
        };
        Ok(SkillsListResult {
            skills: reg.skills.values().map(info).collect(),
            skills_enabled: skills_on(&e.public.settings),
            activated,
            diagnostics: reg.diagnostics,
        })
    }

    /// `skills/prompt`.
    pub(crate) fn prompt(&self, session: &str) -> Result<SkillsPromptResult, SkillsError> {
        let (reg, _) = self.registry(session)?;
        self.seen(session, &reg);
        Ok(SkillsPromptResult {
            prompt: registry::prompt(&reg),
            names: reg.enabled().map(|e| e.skill.name.clone()).collect(),
        })
    }

    /// `skills/activate`: policy decides (built-in skills skip it), then the skill is recorded
    /// on the session and its folder added to the session's allowed paths.
    pub(crate) async fn activate(
        &self,
        p: SkillActivateParams,
    ) -> Result<SkillActivateResult, SkillsError> {
        let (reg, _) = self.registry(&p.session)?;
        let Some(entry) = reg.get(&p.name).filter(|e| e.enabled).cloned() else {
            let available: Vec<&str> = reg.enabled().map(|e| e.skill.name.as_str()).collect();
            let disabled = reg.get(&p.name).is_some();
            return Err(SkillError::NotFound(if disabled {
                format!(
                    "Skill \"{}\" is disabled (`skills.disabled`, or skills are off); `gemctl skills \
                     enable {}` enables it",
                    p.name, p.name
                )
            } else {
                format!("Skill \"{}\" not found. Available skills are: {}", p.name, available.join(", "))
            })
            .into());
        };
        let name = entry.skill.name.clone();
        let dir = entry.skill.dir().to_path_buf();
        let served = entry.place.scope == SkillScope::Mcp;
        let (body, resources) = match &entry.place.owner {
            Some(server) if served => {
                let uri = entry.skill.location.display().to_string();
                self.read_served(&p.session, server, &uri).await?
            }
            _ => {
                let shown = dir.clone();
                let tree =
                    tokio::task::spawn_blocking(move || tree::render(&shown)).await.map_err(
                        |e| SkillError::Io(format!("reading the skill's folder failed: {e}")),
                    )?;
                (entry.skill.body.clone(), tree)
            }
        };
        if !entry.info().built_in {
            let mut args = serde_json::Map::new();
            args.insert("name".into(), Value::String(name.clone()));
            let mut call = Call {
                session: p.session.clone(),
                origin: Origin::ToolsCall,
                call_id: p.call_id.clone(),
                name: ACTIVATE_SKILL.to_owned(),
                server: String::new(),
                tool: ACTIVATE_SKILL.to_owned(),
                args: Some(args),
                annotations: None,
                confirmed: p.confirmed,
                hooks_by_client: false,
                policy: None,
                tail_of: None,
            };
            let about = format!(
                "Activate the skill \"{name}\" ({}): {}\n\nIts folder is shared with the model:\n{resources}",
                registry::scope_words(&entry.place),
                entry.skill.description
            );
            self.calls.authorize(&mut call, &about).await?;
        }
        let dir_text = dir.display().to_string();
        let (n, d) = (name.clone(), dir_text.clone());
        let mut already = false;
        let changed = self
            .sessions
            .update_state(&p.session, |s| {
                already = s.activated_skills.contains(&n);
                if !already {
                    s.activated_skills.push(n);
                }
                if !served && !s.allowed_paths.contains(&d) {
                    s.allowed_paths.push(d);
                }
                Ok::<(), std::convert::Infallible>(())
            })
            .await?;
        let Ok(_) = changed;
        tracing::info!(session = %p.session, skill = %name, "skill activated");
        Ok(SkillActivateResult {
            text: crate::skills::activation_text(&name, &body, &resources),
            name,
            dir: dir_text,
            resources,
            already_active: already,
        })
    }

    /// A session's agent definitions.
    pub(crate) fn agent_registry(
        &self,
        session: &str,
    ) -> Result<(std::collections::BTreeMap<String, agents::Agent>, Vec<Diagnostic>), SessionError>
    {
        let e = self.config.effective(session)?;
        let c = &e.public;
        let ws = Path::new(&c.workspace);
        let exts: Vec<(String, PathBuf)> =
            e.extensions.iter().filter_map(|x| Some((x.name.clone(), x.agents.clone()?))).collect();
        let places = agents::places(&self.home(), ws, c.trust.trusted, &exts);
        let (list, mut diagnostics) = crate::config::files::off_loop(|| agents::registry(&places));
        if ws != self.home() {
            diagnostics.extend(Self::untrusted_note(
                &e,
                &[ws.join(".gemini").join("agents")],
                "agent definitions",
            ));
        }
        Ok((list, diagnostics))
    }

    /// `agents/list`.
    pub(crate) fn agents(&self, session: &str) -> Result<AgentsListResult, SkillsError> {
        let (list, diagnostics) = self.agent_registry(session)?;
        Ok(AgentsListResult { agents: list.into_values().map(|a| a.info).collect(), diagnostics })
    }

    /// Announce `skills/changed` for each of `ids` whose skills differ from what was last
    /// seen (the first look only records).
    pub(crate) fn check(&self, ids: &[String]) {
        for id in ids {
            let Ok((reg, _)) = self.registry(id) else {
                self.views.lock().remove(id);
                continue;
            };
            let view = view_of(&reg);
            let old = self.views.lock().insert(id.clone(), view.clone());
            let Some(old) = old else { continue };
            let names: std::collections::BTreeSet<&String> =
                old.keys().chain(view.keys()).collect();
            let changed: Vec<String> =
                names.into_iter().filter(|n| old.get(*n) != view.get(*n)).cloned().collect();
            if changed.is_empty() {
                continue;
            }
            tracing::info!(session = %id, ?changed, "skills changed");
            let enabled = reg.enabled().map(|e| e.skill.name.clone()).collect();
            self.events.emit(geminid_protocol::event::EventBody::SkillsChanged(
                geminid_protocol::skills::SkillsChanged { session: id.clone(), enabled, changed },
            ));
        }
    }

    /// Forget a closed session's announced skills.
    pub(crate) fn forget(&self, session: &str) {
        self.views.lock().remove(session);
    }

    /// The skills and agents folders of every known session, and each folder in them (a
    /// skill's `SKILL.md` changing must be seen), with a linked folder's target.
    pub(crate) fn dirs(&self) -> Vec<PathBuf> {
        let home = self.home();
        let mut roots = vec![
            home.join(".gemini").join("antigravity-cli").join("skills"),
            home.join(".gemini").join("skills"),
            home.join(".agents").join("skills"),
            home.join(".gemini").join("agents"),
        ];
        let known: Vec<Effective> = self.config.baselines().values().cloned().collect();
        for e in known {
            let ws = PathBuf::from(&e.public.workspace);
            if e.public.trust.trusted && ws != home {
                roots.push(ws.join(".gemini").join("skills"));
                roots.push(ws.join(".agents").join("skills"));
                roots.push(ws.join(".gemini").join("agents"));
            }
            for x in &e.extensions {
                roots.extend(x.skills.iter().chain(&x.agents).cloned());
            }
        }
        let mut out = Vec::new();
        for root in roots {
            for entry in std::fs::read_dir(&root).into_iter().flatten().filter_map(Result::ok) {
                let path = entry.path();
                if !path.is_dir() {
                    continue;
                }
                if let Ok(real) = std::fs::canonicalize(&path)
                    && real != path
                {
                    out.push(real);
                }
                out.push(path);
            }
            out.push(root);
        }
        out
    }
}

/// A session's skills as announced: name to (description, location, enabled).
type View = std::collections::BTreeMap<String, (String, PathBuf, bool)>;

fn view_of(reg: &Registry) -> View {
    reg.skills
        .values()
        .map(|e| {
            let s = &e.skill;
            (s.name.clone(), (s.description.clone(), s.location.clone(), e.enabled))
        })
        .collect()
}

/// Each session's [`View`].
#[derive(Debug, Default)]
pub(crate) struct Views(parking_lot::Mutex<std::collections::HashMap<String, View>>);

impl Views {
    fn lock(&self) -> parking_lot::MutexGuard<'_, std::collections::HashMap<String, View>> {
        self.0.lock()
    }
}

/// Skills and agent definitions as an input: their folders (and each folder in them), read
/// when asked; after a reload, `skills/changed` for each session whose skills differ.
#[derive(Debug)]
pub(crate) struct SkillsInput(pub(crate) Arc<Skills>);

impl crate::services::reload::Input for SkillsInput {
    fn name(&self) -> &'static str {
        "skills"
    }

    fn watch(&self, _: &[Effective], into: &mut crate::services::reload::Watched) {
        into.dirs.extend(self.0.dirs());
    }

    fn after(&self, known: &[String]) {
        self.0.check(known);
    }
}

impl crate::services::forget::Forget for Skills {
    fn forget(&self, session: &str) {
        Skills::forget(self, session);
    }
}
