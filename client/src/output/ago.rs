//! Times as a person reads them in lists: "42 s ago", "3 min ago", "2 h ago", then the date
//! (audit turn 4, P10: `2026-12-07T00:55:51.054Z` in every list). `--json` keeps RFC 3339.

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// `rfc3339` (UTC, as the daemon writes it) as "N unit ago", or as it is if it does not parse.
pub fn ago(rfc3339: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default();
    ago_at(rfc3339, now)
}

/// The same in one word, for a table's AGE column: `42s`, `3m`, `2h`, `3d`, then the date.
pub fn age(rfc3339: &str) -> String {
    let now = i64::try_from(now_ms() / 1000).unwrap_or(i64::MAX);
    age_at(rfc3339, now)
}

fn ago_at(rfc3339: &str, now: i64) -> String {
    let Some(then) = seconds(rfc3339) else { return rfc3339.to_owned() };
    let d = now - then;
    match d {
        ..0 => "just now".to_owned(),
        0..60 => format!("{d} s ago"),
        60..3600 => format!("{} min ago", d / 60),
        3600..86400 => format!("{} h ago", d / 3600),
        86400..604800 => format!("{} d ago", d / 86400),
        _ => rfc3339.get(..10).unwrap_or(rfc3339).to_owned(),
    }
}

fn age_at(rfc3339: &str, now: i64) -> String {
    let Some(then) = seconds(rfc3339) else { return rfc3339.to_owned() };
    match (now - then).max(0) {
        d @ 0..60 => format!("{d}s"),
        d @ 60..3600 => format!("{}m", d / 60),
        d @ 3600..86400 => format!("{}h", d / 3600),
        d @ 86400..604800 => format!("{}d", d / 86400),
        _ => rfc3339.get(..10).unwrap_or(rfc3339).to_owned(),
    }
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
fn seconds(t: &str) -> Option<i64> {
    let t = t.strip_suffix('Z')?;
    let (date, time) = t.split_once('T')?;
    let mut d = date.splitn(3, '-').map(str::parse::<i64>);
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let time = time.split('.').next()?;
    let mut h = time.splitn(3, ':').map(str::parse::<i64>);
    let (hh, mm, ss) = (h.next()?.ok()?, h.next()?.ok()?, h.next()?.ok()?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86400 + hh * 3600 + mm * 60 + ss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_how_long_ago() {
        assert_eq!(seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(seconds("2026-12-07T00:55:51.054Z"), Some(1_796_604_951));
        let now = 1_796_604_951;
        assert_eq!(ago_at("2026-12-07T00:55:51.054Z", now + 42), "42 s ago");
        assert_eq!(ago_at("2026-12-07T00:55:51.054Z", now + 3 * 60 + 5), "3 min ago");
        assert_eq!(ago_at("2026-12-07T00:55:51.054Z", now + 2 * 3600), "2 h ago");
        assert_eq!(ago_at("2026-12-07T00:55:51.054Z", now + 3 * 86400), "3 d ago");
        assert_eq!(ago_at("2026-12-07T00:55:51.054Z", now + 30 * 86400), "2026-12-07");
        assert_eq!(ago_at("2026-12-07T00:55:51.054Z", now - 5), "just now");
        assert_eq!(ago_at("yesterday", now), "yesterday");
        assert_eq!(age_at("2026-12-07T00:55:51.054Z", now + 42), "42s");
        assert_eq!(age_at("2026-12-07T00:55:51.054Z", now + 2 * 3600), "2h");
        assert_eq!(age_at("2026-12-07T00:55:51.054Z", now + 30 * 86400), "2026-12-07");
    }
}
