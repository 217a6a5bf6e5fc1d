//! The fixture MCP server the end-to-end tests launch: small, deterministic, and able to
//! misbehave on request. Tools: `echo {text}`, `pid`, `crash {code}`, `sleep {ms}`, `grow`
//! (adds a tool and sends `notifications/tools/list_changed`) and `env {name}`.
//!
//! Transports: stdio (default), `--http ADDR` for streamable HTTP, or `--sse ADDR` for the legacy
//! HTTP+SSE transport of the 2024-11-05 spec (`GET /sse`, then `POST /message?sessionId=…`).
//! Network modes bind loopback only (port 0 picks one) and print `LISTENING <url>` first.
//!
//! Flags: `--fail-initialize` (answer initialize with an error), `--hang-initialize` (never
//! answer it), `--hang-list` (never answer `tools/list`), `--exit-before-initialize CODE`, `--garbage` (write non-JSON to stdout first),
//! `--survive-stdin-eof` (keep running after the client closes stdin), `--ignore-sigterm`,
//! `--grandchild` (start an idle child process in the same process group, pid on stderr),
//! `--idle` (do nothing forever), `--rich` (more tools: every content type, `$defs`, a tool
//! error, an uncompilable schema, cancellation; and prompts and resources), `--page-size N`
//! (lists in pages of N), `--asks` (tools that ask the client: elicitation, sampling, roots), `--list-ttl-ms N`
//! (its tools list may be kept N ms), `--modern` (a server of
//! the 2026-07-28 era: it answers `server/discover`, and its asking tools answer
//! `input_required`), `--tools N` (N more generated tools), `--roots-at-start-ms MS` (ask for roots MS after
//! initialization, whatever the client is doing; the tool `start_roots` says what came back), `--startup-delay-ms MS` (wait before serving, like a real
//! server loading), `--ballast-mib N` (hold N MiB of touched memory, like a loaded runtime), `--raw` (a hand-written stdio server whose tool results do not conform to
//! the schema: an unknown content type, a `content` that is not an array, a legacy
//! `error.isError`; and `strict`, whose schema forbids other properties; with `--fail-prompts`
//! its `prompts/list` fails, with `--empty` it offers nothing and empty instructions, with
//! `--bad-tool` it lists a tool without `inputSchema` and one without a name beside a good one,
//! with `--listing FILE` it lists FILE's `tools` as they are, read at each `tools/list`, and a
//! call of a tool FILE's `results` names answers that result as it is, any other its arguments
//! as text), `--tokio-stdio`
//! (read and write stdio through rmcp's `stdio()`, i.e. tokio's blocking-thread stdin and
//! stdout, instead of the event loop; for benchmarks). Every stdio start writes one line to
//! stderr. `--flood` adds `flood {count, bytes?, levels?}` (that many log messages, the i-th
//! at `levels[i % len]`, info without; then an answer `bytes` longer). `--lenient` matches
//! tool names without case or surrounding spaces; with
//! `FIXTURE_CALL_LOG=FILE` in its environment, every tool call that reaches it appends the
//! tool's name to FILE (what really ran, for the security tests); with `FIXTURE_META_LOG=FILE`,
//! a JSON line `{tool, meta}` with the request's `_meta` (trace context). `--capable-tools` lists
//! `elicit_only` and `sample_only` only to a client that declared elicitation or sampling (as
//! server-everything lists its `trigger-*` tools).

#[path = "../fixture/asks.rs"]
mod asks;
#[path = "../fixture/oauth.rs"]
mod oauth;

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Initialize {
    Normal,
    Fail,
    Hang,
}

