//! MCP prompts as slash commands and resources as `@` references (COMPAT §2.7–2.8).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

/// A prompt's command name: trimmed, whitespace runs turned into `-`.
pub(crate) fn command_name(prompt: &str) -> String {
    static WS: LazyLock<Regex> = LazyLock::new(|| crate::literal::regex(r"\s+"));
    WS.replace_all(prompt.trim(), "-").into_owned()
}

/// Command names for `(server, prompt)` pairs in order, by the slash-command resolver
/// (`commands/list` gives them the same names): a name more than one server offers becomes
/// `<server>.<name>` for each, a number appended while that is taken.
pub(crate) fn command_names(prompts: &[(String, String)]) -> Vec<String> {
    use crate::commands::resolve::{Candidate, resolve};
    use geminid_protocol::commands::CommandKind;
    let all: Vec<Candidate> = prompts
        .iter()
        .map(|(server, p)| Candidate {
            name: command_name(p),
            kind: CommandKind::McpPrompt,
            extension: None,
            server: Some(server.clone()),
        })
        .collect();
    let mut out = vec![String::new(); all.len()];
    for (name, i) in resolve(&all).0 {
        out[i] = name;
    }
    out
}

/// The command a person likely meant by `name`, among `(command name, server, prompt)`: a
/// server-qualified name (`legacy:review`, also with `.`, `/` or `__`) is that server's prompt;
/// else the one command whose prompt is named `name` (one a conflict renamed); else the closest
/// command name. For an error's text only: nothing is got through a guess.
pub(crate) fn likely_meant<'a>(
    name: &str,
    commands: &[(&'a str, &'a str, &'a str)],
) -> Option<&'a str> {
    let qualified = commands.iter().find(|(_, server, prompt)| {
        let Some(rest) = name.strip_prefix(*server) else { return false };
        let bare = rest.trim_start_matches([':', '.', '/', '_']);
        bare.len() < rest.len() && (bare == *prompt || bare == command_name(prompt))
    });
    if let Some((command, ..)) = qualified {
        return Some(command);
    }
    geminid_protocol::suggest::tool(name, commands.iter().map(|(c, _, p)| (*c, *p)))
}

/// A prompt argument as the server declared it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arg {
    /// Its name.
    pub name: String,
    /// Whether it must be given.
    pub required: bool,
}

