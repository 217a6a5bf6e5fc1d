//! The call pipeline, in process: every entry point goes through every seat, and what a seat
//! decides is what the caller gets. A real `Core` with seats that record and decide, driving the
//! RPC methods without a socket, in front of the real fixture server.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use geminid::testing::calls::{
    After, AfterTool, Audit, Before, BeforeTool, Call, Decision, Ended, Hidden, Origin, Outcome,
    Policy, PolicyNote, Seats, ToolFilter,
};
use geminid_protocol::error::ErrorCode;
use geminid_tests::inproc::InProcess;
use geminid_tests::mcp::stdio;
use serde_json::{Value, json};

/// What each seat saw: (seat, origin, name, arguments).
type Seen = Arc<Mutex<Vec<(&'static str, Origin, String, Value)>>>;

/// Seats that record every call and decide as told.
#[derive(Debug, Default)]
struct Recorder {
    seen: Seen,
    before: Mutex<Option<Before>>,
    decision: Mutex<Option<Decision>>,
    after: Mutex<Option<After>>,
    /// Tools the static filter hides, and why.
    hidden: Mutex<Vec<(&'static str, &'static str)>>,
    ended: Mutex<Vec<Ended>>,
}

impl Recorder {
    fn saw(&self, seat: &'static str, call: &Call) {
        let args = Value::Object(call.args.clone().unwrap_or_default());
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).push((
            seat,
            call.origin,
            call.name.clone(),
            args,
        ));
    }

    fn seats(self: &Arc<Self>) -> Seats {
        Seats {
            before_tool: Some(self.clone()),
            policy: Some(self.clone()),
            after_tool: Some(self.clone()),
            audit: Some(self.clone()),
            tool_filter: Some(self.clone()),
        }
    }

    fn seen(&self) -> Vec<(&'static str, Origin, String, Value)> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl BeforeTool for Recorder {
    fn before_tool<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, Before> {
        self.saw("before", call);
        let b = self
            .before
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or(Before::Proceed);
        Box::pin(async move { b })
    }
}

impl Policy for Recorder {
    fn decide(&self, call: &Call) -> (Decision, Option<PolicyNote>) {
        self.saw("policy", call);
        let d = self
            .decision
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or(Decision::Allow);
        (d, None)
    }
}

impl AfterTool for Recorder {
    fn after_tool<'a>(&'a self, call: &'a Call, _: &'a Outcome) -> BoxFuture<'a, After> {
        self.saw("after", call);
        let a = self
            .after
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or(After::Keep);
        Box::pin(async move { a })
    }
}

impl ToolFilter for Recorder {
    fn hides(
        &self,
        _session: &str,
        name: &str,
        server: Option<&str>,
        _: Option<&serde_json::Map<String, Value>>,
    ) -> Option<Hidden> {
        let hidden = self.hidden.lock().unwrap_or_else(PoisonError::into_inner);
        hidden
            .iter()
            .find(|(s, t)| server == Some(*s) && name == format!("mcp_{s}_{t}"))
            .map(|(_, t)| Hidden { why: format!("rule 7 hides {t}"), by_default: false })
    }
}

impl Audit for Recorder {
    fn record(&self, call: &Call, ended: &Ended, _: Duration) {
        self.saw("audit", call);
        self.ended.lock().unwrap_or_else(PoisonError::into_inner).push(ended.clone());
    }
}

async fn setup() -> anyhow::Result<(InProcess, Arc<Recorder>)> {
    let rec = Arc::new(Recorder::default());
    let p = InProcess::new(json!({ "fx": stdio(&[]) }), rec.seats()).await?;
    Ok((p, rec))
}

async fn tools_call(p: &InProcess, args: Value) -> Result<Value, (i32, String)> {
    p.call("tools/call", json!({ "session": p.session, "name": "mcp_fx_echo", "args": args })).await
}