#[derive(Debug, Clone)]
struct Fixture {
    initialize: Initialize,
    tools: Arc<Mutex<Vec<Tool>>>,
    /// `--rich`: also prompts and resources.
    rich: bool,
    /// `--page-size N`: lists come in pages of N (0: one page).
    page: usize,
    /// `--hang-list`: `tools/list` is never answered.
    hang_list: bool,
    /// `--modern`: a server of the 2026-07-28 era (it answers `server/discover`; without
    /// this it is one of the earlier eras, which answer that with an error).
    modern: bool,
    /// `--list-ttl-ms N`: its tools list says it may be kept N ms (`ttlMs`).
    list_ttl_ms: Option<u64>,
    /// `--skills`: it serves one skill through the MCP Skills extension; `--fail-skills`: it
    /// declares the extension and fails `skills/list`.
    skills: Skills,
    /// `--lenient`: a tool name is matched without case or surrounding spaces (`ECHO` runs
    /// `echo`), as some real servers do.
    lenient: bool,
    /// `--tools-file PATH`: read at every `tools/list`, a JSON array of tool objects, each
    /// replacing the tool of its name or added, or `{"name": N, "remove": true}` (a server
    /// whose definitions change, as a rug pull does).
    tools_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skills {
    None,
    Serve,
    Fail,
}

const SERVED_SKILL_MD: &str = "---\nname: served-skill\ndescription: A skill the fixture serves\n---\nFollow the served steps.\n";
const SERVED_SKILL_NOTES: &str = "Notes of the served skill.\n";

/// The skill `--skills` serves, with the digests of its two files.
fn served_skill() -> rmcp::model::Skill {
    use rmcp::model::{Skill, SkillFrontmatter, SkillResource, SkillResources};
    let md = "skill://served-skill/SKILL.md";
    let notes = "skill://served-skill/notes.md";
    Skill::new(
        md,
        SkillFrontmatter::new("served-skill", "A skill the fixture serves"),
        SkillResources::Files(vec![
            SkillResource::from_bytes(md, SERVED_SKILL_MD.as_bytes()),
            SkillResource::from_bytes(notes, SERVED_SKILL_NOTES.as_bytes()),
        ]),
    )
}

/// One page of `items` starting at `cursor`, and the next cursor.
fn page<T: Clone>(items: &[T], cursor: Option<&str>, size: usize) -> (Vec<T>, Option<String>) {
    if size == 0 {
        return (items.to_vec(), None);
    }
    let start: usize = cursor.and_then(|c| c.parse().ok()).unwrap_or(0).min(items.len());
    let end = (start + size).min(items.len());
    (items[start..end].to_vec(), (end < items.len()).then(|| end.to_string()))
}

fn prompts() -> Vec<rmcp::model::Prompt> {
    use rmcp::model::{Prompt, PromptArgument};
    vec![
        Prompt::new(
            "greet",
            Some("Greets someone"),
            Some(vec![
                PromptArgument::new("name").with_required(true),
                PromptArgument::new("style").with_description("how"),
            ]),
        ),
        Prompt::new(
            "pair",
            Some("Two required arguments"),
            Some(vec![
                PromptArgument::new("first").with_required(true),
                PromptArgument::new("second").with_required(true),
            ]),
        ),
        Prompt::new("plain", None::<String>, None),
        Prompt::new("image only", Some("Answers with an image"), None),
    ]
}

fn resources() -> Vec<rmcp::model::Resource> {
    use rmcp::model::Resource;
    vec![
        Resource::new("file:///notes.txt", "notes").with_mime_type("text/plain"),
        Resource::new("file:///logo.png", "logo").with_mime_type("image/png"),
        Resource::new("file:///third.txt", "third"),
    ]
}

fn tool(name: &str, description: &'static str, schema: Value) -> Tool {
    let schema = match schema {
        Value::Object(o) => o,
        _ => serde_json::Map::new(),
    };
    Tool::new(Cow::Owned(name.to_owned()), description, Arc::new(schema))
}

fn object(props: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": props, "required": required })
}

fn base_tools() -> Vec<Tool> {
    vec![
        tool("echo", "Returns its text", object(json!({"text": {"type": "string"}}), &["text"])),
        tool("pid", "Returns the server's process id", object(json!({}), &[])),
        tool(
            "crash",
            "Exits the process with a code",
            object(json!({"code": {"type": "integer"}}), &[]),
        ),
        tool("sleep", "Sleeps, then answers", object(json!({"ms": {"type": "integer"}}), &["ms"])),
        tool("grow", "Adds a tool and sends tools/list_changed", object(json!({}), &[])),
        tool(
            "env",
            "Returns an environment variable",
            object(json!({"name": {"type": "string"}}), &["name"]),
        ),
    ]
}

/// Extra tools with `--rich`: every content type, a `$defs`/`$ref` schema with a nullable
/// field, a tool error, a schema that cannot be compiled, a cancellable wait.
fn rich_tools() -> Vec<Tool> {
    vec![
        tool("content", "Returns one block of every content type", object(json!({}), &[])),
        tool(
            "typed",
            "Echoes its arguments; a $ref'd point and a nullable label",
            json!({
                "type": "object",
                "$defs": { "point": { "type": "object", "properties": { "x": {"type": "number"}, "y": {"type": "number"} }, "required": ["x", "y"] } },
                "properties": { "at": { "$ref": "#/$defs/point" }, "label": { "type": ["string", "null"] } },
                "required": ["at"]
            }),
        ),
        tool("fail", "Reports a tool error", object(json!({}), &[])),
        tool(
            "badschema",
            "Has a schema no validator can compile",
            json!({"type": "object", "properties": {"x": {"type": 12}}}),
        ),
        tool(
            "wait",
            "Waits until cancelled (or ms pass, or the file `until` names exists)",
            object(json!({"ms": {"type": "integer"}, "until": {"type": "string"}}), &[]),
        ),
        tool("cancelled", "How many calls were cancelled so far", object(json!({}), &[])),
        tool(
            "progress",
            "Reports progress in steps, gap_ms apart (20; the last one right before the result)",
            object(json!({"steps": {"type": "integer"}, "gap_ms": {"type": "integer"}}), &[]),
        ),
    ]
}

/// A log message (`notifications/message`), as servers of the eras before 2026-07-28 send them
/// (SEP-2577 deprecates it for the newer one).
#[allow(deprecated)]
async fn log_message(peer: &rmcp::Peer<RoleServer>, text: String) {
    log_at(peer, "info", text).await;
}

/// The same at `level` (`"debug"`, `"warning"`, ...; info when it is none).
#[allow(deprecated)]
async fn log_at(peer: &rmcp::Peer<RoleServer>, level: &str, text: String) {
    let level = serde_json::from_value(Value::String(level.to_owned()))
        .unwrap_or(rmcp::model::LoggingLevel::Info);
    let mut note = rmcp::model::LoggingMessageNotificationParam::new(level, Value::String(text));
    note.logger = Some("fixture".into());
    let _ = peer.notify_logging_message(note).await;
}

static CANCELLED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn text(s: impl Into<String>) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(s.into())])))
}

