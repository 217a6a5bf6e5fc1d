//! The configuration writes behind `trust/*` and `mcp/add|remove|enable|disable`, with Gemini
//! CLI's rules and messages. They write the same files the CLI writes.

use std::path::{Path, PathBuf};

use geminid_protocol::config::{
    McpAddResult, McpRemoveResult, Severity, TrustGetResult, TrustLevel, TrustSetResult, WriteScope,
};
use serde_json::Value;

use super::write::{WriteError, atomic_write, edit_settings, read_text};
use super::{ConfigPaths, enablement, mcp, trust};

/// Why a configuration operation was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpError {
    /// The request breaks a rule (the message says which, in the reference's words).
    #[error("{0}")]
    Refused(String),
    /// A file could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

fn canonical_dir(raw: &str) -> Result<PathBuf, OpError> {
    let p = Path::new(raw);
    if !p.is_absolute() {
        return Err(OpError::Refused(format!("{raw:?} must be an absolute path")));
    }
    let c = std::fs::canonicalize(p).map_err(|e| OpError::Refused(format!("{raw:?}: {e}")))?;
    if !c.is_dir() {
        return Err(OpError::Refused(format!("{raw:?} is not a directory")));
    }
    Ok(c)
}

/// `trust/get`.
pub(crate) fn trust_get(
    paths: &ConfigPaths,
    raw: &str,
    folder_trust: bool,
) -> Result<TrustGetResult, OpError> {
    // A folder that does not exist (yet) is answered by the rules as written, as Gemini CLI's
    // `isPathTrusted` answers it; one that exists must be a directory.
    let path = match std::fs::symlink_metadata(raw) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && Path::new(raw).is_absolute() => {
            Path::new(raw).components().collect()
        }
        _ => canonical_dir(raw)?,
    };
    let (rules, problem) = trust::load(&paths.trusted_folders);
    if let Some(d) = problem {
        return Err(OpError::Refused(d.message));
    }
    let key = path.display().to_string();
    let mut info = trust::decide(&rules, &path, folder_trust, None);
    if !path.exists() {
        info.reason.push_str(" (the folder does not exist)");
    }
    Ok(TrustGetResult { trust: info, rule: rules.rules.get(&key).copied(), path: key })
}

/// `trust/set`: write or remove the rule for a directory (0600, atomic).
pub(crate) fn trust_set(
    paths: &ConfigPaths,
    raw: &str,
    level: Option<TrustLevel>,
) -> Result<TrustSetResult, OpError> {
    let path = canonical_dir(raw)?;
    let file = &paths.trusted_folders;
    let (mut rules, problem) = trust::load(file);
    if let Some(d) = problem {
        return Err(OpError::Refused(format!("{} (nothing was written)", d.message)));
    }
    let key = path.display().to_string();
    let previous = match level {
        Some(l) => rules.rules.insert(key.clone(), l),
        None => rules.rules.remove(&key),
    };
    let text = serde_json::to_string_pretty(&rules.rules).unwrap_or_else(|_| "{}".into());
    atomic_write(file, &format!("{text}\n"), Some(0o600))?;
    Ok(TrustSetResult { path: key, previous, level, file: file.display().to_string() })
}

/// The settings file a write scope means for `workspace`.
pub(crate) fn scope_file(
    paths: &ConfigPaths,
    workspace: &Path,
    scope: WriteScope,
) -> Result<PathBuf, OpError> {
    match scope {
        WriteScope::User => Ok(paths.user.clone()),
        WriteScope::Project => paths.workspace_settings(workspace).ok_or_else(|| {
            OpError::Refused(
                "Please use --scope user to edit settings in the home directory.".into(),
            )
        }),
    }
}

/// `mcp/add`: validate the entry and write it into the scope's settings file.
pub(crate) fn mcp_add(
    paths: &ConfigPaths,
    workspace: &Path,
    scope: WriteScope,
    name: &str,
    config: &Value,
) -> Result<McpAddResult, OpError> {
    if name.trim().is_empty() {
        return Err(OpError::Refused("the server name must not be empty".into()));
    }
    let (parsed, problems) = mcp::parse_server(name, config);
    let errors: Vec<_> = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| p.message.clone())
        .collect();
    let Some(parsed) = parsed.filter(|_| errors.is_empty()) else {
        return Err(OpError::Refused(errors.join("; ")));
    };
    let file = scope_file(paths, workspace, scope)?;
    let (text, updated) =
        edit_settings(&file, &read_text(&file)?, "mcpServers", name, Some(config))?;
    atomic_write(&file, &text, None)?;
    Ok(McpAddResult {
        file: file.display().to_string(),
        updated,
        transport: parsed.transport().to_owned(),
    })
}

