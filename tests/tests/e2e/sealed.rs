//! The binaries the tests start are sealed from the environment of whoever runs the tests
//! (issue 63, B7): a user's `XDG_DATA_HOME` once had the suite rewrite their man pages, and an
//! exported `NOTES_TOKEN` (a name a fixture uses) failed a test.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::process::Stdio;
use std::time::Duration;

use geminid_tests::mcp::{stdio, write_user_settings};
use geminid_tests::{Daemon, PASSED_THROUGH, TestHome, eventually};
use serde_json::json;

/// A process's environment, from `/proc`.
fn environ(pid: u32) -> anyhow::Result<BTreeMap<OsString, OsString>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))?;
    Ok(raw
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| match e.iter().position(|b| *b == b'=') {
            Some(i) => {
                (OsString::from_vec(e[..i].to_vec()), OsString::from_vec(e[i + 1..].to_vec()))
            }
            None => (OsString::from_vec(e.to_vec()), OsString::new()),
        })
        .collect())
}

/// No variable of the environment the tests run in (cargo's own, `.cargo/config.toml`'s, the
/// user's) reaches a daemon, `gemctl` or a server they start, but those the harness passes on
/// purpose ([`PASSED_THROUGH`]); every XDG directory they are given is in the test's home.
#[tokio::test]
async fn the_environment_the_tests_run_in_does_not_reach_the_binaries() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    write_user_settings(&home, json!({ "fx": stdio(&[]) }))?;
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    // `attach` stays, and holds the session's servers up while it does.
    let mut attach = home
        .gemctl_cmd(&["attach", "--no-answer"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut lines = geminid_tests::stderr_lines(&mut attach);
    geminid_tests::line_with(&mut lines, "attached to session").await?;
    let mut server = None;
    let up = eventually(Duration::from_secs(30), || {
        let found = home.gemctl_json(&["mcp", "list"]).ok().and_then(|l| {
            l.as_array()?.iter().find(|s| s["name"] == "fx" && s["state"] == "connected")?["pid"]
                .as_u64()
        });
        server = found.and_then(|p| u32::try_from(p).ok());
        std::future::ready(server.is_some())
    })
    .await;
    assert!(up, "fx did not connect: {:?}", home.gemctl_run(&["mcp", "list"]));
    let ours: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    // What the harness sets itself, which a caller may happen to set alike (NO_COLOR=1).
    let harness: Vec<OsString> = home
        .gemctl_cmd(&[])
        .get_envs()
        .map(|(k, _)| k.to_owned())
        .chain(["RUST_LOG", "NO_COLOR"].map(OsString::from))
        .collect();
    for (what, pid) in
        [("geminid", daemon.pid()), ("gemctl", attach.id()), ("the server", server.unwrap_or(0))]
    {
        let theirs = environ(pid)?;
        let leaked: Vec<_> = theirs
            .iter()
            .filter(|(k, v)| {
                !PASSED_THROUGH.iter().any(|p| k.as_os_str() == *p)
                    && !harness.contains(k)
                    && ours.get(*k) == Some(*v)
            })
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert!(leaked.is_empty(), "{what} got the tests' own {leaked:?}");
        let outside: Vec<_> = theirs
            .iter()
            .filter(|(k, v)| {
                k.to_string_lossy().starts_with("XDG_")
                    && !std::path::Path::new(v).starts_with(home.root())
            })
            .collect();
        assert!(outside.is_empty(), "{what} has XDG directories outside its home: {outside:?}");
    }
    let _ = attach.kill();
    let _ = attach.wait();
    Ok(())
}
