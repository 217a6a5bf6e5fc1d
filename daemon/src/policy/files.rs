//! Where a session's policy files are, and reading them with each file's last good rules kept.
//!
//! Tiers and places (Gemini CLI's, COMPAT §8): workspace `<workspace>/.gemini/policies` (only
//! in a trusted folder that is not the home, and only as the user accepted it: `accept.rs`;
//! an accepted file that does not parse gives nothing, never rules of an earlier version),
//! user `~/.gemini/policies` — or the user's or system settings' `policyPaths`, which replace
//! it (a workspace's are dropped when its settings are read: `config/merge.rs`) — and admin: Gemini
//! CLI's system folder (`/etc/gemini-cli/policies`, macOS `/Library/Application
//! Support/GeminiCli/policies`, whatever `GEMINI_CLI_SYSTEM_SETTINGS_PATH` says) and the
//! system settings file's `adminPolicyPaths` (only its: Gemini CLI reads them from every
//! scope's settings; and, as in Gemini CLI, not at all while the system folder holds a
//! `.toml`). An admin place is refused when others than its owner may write it (or its owner
//! is neither root nor this user), and so are `adminPolicyPaths` when the system settings
//! file or its folder is (Gemini CLI skips such a system settings file whole). A place is a directory, whose `*.toml` files are read in
//! name order (not recursively), or one `.toml` file. A file that stops parsing (an editor mid-save) keeps its last good
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
use super::accept::{Acceptances, Standing, not_loaded, snapshot};
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

/// Gemini CLI's system policies folder (`Storage.getSystemPoliciesDir`): fixed per platform,
/// whatever `GEMINI_CLI_SYSTEM_SETTINGS_PATH` says.
pub(crate) fn system_policies() -> PathBuf {
    PathBuf::from(if cfg!(target_os = "macos") {
        "/Library/Application Support/GeminiCli/policies"
    } else if cfg!(windows) {
        r"C:\ProgramData\gemini-cli\policies"
    } else {
        "/etc/gemini-cli/policies"
    })
}

/// A session's policy places, lowest tier first, and what is wrong in how they are named.
pub(crate) fn places(
    paths: &ConfigPaths,
    workspace: &Path,
    trusted: bool,
    settings: &Value,
) -> (Vec<Place>, Vec<Diagnostic>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    // In the home, the workspace's `.gemini` is the user's own: its policies are the user tier.
    if trusted && paths.workspace_settings(workspace).is_some() {
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
        for path in configured {
            if std::fs::symlink_metadata(&path).is_err() {
                let mut d = Diagnostic::error(
                    &path,
                    "policyPaths names it and it does not exist: no policy file of it is read, \
                     and policyPaths replaces ~/.gemini/policies, so that folder is not read \
                     either"
                        .to_owned(),
                );
                d.severity = Severity::Warning;
                problems.push(d);
            }
            out.push(Place { path, tier: Tier::User });
        }
    }
    let system = system_policies();
    out.push(Place { path: system.clone(), tier: Tier::Admin });
    let (admin, admin_problems) = admin_paths(paths);
    problems.extend(admin_problems);
    if !admin.is_empty() {
        if has_toml(&system) {
            let mut d = Diagnostic::error(
                &paths.system,
                format!(
                    "its adminPolicyPaths are not read: system policies are already defined in \
                     {} (as Gemini CLI does)",
                    system.display()
                ),
            );
            d.severity = Severity::Warning;
            problems.push(d);
        } else {
            out.extend(admin.into_iter().map(|path| Place { path, tier: Tier::Admin }));
        }
    }
    (out, problems)
}

fn has_toml(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".toml"))
}

/// `adminPolicyPaths` of the system settings file, and only of it: Gemini CLI takes them from
/// every scope's settings (a workspace's too), which would let a repository write admin-tier
/// rules. `~` is the home; a relative path is the system settings file's folder's.
fn admin_paths(paths: &ConfigPaths) -> (Vec<PathBuf>, Vec<Diagnostic>) {
    use crate::config::files::{FileRead, read_object};
    if !paths.system.exists() {
        return (vec![], vec![]);
    }
    if let Some(why) = insecure(&paths.system)
        .or_else(|| paths.system.parent().and_then(insecure).map(|w| format!("its folder: {w}")))
    {
        let why = format!(
            "its adminPolicyPaths are not read: {why} (Gemini CLI skips such a system settings \
             file)"
        );
        return (vec![], vec![Diagnostic::error(&paths.system, why)]);
    }
    let value = match read_object(&paths.system) {
        FileRead::Missing => return (vec![], vec![]),
        FileRead::Parsed { value, .. } => value,
        FileRead::Failed(d) => {
            let why = format!("its adminPolicyPaths cannot be read, so none is: {}", d.message);
            return (vec![], vec![Diagnostic::error(&paths.system, why)]);
        }
    };
    let base = paths.system.parent().unwrap_or(Path::new("/"));
    let list = value.get("adminPolicyPaths").and_then(Value::as_array);
    let found = list.into_iter().flatten().filter_map(Value::as_str).map(|p| {
        if p == "~" {
            paths.home.clone()
        } else if let Some(rest) = p.strip_prefix("~/") {
            paths.home.join(rest)
        } else {
            base.join(p)
        }
    });
    (found.collect(), vec![])
}

