//! Tools as Gemini sees them (COMPAT §2.3–2.5): fully qualified names, declarations with the
//! reference's schema transforms, include/exclude.

use serde_json::{Map, Value, json};

/// Longest function name Gemini accepts.
pub(crate) const MAX_NAME: usize = 63;

/// The parameter Gemini CLI adds to every tool whose schema is an object.
pub(crate) const WAIT_FOR_PREVIOUS_PARAM: &str = "wait_for_previous";

/// The description of the `wait_for_previous` parameter Gemini CLI adds to every tool.
pub(crate) const WAIT_FOR_PREVIOUS: &str = "Set to true to wait for all previously requested tools in this turn to complete before starting. Set to false (or omit) to run in parallel. Use true when this tool depends on the output of previous tools.";

/// `mcp_{server}_{tool}`, sanitized and shortened as Gemini CLI's `generateValidName` does.
pub(crate) fn fqn(server: &str, tool: &str) -> String {
    let raw = format!("{server}_{tool}");
    let mut name = if raw.starts_with("mcp_") { raw } else { format!("mcp_{raw}") };
    name =
        name.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    shorten(&name)
}

/// Whether `fqn` could be a tool of the server named `server` (its name starts as that
/// server's tools' names do). Only for explaining and waiting: tools are found by name in the
/// session's table, never by splitting names.
pub(crate) fn is_of_server(fqn: &str, server: &str) -> bool {
    fqn.starts_with(&self::fqn(server, ""))
}

/// More than 63 characters: the first 30, `...`, the last 30.
fn shorten(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= MAX_NAME {
        return name.to_owned();
    }
    let head: String = chars[..30].iter().collect();
    let tail: String = chars[chars.len() - 30..].iter().collect();
    format!("{head}...{tail}")
}

/// A name that collided, made unique deterministically: `__2`, `__3`, … appended (the name
/// shortened first so the result still fits 63 characters).
pub(crate) fn disambiguate(name: &str, n: usize) -> String {
    let suffix = format!("__{n}");
    let room = MAX_NAME - suffix.len();
    let chars: Vec<char> = name.chars().collect();
    let base: String =
        if chars.len() > room { chars[..room].iter().collect() } else { name.to_owned() };
    format!("{base}{suffix}")
}

/// `includeTools` / `excludeTools` (COMPAT §2.5).
pub(crate) fn enabled(tool: &str, include: Option<&[String]>, exclude: Option<&[String]>) -> bool {
    if tool.is_empty() || exclude.is_some_and(|e| e.iter().any(|x| x == tool)) {
        return false;
    }
    include.is_none_or(|inc| inc.iter().any(|t| t == tool || t.starts_with(&format!("{tool}("))))
}

/// Gemini CLI's transform of an MCP `inputSchema` into `parametersJsonSchema`: a missing schema
/// becomes an empty object schema, `type: [T, "null"]` pairs become `type: T, nullable: true`
/// everywhere, and an object schema gains the `wait_for_previous` parameter. Everything else
/// (`$defs`, `$ref`, `anyOf`, `default`, `format`, `enum`, ...) passes through.
pub(crate) fn parameters_schema(input: Option<&Value>) -> Value {
    let mut schema = match input {
        Some(v @ Value::Object(_)) => v.clone(),
        _ => json!({ "type": "object", "properties": {} }),
    };
    nullable_pairs(&mut schema);
    with_wait_for_previous(schema)
}

/// An object schema (whose `properties`, if any, are an object) with Gemini CLI's
/// `wait_for_previous` parameter added; any other schema as it is.
pub(crate) fn with_wait_for_previous(mut schema: Value) -> Value {
    if schema["type"] == "object" {
        let has_object_properties =
            matches!(schema.get("properties"), None | Some(Value::Object(_)));
        if has_object_properties && let Some(obj) = schema.as_object_mut() {
            let props = obj.entry("properties").or_insert_with(|| Value::Object(Map::new()));
            if let Some(props) = props.as_object_mut() {
                props.insert(
                    "wait_for_previous".into(),
                    json!({ "type": "boolean", "description": WAIT_FOR_PREVIOUS }),
                );
            }
        }
    }
    schema
}

/// Whether the declaration built from `input` offers `wait_for_previous` although the server
/// did not declare it (so the daemon, not the server, is the one to take it).
pub(crate) fn offers_wait_for_previous(input: Option<&Value>) -> bool {
    match input {
        Some(Value::Object(schema)) => {
            schema.get("type").is_some_and(|t| t == "object")
                && match schema.get("properties") {
                    None => true,
                    Some(Value::Object(props)) => !props.contains_key(WAIT_FOR_PREVIOUS_PARAM),
                    Some(_) => false,
                }
        }
        // No schema (or not an object): the declaration is the empty object schema.
        _ => true,
    }
}

