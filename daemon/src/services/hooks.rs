//! Hooks for the daemon: the BeforeTool and AfterTool seats of the call pipeline, and
//! `hooks/list` and `hooks/fire` for the events front-ends own. Each session's registry is
//! built once and kept until a reload (its files changed) or the session's trust changes.

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use geminid_protocol::event::EventBody;
use geminid_protocol::hooks::{HookEntry, HookRan, HookRun, HooksFireResult, HooksListResult};
use serde_json::{Map, Value, json};

use crate::calls::seats::{After, AfterTool, Before, BeforeTool, Verdict};
use crate::calls::{Call, Outcome};
use crate::clock;
use crate::events::EventBus;
use crate::hooks::aggregate::{effective_reason, hook_context, is_ask, is_blocking};
use crate::hooks::exec::{Fired, fire};
use crate::hooks::plan::plan_of;
use crate::hooks::registry::{Entry, ExtensionHooks, Registry, SettingsHooks};
use crate::hooks::run::{Context, Ran};
use crate::hooks::{HookEvent, HookSource, trusted};
use crate::services::configs::Configs;
use crate::services::prepared::PerSession;
use crate::session::SessionError;

/// A session's hooks as the seats use them.
#[derive(Debug)]
struct Prepared {
    registry: Registry,
    cwd: PathBuf,
    plans: PathBuf,
    trusted: bool,
    env: Arc<crate::config::env::Env>,
    /// Each configured server's connection details for a hook's `mcp_context`.
    servers: std::collections::HashMap<String, Map<String, Value>>,
    /// The workspace file's hooks not yet announced (taken by the first answer that says so).
    new_project_hooks: Mutex<Option<NewHooks>>,
    /// Why every call is refused: a file that guards calls gives nothing (it does not parse,
    /// and no good version of it is known), so the user's hooks cannot be known.
    refusal: Option<String>,
}

/// Project hooks to announce once (`hooks::trusted`).
#[derive(Debug)]
struct NewHooks {
    project: String,
    keys: Vec<(String, String)>,
    shown: Vec<String>,
}

/// The hooks of every session.
#[derive(Debug)]
pub(crate) struct HookSeat {
    config: Arc<Configs>,
    events: Arc<EventBus>,
    prepared: PerSession<Prepared>,
}

/// A settings scope as `hooks list` names it.
fn scope_name(s: geminid_protocol::common::Scope) -> &'static str {
    use geminid_protocol::common::Scope;
    match s {
        Scope::SystemDefaults => "system-defaults",
        Scope::Geminid => "geminid",
        Scope::Antigravity => "antigravity",
        Scope::AntigravityWorkspace => "antigravity-workspace",
        Scope::User => "user",
        Scope::Workspace => "workspace",
        Scope::System => "system",
        Scope::Extension => "extension",
    }
}

/// Which hooks run in geminid for `call`: all of them, or, when its client runs the hooks it
/// reads itself (a gateway served with `hooks=client`: Gemini CLI reads every settings scope
/// and the extensions' hooks), only those of geminid's own servers file, which it does not.
fn runs_here(call: &Call) -> fn(&Entry) -> bool {
    if call.hooks_by_client {
        |e| e.scope == scope_name(geminid_protocol::common::Scope::Geminid)
    } else {
        |_| true
    }
}

fn source_name(s: HookSource) -> &'static str {
    match s {
        HookSource::Project => "project",
        HookSource::Extensions => "extensions",
    }
}

/// The last 2 KiB of a stream, on a character boundary.
fn tail(s: &str) -> String {
    let mut start = s.len().saturating_sub(2048);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_owned()
}

fn wire(r: &Ran) -> HookRun {
    HookRun {
        name: r.hook.name.clone(),
        command: r.hook.command.clone(),
        source: source_name(r.hook.source).to_owned(),
        duration_ms: u64::try_from(r.took.as_millis()).unwrap_or(u64::MAX),
        exit_code: r.exit_code,
        success: r.success,
        output: r.output.clone(),
        stderr_tail: tail(&r.stderr),
        error: r.error.clone(),
        note: r.note.clone(),
    }
}

impl HookSeat {
    pub(crate) fn new(config: Arc<Configs>, events: Arc<EventBus>) -> Self {
        Self { config, events, prepared: PerSession::default() }
    }

    /// The configuration may have changed: build registries again on next use.
    pub(crate) fn changed(&self) {
        self.prepared.changed();
    }

    /// Forget a session (it closed).
    pub(crate) fn forget(&self, session: &str) {
        self.prepared.forget(session);
    }

