//! `gemctl extensions new PATH [TEMPLATE]`: a starter extension that loads as it is, one per
//! kind of contribution. The folder's name is the extension's name.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::output;
use crate::output::outln;

/// The templates, each a list of (relative path, contents); `{name}` is replaced.
const TEMPLATES: &[(&str, &[(&str, &str)])] = &[
    (
        "context",
        &[
            (
                "gemini-extension.json",
                "{\n  \"name\": \"{name}\",\n  \"version\": \"1.0.0\",\n  \"contextFileName\": \"GEMINI.md\"\n}\n",
            ),
            ("GEMINI.md", "# {name}\n\nInstructions this extension adds to the model's context.\n"),
        ],
    ),
    (
        "custom-commands",
        &[
            ("gemini-extension.json", "{\n  \"name\": \"{name}\",\n  \"version\": \"1.0.0\"\n}\n"),
            (
                "commands/{name}/summarize.toml",
                "description = \"Summarize a file in three bullet points\"\nprompt = \"\"\"\nSummarize the following in three bullet points: {{args}}\n\"\"\"\n",
            ),
        ],
    ),
    (
        "exclude-tools",
        &[(
            "gemini-extension.json",
            "{\n  \"name\": \"{name}\",\n  \"version\": \"1.0.0\",\n  \"excludeTools\": [\"run_shell_command(rm -rf)\"]\n}\n",
        )],
    ),
    (
        "hooks",
        &[
            ("gemini-extension.json", "{\n  \"name\": \"{name}\",\n  \"version\": \"1.0.0\"\n}\n"),
            (
                "hooks/hooks.json",
                "{\n  \"hooks\": {\n    \"SessionStart\": [\n      {\n        \"hooks\": [\n          { \"type\": \"command\", \"name\": \"greet\", \"command\": \"sh ${extensionPath}${/}hooks${/}greet.sh\" }\n        ]\n      }\n    ]\n  }\n}\n",
            ),
            (
                "hooks/greet.sh",
                "#!/bin/sh\n# A SessionStart hook: adds a line to the session's context.\necho '{\"hookSpecificOutput\": {\"additionalContext\": \"The {name} extension is loaded.\"}}'\n",
            ),
        ],
    ),
    (
        "mcp-server",
        &[
            (
                "gemini-extension.json",
                "{\n  \"name\": \"{name}\",\n  \"version\": \"1.0.0\",\n  \"mcpServers\": {\n    \"{name}\": {\n      \"command\": \"python3\",\n      \"args\": [\"${extensionPath}${/}server.py\"]\n    }\n  }\n}\n",
            ),
            (
                "server.py",
                r#"#!/usr/bin/env python3
"""A minimal MCP server over stdio, with no dependencies: one tool, `add`."""
import json
import sys

TOOLS = [{
    "name": "add",
    "description": "Add two numbers",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
}]


def answer(request):
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "{name}", "version": "1.0.0"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params.get("name") == "add":
        args = params.get("arguments") or {}
        total = args.get("a", 0) + args.get("b", 0)
        return {"content": [{"type": "text", "text": str(total)}]}
    raise LookupError(method)


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    try:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
    except LookupError as e:
        reply = {"jsonrpc": "2.0", "id": request["id"],
                 "error": {"code": -32601, "message": f"unknown method {e}"}}
    print(json.dumps(reply), flush=True)
"#,
            ),
        ],
    ),
    (
        "policies",
        &[
            ("gemini-extension.json", "{\n  \"name\": \"{name}\",\n  \"version\": \"1.0.0\"\n}\n"),
            (
                "policies/{name}.toml",
                "# Extension policies are tier 2: ask_user and deny rules apply; allow rules are dropped.\n[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"git push\"\ndecision = \"ask_user\"\npriority = 100\n",
            ),
        ],
    ),
    (
        "skills",
        &[
            ("gemini-extension.json", "{\n  \"name\": \"{name}\",\n  \"version\": \"1.0.0\"\n}\n"),
            (
                "skills/{name}/SKILL.md",
                "---\nname: {name}\ndescription: What this skill does and when the model should use it.\n---\n\n# {name}\n\nThe steps to follow.\n",
            ),
        ],
    ),
];

/// The template names.
pub fn names() -> Vec<&'static str> {
    TEMPLATES.iter().map(|(n, _)| *n).collect()
}

/// Write `template` (default `context`) into the new folder `path`.
pub fn create(path: &Path, template: Option<&str>) -> anyhow::Result<()> {
    let template = template.unwrap_or("context");
    let Some((_, files)) = TEMPLATES.iter().find(|(n, _)| *n == template) else {
        bail!("no template {template:?}: {}", names().join(", "));
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        .with_context(|| {
            format!(
                "{}: the folder's name is the extension's, and may hold only letters, digits and \
                 dashes",
                path.display()
            )
        })?;
    if path.exists() {
        bail!("{} already exists: pick a new folder", path.display());
    }
    for (rel, contents) in *files {
        let file = path.join(rel.replace("{name}", &name));
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&file, contents.replace("{name}", &name))
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(())
}

/// `gemctl extensions new`: no daemon needed.
pub fn new_here(path: &Path, template: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    create(path, template)?;
    if json {
        output::json(&serde_json::json!({ "path": path.display().to_string() }))?;
    } else {
        outln!(
            "Created an extension in {}. Try it with `gemctl extensions link {}`.",
            path.display(),
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
