//! The daemon's own configuration file, for the knobs its flags set (`--mcp-linger`, ...), so
//! that a daemon `gemctl` starts on demand runs with the same settings as one started by hand
//! or by systemd. `$XDG_CONFIG_HOME/geminid/config.toml` (else `~/.config/geminid/config.toml`),
//! or `--config PATH` / `GEMINID_CONFIG`. Keys are the flags' names without `--`; each value
//! becomes that flag's default, so a flag given and a `GEMINID_*` variable still win.

use std::path::{Path, PathBuf};

/// The variable naming the file.
pub(crate) const CONFIG_ENV: &str = "GEMINID_CONFIG";

/// Flags the file may not set: where the file itself is, and the socket (clients find the
/// daemon by the socket they are given, not by the daemon's file).
const NOT_IN_FILE: &[&str] = &["config", "socket", "help", "version"];

/// Why the file cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileError {
    /// It could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not TOML, or a value is not a string, number or boolean.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line where one is known.
        message: String,
    },
}

/// Where the file is: `--config` (looked for in `argv` before the flags are parsed), else
/// `GEMINID_CONFIG`, else the XDG place; and whether it was named explicitly (then it must
/// exist).
pub(crate) fn locate(
    argv: &[std::ffi::OsString],
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Option<(PathBuf, bool)> {
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        let a = a.to_string_lossy();
        if a == "--" {
            break;
        }
        if a == "--config" {
            return args.next().map(|p| (PathBuf::from(p), true));
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some((PathBuf::from(p), true));
        }
    }
    if let Some(p) = env(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(p), true));
    }
    let base = env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some((base.join("geminid").join("config.toml"), false))
}

/// The file's `key = value` pairs, values as the flag would be written. A missing file that
/// was not named is no settings.
pub(crate) fn read(path: &Path, named: bool) -> Result<Vec<(String, String)>, FileError> {
    let text = match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            return Err(FileError::Invalid {
                path: path.to_path_buf(),
                message: "not a regular file".into(),
            });
        }
        Ok(m) if m.len() > 1 << 20 => {
            return Err(FileError::Invalid {
                path: path.to_path_buf(),
                message: format!("{} bytes; a configuration file is at most 1 MiB", m.len()),
            });
        }
        Ok(_) => std::fs::read_to_string(path)
            .map_err(|source| FileError::Read { path: path.to_path_buf(), source })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => return Ok(vec![]),
        Err(source) => return Err(FileError::Read { path: path.to_path_buf(), source }),
    };
    parse(&text).map_err(|message| FileError::Invalid { path: path.to_path_buf(), message })
}

fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        e.to_string().lines().next().unwrap_or("invalid TOML").to_owned()
    })?;
    let mut out = Vec::new();
    for (key, item) in doc.iter() {
        let value = item.as_value().ok_or_else(|| {
            format!("`{key}` is a table; the file holds `flag-name = value` pairs only")
        })?;
        let text = match value {
            toml_edit::Value::String(s) => s.value().clone(),
            toml_edit::Value::Integer(i) => i.value().to_string(),
            toml_edit::Value::Boolean(b) => b.value().to_string(),
            toml_edit::Value::Float(f) => f.value().to_string(),
            _ => return Err(format!("`{key}`: give a string, number or boolean")),
        };
        out.push((key.to_owned(), text));
    }
    Ok(out)
}

/// Make each pair the default of the flag of that name; a key that names no flag is an
/// error that lists the ones there are.
pub(crate) fn apply(
    mut cmd: clap::Command,
    path: &Path,
    pairs: &[(String, String)],
) -> Result<clap::Command, FileError> {
    let known: Vec<(String, String)> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| (l.to_owned(), a.get_id().to_string())))
        .filter(|(l, _)| !NOT_IN_FILE.contains(&l.as_str()))
        .collect();
    for (key, value) in pairs {
        let flag = key.replace('_', "-");
        let Some((_, id)) = known.iter().find(|(l, _)| *l == flag) else {
            let names: Vec<&str> = known.iter().map(|(l, _)| l.as_str()).collect();
            let near = geminid_protocol::suggest::closest(&flag, names.iter().copied())
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            return Err(FileError::Invalid {
                path: path.to_path_buf(),
                message: format!(
                    "unknown setting `{key}`{near}; the settings are: {}",
                    names.join(", ")
                ),
            });
        };
        let value = value.clone();
        cmd = cmd.mut_arg(id, |a| a.default_value(value));
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn pairs_and_refusals() {
        assert_eq!(
            parse(
                "mcp-linger = \"5m\"\nmax-connections = 64\n# a comment\nmcp_stop_grace = '1s'\n"
            ),
            Ok(vec![
                ("mcp-linger".into(), "5m".into()),
                ("max-connections".into(), "64".into()),
                ("mcp_stop_grace".into(), "1s".into()),
            ])
        );
        assert!(parse("[mcp]\nlinger = 1").is_err_and(|e| e.contains("is a table")));
        assert!(parse("x = [1]").is_err_and(|e| e.contains("string, number or boolean")));
        assert!(parse("x = ").is_err());
    }

    #[test]
    fn an_unknown_setting_names_the_one_likely_meant() {
        let cmd = || {
            clap::Command::new("geminid")
                .arg(clap::Arg::new("mcp_idle_memory").long("mcp-idle-memory"))
                .arg(clap::Arg::new("mcp_linger").long("mcp-linger"))
        };
        let refused = |key: &str| {
            let pairs = [(key.to_owned(), "1".to_owned())];
            apply(cmd(), Path::new("/c.toml"), &pairs).err().map(|e| e.to_string())
        };
        assert_eq!(
            refused("mcp-idle-memroy").as_deref(),
            Some(
                "/c.toml: unknown setting `mcp-idle-memroy` (did you mean `mcp-idle-memory`?); \
                 the settings are: mcp-idle-memory, mcp-linger"
            )
        );
        assert_eq!(
            refused("colour").as_deref(),
            Some(
                "/c.toml: unknown setting `colour`; the settings are: mcp-idle-memory, mcp-linger"
            )
        );
        assert_eq!(refused("mcp_linger"), None);
    }

    #[test]
    fn where_the_file_is() {
        let os = |s: &str| std::ffi::OsString::from(s);
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| os(v))
        };
        let argv = [os("geminid"), os("--config"), os("/c.toml")];
        assert_eq!(locate(&argv, env(&[])), Some(("/c.toml".into(), true)));
        let argv = [os("geminid"), os("--config=/d.toml")];
        assert_eq!(locate(&argv, env(&[(CONFIG_ENV, "/e.toml")])), Some(("/d.toml".into(), true)));
        let argv = [os("geminid")];
        assert_eq!(locate(&argv, env(&[(CONFIG_ENV, "/e.toml")])), Some(("/e.toml".into(), true)));
        assert_eq!(
            locate(&argv, env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            Some(("/x/geminid/config.toml".into(), false))
        );
        assert_eq!(
            locate(&argv, env(&[("HOME", "/h")])),
            Some(("/h/.config/geminid/config.toml".into(), false))
        );
        assert_eq!(locate(&argv, env(&[])), None);
    }
}
