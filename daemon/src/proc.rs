//! A short-lived child process run to its end: a program and its arguments (no shell), a
//! directory, an environment, bytes on stdin, each output stream bounded, a deadline. The child
//! leads its own process group, so whatever it starts is stopped with it: SIGTERM to the group
//! when the deadline passes (or an output outgrows its bound, where that stops the run), SIGKILL
//! to what is left after [`KILL_GRACE`]. Custom tools (their discovery and
//! call commands) and custom commands' `!{…}` run through here; hooks use its [`Group`].
//!
//! A run's future can be dropped before it ends (its call cancelled, its caller gone, the
//! daemon shutting down): the [`Group`] it holds then stops the group itself, so nothing a
//! run started outlives it.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

/// Between SIGTERM and SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(5);

use crate::config::env::Env;

/// What to do when an output stream outgrows its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Keep the first bytes, read and drop the rest: the run goes on.
    Cut,
    /// Stop the run (its process group) there.
    Stop,
}

/// One run.
#[derive(Debug, Clone)]
pub(crate) struct Job<'a> {
    /// The program: a path, or a name looked up on the environment's `PATH`.
    pub(crate) program: &'a OsStr,
    /// Its arguments.
    pub(crate) args: &'a [String],
    /// Its working directory.
    pub(crate) cwd: &'a Path,
    /// Its whole environment.
    pub(crate) env: &'a Env,
    /// Written to its stdin, which is then closed (`None`: stdin is `/dev/null`).
    pub(crate) stdin: Option<Vec<u8>>,
    /// Bytes kept of each output stream.
    pub(crate) limit: usize,
    /// Past the bound.
    pub(crate) overflow: Overflow,
    /// How long it may take, output read to its end included.
    pub(crate) timeout: Duration,
}

/// How a run ended.
#[derive(Debug, Clone, Default)]
pub(crate) struct Finished {
    /// Its standard output (the first `limit` bytes; invalid UTF-8 replaced).
    pub(crate) stdout: String,
    /// Its standard error, likewise.
    pub(crate) stderr: String,
    /// Its exit code, when it exited.
    pub(crate) exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub(crate) signal: Option<i32>,
    /// It could not be started: why.
    pub(crate) spawn_error: Option<String>,
    /// It was stopped at its deadline.
    pub(crate) timed_out: bool,
    /// An output stream outgrew the bound (with [`Overflow::Stop`], the run was stopped then).
    pub(crate) over_limit: bool,
}

impl Finished {
    /// It exited 0 by itself.
    pub(crate) fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.over_limit
    }
}

/// `program` as the path a child with environment `env`, started in `cwd`, would run: a name
/// without a `/` looked up on the environment's `PATH` as `execvp(3)` looks (the first
/// executable file; an empty or relative entry is taken from `cwd`). Unchanged when it has a
/// `/`, when the environment has no `PATH`, or when nothing is found (the spawn then says
/// so).
///
/// Spawning an absolute path lets the standard library start the child with `posix_spawn`;
/// a name to look up on a `PATH` the child's environment changes makes it fork the daemon (17
/// threads and their memory mapped again) and exec each `PATH` entry in turn: a hook's call
/// paid about a millisecond for that (issue 39).
#[cfg(unix)]
pub(crate) fn resolve(program: &OsStr, env: &Env, cwd: &Path) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let as_is = || std::path::PathBuf::from(program);
    if program.is_empty() || program.as_bytes().contains(&b'/') {
        return as_is();
    }
    let Some(path) = env.get("PATH") else { return as_is() };
    std::env::split_paths(path)
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(as_is)
}

