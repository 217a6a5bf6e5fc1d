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
