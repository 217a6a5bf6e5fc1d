//! Writing Gemini CLI's files the way it does: atomically (temp file + rename), 0600 where the
//! reference uses it, and for settings files keeping the rest of the file, comments included.

use std::io::Write;
use std::path::{Path, PathBuf};

use jsonc_parser::cst::{CstInputValue, CstRootNode};
use serde_json::Value;

/// Why a file could not be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    /// The file exists but does not parse: refuse rather than lose what is in it.
    #[error("{}: {message}; fix the file first (nothing was written)", path.display())]
    Unparsable {
        /// The file.
        path: PathBuf,
        /// The parse error.
        message: String,
    },
    /// An OS call failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Write `text` to `path` atomically. A symlink is followed, so the link stays a link.
pub(crate) fn atomic_write(path: &Path, text: &str, mode: Option<u32>) -> Result<(), WriteError> {
    let io = |source| WriteError::Io { path: path.to_path_buf(), source };
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(io)?,
        _ => path.to_path_buf(),
    };
    let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::Builder::new().prefix(".geminid-").tempfile_in(dir).map_err(io)?;
    tmp.write_all(text.as_bytes()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = match mode {
            Some(m) => m,
            // Keep the mode of the file being replaced; new files get 0644 like the reference.
            None => {
                std::fs::metadata(&target).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o644)
            }
        };
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode)).map_err(io)?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    tmp.persist(&target).map_err(|e| io(e.error))?;
    Ok(())
}

fn to_input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(to_input).collect()),
        Value::Object(o) => {
            CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), to_input(v))).collect())
        }
    }
}

/// Set (or with `None`, remove) `key` inside the object at `parent` in a settings text,
/// keeping everything else as written. Returns the new text and whether the key was there.
pub(crate) fn edit_settings(
    path: &Path,
    text: &str,
    parent: &str,
    key: &str,
    value: Option<&Value>,
) -> Result<(String, bool), WriteError> {
    let text = if text.trim().is_empty() { "{}\n" } else { text };
    // Validate with the same rules as reading, so we never rewrite a file we could not read.
    super::files::parse_object(text)
        .map_err(|(_, message)| WriteError::Unparsable { path: path.to_path_buf(), message })?;
    let root = CstRootNode::parse(text, &Default::default())
        .map_err(|e| WriteError::Unparsable { path: path.to_path_buf(), message: e.to_string() })?;
    let object = root.object_value_or_set();
    let parent = object.object_value_or_set(parent);
    let existing = parent.get(key);
    let existed = existing.is_some();
    match (existing, value) {
        (Some(prop), Some(v)) => prop.set_value(to_input(v)),
        (None, Some(v)) => {
            parent.append(key, to_input(v));
        }
        (Some(prop), None) => prop.remove(),
        (None, None) => {}
    }
    let mut out = root.to_string();
    // A new file ends in a newline; an existing one keeps its own ending (Gemini CLI writes
    // none), so that an edit and its undo give back the same bytes.
    if text.ends_with('\n') && !out.ends_with('\n') {
        out.push('\n');
    }
    Ok((out, existed))
}

/// Read a file's text before changing it; a missing file is empty. What the reader refuses (a
/// FIFO, a device, a file over the size limit) is refused here too, and nothing is written.
pub(crate) fn read_text(path: &Path) -> Result<String, WriteError> {
    match super::files::read_input(path) {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Ok(String::new()),
        Err(super::files::InputError::Io(source)) => {
            Err(WriteError::Io { path: path.to_path_buf(), source })
        }
        Err(
            super::files::InputError::Refused(message)
            | super::files::InputError::Changing(message),
        ) => Err(WriteError::Unparsable { path: path.to_path_buf(), message }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn edits_keep_comments_and_other_settings() -> anyhow::Result<()> {
        let text = "{\n  // my theme\n  \"ui\": { \"theme\": \"dark\" }, /* keep */\n  \"mcpServers\": {\n    \"old\": { \"command\": \"o\" } // old one\n  }\n}\n";
        let p = Path::new("settings.json");
        let (out, existed) = edit_settings(
            p,
            text,
            "mcpServers",
            "new",
            Some(&json!({"command": "n", "args": ["a"]})),
        )?;
        assert!(!existed);
        assert!(
            out.contains("// my theme") && out.contains("/* keep */") && out.contains("// old one"),
            "{out}"
        );
        let v = super::super::files::parse_object(&out).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        assert_eq!(v["mcpServers"]["new"], json!({"command": "n", "args": ["a"]}));
        assert_eq!(v["ui"]["theme"], "dark");
        let (out, existed) = edit_settings(p, &out, "mcpServers", "old", None)?;
        assert!(existed && !out.contains("\"old\"") && out.contains("// my theme"), "{out}");
        let (out, existed) =
            edit_settings(p, "", "mcpServers", "x", Some(&json!({"url": "http://127.0.0.1:1"})))?;
        assert!(!existed);
        assert_eq!(
            serde_json::from_str::<Value>(&out)?,
            json!({"mcpServers": {"x": {"url": "http://127.0.0.1:1"}}})
        );
        assert!(matches!(
            edit_settings(p, "{ broken", "mcpServers", "x", None),
            Err(WriteError::Unparsable { .. })
        ));
        Ok(())
    }

    #[test]
    fn atomic_write_keeps_symlinks_and_sets_modes() -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir()?;
        let real = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        std::fs::write(&real, "{}")?;
        std::os::unix::fs::symlink(&real, &link)?;
        atomic_write(&link, "{\"a\":1}", None)?;
        assert!(std::fs::symlink_metadata(&link)?.file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&real)?, "{\"a\":1}");
        let secret = dir.path().join("sub/trusted.json");
        atomic_write(&secret, "{}", Some(0o600))?;
        assert_eq!(std::fs::metadata(&secret)?.permissions().mode() & 0o777, 0o600);
        Ok(())
    }
}
