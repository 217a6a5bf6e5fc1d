//! Test harness: start the real `geminid` and `gemctl` binaries in a temporary home, talk to
//! them over the real socket, and make sure nothing is left running afterwards.

pub mod inproc;
pub mod keyring;
pub mod mcp;
pub mod oauth;
pub mod otlp;
pub mod tmux;

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use geminid_protocol::client::Client;
use geminid_protocol::client::{ConnectError, ConnectOptions, connect};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a daemon may take to start answering.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Path of a binary built in this workspace (`target/<profile>/<name>`).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test> or target/<profile>/<bench>
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.join(name)
}

/// What the binaries the tests start (daemons, `gemctl`, servers) take from the environment
/// of the process running the tests: what running programs needs (`PATH`: bash, git, node)
/// and what helps read a failure (a backtrace, a coverage tool's output). Nothing else of the
/// user's (a token a fixture also names, an XDG directory, a colour setting) reaches them,
/// so that a test sees the same world on every machine and never writes into the user's.
pub const PASSED_THROUGH: &[&str] =
    &["PATH", "RUST_BACKTRACE", "RUST_LIB_BACKTRACE", "LLVM_PROFILE_FILE"];

/// `cmd` with an environment of [`PASSED_THROUGH`] only; a test adds what it means to set.
pub fn sealed(cmd: &mut Command) -> &mut Command {
    cmd.env_clear();
    for key in PASSED_THROUGH {
        if let Some(value) = std::env::var_os(key) {
            cmd.env(key, value);
        }
    }
    cmd
}

/// The user policy [`TestHome::allowing_mcp`] writes: every MCP tool allowed, below any rule a
/// test writes itself (priority 1).
pub const ALLOW_MCP: &str = "# Written by the tests: their sessions are headless.\n[[rule]]\ntoolName = \"*\"\nmcpName = \"*\"\ndecision = \"allow\"\npriority = 1\n";

/// A temporary home: `home/` (HOME), `run/` (0700, the socket), `state/` (XDG_STATE_HOME),
/// `tmp/` (TMPDIR) and `ws/` (a workspace). Dropping it kills any daemon still holding a lock
/// file in `run/`.
///
/// Its daemons run as a user's do: the default secrets store (`auto`: the OS keyring where a
/// Secret Service answers, else the file; no session bus unless [`TestHome::set_session_bus`]
/// gives one, so the machine's own keyring is never touched) and no policy of the tests' own.
#[derive(Debug)]
pub struct TestHome {
    dir: tempfile::TempDir,
    bus: Option<String>,
}

impl TestHome {
    /// A home as a new user has it: no policy of its own (the built-in rules and the engine's
    /// defaults decide), the default secrets store.
    pub fn new() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("geminid-test-").tempdir()?;
        for sub in ["home", "home/.gemini", "etc", "run", "state", "tmp", "ws"] {
            std::fs::create_dir(dir.path().join(sub))?;
        }
        std::fs::set_permissions(dir.path().join("run"), std::fs::Permissions::from_mode(0o700))?;
        Ok(Self { dir, bus: None })
    }

    /// A home whose user policy allows every MCP tool ([`ALLOW_MCP`]), for a test about
    /// something else that calls tools from a headless session, where the default policy
    /// hides them.
    pub fn allowing_mcp() -> anyhow::Result<Self> {
        let home = Self::new()?;
        let dir = home.root().join("home/.gemini/policies");
        std::fs::create_dir(&dir)?;
        std::fs::write(dir.join("tests-allow-mcp.toml"), ALLOW_MCP)?;
        Ok(home)
    }

    /// Its binaries reach this D-Bus session bus (a test's own Secret Service).
    pub fn set_session_bus(&mut self, address: &str) {
        self.bus = Some(address.to_owned());
    }

    /// The root of the temporary tree.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The socket path used by [`Daemon::start`].
    pub fn socket(&self) -> PathBuf {
        self.root().join("run").join("geminid.sock")
    }

    /// The daemon's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.root().join("state").join("geminid")
    }

    /// A workspace directory that exists.
    pub fn workspace(&self) -> PathBuf {
        self.root().join("ws")
    }

    /// The environment every spawned binary gets: [`sealed`] from the test's own (nothing of
    /// the user's but [`PASSED_THROUGH`]), with every XDG directory, the temporary directory,
    /// the socket and the system settings in this home.
    fn apply_env(&self, cmd: &mut Command) {
        let home = self.root().join("home");
        sealed(cmd)
            .env("XDG_STATE_HOME", self.root().join("state"))
            .env("XDG_RUNTIME_DIR", self.root().join("run-unused"))
            .env("XDG_CONFIG_HOME", self.root().join("config"))
            // Where they are without the variables, said: `gemctl man` writes its pages into
            // the data directory.
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("HOME", home)
            .env("TMPDIR", self.root().join("tmp"))
            .env("GEMINID_SOCKET", self.socket())
            .env("GEMINID_BIN", bin("geminid"))
            // Its daemons' clock is the tests' to move (`advance_clock`; debug builds only).
            .env(CLOCK_ENV, "1")
            // Never read the machine's real system settings.
            .env("GEMINI_CLI_SYSTEM_SETTINGS_PATH", self.root().join("etc").join("settings.json"));
        if let Some(address) = &self.bus {
            // The default store finds this test's own Secret Service; without one, none (never
            // the machine's real keyring).
            cmd.env("DBUS_SESSION_BUS_ADDRESS", address);
        }
    }

    /// Any program run as a user of this home would (its environment, in its workspace),
    /// with the built `gemctl` first on its PATH.
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        self.apply_env(&mut cmd);
        let gemctl = bin("gemctl");
        let dir = gemctl.parent().map(Path::to_path_buf).unwrap_or_default();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&path)))
            .unwrap_or(path);
        cmd.env("PATH", path).args(args).current_dir(self.workspace()).stdin(Stdio::null());
        cmd
    }

    /// A `gemctl` command for this home.
    pub fn gemctl_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin("gemctl"));
        self.apply_env(&mut cmd);
        cmd.args(args).current_dir(self.workspace()).stdin(Stdio::null());
        cmd
    }

    /// Run `gemctl` to completion.
    pub fn gemctl(&self, args: &[&str]) -> anyhow::Result<Output> {
        self.gemctl_cmd(args).output().context("running gemctl")
    }

    /// Run `gemctl`: (exit code, stdout, stderr).
    pub fn gemctl_run(&self, args: &[&str]) -> anyhow::Result<(i32, String, String)> {
        let out = self.gemctl(args)?;
        Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// Run `gemctl --json ...`, require success, and parse its stdout.
    pub fn gemctl_json(&self, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.gemctl(&all)?;
        if !out.status.success() {
            bail!(
                "gemctl {args:?} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        serde_json::from_slice(&out.stdout).with_context(|| {
            format!("gemctl {args:?} printed: {}", String::from_utf8_lossy(&out.stdout))
        })
    }
}

