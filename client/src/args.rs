//! What the commands that install things (extensions, skills) share: the scope a command
//! writes, a path made absolute, a yes asked at the terminal.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use geminid_protocol::config::WriteScope;

use crate::output::err;

/// `user`, or `workspace` (also `project`): which settings file (or rule) a command writes.
pub fn parse_scope(s: &str) -> Result<WriteScope, String> {
    match s {
        "user" => Ok(WriteScope::User),
        "workspace" | "project" => Ok(WriteScope::Project),
        other => Err(format!("{other:?} is not a scope: user or workspace")),
    }
}

/// Asks the person at the terminal; false when nobody can answer.
pub fn ask_yes(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    err!("{question} [y/N] ");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}

pub fn absolute(p: &Path) -> anyhow::Result<String> {
    Ok(if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir()?.join(p) }
        .display()
        .to_string())
}
