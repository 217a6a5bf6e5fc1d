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
    let bad = |r: &mut Reader<'_>, at: Option<std::ops::Range<usize>>, why: String| {
        r.say(Severity::Error, at, format!("rule #{n} is not loaded: {why}"));
    };
    for (key, item) in t.iter() {
        if !FIELDS.contains(&key) {
            r.say(
                Severity::Warning,
                item.span(),
                format!(
                    "rule #{n}: unknown field '{key}'; ignored{}",
                    geminid_protocol::suggest::did_you_mean(key, FIELDS.iter().copied())
                ),
            );
        }
    }
    let field = |key: &str| t.get(key);
    let span_of = |key: &str| t.get(key).and_then(Item::span).or_else(|| at.clone());
    let string = |r: &mut Reader<'_>, key: &str| -> Result<Option<String>, ()> {
        match field(key) {
            None => Ok(None),
            Some(i) => match i.as_str() {
                Some(s) => Ok(Some(s.to_owned())),
                None => {
                    bad(r, span_of(key), format!("{key} must be a string, not {}", i.type_name()));
                    Err(())
                }
            },
        }
    };
    // toolName
    let Some(names_item) = field("toolName") else {
        return bad(r, at.clone(), "toolName is required (\"*\" matches every tool)".to_owned());
    };
    let Some(names) = strings(names_item) else {
        return bad(
            r,
            span_of("toolName"),
            "toolName must be a string or a list of strings".to_owned(),
        );
    };
    if names.iter().any(String::is_empty) {
        return bad(
            r,
            span_of("toolName"),
            "toolName cannot be an empty string (\"*\" matches every tool)".to_owned(),
        );
    }
    // decision
    let decision = match field("decision").and_then(Item::as_str) {
        Some("allow") => Decision::Allow,
        Some("deny") => Decision::Deny,
        Some("ask_user") => Decision::AskUser,
        Some(other) => {
            return bad(
                r,
                span_of("decision"),
                format!("decision must be \"allow\", \"deny\" or \"ask_user\", not {other:?}"),
            );
        }
        None => {
            return bad(
                r,
                span_of("decision"),
                "decision is required (\"allow\", \"deny\" or \"ask_user\")".to_owned(),
            );
        }
    };
    // priority
    let priority = match field("priority") {
        None => {
            return bad(
                r,
                at.clone(),
                "priority is required (an integer from 0 to 999)".to_owned(),
            );
        }
        Some(i) => match i.as_integer() {
            Some(p) if p < 0 => {
                return bad(r, span_of("priority"), format!("priority must be >= 0, not {p}"));
            }
            Some(p) if p > 999 => {
                return bad(
                    r,
                    span_of("priority"),
                    format!(
                        "priority must be <= 999, not {p}: priorities of 1000 and more would jump to the next tier"
                    ),
                );
            }
            Some(p) => u32::try_from(p).unwrap_or(0),
            None => {
                return bad(
                    r,
                    span_of("priority"),
                    format!("priority must be an integer, not {}", i.type_name()),
                );
            }
        },
    };
    let Ok(subagent) = string(r, "subagent") else { return };
    let Ok(mcp_name) = string(r, "mcpName") else { return };
    let Ok(args_pattern) = string(r, "argsPattern") else { return };
    let Ok(command_regex) = string(r, "commandRegex") else { return };
    let command_prefix = match field("commandPrefix") {
        None => None,
        Some(i) => match strings(i) {
            Some(p) => Some(p),
            None => {
                return bad(
                    r,
                    span_of("commandPrefix"),
                    "commandPrefix must be a string or a list of strings".to_owned(),
                );
            }
        },
    };
    if command_prefix.is_some() || command_regex.is_some() {
        if names.len() != 1 || names[0] != SHELL_TOOL || names_item.as_array().is_some() {
            return bad(
                r,
                span_of(if command_prefix.is_some() { "commandPrefix" } else { "commandRegex" }),
                format!(
                    "commandPrefix and commandRegex can only be used with toolName = \"{SHELL_TOOL}\" (not a list)"
                ),
            );
        }
        if args_pattern.is_some() {
            return bad(
                r,
                span_of("argsPattern"),
                "commandPrefix/commandRegex and argsPattern cannot be used together".to_owned(),
            );
        }
        if command_prefix.is_some() && command_regex.is_some() {
            return bad(
                r,
                span_of("commandRegex"),
                "commandPrefix and commandRegex cannot be used together".to_owned(),
            );
        }
    }
    let modes = match field("modes") {
        None => vec![],
        Some(i) => {
            let names: Option<Vec<ApprovalMode>> = i
                .as_array()
                .and_then(|a| a.iter().map(|v| v.as_str().and_then(super::mode_named)).collect());
            match names {
                Some(m) => m,
                None => {
                    return bad(
                        r,
                        span_of("modes"),
                        "modes must be a list of \"default\", \"autoEdit\", \"yolo\", \"plan\""
                            .to_owned(),
                    );
                }
            }
        }
    };
    let interactive = match field("interactive") {
        None => None,
        Some(i) => match i.as_bool() {
            Some(b) => Some(b),
            None => {
                return bad(
                    r,
                    span_of("interactive"),
                    "interactive must be true or false".to_owned(),
                );
            }
        },
    };
    let annotations = match field("toolAnnotations") {
        None => None,
        Some(i) => match i.as_table_like() {
            Some(tl) => Some(
                tl.iter()
                    .filter_map(|(k, v)| v.as_value().map(|v| (k.to_owned(), to_json(v))))
                    .collect::<Map<String, Value>>(),
            ),
            None => {
                return bad(
                    r,
                    span_of("toolAnnotations"),
                    "toolAnnotations must be a table".to_owned(),
                );
            }
        },
    };
    let allow_redirection =
        field("allowRedirection").or_else(|| field("allow_redirection")).and_then(Item::as_bool);
    let Ok(deny_message) = string(r, "denyMessage") else { return };
    let deny_message = match deny_message {
        Some(m) => Some(m),
        None => {
            let Ok(m) = string(r, "deny_message") else { return };
            m
        }
    };
    for name in &names {
        if name.contains("__") {
            r.say(
                Severity::Warning,
                span_of("toolName"),
                format!("rule #{n}: the \"__\" syntax for MCP tools is deprecated; use mcpName = \"...\" or the mcp_server_tool form ({name:?})"),
            );
        }
    }
    let patterns =
        args_patterns(args_pattern.as_deref(), command_prefix.as_deref(), command_regex.as_deref());
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
                return bad(r, span_of(key), format!("its pattern cannot be used: {why}"));
            }
        }
    }
    let origin = Origin { file: r.file.to_owned(), line, tier, priority };
    for args in compiled {
        for name in &names {
            let tool_name = match &mcp_name {
                Some(server) => super::rule::mcp_name(server, name),
                None => name.clone(),
            };
            r.out.rules.push(Rule {
                tool_name,
                subagent: subagent.clone(),
                mcp_name: mcp_name.clone(),
                args: args.clone(),
                decision,
                modes: modes.clone(),
                interactive,
                annotations: annotations.clone(),
                allow_redirection,
                deny_message: deny_message.clone(),
                origin: origin.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests;
