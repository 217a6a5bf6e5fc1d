//! The context files Gemini CLI loads into the model's instructions for a session (its memory
//! discovery, `MemoryContextManager`), in the order the model reads them: the user's global
//! files (`~/.gemini/<name>`, in its system instruction), the private project memory
//! (`context_memory.rs`, there too), the enabled extensions' context files (sorted, each
//! once), then, in a trusted folder, the project's: for each of the session's folders (the
//! workspace, then `context.includeDirectories`), the files from the project root (the
//! nearest folder above it with a boundary marker, `.git` unless
//! `context.memoryBoundaryMarkers` says otherwise; the folder itself without one) down to the
//! folder, all of them sorted. The same file (by device and inode) is read once. `<name>` is
//! each of `context.fileName` (a name or a list) and then `GEMINI.md`. Each file's `@path`
//! imports are inlined (`context_import.rs`); a file whose text is then empty is left out,
//! as Gemini CLI leaves it out of the model's instructions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use geminid_protocol::common::{Diagnostic, Scope, Severity};
use geminid_protocol::config::{ContextFile, ContextFileKind};
use serde_json::Value;

use super::Effective;
use super::context_import::{Importer, join, js_trim, lexical, real};
use super::context_read::{Budget, Unread, read_within};
use super::env::Env;

const DEFAULT_NAME: &str = "GEMINI.md";

/// Node's `path.normalize` of a relative name: `.` and empty parts out, `..` taken against
/// what precedes it.
fn normalize_name(name: &str) -> String {
    let absolute = name.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            other => parts.push(other),
        }
    }
    let mut out = parts.join("/");
    if absolute {
        out.insert(0, '/');
    }
    if name.ends_with('/') && !out.ends_with('/') {
        out.push('/');
    }
    if out.is_empty() { ".".to_owned() } else { out }
}

/// The context file names looked for: `context.fileName`'s (trimmed, each once), then
/// `GEMINI.md`, which Gemini CLI always adds to the names configured.
pub(crate) fn file_names(settings: &Value) -> Vec<String> {
    let configured: Vec<&str> = match settings.pointer("/context/fileName") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut names: Vec<String> = Vec::new();
    for n in configured.into_iter().chain([DEFAULT_NAME]) {
        let n = n.trim();
        if n.is_empty() {
            continue;
        }
        let n = normalize_name(n);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// A name that is a path (a separator in it, or `..`): Gemini CLI takes one from any settings
/// file, joined to each folder (`../.ssh/id_rsa` read as global context); geminid takes one
/// only from the user's and the system's settings, never from a workspace's.
fn is_path(name: &str) -> bool {
    name.contains('/') || name.contains('\\') || name == ".."
}

/// The names a workspace's settings file gives that are paths, with that file: not used.
fn refused(effective: &Effective) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in &effective.public.files {
        if f.scope != Scope::Workspace || !f.applied {
            continue;
        }
        if let super::files::FileRead::Parsed { value, .. } =
            super::files::read_object(Path::new(&f.path))
        {
            for n in file_names(&value).into_iter().filter(|n| is_path(n)) {
                out.push((n, f.path.clone()));
            }
        }
    }
    out
}

/// The names looked for in a session: [`file_names`] but a workspace's paths.
pub(crate) fn names_used(effective: &Effective) -> Vec<String> {
    let refused = refused(effective);
    let mut names = file_names(&effective.public.settings);
    names.retain(|n| !refused.iter().any(|(r, _)| r == n));
    names
}

/// `config check`'s word on the names [`names_used`] leaves out.
pub(crate) fn diagnostics(effective: &Effective) -> Vec<Diagnostic> {
    refused(effective)
        .into_iter()
        .map(|(name, file)| {
            let message = format!(
                "context.fileName \"{name}\" is a path, not a file name: a workspace's settings \
                 may not name one (the user's settings may); no context file is read by it"
            );
            super::files::diagnostic(Severity::Warning, Path::new(&file), None, message)
        })
        .collect()
}

fn markers(settings: &Value) -> Vec<String> {
    match settings.pointer("/context/memoryBoundaryMarkers").and_then(Value::as_array) {
        Some(a) => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        None => vec![".git".to_owned()],
    }
}

/// The nearest folder at or above `start` holding one of `markers`.
fn project_root(start: &Path, markers: &[String]) -> Option<PathBuf> {
    if markers.is_empty() {
        return None;
    }
    start
        .ancestors()
        .find(|d| {
            markers
                .iter()
                .filter(|m| !Path::new(m).is_absolute() && !m.contains(".."))
                .any(|m| d.join(m).exists())
        })
        .map(Path::to_path_buf)
}

/// `names` found in each folder from `start` up to `stop`, the topmost first; the global
/// `~/.gemini` is never searched as a project folder.
fn upward(start: &Path, stop: &Path, names: &[String], global_dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<Vec<PathBuf>> = Vec::new();
    for dir in start.ancestors() {
        if dir == global_dir {
            break;
        }
        found.push(names.iter().map(|n| join(dir, n)).filter(|p| p.exists()).collect());
        if dir == stop {
            break;
        }
    }
    found.into_iter().rev().flatten().collect()
}

fn identity(p: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = p;
        None
    }
}

