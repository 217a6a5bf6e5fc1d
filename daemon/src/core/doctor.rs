//! `daemon/doctor`: what a session needs, checked now, each finding with its fix. Nothing is
//! started: servers are looked at as they are, remote ones only reached with a TCP connect.

use std::path::Path;
use std::time::Duration;

use geminid_protocol::config::Severity;
use geminid_protocol::daemon::{DoctorResult, Finding, FindingStatus};
use geminid_protocol::mcp::ServerState;

use super::Core;
use crate::session::SessionError;

/// How long a remote server's host gets to accept a TCP connection.
const REACH_WITHIN: Duration = Duration::from_secs(3);

pub(super) fn finding(
    check: &str,
    status: FindingStatus,
    message: String,
    fix: Option<String>,
) -> Finding {
    Finding { check: check.to_owned(), status, message, fix }
}

impl Core {
    /// Check the session's setup.
    pub(crate) async fn doctor(&self, session: &str) -> Result<DoctorResult, SessionError> {
        let config = self.config.effective(session)?;
        let env = self.config.session_env(session);
        let mut out = Vec::new();
        use FindingStatus::{Error, Ok, Warning};

        let backend = self.secrets.backend();
        out.push(match backend {
            crate::secrets::Backend::Keyring => {
                finding("secrets", Ok, format!("secrets are kept in {backend}"), None)
            }
            crate::secrets::Backend::File { why, .. } => finding(
                "secrets",
                Warning,
                format!("secrets are kept in {backend}: {why}"),
                Some("a running Secret Service (GNOME Keyring, KWallet) keeps them in the OS keyring; the 0600 file is only the user's".to_owned()),
            ),
        });

        let c = &config.public;
        out.push(if c.trust.trusted {
            finding("trust", Ok, format!("{} is trusted ({})", c.workspace, c.trust.reason), None)
        } else {
            finding(
                "trust",
                Warning,
                format!(
                    "{} is not trusted ({}): its settings, servers, hooks, commands and skills \
                     are not loaded",
                    c.workspace, c.trust.reason
                ),
                Some(format!("gemctl trust {}", c.workspace)),
            )
        });

        out.extend(c.diagnostics.iter().map(|d| problem("config", d)));
        if c.diagnostics.is_empty() {
            out.push(finding(
                "config",
                Ok,
                "the settings files load without problems".to_owned(),
                None,
            ));
        }
        // A rule not loaded decides calls otherwise than its file says: said as settings are.
        let params =
            geminid_protocol::policy::PolicyListParams { session: session.to_owned(), tier: None };
        let mut policy = self.policy.list(params)?.diagnostics;
        // What the settings check said already (a workspace's policyPaths, ignored).
        policy.retain(|d| !c.diagnostics.contains(d));
        out.extend(policy.iter().map(|d| problem("policy", d)));
        if policy.is_empty() {
            out.push(finding(
                "policy",
                Ok,
                "the policy files load without problems".to_owned(),
                None,
            ));
        }

        let statuses = self.servers.list(session)?.servers;
        for (name, spec) in &config.servers {
            if spec.blocked.is_some() {
                continue;
            }
            let cfg = &spec.config;
            match cfg.transport() {
                "stdio" => {
                    let Some(command) = &cfg.command else { continue };
                    let path = cfg.env.as_ref().and_then(|e| e.get("PATH")).or(env.get("PATH"));
                    let cwd = cfg.cwd.as_deref().map(Path::new).unwrap_or(Path::new(&c.workspace));
                    out.push(match crate::mcp::spec::find_program(command, path, Some(cwd)) {
                        Some(found) => finding(
                            "command",
                            Ok,
                            format!("server '{name}' runs {}", found.display()),
                            None,
                        ),
                        None => {
                            let path = path.map(String::as_str);
                            let (message, fix) = missing_program(name, command, cwd, path);
                            finding("command", Error, message, Some(fix))
                        }
                    });
                }
                "http" | "sse" => {
                    let url = cfg.http_url.as_deref().or(cfg.url.as_deref()).unwrap_or_default();
                    out.push(reach(name, url).await);
                }
                _ => {}
            }
        }
        for s in &statuses {
            let name = &s.name;
            match s.state {
                ServerState::NeedsAuth => out.push(finding(
                    "auth",
                    Warning,
                    format!("server '{name}' needs you to sign in"),
                    Some(format!("gemctl mcp auth {name}")),
                )),
                ServerState::CrashLoop => out.push(finding(
                    "server",
                    Error,
                    format!(
                        "server '{name}' failed too often in a row: {}",
                        s.last_error.as_deref().unwrap_or("no error recorded")
                    ),
                    Some(format!("gemctl mcp logs {name}, fix it, then gemctl mcp restart {name}")),
                )),
                _ => {}
            }
        }
        out.extend(gateway_hooks(&self.config.paths().user));
        out.push(self.warm_finding());
        out.extend(telemetry().await);
        std::result::Result::Ok(DoctorResult { findings: out })
    }
}

