//! `prompts/*` and `resources/*`.

use std::sync::Arc;

use geminid_protocol::api::{PromptsApiServer, ResourcesApiServer};
use geminid_protocol::error::ErrorCode;
use geminid_protocol::tools::{
    CatalogParams, InstructionsResult, PromptEntry, PromptsGetParams, PromptsGetResult,
    PromptsListResult, ResourceEntry, ResourcesListResult, ResourcesReadParams,
    ResourcesReadResult,
};
use jsonrpsee::core::{RpcResult, async_trait};
use serde_json::{Value, json};

use super::Handler;
use super::mcp::mcp_error;
use crate::catalog::prompts;
use crate::mcp::server::Server;

use crate::mcp::SessionServers as Servers;

impl Handler {
    pub(super) async fn instructions(&self, p: CatalogParams) -> RpcResult<InstructionsResult> {
        let (servers, _) = self.servers(&p.session).await?;
        let list: Vec<(String, String)> = servers
            .iter()
            // Empty instructions are none, as in Gemini CLI.
            .filter_map(|(n, s)| {
                s.catalog().instructions.clone().filter(|i| !i.is_empty()).map(|i| (n.clone(), i))
            })
            .collect();
        let system_prompt = list
            .iter()
            .map(|(n, i)| format!("The following are instructions provided by the tool server '{n}':\n---[start of server instructions]---\n{i}\n---[end of server instructions]---"))
            .collect::<Vec<_>>()
            .join("\n\n");
        Ok(InstructionsResult { servers: list, system_prompt })
    }

    /// The session's servers, once each has finished its first start (see `session_tools`).
    async fn servers(&self, session: &str) -> RpcResult<Servers> {
        self.ensure_servers(session).await?;
        self.core.mcp.settle(session).await;
        self.core.mcp.session_servers(session).map_err(mcp_error)
    }

    /// Every prompt with its command name.
    async fn prompt_entries(
        &self,
        session: &str,
    ) -> RpcResult<(Vec<(PromptEntry, Arc<Server>)>, Vec<String>)> {
        let (servers, notes) = self.servers(session).await?;
        let mut found = Vec::new();
        for (name, server) in &servers {
            for p in &server.catalog().prompts {
                found.push((name.clone(), p.clone(), server.clone()));
            }
        }
        let pairs: Vec<(String, String)> = found
            .iter()
            .map(|(s, p, _)| (s.clone(), p["name"].as_str().unwrap_or_default().to_owned()))
            .collect();
        let names = prompts::command_names(&pairs);
        let entries = found
            .into_iter()
            .zip(names)
            .map(|((server, p, srv), name)| {
                let own = p["name"].as_str().unwrap_or_default().to_owned();
                // An empty description is none, as in Gemini CLI (`description || ...`).
                let description = p["description"]
                    .as_str()
                    .filter(|d| !d.is_empty())
                    .map_or_else(|| format!("Invoke prompt {own}"), str::to_owned);
                let arguments = p["arguments"].as_array().cloned().unwrap_or_default();
                (PromptEntry { name, server, prompt: own, description, arguments }, srv)
            })
            .collect();
        Ok((entries, notes))
    }
}

/// Whether a server's catalog offers `uri`: listed, or matched by a resource template.
fn offers(catalog: &crate::mcp::catalog::Catalog, uri: &str) -> bool {
    catalog.resources.iter().any(|r| r["uri"] == uri)
        || catalog
            .templates
            .iter()
            .filter_map(|t| t["uriTemplate"].as_str())
            .any(|t| prompts::template_matches(t, uri))
}

#[async_trait]
impl PromptsApiServer for Handler {
    async fn prompts_list(&self, p: CatalogParams) -> RpcResult<PromptsListResult> {
        let (entries, diagnostics) = self.prompt_entries(&p.session).await?;
        Ok(PromptsListResult {
            prompts: entries.into_iter().map(|(e, _)| e).collect(),
            diagnostics,
        })
    }

