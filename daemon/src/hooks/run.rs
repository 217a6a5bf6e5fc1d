//! One hook's process, as Gemini CLI's `HookRunner` runs it: `bash -c` with the command's
//! `$GEMINI_*` references substituted (shell-escaped), the session's environment plus the
//! `GEMINI_*` variables and the hook's `env`, the event's input as JSON on stdin, the session's
//! directory as cwd. The hook leads a process group of its own (`proc::Group`): past its
//! `timeout`, or when its run is dropped first (the call cancelled, the caller gone, the
//! daemon stopping), the whole group gets SIGTERM, then SIGKILL after `proc::KILL_GRACE`. Each output stream is kept up to [`MAX_OUTPUT`] (the rest is
//! read and dropped, and the cut is said).
//!
//! What the output means (the source's rules, which its docs get wrong): the trimmed stdout,
//! else the trimmed stderr, parsed as JSON (a JSON string is parsed once more); an object is the
//! output whatever the exit code. Text that is no JSON: exit 0 allows with it as
//! `systemMessage`, exit 1 allows with `Warning: ` before it, any other exit denies with it as
//! `reason`. No output decides nothing (so exit 2 with nothing printed does not block).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{HookCommand, HookEvent, HookSource};

/// Output kept per stream.
pub const MAX_OUTPUT: usize = 1 << 20;

/// Where and for whom a hook runs.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The session's directory (cwd, `$GEMINI_PROJECT_DIR`, `$GEMINI_CWD`).
    pub cwd: &'a Path,
    /// `$GEMINI_SESSION_ID`.
    pub session_id: &'a str,
    /// `$GEMINI_PLANS_DIR`.
    pub plans_dir: &'a Path,
    /// The session's environment (the client's), which hooks inherit.
    pub env: &'a BTreeMap<String, String>,
    /// Whether the folder is trusted (settings hooks do not run in one that is not).
    pub trusted: bool,
}

/// How the output was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Format {
    /// A JSON object.
    Json,
    /// Plain text, turned into an output by the exit code.
    Text,
}

/// One hook's run.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The hook.
    pub hook: HookCommand,
    /// How long it took.
    pub took: Duration,
    /// Its exit code as Gemini CLI reports it (a signal reads as 0); `None` when it did not
    /// run or timed out.
    pub exit_code: Option<i32>,
    /// Exit code 0 (and it ran, and did not time out).
    pub success: bool,
    /// What it decided, if it said anything.
    pub output: Option<Map<String, Value>>,
    /// How `output` was read.
    pub format: Option<Format>,
    /// Its stdout (up to [`MAX_OUTPUT`]).
    pub stdout: String,
    /// Its stderr (up to [`MAX_OUTPUT`]).
    pub stderr: String,
    /// Why it failed: timed out, could not start, refused.
    pub error: Option<String>,
    /// What else to know (an output stream was cut).
    pub note: Option<String>,
}

/// `s` as one single-quoted shell word.
#[cfg(not(windows))]
pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `s` as one PowerShell word (Gemini CLI's `escapeShellArg` for PowerShell).
#[cfg(windows)]
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "''"))
}

/// The shell a hook's command runs in, and the arguments before the command: `bash -c`, and
/// on Windows PowerShell (`ComSpec` when it names PowerShell, else `pwsh.exe` on the PATH, else
/// Windows PowerShell), as Gemini CLI's `getShellConfiguration` chooses.
#[cfg(not(windows))]
pub(crate) fn shell(_env: &BTreeMap<String, String>) -> (String, &'static [&'static str]) {
    ("bash".to_owned(), &["-c"])
}

#[cfg(windows)]
pub(crate) fn shell(env: &BTreeMap<String, String>) -> (String, &'static [&'static str]) {
    const PREFIX: &[&str] = &["-NoProfile", "-NonInteractive", "-Command"];
    if let Some(spec) = env.get("ComSpec") {
        let lower = spec.to_lowercase();
        if lower.ends_with("powershell.exe") || lower.ends_with("pwsh.exe") {
            return (spec.clone(), PREFIX);
        }
    }
    let on_path =
        env.get("PATH").into_iter().flat_map(|p| std::env::split_paths(p)).find_map(|d| {
            let exe = d.join("pwsh.exe");
            exe.is_file().then(|| exe.display().to_string())
        });
    match on_path {
        Some(pwsh) => (pwsh, &["-NoProfile", "-Command"]),
        None => ("powershell.exe".to_owned(), PREFIX),
    }
}

