//! Agent definitions (`agents/*.md`): subagents a front-end may run, each a Markdown file whose
//! YAML frontmatter names it and whose body is its system prompt. Validated as Gemini CLI
//! validates them (a slug name, a description, only the known fields), every problem a
//! diagnostic with its line. Precedence is the skills' order: extensions < user < workspace.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use geminid_protocol::common::{Diagnostic, Severity};
use geminid_protocol::skills::{AgentInfo, AgentKind, SkillScope, SkillSource};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::frontmatter;
use super::load::MAX_SKILL_FILE;
use crate::config::files::diagnostic;

/// A local agent's frontmatter (Gemini CLI's fields, no others).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Local {
    #[serde(default)]
    #[allow(dead_code)]
    kind: Option<String>,
    name: String,
    description: String,
    display_name: Option<String>,
    tools: Option<Vec<String>>,
    mcp_servers: Option<Map<String, Value>>,
    model: Option<String>,
    temperature: Option<f64>,
    max_turns: Option<u64>,
    timeout_mins: Option<u64>,
}

/// A remote (A2A) agent's frontmatter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Remote {
    #[serde(default)]
    #[allow(dead_code)]
    kind: Option<String>,
    name: String,
    description: Option<String>,
    display_name: Option<String>,
    #[allow(dead_code)]
    auth: Option<Value>,
    agent_card_url: Option<String>,
    agent_card_json: Option<String>,
}

/// One agent definition as read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Agent {
    /// What is shown.
    pub info: AgentInfo,
    /// Its system prompt (a local agent's body).
    pub system_prompt: String,
}

/// A folder's agents and the problems met.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// Agents, in file order.
    pub agents: Vec<Agent>,
    /// Files that did not load.
    pub diagnostics: Vec<Diagnostic>,
}

/// Where a session's agent folders are, lowest precedence first.
pub(crate) fn places(
    home: &Path,
    workspace: &Path,
    trusted: bool,
    extensions: &[(String, PathBuf)],
) -> Vec<(SkillSource, PathBuf)> {
    let source = |scope, ext: Option<&String>, dir: &Path| SkillSource {
        scope,
        extension: ext.cloned(),
        server: None,
        dir: dir.display().to_string(),
    };
    let mut out: Vec<(SkillSource, PathBuf)> = extensions
        .iter()
        .map(|(n, d)| (source(SkillScope::Extension, Some(n), d), d.clone()))
        .collect();
    let user = home.join(".gemini").join("agents");
    out.push((source(SkillScope::User, None, &user), user));
    if trusted && workspace != home {
        let ws = workspace.join(".gemini").join("agents");
        out.push((source(SkillScope::Workspace, None, &ws), ws));
    }
    out
}

/// Every agent of `places`, a later one overriding an earlier one of the same name.
pub(crate) fn registry(
    places: &[(SkillSource, PathBuf)],
) -> (BTreeMap<String, Agent>, Vec<Diagnostic>) {
    let mut agents: BTreeMap<String, Agent> = BTreeMap::new();
    let mut diagnostics = Vec::new();
    for (source, dir) in places {
        let loaded = load_dir(dir, source);
        diagnostics.extend(loaded.diagnostics);
        for mut a in loaded.agents {
            if let Some(old) = agents.remove(&a.info.name) {
                diagnostics.push(diagnostic(
                    Severity::Warning,
                    Path::new(&a.info.location),
                    None,
                    format!(
                        "Agent conflict: \"{}\" here overrides the agent of the same name in {}",
                        a.info.name, old.info.location
                    ),
                ));
                a.info.overrides = old.info.overrides;
                a.info.overrides.push(old.info.location);
            }
            agents.insert(a.info.name.clone(), a);
        }
    }
    (agents, diagnostics)
}

/// The agents of one folder: its `*.md` files not starting with `_`.
pub(crate) fn load_dir(dir: &Path, source: &SkillSource) -> Loaded {
    let mut out = Loaded::default();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            !name.starts_with('_') && name.ends_with(".md") && p.is_file()
        })
        .collect();
    files.sort();
    for file in files {
        match read(&file, source) {
            Ok(list) => out.agents.extend(list),
            Err(d) => out.diagnostics.push(d),
        }
    }
    out
}

fn read(file: &Path, source: &SkillSource) -> Result<Vec<Agent>, Diagnostic> {
    let error = |pos: Option<(u32, u32)>, why: String| {
        diagnostic(Severity::Error, file, pos, format!("{why}; the agent is not loaded"))
    };
    let meta = std::fs::metadata(file).map_err(|e| error(None, format!("cannot be read: {e}")))?;
    if meta.len() > MAX_SKILL_FILE {
        return Err(error(
            None,
            format!("more than the {} MiB an agent file may have", MAX_SKILL_FILE >> 20),
        ));
    }
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_SKILL_FILE + 1).read_to_string(&mut text))
        .map_err(|e| error(None, format!("cannot be read: {e}")))?;
    parse(file, &text, source).map_err(|(pos, why)| error(pos, why))
}

type Problem = (Option<(u32, u32)>, String);

