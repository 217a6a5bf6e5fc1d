//! Where the daemon keeps its state: `--data-dir`, else `$XDG_STATE_HOME/geminid`, else
//! `~/.local/state/geminid` (on Windows `%LOCALAPPDATA%\geminid`).

use std::ffi::OsString;
use std::path::PathBuf;

/// Create `dir` and its missing parents, private to this user (0700 on Unix); an existing
/// directory is left as it is.
pub(crate) fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Why no data directory could be worked out.
#[derive(Debug, thiserror::Error)]
#[error("cannot work out the data directory: set XDG_STATE_HOME or HOME, or pass --data-dir")]
pub(crate) struct NoDataDir;

/// The data directory from an explicit choice or the environment supplied by the caller.
pub(crate) fn data_dir_from(
    explicit: Option<PathBuf>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf, NoDataDir> {
    if let Some(p) = explicit {
        return Ok(p);
    }
    let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if cfg!(windows) {
        return var("LOCALAPPDATA").map(|p| p.join("geminid")).ok_or(NoDataDir);
    }
    if let Some(state) = var("XDG_STATE_HOME").filter(|p| p.is_absolute()) {
        return Ok(state.join("geminid"));
    }
    var("HOME").map(|h| h.join(".local").join("state").join("geminid")).ok_or(NoDataDir)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn precedence() {
        let env = |k: &str| match k {
            "XDG_STATE_HOME" => Some(OsString::from("/state")),
            "HOME" => Some(OsString::from("/home/u")),
            _ => None,
        };
        let home_only = |k: &str| (k == "HOME").then(|| OsString::from("/home/u"));
        assert_eq!(data_dir_from(Some("/x".into()), env).ok(), Some("/x".into()));
        assert_eq!(data_dir_from(None, env).ok(), Some("/state/geminid".into()));
        assert_eq!(
            data_dir_from(None, home_only).ok(),
            Some("/home/u/.local/state/geminid".into())
        );
        assert!(data_dir_from(None, |_| None).is_err());
    }
}
