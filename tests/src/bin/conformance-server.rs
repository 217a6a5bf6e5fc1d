//! A stdio MCP server with every tool, prompt and resource the MCP conformance suite's *server*
//! scenarios call (`test_simple_text`, `test_tool_with_progress`, `test_prompt_with_arguments`,
//! `test://static-text`, ...), answering as each scenario's description asks. The interop suite
//! puts it behind geminid's gateway (`gemctl mcp serve --http ADDR --server conf`) and runs the
//! suite's server scenarios against that (tests/interop/conformance_server.py).
//!
//! By default a server of the eras before 2026-07-28 (it asks its client in the middle of a
//! call); with `--modern` one of 2026-07-28 that also has the `input-required-result-*`
//! scenarios' tools (`input_required`, SEP-2322).

#[path = "../fixture/conformance_mrtr.rs"]
mod mrtr;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, Implementation, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// A 1×1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV header.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";
const JSON_SCHEMA_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

fn parse<T: DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v).map_err(|e| McpError::internal_error(e.to_string(), None))
}

fn tool(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "description": description, "inputSchema": schema })
}

fn no_args() -> Value {
    json!({ "type": "object", "properties": {} })
}

fn one_string(arg: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": { arg: { "type": "string", "description": description } },
        "required": [arg]
    })
}

fn tools(modern: bool) -> Vec<Value> {
    let asking = mrtr::TOOLS.iter().map(|(n, d)| tool(n, d, no_args()));
    let mut all: Vec<Value> = if modern { asking.collect() } else { Vec::new() };
    all.extend(vec![
        tool("test_simple_text", "Returns simple text", no_args()),
        tool("test_image_content", "Returns an image", no_args()),
        tool("test_audio_content", "Returns audio", no_args()),
        tool("test_embedded_resource", "Returns an embedded resource", no_args()),
        tool("test_multiple_content_types", "Returns text, an image and a resource", no_args()),
        tool("test_tool_with_logging", "Sends three log messages", no_args()),
        tool("test_tool_with_progress", "Reports progress 0, 50, 100", no_args()),
        tool("test_error_handling", "Always fails", no_args()),
        tool("test_sampling", "Asks the client's model", one_string("prompt", "The prompt")),
        tool("test_elicitation", "Asks the user", one_string("message", "The message")),
        tool("test_elicitation_sep1034_defaults", "Asks with defaults (SEP-1034)", no_args()),
        tool("test_elicitation_sep1330_enums", "Asks with every enum form (SEP-1330)", no_args()),
        tool("test_reconnection", "Answers after a moment", no_args()),
        tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            json!({
                "$schema": JSON_SCHEMA_2020_12,
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "address",
                        "type": "object",
                        "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
                    }
                },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" }
                },
                // SEP-2106's keywords (the 2026-07-28 scenario looks for them too).
                "allOf": [{ "anyOf": [{ "required": ["name"] }, { "required": ["address"] }] }],
                "if": { "properties": { "name": { "const": "with address" } } },
                "then": { "required": ["address"] },
                "else": {},
                "additionalProperties": false
            }),
        ),
    ]);
    all
}

fn text(t: impl Into<String>) -> Result<CallToolResponse, McpError> {
    Ok(CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(t.into())])))
}

fn content(blocks: Value) -> Result<CallToolResponse, McpError> {
    let result: CallToolResult = parse(json!({ "content": blocks }))?;
    Ok(CallToolResponse::Complete(result))
}

#[allow(deprecated, reason = "logging is SEP-2577-deprecated; the suite's 2025 scenarios use it")]
async fn log(peer: &Peer<RoleServer>, data: &str) {
    let param = rmcp::model::LoggingMessageNotificationParam::new(
        rmcp::model::LoggingLevel::Info,
        Value::String(data.to_owned()),
    );
    let _ = peer.notify_logging_message(param).await;
}

async fn pause() {
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}

/// Ask the client to fill in `schema`; the answer as the scenarios want it in words.
async fn elicit(
    peer: &Peer<RoleServer>,
    message: &str,
    schema: Value,
    prefix: &str,
) -> Result<CallToolResponse, McpError> {
    let params = parse(json!({ "mode": "form", "message": message, "requestedSchema": schema }))?;
    let answer = peer
        .create_elicitation(params)
        .await
        .map_err(|e| McpError::internal_error(format!("elicitation failed: {e}"), None))?;
    let v = serde_json::to_value(&answer).unwrap_or_default();
    let action = v["action"].as_str().unwrap_or("cancel");
    let content = v.get("content").cloned().unwrap_or(Value::Null);
    text(format!("{prefix}action={action}, content={content}"))
}

