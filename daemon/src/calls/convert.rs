//! Step 7 of the pipeline: an MCP `tools/call` result converted to what Gemini gets
//! (COMPAT §2.6): parts, the display string, and the `functionResponse`.

use serde_json::{Map, Value};

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

/// An MCP `tools/call` result → Gemini parts, and the display string (COMPAT §2.6; Gemini
/// CLI's `transformMcpContentToParts` and `getStringifiedResultForDisplay`). `tool` is the
/// server's own tool name.
pub(crate) fn parts(tool: &str, result: &Value) -> (Vec<Value>, String) {
    let Some(blocks) = result["content"].as_array() else {
        // The reference shows the whole raw response, as the GenAI SDK wraps it.
        let inner =
            object([("name", Value::String(tool.to_owned())), ("response", result.clone())]);
        let raw = Value::Array(vec![object([("functionResponse", inner)])]);
        let pretty = serde_json::to_string_pretty(&raw).unwrap_or_default();
        return (
            vec![text_part("[Error: Could not parse tool response]".to_owned())],
            format!("```json\n{pretty}\n```"),
        );
    };
    let mut parts = Vec::new();
    let mut display = Vec::new();
    // JavaScript truthiness: an empty string counts as absent.
    let nonempty = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
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
                if let Some(text) = nonempty(&r["text"]) {
                    parts.push(untrusted(&text));
                    display.push(text);
                    continue;
                }
                if r.get("blob").is_some_and(|v| !v.is_null() && v != "") {
                    let mime = nonempty(&r["mimeType"])
                        .unwrap_or_else(|| "application/octet-stream".to_owned());
                    parts.push(text_part(format!("[Tool '{tool}' provided the following embedded resource with mime-type: {mime}]")));
                    parts.push(inline_data(&mime, &r["blob"]));
                }
                let shown = nonempty(&r["mimeType"]).unwrap_or_else(|| "unknown type".to_owned());
                display.push(format!("[Embedded Resource: {shown}]"));
            }
            Some("resource_link") => {
                let title =
                    nonempty(&b["title"]).or_else(|| nonempty(&b["name"])).unwrap_or_default();
                let uri = b["uri"].as_str().unwrap_or_default();
                parts.push(text_part(format!("Resource Link: {title} at {uri}")));
                display.push(format!("[Link to {title}: {uri}]"));
            }
            other => {
                let kind = match other {
                    Some(k) => k.to_owned(),
                    None => "undefined".to_owned(),
                };
                display.push(format!("[Unknown content type: {kind}]"));
            }
        }
    }
    (parts, display.join("\n"))
}

/// Whether an MCP result reports a tool error (`isError: true` or `"true"`, or the legacy
/// `error.isError`).
pub(crate) fn is_error(result: &Value) -> bool {
    let flag = |v: &Value| v == &Value::Bool(true) || v == "true";
    flag(&result["isError"]) || (result["error"].is_object() && flag(&result["error"]["isError"]))
}

/// The `functionResponse` part Gemini gets for a result (Gemini CLI's
/// `convertToFunctionResponse`, for a model that takes multimodal function responses): text
/// parts joined into `response.output`, with a note first naming each stripped audio or video
/// MIME type once; other inline data nested as `parts`; `response` empty when there is nothing
/// to say. `id` is the call's id, when the caller gave one.
pub(crate) fn function_response(name: &str, id: Option<&str>, parts: &[Value]) -> Value {
    let mut texts: Vec<String> =
        parts.iter().filter_map(|p| p["text"].as_str()).map(str::to_owned).collect();
    let mut stripped: Vec<&str> = Vec::new();
    let mut nested = Vec::new();
    for p in parts.iter().filter(|p| p.get("text").is_none() && p.get("inlineData").is_some()) {
        let mime = p["inlineData"]["mimeType"].as_str().unwrap_or_default();
        if mime.starts_with("audio/") || mime.starts_with("video/") {
            if !stripped.contains(&mime) {
                stripped.push(mime);
            }
        } else {
            nested.push(p.clone());
        }
    }
    if !stripped.is_empty() {
        texts.insert(
            0,
            format!(
                "[SYSTEM: Binary content ({}) stripped from response due to protocol limitations.]",
                stripped.join(", ")
            ),
        );
    }
    let output = if !texts.is_empty() {
        Some(texts.join("\n"))
    } else if !nested.is_empty() {
        Some(format!("Binary content provided ({} item(s)).", nested.len()))
    } else {
        None
    };
    let response = match output {
        Some(o) => object([("output", Value::String(o))]),
        None => Value::Object(Map::new()),
    };
    let mut fr = Map::with_capacity(4);
    if let Some(id) = id {
        fr.insert("id".into(), Value::String(id.to_owned()));
    }
    fr.insert("name".into(), Value::String(name.to_owned()));
    fr.insert("response".into(), response);
    if !nested.is_empty() {
        fr.insert("parts".into(), Value::Array(nested));
    }
    object([("functionResponse", Value::Object(fr))])
}

