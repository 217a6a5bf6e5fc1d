//! Fuzzing under plain `cargo test`: every parser that reads untrusted input is fed its
//! committed corpus (`daemon/fuzz/corpus/<target>/`), then random mutations of it for a bounded
//! time (`GEMINID_FUZZ_SECS` per target, 1 s by default; `GEMINID_FUZZ_SECS=600` for a long run).
//! A panic, or one input that computes for longer than [`SLOW`], is a failure: the input is
//! written to `target/<profile>/fuzz-crashes/<target>-<hash>` (never into the checkout) and the
//! test names it; fixed, it moves to the corpus as a regression case. An input is judged slow by
//! the CPU time it takes, not by the wall time a busy machine stretches: one that took longer
//! than [`SLOW`] is run again and timed by its thread's CPU time.
//!
//! No coverage guidance (cargo-fuzz needs a nightly toolchain these machines do not have): the
//! mutations are structure-aware instead, splicing corpus entries and inserting the tokens each
//! grammar is made of (`${`, `!{`, `[[rule]]`, `---`, quotes, escapes, deep nesting).

mod targets;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One input computing for longer than this is a failure (a hang or a quadratic blow-up).
const SLOW: Duration = Duration::from_secs(2);
/// Inputs are cut to this size.
const MAX_INPUT: usize = 64 * 1024;

/// Tokens inserted by mutations: the pieces of every grammar fuzzed here.
const DICTIONARY: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"'",
    b"\\",
    b"\\u",
    b"\\u0000",
    b":",
    b",",
    b"\n",
    b"\r\n",
    b"\t",
    b"\0",
    b"$",
    b"${",
    b"${A:-",
    b"$$",
    b"!{",
    b"@{",
    b"{{args}}",
    b"---\n",
    b"#",
    b"//",
    b"/*",
    b"*/",
    b"[[rule]]\n",
    b"toolName = ",
    b"priority = ",
    b"decision = \"allow\"",
    b"name: ",
    b"description: ",
    b"- ",
    b"|\n",
    b">\n",
    b"data: ",
    b"event: ",
    b"id: ",
    b"\"jsonrpc\":\"2.0\"",
    b"\"id\":",
    b"\"method\":",
    b"\"params\":",
    b"null",
    b"true",
    b"1e999",
    b"-0",
    b"18446744073709551616",
    b"\xff\xfe",
    b"\xc3\x28",
    b"\xf0\x9f\x98\x80",
    b"--",
    b"--key=",
    b"=",
    b"&&",
    b"|",
    b"*",
    b"`",
];

/// A small fast generator (xorshift64*), seeded per run and reported on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = rng.next() as u8;
            }
            2 => {
                let at = rng.below(len + 1);
                input.insert(at, rng.next() as u8);
            }
            3 if len > 0 => {
                let at = rng.below(len);
                let n = rng.below((len - at).min(32)) + 1;
                input.drain(at..at + n);
            }
            4 if len > 0 => {
                let at = rng.below(len);
                let n = rng.below((len - at).min(64)) + 1;
                let copy: Vec<u8> = input[at..at + n].to_vec();
                let to = rng.below(input.len() + 1);
                input.splice(to..to, copy);
            }
            5 | 6 => {
                let token = DICTIONARY[rng.below(DICTIONARY.len())];
                let at = rng.below(len + 1);
                input.splice(at..at, token.iter().copied());
            }
            7 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len() + 1);
                let at = rng.below(len + 1);
                input.truncate(at);
                input.extend_from_slice(&other[from..]);
            }
            8 => {
                // Deep nesting or a long run: the cases a recursive parser or a backtracking
                // regex meets badly.
                let token = [b"[", b"{", b"\"", b"a", b"$", b"\\", b" "][rng.below(7)];
                let at = rng.below(len + 1);
                let n = rng.below(2000) + 1;
                input.splice(at..at, token.iter().copied().cycle().take(n));
            }
            _ => {}
        }
    }
    input.truncate(MAX_INPUT);
}