impl ServerHandler for Fixture {
    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        asks::initialized(context.peer);
    }

    fn get_info(&self) -> InitializeResult {
        let caps = if self.rich {
            let mut caps = ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .build();
            caps.completions = Some(Default::default());
            caps
        } else {
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build()
        };
        let mut caps = caps;
        if self.skills != Skills::None {
            // The extension serves the files as resources.
            caps.resources.get_or_insert_with(Default::default);
            caps.extensions
                .get_or_insert_with(Default::default)
                .insert(rmcp::model::SKILLS_EXTENSION_ID.into(), Default::default());
        }
        if self.modern {
            // The tasks extension (SEP-2663): `long` becomes a task.
            caps.extensions
                .get_or_insert_with(Default::default)
                .insert("io.modelcontextprotocol/tasks".into(), Default::default());
        }
        InitializeResult::new(caps)
            .with_server_info(Implementation::new("geminid-fixture", env!("CARGO_PKG_VERSION")))
            .with_instructions("The geminid test fixture.")
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        asks::tasks::get(&request.task_id)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        asks::tasks::cancel(&request.task_id)
    }

    /// A server of the 2026-07-28 era sends list changes on `subscriptions/listen` streams.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        self.modern.then(|| requested.clone())
    }

    /// A stream of the 2026-07-28 era: each resource it subscribes to is said to have changed
    /// once, 100 ms in (as `resources/subscribe` does for the earlier eras).
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let uris = context.accepted().resource_subscriptions.clone().unwrap_or_default();
        if !uris.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            for uri in uris {
                let p = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
                let n = rmcp::model::ResourceUpdatedNotification::new(p);
                let _ = context.sink().send(n.into()).await;
            }
        }
        context.cancelled().await;
        Ok(())
    }

    async fn discover(
        &self,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, McpError> {
        // A server of the earlier eras knows no `server/discover` (-32601), as the TypeScript
        // and Python SDKs of those eras answer.
        if !self.modern {
            return Err(McpError::method_not_found::<rmcp::model::DiscoverRequestMethod>());
        }
        let versions = self.supported_protocol_versions().into_owned();
        Ok(rmcp::model::DiscoverResult::from_server_info(versions, self.get_info()))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        match self.initialize {
            Initialize::Fail => {
                Err(McpError::internal_error("fixture: failing initialize on purpose", None))
            }
            Initialize::Hang => std::future::pending().await,
            Initialize::Normal => {
                context.peer.set_peer_info(request.clone());
                self.negotiate_initialize(&request)
            }
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        if self.hang_list {
            return std::future::pending().await;
        }
        let mut tools = self.tools.lock().map(|t| t.clone()).unwrap_or_default();
        if let Some(path) = &self.tools_file {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let changed: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
            for v in changed {
                // `{"name": N, "remove": true}`: N is no longer listed (with another added: a
                // rename).
                if v["remove"] == true {
                    tools.retain(|t| t.name != v["name"].as_str().unwrap_or_default());
                    continue;
                }
                let Ok(t) = serde_json::from_value::<Tool>(v) else { continue };
                match tools.iter_mut().find(|old| old.name == t.name) {
                    Some(old) => *old = t,
                    None => tools.push(t),
                }
            }
        }
        // `--capable-tools`: listed only to a client that declared what they ask for.
        let declared = context.peer.peer_info().map(|i| i.capabilities.clone());
        let elicits = declared.as_ref().is_some_and(|c| c.elicitation.is_some());
        let samples = declared.as_ref().is_some_and(|c| c.sampling.is_some());
        tools.retain(|t| match t.name.as_ref() {
            "elicit_only" => elicits,
            "sample_only" => samples,
            _ => true,
        });
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(&tools, cursor, self.page);
        let mut r = ListToolsResult::with_all_items(items);
        r.next_cursor = next;
        r.ttl_ms = self.list_ttl_ms;
        Ok(r)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(&prompts(), cursor, self.page);
        let mut r = rmcp::model::ListPromptsResult::with_all_items(items);
        r.next_cursor = next;
        Ok(r)
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        use rmcp::model::{GetPromptResult, PromptMessage, Role};
        let args = request.arguments.unwrap_or_default();
        let message = match request.name.as_str() {
            "image only" => {
                PromptMessage::new(Role::User, ContentBlock::image("iVBORw0KGgo=", "image/png"))
            }
            "plain" | "greet" | "pair" => PromptMessage::new_text(
                Role::User,
                format!("{} {}", request.name, Value::Object(args)),
            ),
            other => return Err(McpError::invalid_params(format!("no prompt {other:?}"), None)),
        };
        Ok(GetPromptResult::new(vec![message]).into())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, McpError> {
        match self.skills {
            Skills::Serve => {
                Ok(rmcp::model::ListSkillsResult::with_all_items(vec![served_skill()]))
            }
            _ => Err(McpError::internal_error("the skill index is broken", None)),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let (items, next) = page(&resources(), cursor, self.page);
        let mut r = rmcp::model::ListResourcesResult::with_all_items(items);
        r.next_cursor = next;
        Ok(r)
    }

    /// Completes any argument with two values made from what was typed.
    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        let typed = request.argument.value;
        let which = match &request.r#ref {
            rmcp::model::Reference::Prompt(p) => format!("prompt {}", p.name),
            rmcp::model::Reference::Resource(r) => format!("resource {}", r.uri),
            _ => "other".to_owned(),
        };
        let values = vec![format!("{typed}1 ({which})"), format!("{typed}2")];
        let completion = rmcp::model::CompletionInfo::new(values)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(rmcp::model::CompleteResult::new(completion))
    }

    /// Accepts, and says the resource changed a moment later.
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let peer = context.peer.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let p = rmcp::model::ResourceUpdatedNotificationParam::new(request.uri);
            let _ = peer.notify_resource_updated(p).await;
        });
        Ok(())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        let logs = rmcp::model::ResourceTemplate::new("file:///logs/{day}.log", "daily log");
        Ok(rmcp::model::ListResourceTemplatesResult::with_all_items(vec![logs]))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        use rmcp::model::{ReadResourceResult, ResourceContents};
        let contents = match request.uri.as_str() {
            "skill://served-skill/SKILL.md" if self.skills == Skills::Serve => {
                ResourceContents::text(SERVED_SKILL_MD, "skill://served-skill/SKILL.md")
            }
            "skill://served-skill/notes.md" if self.skills == Skills::Serve => {
                ResourceContents::text(SERVED_SKILL_NOTES, "skill://served-skill/notes.md")
            }
            "file:///notes.txt" => ResourceContents::text("remember the milk", "file:///notes.txt"),
            "file:///third.txt" => ResourceContents::text("third", "file:///third.txt"),
            "file:///logo.png" => ResourceContents::blob("iVBORw0KGgoAAAA=", "file:///logo.png")
                .with_mime_type("image/png"),
            // Answers for anything, so that the daemon is what refuses unlisted URIs.
            other if other.starts_with("file:///logs/") || other == "file:///secret.txt" => {
                ResourceContents::text(format!("read {other}"), other)
            }
            other => {
                return Err(McpError::resource_not_found(format!("no resource {other}"), None));
            }
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(r) = asks::call(request.name.as_ref(), &request, &context).await {
            return r;
        }
        let name = if self.lenient {
            request.name.trim().to_lowercase()
        } else {
            request.name.to_string()
        };
        // What reached the server, for tests that check what really ran.
        if let Some(log) = std::env::var_os("FIXTURE_CALL_LOG") {
            use std::io::Write;
            let line = format!("{name}\n");
            let file = std::fs::OpenOptions::new().create(true).append(true).open(log);
            let _ = file.and_then(|mut f| f.write_all(line.as_bytes()));
        }
        // The request's `_meta` as it arrived (trace context, ...), one JSON line per call.
        if let Some(log) = std::env::var_os("FIXTURE_META_LOG") {
            use std::io::Write;
            let line = format!("{}\n", json!({ "tool": name, "meta": &context.meta }));
            let file = std::fs::OpenOptions::new().create(true).append(true).open(log);
            let _ = file.and_then(|mut f| f.write_all(line.as_bytes()));
        }
        let args = request.arguments.unwrap_or_default();
        let arg = |k: &str| args.get(k).cloned().unwrap_or(Value::Null);
        match name.as_str() {
            "echo" => text(arg("text").as_str().unwrap_or_default()),
            "pid" => text(std::process::id().to_string()),
            "crash" => {
                std::process::exit(i32::try_from(arg("code").as_i64().unwrap_or(1)).unwrap_or(1))
            }
            "flood" => {
                let n = arg("count").as_u64().unwrap_or(0);
                let levels: Vec<String> = serde_json::from_value(arg("levels")).unwrap_or_default();
                for i in 0..n {
                    let at = usize::try_from(i)
                        .ok()
                        .and_then(|i| levels.get(i.checked_rem(levels.len())?).map(String::as_str));
                    log_at(&context.peer, at.unwrap_or("info"), format!("flood {i}")).await;
                }
                let bytes = usize::try_from(arg("bytes").as_u64().unwrap_or(0)).unwrap_or(0);
                text(format!("flooded {n}{}", "x".repeat(bytes)))
            }
            "sleep" => {
                let ms = arg("ms").as_u64().unwrap_or(0);
                log_message(&context.peer, format!("sleeping {ms} ms")).await;
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                text(format!("slept {ms} ms"))
            }
            "content" => {
                use rmcp::model::{Resource, ResourceContents};
                let blocks = vec![
                    ContentBlock::text("plain text"),
                    ContentBlock::image("iVBORw0KGgo=", "image/png"),
                    ContentBlock::audio("UklGRg==", "audio/wav"),
                    ContentBlock::resource(ResourceContents::text(
                        "embedded text",
                        "file:///doc.txt",
                    )),
                    ContentBlock::resource(
                        ResourceContents::blob("JVBERi0=", "file:///doc.pdf")
                            .with_mime_type("application/pdf"),
                    ),
                    ContentBlock::resource_link(Resource::new("file:///linked", "linked")),
                ];
                Ok(CallToolResponse::Complete(CallToolResult::success(blocks)))
            }
            "typed" => text(Value::Object(args.clone()).to_string()),
            "fail" => {
                Ok(CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(
                    "it broke",
                )])))
            }
            "badschema" => text("ran without validation"),
            "wait" => {
                let ms = arg("ms").as_u64().unwrap_or(60_000);
                let until = arg("until").as_str().map(std::path::PathBuf::from);
                let appears = async {
                    let Some(path) = until else { return std::future::pending().await };
                    while !path.exists() {
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                };
                log_message(&context.peer, format!("waiting {ms} ms")).await;
                tokio::select! {
                    () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => text("waited"),
                    () = appears => text("waited"),
                    () = context.ct.cancelled() => {
                        CANCELLED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        Err(McpError::internal_error("cancelled", None))
                    }
                }
            }
            "progress" => {
                let steps = arg("steps").as_u64().unwrap_or(3);
                let gap = std::time::Duration::from_millis(arg("gap_ms").as_u64().unwrap_or(20));
                if let Some(token) = context.meta.get_progress_token() {
                    for i in 1..=steps {
                        if i > 1 {
                            tokio::time::sleep(gap).await;
                        }
                        let p =
                            rmcp::model::ProgressNotificationParam::new(token.clone(), i as f64)
                                .with_total(steps as f64)
                                .with_message(format!("step {i}"));
                        let _ = context.peer.notify_progress(p).await;
                    }
                }
                text(format!("{steps} steps"))
            }
            "cancelled" => text(CANCELLED.load(std::sync::atomic::Ordering::SeqCst).to_string()),
            "env" => {
                let name = arg("name").as_str().unwrap_or_default().to_owned();
                text(std::env::var(&name).unwrap_or_else(|_| "<unset>".to_owned()))
            }
            "grow" => {
                let name = {
                    let mut tools = self
                        .tools
                        .lock()
                        .map_err(|_| McpError::internal_error("poisoned", None))?;
                    let name = format!("grown_{}", tools.len() - base_tools().len() + 1);
                    tools.push(tool(&name, "Added by grow", object(json!({}), &[])));
                    name
                };
                // `{"quiet": true}`: the list changes without a word (a client that keeps it
                // for its `ttlMs` finds out when that passes).
                if arg("quiet") != Value::Bool(true) {
                    context
                        .peer
                        .notify_tool_list_changed()
                        .await
                        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                }
                text(name)
            }
            other => Err(McpError::invalid_params(format!("no tool named {other:?}"), None)),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    if let Some(i) = args.iter().position(|a| a == "--browser") {
        return oauth::browse(args.get(i + 1).map_or("", String::as_str)).await;
    }
    if let Some(i) = args.iter().position(|a| a == "--exit-before-initialize") {
        let code = args.get(i + 1).and_then(|c| c.parse().ok()).unwrap_or(1);
        std::process::exit(code);
    }
    if has("--idle") {
        // A do-nothing process (used as a grandchild in process-group tests).
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }
    #[cfg(unix)]
    let _term = if has("--ignore-sigterm") {
        // Handling SIGTERM (and doing nothing) keeps it from ending the process.
        Some(tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?)
    } else {
        None
    };
    if has("--grandchild") {
        let child = std::process::Command::new(std::env::current_exe()?)
            .arg("--idle")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()?;
        eprintln!("mcp-fixture: grandchild pid {}", child.id());
    }
    eprintln!("mcp-fixture: starting (pid {})", std::process::id());
    // `--ballast-mib N`: hold N MiB of touched memory, like a server with a runtime loaded.
    let _ballast: Vec<u8> = args
        .iter()
        .position(|a| a == "--ballast-mib")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse::<usize>().ok())
        .map_or_else(Vec::new, |mib| vec![1u8; mib << 20]);
    if let Some(i) = args.iter().position(|a| a == "--startup-delay-ms") {
        // Like a real server loading its runtime and dependencies before it answers.
        let ms = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(0);
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    if has("--raw") {
        return raw::serve(raw::Flags {
            fail_prompts: has("--fail-prompts"),
            empty: has("--empty"),
            bad_tool: has("--bad-tool"),
            listing: args
                .iter()
                .position(|a| a == "--listing")
                .and_then(|i| args.get(i + 1))
                .map(std::path::PathBuf::from),
            endless: args
                .iter()
                .position(|a| a == "--endless")
                .and_then(|i| args.get(i + 1))
                .cloned(),
        });
    }
    if has("--garbage") {
        println!("this is not JSON-RPC");
    }
    let initialize = if has("--fail-initialize") {
        Initialize::Fail
    } else if has("--hang-initialize") {
        Initialize::Hang
    } else {
        Initialize::Normal
    };
    let mut tools = base_tools();
    if has("--rich") {
        tools.extend(rich_tools());
    }
    if has("--asks") {
        tools.extend(asks::tools(tool));
    }
    if has("--capable-tools") {
        let none = object(json!({}), &[]);
        tools.push(tool("elicit_only", "Listed only to a client that elicits", none.clone()));
        tools.push(tool("sample_only", "Listed only to a client that samples", none));
    }
    if has("--flood") {
        let count = json!({"count": {"type": "integer"}, "bytes": {"type": "integer"},
            "levels": {"type": "array", "items": {"type": "string"}}});
        tools.push(tool(
            "flood",
            "Sends `count` log messages, then an answer `bytes` long",
            object(count, &["count"]),
        ));
    }
    if let Some(ms) =
        args.iter().position(|a| a == "--roots-at-start-ms").and_then(|i| args.get(i + 1))
    {
        let _ = asks::ROOTS_AT_START.set(ms.parse().unwrap_or(0));
        let none = json!({"type": "object", "properties": {}});
        tools.push(tool(
            "start_roots",
            "The roots it was given when it asked after starting",
            none,
        ));
    }
    if let Some(n) = args.iter().position(|a| a == "--tools").and_then(|i| args.get(i + 1)) {
        // Many tools, for catalog benchmarks.
        let n: usize = n.parse().unwrap_or(0);
        tools.extend((0..n).map(|i| {
            let props = json!({"text": {"type": "string", "description": "what to echo"}, "count": {"type": ["integer", "null"]}});
            tool(&format!("t{i}"), "A generated tool", object(props, &["text"]))
        }));
    }
    let page_size = args
        .iter()
        .position(|a| a == "--page-size")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let rich = has("--rich");
    let hang_list = has("--hang-list");
    let modern = has("--modern");
    let list_ttl_ms = args
        .iter()
        .position(|a| a == "--list-ttl-ms")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok());
    let fixture = Fixture {
        initialize,
        tools: Arc::new(Mutex::new(tools)),
        rich,
        page: page_size,
        hang_list,
        modern,
        list_ttl_ms,
        skills: if has("--skills") {
            Skills::Serve
        } else if has("--fail-skills") {
            Skills::Fail
        } else {
            Skills::None
        },
        lenient: has("--lenient"),
        tools_file: args
            .iter()
            .position(|a| a == "--tools-file")
            .and_then(|i| args.get(i + 1))
            .map(std::path::PathBuf::from),
    };
    if let Some(i) = args.iter().position(|a| a == "--sse") {
        let addr = args.get(i + 1).map_or("127.0.0.1:0", String::as_str);
        return sse::serve(initialize, addr).await;
    }
    if let Some(i) = args.iter().position(|a| a == "--http") {
        let addr = args.get(i + 1).map_or("127.0.0.1:0", String::as_str);
        return serve_http(fixture, addr, has("--oauth")).await;
    }
    let service = if has("--tokio-stdio") {
        fixture.serve(rmcp::transport::stdio()).await?
    } else {
        fixture.serve(stdio()?).await?
    };
    service.waiting().await?;
    if has("--survive-stdin-eof") {
        // Like servers that never notice their client went away.
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        }
    }
    Ok(())
}

