//! docs/protocol.schema.json: a JSON Schema of every method's params and result and of every
//! notification, generated from the protocol crate's types. The test fails when the file
//! drifts from the code; `GEMINID_BLESS=1 cargo test -p geminid-tests --test e2e schema::` writes it.

use std::collections::BTreeSet;

use geminid_protocol::asks::*;
use geminid_protocol::auth::*;
use geminid_protocol::commands::*;
use geminid_protocol::config::*;
use geminid_protocol::daemon::*;
use geminid_protocol::event::{Event, EventsSubscribeParams};
use geminid_protocol::extensions::*;
use geminid_protocol::hooks::*;
use geminid_protocol::mcp::*;
use geminid_protocol::policy::*;
use geminid_protocol::session::*;
use geminid_protocol::skills::*;
use geminid_protocol::tools::*;
use geminid_tests::inproc::{InProcess, Seats};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.schema.json");

/// Unsubscribing takes the subscription id and answers whether it was ended.
type Unsubscribe = (Value, bool);

/// Every method: its params, its result (for a subscription, its notifications' items).
macro_rules! methods {
    ($g:ident; $($name:literal => $params:ty, $result:ty;)*) => {{
        let mut out = Map::new();
        $(
            let params = $g.subschema_for::<$params>();
            let result = $g.subschema_for::<$result>();
            out.insert($name.to_owned(), json!({ "params": params, "result": result }));
        )*
        out
    }};
}

fn document() -> Value {
    let mut g: SchemaGenerator = SchemaSettings::draft2020_12().into_generator();
    let methods = methods! { g;
        "daemon/hello" => HelloParams, HelloResult;
        "daemon/status" => (), StatusResult;
        "daemon/shutdown" => (), ShutdownResult;
        "daemon/doctor" => DoctorParams, DoctorResult;
        "session/create" => SessionCreateParams, Session;
        "session/get" => SessionIdParams, Session;
        "session/list" => Option<SessionListParams>, SessionListResult;
        "session/attach" => SessionAttachParams, Session;
        "session/detach" => SessionIdParams, Session;
        "session/close" => SessionIdParams, Session;
        "session/update" => SessionUpdateParams, Session;
        "session/derive" => SessionDeriveParams, Session;
        "events/subscribe" => Option<EventsSubscribeParams>, Event;
        "events/unsubscribe" => Unsubscribe, bool;
        "config/get" => ConfigParams, EffectiveConfig;
        "config/diagnostics" => ConfigParams, DiagnosticsResult;
        "context/files" => ContextFilesParams, ContextFilesResult;
        "trust/get" => TrustGetParams, TrustGetResult;
        "trust/set" => TrustSetParams, TrustSetResult;
        "mcp/add" => McpAddParams, McpAddResult;
        "mcp/remove" => McpRemoveParams, McpRemoveResult;
        "mcp/enable" => McpEnableParams, McpEnableResult;
        "mcp/disable" => McpEnableParams, McpEnableResult;
        "mcp/reload" => Option<McpReloadParams>, McpReloadResult;
        "mcp/listServers" => Option<ListServersParams>, ListServersResult;
        "mcp/start" => StartParams, ListServersResult;
        "mcp/stop" => ServerParams, ServerStatus;
        "mcp/restart" => ServerParams, ServerStatus;
        "mcp/logs" => LogsParams, LogsResult;
        "mcp/callTool" => CallToolParams, Value;
        "mcp/review" => ServerParams, geminid_protocol::pins::ReviewResult;
        "mcp/accept" => geminid_protocol::pins::PinsParams, geminid_protocol::pins::PinsResult;
        "mcp/reject" => geminid_protocol::pins::PinsParams, geminid_protocol::pins::PinsResult;
        "mcp/update" => geminid_protocol::pins::UpdateParams, geminid_protocol::pins::UpdateResult;
        "mcp/followLogs" => ServerParams, LogLine;
        "mcp/unfollowLogs" => Unsubscribe, bool;
        "tools/list" => ToolsListParams, ToolsListResult;
        "tools/call" => ToolsCallParams, ToolsCallResult;
        "tools/cancel" => ToolsCancelParams, ToolsCancelResult;
        "tools/instructions" => CatalogParams, InstructionsResult;
        "tools/refresh" => ToolsRefreshParams, ToolsRefreshResult;
        "prompts/list" => CatalogParams, PromptsListResult;
        "prompts/get" => PromptsGetParams, PromptsGetResult;
        "resources/list" => CatalogParams, ResourcesListResult;
        "resources/read" => ResourcesReadParams, ResourcesReadResult;
        "asks/listen" => AsksListenParams, AskNotice;
        "asks/unlisten" => Unsubscribe, bool;
        "asks/respond" => AsksRespondParams, AsksRespondResult;
        "asks/pending" => AsksPendingParams, AsksPendingResult;
        "policy/check" => PolicyCheckParams, PolicyCheckResult;
        "policy/list" => PolicyListParams, PolicyListResult;
        "policy/review" => PolicyReviewParams, PolicyReviewResult;
        "policy/accept" => PolicyReviewParams, PolicyReviewResult;
        "confirmation/respond" => ConfirmationRespondParams, ConfirmationRespondResult;
        "elicitation/respond" => ServerAskRespondParams, ServerAskRespondResult;
        "sampling/respond" => ServerAskRespondParams, ServerAskRespondResult;
        "tasks/list" => TasksListParams, TasksListResult;
        "tasks/cancel" => TasksCancelParams, TasksCancelResult;
        "calls/list" => Option<geminid_protocol::calls::CallsListParams>, geminid_protocol::calls::CallsListResult;
        "calls/cancel" => geminid_protocol::calls::CallsCancelParams, geminid_protocol::calls::CallsCancelResult;
        "audit/list" => AuditListParams, AuditListResult;
        "hooks/list" => HooksListParams, HooksListResult;
        "hooks/fire" => HooksFireParams, HooksFireResult;
        "hooks/enable" => HooksEnableParams, HooksEnableResult;
        "hooks/disable" => HooksEnableParams, HooksEnableResult;
        "hooks/migrate" => HooksMigrateParams, HooksMigrateResult;
        "mcp/import" => McpImportParams, McpImportResult;
        "auth/begin" => AuthBeginParams, AuthBegun;
        "auth/progress" => AuthProgressParams, AuthProgress;
        "auth/status" => AuthStatusParams, AuthStatusResult;
        "auth/logout" => AuthLogoutParams, AuthLogoutResult;
        "extensions/list" => ExtensionsListParams, ExtensionsListResult;
        "extensions/verify" => ExtensionsVerifyParams, ExtensionsListResult;
        "extensions/accept" => ExtensionNameParams, ExtensionInfo;
        "extensions/enable" => ExtensionEnableParams, ExtensionEnableResult;
        "extensions/disable" => ExtensionEnableParams, ExtensionEnableResult;
        "extensions/install" => ExtensionInstallParams, ExtensionInstallResult;
        "extensions/link" => ExtensionInstallParams, ExtensionInstallResult;
        "extensions/update" => ExtensionUpdateParams, ExtensionUpdateResult;
        "extensions/uninstall" => ExtensionNameParams, ExtensionUninstallResult;
        "skills/list" => SkillsListParams, SkillsListResult;
        "skills/prompt" => SkillsListParams, SkillsPromptResult;
        "skills/activate" => SkillActivateParams, SkillActivateResult;
        "skills/install" => SkillInstallParams, SkillInstallResult;
        "skills/link" => SkillInstallParams, SkillInstallResult;
        "skills/uninstall" => SkillUninstallParams, SkillUninstallResult;
        "skills/enable" => SkillEnableParams, SkillEnableResult;
        "skills/disable" => SkillEnableParams, SkillEnableResult;
        "agents/list" => SkillsListParams, AgentsListResult;
        "commands/list" => CommandsListParams, CommandsListResult;
        "commands/expand" => CommandsExpandParams, CommandsExpandResult;
    };
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "geminid protocol",
        "description": "Each method's params (sent as one object, or as [object]) and result; for a subscription, the items of its notifications. Generated from the geminid-protocol crate by tests/tests/e2e/schema.rs.",
        "protocolVersion": geminid_protocol::PROTOCOL_VERSION,
        "methods": methods,
        "$defs": g.take_definitions(true),
    })
}

