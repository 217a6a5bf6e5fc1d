//! Gemini CLI's FileCommandLoader cases (`packages/cli/src/services/FileCommandLoader.test.ts`)
//! as data, and the bad files.

use std::path::Path;

use super::load::{Cache, for_display, name_of};

fn write(dir: &Path, rel: &str, text: &str) -> std::io::Result<()> {
    let p = dir.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(p, text)
}

#[test]
fn names_and_descriptions_as_gemini_cli_makes_them() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    let d = t.path();
    // (file, text, name, description)
    let cases = [
        (
            "test.toml",
            "prompt = \"This is a test prompt\"",
            "test",
            "Custom command from test.toml",
        ),
        (
            "namespaced/my-test.toml",
            "prompt = \"p\"",
            "namespaced:my-test",
            "Custom command from my-test.toml",
        ),
        (
            "gcp/pipelines/run.toml",
            "prompt = \"run pipeline\"",
            "gcp:pipelines:run",
            "Custom command from run.toml",
        ),
        ("test.v1.toml", "prompt = \"Test prompt\"", "test.v1", "Custom command from test.v1.toml"),
        (
            "described.toml",
            "prompt = \"p\"\ndescription = \"My test command\"",
            "described",
            "My test command",
        ),
        (
            "legacy:command.toml",
            "prompt = \"This is a legacy command\"",
            "legacy_command",
            "Custom command from legacy:command.toml",
        ),
        (".hidden/dot.toml", "prompt = \"p\"", ".hidden:dot", "Custom command from dot.toml"),
        (
            "spaced.toml",
            "prompt = \"p\"\ndescription = \"  two\\n\\tlines \\u001b[31mred\\u001b[0m \"",
            "spaced",
            " two lines red ",
        ),
    ];
    for (file, text, _, _) in &cases {
        write(d, file, text)?;
    }
    let f = Cache::default().folder(d);
    assert!(f.diagnostics.is_empty(), "{:?}", f.diagnostics);
    for (file, _, name, description) in &cases {
        let c = f
            .commands
            .iter()
            .find(|c| c.file == d.join(file))
            .ok_or_else(|| anyhow::anyhow!("{file} not loaded"))?;
        assert_eq!((c.name.as_str(), c.description.as_str()), (*name, *description), "{file}");
    }
    Ok(())
}

#[test]
fn long_names_and_descriptions_are_cut() {
    let long = "a".repeat(200);
    let name = name_of(Path::new("/c"), &Path::new("/c").join(format!("{long}/x.toml")));
    assert_eq!(name, format!("{}...:x", "a".repeat(47)));
    assert_eq!(for_display(&"d".repeat(150), 100), format!("{}...", "d".repeat(97)));
}

#[test]
fn bad_files_are_named_and_the_rest_load() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    let d = t.path();
    write(d, "good.toml", "prompt = \"This one is fine\"")?;
    write(d, "invalid.toml", "this is not valid toml")?;
    write(d, "no_prompt.toml", "description = \"This file is missing a prompt\"")?;
    write(d, "number.toml", "prompt = 12")?;
    write(d, "braces.toml", "prompt = \"Run !{echo {unbalanced}\"")?;
    #[cfg(unix)]
    std::os::unix::fs::symlink(d, d.join("loop"))?;
    let f = Cache::default().folder(d);
    let names: Vec<&str> = f.commands.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    let said: Vec<String> =
        f.diagnostics.iter().map(|x| format!("{}:{:?}: {}", x.file, x.line, x.message)).collect();
    for (file, needle) in [
        ("invalid.toml", "not valid TOML"),
        ("no_prompt.toml", "'prompt' field is required"),
        ("number.toml", "must be a string"),
        ("braces.toml", "unclosed `!{`"),
    ] {
        assert!(said.iter().any(|m| m.contains(file) && m.contains(needle)), "{file}: {said:?}");
    }
    assert!(
        said.iter().any(|m| m.contains("invalid.toml:Some(1)")),
        "TOML errors have a line: {said:?}"
    );
    Ok(())
}

#[test]
fn only_changed_files_are_read_again() -> anyhow::Result<()> {
    let t = tempfile::tempdir()?;
    for i in 0..4 {
        write(t.path(), &format!("c{i}.toml"), "prompt = \"p\"")?;
    }
    let cache = Cache::default();
    assert_eq!(cache.folder(t.path()).commands.len(), 4);
    assert_eq!(cache.folder(t.path()).commands.len(), 4);
    assert_eq!(cache.reads(), 4);
    write(t.path(), "c2.toml", "prompt = \"changed prompt\"")?;
    let f = cache.folder(t.path());
    assert_eq!(cache.reads(), 5);
    assert!(f.commands.iter().any(|c| c.prompt == "changed prompt"));
    Ok(())
}

