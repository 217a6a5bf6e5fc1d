//! The clients `gemctl clients` knows: where each keeps its MCP servers, in what form (each
//! form as the client's own documentation gives it), the gateway entry it gets, and how one of
//! its entries reads as a server of geminid's (`~/.gemini/geminid/servers.json`, Gemini CLI's
//! form).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::edit::Format;

/// A client, as `gemctl clients` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Gemini CLI (`~/.gemini/settings.json`; what `gemctl mcp import` does)
    Gemini,
    /// Antigravity CLI (`~/.gemini/config/mcp_config.json`)
    Agy,
    /// Claude Code (`~/.claude.json`, its user-scope `mcpServers`)
    ClaudeCode,
    /// Codex CLI (`~/.codex/config.toml`, `[mcp_servers.NAME]`)
    Codex,
    /// VS Code (the user profile's `mcp.json`, `servers`)
    Vscode,
    /// Cursor (`~/.cursor/mcp.json`)
    Cursor,
}

pub const ALL: [Kind; 6] =
    [Kind::Gemini, Kind::Agy, Kind::ClaudeCode, Kind::Codex, Kind::Vscode, Kind::Cursor];

/// A client's file: its user one, or one of a project folder's (`--project DIR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub kind: Kind,
    /// The project folder, canonical.
    pub project: Option<PathBuf>,
}

impl Place {
    pub fn user(kind: Kind) -> Self {
        Self { kind, project: None }
    }

    /// The client's file here.
    pub fn target(&self) -> Option<Target> {
        match &self.project {
            None => self.kind.target(),
            Some(dir) => self.kind.project_target(dir),
        }
    }

    /// Where the servers connect moves go: geminid's servers.json, the user's or the
    /// project's (`DIR/.gemini/geminid/servers.json`, read by geminid for a trusted folder).
    pub fn servers_json(&self) -> Option<PathBuf> {
        let dir = match &self.project {
            None => gemini_dir()?,
            Some(dir) => dir.join(".gemini"),
        };
        Some(dir.join("geminid").join("servers.json"))
    }

    /// The command's words for this place, for messages: `cursor` or `cursor --project DIR`.
    pub fn words(&self) -> String {
        match &self.project {
            None => self.kind.word().to_owned(),
            Some(dir) => format!("{} --project {}", self.kind.word(), dir.display()),
        }
    }
}

/// Where a client keeps its servers.
#[derive(Debug, Clone)]
pub struct Target {
    pub path: PathBuf,
    pub format: Format,
    /// The key (JSON) or table (TOML) the servers are under.
    pub key: &'static str,
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `~/.gemini` as geminid finds it (`GEMINI_CLI_HOME`, else `HOME`).
pub fn gemini_dir() -> Option<PathBuf> {
    let set = std::env::var_os("GEMINI_CLI_HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    Some(set.or_else(home)?.join(".gemini"))
}

fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

impl Kind {
    /// The name `gemctl clients` takes.
    pub fn word(self) -> &'static str {
        match self {
            Self::Gemini => "gemini",
            Self::Agy => "agy",
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
            Self::Vscode => "vscode",
            Self::Cursor => "cursor",
        }
    }

    /// The client's own name.
    pub fn label(self) -> &'static str {
        match self {
            Self::Gemini => "Gemini CLI",
            Self::Agy => "Antigravity CLI",
            Self::ClaudeCode => "Claude Code",
            Self::Codex => "Codex CLI",
            Self::Vscode => "VS Code",
            Self::Cursor => "Cursor",
        }
    }

