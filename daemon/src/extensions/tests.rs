use geminid_protocol::extensions::IntegrityState;

use super::*;

fn extension(root: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("hooks"))?;
    std::fs::write(dir.join(manifest::FILE), format!(r#"{{"name": "{name}", "version": "1"}}"#))?;
    std::fs::write(dir.join("hooks/run.sh"), "echo hi")?;
    Ok(dir)
}

fn states(scan: &Scan) -> Vec<(String, IntegrityState)> {
    scan.installed.iter().map(|e| (e.name.clone(), e.integrity)).collect()
}

#[test]
fn a_rescan_hashes_only_the_extension_that_changed() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let gemini = home.path().join(".gemini");
    let root = gemini.join("extensions");
    let dirs: Vec<PathBuf> =
        ["a", "b", "c"].iter().map(|n| extension(&root, n)).collect::<Result<_, _>>()?;
    let x = Extensions::with_key_file(gemini, home.path(), Store::temporary()?);
    let first = x.rescan(false);
    assert!(first.installed.iter().all(|e| e.integrity == IntegrityState::Recorded));
    assert_eq!(x.hashed_count(), 3);
    assert!(x.rescan(false).installed.iter().all(|e| e.integrity == IntegrityState::Verified));
    assert_eq!(x.hashed_count(), 3, "nothing changed, nothing hashed");

    std::fs::write(dirs[1].join("hooks/run.sh"), "echo changed")?;
    let scan = x.rescan(false);
    assert_eq!(x.hashed_count(), 4, "one extension hashed again");
    assert_eq!(
        states(&scan),
        [
            ("a".to_owned(), IntegrityState::Verified),
            ("b".to_owned(), IntegrityState::Tampered),
            ("c".to_owned(), IntegrityState::Verified),
        ]
    );
    assert_eq!(
        scan.installed[1].changes.as_ref().map(|c| c.changed.clone()),
        Some(vec!["hooks/run.sh".to_owned()])
    );
    assert!(!scan.installed[1].loadable());
    x.rescan(true);
    assert_eq!(x.hashed_count(), 7, "a forced scan hashes everything");
    x.accept("B")?;
    assert_eq!(x.current().find("b").map(|e| e.integrity), Some(IntegrityState::Verified));
    Ok(())
}

#[test]
fn an_update_that_fails_after_the_swap_puts_the_old_version_back() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let gemini = home.path().join(".gemini");
    let src = home.path().join("src");
    std::fs::create_dir_all(&src)?;
    std::fs::write(src.join(manifest::FILE), r#"{"name": "big", "version": "1"}"#)?;
    std::fs::write(src.join("GEMINI.md"), "v1")?;
    let x = Extensions::with_key_file(gemini.clone(), home.path(), Store::temporary()?);
    let none = std::collections::BTreeMap::new();
    let source = fetch::Source::Local(src.clone());
    x.install(&source, true, &none, home.path(), &|_| {}).map_err(|e| anyhow::anyhow!("{e}"))?;
    // Version 2 copies and validates, but cannot be signed once swapped in (more files than
    // an extension may hold): the swap must be undone.
    std::fs::write(src.join(manifest::FILE), r#"{"name": "big", "version": "2"}"#)?;
    std::fs::write(src.join("GEMINI.md"), "v2")?;
    let many = src.join("node_modules");
    std::fs::create_dir(&many)?;
    for i in 0..files::MAX_FILES {
        std::fs::write(many.join(i.to_string()), "")?;
    }
    let steps = std::sync::Mutex::new(Vec::new());
    let progress = |s: &str| steps.lock().unwrap_or_else(|e| e.into_inner()).push(s.to_owned());
    let err = x.update("big", true, &progress).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("more than"), "{err}");
    let steps = steps.into_inner().unwrap_or_default();
    assert!(steps.iter().any(|s| s == "swapping in the new version"), "{steps:?}");
    assert!(steps.iter().any(|s| s == "rolling back"), "{steps:?}");
    let e = x.rescan(true);
    let e = e.find("big").ok_or_else(|| anyhow::anyhow!("gone"))?;
    assert_eq!(e.manifest.as_ref().map(|m| m.version.as_str()), Some("1"));
    assert_eq!((e.integrity, e.loadable()), (IntegrityState::Verified, true));
    assert_eq!(std::fs::read_to_string(e.dir.join("GEMINI.md"))?, "v1");
    let hidden: Vec<_> = std::fs::read_dir(gemini.join("extensions"))?
        .filter_map(Result::ok)
        .filter(|d| d.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
    Ok(())
}
