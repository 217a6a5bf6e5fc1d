//! Bringing an extension's files into a staging folder: a local folder (copied), a git
//! repository (the `git` CLI: one shallow fetch of the ref, or of HEAD), or a release archive
//! (`.tar.gz`, `.tgz`, `.zip`: read entry by entry, so none can leave the folder, and a single
//! top-level folder stripped, as GitHub's release archives have).
//!
//! Source inference follows Gemini CLI (`http://`, `https://`, `git@`, `ssh://`, `sso://`,
//! `github:`, `gitlab:` are git), plus `file://` (a repository on this machine). Every git run
//! goes through `git::run`: no repository, configuration or variable geminid did not choose.

use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::ExtensionError;
use super::git::{self, At};

/// How long a clone may take.
pub(crate) const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// The most an archive may unpack to (a zip bomb stops here).
pub(crate) const MAX_UNPACKED: u64 = 512 << 20;

/// Where an extension comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A folder on this machine.
    Local(PathBuf),
    /// A git repository, at a ref (branch, tag or commit) or its HEAD.
    Git {
        /// The URL as given (`github:o/r` expanded).
        url: String,
        /// The ref.
        reference: Option<String>,
    },
    /// A release archive file on this machine.
    Archive(PathBuf),
}

fn is_archive(p: &str) -> bool {
    [".tar.gz", ".tgz", ".zip"].iter().any(|x| p.to_ascii_lowercase().ends_with(x))
}

impl Source {
    /// What `source` names; relative paths are taken from `base`.
    pub(crate) fn infer(
        source: &str,
        reference: Option<String>,
        base: &Path,
    ) -> Result<Self, ExtensionError> {
        const GIT: &[&str] =
            &["http://", "https://", "git@", "ssh://", "sso://", "github:", "gitlab:", "file://"];
        if GIT.iter().any(|p| source.starts_with(p)) {
            let url = if let Some(rest) = source.strip_prefix("github:") {
                format!("https://github.com/{rest}")
            } else if let Some(rest) = source.strip_prefix("gitlab:") {
                format!("https://gitlab.com/{rest}")
            } else {
                source.to_owned()
            };
            git::check_url(&url)?;
            if let Some(r) = &reference {
                git::check_ref(r)?;
            }
            return Ok(Self::Git { url, reference });
        }
        if reference.is_some() {
            return Err(ExtensionError::Refused(
                "--ref is for git sources; a local folder or archive has no refs".into(),
            ));
        }
        // As the metadata records it: absolute, without `..` (where it exists).
        let path = base.join(source);
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        if is_archive(source) {
            return Ok(Self::Archive(path));
        }
        Ok(Self::Local(path))
    }

    /// From an installed extension's metadata (for updates).
    pub(crate) fn of_metadata(metadata: &Value) -> Option<Self> {
        let source = metadata.get("source")?.as_str()?;
        let reference = metadata.get("ref").and_then(Value::as_str).map(str::to_owned);
        match metadata.get("type")?.as_str()? {
            "git" => Some(Self::Git { url: source.to_owned(), reference }),
            "local" if is_archive(source) => Some(Self::Archive(source.into())),
            "local" => Some(Self::Local(source.into())),
            _ => None,
        }
    }

    /// The install metadata Gemini CLI writes for it.
    pub(crate) fn metadata(&self) -> Value {
        match self {
            Self::Local(p) | Self::Archive(p) => {
                json!({ "source": p.display().to_string(), "type": "local" })
            }
            Self::Git { url, reference: Some(r) } => {
                json!({ "source": url, "type": "git", "ref": r })
            }
            Self::Git { url, reference: None } => json!({ "source": url, "type": "git" }),
        }
    }

    /// Bring the files into `into` (which must not exist); `progress` is told each step.
    pub(crate) fn fetch(&self, into: &Path, progress: &dyn Fn(&str)) -> Result<(), ExtensionError> {
        match self {
            Self::Local(from) => {
                // The source is said before each step already (audit turn 4, P3).
                progress("copying its files");
                let from = std::fs::canonicalize(from).map_err(|e| {
                    ExtensionError::Refused(format!("cannot install from {}: {e}", from.display()))
                })?;
                if !from.is_dir() {
                    return Err(ExtensionError::Refused(format!(
                        "{} is not a folder: an extension is a folder with a gemini-extension.json \
                         (or a .tar.gz or .zip of one)",
                        from.display()
                    )));
                }
                copy_tree(&from, into)
            }
            Self::Git { url, reference } => {
                progress(&format!(
                    "cloning{}",
                    reference.as_ref().map(|r| format!(" at {r}")).unwrap_or_default()
                ));
                clone(url, reference.as_deref(), into)
            }
            Self::Archive(file) => {
                progress("unpacking");
                unpack(file, into)?;
                strip_single_folder(into)
            }
        }
    }

