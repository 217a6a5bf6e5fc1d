//! Where Gemini CLI keeps a workspace's private project memory: `~/.gemini/tmp/<project>/memory/`.
//!
//! `<project>` is the short name `~/.gemini/projects.json` gives the workspace folder (its
//! `projects` map, keyed by the absolute path), when the `.project_root` files in
//! `~/.gemini/tmp/<project>/` and `~/.gemini/history/<project>/` name that folder or are
//! missing; else the folder under either of those whose `.project_root` names it. Gemini CLI
//! makes a new one the first time a folder runs (its name in lower case, `-` for anything
//! not a letter or digit, a number added when taken) and copies the older
//! `~/.gemini/tmp/<sha256 of the path>/` into a folder that holds nothing else yet: what that
//! older folder holds is then the memory. geminid reads all this and writes none of it.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

const ROOT_FILE: &str = ".project_root";

fn owner(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join(ROOT_FILE)).ok().map(|s| s.trim().to_owned())
}

/// The project temporary folder Gemini CLI uses for `workspace` (absolute, `.` and `..`
/// taken out), or `None` when it has none yet and no older one to copy.
pub(super) fn project_temp_dir(home: &Path, workspace: &Path) -> Option<PathBuf> {
    let gemini = home.join(".gemini");
    let bases = [gemini.join("tmp"), gemini.join("history")];
    let key = workspace.display().to_string();
    let owned = |slug: &str| {
        !slug.is_empty()
            && !slug.contains('/')
            && slug != "."
            && slug != ".."
            && bases.iter().all(|b| owner(&b.join(slug)).is_none_or(|o| o == key))
    };
    let registry: Value = std::fs::read_to_string(gemini.join("projects.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let registered = registry
        .pointer("/projects")
        .and_then(Value::as_object)
        .filter(|m| m.values().all(Value::is_string))
        .and_then(|m| m.get(&key))
        .and_then(Value::as_str)
        .filter(|s| owned(s))
        .map(str::to_owned);
    let found = registered.or_else(|| {
        bases.iter().find_map(|b| {
            std::fs::read_dir(b).ok()?.flatten().find_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (owner(&e.path()).as_deref() == Some(key.as_str())).then_some(name)
            })
        })
    });
    let digest = Sha256::digest(key.as_bytes());
    let hash: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let older = bases[0].join(hash);
    match found {
        Some(slug) => {
            let dir = bases[0].join(slug);
            // A folder with nothing but its `.project_root` is filled from the older one.
            let empty = std::fs::read_dir(&dir)
                .map(|d| d.flatten().all(|e| e.file_name() == ROOT_FILE))
                .unwrap_or(true);
            Some(if empty && older.is_dir() { older } else { dir })
        }
        None => older.is_dir().then_some(older),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_the_markers_then_the_older_hashed_folder() -> anyhow::Result<()> {
        let root = tempfile::tempdir()?;
        let home = root.path();
        let ws = Path::new("/w/my proj");
        let tmp = home.join(".gemini/tmp");
        assert_eq!(project_temp_dir(home, ws), None);
        // The older folder, named by the path's SHA-256.
        let hash: String =
            Sha256::digest(b"/w/my proj").iter().map(|b| format!("{b:02x}")).collect();
        std::fs::create_dir_all(tmp.join(&hash))?;
        assert_eq!(project_temp_dir(home, ws), Some(tmp.join(&hash)));
        // A folder that names the workspace in its marker, with something in it.
        std::fs::create_dir_all(tmp.join("found/memory"))?;
        std::fs::write(tmp.join("found/.project_root"), "/w/my proj\n")?;
        assert_eq!(project_temp_dir(home, ws), Some(tmp.join("found")));
        // The registry's entry, its marker another's: not taken.
        std::fs::write(home.join(".gemini/projects.json"), r#"{"projects": {"/w/my proj": "p"}}"#)?;
        std::fs::create_dir_all(tmp.join("p/memory"))?;
        std::fs::write(tmp.join("p/.project_root"), "/elsewhere")?;
        assert_eq!(project_temp_dir(home, ws), Some(tmp.join("found")));
        std::fs::write(tmp.join("p/.project_root"), "/w/my proj")?;
        assert_eq!(project_temp_dir(home, ws), Some(tmp.join("p")));
        Ok(())
    }
}
