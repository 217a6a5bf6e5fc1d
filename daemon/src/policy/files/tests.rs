use std::os::unix::fs::PermissionsExt;

use super::*;

const RULE: &str = "[[rule]]\ntoolName = \"a\"\ndecision = \"allow\"\npriority = 1\n";

/// Configuration paths of a home under `root` (system settings in `root/etc`).
pub(in crate::policy) fn paths(root: &Path) -> ConfigPaths {
    ConfigPaths::from_env(|k| match k {
        "HOME" => Some(root.join("home").into()),
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH" => Some(root.join("etc/settings.json").into()),
        _ => None,
    })
    .unwrap()
}

#[test]
fn places_follow_the_tiers_and_policy_paths_replace_the_user_directory() {
    let root = tempfile::tempdir().unwrap();
    let p = paths(root.path());
    let ws = root.path().join("ws");
    let (got, problems) = places(&p, &ws, true, &serde_json::json!({}));
    let want = [
        (ws.join(".gemini/policies"), Tier::Workspace),
        (root.path().join("home/.gemini/policies"), Tier::User),
        (system_policies(), Tier::Admin),
    ];
    assert_eq!(got.iter().map(|p| (p.path.clone(), p.tier)).collect::<Vec<_>>(), want);
    assert!(problems.is_empty());
    let (got, _) = places(&p, &ws, false, &serde_json::json!({"policyPaths": ["/x/mine.toml"]}));
    assert_eq!(got[0], Place { path: "/x/mine.toml".into(), tier: Tier::User });
    assert_eq!(got.len(), 2, "no workspace tier in an untrusted folder");
}

/// `adminPolicyPaths` are the system settings file's, and only its: absolute, `~/`, or
/// relative to its folder; merged settings naming others do not count.
#[test]
fn admin_policy_paths_are_the_system_settings_files() {
    let root = tempfile::tempdir().unwrap();
    let p = paths(root.path());
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(
        root.path().join("etc/settings.json"),
        r#"{ // the admin's
            "adminPolicyPaths": ["/srv/admin", "~/a.toml", "rel", 3] }"#,
    )
    .unwrap();
    let merged = serde_json::json!({"adminPolicyPaths": ["/ws/evil"]});
    let (got, problems) = places(&p, &root.path().join("ws"), false, &merged);
    let admin: Vec<PathBuf> =
        got.iter().filter(|p| p.tier == Tier::Admin).map(|p| p.path.clone()).collect();
    let want = [
        system_policies(),
        "/srv/admin".into(),
        root.path().join("home/a.toml"),
        root.path().join("etc/rel"),
    ];
    assert_eq!(admin, want);
    assert!(problems.is_empty(), "{problems:?}");
    std::fs::write(root.path().join("etc/settings.json"), "{ not json").unwrap();
    let (got, problems) = places(&p, &root.path().join("ws"), false, &merged);
    assert_eq!(got.iter().filter(|p| p.tier == Tier::Admin).count(), 1);
    assert!(problems[0].message.contains("adminPolicyPaths cannot be read"), "{problems:?}");
}

