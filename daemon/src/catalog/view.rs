//! Prompts, resources and instructions as a session sees them: Gemini CLI's command names,
//! argument parsing, `@server:uri` references, and what the model gets of each.

use std::sync::Arc;

use geminid_protocol::tools::{
    InstructionsResult, PromptEntry, PromptsGetResult, ResourceEntry, ResourcesListResult,
    ResourcesReadResult,
};
use serde_json::{Map, Value, json};

use super::{Catalog, CatalogError, prompts};
use crate::mcp::SessionServers as Servers;
use crate::mcp::server::Server;

/// Whether a server's catalog offers `uri`: listed, or matched by a resource template.
fn offers(catalog: &crate::mcp::catalog::Catalog, uri: &str) -> bool {
    catalog.resources.iter().any(|r| r["uri"] == uri)
        || catalog
            .templates
            .iter()
            .filter_map(|t| t["uriTemplate"].as_str())
            .any(|t| prompts::template_matches(t, uri))
}

/// Which resource a `resources/read` names.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResourceRef {
    /// The server's entry name.
    pub server: Option<String>,
    /// The URI.
    pub uri: Option<String>,
    /// `@server:uri`, or a bare URI.
    pub reference: Option<String>,
}

impl Catalog {
    /// The session's servers, once each has finished its first start.
    async fn servers(&self, session: &str) -> Result<Servers, CatalogError> {
        self.ensure_servers(session)?;
        self.mcp.lifecycle().settle(session).await;
        Ok(self.mcp.session_servers(session)?)
    }

