//! The outputs of an event's hooks as one (Gemini CLI's `HookAggregator`), per event family:
//! an OR-merge for the tool, agent and session-start events, later-wins for the model events,
//! a union of tool names for tool selection, and a plain merge for the rest.

use serde_json::{Map, Value, json};

use super::HookEvent;

/// A value as JavaScript's truthiness and string joining see it: `None` when falsy.
fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) if n.as_f64() != Some(0.0) => Some(n.to_string()),
        Value::Bool(true) => Some("true".to_owned()),
        Value::Array(_) | Value::Object(_) => Some(v?.to_string()),
        _ => None,
    }
}

fn truthy(v: Option<&Value>) -> bool {
    text(v).is_some()
}

/// Whether an output's decision blocks (`block`, `deny`).
pub(crate) fn is_blocking(o: &Map<String, Value>) -> bool {
    matches!(o.get("decision").and_then(Value::as_str), Some("block" | "deny"))
}

/// Whether it asks the person (`ask`).
pub(crate) fn is_ask(o: &Map<String, Value>) -> bool {
    o.get("decision").and_then(Value::as_str) == Some("ask")
}

/// The merged output of `outputs` (in the order the hooks were planned), or `None` when no
/// hook produced one.
pub(crate) fn merge(
    event: HookEvent,
    outputs: &[Map<String, Value>],
) -> Option<Map<String, Value>> {
    if outputs.is_empty() {
        return None;
    }
    Some(match event {
        HookEvent::BeforeTool
        | HookEvent::AfterTool
        | HookEvent::BeforeAgent
        | HookEvent::AfterAgent
        | HookEvent::SessionStart => or_decision(outputs),
        HookEvent::BeforeModel | HookEvent::AfterModel => field_replacement(outputs),
        HookEvent::BeforeToolSelection => tool_selection(outputs),
        HookEvent::Notification | HookEvent::SessionEnd | HookEvent::PreCompress => {
            let mut merged = Map::new();
            for o in outputs {
                merged.extend(o.clone());
            }
            merged
        }
    })
}

fn or_decision(outputs: &[Map<String, Value>]) -> Map<String, Value> {
    let mut merged = Map::new();
    merged.insert("continue".into(), Value::Bool(true));
    merged.insert("suppressOutput".into(), Value::Bool(false));
    let (mut stops, mut reasons, mut messages, mut contexts) = (vec![], vec![], vec![], vec![]);
    let (mut blocked, mut asked, mut stopped) = (false, false, false);
    let mut specific: Option<Map<String, Value>> = None;
    for o in outputs {
        if o.get("continue") == Some(&Value::Bool(false)) {
            stopped = true;
            merged.insert("continue".into(), Value::Bool(false));
            stops.extend(text(o.get("stopReason")));
        }
        if is_blocking(o) {
            blocked = true;
            merged.insert("decision".into(), o["decision"].clone());
        } else if is_ask(o) {
            asked = true;
            if !blocked {
                merged.insert("decision".into(), o["decision"].clone());
            }
        }
        reasons.extend(text(o.get("reason")));
        messages.extend(text(o.get("systemMessage")));
        if truthy(o.get("suppressOutput")) {
            merged.insert("suppressOutput".into(), Value::Bool(true));
        }
        if let Some(Value::Object(s)) = o.get("hookSpecificOutput") {
            let into = specific.get_or_insert_with(Map::new);
            if s.get("clearContext") == Some(&Value::Bool(true)) {
                into.insert("clearContext".into(), Value::Bool(true));
            }
            for (k, v) in s {
                if k != "clearContext" {
                    into.insert(k.clone(), v.clone());
                }
            }
            if let Some(Value::String(c)) = s.get("additionalContext") {
                contexts.push(c.clone());
            }
        }
    }
    if !blocked && !asked && !stopped {
        merged.insert("decision".into(), json!("allow"));
    }
    for (key, parts) in [("stopReason", stops), ("reason", reasons), ("systemMessage", messages)] {
        if !parts.is_empty() {
            merged.insert(key.into(), Value::String(parts.join("\n")));
        }
    }
    if !contexts.is_empty() {
        specific
            .get_or_insert_with(Map::new)
            .insert("additionalContext".into(), Value::String(contexts.join("\n")));
    }
    if let Some(s) = specific {
        merged.insert("hookSpecificOutput".into(), Value::Object(s));
    }
    merged
}

fn field_replacement(outputs: &[Map<String, Value>]) -> Map<String, Value> {
    let mut merged = Map::new();
    let mut specific = Map::new();
    for o in outputs {
        if let Some(Value::Object(s)) = o.get("hookSpecificOutput") {
            specific.extend(s.clone());
        }
        merged.extend(o.clone());
        merged.insert("hookSpecificOutput".into(), Value::Object(specific.clone()));
    }
    merged
}

fn tool_selection(outputs: &[Map<String, Value>]) -> Map<String, Value> {
    let (mut none, mut any) = (false, false);
    let mut names = std::collections::BTreeSet::new();
    for o in outputs {
        let Some(config) = o.get("hookSpecificOutput").and_then(|s| s.get("toolConfig")) else {
            continue;
        };
        match config.get("mode").and_then(Value::as_str) {
            Some("NONE") => none = true,
            Some("ANY") => any = true,
            _ => {}
        }
        for n in config.get("allowedFunctionNames").and_then(Value::as_array).into_iter().flatten()
        {
            if let Some(n) = n.as_str() {
                names.insert(n.to_owned());
            }
        }
    }
    let (mode, names): (&str, Vec<String>) = match (none, any) {
        (true, _) => ("NONE", vec![]),
        (false, true) => ("ANY", names.into_iter().collect()),
        (false, false) => ("AUTO", names.into_iter().collect()),
    };
    let mut merged = Map::new();
    merged.insert(
        "hookSpecificOutput".into(),
        json!({"hookEventName": "BeforeToolSelection", "toolConfig": {"mode": mode, "allowedFunctionNames": names}}),
    );
    merged
}

