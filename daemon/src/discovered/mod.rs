//! Custom tools (COMPAT §7.1): `tools.discoveryCommand` prints declarations, each becomes the
//! tool `discovered_tool_<name>` in the session's table (before its MCP tools, as Gemini CLI
//! orders them), and `tools.callCommand` runs one with the tool's own name as its argument and
//! the arguments as JSON on stdin.
//!
//! - `argv.rs`: the discovery command split as Gemini CLI splits it (no shell);
//! - `decls.rs`: its output read as Gemini CLI reads it, and the description suffix;
//! - here: [`Registry`], one discovery per distinct [`Spec`] (command, call command, workspace,
//!   environment) shared by every session that has it, run on first need and again when the
//!   spec changes or on `tools/refresh`; and `Discovery::call`.
//!
//! Both commands run through `crate::proc`: in the workspace, with the session's environment,
//! each output bounded ([`MAX_OUTPUT`]: past it the run is stopped, as Gemini CLI stops a
//! discovery), within a deadline (`--tool-discovery-timeout`, `--tool-call-timeout`), the
//! process group stopped after.

pub(crate) mod argv;
pub(crate) mod decls;
#[cfg(test)]
mod tests;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use geminid_protocol::event::EventBody;
use geminid_protocol::tools::{ToolDiscovery, ToolsDiscovered};
use serde_json::{Map, Value, json};
use tokio::sync::OnceCell;

use crate::config::env::Env;
use crate::events::EventBus;
use crate::mcp::catalog::Tool;
use crate::proc::{Job, Overflow};

/// Bytes kept of each output stream of either command (Gemini CLI's discovery limit).
pub(crate) const MAX_OUTPUT: usize = 10 * 1024 * 1024;
/// How long a discovery may take, unless the daemon is told otherwise.
pub(crate) const DEFAULT_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a call may take, unless the daemon is told otherwise (an MCP call's default).
pub(crate) const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The daemon's knobs for custom tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How long a discovery command may run.
    pub discovery_timeout: Duration,
    /// How long a call command may run.
    pub call_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self { discovery_timeout: DEFAULT_DISCOVERY_TIMEOUT, call_timeout: DEFAULT_CALL_TIMEOUT }
    }
}

/// What a session's custom tools come from.
#[derive(Clone)]
pub(crate) struct Spec {
    /// `tools.discoveryCommand`.
    pub discovery: String,
    /// `tools.callCommand`, when set.
    pub call: Option<String>,
    /// The workspace: where both commands run.
    pub cwd: PathBuf,
    /// The session's environment.
    pub env: Arc<Env>,
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spec")
            .field("discovery", &self.discovery)
            .field("call", &self.call)
            .field("cwd", &self.cwd)
            .field("env", &"[redacted]")
            .finish()
    }
}

impl PartialEq for Spec {
    fn eq(&self, other: &Self) -> bool {
        self.discovery == other.discovery
            && self.call == other.call
            && self.cwd == other.cwd
            && (Arc::ptr_eq(&self.env, &other.env) || self.env == other.env)
    }
}

impl Eq for Spec {}

impl Hash for Spec {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The environment is compared, not hashed: equal specs still hash alike.
        (&self.discovery, &self.call, &self.cwd).hash(state);
    }
}

/// One run of a discovery command and the tools it declared.
#[derive(Debug)]
pub(crate) struct Discovery {
    /// Tells runs apart (a session's table is rebuilt when its discovery's changes).
    pub generation: u64,
    /// What it ran.
    pub spec: Spec,
    /// The tools, as MCP tools named by their own names (their `inputSchema` is the declared
    /// `parametersJsonSchema`, their description has Gemini CLI's suffix).
    pub tools: Vec<Tool>,
    /// Declarations skipped, and why.
    pub problems: Vec<String>,
    /// Why the command gave no tools, when it failed.
    pub error: Option<String>,
    /// How long it took.
    pub took: Duration,
    /// When it finished (ms since the epoch).
    pub at_ms: u64,
    call_timeout: Duration,
}

impl Discovery {
    /// How long one of its calls may take.
    pub(crate) fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// What `tools/refresh` and the `tools/discovered` event say of it.
    pub(crate) fn summary(&self) -> ToolDiscovery {
        ToolDiscovery {
            command: self.spec.discovery.clone(),
            call_command: self.spec.call.clone(),
            tools: self.tools.iter().map(|t| format!("{}{}", decls::PREFIX, t.name)).collect(),
            problems: self.problems.clone(),
            error: self.error.clone(),
            took_ms: u64::try_from(self.took.as_millis()).unwrap_or(u64::MAX),
            at: crate::clock::rfc3339(self.at_ms),
        }
    }

