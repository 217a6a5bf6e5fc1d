//! A file command's prompt made into what the model gets, in Gemini CLI's order: `@{path}`
//! (a file's or a folder's content, only inside the workspace), then `!{cmd}` (its output, the
//! command run by the caller once policy allows it) with `{{args}}` shell-escaped inside and
//! raw outside, then, when the prompt has no `{{args}}`, the whole invocation appended.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::ignore::Ignore;
use super::{ExpandError, injections};

/// The placeholder for what the person typed after the command.
pub(crate) const ARGS: &str = "{{args}}";
/// The largest file `@{path}` includes, and the most a folder's files may add up to.
pub(crate) const MAX_INCLUDED: u64 = 1 << 20;

use crate::hooks::run::shell_quote;

/// The absolute path `@{given}` names, if it is inside `workspace`.
fn inside(workspace: &Path, given: &str) -> Result<PathBuf, ExpandError> {
    let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let joined =
        if Path::new(given).is_absolute() { PathBuf::from(given) } else { root.join(given) };
    let real =
        std::fs::canonicalize(&joined).map_err(|_| ExpandError::NotFound(given.to_owned()))?;
    if !real.starts_with(&root) {
        return Err(ExpandError::Outside { given: given.to_owned(), root });
    }
    Ok(real)
}

/// A regular file's text: opened without blocking (a FIFO's open waits for a writer) and
/// checked on the open handle, so nothing but a regular file is read.
fn read_text(file: &Path, budget: &mut u64) -> Result<String, ExpandError> {
    let mut bytes = Vec::new();
    let read = |source| ExpandError::Read { file: file.to_path_buf(), source };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, nix::libc::O_NONBLOCK);
    let f = options.open(file).map_err(read)?;
    if !f.metadata().map_err(read)?.is_file() {
        return Err(ExpandError::NotRegular(file.to_path_buf()));
    }
    f.take(*budget + 1).read_to_end(&mut bytes).map_err(read)?;
    if bytes.len() as u64 > *budget {
        return Err(ExpandError::TooLarge(file.to_path_buf()));
    }
    *budget -= bytes.len() as u64;
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|e| format!("[binary file, {} bytes]", e.as_bytes().len())))
}