/// The prompt's declared arguments.
pub(crate) fn declared(prompt: &Value) -> Vec<Arg> {
    prompt["arguments"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| Arg {
                    name: x["name"].as_str().unwrap_or_default().to_owned(),
                    required: x["required"] == true,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            // JavaScript's `/\\(.)/g`: `.` is any character but a line break.
            ('\\', Some(&n)) if n != '\n' && n != '\r' => {
                out.push(n);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// Gemini CLI's argument parsing for prompt commands (`McpPromptLoader.parseArgs`):
/// `--key="value"` / `--key=value` set the prompt's declared arguments by name (an undeclared
/// key is dropped; an empty value counts as unset); the rest are positionals (quoted or
/// space-separated, `\x` unescaped either way) that fill the required arguments still unset,
/// in order. When exactly one is unset it takes all positionals joined by a space, even none
/// (an empty string, as the reference sends). Optional arguments are only set by name. Errors
/// with the reference's message when required arguments are missing.
pub(crate) fn parse_args(text: &str, args: &[Arg]) -> Result<Map<String, Value>, String> {
    static NAMED: LazyLock<Regex> =
        LazyLock::new(|| crate::literal::regex(r#"--([^=]+)=(?:"((?:\\.|[^"\\])*)"|([^ ]+))"#));
    static TOKEN: LazyLock<Regex> =
        LazyLock::new(|| crate::literal::regex(r#""((?:\\.|[^"\\])*)"|([^ ]+)"#));
    let quoted_or_bare = |c: &regex::Captures<'_>, q: usize, b: usize| {
        c.get(q).or_else(|| c.get(b)).map(|m| unescape(m.as_str())).unwrap_or_default()
    };
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    for c in NAMED.captures_iter(text) {
        named.insert(c[1].to_owned(), quoted_or_bare(&c, 2, 3));
    }
    let rest = NAMED.replace_all(text, "");
    let positionals: Vec<String> =
        TOKEN.captures_iter(rest.trim()).map(|c| quoted_or_bare(&c, 1, 2)).collect();
    let mut values: BTreeMap<String, String> = args
        .iter()
        .filter_map(|a| {
            named.get(&a.name).filter(|v| !v.is_empty()).map(|v| (a.name.clone(), v.clone()))
        })
        .collect();
    let unfilled: Vec<&Arg> =
        args.iter().filter(|a| a.required && !values.contains_key(&a.name)).collect();
    if let [only] = unfilled.as_slice() {
        values.insert(only.name.clone(), positionals.join(" "));
    } else {
        for (a, v) in unfilled.iter().zip(positionals) {
            values.insert(a.name.clone(), v);
        }
    }
    let missing: Vec<String> = args
        .iter()
        .filter(|a| a.required && !values.contains_key(&a.name))
        .map(|a| format!("--{}", a.name))
        .collect();
    if !missing.is_empty() {
        return Err(format!("Missing required argument(s): {}", missing.join(", ")));
    }
    Ok(values.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

/// `@server:uri` → (server, uri), for the server names the session has (longest match).
pub(crate) fn parse_reference<'a>(
    reference: &str,
    servers: impl Iterator<Item = &'a str>,
) -> Option<(String, String)> {
    let r = reference.strip_prefix('@').unwrap_or(reference);
    servers
        .filter(|s| r.len() > s.len() && r.starts_with(s) && r[s.len()..].starts_with(':'))
        .max_by_key(|s| s.len())
        .map(|s| (s.to_owned(), r[s.len() + 1..].to_owned()))
}

/// Resource contents → parts, as Gemini CLI's `@` references include them.
pub(crate) fn resource_parts(uri: &str, contents: &[Value]) -> Vec<Value> {
    let mut parts = vec![json!({ "text": format!("\nContent from @{uri}:\n") })];
    for c in contents {
        // Gemini CLI's `convertResourceContentsToParts`: a nested `resource` stands for the
        // item, and an empty text or blob is nothing (JavaScript's falsy `""`).
        let c = if c["resource"].is_object() { &c["resource"] } else { c };
        let nonempty = |k: &str| c[k].as_str().filter(|s| !s.is_empty());
        if let Some(text) = nonempty("text") {
            parts.push(json!({ "text": text }));
        } else if let Some(blob) = nonempty("blob") {
            let mime = c["mimeType"].as_str().unwrap_or("application/octet-stream");
            let padding = blob.bytes().rev().take_while(|b| *b == b'=').count();
            let bytes = (blob.len() / 4 * 3).saturating_sub(padding);
            parts.push(
                json!({ "text": format!("[Binary resource content {mime}, {bytes} bytes]") }),
            );
        }
    }
    parts
}

/// Whether `uri` is one a URI template (RFC 6570) can expand to: literal parts must match, and
/// each expression stands for at least one character (`{var}` not crossing a `/`; `{+var}`,
/// `{#var}` and `{/var}` and the like any text).
pub(crate) fn template_matches(template: &str, uri: &str) -> bool {
    let mut pattern = String::from("^");
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        pattern.push_str(&regex::escape(&rest[..open]));
        let Some(close) = rest[open..].find('}') else { return false };
        let expr = &rest[open + 1..open + close];
        let simple = expr.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        pattern.push_str(if simple { "[^/?#]+" } else { ".+" });
        rest = &rest[open + close + 1..];
    }
    pattern.push_str(&regex::escape(rest));
    pattern.push('$');
    regex::Regex::new(&pattern).is_ok_and(|re| re.is_match(uri))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_names_no_prompt_is_answered_with_the_one_likely_meant() {
        let commands = [
            ("review", "legacy", "review"),
            ("a.greet", "a", "greet"),
            ("b.greet", "b", "greet"),
            ("daily-report", "notes", "daily report"),
        ];
        for (given, want) in [
            ("legacy:review", Some("review")),
            ("legacy.review", Some("review")),
            ("legacy__review", Some("review")),
            ("a:greet", Some("a.greet")),
            ("b/greet", Some("b.greet")),
            ("notes:daily report", Some("daily-report")),
            ("notes:daily-report", Some("daily-report")),
            ("reveiw", Some("review")),
            ("/review", Some("review")),
            ("greet", None), // two servers have it: which is not guessed
            ("c:greet", None),
            ("legacyreview", None),
            ("deploy", None),
        ] {
            assert_eq!(likely_meant(given, &commands), want, "{given}");
        }
    }

    #[test]
    fn uri_templates_match_what_they_expand_to() {
        for (t, uri, ok) in [
            ("file:///{name}.txt", "file:///notes.txt", true),
            ("file:///{name}.txt", "file:///a/b.txt", false),
            ("file:///{+path}", "file:///a/b.txt", true),
            ("db://{table}/{id}", "db://users/7", true),
            ("db://{table}/{id}", "db://users/", false),
            ("plain://x", "plain://x", true),
            ("plain://x", "plain://y", false),
            ("bad://{oops", "bad://{oops", false),
        ] {
            assert_eq!(template_matches(t, uri), ok, "{t} ~ {uri}");
        }
    }
    use pretty_assertions::assert_eq;

    fn args(spec: &[(&str, bool)]) -> Vec<Arg> {
        spec.iter().map(|(n, r)| Arg { name: (*n).into(), required: *r }).collect()
    }

    fn parsed(text: &str, spec: &[(&str, bool)]) -> Result<Vec<(String, String)>, String> {
        parse_args(text, &args(spec)).map(|m| {
            m.into_iter().map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned())).collect()
        })
    }

    #[test]
    fn named_positional_and_missing() {
        let greet = [("name", true), ("style", false)];
        assert_eq!(
            parsed("--name=Ann --style=\"very \\\"warm\\\"\"", &greet),
            Ok(vec![("name".into(), "Ann".into()), ("style".into(), "very \"warm\"".into())])
        );
        assert_eq!(
            parsed("Ann Lee", &greet),
            Ok(vec![("name".into(), "Ann Lee".into())]),
            "one required unfilled takes all positionals"
        );
        assert_eq!(
            parsed("--style=x", &greet),
            Ok(vec![("name".into(), "".into()), ("style".into(), "x".into())]),
            "a single unfilled required argument takes the (no) positionals, as the reference does"
        );
        let pair = [("first", true), ("second", true)];
        assert_eq!(
            parsed("a \"b c\"", &pair),
            Ok(vec![("first".into(), "a".into()), ("second".into(), "b c".into())])
        );
        assert_eq!(
            parsed("", &pair),
            Err("Missing required argument(s): --first, --second".into())
        );
        assert_eq!(
            parsed("--second=2 one", &pair),
            Ok(vec![("first".into(), "one".into()), ("second".into(), "2".into())])
        );
        assert_eq!(
            parsed("stray", &[("opt", false)]),
            Ok(vec![]),
            "optional arguments are only set by name"
        );
    }

    /// `McpPromptLoader.test.ts`'s `parseArgs` cases, as data, and the reference's behaviour
    /// where its code decides (undeclared names, empty values).
    #[test]
    fn parse_args_as_in_gemini_clis_own_cases() {
        let req = |names: &[&'static str]| -> Vec<(&'static str, bool)> {
            names.iter().map(|n| (*n, true)).collect()
        };
        type Case = (
            &'static str,
            Vec<(&'static str, bool)>,
            Result<Vec<(&'static str, &'static str)>, &'static str>,
        );
        let cases: Vec<Case> = vec![
            ("hello world", req(&["arg1", "arg2"]), Ok(vec![("arg1", "hello"), ("arg2", "world")])),
            (
                "\"hello world\" foo",
                req(&["arg1", "arg2"]),
                Ok(vec![("arg1", "hello world"), ("arg2", "foo")]),
            ),
            ("hello world", req(&["arg1"]), Ok(vec![("arg1", "hello world")])),
            (r#""hello \"world\"""#, req(&["arg1"]), Ok(vec![("arg1", "hello \"world\"")])),
            (r#""hello\\world""#, req(&["arg1"]), Ok(vec![("arg1", "hello\\world")])),
            (
                "--named=\"value\" positional",
                req(&["named", "pos"]),
                Ok(vec![("named", "value"), ("pos", "positional")]),
            ),
            (
                "positional --named=\"value\"",
                req(&["pos", "named"]),
                Ok(vec![("named", "value"), ("pos", "positional")]),
            ),
            (
                "p1 --named=\"value\" p2",
                req(&["pos1", "named", "pos2"]),
                Ok(vec![("named", "value"), ("pos1", "p1"), ("pos2", "p2")]),
            ),
            // An escaped quote outside quotes is a literal quote.
            (
                r#"\"hello world"#,
                req(&["arg1", "arg2"]),
                Ok(vec![("arg1", "\"hello"), ("arg2", "world")]),
            ),
            (
                r#"p1 --named1="value 1" "p2 has spaces" --named2=value2 "p3 \"with quotes\"""#,
                req(&["pos1", "named1", "pos2", "named2", "pos3"]),
                Ok(vec![
                    ("named1", "value 1"),
                    ("named2", "value2"),
                    ("pos1", "p1"),
                    ("pos2", "p2 has spaces"),
                    ("pos3", "p3 \"with quotes\""),
                ]),
            ),
            // What the reference's code does beyond its tests: an undeclared `--key=value` is
            // not forwarded; `--a=""` is unset; a single required argument may end up empty.
            ("--other=1 --a=x", vec![("a", false)], Ok(vec![("a", "x")])),
            ("--a=\"\" --b=2", req(&["a", "b"]), Ok(vec![("a", ""), ("b", "2")])),
            ("--a=\"\"", req(&["a", "b"]), Err("Missing required argument(s): --a, --b")),
            ("", req(&["only"]), Ok(vec![("only", "")])),
            ("--x=a\\b trailing\\", req(&["x", "y"]), Ok(vec![("x", "ab"), ("y", "trailing\\")])),
        ];
        for (text, spec, want) in cases {
            let want = want
                .map(|v| {
                    v.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect::<Vec<_>>()
                })
                .map_err(str::to_owned);
            assert_eq!(parsed(text, &spec), want, "{text:?}");
        }
    }

    #[test]
    fn names_and_conflicts() {
        assert_eq!(command_name("  image  only "), "image-only");
        let names = command_names(&[
            ("a".into(), "greet".into()),
            ("b".into(), "greet".into()),
            ("a".into(), "plain".into()),
            ("c".into(), "a.greet".into()),
        ]);
        assert_eq!(names, ["a.greet1", "b.greet", "plain", "a.greet"]);
    }

    #[test]
    fn references_and_parts() {
        let servers = ["fs", "fs:extra"];
        assert_eq!(
            parse_reference("@fs:file:///a", servers.iter().copied()),
            Some(("fs".into(), "file:///a".into()))
        );
        assert_eq!(
            parse_reference("@fs:extra:x://y", servers.iter().copied()),
            Some(("fs:extra".into(), "x://y".into()))
        );
        assert_eq!(parse_reference("@nope:x", servers.iter().copied()), None);
        let parts = resource_parts(
            "u",
            &[json!({"text": "t"}), json!({"blob": "AAAA", "mimeType": "image/png"})],
        );
        assert_eq!(
            parts,
            vec![
                json!({"text": "\nContent from @u:\n"}),
                json!({"text": "t"}),
                json!({"text": "[Binary resource content image/png, 3 bytes]"})
            ]
        );
        // Empty text and blob give nothing; an empty text next to a blob gives the blob; a
        // nested `resource` is read as the item (Gemini CLI's own conversion).
        let parts = resource_parts(
            "u",
            &[
                json!({"text": ""}),
                json!({"text": "", "blob": "AAAA", "mimeType": "image/png"}),
                json!({"blob": ""}),
                json!({"resource": {"text": "inner"}, "text": "outer"}),
            ],
        );
        assert_eq!(
            parts,
            vec![
                json!({"text": "\nContent from @u:\n"}),
                json!({"text": "[Binary resource content image/png, 3 bytes]"}),
                json!({"text": "inner"})
            ]
        );
    }
}
