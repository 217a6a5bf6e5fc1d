//! Supervision settings: the daemon's `--mcp-*` flags, their defaults, and the idle-memory
//! budget's value.

use std::time::Duration;

/// How long a server keeps running after the last session that needed it let go: a working
/// day's gaps (lunch, meetings, an afternoon on something else), so the next Gemini CLI of the
/// day finds its servers running; not overnight. An idle server costs memory, not CPU (a
/// ping every 30 s); its start costs each new session seconds (see README, "Kept warm").
pub(crate) const DEFAULT_LINGER: Duration = Duration::from_secs(8 * 3600);
/// The least the idle-memory budget is by default: an ordinary set-up's six to eight Node or
/// Python servers (55-160 MiB each) fit; 512 MiB did not, and they were stopped seconds after
/// use and started again (2-3 s) by the next command.
pub(crate) const IDLE_MEMORY_FLOOR: u64 = 2 << 30;
/// The share of the machine's memory the idle-memory budget is by default (above the floor).
pub(crate) const IDLE_MEMORY_SHARE: u64 = 8;
/// A server idle for less than this is never stopped for the idle-memory budget: `gemctl`
/// lets go of its servers after each command, so without it use-then-use-again thrashed.
pub(crate) const DEFAULT_BUDGET_MIN_IDLE: Duration = Duration::from_secs(5 * 60);
/// First delay before restarting a failed server; doubles with each failure in a row.
pub(crate) const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_secs(1);
/// Longest delay between restarts.
pub(crate) const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Failures in a row before a server is parked in `crash-loop`.
pub(crate) const DEFAULT_RESTART_BUDGET: u32 = 5;
/// A server connected this long has its failure count reset when it next fails.
pub(crate) const DEFAULT_STABLE_AFTER: Duration = Duration::from_secs(60);
/// Between SIGTERM and SIGKILL.
pub(crate) const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(3);
/// Start-up (spawn or connect, and the MCP handshake) for servers without `timeout`.
pub(crate) const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a connected server is pinged (see `server::pinger`).
pub(crate) const DEFAULT_PING_EVERY: Duration = Duration::from_secs(30);
/// Each request to a server without `timeout` (Gemini CLI's default, 10 minutes).
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// Supervision settings (daemon flags).
#[derive(Debug, Clone, Copy)]
pub struct McpOptions {
    /// How long a server keeps running after no session needs it (`DEFAULT_LINGER`).
    pub linger: Duration,
    /// Resident memory idle servers may hold together (`idle::default_budget`); `None`: no
    /// bound.
    pub idle_memory: Option<u64>,
    /// How long a server is idle before the budget may stop it (`DEFAULT_BUDGET_MIN_IDLE`).
    pub budget_min_idle: Duration,
    /// First delay before restarting a failed server (`DEFAULT_BACKOFF_INITIAL`).
    pub backoff_initial: Duration,
    /// Longest delay between restarts (`DEFAULT_BACKOFF_MAX`).
    pub backoff_max: Duration,
    /// Failures in a row before a server is parked (`DEFAULT_RESTART_BUDGET`).
    pub restart_budget: u32,
    /// Connected this long, a server's failures count afresh (`DEFAULT_STABLE_AFTER`).
    pub stable_after: Duration,
    /// Between SIGTERM and SIGKILL (`DEFAULT_STOP_GRACE`).
    pub stop_grace: Duration,
    /// Start-up limit for servers without `timeout` (`DEFAULT_STARTUP_TIMEOUT`).
    pub startup_timeout: Duration,
    /// How often a connected server is pinged (`DEFAULT_PING_EVERY`); zero turns pings off.
    pub ping_every: Duration,
    /// How long a sign-in waits for the browser (`crate::auth::flow::CALLBACK_TIMEOUT`).
    pub oauth_timeout: Duration,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            linger: DEFAULT_LINGER,
            idle_memory: Some(IDLE_MEMORY_FLOOR),
            budget_min_idle: DEFAULT_BUDGET_MIN_IDLE,
            backoff_initial: DEFAULT_BACKOFF_INITIAL,
            backoff_max: DEFAULT_BACKOFF_MAX,
            restart_budget: DEFAULT_RESTART_BUDGET,
            stable_after: DEFAULT_STABLE_AFTER,
            stop_grace: DEFAULT_STOP_GRACE,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            ping_every: DEFAULT_PING_EVERY,
            oauth_timeout: crate::auth::flow::CALLBACK_TIMEOUT,
        }
    }
}

