//! Shell completion and man pages, from the clap definitions.
//!
//! `gemctl completions SHELL` prints a script that registers gemctl's completer with the shell:
//! on Tab the shell runs `GEMCTL_COMPLETE=SHELL gemctl -- WORDS...` and gemctl answers from its
//! clap definitions (clap_complete's dynamic engine), asking the running daemon for the names
//! only it knows (servers, tools, sessions, extensions, skills). A daemon that does not answer within a moment gives
//! no names, never an error or a start. `gemctl man DIR` writes a man page per command.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use clap_complete::engine::CompletionCandidate;
use clap_complete::env::{Bash, EnvCompleter, Fish, Zsh};

/// The variable that asks gemctl to complete instead of run.
pub const VAR: &str = "GEMCTL_COMPLETE";

/// How long a completion waits for the daemon.
const ASK_FOR: Duration = Duration::from_millis(500);

/// How long a tool-name completion waits: the session's servers may be (re)starting, which
/// takes a second or two, and no names at all is worse than a short wait (audit turn 4, C9).
const TOOLS_FOR: Duration = Duration::from_millis(2500);

/// The shells a registration script is written for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    /// bash (4.4 or later)
    Bash,
    /// zsh
    Zsh,
    /// fish
    Fish,
}

/// Print the registration script for `shell`.
pub fn registration(shell: Shell) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let completer = exe.display().to_string();
    let s: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
    };
    let mut out = Vec::new();
    s.write_registration(VAR, "gemctl", "gemctl", &completer, &mut out)?;
    use std::io::Write;
    std::io::stdout().write_all(&out)?;
    Ok(())
}

/// Write `gemctl.1` and a page per subcommand (`gemctl-mcp-list.1`, ...) into `dir`.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    write_pages(cmd, &[], dir, &mut written)?;
    Ok(written)
}

fn write_pages(
    cmd: clap::Command,
    path: &[&str],
    dir: &Path,
    written: &mut Vec<String>,
) -> anyhow::Result<()> {
    let words: Vec<&str> = std::iter::once("gemctl").chain(path.iter().copied()).collect();
    // The page is `gemctl-mcp-add`; its synopsis is what one types, `gemctl mcp add`.
    let cmd = cmd.name(words.join("-")).bin_name(words.join(" "));
    let file = dir.join(format!("{}.1", words.join("-")));
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut buf)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(&mut buf)?;
    }
    if let Some(examples) = crate::help::examples::roff(&path.join(" ")) {
        buf.extend_from_slice(examples.as_bytes());
    }
    if path.is_empty() {
        man.render_version_section(&mut buf)?;
    }
    std::fs::write(&file, buf)?;
    written.push(file.display().to_string());
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let mut sub_path = path.to_vec();
        sub_path.push(sub.get_name());
        write_pages(sub.clone(), &sub_path, dir, written)?;
    }
    Ok(())
}

/// `gemctl man`'s default: `$XDG_DATA_HOME/man/man1`, else `~/.local/share/man/man1`.
pub fn user_man_dir() -> anyhow::Result<std::path::PathBuf> {
    let data = match std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .ok_or_else(|| anyhow::anyhow!("HOME is not set: name the directory"))?;
            std::path::PathBuf::from(home).join(".local/share")
        }
    };
    Ok(data.join("man/man1"))
}

/// How to make `man` find pages written into `dir` (`.../man/man1`), when it would not: man
/// looks in `MANPATH`, or without one beside each `bin` directory on `PATH` (`D/../share/man`,
/// `D/../man`).
pub fn man_path_hint(dir: &Path) -> Option<String> {
    let root = dir.parent().filter(|_| dir.file_name().is_some_and(|n| n == "man1"))?;
    let same = |p: &Path| {
        std::fs::canonicalize(p)
            .ok()
            .zip(std::fs::canonicalize(root).ok())
            .is_some_and(|(a, b)| a == b)
    };
    let found = match std::env::var_os("MANPATH").filter(|m| !m.is_empty()) {
        Some(m) => std::env::split_paths(&m).any(|p| same(&p)),
        None => std::env::var_os("PATH").is_some_and(|p| {
            std::env::split_paths(&p)
                .filter_map(|d| d.parent().map(Path::to_path_buf))
                .any(|up| same(&up.join("share/man")) || same(&up.join("man")))
        }),
    };
    if found {
        return None;
    }
    let mut hint = format!(
        "man looks there only when it is on MANPATH: export MANPATH=\"{}:$MANPATH\"",
        root.display()
    );
    // `D/share/man` is found without MANPATH when `D/bin` is on PATH.
    if root.ends_with("share/man")
        && let Some(bin) = root.parent().and_then(Path::parent).map(|d| d.join("bin"))
    {
        hint.push_str(&format!(", or put {} on PATH", bin.display()));
    }
    Some(hint)
}

