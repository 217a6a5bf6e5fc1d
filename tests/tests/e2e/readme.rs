//! The README's set-up and tour as a new user follows them, line by line (new-user audit B1,
//! C15): the first command leaves built every binary the README runs from `target/release/`,
//! and the tour's alias still names gemctl once the user is in their own project.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const README: &str = include_str!("../../../README.md");

/// The first command of the set-up's first `sh` block.
fn first_command() -> &'static str {
    let setup = README.split("## Set-up").nth(1).unwrap_or_default();
    let block = setup.split("```sh\n").nth(1).unwrap_or_default();
    block.lines().next().unwrap_or_default()
}

/// What a `cargo build` or `cargo run` command line builds: the packages it names with `-p`
/// (`None`: every member, as a `cargo build` without one does in this virtual workspace).
fn packages_built(line: &str) -> Option<BTreeSet<&str>> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let named: BTreeSet<&str> =
        words.windows(2).filter(|w| w[0] == "-p" || w[0] == "--package").map(|w| w[1]).collect();
    (!named.is_empty()).then_some(named)
}

#[test]
fn the_first_set_up_command_builds_every_binary_the_readme_runs() {
    let first = first_command();
    assert!(first.starts_with("cargo build --release"), "the set-up starts with a build: {first}");
    // Each binary the README runs from the build is one its first command builds (the shipped
    // binaries are named as their packages).
    let run: BTreeSet<&str> = README
        .split("target/release/")
        .skip(1)
        .map(|rest| {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|name| !name.is_empty())
        .collect();
    assert!(run.contains("gemctl") && run.contains("geminid"), "{run:?}");
    if let Some(built) = packages_built(first) {
        let missing: Vec<&&str> = run.difference(&built).collect();
        assert!(missing.is_empty(), "`{first}` does not build {missing:?}, which the README runs");
    }
    // And it runs the daemon, as the tour expects.
    let ran = first.split("#").next().unwrap_or_default();
    assert!(ran.trim_end().ends_with("target/release/geminid"), "{first}");
}

/// The tour's alias, said in the checkout, names gemctl from any other folder.
#[test]
fn the_tours_alias_works_from_the_users_project() -> anyhow::Result<()> {
    let tour = README.split("## A tour of gemctl").nth(1).unwrap_or_default();
    let alias = tour.lines().find(|l| l.starts_with("alias gemctl=")).unwrap_or_default();
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize()?;
    let project = tempfile::tempdir()?;
    // Said in the checkout, then used in the user's project: the path it gives is what runs.
    let script = format!("shopt -s expand_aliases\ncd \"$1\"\n{alias}\ncd \"$2\"\nalias gemctl\n");
    let out = Command::new("bash")
        .args(["-c", &script, "bash"])
        .arg(&checkout)
        .arg(project.path())
        .output()?;
    assert!(out.status.success(), "{alias}: {}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    let path = said.trim().trim_start_matches("alias gemctl=").trim_matches('\'');
    assert_eq!(Path::new(path), checkout.join("target/release/gemctl"), "{alias}");
    Ok(())
}
