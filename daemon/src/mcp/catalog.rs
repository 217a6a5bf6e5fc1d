//! One server's catalog: its tools, prompts, resources and resource templates as it listed
//! them, and its instructions. An immutable snapshot, replaced whole when the server says a
//! list changed.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{Peer, ServiceError};
use serde_json::Value;

use super::listing;

/// One tool a server offers.
#[derive(Debug, Clone)]
pub(crate) struct Tool {
    /// Its name, as the server gave it.
    pub name: String,
    /// The `Tool` object, as the server sent it.
    pub raw: Value,
    /// Its compiled input schema, or why it cannot be compiled (its calls then go
    /// unvalidated). Filled by [`Catalog::compiled`] before the catalog is installed, off the
    /// async workers, so neither a list nor a call waits for it.
    pub validator: Arc<Validation>,
}

impl Tool {
    fn new(raw: Value) -> Self {
        let name = raw["name"].as_str().unwrap_or_default().to_owned();
        Self { name, raw, validator: Arc::new(Err("not compiled yet".to_owned())) }
    }

    /// A tool of the daemon's own making (a custom tool), its input schema compiled now.
    pub(crate) fn compiled(raw: Value) -> Self {
        let validator = Arc::new(compile(raw.get("inputSchema")));
        Self { validator, ..Self::new(raw) }
    }

    /// Its `description`, or nothing.
    pub(crate) fn description(&self) -> &str {
        self.raw["description"].as_str().unwrap_or_default()
    }

    /// Its `inputSchema`.
    pub(crate) fn input_schema(&self) -> Option<&Value> {
        self.raw.get("inputSchema")
    }
}

/// What a server offers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    /// Its tools, in its order.
    pub tools: Vec<Tool>,
    /// `Prompt` objects.
    pub prompts: Vec<Value>,
    /// `Resource` objects.
    pub resources: Vec<Value>,
    /// `ResourceTemplate` objects.
    pub templates: Vec<Value>,
    /// Skills it serves through the MCP Skills extension (`io.modelcontextprotocol/skills`):
    /// `Skill` objects (`uri`, `frontmatter`, `resources`).
    pub skills: Vec<Value>,
    /// The server's `instructions`.
    pub instructions: Option<String>,
    /// The MCP revision negotiated with it.
    pub protocol_version: Option<String>,
    /// How long its tools list may be kept (a 2026-07-28 list result's `ttlMs`, the shortest of
    /// its pages): it is listed again when this has passed. `None` or 0: until it says
    /// `list_changed`.
    pub fresh_for_ms: Option<u64>,
    /// What went wrong listing it (a list that failed or timed out), in words for its log and
    /// the session's diagnostics. The rest of the catalog is kept: a failing `prompts/list`
    /// does not cost the server its tools (Gemini CLI drops the whole server).
    pub problems: Vec<String>,
}

impl PartialEq for Catalog {
    fn eq(&self, other: &Self) -> bool {
        self.tools.iter().map(|t| &t.raw).eq(other.tools.iter().map(|t| &t.raw))
            && self.prompts == other.prompts
            && self.resources == other.resources
            && self.templates == other.templates
            && self.skills == other.skills
            && self.instructions == other.instructions
    }
}

fn names(items: &[Value], key: &str) -> Vec<String> {
    items.iter().map(|i| i[key].as_str().unwrap_or_default().to_owned()).collect()
}

impl Catalog {
    /// The catalog with its tools' schemas compiled (on the blocking pool): done once, for a
    /// catalog about to be installed.
    pub(crate) async fn compiled(mut self) -> Self {
        let inputs: Vec<Option<Value>> =
            self.tools.iter().map(|t| t.input_schema().cloned()).collect();
        let count = inputs.len();
        let compiled = tokio::task::spawn_blocking(move || {
            inputs.iter().map(|s| Arc::new(compile(s.as_ref()))).collect::<Vec<_>>()
        })
        .await
        .unwrap_or_else(|e| {
            let why = format!("compiling the schemas failed: {e}");
            (0..count).map(|_| Arc::new(Err(why.clone()))).collect()
        });
        for (tool, v) in self.tools.iter_mut().zip(compiled) {
            tool.validator = v;
        }
        self
    }

