//! The arguments as Gemini CLI's `stableStringify` writes them for `argsPattern`: keys sorted,
//! compact, and each top-level `"key":value` pair wrapped in NUL bytes, so a pattern can anchor
//! on a whole top-level argument (a NUL in the data itself is escaped as `\u0000` by JSON and
//! never collides).

use serde_json::{Map, Value};

/// The stable form of `args`.
#[cfg(test)]
pub(crate) fn stable_stringify(args: &Value) -> String {
    let mut out = String::new();
    write(&mut out, args, true);
    out
}

/// The stable form of an arguments object.
pub(crate) fn stable_stringify_map(args: &Map<String, Value>) -> String {
    let mut out = String::new();
    write_map(&mut out, args, true);
    out
}

fn write_map(out: &mut String, map: &Map<String, Value>, top: bool) {
    {
        {
            let mut keys: Vec<&String> = map.keys().collect();
            // JavaScript's default sort compares UTF-16 code units; for the keys tools use
            // (ASCII, or BMP text) that is the order of their chars.
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if top {
                    out.push('\0');
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                write(out, &map[k.as_str()], false);
                if top {
                    out.push('\0');
                }
            }
            out.push('}');
        }
    }
}

fn write(out: &mut String, v: &Value, top: bool) {
    match v {
        Value::Object(map) => write_map(out, map, top),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, item, false);
            }
            out.push(']');
        }
        // JavaScript writes a whole float as an integer (`1.0` is `1`).
        Value::Number(n)
            if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 1e21) && n.is_f64() =>
        {
            out.push_str(&format!("{}", n.as_f64().unwrap_or_default() as i128));
        }
        other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Cases from Gemini CLI's `stable-stringify.test.ts` that JSON values can express (no
    /// functions, `undefined`, `toJSON` or cycles in JSON), with the top-level NUL wrapping.
    #[test]
    fn as_gemini_clis_stable_stringify() {
        let cases = [
            (json!({"b": 2, "a": 1}), "{\0\"a\":1\0,\0\"b\":2\0}"),
            (json!({"z": {"y": 1, "x": 2}}), "{\0\"z\":{\"x\":2,\"y\":1}\0}"),
            (json!([3, {"b": 1, "a": 2}]), "[3,{\"a\":2,\"b\":1}]"),
            (json!("text"), "\"text\""),
            (json!(null), "null"),
            (json!(42), "42"),
            (json!(true), "true"),
            (json!({}), "{}"),
            (json!({"command": "git status"}), "{\0\"command\":\"git status\"\0}"),
            (json!({"s": "a\u{0}b"}), "{\0\"s\":\"a\\u0000b\"\0}"),
            (
                json!({"nested": {"deep": [1, {"k": "v"}]}}),
                "{\0\"nested\":{\"deep\":[1,{\"k\":\"v\"}]}\0}",
            ),
            (json!({"b": 2, "a": 1, "c": 3}), "{\0\"a\":1\0,\0\"b\":2\0,\0\"c\":3\0}"),
            (json!({"b": {"d": 4, "c": 3}, "a": 1}), "{\0\"a\":1\0,\0\"b\":{\"c\":3,\"d\":4}\0}"),
            (json!([3, 1, 2]), "[3,1,2]"),
            (
                json!({"b": [{"y": 2, "x": 1}, 3], "a": 1}),
                "{\0\"a\":1\0,\0\"b\":[{\"x\":1,\"y\":2},3]\0}",
            ),
            (json!({"key\u{0}with\u{0}null": 1}), "{\0\"key\\u0000with\\u0000null\":1\0}"),
            (
                json!({"a": {"x": 1}, "b": {"c": {"x": 1}}}),
                "{\0\"a\":{\"x\":1}\0,\0\"b\":{\"c\":{\"x\":1}}\0}",
            ),
            (json!([]), "[]"),
            (json!(false), "false"),
            (json!({"n": 1.0, "m": 2.5}), "{\0\"m\":2.5\0,\0\"n\":1\0}"),
        ];
        for (input, expected) in cases {
            assert_eq!(stable_stringify(&input), expected, "{input}");
        }
    }

    #[test]
    fn the_order_of_keys_does_not_matter() {
        let a = json!({"path": "/x", "content": "y", "mode": 1});
        let b = json!({"mode": 1, "content": "y", "path": "/x"});
        assert_eq!(stable_stringify(&a), stable_stringify(&b));
    }
}
