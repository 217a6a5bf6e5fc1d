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

/// `gemctl --json config context`, failed when it has not answered within `secs` (it never
/// answers when the daemon waits on a file).
async fn listed_within(home: &TestHome, secs: u64) -> anyhow::Result<(Value, Vec<Row>)> {
    let child = home
        .gemctl_cmd(&["--json", "config", "context"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id())?);
    let waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    let Ok(out) = tokio::time::timeout(std::time::Duration::from_secs(secs), waiting).await else {
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL)?;
        anyhow::bail!("gemctl config context did not answer within {secs} s");
    };
    let out = out??;
    let v: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| anyhow::anyhow!("{e}: {}", String::from_utf8_lossy(&out.stderr)))?;
    let root = format!("{}/", home.root().display());
    let files = v["files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            let text =
                if s("error").is_empty() { s("text") } else { format!("ERROR {}", s("error")) };
            (s("kind"), s("path").replace(&root, ""), text)
        })
        .collect();
    Ok((v, files))
}

fn mkfifo(path: &Path) -> anyhow::Result<()> {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
    Ok(())
}

#[tokio::test]
async fn a_fifo_is_never_opened_to_wait_on_and_the_daemon_still_stops() -> anyhow::Result<()> {
    let (home, mut daemon) = home_with(json!({}), &[("GEMINI.md", "a @./pipe b")]).await?;
    mkfifo(&home.workspace().join("pipe"))?;
    // The context file itself a FIFO too.
    mkfifo(&home.root().join("home/.gemini/GEMINI.md"))?;
    let (v, files) = listed_within(&home, 20).await?;
    let fifo = "ERROR a FIFO, not a regular file: not read";
    let want = "a <!-- Import failed: ./pipe - a FIFO, not a regular file: not read --> b";
    assert_eq!(
        files,
        [row("global", "home/.gemini/GEMINI.md", fifo), row("project", "ws/GEMINI.md", want)],
        "{v}"
    );
    let (_, out, _) = home.gemctl_run(&["config", "context"])?;
    assert!(out.contains("(global; not read: a FIFO, not a regular file: not read)"), "{out}");
    // Nothing is left waiting: the daemon stops when told to.
    daemon.signal(nix::sys::signal::Signal::SIGTERM)?;
    let status = daemon.wait_exit(std::time::Duration::from_secs(20)).await?;
    assert!(status.success(), "{status}");
    Ok(())
}

#[tokio::test]
async fn a_file_over_the_cap_or_a_device_fails_alone_and_the_rest_lists() -> anyhow::Result<()> {
    let settings = json!({"context": {"fileName": ["ZERO.md"]}});
    let text = "a @./huge.md @./one.md @./two.md @./three.md b";
    let (home, _daemon) = home_with(settings, &[("GEMINI.md", text)]).await?;
    let ws = home.workspace();
    // 100 MiB on disk (sparse), and three of 3 MiB: the third passes the 8 MiB of all.
    std::fs::File::create(ws.join("huge.md"))?.set_len(100 << 20)?;
    for name in ["one.md", "two.md", "three.md"] {
        std::fs::write(ws.join(name), "x".repeat(3 << 20))?;
    }
    std::os::unix::fs::symlink("/dev/zero", ws.join("ZERO.md"))?;
    let (v, files) = listed_within(&home, 60).await?;
    assert_eq!(files.len(), 2, "{v:.2000}");
    assert_eq!(
        files[1],
        row("project", "ws/ZERO.md", "ERROR a device, not a regular file: not read")
    );
    let imports = &v["files"][0]["imports"];
    let state = |i: usize| (imports[i]["state"].clone(), imports[i]["error"].clone());
    let huge = "larger than 4 MiB, the most read of one context file";
    assert_eq!(state(0), (json!("failed"), json!(huge)), "{imports}");
    assert_eq!(state(1).0, "inlined");
    assert_eq!(state(2).0, "inlined");
    let rest = "more than is left of the 8 MiB all context files may hold together";
    assert_eq!(state(3), (json!("failed"), json!(rest)), "{imports}");
    let text = files[0].2.as_str();
    assert!(text.contains(&format!("<!-- Import failed: ./huge.md - {huge} -->")), "{text:.300}");
    assert!(text.len() < (7 << 20), "{}", text.len());
    Ok(())
}