/// `mcp/remove`.
pub(crate) fn mcp_remove(
    paths: &ConfigPaths,
    workspace: &Path,
    scope: WriteScope,
    name: &str,
) -> Result<McpRemoveResult, OpError> {
    let file = scope_file(paths, workspace, scope)?;
    let text = read_text(&file)?;
    let (new_text, removed) = edit_settings(&file, &text, "mcpServers", name, None)?;
    if removed {
        atomic_write(&file, &new_text, None)?;
    }
    Ok(McpRemoveResult { file: file.display().to_string(), removed })
}

/// Persistent enable/disable in `mcp-server-enablement.json`: disable writes
/// `{"<name>": {"enabled": false}}`, enable deletes the key.
pub(crate) fn set_enabled(paths: &ConfigPaths, name: &str, enabled: bool) -> Result<(), OpError> {
    let file = &paths.enablement;
    let text = read_text(file)?;
    let key = enablement::normalize(name);
    let mut map = if text.trim().is_empty() {
        serde_json::Map::new()
    } else {
        match super::files::parse_object(&text) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(WriteError::Unparsable {
                    path: file.clone(),
                    message: "invalid JSON".into(),
                }
                .into());
            }
        }
    };
    if enabled {
        map.remove(&key);
    } else {
        map.insert(key, serde_json::json!({ "enabled": false }));
    }
    let text = serde_json::to_string_pretty(&map).unwrap_or_else(|_| "{}".into());
    atomic_write(file, &format!("{text}\n"), None)?;
    Ok(())
}

/// `hooks/enable` and `hooks/disable`: `hooksConfig.disabled` in the scope's file, the rest of
/// the file kept. Returns the file, its list now, and the other files whose list still names
/// the hook.
pub(crate) fn set_hook_enabled(
    paths: &ConfigPaths,
    workspace: &Path,
    scope: WriteScope,
    name: &str,
    enabled: bool,
) -> Result<(PathBuf, Vec<String>, Vec<String>), OpError> {
    let file = scope_file(paths, workspace, scope)?;
    let text = read_text(&file)?;
    let disabled_in = |text: &str| names_at(text, "/hooksConfig/disabled");
    let mut list = if text.trim().is_empty() { Vec::new() } else { disabled_in(&text) };
    list.retain(|n| n != name);
    if !enabled {
        list.push(name.to_owned());
    }
    let value =
        serde_json::Value::Array(list.iter().cloned().map(serde_json::Value::String).collect());
    let (new_text, _) = edit_settings(&file, &text, "hooksConfig", "disabled", Some(&value))?;
    atomic_write(&file, &new_text, None)?;
    let mut others = Vec::new();
    if enabled {
        let mut candidates =
            vec![paths.user.clone(), paths.system.clone(), paths.system_defaults.clone()];
        candidates.extend(paths.workspace_settings(workspace));
        for other in candidates.into_iter().filter(|f| *f != file) {
            if let Ok(t) = read_text(&other)
                && disabled_in(&t).iter().any(|n| n == name)
            {
                others.push(other.display().to_string());
            }
        }
    }
    Ok((file, list, others))
}

/// The strings of the list at `pointer` in a settings text (none when it cannot be read).
fn names_at(text: &str, pointer: &str) -> Vec<String> {
    super::files::parse_object(text)
        .ok()
        .and_then(|v| v.pointer(pointer).and_then(Value::as_array).cloned())
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// `skills/disable`: the name added to the scope's `skills.disabled`; `skills/enable`: removed
/// from the user's and the workspace's (names compared without case, as Gemini CLI matches
/// them). Returns the files written, and the files not written whose list still names it.
pub(crate) fn set_skill_enabled(
    paths: &ConfigPaths,
    workspace: &Path,
    scope: WriteScope,
    name: &str,
    enabled: bool,
) -> Result<(Vec<PathBuf>, Vec<String>), OpError> {
    const AT: &str = "/skills/disabled";
    let lower = name.to_lowercase();
    let files = if enabled {
        let mut f = vec![paths.user.clone()];
        f.extend(paths.workspace_settings(workspace));
        f
    } else {
        vec![scope_file(paths, workspace, scope)?]
    };
    let mut written = Vec::new();
    for file in files {
        let text = read_text(&file)?;
        let mut list = names_at(&text, AT);
        let listed = list.iter().any(|n| n.to_lowercase() == lower);
        if enabled != listed {
            continue;
        }
        list.retain(|n| n.to_lowercase() != lower);
        if !enabled {
            list.push(name.to_owned());
        }
        let value = Value::Array(list.into_iter().map(Value::String).collect());
        let (new_text, _) = edit_settings(&file, &text, "skills", "disabled", Some(&value))?;
        atomic_write(&file, &new_text, None)?;
        written.push(file);
    }
    let mut still = Vec::new();
    if enabled {
        for other in [&paths.system, &paths.system_defaults] {
            if let Ok(t) = read_text(other)
                && names_at(&t, AT).iter().any(|n| n.to_lowercase() == lower)
            {
                still.push(other.display().to_string());
            }
        }
    }
    Ok((written, still))
}
