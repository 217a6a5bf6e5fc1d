//! `gemctl daemon install-service|uninstall-service`: geminid as a systemd user service, from
//! the units in the repository's `systemd/` folder (compiled in), with `ExecStart` pointing at
//! the `geminid` this `gemctl` would start.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde::Serialize;

use crate::output::{self, errln, outln};

const SERVICE: &str = include_str!("../../../systemd/geminid.service");
const SOCKET: &str = include_str!("../../../systemd/geminid.socket");

/// The program run for `systemctl` (a test points it at a script that records its arguments).
const SYSTEMCTL_ENV: &str = "GEMINID_SYSTEMCTL";

/// What an install or uninstall did.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Done {
    /// Unit files written.
    wrote: Vec<String>,
    /// Unit files removed.
    removed: Vec<String>,
    /// `systemctl` command lines run.
    ran: Vec<String>,
    /// The unit that starts geminid, once enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    enabled: Option<String>,
    /// What the last `systemctl` that failed said.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The socket a unit must name: `socket`, when it is not where systemd's `%t` puts the
/// default one (`$XDG_RUNTIME_DIR/geminid/geminid.sock`), so that a service started by systemd
/// listens where this shell's gemctl looks (`GEMINID_SOCKET`, `--socket`, or no runtime dir).
fn pinned_socket(socket: &Path) -> Option<&Path> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(|d| PathBuf::from(d).join("geminid").join("geminid.sock"));
    (runtime.as_deref() != Some(socket)).then_some(socket)
}

/// A quoted `NAME=value` for `Environment=`.
fn environment(name: &str, value: &Path) -> String {
    let v = value.display().to_string().replace('\\', "\\\\").replace('"', "\\\"");
    format!("Environment=\"{name}={v}\"")
}