#[derive(Debug, Clone, Default)]
struct Conformance {
    /// Of 2026-07-28 (`--modern`).
    modern: bool,
}

impl Conformance {
    async fn run(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let (name, args) = (request.name.as_ref(), &request.arguments.clone().unwrap_or_default());
        if self.modern
            && let Some(answer) = mrtr::call(name, request, context)
        {
            return answer;
        }
        let peer = &context.peer;
        let arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        match name {
            "test_simple_text" => text("This is a simple text response for testing."),
            "test_image_content" => {
                content(json!([{ "type": "image", "data": PNG, "mimeType": "image/png" }]))
            }
            "test_audio_content" => {
                content(json!([{ "type": "audio", "data": WAV, "mimeType": "audio/wav" }]))
            }
            "test_embedded_resource" => content(json!([{ "type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain",
                "text": "This is an embedded resource content." } }])),
            "test_multiple_content_types" => content(json!([
                { "type": "text", "text": "Multiple content types test:" },
                { "type": "image", "data": PNG, "mimeType": "image/png" },
                { "type": "resource", "resource": { "uri": "test://mixed-content-resource",
                    "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}" } }
            ])),
            "test_tool_with_logging" => {
                log(peer, "Tool execution started").await;
                pause().await;
                log(peer, "Tool processing data").await;
                pause().await;
                log(peer, "Tool execution completed").await;
                text("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => {
                let token = context.meta.get_progress_token();
                for (i, at) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        pause().await;
                    }
                    if let Some(token) = &token {
                        let p = rmcp::model::ProgressNotificationParam::new(token.clone(), at)
                            .with_total(100.0);
                        let _ = peer.notify_progress(p).await;
                    }
                }
                text("Tool with progress executed successfully")
            }
            "test_error_handling" => {
                Ok(CallToolResponse::Complete(CallToolResult::error(vec![ContentBlock::text(
                    "This tool intentionally returns an error for testing",
                )])))
            }
            "test_sampling" => {
                let params = json!({
                    "messages": [{ "role": "user", "content": { "type": "text", "text": arg("prompt") } }],
                    "maxTokens": 100
                });
                #[allow(deprecated, reason = "sampling is SEP-2577-deprecated; the suite uses it")]
                let answer = peer
                    .create_message(parse(params)?)
                    .await
                    .map_err(|e| McpError::internal_error(format!("sampling failed: {e}"), None))?;
                let v = serde_json::to_value(&answer).unwrap_or_default();
                text(format!("LLM response: {}", v["content"]["text"].as_str().unwrap_or_default()))
            }
            "test_elicitation" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "username": { "type": "string", "description": "User's response" },
                        "email": { "type": "string", "description": "User's email address" }
                    },
                    "required": ["username", "email"]
                });
                elicit(peer, &arg("message"), schema, "User response: ").await
            }
            "test_elicitation_sep1034_defaults" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "name": { "type": "string", "default": "John Doe" },
                        "age": { "type": "integer", "default": 30 },
                        "score": { "type": "number", "default": 95.5 },
                        "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
                        "verified": { "type": "boolean", "default": true }
                    }
                });
                elicit(peer, "Please review the defaults", schema, "Elicitation completed: ").await
            }
            "test_elicitation_sep1330_enums" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                        "titledSingle": { "type": "string", "oneOf": [
                            { "const": "value1", "title": "First Option" },
                            { "const": "value2", "title": "Second Option" },
                            { "const": "value3", "title": "Third Option" } ] },
                        "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"] },
                        "untitledMulti": { "type": "array",
                            "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
                        "titledMulti": { "type": "array", "items": { "anyOf": [
                            { "const": "value1", "title": "First Choice" },
                            { "const": "value2", "title": "Second Choice" },
                            { "const": "value3", "title": "Third Choice" } ] } }
                    }
                });
                elicit(peer, "Please choose", schema, "Elicitation completed: ").await
            }
            "test_reconnection" => {
                pause().await;
                text("Reconnection test completed")
            }
            "json_schema_2020_12_tool" => text(format!("received {}", Value::Object(args.clone()))),
            other => Err(McpError::invalid_params(format!("no tool named {other}"), None)),
        }
    }
}

fn resource(uri: &str, name: &str, mime: &str) -> Value {
    json!({ "uri": uri, "name": name, "description": format!("The {name} resource"), "mimeType": mime })
}

fn prompt(name: &str, args: &[(&str, &str)]) -> Value {
    let arguments: Vec<Value> = args
        .iter()
        .map(|(n, d)| json!({ "name": n, "description": d, "required": true }))
        .collect();
    json!({ "name": name, "description": format!("The {name} prompt"), "arguments": arguments })
}