#[test]
fn a_broken_file_keeps_its_last_good_rules_and_what_is_not_a_file_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("policies");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.toml"), RULE).unwrap();
    std::fs::write(dir.join("notes.txt"), "not policy").unwrap();
    std::fs::create_dir(dir.join("dir.toml")).unwrap();
    nix::unistd::mkfifo(&dir.join("fifo.toml"), nix::sys::stat::Mode::from_bits_truncate(0o600))
        .unwrap();
    let place = [Place { path: dir.clone(), tier: Tier::User }];
    let reader = Reader::default();
    let Read { files, problems, .. } = reader.read(&place);
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].len(), 1);
    let text = format!("{problems:#?}");
    assert!(text.contains("dir.toml") && text.contains("fifo.toml"), "{text}");
    assert!(text.contains("not a regular file"), "{text}");
    // Unchanged, the file is not parsed again; changed, it is.
    assert!(Arc::ptr_eq(&reader.read(&place).files[0], &files[0]));
    std::fs::write(dir.join("a.toml"), RULE.replace("\"a\"", "\"b\"")).unwrap();
    let edited = reader.read(&place);
    assert!(!Arc::ptr_eq(&edited.files[0], &files[0]));
    assert_eq!(edited.files[0][0].tool_name, "b");
    let files = edited.files;
    // An editor mid-save: the file does not parse; its rules stay.
    std::fs::write(dir.join("a.toml"), "[[rule]\ntoolName = ").unwrap();
    let again = reader.read(&place);
    let problems = again.problems;
    assert!(Arc::ptr_eq(&again.files[0], &files[0]), "{problems:#?}");
    let broken = problems.iter().find(|d| d.file.ends_with("a.toml")).unwrap();
    assert!(broken.message.contains("last good rules (1) stay in force"), "{}", broken.message);
    assert_eq!(broken.line, Some(1));
    // A fresh reader has no last good rules to keep.
    assert_eq!(Reader::default().read(&place).rules().count(), 0);
}

#[test]
fn an_admin_directory_others_may_write_is_not_read() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("admin");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("a.toml"), RULE).unwrap();
    let place = [Place { path: dir.clone(), tier: Tier::Admin }];
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(Reader::default().read(&place).rules().count(), 1);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let Read { files, problems, .. } = Reader::default().read(&place);
    assert!(files.is_empty());
    assert!(problems[0].message.contains("chmod go-w"), "{problems:#?}");
    // A single file as a place, and a place that is neither.
    let single = [Place { path: dir.join("a.toml"), tier: Tier::User }];
    assert_eq!(Reader::default().read(&single).rules().count(), 1);
    let odd = [Place { path: dir.join("x.txt"), tier: Tier::User }];
    std::fs::write(dir.join("x.txt"), "").unwrap();
    assert!(Reader::default().read(&odd).problems[0].message.contains("neither"));
}

#[test]
fn a_file_broken_at_start_uses_the_rules_an_earlier_daemon_kept_or_refuses_calls() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("policies");
    std::fs::create_dir(&dir).unwrap();
    let place = [Place { path: dir.clone(), tier: Tier::User }];
    let store = Store::temporary().unwrap();
    std::fs::write(dir.join("a.toml"), RULE).unwrap();
    assert_eq!(Reader::with_store(store.clone(), None).read(&place).rules().count(), 1);
    // The next daemon starts while the file does not parse: the kept rules hold.
    std::fs::write(dir.join("a.toml"), "[[rule]\ntoolName = ").unwrap();
    let read = Reader::with_store(store.clone(), None).read(&place);
    assert_eq!(read.rules().count(), 1, "{:#?}", read.problems);
    assert!(read.refusing.is_empty());
    let said = &read.problems[0].message;
    assert!(said.contains("last good rules (1), as geminid read them at"), "{said}");
    // With no good version known, every call is refused, and said with where it breaks.
    let read = Reader::with_store(Store::temporary().unwrap(), None).read(&place);
    assert_eq!(read.rules().count(), 0);
    assert_eq!(read.refusing.len(), 1);
    assert_eq!(read.refusing[0].line, Some(1));
    assert!(read.refusing[0].message.contains("every tool call"), "{:#?}", read.refusing);
    // A damaged copy is no good version, and says so.
    let key = dir.join("a.toml").display().to_string();
    store.put_last_good_record(&key, b"\xff not a record").unwrap();
    let read = Reader::with_store(store, None).read(&place);
    assert_eq!(read.refusing.len(), 1);
    assert!(read.refusing[0].message.contains("cannot be used"), "{:#?}", read.refusing);
    // No store (a reader of its own): a broken file refuses too.
    assert_eq!(Reader::default().read(&place).refusing.len(), 1);
    // What is no file refuses nothing.
    std::fs::remove_file(dir.join("a.toml")).unwrap();
    std::fs::create_dir(dir.join("dir.toml")).unwrap();
    assert!(Reader::default().read(&place).refusing.is_empty());
}
