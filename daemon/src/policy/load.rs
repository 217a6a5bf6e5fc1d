//! A policy file read into rules (Gemini CLI's `toml-loader.ts`), each problem said with its
//! file, line and column.
//!
//! Where Gemini CLI skips a whole file whose rules do not fit its schema, a bad rule here costs
//! only itself: the file's other rules load, and the bad one is said. Rules Gemini CLI reports
//! but still loads (an empty `toolName`, `commandPrefix` on a tool that is not the shell) are
//! dropped here, said the same way.

use geminid_protocol::common::{Diagnostic, Severity};
use serde_json::{Map, Value};
use toml_edit::{Item, TableLike};

use super::pattern::{ArgsPattern, args_patterns};
use super::rule::{Origin, Rule};
use super::{ApprovalMode, Decision, Tier};

/// The shell tool, the one `commandPrefix` and `commandRegex` are for.
pub(crate) const SHELL_TOOL: &str = "run_shell_command";

/// Fields a `[[rule]]` may have.
const FIELDS: &[&str] = &[
    "toolName",
    "subagent",
    "mcpName",
    "argsPattern",
    "commandPrefix",
    "commandRegex",
    "decision",
    "priority",
    "modes",
    "interactive",
    "toolAnnotations",
    "allowRedirection",
    "allow_redirection",
    "denyMessage",
    "deny_message",
];

/// What a file gave: its rules, and what is wrong in it.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The rules, in file order (a `toolName` list or several `commandPrefix`es give one rule
    /// each).
    pub rules: Vec<Rule>,
    /// Problems, errors first.
    pub problems: Vec<Diagnostic>,
    /// The file could not be read as TOML at all (its last good rules should stay in force).
    pub unreadable: bool,
}

/// 1-based line and column of a byte offset.
pub(crate) fn position(text: &str, offset: usize) -> (u32, u32) {
    Lines::new(text).position(offset)
}

/// Where each line of a text begins: a byte offset's line and column without counting from
/// the start each time (a file of 10,000 rules asks 10,000 times, which scanned the file
/// 10,000 times: issue 39).
pub(crate) struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { text, starts: starts.collect() }
    }

    /// The 1-based line and column (in characters) of the byte `offset`.
    pub(crate) fn position(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line.saturating_sub(1)];
        let column = self.text.get(start..offset).map_or(0, |l| l.chars().count()) + 1;
        (u32::try_from(line).unwrap_or(u32::MAX), u32::try_from(column).unwrap_or(u32::MAX))
    }
}

struct Reader<'a> {
    file: &'a str,
    lines: Lines<'a>,
    /// Where the text being read begins in the file (a `[[rule]]` read on its own).
    base: usize,
    out: Loaded,
}

impl Reader<'_> {
    fn say(&mut self, severity: Severity, at: Option<std::ops::Range<usize>>, message: String) {
        let (line, column) = match at {
            Some(r) => {
                let (l, c) = self.lines.position(r.start + self.base);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        self.out.problems.push(Diagnostic {
            severity,
            file: self.file.to_owned(),
            line,
            column,
            message,
        });
    }
}

/// A TOML value as JSON (for `toolAnnotations`).
fn to_json(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match v {
        T::String(s) => Value::String(s.value().clone()),
        T::Integer(i) => Value::from(*i.value()),
        T::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(Value::Null, Value::Number),
        T::Boolean(b) => Value::Bool(*b.value()),
        T::Datetime(d) => Value::String(d.value().to_string()),
        T::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        T::InlineTable(t) => {
            Value::Object(t.iter().map(|(k, v)| (k.to_owned(), to_json(v))).collect())
        }
    }
}

/// A string, or a list of strings.
fn strings(item: &Item) -> Option<Vec<String>> {
    if let Some(s) = item.as_str() {
        return Some(vec![s.to_owned()]);
    }
    let a = item.as_array()?;
    a.iter().map(|v| v.as_str().map(str::to_owned)).collect()
}

/// Read a policy file's text as tier `tier`; `file` names it in every problem.
pub fn load(file: &str, text: &str, tier: Tier) -> Loaded {
    let mut r = Reader { file, lines: Lines::new(text), base: 0, out: Loaded::default() };
    if !by_rule(&mut r, text, tier) {
        r.base = 0;
        r.out = Loaded::default();
        whole(&mut r, text, tier);
    }
    r.out.problems.sort_by_key(|d| std::cmp::Reverse(d.severity));
    r.out
}

/// Where each line that is exactly `[[rule]]` begins, when nothing but blank lines and comments
/// comes before the first.
fn rule_starts(text: &str) -> Option<Vec<usize>> {
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if t == "[[rule]]" {
            starts.push(offset);
        } else if starts.is_empty() && !t.is_empty() && !t.starts_with('#') {
            return None;
        }
        offset += line.len();
    }
    (!starts.is_empty()).then_some(starts)
}

