//! An npm package run by `npx` or `npm exec` (`artifact.rs`): which package and version the
//! command names, what the user's registry says of it (`npm view --json`, so the registry,
//! scopes and credentials are the user's npm configuration's), and whether npx's own cache
//! already holds exactly the recorded artifact (its lockfile's `integrity`), which makes an
//! unchanged server's start a file read, no network.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use geminid_protocol::pins::{Artifact, ArtifactKind};
use serde_json::Value;
use sha2::{Digest, Sha512};

use crate::pins::artifact::Recorded;

/// What a server resolves to now, with what `stat` said of each file hashed, and the
/// arguments that run exactly it (`None`: as written).
pub(super) struct Found {
    /// What it runs.
    pub artifact: Artifact,
    /// Each file hashed → its `stat` (see `crate::pins::artifact::ArtifactRecord::stats`).
    pub stats: BTreeMap<String, String>,
    /// The arguments that run exactly `artifact`.
    pub args: Option<Vec<String>>,
}

/// How long `npm view` may take.
const VIEW_LIMIT: Duration = Duration::from_secs(60);

/// npx's flags that take no value and change nothing of what runs.
const PLAIN_FLAGS: &[&str] = &[
    "-y",
    "--yes",
    "-q",
    "--quiet",
    "--prefer-online",
    "--prefer-offline",
    "--no-update-notifier",
];

/// A package run by `npx [flags] SPEC [args]` or `npm exec|x [flags] [--] SPEC [args]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Invocation {
    /// The arguments before the package spec.
    prefix: Vec<String>,
    /// The package's name.
    pub name: String,
    /// What follows `@` in the spec (`""` for none: the `latest` tag).
    pub range: String,
    /// The arguments after it.
    rest: Vec<String>,
}

/// Whether `range` names one exact version (`1.2.3`, `1.2.3-rc.1`).
fn exact(range: &str) -> bool {
    let core = range.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A registry package spec's name and range; `None` for a path, URL, git or alias spec.
fn parse_spec(spec: &str) -> Option<(String, String)> {
    let (scope, rest) = match spec.strip_prefix('@') {
        Some(r) => {
            let (scope, rest) = r.split_once('/')?;
            (format!("@{scope}/"), rest)
        }
        None => (String::new(), spec),
    };
    let (name, range) = rest.split_once('@').unwrap_or((rest, ""));
    let ok = |s: &str| {
        !s.is_empty()
            && !s.starts_with(['.', '-', '_'])
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    };
    let range_ok = range.bytes().all(|b| !b"/:\\".contains(&b)) && !range.starts_with("npm:");
    (ok(name) && (scope.is_empty() || ok(&scope[1..scope.len() - 1])) && range_ok)
        .then(|| (format!("{scope}{name}"), range.to_owned()))
}

impl Invocation {
    /// What `program args` runs, when it is npx or `npm exec` with one registry package.
    /// Forms it does not know (`--package`, `--call`, a flag with a value) are `None`: the
    /// command is then pinned as an executable.
    pub(super) fn of(program: &Path, args: &[String]) -> Option<Self> {
        let file = program.file_name()?.to_str()?;
        let stem = file.strip_suffix(".cmd").unwrap_or(file);
        let skip = match (stem, args.first().map(String::as_str)) {
            ("npx", _) => 0,
            ("npm", Some("exec" | "x")) => 1,
            _ => return None,
        };
        let mut i = skip;
        while i < args.len() {
            let a = args[i].as_str();
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') {
                break;
            }
            if !PLAIN_FLAGS.contains(&a) {
                return None;
            }
            i += 1;
        }
        let (name, range) = parse_spec(args.get(i)?)?;
        Some(Self { prefix: args[..i].to_vec(), name, range, rest: args[i + 1..].to_vec() })
    }

    /// The arguments that run exactly `version`.
    fn args_for(&self, version: &str) -> Vec<String> {
        let mut out = self.prefix.clone();
        out.push(format!("{}@{version}", self.name));
        out.extend(self.rest.iter().cloned());
        out
    }
}

