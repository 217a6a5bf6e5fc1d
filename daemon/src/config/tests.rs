use super::*;
use pretty_assertions::assert_eq;
use serde_json::json;

struct Home {
    dir: tempfile::TempDir,
    paths: ConfigPaths,
    ws: PathBuf,
}

impl Home {
    fn new() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let root = dir.path();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join(".gemini"))?;
        std::fs::create_dir_all(root.join("home/.gemini"))?;
        std::fs::create_dir_all(root.join("etc"))?;
        let var = |k: &str| match k {
            "HOME" => Some(root.join("home").into_os_string()),
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH" => {
                Some(root.join("etc/settings.json").into_os_string())
            }
            _ => None,
        };
        let paths = ConfigPaths::from_env(var)?;
        Ok(Self { dir, paths, ws })
    }

    fn write(&self, path: &Path, value: &str) -> anyhow::Result<()> {
        std::fs::write(path, value)?;
        Ok(())
    }

    fn workspace_file(&self) -> PathBuf {
        self.ws.join(".gemini/settings.json")
    }

    fn trust_workspace(&self) -> anyhow::Result<()> {
        let rules = json!({ self.ws.display().to_string(): "TRUST_FOLDER" });
        self.write(&self.paths.trusted_folders, &rules.to_string())
    }
}

fn servers(e: &Effective) -> Vec<(String, Scope, Option<BlockReason>)> {
    e.public.mcp_servers.iter().map(|s| (s.name.clone(), s.scope, s.blocked)).collect()
}

#[test]
fn paths_follow_the_environment() -> anyhow::Result<()> {
    let h = Home::new()?;
    assert_eq!(h.paths.user, h.dir.path().join("home/.gemini/settings.json"));
    assert_eq!(h.paths.system_defaults, h.dir.path().join("etc/system-defaults.json"));
    assert_eq!(h.paths.trusted_folders, h.dir.path().join("home/.gemini/trustedFolders.json"));
    assert_eq!(h.paths.workspace_settings(&h.paths.home), None, "home is never a workspace");
    let gh = ConfigPaths::from_env(|k| match k {
        "HOME" => Some("/h".into()),
        "GEMINI_CLI_HOME" => Some("/g".into()),
        _ => None,
    })?;
    assert_eq!(gh.user, PathBuf::from("/g/.gemini/settings.json"));
    assert_eq!(gh.system, PathBuf::from("/etc/gemini-cli/settings.json"));
    Ok(())
}