#[test]
fn docs_protocol_schema_json_matches_the_code() {
    let text = serde_json::to_string_pretty(&document()).unwrap() + "\n";
    if std::env::var_os("GEMINID_BLESS").is_some() {
        std::fs::write(PATH, &text).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(PATH).unwrap_or_default();
    assert!(
        on_disk == text,
        "docs/protocol.schema.json is out of date with the protocol crate's types: run \
         `GEMINID_BLESS=1 cargo test -p geminid-tests --test e2e schema::` and commit the file"
    );
}

#[tokio::test]
async fn the_schema_covers_every_method_the_daemon_serves() -> anyhow::Result<()> {
    let p = InProcess::new(json!({}), Seats::default()).await?;
    let served: BTreeSet<String> = p.core.methods()?.method_names().map(str::to_owned).collect();
    let doc = document();
    let described: BTreeSet<String> = doc["methods"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(served, described, "methods served vs. described in the schema");
    // What the daemon answers is valid under the schema (a check of the schema, not only of
    // its freshness).
    let defs = doc["$defs"].clone();
    let answers = [
        ("daemon/status", json!(null), "StatusResult"),
        ("session/get", json!({ "id": p.session }), "Session"),
        ("session/list", json!({}), "SessionListResult"),
        ("config/get", json!({ "session": p.session }), "EffectiveConfig"),
        ("mcp/listServers", json!({ "session": p.session }), "ListServersResult"),
        ("tools/list", json!({ "session": p.session }), "ToolsListResult"),
        ("audit/list", json!({}), "AuditListResult"),
        ("policy/list", json!({ "session": p.session }), "PolicyListResult"),
        ("policy/review", json!({ "session": p.session }), "PolicyReviewResult"),
    ];
    for (method, params, def) in answers {
        let answer: Value = p.call(method, params).await.unwrap();
        let schema = json!({ "$defs": defs, "$ref": format!("#/$defs/{def}") });
        let v = jsonschema::validator_for(&schema)?;
        let errors: Vec<String> = v.iter_errors(&answer).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{method}'s answer is not a {def}: {errors:?}\n{answer:#}");
        let mut broken = answer.clone();
        if let Some(map) = broken.as_object_mut()
            && let Some(first) = map.keys().next().cloned()
        {
            // A field of the wrong type must not pass: the schema says something.
            map.insert(first, json!([[["not this"]]]));
            assert!(!v.is_valid(&broken), "{def} accepts a field of any type");
        }
    }
    p.shutdown().await;
    Ok(())
}

#[test]
fn every_wire_type_is_in_the_schema_with_its_camel_case_fields() {
    let doc = document();
    let defs = doc["$defs"].as_object().unwrap();
    for name in ["ServerStatus", "Ask", "AskNotice", "ToolEntry", "Event", "Session"] {
        assert!(defs.contains_key(name), "{name} missing from $defs");
    }
    let status = &defs["ServerStatus"]["properties"];
    assert!(status.get("lastError").is_some() && status.get("last_error").is_none());
}
