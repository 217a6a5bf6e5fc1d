//! Which copy of each skill a session gets: the skills folders in Gemini CLI's order, a later
//! one overriding an earlier one's skill of the same name (exactly the same name), every
//! override said; then `skills.disabled` (every scope's list, names compared without case).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use geminid_protocol::common::{Diagnostic, Severity};
use geminid_protocol::skills::{SkillConflict, SkillInfo, SkillScope, SkillSource};

use super::load::{Cache, Skill};
use crate::config::files::diagnostic;

/// Where a skills folder sits in the order (lowest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// Its kind.
    pub scope: SkillScope,
    /// The extension or MCP server it belongs to.
    pub owner: Option<String>,
    /// The folder.
    pub dir: PathBuf,
}

impl Place {
    fn source(&self) -> SkillSource {
        SkillSource {
            scope: self.scope,
            extension: self.owner.clone().filter(|_| self.scope == SkillScope::Extension),
            server: self.owner.clone().filter(|_| self.scope == SkillScope::Mcp),
            dir: self.dir.display().to_string(),
        }
    }
}

/// The places of a session's skills, lowest precedence first: its enabled extensions' `skills/`
/// (in name order, then Antigravity CLI's plugins'), `~/.gemini/antigravity-cli/skills`,
/// `~/.gemini/skills`, `~/.agents/skills`, then, in a trusted workspace, its
/// `.gemini/skills` and `.agents/skills`.
pub fn places(
    home: &Path,
    workspace: &Path,
    trusted: bool,
    extensions: &[(String, PathBuf)],
) -> Vec<Place> {
    let place =
        |scope, owner: Option<&String>, dir: PathBuf| Place { scope, owner: owner.cloned(), dir };
    let mut out: Vec<Place> = extensions
        .iter()
        .map(|(name, dir)| place(SkillScope::Extension, Some(name), dir.clone()))
        .collect();
    // Antigravity CLI's own user skills first: a skill of the same name in Gemini CLI's
    // folders overrides it (the same order as their servers files).
    out.push(place(
        SkillScope::User,
        None,
        home.join(".gemini").join("antigravity-cli").join("skills"),
    ));
    out.push(place(SkillScope::User, None, home.join(".gemini").join("skills")));
    out.push(place(SkillScope::User, None, home.join(".agents").join("skills")));
    // Gemini CLI skips the workspace's folders when the workspace is the home directory (they
    // would be the user's again).
    if trusted && workspace != home {
        out.push(place(SkillScope::Workspace, None, workspace.join(".gemini").join("skills")));
        out.push(place(SkillScope::Workspace, None, workspace.join(".agents").join("skills")));
    }
    out
}

/// One skill as a session sees it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The copy that won.
    pub skill: Arc<Skill>,
    /// Where it came from.
    pub place: Place,
    /// Not in `skills.disabled`.
    pub enabled: bool,
    /// The copies it overrides, lowest first.
    pub overrides: Vec<(Arc<Skill>, Place)>,
}

impl Entry {
    /// The wire form.
    pub(crate) fn info(&self) -> SkillInfo {
        SkillInfo {
            name: self.skill.name.clone(),
            description: self.skill.description.clone(),
            location: self.skill.location.display().to_string(),
            source: self.place.source(),
            enabled: self.enabled,
            built_in: self.place.scope == SkillScope::BuiltIn,
            overrides: self
                .overrides
                .iter()
                .map(|(s, p)| SkillConflict {
                    location: s.location.display().to_string(),
                    source: p.source(),
                })
                .collect(),
            instructions: None,
        }
    }
}

/// A session's skills.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// Every skill, by name.
    pub skills: BTreeMap<String, Entry>,
    /// Files that did not load, and overrides.
    pub diagnostics: Vec<Diagnostic>,
}

impl Registry {
    /// Read `places` (through `cache`) and resolve them; `disabled` are the names turned off.
    pub fn resolve(cache: &Cache, places: &[Place], disabled: &[String]) -> Self {
        Self::resolve_with(cache, places, Vec::new(), disabled)
    }