/// Where the command runs: its environment (the registry, the cache) and folder.
pub(super) struct Context<'a> {
    /// The server's environment.
    pub env: &'a BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<&'a Path>,
}

impl Context<'_> {
    fn var(&self, name: &str) -> Option<&String> {
        self.env.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v)
    }

    /// npx's cache of installed packages.
    fn npx_cache(&self) -> Option<PathBuf> {
        let cache = match self.var("npm_config_cache") {
            Some(c) => PathBuf::from(c),
            None => Path::new(self.var("HOME")?).join(".npm"),
        };
        Some(cache.join("_npx"))
    }
}

/// Whether npx's cache holds `name@version` installed with `integrity`: the folder npx
/// would use for exactly that spec, and its lockfile's entry.
fn cached(ctx: &Context<'_>, name: &str, version: &str, integrity: &str) -> bool {
    let Some(npx) = ctx.npx_cache() else { return false };
    let spec = format!("{name}@{version}");
    let hash = crate::pins::canon::hex(&Sha512::digest(spec.as_bytes()));
    let dir = npx.join(&hash[..16]);
    let entry = format!("node_modules/{name}");
    ["node_modules/.package-lock.json", "package-lock.json"].iter().any(|lock| {
        let Ok(text) = std::fs::read(dir.join(lock)) else { return false };
        let Ok(lock) = serde_json::from_slice::<Value>(&text) else { return false };
        let p = &lock["packages"][&entry];
        p["version"].as_str() == Some(version) && p["integrity"].as_str() == Some(integrity)
    })
}

/// How `npm view` failed.
#[derive(Debug)]
pub(super) struct ViewError {
    /// What it said, in one line.
    pub message: String,
    /// The registry did not answer: a refused or failed connection, no such host, a timeout,
    /// a 5xx.
    pub unreachable: bool,
}

impl ViewError {
    fn other(message: String) -> Self {
        Self { message, unreachable: false }
    }
}

/// npm's error codes for a registry that does not answer.
const UNREACHABLE: &[&str] = &[
    "ECONNREFUSED",
    "ECONNRESET",
    "ENOTFOUND",
    "EAI_AGAIN",
    "ETIMEDOUT",
    "EHOSTUNREACH",
    "ENETUNREACH",
    "ERR_SOCKET_TIMEOUT",
    "FETCH_ERROR",
];

/// An `npm` command with the server's environment and folder.
fn npm(ctx: &Context<'_>) -> Result<tokio::process::Command, ViewError> {
    let npm = super::spec::find_program("npm", ctx.var("PATH"), ctx.cwd)
        .ok_or_else(|| ViewError::other("npm is not on the server's PATH".to_owned()))?;
    let mut cmd = tokio::process::Command::new(npm);
    cmd.env_clear().envs(ctx.env).stdin(std::process::Stdio::null()).kill_on_drop(true);
    if let Some(cwd) = ctx.cwd {
        cmd.current_dir(cwd);
    }
    Ok(cmd)
}