fn dir(kind: &str, target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz").join(kind).join(target)
}

/// Where failing inputs are saved: the build's own directory (`target/<profile>/fuzz-crashes`,
/// beside the test binary in `deps/`), so that a test run never writes into the checkout.
fn crashes_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let deps = exe.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
    let profile = if deps.ends_with("deps") { deps.parent().map(PathBuf::from) } else { None };
    profile.unwrap_or_else(std::env::temp_dir).join("fuzz-crashes")
}

/// The CPU time this thread has run for (`/proc/thread-self/schedstat`, in nanoseconds), where
/// the kernel says.
fn cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok().map(Duration::from_nanos)
}

/// The committed corpus of `target`, plus `seeds`.
fn corpus(target: &str, seeds: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = seeds.iter().map(|s| s.to_vec()).collect();
    if let Ok(entries) = std::fs::read_dir(dir("corpus", target)) {
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        out.extend(files.iter().filter_map(|f| std::fs::read(f).ok()));
    }
    out
}

fn budget() -> Duration {
    let secs = std::env::var("GEMINID_FUZZ_SECS").ok().and_then(|s| s.parse::<f64>().ok());
    Duration::from_secs_f64(secs.unwrap_or(1.0).max(0.0))
}

fn seed() -> u64 {
    std::env::var("GEMINID_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        t | 1
    })
}

/// Save a failing input in `crashes` and fail, naming it and how to run it again.
fn failed(crashes: &std::path::Path, target: &str, input: &[u8], what: &str, seed: u64) -> ! {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    input.hash(&mut h);
    let _ = std::fs::create_dir_all(crashes);
    let file = crashes.join(format!("{target}-{:016x}", h.finish()));
    let _ = std::fs::write(&file, input);
    panic!(
        "fuzz target {target}: {what} on the input saved in {} (GEMINID_FUZZ_SEED={seed})",
        file.display()
    );
}

/// Run `target` on its corpus, then on mutations of it until the budget is spent; a failing
/// input goes to `target/<profile>/fuzz-crashes/`.
pub(crate) fn fuzz(name: &str, seeds: &[&[u8]], target: impl Fn(&[u8])) {
    let started = Instant::now();
    let (runs, seed) = fuzz_into(name, seeds, target, budget(), SLOW, &crashes_dir());
    eprintln!("fuzz {name}: {runs} inputs in {:.0?} (GEMINID_FUZZ_SEED={seed})", started.elapsed());
}

