//! The catalog as a gateway serves it: which of the session's tools, prompts and resources
//! (all, or one server's; with the tools only a person could confirm when the client confirms
//! itself), under which names, and telling the client when they change.

use std::sync::Arc;

use geminid_protocol::event::EventBody;
use rmcp::ErrorData as McpError;
use rmcp::model::Tool;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::names::{self, Item, NameMap};
use super::{Gateway, catalog_error, notify};
use crate::catalog::tools::{SessionTool, SessionTools};

/// Which of the session's tools a gateway serves.
#[derive(Debug)]
pub(super) enum Pick {
    /// The table's, by position.
    Listed(usize),
    /// Hidden from the session only because nobody would confirm it, by name.
    Asked(String),
}

/// The tools a gateway serves, out of the session's table, and their served names.
#[derive(Debug)]
pub(super) struct Served {
    st: Arc<SessionTools>,
    picks: Vec<Pick>,
    pub(super) map: NameMap,
    /// The tools as `tools/list` serves them, and their fingerprint, made on first use.
    listed: std::sync::OnceLock<(Vec<Tool>, u64)>,
}

impl Served {
    pub(super) fn tool(&self, i: usize) -> &SessionTool {
        match &self.picks[i] {
            Pick::Listed(n) => &self.st.tools[*n],
            Pick::Asked(fqn) => &self.st.hidden[fqn].1,
        }
    }

    fn iter(&self) -> impl Iterator<Item = &SessionTool> {
        (0..self.picks.len()).map(|i| self.tool(i))
    }

    /// The tools as `tools/list` serves them, and their fingerprint.
    pub(super) fn listed(&self) -> &(Vec<Tool>, u64) {
        self.listed.get_or_init(|| {
            let tools = self.make_list();
            let print = fingerprint(&tools);
            (tools, print)
        })
    }

    fn make_list(&self) -> Vec<Tool> {
        let mut out = Vec::with_capacity(self.picks.len());
        for (t, name) in self.iter().zip(&self.map.served) {
            let mut raw = t.tool().raw.clone();
            if let Some(o) = raw.as_object_mut() {
                o.insert("name".into(), Value::String(name.clone()));
                // MCP clients require an object schema: a custom tool declared without one
                // (`{}`) is served as `{"type": "object"}`.
                if let Some(schema) = o.get_mut("inputSchema").and_then(Value::as_object_mut)
                    && !schema.contains_key("type")
                {
                    schema.insert("type".into(), Value::String("object".into()));
                }
            }
            match serde_json::from_value::<Tool>(raw) {
                Ok(tool) => out.push(tool),
                Err(e) => {
                    tracing::warn!(tool = %t.fqn, error = %e, "gateway: a tool its client could not parse is left out")
                }
            }
        }
        out
    }
}

pub(super) fn fingerprint(v: &impl serde::Serialize) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(v).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// What a client sees of the session's resources: the resources and the templates.
pub(super) fn resources_fingerprint(r: &geminid_protocol::tools::ResourcesListResult) -> u64 {
    fingerprint(&(r.resources.iter().map(|e| &e.resource).collect::<Vec<_>>(), &r.templates))
}

impl Gateway {
    /// The tools served (the session's, or its one server's; with those only hidden because
    /// nobody would confirm them when the client is asked to confirm its calls) and the names
    /// they are served under.
    pub(super) async fn tools(&self) -> Result<Arc<Served>, McpError> {
        self.tools_for(self.asked_to_confirm()).await
    }

    /// [`Gateway::tools`], with the tools that need a confirmation (`asked`) or without. Kept
    /// while the session's table is the same one (every call looks its tool up here: naming a
    /// table of 1,000 tools afresh per call would cost the call path more than the call).
    pub(super) async fn tools_for(&self, asked: bool) -> Result<Arc<Served>, McpError> {
        let st = self
            .services
            .catalog
            .session_tools(&self.session, true)
            .await
            .map_err(catalog_error)?;
        if let Some((was, served)) = &*self.served.lock()
            && *was == asked
            && Arc::ptr_eq(&served.st, &st)
        {
            return Ok(served.clone());
        }
        let mut picks: Vec<Pick> = (0..st.tools.len())
            .filter(|&i| self.serves(&st.tools[i].server_name))
            .map(Pick::Listed)
            .collect();
        if asked {
            let mut asked: Vec<&String> = st
                .hidden
                .iter()
                .filter(|(_, (h, t))| h.by_default && self.serves(&t.server_name))
                .map(|(fqn, _)| fqn)
                .collect();
            asked.sort();
            picks.extend(asked.into_iter().cloned().map(Pick::Asked));
        }
        let mut served =
            Served { st, picks, map: NameMap::default(), listed: std::sync::OnceLock::new() };
        let items: Vec<Item<'_>> = served
            .iter()
            .map(|t| Item { server: &t.server_name, own: &t.tool().name, fqn: &t.fqn })
            .collect();
        let map = names::build(&items, self.serving.names);
        drop(items);
        served.map = map;
        let served = Arc::new(served);
        *self.served.lock() = Some((asked, served.clone()));
        Ok(served)
    }

