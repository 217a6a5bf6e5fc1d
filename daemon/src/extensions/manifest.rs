//! `gemini-extension.json` (COMPAT §6.1): read with file, line and column for each problem,
//! validated as Gemini CLI validates it (a name of letters, digits and dashes, a version,
//! context files inside the extension), and hydrated per workspace: `${extensionPath}`,
//! `${workspacePath}`, `${/}` and `${pathSeparator}` first, then `$VAR`, `${VAR}` and
//! `${VAR:-default}` against the extension's settings, then the session's environment.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use geminid_protocol::config::{Diagnostic, Severity};
use serde_json::Value;

use crate::config::env::{Env, expand_settings_value};
use crate::config::files::{self, FileRead, diagnostic, position};

/// The manifest's file name.
pub(crate) const FILE: &str = "gemini-extension.json";
/// The install metadata's file name.
pub(crate) const INSTALL_FILE: &str = ".gemini-extension-install.json";
/// The context file an extension has when its manifest names none.
pub(crate) const DEFAULT_CONTEXT_FILE: &str = "GEMINI.md";

/// A declared setting (`settings[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingDecl {
    /// Shown to the person.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// The variable it becomes.
    pub env_var: String,
    /// Kept in the keyring rather than `.env`.
    pub sensitive: bool,
}

/// A manifest that passed validation, as written (not hydrated).
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// `name`.
    pub name: String,
    /// `version`.
    pub version: String,
    /// `description`.
    pub description: Option<String>,
    /// The whole manifest as written: hydrated per workspace by [`hydrate`].
    pub raw: Value,
    /// Its text, for the line and column of later problems.
    pub text: String,
    /// `contextFileName`, as a list (default `GEMINI.md`), each inside the extension.
    pub context_files: Vec<String>,
    /// `excludeTools`.
    pub exclude_tools: Vec<String>,
    /// `settings`.
    pub settings: Vec<SettingDecl>,
    /// `migratedTo`.
    pub migrated_to: Option<String>,
}

