use super::*;

const RULE: &str =
    "[[rule]]\ntoolName = \"run_shell_command\"\ndecision = \"allow\"\npriority = 1\n";

fn acceptances(store: &Store) -> Acceptances {
    Acceptances::new(store.clone(), Arc::new(|| Ok(Secret::new("00ff".repeat(16)))))
}

/// New, accepted, then each way a folder stops being what was accepted: a file changed,
/// added, removed; a damaged record; another key.
#[test]
fn a_folder_loads_only_as_accepted() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let dir = ws.join(".gemini/policies");
    std::fs::create_dir_all(&dir).unwrap();
    let key = ws.display().to_string();
    let store = Store::temporary().unwrap();
    let acc = acceptances(&store);
    assert_eq!(acc.standing(&key, &snapshot(&ws)).state, State::None, "no files");
    std::fs::write(dir.join("a.toml"), RULE).unwrap();
    std::fs::write(dir.join("notes.txt"), "not read").unwrap();
    let snap = snapshot(&ws);
    assert_eq!(snap.files.len(), 1);
    assert_eq!(acc.standing(&key, &snap).state, State::New);
    acc.accept(&key, &snap).unwrap();
    assert!(acc.standing(&key, &snapshot(&ws)).loads());
    // Read again from the store, it still verifies.
    assert!(acceptances(&store).standing(&key, &snapshot(&ws)).loads());

    std::fs::write(dir.join("a.toml"), RULE.replace("allow", "ask_user")).unwrap();
    let s = acc.standing(&key, &snapshot(&ws));
    assert_eq!((s.state, s.files[0].change.as_str()), (State::Changed, "changed"), "{s:?}");
    std::fs::write(dir.join("a.toml"), RULE).unwrap();
    std::fs::write(dir.join("b.toml"), RULE).unwrap();
    let s = acc.standing(&key, &snapshot(&ws));
    assert_eq!(s.state, State::Changed);
    assert!(s.reason.contains("b.toml new"), "{s:?}");
    std::fs::remove_file(dir.join("b.toml")).unwrap();
    std::fs::rename(dir.join("a.toml"), dir.join("c.toml")).unwrap();
    let s = acc.standing(&key, &snapshot(&ws));
    assert!(s.reason.contains("a.toml removed") && s.reason.contains("c.toml new"), "{s:?}");
    std::fs::rename(dir.join("c.toml"), dir.join("a.toml")).unwrap();
    assert!(acc.standing(&key, &snapshot(&ws)).loads());

    // Another key, or a damaged record: nothing loads.
    let other = Acceptances::new(store.clone(), Arc::new(|| Ok(Secret::new("11".repeat(32)))));
    assert_eq!(other.standing(&key, &snapshot(&ws)).state, State::Unverified);
    let mut bytes = store.policy_accepted_record(&key).unwrap().unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let at = text.find("\"acceptedMs\":").unwrap() + "\"acceptedMs\":".len();
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    store.put_policy_accepted_record(&key, &bytes).unwrap();
    acc.forget();
    assert_eq!(acc.standing(&key, &snapshot(&ws)).state, State::Unverified);
    store.put_policy_accepted_record(&key, b"\xff not a record").unwrap();
    acc.forget();
    let s = acc.standing(&key, &snapshot(&ws));
    assert!(s.state == State::Unverified && s.reason.contains("not a valid record"), "{s:?}");
    // Another workspace's record does not count for this one.
    let copied = ws.join("sub");
    std::fs::create_dir_all(copied.join(".gemini/policies")).unwrap();
    std::fs::write(copied.join(".gemini/policies/a.toml"), RULE).unwrap();
    acc.accept(&key, &snapshot(&ws)).unwrap();
    let bytes = store.policy_accepted_record(&key).unwrap().unwrap();
    let sub = copied.display().to_string();
    store.put_policy_accepted_record(&sub, &bytes).unwrap();
    assert_eq!(acc.standing(&sub, &snapshot(&copied)).state, State::Unverified);
}

/// A file that links out of the folder, and a folder that links out of the workspace, are
/// not read.
#[test]
fn links_out_of_the_folder_are_not_read() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let dir = ws.join(".gemini/policies");
    std::fs::create_dir_all(&dir).unwrap();
    let outside = root.path().join("outside.toml");
    std::fs::write(&outside, RULE).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("out.toml")).unwrap();
    std::fs::write(dir.join("in.toml"), RULE).unwrap();
    std::os::unix::fs::symlink(dir.join("in.toml"), dir.join("again.toml")).unwrap();
    let snap = snapshot(&ws);
    let names: Vec<&str> = snap.files.iter().map(|(n, ..)| n.as_str()).collect();
    assert_eq!(names, ["again.toml", "in.toml"]);
    assert!(snap.refused[0].file.ends_with("out.toml"), "{:?}", snap.refused);

    let other = root.path().join("other");
    std::fs::create_dir_all(other.join(".gemini")).unwrap();
    std::os::unix::fs::symlink(&dir, other.join(".gemini/policies")).unwrap();
    let snap = snapshot(&other);
    assert!(snap.files.is_empty());
    assert!(snap.refused[0].message.contains("out of the workspace"), "{:?}", snap.refused);
}
