//! The user documentation says what the program does (new-user audit M4): every `gemctl`
//! command that docs/USER-GUIDE.md and the README give, in a code block or inline, names
//! subcommands and flags that gemctl's `--help` lists; and every relative link of the pages a
//! user reads leads to a file of the repository. A command renamed or a flag dropped fails
//! here instead of drifting from the docs unseen.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};

use geminid_tests::TestHome;

/// The pages whose commands are checked.
const PAGES: &[&str] = &["docs/USER-GUIDE.md", "README.md"];

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `gemctl ...` command of `text`: each one on a line of a code block (after `&&`, `|`,
/// `;` or `<(` too, a `#` comment cut off), and each inline code span that starts with it
/// (wrapped lines joined).
fn commands(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut prose = String::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            prose.push(' ');
            prose.push_str(line);
            continue;
        }
        let line = line.trim_start().trim_start_matches("$ ");
        let code = line.split("  #").next().unwrap_or_default();
        let code = code.split(" # ").next().unwrap_or_default();
        for part in code.split(['|', ';']).flat_map(|p| p.split("&&")).flat_map(|p| p.split("<(")) {
            if let Some(rest) = part.trim().strip_prefix("gemctl ") {
                found.push(rest.trim().to_owned());
            }
        }
    }
    for piece in prose.split("`gemctl ").skip(1) {
        if let Some(end) = piece.find('`') {
            found.push(piece[..end].trim().to_owned());
        }
    }
    found
}

/// What `gemctl PATH --help` says: its subcommands and its whole text.
struct Help {
    subcommands: Vec<String>,
    takes_arguments: bool,
    /// Its last argument takes every word left (`[ARGS]...`): a prompt's own `--key=value`.
    variadic: bool,
    text: String,
}

fn ask(home: &TestHome, path: &[String]) -> anyhow::Result<Help> {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let (code, text, err) = home.gemctl_run(&args)?;
    anyhow::ensure!(code == 0, "gemctl {}: {err}", args.join(" "));
    let subcommands = text
        .lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    let takes_arguments = text.lines().any(|l| l.trim() == "Arguments:");
    let variadic = text.lines().any(|l| l.starts_with("Usage:") && l.trim_end().ends_with("..."));
    Ok(Help { subcommands, takes_arguments, variadic, text })
}

/// Whether `help` lists the flag `flag` (`--name` or `-x`) among its options, and if so
/// whether it takes a value (`--lines <N>`).
fn lists_flag(help: &str, flag: &str) -> Option<bool> {
    help.lines().find_map(|line| {
        let listed = line.trim_start();
        let names = listed.split("  ").next().unwrap_or_default();
        let words: Vec<&str> = names.split([',', ' ']).filter(|w| !w.is_empty()).collect();
        (listed.starts_with('-') && words.contains(&flag)).then(|| names.contains(" <"))
    })
}

