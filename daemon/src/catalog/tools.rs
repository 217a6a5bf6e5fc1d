//! A session's tool table: every tool it may call, by fully qualified name.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use geminid_protocol::mcp::ServerState;
use geminid_protocol::tools::{FunctionDeclaration, ToolEntry, ToolKind, ToolList};
use serde_json::value::RawValue;

use crate::discovered::{Discovery, decls};
use crate::mcp::catalog::{Catalog, Tool};
use crate::mcp::server::Server;
use crate::mcp::{Generation, McpError, RunningEntry, Supervisor};
use crate::naming;

/// Where a tool comes from, and so where its calls go.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// An MCP server: the catalog it listed, and the tool's position in it.
    Mcp {
        /// The server.
        server: Arc<Server>,
        /// The catalog the tool is in.
        catalog: Arc<Catalog>,
        /// The tool is `catalog.tools[index]`.
        index: usize,
    },
    /// A custom tool: the discovery that declared it, and its position in it.
    Discovered {
        /// The discovery.
        discovery: Arc<Discovery>,
        /// The tool is `discovery.tools[index]`.
        index: usize,
    },
}

/// One tool of a session.
#[derive(Debug, Clone)]
pub(crate) struct SessionTool {
    /// Its fully qualified name.
    pub fqn: String,
    /// Its server's name in the session's settings (empty for a custom tool).
    pub server_name: String,
    /// Where it comes from.
    pub source: Source,
    /// The session's request timeout for its server.
    pub timeout: Duration,
    /// Its `parametersJsonSchema` (Gemini CLI's transform of its input schema), serialized.
    pub parameters: Box<RawValue>,
}

impl SessionTool {
    /// The tool as an MCP tool (a custom tool's is made from its declaration).
    pub(crate) fn tool(&self) -> &Tool {
        match &self.source {
            Source::Mcp { catalog, index, .. } => &catalog.tools[*index],
            Source::Discovered { discovery, index } => &discovery.tools[*index],
        }
    }

    /// The server it belongs to; none for a custom tool.
    pub(crate) fn server(&self) -> Option<&Arc<Server>> {
        match &self.source {
            Source::Mcp { server, .. } => Some(server),
            Source::Discovered { .. } => None,
        }
    }

    /// The name policy knows it by: Gemini CLI's name before any renaming of a collision.
    fn policy_name(&self) -> std::borrow::Cow<'_, str> {
        match &self.source {
            Source::Mcp { .. } => naming::fqn(&self.server_name, &self.tool().name).into(),
            Source::Discovered { .. } => self.fqn.as_str().into(),
        }
    }
}

/// A session's tools and what to know about them. Shared by every session whose servers,
/// names and filters are the same.
#[derive(Debug, Default)]
pub(crate) struct SessionTools {
    /// In order.
    pub tools: Vec<SessionTool>,
    /// Collisions and missing servers.
    pub diagnostics: Vec<String>,
    /// Position in `tools` by fully qualified name.
    pub by_name: HashMap<String, usize>,
    /// Some server had not finished its first start when this was computed: the table is
    /// provisional, and a caller that must see every tool waits for the servers to settle
    /// (`Lifecycle::settle`).
    pub pending: bool,
    /// Tools policy's static filter hides from this session, by fully qualified name, and
    /// why (a call to one is refused with that reason).
    pub hidden: HashMap<String, (Hidden, SessionTool)>,
    /// The `tools/list` entries, built (and serialized) on first use.
    entries: OnceLock<ToolList>,
}

/// Why policy's static filter hides a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    /// In words.
    pub why: String,
    /// Only because nobody is there to confirm a call (the default of a headless session): a
    /// person calling it directly (`gemctl call`) may.
    pub by_default: bool,
}

/// Policy's static filter: tools a session must not see at all (a rule that denies a tool
/// whatever its arguments). Asked once per tool whenever a session's table is built.
pub trait ToolFilter: Send + Sync + std::fmt::Debug {
    /// Why the tool `name` (of the server entry `server`, if it is an MCP tool; with these
    /// annotations) is hidden from `session`, if it is.
    fn hides(
        &self,
        session: &str,
        name: &str,
        server: Option<&str>,
        annotations: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Option<Hidden>;

    /// Changes whenever what it hides from `session` may have changed (a session's table is
    /// filtered again then).
    fn stamp(&self, _session: &str) -> u64 {
        0
    }
}

impl SessionTools {
    /// `table` without what `filter` hides from `session` (`None` when it hides nothing).
    fn filtered(table: &SessionTools, session: &str, filter: &dyn ToolFilter) -> Option<Self> {
        let mut hidden = HashMap::new();
        let mut diagnostics = table.diagnostics.clone();
        let mut tools = Vec::with_capacity(table.tools.len());
        for t in &table.tools {
            let annotations =
                t.tool().raw.get("annotations").and_then(serde_json::Value::as_object);
            let server = t.server().map(|_| t.server_name.as_str());
            match filter.hides(session, &t.policy_name(), server, annotations) {
                Some(h) => {
                    diagnostics.push(format!("tool '{}' is hidden by policy: {}", t.fqn, h.why));
                    hidden.insert(t.fqn.clone(), (h, t.clone()));
                }
                None => tools.push(t.clone()),
            }
        }
        if hidden.is_empty() {
            return None;
        }
        let by_name = tools.iter().enumerate().map(|(i, t)| (t.fqn.clone(), i)).collect();
        Some(Self {
            tools,
            diagnostics,
            by_name,
            pending: table.pending,
            hidden,
            entries: OnceLock::new(),
        })
    }
}

impl SessionTools {
    /// A tool by its fully qualified name.
    pub(crate) fn get(&self, fqn: &str) -> Option<&SessionTool> {
        self.by_name.get(fqn).map(|i| &self.tools[*i])
    }