impl McpOptions {
    /// The delay after the `failures`-th failure in a row (1-based).
    pub(crate) fn backoff(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(20));
        self.backoff_initial.saturating_mul(factor).min(self.backoff_max)
    }
}

/// `--mcp-idle-memory` as a flag's value: the bytes, or no bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget(pub Option<u64>);

/// [`parse_budget`], for the flag.
pub(crate) fn budget_arg(text: &str) -> Result<Budget, String> {
    parse_budget(text).map(Budget)
}

/// The budget `auto` means: an eighth of the machine's memory (`MemTotal` in
/// `/proc/meminfo`), at least [`IDLE_MEMORY_FLOOR`] (also where the system does not say).
pub(crate) fn default_budget() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    budget_of(&meminfo)
}

fn budget_of(meminfo: &str) -> u64 {
    let total = meminfo.lines().find_map(|l| {
        let kib = l.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?.trim();
        kib.parse::<u64>().ok()?.checked_mul(1024)
    });
    total.map_or(IDLE_MEMORY_FLOOR, |t| (t / IDLE_MEMORY_SHARE).max(IDLE_MEMORY_FLOOR))
}

/// `--mcp-idle-memory`: `512MiB`, `1GiB`, `300MB`, `2000000` (bytes), `auto` (see
/// [`default_budget`]) or `unlimited`.
pub(crate) fn parse_budget(text: &str) -> Result<Option<u64>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    if t.eq_ignore_ascii_case("auto") {
        return Ok(Some(default_budget()));
    }
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| format!("'{t}' is not a size like 512MiB"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit '{other}' (use B, KB, KiB, MB, MiB, GB, GiB, `auto` or `unlimited`)"
            ));
        }
    };
    let bytes = n * factor as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("'{t}' is out of range"));
    }
    Ok(Some(bytes as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let o = McpOptions {
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            ..McpOptions::default()
        };
        let d: Vec<u128> = (1..=6).map(|n| o.backoff(n).as_millis()).collect();
        assert_eq!(d, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(o.backoff(u32::MAX), Duration::from_millis(1000));
    }

    #[test]
    fn budgets_parse() {
        assert_eq!(parse_budget("512MiB"), Ok(Some(512 << 20)));
        assert_eq!(parse_budget("1.5 GiB"), Ok(Some(3 << 29)));
        assert_eq!(parse_budget("300MB"), Ok(Some(300_000_000)));
        assert_eq!(parse_budget("4096"), Ok(Some(4096)));
        assert_eq!(parse_budget("Unlimited"), Ok(None));
        assert!(parse_budget("lots").is_err_and(|e| e.contains("like 512MiB")));
        assert!(parse_budget("5 parsecs").is_err_and(|e| e.contains("unknown unit 'parsecs'")));
        assert!(parse_budget("auto").is_ok_and(|b| b.is_some_and(|b| b >= IDLE_MEMORY_FLOOR)));
    }

    #[test]
    fn the_default_budget_is_a_share_of_memory_with_a_floor() {
        let kib = |gib: u64| format!("MemTotal:       {} kB\nMemFree: 1 kB\n", gib << 20);
        assert_eq!(budget_of(&kib(8)), IDLE_MEMORY_FLOOR, "an 8 GiB laptop: the floor");
        assert_eq!(budget_of(&kib(32)), 4 << 30, "32 GiB: an eighth");
        assert_eq!(budget_of(""), IDLE_MEMORY_FLOOR, "no /proc/meminfo");
    }
}
