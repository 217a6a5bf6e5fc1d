//! `gemctl config context` (`context/files`) against what Gemini CLI 0.61 sends its model:
//! the names `context.fileName` adds to `GEMINI.md`, the private project memory, `@path`
//! imports inlined (and the ones that fail, said as Gemini CLI says them), empty files left
//! out. The interop suite compares the same with Gemini CLI itself
//! (`tests/interop/differential_context.py`).

use std::path::Path;

use geminid_tests::{Daemon, TestHome};
use serde_json::{Value, json};

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)?;
    Ok(())
}

/// The workspace a git repository's root, trusted, with `settings` as the user's settings;
/// `files` (relative to the workspace) written. The daemon is started after.
async fn home_with(settings: Value, files: &[(&str, &str)]) -> anyhow::Result<(TestHome, Daemon)> {
    let home = TestHome::new()?;
    let ws = home.workspace();
    std::fs::create_dir_all(ws.join(".git"))?;
    write(&home.root().join("home/.gemini/settings.json"), &settings.to_string())?;
    for (rel, text) in files {
        write(&ws.join(rel), text)?;
    }
    let daemon = Daemon::start(&home, &[]).await?;
    assert!(home.gemctl(&["trust"])?.status.success());
    Ok((home, daemon))
}

/// A file listed: its kind, path relative to the home's root, and text.
type Row = (String, String, String);

/// The answer, and a [`Row`] for each file listed.
fn listed(home: &TestHome) -> anyhow::Result<(Value, Vec<Row>)> {
    let v = home.gemctl_json(&["config", "context"])?;
    let root = format!("{}/", home.root().display());
    let files = v["files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (s("kind"), s("path").replace(&root, ""), s("text"))
        })
        .collect();
    Ok((v, files))
}

fn row(kind: &str, path: &str, text: &str) -> Row {
    (kind.to_owned(), path.to_owned(), text.to_owned())
}

#[tokio::test]
async fn a_configured_name_list_comes_before_gemini_md_which_is_always_read() -> anyhow::Result<()>
{
    let settings = json!({"context": {"fileName": ["CONTEXT.md", " ./AGENTS.md ", ""]}});
    let files = [("GEMINI.md", "gemini"), ("AGENTS.md", "agents"), ("CONTEXT.md", "context")];
    let (home, _daemon) = home_with(settings, &files).await?;
    write(&home.root().join("home/.gemini/GEMINI.md"), "global gemini")?;
    write(&home.root().join("home/.gemini/AGENTS.md"), "global agents")?;
    let (v, files) = listed(&home)?;
    assert_eq!(v["names"], json!(["CONTEXT.md", "AGENTS.md", "GEMINI.md"]), "{v}");
    assert_eq!(
        files,
        [
            row("global", "home/.gemini/AGENTS.md", "global agents"),
            row("global", "home/.gemini/GEMINI.md", "global gemini"),
            row("project", "ws/AGENTS.md", "agents"),
            row("project", "ws/CONTEXT.md", "context"),
            row("project", "ws/GEMINI.md", "gemini"),
        ],
        "{v}"
    );
    Ok(())
}

#[tokio::test]
async fn empty_and_blank_context_files_are_left_out() -> anyhow::Result<()> {
    let settings = json!({"context": {"fileName": ["AGENTS.md", "CONTEXT.md"]}});
    let files = [("GEMINI.md", ""), ("AGENTS.md", " \n\t\u{feff}\n"), ("CONTEXT.md", "\n kept \n")];
    let (home, _daemon) = home_with(settings, &files).await?;
    let (v, files) = listed(&home)?;
    assert_eq!(files, [row("project", "ws/CONTEXT.md", "kept")], "{v}");
    // The human listing says so when nothing is left.
    std::fs::remove_file(home.workspace().join("CONTEXT.md"))?;
    let (code, out, err) = home.gemctl_run(&["config", "context"])?;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("No context files"), "{out}");
    Ok(())
}

