//! A client's MCP file read and edited in place: JSON (with comments, as VS Code writes it)
//! through a concrete syntax tree, TOML (Codex) through `toml_edit`, so every comment and every
//! byte outside the entries changed stays as written. A file that does not parse is never
//! written.

use anyhow::{Result, anyhow, bail};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstRootNode};
use serde_json::{Map, Value};

/// How a client's file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Toml,
}

fn options() -> ParseOptions {
    ParseOptions::default()
}

/// The servers of `text` (under `key`, an object or a table of tables), as JSON values; none
/// for an empty file or a file without the key. An error says why the file cannot be used.
pub fn servers(format: Format, key: &str, text: &str) -> Result<Map<String, Value>> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    let whole = match format {
        Format::Json => jsonc_parser::parse_to_serde_value::<Value>(text, &options())
            .map_err(|e| anyhow!("{e}"))?,
        Format::Toml => {
            let doc: toml_edit::DocumentMut = text.parse().map_err(|e| anyhow!("{e}"))?;
            table_json(doc.as_table())
        }
    };
    let Value::Object(whole) = whole else { bail!("the file is not an object") };
    match whole.get(key) {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(_) => bail!("\"{key}\" is not an object"),
    }
}

/// `text` with each of `entries` set under `key` (replacing an entry of that name in place,
/// else appended), everything else as written.
pub fn set_entries(
    format: Format,
    key: &str,
    text: &str,
    entries: &[(String, Value)],
) -> Result<String> {
    match format {
        Format::Json => {
            let root = CstRootNode::parse(text, &options()).map_err(|e| anyhow!("{e}"))?;
            let servers = root.object_value_or_set().object_value_or_set(key);
            for (name, entry) in entries {
                match servers.get(name) {
                    Some(prop) => prop.set_value(input(entry)),
                    None => {
                        servers.append(name, input(entry));
                    }
                }
            }
            Ok(root.to_string())
        }
        Format::Toml => {
            let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| anyhow!("{e}"))?;
            let item = doc.entry(key).or_insert_with(|| {
                let mut t = toml_edit::Table::new();
                t.set_implicit(true);
                toml_edit::Item::Table(t)
            });
            let servers =
                item.as_table_like_mut().ok_or_else(|| anyhow!("\"{key}\" is not a table"))?;
            for (name, entry) in entries {
                let mut table = toml_edit::Table::new();
                for (k, v) in entry.as_object().into_iter().flatten() {
                    table.insert(k, toml_edit::Item::Value(toml_value(v)));
                }
                if let Some(old) = servers.get(name).and_then(toml_edit::Item::as_table) {
                    *table.decor_mut() = old.decor().clone();
                    table.set_position(old.position());
                }
                servers.insert(name, toml_edit::Item::Table(table));
            }
            Ok(doc.to_string())
        }
    }
}

/// `current` with its `key` section put back as `original` had it: its bytes where the format
/// allows (JSON), its tables (TOML), or taken out where `original` had none.
pub fn restore_section(format: Format, key: &str, current: &str, original: &str) -> Result<String> {
    match format {
        Format::Json => {
            let was = section_span(key, original)?;
            let now = section_span(key, current)?;
            match (was, now) {
                (Some((_, was)), Some((_, now))) => Ok(format!(
                    "{}{}{}",
                    &current[..now.start],
                    &original[was],
                    &current[now.end..]
                )),
                (None, Some(_)) => {
                    let root =
                        CstRootNode::parse(current, &options()).map_err(|e| anyhow!("{e}"))?;
                    if let Some(prop) = root.object_value().and_then(|o| o.get(key)) {
                        prop.remove();
                    }
                    Ok(root.to_string())
                }
                (Some((prop, _)), None) => {
                    // Taken out since: put back as the original wrote it, at the end.
                    let root =
                        CstRootNode::parse(current, &options()).map_err(|e| anyhow!("{e}"))?;
                    let value: Value = serde_json::from_str(&original[prop])
                        .ok()
                        .or_else(|| servers(Format::Json, key, original).ok().map(Value::Object))
                        .unwrap_or(Value::Null);
                    root.object_value_or_set().append(key, input(&value));
                    Ok(root.to_string())
                }
                (None, None) => Ok(current.to_owned()),
            }
        }
        Format::Toml => {
            let was: toml_edit::DocumentMut = original.parse().map_err(|e| anyhow!("{e}"))?;
            let mut doc: toml_edit::DocumentMut = current.parse().map_err(|e| anyhow!("{e}"))?;
            doc.remove(key);
            if let Some(item) = was.get(key) {
                doc.insert(key, item.clone());
            }
            Ok(doc.to_string())
        }
    }
}

