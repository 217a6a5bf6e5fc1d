//! gemctl's own help: `gemctl completions`, `man`, and the examples `--help` shows.

pub mod complete;
pub mod examples;