    fn prepare(&self, session: &str) -> Result<Arc<Prepared>, SessionError> {
        let epoch = self.prepared.epoch();
        let cached = self.prepared.current(session).map(|(_, p)| p);
        if let Some(p) = cached {
            return Ok(p);
        }
        let effective = self.config.effective(session)?;
        let c = &effective.public;
        let cwd = PathBuf::from(&c.workspace);
        let project = cwd.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let labels: Vec<String> =
            effective.hook_files.iter().map(|f| f.path.display().to_string()).collect();
        let files: Vec<SettingsHooks<'_>> = effective
            .hook_files
            .iter()
            .zip(&labels)
            .map(|(f, label)| SettingsHooks {
                file: label,
                scope: scope_name(f.scope),
                text: Some(&f.text),
                hooks: &f.hooks,
            })
            .collect();
        let extension_hooks: Vec<ExtensionHooks> = effective
            .extensions
            .iter()
            .filter_map(|x| {
                Some(ExtensionHooks {
                    name: x.name.clone(),
                    hooks: x.hooks.clone()?,
                    env: x.settings.expose().clone(),
                })
            })
            .collect();
        let trusted_file = self.trusted_file();
        let new_project_hooks = effective
            .hook_files
            .iter()
            .find(|f| c.trust.trusted && f.scope == geminid_protocol::common::Scope::Workspace)
            .map(|f| trusted::keys(&f.hooks))
            .and_then(|keys| {
                let shown = trusted::new_hooks(&trusted_file, &c.workspace, &keys);
                (!shown.is_empty()).then(|| NewHooks { project: c.workspace.clone(), keys, shown })
            });
        let refusal = (!effective.refusing.is_empty()).then(|| {
            let home = &self.config.paths().home;
            let each: Vec<String> = effective
                .refusing
                .iter()
                .map(|d| crate::services::policy::tool_calls::located_from_home(d, home))
                .collect();
            format!("Tool execution refused: {}", each.join("; and "))
        });
        let p = Arc::new(Prepared {
            refusal,
            new_project_hooks: Mutex::new(new_project_hooks),
            registry: Registry::of_files(&c.settings, &files, c.trust.trusted, &extension_hooks),
            plans: self.config.paths().home.join(".gemini").join("tmp").join(project).join("plans"),
            cwd,
            trusted: c.trust.trusted,
            env: self.config.session_env(session),
            servers: effective
                .servers
                .iter()
                .map(|(n, s)| (n.clone(), connection(&s.shown)))
                .collect(),
        });
        self.prepared.put(session, epoch, p.clone());
        Ok(p)
    }

    fn trusted_file(&self) -> PathBuf {
        self.config.paths().home.join(".gemini").join("trusted_hooks.json")
    }

    /// The one-time warning about new project hooks, if this answer is the first to carry it.
    fn take_notice(&self, p: &Prepared) -> Option<String> {
        let new = p.new_project_hooks.lock().take()?;
        let file = self.trusted_file();
        let mut text = trusted::notice(&file, &new.shown);
        if let Err(why) = trusted::record(&file, &new.project, &new.keys) {
            text.push_str(&format!(" Not recorded, so it is said again: {why}"));
        }
        tracing::warn!(project = new.project, hooks = ?new.shown, "new project hooks announced");
        Some(text)
    }

    /// `hooks/list`.
    pub(crate) fn list(&self, session: &str) -> Result<HooksListResult, SessionError> {
        let p = self.prepare(session)?;
        let mut entries: Vec<_> = p.registry.entries.iter().collect();
        entries.sort_by_key(|e| (e.event, e.hook.source));
        let hooks = entries
            .into_iter()
            .map(|e| HookEntry {
                event: e.event.name().to_owned(),
                name: e.hook.name.clone(),
                command: e.hook.command.clone(),
                source: source_name(e.hook.source).to_owned(),
                matcher: e.matcher_text.clone(),
                sequential: e.sequential,
                enabled: e.enabled,
                timeout_ms: e.hook.timeout_ms,
                at: e.at.clone(),
                scope: e.scope.clone(),
            })
            .collect();
        Ok(HooksListResult {
            enabled: !p.registry.switched_off,
            hooks,
            warnings: p.refusal.iter().chain(&p.registry.warnings).cloned().collect(),
            notice: self.take_notice(&p),
        })
    }

