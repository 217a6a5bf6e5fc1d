//! Wall-clock timestamps: stored as Unix milliseconds, shown as RFC 3339 (UTC).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
