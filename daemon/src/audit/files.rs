//! The audit log's files: one JSON line per record (`{"v": 1, …the record}`), in files of
//! [`Files::per_file`] records named by their first record's number
//! (`<data dir>/audit/00000000000000012501.jsonl`). A file is deleted as soon as every record
//! in it is past the bound, so the directory never holds more than the bound and one file's
//! worth: the disk a log of `keep` records takes is bounded by construction, which sled's
//! tree was not (it wandered 9.5–15.5 MiB for 10,000 records, growing slowly with calls).
//!
//! Appends go to a buffer; [`Files::sync`] writes it out and syncs the file (the log calls it
//! half a second after a record, with the records since, and at a clean stop). A line a crash
//! cut short is skipped when read, and the next record starts a new file after it.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

use geminid_protocol::policy::AuditRecord;

/// Version of the records' lines.
const LINE_VERSION: u64 = 1;

/// Records are written out when this much is buffered (and at each sync, 500 ms after a
/// record): at 20,000 calls a second, 8 KiB (`BufWriter`'s default) was a write every 25
/// records, 1.4 % of the daemon's time at 32 calls in flight (perf, BENCHMARKS.md).
const WRITE_BUFFER: usize = 64 * 1024;
const SUFFIX: &str = ".jsonl";

/// The log's files in one directory.
#[derive(Debug)]
pub(super) struct Files {
    dir: PathBuf,
    keep: u64,
    per_file: u64,
    state: parking_lot::Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Each file's first record number, oldest first.
    firsts: Vec<u64>,
    /// The file appended to: its first record number, writer and how many records it has.
    current: Option<(u64, BufWriter<File>, u64)>,
}

fn name(first: u64) -> String {
    format!("{first:020}{SUFFIX}")
}

/// The files in `dir` by first record number, oldest first.
fn listed(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut firsts: Vec<u64> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(SUFFIX)?.parse().ok())
        .collect();
    firsts.sort_unstable();
    Ok(firsts)
}

/// A line's record, or why it cannot be read.
fn parse(line: &[u8]) -> Result<AuditRecord, String> {
    let mut v: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(line).map_err(|e| e.to_string())?;
    match v.remove("v").and_then(|v| v.as_u64()) {
        Some(n) if n <= LINE_VERSION => {}
        other => return Err(format!("line version {other:?}, this build reads {LINE_VERSION}")),
    }
    serde_json::from_value(serde_json::Value::Object(v)).map_err(|e| e.to_string())
}

/// Record `rec` as its line: `{"v":N,` and then the record's own fields, serialized once
/// (on the call path: no `Value` built in between).
fn line_of(rec: &AuditRecord) -> std::io::Result<Vec<u8>> {
    let body = serde_json::to_vec(rec)?;
    let Some(fields) = body.strip_prefix(b"{") else {
        return Err(std::io::Error::other("an audit record is not an object"));
    };
    let head = format!("{{\"v\":{LINE_VERSION}");
    let mut line = Vec::with_capacity(head.len() + body.len() + 2);
    line.extend_from_slice(head.as_bytes());
    if fields != b"}" {
        line.push(b',');
    }
    line.extend_from_slice(fields);
    line.push(b'\n');
    Ok(line)
}

