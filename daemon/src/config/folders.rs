//! A session's folders: its workspace and its `context.includeDirectories` (a relative one
//! against the workspace, `~` against `HOME`), each once, in that order. Context files are
//! looked for in them, and they are the roots its MCP servers are given (`mcp::roots`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::env::Env;

fn expand(dir: &str, workspace: &Path, env: &Env) -> Option<PathBuf> {
    let dir = dir.trim();
    if dir.is_empty() {
        return None;
    }
    let path = match dir.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = env.get("HOME").filter(|h| Path::new(h.as_str()).is_absolute())?;
            PathBuf::from(home).join(rest.trim_start_matches('/'))
        }
        _ => workspace.join(dir),
    };
    Some(normalize(&path))
}

/// `.` and `..` taken out without touching the file system (a folder that does not exist yet
/// is still a root; a server asking finds out).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A session's folders: its workspace, then `context.includeDirectories` (expanded, each
/// once).
pub(crate) fn dirs(workspace: &Path, settings: &Value, env: &Env) -> Vec<PathBuf> {
    let extra = settings
        .pointer("/context/includeDirectories")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(|d| expand(d, workspace, env));
    let mut dirs: Vec<PathBuf> = Vec::new();
    for d in std::iter::once(normalize(workspace)).chain(extra) {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}
