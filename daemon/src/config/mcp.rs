//! One `mcpServers` entry (COMPAT §1.1), typed and validated. Unknown fields are warnings
//! (the entry still applies). A string where a number or boolean belongs is coerced, as
//! Gemini CLI's schema does after `$VAR` expansion (`"timeout": "${MCP_TIMEOUT:-30000}"`); an
//! optional scalar (`timeout`, `trust`, `description`) of the wrong type is a warning and is
//! left out, keeping the entry. A wrong type anywhere else (what to launch, its environment,
//! which tools) or a missing transport is an error: the entry is not started. Messages name the
//! server and the field; the caller adds file and position.

use std::collections::BTreeMap;

use geminid_protocol::config::{Scope, Severity};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `type` of a network server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TransportType {
    /// Legacy HTTP+SSE.
    Sse,
    /// Streamable HTTP.
    Http,
    /// Allowed by the schema; means nothing with `url`.
    Stdio,
}

/// `authProviderType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AuthProviderType {
    /// OAuth with discovery (default).
    DynamicDiscovery,
    /// Google application-default credentials.
    GoogleCredentials,
    /// Service-account impersonation.
    ServiceAccountImpersonation,
}

/// An MCP server's configuration as Gemini CLI defines it. Its `Debug` shows the names of
/// `env`, `headers` and `oauth` entries but not their values, and URLs without user
/// information: an entry may hold a token as written.
#[derive(Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub(crate) struct McpServerConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<String>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub transport_type: Option<TransportType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<serde_json::Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_provider_type: Option<AuthProviderType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_audience: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_service_account: Option<String>,
    /// geminid's own: how long the server stays running once no session uses it. Gemini CLI
    /// refuses the key in its files, so it belongs in `~/.gemini/geminid/servers.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_warm: Option<geminid_protocol::mcp::KeepWarm>,
    /// geminid's own: whether its tool definitions are pinned, and a change held
    /// (`enforce`), said (`warn`) or neither (`off`). Also only in `servers.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinning: Option<geminid_protocol::pins::PinMode>,
    /// geminid's own: whether what a local server runs (the npm package's version and
    /// integrity, the executable's SHA-256) is recorded on first start, and a different one
    /// held (`enforce`), said (`warn`) or neither (`off`). Also only in `servers.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_pinning: Option<geminid_protocol::pins::PinMode>,
}

impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn names<'a, V>(
            map: Option<impl IntoIterator<Item = (&'a String, V)>>,
        ) -> Option<BTreeMap<&'a str, crate::secrets::Secret<()>>> {
            map.map(|m| {
                m.into_iter().map(|(k, _)| (k.as_str(), crate::secrets::Secret::new(()))).collect()
            })
        }
        let url =
            |u: &Option<String>| u.as_deref().map(|u| super::env::redact_urls(u).into_owned());
        f.debug_struct("McpServerConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &names(self.env.as_ref()))
            .field("cwd", &self.cwd)
            .field("url", &url(&self.url))
            .field("http_url", &url(&self.http_url))
            .field("headers", &names(self.headers.as_ref()))
            .field("tcp", &self.tcp)
            .field("transport_type", &self.transport_type)
            .field("timeout", &self.timeout)
            .field("trust", &self.trust)
            .field("description", &self.description)
            .field("include_tools", &self.include_tools)
            .field("exclude_tools", &self.exclude_tools)
            .field("extension", &self.extension)
            .field("oauth", &names(self.oauth.as_ref()))
            .field("auth_provider_type", &self.auth_provider_type)
            .field("target_audience", &self.target_audience)
            .field("target_service_account", &self.target_service_account)
            .field("keep_warm", &self.keep_warm)
            .field("pinning", &self.pinning)
            .field("artifact_pinning", &self.artifact_pinning)
            .finish()
    }
}

const KNOWN_FIELDS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "httpUrl",
    "headers",
    "tcp",
    "type",
    "timeout",
    "trust",
    "description",
    "includeTools",
    "excludeTools",
    "extension",
    "oauth",
    "authProviderType",
    "targetAudience",
    "targetServiceAccount",
    "keepWarm",
    "pinning",
    "artifactPinning",
];

/// A problem with one entry: severity, the field it is about (if one), the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// Warning or error.
    pub severity: Severity,
    /// The field, when the problem is about one.
    pub field: Option<String>,
    /// The message.
    pub message: String,
}

impl Problem {
    /// A warning about `field`.
    pub(crate) fn warning(field: &str, message: String) -> Self {
        Self { severity: Severity::Warning, field: Some(field.to_owned()), message }
    }
}

