//! Git runs no command it is handed (issue 64, items 2 and 3): not from the `.git/config` of
//! the folder gemctl started the daemon in, nor of a `GIT_DIR` the daemon inherited, nor from a
//! ref that is an option. Each case builds the hostile repository in a temporary folder and
//! looks for the file its command would have made.

use std::path::Path;

use geminid_tests::TestHome;

use crate::extensions::git;
use serde_json::json;

/// A repository at `root/src` holding an extension `gx`; its `file://` URL.
fn source(root: &Path) -> anyhow::Result<String> {
    let repo = root.join("src");
    std::fs::create_dir_all(&repo)?;
    git(&repo, &["init", "-q"])?;
    let manifest = json!({"name": "gx", "version": "1.0.0"});
    std::fs::write(repo.join("gemini-extension.json"), manifest.to_string())?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "v1"])?;
    Ok(format!("file://{}", repo.display()))
}

/// What a cloned project can hold in its `.git/config` that runs a command when git talks to
/// `url` from inside it: the `ext::` transport by `insteadOf`, and another upload-pack.
fn hostile_config(marker: &Path, url: &str) -> String {
    let m = marker.display();
    format!(
        "[protocol \"ext\"]\n\tallow = always\n[url \"ext::sh -c touch% {m}% >&2\"]\n\tinsteadOf = {url}\n\
         [remote \"{url}\"]\n\tuploadpack = \"touch {m}; git-upload-pack\"\n"
    )
}

#[tokio::test]
async fn a_hostile_repository_where_the_daemon_was_started_runs_nothing() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let url = source(home.root())?;
    let marker = home.root().join("PWNED");
    // The project the user just cloned, and gemctl started from inside it.
    let clone = home.root().join("clone");
    std::fs::create_dir_all(&clone)?;
    git(&clone, &["init", "-q"])?;
    let config = clone.join(".git/config");
    let text = std::fs::read_to_string(&config)? + &hostile_config(&marker, &url);
    std::fs::write(&config, text)?;

    let out = home.gemctl_cmd(&["--json", "daemon", "start"]).current_dir(&clone).output()?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid = serde_json::from_slice::<serde_json::Value>(&out.stdout)?["pid"].as_u64();
    let (code, out, err) = home.gemctl_run(&["extensions", "install", &url, "--consent"])?;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = home.gemctl_run(&["extensions", "update", "gx", "--check"])?;
    assert!(!marker.exists(), "the clone's .git/config ran a command in the daemon");
    assert_eq!((code, out.contains("up to date")), (0, true), "{out}{err}");
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", pid.unwrap_or_default()))?;
    assert_eq!(cwd, home.data_dir(), "the daemon works in its own folder");

    // A daemon started with GIT_DIR naming that repository (from a git hook, say): git's
    // variables do not reach the git it runs either.
    assert!(home.gemctl(&["daemon", "stop"])?.status.success());
    let out = home
        .gemctl_cmd(&["daemon", "start"])
        .current_dir(&clone)
        .env("GIT_DIR", clone.join(".git"))
        .env("GIT_CONFIG_GLOBAL", &config)
        .output()?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, out, err) = home.gemctl_run(&["extensions", "update", "gx", "--check"])?;
    assert!(!marker.exists(), "GIT_DIR's .git/config ran a command in the daemon");
    assert_eq!((code, out.contains("up to date")), (0, true), "{out}{err}");
    assert!(home.gemctl(&["daemon", "stop"])?.status.success());
    Ok(())
}

#[tokio::test]
async fn a_ref_that_is_an_option_is_refused_and_runs_nothing() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let url = source(home.root())?;
    let marker = home.root().join("PWNED");
    let bad = format!("--upload-pack=touch {}; git-upload-pack", marker.display());
    let flag = format!("--ref={bad}");
    let (code, out, err) = home.gemctl_run(&["extensions", "install", &url, &flag, "--consent"])?;
    assert!(!marker.exists(), "the ref ran a command");
    assert_ne!(code, 0, "{out}");
    assert!(err.contains(&format!("{bad:?} is not a git ref")), "names the bad value: {err}");
    assert!(home.gemctl_json(&["extensions", "list"])?["extensions"] == json!([]));

    // Nor when checking an installed extension against another ref.
    let (code, out, err) = home.gemctl_run(&["extensions", "install", &url, "--consent"])?;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = home.gemctl_run(&["extensions", "update", "gx", "--check", &flag])?;
    assert!(!marker.exists(), "the ref ran a command");
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("is not a git ref"), "{err}");
    Ok(())
}