    /// (tools, prompts, resources).
    pub(crate) fn counts(&self) -> (u32, u32, u32) {
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        (n(self.tools.len()), n(self.prompts.len()), n(self.resources.len()))
    }

    /// The tool named `name`.
    pub(crate) fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Whether the two list the same names and URIs (Gemini CLI's test for "nothing
    /// changed yet" after a list_changed).
    pub(crate) fn same_names(&self, other: &Self) -> bool {
        self.tools.iter().map(|t| &t.name).eq(other.tools.iter().map(|t| &t.name))
            && names(&self.prompts, "name") == names(&other.prompts, "name")
            && names(&self.resources, "uri") == names(&other.resources, "uri")
            && names(&self.templates, "uriTemplate") == names(&other.templates, "uriTemplate")
            && names(&self.skills, "uri") == names(&other.skills, "uri")
    }
}

/// A listing's result: the items, or none when the server does not implement the method; a
/// failure is noted in `problems`.
fn items(
    what: &str,
    server: &str,
    r: Result<Result<Vec<Value>, listing::Stop>, tokio::time::error::Elapsed>,
    problems: &mut Vec<String>,
) -> Vec<Value> {
    match r {
        Ok(Ok(list)) => list,
        Ok(Err(listing::Stop::Failed(ServiceError::McpError(e))))
            if e.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND =>
        {
            vec![]
        }
        Ok(Err(listing::Stop::Failed(e))) => {
            tracing::warn!(server, error = %e, "listing {what} failed");
            problems.push(format!(
                "listing its {what} failed ({}); it is used without them",
                super::failure::error_chain(&e)
            ));
            vec![]
        }
        Ok(Err(listing::Stop::Over(why))) => {
            tracing::warn!(server, "{why}");
            problems.push(why);
            // What it had gathered is freed: given back to the system, not kept for later.
            crate::heap::release_freed();
            vec![]
        }
        Err(_) => {
            tracing::warn!(server, "listing {what} timed out");
            problems.push(format!("listing its {what} timed out; it is used without them"));
            crate::heap::release_freed();
            vec![]
        }
    }
}

/// Every page of the list `method`, its items under `key` (see [`listing::page`]).
async fn listed(
    peer: &Peer<RoleClient>,
    what: &str,
    method: &str,
    key: &str,
) -> Result<Vec<Value>, listing::Stop> {
    let (items, _) =
        listing::all_pages(what, |cursor| listing::page(peer, method, key, cursor)).await?;
    Ok(items)
}

/// Every page of `tools/list` (within [`listing`]'s caps), keeping each valid tool: a tool the
/// MCP schema refuses (`shape.rs`: no name, an `inputSchema` that is not an object schema, ...)
/// is left out and said (one bad tool must not cost the server its good ones, as a strict parse
/// of the whole answer would). The request goes out as a custom one so that an answer rmcp's
/// types refuse still arrives, as JSON.
async fn list_tools_leniently(
    peer: &Peer<RoleClient>,
) -> Result<(Vec<Value>, Vec<String>, Option<u64>), listing::Stop> {
    use rmcp::model::{ClientRequest, CustomRequest, ServerResult};
    let unlisted = std::sync::atomic::AtomicBool::new(false);
    let page = |cursor: Option<String>| {
        let unlisted = &unlisted;
        async move {
            let params = cursor.map(|c| serde_json::json!({ "cursor": c }));
            let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
            Ok(match peer.send_request(request).await? {
                ServerResult::ListToolsResult(r) => listing::Page {
                    items: r.tools.iter().filter_map(|t| serde_json::to_value(t).ok()).collect(),
                    next: r.next_cursor,
                    ttl_ms: r.ttl_ms,
                },
                ServerResult::CustomResult(c) => {
                    let Some(list) = c.0.get("tools").and_then(Value::as_array) else {
                        unlisted.store(true, std::sync::atomic::Ordering::Relaxed);
                        return Ok(listing::Page { items: vec![], next: None, ttl_ms: None });
                    };
                    listing::Page {
                        items: list.clone(),
                        next: c.0.get("nextCursor").and_then(Value::as_str).map(str::to_owned),
                        ttl_ms: c.0.get("ttlMs").and_then(Value::as_u64),
                    }
                }
                _ => return Err(ServiceError::UnexpectedResponse.into()),
            })
        }
    };
    let (listed, ttl) = listing::all_pages("tools", page).await?;
    let (mut tools, mut bad) = (Vec::new(), Vec::new());
    for (position, t) in listed.into_iter().enumerate() {
        match super::shape::tool_problem(&t) {
            None => tools.push(t),
            Some(why) => {
                let name = t
                    .get("name")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("number {}", position + 1), |n| format!("'{n}'"));
                bad.push(format!("its tool {name} is left out: {why}"));
            }
        }
    }
    if unlisted.into_inner() {
        bad.push("its tools/list answer has no \"tools\" list; no tools are listed".to_owned());
    }
    Ok((tools, bad, ttl))
}

