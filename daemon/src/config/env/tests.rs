use super::*;
use pretty_assertions::assert_eq;

fn env(pairs: &[(&str, &str)]) -> Env {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn settings_expansion_leaves_undefined_literal() {
    let e = env(&[("HOME", "/h"), ("A.B", "dot"), ("EMPTY", "")]);
    assert_eq!(expand_settings_str("$HOME/x", &e), "/h/x");
    assert_eq!(expand_settings_str("${HOME}/x", &e), "/h/x");
    assert_eq!(expand_settings_str("$UNDEFINED and ${NOPE}", &e), "$UNDEFINED and ${NOPE}");
    assert_eq!(expand_settings_str("${NOPE:-fallback}", &e), "fallback");
    assert_eq!(expand_settings_str("${HOME:-fallback}", &e), "/h");
    assert_eq!(expand_settings_str("${A.B}", &e), "dot");
    assert_eq!(expand_settings_str("${EMPTY:-d}", &e), "");
    assert_eq!(expand_settings_str("no vars", &e), "no vars");
    assert_eq!(expand_settings_str("%HOME%", &e), "%HOME%");
    let mut v = serde_json::json!({"a": ["$HOME", 1, {"$HOME": "${HOME}"}]});
    expand_settings_value(&mut v, &e);
    assert_eq!(v, serde_json::json!({"a": ["/h", 1, {"$HOME": "/h"}]}));
}

#[test]
fn spawn_expansion_empties_missing_variables() {
    let e = env(&[("T", "tok"), ("EMPTY", "")]);
    assert_eq!(expand_env_vars("Bearer $T", &e), "Bearer tok");
    assert_eq!(expand_env_vars("Bearer ${T}", &e), "Bearer tok");
    assert_eq!(expand_env_vars("[$MISSING]", &e), "[]");
    // dotenv-expand: an empty value takes the default with `-` too (not POSIX).
    assert_eq!(expand_env_vars("${MISSING:-d}|${EMPTY:-d}|${EMPTY-d}|${MISSING-d}", &e), "d|d|d|d");
}

/// Gemini CLI's `envExpansion.test.ts` (POSIX) cases, and dotenv-expand 12's rules where its
/// code decides: `+` forms, names with dots, chained and self-referencing values, escapes.
#[test]
fn spawn_expansion_as_in_gemini_clis_own_cases_and_dotenv_expand() {
    let base = [("USER", "morty"), ("HOME", "/home/morty"), ("TEMP", "C:\\Temp"), ("EMPTY", "")];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut e = env(&base);
        e.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        e
    };
    let posix = !cfg!(windows);
    let cases: Vec<(&str, Env, &str)> = vec![
        ("Hello $USER", with(&[]), "Hello morty"),
        ("Welcome to ${HOME}", with(&[]), "Welcome to /home/morty"),
        ("Value is \"$EMPTY\"", with(&[]), "Value is \"\""),
        ("No vars here", with(&[]), "No vars here"),
        ("1234", with(&[]), "1234"),
        ("", with(&[]), ""),
        ("${HOME}/bin:$PATH", with(&[("PATH", "/usr/bin")]), "/home/morty/bin:/usr/bin"),
        (
            "${USER:+set}|${EMPTY:+set}|${NOPE:+set}|${USER+set}|${EMPTY+set}",
            with(&[]),
            "set|||set|",
        ),
        ("${A.B}|${A.C}", with(&[("A.B", "dot")]), "dot|"),
        ("$W", with(&[("W", "${V}!"), ("V", "x")]), "x!"),
        ("$SELF", with(&[("SELF", "$SELF")]), ""),
        ("${LOOP:-stop}", with(&[("LOOP", "$LOOP")]), ""),
        ("\\$USER", with(&[]), "$USER"),
        // dotenv-expand replaces the first occurrence of the reference's text, which here is
        // the escaped one (`\morty and morty`); geminid replaces the reference it found.
        ("\\$USER and $USER", with(&[]), "$USER and morty"),
        ("${a-b-c}", with(&[]), "b-c"),
        ("${A:-x:+y}", with(&[]), "x:+y"),
    ];
    for (input, e, want) in cases {
        assert_eq!(expand_env_vars(input, &e), want, "{input:?}");
    }
    if posix {
        assert_eq!(expand_env_vars("Data in %TEMP%", &with(&[])), "Data in %TEMP%");
        assert_eq!(
            expand_env_vars("Missing $UNDEFINED and ${NONE} and %MISSING%", &with(&[])),
            "Missing  and  and %MISSING%"
        );
        assert_eq!(
            expand_env_vars("$USER lives in ${HOME} on %TEMP%", &with(&[])),
            "morty lives in /home/morty on %TEMP%"
        );
    }
    // A value that grows with every expansion still ends.
    let grows = with(&[("G", "x$G$G")]);
    assert!(expand_env_vars("$G", &grows).len() < 1 << 20);
}