/// OpenTelemetry export, when the settings turn it on: settings it cannot use, and whether the
/// collector accepts a connection (nothing is sent) and took the last export.
async fn telemetry() -> Vec<Finding> {
    use FindingStatus::{Ok, Warning};
    let Some((s, failing)) = crate::telemetry::resolved() else { return Vec::new() };
    let fix = || {
        Some("fix the `telemetry` object in ~/.gemini/settings.json, or the GEMINI_TELEMETRY_* / OTEL_* variables of the daemon, then gemctl daemon restart".to_owned())
    };
    let mut out: Vec<Finding> =
        s.problems.iter().map(|p| finding("telemetry", Warning, p.clone(), fix())).collect();
    if !s.enabled {
        return out;
    }
    if let Some(why) = crate::telemetry::unusable(s) {
        out.push(finding("telemetry", Warning, why, fix()));
        return out;
    }
    let shown = crate::config::env::redact_urls(&s.traces_url).into_owned();
    let target = reqwest::Url::parse(&s.traces_url).ok().and_then(|u| {
        let port = u.port_or_known_default()?;
        Some((u.host_str()?.trim_matches(['[', ']']).to_owned(), port))
    });
    let reached = match &target {
        Some((host, port)) => {
            let connect = tokio::net::TcpStream::connect((host.as_str(), *port));
            matches!(
                tokio::time::timeout(REACH_WITHIN, connect).await,
                std::result::Result::Ok(std::result::Result::Ok(_))
            )
        }
        None => false,
    };
    out.push(if !reached {
        finding(
            "telemetry",
            Warning,
            format!("the OpenTelemetry collector at {shown} cannot be reached: spans and metrics are dropped (calls are not slowed)"),
            Some("start the collector, or correct telemetry.otlpEndpoint".to_owned()),
        )
    } else if failing == Some(true) {
        finding(
            "telemetry",
            Warning,
            format!("the OpenTelemetry collector at {shown} answers, but refused or failed the last export"),
            Some("check that it takes OTLP/HTTP (protobuf) at that path; the daemon's log says more".to_owned()),
        )
    } else {
        finding("telemetry", Ok, format!("spans and metrics are exported to {shown}"), None)
    });
    out
}

/// Who runs the hooks of calls through Gemini CLI's gateway entries (`gemctl mcp serve
/// --confirm client`, as `gemctl mcp import` writes them): Gemini CLI, with `--hooks client`;
/// an entry an earlier import wrote without it has each of its calls' hooks run twice.
fn gateway_hooks(user: &Path) -> Option<Finding> {
    let text = std::fs::read_to_string(user).ok()?;
    let settings = crate::config::files::parse_object(&text).ok()?;
    let (mut by_client, mut twice) = (Vec::new(), Vec::new());
    for (name, entry) in settings.get("mcpServers")?.as_object()? {
        let args: Vec<&str> = entry
            .get("args")
            .and_then(serde_json::Value::as_array)
            .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default();
        let has = |flag: &str, value: &str| args.windows(2).any(|w| w == [flag, value]);
        if !args.starts_with(&["mcp", "serve"]) || !has("--confirm", "client") {
            continue;
        }
        if has("--hooks", "client") { &mut by_client } else { &mut twice }.push(name.clone());
    }
    use FindingStatus::{Ok, Warning};
    if !twice.is_empty() {
        let message = format!(
            "Gemini CLI's entries {} (from an earlier `gemctl mcp import`) have each call's hooks \
             run twice: by Gemini CLI and again by geminid",
            twice.join(", ")
        );
        let fix = "gemctl mcp import (it rewrites them with --hooks client)".to_owned();
        return Some(finding("hooks", Warning, message, Some(fix)));
    }
    (!by_client.is_empty()).then(|| {
        let message = format!(
            "Gemini CLI runs the hooks of its settings and extensions for calls through {}; \
             geminid runs only those of its own servers.json",
            by_client.join(", ")
        );
        finding("hooks", Ok, message, None)
    })
}

