//! `geminid`: the per-user daemon. The library's `start` module is all of it.

fn main() -> std::process::ExitCode {
    geminid::start::main()
}