/// Each `[[rule]]` parsed on its own, so that a large file is never held as one document
/// (one of 10,000 rules built 42 MiB of `toml_edit` nodes, which the allocator kept: issue
/// 39). The same rules and problems as [`whole`], which reads the file when this cannot: when
/// something other than rules is in it, or a part does not parse on its own (a `[[rule]]` line
/// inside a multi-line string splits the string, and neither half parses), or the file does not
/// parse at all (whose error [`whole`] gives). `false` then, with what was read discarded.
fn by_rule(r: &mut Reader<'_>, text: &str, tier: Tier) -> bool {
    let Some(starts) = rule_starts(text) else { return false };
    let mut n = 0;
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let Ok(doc) = toml_edit::Document::parse(&text[start..end]) else { return false };
        let root = doc.as_table();
        if root.len() != 1 {
            return false;
        }
        let Some(Item::ArrayOfTables(rules)) = root.get("rule") else { return false };
        r.base = start;
        for t in rules.iter() {
            n += 1;
            rule(r, n, t, t.span(), tier);
        }
    }
    true
}

/// The file parsed as one document.
fn whole(r: &mut Reader<'_>, text: &str, tier: Tier) {
    let doc = match toml_edit::Document::parse(text) {
        Ok(d) => d,
        Err(e) => {
            let message = format!("TOML parsing failed: {}", e.message());
            r.say(Severity::Error, e.span(), message);
            r.out.unreadable = true;
            return;
        }
    };
    let root = doc.as_table();
    for (key, item) in root.iter() {
        match key {
            "rule" => {}
            "safety_checker" => r.say(
                Severity::Warning,
                item.span(),
                "[[safety_checker]] entries are not run by geminid; they are ignored".to_owned(),
            ),
            other => r.say(
                Severity::Warning,
                item.span(),
                format!("unknown key '{other}' (a policy file holds [[rule]] entries); ignored"),
            ),
        }
    }
    match root.get("rule") {
        None => {}
        Some(Item::ArrayOfTables(rules)) => {
            for (i, t) in rules.iter().enumerate() {
                rule(r, i + 1, t, t.span(), tier);
            }
        }
        Some(other) => r.say(
            Severity::Error,
            other.span(),
            "'rule' must be an array of tables ([[rule]] entries)".to_owned(),
        ),
    }
}

