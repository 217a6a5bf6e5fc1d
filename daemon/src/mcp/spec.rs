//! A server's resolved launch spec and its identity (COMPAT §1.4, DESIGN "Shared servers").
//!
//! The identity is the hash of what the entry itself decides: transport; the command, the
//! program it resolves to on the session's `PATH`, args and cwd, and the variables the entry
//! sets in `env` (or URL and headers). Every `$VAR` reference in those is expanded before
//! hashing, so entries whose references resolve differently are different servers. What a
//! stdio child merely inherits (TERM, the order of PATH, an activated virtualenv's variables,
//! anything the entry does not name) is not part of it: two shells of one user share one
//! process, and the child gets the environment of the session that started it.
use crate::secrets::Secret;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use geminid_protocol::config::Scope;
use geminid_protocol::session::Declares;

use crate::config::env::{Env, Redaction, expand_env_vars, sanitize_environment};
use crate::config::mcp::{McpServerConfig, TransportType};

pub(crate) use crate::config::env::VOLATILE_ENV;

/// How a network server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Network {
    /// Streamable HTTP only (`httpUrl`, or `url` with `type: "http"`).
    StreamableHttp,
    /// Legacy HTTP+SSE only (`url` with `type: "sse"`).
    Sse,
    /// `url` without `type`: streamable HTTP, falling back to SSE on a non-401 failure.
    HttpThenSse,
}

/// What to launch or connect to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "transport")]
pub(crate) enum LaunchSpec {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The executable (no shell).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its working directory; `None` inherits the daemon's.
        cwd: Option<PathBuf>,
        /// The program `command` resolves to in `env`'s `PATH` (its directory made canonical,
        /// the file name kept, so a virtualenv's `python` link stays itself); `None` where it
        /// resolves to nothing (the start will say so).
        program: Option<PathBuf>,
        /// The variables the entry sets itself (`env`), expanded.
        #[serde(serialize_with = "crate::secrets::expose")]
        explicit: Secret<BTreeMap<String, String>>,
        /// Its complete environment: the starting session's (sanitized, volatile variables
        /// removed) with `explicit` on top. Not part of the identity.
        #[serde(skip)]
        env: Secret<BTreeMap<String, String>>,
        /// What it is told its clients answer (see [`LaunchSpec::telling`]).
        #[serde(default, skip_serializing_if = "Declares::is_all")]
        declares: Declares,
    },
    /// A remote server.
    Network {
        /// How.
        kind: Network,
        /// Where.
        url: String,
        /// Request headers, expanded.
        #[serde(serialize_with = "crate::secrets::expose")]
        headers: Secret<BTreeMap<String, String>>,
        /// The entry's `oauth` settings (part of the identity only when there are some).
        #[serde(default, skip_serializing_if = "is_default")]
        oauth: crate::auth::OAuthSettings,
        /// What it is told its clients answer (see [`LaunchSpec::telling`]).
        #[serde(default, skip_serializing_if = "Declares::is_all")]
        declares: Declares,
    },
}

fn is_default(s: &crate::auth::OAuthSettings) -> bool {
    *s == crate::auth::OAuthSettings::default()
}

/// Why a server cannot be launched for a session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ResolveError {
    /// stdio servers need a trusted folder (the reference's message).
    #[error(
        "MCP server '{0}' uses stdio transport but current folder is not trusted. Use `gemctl trust` to enable it."
    )]
    Untrusted(String),
    /// The entry has nothing to launch.
    #[error("MCP server '{0}' has none of \"command\", \"url\" or \"httpUrl\"")]
    NoTransport(String),
}

