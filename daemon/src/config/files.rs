//! Reading one settings-style JSON file: comments allowed (as strip-json-comments does), no
//! other extensions; problems become diagnostics with line and column.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use geminid_protocol::config::{Diagnostic, Severity};
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};
use serde_json::Value;

/// What reading a file gave.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FileRead {
    /// It does not exist.
    Missing,
    /// It parsed; the text is kept to locate later diagnostics.
    Parsed {
        /// Its contents.
        value: Value,
        /// Its text.
        text: String,
    },
    /// It exists but could not be read or parsed.
    Failed(Diagnostic),
}

fn options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_extended_string_escapes: false,
        allow_non_finite_numbers: false,
    }
}

/// A diagnostic about `file`.
pub(crate) fn diagnostic(
    severity: Severity,
    file: &Path,
    pos: Option<(u32, u32)>,
    message: String,
) -> Diagnostic {
    Diagnostic {
        severity,
        file: file.display().to_string(),
        line: pos.map(|p| p.0),
        column: pos.map(|p| p.1),
        message,
    }
}

/// The largest input file read (settings files are a few KiB; this bounds what a mistake,
/// such as a log file or a link to `/dev/zero` where a settings file should be, can cost).
pub(crate) const MAX_INPUT_FILE: u64 = 4 << 20;

/// Why an input file was not read.
#[derive(Debug)]
pub(crate) enum InputError {
    /// Not something to read: not a regular file, or too large (the message says which).
    Refused(String),
    /// Reading it failed.
    Io(std::io::Error),
    /// It is being rewritten: no version of it settled within [`SETTLE_WAIT`] (the message
    /// says so). Its last good contents stay; it is read again once it settles.
    Changing(String),
}

/// How long an input file must stay unchanged before its contents are taken: an editor that
/// saves in place truncates, then writes, and a read between the two must not become the
/// file's contents (the watcher's debounce is shorter, and a call can read between events).
pub(crate) const SETTLE: Duration = Duration::from_millis(100);

/// How long a file that was just emptied must stay empty before its emptiness is taken: a
/// policy file emptied by a save in place would otherwise lose its deny rules until the
/// editor's write lands.
pub(crate) const SETTLE_EMPTY: Duration = Duration::from_secs(2);

/// How often a file being waited for is looked at again.
const SETTLE_POLL: Duration = Duration::from_millis(10);

/// The longest a reader waits for a file that is changing (a save in progress) to settle;
/// then none of it is taken, its last good contents stay in effect, and it is read again once
/// it has settled (the watcher wakes then: [`next_recheck`]). Every tool call reads the input
/// files, so this bounds what a file rewritten without pause (an editor, a sync tool, a hostile
/// local process) adds to a call: 250 ms once, not the storm's length. A file given up on
/// costs later reads nothing for a while, unless a version of it settles (`GIVEN_UP`).
pub(crate) const SETTLE_WAIT: Duration = Duration::from_millis(250);

/// What identifies one version of a file: size, modification time, inode.
type Stamp = (u64, Option<SystemTime>, u64);

fn stamp(m: &std::fs::Metadata) -> Stamp {
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(m);
    #[cfg(not(unix))]
    let ino = 0;
    (m.len(), m.modified().ok(), ino)
}

/// The version of each input file last seen settled: read again unchanged, it is not waited
/// for again (a file stamped in the future would otherwise cost its settle time on every read).
static SETTLED: std::sync::LazyLock<parking_lot::Mutex<std::collections::HashMap<PathBuf, Stamp>>> =
    std::sync::LazyLock::new(Default::default);

/// Past this many files remembered, the memory starts afresh.
const SETTLED_REMEMBERED: usize = 4096;

fn settled_before(path: &Path, m: &std::fs::Metadata) -> bool {
    let seen = SETTLED.lock();
    seen.get(path) == Some(&stamp(m))
}

fn remember_settled(path: &Path, m: &std::fs::Metadata) {
    let mut seen = SETTLED.lock();
    if seen.len() >= SETTLED_REMEMBERED {
        seen.clear();
    }
    seen.insert(path.to_owned(), stamp(m));
}

/// Files a read gave up on (no version settled within [`SETTLE_WAIT`]), and when: for
/// [`GIVEN_UP_FOR`] after, while the version there is still unsettled, a later read gives up
/// at once rather than wait again, so a call that reads a file several times (and the reloads
/// beside it) waits for it once, not once per read.
static GIVEN_UP: std::sync::LazyLock<
    parking_lot::Mutex<std::collections::HashMap<PathBuf, Instant>>,