    /// Run `event`'s hooks that match `context` for `session` with the event's own `fields`
    /// (the base fields are added): `None` when none matches.
    async fn fire_for(
        &self,
        session: &str,
        event: HookEvent,
        context: Option<&str>,
        fields: Map<String, Value>,
        keep: fn(&Entry) -> bool,
    ) -> Result<Option<Fired>, SessionError> {
        let p = self.prepare(session)?;
        let Some(planned) = plan_of(&p.registry, event, context, keep) else { return Ok(None) };
        let mut input = Map::new();
        input.insert("session_id".into(), json!(session));
        input.insert("transcript_path".into(), json!(""));
        input.insert("cwd".into(), json!(p.cwd.display().to_string()));
        input.insert("hook_event_name".into(), json!(event.name()));
        input.insert("timestamp".into(), json!(clock::rfc3339(clock::now_ms())));
        input.extend(fields);
        let ctx = Context {
            cwd: &p.cwd,
            session_id: session,
            plans_dir: &p.plans,
            env: &p.env,
            trusted: p.trusted,
        };
        let fired = fire(&planned, event, Value::Object(input), &ctx).await;
        for r in &fired.ran {
            self.events.emit(EventBody::HookRan(HookRan {
                session: session.to_owned(),
                event: event.name().to_owned(),
                hook: r.hook.label().to_owned(),
                source: source_name(r.hook.source).to_owned(),
                duration_ms: u64::try_from(r.took.as_millis()).unwrap_or(u64::MAX),
                exit_code: r.exit_code,
                success: r.success,
                error: r.error.clone(),
            }));
            if !r.success {
                tracing::warn!(session, event = event.name(), hook = r.hook.label(), error = ?r.error, exit = ?r.exit_code, "a hook failed");
            }
        }
        Ok(Some(fired))
    }

    /// `hooks/fire`.
    pub(crate) async fn fire_event(
        &self,
        session: &str,
        event: HookEvent,
        fields: Map<String, Value>,
    ) -> Result<HooksFireResult, SessionError> {
        let key = match event {
            HookEvent::SessionStart => Some("source"),
            HookEvent::SessionEnd => Some("reason"),
            HookEvent::PreCompress => Some("trigger"),
            HookEvent::BeforeTool | HookEvent::AfterTool => Some("tool_name"),
            _ => None,
        };
        let context = key.and_then(|k| fields.get(k)).and_then(Value::as_str).map(str::to_owned);
        let prepared = self.prepare(session)?;
        let mut fields = fields;
        if let (Some(tool), HookEvent::BeforeTool | HookEvent::AfterTool) = (&context, event) {
            dry_run_fields(tool, &mut fields, &prepared);
        }
        let notice = self.take_notice(&prepared);
        let fired = self.fire_for(session, event, context.as_deref(), fields, |_| true).await?;
        Ok(match fired {
            None => HooksFireResult { aggregated: None, success: true, hooks: Vec::new(), notice },
            Some(f) => HooksFireResult {
                aggregated: f.merged,
                success: f.success,
                hooks: f.ran.iter().map(wire).collect(),
                notice,
            },
        })
    }
}

/// The fields every tool hook gets: the tool's name, its input ({} when absent) and, for an
/// MCP tool, its `mcp_context`.
fn tool_fields(call: &Call, p: &Prepared) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("tool_name".into(), json!(call.name));
    fields.insert("tool_input".into(), Value::Object(call.args.clone().unwrap_or_default()));
    if !call.server.is_empty() {
        fields.insert("mcp_context".into(), mcp_context(call, p));
    }
    fields
}

