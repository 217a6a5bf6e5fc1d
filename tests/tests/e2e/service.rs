//! geminid as a service: socket activation by `systemd-socket-activate` (the socket adopted,
//! its permission checked), the notifications systemd reads (observed on a `NOTIFY_SOCKET` the
//! test binds), `--idle-exit`, `gemctl daemon install-service` (units checked by
//! `systemd-analyze verify`, `systemctl` a recording script), and `--version`.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::{Duration, Instant};

use geminid_protocol::api::{DaemonApiClient, SessionApiClient};
use geminid_protocol::session::SessionCreateParams;
use geminid_tests::{Daemon, TestHome, alive, bin};
use nix::sys::signal::Signal;

/// A program systemd provides; the tests need it (Debian package `systemd`).
fn systemd_tool(name: &str) -> String {
    for dir in ["/usr/bin", "/bin", "/usr/local/bin"] {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p.display().to_string();
        }
    }
    panic!("{name} is missing: install the Debian package `systemd` (apt-get install systemd)");
}

/// The wrapper that runs `geminid` under `systemd-socket-activate` listening on the home's
/// socket (which it makes 0644), the home's environment passed on.
fn activated(home: &TestHome) -> Vec<String> {
    let activate = systemd_tool("systemd-socket-activate");
    let vars = [
        "HOME",
        "XDG_STATE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_RUNTIME_DIR",
        "GEMINID_SOCKET",
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
        "RUST_LOG",
        "NO_COLOR",
        "PATH",
    ];
    let pass: Vec<String> = vars.iter().map(|v| format!("-E {v}")).collect();
    vec![
        "sh".into(),
        "-c".into(),
        format!("exec {activate} -l {} {} \"$@\"", home.socket().display(), pass.join(" ")),
        "sh".into(),
    ]
}

#[tokio::test]
async fn socket_activation_adopts_the_socket_systemd_passes() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let wrapper = activated(&home);
    let args: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    // The first connection starts it (systemd-socket-activate execs geminid: one pid).
    let daemon = Daemon::launch(&home).under(&args).start().await?;
    let status = home.gemctl_json(&["status"])?;
    assert_eq!(status["pid"], daemon.pid(), "{status}");
    assert!(daemon.log().contains("listening on the socket systemd passed"), "{}", daemon.log());
    // Its lock is taken: a second daemon for the socket is refused.
    let mut second = Daemon::spawn(&home, &[])?;
    let exit = second.wait_exit(Duration::from_secs(10)).await?;
    assert!(!exit.success());
    assert!(second.log().contains("already running"), "{}", second.log());
    Ok(())
}

#[tokio::test]
async fn a_passed_socket_others_can_write_to_is_refused() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let wrapper = activated(&home);
    let args: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let mut daemon = Daemon::launch(&home).under(&args).spawn()?;
    // It starts on the first connection, and refuses the socket.
    let socket = home.socket();
    geminid_tests::eventually(Duration::from_secs(10), || async { socket.exists() }).await;
    // Others may write to it (as a unit without SocketMode=0600 would leave it).
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))?;
    let _ = std::os::unix::net::UnixStream::connect(&socket);
    let exit = daemon.wait_exit(Duration::from_secs(10)).await?;
    assert!(!exit.success());
    let log = daemon.log();
    assert!(log.contains("lets other users connect") && log.contains("SocketMode=0600"), "{log}");
    Ok(())
}

/// The next datagram on `sock` that contains `want`, within 10 s.
fn notified(sock: &UnixDatagram, want: &str) -> anyhow::Result<String> {
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 4096];
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        if let Ok(n) = sock.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            if text.contains(want) {
                return Ok(text);
            }
            seen.push(text);
        }
    }
    anyhow::bail!("no notification with {want:?}; got {seen:?}")
}

#[tokio::test]
async fn systemd_is_told_ready_status_watchdog_and_stopping() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let path = home.root().join("notify");
    let sock = UnixDatagram::bind(&path)?;
    let notify = format!("NOTIFY_SOCKET={}", path.display());
    let wrapper = ["env", notify.as_str(), "WATCHDOG_USEC=400000"];
    let daemon = Daemon::launch(&home).under(&wrapper).start().await?;
    let ready = notified(&sock, "READY=1")?;
    assert!(ready.contains(&format!("MAINPID={}", daemon.pid())), "{ready}");
    assert!(ready.contains("STATUS=0 sessions (0 attached), 0 MCP servers running"), "{ready}");
    notified(&sock, "WATCHDOG=1")?;
    // A session attached: the status line follows.
    let client = daemon.client().await?;
    let p = SessionCreateParams {
        workspace: home.workspace().display().to_string(),
        ..Default::default()
    };
    client.create(p).await?;
    notified(&sock, "STATUS=1 session (1 attached)")?;
    daemon.signal(Signal::SIGTERM)?;
    let stopping = notified(&sock, "STOPPING=1")?;
    assert!(stopping.contains("signal SIGTERM"), "{stopping}");
    Ok(())
}