/// The spans of the top-level property `key` of a JSON text: the whole property's value, for
/// a copy, and the value's, for a splice.
fn section_span(
    key: &str,
    text: &str,
) -> Result<Option<(std::ops::Range<usize>, std::ops::Range<usize>)>> {
    use jsonc_parser::common::Ranged;
    let parsed = jsonc_parser::parse_to_ast(text, &Default::default(), &options())
        .map_err(|e| anyhow!("{e}"))?;
    let Some(jsonc_parser::ast::Value::Object(obj)) = parsed.value else { return Ok(None) };
    Ok(obj.properties.iter().find(|p| p.name.as_str() == key).map(|p| {
        let r = p.value.range();
        (r.start..r.end, r.start..r.end)
    }))
}

/// A JSON value as the syntax tree takes it.
fn input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(m) => {
            CstInputValue::Object(m.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}

/// A JSON value as a TOML one (objects as inline tables).
fn toml_value(v: &Value) -> toml_edit::Value {
    match v {
        Value::Null => toml_edit::Value::from(""),
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.into(),
            None => n.as_f64().unwrap_or_default().into(),
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(a) => toml_edit::Value::Array(a.iter().map(toml_value).collect()),
        Value::Object(m) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, v) in m {
                t.insert(k, toml_value(v));
            }
            toml_edit::Value::InlineTable(t)
        }
    }
}

fn table_json(t: &dyn toml_edit::TableLike) -> Value {
    Value::Object(t.iter().filter_map(|(k, i)| Some((k.to_owned(), item_json(i)?))).collect())
}

fn item_json(i: &toml_edit::Item) -> Option<Value> {
    match i {
        toml_edit::Item::None => None,
        toml_edit::Item::Value(v) => Some(value_json(v)),
        toml_edit::Item::Table(t) => Some(table_json(t)),
        toml_edit::Item::ArrayOfTables(a) => {
            Some(Value::Array(a.iter().map(|t| table_json(t)).collect()))
        }
    }
}

fn value_json(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as T;
    match v {
        T::String(s) => Value::String(s.value().clone()),
        T::Integer(i) => Value::from(*i.value()),
        T::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(Value::Null, Value::Number),
        T::Boolean(b) => Value::Bool(*b.value()),
        T::Datetime(d) => Value::String(d.value().to_string()),
        T::Array(a) => Value::Array(a.iter().map(value_json).collect()),
        T::InlineTable(t) => table_json(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_with_comments_keeps_them_and_gives_back_its_section() -> Result<()> {
        let text = "{\n  // mine\n  \"servers\": {\n    /* a */ \"a\": { \"type\": \"stdio\", \"command\": \"x\" }\n  },\n  \"inputs\": []\n}\n";
        let entry = json!({"command": "gemctl", "args": ["mcp", "serve"]});
        let out = set_entries(
            Format::Json,
            "servers",
            text,
            &[("a".into(), entry.clone()), ("b".into(), entry)],
        )?;
        assert!(
            out.contains("// mine") && out.contains("/* a */") && out.contains("\"inputs\": []"),
            "{out}"
        );
        assert_eq!(servers(Format::Json, "servers", &out)?.len(), 2);
        assert_eq!(restore_section(Format::Json, "servers", &out, text)?, text);
        let empty = set_entries(Format::Json, "mcpServers", "", &[("a".into(), json!({}))])?;
        assert_eq!(servers(Format::Json, "mcpServers", &empty)?.len(), 1, "{empty}");
        Ok(())
    }

    #[test]
    fn toml_keeps_comments_and_other_tables() -> Result<()> {
        let text = "# mine\nmodel = \"o3\"\n\n# the docs server\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs\"]\n\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n";
        let entry = json!({"command": "gemctl", "args": ["mcp", "serve"]});
        let out = set_entries(Format::Toml, "mcp_servers", text, &[("docs".into(), entry)])?;
        assert!(
            out.contains("# mine")
                && out.contains("# the docs server")
                && out.contains("trust_level"),
            "{out}"
        );
        assert_eq!(servers(Format::Toml, "mcp_servers", &out)?["docs"]["command"], "gemctl");
        assert!(servers(Format::Toml, "mcp_servers", "[mcp_servers\n").is_err());
        Ok(())
    }
}
