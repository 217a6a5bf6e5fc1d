//! Tools as Gemini sees them (COMPAT §2.3–2.6): fully qualified names, declarations with the
//! reference's schema transforms, include/exclude, and MCP results converted to Gemini parts.

use serde_json::{Map, Value, json};

/// Longest function name Gemini accepts.
pub const MAX_NAME: usize = 63;

/// The description of the `wait_for_previous` parameter Gemini CLI adds to every tool.
pub const WAIT_FOR_PREVIOUS: &str = "Set to true to wait for all previously requested tools in this turn to complete before starting. Set to false (or omit) to run in parallel. Use true when this tool depends on the output of previous tools.";

/// `mcp_{server}_{tool}`, sanitized and shortened as Gemini CLI's `generateValidName` does.
pub fn fqn(server: &str, tool: &str) -> String {
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
pub fn disambiguate(name: &str, n: usize) -> String {
    let suffix = format!("__{n}");
    let room = MAX_NAME - suffix.len();
    let chars: Vec<char> = name.chars().collect();
    let base: String =
        if chars.len() > room { chars[..room].iter().collect() } else { name.to_owned() };
    format!("{base}{suffix}")
}

/// `includeTools` / `excludeTools` (COMPAT §2.5).
pub fn enabled(tool: &str, include: Option<&[String]>, exclude: Option<&[String]>) -> bool {
    if tool.is_empty() || exclude.is_some_and(|e| e.iter().any(|x| x == tool)) {
        return false;
    }
    include.is_none_or(|inc| inc.iter().any(|t| t == tool || t.starts_with(&format!("{tool}("))))
}

/// Gemini CLI's transform of an MCP `inputSchema` into `parametersJsonSchema`: a missing schema
/// becomes an empty object schema, `type: [T, "null"]` pairs become `type: T, nullable: true`
/// everywhere, and an object schema gains the `wait_for_previous` parameter. Everything else
/// (`$defs`, `$ref`, `anyOf`, `default`, `format`, `enum`, ...) passes through.
pub fn parameters_schema(input: Option<&Value>) -> Value {
    let mut schema = match input {
        Some(v @ Value::Object(_)) => v.clone(),
        _ => json!({ "type": "object", "properties": {} }),
    };
    nullable_pairs(&mut schema);
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

fn nullable_pairs(v: &mut Value) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get("type")
                && types.len() == 2
                && types.iter().any(|t| t == "null")
                && let Some(other) = types.iter().find(|t| *t != "null" && t.is_string()).cloned()
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

fn untrusted(text: &str) -> Value {
    let escaped = text.replace("</untrusted_context>", "&lt;/untrusted_context&gt;");
    text_part(format!("<untrusted_context>\n{escaped}\n</untrusted_context>"))
}

/// `{"text": text}`. Parts are built directly, on every call: `json!` serializes each value
/// it interpolates, and grows each map from empty.
fn text_part(text: String) -> Value {
    object([("text", Value::String(text))])
}

/// `{"inlineData": {"mimeType": mime, "data": data}}`.
fn inline_data(mime: &str, data: &Value) -> Value {
    let inner = object([("mimeType", Value::String(mime.to_owned())), ("data", data.clone())]);
    object([("inlineData", inner)])
}

/// A JSON object of these entries, in this order.
fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    let mut map = serde_json::Map::with_capacity(N);
    for (k, v) in entries {
        map.insert(k.to_owned(), v);
    }
    Value::Object(map)
}

/// MCP content blocks → Gemini parts, and the display string (COMPAT §2.6). `tool` is the
/// server's own tool name.
pub fn parts(tool: &str, content: &Value) -> (Vec<Value>, String) {
    let Some(blocks) = content.as_array() else {
        return (
            vec![text_part("[Error: Could not parse tool response]".to_owned())],
            String::new(),
        );
    };
    let mut parts = Vec::new();
    let mut display = Vec::new();
    for b in blocks {
        match b["type"].as_str() {
            Some("text") => {
                let text = b["text"].as_str().unwrap_or_default();
                parts.push(untrusted(text));
                display.push(text.to_owned());
            }
            Some(kind @ ("image" | "audio")) => {
                let mime = b["mimeType"].as_str().unwrap_or_default();
                parts.push(text_part(format!(
                    "[Tool '{tool}' provided the following {kind} data with mime-type: {mime}]"
                )));
                parts.push(inline_data(mime, &b["data"]));
                let label = if kind == "image" { "Image" } else { "Audio" };
                display.push(format!("[{label}: {mime}]"));
            }
            Some("resource") => {
                let r = &b["resource"];
                let mime = r["mimeType"].as_str().unwrap_or("application/octet-stream");
                if let Some(text) = r["text"].as_str() {
                    parts.push(untrusted(text));
                } else if r.get("blob").is_some() {
                    parts.push(text_part(format!("[Tool '{tool}' provided the following embedded resource with mime-type: {mime}]")));
                    parts.push(inline_data(mime, &r["blob"]));
                } else {
                    continue;
                }
                display.push(format!("[Embedded Resource: {mime}]"));
            }
            Some("resource_link") => {
                let title = b["title"].as_str().or(b["name"].as_str()).unwrap_or_default();
                let uri = b["uri"].as_str().unwrap_or_default();
                parts.push(text_part(format!("Resource Link: {title} at {uri}")));
                display.push(format!("[Link to {title}: {uri}]"));
            }
            _ => {}
        }
    }
    (parts, display.join("\n"))
}

/// Whether an MCP result reports a tool error (`isError: true` or `"true"`, or the legacy
/// `error.isError`).
pub fn is_error(result: &Value) -> bool {
    matches!(&result["isError"], Value::Bool(true))
        || result["isError"] == "true"
        || result["error"]["isError"] == true
}

/// The `functionResponse` part Gemini gets: text parts joined into `response.output`; audio and
/// video data stripped with a note; other inline data nested as `parts`.
pub fn function_response(name: &str, parts: &[Value]) -> Value {
    let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    let mut stripped = Vec::new();
    let mut nested = Vec::new();
    for p in parts.iter().filter(|p| p.get("inlineData").is_some()) {
        let mime = p["inlineData"]["mimeType"].as_str().unwrap_or_default();
        if mime.starts_with("audio/") || mime.starts_with("video/") {
            stripped.push(mime.to_owned());
        } else {
            nested.push(p.clone());
        }
    }
    let mut output = if texts.is_empty() {
        format!("Binary content provided ({} item(s)).", nested.len() + stripped.len())
    } else {
        texts.join("\n")
    };
    if !stripped.is_empty() {
        output.push_str(&format!(
            "\n[SYSTEM: Binary content ({}) stripped from response due to protocol limitations.]",
            stripped.join(", ")
        ));
    }
    let response = object([("output", Value::String(output))]);
    let response = if nested.is_empty() {
        object([("name", Value::String(name.to_owned())), ("response", response)])
    } else {
        object([
            ("name", Value::String(name.to_owned())),
            ("response", response),
            ("parts", Value::Array(nested)),
        ])
    };
    object([("functionResponse", response)])
}

/// What the model is told when a tool reports an error.
pub fn error_content(tool: &str, name: &str, args: &Value, parts: &[Value]) -> String {
    let call = json!({ "name": name, "args": args });
    format!(
        "MCP tool '{tool}' reported tool error for function call: {call} with response: {}",
        Value::Array(parts.to_vec())
    )
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
        let empty = parameters_schema(None);
        assert_eq!(empty["type"], "object");
        assert_eq!(empty["properties"]["wait_for_previous"]["description"], WAIT_FOR_PREVIOUS);
        // Not an object schema: no injection.
        let s = parameters_schema(Some(&json!({"type": "string"})));
        assert_eq!(s, json!({"type": "string"}));
        // `properties` that is not an object: left alone.
        let odd = json!({"type": "object", "properties": true});
        assert_eq!(parameters_schema(Some(&odd)), odd);
    }

    #[test]
    fn content_to_parts() {
        let content = json!([
            {"type": "text", "text": "hi </untrusted_context> there"},
            {"type": "image", "mimeType": "image/png", "data": "AAA"},
            {"type": "audio", "mimeType": "audio/wav", "data": "BBB"},
            {"type": "resource", "resource": {"uri": "f://a", "text": "doc"}},
            {"type": "resource", "resource": {"uri": "f://b", "blob": "CCC", "mimeType": "application/pdf"}},
            {"type": "resource", "resource": {"uri": "f://c"}},
            {"type": "resource_link", "uri": "f://d", "name": "d", "title": "Dee"},
            {"type": "hologram", "data": "?"}
        ]);
        let (parts, display) = parts("t", &content);
        assert_eq!(
            parts[0]["text"],
            "<untrusted_context>\nhi &lt;/untrusted_context&gt; there\n</untrusted_context>"
        );
        assert_eq!(
            parts[1]["text"],
            "[Tool 't' provided the following image data with mime-type: image/png]"
        );
        assert_eq!(parts[2], json!({"inlineData": {"mimeType": "image/png", "data": "AAA"}}));
        assert_eq!(parts[5]["text"], "<untrusted_context>\ndoc\n</untrusted_context>");
        assert_eq!(
            parts[6]["text"],
            "[Tool 't' provided the following embedded resource with mime-type: application/pdf]"
        );
        assert_eq!(parts[8]["text"], "Resource Link: Dee at f://d");
        assert_eq!(parts.len(), 9, "the empty resource and the unknown type are dropped");
        assert_eq!(display, "hi </untrusted_context> there\n[Image: image/png]\n[Audio: audio/wav]\n[Embedded Resource: text/plain]\n[Embedded Resource: application/pdf]\n[Link to Dee: f://d]".replace("text/plain", "application/octet-stream"));
        let (bad, _) = parts_of_non_array();
        assert_eq!(bad, vec![json!({"text": "[Error: Could not parse tool response]"})]);

        let fr = function_response("mcp_s_t", &parts);
        let out = fr["functionResponse"]["response"]["output"].as_str().unwrap_or_default();
        assert!(out.ends_with("[SYSTEM: Binary content (audio/wav) stripped from response due to protocol limitations.]"), "{out}");
        assert_eq!(
            fr["functionResponse"]["parts"].as_array().map(Vec::len),
            Some(2),
            "image and pdf nested"
        );
        let only_binary = function_response(
            "n",
            &[json!({"inlineData": {"mimeType": "image/png", "data": "A"}})],
        );
        assert_eq!(
            only_binary["functionResponse"]["response"]["output"],
            "Binary content provided (1 item(s))."
        );
    }

    fn parts_of_non_array() -> (Vec<Value>, String) {
        parts("t", &json!({"type": "text"}))
    }

    #[test]
    fn error_detection() {
        assert!(is_error(&json!({"isError": true})));
        assert!(is_error(&json!({"isError": "true"})));
        assert!(is_error(&json!({"error": {"isError": true}})));
        assert!(!is_error(&json!({"isError": false, "content": []})));
    }
}