    /// Whether an update is available: the source's version, or its ref's commit, differs
    /// from what is installed at `dir` (version `installed`).
    pub(crate) fn check_update(
        &self,
        dir: &Path,
        installed: &str,
    ) -> Result<Option<String>, ExtensionError> {
        match self {
            Self::Local(from) => {
                let (m, _) = super::manifest::read(from).map_err(|e| {
                    ExtensionError::Refused(format!(
                        "its source {} cannot be read: {}",
                        from.display(),
                        e.first().map(|d| d.message.as_str()).unwrap_or_default()
                    ))
                })?;
                Ok((m.version != installed).then_some(m.version))
            }
            Self::Archive(_) => Ok(None),
            Self::Git { url, reference } => {
                let url = git::check_url(url)?;
                let reference = git::check_ref(reference.as_deref().unwrap_or("HEAD"))?;
                let remote = git(&["ls-remote", "--end-of-options", url, reference], At::Nowhere)?;
                let remote = remote.split_whitespace().next().unwrap_or_default().to_owned();
                let local = git(&["rev-parse", "HEAD"], At::Repo(dir)).unwrap_or_default();
                Ok((!remote.is_empty() && remote != local.trim()).then_some(remote))
            }
        }
    }
}

/// Run git in no repository, within [`GIT_TIMEOUT`].
fn git(args: &[&str], at: At<'_>) -> Result<String, ExtensionError> {
    git::run(args, at, GIT_TIMEOUT)
}

/// Clone `url` at `reference` (its HEAD without one) into `into` (which must not exist) as
/// Gemini CLI 0.61's `cloneFromGit` does (a shallow clone, the ref fetched, `FETCH_HEAD`
/// checked out), each step within `limit`: the folder, `.git` and all, is the one Gemini CLI's
/// install or update of it copies in.
pub(crate) fn clone_as_gemini_cli(
    url: &str,
    reference: Option<&str>,
    into: &Path,
    limit: Duration,
) -> Result<(), ExtensionError> {
    let (url, reference) = (git::check_url(url)?, git::check_ref(reference.unwrap_or("HEAD"))?);
    std::fs::create_dir(into)
        .map_err(|e| ExtensionError::Io(format!("cannot make {}: {e}", into.display())))?;
    let dir = into.display().to_string();
    let opts = ["--quiet", "--depth", "1", "--end-of-options"];
    git::run(&[&["clone"], &opts[..], &[url, &dir]].concat(), At::Nowhere, limit)?;
    git::run(
        &["fetch", "--quiet", "--end-of-options", "origin", reference],
        At::Repo(into),
        limit,
    )?;
    git::run(&["checkout", "--quiet", "FETCH_HEAD"], At::Repo(into), limit)?;
    Ok(())
}

fn clone(url: &str, reference: Option<&str>, into: &Path) -> Result<(), ExtensionError> {
    let (url, reference) = (git::check_url(url)?, git::check_ref(reference.unwrap_or("HEAD"))?);
    std::fs::create_dir(into)
        .map_err(|e| ExtensionError::Io(format!("cannot make {}: {e}", into.display())))?;
    let dir = into.display().to_string();
    git(&["init", "--quiet", "--end-of-options", &dir], At::Nowhere)?;
    let repo = At::Repo(into);
    git(&["remote", "add", "--end-of-options", "origin", url], repo)?;
    let fetch = ["fetch", "--quiet", "--depth", "1", "--end-of-options", "origin", reference];
    git(&fetch, repo).map_err(|e| ExtensionError::Refused(format!("cannot clone {url}: {e}")))?;
    git(&["checkout", "--quiet", "FETCH_HEAD"], repo)?;
    Ok(())
}

/// `name` as a path inside the folder, or why it may not be.
fn inside(name: &Path) -> Result<PathBuf, ExtensionError> {
    let mut out = PathBuf::new();
    for c in name.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => {
                return Err(ExtensionError::Refused(format!(
                    "the archive's entry {} would be written outside the extension's folder: \
                     refused",
                    name.display()
                )));
            }
        }
    }
    Ok(out)
}