impl TestHome {
    /// Processes whose environment mentions this home (daemons, gemctl, and the MCP servers
    /// they started, which inherit a session environment built from it), with their command
    /// lines. The test process itself is excluded.
    pub fn processes(&self) -> Vec<(u32, String)> {
        let needle = self.root().as_os_str().as_encoded_bytes().to_vec();
        let me = std::process::id();
        let Ok(entries) = std::fs::read_dir("/proc") else { return vec![] };
        let mut found = Vec::new();
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(environ) = std::fs::read(e.path().join("environ")) else { continue };
            if environ.windows(needle.len()).any(|w| w == needle.as_slice()) {
                let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                found.push((pid, cmdline.trim().to_owned()));
            }
        }
        found
    }
}

impl Drop for TestHome {
    fn drop(&mut self) {
        // Daemons started by gemctl (autostart) are not children of the test: find them by
        // their lock files, and stop them gracefully so they stop their MCP servers.
        if let Ok(entries) = std::fs::read_dir(self.root().join("run")) {
            for e in entries.flatten() {
                if e.path().extension().is_some_and(|x| x == "lock")
                    && let Ok(text) = std::fs::read_to_string(e.path())
                    && let Ok(pid) = text.trim().parse::<i32>()
                    && geminid_protocol::socket::lock_held(&e.path())
                {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
                    poll_blocking(Duration::from_secs(10), || {
                        (!geminid_protocol::socket::lock_held(&e.path())).then_some(())
                    });
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
            }
        }
        // Nothing may outlive the test: whatever is left is killed and fails the test.
        let mut left = Vec::new();
        poll_blocking(Duration::from_secs(3), || {
            left = self.processes();
            left.is_empty().then_some(())
        });
        for (pid, _) in &left {
            if let Ok(p) = i32::try_from(*pid) {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
        }
        if !left.is_empty() && !std::thread::panicking() {
            panic!("processes left behind by the test: {left:?}");
        }
    }
}

/// A running `geminid` child. Dropping it kills it.
#[derive(Debug)]
pub struct Daemon {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

/// What the daemons of tests log.
const TEST_LOG_FILTER: &str = "info,geminid=debug";

/// How to start a `geminid`, for what [`Daemon::start`] and [`Daemon::spawn`] do not cover
/// (benchmarks): its log filter, another binary, a wrapper command.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    home: &'a TestHome,
    args: &'a [&'a str],
    filter: &'a str,
    binary: Option<&'a Path>,
    wrapper: &'a [&'a str],
}

