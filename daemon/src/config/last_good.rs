//! The loader's memory of each input file: its last good contents, kept while the file stops
//! parsing (an editor mid-save) and for a grace after it disappears (an editor that saves by
//! deleting and writing anew), and given up at once on an explicit reload. With a store, the
//! memory outlives the daemon: a daemon that starts while a file does not parse uses what an
//! earlier one last read of it, and says so. A file that guards calls (the settings scopes,
//! the enablement file) with no good version known at all makes the calls of the sessions
//! that read it refused (`Effective::refusing`), rather than run without the user's hooks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use geminid_protocol::config::{Diagnostic, Severity};
use serde_json::Value;

use super::files::{self, FileRead, parse_object, read_object};
use super::{Loader, VANISH_GRACE};
use crate::clock;
use crate::store::{LastGood, Store};

/// A file's last good contents as the loader keeps them.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    /// Its contents.
    pub value: Value,
    /// Its text.
    pub text: String,
    /// When they were read, Unix ms.
    pub read_ms: u64,
    /// Read by an earlier daemon (recalled from the store), not yet by this one.
    pub earlier: bool,
}

/// What reading one input file gave.
#[derive(Debug)]
pub(super) struct Read {
    /// Whether it exists (or is taken to, in its grace after it disappeared).
    pub exists: bool,
    /// Its contents in effect, and their text.
    pub content: Option<(Value, String)>,
    /// What is wrong with it. When it is `unusable`, the message does not say yet what holds
    /// instead: [`Role`] does.
    problem: Option<Diagnostic>,
    /// It exists but gives nothing: it does not parse and no good version of it is known.
    pub unusable: bool,
}

impl Read {
    /// A file given whole by someone else (an extension's manifest): nothing to say.
    pub(super) fn given() -> Self {
        Self { exists: true, content: None, problem: None, unusable: false }
    }
}

/// What a file is to the configuration, which decides what holds while it gives nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// It guards calls (a settings scope that applies: hooks, `tools.exclude`, `mcp.*`): with
    /// no good version, the calls of the sessions that read it are refused.
    Guards,
    /// `mcp-server-enablement.json`: with no good version it disables no server, so calls
    /// are refused as for [`Role::Guards`].
    Enablement,
    /// `trustedFolders.json`: with no good version, no folder is trusted.
    Trust,
    /// Not applied, or guarding nothing (geminid's own servers file): it is ignored.
    Ignored,
}

impl Role {
    fn instead(self) -> &'static str {
        match self {
            Self::Guards => {
                "geminid has no good version of it to use, so every tool call of a session \
                 that reads it is refused until it is fixed (fix it and geminid reloads it)"
            }
            Self::Enablement => {
                "geminid has no good version of it to use, so until it is fixed it disables no \
                 server and every tool call of a session that reads it is refused (fix it and \
                 geminid reloads it)"
            }
            Self::Trust => "until it is fixed, no folder is trusted",
            Self::Ignored => "the file is ignored until it is fixed",
        }
    }

    /// Whether, with no good version, the calls of a session that reads it are refused.
    pub(super) fn refuses(self) -> bool {
        matches!(self, Self::Guards | Self::Enablement)
    }
}

/// `file:line:col: message`, as a status line or a refusal says a problem.
pub(crate) fn located(d: &Diagnostic) -> String {
    match (d.line, d.column) {
        (Some(l), Some(c)) => format!("{}:{l}:{c}: {}", d.file, d.message),
        (Some(l), None) => format!("{}:{l}: {}", d.file, d.message),
        _ => format!("{}: {}", d.file, d.message),
    }
}

impl Loader {
    /// Keep each file's last good contents in `store` too, so that they outlive the daemon.
    pub(crate) fn with_store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// Read `path`, whose contents must also pass `check`. Every input file goes through
    /// here, so a file that stops parsing (an editor mid-save, a typo) keeps its last good
    /// contents in effect for as long as some are known (read by this daemon, or by an
    /// earlier one and kept in the store).
    pub(super) fn read_checked(
        &self,
        path: &Path,
        check: impl Fn(&Value) -> Result<(), String>,
    ) -> Read {
        let mut cache = self.last_good.lock();
        let mut vanished = self.vanished.lock();
        let mut recalled = self.recalled.lock();
        if !recalled.contains_key(path) {
            let damaged = match self.recall(path, &check) {
                Ok(kept) => {
                    cache.entry(path.to_path_buf()).or_insert(kept);
                    None
                }
                Err(why) => why,
            };
            recalled.insert(path.to_path_buf(), damaged);
        }
        let failed = match read_object(path) {
            FileRead::Missing => {
                if let Some(kept) = cache.get(path).filter(|k| !k.earlier) {
                    let since = *vanished.entry(path.to_path_buf()).or_insert_with(clock::now);
                    if clock::now().saturating_duration_since(since) < VANISH_GRACE {
                        let content = Some((kept.value.clone(), kept.text.clone()));
                        return Read { exists: true, content, problem: None, unusable: false };
                    }
                }
                vanished.remove(path);
                let damaged = recalled.insert(path.to_path_buf(), None).flatten();
                if cache.remove(path).is_some() || damaged.is_some() {
                    self.forget_kept(path);
                }
                return Read { exists: false, content: None, problem: None, unusable: false };
            }
            FileRead::Parsed { value, text } => match check(&value) {
                Ok(()) => {
                    vanished.remove(path);
                    let before = cache.get(path);
                    let same = before.is_some_and(|k| k.text == text);
                    if !same || before.is_some_and(|k| k.earlier) {
                        let read_ms = clock::now_ms();
                        // Written when it changed (a damaged copy is written over then too).
                        if !same {
                            self.keep(path, &LastGood { read_ms, text: text.clone() });
                            recalled.insert(path.to_path_buf(), None);
                        }
                        let kept = Kept {
                            value: value.clone(),
                            text: text.clone(),
                            read_ms,
                            earlier: false,
                        };
                        cache.insert(path.to_path_buf(), kept);
                    }
                    let content = Some((value, text));
                    return Read { exists: true, content, problem: None, unusable: false };
                }
                Err(message) => files::diagnostic(Severity::Error, path, None, message),
            },
            FileRead::Failed(d) => d,
        };
        let mut d = failed;
        let kept = cache.get(path);
        match kept {
            Some(k) if k.earlier => d.message.push_str(&format!(
                "; its last good contents, as geminid read them at {}, stay in effect (fix it \
                 and geminid reloads it)",
                clock::rfc3339(k.read_ms)
            )),
            Some(_) => d.message.push_str("; its last good contents stay in effect"),
            None => {
                if let Some(Some(why)) = recalled.get(path) {
                    d.message.push_str(&format!(
                        "; the copy of its last good contents geminid kept cannot be used ({why})"
                    ));
                }
            }
        }
        let content = kept.map(|k| (k.value.clone(), k.text.clone()));
        let unusable = content.is_none();
        Read { exists: true, content, problem: Some(d), unusable }
    }