/// A problem in an input file, where it is and the file to edit (the message says the fix).
fn problem(check: &str, d: &geminid_protocol::common::Diagnostic) -> Finding {
    let status =
        if d.severity == Severity::Error { FindingStatus::Error } else { FindingStatus::Warning };
    let at = match (d.line, d.column) {
        (Some(l), Some(col)) => format!("{}:{l}:{col}", d.file),
        (Some(l), None) => format!("{}:{l}", d.file),
        _ => d.file.clone(),
    };
    // A workspace's policy files not accepted: the fix is to review and accept them.
    let fix = if d.message.contains("gemctl policy accept") {
        "`gemctl policy review` shows their rules and the command that accepts them as shown \
         (`gemctl policy accept --digest …`)"
            .to_owned()
    } else {
        format!("edit {}", d.file)
    };
    finding(check, status, format!("{at}: {}", d.message), Some(fix))
}

/// Whether a remote server's host accepts a connection (nothing is sent).
async fn reach(name: &str, url: &str) -> Finding {
    let parsed = reqwest::Url::parse(url);
    let target = parsed.as_ref().ok().and_then(|u| {
        let port = u.port_or_known_default()?;
        Some((u.host_str()?.trim_matches(['[', ']']).to_owned(), port))
    });
    let shown = crate::config::env::redact_urls(url).into_owned();
    let Some((host, port)) = target else {
        return finding(
            "remote",
            FindingStatus::Error,
            format!("server '{name}' has a URL that does not parse: {shown}"),
            Some("fix its `url` or `httpUrl` in the settings".to_owned()),
        );
    };
    let connect = tokio::net::TcpStream::connect((host.as_str(), port));
    match tokio::time::timeout(REACH_WITHIN, connect).await {
        Ok(Ok(_)) => {
            finding("remote", FindingStatus::Ok, format!("server '{name}' ({shown}) is reachable"), None)
        }
        Ok(Err(e)) => finding(
            "remote",
            FindingStatus::Error,
            format!("server '{name}' ({shown}) cannot be reached: {e}"),
            Some("check the URL, the network and any proxy; `gemctl mcp logs` shows the last attempt".to_owned()),
        ),
        Err(_) => finding(
            "remote",
            FindingStatus::Error,
            format!("server '{name}' ({shown}) did not answer within {} s", REACH_WITHIN.as_secs()),
            Some("check the URL, the network and any proxy".to_owned()),
        ),
    }
}

/// What is said of a stdio server's program that is not found, and the fix. A command given
/// as a path (absolute, or relative to the server's directory) is looked for there alone, so
/// the PATH is not what to fix (new-user audit P7).
fn missing_program(name: &str, command: &str, cwd: &Path, path: Option<&str>) -> (String, String) {
    let named = Path::new(command);
    let then = format!("then `gemctl mcp restart {name}`");
    if !(named.is_absolute() || named.components().count() > 1) {
        return (
            format!(
                "server '{name}' runs `{command}`, which is not on the PATH its session gives it{}",
                near_on_path(command, path)
            ),
            format!("install {command} (or give its full path in the entry's `command`), {then}"),
        );
    }
    let at = cwd.join(named);
    let said = if named.is_absolute() {
        format!("server '{name}' runs `{command}`")
    } else {
        format!("server '{name}' runs `{command}` ({})", at.display())
    };
    if at.exists() {
        let message = format!("{said}, which is not an executable file");
        let fix = format!(
            "make it executable (`chmod +x {}`) or correct the path in the entry's `command`, \
             {then}",
            at.display()
        );
        return (message, fix);
    }
    let message = format!("{said}, which does not exist");
    let fix = format!(
        "{} does not exist: install it there or correct the path in the entry's `command`, {then}",
        at.display()
    );
    (message, fix)
}

/// ` (did you mean `X`?)` for a program on `path` whose name is close to `command`'s.
fn near_on_path(command: &str, path: Option<&str>) -> String {
    if command.contains(std::path::MAIN_SEPARATOR) || command.contains('/') {
        return String::new();
    }
    let names: Vec<String> = std::env::split_paths(path.unwrap_or_default())
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    geminid_protocol::suggest::closest(command, names.iter().map(String::as_str))
        .map(|n| format!(" (did you mean `{n}`?)"))
        .unwrap_or_default()
}