#[test]
fn redaction_follows_the_reference_rules() {
    let on = Redaction { enabled: true, ..Redaction::default() };
    let input = env(&[
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("TERM", "xterm"),
        ("SAFE_VAR", "is-safe"),
        ("GEMINI_CLI_TOKEN", "kept-by-prefix"),
        ("GIT_CONFIG_KEY_0", "kept"),
        ("CLIENT_ID", "x"),
        ("DATABASE_URL", "x"),
        ("MY_API_TOKEN", "x"),
        ("KEYNOTE_SPEAKER", "x"),
        ("AUTHENTICATION_FLOW", "x"),
        ("PRIVATE_JET_OWNER", "x"),
        ("CERTIFIED_DIVER", "x"),
        ("INNOCENT", "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"),
        ("PROXY", "https://user:pass@example.com"),
        ("AWS", "AKIAABCDEFGHIJKLMNOP"),
        ("JWT", "eyJhbGciOi.eyJzdWIiOi.sig"),
    ]);
    let kept: Vec<_> = sanitize_environment(&input, &on).into_keys().collect();
    assert_eq!(kept, ["GEMINI_CLI_TOKEN", "GIT_CONFIG_KEY_0", "HOME", "PATH", "SAFE_VAR", "TERM"]);
    // Disabled: everything passes, unless in strict (CI) mode.
    assert_eq!(sanitize_environment(&input, &Redaction::default()), input);
    let mut ci = env(&[("GITHUB_SHA", "abc"), ("PATH", "/bin"), ("SAFE_VAR", "x")]);
    let kept: Vec<_> = sanitize_environment(&ci, &Redaction::default()).into_keys().collect();
    assert_eq!(kept, ["PATH"]);
    // User lists: allowed wins over name patterns, not over secret-looking values.
    ci.clear();
    let cfg = Redaction {
        enabled: true,
        allowed: vec!["my_token".into()],
        blocked: vec!["SAFE_VAR".into()],
    };
    let input =
        env(&[("MY_TOKEN", "plain"), ("SAFE_VAR", "x"), ("OTHER_TOKEN", "AKIAABCDEFGHIJKLMNOP")]);
    assert_eq!(sanitize_environment(&input, &cfg), env(&[("MY_TOKEN", "plain")]));
    let input = env(&[("MY_TOKEN", "AKIAABCDEFGHIJKLMNOP")]);
    assert_eq!(sanitize_environment(&input, &cfg), Env::new());
}

#[test]
fn display_hides_secret_names_values_and_auth_headers() {
    assert_eq!(display_value("DEBUG", "1"), "1");
    assert_eq!(display_value("API_KEY", "abc"), REDACTED);
    assert_eq!(display_value("Authorization", "Bearer abc"), REDACTED);
    assert_eq!(display_value("X-Upstream", "https://u:p@h"), REDACTED);
}

#[test]
fn url_passwords_never_show() {
    for (text, want) in [
        ("http://user:s3cret@host:8080/mcp", "http://[redacted]@host:8080/mcp"),
        (
            "error sending request for url (https://tok@api.example/sse?x=1): refused",
            "error sending request for url (https://[redacted]@api.example/sse?x=1): refused",
        ),
        ("mail me at a@b.c, see http://host/p@q", "mail me at a@b.c, see http://host/p@q"),
        ("no url", "no url"),
        // Query values whose names look secret (agy's `serverUrl` often carries a key).
        (
            "http://h:9/mcp?api_key=QS1&x=1&access_token=QS2#f",
            "http://h:9/mcp?api_key=[redacted]&x=1&access_token=[redacted]#f",
        ),
        (
            r#"{"url":"https://h/s?Signature=QS3&sig=QS4;Token=QS5","n":1}"#,
            r#"{"url":"https://h/s?Signature=[redacted]&sig=[redacted];Token=[redacted]","n":1}"#,
        ),
        (
            "reqwest::Error { url: \"http://a:p@h/m?key=QS6&page=2&auth=QS7\" }",
            "reqwest::Error { url: \"http://[redacted]@h/m?key=[redacted]&page=2&auth=[redacted]\" }",
        ),
        ("a=b&c=d ?q=search", "a=b&c=d ?q=search"),
        // A variable's name as written is shown; what it would hold is not.
        ("http://h/m?key=${MY_KEY}&token=$TOK", "http://h/m?key=${MY_KEY}&token=$TOK"),
        ("http://h/m?key=${MY_KEY}x&token=$", "http://h/m?key=[redacted]&token=[redacted]"),
    ] {
        assert_eq!(redact_urls(text), want, "{text}");
    }
}