/// What is wrong with one command (`gemctl` left off), if anything.
fn check(
    home: &TestHome,
    command: &str,
    cache: &mut HashMap<Vec<String>, Help>,
) -> anyhow::Result<Option<String>> {
    if let Entry::Vacant(root) = cache.entry(Vec::new()) {
        root.insert(ask(home, &[])?);
    }
    let mut path: Vec<String> = Vec::new();
    let mut positional = false;
    let mut value_next = false;
    for word in command.split_whitespace() {
        if word == "--" {
            break; // what follows is the server's command line
        }
        if std::mem::take(&mut value_next) {
            continue;
        }
        let word = word.trim_start_matches(['[', '(']);
        if let Entry::Vacant(here) = cache.entry(path.clone()) {
            here.insert(ask(home, &path)?);
        }
        let Some(help) = cache.get(&path) else { continue };
        if word.starts_with('-') && word.len() > 1 {
            for flag in word.split('|') {
                let flag = flag.trim_matches([']', ')', ',', '.', '`']);
                let flag = flag.split('=').next().unwrap_or_default();
                let is_flag = flag.strip_prefix("--").map_or_else(
                    || flag.len() == 2 && flag.as_bytes()[1].is_ascii_alphabetic(),
                    |long| long.chars().next().is_some_and(|c| c.is_ascii_alphabetic()),
                );
                if !is_flag {
                    continue;
                }
                // Its own option, or one of gemctl's global ones.
                let root = cache.get(&Vec::new()).map(|h| h.text.as_str()).unwrap_or_default();
                match lists_flag(&help.text, flag).or_else(|| lists_flag(root, flag)) {
                    Some(takes) => value_next = takes && !word.contains('='),
                    None => {
                        let path = path.join(" ");
                        return Ok(Some(format!("`gemctl {path} --help` lists no {flag}")));
                    }
                }
            }
            continue;
        }
        if positional || help.subcommands.is_empty() {
            if help.variadic {
                break; // the rest are its arguments' own words
            }
            positional = true;
            continue;
        }
        let name = word.trim_end_matches([']', ')', ',', '.', '`']);
        if help.subcommands.iter().any(|s| s == name) {
            path.push(name.to_owned());
        } else if help.takes_arguments {
            positional = true;
        } else {
            return Ok(Some(format!(
                "`gemctl {}` has no subcommand {name} (it has {})",
                path.join(" "),
                help.subcommands.join(", ")
            )));
        }
    }
    Ok(None)
}

#[test]
fn every_gemctl_command_the_docs_give_exists() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    let mut cache = HashMap::new();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for page in PAGES {
        let text = std::fs::read_to_string(checkout().join(page))?;
        for command in commands(&text) {
            checked += 1;
            if let Some(why) = check(&home, &command, &mut cache)? {
                wrong.push(format!("{page}: `gemctl {command}`: {why}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{} of {checked} commands:\n{}", wrong.len(), wrong.join("\n"));
    // The check itself finds what it must (a check that cannot fail is no check).
    for (bad, why) in [
        ("daemon reboot", "has no subcommand reboot"),
        ("mcp list --everything", "lists no --everything"),
        ("mcp logs NAME -z", "lists no -z"),
    ] {
        let said = check(&home, bad, &mut cache)?.unwrap_or_default();
        assert!(said.contains(why), "{bad}: {said}");
    }
    assert!(checked > 100, "only {checked} commands found: is the extraction broken?");
    Ok(())
}

/// Every relative link of the pages a user reads names a file that exists.
#[test]
fn the_docs_links_lead_somewhere() -> anyhow::Result<()> {
    let mut pages: Vec<PathBuf> = vec![checkout().join("README.md")];
    for entry in std::fs::read_dir(checkout().join("docs"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page)?;
        for link in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            let target = link.split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let dir = page.parent().unwrap_or(Path::new("."));
            if !dir.join(target).exists() {
                broken.push(format!("{}: {link}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing:\n{}", broken.join("\n"));
    Ok(())
}

/// The options every command takes are said once per help, short, under their own heading;
/// each subcommand's help repeated their four long texts (audit turn 4, P2).
#[test]
fn the_global_options_are_short_and_apart_in_every_help() -> anyhow::Result<()> {
    let home = TestHome::new()?;
    for args in [&["daemon", "--help"][..], &["mcp", "list", "--help"], &["--help"]] {
        let (code, out, err) = home.gemctl_run(args)?;
        assert_eq!(code, 0, "{err}");
        let (mine, global) = out.split_once("Global options:\n").unwrap_or_else(|| panic!("{out}"));
        assert!(!mine.contains("--session <ID>"), "{args:?}: {out}");
        let lines: Vec<&str> = global.lines().take_while(|l| l.starts_with("  ")).collect();
        assert_eq!(lines.len(), 4, "{args:?}: {global}");
        let said = |l: &&str| l.split(" [env: ").next().unwrap_or_default().chars().count();
        assert!(lines.iter().all(|l| said(l) <= 120), "{args:?}: {global}");
    }
    Ok(())
}
