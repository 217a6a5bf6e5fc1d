//! What a local server runs, against what was recorded on its first start (`crate::pins::
//! artifact`), checked before every start: an npm package run by `npx` or `npm exec` runs as
//! the recorded exact version whose integrity matches the record (`npm.rs`), a Python package
//! run by `uvx`, `uv tool run` or `pipx run` likewise with its file's sha256 (`pypi.rs`), any
//! other command is its executable's SHA-256 (and a script's `#!` interpreter's). A different
//! artifact holds the server (not started) where its artifact pinning is `enforce`, until
//! `mcp/accept`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use geminid_protocol::pins::{Artifact, ArtifactKind, ArtifactStatus, PinMode};
use sha2::{Digest, Sha256};

use super::npm::Found;
use super::server::{Observer, Server};
use super::spec::LaunchSpec;
use crate::pins::KeepError;
use crate::pins::artifact::Recorded;

/// What a start may do.
pub(super) enum Start {
    /// Start, as the spec says or as this one (the recorded package version).
    Run(Option<Box<LaunchSpec>>),
    /// Held: not started, and why.
    Held(String),
    /// What it runs could not be found out (a registry that does not answer): a failed
    /// attempt, tried again.
    Failed(String),
}

/// What `stat` says of a file that changes when its bytes could have.
#[cfg(unix)]
fn fingerprint(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(format!(
        "{}:{}:{}:{}.{}:{}.{}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

#[cfg(not(unix))]
fn fingerprint(path: &Path) -> Option<String> {
    let m = std::fs::metadata(path).ok()?;
    let modified = m.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(format!("{}:{}", m.len(), modified.as_nanos()))
}

/// `sha256:<hex>` of a file's bytes.
pub(super) fn sha256_file(path: &Path) -> Result<String, String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    use std::io::Read;
    let (mut h, mut buf) = (Sha256::new(), vec![0u8; 1 << 16]);
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Ok(format!("sha256:{}", crate::pins::canon::hex(&h.finalize())))
}

/// A script's interpreter: its `#!` line's program, `env`'s argument found on `path`.
fn interpreter(program: &Path, path: Option<&String>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next()?).into_owned();
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|n| n == "env") {
        let named = words.find(|w| !w.starts_with('-'))?;
        return super::spec::find_program(named, path, None);
    }
    Some(first)
}

/// The executable `program` (and its interpreter) as found now. Files whose `stat` answers
/// as `known` recorded are not read again: their digest is the recorded one.
pub(super) fn executable(program: &Path, path: Option<&String>, known: Option<&Recorded>) -> Found {
    let recorded = match known {
        Some(Recorded::Verified(r)) => Some(r),
        _ => None,
    };
    let mut stats = BTreeMap::new();
    let mut digest_of = |file: &Path, recorded_digest: Option<&str>| -> String {
        let key = file.display().to_string();
        let stat = fingerprint(file).unwrap_or_default();
        let unchanged = recorded.is_some_and(|r| r.stats.get(&key) == Some(&stat));
        stats.insert(key, stat);
        match recorded_digest {
            Some(d) if unchanged => d.to_owned(),
            _ => sha256_file(file).unwrap_or_else(|e| format!("unreadable ({e})")),
        }
    };
    let digest = digest_of(program, recorded.map(|r| r.artifact.digest.as_str()));
    let interp = interpreter(program, path).map(|i| {
        let old = recorded
            .and_then(|r| r.artifact.interpreter.as_deref())
            .and_then(|t| t.strip_prefix(&format!("{} ", i.display())));
        format!("{} {}", i.display(), digest_of(&i, old))
    });
    let artifact = Artifact {
        kind: ArtifactKind::Executable,
        name: program.display().to_string(),
        version: None,
        digest,
        published: None,
        interpreter: interp,
    };
    Found { artifact, stats, args: None }
}

/// Whether `a` is what `b` records.
pub(super) fn same(a: &Artifact, b: &Artifact) -> bool {
    (&a.kind, &a.name, &a.version, &a.digest, &a.interpreter)
        == (&b.kind, &b.name, &b.version, &b.digest, &b.interpreter)
}

