//! A Python package run by `uvx`, `uv tool run` or `pipx run` (`artifact.rs`): which package
//! and version the command names, what the user's package index says of it now
//! (`pypi_index.rs`: its exact version's distribution file and that file's `sha256`), and
//! whether uv's own cache already holds exactly the recorded file for that same index, which
//! makes an unchanged server's start a directory read and no network: it then runs with
//! `--offline`, so uv takes those bytes and fetches nothing. pipx keeps no file digest in its
//! cache: a pipx server's start asks the index each time. The command is rewritten to run
//! exactly the recorded version (`--from NAME==V` for uv, `--spec NAME==V` for pipx).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use geminid_protocol::pins::{Artifact, ArtifactKind};

use super::npm::Found;
use super::pypi_index::{self, Index};
pub(super) use super::pypi_index::{Context, Tool, normalize};
use crate::pins::artifact::Recorded;

/// Flags that take no value and change nothing of which package runs.
const UV_PLAIN: &[&str] =
    &["-q", "--quiet", "--isolated", "--no-progress", "--native-tls", "--offline", "--refresh"];
const PIPX_PLAIN: &[&str] = &["-q", "--quiet", "-v", "--verbose", "--no-cache"];
/// Flags with a value that is kept as it is.
const UV_VALUED: &[&str] = &["--python", "-p", "--with"];
const PIPX_VALUED: &[&str] = &["--python", "--backend"];
/// Flags whose value is the index.
const INDEX_FLAGS: &[&str] = &["--index-url", "-i", "--default-index"];

/// A package run by `uvx [flags] SPEC [args]`, `uvx [flags] --from SPEC CMD [args]`, `uv tool
/// run ...` or `pipx run [flags] SPEC [args]` / `pipx run --spec SPEC CMD [args]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Invocation {
    /// Which tool.
    pub tool: Tool,
    /// How many arguments name the subcommand (`tool run`: 2, `run`: 1, uvx: 0).
    sub: usize,
    /// The flags before the package, without `--from`/`--spec`.
    flags: Vec<String>,
    /// The package's name as written.
    pub name: String,
    /// Its extras as written (`[a,b]`), or `""`.
    extras: String,
    /// The exact version the spec names (`None`: the newest).
    pub version: Option<String>,
    /// The command run from it.
    command: String,
    /// The arguments after it.
    rest: Vec<String>,
    /// The index the flags name.
    pub index: Option<String>,
    /// pipx's `--backend`.
    backend: Option<String>,
}

/// A requirement `NAME[extras]` with `==V` (or, for uv, `@V` / `@latest`): its name, extras
/// and exact version. `None` for a range, a URL, a path or a marker.
fn parse_spec(spec: &str, tool: Tool) -> Option<(String, String, Option<String>)> {
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
        .unwrap_or(spec.len());
    let (name, mut rest) = spec.split_at(end);
    let name_ok = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !name_ok {
        return None;
    }
    let mut extras = "";
    if rest.starts_with('[') {
        let close = rest.find(']')?;
        extras = &rest[..=close];
        let inner = &extras[1..extras.len() - 1];
        if !inner.chars().all(|c| c.is_ascii_alphanumeric() || "-_.,".contains(c)) {
            return None;
        }
        rest = &rest[close + 1..];
    }
    let version_ok = |v: &str| {
        !v.is_empty()
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.chars().all(|c| c.is_ascii_alphanumeric() || ".!+_-".contains(c))
    };
    let version = if rest.is_empty() {
        None
    } else if let Some(v) = rest.strip_prefix("==").filter(|v| version_ok(v)) {
        Some(v.to_owned())
    } else if let Some(v) = rest.strip_prefix('@').filter(|_| tool == Tool::Uv) {
        match v {
            "latest" => None,
            v if version_ok(v) => Some(v.to_owned()),
            _ => return None,
        }
    } else {
        return None;
    };
    Some((name.to_owned(), extras.to_owned(), version))
}

