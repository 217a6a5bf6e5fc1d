//! A skill folder's resources as text, in the shape Gemini CLI gives them on activation: read
//! breadth first up to 200 entries, files before folders, names in order, `node_modules`,
//! `.git`, `dist` and `__pycache__` shown but not entered, links neither shown nor followed
//! (so a link loop costs nothing).

use std::path::Path;

/// Entries shown at most.
pub(crate) const MAX_ITEMS: usize = 200;
const MORE: &str = "...";
const NOT_ENTERED: [&str; 4] = ["node_modules", ".git", "dist", "__pycache__"];

#[derive(Debug, Default)]
struct Node {
    name: String,
    files: Vec<String>,
    folders: Vec<usize>,
    not_entered: bool,
    more_files: bool,
    more_folders: bool,
}

/// The tree of `dir` as text, or a one-line error when it cannot be read.
pub(crate) fn render(dir: &Path) -> String {
    let shown = dir.display();
    let sep = std::path::MAIN_SEPARATOR;
    let mut nodes = vec![Node::default()];
    let mut queue = std::collections::VecDeque::from([(0usize, dir.to_path_buf())]);
    let mut count = 0usize;
    while let Some((at, path)) = queue.pop_front() {
        if count >= MAX_ITEMS {
            continue;
        }
        let mut entries: Vec<(String, std::fs::FileType)> = match std::fs::read_dir(&path) {
            Ok(rd) => rd
                .filter_map(Result::ok)
                .filter_map(|e| {
                    Some((e.file_name().to_string_lossy().into_owned(), e.file_type().ok()?))
                })
                .collect(),
            Err(e) if at == 0 => {
                return format!("Error: could not read directory \"{shown}\": {e}");
            }
            Err(_) => continue,
        };
        entries.sort_by(|a, b| {
            a.0.to_lowercase().cmp(&b.0.to_lowercase()).then_with(|| a.0.cmp(&b.0))
        });
        for (name, kind) in &entries {
            if !kind.is_file() {
                continue;
            }
            if count >= MAX_ITEMS {
                nodes[at].more_files = true;
                break;
            }
            nodes[at].files.push(name.clone());
            count += 1;
        }
        for (name, kind) in &entries {
            if !kind.is_dir() {
                continue;
            }
            if count >= MAX_ITEMS {
                nodes[at].more_folders = true;
                break;
            }
            let not_entered = NOT_ENTERED.contains(&name.as_str());
            nodes.push(Node { name: name.clone(), not_entered, ..Node::default() });
            let child = nodes.len() - 1;
            nodes[at].folders.push(child);
            count += 1;
            if !not_entered {
                queue.push_back((child, path.join(name)));
            }
        }
    }
    let mut lines = Vec::new();
    format(&nodes, 0, "", true, true, &mut lines);
    let truncated = nodes.iter().any(|n| n.more_files || n.more_folders || n.not_entered);
    let mut summary = format!("At most {MAX_ITEMS} entries (files and folders) are shown.");
    if truncated {
        summary.push_str(&format!(
            " An entry ending in {MORE} holds more than is shown: a folder not entered, or \
             entries past the limit."
        ));
    }
    format!("{summary}\n\n{shown}{sep}\n{}", lines.join("\n"))
}

fn format(nodes: &[Node], at: usize, indent: &str, last: bool, root: bool, out: &mut Vec<String>) {
    let node = &nodes[at];
    let sep = std::path::MAIN_SEPARATOR;
    if !root {
        let connector = if last { "└───" } else { "├───" };
        let more = if node.not_entered { MORE } else { "" };
        out.push(format!("{indent}{connector}{}{sep}{more}", node.name));
    }
    let inner = if root {
        String::new()
    } else {
        format!("{indent}{}", if last { "    " } else { "│   " })
    };
    let no_folders_after = node.folders.is_empty() && !node.more_folders;
    for (i, f) in node.files.iter().enumerate() {
        let last_one = i + 1 == node.files.len() && no_folders_after && !node.more_files;
        out.push(format!("{inner}{}{f}", if last_one { "└───" } else { "├───" }));
    }
    if node.more_files {
        out.push(format!("{inner}{}{MORE}", if no_folders_after { "└───" } else { "├───" }));
    }
    for (i, &child) in node.folders.iter().enumerate() {
        let last_one = i + 1 == node.folders.len() && !node.more_folders;
        format(nodes, child, &inner, last_one, false, out);
    }
    if node.more_folders {
        out.push(format!("{inner}└───{MORE}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_then_folders_links_skipped() -> anyhow::Result<()> {
        let t = tempfile::tempdir()?;
        let d = t.path();
        std::fs::write(d.join("SKILL.md"), "x")?;
        std::fs::create_dir_all(d.join("scripts"))?;
        std::fs::write(d.join("scripts").join("run.sh"), "x")?;
        std::fs::create_dir_all(d.join("node_modules").join("m"))?;
        std::fs::write(d.join("b.txt"), "x")?;
        #[cfg(unix)]
        std::os::unix::fs::symlink(d, d.join("loop"))?;
        let text = render(d);
        let want = format!(
            "At most 200 entries (files and folders) are shown. An entry ending in ... holds more \
             than is shown: a folder not entered, or entries past the limit.\n\n\
             {}/\n├───b.txt\n├───SKILL.md\n├───node_modules/...\n└───scripts/\n    └───run.sh",
            d.display()
        );
        assert_eq!(text, want);
        Ok(())
    }

    #[test]
    fn the_limit_is_kept() -> anyhow::Result<()> {
        let t = tempfile::tempdir()?;
        for i in 0..250 {
            std::fs::write(t.path().join(format!("f{i:03}")), "")?;
        }
        let text = render(t.path());
        assert_eq!(text.lines().filter(|l| l.contains("───f")).count(), MAX_ITEMS);
        assert!(text.ends_with("└───..."), "{text}");
        Ok(())
    }
}