    /// The documentation of the file's format this follows.
    pub fn doc(self) -> &'static str {
        match self {
            Self::Gemini => "https://geminicli.com/docs/tools/mcp-server/",
            Self::Agy => "Antigravity CLI's migration docs (README, \"Antigravity CLI (agy)\")",
            Self::ClaudeCode => "https://code.claude.com/docs/en/mcp (scopes: user)",
            Self::Codex => "https://developers.openai.com/codex/mcp (config.toml, mcp_servers)",
            Self::Vscode => {
                "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration"
            }
            Self::Cursor => "https://cursor.com/docs/mcp",
        }
    }

    /// The program whose presence on `PATH` says the client is installed.
    fn program(self) -> &'static str {
        match self {
            Self::Gemini => "gemini",
            Self::Agy => "agy",
            Self::ClaudeCode => "claude",
            Self::Codex => "codex",
            Self::Vscode => "code",
            Self::Cursor => "cursor",
        }
    }

    /// The client's file.
    pub fn target(self) -> Option<Target> {
        let (path, format, key) = match self {
            Self::Gemini => (gemini_dir()?.join("settings.json"), Format::Json, "mcpServers"),
            Self::Agy => {
                (gemini_dir()?.join("config").join("mcp_config.json"), Format::Json, "mcpServers")
            }
            Self::ClaudeCode => {
                let dir = env_dir("CLAUDE_CONFIG_DIR").or_else(home)?;
                (dir.join(".claude.json"), Format::Json, "mcpServers")
            }
            Self::Codex => {
                let dir = env_dir("CODEX_HOME").or_else(|| Some(home()?.join(".codex")))?;
                (dir.join("config.toml"), Format::Toml, "mcp_servers")
            }
            Self::Vscode => (vscode_user_dir()?.join("mcp.json"), Format::Json, "servers"),
            Self::Cursor => (home()?.join(".cursor").join("mcp.json"), Format::Json, "mcpServers"),
        };
        Some(Target { path, format, key })
    }

    /// The client's file in a project folder, as its documentation names it; `None` for
    /// Gemini CLI, whose project settings `gemctl mcp import` does not move.
    pub fn project_target(self, dir: &Path) -> Option<Target> {
        let (path, format, key) = match self {
            Self::Gemini => return None,
            Self::Agy => (dir.join(".agents").join("mcp_config.json"), Format::Json, "mcpServers"),
            Self::ClaudeCode => (dir.join(".mcp.json"), Format::Json, "mcpServers"),
            Self::Codex => (dir.join(".codex").join("config.toml"), Format::Toml, "mcp_servers"),
            Self::Vscode => (dir.join(".vscode").join("mcp.json"), Format::Json, "servers"),
            Self::Cursor => (dir.join(".cursor").join("mcp.json"), Format::Json, "mcpServers"),
        };
        Some(Target { path, format, key })
    }

    /// The documentation of the project file's format this follows.
    pub fn project_doc(self) -> &'static str {
        match self {
            Self::Gemini => "",
            Self::Agy => "Antigravity CLI's migration docs (.agents/mcp_config.json)",
            Self::ClaudeCode => "https://code.claude.com/docs/en/mcp (scopes: project, .mcp.json)",
            Self::Codex => {
                "https://developers.openai.com/codex/config-basic (.codex/config.toml, trusted \
                 projects only)"
            }
            Self::Vscode => {
                "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration \
                 (.vscode/mcp.json)"
            }
            Self::Cursor => "https://cursor.com/docs/mcp (project: .cursor/mcp.json)",
        }
    }

    /// Whether the client is installed here: its file or its folder exists, or its program is
    /// on `PATH`.
    pub fn installed(self, target: &Target) -> bool {
        let folder = match self {
            // Claude Code's file lies in the home folder itself.
            Self::ClaudeCode => None,
            _ => target.path.parent(),
        };
        target.path.exists()
            || folder.is_some_and(std::path::Path::is_dir)
            || on_path(self.program())
    }

    /// The entry that gives the client geminid's server `name` through the gateway, in the
    /// client's form. Gemini CLI's is written by `mcp import` (the daemon), not here.
    pub fn gateway_entry(self, gemctl: &str, name: &str, project: Option<&Path>) -> Value {
        let mut args = json!(["mcp", "serve", "--server", name, "--confirm", "client"]);
        if let (Some(dir), Some(a)) = (project, args.as_array_mut()) {
            // The project's session, wherever the client starts the entry.
            a.extend([json!("--workspace"), json!(dir.display().to_string())]);
        }
        match self {
            Self::ClaudeCode | Self::Vscode => {
                json!({"type": "stdio", "command": gemctl, "args": args})
            }
            _ => json!({"command": gemctl, "args": args}),
        }
    }

    /// One of the client's entries as a server of geminid's (Gemini CLI's form), or why it
    /// stays with the client.
    pub fn as_geminid(self, entry: &Value) -> Result<Value, String> {
        let Some(e) = entry.as_object() else { return Err("it is not an object".into()) };
        let off = match self {
            Self::Agy => e.get("disabled") == Some(&json!(true)),
            Self::Codex => e.get("enabled") == Some(&json!(false)),
            _ => e.get("disabled") == Some(&json!(true)),
        };
        if off {
            return Err(format!("{} has it switched off", self.label()));
        }
        let mut out = Map::new();
        let text = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
        let kind = text("type").unwrap_or_default();
        let url = text(if self == Self::Agy { "serverUrl" } else { "url" }).or_else(|| text("url"));
        if let Some(command) = text("command") {
            out.insert("command".into(), json!(command));
            for k in ["args", "env", "cwd"] {
                if let Some(v) = e.get(k) {
                    out.insert(k.into(), v.clone());
                }
            }
        } else if let Some(url) = url {
            out.insert("url".into(), json!(url));
            match (self, kind.as_str()) {
                (_, "sse") => {
                    out.insert("type".into(), json!("sse"));
                }
                (_, "http" | "streamable-http") | (Self::Codex | Self::ClaudeCode, _) => {
                    out.insert("type".into(), json!("http"));
                }
                _ => {}
            }
            let headers = if self == Self::Codex { "http_headers" } else { "headers" };
            let mut h = e.get(headers).and_then(Value::as_object).cloned().unwrap_or_default();
            if let Some(var) = text("bearer_token_env_var") {
                h.insert("Authorization".into(), json!(format!("Bearer ${{{var}}}")));
            }
            if !h.is_empty() {
                out.insert("headers".into(), Value::Object(h));
            }
        } else {
            return Err("it has neither a command nor a URL".into());
        }
        if self == Self::Agy
            && let Some(tools) = e.get("disabledTools")
        {
            out.insert("excludeTools".into(), tools.clone());
        }
        let mut out = Value::Object(out);
        variables(self, &mut out)?;
        Ok(out)
    }
}