/// Why an admin directory (or the system settings file) cannot be trusted, if it cannot.
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
    /// What the user accepted of each workspace's policy folder; none: no workspace's loads.
    pub(crate) accepted: Option<Acceptances>,
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
    pub(crate) fn with_store(store: Store, accepted: Option<Acceptances>) -> Self {
        Self { last_good: Mutex::default(), store: Some(store), accepted }
    }

    /// The rules of every place, and what is wrong in them (a missing place is no problem).
    pub(crate) fn read(&self, places: &[Place]) -> Read {
        let mut out = Read::default();
        for place in places {
            if place.tier == Tier::Workspace {
                self.workspace(place, &mut out);
                continue;
            }
            if place.tier == Tier::Admin
                && let Some(why) = insecure(&place.path)
            {
                out.problems.push(Diagnostic::error(
                    &place.path,
                    format!("admin policies are not read: {why}"),
                ));
                continue;
            }
            let files = match std::fs::metadata(&place.path) {
                Err(_) => continue,
                Ok(m) if m.is_dir() => {
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
                    out.problems.push(Diagnostic::error(&place.path, "a policy path is a directory or a .toml file; this is neither, so it is not read".to_owned()));
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
        self.file_read(file, tier, read_input(file), true, out);
    }

    /// A trusted workspace's folder: its files as read once, loaded only when they are what
    /// the user accepted (`accept.rs`).
    fn workspace(&self, place: &Place, out: &mut Read) {
        let Some(workspace) = place.path.parent().and_then(Path::parent) else { return };
        let snap = snapshot(workspace);
        out.problems.extend(snap.refused.iter().cloned());
        let standing = match &self.accepted {
            Some(acc) => acc.standing(&workspace.display().to_string(), &snap),
            None if snap.files.is_empty() => return,
            None => Standing {
                state: geminid_protocol::policy::WorkspacePolicyState::New,
                reason: "geminid has no place to keep their acceptance".to_owned(),
                files: vec![],
            },
        };
        if standing.loads() {
            for (_, path, text) in snap.files {
                self.file_read(&path, Tier::Workspace, Ok(Some(text)), false, out);
            }
        } else if standing.state != geminid_protocol::policy::WorkspacePolicyState::None {
            out.problems.push(not_loaded(&snap, &standing));
        }
    }

    /// One file's rules as `read` gives its text; `keep_last`: a file that gives nothing now
    /// keeps its last good rules (not for an accepted workspace file: what loads of it is only
    /// ever the text accepted).
    fn file_read(
        &self,
        file: &Path,
        tier: Tier,
        read: Result<Option<String>, InputError>,
        keep_last: bool,
        out: &mut Read,
    ) {
        let lock = || self.last_good.lock();
        // What is no file at all (a directory, a FIFO named `.toml`) is not read and refuses
        // nothing; a file that does not parse or cannot be read guards calls.
        let mut guards = true;
        let why = match read {
            Ok(None) => return,
            Ok(Some(text)) => {
                if let Some(p) = lock().get(file).filter(|p| p.text == text) {
                    out.problems.extend(p.problems.iter().cloned());
                    out.files.push(p.rules.clone());
                    return;
                }
                let loaded = load(&file.display().to_string(), &text, tier);
                if !loaded.unreadable {
                    if keep_last {
                        self.keep(file, &text);
                    }
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
                Some(Diagnostic::error(file, why))
            }
            Err(InputError::Io(e)) => {
                Some(Diagnostic::error(file, format!("it cannot be read: {e}")))
            }
            // Being rewritten: its last good rules stay in force, or with none known it
            // guards calls as a file that does not parse does.
            Err(InputError::Changing(why)) => Some(Diagnostic::error(file, why)),
        };
        if !keep_last {
            if let Some(mut d) = why {
                d.message.push_str(
                    "; nothing of it is loaded (a workspace policy file's rules are only ever \
                     those of the text accepted, never an earlier version's)",
                );
                out.problems.push(d);
            }
            return;
        }
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

#[cfg(test)]
pub(super) mod tests;
