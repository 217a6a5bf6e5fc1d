//! `hooks/migrate`: Claude Code's hooks as Gemini CLI's (`gemini hooks migrate --from-claude`),
//! with what that command gets wrong put right: timeouts are converted from Claude's seconds to
//! Gemini's milliseconds, `SubagentStop` (Claude's spelling) is mapped as well as `SubAgentStop`,
//! events with no Gemini counterpart and non-command hooks are left out and said instead of
//! written as hooks Gemini CLI rejects, and `${CLAUDE_PROJECT_DIR}` is rewritten like
//! `$CLAUDE_PROJECT_DIR`.

use std::path::Path;

use geminid_protocol::config::WriteScope;
use serde_json::{Map, Value};

use super::HookEvent;
use crate::config::ConfigPaths;
use crate::config::files::parse_object;
use crate::config::ops::{OpError, scope_file};
use crate::config::write::{atomic_write, edit_settings, read_text};

/// Claude Code's event names and Gemini CLI's.
const EVENTS: [(&str, &str); 10] = [
    ("PreToolUse", "BeforeTool"),
    ("PostToolUse", "AfterTool"),
    ("UserPromptSubmit", "BeforeAgent"),
    ("Stop", "AfterAgent"),
    ("SubagentStop", "AfterAgent"),
    ("SubAgentStop", "AfterAgent"),
    ("SessionStart", "SessionStart"),
    ("SessionEnd", "SessionEnd"),
    ("PreCompact", "PreCompress"),
    ("Notification", "Notification"),
];

/// Claude Code's tool names and Gemini CLI's (the reference's seven, and three it misses).
const TOOLS: [(&str, &str); 10] = [
    ("Edit", "replace"),
    ("MultiEdit", "replace"),
    ("Bash", "run_shell_command"),
    ("Read", "read_file"),
    ("Write", "write_file"),
    ("Glob", "glob"),
    ("Grep", "grep"),
    ("LS", "ls"),
    ("WebFetch", "web_fetch"),
    ("WebSearch", "google_web_search"),
];

/// What came out of one Claude Code settings object.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Migrated {
    /// Gemini CLI's `hooks`: events to definitions, in Claude's order.
    pub hooks: Map<String, Value>,
    /// What was left out or changed beyond renaming, for the user.
    pub notes: Vec<String>,
}

impl Migrated {
    /// Append `defs` to `event`'s definitions.
    fn add(&mut self, event: &str, defs: Vec<Value>) {
        match self.hooks.get_mut(event) {
            Some(Value::Array(existing)) => existing.extend(defs),
            _ => {
                self.hooks.insert(event.to_owned(), Value::Array(defs));
            }
        }
    }

    /// Take in what another file gave, after this one's; its notes prefixed with `source`.
    pub(crate) fn absorb(&mut self, other: Migrated, source: &str) {
        self.notes.extend(other.notes.into_iter().map(|n| format!("{source}: {n}")));
        for (event, defs) in other.hooks {
            let defs = match defs {
                Value::Array(d) => d,
                other => vec![other],
            };
            self.add(&event, defs);
        }
    }
}

/// Tool names in a matcher, as whole words (`Edit|MultiEdit` → `replace|replace`); Claude's MCP
/// names `mcp__server__tool` become Gemini's `mcp_server_tool`.
pub(crate) fn matcher(m: &str) -> String {
    let mut out = m.to_owned();
    for (claude, gemini) in TOOLS {
        let word = crate::literal::regex(&format!(r"\b{claude}\b"));
        out = word.replace_all(&out, gemini).into_owned();
    }
    let mcp = crate::literal::regex(r"\bmcp__([A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*)__");
    mcp.replace_all(&out, "mcp_${1}_").into_owned()
}

/// A hook's command, `$CLAUDE_PROJECT_DIR` (either spelling) now `$GEMINI_PROJECT_DIR`.
pub(crate) fn command(c: &str) -> String {
    c.replace("$CLAUDE_PROJECT_DIR", "$GEMINI_PROJECT_DIR")
        .replace("${CLAUDE_PROJECT_DIR}", "${GEMINI_PROJECT_DIR}")
}

fn hook(h: &Value, at: &str, notes: &mut Vec<String>) -> Option<Value> {
    let Some(h) = h.as_object() else {
        notes.push(format!("{at}: not an object; left out"));
        return None;
    };
    match h.get("type").and_then(Value::as_str) {
        Some("command") => {}
        other => {
            let t = other.map_or_else(|| "without a type".to_owned(), |t| format!("\"{t}\""));
            notes.push(format!(
                "{at}: a {t} hook has no Gemini CLI counterpart (only \"command\"); left out"
            ));
            return None;
        }
    }
    let mut out = Map::new();
    out.insert("type".into(), Value::from("command"));
    match h.get("command").and_then(Value::as_str) {
        Some(c) => {
            out.insert("command".into(), Value::from(command(c)));
        }
        None => notes.push(format!("{at}: no `command`; copied, and Gemini CLI will skip it")),
    }
    match h.get("timeout") {
        None => {}
        Some(t) => match t.as_f64().filter(|s| *s > 0.0) {
            Some(seconds) => {
                // Milliseconds, whole; a fraction of a second is kept as far as a millisecond.
                let ms = (seconds * 1000.0).round();
                out.insert("timeout".into(), Value::from(ms as u64));
            }
            None => notes.push(format!("{at}: `timeout` {t} is not a number of seconds; dropped")),
        },
    }
    Some(Value::Object(out))
}

