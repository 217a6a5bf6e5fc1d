//! Running an event's plan: all at once, or one after the other with each hook's changes
//! passed on to the next (Gemini CLI's chaining: a BeforeAgent `additionalContext` appended to
//! the prompt, a BeforeModel `llm_request` and a BeforeTool `tool_input` merged in), then the
//! outputs aggregated.

use serde_json::{Map, Value};

use super::HookCommand;
use super::HookEvent;
use super::aggregate::merge;
use super::plan::Plan;
use super::run::{Context, Ran};

/// What firing an event did.
#[derive(Debug, Clone)]
pub struct Fired {
    /// Each hook's run, in plan order.
    pub ran: Vec<Ran>,
    /// Their outputs as one (`None` when no hook said anything).
    pub merged: Option<Map<String, Value>>,
    /// No hook failed to run (a non-zero exit is not a failure to run).
    pub success: bool,
}

/// The input the next hook of a sequential plan gets, after `output`.
pub(crate) fn chain(event: HookEvent, input: &mut Value, output: &Map<String, Value>) {
    let Some(Value::Object(specific)) = output.get("hookSpecificOutput") else { return };
    let Some(input) = input.as_object_mut() else { return };
    match event {
        HookEvent::BeforeAgent => {
            if let (Some(Value::String(extra)), Some(Value::String(prompt))) =
                (specific.get("additionalContext"), input.get_mut("prompt"))
            {
                prompt.push_str("\n\n");
                prompt.push_str(extra);
            }
        }
        HookEvent::BeforeModel => shallow_merge(input, "llm_request", specific.get("llm_request")),
        HookEvent::BeforeTool => shallow_merge(input, "tool_input", specific.get("tool_input")),
        _ => {}
    }
}

fn shallow_merge(input: &mut Map<String, Value>, key: &str, with: Option<&Value>) {
    let (Some(Value::Object(with)), Some(Value::Object(into))) = (with, input.get_mut(key)) else {
        return;
    };
    for (k, v) in with {
        into.insert(k.clone(), v.clone());
    }
}

/// Run a plan for `event` with `input`.
pub async fn fire(plan: &Plan<'_>, event: HookEvent, input: Value, ctx: &Context<'_>) -> Fired {
    let ran = if plan.sequential {
        let mut input = input;
        let mut ran = Vec::with_capacity(plan.hooks.len());
        for hook in &plan.hooks {
            let r = run(hook, event, &input, ctx).await;
            if r.success
                && let Some(o) = &r.output
            {
                chain(event, &mut input, o);
            }
            ran.push(r);
        }
        ran
    } else {
        futures::future::join_all(plan.hooks.iter().map(|h| run(h, event, &input, ctx))).await
    };
    let outputs: Vec<Map<String, Value>> = ran.iter().filter_map(|r| r.output.clone()).collect();
    Fired { merged: merge(event, &outputs), success: ran.iter().all(|r| r.error.is_none()), ran }
}

/// Run one hook, as a span (`hook`) when telemetry is on: the event, the hook's name (its
/// `name`, else only its program's file name: a command line may hold secrets), its exit code
/// as `process.exit.code`, an error status if it failed to run.
async fn run(hook: &HookCommand, event: HookEvent, input: &Value, ctx: &Context<'_>) -> Ran {
    use opentelemetry::KeyValue;
    let span = crate::telemetry::child("hook", || {
        let named = hook.name.as_deref().filter(|n| !n.is_empty());
        let program = || {
            let first = hook.command.split_whitespace().next().unwrap_or_default();
            first.rsplit(['/', '\\']).next().unwrap_or_default().to_owned()
        };
        vec![
            KeyValue::new("geminid.hook.event", event.name()),
            KeyValue::new("geminid.hook.name", named.map_or_else(program, str::to_owned)),
        ]
    });
    let r = super::run::run(hook, event, input, ctx).await;
    if let Some(span) = span {
        if let Some(code) = r.exit_code {
            span.set(KeyValue::new("process.exit.code", i64::from(code)));
        }
        if r.error.is_some() {
            span.failed("hook_failed", "the hook could not be run to its end");
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn chaining_passes_each_events_changes_on() {
        let out = |v: Value| v.as_object().cloned().unwrap_or_default();
        let mut input = json!({"prompt": "p", "tool_input": {"a": 1, "b": 1}, "llm_request": {"model": "m", "config": {}}});
        chain(
            HookEvent::BeforeAgent,
            &mut input,
            &out(json!({"hookSpecificOutput": {"additionalContext": "more"}})),
        );
        assert_eq!(input["prompt"], "p\n\nmore");
        chain(
            HookEvent::BeforeTool,
            &mut input,
            &out(json!({"hookSpecificOutput": {"tool_input": {"b": 2, "c": 3}}})),
        );
        assert_eq!(input["tool_input"], json!({"a": 1, "b": 2, "c": 3}));
        chain(
            HookEvent::BeforeModel,
            &mut input,
            &out(json!({"hookSpecificOutput": {"llm_request": {"model": "n"}}})),
        );
        assert_eq!(input["llm_request"], json!({"model": "n", "config": {}}));
        let before = input.clone();
        chain(
            HookEvent::AfterTool,
            &mut input,
            &out(json!({"hookSpecificOutput": {"tool_input": {"z": 1}}})),
        );
        assert_eq!(input, before, "other events pass nothing on");
    }
}
