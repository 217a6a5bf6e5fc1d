//! `gemctl mcp add`'s flags, as `gemini mcp add` takes them (COMPAT §1.7), and the
//! `mcpServers` entry they make.

use anyhow::bail;
use clap::{Args, ValueEnum};
use geminid_protocol::config::WriteScope;
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScopeArg {
    User,
    Project,
}

impl ScopeArg {
    pub fn wire(self) -> WriteScope {
        match self {
            Self::User => WriteScope::User,
            Self::Project => WriteScope::Project,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TransportArg {
    Stdio,
    Sse,
    Http,
}

/// `gemctl mcp add`, with `gemini mcp add`'s flags.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// Settings file to edit
    #[arg(short, long, value_enum, default_value = "project")]
    pub scope: ScopeArg,
    /// Transport
    #[arg(short, long, visible_alias = "type", value_enum, default_value = "stdio")]
    transport: TransportArg,
    /// Environment variable for a stdio server (repeatable)
    #[arg(short, long = "env", value_name = "KEY=value")]
    env: Vec<String>,
    /// HTTP header for a network server (repeatable)
    #[arg(short = 'H', long = "header", value_name = "Key: value")]
    header: Vec<String>,
    /// Timeout in milliseconds
    #[arg(long)]
    timeout: Option<u64>,
    /// Trust the server (skip tool-call confirmations)
    #[arg(long)]
    trust: bool,
    /// Description
    #[arg(long)]
    description: Option<String>,
    /// Only these tools (comma-separated, or repeat the flag)
    #[arg(long = "include-tools", value_name = "TOOL[,TOOL]")]
    include_tools: Vec<String>,
    /// Not these tools (comma-separated, or repeat the flag)
    #[arg(long = "exclude-tools", value_name = "TOOL[,TOOL]")]
    exclude_tools: Vec<String>,
    /// Server name
    pub name: String,
    /// Command (stdio) or URL (sse, http)
    command_or_url: String,
    /// Arguments for the server command (put them after `--` if they start with `-`)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

/// A parsed `KEY=value` or `Key: value` flag; `None` when the value is empty (dropped, as
/// `gemini mcp add` does).
pub type Pair = Option<(String, String)>;

/// `KEY=value` → (key, value); the value is everything after the first `=`.
pub fn parse_env(raw: &str) -> anyhow::Result<Pair> {
    match raw.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => {
            Ok((!v.is_empty()).then(|| (k.trim().to_owned(), v.to_owned())))
        }
        _ => bail!("invalid --env {raw:?}: expected KEY=value"),
    }
}

/// `Key: value` → (key, value), split at the first `:` and trimmed.
pub fn parse_header(raw: &str) -> anyhow::Result<Pair> {
    match raw.split_once(':') {
        Some((k, v)) if !k.trim().is_empty() => {
            Ok((!v.trim().is_empty()).then(|| (k.trim().to_owned(), v.trim().to_owned())))
        }
        _ => bail!("invalid --header {raw:?}: expected \"Key: value\""),
    }
}

/// Parse repeated `KEY=value` / `Key: value` flags into a map, in the order given (a key
/// given twice keeps its first place and its last value, as Gemini CLI writes them); entries
/// the parser drops (an empty value) are left out, malformed ones are an error.
fn pairs(
    items: &[String],
    parse: fn(&str) -> anyhow::Result<Pair>,
) -> anyhow::Result<Map<String, Value>> {
    let mut out = Map::new();
    for item in items {
        if let Some((k, v)) = parse(item)? {
            out.insert(k, Value::String(v));
        }
    }
    Ok(out)
}

/// The `mcpServers` entry `gemini mcp add` would write.
pub fn server_object(a: &AddArgs) -> anyhow::Result<Value> {
    let mut o = Map::new();
    // A flag that would do nothing is a mistake worth saying (Gemini CLI drops it silently).
    if a.transport == TransportArg::Stdio && !a.header.is_empty() {
        bail!("--header only applies to network servers (-t sse or -t http), not stdio");
    }
    if a.transport != TransportArg::Stdio && !a.env.is_empty() {
        bail!("--env only applies to stdio servers; a network server gets headers (-H)");
    }
    if a.transport == TransportArg::Stdio {
        o.insert("command".into(), json!(a.command_or_url));
        // `name cmd arg -- --flag value`: the `--` is a separator, as in Gemini CLI (yargs'
        // `populate--`), not an argument. Only the first one: a second `--` is the server's.
        let mut args = a.args.clone();
        if let Some(i) = args.iter().position(|x| x == "--") {
            args.remove(i);
        }
        o.insert("args".into(), json!(args));
        let env = pairs(&a.env, parse_env)?;
        if !env.is_empty() {
            o.insert("env".into(), json!(env));
        }
    } else {
        if !a.args.is_empty() {
            bail!("server arguments only apply to stdio servers, not {:?}", a.transport);
        }
        o.insert("url".into(), json!(a.command_or_url));
        o.insert(
            "type".into(),
            json!(if a.transport == TransportArg::Sse { "sse" } else { "http" }),
        );
        let headers = pairs(&a.header, parse_header)?;
        if !headers.is_empty() {
            o.insert("headers".into(), json!(headers));
        }
    }
    if let Some(t) = a.timeout {
        o.insert("timeout".into(), json!(t));
    }
    if a.trust {
        o.insert("trust".into(), json!(true));
    }
    if let Some(d) = &a.description {
        o.insert("description".into(), json!(d));
    }
    // Gemini CLI's docs give these comma-separated (`--include-tools a,b`); repeating the
    // flag works too.
    let split = |v: &[String]| -> Vec<String> {
        v.iter()
            .flat_map(|x| x.split(','))
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (include, exclude) = (split(&a.include_tools), split(&a.exclude_tools));
    if !include.is_empty() {
        o.insert("includeTools".into(), json!(include));
    }
    if !exclude.is_empty() {
        o.insert("excludeTools".into(), json!(exclude));
    }
    Ok(Value::Object(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_and_header_parsing() {
        assert_eq!(parse_env("A=b=c").ok().flatten(), Some(("A".into(), "b=c".into())));
        assert_eq!(parse_env("A=").ok().flatten(), None);
        assert!(parse_env("NOEQUALS").is_err());
        assert!(parse_env("=v").is_err());
        assert_eq!(
            parse_header("Authorization: Bearer x:y").ok().flatten(),
            Some(("Authorization".into(), "Bearer x:y".into()))
        );
        assert!(parse_header("NoColon").is_err());
        assert!(parse_header(": v").is_err());
    }

    #[test]
    fn pairs_keep_the_order_given_as_gemini_cli_writes_them() {
        let items = ["FOO=bar", "BAZ=qux", "FOO=again"].map(str::to_owned);
        let got = pairs(&items, parse_env).unwrap_or_default();
        assert_eq!(Value::Object(got).to_string(), r#"{"FOO":"again","BAZ":"qux"}"#);
    }
}