#[tokio::test]
async fn idle_exit_waits_for_nobody_to_need_it() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut daemon = Daemon::start(&home, &["--idle-exit", "1s"]).await?;
    // A connected client keeps it, however long its clock runs: an hour, past its --idle-exit
    // many times over.
    let client = daemon.client().await?;
    geminid_tests::advance_clock(&client, Duration::from_secs(3600)).await?;
    client.status().await?;
    assert!(!daemon.log().contains("--idle-exit"), "it left while a client was connected");
    assert!(alive(daemon.pid()), "it left while a client was connected");
    drop(client);
    let exit = daemon.wait_exit(Duration::from_secs(10)).await?;
    assert!(exit.success(), "{exit:?}");
    assert!(daemon.log().contains("idle for 1s (--idle-exit)"), "{}", daemon.log());
    Ok(())
}

#[tokio::test]
async fn install_service_writes_units_systemd_accepts_and_enables_them() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let record = home.root().join("systemctl.log");
    let fake = home.root().join("systemctl");
    std::fs::write(&fake, format!("#!/bin/sh\necho \"$@\" >> {}\n", record.display()))?;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755))?;
    let units = home.root().join("config/systemd/user");
    let run = |args: &[&str]| {
        let mut cmd = home.gemctl_cmd(args);
        cmd.env("GEMINID_SYSTEMCTL", &fake);
        cmd.output()
    };
    let out = run(&["daemon", "install-service", "--socket-activation"])?;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("enabled and started geminid.socket"), "{said}");
    let service = std::fs::read_to_string(units.join("geminid.service"))?;
    let geminid = std::fs::canonicalize(bin("geminid"))?;
    assert!(
        service.contains(&format!("\nExecStart={} --idle-exit 30m\n", geminid.display())),
        "{service}"
    );
    // This shell's gemctl uses another socket than systemd's default (GEMINID_SOCKET): the
    // units name it, or the service would listen where gemctl does not look (audit C16).
    let sock = home.socket().display().to_string();
    assert!(service.contains(&format!("\nEnvironment=\"GEMINID_SOCKET={sock}\"\n")), "{service}");
    let socket_unit = std::fs::read_to_string(units.join("geminid.socket"))?;
    assert!(socket_unit.contains(&format!("\nListenStream={sock}\n")), "{socket_unit}");
    assert!(said.contains(&format!("the units name {sock}")), "{said}");
    let ran = std::fs::read_to_string(&record)?;
    assert_eq!(ran, "--user daemon-reload\n--user enable --now geminid.socket\n");
    // The page the units' `Documentation=man:gemctl(1)` names is there (audit P6).
    let page = home.root().join("home/.local/share/man/man1/gemctl.1");
    assert!(page.is_file(), "{} missing", page.display());

    // systemd itself accepts both units.
    let verify = home
        .command(&systemd_tool("systemd-analyze"), &["verify", "--user", "--man=no"])
        .arg(units.join("geminid.service"))
        .arg(units.join("geminid.socket"))
        .env("XDG_RUNTIME_DIR", home.root().join("run"))
        .output()?;
    let complaints = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success() && !complaints.contains("geminid."), "{complaints}");

    // Without socket activation: the service alone, the socket unit gone.
    std::fs::remove_file(&record)?;
    let out = run(&["--json", "daemon", "install-service"])?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(v["enabled"], "geminid.service", "{v}");
    assert!(!units.join("geminid.socket").exists());
    let service = std::fs::read_to_string(units.join("geminid.service"))?;
    assert!(service.contains(&format!("\nExecStart={}\n", geminid.display())), "{service}");

    // No user manager (a container): what that means, not "once the error above is fixed".
    let busless = home.root().join("systemctl-nobus");
    std::fs::write(
        &busless,
        "#!/bin/sh\necho 'Failed to connect to bus: No such file or directory' >&2\nexit 1\n",
    )?;
    std::fs::set_permissions(&busless, std::fs::Permissions::from_mode(0o755))?;
    let out = home
        .gemctl_cmd(&["daemon", "install-service"])
        .env("GEMINID_SYSTEMCTL", &busless)
        .output()?;
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("no systemd user manager answers here")
            && said.contains("gemctl starts geminid whenever"),
        "{said}"
    );
    assert!(!said.contains("once the error above is fixed"), "{said}");

    // A daemon already running outside the service is named, with the fix.
    let daemon = Daemon::start(&home, &[]).await?;
    let out = run(&["daemon", "install-service"])?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("gemctl daemon stop"));
    drop(daemon);

    let out = run(&["daemon", "uninstall-service"])?;
    assert!(out.status.success());
    assert!(!units.join("geminid.service").exists());
    assert!(std::fs::read_to_string(&record)?.contains("--user disable --now geminid.service"));
    Ok(())
}

#[test]
fn both_binaries_print_their_version_and_the_protocol_version() -> anyhow::Result<()> {
    let want = format!(
        "{} (protocol {})",
        geminid_protocol::DAEMON_VERSION,
        geminid_protocol::PROTOCOL_VERSION
    );
    for name in ["geminid", "gemctl"] {
        let out = geminid_tests::sealed(&mut std::process::Command::new(bin(name)))
            .arg("--version")
            .output()?;
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("{name} {want}"));
    }
    Ok(())
}