    /// The tools as served and their fingerprint (made once per table).
    pub(super) async fn tool_list_fingerprinted(&self) -> Result<(Arc<Served>, u64), McpError> {
        let served = self.tools().await?;
        let fingerprint = served.listed().1;
        Ok((served, fingerprint))
    }

    /// Prompts: `(served name, server, own name, the prompt as listed)`.
    pub(super) async fn prompt_list(
        &self,
    ) -> Result<Vec<(String, String, String, Value)>, McpError> {
        let (mut entries, _) =
            self.services.catalog.prompts(&self.session).await.map_err(catalog_error)?;
        entries.retain(|(e, _)| self.serves(&e.server));
        let fqns: Vec<String> = entries.iter().map(|(e, _)| e.name.clone()).collect();
        let items: Vec<Item<'_>> = entries
            .iter()
            .zip(&fqns)
            .map(|((e, _), fqn)| Item { server: &e.server, own: &e.prompt, fqn })
            .collect();
        let map = names::build(&items, self.serving.names);
        Ok(entries
            .iter()
            .zip(map.served)
            .map(|((e, _), name)| {
                let prompt = serde_json::json!({
                    "name": name,
                    "description": e.description,
                    "arguments": e.arguments,
                });
                (name, e.server.clone(), e.prompt.clone(), prompt)
            })
            .collect())
    }

    /// The resources served (the session's, or its one server's).
    pub(super) async fn resources(
        &self,
    ) -> Result<geminid_protocol::tools::ResourcesListResult, McpError> {
        let mut r = self.services.catalog.resources(&self.session).await.map_err(catalog_error)?;
        if self.serving.server.is_some() {
            r.resources.retain(|e| self.serves(&e.server));
            r.templates.retain(|t| t["server"].as_str().is_some_and(|s| self.serves(s)));
        }
        Ok(r)
    }

    /// What the client's lists are now: (tools, prompts, resources), each if it could be read.
    pub(super) async fn fingerprints(&self) -> (Option<u64>, Option<u64>, Option<u64>) {
        let tools = self.tool_list_fingerprinted().await.ok().map(|(_, f)| f);
        let prompts = self.prompt_list().await.ok().map(|p| fingerprint(&p));
        let resources = self.resources().await.ok().map(|r| resources_fingerprint(&r));
        (tools, prompts, resources)
    }

    /// Take the lists as they are now as what the client has seen (for a subscription that
    /// may have listed through another gateway).
    pub(super) async fn mark_seen(&self) {
        let (tools, prompts, resources) = self.fingerprints().await;
        let mut seen = self.seen();
        seen.tools = seen.tools.or(tools);
        seen.prompts = seen.prompts.or(prompts);
        seen.resources = seen.resources.or(resources);
    }

    /// Tell the client which of its lists changed since it last looked (called on catalog,
    /// server and configuration events).
    pub(super) async fn announce_changes(&self, to: &notify::Announce) {
        let (tools, prompts, resources) = self.fingerprints().await;
        let (t, p, r) = {
            let mut seen = self.seen();
            let t = tools.is_some() && seen.tools.is_some() && seen.tools != tools;
            let p = prompts.is_some() && seen.prompts.is_some() && seen.prompts != prompts;
            let r = resources.is_some() && seen.resources.is_some() && seen.resources != resources;
            // A list the client never asked for is not announced, but is remembered.
            seen.tools = tools.or(seen.tools);
            seen.prompts = prompts.or(seen.prompts);
            seen.resources = resources.or(seen.resources);
            (t, p, r)
        };
        if t {
            to.tools().await;
        }
        if p {
            to.prompts().await;
        }
        if r {
            to.resources().await;
        }
    }

    /// Follow the session's events for this client until it goes.
    pub(super) async fn follow(self, to: notify::Announce, gone: CancellationToken) {
        let mut events = self.services.events.subscribe();
        loop {
            let ev = tokio::select! {
                () = gone.cancelled() => return,
                ev = events.recv() => ev,
            };
            if let Ok(p) = &ev
                && let EventBody::ResourceUpdated(u) = &p.event.body
            {
                if self.subscribed().contains(&(u.identity.clone(), u.uri.clone())) {
                    to.updated(&u.uri).await;
                }
                continue;
            }
            let relevant = match ev {
                Ok(p) => match &p.event.body {
                    EventBody::CatalogChanged(c) => c.sessions.contains(&self.session),
                    EventBody::ConfigChanged(c) => c.session == self.session,
                    EventBody::ToolsDiscovered(d) => d.session == self.session,
                    EventBody::McpServerState(_) => true,
                    _ => false,
                },
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => true,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if relevant {
                // Let a burst settle (a server's restart is several events).
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                while let Ok(p) = events.try_recv() {
                    drop(p);
                }
                self.announce_changes(&to).await;
            }
        }
    }
}