/// Ask the daemon (if one answers at once; never starting one) and map its answer to names.
fn ask<T>(
    budget: Duration,
    call: impl AsyncFnOnce(geminid_protocol::client::Client) -> Option<T>,
    names: impl FnOnce(T) -> Vec<(String, Option<String>)>,
    current: &OsStr,
) -> Vec<CompletionCandidate> {
    let Some(prefix) = current.to_str() else { return Vec::new() };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return Vec::new();
    };
    let answer = rt.block_on(async {
        let socket = geminid_protocol::socket::socket_path(None).ok()?;
        let work = async {
            let (client, _) = crate::daemon::connect::connect_running(&socket).await.ok()?;
            call(client).await
        };
        tokio::time::timeout(budget, work).await.ok().flatten()
    });
    answer
        .map(names)
        .unwrap_or_default()
        .into_iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(n, help)| CompletionCandidate::new(n).help(help.map(Into::into)))
        .collect()
}

/// The current directory's default session (what a command without `--session` acts for).
async fn default_session(client: &geminid_protocol::client::Client) -> Option<String> {
    use geminid_protocol::api::SessionApiClient;
    let workspace = std::env::current_dir().ok()?.display().to_string();
    let p = geminid_protocol::session::SessionListParams {
        workspace: Some(workspace),
        ..Default::default()
    };
    let list = client.list(Some(p)).await.ok()?;
    list.sessions.into_iter().find(|s| s.is_default).map(|s| s.id)
}

/// Server names the daemon runs, for `mcp restart|logs|tools`.
pub fn servers(current: &OsStr) -> Vec<CompletionCandidate> {
    use geminid_protocol::api::McpApiClient;
    ask(
        ASK_FOR,
        async |c| {
            let session = default_session(&c).await;
            let p = geminid_protocol::mcp::ListServersParams { session, usage: false };
            c.mcp_list_servers(Some(p)).await.ok()
        },
        |r| r.servers.into_iter().map(|s| (s.name, Some(s.state.label().to_owned()))).collect(),
        current,
    )
}

/// Tool names of the current directory's session, for `call` and `mcp describe`: those policy
/// hides from the model too (`gemctl call` is how a person calls them).
pub fn tools(current: &OsStr) -> Vec<CompletionCandidate> {
    use geminid_protocol::api::ToolsApiClient;
    ask(
        TOOLS_FOR,
        async |c| {
            let session = default_session(&c).await?;
            let p = geminid_protocol::tools::ToolsListParams { session, raw: false, all: true };
            c.tools_list(p).await.ok()
        },
        |r| {
            r.tools
                .iter()
                .map(|t| {
                    let first = t.declaration.description.lines().next().map(str::to_owned);
                    (t.name.clone(), first)
                })
                .collect()
        },
        current,
    )
}

/// Installed extensions, for `extensions update|uninstall|enable|disable|verify|accept`.
pub fn extensions(current: &OsStr) -> Vec<CompletionCandidate> {
    use geminid_protocol::api::ExtensionsApiClient;
    ask(
        ASK_FOR,
        async |c| {
            let session = default_session(&c).await?;
            let p = geminid_protocol::extensions::ExtensionsListParams { session };
            c.extensions_list(p).await.ok()
        },
        |r| r.extensions.into_iter().map(|e| (e.name, e.description)).collect(),
        current,
    )
}

/// The current directory's skills, for `skills show|uninstall|enable|disable|activate`.
pub fn skills(current: &OsStr) -> Vec<CompletionCandidate> {
    use geminid_protocol::api::SkillsApiClient;
    ask(
        ASK_FOR,
        async |c| {
            let session = default_session(&c).await?;
            let p = geminid_protocol::skills::SkillsListParams { session, instructions: false };
            c.skills_list(p).await.ok()
        },
        |r| r.skills.into_iter().map(|s| (s.name, Some(s.description))).collect(),
        current,
    )
}

/// Session ids, for `--session`, `attach` and `session show|close`.
pub fn sessions(current: &OsStr) -> Vec<CompletionCandidate> {
    use geminid_protocol::api::SessionApiClient;
    ask(
        ASK_FOR,
        async |c| c.list(None).await.ok(),
        |r| r.sessions.into_iter().map(|s| (s.id, Some(s.workspace))).collect(),
        current,
    )
}