impl ServerHandler for Conformance {
    #[allow(
        deprecated,
        reason = "logging is SEP-2577-deprecated; the suite's 2025 scenarios use it"
    )]
    fn get_info(&self) -> InitializeResult {
        let mut caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_logging()
            .build();
        caps.completions = Some(Default::default());
        InitializeResult::new(caps)
            .with_server_info(Implementation::new("geminid-conformance-server", "0.1.0"))
    }

    /// A server of the eras the 2025 scenarios model knows no `server/discover` (-32601), so
    /// geminid talks to it with the `initialize` handshake, and it can ask its client
    /// (elicitation, sampling) in the middle of a call. With `--modern`, it is discovered.
    async fn discover(
        &self,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, McpError> {
        if !self.modern {
            return Err(McpError::method_not_found::<rmcp::model::DiscoverRequestMethod>());
        }
        Ok(rmcp::model::DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(parse(Value::Array(tools(self.modern)))?))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.run(&request, &context).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let list = json!([
            resource("test://static-text", "static-text", "text/plain"),
            resource("test://static-binary", "static-binary", "image/png"),
            resource("test://watched-resource", "watched-resource", "text/plain"),
        ]);
        Ok(ListResourcesResult::with_all_items(parse(list)?))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let t = json!([{ "uriTemplate": "test://template/{id}/data", "name": "template",
            "description": "Data by id", "mimeType": "application/json" }]);
        Ok(ListResourceTemplatesResult::with_all_items(parse(t)?))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.as_str();
        let one = match uri {
            "test://static-text" => json!({ "uri": uri, "mimeType": "text/plain",
                "text": "This is the content of the static text resource." }),
            "test://static-binary" => json!({ "uri": uri, "mimeType": "image/png", "blob": PNG }),
            "test://watched-resource" => {
                json!({ "uri": uri, "mimeType": "text/plain", "text": "Watched resource content." })
            }
            _ => match uri.strip_prefix("test://template/").and_then(|r| r.strip_suffix("/data")) {
                Some(id) => json!({ "uri": uri, "mimeType": "application/json",
                    "text": json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") }).to_string() }),
                None => {
                    return Err(McpError::resource_not_found(format!("no resource {uri}"), None));
                }
            },
        };
        let result: rmcp::model::ReadResourceResult = parse(json!({ "contents": [one] }))?;
        Ok(result.into())
    }

    async fn subscribe(
        &self,
        _request: rmcp::model::SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let list = json!([
            prompt("test_simple_prompt", &[]),
            prompt(
                "test_prompt_with_arguments",
                &[("arg1", "First test argument"), ("arg2", "Second test argument")]
            ),
            prompt(
                "test_prompt_with_embedded_resource",
                &[("resourceUri", "URI of the resource to embed")]
            ),
            prompt("test_prompt_with_image", &[]),
        ]);
        Ok(ListPromptsResult::with_all_items(parse(list)?))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let arg = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let user = |content: Value| json!({ "role": "user", "content": content });
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![user(
                json!({ "type": "text", "text": "This is a simple prompt for testing." }),
            )],
            "test_prompt_with_arguments" => vec![user(json!({ "type": "text",
                "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2")) }))],
            "test_prompt_with_embedded_resource" => vec![
                user(json!({ "type": "resource", "resource": { "uri": arg("resourceUri"),
                    "mimeType": "text/plain", "text": "Embedded resource content for testing." } })),
                user(
                    json!({ "type": "text", "text": "Please process the embedded resource above." }),
                ),
            ],
            "test_prompt_with_image" => vec![
                user(json!({ "type": "image", "data": PNG, "mimeType": "image/png" })),
                user(json!({ "type": "text", "text": "Please analyze the image above." })),
            ],
            other => return Err(McpError::invalid_params(format!("no prompt {other}"), None)),
        };
        let result: rmcp::model::GetPromptResult = parse(json!({ "messages": messages }))?;
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let typed = request.argument.value.to_lowercase();
        let values: Vec<String> = ["paris", "park", "party"]
            .into_iter()
            .filter(|v| v.starts_with(&typed))
            .map(str::to_owned)
            .collect();
        let info = rmcp::model::CompletionInfo::new(values)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(CompleteResult::new(info))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let modern = std::env::args().any(|a| a == "--modern");
    let running = Conformance { modern }.serve((tokio::io::stdin(), tokio::io::stdout())).await?;
    running.waiting().await?;
    Ok(())
}
