//! `skills install`, `link` and `uninstall`, as Gemini CLI's: the source's skills (a `SKILL.md`
//! at its top or in a folder directly under it) are each copied (or linked) to
//! `<skills folder>/<name>`, a copy replacing an installed skill of that name; nothing is
//! written without consent. Sources are a folder, a `.skill` archive (a zip of one skill's
//! files; no entry may leave the folder) or a git repository.

use std::path::{Path, PathBuf};

use geminid_protocol::skills::InstalledSkill;

use super::SkillError;
use super::load::{Cache, Skill};
use crate::extensions::fetch::Source;

/// What an install would do, and the folder it read (kept until the install is done).
#[derive(Debug)]
pub(crate) struct Plan {
    /// The skills found, each with where it goes.
    pub skills: Vec<(Skill, PathBuf, bool)>,
    /// What the person agrees to.
    pub consent: String,
    /// The staging folder holding a fetched source (removed on drop).
    _staging: Option<tempfile::TempDir>,
}

impl Plan {
    /// The wire form of what is placed.
    pub(crate) fn installed(&self) -> Vec<InstalledSkill> {
        self.skills
            .iter()
            .map(|(s, to, replaces)| InstalledSkill {
                name: s.name.clone(),
                description: s.description.clone(),
                dir: to.display().to_string(),
                replaces: *replaces,
            })
            .collect()
    }
}

fn refused(why: impl Into<String>) -> SkillError {
    SkillError::Refused(why.into())
}

fn io(what: &Path, e: std::io::Error) -> SkillError {
    SkillError::Io(format!("{}: {e}", what.display()))
}

/// Read the source (fetching a git repository or unpacking an archive into a staging folder
/// beside `target`) and plan the install into `target`.
pub(crate) fn plan(
    source: &str,
    base: &Path,
    sub: Option<&str>,
    target: &Path,
    link: bool,
) -> Result<Plan, SkillError> {
    let is_skill_file = source.to_ascii_lowercase().ends_with(".skill");
    let inferred = if is_skill_file {
        Source::Archive(base.join(source))
    } else {
        Source::infer(source, None, base).map_err(|e| refused(e.to_string()))?
    };
    let (root, staging) = match &inferred {
        Source::Local(dir) => (dir.clone(), None),
        _ if link => {
            return Err(refused(
                "only a folder on this machine can be linked; install copies an archive or repository",
            ));
        }
        fetched => {
            std::fs::create_dir_all(target).map_err(|e| io(target, e))?;
            let staging = tempfile::Builder::new()
                .prefix(".geminid-skill-")
                .tempdir_in(target)
                .map_err(|e| io(target, e))?;
            let into = staging.path().join("source");
            fetched.fetch(&into, &|_| {}).map_err(|e| refused(e.to_string()))?;
            (into, Some(staging))
        }
    };
    let root = match sub {
        Some(p) => {
            let p = Path::new(p);
            if p.is_absolute()
                || p.components().any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(refused(format!("--path {} must stay inside the source", p.display())));
            }
            root.join(p)
        }
        None => root,
    };
    if !root.is_dir() {
        return Err(refused(format!(
            "{} is not a folder: a skill is a folder with a SKILL.md (or a .skill archive of one)",
            root.display()
        )));
    }
    let found = Cache::default().folder(&root);
    if found.skills.is_empty() {
        let why: Vec<String> =
            found.diagnostics.iter().map(|d| format!("\n  {}: {}", d.file, d.message)).collect();
        return Err(refused(format!(
            "no skill found in {} (a SKILL.md with `name` and `description` at its top or in a folder \
             directly under it){}",
            root.display(),
            why.concat()
        )));
    }
    let mut skills = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for s in found.skills {
        if s.name.is_empty() || s.name == "." || s.name == ".." {
            return Err(refused(format!(
                "{}: the skill's name \"{}\" cannot be a folder name",
                s.location.display(),
                s.name
            )));
        }
        if !names.insert(s.name.clone()) {
            return Err(refused(format!("two skills in the source are named \"{}\"", s.name)));
        }
        let to = target.join(&s.name);
        let exists = std::fs::symlink_metadata(&to).is_ok();
        if link && exists {
            return Err(refused(format!(
                "{} already exists: a skill named \"{}\" is installed there (uninstall it first)",
                to.display(),
                s.name
            )));
        }
        skills.push(((*s).clone(), to, exists));
    }
    let verb = if link { "Linking" } else { "Installing" };
    let mut consent = format!("{verb} agent skill(s) from {source} into {}:\n", target.display());
    for (s, to, replaces) in &skills {
        consent.push_str(&format!(
            "  * {}: {}\n    {} -> {}{}\n",
            s.name,
            s.description,
            s.dir().display(),
            to.display(),
            if *replaces { " (replaces the installed one)" } else { "" }
        ));
    }
    consent.push_str(
        "Skills are instructions and files a model reads and may act on: install only skills \
         from sources you trust.",
    );
    Ok(Plan { skills, consent, _staging: staging })
}

/// Carry out a plan: copy (or link) each skill's folder to its place.
pub(crate) fn apply(plan: &Plan, target: &Path, link: bool) -> Result<(), SkillError> {
    std::fs::create_dir_all(target).map_err(|e| io(target, e))?;
    for (skill, to, _) in &plan.skills {
        let from = skill.dir();
        if link {
            let from = std::fs::canonicalize(from).map_err(|e| io(from, e))?;
            symlink_dir(&from, to).map_err(|e| io(to, e))?;
            continue;
        }
        let staging = target.join(format!(".{}.geminid-new", skill.name));
        let _ = std::fs::remove_dir_all(&staging);
        crate::extensions::fetch::copy_tree(from, &staging).map_err(|e| refused(e.to_string()))?;
        remove_entry(to)?;
        std::fs::rename(&staging, to).map_err(|e| io(to, e))?;
    }
    Ok(())
}

/// Remove a folder, or only the link when it is one.
pub(crate) fn remove_entry(path: &Path) -> Result<(), SkillError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path, e)),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).map_err(|e| io(path, e)),
        Ok(_) => std::fs::remove_file(path)
            .or_else(|e| if cfg!(windows) { std::fs::remove_dir(path) } else { Err(e) })
            .map_err(|e| io(path, e)),
    }
}

#[cfg(unix)]
fn symlink_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(from, to)
}

#[cfg(windows)]
fn symlink_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::os::windows::fs::symlink_dir(from, to)
}

/// The folder of the skill named `name` in `skills_dir` (one directly under it).
pub(crate) fn find(skills_dir: &Path, name: &str) -> Result<PathBuf, SkillError> {
    let found = Cache::default().folder(skills_dir);
    let lower = name.to_lowercase();
    let skill = found
        .skills
        .iter()
        .find(|s| s.name == name)
        .or_else(|| found.skills.iter().find(|s| s.name.to_lowercase() == lower))
        .ok_or_else(|| {
            SkillError::NotFound(format!("no skill named \"{name}\" in {}", skills_dir.display()))
        })?;
    let file = &skill.location;
    let dir = file.parent().unwrap_or(file);
    if dir == skills_dir {
        return Err(refused(format!(
            "{} is the skills folder itself (its SKILL.md is at the top); remove that file by hand",
            skills_dir.display()
        )));
    }
    Ok(dir.to_path_buf())
}
