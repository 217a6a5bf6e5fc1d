//! The loader's memory of each input file: its last good contents, kept while the file stops
//! parsing (an editor mid-save) and for a grace after it disappears (an editor that saves by
//! deleting and writing anew), and given up at once on an explicit reload.

use std::path::Path;

use geminid_protocol::config::{Diagnostic, Severity};
use serde_json::Value;

use super::files::{self, FileRead, read_object};
use super::{Loader, VANISH_GRACE};

impl Loader {
    /// Read `path`: (exists, contents in effect, problem).
    pub(super) fn read(&self, path: &Path) -> (bool, Option<(Value, String)>, Option<Diagnostic>) {
        self.read_checked(path, |_| Ok(()), "the file is ignored until it is fixed")
    }

    /// Read `path`, whose contents must also pass `check`: (exists, contents in effect,
    /// problem). Every input file goes through here, so a file that stops parsing (an editor
    /// mid-save, a typo) keeps its last good contents in effect for as long as the daemon has
    /// seen some; `unknown` says what holds before it has.
    pub(super) fn read_checked(
        &self,
        path: &Path,
        check: impl Fn(&Value) -> Result<(), String>,
        unknown: &str,
    ) -> (bool, Option<(Value, String)>, Option<Diagnostic>) {
        let mut cache = self.last_good.lock();
        let mut vanished = self.vanished.lock();
        let failed = match read_object(path) {
            FileRead::Missing => {
                if let Some(kept) = cache.get(path) {
                    let since =
                        *vanished.entry(path.to_path_buf()).or_insert_with(std::time::Instant::now);
                    if since.elapsed() < VANISH_GRACE {
                        return (true, Some(kept.clone()), None);
                    }
                }
                vanished.remove(path);
                cache.remove(path);
                return (false, None, None);
            }
            FileRead::Parsed { value, text } => match check(&value) {
                Ok(()) => {
                    vanished.remove(path);
                    cache.insert(path.to_path_buf(), (value.clone(), text.clone()));
                    return (true, Some((value, text)), None);
                }
                Err(message) => files::diagnostic(Severity::Error, path, None, message),
            },
            FileRead::Failed(d) => d,
        };
        let mut d = failed;
        let kept = cache.get(path).cloned();
        if kept.is_some() {
            d.message.push_str("; its last good contents stay in effect");
        } else {
            d.message.push_str("; ");
            d.message.push_str(unknown);
        }
        (true, kept, Some(d))
    }

    /// Take every file that is missing now as deleted, without its [`VANISH_GRACE`]: an
    /// explicit reload (`gemctl mcp reload`) says the edits are done, and a file deleted just
    /// before it must not keep its last contents for another second.
    pub(crate) fn take_deletions(&self) {
        let mut cache = self.last_good.lock();
        let mut vanished = self.vanished.lock();
        cache.retain(|path, _| {
            let kept = std::fs::symlink_metadata(path).is_ok();
            if !kept {
                vanished.remove(path);
            }
            kept
        });
    }

    /// When a file that disappeared should be read again to count as deleted (the earliest
    /// end of a [`VANISH_GRACE`]), if one is pending.
    pub(crate) fn next_recheck(&self) -> Option<std::time::Instant> {
        let vanished = self.vanished.lock();
        vanished.values().min().map(|since| *since + VANISH_GRACE)
    }
}
