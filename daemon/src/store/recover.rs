//! Opening a database that may be damaged.
//!
//! sled recovers what it can and says nothing: a database truncated, overwritten at its start
//! or whose `db` file is gone opens as an empty (or shorter) one, and the daemon would then
//! write over what was left. Beside the database, `geminid.db.manifest` says how many
//! sessions it held at least (raised after a flush, lowered before a delete, so it never
//! counts one the disk does not hold). A database that holds fewer, that sled cannot open,
//! or whose file is gone is damaged: it is moved aside into `damaged-<time>/`, what could
//! still be read is carried over into a fresh one, and the loss is reported.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Open, SESSION_PREFIX, StoreError};
use crate::clock;

/// The manifest's file name, in the database directory.
pub(super) const MANIFEST: &str = "geminid.db.manifest";

/// The files and directories sled keeps in its directory.
fn is_sled_file(name: &str) -> bool {
    matches!(name, "conf" | "db" | "blobs" | MANIFEST) || name.starts_with("snap.")
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    v: u32,
    sessions: usize,
}

/// What was found wrong with the database when it was opened.
#[derive(Debug, Clone)]
pub(crate) struct Damage {
    /// What was wrong.
    pub what: String,
    /// Where the damaged copy was moved.
    pub kept: PathBuf,
    /// The sessions it held, as the manifest said (unknown without one).
    pub expected: Option<usize>,
    /// The sessions read from it and carried over.
    pub recovered: usize,
}

impl Damage {
    /// One sentence for the log and `daemon/status`.
    pub(crate) fn message(&self) -> String {
        let lost = match self.expected {
            Some(n) => format!(
                "{} of its {n} sessions were lost, {} recovered",
                n.saturating_sub(self.recovered),
                self.recovered
            ),
            None => format!("{} sessions were recovered", self.recovered),
        };
        format!(
            "the database was damaged ({}): {lost}; the damaged copy is kept in {}",
            self.what,
            self.kept.display()
        )
    }
}

/// Room sled needs to open: it may write a segment (512 KiB) at once.
#[cfg(unix)]
const ROOM_TO_OPEN: u64 = 2 * 512 * 1024;

/// Whether the disk holding `dir` has room for sled to open.
pub(super) fn has_room(dir: &Path) -> bool {
    #[cfg(unix)]
    {
        match nix::sys::statvfs::statvfs(dir) {
            Ok(st) => {
                // The widths of these types differ between platforms.
                #[allow(clippy::useless_conversion)]
                let free =
                    u64::from(st.blocks_available()).saturating_mul(u64::from(st.fragment_size()));
                free >= ROOM_TO_OPEN
            }
            Err(_) => true,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        true
    }
}

/// Write the manifest atomically (a new file renamed over the old one), owner-only.
pub(super) fn write_manifest(dir: &Path, sessions: usize) -> std::io::Result<()> {
    let body = serde_json::to_vec(&Manifest { v: 1, sessions }).map_err(std::io::Error::other)?;
    write_file(&dir.join(MANIFEST), &body)
}

/// Write `path` atomically (a new file renamed over the old one), owner-only.
pub(super) fn write_file(path: &Path, body: &[u8]) -> std::io::Result<()> {
    // A temporary file of its own: two writers of one shared name truncate each other's,
    // and the second rename finds it gone.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.{seq}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp)?;
    f.write_all(body)?;
    drop(f);
    std::fs::rename(&tmp, path)
}

fn read_manifest(dir: &Path) -> Option<usize> {
    let bytes = std::fs::read(dir.join(MANIFEST)).ok()?;
    match serde_json::from_slice::<Manifest>(&bytes) {
        Ok(m) => Some(m.sessions),
        Err(e) => {
            tracing::warn!(error = %e, "the database manifest is unreadable; ignoring it");
            None
        }
    }
}

/// Every key and value sled can still read, tree by tree.
type Salvage = Vec<(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>)>;

fn salvage(open: &Open) -> Salvage {
    let mut out = Vec::new();
    for name in open.db.tree_names() {
        let Ok(tree) = open.db.open_tree(&name) else { continue };
        let entries = tree.iter().filter_map(Result::ok).map(|(k, v)| (k.to_vec(), v.to_vec()));
        out.push((name.to_vec(), entries.collect()));
    }
    out
}

/// Whether an error opening the database means it is damaged (rather than locked, newer,
/// or unreachable).
fn is_damage(e: &StoreError) -> bool {
    match e {
        StoreError::Sled { source: sled::Error::Corruption { .. }, .. } => true,
        StoreError::Sled { source: sled::Error::Io(io), .. } => {
            matches!(io.kind(), std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof)
        }
        // A `conf` sled cannot read as text ("created using a sled version earlier than 0.29").
        StoreError::Sled { source: sled::Error::Unsupported(_), .. } => true,
        StoreError::Corrupt { .. } => true,
        _ => false,
    }
}

/// What sled can read of the damaged copy in `kept` when it is opened without its `conf`
/// (sled's settings file, whose damage alone makes the whole database unreadable): its
/// files copied into a scratch folder beside it, opened with sled's defaults (which geminid
/// never changes), read, and removed. Empty when that cannot be read either.
fn salvage_without_conf(kept: &Path) -> Salvage {
    let scratch = kept.with_extension("salvage");
    let _ = std::fs::remove_dir_all(&scratch);
    let copied = (|| {
        std::fs::create_dir(&scratch)?;
        for e in std::fs::read_dir(kept)?.filter_map(Result::ok) {
            let name = e.file_name();
            if name != "conf" && name != MANIFEST && e.file_type()?.is_file() {
                std::fs::copy(e.path(), scratch.join(&name))?;
            }
        }
        std::io::Result::Ok(())
    })();
    let salvaged = match copied {
        Ok(()) => match Open::new(&sled::Config::new().path(&scratch), &scratch) {
            Ok(open) => salvage(&open),
            Err(e) => {
                tracing::debug!(error = %e, "the damaged database cannot be read without its conf");
                Salvage::new()
            }
        },
        Err(e) => {
            tracing::debug!(error = %e, "no scratch copy of the damaged database");
            Salvage::new()
        }
    };
    let _ = std::fs::remove_dir_all(&scratch);
    salvaged
}

/// How many sessions a salvage holds.
fn sessions_in(salvaged: &Salvage) -> usize {
    salvaged
        .iter()
        .filter(|(name, _)| name.as_slice() == b"sessions")
        .flat_map(|(_, entries)| entries)
        .filter(|(k, _)| k.starts_with(SESSION_PREFIX))
        .count()
}

/// Largest database copied before sled opens it (see [`open_checked`]).
const PRISTINE_COPY_MAX: u64 = 256 * 1024 * 1024;

/// sled writes to its files as it opens them, damaged or not. So that a damaged database is
/// kept as it was found, its files are copied into `.opening/` first (up to
/// [`PRISTINE_COPY_MAX`]; a larger one is kept as sled left it), and the copy removed once
/// the database proves sound.
fn pristine_copy(dir: &Path) -> Option<PathBuf> {
    let files: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| is_sled_file(&e.file_name().to_string_lossy()))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .collect();
    let total: u64 = files.iter().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum();
    if files.is_empty() || total > PRISTINE_COPY_MAX {
        return None;
    }
    let copy = dir.join(".opening");
    let _ = std::fs::remove_dir_all(&copy);
    let made = (|| {
        std::fs::create_dir(&copy)?;
        for e in &files {
            std::fs::copy(e.path(), copy.join(e.file_name()))?;
        }
        std::io::Result::Ok(())
    })();
    match made {
        Ok(()) => Some(copy),
        Err(e) => {
            tracing::debug!(error = %e, "no copy of the database before opening it");
            let _ = std::fs::remove_dir_all(&copy);
            None
        }
    }
}