impl<'a> Launch<'a> {
    /// Extra command-line arguments.
    pub fn args(self, args: &'a [&'a str]) -> Self {
        Self { args, ..self }
    }

    /// Its `RUST_LOG` filter (tests log more than the daemon's default, `info`).
    pub fn log(self, filter: &'a str) -> Self {
        Self { filter, ..self }
    }

    /// Another `geminid` binary (an older build, to compare with).
    pub fn binary(self, binary: &'a Path) -> Self {
        Self { binary: Some(binary), ..self }
    }

    /// Run it under a wrapper command (`valgrind --tool=callgrind`, say), which must run it
    /// in its own process: [`Daemon::pid`] is then the wrapper's.
    pub fn under(self, wrapper: &'a [&'a str]) -> Self {
        Self { wrapper, ..self }
    }

    /// Start it and wait until it answers.
    pub async fn start(self) -> anyhow::Result<Daemon> {
        let daemon = self.spawn()?;
        daemon.wait_ready().await?;
        Ok(daemon)
    }

    /// Start it without waiting.
    pub fn spawn(self) -> anyhow::Result<Daemon> {
        let Self { home, args, filter, binary, wrapper } = self;
        let socket = args
            .iter()
            .position(|a| *a == "--socket")
            .and_then(|i| args.get(i + 1))
            .map_or_else(|| home.socket(), PathBuf::from);
        let n = std::fs::read_dir(home.root())?.count();
        let log = home.root().join(format!("geminid-{n}.log"));
        let binary = binary.map_or_else(|| bin("geminid"), Path::to_path_buf);
        let mut cmd = match wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut cmd = Command::new(program);
                cmd.args(wrapper_args).arg(&binary);
                cmd
            }
            None => Command::new(&binary),
        };
        home.apply_env(&mut cmd);
        cmd.args(args)
            .env("RUST_LOG", filter)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log)?);
        let child = cmd.spawn().context("spawning geminid")?;
        Ok(Daemon { child, socket, log })
    }
}

impl Daemon {
    /// Start `geminid` in `home` with extra arguments and wait until it answers.
    pub async fn start(home: &TestHome, extra: &[&str]) -> anyhow::Result<Self> {
        Self::launch(home).args(extra).start().await
    }

    /// Start `geminid` without waiting.
    pub fn spawn(home: &TestHome, extra: &[&str]) -> anyhow::Result<Self> {
        Self::launch(home).args(extra).spawn()
    }

