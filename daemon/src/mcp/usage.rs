//! What a server costs and how much it is used: the calls sent to it (in all, and in the last
//! minute) and what its process tree holds (resident memory, CPU time), read from `/proc` in
//! one pass for every server asked about.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Instant;

use geminid_protocol::mcp::ServerUsage;

/// Seconds the recent counts cover.
const WINDOW: usize = 60;

/// One server's call counters: totals, and one bucket per second of the last minute.
#[derive(Debug)]
pub(crate) struct Calls {
    born: Instant,
    counts: Mutex<Counts>,
}

#[derive(Debug)]
struct Counts {
    calls: u64,
    errors: u64,
    /// By second (since `born`) modulo [`WINDOW`]: that second, its calls, its errors.
    recent: [(u64, u32, u32); WINDOW],
}

impl Default for Counts {
    fn default() -> Self {
        Self { calls: 0, errors: 0, recent: [(0, 0, 0); WINDOW] }
    }
}

impl Default for Calls {
    fn default() -> Self {
        Self { born: Instant::now(), counts: Mutex::default() }
    }
}

impl Calls {
    fn counts(&self) -> parking_lot::MutexGuard<'_, Counts> {
        self.counts.lock()
    }

    fn second(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.born).as_secs()
    }

    /// A call to it ended; `failed` when it was an error of any kind.
    pub(crate) fn ended(&self, failed: bool) {
        self.ended_at(Instant::now(), failed);
    }

    fn ended_at(&self, at: Instant, failed: bool) {
        let second = self.second(at);
        let mut c = self.counts();
        c.calls += 1;
        c.errors += u64::from(failed);
        let slot = &mut c.recent[(second % WINDOW as u64) as usize];
        if slot.0 != second {
            *slot = (second, 0, 0);
        }
        slot.1 += 1;
        slot.2 += u32::from(failed);
    }

    /// Calls and errors in all, then in the last minute.
    pub(crate) fn read(&self) -> (u64, u64, u32, u32) {
        self.read_at(Instant::now())
    }

    /// What `mcp/listServers` says of its use, with what its process tree holds.
    pub(crate) fn usage(&self, tree: Option<&Held>) -> ServerUsage {
        let (calls, errors, calls_last_minute, errors_last_minute) = self.read();
        ServerUsage {
            cpu_ms: tree.map(|t| t.cpu_ms),
            rss_bytes: tree.map(|t| t.rss_bytes),
            calls,
            errors,
            calls_last_minute,
            errors_last_minute,
            p50_us: None,
            p99_us: None,
        }
    }

    fn read_at(&self, at: Instant) -> (u64, u64, u32, u32) {
        let now = self.second(at);
        let c = self.counts();
        let recent = c.recent.iter().filter(|(s, _, _)| *s + (WINDOW as u64) > now && *s <= now);
        let (calls, errors) = recent.fold((0u32, 0u32), |(a, b), (_, c, e)| (a + c, b + e));
        (c.calls, c.errors, calls, errors)
    }
}

/// What a process group holds: resident bytes and CPU milliseconds (user and system).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Held {
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// CPU time used so far, milliseconds.
    pub cpu_ms: u64,
}

/// What each process group led by one of `leaders` holds (a stdio server and whatever it
/// started: `npx` and its node, a shell and its python), from one pass over `/proc`.
#[cfg(target_os = "linux")]
pub(crate) fn of_groups(leaders: impl Iterator<Item = u32>) -> HashMap<u32, Held> {
    let leaders: std::collections::HashSet<u32> = leaders.collect();
    let mut out = HashMap::new();
    if leaders.is_empty() {
        return out;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    let ms_per_tick = 1000 / ticks_per_second();
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // After the command's closing parenthesis: state, ppid, the process group, ... and
        // utime and stime (fields 14 and 15, so 11 and 12 after it) in clock ticks.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let fields: Vec<&str> = after.split_whitespace().take(13).collect();
        let Some(pgrp) = fields.get(2).and_then(|p| p.parse::<u32>().ok()) else { continue };
        // A process that left its server's group (setsid) is its server's by its mark.
        let pgrp = if leaders.contains(&pgrp) {
            pgrp
        } else {
            let marked = super::marked::mark_of(&entry.path());
            match marked.and_then(|m| super::marked::leader_of(&m)) {
                Some(leader) if leaders.contains(&leader) => leader,
                _ => continue,
            }
        };
        let tick = |i: usize| fields.get(i).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
        // `VmRSS:  1234 kB` (in kB whatever the page size).
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
        let held = out.entry(pgrp).or_insert(Held::default());
        held.rss_bytes += kb.unwrap_or(0) * 1024;
        held.cpu_ms += (tick(11) + tick(12)) * ms_per_tick;
    }
    out
}

/// Clock ticks per second (`_SC_CLK_TCK`; 100 on every Linux this runs on).
#[cfg(target_os = "linux")]
fn ticks_per_second() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 && t <= 1000 => t as u64,
        _ => 100,
    }
}

/// Not measured elsewhere.
#[cfg(not(target_os = "linux"))]
pub(crate) fn of_groups(_leaders: impl Iterator<Item = u32>) -> HashMap<u32, Held> {
    HashMap::new()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_last_minute_forgets_what_is_older() {
        let c = Calls::default();
        let t0 = c.born;
        let at = |s: u64| t0 + Duration::from_secs(s);
        c.ended_at(at(0), false);
        c.ended_at(at(0), true);
        c.ended_at(at(30), false);
        assert_eq!(c.read_at(at(30)), (3, 1, 3, 1));
        assert_eq!(c.read_at(at(59)), (3, 1, 3, 1), "second 0 is still within the minute");
        assert_eq!(c.read_at(at(60)), (3, 1, 1, 0), "second 0 is not");
        // Second 60 reuses second 0's bucket.
        c.ended_at(at(60), true);
        assert_eq!(c.read_at(at(60)), (4, 2, 2, 1));
        assert_eq!(c.read_at(at(200)), (4, 2, 0, 0), "totals stay");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn measures_a_process_group() {
        // This test process leads no group of its own, but its group's leader is measurable.
        let pgrp = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| {
                s.rfind(')').and_then(|i| s[i + 1..].split_whitespace().nth(2).map(str::to_owned))
            })
            .and_then(|p| p.parse::<u32>().ok())
            .expect("own process group");
        // Some CPU of our own, so that the group's time is more than nothing.
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let got = of_groups([pgrp].into_iter());
        let held = got.get(&pgrp).copied().unwrap_or_default();
        assert!(held.rss_bytes > 1 << 20, "{got:?}");
        assert!(held.cpu_ms >= 10, "{got:?}");
        assert!(of_groups([u32::MAX - 1].into_iter()).is_empty());
    }
}