#[tokio::test]
async fn a_context_file_linking_out_of_where_it_was_found_is_not_read() -> anyhow::Result<()> {
    let settings = json!({"context": {"fileName": "INSIDE.md"}});
    let (home, _daemon) = home_with(settings, &[("docs/real.md", "inside")]).await?;
    let (ws, root) = (home.workspace(), home.root().to_path_buf());
    // Two keys: the same file twice would be listed once.
    for k in [1, 3] {
        write(&root.join(format!("home/secret{k}")), "SECRET-KEY")?;
    }
    std::os::unix::fs::symlink(root.join("home/secret1"), ws.join("GEMINI.md"))?;
    // The user's own global file may link anywhere (a dotfiles folder, a Nix store).
    write(&root.join("dotfiles/GEMINI.md"), "from my dotfiles")?;
    let dotfile = root.join("dotfiles/GEMINI.md");
    std::os::unix::fs::symlink(dotfile, root.join("home/.gemini/GEMINI.md"))?;
    // A link that stays inside the project is read.
    std::os::unix::fs::symlink(ws.join("docs/real.md"), ws.join("INSIDE.md"))?;
    // A linked extension's context file that leads out of its folder.
    let ext = root.join("dev-ext");
    write(&ext.join("gemini-extension.json"), r#"{"name": "dev", "version": "1"}"#)?;
    std::os::unix::fs::symlink(root.join("home/secret3"), ext.join("GEMINI.md"))?;
    let ext_s = ext.display().to_string();
    let (code, _, err) = home.gemctl_run(&["extensions", "link", &ext_s, "--consent"])?;
    assert_eq!(code, 0, "{err}");
    let (v, files) = listed_within(&home, 20).await?;
    assert!(!v.to_string().contains("SECRET-KEY"), "{v}");
    let out = |dir: &Path| {
        let d = std::fs::canonicalize(dir).unwrap_or_default();
        format!(
            "ERROR a link to a file outside {}: not read (geminid reads a context file only \
             where it was found)",
            d.display()
        )
    };
    assert_eq!(
        files,
        [
            row("global", "home/.gemini/GEMINI.md", "from my dotfiles"),
            row("extension", "dev-ext/GEMINI.md", &out(&ext)),
            row("project", "ws/GEMINI.md", &out(&ws)),
            row("project", "ws/INSIDE.md", "inside"),
        ],
        "{v}"
    );
    Ok(())
}

#[tokio::test]
async fn imports_that_multiply_stop_at_the_caps_and_code_spans_scan_in_one_pass()
-> anyhow::Result<()> {
    // GEMINI.md and a1..a12 each import all twelve: 12^5 imports five deep.
    let all: String = (1..=12).map(|i| format!("@./a{i}.md\n")).collect();
    let mut files: Vec<(String, String)> = vec![("GEMINI.md".into(), all.clone())];
    files.extend((1..=12).map(|i| (format!("a{i}.md"), format!("A{i}\n{all}"))));
    // Backtick runs of decreasing length (about 1.1 MB), in a file of its own.
    let ticks: String = (1..=1480).rev().map(|n| format!("{} x ", "`".repeat(n))).collect();
    files.push(("TICKS.md".into(), format!("{ticks}\n@./t.md")));
    files.push(("t.md".into(), "T".into()));
    let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let settings = json!({"context": {"fileName": "TICKS.md"}});
    let (home, _daemon) = home_with(settings, &refs).await?;
    let started = std::time::Instant::now();
    let (v, files) = listed_within(&home, 60).await?;
    let took = started.elapsed();
    assert_eq!(files.len(), 2, "{v:.2000}");
    let imports = v["files"][0]["imports"].as_array().cloned().unwrap_or_default();
    assert_eq!(imports.len(), 501, "{:?}", imports.last());
    let why = "more than 500 imports from one context file; it and the imports after it are \
               not followed";
    assert_eq!(imports[500]["error"], why);
    assert!(files[0].2.len() < (1 << 20), "{}", files[0].2.len());
    assert!(files[0].2.contains(&format!("- {why} -->")));
    // The import after the ticks is inlined: the spans were found as Gemini CLI finds them.
    assert!(
        files[1]
            .2
            .ends_with("<!-- Imported from: ./t.md -->\nT\n<!-- End of import from: ./t.md -->")
    );
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    Ok(())
}

#[tokio::test]
async fn a_link_swapped_while_read_never_inlines_what_it_leads_to() -> anyhow::Result<()> {
    let text = "@./link.md\n".repeat(400);
    let (home, _daemon) = home_with(json!({}), &[("GEMINI.md", &text), ("ok.md", "ok")]).await?;
    let (ws, root) = (home.workspace(), home.root().to_path_buf());
    write(&root.join("home/secret"), "SECRET-KEY")?;
    std::os::unix::fs::symlink(ws.join("ok.md"), ws.join("good"))?;
    std::os::unix::fs::symlink(root.join("home/secret"), ws.join("bad"))?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, ws) = (stop.clone(), ws.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for from in ["good", "bad"] {
                    let _ = std::fs::hard_link(ws.join(from), ws.join("tmp"));
                    let _ = std::fs::rename(ws.join("tmp"), ws.join("link.md"));
                }
            }
        })
    };
    let mut seen = 0;
    for _ in 0..8 {
        let (v, _) = listed_within(&home, 60).await?;
        seen += usize::from(v.to_string().contains("SECRET-KEY"));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = swapper.join();
    assert_eq!(seen, 0, "the key was inlined in {seen} of 8 listings");
    Ok(())
}

#[tokio::test]
async fn a_workspace_may_not_name_a_path_as_a_context_file() -> anyhow::Result<()> {
    let (home, _daemon) = home_with(json!({}), &[("GEMINI.md", "project")]).await?;
    write(&home.root().join("home/secret.md"), "SECRET-KEY")?;
    let settings = json!({"context": {"fileName": ["../secret.md", "AGENTS.md"]}});
    write(&home.workspace().join(".gemini/settings.json"), &settings.to_string())?;
    let (v, files) = listed_within(&home, 20).await?;
    assert!(!v.to_string().contains("SECRET-KEY"), "{v}");
    assert_eq!(v["names"], json!(["AGENTS.md", "GEMINI.md"]), "{v}");
    assert_eq!(files, [row("project", "ws/GEMINI.md", "project")], "{v}");
    let (_, out, err) = home.gemctl_run(&["config", "check"])?;
    let said = format!("{out}{err}");
    assert!(
        said.contains("context.fileName \"../secret.md\" is a path, not a file name"),
        "{said}"
    );
    Ok(())
}
