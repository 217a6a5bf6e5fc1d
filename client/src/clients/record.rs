//! What `gemctl clients connect` keeps beside geminid's state, so `disconnect` can give the
//! user's bytes back: `~/.gemini/geminid/clients/<client>/` holds `original` (the file as it
//! was, absent when there was none), `written` (the file as connect left it) and
//! `record.json` (which servers moved to geminid, which stayed with the client). Files are
//! written whole through a temporary file and a rename, keeping a file's permissions, and a
//! link (a dotfiles manager's) is written through, not replaced.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::kinds::{Place, gemini_dir};

/// A client's connection, as `record.json` holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub client: String,
    pub file: String,
    /// Whether the file existed before connect.
    pub existed: bool,
    /// The servers connect moved into geminid's servers.json, as written there.
    pub moved: serde_json::Map<String, Value>,
    /// The servers the client reaches through geminid.
    pub gateways: Vec<String>,
    /// The client's servers left as they were, each with why.
    pub kept: Vec<(String, String)>,
    /// The project folder, for a project's file (`--project DIR`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
}

/// The project folders with a connection recorded, each with its client's word.
pub fn projects() -> Vec<(String, PathBuf)> {
    let Some(gemini) = gemini_dir() else { return Vec::new() };
    let dir = gemini.join("geminid").join("clients").join("projects");
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut all: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("record.json")).ok())
        .filter_map(|t| serde_json::from_str::<Record>(&t).ok())
        .filter_map(|r| Some((r.client, PathBuf::from(r.project?))))
        .collect();
    all.sort();
    all
}

/// The folder of a connection's record: `clients/<client>` for the user's file,
/// `clients/projects/<client>-<hash of the folder>` for a project's.
pub fn dir(place: &Place) -> Result<PathBuf> {
    let gemini = gemini_dir().ok_or_else(|| anyhow!("cannot find the home folder: set HOME"))?;
    let clients = gemini.join("geminid").join("clients");
    Ok(match &place.project {
        None => clients.join(place.kind.word()),
        Some(dir) => {
            clients.join("projects").join(format!("{}-{:016x}", place.kind.word(), fnv(dir)))
        }
    })
}

/// FNV-1a of a folder's path: a stable record name (the path itself is in the record).
fn fnv(dir: &Path) -> u64 {
    dir.to_string_lossy()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A saved connection: the record, the original bytes, the written ones.
#[derive(Debug)]
pub struct Saved {
    pub record: Record,
    pub original: Option<String>,
    pub written: Option<String>,
}

/// `kind`'s saved connection, `None` when it is not connected; an error names the damage.
pub fn load(place: &Place) -> Result<Option<Saved>> {
    let dir = dir(place)?;
    if !dir.exists() {
        return Ok(None);
    }
    let damaged = |why: String| {
        anyhow!(
            "the record of {}'s connection in {} is damaged ({why}); the client's file was not \
             touched. Put the file back yourself from {} if it is there, then remove {} to \
             forget the connection",
            place.kind.label(),
            dir.display(),
            dir.join("original").display(),
            dir.display()
        )
    };
    let text = std::fs::read_to_string(dir.join("record.json"))
        .map_err(|e| damaged(format!("record.json: {e}")))?;
    let record: Record =
        serde_json::from_str(&text).map_err(|e| damaged(format!("record.json: {e}")))?;
    let read = |name: &str| match std::fs::read(dir.join(name)) {
        Ok(b) => {
            String::from_utf8(b).map(Some).map_err(|_| damaged(format!("{name} is not UTF-8")))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(damaged(format!("{name}: {e}"))),
    };
    let original = read("original")?;
    if record.existed && original.is_none() {
        return Err(damaged("the copy of the original file is missing".into()));
    }
    Ok(Some(Saved { record, original, written: read("written")? }))
}

/// Keep `original` and the record, before the client's file changes.
pub fn begin(place: &Place, record: &Record, original: Option<&str>) -> Result<PathBuf> {
    let dir = dir(place)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Some(text) = original {
        write(&dir.join("original"), text, Some(0o600))?;
    }
    write(&dir.join("record.json"), &serde_json::to_string_pretty(record)?, Some(0o600))?;
    Ok(dir)
}

/// The file as connect left it.
pub fn finish(place: &Place, written: &str) -> Result<()> {
    write(&dir(place)?.join("written"), written, Some(0o600))
}

/// Forget the connection.
pub fn forget(place: &Place) -> Result<()> {
    let dir = dir(place)?;
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))
}

/// The file's bytes as text: `None` when there is no file.
pub fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read(path) {
        Ok(b) => String::from_utf8(b)
            .map(Some)
            .map_err(|_| anyhow!("{} is not UTF-8 text; nothing was changed", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow!("cannot read {}: {e}", path.display())),
    }
}

/// Write `text` to `path` whole (a temporary file renamed over it), keeping the permissions it
/// had (else `mode`), through a link to the file it leads to.
pub fn write(path: &Path, text: &str, mode: Option<u32>) -> Result<()> {
    let path = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path)
            .with_context(|| format!("{} is a link that leads nowhere", path.display()))?,
        _ => path.to_path_buf(),
    };
    let dir = path.parent().ok_or_else(|| anyhow!("{} has no folder", path.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.gemctl-{}", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    let kept = std::fs::metadata(&path).map(|m| m.permissions());
    let set = match kept {
        Ok(p) => std::fs::set_permissions(&tmp, p),
        Err(_) => set_mode(&tmp, mode),
    };
    let done = set.and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(anyhow!("cannot write {}: {e}", path.display()));
    }
    Ok(())
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: Option<u32>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match mode {
        Some(m) => std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)),
        None => Ok(()),
    }
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: Option<u32>) -> std::io::Result<()> {
    Ok(())
}
