//! The registry and calls with real scripts: one discovery per spec however many ask at once,
//! a new one when the spec changes or on refresh, and every way a call can end.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;

fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn env() -> Arc<Env> {
    let mut env = Env::new();
    env.insert("PATH".into(), std::env::var("PATH").unwrap_or_default());
    Arc::new(env)
}

fn registry(options: Options) -> Registry {
    Registry::new(options, Arc::new(EventBus::new(16)))
}

fn spec(dir: &Path, discovery: String, call: Option<String>) -> Spec {
    Spec { discovery, call, cwd: dir.to_path_buf(), env: env() }
}

const DECLS: &str = r#"echo run >> runs; echo '[{"name": "echo", "description": "Echoes.", "parametersJsonSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}]'"#;

#[tokio::test]
async fn one_run_per_spec_however_many_ask_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let discover = script(dir.path(), "discover", &format!("sleep 0.2; {DECLS}"));
    let r = registry(Options::default());
    let s = spec(dir.path(), discover, None);
    let asks = (0..8).map(|i| r.ensure(if i % 2 == 0 { "a" } else { "b" }, Some(s.clone())));
    let found = futures::future::join_all(asks).await;
    let generations: std::collections::BTreeSet<u64> =
        found.iter().map(|d| d.as_ref().unwrap().generation).collect();
    assert_eq!(generations.len(), 1);
    assert_eq!(std::fs::read_to_string(dir.path().join("runs")).unwrap(), "run\n");
    let d = r.current("a").unwrap();
    assert_eq!(d.tools[0].name, "echo");
    assert!(d.tools[0].description().starts_with("Echoes.\n\nThis tool was discovered"));
    assert!(d.tools[0].description().contains(&format!("`{}` on project root", s.discovery)));

    // A refresh runs it again, for every session with that spec; a changed spec runs anew.
    let again = r.refresh("a", Some(s.clone())).await.unwrap();
    assert_ne!(again.generation, d.generation);
    assert_eq!(r.ensure("b", Some(s.clone())).await.unwrap().generation, again.generation);
    let other = Spec { call: Some("/bin/true".into()), ..s.clone() };
    assert_ne!(r.ensure("b", Some(other)).await.unwrap().generation, again.generation);
    assert_eq!(std::fs::read_to_string(dir.path().join("runs")).unwrap(), "run\nrun\nrun\n");
    // No discovery command: no custom tools.
    assert!(r.ensure("b", None).await.is_none() && r.current("b").is_none());
}

