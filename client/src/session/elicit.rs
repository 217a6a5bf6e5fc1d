//! A server's elicitation answered at the terminal (`gemctl attach --answer`): a form is asked
//! field by field (an empty line takes the field's default; `!decline` or `!cancel` at any
//! prompt ends it so), a URL is printed (and opened when there is a desktop to open it on)
//! and confirmed with `y` once visited, or `n`.

use geminid_protocol::asks::Ask;
use serde_json::{Map, Value, json};

/// What a field takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Text,
    Number,
    Integer,
    Boolean,
    /// One of these options.
    OneOf(Vec<Choice>),
    /// Any of these options (an array).
    ManyOf(Vec<Choice>),
}

/// An option of a select: the value sent, and the title shown (the value when untitled).
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    value: String,
    title: String,
}

/// The options of an enum schema, in each shape the MCP specification gives one: `enum`
/// (with the legacy `enumNames` as titles), or `oneOf`/`anyOf` of `{const, title}`.
fn choices(p: &Value) -> Option<Vec<Choice>> {
    if let Some(values) = p.get("enum").and_then(Value::as_array) {
        let names = p.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    let value = v.as_str()?.to_owned();
                    let title = names
                        .and_then(|n| n.get(i))
                        .and_then(Value::as_str)
                        .map_or_else(|| value.clone(), str::to_owned);
                    Some(Choice { value, title })
                })
                .collect(),
        );
    }
    let options = p.get("oneOf").or_else(|| p.get("anyOf")).and_then(Value::as_array)?;
    Some(
        options
            .iter()
            .filter_map(|o| {
                let value = o.get("const")?.as_str()?.to_owned();
                let title = o
                    .get("title")
                    .and_then(Value::as_str)
                    .map_or_else(|| value.clone(), str::to_owned);
                Some(Choice { value, title })
            })
            .collect(),
    )
}

/// `Title One [one] | Title Two [two]`, or `one | two` when untitled.
fn show_choices(options: &[Choice]) -> String {
    let shown: Vec<String> = options
        .iter()
        .map(|c| {
            if c.title == c.value { c.value.clone() } else { format!("{} [{}]", c.title, c.value) }
        })
        .collect();
    shown.join(" | ")
}

/// The option a typed word names: its value or its title, in any case.
fn pick<'a>(options: &'a [Choice], typed: &str) -> Option<&'a Choice> {
    let typed = typed.trim();
    options
        .iter()
        .find(|c| c.value.eq_ignore_ascii_case(typed) || c.title.eq_ignore_ascii_case(typed))
}

/// One field of a form.
#[derive(Debug, Clone)]
pub struct Field {
    name: String,
    title: String,
    description: Option<String>,
    kind: Kind,
    default: Option<Value>,
    required: bool,
}

/// One elicitation being answered.
#[derive(Debug, Clone)]
pub enum Elicitation {
    /// A form, and the fields answered so far.
    Form { fields: Vec<Field>, next: usize, content: Map<String, Value> },
    /// A URL to visit.
    Url { url: String },
}

/// What a typed line did.
#[derive(Debug, Clone, PartialEq)]
pub enum Fed {
    /// Ask this next.
    Ask(String),
    /// The answer is complete (an `ElicitResult`).
    Done(Value),
    /// The line was not an answer: say this, and ask the same again.
    Again(String),
}

fn kind_of(p: &Value) -> Kind {
    if p.get("type").and_then(Value::as_str) == Some("array")
        && let Some(options) = p.get("items").and_then(choices)
    {
        return Kind::ManyOf(options);
    }
    if let Some(options) = choices(p) {
        return Kind::OneOf(options);
    }
    match p.get("type").and_then(Value::as_str) {
        Some("number") => Kind::Number,
        Some("integer") => Kind::Integer,
        Some("boolean") => Kind::Boolean,
        _ => Kind::Text,
    }
}

impl Elicitation {
    /// The elicitation an ask carries (its `detail.request`), if it is one this terminal can
    /// answer.
    pub fn of(ask: &Ask) -> Option<Self> {
        let request = ask.detail.get("request")?;
        match request.get("mode").and_then(Value::as_str).unwrap_or("form") {
            "url" => Some(Self::Url { url: request.get("url")?.as_str()?.to_owned() }),
            _ => {
                let schema = request.get("requestedSchema")?;
                let required: Vec<&str> = schema
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let fields = schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                    .map(|(name, p)| Field {
                        name: name.clone(),
                        title: p.get("title").and_then(Value::as_str).unwrap_or(name).to_owned(),
                        description: p
                            .get("description")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        kind: kind_of(p),
                        default: p.get("default").cloned(),
                        required: required.contains(&name.as_str()),
                    })
                    .collect();
                Some(Self::Form { fields, next: 0, content: Map::new() })
            }
        }
    }

    /// What to ask first (the form's first field, or the URL and how to answer). A form
    /// without fields is answered at once: `Fed::Done`.
    pub fn start(&mut self) -> Fed {
        match self {
            Self::Url { url } => Fed::Ask(format!(
                "  open {url}\n  (y once done there, n or `!decline` to decline, `!cancel`)"
            )),
            Self::Form { .. } => self.prompt(),
        }
    }