/// List everything the server's capabilities announce, following every pagination cursor.
pub(crate) async fn discover(server: &str, peer: &Peer<RoleClient>, timeout: Duration) -> Catalog {
    let info = peer.peer_info();
    let caps = info.as_ref().map(|i| i.capabilities.clone()).unwrap_or_default();
    let instructions = info.as_ref().and_then(|i| i.instructions.clone());
    let protocol_version = info
        .as_ref()
        .and_then(|i| serde_json::to_value(&i.protocol_version).ok())
        .and_then(|v| v.as_str().map(str::to_owned));
    let (mut p_tools, mut p_prompts, mut p_resources) = (Vec::new(), Vec::new(), Vec::new());
    let mut fresh_for_ms = None;
    let tools = async {
        if caps.tools.is_none() {
            return vec![];
        }
        match tokio::time::timeout(timeout, list_tools_leniently(peer)).await {
            Ok(Ok((tools, bad, ttl))) => {
                for why in &bad {
                    tracing::warn!(server, "{why}");
                }
                p_tools.extend(bad);
                fresh_for_ms = ttl;
                tools
            }
            other => items("tools", server, other.map(|r| r.map(|(t, _, _)| t)), &mut p_tools),
        }
    };
    let prompts = async {
        if caps.prompts.is_none() {
            return vec![];
        }
        let r =
            tokio::time::timeout(timeout, listed(peer, "prompts", "prompts/list", "prompts")).await;
        items("prompts", server, r, &mut p_prompts)
    };
    let resources = async {
        if caps.resources.is_none() {
            return (vec![], vec![]);
        }
        let r =
            tokio::time::timeout(timeout, listed(peer, "resources", "resources/list", "resources"))
                .await;
        let rt = tokio::time::timeout(
            timeout,
            listed(peer, "resource templates", "resources/templates/list", "resourceTemplates"),
        )
        .await;
        let listed = items("resources", server, r, &mut p_resources);
        (listed, items("resource templates", server, rt, &mut p_resources))
    };
    let mut p_skills = Vec::new();
    let skills = async {
        if !caps.supports_skills() {
            return vec![];
        }
        let r =
            tokio::time::timeout(timeout, listed(peer, "skills", "skills/list", "skills")).await;
        items("skills", server, r, &mut p_skills)
    };
    let (tools, prompts, (resources, templates), skills) =
        tokio::join!(tools, prompts, resources, skills);
    let mut problems: Vec<String> =
        p_tools.into_iter().chain(p_prompts).chain(p_resources).chain(p_skills).collect();
    if tools.is_empty()
        && prompts.is_empty()
        && resources.is_empty()
        && templates.is_empty()
        && skills.is_empty()
        && problems.is_empty()
    {
        // Gemini CLI counts such a server as failed; it stays connected here, as a later
        // `list_changed` may bring its tools.
        problems.push("it offers no tools, prompts or resources (Gemini CLI would treat it as failed: \"No prompts, tools, or resources found on the server.\")".to_owned());
    }
    let tools = tools.into_iter().map(Tool::new).collect();
    Catalog {
        tools,
        prompts,
        resources,
        templates,
        skills,
        instructions,
        protocol_version,
        fresh_for_ms,
        problems,
    }
}