/// [`fuzz`], for `budget`, an input slower than `slow` a failure, a failing input saved in
/// `crashes`: how many inputs ran, and the seed.
fn fuzz_into(
    name: &str,
    seeds: &[&[u8]],
    target: impl Fn(&[u8]),
    budget: Duration,
    slow: Duration,
    crashes: &std::path::Path,
) -> (u64, u64) {
    let corpus = corpus(name, seeds);
    assert!(!corpus.is_empty(), "fuzz target {name} has no corpus");
    let seed = seed();
    let mut rng = Rng(seed);
    let run = |input: &[u8]| {
        let started = Instant::now();
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| target(input))) {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failed(crashes, name, input, &format!("a panic ({why})"), seed);
        }
        let took = started.elapsed();
        if took > slow {
            // Slow on the clock: a loaded machine, or the input. Run again and timed by this
            // thread's CPU time (the clock again where the kernel does not say), it tells.
            let (cpu, wall) = (cpu_time(), Instant::now());
            target(input);
            let again = match (cpu, cpu_time()) {
                (Some(before), Some(after)) => after.saturating_sub(before),
                _ => wall.elapsed(),
            };
            if again > slow {
                let what = format!("one input took {took:?}, and {again:?} of CPU time again");
                failed(crashes, name, input, &what, seed);
            }
            eprintln!(
                "fuzz {name}: one input took {took:?} on the clock but {again:?} of CPU time: \
                 the machine was busy, not the input"
            );
        }
    };
    for input in &corpus {
        run(input);
    }
    let until = Instant::now() + budget;
    let mut runs = corpus.len() as u64;
    while Instant::now() < until {
        let mut input = corpus[rng.below(corpus.len())].clone();
        mutate(&mut rng, &mut input, &corpus);
        run(&input);
        runs += 1;
    }
    (runs, seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The harness finds a panic that only mutations reach, and saves the input that caused it.
    #[test]
    fn a_panic_is_found_and_its_input_saved() {
        let crashes = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let found = catch_unwind(AssertUnwindSafe(|| {
            fuzz_into(
                "selftest",
                &[b"{\"a\": 1}"],
                |i| assert!(!i.windows(2).any(|w| w == b"${"), "a dollar brace"),
                Duration::from_secs(10),
                SLOW,
                crashes.path(),
            )
        }));
        let message = match found {
            Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
            Ok(runs) => panic!("nothing found in {runs:?}"),
        };
        assert!(message.contains("fuzz target selftest: a panic (a dollar brace)"), "{message}");
        let saved: Vec<_> =
            std::fs::read_dir(crashes.path()).unwrap_or_else(|e| panic!("{e}")).flatten().collect();
        assert_eq!(saved.len(), 1);
        let input = std::fs::read(saved[0].path()).unwrap_or_default();
        assert!(input.windows(2).any(|w| w == b"${"), "{input:?}");
    }

    /// An input that computes for longer than the limit fails, however busy the machine.
    #[test]
    fn one_slow_input_is_a_failure() {
        let slow = Duration::from_millis(200);
        let crashes = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let found = catch_unwind(AssertUnwindSafe(|| {
            fuzz_into(
                "selftest",
                &[b"slow"],
                |_| {
                    let from = cpu_time().unwrap_or_default();
                    let started = Instant::now();
                    while cpu_time().map_or(started.elapsed(), |t| t.saturating_sub(from))
                        < slow + Duration::from_millis(50)
                    {
                        std::hint::black_box(0);
                    }
                },
                Duration::ZERO,
                slow,
                crashes.path(),
            )
        }));
        let message = match found {
            Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
            Ok(_) => panic!("a slow input passed"),
        };
        assert!(message.contains("one input took"), "{message}");
        assert_eq!(std::fs::read_dir(crashes.path()).map(Iterator::count).unwrap_or(0), 1);
    }

    /// An input that took long on the clock but not on the CPU (the machine was busy: here,
    /// the target waits) is not a failure, and nothing is saved.
    #[test]
    fn an_input_slow_only_on_a_busy_machine_is_not_a_failure() {
        let slow = Duration::from_millis(200);
        let crashes = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let first = std::sync::atomic::AtomicBool::new(true);
        let (runs, _) = fuzz_into(
            "selftest",
            &[b"busy"],
            |_| {
                if first.swap(false, std::sync::atomic::Ordering::Relaxed) {
                    // Kept: the subject is wall time that is not CPU time (a busy machine's),
                    // which only wall time passing makes.
                    std::thread::sleep(slow + Duration::from_millis(100));
                }
            },
            Duration::ZERO,
            slow,
            crashes.path(),
        );
        assert_eq!(runs, 1);
        assert_eq!(std::fs::read_dir(crashes.path()).map(Iterator::count).unwrap_or(0), 0);
    }

    /// Failing inputs are saved in the build's directory, not in the checkout.
    #[test]
    fn crashes_are_saved_outside_the_checkout() {
        let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let checkout = checkout.parent().unwrap_or(&checkout);
        let crashes = crashes_dir();
        assert!(
            !crashes.starts_with(checkout) || crashes.starts_with(checkout.join("target")),
            "{}",
            crashes.display()
        );
    }
}
