//! Which tool objects of a `tools/list` answer the MCP schema refuses: the shapes the
//! TypeScript SDK's validation (Gemini CLI's client) rejects, so that geminid never offers a
//! model a declaration Gemini CLI would not have. Each bad tool is left out alone, where the
//! SDK fails the whole listing.

use serde_json::{Map, Value};

/// Why an MCP tool object cannot be offered, if it cannot.
pub(super) fn tool_problem(t: &Value) -> Option<String> {
    let Some(o) = t.as_object() else { return Some("it is not an object".to_owned()) };
    match o.get("name") {
        None => return Some("it has no name".to_owned()),
        Some(Value::String(n)) if n.is_empty() => return Some("its name is empty".to_owned()),
        Some(Value::String(_)) => {}
        Some(_) => return Some("its name is not a string".to_owned()),
    }
    for field in ["title", "description"] {
        if o.get(field).is_some_and(|v| !v.is_string()) {
            return Some(format!("its {field} is not a string"));
        }
    }
    match o.get("inputSchema") {
        None => return Some("it has no inputSchema".to_owned()),
        Some(Value::Object(s)) => {
            if let Some(why) = schema_problem(s, "inputSchema") {
                return Some(why);
            }
        }
        Some(_) => return Some("its inputSchema is not an object".to_owned()),
    }
    match o.get("outputSchema") {
        None => {}
        Some(Value::Object(s)) => {
            if let Some(why) = schema_problem(s, "outputSchema") {
                return Some(why);
            }
        }
        Some(_) => return Some("its outputSchema is not an object".to_owned()),
    }
    if let Some(a) = o.get("annotations") {
        let Some(a) = a.as_object() else {
            return Some("its annotations are not an object".to_owned());
        };
        if a.get("title").is_some_and(|v| !v.is_string()) {
            return Some("its annotations' title is not a string".to_owned());
        }
        for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
            if a.get(hint).is_some_and(|v| !v.is_boolean()) {
                return Some(format!("its annotations' {hint} is not a boolean"));
            }
        }
    }
    if o.get("_meta").is_some_and(|v| !v.is_object()) {
        return Some("its _meta is not an object".to_owned());
    }
    if let Some(icons) = o.get("icons") {
        let ok = icons.as_array().is_some_and(|list| list.iter().all(icon_ok));
        if !ok {
            return Some("its icons are not a list of icons (each with a string src)".to_owned());
        }
    }
    None
}

/// Why a tool's input or output schema breaks the MCP schema's rules for it: its
/// `type` is `"object"`, its `properties` (if any) an object whose values are objects, its
/// `required` (if any) a list of strings.
fn schema_problem(s: &Map<String, Value>, which: &str) -> Option<String> {
    match s.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        None => return Some(format!("its {which} has no type (it must be \"object\")")),
        Some(other) => return Some(format!("its {which}'s type is {other}, not \"object\"")),
    }
    match s.get("properties") {
        None => {}
        Some(Value::Object(props)) => {
            // The SDK takes any JSON object (an array too) as a property's schema.
            if let Some((k, _)) = props.iter().find(|(_, v)| !(v.is_object() || v.is_array())) {
                return Some(format!("its {which}'s property '{k}' is not an object"));
            }
        }
        Some(_) => return Some(format!("its {which}'s properties are not an object")),
    }
    match s.get("required") {
        None => {}
        Some(Value::Array(r)) if r.iter().all(Value::is_string) => {}
        Some(_) => return Some(format!("its {which}'s required is not a list of strings")),
    }
    None
}

fn icon_ok(icon: &Value) -> bool {
    let Some(i) = icon.as_object() else { return false };
    i.get("src").is_some_and(Value::is_string)
        && i.get("mimeType").is_none_or(Value::is_string)
        && i.get("sizes")
            .is_none_or(|s| s.as_array().is_some_and(|s| s.iter().all(Value::is_string)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::tool_problem;

    #[test]
    fn the_shapes_the_sdk_refuses_are_named() {
        let ok = json!({"name": "t", "inputSchema": {"type": "object"}});
        assert_eq!(tool_problem(&ok), None);
        let good = json!({"name": "t", "description": "d", "title": "T",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}, "b": []},
                            "required": ["a"], "additionalProperties": false},
            "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true},
            "_meta": {}, "icons": [{"src": "x.png", "sizes": ["16x16"]}]});
        assert_eq!(tool_problem(&good), None);
        for (bad, why) in [
            (json!([]), "it is not an object"),
            (json!({"inputSchema": {"type": "object"}}), "it has no name"),
            (json!({"name": 3, "inputSchema": {"type": "object"}}), "its name is not a string"),
            (json!({"name": "t"}), "it has no inputSchema"),
            (json!({"name": "t", "inputSchema": []}), "its inputSchema is not an object"),
            (json!({"name": "t", "inputSchema": {}}), "its inputSchema has no type"),
            (json!({"name": "t", "inputSchema": {"type": "array"}}), "type is \"array\""),
            (
                json!({"name": "t", "inputSchema": {"type": "object", "properties": []}}),
                "its inputSchema's properties are not an object",
            ),
            (
                json!({"name": "t", "inputSchema": {"type": "object", "properties": {"a": 1}}}),
                "property 'a' is not an object",
            ),
            (
                json!({"name": "t", "inputSchema": {"type": "object", "properties": {"a": null}}}),
                "property 'a' is not an object",
            ),
            (
                json!({"name": "t", "inputSchema": {"type": "object", "required": "a"}}),
                "required is not a list of strings",
            ),
            (
                json!({"name": "t", "inputSchema": {"type": "object", "required": [1]}}),
                "required is not a list of strings",
            ),
            (
                json!({"name": "t", "description": 5, "inputSchema": {"type": "object"}}),
                "its description is not a string",
            ),
            (
                json!({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "string"}}),
                "its outputSchema's type",
            ),
            (
                json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "yes"}}),
                "readOnlyHint is not a boolean",
            ),
        ] {
            let got = tool_problem(&bad).unwrap_or_default();
            assert!(got.contains(why), "{bad}: {got:?}, wanted {why:?}");
        }
    }
}