    async fn prompts_get(&self, p: PromptsGetParams) -> RpcResult<PromptsGetResult> {
        let (entries, _) = self.prompt_entries(&p.session).await?;
        let Some((entry, server)) = entries.into_iter().find(|(e, _)| e.name == p.name) else {
            return Err(ErrorCode::NotInCatalog
                .error(format!("no prompt named '{}' in this session", p.name)));
        };
        let declared = prompts::declared(&json!({ "arguments": entry.arguments }));
        // Named arguments given as an object count as set before parsing the text.
        let mut given = p.arguments.clone().unwrap_or_default();
        let text = p.args.clone().unwrap_or_default();
        let unset: Vec<prompts::Arg> = declared
            .iter()
            .map(|a| prompts::Arg {
                name: a.name.clone(),
                required: a.required && !given.contains_key(&a.name),
            })
            .collect();
        let parsed =
            prompts::parse_args(&text, &unset).map_err(|e| ErrorCode::MissingArguments.error(e))?;
        for (k, v) in parsed {
            given.entry(k).or_insert(v);
        }
        let arguments: serde_json::Map<String, Value> = given
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                Value::String(s) => (k, Value::String(s)),
                other => (k, Value::String(other.to_string())),
            })
            .collect();
        let mut params = rmcp::model::GetPromptRequestParams::new(entry.prompt.clone());
        params.arguments = Some(arguments.clone());
        let timeout = self.core.mcp.timeout_for(&p.session, &server);
        let result = (self.core.mcp)
            .request(&server, timeout, |peer| async move { peer.get_prompt(params).await })
            .await
            .map_err(mcp_error)?;
        let result = serde_json::to_value(result).unwrap_or_default();
        let first = &result["messages"][0]["content"];
        let Some(text) = first["text"].as_str().filter(|_| first["type"] == "text") else {
            return Err(ErrorCode::ServerError.error(format!(
                "prompt '{}' of MCP server '{}' did not answer with text",
                entry.prompt, entry.server
            )));
        };
        let submit = Value::String(text.to_owned()).to_string();
        Ok(PromptsGetResult {
            server: entry.server,
            prompt: entry.prompt,
            arguments,
            result,
            submit,
        })
    }
}

#[async_trait]
impl ResourcesApiServer for Handler {
    async fn resources_list(&self, p: CatalogParams) -> RpcResult<ResourcesListResult> {
        let (servers, diagnostics) = self.servers(&p.session).await?;
        let mut out = ResourcesListResult { diagnostics, ..Default::default() };
        for (name, server) in &servers {
            let catalog = server.catalog();
            for r in &catalog.resources {
                let uri = r["uri"].as_str().unwrap_or_default();
                out.resources.push(ResourceEntry {
                    server: name.clone(),
                    reference: format!("@{name}:{uri}"),
                    resource: r.clone(),
                });
            }
            for t in &catalog.templates {
                out.templates.push(json!({ "server": name, "template": t }));
            }
        }
        Ok(out)
    }

    async fn resources_read(&self, p: ResourcesReadParams) -> RpcResult<ResourcesReadResult> {
        let (servers, _) = self.servers(&p.session).await?;
        // A bare URI: the one server that lists it (or whose template matches it).
        let owner_of = |bare: &str| -> RpcResult<(String, String)> {
            let owners: Vec<&String> = servers
                .iter()
                .filter(|(_, s)| offers(&s.catalog(), bare))
                .map(|(n, _)| n)
                .collect();
            match owners.as_slice() {
                [one] => Ok(((*one).clone(), bare.to_owned())),
                [] => Err(ErrorCode::NotInCatalog.error(format!(
                    "no server lists a resource {bare} (`gemctl mcp resources` shows them)"
                ))),
                _ => Err(ErrorCode::NotInCatalog
                    .error(format!("several servers list {bare}: use @server:uri"))),
            }
        };
        let (server_name, uri) = match (&p.server, &p.uri, &p.reference) {
            (Some(s), Some(u), _) => (s.clone(), u.clone()),
            (None, Some(u), None) => owner_of(u)?,
            (_, _, Some(r)) => {
                match prompts::parse_reference(r, servers.iter().map(|(n, _)| n.as_str())) {
                    Some(found) => found,
                    None => owner_of(r.strip_prefix('@').unwrap_or(r))?,
                }
            }
            _ => {
                return Err(ErrorCode::NotInCatalog
                    .error("give server and uri, or a reference (@server:uri)"));
            }
        };
        let Some((_, server)) = servers.iter().find(|(n, _)| *n == server_name) else {
            return Err(ErrorCode::ServerNotFound
                .error(format!("no connected MCP server named '{server_name}' in this session")));
        };
        // Only what the server offers: a URI it listed, or one of its templates matches.
        if !offers(&server.catalog(), &uri) {
            return Err(ErrorCode::NotInCatalog.error(format!(
                "MCP server '{server_name}' lists no resource {uri} and no template of it \
                 matches (`gemctl mcp resources` shows them)"
            )));
        }
        let params = rmcp::model::ReadResourceRequestParams::new(uri.clone());
        let timeout = self.core.mcp.timeout_for(&p.session, server);
        let result = (self.core.mcp)
            .request(server, timeout, |peer| async move { peer.read_resource(params).await })
            .await
            .map_err(mcp_error)?;
        let result = serde_json::to_value(result).unwrap_or_default();
        let contents = result["contents"].as_array().cloned().unwrap_or_default();
        let parts = prompts::resource_parts(&uri, &contents);
        Ok(ResourcesReadResult { server: server_name, uri, contents, parts })
    }
}