impl Invocation {
    /// What `program args` runs, when it is uvx, `uv tool run` or `pipx run` with one index
    /// package. Forms it does not know (another flag, a URL or path, a range) are `None`: the
    /// command is then pinned as an executable.
    pub(super) fn of(program: &Path, args: &[String]) -> Option<Self> {
        let file = program.file_name()?.to_str()?;
        let stem = file.strip_suffix(".exe").unwrap_or(file);
        let arg = |i: usize| args.get(i).map(String::as_str);
        let (tool, sub) = match (stem, arg(0), arg(1)) {
            ("uvx", _, _) => (Tool::Uv, 0),
            ("uv", Some("tool"), Some("run")) => (Tool::Uv, 2),
            ("pipx", Some("run"), _) => (Tool::Pipx, 1),
            _ => return None,
        };
        let (plain, valued, from_flag) = match tool {
            Tool::Uv => (UV_PLAIN, UV_VALUED, "--from"),
            Tool::Pipx => (PIPX_PLAIN, PIPX_VALUED, "--spec"),
        };
        let (mut flags, mut from, mut index, mut backend) = (Vec::new(), None, None, None);
        let mut i = sub;
        while let Some(a) = arg(i) {
            if !a.starts_with('-') {
                break;
            }
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
                _ => (a, None),
            };
            if plain.contains(&flag) && inline.is_none() {
                flags.push(a.to_owned());
                i += 1;
                continue;
            }
            let is_index =
                INDEX_FLAGS.contains(&flag) && (tool == Tool::Uv || flag != "--default-index");
            if flag != from_flag && !valued.contains(&flag) && !is_index {
                return None;
            }
            let value = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    arg(i)?.to_owned()
                }
            };
            i += 1;
            if flag == from_flag {
                from = Some(value);
                continue;
            }
            if is_index {
                index = Some(value.clone());
            }
            if flag == "--backend" {
                backend = Some(value.clone());
            }
            flags.extend([flag.to_owned(), value]);
        }
        let first = arg(i)?;
        let (spec, command) = match &from {
            Some(spec) => (spec.as_str(), first.to_owned()),
            None => (first, String::new()),
        };
        let (name, extras, version) = parse_spec(spec, tool)?;
        let command = if from.is_some() { command } else { name.clone() };
        Some(Self {
            tool,
            sub,
            flags,
            name,
            extras,
            version,
            command,
            rest: args[i + 1..].to_vec(),
            index,
            backend,
        })
    }

    /// Whether uv installs the package (and so reads uv's index settings): uvx, or pipx with
    /// its uv backend (`--backend`, `PIPX_DEFAULT_BACKEND`, else uv found on `PATH` or beside
    /// pipx, as pipx itself decides).
    fn by_uv(&self, program: &Path, ctx: &Context<'_>) -> bool {
        if self.tool == Tool::Uv {
            return true;
        }
        match self.backend.as_deref().or(ctx.var("PIPX_DEFAULT_BACKEND")) {
            Some(b) => b == "uv",
            None => {
                let beside = program.parent().map(|d| d.join("uv"));
                beside.is_some_and(|u| u.is_file())
                    || super::spec::find_program("uv", ctx.env.get("PATH"), ctx.cwd).is_some()
            }
        }
    }

    /// The arguments that run exactly `version` (`offline`: from uv's cache alone, else uv
    /// refreshes the package).
    pub(super) fn args_for(&self, sub: &[String], version: &str, offline: bool) -> Vec<String> {
        let mut out = sub.to_vec();
        if self.tool == Tool::Uv && !self.flags.iter().any(|f| f == "--offline") {
            // From the cache alone where it holds the recorded file; else uv asks the index for
            // this package again (its cached page may be older than what was just checked).
            match offline {
                true => out.push("--offline".to_owned()),
                false => out.extend(["--refresh-package".to_owned(), normalize(&self.name)]),
            }
        }
        out.extend(self.flags.iter().cloned());
        let flag = match self.tool {
            Tool::Uv => "--from",
            Tool::Pipx => "--spec",
        };
        out.extend([flag.to_owned(), format!("{}{}=={version}", self.name, self.extras)]);
        out.push(self.command.clone());
        out.extend(self.rest.iter().cloned());
        out
    }
}

/// The record's key for the index a record was made against (in its `stats`: signed with it).
const INDEX_KEY: &str = "index";

/// Whether uv's cache holds the wheel `name` `version` whose entry names `sha256` (hex), in
/// exactly one index folder, beside that index's cached page of `name`: `uvx --offline` then
/// runs those bytes. uv's cache layout (`wheels-vN/index/<index>/<name>/<version>-<tags>.http`,
/// `simple-vN/index/<index>/<name>.rkyv`) is read, never written; any other layout is a miss.
fn uv_cached(cache: &Path, name: &str, version: &str, sha256: &str) -> bool {
    let dirs = |prefix: &str| -> Vec<PathBuf> {
        let Ok(read) = std::fs::read_dir(cache) else { return vec![] };
        read.flatten()
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(prefix)))
            .map(|e| e.path().join("index"))
            .collect()
    };
    let pages: Vec<PathBuf> = dirs("simple-v");
    let mut hits = 0;
    for wheels in dirs("wheels-v") {
        let Ok(indexes) = std::fs::read_dir(&wheels) else { continue };
        for index in indexes.flatten() {
            let Ok(entries) = std::fs::read_dir(index.path().join(name)) else { continue };
            let holds = entries.flatten().any(|e| {
                let file = e.file_name();
                let file = file.to_string_lossy();
                file.starts_with(&format!("{version}-"))
                    && file.ends_with(".http")
                    && std::fs::read(e.path())
                        .is_ok_and(|b| b.windows(sha256.len()).any(|w| w == sha256.as_bytes()))
            });
            let page = pages
                .iter()
                .any(|p| p.join(index.file_name()).join(format!("{name}.rkyv")).is_file());
            if holds && page {
                hits += 1;
            }
        }
    }
    hits == 1
}

