//! The one-time warning for new project hooks. Gemini CLI keeps, in `~/.gemini/trusted_hooks.json`
//! (`{"<project path>": ["<name>:<command>", ...]}`), the hooks of each workspace's own settings
//! file it has already warned about; a hook not in it is announced once and then recorded. It
//! warns, it does not block: the hooks run either way.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::config::write::{WriteError, atomic_write, read_text};

/// A hook's key in the file: `name:command` (an empty name when it has none).
fn key(hook: &Map<String, Value>) -> Option<String> {
    let command = match hook.get("type").and_then(Value::as_str) {
        Some("command") => hook.get("command").and_then(Value::as_str).unwrap_or_default(),
        // Runtime hooks are registered by code, not written by a project.
        Some("runtime") => return None,
        _ => "",
    };
    let name = hook.get("name").and_then(Value::as_str).unwrap_or_default();
    Some(format!("{name}:{command}"))
}

/// Each hook of a settings file's `hooks`: its key and how it is shown (name, else command).
pub(crate) fn keys(hooks: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let Some(events) = hooks.as_object() else { return out };
    for defs in events.values().filter_map(Value::as_array) {
        for list in defs.iter().filter_map(|d| d.get("hooks")).filter_map(Value::as_array) {
            for hook in list.iter().filter_map(Value::as_object) {
                let Some(k) = key(hook) else { continue };
                let shown = ["name", "command"]
                    .iter()
                    .find_map(|f| hook.get(*f).and_then(Value::as_str).filter(|s| !s.is_empty()))
                    .unwrap_or("unknown-hook")
                    .to_owned();
                if !out.iter().any(|(seen, _)| *seen == k) {
                    out.push((k, shown));
                }
            }
        }
    }
    out
}

/// Why the announced hooks could not be recorded; the file is left as it was.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    /// It could not be read or written.
    #[error(transparent)]
    File(#[from] WriteError),
    /// It holds something else than a JSON object.
    #[error("{} is not a JSON object; fix or delete it (it is not rewritten)", .0.display())]
    NotAnObject(PathBuf),
    /// What it would hold could not be written as JSON.
    #[error("the announced hooks cannot be written as JSON: {0}")]
    Json(serde_json::Error),
}

/// The file's contents; an unreadable or unparsable file is an error naming it, and is not
/// rewritten (what it holds would be lost).
fn load(file: &Path) -> Result<Map<String, Value>, RecordError> {
    let text = read_text(file)?;
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(RecordError::NotAnObject(file.to_owned())),
    }
}

/// The hooks of `project`'s settings file (`keys`) that `file` does not know yet, as shown.
pub(crate) fn new_hooks(file: &Path, project: &str, keys: &[(String, String)]) -> Vec<String> {
    let known = load(file).unwrap_or_default();
    let known: Vec<&str> = known
        .get(project)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for (k, shown) in keys {
        if !known.contains(&k.as_str()) && !out.contains(shown) {
            out.push(shown.clone());
        }
    }
    out
}

/// Record `keys` as announced for `project`, keeping every other entry.
pub(crate) fn record(
    file: &Path,
    project: &str,
    keys: &[(String, String)],
) -> Result<(), RecordError> {
    let mut all = load(file)?;
    let entry = all.entry(project.to_owned()).or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    if let Value::Array(list) = entry {
        for (k, _) in keys {
            if !list.iter().any(|v| v.as_str() == Some(k)) {
                list.push(Value::String(k.clone()));
            }
        }
    }
    let text = serde_json::to_string_pretty(&all).map_err(RecordError::Json)?;
    Ok(atomic_write(file, &format!("{text}\n"), None)?)
}

/// The warning the user sees once.
pub(crate) fn notice(file: &Path, new: &[String]) -> String {
    let list: String = new.iter().map(|h| format!("\n  - {h}")).collect();
    format!(
        "This workspace's settings define project hooks you have not been told about:{list}\n\
         They run. If you did not add them, or do not trust this project, remove them from \
         .gemini/settings.json. (Said once: recorded in {}.)",
        file.display()
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn said_once_per_project_and_nothing_else_lost() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("trusted_hooks.json");
        let hooks = json!({
            "BeforeTool": [{"hooks": [
                {"type": "command", "command": "./check.sh", "name": "check"},
                {"type": "command", "command": "echo hi"},
                {"type": "runtime", "name": "in-code"}
            ]}],
            "AfterTool": [{"hooks": [{"type": "command", "command": "echo hi"}]}],
            "disabled": ["x"]
        });
        let k = keys(&hooks);
        assert_eq!(
            k,
            vec![
                ("check:./check.sh".to_owned(), "check".to_owned()),
                (":echo hi".to_owned(), "echo hi".to_owned())
            ]
        );
        assert_eq!(new_hooks(&file, "/p", &k), vec!["check", "echo hi"]);
        std::fs::write(&file, r#"{"/other": ["a:b"]}"#).unwrap();
        record(&file, "/p", &k).unwrap();
        assert!(new_hooks(&file, "/p", &k).is_empty());
        assert_eq!(new_hooks(&file, "/q", &k).len(), 2, "another project is told again");
        let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(kept["/other"], json!(["a:b"]));
        // A changed command is a new hook.
        let changed = keys(&json!({"BeforeTool": [{"hooks": [
            {"type": "command", "command": "./check.sh --strict", "name": "check"}]}]}));
        assert_eq!(new_hooks(&file, "/p", &changed), vec!["check"]);

        std::fs::write(&file, "{ not json").unwrap();
        let err = record(&file, "/p", &k).unwrap_err();
        assert!(matches!(err, RecordError::NotAnObject(_)), "{err:?}");
        assert!(err.to_string().contains("not rewritten"), "{err}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ not json");
    }
}
