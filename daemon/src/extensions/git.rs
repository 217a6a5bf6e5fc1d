//! Every git geminid runs, through [`run`]: git reads no repository, configuration or variable
//! geminid did not choose, and runs no program a repository or a URL names (issue 64, items 2
//! and 3).
//!
//! Git finds its repository from its working directory and the `GIT_*` variables, and reads
//! that repository's `.git/config`, where `url.<x>.insteadOf` with `protocol.ext.allow`, or
//! `remote.<url>.uploadpack`, runs a command. So each run says where it works ([`At`]): in a
//! repository geminid made (`GIT_DIR` set, so nothing is discovered), or in an empty folder of
//! its own (nothing to discover, `GIT_CEILING_DIRECTORIES` so nothing above it either). Every
//! `GIT_*` variable of the daemon's environment is dropped; the system's and the user's
//! configuration are not read; [`SAFE_CONFIG`] overrides what runs commands and allows only
//! the transports a source may name. Refs and URLs are checked ([`check_ref`], [`check_url`])
//! and given after `--end-of-options`, so none is read as an option.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::ExtensionError;

/// Where a git run works.
#[derive(Debug, Clone, Copy)]
pub(crate) enum At<'a> {
    /// In no repository (`ls-remote`, `init`, `clone`): an empty folder made for the run.
    Nowhere,
    /// In the repository whose work tree is this folder (one geminid cloned): `GIT_DIR` is
    /// its `.git`.
    Repo(&'a Path),
}

/// The transports a source may use (`Source::infer`'s prefixes; `git@host:path` is ssh).
const ALLOWED_SCHEMES: &[&str] = &["https://", "http://", "ssh://", "file://", "sso://", "git@"];

/// Settings no repository's own `.git/config` (nor the user's) may set for a git geminid runs:
/// Gemini CLI's `getSafeGitEnv`, so that a clone made here is the one Gemini CLI makes, and
/// the transports of [`ALLOWED_SCHEMES`] only (never `ext::`, which runs a command).
const SAFE_CONFIG: &[(&str, &str)] = &[
    ("credential.helper", ""),
    ("core.fsmonitor", ""),
    ("core.hooksPath", "/dev/null"),
    ("core.sshCommand", ""),
    ("core.askPass", ""),
    ("core.pager", "cat"),
    ("core.editor", ""),
    ("sequence.editor", ""),
    ("diff.external", ""),
    ("protocol.allow", "never"),
    ("protocol.ext.allow", "never"),
    ("protocol.https.allow", "always"),
    ("protocol.http.allow", "always"),
    ("protocol.ssh.allow", "always"),
    ("protocol.file.allow", "always"),
    ("protocol.sso.allow", "always"),
];

/// `reference` when git can only read it as a ref (a branch, tag or commit), else why not,
/// naming it.
pub(crate) fn check_ref(reference: &str) -> Result<&str, ExtensionError> {
    let why = if reference.is_empty() {
        Some("it is empty")
    } else if reference.starts_with('-') {
        Some("a ref never starts with '-'")
    } else if reference.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Some("a ref holds no spaces or control characters")
    } else if reference.contains("..")
        || reference.contains("@{")
        || reference.contains(['~', '^', ':', '?', '*', '[', '\\'])
    {
        Some("a ref holds none of '..', '@{', '~', '^', ':', '?', '*', '[', '\\'")
    } else {
        None
    };
    match why {
        None => Ok(reference),
        Some(why) => Err(ExtensionError::Refused(format!(
            "{reference:?} is not a git ref ({why}): pass a branch, tag or commit to --ref"
        ))),
    }
}

/// `url` when it uses a transport of [`ALLOWED_SCHEMES`], else why not, naming it.
pub(crate) fn check_url(url: &str) -> Result<&str, ExtensionError> {
    let scheme = ALLOWED_SCHEMES.iter().any(|s| url.starts_with(s));
    if scheme && !url.chars().any(char::is_control) {
        return Ok(url);
    }
    Err(ExtensionError::Refused(format!(
        "{url:?} is not a repository URL geminid clones from: it must start with one of {} and \
         hold no control characters",
        ALLOWED_SCHEMES.join(", ")
    )))
}

/// Run git with `args` at `at`, within `limit`: its stdout, or its last stderr line as the
/// error.
pub(crate) fn run(args: &[&str], at: At<'_>, limit: Duration) -> Result<String, ExtensionError> {
    let mut cmd = Command::new("git");
    // The daemon's environment is the shell gemctl started it from (a git hook's, say, with
    // GIT_DIR set): none of git's variables from there.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    let null = if cfg!(windows) { "NUL" } else { "/dev/null" };
    cmd.env("GIT_CONFIG_GLOBAL", null)
        .env("GIT_CONFIG_SYSTEM", null)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_COUNT", SAFE_CONFIG.len().to_string())
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PROTOCOL_FROM_USER", "0");
    for (i, (key, value)) in SAFE_CONFIG.iter().enumerate() {
        cmd.env(format!("GIT_CONFIG_KEY_{i}"), key).env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
    // Held until git has exited.
    let scratch;
    match at {
        At::Nowhere => {
            scratch = tempfile::tempdir()
                .map_err(|e| ExtensionError::Io(format!("cannot make a folder for git: {e}")))?;
            let dir = scratch.path();
            cmd.current_dir(dir);
            if let Some(parent) = dir.parent() {
                cmd.env("GIT_CEILING_DIRECTORIES", parent);
            }
        }
        At::Repo(dir) => {
            cmd.current_dir(dir).env("GIT_DIR", dir.join(".git")).env("GIT_WORK_TREE", dir);
        }
    }
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| {
        ExtensionError::Io(format!(
            "cannot run git ({e}): installing from a repository needs git on the PATH"
        ))
    })?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ExtensionError::Io(format!(
                    "git {} took more than {}s; stopped",
                    args.first().unwrap_or(&""),
                    limit.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(ExtensionError::Io(e.to_string())),
        }
    }
    let out = child.wait_with_output().map_err(|e| ExtensionError::Io(e.to_string()))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let why = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message").trim();
    Err(ExtensionError::Refused(format!("git {} failed: {why}", args.first().unwrap_or(&""))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_and_urls_that_git_could_read_as_options_are_refused() {
        for good in ["v1", "main", "refs/heads/x", "HEAD", "0123abcd", "release/1.2"] {
            assert!(check_ref(good).is_ok(), "{good}");
        }
        for bad in ["", "--upload-pack=touch x", "-x", "a b", "a..b", "a\nb", "@{-1}", "a:b"] {
            let err = check_ref(bad).map(str::to_owned).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "the error names it: {err}");
        }
        for good in ["https://h/o/r", "file:///srv/r", "git@h:o/r.git", "ssh://h/r"] {
            assert!(check_url(good).is_ok(), "{good}");
        }
        for bad in ["--upload-pack=x", "ext::sh -c x", "fd::3", "https://h/\nx", "/srv/r"] {
            let err = check_url(bad).map(str::to_owned).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "the error names it: {err}");
        }
    }
}
