//! The workspace's ignore files, as `@{path}` honours them (Gemini CLI's file filtering):
//! `.geminiignore`, and `.gitignore` when the workspace is a git repository, both at the
//! workspace's top, in git's pattern language: `#` comments, `!` re-includes, a trailing `/`
//! for folders only, a `/` elsewhere anchors the pattern to the top, `*`, `?`, `**` and
//! `[...]`. A file inside an ignored folder stays ignored, as in git.

use std::path::Path;

use regex::Regex;

#[derive(Debug)]
struct Pattern {
    re: Regex,
    negated: bool,
    dirs_only: bool,
}

/// The patterns of a workspace.
#[derive(Debug, Default)]
pub(crate) struct Ignore {
    patterns: Vec<Pattern>,
}

/// A glob as a regex over a `/`-separated relative path.
fn glob_regex(glob: &str, anchored: bool) -> Option<Regex> {
    let mut re = String::from(if anchored { "^" } else { "^(?:.*/)?" });
    let chars: Vec<char> = glob.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                if chars.get(i + 2) == Some(&'/') {
                    re.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    re.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '[' => match chars[i..].iter().position(|c| *c == ']') {
                Some(end) if end > 1 => {
                    let class: String = chars[i + 1..i + end].iter().collect();
                    let class = class.strip_prefix('!').map_or(class.clone(), |c| format!("^{c}"));
                    re.push('[');
                    re.push_str(&class.replace('\\', "\\\\"));
                    re.push(']');
                    i += end + 1;
                    continue;
                }
                _ => re.push_str("\\["),
            },
            '\\' if i + 1 < chars.len() => {
                re.push_str(&regex::escape(&chars[i + 1].to_string()));
                i += 2;
                continue;
            }
            c => re.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    re.push('$');
    Regex::new(&re).ok()
}

impl Ignore {
    /// Patterns from an ignore file's text.
    pub(crate) fn add(&mut self, text: &str) {
        for line in text.lines() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negated, line) = match line.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, line),
            };
            let (dirs_only, line) = match line.strip_suffix('/') {
                Some(rest) => (true, rest),
                None => (false, line),
            };
            let anchored = line.contains('/');
            let line = line.strip_prefix('/').unwrap_or(line);
            if let Some(re) = glob_regex(line, anchored) {
                self.patterns.push(Pattern { re, negated, dirs_only });
            }
        }
    }

    /// The ignore files of `workspace`.
    pub(crate) fn of(workspace: &Path) -> Self {
        let mut out = Self::default();
        let mut read = |name: &str| {
            if let Ok(Some(text)) = crate::config::files::read_input(&workspace.join(name)) {
                out.add(&text);
            }
        };
        if workspace.join(".git").exists() {
            read(".gitignore");
        }
        read(".geminiignore");
        out
    }

    fn decide(&self, rel: &str, is_dir: bool) -> bool {
        let mut ignored = false;
        for p in &self.patterns {
            if (!p.dirs_only || is_dir) && p.re.is_match(rel) {
                ignored = !p.negated;
            }
        }
        ignored
    }

    /// Whether the file at `rel` (relative to the workspace, `/`-separated) is ignored.
    pub(crate) fn ignores(&self, rel: &str) -> bool {
        if self.patterns.is_empty() {
            return false;
        }
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        for n in 1..parts.len() {
            if self.decide(&parts[..n].join("/"), true) {
                return true;
            }
        }
        self.decide(&parts.join("/"), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_pattern_rules() {
        let mut ig = Ignore::default();
        ig.add("# comment\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/**/draft-?.md\nsecret[0-9]\n");
        for (path, want) in [
            ("a.log", true),
            ("deep/x/a.log", true),
            ("keep.log", false),
            ("build/out.bin", true),
            ("src/build/out.bin", true),
            ("build", false),
            ("top.txt", true),
            ("sub/top.txt", false),
            ("docs/draft-1.md", true),
            ("docs/a/b/draft-2.md", true),
            ("docs/draft-10.md", false),
            ("secret7", true),
            ("secretx", false),
            ("notes.txt", false),
        ] {
            assert_eq!(ig.ignores(path), want, "{path}");
        }
    }
}
