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

/// One file whose text holds `NUL b.toml NUL …` and the two files it splits into do not
/// digest alike (they did with each name, NUL, text, NUL); a record whose digest matches but
/// whose list of files does not is not an acceptance; a record of the earlier form says to
/// accept again (issue 68, F3).
#[test]
fn the_digest_tells_files_apart_and_the_list_must_match() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let dir = ws.join(".gemini/policies");
    std::fs::create_dir_all(&dir).unwrap();
    let key = ws.display().to_string();
    let store = Store::temporary().unwrap();
    let acc = acceptances(&store);
    let (t1, t2) = (format!("{}# ", RULE.replace("allow", "deny")), format!("\n{RULE}"));
    std::fs::write(dir.join("a.toml"), format!("{t1}\0b.toml\0{t2}")).unwrap();
    acc.accept(&key, &snapshot(&ws)).unwrap();
    std::fs::write(dir.join("a.toml"), &t1).unwrap();
    std::fs::write(dir.join("b.toml"), &t2).unwrap();
    let s = acc.standing(&key, &snapshot(&ws));
    assert_eq!(s.state, State::Changed, "{s:?}");

    // Signed, with the folder's digest, but a list of files that is not the folder's.
    let snap = snapshot(&ws);
    let mut record = Record {
        v: RECORD_VERSION,
        workspace: key.clone(),
        digest: snap.digest.clone(),
        files: [("a.toml".to_owned(), sha256(&t1))].into(),
        accepted_ms: 1,
        mac: String::new(),
    };
    record.mac = acc.mac(&record).unwrap();
    store.put_policy_accepted_record(&key, &serde_json::to_vec(&record).unwrap()).unwrap();
    acc.forget();
    assert!(!acc.standing(&key, &snap).loads());

    // The earlier form of record, signed and matching its files: accept again.
    record.v = 1;
    record.files = snap.files.iter().map(|(n, _, t)| (n.clone(), sha256(t))).collect();
    record.mac = acc.mac(&record).unwrap();
    store.put_policy_accepted_record(&key, &serde_json::to_vec(&record).unwrap()).unwrap();
    acc.forget();
    let s = acc.standing(&key, &snap);
    assert!(s.state == State::Changed && s.reason.contains("accept again"), "{s:?}");
}
