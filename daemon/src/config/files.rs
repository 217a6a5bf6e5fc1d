//! Reading one settings-style JSON file: comments allowed (as strip-json-comments does), no
//! other extensions; problems become diagnostics with line and column.

use std::path::Path;

use geminid_protocol::config::{Diagnostic, Severity};
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};
use serde_json::Value;

/// What reading a file gave.
#[derive(Debug, Clone, PartialEq)]
pub enum FileRead {
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
pub fn diagnostic(
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

/// Read and parse `path`, which must hold a JSON object.
pub fn read_object(path: &Path) -> FileRead {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return FileRead::Missing,
        Err(e) => {
            return FileRead::Failed(diagnostic(
                Severity::Error,
                path,
                None,
                format!("cannot read: {e}"),
            ));
        }
    };
    match parse_object(&text) {
        Ok(value) => FileRead::Parsed { value, text },
        Err((pos, message)) => FileRead::Failed(diagnostic(Severity::Error, path, pos, message)),
    }
}

/// Parse text that must hold one JSON object.
pub fn parse_object(text: &str) -> Result<Value, (Option<(u32, u32)>, String)> {
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

/// Line and column (1-based) of the property at `path` in `text`, or of the deepest part of
/// the path that exists.
pub fn position(text: &str, path: &[&str]) -> Option<(u32, u32)> {
    let ast = parse_to_ast(text, &CollectOptions::default(), &options()).ok()?;
    let mut value = ast.value.as_ref()?;
    let mut offset = None;
    for key in path {
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
    }
}