    /// What to say of it in the session's tool list.
    pub(crate) fn diagnostics(&self) -> impl Iterator<Item = String> + '_ {
        let cmd = &self.spec.discovery;
        self.error
            .iter()
            .map(move |e| {
                format!("tool discovery command `{cmd}` failed: {e} (`gemctl tools refresh` runs it again)")
            })
            .chain(self.problems.iter().map(move |p| format!("tool discovery command `{cmd}`: {p}")))
    }

    /// Call the tool `name` (its own name) with `args`: an MCP `CallToolResult` holding what
    /// Gemini CLI gives the model (stdout on success; otherwise its five-line report).
    pub(crate) async fn call(&self, name: &str, args: Option<&Map<String, Value>>) -> Value {
        let Some(program) = &self.spec.call else {
            return failed(&report(
                "",
                "",
                "tools.callCommand is not set in the settings",
                None,
                None,
            ));
        };
        let empty = Map::new();
        let stdin = serde_json::to_vec(args.unwrap_or(&empty)).unwrap_or_default();
        let f = crate::proc::run(Job {
            program: program.as_ref(),
            args: &[name.to_owned()],
            cwd: &self.spec.cwd,
            env: &self.spec.env,
            stdin: Some(stdin),
            limit: MAX_OUTPUT,
            overflow: Overflow::Stop,
            timeout: self.call_timeout,
        })
        .await;
        if f.succeeded() && f.signal.is_none() && f.stderr.is_empty() {
            return json!({ "content": [{ "type": "text", "text": f.stdout }] });
        }
        let error = if let Some(e) = &f.spawn_error {
            format!("could not start {e}")
        } else if f.timed_out {
            let after = humantime::format_duration(self.call_timeout);
            format!("stopped after {after} (geminid --tool-call-timeout)")
        } else if f.over_limit {
            format!("stopped: its output passed {MAX_OUTPUT} bytes")
        } else {
            String::new()
        };
        let signal = f.signal.map(crate::proc::signal_name);
        failed(&report(&f.stdout, &f.stderr, &error, f.exit_code, signal.as_deref()))
    }
}

/// Gemini CLI's report of a call that did not succeed.
fn report(
    stdout: &str,
    stderr: &str,
    error: &str,
    code: Option<i32>,
    signal: Option<&str>,
) -> String {
    let or =
        |s: &str, none: &'static str| if s.is_empty() { none.to_owned() } else { s.to_owned() };
    [
        format!("Stdout: {}", or(stdout, "(empty)")),
        format!("Stderr: {}", or(stderr, "(empty)")),
        format!("Error: {}", or(error, "(none)")),
        format!("Exit Code: {}", code.map_or("(none)".to_owned(), |c| c.to_string())),
        format!("Signal: {}", signal.unwrap_or("(none)")),
    ]
    .join("\n")
}

fn failed(text: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": text }], "isError": true })
}

/// A run shared by every session whose spec is the same.
type Run = Arc<OnceCell<Arc<Discovery>>>;

/// Every session's custom tools.
#[derive(Debug)]
pub(crate) struct Registry {
    options: Options,
    events: Arc<EventBus>,
    next: AtomicU64,
    runs: Mutex<HashMap<Spec, Run>>,
    sessions: Mutex<HashMap<String, Arc<Discovery>>>,
}

impl Registry {
    /// A registry announcing discoveries on `events`.
    pub(crate) fn new(options: Options, events: Arc<EventBus>) -> Self {
        Self {
            options,
            events,
            next: AtomicU64::new(1),
            runs: Mutex::default(),
            sessions: Mutex::default(),
        }
    }