    fn prompt(&self) -> Fed {
        let Self::Form { fields, next, content } = self else { return Fed::Again(String::new()) };
        let Some(f) = fields.get(*next) else {
            return Fed::Done(json!({ "action": "accept", "content": content }));
        };
        let what = match &f.kind {
            Kind::Text => "text".to_owned(),
            Kind::Number => "a number".to_owned(),
            Kind::Integer => "a whole number".to_owned(),
            Kind::Boolean => "y or n".to_owned(),
            Kind::OneOf(v) => show_choices(v),
            Kind::ManyOf(v) => format!("any of {}, comma-separated", show_choices(v)),
        };
        let default = match &f.default {
            Some(Value::String(s)) => format!(", empty for {s}"),
            Some(Value::Array(a)) => {
                let items: Vec<&str> = a.iter().filter_map(Value::as_str).collect();
                format!(", empty for {}", items.join(", "))
            }
            Some(d) => format!(", empty for {d}"),
            None if !f.required => ", empty to leave out".to_owned(),
            None => String::new(),
        };
        let about = f.description.as_deref().map(|d| format!(" — {d}")).unwrap_or_default();
        Fed::Ask(format!("  {}{about} ({what}{default}):", f.title))
    }

    /// Take one typed line.
    pub fn feed(&mut self, line: &str) -> Fed {
        let typed = line.trim();
        match typed {
            "!decline" => return Fed::Done(json!({ "action": "decline" })),
            "!cancel" => return Fed::Done(json!({ "action": "cancel" })),
            _ => {}
        }
        match self {
            Self::Url { .. } => match typed.to_ascii_lowercase().as_str() {
                "y" | "yes" | "done" => Fed::Done(json!({ "action": "accept" })),
                "n" | "no" => Fed::Done(json!({ "action": "decline" })),
                _ => Fed::Again("answer y once done, or n to decline".into()),
            },
            Self::Form { fields, next, content } => {
                let Some(f) = fields.get(*next) else { return self.prompt() };
                let value = if typed.is_empty() {
                    match (&f.default, f.required) {
                        (Some(d), _) => Some(d.clone()),
                        (None, false) => None,
                        (None, true) => return Fed::Again(format!("{} is required", f.title)),
                    }
                } else {
                    match parse(&f.kind, typed) {
                        Ok(v) => Some(v),
                        Err(why) => return Fed::Again(why),
                    }
                };
                if let Some(v) = value {
                    content.insert(f.name.clone(), v);
                }
                *next += 1;
                self.prompt()
            }
        }
    }

    /// The URL to open, for a URL elicitation.
    pub fn url(&self) -> Option<&str> {
        match self {
            Self::Url { url } => Some(url),
            Self::Form { .. } => None,
        }
    }
}

fn parse(kind: &Kind, typed: &str) -> Result<Value, String> {
    match kind {
        Kind::Text => Ok(Value::String(typed.to_owned())),
        Kind::Integer => typed
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("{typed:?} is not a whole number")),
        Kind::Number => typed
            .parse::<f64>()
            .ok()
            .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
            .ok_or_else(|| format!("{typed:?} is not a number")),
        Kind::Boolean => match typed.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("answer y or n".into()),
        },
        Kind::OneOf(options) => match pick(options, typed) {
            Some(c) => Ok(Value::String(c.value.clone())),
            None => Err(format!("one of {}", show_choices(options))),
        },
        Kind::ManyOf(options) => {
            let mut picked = Vec::new();
            for word in typed.split(',').filter(|w| !w.trim().is_empty()) {
                match pick(options, word) {
                    Some(c) if !picked.contains(&Value::String(c.value.clone())) => {
                        picked.push(Value::String(c.value.clone()));
                    }
                    Some(_) => {}
                    None => {
                        return Err(format!(
                            "{:?} is none of {}",
                            word.trim(),
                            show_choices(options)
                        ));
                    }
                }
            }
            Ok(Value::Array(picked))
        }
    }
}

