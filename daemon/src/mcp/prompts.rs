//! MCP prompts as slash commands and resources as `@` references (COMPAT §2.7–2.8).

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

/// A prompt's command name: trimmed, whitespace runs turned into `-`.
pub fn command_name(prompt: &str) -> String {
    static WS: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\s+").unwrap_or_else(|e| panic!("{e}")));
    WS.replace_all(prompt.trim(), "-").into_owned()
}

/// Command names for `(server, prompt)` pairs in order: a name more than one server offers is
/// renamed `<server>.<name>` for every one of them; a name still taken gets `2`, `3`, ...
pub fn command_names(prompts: &[(String, String)]) -> Vec<String> {
    let mut count: HashMap<String, usize> = HashMap::new();
    for (_, p) in prompts {
        *count.entry(command_name(p)).or_default() += 1;
    }
    let mut taken: HashMap<String, usize> = HashMap::new();
    prompts
        .iter()
        .map(|(server, p)| {
            let base = command_name(p);
            let name = if count[&base] > 1 { format!("{server}.{base}") } else { base };
            let n = taken.entry(name.clone()).or_default();
            *n += 1;
            if *n == 1 { name } else { format!("{name}{n}") }
        })
        .collect()
}

/// A prompt argument as the server declared it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// Its name.
    pub name: String,
    /// Whether it must be given.
    pub required: bool,
}

/// The prompt's declared arguments.
pub fn declared(prompt: &Value) -> Vec<Arg> {
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
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Gemini CLI's argument parsing for prompt commands: `--key="value"` / `--key=value` set
/// arguments by name; the rest are positionals (quoted or space-separated) that fill the
/// required arguments still unset, in order; when exactly one is unset it takes all
/// positionals joined by a space. Optional arguments are only set by name. Errors with the
/// reference's message when a required argument is missing.
pub fn parse_args(text: &str, args: &[Arg]) -> Result<Map<String, Value>, String> {
    static NAMED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"--([^=]+)=(?:"((?:\\.|[^"\\])*)"|([^ ]+))"#).unwrap_or_else(|e| panic!("{e}"))
    });
    static TOKEN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#""((?:\\.|[^"\\])*)"|([^ ]+)"#).unwrap_or_else(|e| panic!("{e}"))
    });
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    for c in NAMED.captures_iter(text) {
        let value = c
            .get(2)
            .map(|m| unescape(m.as_str()))
            .or_else(|| c.get(3).map(|m| m.as_str().to_owned()));
        values.insert(c[1].to_owned(), value.unwrap_or_default());
    }
    let rest = NAMED.replace_all(text, "");
    let positionals: Vec<String> = TOKEN
        .captures_iter(rest.trim())
        .map(|c| c.get(1).map(|m| unescape(m.as_str())).unwrap_or_else(|| c[2].to_owned()))
        .collect();
    let unfilled: Vec<&Arg> =
        args.iter().filter(|a| a.required && !values.contains_key(&a.name)).collect();
    if unfilled.len() == 1 && !positionals.is_empty() {
        values.insert(unfilled[0].name.clone(), positionals.join(" "));
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
pub fn parse_reference<'a>(
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
pub fn resource_parts(uri: &str, contents: &[Value]) -> Vec<Value> {
    let mut parts = vec![json!({ "text": format!("\nContent from @{uri}:\n") })];
    for c in contents {
        if let Some(text) = c["text"].as_str() {
            parts.push(json!({ "text": text }));
        } else if let Some(blob) = c["blob"].as_str() {
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
pub fn template_matches(template: &str, uri: &str) -> bool {
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
        assert_eq!(parsed("--style=x", &greet), Err("Missing required argument(s): --name".into()));
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

    #[test]
    fn names_and_conflicts() {
        assert_eq!(command_name("  image  only "), "image-only");
        let names = command_names(&[
            ("a".into(), "greet".into()),
            ("b".into(), "greet".into()),
            ("a".into(), "plain".into()),
            ("c".into(), "a.greet".into()),
        ]);
        assert_eq!(names, ["a.greet", "b.greet", "plain", "a.greet2"]);
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
    }
}
