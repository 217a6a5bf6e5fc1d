//! The `---` frontmatter of `SKILL.md` and agent files, as Gemini CLI splits and reads it.
//!
//! A file has frontmatter when it starts with `---` and a line break; it ends at the first line
//! break followed by `---`, and what follows that (after one line break) is the body. A skill's
//! `name` and `description` are read as YAML; when that fails, or they are not both strings,
//! line by line (`name:` and `description:`, the latter with indented continuation lines), so
//! that descriptions with colons in them load as Gemini CLI's do.

use serde_json::{Map, Value};
use yaml_rust2::{Yaml, YamlLoader};

/// A file split at its frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split<'a> {
    /// The frontmatter's text, without the `---` lines.
    pub frontmatter: &'a str,
    /// What follows it (absent when nothing follows the closing `---` line).
    pub body: Option<&'a str>,
}

/// Split `text` at its frontmatter; `None` when it has none.
pub(crate) fn split(text: &str) -> Option<Split<'_>> {
    let rest = text.strip_prefix("---\r\n").or_else(|| text.strip_prefix("---\n"))?;
    let end = rest.find("\n---")?;
    let frontmatter = rest[..end].strip_suffix('\r').unwrap_or(&rest[..end]);
    let after = &rest[end + "\n---".len()..];
    let body = after.strip_prefix("\r\n").or_else(|| after.strip_prefix('\n'));
    Some(Split { frontmatter, body })
}

/// A YAML frontmatter that could not be read: the parser's message and its line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct YamlError {
    /// What is wrong.
    pub message: String,
    /// Its line within the frontmatter.
    pub line: usize,
    /// Its column.
    pub column: usize,
}

/// The frontmatter as YAML: its first document (`Null` for an empty one).
pub(crate) fn yaml(frontmatter: &str) -> Result<Yaml, YamlError> {
    let docs = YamlLoader::load_from_str(frontmatter).map_err(|e| YamlError {
        message: e.info().to_owned(),
        line: e.marker().line(),
        column: e.marker().col() + 1,
    })?;
    Ok(docs.into_iter().next().unwrap_or(Yaml::Null))
}

/// A YAML value as JSON, for validating with serde: mapping keys become strings, floats
/// numbers, aliases and unrepresentable values null.
pub(crate) fn to_json(y: &Yaml) -> Value {
    match y {
        Yaml::Real(s) => s
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Yaml::Hash(h) => {
            let mut map = Map::new();
            for (k, v) in h {
                let key = match k {
                    Yaml::String(s) | Yaml::Real(s) => s.clone(),
                    Yaml::Integer(i) => i.to_string(),
                    Yaml::Boolean(b) => b.to_string(),
                    Yaml::Null => "null".to_owned(),
                    other => format!("{other:?}"),
                };
                map.insert(key, to_json(v));
            }
            Value::Object(map)
        }
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Value::Null,
    }
}

/// A skill's `name` and `description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NameAndDescription {
    /// `name`, as written.
    pub name: String,
    /// `description`.
    pub description: String,
}

/// Why a skill's frontmatter gave no name and description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// Neither YAML nor the line reader found both; `yaml` is YAML's own complaint, if it had
    /// one, and `missing` names the fields not found.
    Missing {
        /// The fields neither reader found.
        missing: Vec<&'static str>,
        /// YAML's complaint.
        yaml: Option<YamlError>,
    },
}

/// `name` and `description` from a skill's frontmatter: YAML first, then line by line.
pub(crate) fn name_and_description(frontmatter: &str) -> Result<NameAndDescription, Unreadable> {
    let parsed = yaml(frontmatter);
    if let Ok(Yaml::Hash(h)) = &parsed {
        let field = |k: &str| match h.get(&Yaml::String(k.to_owned())) {
            Some(Yaml::String(s)) => Some(s.clone()),
            _ => None,
        };
        if let (Some(name), Some(description)) = (field("name"), field("description")) {
            return Ok(NameAndDescription { name, description });
        }
    }
    let (name, description) = by_lines(frontmatter);
    match (name, description) {
        (Some(name), Some(description)) => Ok(NameAndDescription { name, description }),
        (name, description) => {
            let mut missing = Vec::new();
            if name.is_none() {
                missing.push("name");
            }
            if description.is_none() {
                missing.push("description");
            }
            Err(Unreadable::Missing { missing, yaml: parsed.err() })
        }
    }
}

/// Gemini CLI's line reader: `name:` and `description:` at a line's start (after optional
/// whitespace), values trimmed; a description continues on indented lines, joined by spaces.
fn by_lines(frontmatter: &str) -> (Option<String>, Option<String>) {
    let lines: Vec<&str> =
        frontmatter.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let (mut name, mut description) = (None, None);
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("description:") {
            let mut parts = vec![v.trim().to_owned()];
            while let Some(next) = lines.get(i + 1) {
                let indented = next.starts_with([' ', '\t']) && !next.trim().is_empty();
                if !indented {
                    break;
                }
                parts.push(next.trim().to_owned());
                i += 1;
            }
            parts.retain(|p| !p.is_empty());
            description = Some(parts.join(" "));
        }
        i += 1;
    }
    (name, description)
}

/// A skill's name made safe as a file name, as Gemini CLI does (`:\/<>*?"|` become `-`).
pub(crate) fn sanitize_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if matches!(c, ':' | '\\' | '/' | '<' | '>' | '*' | '?' | '"' | '|') { '-' } else { c }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_finds_the_first_closing_line() {
        let s = split("---\nname: a\n---\nbody\n---\nmore").expect("frontmatter");
        assert_eq!(s.frontmatter, "name: a");
        assert_eq!(s.body, Some("body\n---\nmore"));
        let s = split("---\r\nname: a\r\n---\r\nbody").expect("frontmatter");
        assert_eq!((s.frontmatter, s.body), ("name: a", Some("body")));
        let s = split("---\nname: a\n---").expect("frontmatter");
        assert_eq!(s.body, None);
        let s = split("---\n\n---\n").expect("empty frontmatter");
        assert_eq!(s.frontmatter, "");
        assert_eq!(split("# no frontmatter"), None);
        assert_eq!(split(" ---\nname: a\n---\n"), None);
        assert_eq!(split("---\nname: a\n"), None);
    }

    #[test]
    fn yaml_errors_have_a_line() {
        let e = yaml("name: a\ndescription: [unclosed\n").expect_err("invalid");
        assert!(e.line >= 2, "{e:?}");
    }

    #[test]
    fn json_from_yaml() {
        let y = yaml("a: 1\nb: [x, 2.5, true]\nc: ~\n").expect("yaml");
        assert_eq!(to_json(&y), serde_json::json!({"a": 1, "b": ["x", 2.5, true], "c": null}));
    }
}