/// Migrate a Claude Code settings object (its `hooks`).
pub(crate) fn from_claude(settings: &Value) -> Migrated {
    let mut m = Migrated::default();
    let Some(events) = settings.get("hooks").and_then(Value::as_object) else { return m };
    for (name, defs) in events {
        let gemini = EVENTS
            .iter()
            .find(|(c, _)| c == name)
            .map(|(_, g)| *g)
            .or_else(|| HookEvent::named(name).map(HookEvent::name));
        let Some(gemini) = gemini else {
            m.notes.push(format!(
                "hooks.{name}: Gemini CLI has no such event (it has {}); left out",
                HookEvent::ALL.map(HookEvent::name).join(", ")
            ));
            continue;
        };
        let Some(defs) = defs.as_array() else {
            m.notes.push(format!("hooks.{name}: not an array; left out"));
            continue;
        };
        let mut out = Vec::new();
        for (d, def) in defs.iter().enumerate() {
            let at = format!("hooks.{name}[{d}]");
            let Some(def) = def.as_object() else {
                m.notes.push(format!("{at}: not an object; left out"));
                continue;
            };
            let mut o = Map::new();
            if let Some(mt) = def.get("matcher").and_then(Value::as_str) {
                o.insert("matcher".into(), Value::from(matcher(mt)));
            }
            if let Some(s) = def.get("sequential") {
                o.insert("sequential".into(), s.clone());
            }
            if let Some(list) = def.get("hooks").and_then(Value::as_array) {
                let hooks = list
                    .iter()
                    .enumerate()
                    .filter_map(|(h, v)| hook(v, &format!("{at}.hooks[{h}]"), &mut m.notes))
                    .collect();
                o.insert("hooks".into(), Value::Array(hooks));
            }
            out.push(Value::Object(o));
        }
        // `Stop` and `SubagentStop` both become AfterAgent: both are kept.
        m.add(gemini, out);
    }
    m
}

/// Add `migrated` to a settings file's `hooks` (`existing`, per event): each definition not
/// already there is appended, so running the migration twice changes nothing and the file's
/// own hooks stay. Returns the new arrays of the events that changed.
pub(crate) fn merge(existing: Option<&Value>, migrated: &Map<String, Value>) -> Map<String, Value> {
    let mut changed = Map::new();
    for (event, defs) in migrated {
        let mut now: Vec<Value> = existing
            .and_then(|e| e.get(event))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let before = now.len();
        for d in defs.as_array().into_iter().flatten() {
            if !now.contains(d) {
                now.push(d.clone());
            }
        }
        if now.len() != before || existing.and_then(|e| e.get(event)).is_none() {
            changed.insert(event.clone(), Value::Array(now));
        }
    }
    changed
}

/// `hooks/migrate`: Claude Code's hooks of `workspace` (`.claude/settings.json`, then
/// `.claude/settings.local.json`, as Claude Code reads both) added to its project settings.
/// Returns the sources read, the file, what was migrated, the events changed, and whether it
/// was written.
pub(crate) fn into_workspace(
    paths: &ConfigPaths,
    workspace: &Path,
    dry_run: bool,
) -> Result<geminid_protocol::hooks::HooksMigrateResult, OpError> {
    let file = scope_file(paths, workspace, WriteScope::Project)?;
    let claude = workspace.join(".claude");
    let mut sources = Vec::new();
    let mut migrated = Migrated::default();
    for name in ["settings.json", "settings.local.json"] {
        let source = claude.join(name);
        if std::fs::symlink_metadata(&source).is_err() {
            continue;
        }
        let text = read_text(&source)?;
        let value = parse_object(&text).map_err(|(pos, message)| {
            let at = pos.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default();
            OpError::Refused(format!("{}{at}: {message}; nothing was migrated", source.display()))
        })?;
        migrated.absorb(from_claude(&value), &source.display().to_string());
        sources.push(source.display().to_string());
    }
    if sources.is_empty() {
        return Err(OpError::Refused(format!(
            "no Claude Code settings in {} (settings.json or settings.local.json)",
            claude.display()
        )));
    }
    let text = read_text(&file)?;
    let existing = if text.trim().is_empty() {
        None
    } else {
        parse_object(&text).ok().and_then(|v| v.get("hooks").cloned())
    };
    let changed = merge(existing.as_ref(), &migrated.hooks);
    let mut new_text = text.clone();
    for (event, defs) in &changed {
        new_text = edit_settings(&file, &new_text, "hooks", event, Some(defs))?.0;
    }
    let written = !dry_run && !changed.is_empty();
    if written {
        atomic_write(&file, &new_text, None)?;
    }
    Ok(geminid_protocol::hooks::HooksMigrateResult {
        sources,
        file: file.display().to_string(),
        hooks: migrated.hooks,
        changed: changed.keys().cloned().collect(),
        notes: migrated.notes,
        written,
    })
}

#[cfg(test)]
mod tests;
