use super::*;
use serde_json::json;

/// `mcp-client.test.ts`'s `populateMcpServerCommand` cases, and shell-quote's rules.
#[test]
fn server_command_words() {
    let env: super::super::env::Env = [("HOME".to_owned(), "/h".to_owned())].into();
    let ok = |line: &str| server_command(line, &env);
    assert_eq!(
        ok("command --arg1 value1"),
        Ok(vec!["command".into(), "--arg1".into(), "value1".into()])
    );
    assert!(ok("derp && herp").is_err_and(|e| e.contains("shell operator")));
    assert_eq!(
        ok("srv '$HOME' \"$HOME/x\" ${HOME} a\\ b"),
        Ok(vec!["srv".into(), "$HOME".into(), "/h/x".into(), "/h".into(), "a b".into()])
    );
    assert_eq!(ok("srv \"\" $NOPE x"), Ok(vec!["srv".into(), "".into(), "".into(), "x".into()]));
    assert!(ok("srv *.js").is_err());
    assert!(ok("srv 'open").is_err());
    assert!(ok("srv | tee").is_err());
    assert!(ok("# nothing").is_err());
    assert!(ok("srv a#b").is_err(), "shell-quote reads a comment there");
    assert_eq!(ok("srv 'a#b'"), Ok(vec!["srv".into(), "a#b".into()]));
}

#[test]
fn valid_entries_and_transports() {
    let cases = [
        (json!({"command": "npx", "args": ["-y", "x"]}), "stdio"),
        (json!({"url": "http://127.0.0.1:1/sse", "type": "sse"}), "sse"),
        (json!({"url": "http://127.0.0.1:1/mcp"}), "http"),
        (json!({"httpUrl": "http://127.0.0.1:1/mcp"}), "http"),
    ];
    for (v, transport) in cases {
        let (c, problems) = parse_server("s", &v);
        assert_eq!(c.map(|c| c.transport()), Some(transport), "{v}");
        assert!(problems.is_empty(), "{problems:?}");
    }
}