/// What Gemini CLI tells a hook of an MCP tool's server (a custom tool has none): its names,
/// then the server's connection details, as written (a `$VAR` stays a reference, so no secret
/// a variable holds reaches a hook this way) and without a URL's password.
fn mcp_context(call: &Call, p: &Prepared) -> Value {
    let mut context = Map::new();
    context.insert("server_name".into(), json!(call.server));
    context.insert("tool_name".into(), json!(call.tool));
    if let Some(connection) = p.servers.get(&call.server) {
        context.extend(connection.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Value::Object(context)
}

/// A dry run's fields as a real call's hooks get them: `tool_input` ({} when absent) and, for
/// an MCP tool (`mcp_{server}_{tool}` of a server the session has, the longest name that
/// fits), its `mcp_context`, unless the caller gave them.
fn dry_run_fields(tool: &str, fields: &mut Map<String, Value>, p: &Prepared) {
    fields.entry("tool_input").or_insert_with(|| Value::Object(Map::new()));
    if fields.contains_key("mcp_context") {
        return;
    }
    let server = p
        .servers
        .keys()
        .filter(|s| {
            tool.strip_prefix("mcp_")
                .and_then(|t| t.strip_prefix(s.as_str()))
                .is_some_and(|t| t.starts_with('_'))
        })
        .max_by_key(|s| s.len());
    if let Some(server) = server {
        let own = &tool["mcp_".len() + server.len() + 1..];
        let mut context = Map::new();
        context.insert("server_name".into(), json!(server));
        context.insert("tool_name".into(), json!(own));
        context.extend(p.servers[server].iter().map(|(k, v)| (k.clone(), v.clone())));
        fields.insert("mcp_context".into(), Value::Object(context));
    }
}

/// `command`, `args`, `cwd`, `url` (else `httpUrl`) and `tcp`, where a server's entry has them.
fn connection(c: &crate::config::mcp::McpServerConfig) -> Map<String, Value> {
    let redact = |u: &String| json!(crate::config::env::redact_urls(u));
    let fields = [
        ("command", c.command.as_ref().map(|v| json!(v))),
        ("args", c.args.as_ref().map(|v| json!(v))),
        ("cwd", c.cwd.as_ref().map(|v| json!(v))),
        ("url", c.url.as_ref().or(c.http_url.as_ref()).map(redact)),
        ("tcp", c.tcp.as_ref().map(|v| json!(v))),
    ];
    fields.into_iter().filter_map(|(k, v)| Some((k.to_owned(), v?))).collect()
}

/// Why a call is refused (or its result withheld) when the session's hooks cannot be
/// prepared: the audit record keeps these words.
fn unprepared(e: &SessionError, what: &str) -> String {
    format!(
        "Tool {what}: the session's hooks cannot be read ({e}), so a hook that would block it \
         cannot be ruled out"
    )
}

/// Whether a hook's output stops the turn.
fn stops(o: &Map<String, Value>) -> bool {
    o.get("continue") == Some(&Value::Bool(false))
}

/// `why`, with the hooks of `fired` whose output `said` it.
fn verdict(why: String, fired: &Fired, said: fn(&Map<String, Value>) -> bool) -> Verdict {
    let by = fired
        .ran
        .iter()
        .filter(|r| r.output.as_ref().is_some_and(said))
        .map(|r| r.hook.label().to_owned())
        .collect();
    Verdict { why, by }
}

impl BeforeTool for HookSeat {
    fn before_tool<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, Before> {
        Box::pin(async move {
            // The common case, no hook for this tool, costs a map lookup and the matchers.
            // Hooks that cannot be prepared fail closed, as the policy seat does: a hook of
            // the session's could block this call, and none can be known.
            let p = match self.prepare(&call.session) {
                Ok(p) => p,
                Err(e) => return Before::Block(Verdict::from(unprepared(&e, "execution refused"))),
            };
            // Hooks that cannot be known fail closed: a call they would block must not run.
            if let Some(why) = &p.refusal {
                return Before::Block(Verdict::from(why.clone()));
            }
            let keep = runs_here(call);
            if plan_of(&p.registry, HookEvent::BeforeTool, Some(&call.name), keep).is_none() {
                return Before::Proceed;
            }
            let mut fields = tool_fields(call, &p);
            if let Some(original) = &call.tail_of {
                fields.insert("original_request_name".into(), json!(original));
            }
            let (session, name) = (&call.session, Some(call.name.as_str()));
            let fired = self.fire_for(session, HookEvent::BeforeTool, name, fields, keep).await;
            let f = match fired {
                Ok(Some(f)) => f,
                Ok(None) => return Before::Proceed,
                Err(e) => return Before::Block(Verdict::from(unprepared(&e, "execution refused"))),
            };
            let Some(o) = &f.merged else { return Before::Proceed };
            if stops(o) {
                return Before::Stop(verdict(effective_reason(o), &f, stops));
            }
            if is_blocking(o) {
                let why = format!("Tool execution blocked: {}", effective_reason(o));
                return Before::Block(verdict(why, &f, is_blocking));
            }
            if is_ask(o) {
                let why = o.get("systemMessage").and_then(Value::as_str);
                return Before::Ask(match why {
                    Some(m) => format!("A hook asks to confirm the call to '{}': {m}", call.name),
                    None => format!("A hook asks to confirm the call to '{}'.", call.name),
                });
            }
            if let Some(Value::Object(new)) =
                o.get("hookSpecificOutput").and_then(|s| s.get("tool_input"))
            {
                let mut args = call.args.clone().unwrap_or_default();
                args.extend(new.clone());
                return Before::Rewrite(args);
            }
            Before::Proceed
        })
    }

    fn confirming<'a>(&'a self, call: &'a Call) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // Gemini CLI's words for an MCP tool's confirmation (`getNotificationMessage`).
            let title = "Confirm MCP Tool Execution";
            let mut fields = Map::new();
            fields.insert("notification_type".into(), json!("ToolPermission"));
            fields.insert("message".into(), json!(format!("Tool {title} requires MCP")));
            fields.insert(
                "details".into(),
                json!({
                    "type": "mcp",
                    "title": title,
                    "serverName": call.server,
                    "toolName": call.tool,
                    "toolDisplayName": call.name,
                }),
            );
            // geminid's own confirmation, which its client does not know of: its hooks all run.
            let notify = HookEvent::Notification;
            let _ = self.fire_for(&call.session, notify, None, fields, |_| true).await;
        })
    }
}