async fn mcp_call(p: &InProcess, args: Value) -> Result<Value, (i32, String)> {
    let params = json!({ "session": p.session, "server": "fx", "tool": "echo", "arguments": args });
    p.call("mcp/callTool", params).await
}

#[tokio::test]
async fn every_seat_sees_tools_call_and_mcp_call_tool_alike() -> anyhow::Result<()> {
    let (p, rec) = setup().await?;
    let a = tools_call(&p, json!({"text": "one"})).await.unwrap();
    assert_eq!(a["parts"][0]["text"], "<untrusted_context>\none\n</untrusted_context>");
    let b = mcp_call(&p, json!({"text": "two"})).await.unwrap();
    assert_eq!(b["content"][0]["text"], "two");
    let seen = rec.seen();
    for (i, (origin, text)) in
        [(Origin::ToolsCall, "one"), (Origin::McpCallTool, "two")].into_iter().enumerate()
    {
        let mine: Vec<&str> = seen[i * 4..i * 4 + 4].iter().map(|s| s.0).collect();
        assert_eq!(mine, ["before", "policy", "after", "audit"], "{seen:#?}");
        for s in &seen[i * 4..i * 4 + 4] {
            assert_eq!((s.1, s.2.as_str(), &s.3), (origin, "mcp_fx_echo", &json!({"text": text})));
        }
    }
    let ended = rec.ended.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(ended, [Ended::Answered { is_error: false }, Ended::Answered { is_error: false }]);
    p.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_denial_and_a_block_fail_both_entry_points_before_the_server_is_called()
-> anyhow::Result<()> {
    let (p, rec) = setup().await?;
    *rec.decision.lock().unwrap_or_else(PoisonError::into_inner) =
        Some(Decision::Deny("rule 3 denies echo".into()));
    for r in [tools_call(&p, json!({"text": "x"})).await, mcp_call(&p, json!({"text": "x"})).await]
    {
        assert_eq!(r.unwrap_err(), (ErrorCode::PolicyDenied.code(), "rule 3 denies echo".into()));
    }
    *rec.decision.lock().unwrap_or_else(PoisonError::into_inner) = None;
    *rec.before.lock().unwrap_or_else(PoisonError::into_inner) =
        Some(Before::Block("the hook says no".into()));
    for r in [tools_call(&p, json!({"text": "x"})).await, mcp_call(&p, json!({"text": "x"})).await]
    {
        assert_eq!(r.unwrap_err(), (ErrorCode::HookBlocked.code(), "the hook says no".into()));
    }
    let seats: Vec<&str> = rec.seen().iter().map(|s| s.0).collect();
    assert!(!seats.contains(&"after"), "no call reached the server: {seats:?}");
    assert_eq!(seats.iter().filter(|s| **s == "audit").count(), 4, "every call is audited");
    p.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn arguments_a_hook_rewrote_are_validated_again_and_sent() -> anyhow::Result<()> {
    let (p, rec) = setup().await?;
    let mut bad = serde_json::Map::new();
    bad.insert("text".into(), json!(42));
    *rec.before.lock().unwrap_or_else(PoisonError::into_inner) = Some(Before::Rewrite(bad));
    let (code, message) = tools_call(&p, json!({"text": "fine"})).await.unwrap_err();
    assert_eq!(code, ErrorCode::InvalidArguments.code());
    assert!(message.contains("/text") && message.contains("after a BeforeTool hook"), "{message}");
    let mut good = serde_json::Map::new();
    good.insert("text".into(), json!("rewritten"));
    *rec.before.lock().unwrap_or_else(PoisonError::into_inner) = Some(Before::Rewrite(good));
    let out = mcp_call(&p, json!({"text": "original"})).await.unwrap();
    assert_eq!(out["content"][0]["text"], "rewritten");
    // Invalid arguments on the raw path are refused too, as on tools/call.
    *rec.before.lock().unwrap_or_else(PoisonError::into_inner) = None;
    let (code, _) = mcp_call(&p, json!({"text": ["not", "a", "string"]})).await.unwrap_err();
    assert_eq!(code, ErrorCode::InvalidArguments.code());
    p.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn after_tool_can_add_context_or_withhold_the_result() -> anyhow::Result<()> {
    let (p, rec) = setup().await?;
    *rec.after.lock().unwrap_or_else(PoisonError::into_inner) =
        Some(After::AddContext("note from a hook".into()));
    let out = tools_call(&p, json!({"text": "hi"})).await.unwrap();
    // Appended after a blank line, as Gemini CLI appends a hook's context, and in the
    // functionResponse the model reads as well as in the parts.
    let parts = out["parts"].as_array().unwrap();
    assert_eq!(parts.last().unwrap()["text"], "\n\nnote from a hook");
    let response = out["functionResponse"].to_string();
    assert!(response.contains("note from a hook"), "{out}");
    *rec.after.lock().unwrap_or_else(PoisonError::into_inner) =
        Some(After::Block("secret output".into()));
    let (code, message) = tools_call(&p, json!({"text": "hi"})).await.unwrap_err();
    assert_eq!((code, message.as_str()), (ErrorCode::HookBlocked.code(), "secret output"));
    p.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_confirmation_goes_to_a_listening_client_and_its_answer_decides() -> anyhow::Result<()> {
    let (p, rec) = setup().await?;
    *rec.decision.lock().unwrap_or_else(PoisonError::into_inner) =
        Some(Decision::Ask("Allow echo?".into()));
    // Nobody can answer: the call fails at once, naming the way to listen.
    let (code, message) = tools_call(&p, json!({"text": "a"})).await.unwrap_err();
    assert_eq!(code, ErrorCode::PolicyDenied.code());
    assert!(message.contains("asks/listen"), "{message}");

    let listen = json!({ "session": p.session, "kinds": ["confirmation"] });
    let mut notices = p.subscribe("asks/listen", listen).await.unwrap();
    let p = Arc::new(p);
    for (outcome, expect_ok) in [("once", true), ("deny", false)] {
        let call = {
            let p = p.clone();
            tokio::spawn(async move { tools_call(&p, json!({"text": "b"})).await })
        };
        let asked = tokio::time::timeout(Duration::from_secs(10), notices.recv()).await?.unwrap();
        assert_eq!(asked["type"], "asked", "{asked}");
        let ask = &asked["ask"];
        assert_eq!(
            (ask["kind"].as_str(), ask["title"].as_str()),
            (Some("confirmation"), Some("Allow echo?"))
        );
        assert_eq!(ask["detail"]["args"], json!({"text": "b"}));
        let pending: Value = p.call("asks/pending", json!({ "session": p.session })).await.unwrap();
        assert_eq!(pending["asks"].as_array().map(Vec::len), Some(1));
        let respond =
            |answer: Value| json!({ "session": p.session, "id": ask["id"], "answer": answer });
        let bad: Result<Value, _> =
            p.call("asks/respond", respond(json!({"outcome": "maybe"}))).await;
        assert_eq!(bad.unwrap_err().0, ErrorCode::InvalidArguments.code());
        let ok: Value =
            p.call("asks/respond", respond(json!({ "outcome": outcome }))).await.unwrap();
        assert_eq!(ok, json!({"accepted": true}));
        let again: Value =
            p.call("asks/respond", respond(json!({"outcome": "once"}))).await.unwrap();
        assert_eq!(again, json!({"accepted": false}), "the first answer won");
        let settled = notices.recv().await.unwrap();
        assert_eq!(
            (settled["type"].as_str(), settled["how"].as_str()),
            (Some("settled"), Some("answered"))
        );
        let r = call.await?;
        assert_eq!(r.is_ok(), expect_ok, "{outcome}: {r:?}");
        if let Err((code, _)) = r {
            assert_eq!(code, ErrorCode::PolicyDenied.code());
        }
    }
    p.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn cancelling_a_call_that_waits_for_a_confirmation_settles_its_ask() -> anyhow::Result<()> {
    let (p, rec) = setup().await?;
    *rec.decision.lock().unwrap_or_else(PoisonError::into_inner) =
        Some(Decision::Ask("Allow echo?".into()));
    let listen = json!({ "session": p.session, "kinds": ["confirmation", "openUrl"] });
    let mut notices = p.subscribe("asks/listen", listen).await.unwrap();
    let p = Arc::new(p);
    let call = {
        let p = p.clone();
        tokio::spawn(async move {
            let params = json!({ "session": p.session, "name": "mcp_fx_echo", "args": {"text": "c"}, "callId": "c1" });
            p.call::<Value>("tools/call", params).await
        })
    };
    let asked = tokio::time::timeout(Duration::from_secs(10), notices.recv()).await?.unwrap();
    assert_eq!(asked["ask"]["callId"], "c1");
    let cancelled: Value =
        p.call("tools/cancel", json!({ "session": p.session, "callId": "c1" })).await.unwrap();
    assert_eq!(cancelled, json!({"cancelled": true}));
    assert_eq!(call.await?.unwrap_err().0, ErrorCode::Cancelled.code());
    let settled = notices.recv().await.unwrap();
    assert_eq!(
        (settled["id"].clone(), settled["how"].as_str()),
        (asked["ask"]["id"].clone(), Some("cancelled"))
    );
    let pending: Value = p.call("asks/pending", json!({ "session": p.session })).await.unwrap();
    assert_eq!(pending["asks"], json!([]));
    p.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn only_a_connection_attached_to_the_session_may_listen() -> anyhow::Result<()> {
    let (p, _rec) = setup().await?;
    let detach: Value = p.call("session/detach", json!({ "id": p.session })).await.unwrap();
    assert_eq!(detach["attachedConnections"], 0);
    let e =
        p.subscribe("asks/listen", json!({ "session": p.session, "kinds": ["sampling"] })).await;
    let (code, message) = e.unwrap_err();
    assert_eq!(code, -32602);
    assert!(message.contains("session/attach"), "{message}");
    let e = p.subscribe("asks/listen", json!({ "session": p.session, "kinds": [] })).await;
    assert!(e.unwrap_err().1.contains("confirmation, elicitation, sampling, openUrl"));
    p.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn the_static_filter_hides_a_tool_from_the_list_and_refuses_its_calls() -> anyhow::Result<()>
{
    let rec = Arc::new(Recorder::default());
    rec.hidden.lock().unwrap().push(("fx", "echo"));
    let p = InProcess::new(json!({ "fx": stdio(&[]) }), rec.seats()).await?;
    let list: Value = p.call("tools/list", json!({ "session": p.session })).await.unwrap();
    let names: Vec<&str> =
        list["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(!names.contains(&"mcp_fx_echo") && names.contains(&"mcp_fx_pid"), "{names:?}");
    let notes = list["diagnostics"].to_string();
    assert!(notes.contains("mcp_fx_echo") && notes.contains("rule 7 hides echo"), "{notes}");
    // Gemini CLI's text for a refused call, then the seat's reason.
    let text = "Tool execution denied by policy. (geminid: the tool is rule 7 hides echo)";
    let expected = (ErrorCode::PolicyDenied.code(), text.to_owned());
    assert_eq!(tools_call(&p, json!({"text": "x"})).await.unwrap_err(), expected);
    assert_eq!(mcp_call(&p, json!({"text": "x"})).await.unwrap_err(), expected);
    let seats: Vec<_> = rec.seen().iter().map(|s| (s.0, s.1)).collect();
    assert_eq!(
        seats,
        [("audit", Origin::ToolsCall), ("audit", Origin::McpCallTool)],
        "a hidden tool's call ends at step 1: only the audit log sees it"
    );
    // Another tool of the same server is untouched.
    let params = json!({ "session": p.session, "name": "mcp_fx_pid" });
    assert!(p.call::<Value>("tools/call", params).await.is_ok());
    p.shutdown().await;
    Ok(())
}