/// A link at `entry` (inside) pointing to `target` must stay inside too.
fn link_inside(entry: &Path, target: &Path) -> Result<(), ExtensionError> {
    let joined = entry.parent().unwrap_or(Path::new("")).join(target);
    let mut depth = 0i32;
    for c in joined.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth -= 1,
            _ => depth = -1,
        }
        if depth < 0 {
            return Err(ExtensionError::Refused(format!(
                "the archive's link {} points outside the extension ({}): refused",
                entry.display(),
                target.display()
            )));
        }
    }
    Ok(())
}

fn unpack(file: &Path, into: &Path) -> Result<(), ExtensionError> {
    let io =
        |e: std::io::Error| ExtensionError::Io(format!("cannot unpack {}: {e}", file.display()));
    let bad = |e: String| {
        ExtensionError::Refused(format!("{} is not a readable archive: {e}", file.display()))
    };
    let f = std::fs::File::open(file).map_err(|e| {
        ExtensionError::Refused(format!("cannot install from {}: {e}", file.display()))
    })?;
    std::fs::create_dir(into).map_err(io)?;
    let mut total = 0u64;
    let mut budget = |n: u64| {
        total += n;
        if total > MAX_UNPACKED {
            Err(ExtensionError::Refused(format!(
                "{} unpacks to more than {} MiB: refused",
                file.display(),
                MAX_UNPACKED >> 20
            )))
        } else {
            Ok(())
        }
    };
    let lower = file.to_string_lossy().to_ascii_lowercase();
    // A `.skill` (an Agent Skill's bundle) is a zip.
    if lower.ends_with(".zip") || lower.ends_with(".skill") {
        let mut zip = zip::ZipArchive::new(f).map_err(|e| bad(e.to_string()))?;
        for i in 0..zip.len() {
            let mut entry = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
            let name = entry.name().map_err(|e| bad(e.to_string()))?.into_owned();
            let rel = inside(Path::new(&name))?;
            let dest = into.join(&rel);
            if entry.is_dir() {
                std::fs::create_dir_all(&dest).map_err(io)?;
                continue;
            }
            if entry.is_symlink() {
                let mut target = String::new();
                entry.read_to_string(&mut target).map_err(io)?;
                link_inside(&rel, Path::new(&target))?;
                write_link(&dest, Path::new(&target))?;
                continue;
            }
            budget(entry.size())?;
            if let Some(d) = dest.parent() {
                std::fs::create_dir_all(d).map_err(io)?;
            }
            let mut out = std::fs::File::create(&dest).map_err(io)?;
            let copied =
                std::io::copy(&mut (&mut entry).take(MAX_UNPACKED + 1), &mut out).map_err(io)?;
            budget(copied.saturating_sub(entry.size()))?;
        }
        return Ok(());
    }
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(f));
    for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let name = entry.path().map_err(|e| bad(e.to_string()))?.into_owned();
        let rel = inside(&name)?;
        if rel.as_os_str().is_empty() {
            continue;
        }
        let dest = into.join(&rel);
        let kind = entry.header().entry_type();
        match kind {
            tar::EntryType::Directory => std::fs::create_dir_all(&dest).map_err(io)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                budget(entry.size())?;
                if let Some(d) = dest.parent() {
                    std::fs::create_dir_all(d).map_err(io)?;
                }
                let mut out = std::fs::File::create(&dest).map_err(io)?;
                std::io::copy(&mut (&mut entry).take(MAX_UNPACKED + 1), &mut out).map_err(io)?;
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|e| bad(e.to_string()))?
                    .unwrap_or_default()
                    .into_owned();
                link_inside(&rel, &target)?;
                write_link(&dest, &target)?;
            }
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => {}
            other => {
                return Err(ExtensionError::Refused(format!(
                    "the archive's entry {} is a {other:?}, which an extension may not hold: refused",
                    name.display()
                )));
            }
        }
    }
    Ok(())
}

