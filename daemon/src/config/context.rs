//! The context files Gemini CLI loads into the model's instructions for a session (its memory
//! discovery, `MemoryContextManager`): the user's global files (`~/.gemini/<name>`), the
//! enabled extensions' context files (sorted, each once), then, in a trusted folder, the
//! project's: for each of the session's folders (the workspace, then
//! `context.includeDirectories`), the files from the project root (the nearest folder above it
//! with a boundary marker, `.git` unless `context.memoryBoundaryMarkers` says otherwise; the
//! folder itself without one) down to the folder, sorted, the same file (by device and inode)
//! once. `<name>` is `context.fileName` (a name or a list; default `GEMINI.md`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use geminid_protocol::config::{ContextFile, ContextFileKind};
use serde_json::Value;

use super::Effective;
use super::env::Env;

/// The context file names the settings ask for.
pub(crate) fn file_names(settings: &Value) -> Vec<String> {
    match settings.pointer("/context/fileName") {
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        Some(Value::Array(a)) => {
            let names: Vec<String> = a
                .iter()
                .filter_map(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if names.is_empty() { vec!["GEMINI.md".to_owned()] } else { names }
        }
        _ => vec!["GEMINI.md".to_owned()],
    }
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
        found.push(names.iter().map(|n| dir.join(n)).filter(|p| p.is_file()).collect());
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

/// The context files of a session whose configuration is `effective` and whose environment
/// is `env`, in the order Gemini CLI loads them.
pub(crate) fn files(effective: &Effective, home: &Path, env: &Env) -> Vec<ContextFile> {
    let settings = &effective.public.settings;
    let names = file_names(settings);
    let global_dir = home.join(".gemini");
    let mut out: Vec<ContextFile> = Vec::new();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut push = |path: PathBuf, kind: ContextFileKind, extension: Option<String>| {
        if let Some(id) = identity(&path)
            && !seen.insert(id)
        {
            return;
        }
        out.push(ContextFile { path: path.display().to_string(), kind, extension });
    };
    for n in &names {
        let p = global_dir.join(n);
        if p.is_file() {
            push(p, ContextFileKind::Global, None);
        }
    }
    let mut from_extensions: Vec<(PathBuf, String)> = effective
        .extensions
        .iter()
        .flat_map(|c| c.context_files.iter().map(|f| (f.clone(), c.name.clone())))
        .collect();
    from_extensions.sort();
    from_extensions.dedup_by(|a, b| a.0 == b.0);
    for (path, ext) in from_extensions {
        push(path, ContextFileKind::Extension, Some(ext));
    }
    if effective.public.trust.trusted {
        let workspace = Path::new(&effective.public.workspace);
        let markers = markers(settings);
        let mut project: Vec<PathBuf> = super::folders::dirs(workspace, settings, env)
            .iter()
            .flat_map(|dir| {
                let stop = project_root(dir, &markers).unwrap_or_else(|| dir.clone());
                upward(dir, &stop, &names, &global_dir)
            })
            .collect();
        project.sort();
        project.dedup();
        for p in project {
            push(p, ContextFileKind::Project, None);
        }
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
            file_names(&serde_json::json!({"context": {"fileName": ["AGENTS.md", "GEMINI.md"]}})),
            ["AGENTS.md", "GEMINI.md"]
        );
        assert_eq!(file_names(&serde_json::json!({})), ["GEMINI.md"]);
        Ok(())
    }
}
