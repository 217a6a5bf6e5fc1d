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

/// Settings that name where policy files are read from: only the user's and the system's
/// settings may set them. A workspace's (a cloned repository's) would load its own rules at
/// the user tier with no acceptance and replace the user's policy folder (issue 68, F1);
/// Gemini CLI 0.61 takes them from every scope.
pub(crate) const POLICY_PLACES: &[&str] = &["policyPaths", "adminPolicyPaths"];

/// Take [`POLICY_PLACES`] out of a workspace's settings layer (as it applies, and as
/// written); why they are not read, when it had any and it `applies`.
pub(crate) fn drop_policy_places(
    value: &mut Option<Value>,
    raw: &mut Option<Value>,
    applies: bool,
) -> Option<String> {
    let drop = |layer: &mut Option<Value>| -> Vec<&'static str> {
        let Some(map) = layer.as_mut().and_then(Value::as_object_mut) else { return vec![] };
        POLICY_PLACES.iter().copied().filter(|k| map.remove(*k).is_some()).collect()
    };
    let dropped = drop(value);
    drop(raw);
    (applies && !dropped.is_empty()).then(|| policy_places_ignored(&dropped))
}

/// Why a workspace's [`POLICY_PLACES`] (`keys`) are not read, in words.
pub(crate) fn policy_places_ignored(keys: &[&str]) -> String {
    format!(
        "its {} {} ignored: a workspace's settings may not say where policy files are read \
         from (only ~/.gemini/settings.json and the system settings may), so a repository \
         cannot load rules unaccepted nor drop yours; a workspace's rules go in \
         .gemini/policies/*.toml, loaded once you accept them (`gemctl policy review`)",
        keys.join(" and "),
        if keys.len() == 1 { "is" } else { "are" }
    )
}

/// Keys never merged (prototype pollution in the reference; harmless here, skipped alike).
const SKIPPED_KEYS: &[&str] = &["__proto__", "constructor", "prototype"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
pub(crate) fn merge_all<'a>(layers: impl IntoIterator<Item = &'a Value>) -> Value {
    merge_with(layers, &strategy)
}

/// Merge with the strategy `by_path` gives each dotted path (Gemini CLI's
/// `customDeepMerge(getMergeStrategyForPath, ...)`).
fn merge_with<'a>(
    layers: impl IntoIterator<Item = &'a Value>,
    by_path: &dyn Fn(&str) -> Strategy,
) -> Value {
    let mut out = Value::Object(Map::new());
    for layer in layers {
        merge_into(&mut out, layer, "", by_path);
    }
    out
}

fn merge_into(base: &mut Value, over: &Value, path: &str, by_path: &dyn Fn(&str) -> Strategy) {
    let (Value::Object(base_map), Value::Object(over_map)) = (&mut *base, over) else {
        merge_value(base, over, path, by_path);
        return;
    };
    for (key, value) in over_map {
        if SKIPPED_KEYS.contains(&key.as_str()) {
            continue;
        }
        let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
        match base_map.get_mut(key) {
            Some(existing) => merge_value(existing, value, &child, by_path),
            None => {
                // Copied through the merge, so keys to skip are skipped at every depth.
                let mut fresh =
                    if value.is_object() { Value::Object(Map::new()) } else { Value::Null };
                merge_value(&mut fresh, value, &child, by_path);
                base_map.insert(key.clone(), fresh);
            }
        }
    }
}

