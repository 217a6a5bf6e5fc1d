//! The machine's load beside each figure (issue 67, item 6): a thread reads the 1-minute load
//! average (`/proc/loadavg`) every second, and each batch of rows printed gets the lowest and
//! highest value seen while it was measured (since the previous batch) in a last column. A
//! figure measured at load 20 and one at load 0.3 are not the same claim.

use std::sync::Mutex;
use std::time::Duration;

/// Lowest and highest 1-minute load since the last [`take`].
static SEEN: Mutex<Option<(f64, f64)>> = Mutex::new(None);

fn now() -> Option<f64> {
    let l = std::fs::read_to_string("/proc/loadavg").ok()?;
    l.split_whitespace().next()?.parse().ok()
}

fn note(v: f64) {
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let (lo, hi) = seen.unwrap_or((v, v));
    *seen = Some((lo.min(v), hi.max(v)));
}

/// Start reading the load every second, for the rest of the run.
pub(crate) fn start() {
    if let Some(v) = now() {
        note(v);
    }
    let _ = std::thread::Builder::new().name("load".into()).spawn(|| {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            if let Some(v) = now() {
                note(v);
            }
        }
    });
}

/// The load seen since the last call (`2.1–3.4`, or `?` where there is no `/proc/loadavg`),
/// starting the next span at the load now.
pub(crate) fn take() -> String {
    let current = now();
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let out = match (*seen).or(current.map(|v| (v, v))) {
        Some((lo, hi)) if (hi - lo).abs() < 0.005 => format!("{lo:.2}"),
        Some((lo, hi)) => format!("{lo:.2}–{hi:.2}"),
        None => "?".to_owned(),
    };
    *seen = current.map(|v| (v, v));
    out
}

/// Print `rows` (Markdown table rows), each with the load seen while they were measured.
pub(crate) fn print(rows: impl IntoIterator<Item = String>) {
    let load = take();
    for row in rows {
        println!("{row} {load} |");
    }
}