/// Remove a copy made by [`pristine_copy`] that is not needed.
fn discard(copy: Option<PathBuf>) {
    if let Some(copy) = copy {
        let _ = std::fs::remove_dir_all(copy);
    }
}

/// Open the database in `dir`, moving it aside and starting afresh (with what could be
/// read) if it is damaged.
pub(super) fn open_checked(
    config: &sled::Config,
    dir: &Path,
) -> Result<(Open, Option<Damage>), StoreError> {
    let expected = read_manifest(dir);
    let was_here = expected.is_some() || dir.join("conf").exists();
    let mut copy = None;
    let (what, salvaged) = if was_here && !dir.join("db").exists() {
        ("its file `db` is missing".to_owned(), Salvage::new())
    } else {
        copy = was_here.then(|| pristine_copy(dir)).flatten();
        match Open::new(config, dir) {
            Ok(open) => {
                let found = open.sessions.scan_prefix(SESSION_PREFIX).count();
                match expected {
                    Some(n) if found < n => {
                        ("sessions are missing from it".to_owned(), salvage(&open))
                    }
                    _ => {
                        discard(copy);
                        return Ok((open, None));
                    }
                }
            }
            Err(e) if is_damage(&e) => (format!("it cannot be opened: {e}"), Salvage::new()),
            Err(e) => {
                discard(copy);
                return Err(e);
            }
        }
    };
    // The handles to the damaged database are closed by now (sled locks its file).
    let kept = dir.join(format!("damaged-{}", clock::rfc3339(clock::now_ms()).replace(':', "")));
    let moved = (|| {
        let sled_files = std::fs::read_dir(dir)?
            .filter_map(Result::ok)
            .filter(|e| is_sled_file(&e.file_name().to_string_lossy()));
        match &copy {
            // The copy holds the files as they were found: sled's files after opening them
            // go. Its directories (`blobs/`) were not copied, so they move.
            Some(copy) => {
                std::fs::rename(copy, &kept)?;
                for entry in sled_files {
                    if entry.file_type()?.is_dir() {
                        std::fs::rename(entry.path(), kept.join(entry.file_name()))?;
                    } else {
                        std::fs::remove_file(entry.path())?;
                    }
                }
            }
            None => {
                std::fs::create_dir_all(&kept)?;
                for entry in sled_files {
                    std::fs::rename(entry.path(), kept.join(entry.file_name()))?;
                }
            }
        }
        std::io::Result::Ok(())
    })();
    if let Err(source) = moved {
        return Err(StoreError::Damaged { path: dir.to_path_buf(), what, source });
    }
    // A damaged `conf` alone hides every session: read the copy again without it, and keep
    // whichever reading found more.
    let without_conf = salvage_without_conf(&kept);
    let salvaged =
        if sessions_in(&without_conf) > sessions_in(&salvaged) { without_conf } else { salvaged };
    let open = Open::new(config, dir)?;
    let sled_err = |source| StoreError::Sled { path: dir.to_path_buf(), source };
    for (name, entries) in salvaged {
        let tree = open.db.open_tree(&name).map_err(sled_err)?;
        for (k, v) in entries {
            tree.insert(k, v).map_err(sled_err)?;
        }
    }
    open.db.flush().map_err(sled_err)?;
    let recovered = open.sessions.scan_prefix(SESSION_PREFIX).count();
    Ok((open, Some(Damage { what, kept, expected, recovered })))
}
