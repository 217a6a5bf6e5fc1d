//! Where a session's policy files are, and reading them with each file's last good rules kept.
//!
//! Tiers and places (Gemini CLI's, COMPAT §8): workspace `<workspace>/.gemini/policies` (only
//! in a trusted folder), user `~/.gemini/policies` — or the settings' `policyPaths`, which
//! replace it — and admin, the `policies` directory beside the system settings file, which is
//! refused when others than its owner may write it (or its owner is neither root nor this
//! user). A place is a directory, whose `*.toml` files are read in name order (not recursively),
//! or one `.toml` file. A file that stops parsing (an editor mid-save) keeps its last good
//! rules, and says why. With a store, a file's last good text outlives the daemon
//! (`store/last_good.rs`, as the settings files' does): a daemon that starts while a policy
//! file does not parse uses the rules an earlier one read, and a file with no good version
//! known at all makes every call of the sessions that read it refused ([`Read::refusing`]),
//! rather than run without its deny rules.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use geminid_protocol::common::{Diagnostic, Severity};
use serde_json::Value;

use super::Tier;
use super::load::load;
use super::rule::Rule;
use crate::clock;
use crate::config::ConfigPaths;
use crate::config::files::{InputError, read_input};
use crate::store::{LastGood, Store};

/// A place policy files are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// A directory or a `.toml` file.
    pub path: PathBuf,
    /// The tier its rules are in.
    pub tier: Tier,
}

/// A session's policy places, lowest tier first.
pub(crate) fn places(
    paths: &ConfigPaths,
    workspace: &Path,
    trusted: bool,
    settings: &Value,
) -> Vec<Place> {
    let mut out = Vec::new();
    if trusted {
        out.push(Place { path: workspace.join(".gemini").join("policies"), tier: Tier::Workspace });
    }
    let configured: Vec<PathBuf> = settings
        .get("policyPaths")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(PathBuf::from).collect())
        .unwrap_or_default();
    if configured.is_empty() {
        out.push(Place { path: paths.home.join(".gemini").join("policies"), tier: Tier::User });
    } else {
        out.extend(configured.into_iter().map(|path| Place { path, tier: Tier::User }));
    }
    if let Some(dir) = paths.system.parent() {
        out.push(Place { path: dir.join("policies"), tier: Tier::Admin });
    }
    out
}

