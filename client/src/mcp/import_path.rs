//! Which `gemctl` `mcp import` writes into Gemini CLI's settings (audit turn 4, C10).
//!
//! The entry must keep working after the user moves on: a `gemctl` inside a cargo build tree
//! (`target/release/gemctl`) is gone after `cargo clean`, a moved checkout or a switch to
//! `cargo install`, and every imported server breaks with it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::output::errln;

/// The path to write: `explicit` when given (it must be an executable file), else this
/// `gemctl` unless it lies in a build tree and a `gemctl` outside one is on `PATH`. A build-tree
/// path that has to be written anyway is said, with the fix.
pub fn choose(explicit: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        // A bare name is looked up on PATH, as a shell would.
        let p = if p.components().count() == 1 && !p.is_absolute() {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path).map(|d| d.join(&p)).find(|c| is_executable(c)).unwrap_or(p)
        } else {
            p
        };
        let p = std::path::absolute(&p).with_context(|| format!("{}", p.display()))?;
        // `..` and `.` resolved in the folder, the file's own name kept (not a link's target).
        let p = match (p.parent().and_then(|d| std::fs::canonicalize(d).ok()), p.file_name()) {
            (Some(dir), Some(name)) => dir.join(name),
            _ => p,
        };
        if !is_executable(&p) {
            bail!(
                "{} is not an executable file: give --command the path of an installed gemctl \
                 (`command -v gemctl`)",
                p.display()
            );
        }
        // geminid tells its gateway entries in Gemini CLI's file by their program's name: an
        // entry running `gemctl-copy` would be taken for a server of the user's, and moved.
        if p.file_stem().is_none_or(|n| n != "gemctl") {
            bail!(
                "{} is not named gemctl: the entries import writes are known by their program's \
                 name, so give --command a gemctl (a link named gemctl to it will do)",
                p.display()
            );
        }
        if in_build_tree(&canonical(&p)) {
            errln!(
                "note: {} leads into a cargo build tree: `cargo clean` or moving the checkout \
                 breaks the client's entries (`cargo install --locked --path client` installs one)",
                p.display()
            );
        }
        return Ok(p);
    }
    let exe = std::env::current_exe().context("cannot tell where gemctl is")?;
    if !in_build_tree(&exe) {
        return Ok(exe);
    }
    if let Some(found) = on_path(std::env::var_os("PATH").as_deref()) {
        return Ok(found);
    }
    errln!(
        "note: the client's entries will run {}, inside a cargo build tree: `cargo clean` or \
         moving the checkout breaks them. Install gemctl (`cargo install --locked --path client`) \
         and write the entries again (`gemctl mcp import`; `gemctl clients disconnect` then \
         `connect`), or give `--command PATH`.",
        exe.display()
    );
    Ok(exe)
}

/// Whether `path` lies in a cargo target directory (one that holds cargo's `CACHEDIR.TAG`).
fn in_build_tree(path: &Path) -> bool {
    path.ancestors().skip(1).any(|dir| dir.join("CACHEDIR.TAG").is_file())
}

/// The first `gemctl` on `path` that is an executable outside a build tree, as `PATH` names it
/// (so `~/.cargo/bin/gemctl` stays right across `cargo install` upgrades).
fn on_path(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let name = if cfg!(windows) { "gemctl.exe" } else { "gemctl" };
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p) && !in_build_tree(p) && !in_build_tree(&canonical(p)))
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemctl_in_a_build_tree_gives_way_to_one_on_path() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("checkout/target");
        std::fs::create_dir_all(target.join("release")).unwrap();
        std::fs::write(target.join("CACHEDIR.TAG"), "Signature: 8a477f597d28d172789f06886806bc55")
            .unwrap();
        let built = target.join("release/gemctl");
        assert!(in_build_tree(&built));
        assert!(!in_build_tree(&t.path().join("bin/gemctl")));

        let bin = t.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let installed = bin.join("gemctl");
        std::fs::write(&installed, "#!/bin/sh\n").unwrap();
        std::fs::write(&built, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        for p in [&installed, &built] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = std::env::join_paths([target.join("release"), bin.clone()]).unwrap();
        assert_eq!(on_path(Some(&path)), Some(installed), "the build tree's copy is skipped");
        let only_built = std::env::join_paths([target.join("release")]).unwrap();
        assert_eq!(on_path(Some(&only_built)), None);
    }
}
