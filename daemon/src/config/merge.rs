//! Gemini CLI's settings merge (`customDeepMerge` with per-path strategies, COMPAT §1.2):
//! objects deep-merge, arrays and scalars are replaced, except for the paths below.

use serde_json::{Map, Value};

/// Paths whose arrays are unioned (deduplicated, first occurrence kept).
const UNION: &[&str] = &[
    "policyPaths",
    "adminPolicyPaths",
    "context.fileFiltering.customIgnoreFilePaths",
    "tools.exclude",
    "advanced.excludedEnvVars",
    "extensions.disabled",
    "extensions.workspacesWithMigrationNudge",
    "skills.disabled",
    "hooksConfig.disabled",
];

/// Keys never merged (prototype pollution in the reference; harmless here, skipped alike).
const SKIPPED_KEYS: &[&str] = &["__proto__", "constructor", "prototype"];

#[derive(Debug, PartialEq, Eq)]
enum Strategy {
    Deep,
    /// `mcpServers`: by name, a server is taken whole from the higher scope.
    Shallow,
    Union,
    Concat,
    Replace,
}

fn strategy(path: &str) -> Strategy {
    if path == "mcpServers" {
        Strategy::Shallow
    } else if path == "admin" {
        Strategy::Replace
    } else if UNION.contains(&path) {
        Strategy::Union
    } else if path == "context.includeDirectories"
        || path.strip_prefix("hooks.").is_some_and(|rest| !rest.contains('.'))
    {
        Strategy::Concat
    } else {
        Strategy::Deep
    }
}

/// Merge `layers` in order; later layers win.
pub fn merge_all<'a>(layers: impl IntoIterator<Item = &'a Value>) -> Value {
    let mut out = Value::Object(Map::new());
    for layer in layers {
        merge_into(&mut out, layer, "");
    }
    out
}

fn merge_into(base: &mut Value, over: &Value, path: &str) {
    let (Value::Object(base_map), Value::Object(over_map)) = (&mut *base, over) else {
        merge_value(base, over, path);
        return;
    };
    for (key, value) in over_map {
        if SKIPPED_KEYS.contains(&key.as_str()) {
            continue;
        }
        let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
        match base_map.get_mut(key) {
            Some(existing) => merge_value(existing, value, &child),
            None => {
                base_map.insert(key.clone(), value.clone());
            }
        }
    }
}

fn merge_value(base: &mut Value, over: &Value, path: &str) {
    match (strategy(path), &mut *base, over) {
        (Strategy::Shallow, Value::Object(b), Value::Object(o)) => {
            b.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        (Strategy::Union, Value::Array(b), Value::Array(o)) => {
            for v in o {
                if !b.contains(v) {
                    b.push(v.clone());
                }
            }
        }
        (Strategy::Concat, Value::Array(b), Value::Array(o)) => b.extend(o.iter().cloned()),
        (Strategy::Deep, Value::Object(_), Value::Object(_)) => merge_into(base, over, path),
        _ => *base = over.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn every_strategy() {
        let user = json!({
            "mcpServers": { "shared": {"command": "a", "args": ["1"]}, "u": {"command": "u"} },
            "ui": { "theme": "dark", "hideTips": true },
            "tools": { "exclude": ["x", "y"], "allowed": ["a"] },
            "context": { "includeDirectories": ["/a"] },
            "hooks": { "BeforeTool": [{"command": "h1"}] },
            "admin": { "mcp": { "enabled": false }, "other": 1 },
            "mcp": { "allowed": ["u"] },
            "__proto__": { "polluted": true }
        });
        let workspace = json!({
            "mcpServers": { "shared": {"url": "http://127.0.0.1:1/mcp"} },
            "ui": { "theme": "light" },
            "tools": { "exclude": ["y", "z"], "allowed": ["b"] },
            "context": { "includeDirectories": ["/a", "/b"] },
            "hooks": { "BeforeTool": [{"command": "h2"}], "AfterTool": [] },
            "admin": { "mcp": { "enabled": true } },
            "mcp": { "allowed": ["w"] }
        });
        assert_eq!(
            merge_all([&user, &workspace]),
            json!({
                "mcpServers": { "shared": {"url": "http://127.0.0.1:1/mcp"}, "u": {"command": "u"} },
                "ui": { "theme": "light", "hideTips": true },
                "tools": { "exclude": ["x", "y", "z"], "allowed": ["b"] },
                "context": { "includeDirectories": ["/a", "/a", "/b"] },
                "hooks": { "BeforeTool": [{"command": "h1"}, {"command": "h2"}], "AfterTool": [] },
                "admin": { "mcp": { "enabled": true } },
                "mcp": { "allowed": ["w"] }
            })
        );
    }
}