    /// A `geminid` in `home` to configure, then start: see [`Launch`].
    pub fn launch(home: &TestHome) -> Launch<'_> {
        Launch { home, args: &[], filter: TEST_LOG_FILTER, binary: None, wrapper: &[] }
    }

    /// Wait until the daemon answers `daemon/hello`.
    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        let last = std::cell::RefCell::new(None);
        let up = poll(START_TIMEOUT, || async {
            match connect(&self.socket, &options()).await {
                Ok(_) => Some(Ok(())),
                // Not listening yet; or the socket a killed daemon left is still held by a
                // child it was forking (until that child's exec closes it), which takes a
                // connection and resets it: not up yet either way.
                Err(
                    e @ (ConnectError::NotRunning { .. }
                    | ConnectError::Handshake { .. }
                    | ConnectError::Io { .. }),
                ) => {
                    *last.borrow_mut() = Some(e);
                    None
                }
                Err(e) => Some(Err(e)),
            }
        })
        .await;
        match up {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => bail!("geminid did not come up: {e}\n{}", self.log()),
            None => bail!(
                "geminid did not come up: {}\n{}",
                last.take().map(|e| e.to_string()).unwrap_or_default(),
                self.log()
            ),
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Everything it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its log file, for a thread that counts its lines ([`lines_with`]).
    pub fn log_path(&self) -> PathBuf {
        self.log.clone()
    }

    /// How many lines of its log so far contain one of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> usize {
        lines_with(&self.log, needles)
    }

    /// A connected, handshaken client.
    pub async fn client(&self) -> anyhow::Result<Client> {
        Ok(connect(&self.socket, &options()).await?.0)
    }

    /// Send a signal.
    pub fn signal(&self, sig: Signal) -> anyhow::Result<()> {
        kill(Pid::from_raw(i32::try_from(self.pid())?), sig)?;
        Ok(())
    }

    /// Wait for it to exit (up to `timeout`).
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let child = &mut self.child;
        match poll(timeout, || std::future::ready(child.try_wait().transpose())).await {
            Some(status) => Ok(status?),
            None => bail!("geminid did not exit within {timeout:?}\n{}", self.log()),
        }
    }

    /// SIGKILL it and reap it.
    pub async fn kill9(&mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Daemon {
    /// SIGTERM first (the daemon stops its MCP servers), SIGKILL if it does not exit in time.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.signal(Signal::SIGTERM);
            let child = &mut self.child;
            poll_blocking(Duration::from_secs(10), || {
                (!matches!(child.try_wait(), Ok(None))).then_some(())
            });
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Client options used by the tests.
pub fn options() -> ConnectOptions {
    ConnectOptions::new("geminid-tests", "0")
}

/// Whether a process exists.
pub fn alive(pid: u32) -> bool {
    i32::try_from(pid).is_ok_and(|p| kill(Pid::from_raw(p), None).is_ok())
}

/// Whether a process has ended: it does not exist, or it is a zombie waiting to be reaped
/// by someone else.
pub fn process_gone(pid: u32) -> bool {
    !alive(pid)
        || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
}

/// Send raw bytes on a fresh connection to `socket` and read whatever comes back until the
/// daemon closes the connection or `timeout` passes.
pub async fn raw_exchange(
    socket: &Path,
    bytes: &[u8],
    timeout: Duration,
) -> anyhow::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(socket).await?;
    s.write_all(bytes).await?;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(timeout, s.read_to_end(&mut out)).await;
    Ok(out)
}

/// One JSON-RPC call as a plain HTTP POST over the socket; returns (status line, body).
pub async fn http_post(socket: &Path, body: &str) -> anyhow::Result<(String, String)> {
    let req = format!(
        "POST / HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let out = raw_exchange(socket, req.as_bytes(), Duration::from_secs(10)).await?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.lines().next().unwrap_or_default().to_owned();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Ok((status, body))
}

/// The daemon's line when a read finds an input file still changing (a save in place caught
/// half done: truncated, not yet written).
pub const STILL_CHANGING: &str = "an input file is still changing";
/// The daemon's lines when its watcher sees an input file change (the first of a burst, and
/// each one after it).
pub const INPUT_CHANGED: &str = "input changed";
/// The daemon's line after a reload the watcher ran.
pub const RELOADED: &str = "reloaded for a change to the input files";

/// How many lines of the log file `log` contain one of `needles`.
pub fn lines_with(log: &Path, needles: &[&str]) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter(|l| needles.iter().any(|n| l.contains(n))).count()
}

/// Wait (a thread's wait: [`poll_blocking`]) until more than `seen` lines of the log file `log`
/// contain one of `needles`; how many do then. An error if none comes within 20 s.
pub fn more_lines_with(log: &Path, needles: &[&str], seen: usize) -> anyhow::Result<usize> {
    poll_blocking(Duration::from_secs(20), || Some(lines_with(log, needles)).filter(|n| *n > seen))
        .with_context(|| format!("no new line with one of {needles:?} in {}", log.display()))
}

/// The variable that gives a (debug) daemon a clock its tests move: `clock::driven`.
pub const CLOCK_ENV: &str = "GEMINID_TEST_CLOCK";

/// Move the daemon's clock forward by `by` (a linger, a backoff, an idle exit measured on it
/// passes at once), and return once every timer on it has seen the new time: what was due
/// has fired, and the rest waits again. Instead of sleeping through the daemon's own time.
pub async fn advance_clock(client: &Client, by: Duration) -> anyhow::Result<()> {
    use jsonrpsee::core::client::ClientT;
    let ms = u64::try_from(by.as_millis())?;
    let mut params = jsonrpsee::core::params::ObjectParams::new();
    params.insert("ms", ms)?;
    let () = client.request("testing/advanceClock", params).await.context("advancing the clock")?;
    Ok(())
}

/// How often [`poll`] and [`poll_blocking`] look again.
pub const POLL_EVERY: Duration = Duration::from_millis(20);

/// Poll `f` until it returns something or `timeout` passes: the one way a test waits for an
/// event it cannot subscribe to. (Tests wait for events, never for a fixed time: the
/// `fixed_sleeps` test holds the few exceptions.)
pub async fn poll<T, F, Fut>(timeout: Duration, f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    poll_every(POLL_EVERY, timeout, f).await
}

/// [`poll`], looking again every `every` (a terminal's screen, which a look taken too soon
/// catches half drawn).
pub async fn poll_every<T, F, Fut>(every: Duration, timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = f().await {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}

/// [`poll`] for code outside the runtime (a `Drop`, a thread).
pub fn poll_blocking<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = f() {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL_EVERY);
    }
}

/// Poll `f` until it returns true or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    poll(timeout, || {
        let fut = f();
        async move { fut.await.then_some(()) }
    })
    .await
    .is_some()
}
/// Lines a child writes to stderr, as they come.
pub fn stderr_lines(
    child: &mut std::process::Child,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    use std::io::BufRead;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
    }
    rx
}

/// The first line containing `needle` (within 10 s).
pub async fn line_with(
    lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    needle: &str,
) -> anyhow::Result<String> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), lines.recv()).await? {
            Some(line) if line.contains(needle) => return Ok(line),
            Some(_) => continue,
            None => anyhow::bail!("stderr ended before a line with {needle:?}"),
        }
    }
}