    fn runs(&self) -> parking_lot::MutexGuard<'_, HashMap<Spec, Run>> {
        self.runs.lock()
    }

    fn sessions(&self) -> parking_lot::MutexGuard<'_, HashMap<String, Arc<Discovery>>> {
        self.sessions.lock()
    }

    /// The session's custom tools as last discovered (nothing before its first need).
    pub(crate) fn current(&self, session: &str) -> Option<Arc<Discovery>> {
        self.sessions().get(session).cloned()
    }

    /// The session's custom tools for `spec` (none without one): discovered now if nothing has
    /// run that spec yet, by this session or another; a session whose spec changed (its
    /// settings, workspace or environment) gets the new spec's.
    pub(crate) async fn ensure(&self, session: &str, spec: Option<Spec>) -> Option<Arc<Discovery>> {
        let Some(spec) = spec else {
            self.sessions().remove(session);
            return None;
        };
        let run = {
            let mut runs = self.runs();
            if let Some(run) = runs.get(&spec) {
                run.clone()
            } else {
                self.prune(&mut runs);
                runs.entry(spec.clone()).or_default().clone()
            }
        };
        Some(self.adopt(session, run, spec).await)
    }

    /// `tools/refresh`: run the session's discovery command again (every session with the same
    /// spec gets the new tools).
    pub(crate) async fn refresh(
        &self,
        session: &str,
        spec: Option<Spec>,
    ) -> Option<Arc<Discovery>> {
        let Some(spec) = spec else {
            self.sessions().remove(session);
            return None;
        };
        let run: Run = Arc::default();
        self.runs().insert(spec.clone(), run.clone());
        Some(self.adopt(session, run, spec).await)
    }

    async fn adopt(&self, session: &str, run: Run, spec: Spec) -> Arc<Discovery> {
        let d = run.get_or_init(|| self.discover(spec)).await.clone();
        let old = self.sessions().insert(session.to_owned(), d.clone());
        if old.is_none_or(|o| o.generation != d.generation) {
            self.events.emit(EventBody::ToolsDiscovered(ToolsDiscovered {
                session: session.to_owned(),
                discovery: d.summary(),
            }));
        }
        d
    }

    /// Keep the map of runs to the specs sessions use (it grows with every spec ever seen).
    fn prune(&self, runs: &mut HashMap<Spec, Run>) {
        if runs.len() < 64 {
            return;
        }
        let used: Vec<Spec> = self.sessions().values().map(|d| d.spec.clone()).collect();
        runs.retain(|spec, _| used.contains(spec));
    }

    /// Forget a session (it closed).
    pub(crate) fn forget(&self, session: &str) {
        self.sessions().remove(session);
    }

    /// Run `spec`'s discovery command.
    async fn discover(&self, spec: Spec) -> Arc<Discovery> {
        let started = Instant::now();
        let generation = self.next.fetch_add(1, Ordering::Relaxed);
        let (tools, problems, error) =
            match run_discovery(&spec, self.options.discovery_timeout).await {
                Ok((decls, problems)) => (tools_of(&spec, decls), problems, None),
                Err(e) => (Vec::new(), Vec::new(), Some(e)),
            };
        let took = started.elapsed();
        match &error {
            Some(e) => {
                tracing::warn!(command = %spec.discovery, error = %e, "tool discovery failed")
            }
            None => {
                tracing::info!(command = %spec.discovery, tools = tools.len(), took = ?took, "tools discovered")
            }
        }
        Arc::new(Discovery {
            generation,
            spec,
            tools,
            problems,
            error,
            took,
            at_ms: crate::clock::now_ms(),
            call_timeout: self.options.call_timeout,
        })
    }
}

/// Run the discovery command: the declarations it printed, or why there are none.
async fn run_discovery(
    spec: &Spec,
    timeout: Duration,
) -> Result<(Vec<decls::Decl>, Vec<String>), String> {
    let words = argv::split(&spec.discovery)?;
    let f = crate::proc::run(Job {
        program: words[0].as_ref(),
        args: &words[1..],
        cwd: &spec.cwd,
        env: &spec.env,
        stdin: None,
        limit: MAX_OUTPUT,
        overflow: Overflow::Stop,
        timeout,
    })
    .await;
    let stderr = || match f.stderr.trim() {
        "" => String::new(),
        s => format!("; it wrote: {}", s.chars().take(500).collect::<String>()),
    };
    if let Some(e) = &f.spawn_error {
        return Err(format!("it could not start: {e}"));
    }
    if f.timed_out {
        let after = humantime::format_duration(timeout);
        return Err(format!(
            "it did not finish within {after} and was stopped (geminid --tool-discovery-timeout)"
        ));
    }
    if f.over_limit {
        return Err(format!("its output passed the limit of {MAX_OUTPUT} bytes; it was stopped"));
    }
    match (f.exit_code, f.signal) {
        (Some(0), _) => decls::parse(&f.stdout),
        (Some(code), _) => Err(format!("it exited with code {code}{}", stderr())),
        (None, Some(sig)) => {
            Err(format!("it was killed by {}{}", crate::proc::signal_name(sig), stderr()))
        }
        (None, None) => Err("it ended without an exit status".to_owned()),
    }
}

/// The declarations as tools. A name declared twice keeps its first place and its last
/// declaration (Gemini CLI's registry overwrites by name).
fn tools_of(spec: &Spec, list: Vec<decls::Decl>) -> Vec<Tool> {
    let call = spec.call.as_deref().unwrap_or("");
    let mut tools: Vec<Tool> = Vec::with_capacity(list.len());
    let mut at: HashMap<String, usize> = HashMap::new();
    for d in list {
        let description = decls::description(&d.description, &spec.discovery, call, &d.name);
        let raw =
            json!({ "name": d.name, "description": description, "inputSchema": d.parameters });
        let tool = Tool::compiled(raw);
        match at.get(&d.name) {
            Some(i) => tools[*i] = tool,
            None => {
                at.insert(d.name, tools.len());
                tools.push(tool);
            }
        }
    }
    tools
}
