//! Reading one settings-style JSON file: comments allowed (as strip-json-comments does), no
//! other extensions; problems become diagnostics with line and column.

use std::path::Path;

use geminid_protocol::config::{Diagnostic, Severity};
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};
use serde_json::Value;

/// What reading a file gave.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FileRead {
    /// It does not exist.
    Missing,
    /// It parsed; the text is kept to locate later diagnostics.
    Parsed {
        /// Its contents.
        value: Value,
        /// Its text.
        text: String,
    },
    /// It exists but could not be read or parsed.
    Failed(Diagnostic),
}

fn options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_extended_string_escapes: false,
        allow_non_finite_numbers: false,
    }
}

/// A diagnostic about `file`.
pub(crate) fn diagnostic(
    severity: Severity,
    file: &Path,
    pos: Option<(u32, u32)>,
    message: String,
) -> Diagnostic {
    Diagnostic {
        severity,
        file: file.display().to_string(),
        line: pos.map(|p| p.0),
        column: pos.map(|p| p.1),
        message,
    }
}

/// The largest input file read (settings files are a few KiB; this bounds what a mistake,
/// such as a log file or a link to `/dev/zero` where a settings file should be, can cost).
pub(crate) const MAX_INPUT_FILE: u64 = 4 << 20;

/// Why an input file was not read.
#[derive(Debug)]
pub(crate) enum InputError {
    /// Not something to read: not a regular file, or too large (the message says which).
    Refused(String),
    /// Reading it failed.
    Io(std::io::Error),
}

/// The text of an input file, `None` if it does not exist. Only a regular file of at most
/// [`MAX_INPUT_FILE`] bytes is read: a FIFO would block the reader until someone writes it,
/// and a device or a huge file would take time and memory from every client. The read itself
/// leaves the daemon's event loop (`block_in_place`) when it runs on one.
pub(crate) fn read_input(path: &Path) -> Result<Option<String>, InputError> {
    let too_big = || {
        InputError::Refused(format!(
            "more than the {} MiB a settings file may have; it is not read",
            MAX_INPUT_FILE >> 20
        ))
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(InputError::Io(e)),
        Ok(m) if !m.is_file() => {
            return Err(InputError::Refused(format!(
                "not a regular file ({}); it is not read, so that nothing blocks on it",
                kind_of(&m)
            )));
        }
        Ok(m) if m.len() > MAX_INPUT_FILE => return Err(too_big()),
        Ok(_) => {}
    }
    let read = || -> std::io::Result<String> {
        use std::io::Read;
        let mut text = String::new();
        // The size may have changed since the check: read no more than the cap, plus one byte
        // to notice.
        std::fs::File::open(path)?.take(MAX_INPUT_FILE + 1).read_to_string(&mut text)?;
        Ok(text)
    };
    match off_loop(read) {
        Ok(t) if t.len() as u64 > MAX_INPUT_FILE => Err(too_big()),
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(InputError::Io(e)),
    }
}

/// Run file system work that may take a while: off the event loop's worker (`block_in_place`)
/// when called on one, so other connections are served meanwhile; as it is elsewhere.
pub(crate) fn off_loop<T>(work: impl FnOnce() -> T) -> T {
    let on_event_loop = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if on_event_loop { tokio::task::block_in_place(work) } else { work() }
}

/// Read and parse `path`, which must hold a JSON object (see [`read_input`] for what is read).
pub(crate) fn read_object(path: &Path) -> FileRead {
    let failed =
        |message: String| FileRead::Failed(diagnostic(Severity::Error, path, None, message));
    let text = match read_input(path) {
        Ok(Some(t)) => t,
        Ok(None) => return FileRead::Missing,
        Err(InputError::Refused(why)) => return failed(why),
        Err(InputError::Io(e)) => return failed(format!("cannot read: {e}")),
    };
    match parse_object(&text) {
        Ok(value) => FileRead::Parsed { value, text },
        Err((pos, message)) => FileRead::Failed(diagnostic(Severity::Error, path, pos, message)),
    }
}

/// What a file system entry is, for a message.
fn kind_of(m: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if m.is_dir() { "a directory" } else { "not a file" }
}

/// Parse text that must hold one JSON object.
pub(crate) fn parse_object(text: &str) -> Result<Value, (Option<(u32, u32)>, String)> {
    let ast = parse_to_ast(text, &CollectOptions::default(), &options()).map_err(|e| {
        let pos = (to_u32(e.line_display()), to_u32(e.column_display()));
        (Some(pos), format!("invalid JSON: {}", e.kind()))
    })?;
    match ast.value.map(Value::from) {
        Some(v @ Value::Object(_)) => Ok(v),
        Some(_) => Err((Some((1, 1)), "the file must hold a JSON object".to_owned())),
        None => Err((None, "the file is empty".to_owned())),
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Line and column (1-based) of the property at `path` in `text` (a number picks an array's
/// element), or of the deepest part of the path that exists.
pub(crate) fn position(text: &str, path: &[&str]) -> Option<(u32, u32)> {
    let ast = parse_to_ast(text, &CollectOptions::default(), &options()).ok()?;
    let mut value = ast.value.as_ref()?;
    let mut offset = None;
    for key in path {
        if let (Some(array), Ok(i)) = (value.as_array(), key.parse::<usize>()) {
            let Some(element) = array.elements.get(i) else { break };
            offset = Some(element.range().start);
            value = element;
            continue;
        }
        let Some(prop) = value.as_object().and_then(|o| o.get(key)) else { break };
        offset = Some(prop.range.start);
        value = &prop.value;
    }
    let offset = offset?;
    let before = text.get(..offset)?;
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Some((to_u32(line), to_u32(column)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_yes_trailing_commas_no() {
        assert!(parse_object("// c\n{ /* x */ \"a\": 1 }").is_ok());
        let (pos, msg) = parse_object("{\n  \"a\": 1,\n}").err().unwrap_or_default();
        assert_eq!(pos.map(|p| p.0), Some(2), "the comma is on line 2: {msg}");
        assert!(parse_object("").err().is_some_and(|e| e.1.contains("empty")));
        assert!(parse_object("[1]").err().is_some_and(|e| e.1.contains("JSON object")));
        assert!(parse_object("{\"a\": ").is_err());
    }

    #[test]
    fn positions_point_at_the_property() {
        let text = "{\n  \"mcpServers\": {\n    \"x\": { \"command\": 5 }\n  }\n}";
        assert_eq!(position(text, &["mcpServers", "x", "command"]), Some((3, 12)));
        assert_eq!(position(text, &["mcpServers", "x", "nope"]), Some((3, 5)));
        assert_eq!(position(text, &["other"]), None);
        let hooks = "{\n  \"hooks\": {\"BeforeTool\": [\n    {\"hooks\": []},\n    {\"hooks\": [{\"type\": \"x\"}]}]}}";
        assert_eq!(position(hooks, &["hooks", "BeforeTool", "1", "hooks", "0"]), Some((4, 16)));
        assert_eq!(position(hooks, &["hooks", "BeforeTool", "7"]), Some((2, 13)));
    }
}
