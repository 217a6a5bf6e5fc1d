//! What a discovery command printed, read as Gemini CLI's `ToolRegistry` reads it: a JSON array
//! whose items are `{function_declarations: [...]}`, `{functionDeclarations: [...]}` or a
//! declaration itself (anything with a `name`); a declaration's parameters are its
//! `parametersJsonSchema` when that is an object, else `{}` (a legacy `parameters` is not read).

use serde_json::{Map, Value};

/// One declared tool.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decl {
    /// Its own name (the call command's argument).
    pub(crate) name: String,
    /// Its description as declared.
    pub(crate) description: String,
    /// Its parameters' schema.
    pub(crate) parameters: Value,
}

/// The prefix of a custom tool's name.
pub(crate) const PREFIX: &str = "discovered_tool_";

/// The declarations in `stdout`, and what was skipped (in words); or why there are none.
pub(crate) fn parse(stdout: &str) -> Result<(Vec<Decl>, Vec<String>), String> {
    let items: Value =
        serde_json::from_str(stdout.trim()).map_err(|e| format!("its output is not JSON ({e})"))?;
    let Value::Array(items) = items else {
        return Err(format!(
            "it did not print a JSON array of tools (it printed {})",
            kind(&items)
        ));
    };
    let mut functions = Vec::new();
    let mut problems = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(mut item) = item else {
            problems.push(format!("item {i} is {}, not a tool: skipped", kind(&item)));
            continue;
        };
        let list = ["function_declarations", "functionDeclarations"]
            .into_iter()
            .find(|k| item.get(*k).is_some_and(Value::is_array));
        match list.and_then(|k| item.remove(k)) {
            Some(Value::Array(list)) => functions.extend(list),
            _ if truthy(item.get("name")) => functions.push(Value::Object(item)),
            _ => problems
                .push(format!("item {i} has no `name` and no `function_declarations`: skipped")),
        }
    }
    let mut decls = Vec::with_capacity(functions.len());
    for f in functions {
        let Some(name) = f.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
            problems.push(format!("a declaration without a name is skipped: {}", excerpt(&f)));
            continue;
        };
        let parameters = match f.get("parametersJsonSchema") {
            Some(v @ Value::Object(_)) => v.clone(),
            _ => Value::Object(Map::new()),
        };
        decls.push(Decl {
            name: name.to_owned(),
            description: f.get("description").and_then(Value::as_str).unwrap_or("").to_owned(),
            parameters,
        });
    }
    Ok((decls, problems))
}

/// JavaScript's truthiness, for `tool['name']`.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(_) => true,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn excerpt(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// A custom tool's description as Gemini CLI gives it to the model: its own, then how it was
/// discovered and how it is called.
pub(crate) fn description(own: &str, discovery: &str, call: &str, name: &str) -> String {
    format!(
        "{own}

This tool was discovered from the project by executing the command `{discovery}` on project root.
When called, this tool will execute the command `{call} {name}` on project root.
Tool discovery and call commands can be configured in project or user settings.

When called, the tool call command is executed as a subprocess.
On success, tool output is returned as a json string.
Otherwise, the following information is returned:

Stdout: Output on stdout stream. Can be `(empty)` or partial.
Stderr: Output on stderr stream. Can be `(empty)` or partial.
Error: Error or `(none)` if no error was reported for the subprocess.
Exit Code: Exit code or `(none)` if terminated by signal.
Signal: Signal number or `(none)` if no signal was received.
"
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_shape_gemini_cli_reads() {
        let out = json!([
            {"function_declarations": [{"name": "a", "description": "A"}]},
            {"functionDeclarations": [{"name": "b", "parametersJsonSchema": {"type": "object"}}]},
            {"name": "c", "parameters": {"type": "object", "properties": {"x": {}}}},
            {"name": "d", "parametersJsonSchema": ["not", "an", "object"]},
            {"description": "no name"},
            "a string",
            {"functionDeclarations": [{"description": "nameless"}, {"name": ""}]}
        ]);
        let (decls, problems) = parse(&out.to_string()).unwrap();
        let names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(decls[0].description, "A");
        assert_eq!(decls[1].parameters, json!({"type": "object"}));
        // Legacy `parameters` is not read; a non-object schema is `{}`.
        assert_eq!(decls[2].parameters, json!({}));
        assert_eq!(decls[3].parameters, json!({}));
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("item 4 has no `name`"), "{problems:?}");
        assert!(problems[1].contains("item 5 is a string"), "{problems:?}");
        assert!(problems[2].contains("without a name"), "{problems:?}");
    }

    /// Gemini CLI's tool-registry case: a schema keeps what the model API may not know
    /// (`format: uuid`) as it was declared.
    #[test]
    fn a_schema_is_kept_as_declared() {
        let schema = json!({"type": "object", "properties": {"some_string": {"type": "string", "format": "uuid"}}});
        let out = json!([{"name": "tool-with-bad-format", "description": "A tool with an invalid format property", "parametersJsonSchema": schema}]);
        let (decls, _) = parse(&out.to_string()).unwrap();
        assert_eq!(decls[0].parameters, schema);
    }

    #[test]
    fn what_is_no_list_of_tools_is_said() {
        for (out, says) in [
            (r#"{"name": "x"}"#, "printed an object"),
            ("", "not JSON"),
            ("[1, 2", "not JSON"),
            ("\"tools\"", "printed a string"),
        ] {
            let e = parse(out).unwrap_err();
            assert!(e.contains(says), "{out:?}: {e}");
        }
        assert_eq!(parse("  []\n").unwrap(), (vec![], vec![]));
    }
}