> = std::sync::LazyLock::new(Default::default);

/// How long a give-up spares later reads their wait (a version that settles ends it sooner).
const GIVEN_UP_FOR: Duration = Duration::from_secs(1);

/// When a file given up on may have settled (the earliest), for the watcher to read it again
/// then: its last version is taken when the storm ends even if nothing changes after it (an
/// emptied file, which settles in [`SETTLE_EMPTY`]).
static RECHECK: parking_lot::Mutex<Option<Instant>> = parking_lot::Mutex::new(None);

/// Woken when [`RECHECK`] is set, so the watcher (asleep without a change) sees the new time.
static RECHECK_SET: tokio::sync::Notify = tokio::sync::Notify::const_new();

fn given_up_on(path: &Path) -> bool {
    GIVEN_UP.lock().get(path).is_some_and(|at| at.elapsed() < GIVEN_UP_FOR)
}

/// A read of `path` gave up on its version `m`: read it again once that may have settled.
fn give_up(path: &Path, m: &std::fs::Metadata) {
    let mut given_up = GIVEN_UP.lock();
    if given_up.len() >= SETTLED_REMEMBERED {
        given_up.clear();
    }
    given_up.insert(path.to_owned(), Instant::now());
    drop(given_up);
    let settle = settle_for(m);
    // On the clock the watcher sleeps by.
    let at =
        crate::clock::now() + age(m).map_or(settle, |a| settle.saturating_sub(a)).max(SETTLE_POLL);
    let mut recheck = RECHECK.lock();
    if recheck.is_none_or(|r| at < r) {
        *recheck = Some(at);
        RECHECK_SET.notify_one();
    }
}

/// When an input file given up on should be read again (a reload then), if one is pending.
pub(crate) fn next_recheck() -> Option<Instant> {
    *RECHECK.lock()
}

/// Woken when [`next_recheck`] may have moved earlier.
pub(crate) fn recheck_set() -> &'static tokio::sync::Notify {
    &RECHECK_SET
}

/// A reload begins: every file is read again now, so no recheck is pending (a read that gives
/// up again sets one).
pub(crate) fn recheck_taken() {
    *RECHECK.lock() = None;
}

/// How long `m`'s version must be left alone before it is taken.
fn settle_for(m: &std::fs::Metadata) -> Duration {
    if m.len() == 0 { SETTLE_EMPTY } else { SETTLE }
}

/// How long ago `m`'s version was written; none when its time is in the future.
fn age(m: &std::fs::Metadata) -> Option<Duration> {
    m.modified().ok().and_then(|t| SystemTime::now().duration_since(t).ok())
}

/// The text of an input file, `None` if it does not exist. Only a regular file of at most
/// [`MAX_INPUT_FILE`] bytes is read: a FIFO would block the reader until someone writes it,
/// and a device or a huge file would take time and memory from every client. Only a settled
/// version is taken: one left unchanged for [`SETTLE`] ([`SETTLE_EMPTY`] for an empty file),
/// and the same before and after the read; the reader waits for that up to [`SETTLE_WAIT`]
/// (none at all for a file given up on that has not settled since), then takes none of it
/// ([`InputError::Changing`]: its last good contents stay). The read itself leaves the
/// daemon's event loop (`block_in_place`) when it runs on one.
pub(crate) fn read_input(path: &Path) -> Result<Option<String>, InputError> {
    let changing = |m: &std::fs::Metadata| {
        give_up(path, m);
        InputError::Changing(format!(
            "it is being rewritten (no version of it stayed unchanged for {} ms within {} ms); \
             geminid reads it again once it stops changing (if it never does, stop what keeps \
             writing it)",
            settle_for(m).as_millis(),
            SETTLE_WAIT.as_millis()
        ))
    };
    off_loop(|| {
        let deadline =
            Instant::now() + if given_up_on(path) { Duration::ZERO } else { SETTLE_WAIT };
        loop {
            let Some(before) = checked_metadata(path)? else { return Ok(None) };
            let settle = settle_for(&before);
            // A version written within its settle time (or stamped in the future) is watched
            // for that long, as long as the deadline allows: unchanged, it has settled;
            // changed, the new one is watched.
            if age(&before).is_none_or(|a| a < settle) && !settled_before(path, &before) {
                // (The tests wait for this line: a save in place seen half done.)
                tracing::debug!(path = %path.display(), "an input file is still changing");
                let settled_at =
                    Instant::now() + age(&before).map_or(settle, |a| settle.saturating_sub(a));
                if Instant::now() >= deadline {
                    return Err(changing(&before));
                }
                #[cfg(test)]
                tests::waited();
                if !unchanged_until(path, &before, settled_at.min(deadline))? {
                    continue;
                }
                if Instant::now() < settled_at {
                    return Err(changing(&before));
                }
            }
            let text = read_capped(path)?;
            match checked_metadata(path)? {
                Some(after) if stamp(&after) == stamp(&before) => {
                    remember_settled(path, &after);
                    GIVEN_UP.lock().remove(path);
                    return Ok(text);
                }
                // Written while it was read: read the version that follows.
                Some(_) if Instant::now() < deadline => continue,
                Some(after) => return Err(changing(&after)),
                None => return Ok(None),
            }
        }
    })
}