/// An agent file's text as its definitions (a list of remote agents may share one file).
pub(crate) fn parse(file: &Path, text: &str, source: &SkillSource) -> Result<Vec<Agent>, Problem> {
    let Some(split) = frontmatter::split(text) else {
        return Err((
            Some((1, 1)),
            "no frontmatter: an agent file starts with a `---` line, then YAML naming the agent \
             (`name:`, `description:`), then a `---` line, then its system prompt"
                .to_owned(),
        ));
    };
    let y = frontmatter::yaml(split.frontmatter).map_err(|e| {
        let line = u32::try_from(e.line).unwrap_or(u32::MAX).saturating_add(1);
        (
            Some((line, u32::try_from(e.column).unwrap_or(0))),
            format!("the frontmatter is not valid YAML: {}", e.message),
        )
    })?;
    let body = split.body.unwrap_or_default().trim().to_owned();
    let json = frontmatter::to_json(&y);
    let items = match json {
        Value::Array(list) => list.into_iter().map(|v| (v, true)).collect(),
        Value::Object(_) => vec![(json, false)],
        _ => return Err((Some((2, 1)), "the frontmatter is not a mapping of fields".to_owned())),
    };
    items.into_iter().map(|(v, listed)| one(file, v, listed, &body, source)).collect()
}

fn is_remote(v: &Value) -> bool {
    match v.get("kind").and_then(Value::as_str) {
        Some(k) => k == "remote",
        None => ["agent_card_url", "agent_card_json", "auth"].iter().any(|k| v.get(k).is_some()),
    }
}

fn one(
    file: &Path,
    v: Value,
    listed: bool,
    body: &str,
    source: &SkillSource,
) -> Result<Agent, Problem> {
    let invalid = |e: serde_path_to_error::Error<serde_json::Error>| {
        let at = e.path().to_string();
        let at = if at == "." { String::new() } else { format!("{at}: ") };
        (Some((2, 1)), format!("invalid definition: {at}{}", e.into_inner()))
    };
    let kind = v.get("kind").and_then(Value::as_str).map(str::to_owned);
    if let Some(k) = &kind
        && k != "local"
        && k != "remote"
    {
        return Err((Some((2, 1)), format!("kind: \"{k}\" is neither \"local\" nor \"remote\"")));
    }
    let remote = listed || is_remote(&v);
    let mut info = AgentInfo {
        name: String::new(),
        description: String::new(),
        display_name: None,
        kind: if remote { AgentKind::Remote } else { AgentKind::Local },
        location: file.display().to_string(),
        source: source.clone(),
        tools: None,
        model: None,
        temperature: None,
        max_turns: None,
        timeout_mins: None,
        mcp_servers: Vec::new(),
        overrides: Vec::new(),
    };
    if remote {
        let r: Remote = serde_path_to_error::deserialize(v).map_err(invalid)?;
        match (&r.agent_card_url, &r.agent_card_json) {
            (Some(_), Some(_)) | (None, None) => {
                return Err((
                    Some((2, 1)),
                    "a remote agent has exactly one of `agent_card_url` and `agent_card_json`"
                        .to_owned(),
                ));
            }
            (None, Some(j)) if serde_json::from_str::<Value>(j).is_err() => {
                return Err((Some((2, 1)), "agent_card_json: not valid JSON".to_owned()));
            }
            _ => {}
        }
        check_name(&r.name)?;
        info.name = r.name;
        info.description = r.description.unwrap_or_default();
        info.display_name = r.display_name;
        return Ok(Agent { info, system_prompt: String::new() });
    }
    let l: Local = serde_path_to_error::deserialize(v).map_err(invalid)?;
    check_name(&l.name)?;
    if l.description.is_empty() {
        return Err((Some((2, 1)), "description: must not be empty".to_owned()));
    }
    for t in l.tools.iter().flatten() {
        if !valid_tool(t) {
            return Err((
                Some((2, 1)),
                format!(
                    "tools: \"{t}\" is not a tool name (a tool, `mcp_<server>_<tool>`, or a wildcard such as `mcp_<server>_*`)"
                ),
            ));
        }
    }
    if l.max_turns == Some(0) || l.timeout_mins == Some(0) {
        return Err((Some((2, 1)), "max_turns and timeout_mins must be positive".to_owned()));
    }
    info.name = l.name;
    info.description = l.description;
    info.display_name = l.display_name;
    info.tools = l.tools;
    info.model = l.model;
    info.temperature = l.temperature;
    info.max_turns = l.max_turns;
    info.timeout_mins = l.timeout_mins;
    info.mcp_servers = l.mcp_servers.map(|m| m.keys().cloned().collect()).unwrap_or_default();
    Ok(Agent { info, system_prompt: body.to_owned() })
}

fn check_name(name: &str) -> Result<(), Problem> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        return Err((
            Some((2, 1)),
            format!("name: \"{name}\" is not a slug (lowercase letters, digits, `-` and `_`)"),
        ));
    }
    Ok(())
}

/// A tool name an agent may list: `*`, a plain name, or `mcp_<server>_<tool>` with both parts
/// (a trailing `*` as a wildcard).
fn valid_tool(t: &str) -> bool {
    let slug = |s: &str| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.:-*".contains(&b))
    };
    if t == "*" || t == "mcp_*" {
        return true;
    }
    match t.strip_prefix("mcp_") {
        Some(rest) => match rest.split_once('_') {
            Some((server, tool)) => slug(server) && slug(tool) && !server.contains('*'),
            None => false,
        },
        None => slug(t) && !t.contains('*'),
    }
}