/// Why an admin directory cannot be trusted, if it cannot.
fn insecure(dir: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(dir).ok()?;
        let me = nix::unistd::getuid().as_raw();
        if m.uid() != 0 && m.uid() != me {
            return Some(format!("it is owned by uid {}, neither root nor this user", m.uid()));
        }
        if m.mode() & 0o022 != 0 {
            return Some(format!(
                "others than its owner may write it (mode {:o}); `chmod go-w {}` fixes that",
                m.mode() & 0o777,
                dir.display()
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    None
}

/// A file's rules as last read well, with the text they came from: the same text is not
/// parsed again (a file of 10,000 rules takes a tenth of a second to read; issue 39).
#[derive(Debug)]
struct Parsed {
    text: String,
    rules: Arc<Vec<Rule>>,
    problems: Vec<Diagnostic>,
    /// Recalled from the store: read well by an earlier daemon at this time (Unix ms).
    earlier_ms: Option<u64>,
}

/// A file's rules an earlier daemon kept, and when it read them (Unix ms).
type Recalled = (Arc<Vec<Rule>>, u64);

/// Reads policy places, keeping each file's last good rules.
#[derive(Debug, Default)]
pub(crate) struct Reader {
    last_good: Mutex<HashMap<PathBuf, Parsed>>,
    /// Where each file's last good text is kept across restarts.
    store: Option<Store>,
}

/// What reading a session's places gave.
#[derive(Debug, Default)]
pub(crate) struct Read {
    /// Each file's rules, in the order the files are read (lowest tier first). A file whose
    /// text has not changed gives the same `Arc` as before.
    pub files: Vec<Arc<Vec<Rule>>>,
    /// Problems, errors first.
    pub problems: Vec<Diagnostic>,
    /// Files that give no rules and have no good version known (they do not parse, and no
    /// daemon read them well before): every call of a session that reads them is refused.
    pub refusing: Vec<Diagnostic>,
}

impl Read {
    /// Every rule, in file order.
    #[cfg(test)]
    pub(crate) fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.files.iter().flat_map(|f| f.iter())
    }
}

impl Reader {
    /// A reader that keeps each file's last good text in `store` too.
    pub(crate) fn with_store(store: Store) -> Self {
        Self { last_good: Mutex::default(), store: Some(store) }
    }

    /// The rules of every place, and what is wrong in them (a missing place is no problem).
    pub(crate) fn read(&self, places: &[Place]) -> Read {
        let mut out = Read::default();
        for place in places {
            let files = match std::fs::metadata(&place.path) {
                Err(_) => continue,
                Ok(m) if m.is_dir() => {
                    if place.tier == Tier::Admin
                        && let Some(why) = insecure(&place.path)
                    {
                        out.problems.push(problem(
                            &place.path,
                            format!("admin policies are not read: {why}"),
                        ));
                        continue;
                    }
                    let mut files: Vec<PathBuf> = std::fs::read_dir(&place.path)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                        .collect();
                    files.sort();
                    files
                }
                Ok(_) if place.path.extension().is_some_and(|x| x == "toml") => {
                    vec![place.path.clone()]
                }
                Ok(_) => {
                    out.problems.push(problem(&place.path, "a policy path is a directory or a .toml file; this is neither, so it is not read".to_owned()));
                    continue;
                }
            };
            for file in files {
                self.file(&file, place.tier, &mut out);
            }
        }
        out.problems.sort_by_key(|d| std::cmp::Reverse(d.severity));
        out
    }

    fn file(&self, file: &Path, tier: Tier, out: &mut Read) {
        let lock = || self.last_good.lock();
        // What is no file at all (a directory, a FIFO named `.toml`) is not read and refuses
        // nothing; a file that does not parse or cannot be read guards calls.
        let mut guards = true;
        let why = match read_input(file) {
            Ok(None) => return,
            Ok(Some(text)) => {
                if let Some(p) = lock().get(file).filter(|p| p.text == text) {
                    out.problems.extend(p.problems.iter().cloned());
                    out.files.push(p.rules.clone());
                    return;
                }
                let loaded = load(&file.display().to_string(), &text, tier);
                if !loaded.unreadable {
                    self.keep(file, &text);
                    let mut rules = loaded.rules;
                    rules.shrink_to_fit();
                    let rules = Arc::new(rules);
                    out.problems.extend(loaded.problems.iter().cloned());
                    out.files.push(rules.clone());
                    let parsed =
                        Parsed { text, rules, problems: loaded.problems, earlier_ms: None };
                    lock().insert(file.to_owned(), parsed);
                    return;
                }
                // An unreadable file has exactly one problem: where it stops parsing.
                loaded.problems.into_iter().next()
            }
            Err(InputError::Refused(why)) => {
                guards = false;
                Some(problem(file, why))
            }
            Err(InputError::Io(e)) => Some(problem(file, format!("it cannot be read: {e}"))),
            // Being rewritten: its last good rules stay in force, or with none known it
            // guards calls as a file that does not parse does.
            Err(InputError::Changing(why)) => Some(problem(file, why)),
        };
        // The file gives nothing now: its last good rules stay, and the problem says so.
        let last = lock().get(file).map(|p| (p.rules.clone(), p.earlier_ms));
        let Some(mut d) = why else {
            out.files.extend(last.map(|(r, _)| r));
            return;
        };
        let last = match last {
            None if guards => self.recall(file, tier).map(|kept| kept.map(|(r, at)| (r, Some(at)))),
            last => Ok(last),
        };
        match last {
            Ok(Some((r, None))) => {
                d.message =
                    format!("{}; its last good rules ({}) stay in force", d.message, r.len());
                out.files.push(r);
            }
            Ok(Some((r, Some(read_ms)))) => {
                d.message = format!(
                    "{}; its last good rules ({}), as geminid read them at {}, stay in force \
                     (fix it and geminid reloads it)",
                    d.message,
                    r.len(),
                    clock::rfc3339(read_ms)
                );
                out.files.push(r);
            }
            Ok(None) if !guards => {}
            recalled => {
                if let Err(why) = recalled {
                    d.message = format!(
                        "{}; the copy of its last good rules geminid kept cannot be used ({why})",
                        d.message
                    );
                }
                d.message.push_str(
                    "; geminid has no good version of it to use, so every tool call of a \
                     session that reads it is refused until it is fixed (fix it and geminid \
                     reloads it)",
                );
                out.refusing.push(d.clone());
            }
        }
        out.problems.push(d);
    }

    /// Keep `text` as `file`'s last good text across restarts (written only when it changed).
    fn keep(&self, file: &Path, text: &str) {
        let Some(store) = &self.store else { return };
        let key = file.display().to_string();
        if store.last_good(&key).ok().flatten().is_some_and(|k| k.text == text) {
            return;
        }
        let record = LastGood { read_ms: clock::now_ms(), text: text.to_owned() };
        if let Err(e) = store.put_last_good(&key, &record) {
            tracing::warn!(file = %key, error = %e, "cannot keep a policy file's last good rules");
        }
    }

    /// The rules of `file`'s last good text an earlier daemon kept, and when it read them;
    /// why the copy cannot be used when it cannot.
    fn recall(&self, file: &Path, tier: Tier) -> Result<Option<Recalled>, String> {
        let Some(store) = &self.store else { return Ok(None) };
        let key = file.display().to_string();
        let Some(kept) = store.last_good(&key).map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let loaded = load(&key, &kept.text, tier);
        if loaded.unreadable {
            return Err("it does not parse either".to_owned());
        }
        let rules = Arc::new(loaded.rules);
        let parsed = Parsed {
            text: kept.text,
            rules: rules.clone(),
            problems: loaded.problems,
            earlier_ms: Some(kept.read_ms),
        };
        self.last_good.lock().insert(file.to_owned(), parsed);
        Ok(Some((rules, kept.read_ms)))
    }
}

fn problem(path: &Path, message: String) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        file: path.display().to_string(),
        line: None,
        column: None,
        message,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const RULE: &str = "[[rule]]\ntoolName = \"a\"\ndecision = \"allow\"\npriority = 1\n";

    /// Configuration paths of a home under `root` (system settings in `root/etc`).
    pub(in crate::policy) fn paths(root: &Path) -> ConfigPaths {
        ConfigPaths::from_env(|k| match k {
            "HOME" => Some(root.join("home").into()),
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH" => Some(root.join("etc/settings.json").into()),
            _ => None,
        })
        .unwrap()
    }

    #[test]
    fn places_follow_the_tiers_and_policy_paths_replace_the_user_directory() {
        let root = tempfile::tempdir().unwrap();
        let p = paths(root.path());
        let ws = root.path().join("ws");
        let got = places(&p, &ws, true, &serde_json::json!({}));
        let want = [
            (ws.join(".gemini/policies"), Tier::Workspace),
            (root.path().join("home/.gemini/policies"), Tier::User),
            (root.path().join("etc/policies"), Tier::Admin),
        ];
        assert_eq!(got.iter().map(|p| (p.path.clone(), p.tier)).collect::<Vec<_>>(), want);
        let got = places(&p, &ws, false, &serde_json::json!({"policyPaths": ["/x/mine.toml"]}));
        assert_eq!(got[0], Place { path: "/x/mine.toml".into(), tier: Tier::User });
        assert_eq!(got.len(), 2, "no workspace tier in an untrusted folder");
    }

    #[test]
    fn a_broken_file_keeps_its_last_good_rules_and_what_is_not_a_file_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("policies");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a.toml"), RULE).unwrap();
        std::fs::write(dir.join("notes.txt"), "not policy").unwrap();
        std::fs::create_dir(dir.join("dir.toml")).unwrap();
        nix::unistd::mkfifo(
            &dir.join("fifo.toml"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let place = [Place { path: dir.clone(), tier: Tier::User }];
        let reader = Reader::default();
        let Read { files, problems, .. } = reader.read(&place);
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].len(), 1);
        let text = format!("{problems:#?}");
        assert!(text.contains("dir.toml") && text.contains("fifo.toml"), "{text}");
        assert!(text.contains("not a regular file"), "{text}");
        // Unchanged, the file is not parsed again; changed, it is.
        assert!(Arc::ptr_eq(&reader.read(&place).files[0], &files[0]));
        std::fs::write(dir.join("a.toml"), RULE.replace("\"a\"", "\"b\"")).unwrap();
        let edited = reader.read(&place);
        assert!(!Arc::ptr_eq(&edited.files[0], &files[0]));
        assert_eq!(edited.files[0][0].tool_name, "b");
        let files = edited.files;
        // An editor mid-save: the file does not parse; its rules stay.
        std::fs::write(dir.join("a.toml"), "[[rule]\ntoolName = ").unwrap();
        let again = reader.read(&place);
        let problems = again.problems;
        assert!(Arc::ptr_eq(&again.files[0], &files[0]), "{problems:#?}");
        let broken = problems.iter().find(|d| d.file.ends_with("a.toml")).unwrap();
        assert!(broken.message.contains("last good rules (1) stay in force"), "{}", broken.message);
        assert_eq!(broken.line, Some(1));
        // A fresh reader has no last good rules to keep.
        assert_eq!(Reader::default().read(&place).rules().count(), 0);
    }

    #[test]
    fn an_admin_directory_others_may_write_is_not_read() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("admin");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a.toml"), RULE).unwrap();
        let place = [Place { path: dir.clone(), tier: Tier::Admin }];
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(Reader::default().read(&place).rules().count(), 1);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let Read { files, problems, .. } = Reader::default().read(&place);
        assert!(files.is_empty());
        assert!(problems[0].message.contains("chmod go-w"), "{problems:#?}");
        // A single file as a place, and a place that is neither.
        let single = [Place { path: dir.join("a.toml"), tier: Tier::User }];
        assert_eq!(Reader::default().read(&single).rules().count(), 1);
        let odd = [Place { path: dir.join("x.txt"), tier: Tier::User }];
        std::fs::write(dir.join("x.txt"), "").unwrap();
        assert!(Reader::default().read(&odd).problems[0].message.contains("neither"));
    }

    #[test]
    fn a_file_broken_at_start_uses_the_rules_an_earlier_daemon_kept_or_refuses_calls() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("policies");
        std::fs::create_dir(&dir).unwrap();
        let place = [Place { path: dir.clone(), tier: Tier::User }];
        let store = Store::temporary().unwrap();
        std::fs::write(dir.join("a.toml"), RULE).unwrap();
        assert_eq!(Reader::with_store(store.clone()).read(&place).rules().count(), 1);
        // The next daemon starts while the file does not parse: the kept rules hold.
        std::fs::write(dir.join("a.toml"), "[[rule]\ntoolName = ").unwrap();
        let read = Reader::with_store(store.clone()).read(&place);
        assert_eq!(read.rules().count(), 1, "{:#?}", read.problems);
        assert!(read.refusing.is_empty());
        let said = &read.problems[0].message;
        assert!(said.contains("last good rules (1), as geminid read them at"), "{said}");
        // With no good version known, every call is refused, and said with where it breaks.
        let read = Reader::with_store(Store::temporary().unwrap()).read(&place);
        assert_eq!(read.rules().count(), 0);
        assert_eq!(read.refusing.len(), 1);
        assert_eq!(read.refusing[0].line, Some(1));
        assert!(read.refusing[0].message.contains("every tool call"), "{:#?}", read.refusing);
        // A damaged copy is no good version, and says so.
        let key = dir.join("a.toml").display().to_string();
        store.put_last_good_record(&key, b"\xff not a record").unwrap();
        let read = Reader::with_store(store).read(&place);
        assert_eq!(read.refusing.len(), 1);
        assert!(read.refusing[0].message.contains("cannot be used"), "{:#?}", read.refusing);
        // No store (a reader of its own): a broken file refuses too.
        assert_eq!(Reader::default().read(&place).refusing.len(), 1);
        // What is no file refuses nothing.
        std::fs::remove_file(dir.join("a.toml")).unwrap();
        std::fs::create_dir(dir.join("dir.toml")).unwrap();
        assert!(Reader::default().read(&place).refusing.is_empty());
    }
}