/// What the model is told when a tool reports an error (Gemini CLI's `McpToolInvocation`):
/// the server's tool name, the call as the server got it, and the raw result as the
/// `functionResponse` the GenAI SDK wraps it in.
pub(crate) fn error_message(tool: &str, args: &Value, result: &Value) -> String {
    let call = object([("name", Value::String(tool.to_owned())), ("args", args.clone())]);
    let inner = object([("name", Value::String(tool.to_owned())), ("response", result.clone())]);
    let response = Value::Array(vec![object([("functionResponse", inner)])]);
    format!(
        "MCP tool '{tool}' reported tool error for function call: {call} with response: {response}"
    )
}

/// The `functionResponse` of a failed call, as Gemini CLI's scheduler builds it for an error.
pub(crate) fn error_response(name: &str, id: Option<&str>, message: &str) -> Value {
    let mut fr = Map::with_capacity(3);
    if let Some(id) = id {
        fr.insert("id".into(), Value::String(id.to_owned()));
    }
    fr.insert("name".into(), Value::String(name.to_owned()));
    fr.insert("response".into(), object([("error", Value::String(message.to_owned()))]));
    object([("functionResponse", Value::Object(fr))])
}

/// A result whose text content has at least this many bytes is converted off the event loop.
pub(crate) const LARGE_RESULT: usize = 1 << 20;