/// `additionalContext` as the model gets it: `<` and `>` escaped, wrapped in `<hook_context>`.
pub(crate) fn hook_context(text: &str) -> String {
    format!("<hook_context>{}</hook_context>", text.replace('<', "&lt;").replace('>', "&gt;"))
}

/// A blocking or stopping output's reason: `stopReason`, else `reason`, else Gemini CLI's
/// `No reason provided`.
pub(crate) fn effective_reason(o: &Map<String, Value>) -> String {
    text(o.get("stopReason"))
        .or_else(|| text(o.get("reason")))
        .unwrap_or_else(|| "No reason provided".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outs(v: Value) -> Vec<Map<String, Value>> {
        v.as_array().unwrap().iter().map(|o| o.as_object().unwrap().clone()).collect()
    }

    /// Gemini CLI's `hookAggregator.test.ts` cases, as data.
    #[test]
    fn or_merge_as_gemini_cli() {
        let m = merge(HookEvent::BeforeTool, &outs(json!([
            {"decision": "allow", "reason": "r1", "systemMessage": "m1"},
            {"decision": "block", "reason": "r2", "hookSpecificOutput": {"additionalContext": "c1", "x": 1}},
            {"decision": "ask", "systemMessage": "m2", "hookSpecificOutput": {"additionalContext": "c2", "x": 2}},
        ])))
        .unwrap();
        assert_eq!(m["decision"], "block", "a block wins over a later ask");
        assert_eq!(
            (m["reason"].as_str(), m["systemMessage"].as_str()),
            (Some("r1\nr2"), Some("m1\nm2"))
        );
        assert_eq!(m["hookSpecificOutput"], json!({"additionalContext": "c1\nc2", "x": 2}));
        assert_eq!(m["continue"], true);

        let m = merge(HookEvent::AfterAgent, &outs(json!([
            {"continue": false, "stopReason": "s1"},
            {"continue": false, "stopReason": "s2", "hookSpecificOutput": {"clearContext": true}},
            {"suppressOutput": true},
        ])))
        .unwrap();
        assert_eq!(
            (m["continue"].clone(), m["stopReason"].clone()),
            (json!(false), json!("s1\ns2"))
        );
        assert!(m.get("decision").is_none(), "a stop leaves the decision unset");
        assert_eq!(m["hookSpecificOutput"]["clearContext"], true);
        assert_eq!(m["suppressOutput"], true);

        let m = merge(HookEvent::BeforeTool, &outs(json!([{"decision": "ask"}, {"decision": 7}])))
            .unwrap();
        assert_eq!(m["decision"], "ask", "a decision that is no string is neither");
        let m = merge(HookEvent::BeforeTool, &outs(json!([{"systemMessage": "only"}]))).unwrap();
        assert_eq!(m["decision"], "allow");
        assert!(merge(HookEvent::BeforeTool, &[]).is_none());
    }

    #[test]
    fn model_events_tool_selection_and_the_rest() {
        let m = merge(HookEvent::BeforeModel, &outs(json!([
            {"decision": "block", "hookSpecificOutput": {"llm_request": {"model": "a"}, "k": 1}},
            {"systemMessage": "later", "hookSpecificOutput": {"llm_request": {"config": {}}}},
        ])))
        .unwrap();
        assert_eq!(m["decision"], "block");
        assert_eq!(m["hookSpecificOutput"], json!({"llm_request": {"config": {}}, "k": 1}));

        let sel = |v: Value| {
            merge(HookEvent::BeforeToolSelection, &outs(v)).unwrap()["hookSpecificOutput"]["toolConfig"].clone()
        };
        assert_eq!(
            sel(
                json!([{"hookSpecificOutput": {"toolConfig": {"mode": "ANY", "allowedFunctionNames": ["b", "a"]}}}, {"hookSpecificOutput": {"toolConfig": {"mode": "AUTO", "allowedFunctionNames": ["c", "a"]}}}])
            ),
            json!({"mode": "ANY", "allowedFunctionNames": ["a", "b", "c"]})
        );
        assert_eq!(
            sel(
                json!([{"hookSpecificOutput": {"toolConfig": {"mode": "NONE"}}}, {"hookSpecificOutput": {"toolConfig": {"mode": "ANY", "allowedFunctionNames": ["a"]}}}])
            ),
            json!({"mode": "NONE", "allowedFunctionNames": []})
        );
        assert_eq!(sel(json!([{}])), json!({"mode": "AUTO", "allowedFunctionNames": []}));

        let m = merge(HookEvent::SessionEnd, &outs(json!([{"a": 1, "b": 1}, {"b": 2}]))).unwrap();
        assert_eq!(Value::Object(m), json!({"a": 1, "b": 2}));
    }

    #[test]
    fn context_and_reasons() {
        assert_eq!(hook_context("a <b> & c"), "<hook_context>a &lt;b&gt; & c</hook_context>");
        let o = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(effective_reason(&o(json!({"reason": "r", "stopReason": "s"}))), "s");
        assert_eq!(effective_reason(&o(json!({"reason": "r"}))), "r");
        assert_eq!(effective_reason(&o(json!({"reason": ""}))), "No reason provided");
    }
}