/// The socket unit, listening on `pinned` when given.
pub fn socket_unit(pinned: Option<&Path>) -> String {
    SOCKET
        .lines()
        .map(|l| match pinned {
            Some(p) if l.starts_with("ListenStream=") => format!("ListenStream={}", p.display()),
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// `~/.config/systemd/user` (or under `$XDG_CONFIG_HOME`).
fn units_dir() -> anyhow::Result<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .context("neither XDG_CONFIG_HOME nor HOME is set: cannot tell where user units go")?;
    Ok(config.join("systemd").join("user"))
}

/// The `geminid` a service runs: the one `gemctl` would start, as an absolute path.
fn geminid_path() -> anyhow::Result<PathBuf> {
    let bin = crate::daemon::connect::geminid_binary();
    let found = if bin.components().count() > 1 {
        Some(bin.clone())
    } else {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|d| d.join(&bin))
            .find(|p| p.is_file())
    };
    let found = found.filter(|p| p.is_file()).with_context(|| {
        format!(
            "cannot find {} to run as a service: install it beside gemctl (`cargo install --path \
             daemon`) or set GEMINID_BIN",
            bin.display()
        )
    })?;
    Ok(std::fs::canonicalize(&found).unwrap_or(found))
}

/// `path` as an `ExecStart=` word (quoted when it has spaces or quotes).
fn exec_word(path: &Path) -> String {
    let p = path.display().to_string();
    if p.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\') {
        format!("\"{}\"", p.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        p
    }
}

/// The service unit for `geminid`, idle-exiting under socket activation, on `pinned` when
/// given.
pub fn service_unit(geminid: &Path, socket_activation: bool, pinned: Option<&Path>) -> String {
    let mut exec = format!("ExecStart={}", exec_word(geminid));
    if socket_activation {
        exec.push_str(" --idle-exit 30m");
    }
    if let Some(p) = pinned {
        exec = format!("{}\n{exec}", environment("GEMINID_SOCKET", p));
    }
    SERVICE
        .lines()
        .map(|l| if l.starts_with("ExecStart=") { exec.as_str() } else { l })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn systemctl(args: &[&str], done: &mut Done) -> anyhow::Result<bool> {
    let program = std::env::var_os(SYSTEMCTL_ENV).unwrap_or_else(|| "systemctl".into());
    let mut all = vec!["--user"];
    all.extend_from_slice(args);
    done.ran.push(format!("systemctl {}", all.join(" ")));
    let out = std::process::Command::new(&program).args(&all).output().with_context(|| {
        format!("cannot run {} (is systemd installed?)", Path::new(&program).display())
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        errln!("note: `systemctl {}` failed: {}", all.join(" "), err.trim());
        done.error = Some(err.trim().to_owned());
    }
    Ok(out.status.success())
}

/// Run `systemctl --user ARGS`, a failure said on stderr: whether it succeeded. `ran` gets
/// the command line.
pub fn systemctl_ok(args: &[&str], ran: &mut Vec<String>) -> anyhow::Result<bool> {
    let mut done = Done::default();
    let ok = systemctl(args, &mut done);
    ran.append(&mut done.ran);
    ok
}

fn write_unit(dir: &Path, name: &str, text: &str, done: &mut Done) -> anyhow::Result<()> {
    let path = dir.join(name);
    if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    done.wrote.push(path.display().to_string());
    Ok(())
}

/// `gemctl daemon install-service`.
pub async fn install(
    socket: &Path,
    socket_activation: bool,
    enable: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if let Ok((_, hello)) = crate::daemon::connect::connect_running(socket).await {
        bail!(
            "geminid is already running (pid {}) on {}, outside the service: stop it first \
             (`gemctl daemon stop`), then install the service, which takes the socket over",
            hello.pid,
            socket.display()
        );
    }
    let geminid = geminid_path()?;
    let dir = units_dir()?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut done = Done::default();
    let pinned = pinned_socket(socket);
    let service = service_unit(&geminid, socket_activation, pinned);
    write_unit(&dir, "geminid.service", &service, &mut done)?;
    let socket_unit_path = dir.join("geminid.socket");
    if socket_activation {
        write_unit(&dir, "geminid.socket", &socket_unit(pinned), &mut done)?;
    } else if socket_unit_path.exists() {
        // From an earlier install with socket activation: the service alone now.
        systemctl(&["disable", "--now", "geminid.socket"], &mut done)?;
        std::fs::remove_file(&socket_unit_path)?;
        done.removed.push(socket_unit_path.display().to_string());
    }
    let unit = if socket_activation { "geminid.socket" } else { "geminid.service" };
    if enable {
        let reloaded = systemctl(&["daemon-reload"], &mut done)?;
        if reloaded && systemctl(&["enable", "--now", unit], &mut done)? {
            done.enabled = Some(unit.to_owned());
        }
    }
    if json {
        output::json(&done)?;
    } else {
        for w in &done.wrote {
            outln!("wrote {w}");
        }
        if let Some(p) = pinned {
            outln!("the units name {}: the socket this gemctl uses", p.display());
        }
        for r in &done.removed {
            outln!("removed {r}");
        }
        match (&done.enabled, enable) {
            (Some(u), _) => outln!(
                "enabled and started {u}: geminid ({}) runs as your user service; \
                 `systemctl --user status geminid` shows it, `journalctl --user -u geminid` its log",
                geminid.display()
            ),
            // No user manager to talk to: say what that means instead of "fix the error".
            (None, true) if done.error.as_deref().is_some_and(|e| e.contains("connect to bus")) => {
                outln!(
                    "not enabled: no systemd user manager answers here (a container, WSL without \
                     systemd, or a login without a user session). gemctl starts geminid whenever \
                     a command needs it, so nothing more is needed; where systemd runs, log in \
                     to a session (or `loginctl enable-linger $USER`) and run this again. The \
                     units stay in {}",
                    dir.display()
                )
            }
            (None, true) => outln!(
                "not enabled: run `systemctl --user daemon-reload && systemctl --user enable --now {unit}` once the error above is fixed"
            ),
            (None, false) => outln!(
                "to start it: systemctl --user daemon-reload && systemctl --user enable --now {unit}"
            ),
        }
    }
    Ok(if enable && done.enabled.is_none() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// `gemctl daemon uninstall-service`.
pub fn uninstall(json: bool) -> anyhow::Result<ExitCode> {
    let dir = units_dir()?;
    let mut done = Done::default();
    let units: Vec<&str> = ["geminid.socket", "geminid.service"]
        .into_iter()
        .filter(|u| dir.join(u).exists())
        .collect();
    if !units.is_empty() {
        let mut args = vec!["disable", "--now"];
        args.extend(&units);
        systemctl(&args, &mut done)?;
        for u in &units {
            let path = dir.join(u);
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
            done.removed.push(path.display().to_string());
        }
        systemctl(&["daemon-reload"], &mut done)?;
    }
    if json {
        output::json(&done)?;
    } else if done.removed.is_empty() {
        outln!("no geminid user units in {}", dir.display());
    } else {
        for r in &done.removed {
            outln!("removed {r}");
        }
        outln!("geminid no longer runs as a service; gemctl starts it when needed");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_start_points_at_the_binary_quoted_when_needed() {
        let plain = service_unit(Path::new("/opt/bin/geminid"), false, None);
        assert!(plain.contains("\nExecStart=/opt/bin/geminid\n"), "{plain}");
        assert!(plain.contains("Type=notify"));
        let spaced = service_unit(Path::new("/home/a b/geminid"), true, None);
        assert!(spaced.contains("\nExecStart=\"/home/a b/geminid\" --idle-exit 30m\n"), "{spaced}");
        let pinned =
            service_unit(Path::new("/opt/bin/geminid"), false, Some(Path::new("/s/g.sock")));
        assert!(
            pinned.contains(
                "\nEnvironment=\"GEMINID_SOCKET=/s/g.sock\"\nExecStart=/opt/bin/geminid\n"
            ),
            "{pinned}"
        );
        assert!(socket_unit(Some(Path::new("/s/g.sock"))).contains("\nListenStream=/s/g.sock\n"));
        assert!(socket_unit(None).contains("\nListenStream=%t/geminid/geminid.sock\n"));
    }
}