#[test]
fn injections_balance_as_gemini_cli_counts_them() {
    let got = super::injections("a !{echo {x}} b !{ls}", "!{").expect("balanced");
    let contents: Vec<&str> = got.iter().map(|i| i.content.as_str()).collect();
    assert_eq!(contents, ["echo {x}", "ls"]);
    let e = super::injections("x @{a", "@{").expect_err("unclosed").to_string();
    assert!(e.contains("character 2"), "{e}");
}

/// Gemini CLI's shellProcessor cases (`prompt-processors/shellProcessor.test.ts`) as data: the
/// command each injection resolves to, and the text around it.
#[test]
fn gemini_cli_shell_processor_cases() -> anyhow::Result<()> {
    use super::expand::{assemble, shell_commands};
    let args = "some 'arg' \"here\"";
    let quoted = crate::hooks::run::shell_quote(args);
    // Whitespace inside the braces is trimmed before {{args}} is put in.
    let cmds = shell_commands("Files: !{  ls {{args}} -l  }", args)?;
    assert_eq!(cmds[0].1.shown, format!("ls {quoted} -l"));
    // An empty injection runs nothing and vanishes.
    assert!(shell_commands("This is weird: !{}", args)?.is_empty());
    assert_eq!(assemble("This is weird: !{}", args, &[])?, "This is weird: ");
    // Raw outside, quoted inside; the check sees the resolved command.
    let prompt = "User \"({{args}})\" requested search: !{search {{args}}}";
    assert_eq!(shell_commands(prompt, args)?[0].1.shown, format!("search {quoted}"));
    assert_eq!(
        assemble(prompt, args, &["results".to_owned()])?,
        format!("User \"({args})\" requested search: results")
    );
    // No injection: {{args}} raw.
    assert_eq!(assemble("The user said: {{args}}", args, &[])?, format!("The user said: {args}"));
    Ok(())
}

/// The escaping cases of the same file, run for real, in every quoting an author may write
/// around `{{args}}` (Gemini CLI's own escaping lets the arguments out of the author's double
/// quotes): whatever the person typed reaches the command as text, and nothing in it runs.
#[cfg(unix)]
#[test]
fn typed_arguments_reach_a_real_shell_as_text_whatever_the_quoting() -> anyhow::Result<()> {
    use super::expand::{ARGS_VAR, shell_commands};
    let t = tempfile::tempdir()?;
    for template in [
        "!{printf '%s' {{args}}}",
        "!{printf '%s' \"{{args}}\"}",
        "!{printf '%s' '{{args}}'}",
        "!{printf '%s' $'{{args}}'}",
        "!{printf '%s' \"$(printf '%s' \"{{args}}\")\"}",
    ] {
        for input in [
            "file with spaces.txt",
            "a \"quoted\" string",
            "it's a string",
            "`touch pwned1`",
            "$(touch pwned2)",
            "$HOME",
            "a; touch pwned3",
            "a && touch pwned4",
            "first line\nsecond line",
            "x\" ; touch pwned5 ; \"",
            "x' ; touch pwned6 ; '",
        ] {
            let cmds = shell_commands(template, input).map_err(|e| anyhow::anyhow!(e))?;
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(&cmds[0].1.run)
                .env(ARGS_VAR, input)
                .current_dir(t.path())
                .output()?;
            assert_eq!(String::from_utf8_lossy(&out.stdout), input, "{template} {input:?}");
        }
    }
    let made: Vec<_> = std::fs::read_dir(t.path())?.collect();
    assert!(made.is_empty(), "something ran: {made:?}");
    Ok(())
}

/// Gemini CLI's atFileProcessor cases (`prompt-processors/atFileProcessor.test.ts`) as data:
/// placeholders at the start, middle and end, paths with balanced braces, an unclosed trigger.
#[test]
fn gemini_cli_at_file_processor_cases() -> anyhow::Result<()> {
    use super::expand::at_files;
    let t = tempfile::tempdir()?;
    let ws = t.path();
    write(ws, "start.txt", "S")?;
    write(ws, "dir-{x}/mid.txt", "M")?;
    write(ws, "end.txt", "E")?;
    let mut notes = Vec::new();
    use super::expand::Part::{Included, Prompt};
    let parts = at_files("@{start.txt} then @{dir-{x}/mid.txt} then @{end.txt}", ws, &mut notes)
        .map_err(|e| anyhow::anyhow!(e))?;
    let text = |t: &str| t.to_owned();
    assert_eq!(
        parts,
        [
            Included(text("S")),
            Prompt(text(" then ")),
            Included(text("M")),
            Prompt(text(" then ")),
            Included(text("E"))
        ]
    );
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(
        at_files("no trigger here", ws, &mut notes).map_err(|e| anyhow::anyhow!(e))?,
        [Prompt(text("no trigger here"))]
    );
    let e = at_files("broken @{start.txt", ws, &mut notes).expect_err("unclosed").to_string();
    assert!(e.contains("unclosed `@{`"), "{e}");
    Ok(())
}
