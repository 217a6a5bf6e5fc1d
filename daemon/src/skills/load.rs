//! Reading the skills of one folder: `SKILL.md` at its top and in each folder directly under
//! it (hidden folders, `node_modules` and `.git` skipped; linked folders followed, as
//! `skills link` makes them), each file parsed once and again only when it changes.

use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use geminid_protocol::common::{Diagnostic, Severity};

use super::frontmatter::{self, Unreadable};
use crate::config::files::diagnostic;

/// The file that makes a folder a skill.
pub(crate) const SKILL_FILE: &str = "SKILL.md";

/// The largest `SKILL.md` read: its body is what a model gets on activation, and a file
/// larger than this is a mistake (a log, a dataset) that would cost every session.
pub(crate) const MAX_SKILL_FILE: u64 = 1 << 20;

/// One skill as its file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name, sanitized.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its `SKILL.md`.
    pub location: PathBuf,
    /// The instructions after the frontmatter, trimmed.
    pub body: String,
}

impl Skill {
    /// The skill's folder.
    pub(crate) fn dir(&self) -> &Path {
        self.location.parent().unwrap_or(&self.location)
    }
}

/// What one folder holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Folder {
    /// Its skills, in path order.
    pub skills: Vec<Arc<Skill>>,
    /// Why files that looked like skills did not load.
    pub diagnostics: Vec<Diagnostic>,
}

/// What identifies a file's version without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    inode: u64,
    #[cfg(unix)]
    ctime: i64,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Self {
            len: m.len(),
            modified: m.modified().ok(),
            #[cfg(unix)]
            inode: m.ino(),
            #[cfg(unix)]
            ctime: m.ctime_nsec() + m.ctime() * 1_000_000_000,
        }
    }
}

type Parsed = Arc<Result<Arc<Skill>, Diagnostic>>;

/// Parsed `SKILL.md` files by path, each with the stamp it was read at.
#[derive(Debug, Default)]
pub struct Cache {
    files: Mutex<HashMap<PathBuf, (Stamp, Parsed)>>,
    reads: AtomicU64,
}

impl Cache {
    /// How many `SKILL.md` files were read and parsed so far (the rest came from the cache).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The skills of `dir` (none if it does not exist).
    pub(crate) fn folder(&self, dir: &Path) -> Folder {
        let mut out = Folder::default();
        let mut seen: HashMap<PathBuf, PathBuf> = HashMap::new();
        // (file, reached through a link): only those need resolving to find duplicates.
        let mut candidates: Vec<(PathBuf, bool)> = Vec::new();
        let top = dir.join(SKILL_FILE);
        if let Ok(m) = std::fs::symlink_metadata(&top) {
            candidates.push((top, m.is_symlink()));
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return out };
        let mut names: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .filter(|(n, _)| !n.starts_with('.') && n != "node_modules")
            .collect();
        names.sort();
        for (_, path) in names {
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => {
                    let file = path.join(SKILL_FILE);
                    if let Ok(fm) = std::fs::symlink_metadata(&file) {
                        let linked = fm.is_symlink()
                            || std::fs::symlink_metadata(&path).is_ok_and(|l| l.is_symlink());
                        candidates.push((file, linked));
                    }
                }
                Ok(_) => {}
                Err(e) if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink()) => {
                    out.diagnostics.push(diagnostic(
                        Severity::Warning,
                        &path,
                        None,
                        format!("a link that leads nowhere readable ({e}); skipped"),
                    ));
                }
                Err(_) => {}
            }
        }
        let mut kept = BTreeSet::new();
        let real_dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        for (file, linked) in candidates {
            // A link back into the folder (or two links to one skill) would list a skill twice.
            let real = if linked {
                std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone())
            } else {
                file.strip_prefix(dir).map_or_else(|_| file.clone(), |rel| real_dir.join(rel))
            };
            if let Some(first) = seen.get(&real) {
                out.diagnostics.push(diagnostic(
                    Severity::Warning,
                    &file,
                    None,
                    format!("the same file as {} (through a link); read once", first.display()),
                ));
                continue;
            }
            seen.insert(real, file.clone());
            kept.insert(file.clone());
            match &*self.file(&file) {
                Ok(skill) => out.skills.push(skill.clone()),
                Err(d) => out.diagnostics.push(d.clone()),
            }
        }
        // Forget files of this folder that are gone.
        self.lock().retain(|path, _| {
            let parent = path.parent();
            let here = parent == Some(dir) || parent.and_then(Path::parent) == Some(dir);
            !here || kept.contains(path)
        });
        out
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<PathBuf, (Stamp, Parsed)>> {
        self.files.lock()
    }

    /// One `SKILL.md`, from the cache while its stamp is unchanged.
    fn file(&self, file: &Path) -> Parsed {
        let meta = match std::fs::metadata(file) {
            Ok(m) => m,
            Err(e) => {
                let why = if e.raw_os_error() == Some(40) {
                    "a symlink loop; skipped".to_owned()
                } else {
                    format!("cannot be read: {e}")
                };
                return Arc::new(Err(diagnostic(Severity::Error, file, None, why)));
            }
        };
        let stamp = Stamp::of(&meta);
        if let Some((s, parsed)) = self.lock().get(file)
            && *s == stamp
        {
            return parsed.clone();
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let parsed: Parsed = Arc::new(read_skill(file, &meta).map(Arc::new));
        self.lock().insert(file.to_path_buf(), (stamp, parsed.clone()));
        parsed
    }
}

