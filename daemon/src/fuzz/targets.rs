//! The fuzz targets: one test per parser of untrusted input. Each must return (an error is
//! fine) and never panic or hang, whatever the bytes.

use std::path::Path;

use serde_json::json;

use super::fuzz;

fn text(input: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(input)
}

#[test]
fn settings_jsonc() {
    fuzz(
        "settings_jsonc",
        &[b"{\"a\": 1}", b"{\n  // c\n  \"mcpServers\": {\"x\": {\"command\": \"y\",},},\n}\n"],
        |i| {
            let _ = crate::config::files::parse_object(&text(i));
        },
    );
}

#[test]
fn env_expansion() {
    let env: crate::config::env::Env =
        [("A", "1"), ("B", "$A$A"), ("SELF", "$SELF"), ("C", "${B}x")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
    fuzz("env_expansion", &[b"$A ${B} ${C:-d} $UNSET ${SELF}", b"${A:-${B}}$$"], |i| {
        let s = text(i);
        let _ = crate::config::env::expand_settings_str(&s, &env);
        let _ = crate::config::env::expand_env_vars(&s, &env);
        let _ = crate::config::env::redact_urls(&s);
    });
}

#[test]
fn policy_toml() {
    fuzz(
        "policy_toml",
        &[b"[[rule]]\ntoolName = \"x\"\ndecision = \"allow\"\npriority = 1\nargsPattern = \"a.*b\"\n"],
        |i| {
            let _ = crate::policy::load::load("f.toml", &text(i), crate::policy::Tier::User);
        },
    );
}

#[test]
fn hook_output() {
    fuzz(
        "hook_output",
        &[b"{\"decision\": \"block\", \"reason\": \"r\"}", b"\"{\\\"a\\\":1}\"", b"plain"],
        |i| {
            let s = text(i);
            for exit in [0, 1, 2] {
                let _ = crate::hooks::run::interpret(&s, "", exit);
                let _ = crate::hooks::run::interpret("", &s, exit);
            }
        },
    );
}

#[test]
fn skill_frontmatter() {
    let source = geminid_protocol::skills::SkillSource {
        scope: geminid_protocol::skills::SkillScope::User,
        extension: None,
        server: None,
        dir: "/d".into(),
    };
    fuzz(
        "skill_frontmatter",
        &[
            b"---\nname: x\ndescription: a: b\n---\nBody\n",
            b"---\nname: [a, {b: c}]\ntools: [x]\n---\n",
        ],
        |i| {
            let s = text(i);
            let _ = crate::skills::load::parse_skill(Path::new("/d/SKILL.md"), &s);
            let _ = crate::skills::agents::parse(Path::new("/d/a.md"), &s, &source);
        },
    );
}

#[test]
fn extension_manifest() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("gemini-extension.json");
    fuzz(
        "extension_manifest",
        &[br#"{"name": "x", "version": "1", "mcpServers": {"s": {"command": "${extensionPath}${/}s"}}, "contextFileName": ["A.md"]}"#],
        |i| {
            if std::fs::write(&file, i).is_ok() {
                let _ = crate::extensions::manifest::read(dir.path());
            }
        },
    );
}

#[test]
fn command_toml_and_injections() {
    fuzz(
        "command_toml",
        &[b"description = \"d\"\nprompt = \"\"\"\nA !{echo {{args}}} @{f.txt} {{args}}\n\"\"\"\n"],
        |i| {
            let s = text(i);
            let _ = crate::commands::load::parse(Path::new("/c"), Path::new("/c/x.toml"), &s);
            let _ = crate::commands::injections(&s, "!{");
            let _ = crate::commands::injections(&s, "@{");
            let _ = crate::commands::check_braces(&s);
        },
    );
}

#[test]
fn prompt_arguments() {
    let args = vec![
        crate::catalog::prompts::Arg { name: "a".into(), required: true },
        crate::catalog::prompts::Arg { name: "b".into(), required: false },
    ];
    fuzz("prompt_arguments", &[b"--a=1 --b=\"two words\" three", b"'x' \"y\\\"z\""], |i| {
        let _ = crate::catalog::prompts::parse_args(&text(i), &args);
    });
}

#[test]
fn tool_discovery() {
    fuzz(
        "tool_discovery",
        &[b"python3 'tools.py' --list \"a b\" # c", br#"[{"functionDeclarations": [{"name": "x", "parametersJsonSchema": {"type": "object"}}]}]"#],
        |i| {
            let s = text(i);
            let _ = crate::discovered::argv::split(&s);
            let _ = crate::discovered::decls::parse(&s);
        },
    );
}

#[test]
fn stdio_framing() {
    use rmcp::transport::Transport;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let rt = rt.unwrap_or_else(|e| panic!("{e}"));
    fuzz(
        "stdio_framing",
        &[b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\nnot json\n"],
        |i| {
            let _ = crate::mcp::stdio::top_level_id(i);
            rt.block_on(async {
                let mut t = crate::mcp::stdio::StdioTransport::with_max_line(i, tokio::io::sink(), 4096);
                // Every message the bytes hold, until the end.
                for _ in 0..1000 {
                    if t.receive().await.is_none() {
                        break;
                    }
                }
            });
        },
    );
}

#[test]
fn sse_events() {
    use futures::StreamExt;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let rt = rt.unwrap_or_else(|e| panic!("{e}"));
    fuzz(
        "sse_events",
        &[b"event: endpoint\ndata: /message?sessionId=1\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n: comment\r\n\r\n"],
        |i| {
            rt.block_on(async {
                let chunks: Vec<Result<bytes::Bytes, std::io::Error>> =
                    i.chunks(7).map(|c| Ok(bytes::Bytes::copy_from_slice(c))).collect();
                let mut events = sse_stream::SseStream::from_bytes_stream(futures::stream::iter(chunks));
                while let Some(event) = events.next().await {
                    let Ok(event) = event else { break };
                    if let Some(data) = event.data {
                        let _ = serde_json::from_str::<rmcp::model::ServerJsonRpcMessage>(&data);
                    }
                }
            });
        },
    );
}

#[test]
fn jsonrpc_requests() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let rt = rt.unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let home = dir.path().to_path_buf();
    let paths =
        crate::config::ConfigPaths::from_env(|k| (k == "HOME").then(|| home.clone().into()));
    let paths = paths.unwrap_or_else(|e| panic!("{e}"));
    let info = crate::core::DaemonInfo {
        socket: dir.path().join("s"),
        data_dir: dir.path().to_path_buf(),
        limits: geminid_protocol::daemon::Limits {
            max_connections: 1,
            max_message_size: 1 << 20,
            subscriber_buffer: 8,
        },
        mcp: crate::mcp::McpOptions::default(),
        secrets_file_only: true,
        confirm_timeout: std::time::Duration::from_millis(10),
        custom_tools: crate::discovered::Options::default(),
        warm_workspaces: 0,
        tool_pinning: Default::default(),
        artifact_pinning: Default::default(),
    };
    let methods = rt.block_on(async {
        let store = crate::store::Store::temporary().unwrap_or_else(|e| panic!("{e}"));
        let core = crate::core::Core::new(store, info, crate::config::Loader::new(paths));
        crate::rpc::methods(core).unwrap_or_else(|e| panic!("{e}"))
    });
    let names: Vec<String> = methods.method_names().map(str::to_owned).collect();
    let seeds: Vec<Vec<u8>> = names
        .iter()
        // Nothing that stops the daemon, waits for a person or reaches out.
        .filter(|m| !["daemon/shutdown", "auth/begin", "auth/finish"].contains(&m.as_str()))
        .take(40)
        .map(|m| {
            json!({"jsonrpc": "2.0", "id": 1, "method": m, "params": {"session": "s", "name": "x"}})
                .to_string()
                .into_bytes()
        })
        .collect();
    let seed_refs: Vec<&[u8]> = seeds.iter().map(Vec::as_slice).collect();
    fuzz("jsonrpc_requests", &seed_refs, |i| {
        let request = text(i);
        // Only what could not stop the daemon or wait on a person: the rest is the
        // end-to-end tests' (a fuzzed `daemon/shutdown` would end this run).
        if [
            "shutdown",
            "auth/",
            "confirm",
            "asks/",
            "extensions/install",
            "extensions/update",
            "extensions/link",
            "skills/install",
            "skills/link",
            "mcp/add",
            "mcp/remove",
            "trust/set",
            "call",
            "expand",
            "hooks/fire",
            "subscribe",
            "follow",
            "listen",
            "refresh",
            "start",
            "restart",
            "derive",
            "serve",
        ]
        .iter()
        .any(|m| request.contains(m))
        {
            return;
        }
        let _ = rt.block_on(async {
            tokio::time::timeout(
                std::time::Duration::from_secs(1),
                methods.raw_json_request(&request, 1),
            )
            .await
        });
    });
}