/// Whether `path` keeps the version `before` until `until`, looked at every [`SETTLE_POLL`]:
/// a change (the write after a truncation) ends the wait at once.
fn unchanged_until(
    path: &Path,
    before: &std::fs::Metadata,
    until: Instant,
) -> Result<bool, InputError> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        std::thread::sleep(left.clamp(Duration::from_millis(1), SETTLE_POLL));
        match checked_metadata(path)? {
            Some(now) if stamp(&now) == stamp(before) => {}
            _ => return Ok(false),
        }
        if Instant::now() >= until {
            return Ok(true);
        }
    }
}

/// The metadata of an input file: none when it does not exist, refused when it is not a
/// regular file or is too large.
fn checked_metadata(path: &Path) -> Result<Option<std::fs::Metadata>, InputError> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(InputError::Io(e)),
        Ok(m) if !m.is_file() => Err(InputError::Refused(format!(
            "not a regular file ({}); it is not read, so that nothing blocks on it",
            kind_of(&m)
        ))),
        Ok(m) if m.len() > MAX_INPUT_FILE => Err(too_big()),
        Ok(m) => Ok(Some(m)),
    }
}

fn too_big() -> InputError {
    InputError::Refused(format!(
        "more than the {} MiB a settings file may have; it is not read",
        MAX_INPUT_FILE >> 20
    ))
}

/// The file's text, read up to the size cap (it may have grown since it was checked).
fn read_capped(path: &Path) -> Result<Option<String>, InputError> {
    use std::io::Read;
    let mut text = String::new();
    let read = std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT_FILE + 1).read_to_string(&mut text));
    match read {
        Ok(_) if text.len() as u64 > MAX_INPUT_FILE => Err(too_big()),
        Ok(_) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(InputError::Io(e)),
    }
}

/// Run file system work that may take a while: off the event loop's worker (`block_in_place`)
/// when called on one, so other connections are served meanwhile; as it is elsewhere.
pub(crate) fn off_loop<T>(work: impl FnOnce() -> T) -> T {
    let on_event_loop = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if on_event_loop { tokio::task::block_in_place(work) } else { work() }
}

/// Read and parse `path`, which must hold a JSON object (see [`read_input`] for what is read).
pub(crate) fn read_object(path: &Path) -> FileRead {
    let failed =
        |message: String| FileRead::Failed(diagnostic(Severity::Error, path, None, message));
    let text = match read_input(path) {
        Ok(Some(t)) => t,
        Ok(None) => return FileRead::Missing,
        Err(InputError::Refused(why) | InputError::Changing(why)) => return failed(why),
        Err(InputError::Io(e)) => return failed(format!("cannot read: {e}")),
    };
    match parse_object(&text) {
        Ok(value) => FileRead::Parsed { value, text },
        Err((pos, message)) => FileRead::Failed(diagnostic(Severity::Error, path, pos, message)),
    }
}

/// What a file system entry is, for a message.
fn kind_of(m: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if m.is_dir() { "a directory" } else { "not a file" }
}