/// Read and parse one `SKILL.md`.
pub(crate) fn read_skill(file: &Path, meta: &std::fs::Metadata) -> Result<Skill, Diagnostic> {
    let error = |pos: Option<(u32, u32)>, why: String| {
        diagnostic(Severity::Error, file, pos, format!("{why}; the skill is not loaded"))
    };
    if !meta.is_file() {
        return Err(error(None, "not a regular file".to_owned()));
    }
    if meta.len() > MAX_SKILL_FILE {
        return Err(error(
            None,
            format!(
                "{} bytes, more than the {} MiB a SKILL.md may have (move large material into \
                 files beside it, which the skill lists as its resources)",
                meta.len(),
                MAX_SKILL_FILE >> 20
            ),
        ));
    }
    let mut text = String::new();
    let read = std::fs::File::open(file)
        .and_then(|f| f.take(MAX_SKILL_FILE + 1).read_to_string(&mut text));
    if let Err(e) = read {
        return Err(error(None, format!("cannot be read: {e}")));
    }
    if text.len() as u64 > MAX_SKILL_FILE {
        return Err(error(
            None,
            format!("more than the {} MiB a SKILL.md may have", MAX_SKILL_FILE >> 20),
        ));
    }
    parse_skill(file, &text).map_err(|(pos, why)| error(pos, why))
}

/// A `SKILL.md`'s text as a skill, or where and why not.
pub(crate) fn parse_skill(file: &Path, text: &str) -> Result<Skill, (Option<(u32, u32)>, String)> {
    let Some(split) = frontmatter::split(text) else {
        return Err((
            Some((1, 1)),
            "no frontmatter: a SKILL.md starts with a `---` line, then `name:` and \
             `description:`, then a `---` line"
                .to_owned(),
        ));
    };
    let fields = frontmatter::name_and_description(split.frontmatter).map_err(|u| {
        let Unreadable::Missing { missing, yaml } = u;
        let what = missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(" or ");
        match yaml {
            // The frontmatter's first line is the file's second.
            Some(e) => (
                Some((
                    u32::try_from(e.line).unwrap_or(u32::MAX).saturating_add(1),
                    u32::try_from(e.column).unwrap_or(0),
                )),
                format!("the frontmatter is not valid YAML ({}) and has no {what} line", e.message),
            ),
            None => (Some((2, 1)), format!("the frontmatter has no {what} (as a string)")),
        }
    })?;
    Ok(Skill {
        name: frontmatter::sanitize_name(&fields.name),
        description: fields.description,
        location: file.to_path_buf(),
        body: split.body.unwrap_or_default().trim().to_owned(),
    })
}
