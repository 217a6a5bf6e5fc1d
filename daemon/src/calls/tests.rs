//! The pipeline's pieces that need no server.

use super::*;

#[test]
fn a_note_for_the_model_follows_a_blank_line_in_its_text_or_its_own_part() {
    let call = Call {
        session: "s".into(),
        origin: Origin::ToolsCall,
        call_id: Some("c1".into()),
        name: "discovered_tool_echo".into(),
        server: String::new(),
        tool: "echo".into(),
        args: None,
        annotations: None,
        confirmed: false,
        hooks_by_client: false,
        policy: None,
        tail_of: None,
    };
    let parts = vec![serde_json::json!({ "text": "out" })];
    let mut o = Outcome {
        result: Value::Null,
        is_error: false,
        function_response: Value::Null,
        parts: parts.clone(),
        display: "out".into(),
        notes: Vec::new(),
        last_progress: None,
        one_text: true,
    };
    o.tell_model(&call, "<hook_context>x</hook_context>".into());
    // A custom tool's one text grows, as Gemini CLI's `llmContent +=` does.
    assert_eq!(o.parts, [serde_json::json!({ "text": "out\n\n<hook_context>x</hook_context>" })]);
    let fr = &o.function_response["functionResponse"];
    assert_eq!((&fr["id"], &fr["response"]["output"]), (&"c1".into(), &o.parts[0]["text"]));
    // Parts get a part of their own; an error's response stays the error alone.
    let mut o = Outcome { parts, one_text: false, is_error: true, ..o };
    let error_response = o.function_response.clone();
    o.tell_model(&call, "note".into());
    assert_eq!(o.parts[1], serde_json::json!({ "text": "\n\nnote" }));
    assert_eq!(o.function_response, error_response);
    assert_eq!(o.notes, ["<hook_context>x</hook_context>", "note"]);
}