/// Resolve `config` for a session whose environment is `env` and whose workspace is
/// `workspace`. `redaction` is the `security.environmentVariableRedaction` setting; for stdio
/// children redaction is forced on, as in Gemini CLI. A stdio server without `cwd` runs in
/// `default_cwd` (see [`default_cwd`]).
pub(crate) fn resolve(
    name: &str,
    config: &McpServerConfig,
    env: &Env,
    redaction: &Redaction,
    workspace: &Path,
    trusted: bool,
    default_cwd: Option<&Path>,
) -> Result<LaunchSpec, ResolveError> {
    let forced = Redaction { enabled: true, ..redaction.clone() };
    let sanitized = sanitize_environment(env, &forced);
    if let Some(url) = config.http_url.as_ref().or(config.url.as_ref()) {
        let kind = match (config.http_url.is_some(), config.transport_type) {
            (true, _) | (false, Some(TransportType::Http)) => Network::StreamableHttp,
            (false, Some(TransportType::Sse)) => Network::Sse,
            (false, _) => Network::HttpThenSse,
        };
        let headers = config
            .headers
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), expand_env_vars(v, &sanitized)))
            .collect();
        let oauth = crate::auth::OAuthSettings::of_entry(config);
        return Ok(LaunchSpec::Network {
            kind,
            url: url.clone(),
            headers: Secret::new(headers),
            oauth,
            declares: Declares::ALL,
        });
    }
    let Some(command) = config.command.clone() else {
        return Err(ResolveError::NoTransport(name.to_owned()));
    };
    if !trusted {
        return Err(ResolveError::Untrusted(name.to_owned()));
    }
    let mut child_env: BTreeMap<String, String> =
        BTreeMap::from([("GEMINI_CLI".to_owned(), "1".to_owned())]);
    child_env.extend(sanitized.into_iter().filter(|(k, _)| !VOLATILE_ENV.contains(&k.as_str())));
    // Explicit env is not redacted and expands against the unredacted environment.
    let explicit: BTreeMap<String, String> =
        config.env.iter().flatten().map(|(k, v)| (k.clone(), expand_env_vars(v, env))).collect();
    child_env.extend(explicit.iter().map(|(k, v)| (k.clone(), v.clone())));
    let cwd = match &config.cwd {
        Some(c) if Path::new(c).is_absolute() => Some(PathBuf::from(c)),
        Some(c) => Some(workspace.join(c)),
        None => default_cwd.map(Path::to_path_buf),
    };
    let program = find_program(&command, child_env.get("PATH"), cwd.as_deref());
    Ok(LaunchSpec::Stdio {
        command,
        args: config.args.clone().unwrap_or_default(),
        cwd,
        program,
        explicit: Secret::new(explicit),
        env: Secret::new(child_env),
        declares: Declares::ALL,
    })
}

/// The file `command` names, as a process started with `path` as its `PATH` in `cwd` would
/// find it. The directory is made canonical (`/bin` and `/usr/bin` on a merged-/usr system are
/// one place) but the file name is kept: a virtualenv's `bin/python` is a link to the system
/// interpreter and still a different program.
pub(crate) fn find_program(
    command: &str,
    path: Option<&String>,
    cwd: Option<&Path>,
) -> Option<PathBuf> {
    let named = Path::new(command);
    let candidates: Vec<PathBuf> = if named.components().count() > 1 || named.is_absolute() {
        vec![match cwd {
            Some(dir) if named.is_relative() => dir.join(named),
            _ => named.to_path_buf(),
        }]
    } else {
        let dirs = path.map(|p| std::env::split_paths(p).collect::<Vec<_>>()).unwrap_or_default();
        dirs.into_iter()
            .filter(|d| d.is_absolute())
            .flat_map(|d| executable_names(command).into_iter().map(move |n| d.join(n)))
            .collect()
    };
    let found = candidates.into_iter().find(|c| is_executable(c))?;
    let dir = found.parent().and_then(|d| d.canonicalize().ok());
    match (dir, found.file_name()) {
        (Some(dir), Some(name)) => Some(dir.join(name)),
        _ => Some(found),
    }
}

#[cfg(unix)]
fn executable_names(command: &str) -> Vec<String> {
    vec![command.to_owned()]
}