/// What the user's npm says `spec` is now: the highest version it names, with its
/// integrity and publication time. `fresh`, for a person waiting on `mcp/update`: one retry,
/// a second apart (npm's own are three, ten seconds to a minute apart), and a cache of its own
/// that starts empty, as npm answers from its cache's old copy when the registry does not
/// answer, which would call a stale release the newest.
async fn view(
    ctx: &Context<'_>,
    name: &str,
    range: &str,
    fresh: bool,
) -> Result<Artifact, ViewError> {
    let spec = if range.is_empty() { name.to_owned() } else { format!("{name}@{range}") };
    let mut cmd = npm(ctx)?;
    cmd.args(["view", "--json", "--prefer-online"]);
    let _empty = if fresh {
        let dir = tempfile::tempdir()
            .map_err(|e| ViewError::other(format!("no folder for npm's cache: {e}")))?;
        cmd.args(["--fetch-retries=1", "--fetch-retry-mintimeout=1000"]);
        cmd.arg("--fetch-retry-maxtimeout=1000").arg(format!("--cache={}", dir.path().display()));
        Some(dir)
    } else {
        None
    };
    cmd.args(["--", &spec, "name", "version", "dist", "time"]);
    let out = match tokio::time::timeout(VIEW_LIMIT, cmd.output()).await {
        Err(_) => {
            let message = format!("`npm view {spec}` gave no answer within a minute");
            return Err(ViewError { message, unreachable: true });
        }
        Ok(out) => {
            out.map_err(|e| ViewError::other(format!("`npm view {spec}` could not run: {e}")))?
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // With --json, npm says its error on stdout: {"error": {"code", "summary"}}.
        let said: Value = serde_json::from_str(&text).unwrap_or_default();
        let code = said["error"]["code"].as_str().unwrap_or_default();
        let unreachable = UNREACHABLE.contains(&code) || code.starts_with("E5");
        let err = String::from_utf8_lossy(&out.stderr);
        let why = match said["error"]["summary"].as_str() {
            Some(summary) => summary.lines().next().unwrap_or_default().to_owned(),
            None => err.lines().find(|l| l.contains("ERR!")).unwrap_or(err.trim()).to_owned(),
        };
        let why = without_userinfo(&why);
        let message =
            format!("`npm view {spec}` failed: {}", why.chars().take(300).collect::<String>());
        return Err(ViewError { message, unreachable });
    }
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| ViewError::other(format!("`npm view {spec}` answered no JSON: {e}")))?;
    // A range that names several versions is an array, lowest first.
    let one = match &json {
        Value::Array(all) => all.last().cloned().unwrap_or_default(),
        v => v.clone(),
    };
    let version = one["version"]
        .as_str()
        .ok_or_else(|| ViewError::other(format!("the registry has no {spec}")))?;
    let integrity = one["dist"]["integrity"].as_str().ok_or_else(|| {
        ViewError::other(format!("the registry gives no integrity for {name}@{version}"))
    })?;
    Ok(Artifact {
        kind: ArtifactKind::Npm,
        name: name.to_owned(),
        version: Some(version.to_owned()),
        digest: integrity.to_owned(),
        published: one["time"][version].as_str().map(str::to_owned),
        interpreter: None,
    })
}

/// `text` with the user and password of each URL in it left out (`https://u:p@host/` →
/// `https://host/`): a registry URL may carry them, and they never reach a message.
pub(super) fn without_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        let end = rest.find(|c: char| c == '/' || c.is_whitespace()).unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// The registry the user's npm asks for `name` (its scope's, else the default), as `npm
/// config get` says it, without credentials.
pub(super) async fn registry(ctx: &Context<'_>, name: &str) -> Option<String> {
    let key = match name.split_once('/') {
        Some((scope, _)) if scope.starts_with('@') => format!("{scope}:registry"),
        _ => "registry".to_owned(),
    };
    for key in [key.as_str(), "registry"] {
        let mut cmd = npm(ctx).ok()?;
        cmd.args(["config", "get", key]);
        let out = tokio::time::timeout(Duration::from_secs(20), cmd.output()).await.ok()?.ok()?;
        let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if out.status.success() && !said.is_empty() && said != "undefined" {
            return Some(without_userinfo(&said));
        }
    }
    None
}

/// `mcp/update`: the newest release the entry allows, asked of the registry (never npx's
/// cache): what its spec resolves to now (npm's `latest` dist-tag for a bare name, the
/// highest version of a range). An entry that names one exact version is moved by editing it.
pub(super) async fn newest(inv: &Invocation, ctx: &Context<'_>) -> Result<Found, ViewError> {
    if exact(&inv.range) {
        return Err(ViewError::other(format!(
            "its entry names the exact version {}@{}: edit the entry to name another (the \
             change is then held for review) or a range",
            inv.name, inv.range
        )));
    }
    let artifact = view(ctx, &inv.name, &inv.range, true).await?;
    let args = artifact.version.as_deref().map(|v| inv.args_for(v));
    Ok(Found { artifact, stats: BTreeMap::new(), args })
}