/// The private project memory's files: `MEMORY.md`, or else each `<name>` there.
fn memory_files(home: &Path, workspace: &Path, names: &[String]) -> Vec<PathBuf> {
    let Some(dir) = super::context_memory::project_temp_dir(home, workspace) else {
        return Vec::new();
    };
    let dir = dir.join("memory");
    let index = dir.join("MEMORY.md");
    if index.exists() {
        return vec![index];
    }
    names.iter().map(|n| join(&dir, n)).filter(|p| p.exists()).collect()
}

/// Why a context file found is not read, or `None` when that is said by leaving it out (a
/// folder, a file gone meanwhile, as Gemini CLI skips them).
fn unread(why: Unread, budget: &Budget, cap: u64, root: Option<&Path>) -> Option<String> {
    match why {
        Unread::Folder => None,
        Unread::Io(e) if e.starts_with("ENOENT") => None,
        Unread::Io(e) => Some(e),
        Unread::Special(what) => Some(format!("{what}, not a regular file: not read")),
        Unread::Outside => Some(format!(
            "a link to a file outside {}: not read (geminid reads a context file only \
             where it was found)",
            root.map(|r| r.display().to_string()).unwrap_or_default()
        )),
        Unread::TooBig => Some(budget.too_big(cap)),
    }
}