#[tokio::test]
async fn a_discovery_that_fails_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The default time limit (a minute) for the cases that end by themselves, however busy the
    // machine; a short one for the one that never ends.
    let hangs = Options { discovery_timeout: Duration::from_secs(2), ..Options::default() };
    let cases = [
        (script(d, "exit1", "echo broken >&2; exit 1"), "exited with code 1; it wrote: broken"),
        (script(d, "hang", "sleep 600"), "did not finish within 2s"),
        (script(d, "huge", "head -c 20971520 /dev/zero | tr '\\0' x"), "passed the limit"),
        (script(d, "object", r#"echo '{"name": "x"}'"#), "did not print a JSON array"),
        (script(d, "text", "echo hello"), "not JSON"),
        (script(d, "killed", "kill -9 $$"), "killed by SIGKILL"),
        ("/nonexistent/discover".to_owned(), "could not start"),
        ("discover | jq".to_owned(), "shell operator"),
    ];
    let (r, hanging) = (registry(Options::default()), registry(hangs));
    for (cmd, says) in cases {
        let r = if cmd.ends_with("hang") { &hanging } else { &r };
        let found = r.ensure("s", Some(spec(d, cmd.clone(), None))).await.unwrap();
        let e = found.error.clone().unwrap_or_default();
        assert!(e.contains(says), "{cmd}: {e}");
        assert!(found.tools.is_empty(), "{cmd}");
        let said: Vec<String> = found.diagnostics().collect();
        assert!(said[0].contains("gemctl tools refresh"), "{said:?}");
    }
    // A declaration without a name is skipped and said; the others load.
    let mixed = script(d, "mixed", r#"echo '[{"description": "nameless"}, {"name": "ok"}]'"#);
    let found = r.ensure("s", Some(spec(d, mixed, None))).await.unwrap();
    assert_eq!((found.tools.len(), found.error.as_deref()), (1, None));
    assert!(found.problems[0].contains("has no `name`"), "{:?}", found.problems);
}

async fn call(dir: &Path, body: &str, args: Value, options: Options) -> (bool, String) {
    let discover = script(dir, "discover", DECLS);
    let call = script(dir, "call", body);
    let r = registry(options);
    let d = r.ensure("s", Some(spec(dir, discover, Some(call)))).await.unwrap();
    let result = d.call("echo", args.as_object()).await;
    (result["isError"] == true, result["content"][0]["text"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn a_call_gets_its_name_and_arguments_and_ends_as_gemini_cli_says() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = Options::default();
    // Success: exit 0 and nothing on stderr; the tool's own name is the argument, the
    // arguments JSON on stdin, the workspace the directory.
    let (err, text) = call(d, r#"printf '%s ' "$1" "$(pwd)"; cat"#, json!({"text": "hi"}), o).await;
    assert!(!err, "{text}");
    let cwd = d.canonicalize().unwrap();
    assert_eq!(text, format!("echo {} {{\"text\":\"hi\"}}", cwd.display()));

    let (err, text) = call(d, "echo out; echo warn >&2", json!({}), o).await;
    assert!(err);
    assert_eq!(text, "Stdout: out\n\nStderr: warn\n\nError: (none)\nExit Code: 0\nSignal: (none)");

    let (err, text) = call(d, "exit 1", json!({}), o).await;
    assert!(err);
    assert_eq!(
        text,
        "Stdout: (empty)\nStderr: (empty)\nError: (none)\nExit Code: 1\nSignal: (none)"
    );

    let (err, text) = call(d, "kill -9 $$", json!({}), o).await;
    assert!(err);
    assert!(text.ends_with("Exit Code: (none)\nSignal: SIGKILL"), "{text}");

    // Long enough for a busy machine's shell to start its child and say its pid.
    let quick = Options { call_timeout: Duration::from_secs(3), ..o };
    let pid_file = d.join("pid");
    let body = format!("sleep 60 & echo $! > {}; wait", pid_file.display());
    let (err, text) = call(d, &body, json!({}), quick).await;
    assert!(err);
    assert!(text.contains("Error: stopped after 3s"), "{text}");
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_owned();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().unwrap_or("").trim_start().chars().next();
    assert!(matches!(state, None | Some('Z')), "the call's child outlived it: {stat}");
}

#[tokio::test]
async fn a_call_without_a_call_command_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let discover = script(dir.path(), "discover", DECLS);
    let r = registry(Options::default());
    let d = r.ensure("s", Some(spec(dir.path(), discover, None))).await.unwrap();
    let result = d.call("echo", None).await;
    assert_eq!(result["isError"], true);
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Error: tools.callCommand is not set"), "{text}");
}

/// Gemini CLI's tool-registry cases, as data: a failing call command's report, and a declared
/// schema kept whole with `wait_for_previous` added.
#[tokio::test]
async fn gemini_cli_tool_registry_cases() {
    let dir = tempfile::tempdir().unwrap();
    let (err, text) =
        call(dir.path(), "echo 'Something went wrong' >&2; exit 1", json!({}), Options::default())
            .await;
    assert!(err);
    assert!(text.contains("Stderr: Something went wrong"), "{text}");
    assert!(text.contains("Exit Code: 1"), "{text}");

    let declared = json!({
        "name": "tool-with-bad-format",
        "description": "A tool with an invalid format property",
        "parametersJsonSchema": {
            "type": "object",
            "properties": { "some_string": { "type": "string", "format": "uuid" } }
        }
    });
    let (decls, _) = decls::parse(&json!([declared]).to_string()).unwrap();
    let schema = crate::naming::with_wait_for_previous(decls[0].parameters.clone());
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {
                "some_string": { "type": "string", "format": "uuid" },
                "wait_for_previous": {
                    "type": "boolean",
                    "description": "Set to true to wait for all previously requested tools in this turn to complete before starting. Set to false (or omit) to run in parallel. Use true when this tool depends on the output of previous tools."
                }
            }
        })
    );
}