#[tokio::test]
async fn a_missing_import_is_marked_as_gemini_cli_marks_it() -> anyhow::Result<()> {
    let files = [("GEMINI.md", "a @./there.md b @./gone.md c"), ("there.md", "here\n")];
    let (home, _daemon) = home_with(json!({}), &files).await?;
    let (v, files) = listed(&home)?;
    let gone = home.workspace().join("gone.md");
    let want = format!(
        "a <!-- Imported from: ./there.md -->\nhere\n\n<!-- End of import from: ./there.md --> b \
         <!-- Import failed: ./gone.md - ENOENT: no such file or directory, access '{}' --> c",
        gone.display()
    );
    assert_eq!(files, [row("project", "ws/GEMINI.md", &want)], "{v}");
    let imports = &v["files"][0]["imports"];
    assert_eq!(imports[0]["state"], "inlined", "{v}");
    assert_eq!(imports[1]["state"], "failed", "{v}");
    assert_eq!(imports[1]["path"], "./gone.md", "{v}");
    // The human listing names the import and why it failed.
    let (_, out, _) = home.gemctl_run(&["config", "context"])?;
    assert!(out.contains("@./gone.md  (failed: ENOENT: no such file or directory"), "{out}");
    Ok(())
}

#[tokio::test]
async fn an_import_cycle_is_inlined_once_down_each_chain() -> anyhow::Result<()> {
    let files = [("GEMINI.md", "@./a.md"), ("a.md", "A @./b.md"), ("b.md", "B @./a.md")];
    let (home, _daemon) = home_with(json!({}), &files).await?;
    let (v, files) = listed(&home)?;
    let want = "<!-- Imported from: ./a.md -->\nA <!-- Imported from: ./b.md -->\nB \
                <!-- File already processed: ./a.md -->\n<!-- End of import from: ./b.md -->\n\
                <!-- End of import from: ./a.md -->";
    assert_eq!(files, [row("project", "ws/GEMINI.md", want)], "{v}");
    assert_eq!(v["files"][0]["imports"][2]["state"], "repeated", "{v}");
    Ok(())
}

#[tokio::test]
async fn an_import_leaving_the_project_root_or_in_code_is_not_read() -> anyhow::Result<()> {
    let text = "@../secret.md `@./a.md` @./a.md";
    let (home, _daemon) = home_with(json!({}), &[("GEMINI.md", text), ("a.md", "A")]).await?;
    write(&home.root().join("secret.md"), "never read")?;
    // A link inside the project to a file outside it is outside too.
    std::os::unix::fs::symlink(home.root().join("secret.md"), home.workspace().join("link.md"))?;
    write(&home.workspace().join("GEMINI.md"), &format!("{text} @./link.md"))?;
    let (v, files) = listed(&home)?;
    let want = "<!-- Import failed: ../secret.md - Path traversal attempt --> `@./a.md` \
                <!-- Imported from: ./a.md -->\nA\n<!-- End of import from: ./a.md --> \
                <!-- Import failed: ./link.md - Path traversal attempt -->";
    assert_eq!(files, [row("project", "ws/GEMINI.md", want)], "{v}");
    assert!(!v.to_string().contains("never read"), "{v}");
    Ok(())
}

#[tokio::test]
async fn the_private_project_memory_follows_the_global_files() -> anyhow::Result<()> {
    let (home, _daemon) = home_with(json!({}), &[("GEMINI.md", "project")]).await?;
    let gemini = home.root().join("home/.gemini");
    let ws = home.workspace().display().to_string();
    write(&gemini.join("GEMINI.md"), "global")?;
    write(&gemini.join("projects.json"), &json!({"projects": {&ws: "ws"}}).to_string())?;
    write(&gemini.join("tmp/ws/.project_root"), &ws)?;
    // A legacy GEMINI.md there is read only while there is no MEMORY.md.
    write(&gemini.join("tmp/ws/memory/GEMINI.md"), "legacy memory")?;
    let (v, files) = listed(&home)?;
    let want_legacy = row("memory", "home/.gemini/tmp/ws/memory/GEMINI.md", "legacy memory");
    assert_eq!(files[1], want_legacy, "{v}");
    write(&gemini.join("tmp/ws/memory/MEMORY.md"), "- remembered @./topic.md")?;
    write(&gemini.join("tmp/ws/memory/topic.md"), "a topic")?;
    let (v, files) = listed(&home)?;
    let memory = "- remembered <!-- Imported from: ./topic.md -->\na topic\n\
                  <!-- End of import from: ./topic.md -->";
    assert_eq!(
        files,
        [
            row("global", "home/.gemini/GEMINI.md", "global"),
            row("memory", "home/.gemini/tmp/ws/memory/MEMORY.md", memory),
            row("project", "ws/GEMINI.md", "project"),
        ],
        "{v}"
    );
    // Another folder's marker: not this workspace's memory.
    write(&gemini.join("tmp/ws/.project_root"), "/somewhere/else")?;
    let (v, files) = listed(&home)?;
    assert!(files.iter().all(|f| f.0 != "memory"), "{v}");
    Ok(())
}
