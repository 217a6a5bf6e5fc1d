//! `gemctl daemon restart` and `gemctl daemon logs`: what `systemctl restart` and
//! `journalctl -u` are for a service, for the daemon gemctl starts (and, under systemd, the
//! service's own way).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use geminid_protocol::api::DaemonApiClient;
use geminid_protocol::client::ConnectError;

use crate::daemon::connect as daemon;
use crate::error::call_error;
use crate::output::{self, errln, outln};

/// The unit `gemctl daemon install-service` writes.
const SERVICE_UNIT: &str = "geminid.service";

/// How often `daemon logs --follow` looks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(250);

/// Whether the process `pid` runs in the systemd unit `unit` (its cgroup is the unit's), read
/// from `/proc/PID/cgroup`. Never on systems without it.
fn runs_in_unit(pid: u32, unit: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|text| in_unit(&text, unit))
}

/// Whether a `/proc/PID/cgroup` text puts the process in `unit`.
fn in_unit(cgroup: &str, unit: &str) -> bool {
    cgroup.lines().any(|l| {
        let path = l.rsplit_once(':').map_or(l, |(_, p)| p);
        path.rsplit('/').next() == Some(unit)
    })
}

/// `gemctl daemon restart`: stop the daemon, wait until it has gone, start it again as
/// `gemctl daemon start` does; a daemon systemd runs is restarted by systemd.
pub async fn restart(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let old = match daemon::connect_running(socket).await {
        Ok((_, hello)) => Some(hello.pid),
        Err(ConnectError::NotRunning { .. }) => {
            let hello = daemon::start(socket, None).await?;
            if json {
                output::json(&serde_json::json!({
                    "running": true, "restarted": false, "started": true, "pid": hello.pid,
                    "socket": socket,
                }))?;
            } else {
                outln!(
                    "geminid was not running; started it (pid {}) on {}",
                    hello.pid,
                    socket.display()
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        // Another release's daemon (an upgrade): stopped all the same, below.
        Err(ConnectError::VersionMismatch(_)) => None,
        Err(e) => return Err(e.into()),
    };
    if let Some(pid) = old.filter(|&p| runs_in_unit(p, SERVICE_UNIT)) {
        // Stopped by hand, the service would stay down (it restarts on failure only) and a
        // daemon started here would run outside it: systemd restarts it.
        let mut ran = Vec::new();
        if !crate::daemon::service::systemctl_ok(&["restart", SERVICE_UNIT], &mut ran)? {
            anyhow::bail!(
                "`{}` failed (see above); `systemctl --user status geminid` says why",
                ran.join(" ")
            );
        }
        let hello = answering(socket).await?;
        if json {
            output::json(&serde_json::json!({
                "running": true, "restarted": true, "previousPid": pid, "pid": hello.pid,
                "socket": socket, "by": "systemd",
            }))?;
        } else {
            outln!("geminid restarted by systemd (`{}`): pid {pid} → {}", ran.join(" "), hello.pid);
        }
        return Ok(ExitCode::SUCCESS);
    }
    // As `daemon stop` does: no hello needed to stop an older daemon.
    let client = geminid_protocol::client::open(socket, &daemon::options()).await?;
    let stopped = client.shutdown().await.map_err(call_error("daemon/shutdown"))?;
    drop(client);
    daemon::wait_stopped(socket).await?;
    let hello = daemon::start(socket, None).await?;
    if json {
        output::json(&serde_json::json!({
            "running": true, "restarted": true, "previousPid": stopped.pid, "pid": hello.pid,
            "socket": socket, "by": "gemctl",
        }))?;
    } else {
        outln!("geminid restarted: pid {} → {} on {}", stopped.pid, hello.pid, socket.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Connect to the daemon systemd is (re)starting, up to gemctl's start-up limit.
async fn answering(socket: &Path) -> anyhow::Result<geminid_protocol::daemon::HelloResult> {
    let deadline = Instant::now() + daemon::DAEMON_START_TIMEOUT;
    loop {
        match daemon::connect_running(socket).await {
            Ok((_, hello)) => return Ok(hello),
            Err(e) if Instant::now() >= deadline => {
                return Err(anyhow::Error::new(e).context(format!(
                    "the restarted service did not answer within {:?}; `systemctl --user status \
                     geminid` says why",
                    daemon::DAEMON_START_TIMEOUT
                )));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// `gemctl daemon logs [-n N] [-f]`: the log file of a daemon gemctl starts
/// (`<socket>.log`, the one before its last rotation `<socket>.log.1`).
pub async fn logs(
    socket: &Path,
    lines: Option<usize>,
    follow: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let path = daemon::log_path(socket);
    let journal = match daemon::connect_running(socket).await {
        Ok((_, hello)) => runs_in_unit(hello.pid, SERVICE_UNIT),
        Err(_) => false,
    };
    if journal && !path.exists() {
        let how = if follow { " -f" } else { "" };
        outln!(
            "geminid runs as the systemd user service {SERVICE_UNIT}, which logs to the journal: \
             `journalctl --user -u geminid{how}`"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let previous = rotated(&path);
    let text = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let note = format!(
                "no daemon log yet at {}: a daemon gemctl starts (`gemctl daemon start`, or any \
                 command) writes it there; under systemd the journal keeps it (`journalctl \
                 --user -u geminid`)",
                path.display()
            );
            if !follow {
                outln!("{note}");
                return Ok(ExitCode::SUCCESS);
            }
            errln!("{note}; waiting for it (Ctrl-C to stop)");
            String::new()
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    // The last N lines may begin in the file before the last rotation.
    let mut shown: Vec<&str> = text.lines().collect();
    let before;
    if let Some(n) = lines {
        if shown.len() < n
            && let Some(old) = previous.as_deref().and_then(|p| std::fs::read(p).ok())
        {
            before = String::from_utf8_lossy(&old).into_owned();
            let mut all: Vec<&str> = before.lines().collect();
            all.extend(shown);
            shown = all;
        }
        shown = shown.split_off(shown.len().saturating_sub(n));
    }
    if json && !follow {
        output::json(&serde_json::json!({ "path": path, "lines": shown }))?;
        return Ok(ExitCode::SUCCESS);
    }
    for l in &shown {
        print_line(l, json)?;
    }
    if !follow {
        return Ok(ExitCode::SUCCESS);
    }
    follow_file(&path, text.len() as u64, json).await
}

/// The file a rotation left, if there is one.
fn rotated(path: &Path) -> Option<PathBuf> {
    let mut p = path.as_os_str().to_owned();
    p.push(".1");
    Some(PathBuf::from(p)).filter(|p| p.is_file())
}

fn print_line(line: &str, json: bool) -> anyhow::Result<()> {
    if json {
        output::json_line(&line)
    } else {
        outln!("{line}");
        Ok(())
    }
}

/// Print what is written to `path` after byte `from` until Ctrl-C; a file that shrank was
/// rotated (or truncated) and is read again from its start.
async fn follow_file(path: &Path, mut from: u64, json: bool) -> anyhow::Result<ExitCode> {
    // One listener for the whole loop, or a Ctrl-C while a line is printed is missed.
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut partial = String::new();
    loop {
        tokio::select! {
            _ = &mut ctrl_c => return Ok(ExitCode::SUCCESS),
            () = tokio::time::sleep(FOLLOW_POLL) => {}
        }
        let Ok(mut file) = std::fs::File::open(path) else { continue };
        let len = file.metadata().map_or(0, |m| m.len());
        if len < from {
            from = 0;
            partial.clear();
        }
        if len == from {
            continue;
        }
        file.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        file.take(len - from).read_to_end(&mut bytes)?;
        from += bytes.len() as u64;
        partial.push_str(&String::from_utf8_lossy(&bytes));
        // Whole lines only; the rest waits for its end.
        while let Some(end) = partial.find('\n') {
            let line: String = partial.drain(..=end).collect();
            print_line(line.trim_end_matches(['\n', '\r']), json)?;
        }
    }
}

/// Exit code of `gemctl status` when no daemon is running.
pub const EXIT_NOT_RUNNING: u8 = 3;

pub async fn status(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let opts = daemon::options();
    let client = match geminid_protocol::client::open(socket, &opts).await {
        Ok(c) => c,
        Err(e @ ConnectError::NotRunning { .. }) => {
            if json {
                output::json(&serde_json::json!({ "running": false, "socket": socket }))?;
            } else {
                outln!("{e}");
            }
            return Ok(ExitCode::from(EXIT_NOT_RUNNING));
        }
        Err(e) => return Err(e.into()),
    };
    // Hello and status go out together (one round trip less); hello is checked first, so a
    // version mismatch is still reported as such.
    use geminid_protocol::api::McpApiClient;
    let (hello, status, servers) = tokio::join!(
        geminid_protocol::client::handshake(&client, &opts),
        client.status(),
        client.mcp_list_servers(None)
    );
    hello?;
    let status = status.map_err(call_error("daemon/status"))?;
    // Every server the daemon runs, summed up (`mcp list --all` has them one by one).
    let servers = servers.map_err(call_error("mcp/listServers"))?.servers;
    let summary = output::servers::ServersSummary::of(&servers);
    if json {
        let mut v = serde_json::to_value(&status)?;
        v["running"] = true.into();
        v["servers"] = serde_json::to_value(&summary)?;
        output::json(&v)?;
    } else {
        output::servers::status(&status, &summary);
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn version(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let daemon = match daemon::connect_running(socket).await {
        Ok((_, hello)) => Some(hello),
        Err(ConnectError::NotRunning { .. }) => None,
        // Versions that do not match are what this command is asked for to see.
        Err(ConnectError::VersionMismatch(why)) if !json => {
            outln!("gemctl {}", geminid_protocol::VERSION_LINE);
            outln!("{why}");
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        output::json(&serde_json::json!({
            "gemctl": geminid_protocol::DAEMON_VERSION,
            "protocolVersion": geminid_protocol::PROTOCOL_VERSION,
            "daemon": daemon,
        }))?;
    } else {
        outln!("gemctl {}", geminid_protocol::VERSION_LINE);
        match daemon {
            Some(h) => outln!(
                "geminid {} (protocol {}), pid {}",
                h.daemon_version,
                h.protocol_version,
                h.pid
            ),
            None => outln!("geminid is not running on {}", socket.display()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn daemon_start(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let (hello, started) = match daemon::connect_running(socket).await {
        Ok((_, hello)) => (hello, false),
        Err(ConnectError::NotRunning { .. }) => (daemon::start(socket, None).await?, true),
        Err(e) => return Err(e.into()),
    };
    if json {
        output::json(&serde_json::json!({
            "running": true, "started": started, "pid": hello.pid, "socket": socket,
        }))?;
    } else if started {
        outln!("geminid started (pid {}) on {}", hello.pid, socket.display());
    } else {
        outln!("geminid is already running (pid {}) on {}", hello.pid, socket.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn daemon_stop(socket: &Path, json: bool) -> anyhow::Result<ExitCode> {
    // No hello: `daemon/shutdown` is the same in every protocol version, so a gemctl of a
    // newer release stops the older daemon it is replacing.
    let client = match geminid_protocol::client::open(socket, &daemon::options()).await {
        Ok(c) => c,
        Err(ConnectError::NotRunning { .. }) => {
            if json {
                output::json(&serde_json::json!({ "running": false, "stopped": false }))?;
            } else {
                outln!("geminid is not running");
            }
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    let result = client.shutdown().await.map_err(call_error("daemon/shutdown"))?;
    daemon::wait_stopped(socket).await?;
    if json {
        output::json(&serde_json::json!({ "running": false, "stopped": true, "pid": result.pid }))?;
    } else {
        outln!("geminid (pid {}) stopped", result.pid);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_in_the_unit_its_cgroup_names() {
        let v2 = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/geminid.service\n";
        assert!(in_unit(v2, "geminid.service"));
        let shell = "0::/user.slice/user-1000.slice/session-3.scope\n";
        assert!(!in_unit(shell, "geminid.service"));
        let v1 =
            "12:pids:/user.slice\n1:name=systemd:/user.slice/user@1000.service/geminid.service\n";
        assert!(in_unit(v1, "geminid.service"));
        assert!(!in_unit("", "geminid.service"));
    }
}
