//! A program on a real terminal: a tmux server of its own (its socket in the test's home), one
//! session running the program in the home's environment, keys sent and the screen read back
//! (`send-keys`, `capture-pane`). After the program ends, the pane says how it ended and the
//! terminal's modes (`TOP-EXITED rc=N`, then `icanon`/`-icanon` and `echo`/`-echo`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::TestHome;

/// The tmux server; killed (with what runs in it) when dropped.
#[derive(Debug)]
pub struct Tmux {
    socket: PathBuf,
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Tmux {
    /// `gemctl ARGS` on a `size` terminal in `home`'s workspace and environment, plus `env`.
    pub fn gemctl(
        home: &TestHome,
        args: &[&str],
        size: (u16, u16),
        env: &[(&str, &str)],
    ) -> anyhow::Result<Tmux> {
        let socket = home.root().join("tmux.sock");
        let cmd = home.gemctl_cmd(args);
        // `env -i`: the home's environment only, as [`TestHome::gemctl_cmd`] has it ([`crate::sealed`]),
        // and the terminal tmux gives; the unset ones first (it takes `-u` only before
        // assignments).
        let mut unset = String::new();
        let mut set = String::new();
        for (k, v) in cmd.get_envs() {
            let k = k.to_string_lossy();
            match v {
                Some(v) => {
                    set.push_str(&format!(" {}", quote(&format!("{k}={}", v.to_string_lossy()))))
                }
                None => unset.push_str(&format!(" -u {k}")),
            }
        }
        for (k, v) in env {
            set.push_str(&format!(" {}", quote(&format!("{k}={v}"))));
        }
        let program = quote(&cmd.get_program().to_string_lossy());
        let words: Vec<String> = args.iter().map(|a| quote(a)).collect();
        let script = format!(
            "env -i TERM=\"$TERM\"{unset}{set} {program} {}; echo \"TOP-EXITED rc=$?\"; stty -a | tr ' ;' '\\n\\n' \
             | grep -x -e -icanon -e icanon -e -echo -e echo | tr '\\n' ' '; echo; sleep 600",
            words.join(" ")
        );
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["-f", "/dev/null", "new-session", "-d", "-s", "top"])
            .args(["-x", &size.0.to_string(), "-y", &size.1.to_string()])
            .arg("-c")
            .arg(home.workspace())
            .arg(script)
            .status()?;
        anyhow::ensure!(status.success(), "tmux would not start (is tmux installed?)");
        Ok(Tmux { socket })
    }

    /// Run a tmux command against this server; its stdout.
    pub fn tmux(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("tmux").arg("-S").arg(&self.socket).args(args).output()?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The screen as text (`escapes`: with its colours).
    pub fn screen(&self, escapes: bool) -> String {
        let args: &[&str] = if escapes {
            &["capture-pane", "-p", "-e", "-t", "top"]
        } else {
            &["capture-pane", "-p", "-t", "top"]
        };
        self.tmux(args).unwrap_or_default()
    }

    /// The program's process: the pane's shell's child.
    pub fn program_pid(&self) -> Option<u32> {
        let shell: u32 =
            self.tmux(&["display", "-p", "-t", "top", "#{pane_pid}"]).ok()?.trim().parse().ok()?;
        let children =
            std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).ok()?;
        children.split_whitespace().next()?.parse().ok()
    }

    /// One key (tmux's name for it), then a pause, so that `Escape` and the next key are not
    /// read as one Alt chord.
    pub async fn key(&self, key: &str) -> anyhow::Result<()> {
        self.tmux(&["send-keys", "-t", "top", key])?;
        // Kept: the program under tmux reads Escape and the next key within its escape delay as
        // one Alt chord; nothing tells when that delay has passed.
        tokio::time::sleep(Duration::from_millis(150)).await;
        Ok(())
    }

    /// Wait (up to `within`) until the screen shows what `ok` looks for; the screen then.
    pub async fn until(
        &self,
        within: Duration,
        what: &str,
        ok: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        let mut screen = String::new();
        let shown = crate::poll_every(Duration::from_millis(100), within, || {
            screen = self.screen(false);
            std::future::ready(ok(&screen).then_some(()))
        })
        .await;
        match shown {
            Some(()) => Ok(screen),
            None => anyhow::bail!("the screen never showed {what}:\n{screen}"),
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}
