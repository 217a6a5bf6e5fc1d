//! Examples for the commands a new user reaches for first: shown at the end of `--help` and as
//! the EXAMPLES section of their man pages. Each line is a command as typed, then what it does.

/// (the command's path below `gemctl`, its examples).
const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "",
        &[
            ("gemctl doctor", "check the setup and name the fix for each problem"),
            ("gemctl mcp list", "this directory's MCP servers, as Gemini CLI lists them"),
            ("gemctl attach", "follow this directory's session and answer its confirmations"),
        ],
    ),
    (
        "mcp add",
        &[
            (
                "gemctl mcp add -s user memory npx -y @modelcontextprotocol/server-memory",
                "a stdio server for every project",
            ),
            (
                "gemctl mcp add -t http -H 'Authorization: Bearer ${NOTES_TOKEN}' notes https://notes.example/mcp",
                "a remote server behind a header, expanded from the session's environment",
            ),
        ],
    ),
    (
        "mcp list",
        &[
            ("gemctl mcp list", "this directory's servers and their state"),
            ("gemctl mcp list --all", "every server the daemon runs, with the sessions using it"),
        ],
    ),
    ("mcp import", &[("gemctl mcp import", "let Gemini CLI reach your servers through geminid")]),
    ("mcp logs", &[("gemctl mcp logs -f memory", "follow what the server writes on stderr")]),
    (
        "mcp tools",
        &[
            ("gemctl mcp tools", "every tool this directory's session offers"),
            ("gemctl mcp tools memory", "one server's tools"),
        ],
    ),
    (
        "call",
        &[(
            "gemctl call mcp_memory_read_graph '{}'",
            "call a tool by its full name; its text on stdout",
        )],
    ),
    (
        "extensions install",
        &[
            ("gemctl extensions install ./my-ext", "install from a folder (copied and signed)"),
            (
                "gemctl extensions install https://github.com/owner/ext --ref v1.2.0",
                "install a tag of a git repository",
            ),
        ],
    ),
    (
        "policy check",
        &[(
            "gemctl policy check mcp_memory_delete_entities",
            "what policy decides for that call here, and which rule says so",
        )],
    ),
    (
        "trust",
        &[
            ("gemctl trust", "trust the current directory (its servers, hooks and settings)"),
            ("gemctl trust --parent", "trust its parent and everything below it"),
        ],
    ),
    (
        "man",
        &[(
            "gemctl man",
            "write the pages into ~/.local/share/man/man1, where man looks when ~/.local/bin is on PATH",
        )],
    ),
];

/// The examples of the command at `path` (`"mcp add"`; `""` for gemctl itself), as text.
pub fn text(path: &str) -> Option<String> {
    let (_, list) = EXAMPLES.iter().find(|(p, _)| *p == path)?;
    let mut out = String::from("Examples:\n");
    for (cmd, what) in list.iter() {
        out.push_str(&format!("  {cmd}\n      {what}\n"));
    }
    Some(out)
}

/// The examples as a man page's EXAMPLES section (roff).
pub fn roff(path: &str) -> Option<String> {
    let (_, list) = EXAMPLES.iter().find(|(p, _)| *p == path)?;
    let escape = |s: &str| s.replace('\\', "\\e").replace('-', "\\-");
    let mut out = String::from(".SH EXAMPLES\n");
    for (cmd, what) in list.iter() {
        out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", escape(cmd), escape(what)));
    }
    Some(out)
}

/// `cmd` with each command's examples at the end of its long help (`--help`).
pub fn attach(cmd: clap::Command) -> clap::Command {
    attach_at(cmd, "")
}

fn attach_at(mut cmd: clap::Command, path: &str) -> clap::Command {
    if let Some(text) = text(path) {
        cmd = cmd.after_long_help(text);
    }
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    for name in names {
        let sub_path = if path.is_empty() { name.clone() } else { format!("{path} {name}") };
        cmd = cmd.mut_subcommand(&name, |sub| attach_at(sub, &sub_path));
    }
    cmd
}

#[cfg(test)]
mod tests {
    /// Every example names a command that exists, with arguments clap accepts.
    #[test]
    fn every_example_parses() {
        let cmd = crate::command();
        for (path, list) in super::EXAMPLES {
            for (line, _) in list.iter() {
                let words = shell_words(line);
                assert_eq!(words[0], "gemctl");
                let got = cmd.clone().try_get_matches_from(&words);
                assert!(got.is_ok(), "{path}: {line}: {got:?}");
                let named: Vec<&str> = words[1..]
                    .iter()
                    .take_while(|w| !w.starts_with('-'))
                    .map(String::as_str)
                    .collect();
                assert!(named.join(" ").starts_with(path), "{line} is not an example of '{path}'");
            }
        }
    }

    /// Split like a shell for the examples' quoting: single quotes only.
    fn shell_words(line: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let (mut quoted, mut any) = (false, false);
        for c in line.chars() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    any = true;
                }
                ' ' if !quoted => {
                    if any {
                        words.push(std::mem::take(&mut word));
                        any = false;
                    }
                }
                c => {
                    word.push(c);
                    any = true;
                }
            }
        }
        if any {
            words.push(word);
        }
        words
    }
}