impl Files {
    /// The files in `dir` (created owner-only if missing), and the last record's number (0
    /// when there is none). Files wholly past the bound of `keep` are deleted now.
    pub(super) fn open(dir: &Path, keep: u64) -> std::io::Result<(Self, u64)> {
        std::fs::create_dir_all(dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let per_file = (keep / 4).max(1);
        let files = Self { dir: dir.to_owned(), keep, per_file, state: Default::default() };
        let firsts = listed(dir)?;
        let mut last = 0;
        for first in firsts.iter().rev() {
            let mut found = None;
            files.lines_newest_first(*first, |r| {
                found = Some(r.seq);
                false
            });
            if let Some(seq) = found {
                last = seq;
                break;
            }
        }
        let mut state = files.state.lock();
        state.firsts = firsts;
        files.forget_past(&mut state, last + 1);
        drop(state);
        Ok((files, last))
    }

    /// A log whose directory could not be opened: every append fails (and is said), nothing
    /// is listed.
    pub(super) fn unopened(dir: &Path, keep: u64) -> Self {
        Self { dir: dir.to_owned(), keep, per_file: (keep / 4).max(1), state: Default::default() }
    }

    /// Delete the files whose every record is older than the bound, for `next` the number of
    /// the next record: a file's records all come before the next file's first.
    fn forget_past(&self, state: &mut State, next: u64) {
        let Some(oldest_kept) = next.checked_sub(self.keep) else { return };
        while state.firsts.len() > 1 && state.firsts[1] <= oldest_kept {
            let first = state.firsts.remove(0);
            if let Err(e) = std::fs::remove_file(self.dir.join(name(first))) {
                tracing::warn!(error = %e, file = first, "an old audit file was not deleted");
            }
        }
    }

    /// Append record `rec` (numbered `rec.seq`, one more than the last).
    pub(super) fn append(&self, rec: &AuditRecord) -> std::io::Result<()> {
        let bytes = line_of(rec)?;
        let mut state = self.state.lock();
        let full = state.current.as_ref().is_none_or(|(_, _, n)| *n >= self.per_file);
        if full {
            if let Some((_, mut w, _)) = state.current.take() {
                w.flush()?;
            }
            let path = self.dir.join(name(rec.seq));
            // The file can be there already only when a crash cut its one line short: the
            // record goes on a line of its own after it.
            let cut = std::fs::read(&path).is_ok_and(|b| !b.is_empty() && !b.ends_with(b"\n"));
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            let mut file = BufWriter::with_capacity(WRITE_BUFFER, file);
            if cut {
                file.write_all(b"\n")?;
            }
            state.current = Some((rec.seq, file, 0));
            if state.firsts.last().is_none_or(|l| *l < rec.seq) {
                state.firsts.push(rec.seq);
            }
            self.forget_past(&mut state, rec.seq + 1);
        }
        if let Some((_, w, n)) = state.current.as_mut() {
            w.write_all(&bytes)?;
            *n += 1;
        }
        Ok(())
    }

    /// Write out what is buffered and sync the file to the disk.
    pub(super) fn sync(&self) -> std::io::Result<()> {
        let mut state = self.state.lock();
        if let Some((_, w, _)) = state.current.as_mut() {
            w.flush()?;
            w.get_ref().sync_data()?;
        }
        Ok(())
    }

    /// Records newest first, from the newest file back, until `take` returns false; only
    /// those within the bound before `next` (the next record's number). Unreadable lines are
    /// skipped.
    pub(super) fn newest_first(&self, next: u64, mut take: impl FnMut(AuditRecord) -> bool) {
        let firsts = {
            let mut state = self.state.lock();
            if let Some((_, w, _)) = state.current.as_mut()
                && let Err(e) = w.flush()
            {
                tracing::warn!(error = %e, "the audit log's last records were not written out");
            }
            state.firsts.clone()
        };
        let oldest = next.saturating_sub(self.keep);
        let mut more = true;
        for first in firsts.iter().rev() {
            self.lines_newest_first(*first, |r| {
                more = r.seq >= oldest && take(r);
                more
            });
            if !more {
                return;
            }
        }
    }

    /// The records of file `first`, newest first, until `take` returns false.
    fn lines_newest_first(&self, first: u64, mut take: impl FnMut(AuditRecord) -> bool) {
        let path = self.dir.join(name(first));
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, path = %path.display(), "an audit file cannot be read");
                return;
            }
        };
        for line in bytes.split(|b| *b == b'\n').rev().filter(|l| !l.is_empty()) {
            match parse(line) {
                Ok(r) => {
                    if !take(r) {
                        return;
                    }
                }
                Err(e) => tracing::warn!(error = %e, file = first, "skipping an audit line"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line is the record's own fields after the line's version, read back as it was.
    #[test]
    fn a_line_is_the_version_and_the_record_read_back_whole() {
        let rec = super::super::noted(7, "fx", "echo", "pins/hold", Some("why".into()));
        let line = line_of(&rec).unwrap();
        assert!(line.starts_with(b"{\"v\":1,\"seq\":7,"), "{}", String::from_utf8_lossy(&line));
        assert_eq!(line.last(), Some(&b'\n'));
        let back = parse(&line[..line.len() - 1]).unwrap();
        assert_eq!(serde_json::to_value(back).unwrap(), serde_json::to_value(rec).unwrap());
    }
}