    /// The same, with skills MCP servers serve: above the user's, below the workspace's.
    pub(crate) fn resolve_with(
        cache: &Cache,
        places: &[Place],
        served: Vec<(Arc<Skill>, Place)>,
        disabled: &[String],
    ) -> Self {
        let mut out = Self::default();
        let mut served = Some(served);
        for place in places {
            if place.scope == SkillScope::Workspace
                && let Some(list) = served.take()
            {
                list.into_iter().for_each(|(s, p)| out.add(s, p));
            }
            let folder = cache.folder(&place.dir);
            out.diagnostics.extend(folder.diagnostics);
            for skill in folder.skills {
                out.add(skill, place.clone());
            }
        }
        served.into_iter().flatten().for_each(|(s, p)| out.add(s, p));
        let off: HashSet<String> = disabled.iter().map(|n| n.to_lowercase()).collect();
        for e in out.skills.values_mut() {
            e.enabled = !off.contains(&e.skill.name.to_lowercase());
        }
        out
    }

    /// A skill above what is there (a later folder's, or an MCP server's).
    pub(crate) fn add(&mut self, skill: Arc<Skill>, place: Place) {
        let name = skill.name.clone();
        let entry = Entry { skill, place, enabled: true, overrides: Vec::new() };
        let Some(old) = self.skills.remove(&name) else {
            self.skills.insert(name, entry);
            return;
        };
        let mut entry = entry;
        if old.place.scope != SkillScope::BuiltIn {
            let same_folder = old.place == entry.place;
            let message = if same_folder {
                format!(
                    "two skills in one folder are named \"{name}\": {} and this one; this one is used \
                     (rename one in its frontmatter)",
                    old.skill.location.display()
                )
            } else {
                format!(
                    "Skill conflict: \"{name}\" here overrides the skill of the same name in {} ({})",
                    old.skill.location.display(),
                    scope_words(&old.place)
                )
            };
            self.diagnostics.push(diagnostic(
                Severity::Warning,
                &entry.skill.location,
                None,
                message,
            ));
        }
        entry.overrides = old.overrides;
        entry.overrides.push((old.skill, old.place));
        self.skills.insert(name, entry);
    }

    /// A skill by name, exactly or else without case (as Gemini CLI's lookup).
    pub(crate) fn get(&self, name: &str) -> Option<&Entry> {
        self.skills.get(name).or_else(|| {
            let lower = name.to_lowercase();
            self.skills.values().find(|e| e.skill.name.to_lowercase() == lower)
        })
    }

    /// The enabled skills, by name.
    pub(crate) fn enabled(&self) -> impl Iterator<Item = &Entry> {
        self.skills.values().filter(|e| e.enabled)
    }
}

/// A place in words, for messages.
pub(crate) fn scope_words(p: &Place) -> String {
    match (&p.scope, &p.owner) {
        (SkillScope::Extension, Some(ext)) => format!("the extension '{ext}'"),
        (SkillScope::Mcp, Some(server)) => format!("the MCP server '{server}'"),
        (SkillScope::BuiltIn, _) => "built in".to_owned(),
        (SkillScope::User, _) => "user skills".to_owned(),
        (SkillScope::Workspace, _) => "workspace skills".to_owned(),
        (_, None) => "skills".to_owned(),
    }
}

/// Escape text for the `<available_skills>` block (a description may hold `<` or `&`).
fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The system prompt section a model sees: Gemini CLI's `# Available Agent Skills` with one
/// `<skill>` per enabled skill (empty when there is none).
pub(crate) fn prompt(registry: &Registry) -> String {
    let skills: Vec<String> = registry
        .enabled()
        .map(|e| {
            format!(
                "  <skill>\n    <name>{}</name>\n    <description>{}</description>\n    <location>{}</location>\n  </skill>",
                xml(&e.skill.name),
                xml(&e.skill.description),
                xml(&e.skill.location.display().to_string())
            )
        })
        .collect();
    if skills.is_empty() {
        return String::new();
    }
    format!(
        "# Available Agent Skills\n\nEach skill below holds instructions for one kind of task. When a task \
         matches a skill's description, call the `activate_skill` tool with its name to get them.\n\n\
         <available_skills>\n{}\n</available_skills>",
        skills.join("\n")
    )
}