impl McpServerConfig {
    /// The transport Gemini CLI would pick: `stdio`, `sse` or `http`.
    pub(crate) fn transport(&self) -> &'static str {
        if self.http_url.is_some() {
            "http"
        } else if self.url.is_some() {
            match self.transport_type {
                Some(TransportType::Sse) => "sse",
                _ => "http",
            }
        } else if self.command.is_some() {
            "stdio"
        } else {
            "none"
        }
    }
}

/// Optional scalar fields: one of the wrong type is left out with a warning.
const OPTIONAL_SCALARS: &[&str] = &["timeout", "trust", "description", "keepWarm"];

/// A string in a number or boolean field becomes that type when it reads as one (what
/// Gemini CLI's schema coercion does to an expanded `"${MCP_TIMEOUT:-30000}"`); an integral
/// float in `timeout` becomes an integer.
fn coerce_scalars(value: &mut Value) {
    let Some(map) = value.as_object_mut() else { return };
    if let Some(t) = map.get_mut("timeout") {
        let n = match &*t {
            Value::String(s) => s.trim().parse::<f64>().ok(),
            Value::Number(n) if !n.is_u64() => n.as_f64(),
            _ => None,
        };
        if let Some(n) = n.filter(|n| n.fract() == 0.0 && *n >= 0.0 && *n <= u64::MAX as f64) {
            *t = Value::from(n as u64);
        }
    }
    if let Some(b) = map.get_mut("trust")
        && let Some(v) = b.as_str().and_then(|s| s.trim().parse::<bool>().ok())
    {
        *b = Value::Bool(v);
    }
}

/// A server entry as shown: `env` and `headers` values that look secret are redacted, and so
/// is the user information of its URLs.
pub(crate) fn redacted(value: &Value) -> Value {
    let mut v = value.clone();
    for field in ["url", "httpUrl"] {
        if let Some(Value::String(u)) = v.get_mut(field) {
            *u = super::env::redact_urls(u).into_owned();
        }
    }
    for field in ["env", "headers"] {
        if let Some(Value::Object(map)) = v.get_mut(field) {
            for (k, val) in map.iter_mut() {
                if let Value::String(s) = val {
                    *s = super::env::display_value(k, s);
                }
            }
        }
    }
    v
}

/// geminid's own fields in a file Gemini CLI reads: it refuses the whole file for them
/// ("Unrecognized key"), so they are a warning there (geminid still applies them).
pub(crate) fn misplaced(name: &str, scope: Scope, layer: Option<&Value>) -> Option<Problem> {
    let entry = layer?.get("mcpServers")?.get(name)?;
    let key =
        ["keepWarm", "pinning", "artifactPinning"].into_iter().find(|k| entry.get(k).is_some())?;
    // Antigravity CLI's files tolerate fields they do not know.
    let gemini_reads =
        !matches!(scope, Scope::Geminid | Scope::Antigravity | Scope::AntigravityWorkspace);
    gemini_reads.then(|| Problem {
        severity: Severity::Warning,
        field: Some(key.into()),
        message: format!(
            "MCP server \"{name}\": \"{key}\" is geminid's own field, and Gemini CLI reports \
             its settings file as invalid for it (\"Unrecognized key\"); keep the server in \
             ~/.gemini/geminid/servers.json (`gemctl mcp import` moves it there)"
        ),
    })
}