    /// Every connected server's instructions, and the text Gemini CLI appends to its system
    /// prompt.
    pub(crate) async fn instructions(
        &self,
        session: &str,
    ) -> Result<InstructionsResult, CatalogError> {
        let (servers, _) = self.servers(session).await?;
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

    /// Every prompt with its command name, its server, and the notes on servers not listed.
    pub(crate) async fn prompts(
        &self,
        session: &str,
    ) -> Result<(Vec<(PromptEntry, Arc<Server>)>, Vec<String>), CatalogError> {
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

    /// Get a prompt by its command name: `args` is a command line parsed as Gemini CLI parses
    /// one, `arguments` named values that count as given before it.
    pub(crate) async fn get_prompt(
        &self,
        session: &str,
        name: &str,
        args: Option<String>,
        arguments: Option<Map<String, Value>>,
    ) -> Result<PromptsGetResult, CatalogError> {
        let (mut entries, _) = self.prompts(session).await?;
        let Some(found) = entries.iter().position(|(e, _)| e.name == name) else {
            let commands: Vec<(&str, &str, &str)> = entries
                .iter()
                .map(|(e, _)| (e.name.as_str(), e.server.as_str(), e.prompt.as_str()))
                .collect();
            let near = prompts::likely_meant(name, &commands)
                .map(|n| format!("; did you mean '{n}'?"))
                .unwrap_or_default();
            return Err(CatalogError::NotInCatalog(format!(
                "no prompt named '{name}' in this session (`gemctl mcp prompts` lists them{near})"
            )));
        };
        let (entry, server) = entries.swap_remove(found);
        let declared = prompts::declared(&json!({ "arguments": entry.arguments }));
        let mut given = arguments.unwrap_or_default();
        let text = args.unwrap_or_default();
        let unset: Vec<prompts::Arg> = declared
            .iter()
            .map(|a| prompts::Arg {
                name: a.name.clone(),
                required: a.required && !given.contains_key(&a.name),
            })
            .collect();
        let parsed = prompts::parse_args(&text, &unset).map_err(CatalogError::MissingArguments)?;
        for (k, v) in parsed {
            given.entry(k).or_insert(v);
        }
        let arguments: Map<String, Value> = given
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                Value::String(s) => (k, Value::String(s)),
                other => (k, Value::String(other.to_string())),
            })
            .collect();
        let mut params = rmcp::model::GetPromptRequestParams::new(entry.prompt.clone());
        params.arguments = Some(arguments.clone());
        let timeout = self.mcp.timeout_for(session, &server);
        let result = (self.mcp.requests())
            .request(&server, timeout, |peer| async move { peer.get_prompt(params).await })
            .await?;
        let result = serde_json::to_value(result).unwrap_or_default();
        let first = &result["messages"][0]["content"];
        let Some(text) = first["text"].as_str().filter(|_| first["type"] == "text") else {
            return Err(CatalogError::Unusable(format!(
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

    /// A request to one of the session's servers, by its entry name (for the gateway).
    pub(crate) async fn on_server<T, Fut>(
        &self,
        session: &str,
        server_name: &str,
        send: impl FnOnce(rmcp::service::Peer<rmcp::RoleClient>) -> Fut,
    ) -> Result<T, CatalogError>
    where
        Fut: std::future::Future<Output = Result<T, rmcp::ServiceError>>,
    {
        let (servers, _) = self.servers(session).await?;
        let Some((_, server)) = servers.iter().find(|(n, _)| n == server_name) else {
            return Err(CatalogError::Mcp(crate::mcp::McpError::NotFound(format!(
                "no connected MCP server named '{server_name}' in this session"
            ))));
        };
        let timeout = self.mcp.timeout_for(session, server);
        Ok(self.mcp.requests().request(server, timeout, send).await?)
    }

    /// The first of the session's servers (by name) that offers `uri`: lists it, or has a
    /// template that matches it or is it (the gateway serves a URI two servers list once);
    /// `among` only that server.
    pub(crate) async fn first_offering(
        &self,
        session: &str,
        uri: &str,
        among: Option<&str>,
    ) -> Result<Option<String>, CatalogError> {
        let (mut servers, _) = self.servers(session).await?;
        if let Some(one) = among {
            servers.retain(|(n, _)| n == one);
        }
        let listed =
            servers.iter().find(|(_, s)| s.catalog().resources.iter().any(|r| r["uri"] == uri));
        let found = listed.or_else(|| {
            servers.iter().find(|(_, s)| {
                let c = s.catalog();
                offers(&c, uri) || c.templates.iter().any(|t| t["uriTemplate"] == uri)
            })
        });
        Ok(found.map(|(n, _)| n.clone()))
    }

    /// The session's connected servers: (entry name, identity).
    pub(crate) async fn identities(&self, session: &str) -> Vec<(String, String)> {
        let Ok((servers, _)) = self.servers(session).await else { return Vec::new() };
        servers.iter().map(|(n, s)| (n.clone(), s.identity.clone())).collect()
    }

    /// The identity of one of the session's servers (whose notifications name it so).
    pub(crate) async fn identity_of(&self, session: &str, server_name: &str) -> Option<String> {
        let (servers, _) = self.servers(session).await.ok()?;
        servers.iter().find(|(n, _)| n == server_name).map(|(_, s)| s.identity.clone())
    }

    /// Refused unless `name` is exactly one of the session's server entries (the gateway of
    /// one server): why, naming a near miss.
    pub(crate) fn check_server(&self, session: &str, name: &str) -> Result<(), String> {
        self.ensure_servers(session).map_err(|e| e.to_string())?;
        match self.mcp.find(Some(session), name) {
            Err(crate::mcp::McpError::NotFound(why)) => Err(why),
            _ => Ok(()),
        }
    }

    /// A prompt by its server and own name, as the server answers (for the gateway).
    pub(crate) async fn get_prompt_raw(
        &self,
        session: &str,
        server_name: &str,
        prompt: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Value, CatalogError> {
        let mut params = rmcp::model::GetPromptRequestParams::new(prompt.to_owned());
        params.arguments = arguments;
        let result = self
            .on_server(session, server_name, |peer| async move { peer.get_prompt(params).await })
            .await?;
        Ok(serde_json::to_value(result).unwrap_or_default())
    }

    /// The session's resources and resource templates.
    pub(crate) async fn resources(
        &self,
        session: &str,
    ) -> Result<ResourcesListResult, CatalogError> {
        let (servers, diagnostics) = self.servers(session).await?;
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

    /// Read a resource: by server and URI, a reference (`@server:uri`), or a bare URI exactly
    /// one server offers. Only a URI the server lists, or one its templates match, is read.
    pub(crate) async fn read_resource(
        &self,
        session: &str,
        which: ResourceRef,
    ) -> Result<ResourcesReadResult, CatalogError> {
        let (servers, _) = self.servers(session).await?;
        let not_in = CatalogError::NotInCatalog;
        // A bare URI: the one server that lists it (or whose template matches it).
        let owner_of = |bare: &str| -> Result<(String, String), CatalogError> {
            let owners: Vec<&String> = servers
                .iter()
                .filter(|(_, s)| offers(&s.catalog(), bare))
                .map(|(n, _)| n)
                .collect();
            match owners.as_slice() {
                [one] => Ok(((*one).clone(), bare.to_owned())),
                [] => Err(not_in(format!(
                    "no server lists a resource {bare} (`gemctl mcp resources` shows them)"
                ))),
                _ => Err(not_in(format!("several servers list {bare}: use @server:uri"))),
            }
        };
        let (server_name, uri) = match (&which.server, &which.uri, &which.reference) {
            (Some(s), Some(u), _) => (s.clone(), u.clone()),
            (None, Some(u), None) => owner_of(u)?,
            // `server:uri` where the server offers that URI; else a URI one server offers
            // (`memory://graph` is the URI of a server named `memory`); else the server named.
            (_, _, Some(r)) => {
                let parsed = prompts::parse_reference(r, servers.iter().map(|(n, _)| n.as_str()));
                let offered = |(name, uri): &(String, String)| {
                    servers.iter().any(|(n, s)| n == name && offers(&s.catalog(), uri))
                };
                match (parsed, owner_of(r.strip_prefix('@').unwrap_or(r))) {
                    (Some(p), _) if offered(&p) => p,
                    (_, Ok(found)) => found,
                    (Some(p), Err(_)) => p,
                    (None, Err(e)) => return Err(e),
                }
            }
            _ => return Err(not_in("give server and uri, or a reference (@server:uri)".into())),
        };
        let Some((_, server)) = servers.iter().find(|(n, _)| *n == server_name) else {
            return Err(CatalogError::Mcp(crate::mcp::McpError::NotFound(format!(
                "no connected MCP server named '{server_name}' in this session"
            ))));
        };
        // Only what the server offers: a URI it listed, or one of its templates matches.
        if !offers(&server.catalog(), &uri) {
            return Err(not_in(format!(
                "MCP server '{server_name}' lists no resource {uri} and no template of it \
                 matches (`gemctl mcp resources` shows them)"
            )));
        }
        let params = rmcp::model::ReadResourceRequestParams::new(uri.clone());
        let timeout = self.mcp.timeout_for(session, server);
        let result = (self.mcp.requests())
            .request(server, timeout, |peer| async move { peer.read_resource(params).await })
            .await?;
        let result = serde_json::to_value(result).unwrap_or_default();
        let contents = result["contents"].as_array().cloned().unwrap_or_default();
        let parts = prompts::resource_parts(&uri, &contents);
        Ok(ResourcesReadResult { server: server_name, uri, contents, parts })
    }
}