/// Run `job` to its end.
pub(crate) async fn run(job: Job<'_>) -> Finished {
    #[cfg(unix)]
    let program = resolve(job.program, job.env, job.cwd);
    #[cfg(not(unix))]
    let program = job.program;
    let mut command = tokio::process::Command::new(program);
    command
        .args(job.args)
        .current_dir(job.cwd)
        .env_clear()
        .envs(job.env.iter())
        .stdin(if job.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its argv[0] as written (`bash`), as a shell would give it.
    #[cfg(unix)]
    command.arg0(job.program);
    let mut group = match Group::spawn(&mut command) {
        Ok(g) => g,
        Err(e) => {
            let program = job.program.to_string_lossy();
            return Finished {
                spawn_error: Some(format!("{program}: {e}")),
                ..Finished::default()
            };
        }
    };
    let (stdin, stdout, stderr) = group.pipes();
    if let (Some(bytes), Some(mut stdin)) = (job.stdin, stdin) {
        // A child that never reads its input must not hold the run up.
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
    }
    let over = Arc::new(Notify::new());
    let stop_on_over = (job.overflow == Overflow::Stop).then(|| over.clone());
    let (Some(stdout), Some(stderr)) = (stdout, stderr) else {
        group.stop().await;
        return Finished { spawn_error: Some("no pipes".into()), ..Finished::default() };
    };
    // What the readers kept so far: a run stopped midway still reports it.
    let (kept_out, kept_err) = (Kept::default(), Kept::default());
    let mut out =
        tokio::spawn(read_bounded(stdout, job.limit, kept_out.clone(), stop_on_over.clone()));
    let mut err = tokio::spawn(read_bounded(stderr, job.limit, kept_err.clone(), stop_on_over));
    let mut done = Finished::default();
    let finished = {
        // Ended: exited, and both outputs read to their end.
        let work = async {
            let status = group.wait().await;
            let _ = (&mut out).await;
            let _ = (&mut err).await;
            status
        };
        tokio::select! {
            status = work => status.ok(),
            () = tokio::time::sleep(job.timeout) => {
                done.timed_out = true;
                None
            }
            () = over.notified() => None,
        }
    };
    let status = match finished {
        Some(status) => {
            group.release();
            Some(status)
        }
        None => {
            let status = group.stop().await;
            // The group is gone: what it had written is read briefly (a writer that left the
            // group may hold a pipe open).
            let until = std::time::Instant::now() + Duration::from_secs(1);
            while !(out.is_finished() && err.is_finished()) && std::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            status
        }
    };
    out.abort();
    err.abort();
    let (stdout, cut_out) = kept_out.take();
    let (stderr, cut_err) = kept_err.take();
    done.stdout = stdout;
    done.stderr = stderr;
    done.over_limit = cut_out || cut_err;
    if let Some(status) = status {
        done.exit_code = status.code();
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            done.signal = status.signal();
        }
    }
    done
}

/// An output stream's first bytes, and whether there was more.
#[derive(Debug, Clone, Default)]
struct Kept(Arc<parking_lot::Mutex<(Vec<u8>, bool)>>);

impl Kept {
    fn lock(&self) -> parking_lot::MutexGuard<'_, (Vec<u8>, bool)> {
        self.0.lock()
    }

    fn take(&self) -> (String, bool) {
        let (bytes, cut) = std::mem::take(&mut *self.lock());
        (String::from_utf8_lossy(&bytes).into_owned(), cut)
    }
}

/// A child that leads its own process group, and the stopping of that group. Whatever ends
/// a run early stops the whole group: [`Group::stop`] (a deadline, an output past its bound)
/// sends SIGTERM, waits up to [`KILL_GRACE`] for the group to empty (the child reaped
/// meanwhile, so that its zombie does not hold the whole grace), sends SIGKILL to what is left
/// and reaps the child. Dropped before it was released ([`Group::release`]: the run ended by
/// itself) or stopped (the future that ran it dropped: a cancelled call, a caller gone, the
/// runtime shutting down), it sends SIGTERM at once and leaves the grace, the SIGKILL and the reaping to a task of its
/// own; where there is no runtime to run that task, or that task is itself dropped, SIGKILL
/// at once.
#[derive(Debug)]
pub(crate) struct Group {
    child: Option<tokio::process::Child>,
    pgid: u32,
    stage: Stage,
}

/// Where a [`Group`] is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Running, or ended but not yet released: a drop stops the group.
    Running,
    /// SIGTERM sent, in the grace: a drop kills at once.
    Terminating,
    /// Released or stopped: nothing more to do.
    Settled,
}

impl Group {
    /// Spawn `command` as the leader of a process group of its own.
    pub(crate) fn spawn(command: &mut tokio::process::Command) -> std::io::Result<Self> {
        // The leader alone, should everything below fail to run.
        command.kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        let child = command.spawn()?;
        let pgid = child.id().unwrap_or(0);
        Ok(Self { child: Some(child), pgid, stage: Stage::Running })
    }

