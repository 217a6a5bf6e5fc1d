//! The user documentation says what the program does (new-user audit M4): every `gemctl`
//! command that docs/USER-GUIDE.md, docs/SECURITY.md and the README give, in a code block or
//! inline, names subcommands and flags that gemctl's `--help` lists; every relative link of the
//! pages a user reads leads to a file of the repository; and every test docs/SECURITY.md cites
//! for a control is a test of the file it names. A command renamed, a flag dropped or a test
//! gone fails here instead of drifting from the docs unseen.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};

use geminid_tests::TestHome;

/// The pages whose commands are checked.
const PAGES: &[&str] = &["docs/USER-GUIDE.md", "README.md", "docs/SECURITY.md"];

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

/// The `FILE::FUNCTION` test citations of `text`: each code span whose part before `::` is a
/// path ending in `.rs` or `.py`.
fn cited(text: &str) -> Vec<&str> {
    let spans = text.split('`').skip(1).step_by(2);
    spans
        .filter(|span| {
            span.split_once("::")
                .is_some_and(|(file, _)| file.ends_with(".rs") || file.ends_with(".py"))
        })
        .collect()
}

/// What is wrong with one citation, if anything: its file must exist, and hold a test function
/// of that name (`#[test]` or `#[tokio::test]` in the lines above it) or, in a Python script of
/// the interop suite, a `def` of it.
fn not_a_test(citation: &str) -> Option<String> {
    let (file, name) = citation.split_once("::")?;
    let Ok(source) = std::fs::read_to_string(checkout().join(file)) else {
        return Some(format!("{citation}: no file {file}"));
    };
    if file.ends_with(".py") {
        let defined = source.lines().any(|l| l.trim_start().starts_with(&format!("def {name}(")));
        return (!defined).then(|| format!("{citation}: {file} defines no {name}"));
    }
    let lines: Vec<&str> = source.lines().collect();
    let declared = format!("fn {name}(");
    let Some(at) = lines.iter().position(|l| l.contains(&declared)) else {
        return Some(format!("{citation}: {file} has no fn {name}"));
    };
    // Its attributes and doc comment: the lines above it, up to the end of what came before.
    let above = lines[..at].iter().rev().take_while(|l| {
        let l = l.trim();
        !l.is_empty() && !l.ends_with('}') && !l.ends_with(';')
    });
    let is_test = above.take(12).any(|l| l.contains("#[test]") || l.contains("#[tokio::test"));
    (!is_test).then(|| format!("{citation}: {name} in {file} is not a test"))
}

/// docs/SECURITY.md maps each item of the OWASP MCP Top 10 to geminid's control and the tests
/// that hold it: every test it cites exists, as a test, in the file it names; and each item
/// MCP01–MCP10 has its row in the table, citing at least one test, and its own section. A test
/// renamed or removed fails here instead of leaving the page citing nothing.
#[test]
fn the_security_page_cites_tests_that_exist() -> anyhow::Result<()> {
    let text = std::fs::read_to_string(checkout().join("docs/SECURITY.md"))?;
    let citations: std::collections::BTreeSet<&str> = cited(&text).into_iter().collect();
    let wrong: Vec<String> = citations.iter().filter_map(|c| not_a_test(c)).collect();
    assert!(wrong.is_empty(), "docs/SECURITY.md cites what is no test:\n{}", wrong.join("\n"));
    assert!(
        citations.len() > 50,
        "only {} citations found: is the extraction broken?",
        citations.len()
    );
    for n in 1..=10 {
        let item = format!("MCP{n:02}");
        let row = text.lines().find(|l| l.starts_with(&format!("| {item} ")));
        let row = row.unwrap_or_else(|| panic!("docs/SECURITY.md: no row of the table for {item}"));
        assert!(!cited(row).is_empty(), "docs/SECURITY.md: the row of {item} cites no test");
        let section = format!("\n### {item} ");
        assert!(text.contains(&section), "docs/SECURITY.md: no section for {item}");
    }
    // The check itself finds what it must (a check that cannot fail is no check).
    for (bad, why) in [
        ("tests/tests/e2e/pins.rs::no_such_test", "has no fn"),
        ("tests/tests/e2e/no_such_file.rs::a_test", "no file"),
        ("tests/tests/e2e/docs.rs::commands", "is not a test"),
        ("tests/interop/differential.py::no_such_def", "defines no"),
    ] {
        let said = not_a_test(bad).unwrap_or_default();
        assert!(said.contains(why), "{bad}: {said:?}");
    }
    assert_eq!(not_a_test("tests/interop/differential.py::run"), None);
    Ok(())
}
