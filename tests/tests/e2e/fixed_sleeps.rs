//! Tests wait for events, never for a fixed time: a sleep that waits for something to have
//! happened fails on a busy machine and slows every run on a quiet one. This test counts the
//! sleeps in the tests' sources, so that their number cannot creep back:
//!
//! - the end-to-end tests and their harness (`tests/tests/`, `tests/src/`; not the fixture
//!   servers in `tests/src/bin/` and `tests/src/fixture/`, whose sleeps are what a request
//!   asks of them: a `sleep` tool sleeps), and the `#[cfg(test)]` code of the daemon and
//!   `gemctl`;
//! - the harness's poll ([`geminid_tests::poll`] and its kin in `tests/src/lib.rs`) is how a
//!   test waits for an event it cannot subscribe to, and is not counted;
//! - every other sleep says under a comment right above it why it stays: `// Kept:` for a
//!   wait that cannot be an event (another program's own delay that nothing announces; time
//!   passing that is itself the subject), `// Poll:` for a poll where the harness's is out of
//!   reach (the daemon's own tests). At most [`AT_MOST`] of them in all (issue 66, item 7).
//!
//! Time the daemon measures (a grace, a linger, a backoff, an idle exit) is moved through its
//! clock seat (`clock::now` and `clock::sleep`: tokio's paused time in process,
//! `geminid_tests::advance_clock` for the binaries) or seen as the daemon's own decision (a
//! server's `idleSecs`, a log line), not slept through. A stimulus's rhythm (an editor's
//! pause between truncating a file and writing it, a writer's or a client's pace) is set by
//! what the daemon announces: the next write once it has seen the last (its log's "input
//! changed", "an input file is still changing", a reload), never by a time.

use std::path::{Path, PathBuf};

/// Sleeps kept and polls outside the harness, at most, in all (issue 66, item 7).
const AT_MOST: usize = 5;

/// Where a sleep is counted from.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The lines of `text` that are test code: all of a file of tests, else what follows a
/// `#[cfg(test)]` module.
fn test_lines(path: &Path, text: &str) -> std::ops::Range<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let whole = path.components().any(|c| c.as_os_str() == "tests")
        || path.file_name().is_some_and(|n| n == "tests.rs");
    if whole {
        return 0..lines.len();
    }
    let start = lines.windows(2).position(|w| {
        w[0].trim() == "#[cfg(test)]"
            && w[1].trim_start().trim_start_matches("pub(crate) ").starts_with("mod ")
    });
    start.map_or(0..0, |s| s..lines.len())
}

/// Whether `line` calls a sleep.
fn sleeps(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or_default();
    ["sleep(", "sleep_until("].iter().any(|call| {
        code.match_indices(call)
            .any(|(i, _)| i == 0 || !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
    })
}

/// The reason the comment right above line `i` gives: `Kept` or `Poll`.
fn reason(lines: &[&str], i: usize) -> Option<&'static str> {
    let above = lines[..i].iter().rev().map(|l| l.trim()).take_while(|l| l.starts_with("//"));
    for comment in above {
        let said = comment.trim_start_matches('/').trim_start();
        for reason in ["Kept", "Poll"] {
            if said.strip_prefix(reason).is_some_and(|rest| rest.starts_with(':')) {
                return Some(reason);
            }
        }
    }
    None
}

#[test]
fn the_tests_sleep_only_where_they_say_why() {
    let root = root();
    let mut files = Vec::new();
    for dir in ["tests/tests", "tests/src", "daemon/src", "client/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let this = Path::new(file!()).file_name().unwrap_or_default();
    let (mut kept, mut unsaid) = (vec![], vec![]);
    for path in &files {
        let rel = path.strip_prefix(&root).unwrap_or(path);
        let fixture = rel.starts_with("tests/src/bin") || rel.starts_with("tests/src/fixture");
        if fixture || path.file_name() == Some(this) {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for i in test_lines(rel, &text) {
            let line = lines[i];
            if !sleeps(line) || line.trim_start().starts_with("//") {
                continue;
            }
            let poll = ["sleep(POLL_EVERY)", "sleep(every)"].iter().any(|s| line.contains(s));
            if rel == Path::new("tests/src/lib.rs") && poll {
                continue;
            }
            let at = format!("{}:{}: {}", rel.display(), i + 1, line.trim());
            match reason(&lines, i) {
                Some(why) => kept.push(format!("{why}: {at}")),
                None => unsaid.push(at),
            }
        }
    }
    assert!(
        unsaid.is_empty(),
        "sleeps without a `// Kept:` or `// Poll:` comment saying why (wait for an event \
         instead: geminid_tests::poll, a subscription, a log line, the clock seat):\n{}",
        unsaid.join("\n")
    );
    assert!(
        kept.len() <= AT_MOST,
        "{} sleeps kept, at most {AT_MOST} (wait for an event instead):\n{}",
        kept.len(),
        kept.join("\n")
    );
}