/// The variables Gemini CLI substitutes in a hook's command, each also in the hook's
/// environment.
#[cfg(not(windows))]
const SUBSTITUTED: [&str; 5] = [
    "GEMINI_PROJECT_DIR",
    "GEMINI_CWD",
    "GEMINI_PLANS_DIR",
    "GEMINI_SESSION_ID",
    "CLAUDE_PROJECT_DIR",
];

/// The command as bash gets it. Gemini CLI pastes each value, shell-escaped, over
/// `$GEMINI_PROJECT_DIR` (and the others); inside the double quotes hooks are written with
/// (`test -d "$GEMINI_PROJECT_DIR"`) that lets a folder named `$(...)` run. Here the values
/// stay in the environment and the command refers to them: outside quotes as `"${VAR}"` (one
/// word, as Gemini CLI's escaping gives), inside single quotes by closing them around it (the
/// value, as Gemini CLI pastes it there), and inside double quotes, a here-document or
/// arithmetic as written, where bash expands it from the environment itself.
#[cfg(not(windows))]
pub(crate) fn expand(command: &str, _ctx: &Context<'_>) -> String {
    use crate::shell::{Context as Quoting, reference, rewrite};
    let mut out = command.to_owned();
    for var in SUBSTITUTED {
        let pattern = format!("${var}");
        let rewritten = rewrite(&out, &pattern, |c| match c {
            Quoting::Plain | Quoting::Single | Quoting::AnsiC => reference(var, c),
            Quoting::Double | Quoting::Heredoc | Quoting::Arithmetic => Some(pattern.clone()),
        });
        // Every context has a replacement above.
        if let Ok(r) = rewritten {
            out = r;
        }
    }
    out
}

/// PowerShell: Gemini CLI's substitutions, shell-escaped.
#[cfg(windows)]
pub(crate) fn expand(command: &str, ctx: &Context<'_>) -> String {
    let cwd = shell_quote(&ctx.cwd.display().to_string());
    let plans = shell_quote(&ctx.plans_dir.display().to_string());
    let session = shell_quote(ctx.session_id);
    command
        .replace("$GEMINI_PROJECT_DIR", &cwd)
        .replace("$GEMINI_CWD", &cwd)
        .replace("$GEMINI_PLANS_DIR", &plans)
        .replace("$GEMINI_SESSION_ID", &session)
        .replace("$CLAUDE_PROJECT_DIR", &cwd)
}

/// What a hook's output says (see the module's rules).
pub(crate) fn interpret(
    stdout: &str,
    stderr: &str,
    exit: i32,
) -> Option<(Map<String, Value>, Format)> {
    let text = match stdout.trim() {
        "" => stderr.trim(),
        t => t,
    };
    if text.is_empty() {
        return None;
    }
    let parsed = serde_json::from_str::<Value>(text).and_then(|v| match v {
        Value::String(s) => serde_json::from_str::<Value>(&s),
        other => Ok(other),
    });
    match parsed {
        Ok(Value::Object(o)) => Some((o, Format::Json)),
        // JSON that is no object (a number, null, an array) decides nothing.
        Ok(_) => None,
        Err(_) => {
            let mut o = Map::new();
            match exit {
                0 => {
                    o.insert("decision".into(), "allow".into());
                    o.insert("systemMessage".into(), text.into());
                }
                1 => {
                    o.insert("decision".into(), "allow".into());
                    o.insert("systemMessage".into(), format!("Warning: {text}").into());
                }
                _ => {
                    o.insert("decision".into(), "deny".into());
                    o.insert("reason".into(), text.into());
                }
            }
            Some((o, Format::Text))
        }
    }
}

/// Read a stream to its end, keeping the first [`MAX_OUTPUT`] bytes: the text, and whether
/// it was cut.
pub(crate) async fn bounded(mut r: impl AsyncRead + Unpin) -> (String, bool) {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut cut = false;
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_OUTPUT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                cut |= n > room;
            }
        }
    }
    (String::from_utf8_lossy(&kept).into_owned(), cut)
}