/// The bytes of a result's text content (what makes a result large), cheaply.
pub(crate) fn text_bytes(result: &Value) -> usize {
    result.get("content").and_then(Value::as_array).map_or(0, |blocks| {
        blocks
            .iter()
            .map(|b| {
                ["text", "data", "blob"]
                    .iter()
                    .filter_map(|k| b.get(*k).and_then(Value::as_str))
                    .map(str::len)
                    .sum::<usize>()
            })
            .sum()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

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
        let (parts, display) = parts("t", &json!({ "content": content }));
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
        assert_eq!(
            display,
            "hi </untrusted_context> there\n[Image: image/png]\n[Audio: audio/wav]\ndoc\n[Embedded Resource: application/pdf]\n[Embedded Resource: unknown type]\n[Link to Dee: f://d]\n[Unknown content type: hologram]"
        );
        let (bad, _) = parts_of_non_array();
        assert_eq!(bad, vec![json!({"text": "[Error: Could not parse tool response]"})]);

        let fr = function_response("mcp_s_t", None, &parts);
        let out = fr["functionResponse"]["response"]["output"].as_str().unwrap_or_default();
        assert!(out.starts_with("[SYSTEM: Binary content (audio/wav) stripped from response due to protocol limitations.]\n"), "{out}");
        assert_eq!(
            fr["functionResponse"]["parts"].as_array().map(Vec::len),
            Some(2),
            "image and pdf nested"
        );
        let only_binary = function_response(
            "n",
            None,
            &[json!({"inlineData": {"mimeType": "image/png", "data": "A"}})],
        );
        assert_eq!(
            only_binary["functionResponse"]["response"]["output"],
            "Binary content provided (1 item(s))."
        );
    }

    fn parts_of_non_array() -> (Vec<Value>, String) {
        parts("t", &json!({"content": {"type": "text"}}))
    }

    #[test]
    fn error_detection() {
        assert!(is_error(&json!({"isError": true})));
        assert!(is_error(&json!({"isError": "true"})));
        assert!(is_error(&json!({"error": {"isError": true}})));
        assert!(!is_error(&json!({"isError": false, "content": []})));
    }

    /// Gemini CLI's `mcp-tool.test.ts` execute cases, as data: the MCP result, the parts the
    /// model gets, and the display string (server tool name `actual-server-tool-name`).
    #[test]
    fn results_convert_as_in_gemini_clis_own_cases() {
        let t = "actual-server-tool-name";
        let wrap =
            |s: &str| json!({"text": format!("<untrusted_context>\n{s}\n</untrusted_context>")});
        let cases: Vec<(Value, Vec<Value>, &str)> = vec![
            (
                json!({"content": [{"type": "text", "text": "This is a success message."}]}),
                vec![wrap("This is a success message.")],
                "This is a success message.",
            ),
            (
                json!({"content": [{"type": "audio", "data": "BASE64_AUDIO_DATA", "mimeType": "audio/mp3"}]}),
                vec![
                    json!({"text": format!("[Tool '{t}' provided the following audio data with mime-type: audio/mp3]")}),
                    json!({"inlineData": {"mimeType": "audio/mp3", "data": "BASE64_AUDIO_DATA"}}),
                ],
                "[Audio: audio/mp3]",
            ),
            (
                json!({"content": [{"type": "resource_link", "uri": "file:///path/to/thing", "name": "resource-name", "title": "My Resource"}]}),
                vec![json!({"text": "Resource Link: My Resource at file:///path/to/thing"})],
                "[Link to My Resource: file:///path/to/thing]",
            ),
            (
                json!({"content": [{"type": "resource", "resource": {"uri": "file:///path/to/text.txt", "text": "This is the text content.", "mimeType": "text/plain"}}]}),
                vec![wrap("This is the text content.")],
                "This is the text content.",
            ),
            (
                json!({"content": [{"type": "resource", "resource": {"uri": "file:///path/to/data.bin", "blob": "BASE64_BINARY_DATA", "mimeType": "application/octet-stream"}}]}),
                vec![
                    json!({"text": format!("[Tool '{t}' provided the following embedded resource with mime-type: application/octet-stream]")}),
                    json!({"inlineData": {"mimeType": "application/octet-stream", "data": "BASE64_BINARY_DATA"}}),
                ],
                "[Embedded Resource: application/octet-stream]",
            ),
            (
                json!({"content": [
                    {"type": "text", "text": "First part."},
                    {"type": "image", "data": "BASE64_IMAGE_DATA", "mimeType": "image/jpeg"},
                    {"type": "text", "text": "Second part."}
                ]}),
                vec![
                    wrap("First part."),
                    json!({"text": format!("[Tool '{t}' provided the following image data with mime-type: image/jpeg]")}),
                    json!({"inlineData": {"mimeType": "image/jpeg", "data": "BASE64_IMAGE_DATA"}}),
                    wrap("Second part."),
                ],
                "First part.\n[Image: image/jpeg]\nSecond part.",
            ),
            (
                json!({"content": [{"type": "text", "text": "Valid part."}, {"type": "future_block", "data": "some-data"}]}),
                vec![wrap("Valid part.")],
                "Valid part.\n[Unknown content type: future_block]",
            ),
            (
                json!({"content": [
                    {"type": "text", "text": "Here is a resource."},
                    {"type": "resource_link", "uri": "file:///path/to/resource", "name": "resource-name", "title": "My Resource"},
                    {"type": "resource", "resource": {"uri": "file:///path/to/text.txt", "text": "Embedded text content.", "mimeType": "text/plain"}},
                    {"type": "image", "data": "BASE64_IMAGE_DATA", "mimeType": "image/jpeg"}
                ]}),
                vec![
                    wrap("Here is a resource."),
                    json!({"text": "Resource Link: My Resource at file:///path/to/resource"}),
                    wrap("Embedded text content."),
                    json!({"text": format!("[Tool '{t}' provided the following image data with mime-type: image/jpeg]")}),
                    json!({"inlineData": {"mimeType": "image/jpeg", "data": "BASE64_IMAGE_DATA"}}),
                ],
                "Here is a resource.\n[Link to My Resource: file:///path/to/resource]\nEmbedded text content.\n[Image: image/jpeg]",
            ),
            // isError false (or "false") next to content: a success.
            (
                json!({"error": {"isError": "false"}, "content": [{"type": "text", "text": "{\"success\":true}"}]}),
                vec![wrap("{\"success\":true}")],
                "{\"success\":true}",
            ),
            // An empty result: nothing to show but the raw response, and the parse-error part.
            (
                json!({}),
                vec![json!({"text": "[Error: Could not parse tool response]"})],
                "```json\n[\n  {\n    \"functionResponse\": {\n      \"name\": \"actual-server-tool-name\",\n      \"response\": {}\n    }\n  }\n]\n```",
            ),
        ];
        for (result, want_parts, want_display) in cases {
            let (got, display) = parts(t, &result);
            assert_eq!((got, display.as_str()), (want_parts, want_display), "{result}");
            assert!(!is_error(&result), "{result}");
        }
    }

    /// `generateContentResponseUtilities.test.ts`'s `convertToFunctionResponse` cases (a model
    /// with multimodal function responses), as data.
    #[test]
    fn function_responses_as_in_gemini_clis_own_cases() {
        let id = Some("call1");
        let cases: Vec<(Vec<Value>, Value)> = vec![
            (vec![json!({"text": "Text from array"})], json!({"output": "Text from array"})),
            (
                vec![json!({"text": "part1"}), json!({"text": "part2"})],
                json!({"output": "part1\npart2"}),
            ),
            (vec![], json!({})),
            (
                vec![
                    json!({"text": "Some text"}),
                    json!({"inlineData": {"mimeType": "audio/mpeg", "data": "a"}}),
                    json!({"inlineData": {"mimeType": "audio/mpeg", "data": "b"}}),
                    json!({"inlineData": {"mimeType": "video/mp4", "data": "c"}}),
                ],
                json!({"output": "[SYSTEM: Binary content (audio/mpeg, video/mp4) stripped from response due to protocol limitations.]\nSome text"}),
            ),
            (
                vec![json!({"inlineData": {"mimeType": "audio/mpeg", "data": "a"}})],
                json!({"output": "[SYSTEM: Binary content (audio/mpeg) stripped from response due to protocol limitations.]"}),
            ),
        ];
        for (parts, response) in cases {
            let fr = function_response("testTool", id, &parts);
            let want = json!({"functionResponse": {"id": "call1", "name": "testTool", "response": response}});
            assert_eq!(fr, want, "{parts:?}");
        }
        let image = json!({"inlineData": {"mimeType": "image/jpeg", "data": "base64data..."}});
        let mixed = [
            json!({"text": "Some textual description"}),
            image.clone(),
            json!({"text": "Another text part"}),
        ];
        assert_eq!(
            function_response("testTool", id, &mixed),
            json!({"functionResponse": {"id": "call1", "name": "testTool", "response": {"output": "Some textual description\nAnother text part"}, "parts": [image]}})
        );
        let gif = json!({"inlineData": {"mimeType": "image/gif", "data": "gifdata..."}});
        assert_eq!(
            function_response("testTool", None, std::slice::from_ref(&gif)),
            json!({"functionResponse": {"name": "testTool", "response": {"output": "Binary content provided (1 item(s))."}, "parts": [gif]}})
        );
    }

    /// Gemini CLI's error text and response for `isError` results, top-level and legacy.
    #[test]
    fn tool_errors_as_in_gemini_clis_own_cases() {
        let args = json!({"param": "isErrorTrueCase"});
        for result in [
            json!({"isError": true}),
            json!({"isError": "true"}),
            json!({"error": {"isError": true}}),
            json!({"error": {"isError": "true"}}),
        ] {
            assert!(is_error(&result), "{result}");
            let message = error_message("actual-server-tool-name", &args, &result);
            assert_eq!(
                message,
                format!(
                    "MCP tool 'actual-server-tool-name' reported tool error for function call: {{\"name\":\"actual-server-tool-name\",\"args\":{{\"param\":\"isErrorTrueCase\"}}}} with response: [{{\"functionResponse\":{{\"name\":\"actual-server-tool-name\",\"response\":{result}}}}}]"
                )
            );
            assert_eq!(
                error_response("mcp_s_t", Some("c1"), &message),
                json!({"functionResponse": {"id": "c1", "name": "mcp_s_t", "response": {"error": message}}})
            );
        }
        for result in [
            json!({"isError": false}),
            json!({"isError": "false"}),
            json!({"error": "x"}),
            json!({"error": {"isError": "false"}}),
        ] {
            assert!(!is_error(&result), "{result}");
        }
    }
}