    /// The `tools/list` entries and, after them, the tools policy hides (by name, each with
    /// why).
    pub(crate) fn entries_all(&self, raw: bool) -> ToolList {
        let mut hidden: Vec<_> = self.hidden.iter().collect();
        hidden.sort_by(|a, b| a.0.cmp(b.0));
        let all: Arc<[ToolEntry]> = self
            .tools
            .iter()
            .map(|t| entry(t, raw, None))
            .chain(hidden.into_iter().map(|(_, (h, t))| entry(t, raw, Some(h.why.clone()))))
            .collect();
        ToolList::new(all)
    }

    /// The `tools/list` entries; with `raw`, each carries its MCP tool object too (built
    /// afresh: only the plain list is kept).
    pub(crate) fn entries(&self, raw: bool) -> ToolList {
        if !raw && let Some(built) = self.entries.get() {
            return built.clone();
        }
        let built: Arc<[ToolEntry]> = self.tools.iter().map(|t| entry(t, raw, None)).collect();
        if raw {
            return ToolList::new(built);
        }
        let list = ToolList::serialized(built.clone()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot serialize a tool list ahead; it will be serialized per call");
            ToolList::new(built)
        });
        self.entries.get_or_init(|| list).clone()
    }
}

/// What a table is built from besides the servers' states and catalogs: the generation of its
/// custom tools' discovery (0: none), and for each entry that runs, its name, the server it
/// runs as, its include/exclude lists and its timeout.
type TableKey = (u64, Vec<(String, String, Option<Vec<String>>, Option<Vec<String>>, Duration)>);

fn table_key(entries: &[RunningEntry], custom: Option<&Discovery>) -> TableKey {
    let entries = entries
        .iter()
        .map(|e| {
            (e.name.clone(), e.identity.clone(), e.include.clone(), e.exclude.clone(), e.timeout)
        })
        .collect();
    (custom.map_or(0, |d| d.generation), entries)
}

/// A session's table, the servers' generation, the filter's stamp and the custom tools'
/// discovery generation it was built at.
type Stamped = (Generation, u64, u64, Arc<SessionTools>);

/// Every session's tool table, computed on first use and kept until the supervisor's
/// generation moves (a server's state or catalog changed, or a session's entries did).
#[derive(Debug, Default)]
pub(crate) struct Tables {
    /// With the generation and the filter's stamp they were built at.
    by_session: Mutex<HashMap<String, Stamped>>,
    /// The same tables by what they were built from, so a new session configured like
    /// another gets the table already built. Valid for one servers generation.
    by_key: Mutex<(u64, HashMap<TableKey, Arc<SessionTools>>)>,
}

impl Tables {
    /// A session's tools: its custom tools first (`custom`, as discovered), then its servers
    /// in Gemini CLI's name order (`localeCompare`), each one's tools in its order, include/exclude applied. A name already
    /// taken gets `__2`, `__3`, ... (the first in that order keeps it), and the rename is
    /// reported in the diagnostics.
    ///
    /// Policy's static filter, when there is one, applies last, per session: the table shared
    /// by sessions configured alike is the unfiltered one.
    pub(crate) fn session(
        &self,
        mcp: &Supervisor,
        session: &str,
        filter: Option<&dyn ToolFilter>,
        custom: Option<Arc<Discovery>>,
    ) -> Result<Arc<SessionTools>, McpError> {
        let now = mcp.generation();
        let stamp = filter.map_or(0, |f| f.stamp(session));
        let custom_at = custom.as_ref().map_or(0, |d| d.generation);
        if let Some((at, stamped, found, hit)) = self.by_session.lock().get(session)
            && *at == now
            && *stamped == stamp
            && *found == custom_at
        {
            return Ok(hit.clone());
        }
        let entries = mcp.running_entries(session)?;
        let key = table_key(&entries, custom.as_deref());
        let shared = {
            let by_key = self.by_key.lock();
            if by_key.0 == now.servers { by_key.1.get(&key).cloned() } else { None }
        };
        let table = match shared {
            Some(t) => t,
            None => {
                let t = Arc::new(build(&entries, custom));
                let mut by_key = self.by_key.lock();
                if by_key.0 != now.servers {
                    *by_key = (now.servers, HashMap::new());
                }
                by_key.1.insert(key, t.clone());
                t
            }
        };
        let table = match filter.and_then(|f| SessionTools::filtered(&table, session, f)) {
            Some(filtered) => Arc::new(filtered),
            None => table,
        };
        // Stored under the generation read before the entries: a change meanwhile makes the
        // next lookup build again.
        let mut by_session = self.by_session.lock();
        by_session.insert(session.to_owned(), (now, stamp, custom_at, table.clone()));
        Ok(table)
    }