fn nullable_pairs(v: &mut Value) {
    match v {
        Value::Object(map) => {
            // Gemini CLI's rule exactly: two types, the first `"null"` found, the other one
            // taken when it is a string (so `["null", "null"]` becomes `"null"`, nullable).
            if let Some(Value::Array(types)) = map.get("type")
                && types.len() == 2
                && let Some(at) = types.iter().position(|t| t == "null")
                && let Some(other) = types.get(1 - at).filter(|t| t.is_string()).cloned()
            {
                map.insert("type".into(), other);
                map.insert("nullable".into(), Value::Bool(true));
            }
            for child in map.values_mut() {
                nullable_pairs(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(nullable_pairs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn names_follow_generate_valid_name() {
        assert_eq!(fqn("github", "create_issue"), "mcp_github_create_issue");
        assert_eq!(fqn("mcp_x", "t"), "mcp_x_t", "no double prefix");
        assert_eq!(fqn("my server", "do/it!"), "mcp_my_server_do_it_");
        assert_eq!(fqn("a.b:c-d", "e"), "mcp_a.b:c-d_e");
        let long = fqn("server", &"t".repeat(80));
        assert_eq!(long.len(), 63);
        assert_eq!(&long[..30], "mcp_server_ttttttttttttttttttt");
        assert_eq!(&long[30..33], "...");
        let d = disambiguate(&long, 2);
        assert_eq!((d.len(), d.ends_with("__2")), (63, true));
        assert_eq!(disambiguate("mcp_a_b", 3), "mcp_a_b__3");
    }

    #[test]
    fn include_and_exclude() {
        let inc = vec!["a".to_owned(), "b(x)".to_owned()];
        assert!(enabled("a", Some(&inc), None));
        assert!(enabled("b", Some(&inc), None), "prefix with '(' matches");
        assert!(!enabled("c", Some(&inc), None));
        assert!(!enabled("a", Some(&inc), Some(&["a".to_owned()])), "exclude wins");
        assert!(enabled("z", None, None));
        assert!(!enabled("", None, None));
    }

    #[test]
    fn schema_transforms() {
        let input = json!({
            "type": "object",
            "$defs": { "pt": { "type": ["number", "null"] } },
            "properties": {
                "a": { "type": ["string", "null"] },
                "b": { "type": ["string", "number", "null"] },
                "c": { "type": "array", "items": { "type": ["integer", "null"] } },
                "d": { "$ref": "#/$defs/pt", "default": 1, "format": "x" }
            },
            "additionalProperties": false
        });
        let out = parameters_schema(Some(&input));
        assert_eq!(out["properties"]["a"], json!({"type": "string", "nullable": true}));
        assert_eq!(out["properties"]["b"]["type"], json!(["string", "number", "null"]));
        assert_eq!(out["properties"]["c"]["items"], json!({"type": "integer", "nullable": true}));
        assert_eq!(out["$defs"]["pt"], json!({"type": "number", "nullable": true}));
        assert_eq!(out["properties"]["d"], input["properties"]["d"]);
        assert_eq!(out["additionalProperties"], false);
        assert_eq!(out["properties"]["wait_for_previous"]["type"], "boolean");
        // Gemini CLI's transform run on the same edge cases (node, Gemini CLI 0.61's code).
        let edge = json!({"type": "object", "properties": {
            "nn": {"type": ["null", "null"]},
            "n5": {"type": ["null", 5]},
            "three": {"type": ["null", "string", "null"]},
            "first": {"type": ["string", "null"]}
        }});
        let out = parameters_schema(Some(&edge));
        assert_eq!(out["properties"]["nn"], json!({"type": "null", "nullable": true}));
        assert_eq!(out["properties"]["n5"], json!({"type": ["null", 5]}));
        assert_eq!(out["properties"]["three"], json!({"type": ["null", "string", "null"]}));
        assert_eq!(out["properties"]["first"], json!({"type": "string", "nullable": true}));
        let empty = parameters_schema(None);
        assert_eq!(empty["type"], "object");
        assert_eq!(empty["properties"]["wait_for_previous"]["description"], WAIT_FOR_PREVIOUS);
        // Not an object schema: no injection.
        let s = parameters_schema(Some(&json!({"type": "string"})));
        assert_eq!(s, json!({"type": "string"}));
        // `properties` that is not an object: left alone.
        let odd = json!({"type": "object", "properties": true});
        assert_eq!(parameters_schema(Some(&odd)), odd);
        // Whether the daemon (not the server) is the one to take `wait_for_previous`: exactly
        // where the declaration offers it and the server did not declare it.
        let own =
            json!({"type": "object", "properties": {"wait_for_previous": {"type": "string"}}});
        for (schema, offered) in [
            (Some(&input), true),
            (None, true),
            (Some(&json!(null)), true),
            (Some(&json!({"type": "string"})), false),
            (Some(&odd), false),
            (Some(&own), false),
        ] {
            let declared = parameters_schema(schema);
            let has = declared["properties"]["wait_for_previous"]["type"] == "boolean";
            assert_eq!(offers_wait_for_previous(schema), offered && has, "{schema:?}");
        }
    }
}