/// The shell that runs `hook` (its program, for messages) and the command line, environment,
/// folder and pipes it runs with.
fn command(hook: &HookCommand, ctx: &Context<'_>) -> (String, tokio::process::Command) {
    let (program, prefix) = shell(ctx.env);
    #[cfg(unix)]
    let mut cmd = tokio::process::Command::new(crate::proc::resolve(
        std::ffi::OsStr::new(&program),
        ctx.env,
        ctx.cwd,
    ));
    #[cfg(not(unix))]
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(prefix)
        .arg(expand(&hook.command, ctx))
        .current_dir(ctx.cwd)
        .env_clear()
        .envs(ctx.env)
        .env("GEMINI_PROJECT_DIR", ctx.cwd)
        .env("GEMINI_PLANS_DIR", ctx.plans_dir)
        .env("GEMINI_CWD", ctx.cwd)
        .env("GEMINI_SESSION_ID", ctx.session_id)
        .env("CLAUDE_PROJECT_DIR", ctx.cwd)
        .envs(&hook.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    (program, cmd)
}

/// Run one hook for `event` with `input` (its stdin).
pub async fn run(hook: &HookCommand, event: HookEvent, input: &Value, ctx: &Context<'_>) -> Ran {
    let started = Instant::now();
    let failed = |error: String, took: Duration| Ran {
        hook: hook.clone(),
        took,
        exit_code: None,
        success: false,
        output: None,
        format: None,
        stdout: String::new(),
        stderr: String::new(),
        error: Some(error),
        note: None,
    };
    if hook.source == HookSource::Project && !ctx.trusted {
        return failed(
            "blocked: a settings hook does not run in an untrusted folder".into(),
            Duration::ZERO,
        );
    }
    let (program, mut cmd) = command(hook, ctx);
    let mut group = match crate::proc::Group::spawn(&mut cmd) {
        Ok(c) => c,
        Err(e) => {
            let why = format!(
                "hook execution failed for event '{}': cannot start {program}: {e}",
                event.name()
            );
            return failed(why, started.elapsed());
        }
    };
    let (stdin, stdout, stderr) = group.pipes();
    let body = serde_json::to_vec(input).unwrap_or_default();
    // A hook that never reads its stdin gets EPIPE or a full pipe: neither holds it up.
    let feed = tokio::spawn(async move {
        if let Some(mut s) = stdin {
            let _ = s.write_all(&body).await;
            let _ = s.shutdown().await;
        }
    });
    let (Some(stdout), Some(stderr)) = (stdout, stderr) else {
        group.stop().await;
        return failed(format!("{program} started without its output pipes"), started.elapsed());
    };
    let out = tokio::spawn(bounded(stdout));
    let err = tokio::spawn(bounded(stderr));
    let deadline = Duration::from_millis(hook.timeout_ms);
    // Gemini CLI waits for the streams to close as well as for the process: a hook that leaves
    // a child holding its output open runs until its timeout.
    let waited = tokio::time::timeout(deadline, async {
        let status = group.wait().await;
        let out = out.await;
        let err = err.await;
        (status, out, err)
    })
    .await;
    feed.abort();
    let (status, (stdout, out_cut), (stderr, err_cut)) = match waited {
        Ok((status, Ok(out), Ok(err))) => {
            group.release();
            (status, out, err)
        }
        Ok((status, out, err)) => {
            group.release();
            (status, out.unwrap_or_default(), err.unwrap_or_default())
        }
        Err(_) => {
            group.stop().await;
            return failed(
                format!("Hook timed out after {}ms", hook.timeout_ms),
                started.elapsed(),
            );
        }
    };
    let took = started.elapsed();
    let code = status.as_ref().ok().and_then(std::process::ExitStatus::code);
    // Killed by a signal: Gemini CLI reads the missing code as 0.
    let exit = code.unwrap_or(0);
    let interpreted = interpret(&stdout, &stderr, exit);
    let mut note = None;
    if out_cut || err_cut {
        note = Some(format!(
            "{} was cut at {} MiB",
            match (out_cut, err_cut) {
                (true, true) => "stdout and stderr",
                (true, false) => "stdout",
                _ => "stderr",
            },
            MAX_OUTPUT >> 20
        ));
    }
    Ran {
        hook: hook.clone(),
        took,
        exit_code: Some(exit),
        success: code == Some(0),
        format: interpreted.as_ref().map(|(_, f)| *f),
        output: interpreted.map(|(o, _)| o),
        stdout,
        stderr,
        error: None,
        note,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn output_rules_by_exit_code() {
        let obj = |v: Value| v.as_object().cloned();
        assert_eq!(
            interpret("{\"decision\":\"block\"}", "", 2).map(|o| o.0),
            obj(json!({"decision": "block"})),
            "JSON with exit 2 is not forced to deny"
        );
        assert_eq!(
            interpret("\"{\\\"decision\\\":\\\"ask\\\"}\"", "", 0).map(|o| o.0),
            obj(json!({"decision": "ask"})),
            "double-encoded"
        );
        assert_eq!(
            interpret(" hello \n", "", 0).map(|o| o.0),
            obj(json!({"decision": "allow", "systemMessage": "hello"}))
        );
        assert_eq!(
            interpret("", "careful", 1).map(|o| o.0),
            obj(json!({"decision": "allow", "systemMessage": "Warning: careful"})),
            "stderr when stdout is empty"
        );
        assert_eq!(
            interpret("no", "", 2).map(|o| o.0),
            obj(json!({"decision": "deny", "reason": "no"}))
        );
        assert_eq!(
            interpret("no", "", 3).map(|o| o.0),
            obj(json!({"decision": "deny", "reason": "no"}))
        );
        assert_eq!(interpret("", "", 2), None, "exit 2 with nothing printed decides nothing");
        assert_eq!(interpret("42", "", 0), None, "JSON that is no object");
        assert_eq!(
            interpret("\"just text\"", "", 2).map(|o| o.0),
            obj(json!({"decision": "deny", "reason": "\"just text\""}))
        );
    }

    /// A workspace folder whose name is a command: each way a hook may refer to it gives the
    /// path, in a real bash, and nothing runs (Gemini CLI's substitution ran the name inside
    /// double quotes).
    #[cfg(unix)]
    #[test]
    fn a_workspace_path_reaches_bash_as_text_wherever_the_hook_refers_to_it() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("it's $(touch PWNED) `touch PWNED` \"q\"");
        std::fs::create_dir(&ws).unwrap();
        let env = BTreeMap::new();
        let ctx = Context {
            cwd: &ws,
            session_id: "s1",
            plans_dir: Path::new("/p"),
            env: &env,
            trusted: true,
        };
        let path = ws.display().to_string();
        for (command, want) in [
            ("printf %s $GEMINI_PROJECT_DIR", path.clone()),
            ("printf %s \"$GEMINI_PROJECT_DIR\"", path.clone()),
            ("printf %s \"${GEMINI_PROJECT_DIR}\"", path.clone()),
            ("printf %s '$GEMINI_PROJECT_DIR'", path.clone()),
            ("cd $GEMINI_PROJECT_DIR && printf %s \"$PWD\"", path.clone()),
            ("test -d \"$GEMINI_PROJECT_DIR\" && printf ok", "ok".to_owned()),
            ("printf %s $CLAUDE_PROJECT_DIR/x $GEMINI_SESSION_ID", format!("{path}/xs1")),
            (
                "printf %s \"$(basename \"$GEMINI_CWD\")\"",
                ws.file_name().unwrap().to_string_lossy().into_owned(),
            ),
        ] {
            let out = std::process::Command::new("bash")
                .args(["-c", &expand(command, &ctx)])
                .current_dir(&ws)
                .env_clear()
                .env("GEMINI_PROJECT_DIR", &ws)
                .env("GEMINI_CWD", &ws)
                .env("CLAUDE_PROJECT_DIR", &ws)
                .env("GEMINI_SESSION_ID", "s1")
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{command}");
            assert!(
                !ws.join("PWNED").exists() && !root.path().join("PWNED").exists(),
                "{command} ran the folder's name"
            );
        }
        assert_eq!(
            expand("cd $GEMINI_PROJECT_DIR && echo $GEMINI_SESSION_ID '$GEMINI_PLANS_DIR'", &ctx),
            "cd \"${GEMINI_PROJECT_DIR}\" && echo \"${GEMINI_SESSION_ID}\" ''\"${GEMINI_PLANS_DIR}\"''"
        );
    }
}
