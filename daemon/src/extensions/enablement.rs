//! Which extensions are enabled where (COMPAT §6.3): `~/.gemini/extensions/extension-enablement.json`
//! holds, per extension, a list of rules `[!]/a/b/[*]`; an extension is enabled unless a rule
//! matching the workspace says otherwise, and the last matching rule wins. A trailing `*`
//! takes in subdirectories. Writing a rule drops the ones it conflicts with or makes redundant,
//! as Gemini CLI does, so both programs read and write the same file.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// The file's name, in `~/.gemini/extensions`.
pub(crate) const FILE: &str = "extension-enablement.json";

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// `/a/b/`: always with a leading and trailing slash.
    base: String,
    disable: bool,
    subdirs: bool,
}

/// `a\b` → `/a/b/`: forward slashes, one leading and one trailing.
fn slashed(path: &str) -> String {
    let mut s = path.replace('\\', "/");
    if !s.starts_with('/') {
        s.insert(0, '/');
    }
    if !s.ends_with('/') {
        s.push('/');
    }
    s
}

impl Rule {
    /// A rule as given to `enable`/`disable` (`!` for a disable).
    fn from_input(input: &str, subdirs: bool) -> Self {
        let (disable, rest) = input.strip_prefix('!').map_or((false, input), |r| (true, r));
        Self { base: slashed(rest), disable, subdirs }
    }

    /// A rule as the file writes it.
    fn from_file(text: &str) -> Self {
        let (disable, rest) = text.strip_prefix('!').map_or((false, text), |r| (true, r));
        let (base, subdirs) = rest.strip_suffix('*').map_or((rest, false), |b| (b, true));
        Self { base: base.to_owned(), disable, subdirs }
    }

    fn output(&self) -> String {
        format!(
            "{}{}{}",
            if self.disable { "!" } else { "" },
            self.base,
            if self.subdirs { "*" } else { "" }
        )
    }

    /// Gemini CLI's glob: regex characters escaped, each `*` (with the slash before it, if
    /// any) an optional `(/.*)`, the whole anchored.
    fn regex(&self) -> Option<regex::Regex> {
        let glob = format!("{}{}", self.base, if self.subdirs { "*" } else { "" });
        let mut re = String::from("^");
        let mut chars = glob.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '/' if chars.peek() == Some(&'*') => {
                    chars.next();
                    re.push_str("(/.*)?");
                }
                '*' => re.push_str("(.*)?"),
                '.' | '+' | '?' | '^' | '$' | '{' | '}' | '(' | ')' | '|' | '[' | ']' | '\\' => {
                    re.push('\\');
                    re.push(c);
                }
                c => re.push(c),
            }
        }
        re.push('$');
        regex::Regex::new(&re).ok()
    }

    fn matches(&self, path: &str) -> bool {
        self.regex().is_some_and(|r| r.is_match(path))
    }

    fn conflicts_with(&self, other: &Self) -> bool {
        self.base == other.base && (self.subdirs != other.subdirs || self.disable != other.disable)
    }

    fn is_child_of(&self, parent: &Self) -> bool {
        parent.subdirs && parent.matches(&self.base)
    }
}

/// The file's contents: extension name to its rules, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Enablement {
    rules: BTreeMap<String, Vec<String>>,
}