fn write_link(dest: &Path, target: &Path) -> Result<(), ExtensionError> {
    let io =
        |e: std::io::Error| ExtensionError::Io(format!("cannot write {}: {e}", dest.display()));
    if let Some(d) = dest.parent() {
        std::fs::create_dir_all(d).map_err(io)?;
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink(target, dest).map_err(io)?;
    #[cfg(not(unix))]
    let _ = target;
    Ok(())
}

/// An archive whose only entry is one folder: that folder's contents are the extension.
fn strip_single_folder(into: &Path) -> Result<(), ExtensionError> {
    let io =
        |e: std::io::Error| ExtensionError::Io(format!("cannot arrange {}: {e}", into.display()));
    let entries: Vec<_> = std::fs::read_dir(into).map_err(io)?.filter_map(Result::ok).collect();
    let [only] = entries.as_slice() else { return Ok(()) };
    if !only.file_type().map_err(io)?.is_dir() || into.join(super::manifest::FILE).exists() {
        return Ok(());
    }
    let inner = only.path();
    let aside = into.with_extension("strip");
    std::fs::rename(&inner, &aside).map_err(io)?;
    std::fs::remove_dir(into).map_err(io)?;
    std::fs::rename(&aside, into).map_err(io)
}

/// Copy `from` into `to` (which must not exist). A symlink is copied as a link only when it
/// points inside `from`; one leaving it is refused (it would reach files the person never saw).
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<(), ExtensionError> {
    let io = |what: &Path, e: std::io::Error| {
        ExtensionError::Io(format!("cannot copy {}: {e}", what.display()))
    };
    let root = std::fs::canonicalize(from).map_err(|e| io(from, e))?;
    let mut pending = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = pending.pop() {
        std::fs::create_dir(&dst).map_err(|e| io(&dst, e))?;
        for entry in std::fs::read_dir(&src).map_err(|e| io(&src, e))? {
            let entry = entry.map_err(|e| io(&src, e))?;
            let (s, d) = (entry.path(), dst.join(entry.file_name()));
            let kind = entry.file_type().map_err(|e| io(&s, e))?;
            if kind.is_dir() {
                pending.push((s, d));
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&s).map_err(|e| io(&s, e))?;
                let inside = std::fs::canonicalize(&s).is_ok_and(|t| t.starts_with(&root));
                if !inside || target.is_absolute() {
                    return Err(ExtensionError::Refused(format!(
                        "{} is a link to {}, outside the extension: extensions may only link \
                         to their own files (relatively)",
                        s.display(),
                        target.display()
                    )));
                }
                #[cfg(unix)]
                std::os::unix::fs::symlink(&target, &d).map_err(|e| io(&d, e))?;
                #[cfg(not(unix))]
                std::fs::copy(&s, &d).map(drop).map_err(|e| io(&s, e))?;
            } else if kind.is_file() {
                std::fs::copy(&s, &d).map_err(|e| io(&s, e))?;
            } else {
                return Err(ExtensionError::Refused(format!(
                    "{} is not a regular file or folder",
                    s.display()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_inferred_as_gemini_cli_infers_them() -> anyhow::Result<()> {
        let base = Path::new("/ws");
        let git = |u: &str| Source::Git { url: u.to_owned(), reference: None };
        for (given, want) in [
            ("https://github.com/o/r", git("https://github.com/o/r")),
            ("git@github.com:o/r.git", git("git@github.com:o/r.git")),
            ("github:o/r", git("https://github.com/o/r")),
            ("file:///srv/r.git", git("file:///srv/r.git")),
            ("ext", Source::Local("/ws/ext".into())),
            ("/abs/ext", Source::Local("/abs/ext".into())),
            ("rel/x.tar.gz", Source::Archive("/ws/rel/x.tar.gz".into())),
            ("/a/x.ZIP", Source::Archive("/a/x.ZIP".into())),
        ] {
            assert_eq!(
                Source::infer(given, None, base).map_err(|e| anyhow::anyhow!("{e}"))?,
                want,
                "{given}"
            );
        }
        assert!(Source::infer("ext", Some("v1".into()), base).is_err(), "--ref on a folder");
        let with_ref = Source::infer("https://x/r", Some("v1".into()), base)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        assert_eq!(
            with_ref.metadata(),
            json!({"source": "https://x/r", "type": "git", "ref": "v1"})
        );
        assert_eq!(Source::of_metadata(&with_ref.metadata()), Some(with_ref));
        Ok(())
    }

    #[test]
    fn entries_and_links_must_stay_inside() {
        for p in ["a/b", "./a", "a/./b"] {
            assert!(inside(Path::new(p)).is_ok(), "{p}");
        }
        for p in ["../a", "a/../../b", "/etc/passwd"] {
            assert!(inside(Path::new(p)).is_err(), "{p}");
        }
        assert!(link_inside(Path::new("a/l"), Path::new("../b")).is_ok());
        assert!(link_inside(Path::new("a/l"), Path::new("../../b")).is_err());
        assert!(link_inside(Path::new("l"), Path::new("/etc/passwd")).is_err());
    }
}
