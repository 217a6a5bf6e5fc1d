//! `gemctl doctor`: the socket and the daemon from this side (is one there, is the socket only
//! the user's, do the versions agree), then `daemon/doctor` for the session. Exit 1 when a
//! finding is an error.

use std::path::Path;
use std::process::ExitCode;

use geminid_protocol::api::DaemonApiClient;
use geminid_protocol::client::ConnectError;
use geminid_protocol::daemon::{DoctorParams, Finding, FindingStatus};

use crate::output::{self, outln};

fn finding(check: &str, status: FindingStatus, message: String, fix: Option<&str>) -> Finding {
    Finding { check: check.to_owned(), status, message, fix: fix.map(str::to_owned) }
}

/// The socket and its directory: only the user's.
#[cfg(unix)]
fn socket_checks(socket: &Path, out: &mut Vec<Finding>) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let me = nix::unistd::geteuid().as_raw();
    // Connecting takes write permission on the socket; replacing it, on its directory.
    let checks = [(socket.parent(), "directory", 0o022), (Some(socket), "socket", 0o022)];
    for (path, what, others) in checks {
        let Some(path) = path else { continue };
        let Ok(meta) = std::fs::metadata(path) else { continue };
        let mode = meta.permissions().mode() & 0o777;
        if meta.uid() != me {
            out.push(finding(
                "socket",
                FindingStatus::Error,
                format!("the {what} {} belongs to uid {}, not to you", path.display(), meta.uid()),
                Some("remove it, or set GEMINID_SOCKET to a path of your own"),
            ));
        } else if mode & others != 0 {
            out.push(finding(
                "socket",
                FindingStatus::Error,
                format!(
                    "the {what} {} has mode {mode:o}: other users can write to it",
                    path.display()
                ),
                Some("chmod go= on it (geminid makes it 0600 in a 0700 directory)"),
            ));
        }
    }
}

#[cfg(not(unix))]
fn socket_checks(_: &Path, _: &mut Vec<Finding>) {}

/// Run the checks and print them.
pub async fn run(
    socket: &Path,
    autostart: bool,
    session: Option<String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut out = Vec::new();
    let connected = match crate::daemon::connect::connect_or_start(socket, autostart).await {
        Ok(c) => Some(c),
        Err(e) => {
            let (message, fix) = match e.downcast_ref::<ConnectError>() {
                Some(ConnectError::NotRunning { .. }) => (
                    format!("geminid is not running on {}", socket.display()),
                    "gemctl daemon start, or gemctl daemon install-service",
                ),
                _ => (
                    format!("cannot talk to geminid on {}: {e:#}", socket.display()),
                    "gemctl daemon stop, then gemctl daemon start (a daemon of another release is replaced)",
                ),
            };
            out.push(finding("socket", FindingStatus::Error, message, Some(fix)));
            None
        }
    };
    if let Some((client, hello)) = connected {
        let before = out.len();
        socket_checks(socket, &mut out);
        if out.len() == before {
            out.push(finding(
                "socket",
                FindingStatus::Ok,
                format!(
                    "geminid (pid {}) answers on {}, which only you can reach",
                    hello.pid,
                    socket.display()
                ),
                None,
            ));
        }
        let mine = geminid_protocol::DAEMON_VERSION;
        out.push(if hello.daemon_version == mine {
            finding(
                "version",
                FindingStatus::Ok,
                format!("geminid and gemctl are both {mine}"),
                None,
            )
        } else {
            finding(
                "version",
                FindingStatus::Warning,
                format!(
                    "geminid is {} and gemctl is {mine} (same protocol {})",
                    hello.daemon_version, hello.protocol_version
                ),
                Some(
                    "gemctl daemon stop; gemctl daemon start (or systemctl --user restart geminid)",
                ),
            )
        });
        let session = crate::session::resolve::for_session(&client, session).await?.id;
        let found = client
            .doctor(DoctorParams { session })
            .await
            .map_err(crate::error::call_error("daemon/doctor"))?;
        out.extend(found.findings);
    }
    let failed = out.iter().any(|f| f.status == FindingStatus::Error);
    if json {
        output::json(&serde_json::json!({ "ok": !failed, "findings": out }))?;
    } else {
        for f in &out {
            use crate::output::color::{Tone, paint};
            let mark = match f.status {
                FindingStatus::Ok => paint("ok   ", Tone::Good),
                FindingStatus::Warning => paint("warn ", Tone::Warn),
                FindingStatus::Error => paint("ERROR", Tone::Bad),
            };
            outln!("{mark} {:<8} {}", f.check, f.message);
            if let Some(fix) = &f.fix {
                outln!("               fix: {fix}");
            }
        }
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