    /// Read `path` as a file of this `role`: what [`Loader::read_checked`] gives, its problem
    /// saying what holds instead, noted for `daemon/status`.
    pub(super) fn read_as(
        &self,
        path: &Path,
        check: impl Fn(&Value) -> Result<(), String>,
        role: Role,
    ) -> (Read, Option<Diagnostic>) {
        let read = self.read_checked(path, check);
        let problem = self.settle(path, &read, role);
        (read, problem)
    }

    /// The problem of a file read as `read`, now that its `role` is known; noted for
    /// `daemon/status` (and forgotten there when it has none).
    pub(super) fn settle(&self, path: &Path, read: &Read, role: Role) -> Option<Diagnostic> {
        let mut problem = read.problem.clone();
        if let Some(d) = problem.as_mut().filter(|_| read.unusable) {
            d.message.push_str("; ");
            d.message.push_str(role.instead());
        }
        let mut broken = self.broken.lock();
        match &problem {
            Some(d) => broken.insert(path.to_path_buf(), located(d)),
            None => broken.remove(path),
        };
        problem
    }

    /// What `daemon/status` says about the input files: each that does not parse now (the
    /// files every session reads are read for it), with what holds instead.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let p = &self.paths;
        for (path, role) in [
            (&p.system_defaults, Role::Guards),
            (&p.user, Role::Guards),
            (&p.geminid, Role::Ignored),
            (&p.system, Role::Guards),
            (&p.enablement, Role::Enablement),
        ] {
            self.read_as(path, |_| Ok(()), role);
        }
        self.read_as(&p.agy_servers(), super::agy::check, Role::Ignored);
        self.trust_rules();
        let broken: BTreeMap<PathBuf, String> = self.broken.lock().clone();
        broken.into_values().collect()
    }

    /// The last good contents an earlier daemon kept of `path`: `Ok(None)` when there are
    /// none, `Err(Some(why))` when the kept copy cannot be used.
    fn recall(
        &self,
        path: &Path,
        check: &impl Fn(&Value) -> Result<(), String>,
    ) -> Result<Kept, Option<String>> {
        let store = self.store.as_ref().ok_or(None)?;
        let key = path.display().to_string();
        let record = files::off_loop(|| store.last_good(&key)).map_err(|e| {
            tracing::warn!(file = %key, error = %e, "the kept last good contents cannot be read");
            Some(format!("{e}"))
        })?;
        let Some(LastGood { read_ms, text }) = record else { return Err(None) };
        let value = parse_object(&text).map_err(|(_, why)| Some(why))?;
        check(&value).map_err(Some)?;
        Ok(Kept { value, text, read_ms, earlier: true })
    }

    /// Keep `record` as the last good contents of `path` in the store, if there is one.
    fn keep(&self, path: &Path, record: &LastGood) {
        let Some(store) = &self.store else { return };
        let key = path.display().to_string();
        if let Err(e) = files::off_loop(|| store.put_last_good(&key, record)) {
            tracing::warn!(file = %key, error = %e, "the last good contents were not kept");
        }
    }

    /// Forget the last good contents of `path` in the store (it was deleted).
    fn forget_kept(&self, path: &Path) {
        let Some(store) = &self.store else { return };
        let key = path.display().to_string();
        if let Err(e) = files::off_loop(|| store.remove_last_good(&key)) {
            tracing::warn!(file = %key, error = %e, "the last good contents were not forgotten");
        }
    }

    /// Take every file that is missing now as deleted, without its [`VANISH_GRACE`]: an
    /// explicit reload (`gemctl mcp reload`) says the edits are done, and a file deleted just
    /// before it must not keep its last contents for another second.
    pub(crate) fn take_deletions(&self) {
        let mut cache = self.last_good.lock();
        let mut vanished = self.vanished.lock();
        let mut gone = Vec::new();
        cache.retain(|path, _| {
            let kept = std::fs::symlink_metadata(path).is_ok();
            if !kept {
                vanished.remove(path);
                gone.push(path.clone());
            }
            kept
        });
        for path in gone {
            self.forget_kept(&path);
        }
    }

    /// When a file that disappeared should be read again to count as deleted (the earliest
    /// end of a [`VANISH_GRACE`]), if one is pending.
    pub(crate) fn next_recheck(&self) -> Option<std::time::Instant> {
        let vanished = self.vanished.lock();
        vanished.values().min().map(|since| *since + VANISH_GRACE)
    }
}