/// One `[[rule]]`: its rules, or a problem that drops it.
fn rule(
    r: &mut Reader<'_>,
    n: usize,
    t: &dyn TableLike,
    at: Option<std::ops::Range<usize>>,
    tier: Tier,
) {
    let line = at.clone().map(|a| r.lines.position(a.start + r.base).0);
    let entry = Entry { n, t, at };
    entry.unknown_fields(r);
    let Ok(read) = entry.read(r) else { return };
    let origin = Origin { file: r.file.to_owned(), line, tier, priority: read.priority };
    for args in read.compiled {
        for name in &read.names {
            let tool_name = match &read.mcp_name {
                Some(server) => super::rule::mcp_name(server, name),
                None => name.clone(),
            };
            r.out.rules.push(Rule {
                tool_name,
                subagent: read.subagent.clone(),
                mcp_name: read.mcp_name.clone(),
                args: args.clone(),
                decision: read.decision,
                modes: read.modes.clone(),
                interactive: read.interactive,
                annotations: read.annotations.clone(),
                allow_redirection: read.allow_redirection,
                deny_message: read.deny_message.clone(),
                origin: origin.clone(),
            });
        }
    }
}

/// One `[[rule]]` table being read: its number in the file, the table and its span.
struct Entry<'t> {
    n: usize,
    t: &'t dyn TableLike,
    at: Option<std::ops::Range<usize>>,
}

/// What one `[[rule]]` says, each field checked: every tool name, with one pattern each.
struct Fields {
    names: Vec<String>,
    decision: Decision,
    priority: u32,
    subagent: Option<String>,
    mcp_name: Option<String>,
    modes: Vec<ApprovalMode>,
    interactive: Option<bool>,
    annotations: Option<Map<String, Value>>,
    allow_redirection: Option<bool>,
    deny_message: Option<String>,
    compiled: Vec<Option<std::sync::Arc<ArgsPattern>>>,
}

/// The rule was dropped; the problem is said.
struct Dropped;