impl AfterTool for HookSeat {
    fn after_tool<'a>(&'a self, call: &'a Call, outcome: &'a Outcome) -> BoxFuture<'a, After> {
        Box::pin(async move {
            // The call ran, but AfterTool hooks that could block its result cannot be known:
            // the result is withheld (fail closed, as before the call).
            let p = match self.prepare(&call.session) {
                Ok(p) => p,
                Err(e) => return After::Block(Verdict::from(unprepared(&e, "result withheld"))),
            };
            let keep = runs_here(call);
            if plan_of(&p.registry, HookEvent::AfterTool, Some(&call.name), keep).is_none() {
                return After::Keep;
            }
            let mut fields = tool_fields(call, &p);
            // Gemini CLI's `error` is undefined on success: no key at all once stringified.
            let mut response =
                json!({ "llmContent": outcome.parts, "returnDisplay": outcome.display });
            if outcome.is_error {
                response["error"] = json!(outcome.display);
            }
            fields.insert("tool_response".into(), response);
            let (session, name) = (&call.session, Some(call.name.as_str()));
            let fired = self.fire_for(session, HookEvent::AfterTool, name, fields, keep).await;
            let f = match fired {
                Ok(Some(f)) => f,
                Ok(None) => return After::Keep,
                Err(e) => return After::Block(Verdict::from(unprepared(&e, "result withheld"))),
            };
            let Some(o) = f.merged.clone() else { return After::Keep };
            if stops(&o) {
                return After::Stop(verdict(effective_reason(&o), &f, stops));
            }
            if is_blocking(&o) {
                // The model reads the hook's reason as it is, as Gemini CLI sends it.
                return After::Block(verdict(effective_reason(&o), &f, is_blocking));
            }
            let specific = o.get("hookSpecificOutput");
            if let Some(tail) = specific.and_then(|s| s.get("tailToolCallRequest"))
                && let Some(name) = tail.get("name").and_then(Value::as_str)
            {
                let args = tail.get("args").and_then(Value::as_object).cloned().unwrap_or_default();
                return After::Tail { name: name.to_owned(), args };
            }
            match specific.and_then(|s| s.get("additionalContext")) {
                Some(Value::String(c)) if !c.is_empty() => After::AddContext(hook_context(c)),
                _ => After::Keep,
            }
        })
    }
}

/// Hooks as an input: they live in the settings files and the extensions (watched as
/// theirs), so a reload only drops every session's prepared registry.
#[derive(Debug)]
pub(crate) struct HooksInput(pub(crate) Arc<HookSeat>);

impl crate::services::reload::Input for HooksInput {
    fn name(&self) -> &'static str {
        "hooks"
    }

    fn watch(&self, _: &[crate::config::Effective], _: &mut crate::services::reload::Watched) {}

    fn before(&self) -> BoxFuture<'_, ()> {
        self.0.changed();
        Box::pin(std::future::ready(()))
    }
}

impl crate::services::forget::Forget for HookSeat {
    fn forget(&self, session: &str) {
        HookSeat::forget(self, session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hooks_connection_details_keep_references_and_hide_a_urls_password() {
        let c: crate::config::mcp::McpServerConfig = serde_json::from_value(json!({
            "httpUrl": "https://me:hunter2@example.com/mcp", "args": ["$TOKEN"], "command": "x"
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let got = Value::Object(connection(&c));
        assert_eq!(
            got,
            json!({"command": "x", "args": ["$TOKEN"], "url": "https://[redacted]@example.com/mcp"})
        );
    }
}