/// Parse and validate one entry.
pub(crate) fn parse_server(name: &str, value: &Value) -> (Option<McpServerConfig>, Vec<Problem>) {
    let mut problems = Vec::new();
    let Value::Object(map) = value else {
        let message = format!("MCP server \"{name}\" must be an object");
        return (None, vec![Problem { severity: Severity::Error, field: None, message }]);
    };
    // A misspelt field is answered with the one likely meant (new-user audit M7); one that
    // meant what starts the server is named again in the error that it has none.
    let mut meant_start = None;
    for key in map.keys().filter(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
        let near = geminid_protocol::suggest::closest(key, KNOWN_FIELDS.iter().copied());
        if let Some(start) = near.filter(|n| ["command", "url", "httpUrl"].contains(n)) {
            meant_start.get_or_insert(format!(" (\"{key}\" is likely \"{start}\": rename it)"));
        }
        let hint = near.map(|n| format!("; did you mean \"{n}\"?")).unwrap_or_default();
        problems.push(Problem {
            severity: Severity::Warning,
            field: Some(key.clone()),
            message: format!("MCP server \"{name}\": unknown field \"{key}\" (ignored{hint})"),
        });
    }
    let mut value = value.clone();
    coerce_scalars(&mut value);
    let config: McpServerConfig = loop {
        match serde_path_to_error::deserialize::<_, McpServerConfig>(&value) {
            Ok(c) => break c,
            Err(e) => {
                let path = e.path().to_string();
                let field = path.split(['.', '[']).next().unwrap_or_default().to_owned();
                let droppable = OPTIONAL_SCALARS.contains(&field.as_str());
                let message = format!(
                    "MCP server \"{name}\": field \"{path}\": {}{}",
                    e.inner(),
                    if droppable { " (ignored)" } else { "" }
                );
                let severity = if droppable { Severity::Warning } else { Severity::Error };
                problems.push(Problem { severity, field: Some(field.clone()), message });
                let dropped =
                    droppable && value.as_object_mut().and_then(|m| m.remove(&field)).is_some();
                if !dropped {
                    return (None, problems);
                }
            }
        }
    };
    if config.command.is_none() && config.url.is_none() && config.http_url.is_none() {
        problems.push(Problem {
            severity: Severity::Error,
            field: None,
            message: format!(
                "MCP server \"{name}\" has none of \"command\", \"url\" or \"httpUrl\"; add one \
                 so it can be started{}",
                meant_start.unwrap_or_default()
            ),
        });
        return (None, problems);
    }
    for (field, list) in
        [("includeTools", &config.include_tools), ("excludeTools", &config.exclude_tools)]
    {
        for tool in list.iter().flatten().filter(|t| t.contains(',')) {
            let parts: Vec<&str> = tool.split(',').map(str::trim).collect();
            problems.push(Problem {
                severity: Severity::Warning,
                field: Some(field.into()),
                message: format!(
                    "MCP server \"{name}\": \"{field}\" entry \"{tool}\" names no tool (tool \
                     names have no commas); for several tools give one entry each: {parts:?}"
                ),
            });
        }
    }
    if config.url.is_some() && config.http_url.is_some() {
        problems.push(Problem {
            severity: Severity::Warning,
            field: Some("httpUrl".into()),
            message: format!(
                "MCP server \"{name}\" sets both \"url\" and \"httpUrl\"; \"httpUrl\" is used"
            ),
        });
    }
    (Some(config), problems)
}

/// `mcp.serverCommand` split into words as shell-quote's `parse(cmd, process.env)` does for
/// Gemini CLI: blanks separate words; `'...'` is literal; `"..."` and bare text expand `$VAR`
/// and `${VAR}` (missing: empty) and take `\x` as `x`. What shell-quote returns as something
/// other than a word (an operator such as `&&`, `|`, `;`, `>`, a glob, a `#` comment) is an
/// error, as it is in the reference.
pub(crate) fn server_command(line: &str, env: &super::env::Env) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let var = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| -> String {
        let name: String = if chars.peek() == Some(&'{') {
            chars.next();
            let n: String = chars.by_ref().take_while(|c| *c != '}').collect();
            n
        } else {
            let mut n = String::new();
            while let Some(c) =
                chars.peek().copied().filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                n.push(c);
                chars.next();
            }
            if n.is_empty() {
                return "$".into();
            }
            n
        };
        env.get(&name).cloned().unwrap_or_default()
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("an unterminated ' quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => word.push(c),
                            None => return Err("an unterminated \" quote".into()),
                        },
                        Some('$') => word.push_str(&var(&mut chars)),
                        Some(c) => word.push(c),
                        None => return Err("an unterminated \" quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            '$' => {
                in_word = true;
                word.push_str(&var(&mut chars));
            }
            '#' => return Err("a # comment; quote a # that belongs to an argument".into()),
            '&' | '|' | ';' | '<' | '>' | '(' | ')' => {
                return Err(format!(
                    "the shell operator {c:?}; give one command and its arguments"
                ));
            }
            '*' | '?' => return Err(format!("the glob {c:?}; quote it")),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

impl McpServerConfig {
    /// Whether this entry is geminid's own gateway: `gemctl mcp serve ...` (a client's entry
    /// for the daemon, in a file the daemon reads too).
    pub(crate) fn is_gateway(&self) -> bool {
        let is_gemctl = self
            .command
            .as_deref()
            .is_some_and(|c| std::path::Path::new(c).file_stem().is_some_and(|n| n == "gemctl"));
        let args = self.args.as_deref().unwrap_or_default();
        is_gemctl && args.windows(2).any(|w| w[0] == "mcp" && w[1] == "serve")
    }
}

#[cfg(test)]
mod tests;