/// What `inv` runs now. With a record of this package that the spec still allows (the
/// spec names no other exact version), that recorded version: from npx's cache when it holds
/// exactly the recorded integrity, else as the registry has it now. Otherwise what the
/// registry resolves the spec to.
pub(super) async fn resolve(
    inv: &Invocation,
    recorded: &Recorded,
    ctx: &Context<'_>,
) -> Result<Found, String> {
    let kept = match recorded {
        Recorded::Verified(r)
            if r.artifact.kind == ArtifactKind::Npm
                && r.artifact.name == inv.name
                && (!exact(&inv.range) || r.artifact.version.as_deref() == Some(&*inv.range)) =>
        {
            Some(r)
        }
        _ => None,
    };
    let artifact = match kept.and_then(|r| Some((r, r.artifact.version.as_deref()?))) {
        Some((r, version)) if cached(ctx, &inv.name, version, &r.artifact.digest) => {
            r.artifact.clone()
        }
        Some((_, version)) => view(ctx, &inv.name, version, false).await.map_err(|e| e.message)?,
        None => view(ctx, &inv.name, &inv.range, false).await.map_err(|e| e.message)?,
    };
    let args = artifact.version.as_deref().map(|v| inv.args_for(v));
    Ok(Found { artifact, stats: BTreeMap::new(), args })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(program: &str, args: &[&str]) -> Option<Invocation> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        Invocation::of(Path::new(program), &args)
    }

    #[test]
    fn which_commands_run_a_registry_package() {
        let inv = of("/usr/bin/npx", &["-y", "@scope/srv@^1.2", "--port", "1"]).unwrap();
        assert_eq!((inv.name.as_str(), inv.range.as_str()), ("@scope/srv", "^1.2"));
        assert_eq!(inv.args_for("1.2.3"), ["-y", "@scope/srv@1.2.3", "--port", "1"]);
        let inv = of("/usr/bin/npm", &["exec", "--yes", "--", "srv", "x"]).unwrap();
        assert_eq!(inv.args_for("2.0.0"), ["exec", "--yes", "--", "srv@2.0.0", "x"]);
        assert_eq!(of("/usr/bin/npx", &["srv"]).unwrap().range, "");
        // What it does not know is pinned as an executable.
        assert!(of("/usr/bin/npx", &["-p", "a", "b"]).is_none());
        assert!(of("/usr/bin/npx", &["./local"]).is_none());
        assert!(of("/usr/bin/npx", &["--", "-registry"]).is_none(), "never a flag to npm view");
        assert!(of("/usr/bin/npx", &["github:me/srv"]).is_none());
        assert!(of("/usr/bin/npx", &["srv@npm:other"]).is_none());
        assert!(of("/usr/bin/npm", &["run", "x"]).is_none());
        assert!(of("/usr/bin/node", &["srv"]).is_none());
        assert!(exact("1.0.1") && exact("1.0.1-rc.1") && !exact("^1.0.1") && !exact("latest"));
    }

    #[test]
    fn a_registry_url_s_credentials_never_reach_a_message() {
        let said = "request to https://me:s3cret@npm.example/srv failed, see http://h:1/ and \
                    https://tok@r.example";
        let clean = without_userinfo(said);
        assert!(!clean.contains("s3cret") && !clean.contains("tok@"), "{clean}");
        assert!(
            clean.contains("https://npm.example/srv") && clean.contains("http://h:1/"),
            "{clean}"
        );
        assert!(clean.contains("https://r.example"), "{clean}");
    }

    #[tokio::test]
    async fn an_entry_naming_one_exact_version_is_moved_by_editing_it_not_by_update() {
        // Said before npm is looked for: the environment has no PATH.
        let env = BTreeMap::new();
        let ctx = Context { env: &env, cwd: None };
        let inv = of("/usr/bin/npx", &["-y", "srv@1.2.3"]).unwrap();
        let e = newest(&inv, &ctx).await.err().unwrap();
        assert!(e.message.contains("names the exact version srv@1.2.3") && !e.unreachable, "{e:?}");
        let inv = of("/usr/bin/npx", &["-y", "srv@^1.2"]).unwrap();
        let e = newest(&inv, &ctx).await.err().unwrap();
        assert!(e.message.contains("npm is not on the server's PATH"), "{e:?}");
    }
}