#[test]
fn scopes_merge_in_order_and_servers_come_whole_from_the_highest() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    h.write(&h.paths.system_defaults, r#"{"ui": {"theme": "default", "x": 1}}"#)?;
    h.write(&h.paths.user, r#"{ // user
        "ui": {"theme": "dark"},
        "mcpServers": {"shared": {"command": "user-cmd", "timeout": 5}, "mine": {"command": "m"}}}"#)?;
    h.write(
        &h.workspace_file(),
        r#"{"mcpServers": {"shared": {"url": "http://127.0.0.1:9/mcp"}}}"#,
    )?;
    h.write(&h.paths.system, r#"{"ui": {"theme": "admin"}}"#)?;
    let e = Loader::new(h.paths.clone()).effective(&h.ws, &Env::new(), &BTreeSet::new());
    assert!(e.public.trust.trusted);
    assert_eq!(e.public.settings["ui"], json!({"theme": "admin", "x": 1}));
    assert_eq!(
        servers(&e),
        // The workspace's entry in the place of the user's (settings order, not names').
        [("shared".into(), Scope::Workspace, None), ("mine".into(), Scope::User, None)]
    );
    let shared = &e.servers["shared"].config;
    assert_eq!(
        (shared.command.as_deref(), shared.timeout),
        (None, None),
        "no field merge across scopes"
    );
    assert_eq!(e.public.diagnostics, vec![]);
    Ok(())
}

#[test]
fn an_untrusted_workspace_loses_its_settings_and_every_server() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.write(&h.paths.user, r#"{"mcpServers": {"u": {"command": "u"}}}"#)?;
    h.write(
        &h.workspace_file(),
        r#"{"mcpServers": {"w": {"command": "w"}}, "ui": {"theme": "w"}}"#,
    )?;
    let loader = Loader::new(h.paths.clone());
    let e = loader.effective(&h.ws, &Env::new(), &BTreeSet::new());
    assert!(!e.public.trust.trusted);
    // Every server is listed (the workspace's too, as Gemini CLI lists them) and none may run.
    assert_eq!(
        servers(&e),
        [
            ("u".into(), Scope::User, Some(BlockReason::UntrustedFolder)),
            ("w".into(), Scope::Workspace, Some(BlockReason::UntrustedFolder))
        ]
    );
    assert!(e.servers.values().all(|s| s.blocked == Some(BlockReason::UntrustedFolder)));
    assert_eq!(e.public.settings.get("ui"), None);
    let ws_file = e.public.files.iter().find(|f| f.scope == Scope::Workspace).cloned();
    assert_eq!(ws_file.map(|f| (f.exists, f.applied)), Some((true, false)));
    // The session's environment can trust it (headless use), as can disabling folder trust.
    let env: Env = [("GEMINI_CLI_TRUST_WORKSPACE".to_owned(), "true".to_owned())].into();
    assert_eq!(loader.effective(&h.ws, &env, &BTreeSet::new()).servers.len(), 2);
    h.write(&h.paths.user, r#"{"security": {"folderTrust": {"enabled": false}}}"#)?;
    assert!(loader.effective(&h.ws, &Env::new(), &BTreeSet::new()).public.trust.trusted);
    Ok(())
}

#[test]
fn session_env_expands_and_secrets_are_redacted_in_the_view() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    h.write(
        &h.paths.user,
        r#"{"mcpServers": {"s": {
        "command": "$TOOLS/bin/server", "args": ["${MODE:-fast}", "$UNSET"],
        "env": {"API_TOKEN": "$TOKEN", "DEBUG": "1"},
        "headers": {"Authorization": "Bearer $TOKEN"}}}}"#,
    )?;
    let env: Env = [("TOOLS", "/opt/t"), ("TOKEN", "sekrit")]
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    let e = Loader::new(h.paths.clone()).effective(&h.ws, &env, &BTreeSet::new());
    let c = &e.servers["s"].config;
    assert_eq!(c.command.as_deref(), Some("/opt/t/bin/server"));
    assert_eq!(c.args.clone().unwrap_or_default(), ["fast", "$UNSET"]);
    assert_eq!(c.env.as_ref().and_then(|e| e.get("API_TOKEN")).map(String::as_str), Some("sekrit"));
    let shown = &e.public.mcp_servers[0].config;
    assert_eq!(shown["env"], json!({"API_TOKEN": env::REDACTED, "DEBUG": "1"}));
    assert_eq!(shown["headers"]["Authorization"], env::REDACTED);
    assert!(!serde_json::to_string(&e.public)?.contains("sekrit"));
    Ok(())
}

#[test]
fn diagnostics_name_file_line_and_field() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    h.write(&h.paths.user, "{\n  \"mcpServers\": {\n    \"bad\": { \"command\": 5 },\n    \"odd\": { \"command\": \"x\", \"colour\": 1 },\n    \"none\": {}\n  }\n}")?;
    h.write(&h.workspace_file(), "{ \"ui\": ")?;
    let e = Loader::new(h.paths.clone()).effective(&h.ws, &Env::new(), &BTreeSet::new());
    let d: Vec<_> = e
        .public
        .diagnostics
        .iter()
        .map(|d| {
            (
                d.severity,
                d.file.rsplit('/').next().unwrap_or_default().to_owned(),
                d.line,
                d.message.clone(),
            )
        })
        .collect();
    let find = |needle: &str| d.iter().find(|x| x.3.contains(needle)).cloned();
    let bad = find("\"bad\"").unwrap_or_else(|| panic!("{d:?}"));
    assert_eq!((bad.0, bad.2), (Severity::Error, Some(3)));
    assert!(bad.3.contains("field \"command\": invalid type: integer"), "{}", bad.3);
    let odd = find("colour").unwrap_or_else(|| panic!("{d:?}"));
    assert_eq!((odd.0, odd.2), (Severity::Warning, Some(4)));
    assert_eq!(find("\"none\"").map(|x| (x.0, x.2)), Some((Severity::Error, Some(5))));
    let parse = find("invalid JSON").unwrap_or_else(|| panic!("{d:?}"));
    assert_eq!((parse.0, parse.1.as_str()), (Severity::Error, "settings.json"));
    // A trusted workspace's file guards calls: with no good version, they are refused.
    assert!(
        parse.3.contains("every tool call of a session that reads it is refused"),
        "{}",
        parse.3
    );
    assert_eq!(e.refusing.len(), 1, "{:?}", e.refusing);
    assert_eq!(d[0].0, Severity::Error, "errors first");
    assert_eq!(
        servers(&e),
        [
            ("bad".into(), Scope::User, Some(BlockReason::Invalid)),
            ("odd".into(), Scope::User, None),
            ("none".into(), Scope::User, Some(BlockReason::Invalid)),
        ]
    );
    Ok(())
}

