//! A session's hooks: from its merged settings (every scope's `hooks`, which Gemini CLI tags
//! `Project` and does not register in an untrusted folder) and from its enabled extensions
//! (`hooks/hooks.json`, already hydrated by the extensions layer), validated one by one, with
//! `hooksConfig` applied (`enabled`, `disabled` by name or command). A bad entry costs only
//! itself and is said with where it is.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{DEFAULT_TIMEOUT_MS, HookCommand, HookEvent, HookSource};

/// Keys of `hooks` that are settings of the hooks system, not events (legacy).
const CONFIG_KEYS: [&str; 3] = ["enabled", "disabled", "notifications"];

/// One settings file's `hooks`, in the order the scopes merge (their arrays concatenate).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SettingsHooks<'a> {
    /// The file, as problems name it.
    pub file: &'a str,
    /// Its scope, as `hooks list` shows it (`user`, `workspace`, ...).
    pub scope: &'a str,
    /// Its text, for the line and column of a problem (none: the path in the JSON only).
    pub text: Option<&'a str>,
    /// Its `hooks` object.
    pub hooks: &'a Value,
}

/// An enabled extension's hooks, as its `hooks/hooks.json` says after hydration.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionHooks {
    /// The extension.
    pub name: String,
    /// Its `hooks` object (events to definitions).
    pub hooks: Value,
    /// Its settings, added to each hook's environment.
    pub env: BTreeMap<String, String>,
}

/// How a hook's matcher is applied.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// No matcher, `""` or `*`: everything.
    All,
    /// A regular expression (tool events), unanchored.
    Regex(regex::Regex),
    /// Compared exactly: lifecycle triggers, and tool matchers that are no valid regex.
    Exact(String),
}

impl Matcher {
    fn new(written: Option<&str>, event: HookEvent) -> Self {
        let Some(m) = written.map(str::trim).filter(|m| !m.is_empty() && *m != "*") else {
            return Self::All;
        };
        match event.matcher_kind() {
            super::MatcherKind::ToolName => {
                match regex::Regex::new(&crate::policy::pattern::translate(m)) {
                    Ok(r) => Self::Regex(r),
                    Err(_) => Self::Exact(m.to_owned()),
                }
            }
            super::MatcherKind::Trigger => Self::Exact(m.to_owned()),
            super::MatcherKind::None => Self::All,
        }
    }

    /// Whether the event's context (a tool's name, a trigger) matches; no context matches.
    pub(crate) fn matches(&self, context: Option<&str>) -> bool {
        match (self, context) {
            (Self::All, _) | (_, None) => true,
            (Self::Regex(r), Some(c)) => r.is_match(c),
            (Self::Exact(m), Some(c)) => m == c,
        }
    }
}

/// One registered hook.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The hook.
    pub hook: HookCommand,
    /// Its event.
    pub event: HookEvent,
    /// Its definition's matcher, as written.
    pub matcher_text: Option<String>,
    /// Its definition's matcher, compiled.
    pub matcher: Matcher,
    /// Its definition asks for sequential execution.
    pub sequential: bool,
    /// Not disabled by `hooksConfig.disabled`.
    pub enabled: bool,
    /// Where it is written (`settings: hooks.BeforeTool[0].hooks[1]`, `extension x: ...`).
    pub at: String,
    /// The settings scope it is written in (`user`, `workspace`, ...), or `extension NAME`.
    pub scope: String,
}

/// A session's hooks and what was wrong with their configuration.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// Runtime order: settings hooks, then extensions'.
    pub entries: Vec<Entry>,
    /// Problems, each naming where it is.
    pub warnings: Vec<String>,
    /// `hooksConfig.enabled` is false: nothing runs.
    pub switched_off: bool,
}

impl Registry {
    /// The hooks of a session whose merged settings are `settings`, in a folder `trusted` or
    /// not, with these extensions enabled.
    pub fn new(settings: &Value, trusted: bool, extensions: &[ExtensionHooks]) -> Self {
        let files: Vec<_> = settings
            .get("hooks")
            .map(|hooks| SettingsHooks { file: "settings", scope: "settings", text: None, hooks })
            .into_iter()
            .collect();
        Self::of_files(settings, &files, trusted, extensions)
    }