/// The client's `${...}` references in geminid's form (`${NAME}`), or why one cannot be: a
/// variable only the client knows (VS Code's `${input:...}`, `${workspaceFolder}`).
fn variables(kind: Kind, v: &mut Value) -> Result<(), String> {
    match v {
        Value::String(s) => {
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(at) = rest.find("${") {
                let Some(end) = rest[at..].find('}') else { break };
                let inner = &rest[at + 2..at + end];
                out.push_str(&rest[..at]);
                match inner.strip_prefix("env:") {
                    Some(name) if kind != Kind::Codex => out.push_str(&format!("${{{name}}}")),
                    _ if inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                        out.push_str(&rest[at..at + end + 1])
                    }
                    _ if inner == "userHome" => {
                        out.push_str(&home().map(|h| h.display().to_string()).unwrap_or_default())
                    }
                    _ => {
                        return Err(format!(
                            "it uses ${{{inner}}}, which only {} fills in",
                            kind.label()
                        ));
                    }
                }
                rest = &rest[at + end + 1..];
            }
            out.push_str(rest);
            *s = out;
            Ok(())
        }
        Value::Array(a) => a.iter_mut().try_for_each(|v| variables(kind, v)),
        Value::Object(m) => m.values_mut().try_for_each(|v| variables(kind, v)),
        _ => Ok(()),
    }
}

/// Whether an entry is geminid's gateway (`gemctl mcp serve ...`), as the daemon tells them.
pub fn is_gateway(entry: &Value) -> bool {
    let gemctl = entry
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(|c| std::path::Path::new(c).file_stem().is_some_and(|n| n == "gemctl"));
    let args: Vec<&str> = entry
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    gemctl && args.windows(2).any(|w| w == ["mcp", "serve"])
}

fn on_path(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join(program).is_file())
}

/// VS Code's user profile folder.
fn vscode_user_dir() -> Option<PathBuf> {
    if cfg!(windows) {
        return Some(env_dir("APPDATA")?.join("Code").join("User"));
    }
    if cfg!(target_os = "macos") {
        return Some(home()?.join("Library/Application Support/Code/User"));
    }
    let config = env_dir("XDG_CONFIG_HOME").or_else(|| Some(home()?.join(".config")))?;
    Some(config.join("Code").join("User"))
}