/// The content `@{given}` stands for, as Gemini CLI lays out a file or a folder's files; what
/// the workspace's ignore files name is left out (said in `notes` for a file named alone).
pub(crate) fn include(
    workspace: &Path,
    given: &str,
    ignore: &Ignore,
    notes: &mut Vec<String>,
) -> Result<String, ExpandError> {
    let path = inside(workspace, given)?;
    let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let rel_of = |p: &Path| p.strip_prefix(&root).unwrap_or(p).to_string_lossy().replace('\\', "/");
    let mut budget = MAX_INCLUDED;
    if !path.is_dir() {
        if ignore.ignores(&rel_of(&path)) {
            notes.push(format!(
                "File '@{{{given}}}' was ignored by .gitignore or .geminiignore and was not included"
            ));
            return Ok(String::new());
        }
        return read_text(&path, &mut budget);
    }
    let mut files = Vec::new();
    let mut pending = vec![path.clone()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().filter_map(Result::ok) {
            let p = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() && entry.file_name() != ".git" {
                pending.push(p);
            } else if kind.is_file() || kind.is_symlink() {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = format!("--- Start of content for directory: {given} ---\n");
    for f in files {
        let rel = f.strip_prefix(&path).unwrap_or(&f).display().to_string();
        match std::fs::canonicalize(&f) {
            Ok(real) if real.starts_with(&root) && ignore.ignores(&rel_of(&real)) => {}
            Ok(real) if real.starts_with(&root) && real.is_file() => {
                out.push_str(&format!("--- {rel} ---\n"));
                out.push_str(&read_text(&real, &mut budget)?);
                out.push('\n');
            }
            Ok(_) | Err(_) => {
                out.push_str(&format!("--- Skipped {rel}: traverses outside workspace ---\n\n"));
            }
        }
    }
    out.push_str(&format!("--- End of content for directory: {given} ---"));
    Ok(out)
}

/// A piece of a prompt after step 1: the command file's own text, or what an `@{path}` put in.
/// Only the prompt's own text is looked at for `!{cmd}` and `{{args}}` (an included file is
/// text: what it documents never runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// The command file's own text.
    Prompt(String),
    /// What an `@{path}` included.
    Included(String),
}

/// Step 1: every `@{path}` replaced by its content; one that cannot be read stays as written
/// (a part of the prompt's own) and is noted.
pub(crate) fn at_files(
    prompt: &str,
    workspace: &Path,
    notes: &mut Vec<String>,
) -> Result<Vec<Part>, ExpandError> {
    let found = injections(prompt, "@{")?;
    let ignore = Ignore::of(workspace);
    let mut out = Vec::new();
    let mut last = 0;
    for inj in found {
        out.push(Part::Prompt(prompt[last..inj.start].to_owned()));
        match include(workspace, &inj.content, &ignore, notes) {
            Ok(text) => out.push(Part::Included(text)),
            Err(why) => {
                notes.push(format!("Failed to inject content for '@{{{}}}': {why}", inj.content));
                out.push(Part::Prompt(prompt[inj.start..inj.end].to_owned()));
            }
        }
        last = inj.end;
    }
    out.push(Part::Prompt(prompt[last..].to_owned()));
    out.retain(|p| !matches!(p, Part::Prompt(t) if t.is_empty()));
    Ok(out)
}

/// The arguments as Gemini CLI hands them to a command: the words typed after its name, one
/// space between each.
pub(crate) fn normalized_args(typed: &str) -> String {
    typed.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The environment variable a `!{cmd}` finds the invocation's arguments in.
pub(crate) const ARGS_VAR: &str = "GEMINID_ARGS";

/// One `!{cmd}` of a prompt, in its two forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShellCommand {
    /// With `{{args}}` as Gemini CLI puts it in (shell-escaped): what policy checks and a
    /// person confirms.
    pub shown: String,
    /// What bash runs: each `{{args}}` a reference to [`ARGS_VAR`] quoted for where it stands
    /// (`crate::shell`), so no quoting the author wrote around it lets the arguments run.
    pub run: String,
}

/// The `!{cmd}` injections of a prompt (empty ones left out). A `{{args}}` where no reference
/// is safe (a here-document, arithmetic) refuses the command, naming its line.
pub(crate) fn shell_commands(
    prompt: &str,
    args: &str,
) -> Result<Vec<(super::Injection, ShellCommand)>, ExpandError> {
    let quoted = shell_quote(args);
    injections(prompt, "!{")?
        .into_iter()
        .filter(|i| !i.content.is_empty())
        .map(|i| {
            let shown = i.content.replace(ARGS, &quoted);
            let run = runnable(&i.content, &quoted).map_err(|context| {
                let line = prompt.get(..i.start).map_or(0, |b| b.matches('\n').count()) + 1;
                let fix = match context {
                    crate::shell::Context::Arithmetic => {
                        "arithmetic evaluates the arguments as code however they are quoted \
                         (`$(( \"{{args}}\" ))` too): give them to a command as a word instead, \
                         outside `$((…))` and `((…))`"
                    }
                    _ => {
                        "give them to a command as a word instead (`printf '%s\\n' {{args}} | cmd`)"
                    }
                };
                ExpandError::UnsafeArgs {
                    line,
                    context: context.describe(),
                    content: i.content.clone(),
                    fix,
                }
            })?;
            Ok((i, ShellCommand { shown, run }))
        })
        .collect()
}

/// How bash finds the arguments inside double quotes (expand writes `"${GEMINID_ARGS}"` outside
/// them): the one `$` a plain line may hold ([`super::plain`]).
pub(crate) fn args_reference() -> String {
    format!("${{{ARGS_VAR}}}")
}

/// A piece of what bash runs with the arguments pasted in, shell-quoted, where it refers to
/// them: as Gemini CLI would run it.
pub(crate) fn pasted(run: &str, args: &str) -> String {
    let quoted = shell_quote(args);
    let reference = args_reference();
    run.replace(&format!("\"{reference}\""), &quoted).replace(&reference, &quoted)
}

#[cfg(not(windows))]
fn runnable(content: &str, _quoted: &str) -> Result<String, crate::shell::Context> {
    crate::shell::rewrite(content, ARGS, |c| crate::shell::reference(ARGS_VAR, c))
}

/// PowerShell: Gemini CLI's escaping, pasted in.
#[cfg(windows)]
fn runnable(content: &str, quoted: &str) -> Result<String, crate::shell::Context> {
    Ok(content.replace(ARGS, quoted))
}

/// Step 2's assembly: the prompt with each `!{cmd}` replaced by `outputs` (in order) and
/// `{{args}}` raw elsewhere; empty `!{}` vanish.
pub(crate) fn assemble(
    prompt: &str,
    args: &str,
    outputs: &[String],
) -> Result<String, ExpandError> {
    let mut out = String::new();
    let mut last = 0;
    let mut next = outputs.iter();
    for inj in injections(prompt, "!{")? {
        out.push_str(&prompt[last..inj.start].replace(ARGS, args));
        if !inj.content.is_empty() {
            out.push_str(next.next().map_or("", String::as_str));
        }
        last = inj.end;
    }
    out.push_str(&prompt[last..].replace(ARGS, args));
    Ok(out)
}

/// Step 3: without `{{args}}` in the prompt, the invocation as typed (`/name args`, trimmed at
/// its end as Gemini CLI trims the line) is appended when it had arguments.
pub(crate) fn default_args(text: String, uses_args: bool, name: &str, args: &str) -> String {
    if uses_args || args.trim().is_empty() {
        return text;
    }
    format!("{text}\n\n{}", format!("/{name} {args}").trim_end())
}

/// How long a command's `!{cmd}` may run.
pub(crate) const SHELL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Run one `!{cmd}` (`script`, shown as `cmd`) in the workspace with the session's
/// environment: its output (standard output then error, each at most 1 MiB) and Gemini CLI's
/// status line when it did not exit 0.
pub(crate) async fn run_shell(
    cmd: &str,
    script: &str,
    cwd: &Path,
    env: &crate::config::env::Env,
) -> (geminid_protocol::commands::ShellRun, String) {
    use crate::proc::{Job, Overflow, signal_name};
    let (program, prefix) = crate::hooks::run::shell(env);
    let mut args: Vec<String> = prefix.iter().map(|a| (*a).to_owned()).collect();
    args.push(script.to_owned());
    let f = crate::proc::run(Job {
        program: program.as_ref(),
        args: &args,
        cwd,
        env,
        stdin: None,
        limit: crate::hooks::run::MAX_OUTPUT,
        overflow: Overflow::Cut,
        timeout: SHELL_TIMEOUT,
    })
    .await;
    let mut run = geminid_protocol::commands::ShellRun {
        command: cmd.to_owned(),
        exit_code: f.exit_code,
        signal: f.signal,
        output_bytes: 0,
    };
    if let Some(e) = &f.spawn_error {
        run.signal = None;
        return (run, format!("\n[Shell command '{cmd}' could not start: {e}]"));
    }
    if f.timed_out {
        (run.exit_code, run.signal) = (None, None);
        let secs = SHELL_TIMEOUT.as_secs();
        return (run, format!("\n[Shell command '{cmd}' stopped after {secs} s]"));
    }
    let mut text = f.stdout;
    text.push_str(&f.stderr);
    run.output_bytes = text.len() as u64;
    match (run.exit_code, run.signal) {
        (Some(0), _) => {}
        (Some(code), _) => {
            text.push_str(&format!("\n[Shell command '{cmd}' exited with code {code}]"))
        }
        (None, Some(sig)) => {
            let name = signal_name(sig);
            text.push_str(&format!("\n[Shell command '{cmd}' terminated by signal {name}]"));
        }
        (None, None) => {}
    }
    (run, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_assembly() -> anyhow::Result<()> {
        #[cfg(unix)]
        assert_eq!(shell_quote("it's; rm -rf /"), "'it'\\''s; rm -rf /'");
        let cmds = shell_commands("x !{grep {{args}} f} y !{} z", "a b")?;
        assert_eq!(cmds.iter().map(|c| c.1.shown.as_str()).collect::<Vec<_>>(), ["grep 'a b' f"]);
        #[cfg(unix)]
        assert_eq!(cmds[0].1.run, "grep \"${GEMINID_ARGS}\" f");
        let e = shell_commands("one\ntwo !{cat <<E\n{{args}}\nE}", "a").unwrap_err().to_string();
        assert!(e.starts_with("line 2:") && e.contains("here-document"), "{e}");
        let text = assemble("see {{args}}: !{grep {{args}} f}!{}.", "a b", &["OUT".to_owned()])?;
        assert_eq!(text, "see a b: OUT.");
        assert_eq!(default_args("p".into(), false, "c", "x y"), "p\n\n/c x y");
        assert_eq!(default_args("p".into(), true, "c", "x y"), "p");
        assert_eq!(default_args("p".into(), false, "c", "  "), "p");
        assert_eq!(default_args("p".into(), false, "c", " x  y "), "p\n\n/c  x  y");
        assert_eq!(normalized_args("  a \t b\n c  "), "a b c");
        Ok(())
    }

    #[test]
    fn at_files_stay_inside_the_workspace() -> anyhow::Result<()> {
        let t = tempfile::tempdir()?;
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join("docs/sub"))?;
        std::fs::write(ws.join("notes.txt"), "N")?;
        std::fs::write(ws.join("docs/a.md"), "A")?;
        std::fs::write(ws.join("docs/sub/b.md"), "B")?;
        std::fs::write(t.path().join("secret"), "S")?;
        std::fs::write(ws.join(".geminiignore"), "*.tmp\n")?;
        std::fs::write(ws.join("docs/skip.tmp"), "T")?;
        std::fs::write(ws.join("alone.tmp"), "T")?;
        #[cfg(unix)]
        std::os::unix::fs::symlink(t.path().join("secret"), ws.join("docs/leak"))?;
        let mut notes = Vec::new();
        let parts = at_files(
            "[@{alone.tmp}][@{notes.txt}] [@{docs}] [@{../secret}] [@{/etc/passwd}]",
            &ws,
            &mut notes,
        )
        .map_err(|e| anyhow::anyhow!(e))?;
        let text: String = parts
            .iter()
            .map(|p| match p {
                Part::Prompt(t) | Part::Included(t) => t.as_str(),
            })
            .collect();
        assert!(
            text.starts_with(
                "[][N] [--- Start of content for directory: docs ---\n--- a.md ---\nA\n"
            ),
            "{text}"
        );
        assert!(text.contains("--- sub/b.md ---\nB\n"), "{text}");
        #[cfg(unix)]
        assert!(text.contains("--- Skipped leak: traverses outside workspace ---"), "{text}");
        assert!(text.ends_with("[@{../secret}] [@{/etc/passwd}]"), "placeholders stay: {text}");
        assert!(!text.contains("skip.tmp"), "ignored: {text}");
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0].contains("was ignored by .gitignore or .geminiignore"), "{notes:?}");
        assert!(notes[1..].iter().all(|n| n.contains("outside the workspace")), "{notes:?}");
        Ok(())
    }
}