#[test]
fn problems_name_server_and_field() {
    let (c, p) = parse_server("s", &json!({"command": "x", "colour": "red"}));
    assert!(c.is_some());
    assert_eq!(p[0].severity, Severity::Warning);
    assert_eq!(p[0].field.as_deref(), Some("colour"));

    let (c, p) = parse_server("s", &json!({"command": "x", "args": ["a", 5]}));
    assert!(c.is_none());
    assert_eq!(p[0].field.as_deref(), Some("args"));
    assert!(
        p[0].message.contains("field \"args[1]\": invalid type: integer `5`"),
        "{}",
        p[0].message
    );

    // A wrong type in an optional scalar: a warning, and the entry stays.
    let (c, p) = parse_server("s", &json!({"timeout": "soon", "trust": 3, "command": "x"}));
    assert_eq!(c.map(|c| (c.timeout, c.trust, c.command)), Some((None, None, Some("x".into()))));
    assert_eq!(
        p.iter().map(|p| (p.severity, p.field.as_deref())).collect::<Vec<_>>(),
        [(Severity::Warning, Some("timeout")), (Severity::Warning, Some("trust"))],
        "{p:?}"
    );
    assert!(p[0].message.ends_with("(ignored)"), "{p:?}");

    let (c, p) = parse_server("lonely", &json!({"description": "no way to start"}));
    assert!(c.is_none() && p[0].message.contains("none of \"command\", \"url\" or \"httpUrl\""));

    let (c, p) = parse_server("s", &json!({"url": "http://a", "httpUrl": "http://b"}));
    assert_eq!(c.map(|c| c.transport()), Some("http"));
    assert_eq!(p[0].severity, Severity::Warning);

    let (c, _) = parse_server("s", &json!("npx"));
    assert!(c.is_none());

    // geminid's `keepWarm`: one of three words; another is a warning, the entry stays.
    let (c, p) = parse_server("s", &json!({"command": "x", "keepWarm": "always"}));
    assert_eq!(c.and_then(|c| c.keep_warm), Some(geminid_protocol::mcp::KeepWarm::Always));
    assert!(p.is_empty(), "{p:?}");
    let (c, p) = parse_server("s", &json!({"command": "x", "keepWarm": "forever"}));
    assert_eq!(c.map(|c| c.keep_warm), Some(None));
    assert_eq!(p[0].field.as_deref(), Some("keepWarm"), "{p:?}");

    // `gemini mcp add --include-tools a,b` as written by hand: a warning, not silence.
    let (c, p) = parse_server("s", &json!({"command": "x", "includeTools": ["a,b", "c"]}));
    assert!(c.is_some());
    assert_eq!((p.len(), p[0].field.as_deref()), (1, Some("includeTools")));
    assert!(p[0].message.contains(r#"["a", "b"]"#), "{}", p[0].message);
}

/// Gemini CLI coerces expanded strings to the field's type (settings.test.ts: `"$TEST_MAX_
/// TURNS"` → 15, `"${TEST_AUTO_THEME:-true}"` → true); the same for a server's fields.
#[test]
fn expanded_strings_take_the_fields_type() {
    for (timeout, want) in [
        (json!("30000"), Some(30000)),
        (json!(" 5000 "), Some(5000)),
        (json!(2500.0), Some(2500)),
        (json!(1500), Some(1500)),
    ] {
        let (c, p) = parse_server("s", &json!({"command": "x", "timeout": timeout}));
        assert_eq!(c.and_then(|c| c.timeout), want, "{timeout}");
        assert!(p.is_empty(), "{p:?}");
    }
    for (trust, want) in [(json!("true"), true), (json!("false"), false), (json!(true), true)] {
        let (c, _) = parse_server("s", &json!({"command": "x", "trust": trust}));
        assert_eq!(c.and_then(|c| c.trust), Some(want), "{trust}");
    }
    for bad in [json!("-1"), json!("1.5"), json!("30s"), json!(-3)] {
        let (c, p) = parse_server("s", &json!({"command": "x", "timeout": bad}));
        assert_eq!(c.map(|c| c.timeout), Some(None), "{bad}");
        assert_eq!(p[0].severity, Severity::Warning, "{bad}");
    }
}

#[test]
fn a_misspelt_field_is_answered_with_the_one_likely_meant() {
    let (c, p) = parse_server("s", &json!({"comand": "srv", "timout": 5, "colour": 1}));
    assert!(c.is_none());
    let said: Vec<&str> = p.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        said,
        [
            "MCP server \"s\": unknown field \"comand\" (ignored; did you mean \"command\"?)",
            "MCP server \"s\": unknown field \"timout\" (ignored; did you mean \"timeout\"?)",
            "MCP server \"s\": unknown field \"colour\" (ignored)",
            "MCP server \"s\" has none of \"command\", \"url\" or \"httpUrl\"; add one so it \
             can be started (\"comand\" is likely \"command\": rename it)",
        ]
    );
    let (_, p) = parse_server("s", &json!({"httpurl": "http://127.0.0.1:1/mcp"}));
    assert!(p[0].message.ends_with("(ignored; did you mean \"httpUrl\"?)"), "{p:?}");
}

#[test]
fn debug_names_env_headers_and_oauth_entries_without_their_values() {
    let c: McpServerConfig = serde_json::from_value(serde_json::json!({
        "command": "srv",
        "env": {"GITHUB_TOKEN": "ghp_secret1"},
        "headers": {"Authorization": "Bearer secret2"},
        "httpUrl": "https://user:secret3@example.com/mcp",
        "oauth": {"clientSecret": "secret4"}
    }))
    .unwrap();
    let shown = format!("{c:?} {c:#?}");
    assert!(!shown.contains("secret"), "{shown}");
    for name in ["GITHUB_TOKEN", "Authorization", "clientSecret", "example.com"] {
        assert!(shown.contains(name), "{name} in {shown}");
    }
}
