//! Custom commands: `commands/list`'s work over 500 command files (reading the commands
//! folders through the daemon's cache, then naming every command after the conflict rules),
//! cold and warm, against reading the same files whole.

use std::time::{Duration, Instant};

use geminid::testing::commands::{Cache, Candidate, resolve};
use geminid_protocol::commands::CommandKind;

use crate::{ms, read_all, stats};

const FILES: usize = 500;
const ROUNDS: usize = 30;

fn list(cache: &Cache, dirs: &[(std::path::PathBuf, CommandKind)]) -> usize {
    let mut candidates = Vec::new();
    for (dir, kind) in dirs {
        for c in cache.folder(dir).commands {
            candidates.push(Candidate {
                name: c.name.clone(),
                kind: *kind,
                extension: None,
                server: None,
            });
        }
    }
    resolve(&candidates).0.len()
}

pub async fn bench() -> anyhow::Result<Vec<String>> {
    eprintln!("commands: {FILES} command files listed cold and warm");
    let t = geminid_tests::TestHome::new()?;
    let user = t.root().join("home/.gemini/commands");
    let ws = t.root().join("ws/.gemini/commands");
    for i in 0..FILES {
        // The user's in namespaces, the workspace's at the top; every tenth user name is a
        // workspace one too (both renamed, user. and workspace.).
        let (dir, name) = match i {
            i if i % 10 == 0 => (&user, format!("cmd-{}.toml", i + 1)),
            i if i % 2 == 0 => (&user, format!("ns{}/cmd-{i}.toml", i % 7)),
            i => (&ws, format!("cmd-{i}.toml")),
        };
        let path = dir.join(&name);
        std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
        std::fs::write(
            path,
            format!(
                "description = \"Command {i}\"\nprompt = \"\"\"\nDo step {i} with {{{{args}}}}.\n{}\"\"\"\n",
                "More instructions.\n".repeat(20)
            ),
        )?;
    }
    let dirs = [(user.clone(), CommandKind::UserFile), (ws.clone(), CommandKind::WorkspaceFile)];
    let (mut baseline, mut cold, mut warm) = (Vec::new(), Vec::new(), Vec::new());
    let mut listed = 0;
    for _ in 0..ROUNDS {
        let t0 = Instant::now();
        let bytes = read_all(&user)? + read_all(&ws)?;
        baseline.push(t0.elapsed());
        anyhow::ensure!(bytes > 0);
        let cache = Cache::default();
        let t0 = Instant::now();
        listed = list(&cache, &dirs);
        cold.push(t0.elapsed());
    }
    let cache = Cache::default();
    list(&cache, &dirs);
    let before = cache.reads();
    for _ in 0..ROUNDS {
        let t0 = Instant::now();
        list(&cache, &dirs);
        warm.push(t0.elapsed());
    }
    anyhow::ensure!(cache.reads() == before, "a warm listing parsed files");
    anyhow::ensure!(listed == FILES && before == FILES as u64, "{listed} names, {before} files");
    let (b, c, w): (_, _, _) = (stats(baseline), stats(cold), stats(warm));
    let ratio = |d: Duration| d.as_secs_f64() / b.median.as_secs_f64();
    Ok(vec![
        format!(
            "| reading the {FILES} command files whole (baseline) | {:.2} ms | {:.2} ms | |",
            ms(b.median),
            ms(b.p99)
        ),
        format!(
            "| `commands/list`'s work cold ({FILES} files parsed, {listed} names after conflicts) | {:.2} ms | {:.2} ms | ({:.2}× the reading) |",
            ms(c.median),
            ms(c.p99),
            ratio(c.median)
        ),
        format!(
            "| the same warm (0 files parsed) | {:.2} ms | {:.2} ms | ≤ 20 ms |",
            ms(w.median),
            ms(w.p99)
        ),
    ])
}