    /// The child's stdin, stdout and stderr (each once).
    pub(crate) fn pipes(
        &mut self,
    ) -> (
        Option<tokio::process::ChildStdin>,
        Option<tokio::process::ChildStdout>,
        Option<tokio::process::ChildStderr>,
    ) {
        match &mut self.child {
            Some(c) => (c.stdin.take(), c.stdout.take(), c.stderr.take()),
            None => (None, None, None),
        }
    }

    /// Wait for the leader to exit (the group may live on: see [`Group::release`]).
    pub(crate) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match &mut self.child {
            Some(c) => c.wait().await,
            None => Err(std::io::Error::other("the child was already stopped")),
        }
    }

    /// The run ended by itself: what is left of its group is left alone.
    pub(crate) fn release(&mut self) {
        self.stage = Stage::Settled;
    }

    /// Stop the whole group (SIGTERM, the grace, SIGKILL) and reap the child: how it ended.
    pub(crate) async fn stop(&mut self) -> Option<std::process::ExitStatus> {
        if self.stage == Stage::Running {
            self.signal(Kill::Term);
            self.stage = Stage::Terminating;
        }
        self.after_term().await
    }

    /// The grace after SIGTERM, SIGKILL, the reaping.
    async fn after_term(&mut self) -> Option<std::process::ExitStatus> {
        let until = std::time::Instant::now() + KILL_GRACE;
        loop {
            if let Some(c) = &mut self.child {
                let _ = c.try_wait();
            }
            if !self.group_alive() || std::time::Instant::now() >= until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.signal(Kill::Kill);
        let status = match &mut self.child {
            Some(c) => {
                let _ = c.start_kill();
                c.wait().await.ok()
            }
            None => None,
        };
        self.stage = Stage::Settled;
        status
    }

    /// Kill the group now (the leader reaped by tokio once it has exited).
    fn kill_now(&mut self) {
        self.signal(Kill::Kill);
        if let Some(c) = &mut self.child {
            let _ = c.start_kill();
            let _ = c.try_wait();
        }
        self.stage = Stage::Settled;
    }

    #[cfg(unix)]
    fn signal(&self, kill: Kill) {
        use nix::sys::signal::{Signal, killpg};
        let Ok(raw) = i32::try_from(self.pgid) else { return };
        if raw <= 1 {
            return;
        }
        let sig = match kill {
            Kill::Term => Signal::SIGTERM,
            Kill::Kill => Signal::SIGKILL,
        };
        let _ = killpg(nix::unistd::Pid::from_raw(raw), sig);
    }

    #[cfg(not(unix))]
    fn signal(&self, _kill: Kill) {}

    #[cfg(unix)]
    fn group_alive(&self) -> bool {
        let raw = i32::try_from(self.pgid).unwrap_or(0);
        raw > 1 && nix::sys::signal::killpg(nix::unistd::Pid::from_raw(raw), None).is_ok()
    }

    /// Without process groups: while the child has not been reaped.
    #[cfg(not(unix))]
    fn group_alive(&self) -> bool {
        self.child.as_ref().is_some_and(|c| c.id().is_some())
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        match self.stage {
            Stage::Settled => {}
            Stage::Terminating => self.kill_now(),
            Stage::Running => {
                self.signal(Kill::Term);
                self.stage = Stage::Terminating;
                let rest = Self { child: self.child.take(), pgid: self.pgid, stage: self.stage };
                match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        // Dropped unfinished in turn (the runtime shutting down), `rest`
                        // kills at once.
                        runtime.spawn(async move {
                            let mut rest = rest;
                            rest.after_term().await;
                        });
                    }
                    Err(_) => drop(rest),
                }
                self.stage = Stage::Settled;
            }
        }
    }
}

/// The two signals a group gets.
#[derive(Debug, Clone, Copy)]
enum Kill {
    Term,
    Kill,
}

/// Read a stream to its end into `kept`, up to `limit` bytes (the rest is read and dropped,
/// and the cut noted). With `over`, stop at the first byte past the bound and say so through it.
async fn read_bounded(
    mut r: impl AsyncRead + Unpin,
    limit: usize,
    kept: Kept,
    over: Option<Arc<Notify>>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let mut k = kept.lock();
                let room = limit.saturating_sub(k.0.len());
                k.0.extend_from_slice(&buf[..n.min(room)]);
                if n > room {
                    k.1 = true;
                    if let Some(over) = &over {
                        over.notify_one();
                        break;
                    }
                }
            }
        }
    }
}

