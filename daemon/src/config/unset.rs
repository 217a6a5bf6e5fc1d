//! Variables a server entry uses that its session's environment does not set (new-user audit
//! M2): `"Authorization": "Bearer ${NOTES_TOKEN}"` in a shell without `NOTES_TOKEN` sends
//! `Bearer ` and the server answers 401 with nothing saying why. Each becomes a warning in
//! `config check`, `gemctl doctor` and `gemctl mcp list`.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::env::Env;

/// `${…}` (anything but braces) or `$NAME`, with the backslash of an escaped `\$` kept so
/// that it can be skipped.
static REFERENCE: LazyLock<Regex> =
    LazyLock::new(|| crate::literal::regex(r"(\\?)\$(?:\{([^{}]+)\}|([A-Za-z_][A-Za-z0-9_]*))"));

/// One reference to a variable the environment leaves unset or empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unset {
    /// The entry's field (`headers`, `env`, `args`, `url`, ...).
    pub field: &'static str,
    /// The key inside `env` or `headers`.
    pub key: Option<String>,
    /// The variable.
    pub var: String,
    /// `env` and `headers` values expand again at spawn, where a missing variable is
    /// nothing; elsewhere it stays as written.
    pub becomes_nothing: bool,
}

impl Unset {
    /// The warning, naming the server, where the variable is used and what it does.
    pub(crate) fn message(&self, server: &str) -> String {
        let at = match &self.key {
            Some(k) => format!("{} \"{k}\"", self.field),
            None => self.field.to_owned(),
        };
        let effect =
            if self.becomes_nothing { "it expands to nothing" } else { "it stays as written" };
        format!(
            "MCP server \"{server}\": {at} uses ${{{}}}, which this session's environment does not \
             set ({effect}); export it in the shell the client starts from, or give a default \
             (${{{}:-value}})",
            self.var, self.var
        )
    }
}

/// The unset variables `text` refers to without a default.
fn unset_in(text: &str, env: &Env) -> Vec<String> {
    let mut out = Vec::new();
    for c in REFERENCE.captures_iter(text) {
        if c.get(1).is_some_and(|m| !m.as_str().is_empty()) {
            continue;
        }
        let (name, has_default) = match (c.get(2), c.get(3)) {
            (Some(inner), _) => {
                let inner = inner.as_str();
                match inner.find([':', '-', '+']) {
                    Some(i) => (&inner[..i], true),
                    None => (inner, false),
                }
            }
            (None, Some(plain)) => (plain.as_str(), false),
            (None, None) => continue,
        };
        let missing = env.get(name).is_none_or(String::is_empty);
        if missing && !has_default && !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
    }
    out
}

/// Every unset variable an entry as written refers to, field by field.
pub(crate) fn in_entry(entry: &Value, env: &Env) -> Vec<Unset> {
    let mut out = Vec::new();
    let mut add = |field: &'static str, key: Option<&str>, text: &str, becomes_nothing: bool| {
        for var in unset_in(text, env) {
            out.push(Unset { field, key: key.map(str::to_owned), var, becomes_nothing });
        }
    };
    for field in ["command", "cwd", "url", "httpUrl"] {
        if let Some(text) = entry.get(field).and_then(Value::as_str) {
            add(field, None, text, false);
        }
    }
    for arg in entry.get("args").and_then(Value::as_array).into_iter().flatten() {
        if let Some(text) = arg.as_str() {
            add("args", None, text, false);
        }
    }
    for field in ["env", "headers"] {
        for (k, v) in entry.get(field).and_then(Value::as_object).into_iter().flatten() {
            if let Some(text) = v.as_str() {
                add(field, Some(k), text, true);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finds_what_the_environment_leaves_out() {
        let env: Env = [("HOME", "/h"), ("EMPTY", ""), ("REGION", "eu")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let entry = json!({
            "command": "$HOME/bin/srv",
            "args": ["--region", "$REGION", "--zone=${ZONE}", "${LEVEL:-info}"],
            "env": { "TOKEN": "${NOTES_TOKEN}", "PRICE": "\\$5", "E": "$EMPTY", "A": "${X:+on}" },
            "headers": { "Authorization": "Bearer ${NOTES_TOKEN}" },
            "url": "http://h/$PATH_PART"
        });
        let found = in_entry(&entry, &env);
        let got: Vec<(&str, Option<&str>, &str, bool)> = found
            .iter()
            .map(|u| (u.field, u.key.as_deref(), u.var.as_str(), u.becomes_nothing))
            .collect();
        assert_eq!(
            got,
            [
                ("url", None, "PATH_PART", false),
                ("args", None, "ZONE", false),
                ("env", Some("TOKEN"), "NOTES_TOKEN", true),
                ("env", Some("E"), "EMPTY", true),
                ("headers", Some("Authorization"), "NOTES_TOKEN", true),
            ]
        );
        let text = found[4].message("notes");
        assert!(text.contains("headers \"Authorization\" uses ${NOTES_TOKEN}"), "{text}");
        assert!(text.contains("it expands to nothing"), "{text}");
    }
}