impl Server {
    /// Its artifact as `mcp/listServers` shows it.
    pub(crate) fn artifact_status(&self) -> Option<ArtifactStatus> {
        let state = self.pins.lock();
        let mut status = state.artifact.clone();
        if let Some((offer, _)) = &state.artifact_offer {
            let s = status.get_or_insert(ArtifactStatus {
                mode: self.artifact_pinning,
                pinned: None,
                differs: None,
                held: false,
                first_use: false,
                problem: None,
                offered: None,
            });
            s.offered = Some(offer.clone());
        }
        status
    }

    fn set_artifact(&self, status: Option<ArtifactStatus>, found: Option<Found>) {
        let mut state = self.pins.lock();
        state.artifact = status;
        state.artifact_found = found.map(|f| (f.artifact, f.stats));
    }
}

/// What the server's spec runs with these arguments instead.
fn with_args(spec: &LaunchSpec, new: Option<Vec<String>>) -> Option<Box<LaunchSpec>> {
    let mut spec = spec.clone();
    match (&mut spec, new) {
        (LaunchSpec::Stdio { args, .. }, Some(new)) => *args = new,
        _ => return None,
    }
    Some(Box::new(spec))
}

/// What `program args` runs now (`recorded`: what was, for the files not to hash again and
/// the package version to keep).
async fn resolve(
    program: &Path,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
    recorded: &Recorded,
) -> Result<Found, String> {
    if let Some(inv) = super::pypi::Invocation::of(program, args) {
        let ctx = super::pypi::Context { env, cwd };
        return super::pypi::resolve(&inv, program, args, recorded, &ctx)
            .await
            .map_err(|e| format!("what it runs could not be resolved: {e}"));
    }
    if let Some(inv) = super::npm::Invocation::of(program, args) {
        let ctx = super::npm::Context { env, cwd };
        return super::npm::resolve(&inv, recorded, &ctx)
            .await
            .map_err(|e| format!("what it runs could not be resolved: {e}"));
    }
    let path = env.get("PATH").cloned();
    if let Recorded::Verified(r) = recorded
        && r.stats.iter().all(|(file, stat)| fingerprint(Path::new(file)).as_ref() == Some(stat))
        && r.artifact.name == program.display().to_string()
    {
        // Nothing hashed changed (`stat` says so): no file is read but the `#!` line.
        return Ok(executable(program, path.as_ref(), Some(recorded)));
    }
    let (program, known) = (program.to_path_buf(), recorded.clone());
    tokio::task::spawn_blocking(move || executable(&program, path.as_ref(), Some(&known)))
        .await
        .map_err(|e| format!("its executable could not be hashed: {e}"))
}