impl Entry<'_> {
    /// Each field in the order Gemini CLI checks them; the first problem drops the rule.
    fn read(&self, r: &mut Reader<'_>) -> Result<Fields, Dropped> {
        let (names, listed) = self.tool_names(r)?;
        let decision = self.decision(r)?;
        let priority = self.priority(r)?;
        let subagent = self.string(r, "subagent")?;
        let mcp_name = self.string(r, "mcpName")?;
        let args_pattern = self.string(r, "argsPattern")?;
        let command_regex = self.string(r, "commandRegex")?;
        let command_prefix = self.command_prefix(r)?;
        let command = (&args_pattern, &command_prefix, &command_regex);
        self.shell_only(r, &names, listed, command)?;
        let modes = self.modes(r)?;
        let interactive = self.interactive(r)?;
        let annotations = self.annotations(r)?;
        let allow_redirection = self
            .field("allowRedirection")
            .or_else(|| self.field("allow_redirection"))
            .and_then(Item::as_bool);
        let deny_message = match self.string(r, "denyMessage")? {
            Some(m) => Some(m),
            None => self.string(r, "deny_message")?,
        };
        self.deprecated_names(r, &names);
        let compiled = self.patterns(r, command)?;
        Ok(Fields {
            names,
            decision,
            priority,
            subagent,
            mcp_name,
            modes,
            interactive,
            annotations,
            allow_redirection,
            deny_message,
            compiled,
        })
    }

    fn field(&self, key: &str) -> Option<&Item> {
        self.t.get(key)
    }

    fn span_of(&self, key: &str) -> Option<std::ops::Range<usize>> {
        self.t.get(key).and_then(Item::span).or_else(|| self.at.clone())
    }

    /// The rule dropped for `why`, said at `at`.
    fn drop<T>(
        &self,
        r: &mut Reader<'_>,
        at: Option<std::ops::Range<usize>>,
        why: String,
    ) -> Result<T, Dropped> {
        r.say(Severity::Error, at, format!("rule #{} is not loaded: {why}", self.n));
        Err(Dropped)
    }

    fn unknown_fields(&self, r: &mut Reader<'_>) {
        for (key, item) in self.t.iter() {
            if !FIELDS.contains(&key) {
                r.say(
                    Severity::Warning,
                    item.span(),
                    format!(
                        "rule #{}: unknown field '{key}'; ignored{}",
                        self.n,
                        geminid_protocol::suggest::did_you_mean(key, FIELDS.iter().copied())
                    ),
                );
            }
        }
    }

    /// An optional string field.
    fn string(&self, r: &mut Reader<'_>, key: &str) -> Result<Option<String>, Dropped> {
        match self.field(key) {
            None => Ok(None),
            Some(i) => match i.as_str() {
                Some(s) => Ok(Some(s.to_owned())),
                None => self.drop(
                    r,
                    self.span_of(key),
                    format!("{key} must be a string, not {}", i.type_name()),
                ),
            },
        }
    }

    /// `toolName`: its names, and whether it is a list.
    fn tool_names(&self, r: &mut Reader<'_>) -> Result<(Vec<String>, bool), Dropped> {
        let Some(item) = self.field("toolName") else {
            let why = "toolName is required (\"*\" matches every tool)".to_owned();
            return self.drop(r, self.at.clone(), why);
        };
        let Some(names) = strings(item) else {
            let why = "toolName must be a string or a list of strings".to_owned();
            return self.drop(r, self.span_of("toolName"), why);
        };
        if names.iter().any(String::is_empty) {
            let why = "toolName cannot be an empty string (\"*\" matches every tool)".to_owned();
            return self.drop(r, self.span_of("toolName"), why);
        }
        Ok((names, item.as_array().is_some()))
    }

    fn decision(&self, r: &mut Reader<'_>) -> Result<Decision, Dropped> {
        match self.field("decision").and_then(Item::as_str) {
            Some("allow") => Ok(Decision::Allow),
            Some("deny") => Ok(Decision::Deny),
            Some("ask_user") => Ok(Decision::AskUser),
            Some(other) => self.drop(
                r,
                self.span_of("decision"),
                format!("decision must be \"allow\", \"deny\" or \"ask_user\", not {other:?}"),
            ),
            None => self.drop(
                r,
                self.span_of("decision"),
                "decision is required (\"allow\", \"deny\" or \"ask_user\")".to_owned(),
            ),
        }
    }

    fn priority(&self, r: &mut Reader<'_>) -> Result<u32, Dropped> {
        let Some(i) = self.field("priority") else {
            let why = "priority is required (an integer from 0 to 999)".to_owned();
            return self.drop(r, self.at.clone(), why);
        };
        let at = self.span_of("priority");
        match i.as_integer() {
            Some(p) if p < 0 => self.drop(r, at, format!("priority must be >= 0, not {p}")),
            Some(p) if p > 999 => self.drop(
                r,
                at,
                format!(
                    "priority must be <= 999, not {p}: priorities of 1000 and more would jump to the next tier"
                ),
            ),
            Some(p) => Ok(u32::try_from(p).unwrap_or(0)),
            None => {
                self.drop(r, at, format!("priority must be an integer, not {}", i.type_name()))
            }
        }
    }

    fn command_prefix(&self, r: &mut Reader<'_>) -> Result<Option<Vec<String>>, Dropped> {
        match self.field("commandPrefix") {
            None => Ok(None),
            Some(i) => match strings(i) {
                Some(p) => Ok(Some(p)),
                None => self.drop(
                    r,
                    self.span_of("commandPrefix"),
                    "commandPrefix must be a string or a list of strings".to_owned(),
                ),
            },
        }
    }

    /// `commandPrefix` and `commandRegex` are for the shell tool alone, one of them, and not
    /// beside `argsPattern`.
    fn shell_only(
        &self,
        r: &mut Reader<'_>,
        names: &[String],
        listed: bool,
        (args_pattern, command_prefix, command_regex): Command<'_>,
    ) -> Result<(), Dropped> {
        if command_prefix.is_none() && command_regex.is_none() {
            return Ok(());
        }
        if names.len() != 1 || names[0] != SHELL_TOOL || listed {
            return self.drop(
                r,
                self.span_of(if command_prefix.is_some() { "commandPrefix" } else { "commandRegex" }),
                format!(
                    "commandPrefix and commandRegex can only be used with toolName = \"{SHELL_TOOL}\" (not a list)"
                ),
            );
        }
        if args_pattern.is_some() {
            let why = "commandPrefix/commandRegex and argsPattern cannot be used together";
            return self.drop(r, self.span_of("argsPattern"), why.to_owned());
        }
        if command_prefix.is_some() && command_regex.is_some() {
            let why = "commandPrefix and commandRegex cannot be used together";
            return self.drop(r, self.span_of("commandRegex"), why.to_owned());
        }
        Ok(())
    }

    fn modes(&self, r: &mut Reader<'_>) -> Result<Vec<ApprovalMode>, Dropped> {
        let Some(i) = self.field("modes") else { return Ok(vec![]) };
        let names: Option<Vec<ApprovalMode>> = i
            .as_array()
            .and_then(|a| a.iter().map(|v| v.as_str().and_then(super::mode_named)).collect());
        match names {
            Some(m) => Ok(m),
            None => self.drop(
                r,
                self.span_of("modes"),
                "modes must be a list of \"default\", \"autoEdit\", \"yolo\", \"plan\"".to_owned(),
            ),
        }
    }

    fn interactive(&self, r: &mut Reader<'_>) -> Result<Option<bool>, Dropped> {
        match self.field("interactive") {
            None => Ok(None),
            Some(i) => match i.as_bool() {
                Some(b) => Ok(Some(b)),
                None => {
                    let why = "interactive must be true or false".to_owned();
                    self.drop(r, self.span_of("interactive"), why)
                }
            },
        }
    }

    fn annotations(&self, r: &mut Reader<'_>) -> Result<Option<Map<String, Value>>, Dropped> {
        match self.field("toolAnnotations") {
            None => Ok(None),
            Some(i) => match i.as_table_like() {
                Some(tl) => Ok(Some(
                    tl.iter()
                        .filter_map(|(k, v)| v.as_value().map(|v| (k.to_owned(), to_json(v))))
                        .collect(),
                )),
                None => {
                    let why = "toolAnnotations must be a table".to_owned();
                    self.drop(r, self.span_of("toolAnnotations"), why)
                }
            },
        }
    }

    /// A warning for each name in the deprecated `server__tool` form.
    fn deprecated_names(&self, r: &mut Reader<'_>, names: &[String]) {
        for name in names {
            if name.contains("__") {
                r.say(
                    Severity::Warning,
                    self.span_of("toolName"),
                    format!("rule #{}: the \"__\" syntax for MCP tools is deprecated; use mcpName = \"...\" or the mcp_server_tool form ({name:?})", self.n),
                );
            }
        }
    }

    /// The argument patterns the rule matches with, compiled.
    fn patterns(
        &self,
        r: &mut Reader<'_>,
        (args_pattern, command_prefix, command_regex): Command<'_>,
    ) -> Result<Vec<Option<std::sync::Arc<ArgsPattern>>>, Dropped> {
        let patterns = args_patterns(
            args_pattern.as_deref(),
            command_prefix.as_deref(),
            command_regex.as_deref(),
        );
        let mut compiled = Vec::with_capacity(patterns.len());
        for p in &patterns {
            match p.as_deref().map(ArgsPattern::new).transpose() {
                Ok(c) => compiled.push(c),
                Err(why) => {
                    let key = if command_prefix.is_some() {
                        "commandPrefix"
                    } else if command_regex.is_some() {
                        "commandRegex"
                    } else {
                        "argsPattern"
                    };
                    let why = format!("its pattern cannot be used: {why}");
                    return self.drop(r, self.span_of(key), why);
                }
            }
        }
        Ok(compiled)
    }
}

/// `argsPattern`, `commandPrefix` and `commandRegex` as written.
type Command<'a> = (&'a Option<String>, &'a Option<Vec<String>>, &'a Option<String>);

#[cfg(test)]
mod tests;