/// Parse text that must hold one JSON object.
pub(crate) fn parse_object(text: &str) -> Result<Value, (Option<(u32, u32)>, String)> {
    let ast = parse_to_ast(text, &CollectOptions::default(), &options()).map_err(|e| {
        let pos = (to_u32(e.line_display()), to_u32(e.column_display()));
        (Some(pos), format!("invalid JSON: {}", e.kind()))
    })?;
    match ast.value.map(Value::from) {
        Some(v @ Value::Object(_)) => Ok(v),
        Some(_) => Err((Some((1, 1)), "the file must hold a JSON object".to_owned())),
        None => Err((None, "the file is empty".to_owned())),
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Line and column (1-based) of the property at `path` in `text` (a number picks an array's
/// element), or of the deepest part of the path that exists.
pub(crate) fn position(text: &str, path: &[&str]) -> Option<(u32, u32)> {
    let ast = parse_to_ast(text, &CollectOptions::default(), &options()).ok()?;
    let mut value = ast.value.as_ref()?;
    let mut offset = None;
    for key in path {
        if let (Some(array), Ok(i)) = (value.as_array(), key.parse::<usize>()) {
            let Some(element) = array.elements.get(i) else { break };
            offset = Some(element.range().start);
            value = element;
            continue;
        }
        let Some(prop) = value.as_object().and_then(|o| o.get(key)) else { break };
        offset = Some(prop.range.start);
        value = &prop.value;
    }
    let offset = offset?;
    let before = text.get(..offset)?;
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Some((to_u32(line), to_u32(column)))
}

/// The bytes of the value at `path` (object keys) in `text`, as written.
pub(crate) fn value_span(text: &str, path: &[&str]) -> Option<std::ops::Range<usize>> {
    let ast = parse_to_ast(text, &CollectOptions::default(), &options()).ok()?;
    let mut value = ast.value.as_ref()?;
    for key in path {
        value = &value.as_object()?.get(key)?.value;
    }
    Some(value.start()..value.end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_yes_trailing_commas_no() {
        assert!(parse_object("// c\n{ /* x */ \"a\": 1 }").is_ok());
        let (pos, msg) = parse_object("{\n  \"a\": 1,\n}").err().unwrap_or_default();
        assert_eq!(pos.map(|p| p.0), Some(2), "the comma is on line 2: {msg}");
        assert!(parse_object("").err().is_some_and(|e| e.1.contains("empty")));
        assert!(parse_object("[1]").err().is_some_and(|e| e.1.contains("JSON object")));
        assert!(parse_object("{\"a\": ").is_err());
    }

    #[test]
    fn positions_point_at_the_property() {
        let text = "{\n  \"mcpServers\": {\n    \"x\": { \"command\": 5 }\n  }\n}";
        assert_eq!(position(text, &["mcpServers", "x", "command"]), Some((3, 12)));
        assert_eq!(position(text, &["mcpServers", "x", "nope"]), Some((3, 5)));
        assert_eq!(position(text, &["other"]), None);
        let hooks = "{\n  \"hooks\": {\"BeforeTool\": [\n    {\"hooks\": []},\n    {\"hooks\": [{\"type\": \"x\"}]}]}}";
        assert_eq!(position(hooks, &["hooks", "BeforeTool", "1", "hooks", "0"]), Some((4, 16)));
        assert_eq!(position(hooks, &["hooks", "BeforeTool", "7"]), Some((2, 13)));
    }

    /// An editor's save in place (truncate, a pause, write): a read that starts in the pause
    /// gets what was written, never the empty moment; one whose pause outlasts what a reader
    /// waits ([`SETTLE_WAIT`]) gets nothing of the file, and the reads after it wait no more
    /// until it has settled.
    #[test]
    fn a_save_in_place_is_read_once_it_has_settled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "old\n").unwrap();
        use std::io::Write;
        // The editor writes once the reader is waiting for the emptied file to settle: the
        // write ends that wait (2 s for an empty file) at once.
        let f = std::fs::OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
        let seen = *WAITING.0.lock();
        let writer = std::thread::spawn(move || {
            let (count, changed) = &WAITING;
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut n = count.lock();
            while *n == seen && !changed.wait_until(&mut n, deadline).timed_out() {}
            drop(n);
            let mut f = f;
            f.write_all(b"new rules\n").unwrap();
        });
        assert_eq!(read_input(&path).ok().flatten().as_deref(), Some("new rules\n"));
        writer.join().unwrap();
        // The editor's pause outlasts the reader's wait: given up on, it gives nothing, and
        // the reads after it do not wait again.
        let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
        let got = read_input(&path);
        assert!(matches!(&got, Err(InputError::Changing(_))), "{got:?}");
        let before = waits();
        assert!(matches!(read_input(&path), Err(InputError::Changing(_))));
        assert_eq!(waits(), before, "waited again for a file given up on");
        assert!(next_recheck().is_some(), "no recheck asked for");
        f.write_all(b"new rules\n").unwrap();
        drop(f);
        // Once the write has settled, it is read (no wait while the give-up lasts).
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = read_input(&path);
        while matches!(got, Err(InputError::Changing(_))) && Instant::now() < deadline {
            // Poll: until the read settles (the harness's poll is not reachable from here).
            std::thread::sleep(SETTLE_POLL);
            got = read_input(&path);
        }
        assert_eq!(got.ok().flatten().as_deref(), Some("new rules\n"));
    }

    thread_local! {
        /// How many times [`read_input`] waited for a version to settle on this thread: whether
        /// it waited, told without a clock a busy machine would make lie.
        pub(super) static WAITS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// Reads that waited for a version to settle, on any thread, for a test to wait on.
    static WAITING: (parking_lot::Mutex<u64>, parking_lot::Condvar) =
        (parking_lot::Mutex::new(0), parking_lot::Condvar::new());

    /// [`read_input`] waits for a version to settle.
    pub(super) fn waited() {
        WAITS.with(|w| w.set(w.get() + 1));
        *WAITING.0.lock() += 1;
        WAITING.1.notify_all();
    }

    fn waits() -> u32 {
        WAITS.with(std::cell::Cell::get)
    }

    /// A file stamped in the future (a clock ahead, a copy from another machine) costs its
    /// settle time once, not on every read; one that keeps changing is refused after
    /// [`SETTLE_WAIT`].
    #[test]
    fn a_future_stamp_waits_once_and_a_file_that_keeps_changing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{}").unwrap();
        let ahead = SystemTime::now() + Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(ahead).unwrap();
        let (t, before) = (Instant::now(), waits());
        assert_eq!(read_input(&path).ok().flatten().as_deref(), Some("{}"));
        assert!(t.elapsed() >= SETTLE, "{:?}", t.elapsed());
        assert_eq!(waits(), before + 1);
        assert_eq!(read_input(&path).ok().flatten().as_deref(), Some("{}"));
        assert_eq!(waits(), before + 1, "waited again");

        // A file rewritten every few milliseconds is refused. A writer can stall (a loaded
        // machine schedules it late), and a version left alone for a settle time is rightly
        // taken: such a try says nothing and is run again. Four writers take turns, so that
        // the file keeps changing unless all four stall at once. The file changes somewhere
        // within each write, so the widest window the reader could have seen a version
        // unchanged in runs from the start of one write to the end of the next (in the order
        // they started); the first from the start of the write before them, the last to the
        // reader's answer.
        let busy = dir.path().join("busy.json");
        let mut previous = Instant::now();
        std::fs::write(&busy, "{}").unwrap();
        let mut stalls = Vec::new();
        for _ in 0..10 {
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let writers: Vec<_> = (0..4)
                .map(|_| {
                    let (busy, stop, n) = (busy.clone(), stop.clone(), n.clone());
                    std::thread::spawn(move || {
                        let mut writes = Vec::new();
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            let n = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let started = Instant::now();
                            let _ = std::fs::write(&busy, format!("{{\"n\": {n}}}"));
                            writes.push((started, Instant::now()));
                            // Rewritten again at once: it never stops changing.
                            std::thread::yield_now();
                        }
                        writes
                    })
                })
                .collect();
            let got = read_input(&busy);
            let answered = Instant::now();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let mut writes: Vec<(Instant, Instant)> =
                writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
            writes.retain(|(started, _)| *started < answered);
            writes.sort();
            let mut changes = vec![(previous, previous)];
            changes.extend(&writes);
            changes.push((answered, answered));
            let widest =
                changes.windows(2).map(|w| w[1].1.duration_since(w[0].0)).max().unwrap_or_default();
            previous = writes.last().map_or(previous, |w| w.0);
            // A file's time is the kernel's coarse clock, up to a tick (4 ms at 250 Hz) behind.
            if got.is_ok() && widest + Duration::from_millis(10) >= SETTLE {
                stalls.push(widest);
                continue;
            }
            assert!(
                matches!(&got, Err(InputError::Changing(why)) if why.contains("being rewritten")),
                "{got:?} after {} writes, none left alone for longer than {widest:?}",
                writes.len()
            );
            return;
        }
        panic!("the writers stalled for a settle time in every try: {stalls:?}");
    }
}