/// A tool's input schema, compiled; or why it could not be (calls then go unvalidated).
pub(crate) type Validation = Result<jsonschema::Validator, String>;

/// Compile a tool's input schema (once per catalog: see [`discover`]), as Gemini CLI's
/// `SchemaValidator` does: draft-07 without `$schema` or with draft-07's, 2020-12 with exactly
/// its URI, formats checked (ajv-formats' known ones; others ignored). A schema it cannot
/// compile, another draft's among them, leaves calls unvalidated (Gemini CLI skips validation
/// there too, and the server still checks its own input).
pub(crate) fn compile(schema: Option<&serde_json::Value>) -> Validation {
    let Some(schema) = schema else { return Err("the tool has no input schema".into()) };
    let draft = match schema.get("$schema") {
        None => jsonschema::Draft::Draft7,
        Some(s) if s == "https://json-schema.org/draft/2020-12/schema" => {
            jsonschema::Draft::Draft202012
        }
        Some(s)
            if s == "http://json-schema.org/draft-07/schema#"
                || s == "http://json-schema.org/draft-07/schema" =>
        {
            jsonschema::Draft::Draft7
        }
        Some(other) => {
            return Err(format!(
                "its $schema {other} is neither draft-07 nor 2020-12, which Gemini CLI validates against"
            ));
        }
    };
    jsonschema::options()
        .with_draft(draft)
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Most problems one error names (a model fixes them in one go; past this, "and N more").
const PROBLEMS_SAID: usize = 5;

/// Check arguments against a compiled schema: `Err` names each failing path (up to
/// [`PROBLEMS_SAID`]), `; `-separated.
pub(crate) fn check_args(
    v: &jsonschema::Validator,
    args: &serde_json::Value,
) -> Result<(), String> {
    let mut said = Vec::new();
    let mut more = 0usize;
    for e in v.iter_errors(args) {
        if said.len() == PROBLEMS_SAID {
            more += 1;
            continue;
        }
        let path = e.instance_path().to_string();
        let at = if path.is_empty() { "the arguments".to_owned() } else { path };
        said.push(format!("{at}: {e}"));
    }
    match (said.is_empty(), more) {
        (true, _) => Ok(()),
        (false, 0) => Err(said.join("; ")),
        (false, n) => Err(format!("{}; and {n} more", said.join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// Gemini CLI's `schemaValidator.test.ts` cases and the edges around them, with the
    /// answers its validator gives (ajv 8 and ajv-formats as Gemini CLI 0.61 sets them up, run
    /// in Node): `Some(valid)`, or `None` where it cannot compile the schema and skips.
    #[test]
    fn validation_as_gemini_clis_validator_answers() {
        let obj = |props: serde_json::Value| json!({"type": "object", "properties": props});
        let with = |mut s: serde_json::Value, schema: &str| {
            s["$schema"] = json!(schema);
            s
        };
        let name = obj(json!({"name": {"type": "string"}}));
        let date = obj(json!({"today": {"type": "string", "format": "date"}}));
        let cases = [
            (date.clone(), json!({"today": "2025-04-08"}), Some(true)),
            (date.clone(), json!({"today": "this is not a date"}), Some(false)),
            (
                obj(json!({"d": {"type": "string", "format": "google-duration"}})),
                json!({"d": "10s"}),
                Some(true),
            ),
            (
                with(name.clone(), "http://json-schema.org/draft-07/schema#"),
                json!({"name": 5}),
                Some(false),
            ),
            (
                with(name.clone(), "http://json-schema.org/draft-07/schema"),
                json!({"name": 5}),
                Some(false),
            ),
            (
                with(name.clone(), "https://json-schema.org/draft/2030-99/schema"),
                json!({"name": 5}),
                None,
            ),
            (
                with(name.clone(), "https://json-schema.org/draft/2019-09/schema"),
                json!({"name": 5}),
                None,
            ),
            (
                with(name.clone(), "http://json-schema.org/draft-04/schema#"),
                json!({"name": 5}),
                None,
            ),
            (
                with(name.clone(), "https://json-schema.org/draft/2020-12/schema#"),
                json!({"name": 5}),
                None,
            ),
            (
                with(name.clone(), "https://json-schema.org/draft/2020-12/schema"),
                json!({"name": 5}),
                Some(false),
            ),
            (
                with(name, "https://json-schema.org/draft/2020-12/schema"),
                json!({"name": "x"}),
                Some(true),
            ),
            (
                with(date, "https://json-schema.org/draft/2020-12/schema"),
                json!({"today": "nope"}),
                Some(false),
            ),
            (
                with(
                    obj(
                        json!({"c": {"type": "array", "prefixItems": [{"type": "number"}], "items": false}}),
                    ),
                    "https://json-schema.org/draft/2020-12/schema",
                ),
                json!({"c": [1, 2]}),
                Some(false),
            ),
            (obj(json!({"n": {"type": ["null", "null"]}})), json!({"n": 5}), None),
            (json!({"type": "object", "properties": [{"type": "string"}]}), json!({"0": 5}), None),
            (
                obj(json!({"e": {"type": "string", "enum": ["A"], "enum-descriptions": ["a"]}})),
                json!({"e": "B"}),
                Some(false),
            ),
            (
                obj(json!({"m": {"type": "string", "format": "email"}})),
                json!({"m": "not-an-email"}),
                Some(false),
            ),
            (
                obj(json!({"u": {"type": "string", "format": "uri"}})),
                json!({"u": "not a uri"}),
                Some(false),
            ),
            (
                obj(json!({"t": {"type": "string", "format": "date-time"}})),
                json!({"t": "2025-04-08T10:00:00Z"}),
                Some(true),
            ),
            (
                obj(json!({"t": {"type": "string", "format": "time"}})),
                json!({"t": "10:00:00"}),
                Some(false),
            ),
            (
                obj(json!({"n": {"type": "integer", "format": "int32"}})),
                json!({"n": 5}),
                Some(true),
            ),
        ];
        for (schema, args, want) in cases {
            let got =
                super::compile(Some(&schema)).ok().map(|v| super::check_args(&v, &args).is_ok());
            assert_eq!(got, want, "{schema} with {args}");
        }
    }

    #[test]
    fn every_problem_is_said_up_to_five() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "type": "string" }, "n": { "type": "integer" } },
            "required": ["a", "b"]
        });
        let v = super::compile(Some(&schema)).unwrap();
        assert_eq!(super::check_args(&v, &json!({"a": "x", "b": 1})), Ok(()));
        let e = super::check_args(&v, &json!({"a": 5, "n": "x"})).unwrap_err();
        let said: Vec<&str> = e.split("; ").collect();
        assert_eq!(said.len(), 3, "{e}");
        assert!(said.iter().any(|p| p.starts_with("/a: 5 is not of type")), "{e}");
        assert!(said.iter().any(|p| p.starts_with("/n: ")), "{e}");
        assert!(said.iter().any(|p| p.starts_with("the arguments: \"b\" is a required")), "{e}");
        let many = json!({
            "type": "object",
            "properties": (0..8).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect::<serde_json::Map<_, _>>()
        });
        let v = super::compile(Some(&many)).unwrap();
        let args: serde_json::Map<_, _> = (0..8).map(|i| (format!("p{i}"), json!(i))).collect();
        let e = super::check_args(&v, &serde_json::Value::Object(args)).unwrap_err();
        assert!(e.ends_with("; and 3 more"), "{e}");
    }
}
