//! Where the control socket lives. Both the daemon and its clients call [`socket_path`], so they
//! agree without configuration.
//!
//! Order: an explicit path (`--socket`), then `GEMINID_SOCKET`, then on Unix
//! `$XDG_RUNTIME_DIR/geminid/geminid.sock`; without `XDG_RUNTIME_DIR`, on Linux the directory
//! systemd gives it, `/run/user/<uid>`, when it exists and is the user's own (MCP clients start
//! `gemctl mcp serve` with a trimmed environment, and it must still find the daemon systemd
//! started); else `~/.gemini/run/geminid.sock` (home is `GEMINI_CLI_HOME` when set, as Gemini
//! CLI does). On Windows, the named pipe `\\.\pipe\geminid-<user>`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Environment variable that overrides the socket path.
pub const SOCKET_ENV: &str = "GEMINID_SOCKET";

/// Why no socket path could be worked out.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot work out where the geminid socket is: neither {SOCKET_ENV}, XDG_RUNTIME_DIR nor HOME \
     is set; pass --socket PATH or set {SOCKET_ENV}"
)]
pub struct NoSocketPath;

/// The socket path from an explicit choice or the process environment.
pub fn socket_path(explicit: Option<&Path>) -> Result<PathBuf, NoSocketPath> {
    socket_path_from(explicit, |k| match std::env::var_os(k) {
        None if k == "XDG_RUNTIME_DIR" => user_runtime_dir().map(OsString::from),
        v => v,
    })
}

/// `/run/user/<uid>` when it is a directory of this user's that only they may enter.
#[cfg(target_os = "linux")]
fn user_runtime_dir() -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    // `/proc/self` belongs to the process's effective user.
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    private_dir(Path::new("/run/user"), uid)
}

/// `base/<uid>` when it is a directory owned by `uid` with no access for others.
#[cfg(target_os = "linux")]
fn private_dir(base: &Path, uid: u32) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let dir = base.join(uid.to_string());
    let m = std::fs::metadata(&dir).ok()?;
    (m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0).then_some(dir)
}

#[cfg(not(target_os = "linux"))]
fn user_runtime_dir() -> Option<PathBuf> {
    None
}

/// [`socket_path`] with the environment supplied by the caller (for tests).
pub fn socket_path_from(
    explicit: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf, NoSocketPath> {
    let non_empty = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = non_empty(SOCKET_ENV) {
        return Ok(PathBuf::from(p));
    }
    platform_default(&non_empty)
}

/// On Unix, the lock file a daemon on `socket` holds for as long as its process lives: the
/// socket's path with `.lock` appended. (On Windows it is in the daemon's data directory.)
#[cfg(unix)]
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut p = socket.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Whether some process holds the daemon lock file at `lock` (a daemon running, or still
/// shutting down: it holds the lock until its process exits).
pub fn lock_held(lock: &Path) -> bool {
    std::fs::File::open(lock)
        .is_ok_and(|f| matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)))
}

#[cfg(unix)]
fn platform_default(env: &impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, NoSocketPath> {
    if let Some(dir) = env("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Ok(dir.join("geminid").join("geminid.sock"));
    }
    let home = env("GEMINI_CLI_HOME").or_else(|| env("HOME")).ok_or(NoSocketPath)?;
    Ok(PathBuf::from(home).join(".gemini").join("run").join("geminid.sock"))
}

#[cfg(windows)]
fn platform_default(env: &impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, NoSocketPath> {
    let user = env("USERNAME").ok_or(NoSocketPath)?;
    Ok(PathBuf::from(format!(r"\\.\pipe\geminid-{}", user.to_string_lossy())))
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(explicit: Option<&str>, vars: &[(&str, &str)]) -> Option<PathBuf> {
        let vars: HashMap<String, OsString> =
            vars.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
        socket_path_from(explicit.map(Path::new), |k| vars.get(k).cloned()).ok()
    }

    #[test]
    fn precedence() {
        let all = [
            ("GEMINID_SOCKET", "/env.sock"),
            ("XDG_RUNTIME_DIR", "/run/user/1"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(resolve(Some("/x.sock"), &all), Some("/x.sock".into()));
        assert_eq!(resolve(None, &all), Some("/env.sock".into()));
        assert_eq!(resolve(None, &all[1..]), Some("/run/user/1/geminid/geminid.sock".into()));
        assert_eq!(resolve(None, &all[2..]), Some("/home/u/.gemini/run/geminid.sock".into()));
        assert_eq!(
            resolve(None, &[("HOME", "/home/u"), ("GEMINI_CLI_HOME", "/g")]),
            Some("/g/.gemini/run/geminid.sock".into())
        );
        assert_eq!(resolve(None, &[]), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_runtime_dir_systemd_makes_is_used_only_when_it_is_private() {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let base = std::env::temp_dir().join(format!("geminid-run-user-{}", std::process::id()));
        let me = std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
        let dir = base.join(me.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(private_dir(&base, me), None, "open to others");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(private_dir(&base, me), Some(dir.clone()));
        assert_eq!(private_dir(&base, me + 1), None, "another user's is not there");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn empty_and_relative_values_are_ignored() {
        let vars = [("GEMINID_SOCKET", ""), ("XDG_RUNTIME_DIR", "rel"), ("HOME", "/h")];
        assert_eq!(resolve(None, &vars), Some("/h/.gemini/run/geminid.sock".into()));
    }
}
