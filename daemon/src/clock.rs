//! The daemon's clock seat: the monotonic time a grace or a deadline is measured by
//! ([`now`], waited on with [`sleep`] and [`sleep_until`]), and wall-clock timestamps, stored
//! as Unix milliseconds and shown as RFC 3339 (UTC).
//!
//! A test moves this time instead of sleeping through it: in process with tokio's paused time
//! (`#[tokio::test(start_paused = true)]`, then `tokio::time::advance`); in a daemon binary
//! through [`driven`], which only a debug build started with `GEMINID_TEST_CLOCK` set has
//! (the end-to-end harness sets it; a release build has no such seat at all).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Now, on the monotonic clock the daemon measures graces and deadlines by: tokio's, plus how
/// far a test has moved a driven clock ([`driven`]).
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std() + driven::ahead()
}

/// Wait until `deadline` on [`now`]'s clock: the system's time passing, or a test moving it.
pub(crate) async fn sleep_until(deadline: Instant) {
    loop {
        let left = deadline.saturating_duration_since(now());
        if left.is_zero() {
            return;
        }
        let moved = driven::Waiter::new();
        tokio::select! {
            () = tokio::time::sleep(left) => {}
            () = moved.moved() => {}
        }
    }
}

/// Wait `d` on [`now`]'s clock (for ever, for a duration too long to say when it ends).
pub(crate) async fn sleep(d: Duration) {
    match now().checked_add(d) {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
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

/// A clock an end-to-end test moves (`testing/advanceClock`), in a debug build started with
/// `GEMINID_TEST_CLOCK` set; elsewhere it never moves and costs nothing.
///
/// Moving it wakes every [`sleep_until`] waiting on it and returns once each has seen the new
/// time: the timers that were due have fired, and the others wait again.
#[cfg(debug_assertions)]
pub(crate) mod driven {
    use std::collections::BTreeMap;
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::Duration;

    use tokio::sync::watch;

    /// The variable that turns the seat on, read once at start.
    pub(crate) const ENV: &str = "GEMINID_TEST_CLOCK";

    static ON: AtomicBool = AtomicBool::new(false);
    static AHEAD_MS: AtomicU64 = AtomicU64::new(0);
    /// How many times it moved.
    static MOVES: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::Sender::new(0));
    /// The waiters still waiting, by the move they started waiting after.
    static WAITING: LazyLock<watch::Sender<BTreeMap<u64, usize>>> =
        LazyLock::new(|| watch::Sender::new(BTreeMap::new()));

    /// Turn the seat on if the environment asks for it; whether it is on.
    pub(crate) fn from_env() -> bool {
        if std::env::var_os(ENV).is_some() {
            ON.store(true, Ordering::Relaxed);
            tracing::debug!("{ENV} is set: the daemon's clock is driven by its tests");
        }
        on()
    }

    /// Whether a test drives the clock.
    pub(crate) fn on() -> bool {
        ON.load(Ordering::Relaxed)
    }

    pub(super) fn ahead() -> Duration {
        Duration::from_millis(AHEAD_MS.load(Ordering::Relaxed))
    }

    /// Move the clock forward by `by`, and wait until every waiter has seen it.
    pub(crate) async fn advance(by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        AHEAD_MS.fetch_add(ms, Ordering::Relaxed);
        let mut moved = 0;
        MOVES.send_modify(|n| {
            *n += 1;
            moved = *n;
        });
        let mut waiting = WAITING.subscribe();
        let _ = waiting.wait_for(|w| w.range(..moved).all(|(_, n)| *n == 0)).await;
    }

    /// One wait on the clock, counted while it lasts.
    pub(super) struct Waiter {
        after: u64,
        moves: watch::Receiver<u64>,
    }

    impl Waiter {
        pub(super) fn new() -> Self {
            let moves = MOVES.subscribe();
            let after = *moves.borrow();
            if on() {
                WAITING.send_modify(|w| *w.entry(after).or_default() += 1);
            }
            Self { after, moves }
        }

        /// Once the clock has moved.
        pub(super) async fn moved(mut self) {
            let after = self.after;
            let _ = self.moves.wait_for(|n| *n > after).await;
        }
    }

    impl Drop for Waiter {
        fn drop(&mut self) {
            if on() {
                WAITING.send_modify(|w| {
                    if let Some(n) = w.get_mut(&self.after) {
                        *n -= 1;
                        if *n == 0 {
                            w.remove(&self.after);
                        }
                    }
                });
            }
        }
    }
}

/// A release build's clock: never moved.
#[cfg(not(debug_assertions))]
pub(crate) mod driven {
    use std::time::Duration;

    pub(super) fn ahead() -> Duration {
        Duration::ZERO
    }

    pub(super) struct Waiter;

    impl Waiter {
        pub(super) fn new() -> Self {
            Self
        }

        pub(super) async fn moved(self) {
            std::future::pending().await
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn formats_utc_millis() {
        assert_eq!(super::rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    /// A wait on the paused clock ends when tokio's time has moved past it (at once, on a
    /// paused clock with nothing else to do), not before.
    #[tokio::test(start_paused = true)]
    async fn waits_follow_the_paused_clock() {
        use super::sleep as wait;
        let t0 = super::now();
        wait(Duration::from_secs(3600)).await;
        assert!(super::now() - t0 >= Duration::from_secs(3600));
    }
}