#[cfg(not(unix))]
fn executable_names(command: &str) -> Vec<String> {
    let exts = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
    std::iter::once(command.to_owned())
        .chain(exts.split(';').filter(|e| !e.is_empty()).map(|e| format!("{command}{e}")))
        .collect()
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Where a stdio server without `cwd` runs. Gemini CLI starts it in the workspace (its own
/// working directory); geminid does so for servers from the workspace's own settings, but runs
/// user- and system-scope servers in the user's home directory, so that sessions in different
/// workspaces can share them. Servers that need the workspace should get it from MCP roots or
/// an explicit `cwd`.
pub(crate) fn default_cwd(scope: Scope, workspace: &Path, env: &Env) -> Option<PathBuf> {
    match scope {
        Scope::Workspace | Scope::AntigravityWorkspace => Some(workspace.to_path_buf()),
        _ => env.get("HOME").filter(|h| Path::new(h).is_absolute()).map(PathBuf::from),
    }
}

impl LaunchSpec {
    /// The same server, telling it that its clients answer `declares` (a session's
    /// `upstream`). Declaring everything (the default) leaves the identity as it always was;
    /// declaring less makes it another server, as it may list other tools: clients of each
    /// kind share one process of their own.
    pub(crate) fn telling(mut self, declares: Declares) -> Self {
        match &mut self {
            Self::Stdio { declares: d, .. } | Self::Network { declares: d, .. } => *d = declares,
        }
        self
    }

    /// What it is told its clients answer.
    pub(crate) fn declares(&self) -> Declares {
        match self {
            Self::Stdio { declares, .. } | Self::Network { declares, .. } => *declares,
        }
    }

    /// What it runs, as its pins are keyed (`pins::canon::pin_key`): the command and its
    /// arguments without package versions, and its folder; or the URL without credentials,
    /// query or fragment. Never its environment, headers or credentials, nor what it is told
    /// (`telling`): a copy told less is checked against the same pins, so one started after
    /// its server changed cannot pin the change afresh.
    pub(crate) fn pin_source(&self) -> String {
        match self {
            Self::Stdio { command, args, cwd, .. } => {
                let mut words = vec![command.clone()];
                words.extend(args.iter().map(|a| crate::pins::canon::unversioned(a).to_owned()));
                let mut text = words.join(" ");
                if let Some(cwd) = cwd {
                    text.push_str(&format!(" (in {})", cwd.display()));
                }
                text
            }
            Self::Network { url, .. } => match reqwest::Url::parse(url) {
                Ok(mut u) => {
                    let _ = u.set_username("");
                    let _ = u.set_password(None);
                    u.set_query(None);
                    u.set_fragment(None);
                    u.to_string()
                }
                Err(_) => url.clone(),
            },
        }
    }

    /// The identity: a SHA-256 of the spec's canonical JSON (without the inherited
    /// environment), hex.
    pub(crate) fn identity(&self) -> String {
        // Maps are BTreeMaps, so the JSON is canonical.
        let json = serde_json::to_vec(self).unwrap_or_default();
        Sha256::digest(&json).iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// `text` with the URL `spec` reaches written as `shown` (the URL as written in the
/// settings): the expanded URL may carry a secret a variable holds (`?key=${TOKEN}`), and
/// HTTP errors quote it.
pub(crate) fn scrub(text: &str, spec: &LaunchSpec, shown: &str) -> String {
    let LaunchSpec::Network { url, .. } = spec else { return text.to_owned() };
    if url == shown {
        return text.to_owned();
    }
    let mut out = text.replace(url.as_str(), shown);
    if let Ok(parsed) = reqwest::Url::parse(url) {
        let normal = parsed.to_string();
        if normal != *url {
            out = out.replace(&normal, shown);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_told_less_is_another_server_and_one_told_everything_is_unchanged() {
        let spec = LaunchSpec::Network {
            kind: Network::StreamableHttp,
            url: "https://example.com/mcp".into(),
            headers: Secret::new(BTreeMap::new()),
            oauth: Default::default(),
            declares: Declares::ALL,
        };
        // The canonical JSON (and so the identity, and the pins and warm lists keyed by it)
        // of a server told everything is what it was before servers could be told less.
        let json = serde_json::to_value(&spec).unwrap();
        let before = serde_json::json!({"transport": "network", "kind": "streamableHttp",
            "url": "https://example.com/mcp", "headers": {}});
        assert_eq!(json, before);
        assert_eq!(spec.pin_source(), "https://example.com/mcp");
        let none = Declares { elicitation: false, sampling: false };
        let told = spec.clone().telling(none);
        assert_ne!(told.identity(), spec.identity());
        assert_eq!(told.pin_source(), spec.pin_source(), "one pin record for every copy");
        let elicits = spec.clone().telling(Declares { elicitation: true, sampling: false });
        assert_ne!(elicits.identity(), told.identity());
        assert_eq!(told.clone().telling(Declares::ALL).identity(), spec.identity());
    }

    #[test]
    fn a_launch_spec_never_prints_its_environment_or_headers() {
        let e = env(&[("PATH", "/bin"), ("TOKEN", "ghp_printme")]);
        let config = McpServerConfig {
            command: Some("srv".into()),
            env: Some(BTreeMap::from([("KEY".to_owned(), "$TOKEN".to_owned())])),
            ..Default::default()
        };
        let printed = format!("{:?}", stdio(config, &e));
        assert!(!printed.contains("ghp_printme"), "{printed}");
        let remote = McpServerConfig {
            http_url: Some("http://h/mcp".into()),
            headers: Some(BTreeMap::from([(
                "Authorization".to_owned(),
                "Bearer abc123".to_owned(),
            )])),
            ..Default::default()
        };
        let spec =
            resolve("s", &remote, &e, &Redaction::default(), Path::new("/ws"), true, None).unwrap();
        let printed = format!("{spec:?}");
        assert!(!printed.contains("abc123"), "{printed}");
        // The identity still hashes them (exposed on purpose).
        let other = McpServerConfig {
            headers: Some(BTreeMap::from([(
                "Authorization".to_owned(),
                "Bearer other".to_owned(),
            )])),
            ..remote.clone()
        };
        let other =
            resolve("s", &other, &e, &Redaction::default(), Path::new("/ws"), true, None).unwrap();
        assert_ne!(spec.identity(), other.identity());
    }

    #[test]
    fn an_expanded_url_in_an_error_is_written_as_shown() {
        let spec = LaunchSpec::Network {
            kind: Network::StreamableHttp,
            url: "http://h:9/mcp?key=s3cret".into(),
            headers: Default::default(),
            oauth: Default::default(),
            declares: Declares::ALL,
        };
        let shown = "http://h:9/mcp?key=${KEY}";
        let text = "error sending request for url (http://h:9/mcp?key=s3cret): refused";
        assert_eq!(
            scrub(text, &spec, shown),
            format!("error sending request for url ({shown}): refused")
        );
        // reqwest writes a URL normalized (here with the path it adds).
        let bare = LaunchSpec::Network {
            kind: Network::Sse,
            url: "http://h:9?key=s3cret".into(),
            headers: Default::default(),
            oauth: Default::default(),
            declares: Declares::ALL,
        };
        let text = "for url (http://h:9/?key=s3cret)";
        assert_eq!(scrub(text, &bare, "http://h:9?key=$K"), "for url (http://h:9?key=$K)");
    }
    use pretty_assertions::assert_eq;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn stdio(config: McpServerConfig, e: &Env) -> LaunchSpec {
        resolve("s", &config, e, &Redaction::default(), Path::new("/ws"), true, None).unwrap()
    }

    #[test]
    fn stdio_env_follows_the_reference_rules() {
        let e = env(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("GITHUB_TOKEN", "ghp_secret"),
            ("PLAIN", "ok"),
            ("PWD", "/somewhere"),
            ("SHLVL", "2"),
        ]);
        let config = McpServerConfig {
            command: Some("srv".into()),
            args: Some(vec!["--x".into()]),
            env: Some(
                [
                    ("TOKEN".to_owned(), "$GITHUB_TOKEN".to_owned()),
                    ("MISSING".to_owned(), "[$NOPE]".to_owned()),
                ]
                .into(),
            ),
            cwd: Some("sub".into()),
            ..Default::default()
        };
        let LaunchSpec::Stdio { command, args, cwd, env: child, explicit, .. } = stdio(config, &e)
        else {
            panic!("not stdio")
        };
        assert_eq!((command.as_str(), args), ("srv", vec!["--x".to_owned()]));
        assert_eq!(cwd, Some(PathBuf::from("/ws/sub")));
        assert_eq!(
            child.expose(),
            &env(&[
                ("GEMINI_CLI", "1"),
                ("HOME", "/home/u"),
                ("MISSING", "[]"),
                ("PATH", "/usr/bin"),
                ("PLAIN", "ok"),
                ("TOKEN", "ghp_secret")
            ])
        );
        assert_eq!(explicit.expose(), &env(&[("MISSING", "[]"), ("TOKEN", "ghp_secret")]));
    }

    /// A directory holding executables with these names.
    fn bin_dir(names: &[&str]) -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        for n in names {
            let p = dir.path().join(n);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        dir
    }

    #[test]
    fn identity_is_what_the_entry_decides_not_what_the_shell_has() {
        let (system, venv, empty) = (bin_dir(&["srv", "py"]), bin_dir(&["py"]), bin_dir(&[]));
        let (sys, ven, emp) = (
            system.path().display().to_string(),
            venv.path().display().to_string(),
            empty.path().display().to_string(),
        );
        let entry = |command: &str, env: &[(&str, &str)]| McpServerConfig {
            command: Some(command.into()),
            env: Some(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
            ..Default::default()
        };
        let id = |config: &McpServerConfig, e: &[(&str, &str)]| {
            stdio(config.clone(), &env(e)).identity()
        };
        let srv = entry("srv", &[]);
        let shell = [("PATH", sys.as_str()), ("TERM", "xterm-256color"), ("PWD", "/a")];
        let base = id(&srv, &shell);
        assert_eq!(base.len(), 64);
        // Another terminal, tmux, a virtualenv, direnv: variables the entry does not name.
        let other_path = format!("{emp}:{sys}");
        let other = [
            ("PATH", other_path.as_str()),
            ("TERM", "screen"),
            ("VIRTUAL_ENV", "/venv"),
            ("DIRENV_DIR", "-/p"),
            ("PWD", "/b"),
        ];
        assert_eq!(id(&srv, &other), base, "same program, other shell: one server");
        // A variable the entry sets, or references, resolving differently: two servers.
        let region = entry("srv", &[("REGION", "$REGION")]);
        assert_ne!(
            id(&region, &[("PATH", sys.as_str()), ("REGION", "eu")]),
            id(&region, &[("PATH", sys.as_str()), ("REGION", "us")])
        );
        assert_ne!(id(&region, &shell), base, "an explicit env is part of it");
        // The program the command finds: a virtualenv's own interpreter is another server.
        let py = entry("py", &[]);
        let in_venv = format!("{ven}:{sys}");
        assert_ne!(id(&py, &[("PATH", in_venv.as_str())]), id(&py, &[("PATH", sys.as_str())]));
        let LaunchSpec::Stdio { program, env: child, .. } = stdio(py, &env(&[("PATH", &in_venv)]))
        else {
            panic!("not stdio")
        };
        assert_eq!(program, venv.path().canonicalize().ok().map(|d| d.join("py")));
        assert_eq!(
            child.expose().get("PATH"),
            Some(&in_venv),
            "the child still inherits the session's PATH"
        );
        // A command found nowhere still has an identity (its start fails and says so).
        assert_eq!(id(&entry("nope", &[]), &shell), id(&entry("nope", &[]), &other));
    }

    #[test]
    fn network_specs_and_refusals() {
        let e = env(&[("TENANT", "acme"), ("API_KEY", "secret")]);
        let http = McpServerConfig {
            url: Some("http://127.0.0.1:1/mcp".into()),
            headers: Some(
                [
                    ("X-Tenant".to_owned(), "$TENANT".to_owned()),
                    ("X-Key".to_owned(), "$API_KEY".to_owned()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        let spec = resolve("h", &http, &e, &Redaction::default(), Path::new("/ws"), false, None);
        let Ok(LaunchSpec::Network { kind, headers, .. }) = spec else { panic!("{spec:?}") };
        assert_eq!(kind, Network::HttpThenSse, "url without type tries HTTP, then SSE");
        // The reference expands headers against the redacted environment, so a secret variable
        // is empty here. (Settings-load expansion has already replaced defined variables
        // before this point, so `Bearer $TOKEN` in settings does reach the server.)
        assert_eq!(headers.expose(), &env(&[("X-Key", ""), ("X-Tenant", "acme")]));
        let sse = McpServerConfig {
            url: Some("u".into()),
            transport_type: Some(TransportType::Sse),
            ..Default::default()
        };
        assert!(matches!(
            resolve("s", &sse, &e, &Redaction::default(), Path::new("/"), true, None),
            Ok(LaunchSpec::Network { kind: Network::Sse, .. })
        ));
        let both = McpServerConfig {
            url: Some("a".into()),
            http_url: Some("b".into()),
            ..Default::default()
        };
        assert!(
            matches!(resolve("b", &both, &e, &Redaction::default(), Path::new("/"), true, None), Ok(LaunchSpec::Network { kind: Network::StreamableHttp, ref url, .. }) if url == "b")
        );
        let cmd = McpServerConfig { command: Some("srv".into()), ..Default::default() };
        assert_eq!(
            resolve("local", &cmd, &e, &Redaction::default(), Path::new("/"), false, None).err().map(|e| e.to_string()),
            Some("MCP server 'local' uses stdio transport but current folder is not trusted. Use `gemctl trust` to enable it.".to_owned())
        );
        assert!(matches!(
            resolve(
                "n",
                &McpServerConfig::default(),
                &e,
                &Redaction::default(),
                Path::new("/"),
                true,
                None
            ),
            Err(ResolveError::NoTransport(_))
        ));
    }
}
