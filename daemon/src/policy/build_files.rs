//! Gemini CLI's build file protection (0.61, `PolicyEngine.check`): a call the rules allow
//! that edits a build file is asked about instead (denied, headless), whatever the mode, yolo
//! too. A call edits when its tool is `replace` or `write_file`, or its name has a word of
//! editing (`write`, `edit`, `replace`, `patch`, `update`, `create`, `append`, `save`: an MCP
//! tool's too); its file is the argument `file_path`, `path`, `filePath` or `file`; a build
//! file is one of Gemini CLI's names (`Makefile`, `package.json`, `Cargo.toml`, `Dockerfile`,
//! ...), a `Dockerfile.*` or `Containerfile.*`, or ends in `.bzl`, `.bazel`, `.bzlmod`, `.mk`,
//! `.cmake`. Gemini CLI looks at the name a link resolves to; geminid at the name given.

use std::sync::OnceLock;

use super::rule::{Origin, Rule};
use super::{Decision, Tier, ToolCall};

const NAMES: &[&str] = &[
    "BUILD",
    "BUILD.bazel",
    "WORKSPACE",
    "WORKSPACE.bazel",
    "MODULE.bazel",
    ".bazelrc",
    ".blazerc",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "CMakeLists.txt",
    "package.json",
    "package-lock.json",
    "pnpm-lock.yaml",
    "yarn.lock",
    "bun.lockb",
    "setup.py",
    "setup.cfg",
    "pyproject.toml",
    "go.mod",
    "go.sum",
    "Cargo.toml",
    "Cargo.lock",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "settings.gradle.kts",
    "Dockerfile",
    "Containerfile",
];
const EXTENSIONS: &[&str] = &["bzl", "bazel", "bzlmod", "mk", "cmake"];
const EDIT_WORDS: &[&str] =
    &["write", "edit", "replace", "patch", "update", "create", "append", "save"];

/// The file's name is a build file's.
fn is_build_file(path: &str) -> bool {
    let clean = path.replace('\0', "").replace('\\', "/");
    let name = clean.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    if NAMES.contains(&name)
        || name.starts_with("Dockerfile.")
        || name.starts_with("Containerfile.")
    {
        return true;
    }
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => {
            EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
        }
        _ => false,
    }
}

/// The call edits a build file.
pub(crate) fn protects(call: &ToolCall<'_>) -> bool {
    let edits = matches!(call.name, "replace" | "write_file")
        || call
            .name
            .to_ascii_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| EDIT_WORDS.contains(&word));
    if !edits {
        return false;
    }
    let Some(args) = call.args else { return false };
    let target = ["file_path", "path", "filePath", "file"].iter().find_map(|k| args.get(*k));
    target.and_then(|v| v.as_str()).is_some_and(|p| is_build_file(p.trim()))
}

/// The rule said to decide a protected call: asked about, or denied when nobody can be asked.
pub(crate) fn rule(interactive: bool) -> &'static Rule {
    static RULES: OnceLock<[Rule; 2]> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        let one = |decision| {
            let origin = Origin {
                file: "(built in) build file protection".to_owned(),
                line: None,
                tier: Tier::Default,
                priority: 999,
            };
            let mut rule = Rule::new("*".to_owned(), decision, origin);
            rule.deny_message = Some(
                "it edits a build file, which Gemini CLI's build file protection leaves to the \
                 person to confirm"
                    .to_owned(),
            );
            rule
        };
        [one(Decision::AskUser), one(Decision::Deny)]
    });
    &rules[usize::from(!interactive)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(name: &'a str, args: &'a serde_json::Value) -> ToolCall<'a> {
        ToolCall { name, server: None, args: args.as_object(), annotations: None, subagent: None }
    }

    #[test]
    fn edits_of_build_files_are_protected() {
        for (name, args, want) in [
            ("write_file", serde_json::json!({"file_path": "/w/package.json"}), true),
            ("replace", serde_json::json!({"file_path": "sub/Makefile"}), true),
            ("write_file", serde_json::json!({"file_path": "Dockerfile.dev"}), true),
            ("write_file", serde_json::json!({"file_path": "rules.BZL"}), true),
            ("mcp_gh_create_file", serde_json::json!({"path": "Cargo.toml"}), true),
            ("mcp_fs_save", serde_json::json!({"filePath": "a\\b\\go.mod"}), true),
            ("write_file", serde_json::json!({"file_path": "src/main.rs"}), false),
            ("read_file", serde_json::json!({"file_path": "Makefile"}), false),
            ("mcp_fx_echo", serde_json::json!({"file": "Makefile"}), false),
            ("write_file", serde_json::json!({"file_path": ".mk"}), false),
            ("run_shell_command", serde_json::json!({"command": "vi Makefile"}), false),
        ] {
            assert_eq!(protects(&call(name, &args)), want, "{name} {args}");
        }
        assert_eq!(rule(true).decision, Decision::AskUser);
        assert_eq!(rule(false).decision, Decision::Deny);
    }
}