/// stdin and stdout for the MCP transport. Pipes (how an MCP client starts a server) are read
/// and written through the runtime's event loop, like any socket, as Node's MCP servers do;
/// tokio's own stdin and stdout (rmcp's `stdio()`, `--tokio-stdio`) hand every read and write
/// to a blocking thread instead: eight more thread wake-ups and ~3× the CPU per call.
#[cfg(unix)]
fn stdio() -> anyhow::Result<(
    Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    Box<dyn tokio::io::AsyncWrite + Send + Unpin>,
)> {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let is_pipe = |fd: std::os::fd::BorrowedFd<'_>| {
        use std::os::unix::fs::FileTypeExt;
        std::fs::File::from(fd.try_clone_to_owned()?).metadata().map(|m| m.file_type().is_fifo())
    };
    if is_pipe(std::io::stdin().as_fd())? && is_pipe(std::io::stdout().as_fd())? {
        let input = pipe::Receiver::from_owned_fd(std::io::stdin().as_fd().try_clone_to_owned()?)?;
        let output = pipe::Sender::from_owned_fd(std::io::stdout().as_fd().try_clone_to_owned()?)?;
        return Ok((Box::new(input), Box::new(output)));
    }
    Ok((Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout())))
}

#[cfg(not(unix))]
fn stdio() -> anyhow::Result<(tokio::io::Stdin, tokio::io::Stdout)> {
    Ok(rmcp::transport::stdio())
}