    /// The same, with the settings' hooks read file by file (`files`, in merge order) so each
    /// problem names its file, line and column; `settings` (merged) gives `hooksConfig`.
    pub(crate) fn of_files(
        settings: &Value,
        files: &[SettingsHooks<'_>],
        trusted: bool,
        extensions: &[ExtensionHooks],
    ) -> Self {
        let mut reg = Self::default();
        let config = settings.get("hooksConfig");
        if config.and_then(|c| c.get("enabled")).and_then(Value::as_bool) == Some(false) {
            reg.switched_off = true;
            return reg;
        }
        let disabled: Vec<&str> = config
            .and_then(|c| c.get("disabled"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for f in files {
            if trusted {
                let place = Place { label: f.file, text: f.text };
                let scope = f.scope;
                reg.add(f.hooks, HookSource::Project, place, scope, &BTreeMap::new(), &disabled);
            } else if f
                .hooks
                .as_object()
                .is_some_and(|m| m.keys().any(|k| !CONFIG_KEYS.contains(&k.as_str())))
            {
                reg.warnings.push(format!(
                    "{}: its hooks are not run: this folder is not trusted (`gemctl trust` trusts it)",
                    f.file
                ));
            }
        }
        for ext in extensions {
            let label = format!("extension {}", ext.name);
            let place = Place { label: &label, text: None };
            reg.add(&ext.hooks, HookSource::Extensions, place, &label, &ext.env, &disabled);
        }
        reg
    }

    fn add(
        &mut self,
        hooks: &Value,
        source: HookSource,
        place: Place<'_>,
        scope: &str,
        extra_env: &BTreeMap<String, String>,
        disabled: &[&str],
    ) {
        let Some(events) = hooks.as_object() else {
            let at = place.at(&[]);
            self.warnings.push(format!("{at}: `hooks` is not an object; no hook is read from it"));
            return;
        };
        for (name, definitions) in events {
            if CONFIG_KEYS.contains(&name.as_str()) {
                continue;
            }
            let Some(event) = HookEvent::named(name) else {
                let hint = match name.as_str() {
                    "PreToolUse" => {
                        " (Claude Code's name: BeforeTool; `gemctl hooks migrate --from-claude` converts)"
                    }
                    "PostToolUse" => " (Claude Code's name: AfterTool)",
                    "UserPromptSubmit" => " (Claude Code's name: BeforeAgent)",
                    "Stop" | "SubagentStop" | "SubAgentStop" => " (Claude Code's name: AfterAgent)",
                    "PreCompact" => " (Claude Code's name: PreCompress)",
                    _ => "",
                };
                let at = place.at(&[name]);
                self.warnings.push(format!(
                    "{at}: invalid hook event name \"{name}\"{hint}; skipped (the events are {})",
                    HookEvent::ALL.map(HookEvent::name).join(", ")
                ));
                continue;
            };
            let Some(definitions) = definitions.as_array() else {
                let at = place.at(&[name]);
                self.warnings.push(format!("{at}: not an array; skipped"));
                continue;
            };
            for (d, def) in definitions.iter().enumerate() {
                let d = d.to_string();
                let at = place.at(&[name, &d]);
                let Some(list) = def.get("hooks").and_then(Value::as_array) else {
                    self.warnings.push(format!(
                        "{at}: a definition holds `hooks`, an array of hooks; skipped"
                    ));
                    continue;
                };
                let matcher_text = def.get("matcher").and_then(Value::as_str).map(str::to_owned);
                if def.get("matcher").is_some_and(|m| !m.is_string()) {
                    self.warnings
                        .push(format!("{at}: `matcher` is not a string; it matches everything"));
                }
                let sequential = def.get("sequential").and_then(Value::as_bool) == Some(true);
                for (h, hook) in list.iter().enumerate() {
                    let at = place.at(&[name, &d, "hooks", &h.to_string()]);
                    match command(hook, source, extra_env) {
                        Ok((hook, notes)) => {
                            self.warnings.extend(notes.into_iter().map(|n| format!("{at}: {n}")));
                            let enabled = !disabled.contains(&hook.label());
                            self.entries.push(Entry {
                                matcher: Matcher::new(matcher_text.as_deref(), event),
                                matcher_text: matcher_text.clone(),
                                hook,
                                event,
                                sequential,
                                enabled,
                                at,
                                scope: scope.to_owned(),
                            });
                        }
                        Err(why) => self.warnings.push(format!("{at}: {why}; skipped")),
                    }
                }
            }
        }
    }
}

/// Where a hooks object is written, to name a problem's place in it.
#[derive(Debug, Clone, Copy)]
struct Place<'a> {
    label: &'a str,
    text: Option<&'a str>,
}

impl Place<'_> {
    /// `file:line:col: hooks.BeforeTool[0].hooks[1]` (line and column when the text is known).
    fn at(&self, path: &[&str]) -> String {
        let mut json = "hooks".to_owned();
        for (i, part) in path.iter().enumerate() {
            if i > 0 && part.parse::<usize>().is_ok() {
                json.push_str(&format!("[{part}]"));
            } else {
                json.push('.');
                json.push_str(part);
            }
        }
        let mut full = vec!["hooks"];
        full.extend_from_slice(path);
        match self.text.and_then(|t| crate::config::files::position(t, &full)) {
            Some((line, col)) => format!("{}:{line}:{col}: {json}", self.label),
            None => format!("{}: {json}", self.label),
        }
    }
}

/// One hook object: the hook, and notes about fields that were ignored.
fn command(
    v: &Value,
    source: HookSource,
    extra_env: &BTreeMap<String, String>,
) -> Result<(HookCommand, Vec<String>), String> {
    let Some(obj) = v.as_object() else { return Err("a hook is an object".to_owned()) };
    match obj.get("type").and_then(Value::as_str) {
        Some("command") => {}
        Some(other @ ("runtime" | "plugin")) => {
            return Err(format!(
                "type \"{other}\" hooks are not run by geminid (only \"command\")"
            ));
        }
        Some(other) => {
            return Err(format!(
                "type \"{other}\" is not a hook type (\"command\"; the name is case-sensitive)"
            ));
        }
        None => return Err("`type` is missing (\"command\")".to_owned()),
    }
    let command = match obj.get("command").and_then(Value::as_str) {
        Some(c) if !c.trim().is_empty() => c.to_owned(),
        _ => return Err("a command hook needs `command`".to_owned()),
    };
    let mut notes = Vec::new();
    let text = |key: &str, notes: &mut Vec<String>| match obj.get(key) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            notes.push(format!("`{key}` is not a string; ignored"));
            None
        }
    };
    let name = text("name", &mut notes);
    let description = text("description", &mut notes);
    let timeout_ms = match obj.get("timeout") {
        None => DEFAULT_TIMEOUT_MS,
        Some(t) => {
            match t.as_u64().filter(|t| *t > 0) {
                Some(t) => t,
                None => {
                    notes.push(format!("`timeout` is {t}, not a number of milliseconds; {DEFAULT_TIMEOUT_MS} is used"));
                    DEFAULT_TIMEOUT_MS
                }
            }
        }
    };
    let mut env = extra_env.clone();
    match obj.get("env") {
        None => {}
        Some(Value::Object(m)) => env.extend(strings(m, &mut notes)),
        Some(_) => notes.push("`env` is not an object; ignored".to_owned()),
    }
    Ok((HookCommand { name, command, description, timeout_ms, env, source }, notes))
}

fn strings(m: &Map<String, Value>, notes: &mut Vec<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in m {
        match v {
            Value::String(s) => out.push((k.clone(), s.clone())),
            Value::Number(n) => out.push((k.clone(), n.to_string())),
            Value::Bool(b) => out.push((k.clone(), b.to_string())),
            _ => notes.push(format!("env.{k} is not a string; ignored")),
        }
    }
    out
}