/// (On paused time: the grace is measured by the clock seat, which moves only when the test
/// moves it.)
#[tokio::test(start_paused = true)]
async fn a_broken_file_keeps_its_last_good_contents() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    let loader = Loader::new(h.paths.clone());
    h.write(&h.paths.user, r#"{"mcpServers": {"s": {"command": "good"}}}"#)?;
    assert_eq!(loader.effective(&h.ws, &Env::new(), &BTreeSet::new()).servers.len(), 1);
    h.write(&h.paths.user, r#"{"mcpServers": {"s": {"command": "go"#)?; // truncated mid-write
    let e = loader.effective(&h.ws, &Env::new(), &BTreeSet::new());
    assert_eq!(e.servers["s"].config.command.as_deref(), Some("good"));
    assert!(e.public.diagnostics[0].message.contains("last good contents stay in effect"));
    std::fs::remove_file(&h.paths.user)?;
    // Deleted: kept for a grace period (an editor that saves by delete and rewrite), then gone.
    assert_eq!(loader.effective(&h.ws, &Env::new(), &BTreeSet::new()).servers.len(), 1);
    assert!(loader.next_recheck().is_some());
    tokio::time::advance(VANISH_GRACE - std::time::Duration::from_millis(1)).await;
    assert_eq!(loader.effective(&h.ws, &Env::new(), &BTreeSet::new()).servers.len(), 1);
    tokio::time::advance(std::time::Duration::from_millis(1)).await;
    assert!(
        loader.effective(&h.ws, &Env::new(), &BTreeSet::new()).servers.is_empty(),
        "deleted means gone"
    );
    assert!(loader.next_recheck().is_none());
    Ok(())
}

/// With a store, the last good contents outlive the loader (a daemon's restart): a file broken
/// at the next start keeps them, said with when they were read; with none (a first start, a
/// damaged copy) a file that guards calls refuses them, an untrusted workspace's does not.
#[test]
fn last_good_contents_outlive_the_daemon_and_a_file_with_none_refuses_calls() -> anyhow::Result<()>
{
    let h = Home::new()?;
    h.trust_workspace()?;
    let store = crate::store::Store::temporary()?;
    let start = || Loader::new(h.paths.clone()).with_store(store.clone());
    let read = |l: &Loader| l.effective(&h.ws, &Env::new(), &BTreeSet::new());
    h.write(&h.paths.user, r#"{"mcpServers": {"s": {"command": "good"}}}"#)?;
    assert!(read(&start()).refusing.is_empty());

    h.write(&h.paths.user, "{\n  \"mcpServers\" {")?;
    let e = read(&start());
    assert_eq!(e.servers["s"].config.command.as_deref(), Some("good"));
    assert!(e.refusing.is_empty(), "{:?}", e.refusing);
    let d = &e.public.diagnostics[0];
    assert_eq!((d.line, d.column), (Some(2), Some(16)), "{d:?}");
    assert!(d.message.contains("its last good contents, as geminid read them at 20"), "{d:?}");

    // A damaged copy is no copy, and says so; the file refuses calls until it is fixed.
    let key = h.paths.user.display().to_string();
    store.put_last_good_record(&key, b"\xa5\xa5 not a record")?;
    let loader = start();
    let e = read(&loader);
    assert!(e.servers.is_empty());
    assert_eq!(e.refusing.len(), 1, "{:?}", e.public.diagnostics);
    let why = &e.refusing[0].message;
    assert!(
        why.contains("the copy of its last good contents geminid kept cannot be used"),
        "{why}"
    );
    assert!(why.contains("every tool call of a session that reads it is refused"), "{why}");
    assert!(loader.warnings().iter().any(|w| w.contains("settings.json:2:16: invalid JSON")));
    h.write(&h.paths.user, r#"{"mcpServers": {"s": {"command": "fixed"}}}"#)?;
    assert!(read(&loader).refusing.is_empty());
    assert!(loader.warnings().is_empty(), "{:?}", loader.warnings());
    h.write(&h.paths.user, "{")?;
    assert_eq!(read(&start()).servers["s"].config.command.as_deref(), Some("fixed"));

    // A deleted file's contents are not kept: broken after that, it has none.
    std::fs::remove_file(&h.paths.user)?;
    assert!(read(&start()).servers.is_empty());
    h.write(&h.paths.user, "{")?;
    assert_eq!(read(&start()).refusing.len(), 1);

    // An untrusted workspace's file applies to nothing: broken, it refuses nothing.
    std::fs::remove_file(&h.paths.user)?;
    h.write(&h.paths.trusted_folders, "{}")?;
    h.write(&h.workspace_file(), "{")?;
    let e = read(&start());
    assert!(e.refusing.is_empty(), "{:?}", e.refusing);
    assert!(e.public.diagnostics.iter().any(|d| d.message.contains("ignored until it is fixed")));
    Ok(())
}

#[test]
fn an_explicit_reload_takes_a_deleted_file_as_deleted_at_once() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    let loader = Loader::new(h.paths.clone());
    h.write(&h.paths.user, r#"{"mcpServers": {"s": {"command": "s"}, "t": {"command": "t"}}}"#)?;
    h.write(&h.paths.enablement, r#"{"s": {"enabled": false}}"#)?;
    let blocked = |e: &Effective| e.servers.get("s").and_then(|s| s.blocked);
    assert!(blocked(&loader.effective(&h.ws, &Env::new(), &BTreeSet::new())).is_some());
    std::fs::remove_file(&h.paths.enablement)?;
    // Within the grace, a read keeps the last contents (an editor's delete and rewrite)...
    assert!(blocked(&loader.effective(&h.ws, &Env::new(), &BTreeSet::new())).is_some());
    // ...but `gemctl mcp reload` says the edits are done: gone now, the rest kept.
    loader.take_deletions();
    let e = loader.effective(&h.ws, &Env::new(), &BTreeSet::new());
    assert_eq!((blocked(&e), e.servers.len()), (None, 2));
    assert!(loader.next_recheck().is_none());
    Ok(())
}

#[test]
fn allow_and_exclude_lists_consolidate_across_scopes() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    let all = r#""a": {"command": "a"}, "b": {"command": "b"}, "c": {"command": "c"}, "d": {"command": "d"}, "e": {"command": "e"}"#;
    h.write(&h.paths.user, &format!(r#"{{"mcpServers": {{{all}}}, "mcp": {{"allowed": ["A", "b", "c", "d", "e"], "excluded": ["b"]}}}}"#))?;
    h.write(&h.paths.system, r#"{"mcp": {"allowed": ["a", "c", "d", "e"], "excluded": ["c"]}}"#)?;
    h.write(&h.paths.enablement, r#"{"d": {"enabled": false}}"#)?;
    let session: BTreeSet<String> = ["E".to_owned()].into();
    let e = Loader::new(h.paths.clone()).effective(&h.ws, &Env::new(), &session);
    let blocked: Vec<_> = e.public.mcp_servers.iter().map(|s| s.blocked).collect();
    assert_eq!(
        blocked,
        [
            None,
            Some(BlockReason::Allowlist),
            Some(BlockReason::Excludelist),
            Some(BlockReason::Enablement),
            Some(BlockReason::Session)
        ]
    );
    h.write(&h.paths.system, r#"{"admin": {"mcp": {"enabled": false}}}"#)?;
    let e = Loader::new(h.paths.clone()).effective(&h.ws, &Env::new(), &BTreeSet::new());
    assert!(e.public.mcp_servers.iter().all(|s| s.blocked == Some(BlockReason::Admin)));
    Ok(())
}

#[test]
fn union_and_concat_rules_hold_across_real_files() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    h.write(
        &h.paths.system_defaults,
        r#"{"tools": {"exclude": ["a"]}, "hooks": {"BeforeTool": [{"command": "d"}]}}"#,
    )?;
    h.write(&h.paths.user, r#"{"tools": {"exclude": ["a", "b"]}, "hooks": {"BeforeTool": [{"command": "u"}]}, "context": {"includeDirectories": ["/x"]}}"#)?;
    h.write(&h.workspace_file(), r#"{"tools": {"exclude": ["c"]}, "hooks": {"BeforeTool": [{"command": "w"}]}, "context": {"includeDirectories": ["/x"]}}"#)?;
    h.write(&h.paths.system, r#"{"admin": {"secureModeEnabled": true}}"#)?;
    let e = Loader::new(h.paths.clone()).effective(&h.ws, &Env::new(), &BTreeSet::new());
    let s = &e.public.settings;
    assert_eq!(s["tools"]["exclude"], json!(["a", "b", "c"]));
    assert_eq!(
        s["hooks"]["BeforeTool"],
        json!([{"command": "d"}, {"command": "u"}, {"command": "w"}])
    );
    assert_eq!(s["context"]["includeDirectories"], json!(["/x", "/x"]));
    assert_eq!(s["admin"], json!({"secureModeEnabled": true}));
    Ok(())
}

#[test]
fn the_shipped_example_settings_load_cleanly() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config-examples/settings.json");
    std::fs::copy(&example, &h.paths.user)?;
    let env: Env = [("EXAMPLE_TOKEN".to_owned(), "t".to_owned())].into();
    let e = Loader::new(h.paths.clone()).effective(&h.ws, &env, &BTreeSet::new());
    assert_eq!(e.public.diagnostics, vec![], "{}", example.display());
    assert!(!e.servers.is_empty());
    assert!(e.servers.values().all(|s| s.blocked.is_none()));
    Ok(())
}

#[test]
fn an_expanded_timeout_is_a_number_and_a_bad_one_keeps_the_entry() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    let loader = Loader::new(h.paths.clone());
    h.write(
        &h.paths.user,
        r#"{"mcpServers": {"s": {"command": "srv", "timeout": "${MCP_TIMEOUT:-30000}", "trust": "$TRUST_IT"}}}"#,
    )?;
    let env = |pairs: &[(&str, &str)]| -> Env {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    };
    let e = loader.effective(&h.ws, &env(&[("TRUST_IT", "true")]), &BTreeSet::new());
    assert_eq!(
        (e.servers["s"].config.timeout, e.servers["s"].config.trust),
        (Some(30000), Some(true))
    );
    assert!(e.public.diagnostics.is_empty(), "{:?}", e.public.diagnostics);
    let e = loader.effective(&h.ws, &env(&[("MCP_TIMEOUT", "5000")]), &BTreeSet::new());
    assert_eq!(e.servers["s"].config.timeout, Some(5000));
    // Not a number: the entry still runs (with the default timeout), and the file says why.
    let e = loader.effective(&h.ws, &env(&[("MCP_TIMEOUT", "soon")]), &BTreeSet::new());
    assert_eq!(e.servers["s"].config.timeout, None);
    assert_eq!(e.servers["s"].blocked, None);
    let d = e.public.diagnostics.iter().find(|d| d.message.contains("timeout"));
    let Some(d) = d else { panic!("{:?}", e.public.diagnostics) };
    assert_eq!((d.severity, d.line), (Severity::Warning, Some(1)));
    assert!(d.message.contains("field \"timeout\"") && d.message.ends_with("(ignored)"), "{d:?}");
    Ok(())
}

#[test]
fn mcp_server_command_adds_a_server_named_mcp() -> anyhow::Result<()> {
    let h = Home::new()?;
    h.trust_workspace()?;
    let loader = Loader::new(h.paths.clone());
    let env: Env = [("HOME".to_owned(), "/h".to_owned())].into();
    h.write(
        &h.paths.user,
        r#"{"mcp": {"serverCommand": "srv --root \"$HOME/x\""}, "mcpServers": {"mcp": {"command": "other"}}}"#,
    )?;
    let e = loader.effective(&h.ws, &env, &BTreeSet::new());
    let s = &e.servers["mcp"];
    assert_eq!(
        (s.config.command.as_deref(), s.config.args.clone()),
        (Some("srv"), Some(vec!["--root".to_owned(), "/h/x".to_owned()]))
    );
    assert_eq!(s.scope, Scope::User);
    // A command line with a shell operator is refused, in the reference's words, with where.
    h.write(&h.paths.user, r#"{"mcp": {"serverCommand": "derp && herp"}}"#)?;
    let e = loader.effective(&h.ws, &env, &BTreeSet::new());
    assert!(!e.servers.contains_key("mcp"));
    let d = &e.public.diagnostics[0];
    assert!(d.message.starts_with("failed to parse mcpServerCommand: derp && herp"), "{d:?}");
    assert_eq!(d.line, Some(1));
    // A command line that does not parse leaves a configured `mcp` server as it is, from its
    // own file.
    h.write(&h.paths.system, r#"{"mcp": {"serverCommand": "a | b"}}"#)?;
    h.write(&h.paths.user, r#"{"mcpServers": {"mcp": {"command": "kept"}}}"#)?;
    let e = loader.effective(&h.ws, &env, &BTreeSet::new());
    assert_eq!(e.servers["mcp"].config.command.as_deref(), Some("kept"));
    let entry = e.public.mcp_servers.iter().find(|s| s.name == "mcp").cloned();
    assert_eq!(
        entry.map(|s| (s.scope, s.file)),
        Some((Scope::User, h.paths.user.display().to_string()))
    );
    h.write(&h.paths.system, "{}")?;
    // Not with an admin allowlist.
    h.write(&h.paths.user, r#"{"mcp": {"serverCommand": "srv"}}"#)?;
    h.write(&h.paths.system, r#"{"admin": {"mcp": {"config": {"x": {}}}}}"#)?;
    let e = loader.effective(&h.ws, &env, &BTreeSet::new());
    assert!(!e.servers.contains_key("mcp"));
    Ok(())
}

#[test]
fn servers_keep_the_settings_order_and_a_listed_out_server_is_blocked_even_untrusted()
-> anyhow::Result<()> {
    let h = Home::new()?;
    h.write(
        &h.paths.user,
        r#"{"mcpServers": {"zeta": {"command": "z"}, "alpha": {"command": "a"}, "mid": {"command": "m"}},
            "mcp": {"excluded": ["mid"]}}"#,
    )?;
    h.write(
        &h.workspace_file(),
        r#"{"mcpServers": {"beta": {"command": "b"}, "zeta": {"command": "z2"}}}"#,
    )?;
    let loader = Loader::new(h.paths.clone());
    // Untrusted: `mcp.excluded` blocks before the folder disables (Gemini CLI's "Blocked").
    let e = loader.effective(&h.ws, &Env::new(), &BTreeSet::new());
    assert!(!e.public.trust.trusted);
    let blocked: Vec<_> = servers(&e).into_iter().map(|(n, _, b)| (n, b)).collect();
    assert_eq!(
        blocked,
        [
            ("zeta".into(), Some(BlockReason::UntrustedFolder)),
            ("alpha".into(), Some(BlockReason::UntrustedFolder)),
            ("mid".into(), Some(BlockReason::Excludelist)),
            ("beta".into(), Some(BlockReason::UntrustedFolder)),
        ]
    );
    // Trusted: the workspace's `zeta` takes the user entry's place; its new `beta` comes last.
    h.trust_workspace()?;
    let e = loader.effective(&h.ws, &Env::new(), &BTreeSet::new());
    assert_eq!(
        servers(&e),
        [
            ("zeta".into(), Scope::Workspace, None),
            ("alpha".into(), Scope::User, None),
            ("mid".into(), Scope::User, Some(BlockReason::Excludelist)),
            ("beta".into(), Scope::Workspace, None),
        ]
    );
    Ok(())
}

/// `trust/get` on a folder that does not exist answers by the rules as written (Gemini CLI's
/// `isPathTrusted` does), says that it does not exist, and still refuses a file or a relative
/// path.
#[test]
fn trust_get_answers_for_a_folder_not_made_yet() -> anyhow::Result<()> {
    let h = Home::new()?;
    let ws = std::fs::canonicalize(&h.ws)?;
    let rules = json!({ ws.display().to_string(): "TRUST_FOLDER" });
    h.write(&h.paths.trusted_folders, &rules.to_string())?;
    let missing = ws.join("later/deeper");
    let r = ops::trust_get(&h.paths, &missing.display().to_string(), true)?;
    assert_eq!((r.path.as_str(), r.trust.trusted), (missing.to_str().unwrap_or_default(), true));
    assert!(r.trust.reason.ends_with("(the folder does not exist)"), "{}", r.trust.reason);
    let outside = h.dir.path().join("nowhere");
    let r = ops::trust_get(&h.paths, &outside.display().to_string(), true)?;
    assert!(!r.trust.trusted);
    assert_eq!(
        ops::trust_get(&h.paths, &ws.display().to_string(), true)?.trust.reason,
        format!("rule {} (TRUST_FOLDER)", ws.display())
    );
    h.write(&h.ws.join("file"), "x")?;
    assert!(ops::trust_get(&h.paths, &h.ws.join("file").display().to_string(), true).is_err());
    assert!(ops::trust_get(&h.paths, "relative/path", true).is_err());
    Ok(())
}
