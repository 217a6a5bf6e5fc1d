//! A real Secret Service for the tests: a private D-Bus session bus and Debian's
//! `gnome-keyring-daemon` on it, with its login keyring unlocked, so the daemon's secrets go
//! through the OS keyring as on a desktop. `.ci/run` installs `gnome-keyring`; elsewhere a test
//! that needs it says it is skipped (and fails under CI, where it must run).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A running bus with a Secret Service; both are stopped when it is dropped.
#[derive(Debug)]
pub struct SecretService {
    address: String,
    bus_pid: i32,
    home: PathBuf,
}

/// Whether this machine can run one; under CI it must.
pub fn available() -> anyhow::Result<bool> {
    let found = ["dbus-daemon", "gnome-keyring-daemon"].iter().all(|p| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !found && std::env::var_os("CI").is_some() {
        bail!("dbus-daemon and gnome-keyring-daemon must be installed under CI (.ci/run does it)");
    }
    if !found {
        eprintln!(
            "skipped: no dbus-daemon or gnome-keyring-daemon (apt-get install gnome-keyring)"
        );
    }
    Ok(found)
}

impl SecretService {
    /// Start one whose files live under `dir` (a test home's root: its processes are then
    /// the home's, and found if left behind).
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        let home = dir.join("keyring-home");
        std::fs::create_dir_all(home.join("run"))?;
        let socket = home.join("bus");
        let out = Command::new("dbus-daemon")
            .args(["--session", "--fork", "--print-address=1", "--print-pid=1"])
            .arg(format!("--address=unix:path={}", socket.display()))
            // Sealed like the keyring below: a session bus makes `dbus-1/services` in the
            // runtime directory, which must be this one's, not the user's.
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", home.join("run"))
            .env("XDG_DATA_HOME", home.join("data"))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .context("starting dbus-daemon")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let address = lines.next().unwrap_or_default().trim().to_owned();
        let bus_pid: i32 = lines.next().unwrap_or_default().trim().parse().context("its pid")?;
        let me = Self { address, bus_pid, home };
        // The login keyring, created and unlocked with a password on stdin, as a desktop
        // session's PAM module does.
        let mut unlock = Command::new("gnome-keyring-daemon")
            .args(["--unlock", "--components=secrets", "--daemonize"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &me.home)
            .env("XDG_RUNTIME_DIR", me.home.join("run"))
            .env("XDG_DATA_HOME", me.home.join("data"))
            .env("DBUS_SESSION_BUS_ADDRESS", &me.address)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting gnome-keyring-daemon")?;
        if let Some(mut stdin) = unlock.stdin.take() {
            use std::io::Write;
            stdin.write_all(b"geminid-tests")?;
        }
        unlock.wait()?;
        if crate::poll_blocking(Duration::from_secs(10), || me.registered().then_some(())).is_none()
        {
            bail!("the Secret Service did not appear on the bus");
        }
        Ok(me)
    }

    /// The bus address to give the daemon.
    pub fn address(&self) -> &str {
        &self.address
    }

    fn registered(&self) -> bool {
        Command::new("dbus-send")
            .args(["--session", "--print-reply", "--dest=org.freedesktop.DBus"])
            .args(["/org/freedesktop/DBus", "org.freedesktop.DBus.ListNames"])
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("org.freedesktop.secrets"))
    }

    /// The processes this service runs (the bus and the keyring daemon).
    fn pids(&self) -> Vec<i32> {
        let needle = self.home.as_os_str().as_encoded_bytes().to_vec();
        let mut pids = vec![self.bus_pid];
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
            if String::from_utf8_lossy(&cmd).contains("gnome-keyring-daemon")
                && env.windows(needle.len()).any(|w| w == needle.as_slice())
            {
                pids.push(pid);
            }
        }
        pids
    }
}

impl Drop for SecretService {
    fn drop(&mut self) {
        for pid in self.pids() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}