/// The context files of a session whose configuration is `effective` and whose environment
/// is `env`, in the order the model reads them, each with its text as the model gets it.
/// One that is not read (not a regular file, too large, a link out of the folder it was
/// found in: the project root, `~/.gemini`, the extension's folder) is listed with why.
pub(crate) fn files(effective: &Effective, home: &Path, env: &Env) -> Vec<ContextFile> {
    let settings = &effective.public.settings;
    let names = names_used(effective);
    let markers = markers(settings);
    let global_dir = home.join(".gemini");
    let global_root = real(&global_dir);
    let workspace = lexical(Path::new(&effective.public.workspace));
    let global: Vec<PathBuf> =
        names.iter().map(|n| join(&global_dir, n)).filter(|p| p.exists()).collect();
    let memory = memory_files(home, &workspace, &names);
    let mut from_extensions: Vec<(PathBuf, String, PathBuf)> = effective
        .extensions
        .iter()
        .flat_map(|c| {
            let root = real(c.manifest_path.parent().unwrap_or(&c.manifest_path));
            c.context_files.iter().map(move |f| (lexical(f), c.name.clone(), root.clone()))
        })
        .collect();
    from_extensions
        .sort_by(|a, b| a.0.as_os_str().as_encoded_bytes().cmp(b.0.as_os_str().as_encoded_bytes()));
    from_extensions.dedup_by(|a, b| a.0 == b.0);
    let mut project: Vec<(PathBuf, PathBuf)> = Vec::new();
    if effective.public.trust.trusted {
        let mut seen: HashMap<(u64, u64), ()> = HashMap::new();
        for dir in super::folders::dirs(&workspace, settings, env) {
            let stop = project_root(&dir, &markers).unwrap_or_else(|| dir.clone());
            let root = real(&stop);
            for p in upward(&dir, &stop, &names, &global_dir) {
                let fresh = identity(&p).is_none_or(|id| seen.insert(id, ()).is_none());
                if fresh && !project.iter().any(|(q, _)| *q == p) {
                    project.push((p, root.clone()));
                }
            }
        }
        project.sort_by(|a, b| {
            a.0.as_os_str().as_encoded_bytes().cmp(b.0.as_os_str().as_encoded_bytes())
        });
    }
    // One path per file, the first met in the order Gemini CLI reads them; the same path
    // again (in two of the lists) is kept.
    let mut first: HashMap<(u64, u64), PathBuf> = HashMap::new();
    let ext_paths = from_extensions.iter().map(|(p, _, _)| p);
    for p in global.iter().chain(ext_paths).chain(project.iter().map(|(p, _)| p)).chain(&memory) {
        if let Some(id) = identity(p) {
            first.entry(id).or_insert_with(|| p.clone());
        }
    }
    let flat = settings.pointer("/context/importFormat").and_then(Value::as_str) == Some("flat");
    let mut budget = Budget::default();
    let mut out: Vec<ContextFile> = Vec::new();
    let mut push = |path: &Path,
                    root: Option<&Path>,
                    kind: ContextFileKind,
                    extension: Option<String>| {
        if identity(path).is_some_and(|id| first.get(&id).is_some_and(|f| f != path)) {
            return;
        }
        let shown = path.display().to_string();
        let cap = budget.cap();
        let raw = match read_within(path, root, cap) {
            Ok(raw) => raw,
            Err(why) => {
                if let Some(error) = unread(why, &budget, cap, root) {
                    let (text, imports) = (String::new(), Vec::new());
                    let error = Some(error);
                    out.push(ContextFile { path: shown, kind, extension, text, imports, error });
                }
                return;
            }
        };
        budget.bytes = budget.bytes.saturating_sub(raw.len() as u64);
        let mut imports = Vec::new();
        let mut importer = Importer::new(path, &markers, &mut imports, &mut budget);
        let text = if flat { importer.flat(&raw, path) } else { importer.tree(&raw, path) };
        let text = js_trim(&text);
        if text.is_empty() {
            return;
        }
        let text = text.to_owned();
        out.push(ContextFile { path: shown, kind, extension, text, imports, error: None });
    };
    // The user's own global files may link anywhere (a dotfiles folder, a Nix store), as in
    // Gemini CLI: no repository or package writes them. The memory's folder is named by
    // `projects.json` and stays in `~/.gemini`; an extension's and a project's files stay in
    // their folders.
    for p in &global {
        push(p, None, ContextFileKind::Global, None);
    }
    for p in &memory {
        push(p, Some(&global_root), ContextFileKind::Memory, None);
    }
    for (p, ext, root) in &from_extensions {
        push(p, Some(root), ContextFileKind::Extension, Some(ext.clone()));
    }
    for (p, root) in &project {
        push(p, Some(root), ContextFileKind::Project, None);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upward_stops_at_the_project_root_and_skips_the_global_folder() -> anyhow::Result<()> {
        let root = tempfile::tempdir()?;
        let r = root.path();
        let home = r.join("home");
        let repo = home.join("code/repo");
        std::fs::create_dir_all(repo.join("pkg/sub"))?;
        std::fs::create_dir_all(repo.join(".git"))?;
        std::fs::create_dir_all(home.join(".gemini"))?;
        for f in [
            "code/GEMINI.md",
            "code/repo/GEMINI.md",
            "code/repo/pkg/sub/GEMINI.md",
            ".gemini/GEMINI.md",
        ] {
            std::fs::write(home.join(f), "x")?;
        }
        let names = vec!["GEMINI.md".to_owned()];
        let start = repo.join("pkg/sub");
        let stop = project_root(&start, &[".git".to_owned()]).unwrap_or_default();
        assert_eq!(stop, repo);
        assert_eq!(
            upward(&start, &stop, &names, &home.join(".gemini")),
            [repo.join("GEMINI.md"), repo.join("pkg/sub/GEMINI.md")]
        );
        // No marker: only the folder itself.
        assert_eq!(project_root(&home.join("code"), &[".git".to_owned()]), None);
        assert_eq!(project_root(&start, &[]), None);
        assert_eq!(
            file_names(&serde_json::json!({"context": {"fileName": ["GEMINI.md", "AGENTS.md"]}})),
            ["GEMINI.md", "AGENTS.md"]
        );
        // The names configured, then GEMINI.md: Gemini CLI never drops it.
        assert_eq!(
            file_names(
                &serde_json::json!({"context": {"fileName": [" ./A.md", "", "A.md", "b/../C.md"]}})
            ),
            ["A.md", "C.md", "GEMINI.md"]
        );
        assert_eq!(
            file_names(&serde_json::json!({"context": {"fileName": "X.md"}})),
            ["X.md", "GEMINI.md"]
        );
        assert_eq!(file_names(&serde_json::json!({})), ["GEMINI.md"]);
        Ok(())
    }
}
