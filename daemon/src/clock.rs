//! The daemon's clock seat: the monotonic time a grace or a deadline is measured by
//! ([`now`]), and wall-clock timestamps, stored as Unix milliseconds and shown as RFC 3339
//! (UTC).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Now, on the monotonic clock the daemon measures graces and deadlines by: tokio's, which a
/// test pauses and moves forward (`#[tokio::test(start_paused = true)]`, then
/// `tokio::time::advance`) instead of sleeping; the system's everywhere else.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// RFC 3339 with milliseconds, UTC, for Unix milliseconds.
pub(crate) fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc_millis() {
        assert_eq!(super::rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