    /// Forget a session's table (it closed).
    pub(crate) fn forget(&self, session: &str) {
        self.by_session.lock().remove(session);
    }
}

/// A tool as `tools/list` shows it.
fn entry(t: &SessionTool, raw: bool, hidden: Option<String>) -> ToolEntry {
    let tool = t.tool();
    let kind = match t.source {
        Source::Mcp { .. } => ToolKind::Mcp,
        Source::Discovered { .. } => ToolKind::Discovered,
    };
    ToolEntry {
        name: t.fqn.clone(),
        server: t.server_name.clone(),
        tool: tool.name.clone(),
        declaration: FunctionDeclaration {
            name: t.fqn.clone(),
            description: tool.description().to_owned(),
            parameters_json_schema: t.parameters.clone(),
        },
        raw: if raw { serde_json::value::to_raw_value(&tool.raw).ok() } else { None },
        hidden,
        kind,
    }
}

/// Build a session's table from its custom tools and its entries (see [`Tables::session`]).
fn build(entries: &[RunningEntry], custom: Option<Arc<Discovery>>) -> SessionTools {
    let mut out = SessionTools::default();
    let mut taken: HashMap<String, usize> = HashMap::new();
    if let Some(d) = custom {
        out.diagnostics.extend(d.diagnostics());
        for (index, tool) in d.tools.iter().enumerate() {
            let fqn = format!("{}{}", decls::PREFIX, tool.name);
            if let Err(e) = &*tool.validator {
                out.diagnostics.push(format!(
                    "the parameters schema of '{fqn}' cannot be compiled ({e}); its calls are \
                     not validated"
                ));
            }
            // Gemini CLI adds `wait_for_previous` to a declared object schema, and changes
            // nothing else.
            let schema = tool.input_schema().cloned().unwrap_or_default();
            let schema = naming::with_wait_for_previous(schema);
            let parameters = serde_json::value::to_raw_value(&schema)
                .unwrap_or_else(|_| RawValue::NULL.to_owned());
            taken.insert(fqn.clone(), 1);
            out.by_name.insert(fqn.clone(), out.tools.len());
            out.tools.push(SessionTool {
                fqn,
                server_name: String::new(),
                source: Source::Discovered { discovery: d.clone(), index },
                timeout: d.call_timeout(),
                parameters,
            });
        }
    }
    // Gemini CLI's order: by server name as `localeCompare` orders it (`alpha` before `Zeta`),
    // each server's tools in its own order.
    let mut entries: Vec<&RunningEntry> = entries.iter().collect();
    entries.sort_by(|a, b| geminid_protocol::collate::locale_compare(&a.name, &b.name));
    for entry in entries {
        let Some(server) = &entry.server else { continue };
        let name = &entry.name;
        let snapshot = server.snapshot();
        out.pending |= !snapshot.settled();
        if snapshot.state != ServerState::Connected {
            out.diagnostics.push(format!(
                "MCP server '{name}' is {}: its tools are not listed",
                snapshot.state.phrase()
            ));
            continue;
        }
        let catalog = server.catalog();
        out.diagnostics
            .extend(catalog.problems.iter().map(|p| format!("MCP server '{name}': {p}")));
        for (index, tool) in catalog.tools.iter().enumerate() {
            let tool_name = tool.name.as_str();
            if !naming::enabled(tool_name, entry.include.as_deref(), entry.exclude.as_deref()) {
                continue;
            }
            let base = naming::fqn(name, tool_name);
            let seen = taken.entry(base.clone()).or_insert(0);
            *seen += 1;
            let fqn = if *seen == 1 {
                base.clone()
            } else {
                let renamed = naming::disambiguate(&base, *seen);
                out.diagnostics.push(format!(
                    "tool '{tool_name}' of MCP server '{name}' would be named '{base}', which \
                         an earlier tool already has: it is named '{renamed}'"
                ));
                renamed
            };
            if let Err(e) = &*tool.validator {
                out.diagnostics.push(format!(
                    "the input schema of '{fqn}' cannot be compiled ({e}); its calls are not \
                         validated"
                ));
            }
            let schema = naming::parameters_schema(tool.input_schema());
            let parameters = serde_json::value::to_raw_value(&schema)
                .unwrap_or_else(|_| RawValue::NULL.to_owned());
            out.by_name.insert(fqn.clone(), out.tools.len());
            out.tools.push(SessionTool {
                fqn,
                server_name: name.clone(),
                source: Source::Mcp { server: server.clone(), catalog: catalog.clone(), index },
                timeout: entry.timeout,
                parameters,
            });
        }
    }
    out
}