/// JavaScript truthiness, for the reference's `objValue && srcValue`.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn merge_value(base: &mut Value, over: &Value, path: &str, by_path: &dyn Fn(&str) -> Strategy) {
    let strategy = by_path(path);
    // A shallow merge of anything that is not an object keeps the object side.
    if strategy == Strategy::Shallow && truthy(base) && truthy(over) {
        let mut merged = match &*base {
            Value::Object(b) => b.clone(),
            _ => Map::new(),
        };
        if let Value::Object(o) = over {
            merged.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        *base = Value::Object(merged);
        return;
    }
    if let Value::Array(b) = &mut *base
        && matches!(strategy, Strategy::Union | Strategy::Concat)
    {
        // A single value where a list is merged counts as a list of one.
        let items: Vec<Value> = match over {
            Value::Array(o) => o.clone(),
            other => vec![other.clone()],
        };
        b.extend(items);
        if strategy == Strategy::Union {
            // `[...new Set(a.concat(b))]`: equal scalars once, first place kept; objects and
            // arrays are distinct by identity there, so all of them stay.
            let mut seen: Vec<Value> = Vec::new();
            b.retain(|v| {
                if v.is_object() || v.is_array() || !seen.contains(v) {
                    if !(v.is_object() || v.is_array()) {
                        seen.push(v.clone());
                    }
                    true
                } else {
                    false
                }
            });
        }
        return;
    }
    match (&mut *base, over) {
        _ if strategy == Strategy::Replace => *base = over.clone(),
        (Value::Object(_), Value::Object(_)) => merge_into(base, over, path, by_path),
        (_, Value::Object(_)) => {
            *base = Value::Object(Map::new());
            merge_into(base, over, path, by_path);
        }
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

    /// `deepMerge.test.ts`'s cases, as data: each with the strategy its mock gives per path.
    #[test]
    fn custom_deep_merge_as_in_gemini_clis_own_cases() {
        type Case = (Value, Value, &'static [(&'static str, Strategy)], Value);
        let cases: Vec<Case> = vec![
            (
                json!({"a": 1, "b": 2}),
                json!({"b": 3, "c": 4}),
                &[],
                json!({"a": 1, "b": 3, "c": 4}),
            ),
            (json!({"a": {"x": 1}}), json!({"a": {"y": 2}}), &[], json!({"a": {"x": 1, "y": 2}})),
            (json!({"a": [1, 2]}), json!({"a": [3, 4]}), &[], json!({"a": [3, 4]})),
            (
                json!({"a": [1, 2]}),
                json!({"a": [3, 4]}),
                &[("a", Strategy::Concat)],
                json!({"a": [1, 2, 3, 4]}),
            ),
            (
                json!({"a": [1, 2, 3]}),
                json!({"a": [3, 4, 5]}),
                &[("a", Strategy::Union)],
                json!({"a": [1, 2, 3, 4, 5]}),
            ),
            (
                json!({"a": {"x": 1, "y": 1}}),
                json!({"a": {"y": 2, "z": 2}}),
                &[("a", Strategy::Shallow)],
                json!({"a": {"x": 1, "y": 2, "z": 2}}),
            ),
            (
                json!({"level1": {"arr1": [1, 2], "arr2": [1, 2], "obj1": {"a": 1}}}),
                json!({"level1": {"arr1": [3, 4], "arr2": [2, 3], "obj1": {"b": 2}}}),
                &[
                    ("level1.arr1", Strategy::Concat),
                    ("level1.arr2", Strategy::Union),
                    ("level1.obj1", Strategy::Shallow),
                ],
                json!({"level1": {"arr1": [1, 2, 3, 4], "arr2": [1, 2, 3], "obj1": {"a": 1, "b": 2}}}),
            ),
            (json!({}), json!({"__proto__": {"polluted1": "true"}}), &[], json!({})),
            (
                json!({}),
                json!({"constructor": {"prototype": {"polluted2": "true"}}}),
                &[],
                json!({}),
            ),
            (json!({}), json!({"prototype": {"polluted3": "true"}}), &[], json!({})),
            (
                json!({"hooks": {"BeforeTool": [{"command": "user-hook-1"}, {"command": "user-hook-2"}], "disabled": ["hook-a"]}}),
                json!({"hooks": {"BeforeTool": [{"command": "workspace-hook-1"}], "disabled": ["hook-b"]}}),
                &[("hooks.disabled", Strategy::Union), ("hooks.BeforeTool", Strategy::Concat)],
                json!({"hooks": {"BeforeTool": [{"command": "user-hook-1"}, {"command": "user-hook-2"}, {"command": "workspace-hook-1"}], "disabled": ["hook-a", "hook-b"]}}),
            ),
            (json!({"a": 1}), json!({"a": {"b": 2}}), &[], json!({"a": {"b": 2}})),
            (json!({"a": {"b": 2}}), json!({"a": 1}), &[], json!({"a": 1})),
            // What the reference's code does beyond its tests: UNION dedupes the lower list too
            // and wraps a single value; objects are never deduplicated (identity in a JS Set);
            // a nested `__proto__` is skipped as well.
            (
                json!({"a": ["x", "x", "y"]}),
                json!({"a": "y"}),
                &[("a", Strategy::Union)],
                json!({"a": ["x", "y"]}),
            ),
            (
                json!({"a": [{"k": 1}]}),
                json!({"a": [{"k": 1}]}),
                &[("a", Strategy::Union)],
                json!({"a": [{"k": 1}, {"k": 1}]}),
            ),
            (json!({"a": [1]}), json!({"a": 2}), &[("a", Strategy::Concat)], json!({"a": [1, 2]})),
            (
                json!({"a": {"x": 1}}),
                json!({"a": "s"}),
                &[("a", Strategy::Shallow)],
                json!({"a": {"x": 1}}),
            ),
            (json!({}), json!({"a": {"__proto__": {"p": 1}, "b": 1}}), &[], json!({"a": {"b": 1}})),
        ];
        for (target, source, strategies, want) in cases {
            let by_path = |p: &str| {
                strategies.iter().find(|(q, _)| *q == p).map_or(Strategy::Deep, |(_, s)| *s)
            };
            assert_eq!(merge_with([&target, &source], &by_path), want, "{target} + {source}");
        }
        assert_eq!(merge_with(std::iter::empty(), &strategy), json!({}));
    }
}