/// Streamable HTTP on a loopback address, one fixture per MCP session (tools added by `grow`
/// are per session, like a real server's state).
fn loopback(addr: &str) -> anyhow::Result<std::net::SocketAddr> {
    let wanted: std::net::SocketAddr = addr.parse()?;
    // Checked before binding: the fixture never listens beyond loopback, not even briefly.
    anyhow::ensure!(
        wanted.ip().is_loopback(),
        "the fixture only binds loopback addresses, not {wanted}"
    );
    Ok(wanted)
}

async fn serve_http(fixture: Fixture, addr: &str, oauth: bool) -> anyhow::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    let listener = tokio::net::TcpListener::bind(loopback(addr)?).await?;
    let local = listener.local_addr()?;
    println!("LISTENING http://{local}/mcp");
    let (initialize, modern) = (fixture.initialize, fixture.modern);
    let tools_file = fixture.tools_file.clone();
    // Each session starts with the tools the flags chose (its own copy: `grow` is per session).
    let tools = fixture.tools.lock().map(|t| t.clone()).unwrap_or_else(|_| base_tools());
    let service = StreamableHttpService::new(
        move || {
            Ok(Fixture {
                initialize,
                tools: Arc::new(Mutex::new(tools.clone())),
                rich: false,
                page: 0,
                hang_list: false,
                modern,
                list_ttl_ms: None,
                skills: Skills::None,
                lenient: false,
                tools_file: tools_file.clone(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let site = oauth.then(|| oauth::Site::new(format!("http://{local}")));
    loop {
        let (stream, _) = listener.accept().await?;
        let Some(site) = site.clone() else {
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
            continue;
        };
        let service = service.clone();
        let routed =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (service, site) = (service.clone(), site.clone());
                async move {
                    let answer = if req.uri().path() == "/mcp" {
                        if site.allows(&req) {
                            service.handle(req).await
                        } else {
                            site.unauthorized()
                        }
                    } else {
                        match site.route(req).await {
                            Some(r) => r,
                            None => oauth::not_found(),
                        }
                    };
                    Ok::<_, std::convert::Infallible>(answer)
                }
            });
        tokio::spawn(async move {
            let _ = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), routed)
                .await;
        });
    }
}