/// Open a URL with `$BROWSER` when it is set (a command; `%s` in it is replaced by the URL,
/// else the URL is its last argument), else in the desktop's browser when there is a desktop;
/// printing it is enough otherwise (and where opening fails).
pub fn open_url(url: &str) {
    if let Some(browser) = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty()) {
        // Like Python's `webbrowser`: several commands may be listed, separated by `:`.
        let first = browser.split(if cfg!(windows) { ';' } else { ':' }).next().unwrap_or_default();
        let mut words: Vec<String> = first.split_whitespace().map(str::to_owned).collect();
        if words.iter().any(|w| w.contains("%s")) {
            words.iter_mut().for_each(|w| *w = w.replace("%s", url));
        } else {
            words.push(url.to_owned());
        }
        if let Some((program, args)) = words.split_first() {
            let _ = std::process::Command::new(program)
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
        }
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        Some("open")
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    {
        Some("xdg-open")
    } else {
        None
    };
    if let Some(opener) = opener {
        let _ = std::process::Command::new(opener)
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(request: Value) -> Ask {
        Ask {
            id: "ask-1".into(),
            session: "s".into(),
            call_id: None,
            kind: geminid_protocol::asks::AskKind::Elicitation,
            title: "t".into(),
            detail: json!({ "request": request }),
            deadline_ms: 0,
        }
    }

    #[test]
    fn a_form_is_asked_field_by_field_with_defaults_and_checks() {
        let schema = json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "title": "Name"},
            "age": {"type": "integer", "default": 36},
            "colour": {"type": "string", "enum": ["red", "green"]},
            "ok": {"type": "boolean"},
        }});
        let mut e =
            Elicitation::of(&ask(json!({"mode": "form", "requestedSchema": schema}))).unwrap();
        // Asked in the schema's order.
        assert!(matches!(e.start(), Fed::Ask(p) if p.contains("Name")));
        assert_eq!(e.feed(""), Fed::Again("Name is required".into()));
        assert!(
            matches!(e.feed("Grace Hopper"), Fed::Ask(p) if p.contains("age") && p.contains("empty for 36"))
        );
        assert_eq!(e.feed("x"), Fed::Again("\"x\" is not a whole number".into()));
        assert!(matches!(e.feed(""), Fed::Ask(p) if p.contains("red | green")));
        assert_eq!(e.feed("blue"), Fed::Again("one of red | green".into()));
        assert!(matches!(e.feed("GREEN"), Fed::Ask(p) if p.contains("y or n")));
        assert_eq!(
            e.feed("y"),
            Fed::Done(
                json!({"action": "accept", "content": {"name": "Grace Hopper", "age": 36, "colour": "green", "ok": true}})
            )
        );
    }

    /// Each enum shape of the MCP specification (2025-11-25): titled options are shown by
    /// title and take the title or the value; a multi-select answers an array.
    #[test]
    fn selects_titled_untitled_single_and_multiple() {
        let schema = json!({"type": "object", "properties": {
            "hero": {"type": "string", "oneOf": [
                {"const": "hero-1", "title": "Ada"}, {"const": "hero-2", "title": "Grace"}]},
            "fish": {"type": "array", "items": {"anyOf": [
                {"const": "fish-1", "title": "Trout"}, {"const": "fish-2", "title": "Pike"}]},
                "default": ["fish-1"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
            "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
        }});
        let mut e = Elicitation::of(&ask(json!({"requestedSchema": schema}))).unwrap();
        assert!(
            matches!(e.start(), Fed::Ask(p) if p.contains("(Ada [hero-1] | Grace [hero-2], empty to leave out)"))
        );
        let fish = e.feed("grace");
        assert!(
            matches!(&fish, Fed::Ask(p) if p.contains("any of Trout [fish-1] | Pike [fish-2], comma-separated, empty for fish-1")),
            "{fish:?}"
        );
        assert!(matches!(e.feed("Trout, cod"), Fed::Again(w) if w.contains("\"cod\" is none of")));
        assert!(
            matches!(e.feed("pike, fish-1, Pike"), Fed::Ask(p) if p.contains("any of a | b | c"))
        );
        assert!(matches!(e.feed("c,a"), Fed::Ask(p) if p.contains("(Small [s] | Large [l],")));
        assert_eq!(
            e.feed("large"),
            Fed::Done(json!({"action": "accept", "content": {
                "hero": "hero-2", "fish": ["fish-2", "fish-1"], "tags": ["c", "a"], "size": "l"}}))
        );
        // An empty answer takes the array default.
        let mut e = Elicitation::of(&ask(json!({"requestedSchema": {"type": "object", "properties": {
            "fish": {"type": "array", "items": {"type": "string", "enum": ["fish-1"]}, "default": ["fish-1"]}}}}))).unwrap();
        e.start();
        assert_eq!(
            e.feed(""),
            Fed::Done(json!({"action": "accept", "content": {"fish": ["fish-1"]}}))
        );
    }

    #[test]
    fn decline_cancel_and_urls() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let mut e = Elicitation::of(&ask(json!({"requestedSchema": schema}))).unwrap();
        e.start();
        assert_eq!(e.feed("!decline"), Fed::Done(json!({"action": "decline"})));
        let mut u =
            Elicitation::of(&ask(json!({"mode": "url", "url": "https://x.test/a"}))).unwrap();
        assert_eq!(u.url(), Some("https://x.test/a"));
        assert!(matches!(u.start(), Fed::Ask(p) if p.contains("https://x.test/a")));
        assert!(matches!(u.feed("maybe"), Fed::Again(_)));
        assert_eq!(u.feed("y"), Fed::Done(json!({"action": "accept"})));
        let mut u2 =
            Elicitation::of(&ask(json!({"mode": "url", "url": "https://x.test/a"}))).unwrap();
        assert_eq!(u2.feed("!cancel"), Fed::Done(json!({"action": "cancel"})));
    }
}