/// Check what `server` runs before it starts (see the module).
pub(super) async fn check(server: &Arc<Server>, sup: &dyn Observer) -> Start {
    let mode = server.artifact_pinning;
    let LaunchSpec::Stdio { args, program: Some(program), env, cwd, .. } = &server.spec else {
        return Start::Run(None);
    };
    if mode == PinMode::Off {
        server.set_artifact(None, None);
        return Start::Run(None);
    }
    let pins = sup.pins();
    let (key, name) = (server.pin_key.0.clone(), server.name.clone());
    let (p, k) = (pins.clone(), key.clone());
    // A record verified earlier in this run is in memory: an unchanged start then costs a
    // `stat` (or a lockfile read), no thread hop.
    let recorded = match pins.artifact_known(&key) {
        Some(known) => known,
        None => tokio::task::spawn_blocking(move || p.artifact(&k))
            .await
            .unwrap_or_else(|e| Recorded::Unverified(format!("it could not be read: {e}"))),
    };
    let found = match resolve(program, args, env.expose(), cwd.as_deref(), &recorded).await {
        Ok(found) => found,
        Err(e) => return Start::Failed(e),
    };
    let enforce = mode == PinMode::Enforce;
    let (pinned, problem) = match &recorded {
        Recorded::None => {
            let (artifact, stats) = (found.artifact.clone(), found.stats.clone());
            let rec = tokio::task::spawn_blocking(move || {
                pins.record_artifact(&key, &name, artifact, stats)
            })
            .await;
            let status = match rec.map_err(KeepError::from).and_then(|r| r) {
                Ok(r) => {
                    server.log.push(
                        "geminid",
                        &format!("recorded what it runs on first start: {}", line(&r.artifact)),
                    );
                    ArtifactStatus {
                        mode,
                        pinned: Some(r.artifact),
                        differs: None,
                        held: false,
                        first_use: true,
                        problem: None,
                        offered: None,
                    }
                }
                Err(e) => {
                    unrecorded(mode, format!("it could not be recorded ({e}); it runs unpinned"))
                }
            };
            let args = found.args.clone();
            server.set_artifact(Some(status), None);
            return Start::Run(with_args(&server.spec, args));
        }
        Recorded::Verified(r) if same(&r.artifact, &found.artifact) => {
            if r.stats != found.stats {
                let (artifact, stats) = (found.artifact.clone(), found.stats.clone());
                let (p, k) = (pins.clone(), key.clone());
                let _ = tokio::task::spawn_blocking(move || {
                    p.record_artifact(&k, &name, artifact, stats)
                })
                .await;
            }
            let first_use = server.artifact_status().is_some_and(|s| s.first_use);
            let status = ArtifactStatus {
                mode,
                pinned: Some(r.artifact.clone()),
                differs: None,
                held: false,
                first_use,
                problem: None,
                offered: None,
            };
            let args = found.args.clone();
            server.set_artifact(Some(status), None);
            return Start::Run(with_args(&server.spec, args));
        }
        Recorded::Verified(r) => (Some(r.artifact.clone()), None),
        Recorded::Unverified(why) => {
            (None, Some(format!("its artifact record failed its check ({why})")))
        }
    };
    let was_held = server
        .artifact_status()
        .is_some_and(|s| s.held && s.differs == Some(found.artifact.clone()));
    let what = match (&pinned, &problem) {
        (Some(old), _) => {
            format!("it runs {} where {} was recorded", line(&found.artifact), line(old))
        }
        (None, Some(p)) => format!("{p}; it resolves to {}", line(&found.artifact)),
        (None, None) => String::new(),
    };
    let status = ArtifactStatus {
        mode,
        pinned,
        differs: Some(found.artifact.clone()),
        held: enforce,
        first_use: false,
        problem: problem.clone(),
        offered: None,
    };
    let args = found.args.clone();
    server.set_artifact(Some(status), Some(found));
    let s = &server.name;
    if !was_held && let Some(audit) = &sup.pins().audit {
        let note =
            format!("artifact differs ({}): {what}", if enforce { "held" } else { "started" });
        audit.note(s, s, "pins", Some(note));
    }
    if enforce {
        return Start::Held(format!(
            "MCP server '{s}' is held: {what}; `gemctl mcp review {s}` shows it, `gemctl mcp \
             accept {s}` takes it"
        ));
    }
    server.log.push("geminid", &format!("{what} (started: artifact pinning is warn)"));
    Start::Run(with_args(&server.spec, args))
}

fn unrecorded(mode: PinMode, problem: String) -> ArtifactStatus {
    ArtifactStatus {
        mode,
        pinned: None,
        differs: None,
        held: false,
        first_use: false,
        problem: Some(problem),
        offered: None,
    }
}

/// An artifact in one line: `pkg 1.0.1 (sha512-…)`, `/usr/bin/x (sha256:…)`.
pub(crate) fn line(a: &Artifact) -> String {
    let short = |d: &str| -> String { d.chars().take(23).collect::<String>() + "…" };
    let mut out = a.name.clone();
    if let Some(v) = &a.version {
        out.push_str(&format!(" {v}"));
    }
    out.push_str(&format!(" ({})", short(&a.digest)));
    if let Some(i) = &a.interpreter {
        out.push_str(&format!(" run by {}", short(i)));
    }
    out
}

/// `mcp/accept` of a held artifact: record what it resolves to now, then start it. `None`:
/// nothing of it is held.
/// An offer of `mcp/update` is taken first: it is the newer intent.
pub(crate) async fn accept(
    server: &Arc<Server>,
    pins: &Arc<crate::pins::Pins>,
) -> Option<Result<Artifact, String>> {
    let (artifact, stats) = {
        let state = server.pins.lock();
        state.artifact_offer.clone().or_else(|| state.artifact_found.clone())?
    };
    let (p, key, name) = (pins.clone(), server.pin_key.0.clone(), server.name.clone());
    let a = artifact.clone();
    let rec = tokio::task::spawn_blocking(move || p.record_artifact(&key, &name, a, stats)).await;
    match rec {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Some(Err(e.to_string())),
        Err(e) => return Some(Err(e.to_string())),
    }
    server.log.push("geminid", &format!("artifact accepted: {}", line(&artifact)));
    server.set_artifact(None, None);
    server.pins.lock().artifact_offer = None;
    server.send(super::mailbox::Cmd::Restart);
    Some(Ok(artifact))
}