/// Whether `name` is a valid extension name (`^[a-zA-Z0-9-]+$`).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Whether `rel` stays inside the folder it is relative to (no `..` above it, not absolute).
pub(crate) fn stays_inside(rel: &str) -> bool {
    let mut depth = 0i32;
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Read and validate the manifest of the extension at `dir`: the manifest and its warnings,
/// or the errors that keep the extension from loading.
pub(crate) fn read(dir: &Path) -> Result<(Manifest, Vec<Diagnostic>), Vec<Diagnostic>> {
    let path = dir.join(FILE);
    let (value, text) = match files::read_object(&path) {
        FileRead::Parsed { value, text } => (value, text),
        FileRead::Missing => {
            return Err(vec![diagnostic(
                Severity::Error,
                &path,
                None,
                format!("no {FILE}: this folder is not an extension"),
            )]);
        }
        FileRead::Failed(d) => return Err(vec![d]),
    };
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let at = |field: &[&str]| position(&text, field);
    let mut problem = |severity: Severity, field: &[&str], message: String| {
        let d = diagnostic(severity, &path, at(field), message);
        if severity == Severity::Error { errors.push(d) } else { warnings.push(d) }
    };
    let name = match value.get("name") {
        Some(Value::String(n)) if valid_name(n) => n.clone(),
        Some(Value::String(n)) => {
            problem(
                Severity::Error,
                &["name"],
                format!(
                    "invalid extension name \"{n}\": only letters (a-z, A-Z), numbers (0-9) and \
                     dashes (-) are allowed"
                ),
            );
            String::new()
        }
        _ => {
            problem(Severity::Error, &["name"], "missing \"name\" (a string)".into());
            String::new()
        }
    };
    let version = match value.get("version") {
        Some(Value::String(v)) if !v.is_empty() => v.clone(),
        _ => {
            problem(Severity::Error, &["version"], "missing \"version\" (a string)".into());
            String::new()
        }
    };
    let context_files = context_files(&value, &mut problem);
    if value.get("mcpServers").is_some_and(|v| !v.is_object()) {
        problem(Severity::Error, &["mcpServers"], "\"mcpServers\" must be an object".into());
    }
    let exclude_tools = match value.get("excludeTools") {
        None => Vec::new(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        Some(_) => {
            problem(
                Severity::Warning,
                &["excludeTools"],
                "\"excludeTools\" must be a list of tool names; ignored".into(),
            );
            Vec::new()
        }
    };
    let settings = settings(&value, &mut problem);
    if !errors.is_empty() {
        return Err(errors);
    }
    let manifest = Manifest {
        name,
        version,
        description: value.get("description").and_then(Value::as_str).map(str::to_owned),
        context_files,
        exclude_tools,
        settings,
        migrated_to: value.get("migratedTo").and_then(Value::as_str).map(str::to_owned),
        raw: value,
        text,
    };
    Ok((manifest, warnings))
}

/// The context files an extension names (`GEMINI.md` when it names none), each inside it.
fn context_files(value: &Value, problem: &mut dyn FnMut(Severity, &[&str], String)) -> Vec<String> {
    let context_files = match value.get("contextFileName") {
        None => vec![DEFAULT_CONTEXT_FILE.to_owned()],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        Some(_) => {
            problem(
                Severity::Error,
                &["contextFileName"],
                "\"contextFileName\" must be a string or a list of strings".into(),
            );
            Vec::new()
        }
    };
    for f in &context_files {
        if !stays_inside(f) {
            problem(
                Severity::Error,
                &["contextFileName"],
                format!(
                    "invalid context file path \"{f}\": context files must be within the \
                     extension directory"
                ),
            );
        }
    }
    context_files
}

/// The `settings` an extension declares; each that is not one is said and left out.
fn settings(value: &Value, problem: &mut dyn FnMut(Severity, &[&str], String)) -> Vec<SettingDecl> {
    let mut settings = Vec::new();
    for (i, s) in value.get("settings").and_then(Value::as_array).into_iter().flatten().enumerate()
    {
        let field = |k: &str| s.get(k).and_then(Value::as_str).map(str::to_owned);
        let env_ok = field("envVar").is_some_and(|v| {
            !v.is_empty()
                && !v.starts_with(|c: char| c.is_ascii_digit())
                && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        });
        match (field("name"), field("envVar")) {
            (Some(name), Some(env_var)) if env_ok => settings.push(SettingDecl {
                name,
                description: field("description").unwrap_or_default(),
                env_var,
                sensitive: s.get("sensitive").and_then(Value::as_bool).unwrap_or(false),
            }),
            _ => problem(
                Severity::Warning,
                &["settings", &i.to_string()],
                "a setting needs a \"name\" and an \"envVar\" of letters, digits and _; ignored"
                    .into(),
            ),
        }
    }
    settings
}

/// What `${...}` may name while hydrating an extension's files for one workspace.
pub(crate) fn variables(extension_path: &Path, workspace: &Path) -> BTreeMap<String, String> {
    let sep = std::path::MAIN_SEPARATOR_STR.to_owned();
    BTreeMap::from([
        ("extensionPath".to_owned(), extension_path.display().to_string()),
        ("workspacePath".to_owned(), workspace.display().to_string()),
        ("/".to_owned(), sep.clone()),
        ("pathSeparator".to_owned(), sep),
    ])
}

/// `${key}` replaced by its value where `vars` has the key; other text untouched (Gemini
/// CLI's `hydrateString`: the shortest `${...}`).
pub(crate) fn hydrate_str(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        out.push_str(&rest[..start]);
        match vars.get(&after[..end]) {
            Some(v) => out.push_str(v),
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Every string in `v` hydrated (keys of objects are left as they are).
pub(crate) fn hydrate_value(v: &mut Value, vars: &BTreeMap<String, String>) {
    match v {
        Value::String(s) => *s = hydrate_str(s, vars),
        Value::Array(items) => items.iter_mut().for_each(|i| hydrate_value(i, vars)),
        Value::Object(map) => map.values_mut().for_each(|i| hydrate_value(i, vars)),
        _ => {}
    }
}

/// A value of an extension hydrated for a workspace: the path variables, then the environment
/// variables (the extension's settings over the session's environment).
pub(crate) fn hydrate(v: &Value, vars: &BTreeMap<String, String>, env: &Env) -> Value {
    let mut v = v.clone();
    hydrate_value(&mut v, vars);
    expand_settings_value(&mut v, env);
    v
}

/// The context files of an extension at `dir` that exist, in the manifest's order.
pub(crate) fn existing_context_files(dir: &Path, m: &Manifest) -> Vec<PathBuf> {
    m.context_files.iter().map(|f| dir.join(f)).filter(|p| p.is_file()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> anyhow::Result<()> {
        std::fs::write(dir.join(FILE), text)?;
        Ok(())
    }

    #[test]
    fn a_good_manifest_reads_with_its_defaults() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        write(
            dir.path(),
            r#"{ "name": "my-ext", "version": "1.0.0", // a comment
            "excludeTools": ["run_shell_command"], "settings": [{"name": "Key", "envVar": "API_KEY", "sensitive": true}] }"#,
        )?;
        let (m, warnings) = read(dir.path()).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!((m.name.as_str(), m.version.as_str()), ("my-ext", "1.0.0"));
        assert_eq!(m.context_files, ["GEMINI.md"]);
        assert_eq!(m.exclude_tools, ["run_shell_command"]);
        assert_eq!(m.settings[0].env_var, "API_KEY");
        assert!(m.settings[0].sensitive);
        Ok(())
    }

    #[test]
    fn bad_manifests_are_refused_with_line_and_column() -> anyhow::Result<()> {
        let cases = [
            (
                "{\n  \"name\": \"bad name!\",\n  \"version\": \"1\"\n}",
                "invalid extension name \"bad name!\"",
                Some((2, 3)),
            ),
            ("{\n  \"name\": \"ok\"\n}", "missing \"version\"", None),
            (
                "{\"name\": \"ok\", \"version\": \"1\",\n \"contextFileName\": \"../../etc/passwd\"}",
                "must be within the extension directory",
                Some((2, 2)),
            ),
            (
                "{\"name\": \"ok\", \"version\": \"1\", \"contextFileName\": [\"/abs.md\"]}",
                "must be within the extension directory",
                Some((1, 32)),
            ),
            (
                "{\"name\": \"ok\", \"version\": \"1\", \"mcpServers\": []}",
                "must be an object",
                None,
            ),
            ("{\"name\": \"ok\", ", "", None),
        ];
        for (text, want, pos) in cases {
            let dir = tempfile::tempdir()?;
            write(dir.path(), text)?;
            let Err(errors) = read(dir.path()) else { panic!("{text} was accepted") };
            assert!(errors.iter().any(|e| e.message.contains(want)), "{text}: {errors:?}");
            if let Some((line, column)) = pos {
                assert_eq!(
                    (errors[0].line, errors[0].column),
                    (Some(line), Some(column)),
                    "{text}"
                );
            }
        }
        let dir = tempfile::tempdir()?;
        let Err(errors) = read(dir.path()) else { panic!("an empty folder was accepted") };
        assert!(errors[0].message.contains("not an extension"));
        Ok(())
    }

    #[test]
    fn names_and_paths() {
        for (n, ok) in [("a-b-9", true), ("A", true), ("", false), ("a_b", false), ("a.b", false)] {
            assert_eq!(valid_name(n), ok, "{n}");
        }
        for (p, ok) in [
            ("GEMINI.md", true),
            ("docs/../GEMINI.md", true),
            ("./a", true),
            ("../a", false),
            ("a/../../b", false),
            ("/etc/passwd", false),
        ] {
            assert_eq!(stays_inside(p), ok, "{p}");
        }
    }

    #[test]
    fn hydration_as_gemini_cli_hydrates() {
        // Gemini CLI's variables.test.ts and extension-manager-hydration cases, as data.
        let vars = variables(Path::new("/ext"), Path::new("/ws"));
        for (input, want) in [
            ("${extensionPath}${/}run.js", format!("/ext{}run.js", std::path::MAIN_SEPARATOR)),
            ("${workspacePath}", "/ws".to_owned()),
            ("a ${unknown} b", "a ${unknown} b".to_owned()),
            ("${extensionPath}${pathSeparator}x", format!("/ext{}x", std::path::MAIN_SEPARATOR)),
            ("no vars", "no vars".to_owned()),
            ("${", "${".to_owned()),
        ] {
            assert_eq!(hydrate_str(input, &vars), want, "{input}");
        }
        let env = Env::from([("API_KEY".to_owned(), "k1".to_owned())]);
        let v = serde_json::json!({"command": "${extensionPath}/s", "env": {"K": "$API_KEY", "D": "${NOPE:-d}", "U": "$UNSET"}});
        assert_eq!(
            hydrate(&v, &vars, &env),
            serde_json::json!({"command": "/ext/s", "env": {"K": "k1", "D": "d", "U": "$UNSET"}})
        );
    }
}