/// A signal's name as Node.js gives it (`SIGKILL`), else its number.
pub(crate) fn signal_name(sig: i32) -> String {
    #[cfg(unix)]
    if let Ok(s) = nix::sys::signal::Signal::try_from(sig) {
        return s.as_str().to_owned();
    }
    sig.to_string()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn job<'a>(args: &'a [String], env: &'a Env) -> Job<'a> {
        Job {
            program: OsStr::new("/bin/sh"),
            args,
            cwd: Path::new("/"),
            env,
            stdin: None,
            limit: 16,
            overflow: Overflow::Cut,
            timeout: Duration::from_secs(10),
        }
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["-c".into(), script.into()]
    }

    #[tokio::test]
    async fn output_exit_and_stdin() {
        let env = Env::new();
        let args = sh("cat; echo oops >&2; exit 3");
        let mut j = job(&args, &env);
        j.stdin = Some(b"hello".to_vec());
        let f = run(j).await;
        assert_eq!((f.stdout.as_str(), f.stderr.as_str()), ("hello", "oops\n"));
        assert_eq!((f.exit_code, f.signal, f.succeeded()), (Some(3), None, false));
    }

    #[tokio::test]
    async fn cut_keeps_the_start_and_goes_on_stop_stops() {
        let env = Env::new();
        let args = sh("printf '%0100d' 0; exit 0");
        let f = run(job(&args, &env)).await;
        assert_eq!((f.stdout.len(), f.over_limit, f.exit_code), (16, true, Some(0)));
        let args = sh("printf '%0100d' 0; sleep 30");
        let mut j = job(&args, &env);
        j.overflow = Overflow::Stop;
        let started = std::time::Instant::now();
        let f = run(j).await;
        assert!(f.over_limit && !f.succeeded() && f.signal.is_some(), "{f:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_deadline_stops_the_whole_group() {
        let env = Env::new();
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let args = sh(&format!("sleep 60 & echo $! > {}; wait", pid_file.display()));
        let mut j = job(&args, &env);
        j.timeout = Duration::from_millis(300);
        let f = run(j).await;
        assert!(f.timed_out && f.signal.is_some(), "{f:?}");
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        // Gone, or a zombie nobody reaped yet (no init that reaps in some containers).
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or("").trim_start().chars().next();
        assert!(matches!(state, None | Some('Z')), "the background child outlived its group");
    }

    #[tokio::test]
    async fn a_missing_program_is_said() {
        let env = Env::new();
        let mut j = job(&[], &env);
        j.program = OsStr::new("/nonexistent/program");
        let f = run(j).await;
        assert!(f.spawn_error.as_deref().is_some_and(|e| e.contains("/nonexistent/program")));
    }

    /// `execvp(3)`'s lookup: the first executable file on the environment's `PATH` (a
    /// non-executable one skipped, a relative entry taken from the child's directory); a
    /// name with a `/`, or an environment without `PATH`, left alone.
    #[test]
    fn a_program_is_resolved_on_the_childs_path_as_execvp_does() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let (a, b, rel) = (root.path().join("a"), root.path().join("b"), root.path().join("rel"));
        for d in [&a, &b, &rel] {
            std::fs::create_dir(d).unwrap();
        }
        let put = |dir: &Path, mode: u32| {
            let f = dir.join("tool");
            std::fs::write(&f, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            f
        };
        put(&a, 0o644);
        let found = put(&b, 0o755);
        let mut env = Env::new();
        let path = |dirs: &[&Path]| std::env::join_paths(dirs).unwrap().into_string().unwrap();
        env.insert("PATH".into(), path(&[&a, &b]));
        let tool = OsStr::new("tool");
        assert_eq!(resolve(tool, &env, root.path()), found, "the non-executable one is skipped");
        env.insert("PATH".into(), path(&[Path::new("rel"), &b]));
        let relative = put(&rel, 0o755);
        assert_eq!(resolve(tool, &env, root.path()), relative);
        assert_eq!(resolve(OsStr::new("./tool"), &env, root.path()), Path::new("./tool"));
        assert_eq!(resolve(OsStr::new("absent"), &env, root.path()), Path::new("absent"));
        env.remove("PATH");
        assert_eq!(resolve(tool, &env, root.path()), Path::new("tool"));
    }
}