impl Enablement {
    /// From the file's JSON; entries that are not `{ "overrides": [strings] }` are ignored,
    /// as Gemini CLI ignores a file that fails its schema.
    pub(crate) fn from_value(v: &Value) -> Self {
        let rules = v
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(name, entry)| {
                let list = entry.get("overrides")?.as_array()?;
                let rules: Option<Vec<String>> =
                    list.iter().map(|r| r.as_str().map(str::to_owned)).collect();
                Some((name.clone(), rules?))
            })
            .collect();
        Self { rules }
    }

    /// As the file holds it.
    pub(crate) fn to_value(&self) -> Value {
        let map = self
            .rules
            .iter()
            .map(|(name, rules)| (name.clone(), serde_json::json!({ "overrides": rules })))
            .collect();
        Value::Object(map)
    }

    /// Whether `name` is enabled in `workspace` (enabled by default; the last matching rule
    /// wins).
    pub(crate) fn is_enabled(&self, name: &str, workspace: &Path) -> bool {
        let path = slashed(&workspace.to_string_lossy());
        let mut enabled = true;
        for rule in self.rules.get(name).into_iter().flatten().map(|r| Rule::from_file(r)) {
            if rule.matches(&path) {
                enabled = !rule.disable;
            }
        }
        enabled
    }

    /// The rules written for `name`.
    pub(crate) fn rules(&self, name: &str) -> &[String] {
        self.rules.get(name).map_or(&[], Vec::as_slice)
    }

    /// Enable (or, with `disable`, disable) `name` at `scope` (and below it with `subdirs`):
    /// the new rule is added last, and the rules it conflicts with, repeats or covers go.
    pub(crate) fn set(&mut self, name: &str, enabled: bool, subdirs: bool, scope: &Path) {
        let input = format!("{}{}", if enabled { "" } else { "!" }, scope.to_string_lossy());
        let new = Rule::from_input(&input, subdirs);
        let list = self.rules.entry(name.to_owned()).or_default();
        list.retain(|r| {
            let old = Rule::from_file(r);
            !(old.conflicts_with(&new) || old == new || old.is_child_of(&new))
        });
        list.push(new.output());
    }

    /// Forget `name` (uninstall).
    pub(crate) fn remove(&mut self, name: &str) -> bool {
        self.rules.remove(name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gemini CLI's `extensionEnablement.test.ts`, as data: the calls made, then the answers
    /// `isEnabled` must give.
    enum Step {
        Enable(bool, &'static str),
        Disable(bool, &'static str),
    }
    use Step::{Disable, Enable};

    /// (what, the calls, (path, enabled) answers).
    type EnabledCase = (&'static str, &'static [Step], &'static [(&'static str, bool)]);
    /// (what, the calls, rules present, rules absent).
    type RulesCase =
        (&'static str, &'static [Step], &'static [&'static str], &'static [&'static str]);

    fn run(steps: &[Step]) -> Enablement {
        let mut e = Enablement::default();
        for s in steps {
            match s {
                Enable(sub, p) => e.set("ext-test", true, *sub, Path::new(p)),
                Disable(sub, p) => e.set("ext-test", false, *sub, Path::new(p)),
            }
        }
        e
    }

    #[test]
    fn is_enabled_gives_gemini_clis_answers() {
        let cases: &[EnabledCase] = &[
            ("not configured", &[], &[("/any/path", true)]),
            ("no override matches", &[Disable(false, "/another/path")], &[("/any/path", true)]),
            (
                "enable by an override",
                &[Disable(true, "/"), Enable(true, "/home/user/projects/")],
                &[("/home/user/projects/my-app", true)],
            ),
            (
                "disable by an override",
                &[Enable(true, "/"), Disable(true, "/home/user/projects/")],
                &[("/home/user/projects/my-app", false)],
            ),
            (
                "last match wins (enable)",
                &[
                    Disable(true, "/home/user/projects/"),
                    Enable(false, "/home/user/projects/my-app"),
                ],
                &[("/home/user/projects/my-app", true)],
            ),
            (
                "last match wins (disable)",
                &[
                    Enable(true, "/home/user/projects/"),
                    Disable(false, "/home/user/projects/my-app"),
                ],
                &[("/home/user/projects/my-app", false)],
            ),
            (
                "overlapping rules",
                &[
                    Enable(true, "/home/user/projects"),
                    Disable(false, "/home/user/projects/my-app"),
                ],
                &[
                    ("/home/user/projects/my-app", false),
                    ("/home/user/projects/something-else", true),
                ],
            ),
            (
                "with subdirs",
                &[Disable(true, "/"), Enable(true, "/path/to/dir")],
                &[
                    ("/path/to/dir/", true),
                    ("/path/to/dir/sub/", true),
                    ("/path/to/another/", false),
                ],
            ),
            (
                "without subdirs",
                &[Disable(true, "/*"), Enable(false, "/path/to/dir")],
                &[("/path/to/dir", true), ("/path/to/dir/sub", false)],
            ),
            (
                "a more specific enable",
                &[Disable(true, "/Users/chrstn"), Enable(true, "/Users/chrstn/gemini-cli")],
                &[("/Users/chrstn/gemini-cli", true)],
            ),
            (
                "no subdirs disabled without includeSubdirs",
                &[Disable(false, "/Users/chrstn")],
                &[("/Users/chrstn/gemini-cli", true)],
            ),
        ];
        for (what, steps, answers) in cases {
            let e = run(steps);
            for (path, want) in *answers {
                assert_eq!(e.is_enabled("ext-test", Path::new(path)), *want, "{what}: {path}");
            }
        }
    }

    #[test]
    fn writes_the_rules_gemini_cli_writes() {
        let cases: &[RulesCase] = &[
            ("a glob with subdirs", &[Enable(true, "/path/to/dir")], &["/path/to/dir/*"], &[]),
            (
                "no glob without",
                &[Enable(false, "/path/to/dir")],
                &["/path/to/dir/"],
                &["/path/to/dir/*"],
            ),
            ("a disable glob", &[Disable(true, "/path/to/dir")], &["!/path/to/dir/*"], &[]),
            (
                "the conflicting glob goes",
                &[Enable(true, "/path/to/dir"), Enable(false, "/path/to/dir")],
                &["/path/to/dir/"],
                &["/path/to/dir/*"],
            ),
            (
                "the conflicting non-glob goes",
                &[Enable(false, "/path/to/dir"), Enable(true, "/path/to/dir")],
                &["/path/to/dir/*"],
                &["/path/to/dir/"],
            ),
            (
                "a disable replaces an enable",
                &[Enable(true, "/path/to/dir"), Disable(false, "/path/to/dir")],
                &["!/path/to/dir/"],
                &["/path/to/dir/*"],
            ),
            (
                "children pruned by an enabled parent",
                &[
                    Enable(false, "/path/to/dir/subdir1"),
                    Disable(true, "/path/to/dir/subdir2"),
                    Enable(false, "/path/to/another/dir"),
                    Enable(true, "/path/to/dir"),
                ],
                &["/path/to/dir/*", "/path/to/another/dir/"],
                &["/path/to/dir/subdir1/", "!/path/to/dir/subdir2/*"],
            ),
            (
                "children pruned by a disabled parent",
                &[
                    Enable(false, "/path/to/dir/subdir1"),
                    Disable(true, "/path/to/dir/subdir2"),
                    Enable(false, "/path/to/another/dir"),
                    Disable(true, "/path/to/dir"),
                ],
                &["!/path/to/dir/*", "/path/to/another/dir/"],
                &["/path/to/dir/subdir1/", "!/path/to/dir/subdir2/*"],
            ),
            (
                "children kept without subdirs",
                &[Enable(false, "/path/to/dir/subdir1"), Enable(false, "/path/to/dir")],
                &["/path/to/dir/subdir1/", "/path/to/dir/"],
                &[],
            ),
        ];
        for (what, steps, present, absent) in cases {
            let e = run(steps);
            let rules = e.rules("ext-test");
            for p in *present {
                assert!(rules.iter().any(|r| r == p), "{what}: {p} missing from {rules:?}");
            }
            for a in *absent {
                assert!(!rules.iter().any(|r| r == a), "{what}: {a} present in {rules:?}");
            }
        }
    }

    #[test]
    fn the_file_round_trips_and_bad_entries_are_ignored() {
        let v = serde_json::json!({
            "a": { "overrides": ["!/x/*"] },
            "b": { "overrides": [1] },
            "c": "nonsense",
        });
        let e = Enablement::from_value(&v);
        assert_eq!(e.to_value(), serde_json::json!({ "a": { "overrides": ["!/x/*"] } }));
        assert!(!e.is_enabled("a", Path::new("/x/y")));
        assert!(e.is_enabled("b", Path::new("/x/y")));
        let mut e = e;
        assert!(e.remove("a"));
        assert!(!e.remove("a"));
        assert!(e.is_enabled("a", Path::new("/x/y")));
    }
}