/// What `inv` runs now. With a record of this package that the spec still allows (it names no
/// other exact version), that recorded version: from uv's cache when it holds exactly the
/// recorded file for the same index, else as the index has it now. Otherwise what the index
/// resolves the spec to (its exact version, or the newest release).
pub(super) async fn resolve(
    inv: &Invocation,
    program: &Path,
    args: &[String],
    recorded: &Recorded,
    ctx: &Context<'_>,
) -> Result<Found, String> {
    let index = Index::of(inv.by_uv(program, ctx), inv.index.as_deref(), ctx);
    let shown = index.shown();
    let name = normalize(&inv.name);
    let kept = match recorded {
        Recorded::Verified(r)
            if r.artifact.kind == ArtifactKind::Pypi
                && r.artifact.name == name
                && (inv.version.is_none() || r.artifact.version == inv.version) =>
        {
            Some(r)
        }
        _ => None,
    };
    let sub = &args[..inv.sub];
    let stats = BTreeMap::from([(INDEX_KEY.to_owned(), shown.clone())]);
    if let Some(r) = kept
        && let Some(version) = r.artifact.version.as_deref()
        && inv.tool == Tool::Uv
        && r.stats.get(INDEX_KEY) == Some(&shown)
        && let Some(hex) = r.artifact.digest.strip_prefix("sha256:")
        && let Some(cache) = ctx.uv_cache()
    {
        let (cache, n, v, h) = (cache, name.clone(), version.to_owned(), hex.to_owned());
        let hit = tokio::task::spawn_blocking(move || uv_cached(&cache, &n, &v, &h))
            .await
            .unwrap_or(false);
        if hit {
            let args = Some(inv.args_for(sub, version, true));
            return Ok(Found { artifact: r.artifact.clone(), stats, args });
        }
    }
    let want = kept.and_then(|r| r.artifact.version.clone()).or(inv.version.clone());
    let artifact: Artifact = pypi_index::resolve(&index, &name, want.as_deref()).await?;
    let args = artifact.version.as_deref().map(|v| inv.args_for(sub, v, false));
    Ok(Found { artifact, stats, args })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(program: &str, args: &[&str]) -> Option<Invocation> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        Invocation::of(Path::new(program), &args)
    }

    fn rewritten(program: &str, args: &[&str], offline: bool) -> Vec<String> {
        let inv = of(program, args).unwrap();
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        inv.args_for(&args[..inv.sub], "1.2.3", offline)
    }

    #[test]
    fn which_commands_run_an_index_package() {
        let inv = of("/usr/bin/uvx", &["mcp-server-time", "--tz", "UTC"]).unwrap();
        assert_eq!(
            (inv.tool, inv.name.as_str(), inv.version.as_deref()),
            (Tool::Uv, "mcp-server-time", None)
        );
        assert_eq!(
            rewritten("/usr/bin/uvx", &["mcp-server-time", "--tz", "UTC"], true),
            ["--offline", "--from", "mcp-server-time==1.2.3", "mcp-server-time", "--tz", "UTC"]
        );
        let inv = of("/usr/bin/uvx", &["srv@2.0"]).unwrap();
        assert_eq!(inv.version.as_deref(), Some("2.0"));
        assert_eq!(of("/usr/bin/uvx", &["srv@latest"]).unwrap().version, None);
        assert_eq!(of("/usr/bin/uvx", &["Srv[a,b]==1.0.0"]).unwrap().extras, "[a,b]");
        assert_eq!(
            rewritten(
                "/usr/bin/uv",
                &["tool", "run", "-q", "--from", "Srv[x]==1.0", "cmd", "a"],
                false
            ),
            [
                "tool",
                "run",
                "--refresh-package",
                "srv",
                "-q",
                "--from",
                "Srv[x]==1.2.3",
                "cmd",
                "a"
            ]
        );
        let inv = of("/usr/bin/uvx", &["--index-url=http://127.0.0.1:1/simple", "srv"]).unwrap();
        assert_eq!(inv.index.as_deref(), Some("http://127.0.0.1:1/simple"));
        assert_eq!(
            rewritten("/usr/bin/pipx", &["run", "srv==1.0"], false),
            ["run", "--spec", "srv==1.2.3", "srv"]
        );
        assert_eq!(
            rewritten("/usr/bin/pipx", &["run", "--spec", "srv", "tool", "x"], false),
            ["run", "--spec", "srv==1.2.3", "tool", "x"]
        );
        // What it does not know is pinned as an executable.
        for args in [
            &["srv>=1.0"][..],
            &["git+https://example.invalid/srv"],
            &["./local"],
            &["--with-editable", ".", "srv"],
            &["--", "srv"],
            &["-srv"],
            &["srv;python_version<'3'"],
            &["--from", "srv @ https://example.invalid/srv.whl", "srv"],
        ] {
            assert!(of("/usr/bin/uvx", args).is_none(), "{args:?}");
        }
        assert!(of("/usr/bin/pipx", &["install", "srv"]).is_none());
        assert!(of("/usr/bin/pipx", &["run", "--pip-args=--index-url=x", "srv"]).is_none());
        assert!(of("/usr/bin/pipx", &["run", "srv@1.0"]).is_none(), "pipx takes no @version");
        assert!(of("/usr/bin/uv", &["run", "srv"]).is_none());
        assert!(of("/usr/bin/python3", &["srv"]).is_none());
        assert_eq!(normalize("Foo.Bar__baz-"), "foo-bar-baz-");
    }
}