/// The legacy HTTP+SSE transport (2024-11-05), which rmcp no longer ships: each `GET /sse`
/// starts a session whose first event names the endpoint to POST messages to.
mod sse {
    use std::collections::HashMap;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use futures::channel::mpsc;
    use futures::{StreamExt, stream};
    use http_body_util::combinators::BoxBody;
    use http_body_util::{BodyExt, Full, StreamBody};
    use hyper::body::{Frame, Incoming};
    use hyper::{Method, Request, Response, StatusCode};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use rmcp::ServiceExt;
    use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};

    use super::{Fixture, Initialize, base_tools, loopback};

    type Body = BoxBody<Bytes, Infallible>;
    type Sessions = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<ClientJsonRpcMessage>>>>;

    fn reply(status: StatusCode, text: &str) -> Response<Body> {
        let mut r = Response::new(Full::new(Bytes::from(text.to_owned())).boxed());
        *r.status_mut() = status;
        r
    }

    fn event(kind: &str, data: &str) -> Result<Frame<Bytes>, Infallible> {
        Ok(Frame::data(Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))))
    }

    async fn handle(
        req: Request<Incoming>,
        sessions: Sessions,
        initialize: Initialize,
        next: Arc<AtomicU64>,
    ) -> Result<Response<Body>, Infallible> {
        match (req.method(), req.uri().path()) {
            (&Method::GET, "/sse") => {
                let id = next.fetch_add(1, Ordering::Relaxed).to_string();
                let (in_tx, in_rx) = mpsc::unbounded::<ClientJsonRpcMessage>();
                let (out_tx, out_rx) = mpsc::unbounded::<ServerJsonRpcMessage>();
                if let Ok(mut s) = sessions.lock() {
                    s.insert(id.clone(), in_tx);
                }
                let fixture = Fixture {
                    initialize,
                    tools: Arc::new(Mutex::new(base_tools())),
                    rich: false,
                    page: 0,
                    hang_list: false,
                    modern: false,
                    list_ttl_ms: None,
                    skills: crate::Skills::None,
                    lenient: false,
                    tools_file: None,
                };
                tokio::spawn(async move {
                    if let Ok(service) = fixture.serve((out_tx, in_rx)).await {
                        let _ = service.waiting().await;
                    }
                });
                let endpoint =
                    stream::once(
                        async move { event("endpoint", &format!("/message?sessionId={id}")) },
                    );
                let messages = out_rx
                    .map(|m| event("message", &serde_json::to_string(&m).unwrap_or_default()));
                let mut r =
                    Response::new(BodyExt::boxed(StreamBody::new(endpoint.chain(messages))));
                r.headers_mut().insert(
                    "content-type",
                    hyper::header::HeaderValue::from_static("text/event-stream"),
                );
                Ok(r)
            }
            (&Method::POST, "/message") => {
                let id = req
                    .uri()
                    .query()
                    .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("sessionId=")))
                    .unwrap_or_default()
                    .to_owned();
                let Some(tx) = sessions.lock().ok().and_then(|s| s.get(&id).cloned()) else {
                    return Ok(reply(StatusCode::NOT_FOUND, "unknown session"));
                };
                let Ok(body) = req.into_body().collect().await else {
                    return Ok(reply(StatusCode::BAD_REQUEST, "unreadable body"));
                };
                match serde_json::from_slice::<ClientJsonRpcMessage>(&body.to_bytes()) {
                    Ok(msg) => match tx.unbounded_send(msg) {
                        Ok(()) => Ok(reply(StatusCode::ACCEPTED, "Accepted")),
                        Err(_) => Ok(reply(StatusCode::GONE, "session ended")),
                    },
                    Err(e) => {
                        Ok(reply(StatusCode::BAD_REQUEST, &format!("not a JSON-RPC message: {e}")))
                    }
                }
            }
            _ => Ok(reply(StatusCode::NOT_FOUND, "not found")),
        }
    }

    pub(super) async fn serve(initialize: Initialize, addr: &str) -> anyhow::Result<()> {
        let listener = tokio::net::TcpListener::bind(loopback(addr)?).await?;
        println!("LISTENING http://{}/sse", listener.local_addr()?);
        let sessions: Sessions = Arc::default();
        let next = Arc::new(AtomicU64::new(1));
        loop {
            let (stream, _) = listener.accept().await?;
            let (sessions, next) = (sessions.clone(), next.clone());
            let service = hyper::service::service_fn(move |req| {
                handle(req, sessions.clone(), initialize, next.clone())
            });
            tokio::spawn(async move {
                let _ = Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

/// `--raw`: JSON-RPC written by hand over stdio, so results can break the MCP schema in ways
/// rmcp's typed server cannot express.
mod raw {
    use std::io::{BufRead, Write};

    use serde_json::{Value, json};

    /// `--fail-prompts`: `prompts/list` fails. `--empty`: no tools or prompts, and empty
    /// instructions.
    #[derive(Debug, Clone)]
    pub(super) struct Flags {
        pub(super) fail_prompts: bool,
        pub(super) empty: bool,
        /// `--bad-tool`: one more tool, without an `inputSchema`.
        pub(super) bad_tool: bool,
        /// `--listing FILE`: `{"tools": [...], "results": {name: result}}`, served as written.
        pub(super) listing: Option<std::path::PathBuf>,
        /// `--endless METHOD` (`tools/list`, `prompts/list`, `resources/list` or
        /// `resources/templates/list`): that list never ends, each page 1,000 items of about
        /// 1 KB and a new cursor; resources are offered too, the other lists as usual.
        pub(super) endless: Option<String>,
    }

    /// A page of the `--endless` list `method`: the page after `params`' cursor.
    fn endless_page(method: &str, params: &Value) -> Value {
        let n: u64 = params["cursor"].as_str().and_then(|c| c.parse().ok()).unwrap_or(0);
        let pad = "x".repeat(1000);
        let items: Vec<Value> = (0..1000)
            .map(|i| {
                let name = format!("e{n}_{i}");
                match method {
                    "tools/list" => json!({ "name": name, "description": pad,
                                            "inputSchema": { "type": "object" } }),
                    "resources/list" => json!({ "uri": format!("fx://e/{n}/{i}"), "name": name,
                                                "description": pad }),
                    "resources/templates/list" => json!({
                        "uriTemplate": format!("fx://e/{n}/{i}/{{x}}"), "name": name,
                        "description": pad }),
                    _ => json!({ "name": name, "description": pad }),
                }
            })
            .collect();
        let key = match method {
            "tools/list" => "tools",
            "resources/list" => "resources",
            "resources/templates/list" => "resourceTemplates",
            _ => "prompts",
        };
        json!({ key: items, "nextCursor": (n + 1).to_string() })
    }

    fn result(method: &str, params: &Value, flags: &Flags) -> Result<Value, (i64, String)> {
        if let Some(endless) = &flags.endless {
            match method {
                "initialize" => {
                    return Ok(json!({
                        "protocolVersion": params["protocolVersion"],
                        "capabilities": { "tools": {}, "prompts": {}, "resources": {} },
                        "serverInfo": { "name": "geminid-fixture-raw", "version": "1" }
                    }));
                }
                m if m == endless => return Ok(endless_page(m, params)),
                "resources/list" => return Ok(json!({ "resources": [] })),
                "resources/templates/list" => return Ok(json!({ "resourceTemplates": [] })),
                _ => {}
            }
        }
        if let Some(path) = &flags.listing {
            let file: Value = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            let name = params["name"].as_str().unwrap_or_default();
            match method {
                "tools/list" => return Ok(json!({ "tools": file["tools"] })),
                "tools/call" if file["results"].get(name).is_some() => {
                    return Ok(file["results"][name].clone());
                }
                "tools/call" => {
                    let text = params["arguments"].to_string();
                    return Ok(json!({ "content": [{ "type": "text", "text": text }] }));
                }
                _ => {}
            }
        }
        match method {
            "initialize" => Ok(json!({
                "protocolVersion": params["protocolVersion"],
                "capabilities": { "tools": {}, "prompts": {} },
                "serverInfo": { "name": "geminid-fixture-raw", "version": "1" },
                "instructions": if flags.empty { "" } else { "Raw fixture." }
            })),
            "ping" => Ok(json!({})),
            "prompts/list" if flags.fail_prompts => Err((-32603, "prompts are broken".into())),
            "prompts/list" if flags.empty => Ok(json!({ "prompts": [] })),
            "prompts/list" => Ok(json!({ "prompts": [
                { "name": "blank", "description": "" }
            ]})),
            "tools/list" if flags.empty => Ok(json!({ "tools": [] })),
            "tools/list" if flags.bad_tool => Ok(json!({ "tools": [
                { "name": "broken", "description": "No input schema" },
                { "name": "odd", "description": "Returns an unknown content type between two texts",
                  "inputSchema": { "type": "object" } },
                { "description": "no name", "inputSchema": { "type": "object" } }
            ]})),
            "tools/list" => Ok(json!({ "tools": [
                { "name": "odd", "description": "Returns an unknown content type between two texts",
                  "inputSchema": { "type": "object" } },
                { "name": "not_array", "description": "Returns a content that is not an array",
                  "inputSchema": { "type": "object" } },
                { "name": "legacy_error", "description": "Reports an error the pre-spec way",
                  "inputSchema": { "type": "object" } },
                { "name": "strict", "description": "Returns the arguments it got; takes only q",
                  "inputSchema": { "type": "object", "properties": { "q": { "type": "string" } },
                                   "additionalProperties": false } }
            ]})),
            "tools/call" => match params["name"].as_str() {
                Some("odd") => Ok(json!({ "content": [
                    { "type": "text", "text": "before" },
                    { "type": "hologram", "data": "?" },
                    { "type": "text", "text": "after" }
                ]})),
                Some("not_array") => {
                    Ok(json!({ "content": { "type": "text", "text": "not in a list" } }))
                }
                Some("legacy_error") => Ok(json!({
                    "content": [{ "type": "text", "text": "old style" }],
                    "error": { "isError": "true" }
                })),
                Some("strict") => Ok(json!({ "content": [
                    { "type": "text", "text": params["arguments"].to_string() }
                ]})),
                other => Err((-32602, format!("no tool named {other:?}"))),
            },
            other => Err((-32601, format!("method not found: {other}"))),
        }
    }

    pub(super) fn serve(flags: Flags) -> anyhow::Result<()> {
        let stdout = std::io::stdout();
        for line in std::io::stdin().lock().lines() {
            let msg: Value = serde_json::from_str(&line?)?;
            let Some(id) = msg.get("id") else { continue }; // a notification
            let method = msg["method"].as_str().unwrap_or_default();
            let reply = match result(method, &msg["params"], &flags) {
                Ok(r) => json!({ "jsonrpc": "2.0", "id": id, "result": r }),
                Err((code, message)) => {
                    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
                }
            };
            let mut out = stdout.lock();
            writeln!(out, "{reply}")?;
            out.flush()?;
        }
        Ok(())
    }
}
