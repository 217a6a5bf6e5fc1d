//! Everything gemctl writes goes out here: the printing macros, which pass
//! [`terminal_safe`](crate::output::shown::terminal_safe), and `--json`'s values.

use serde::Serialize;

/// `println!` for the command's output, handed to stdout in one write: when stdout is gone
/// (`gemctl … | head`), the process ends quietly, as command-line tools do, instead of
/// panicking. What it writes passes [`crate::output::shown::terminal_safe`]; `--json` output
/// ([`json`]) does not need to.
macro_rules! outln {
    () => {
        $crate::output::print::write_out("\n")
    };
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        $crate::output::print::write_out(&$crate::output::shown::terminal_safe(&line));
    }};
}
pub(crate) use outln;

/// `print!`, as [`outln!`] without the line break.
macro_rules! out {
    ($($arg:tt)*) => {{
        $crate::output::print::write_out(&$crate::output::shown::terminal_safe(&format!($($arg)*)));
    }};
}
pub(crate) use out;

/// `eprintln!` through [`crate::output::shown::terminal_safe`]: errors and notes quote servers and
/// files too.
macro_rules! errln {
    () => {
        $crate::output::print::write_err("\n")
    };
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        $crate::output::print::write_err(&$crate::output::shown::terminal_safe(&line));
    }};
}
pub(crate) use errln;

/// `eprint!`, as [`errln!`] without the line break (a question before its answer).
macro_rules! err {
    ($($arg:tt)*) => {{
        $crate::output::print::write_err(&$crate::output::shown::terminal_safe(&format!($($arg)*)));
    }};
}
pub(crate) use err;

/// Writes text for stdout in one write (what [`outln!`] and [`out!`] end in).
pub fn write_out(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        stdout_failed(&e);
    }
}

/// Writes text for stderr in one write, flushed (a question waits on the same line).
pub fn write_err(text: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// Writing the output failed: a reader that went away ends the process with success (it has
/// what it wanted); anything else is an error.
pub fn stdout_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    errln!("gemctl: cannot write the output: {e}");
    std::process::exit(1);
}

/// Print `value` as pretty JSON.
pub fn json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    // Through a `Value`: parts of some answers arrive pre-serialized (a tool's declaration
    // is sent as the daemon cached it), which the pretty printer would copy as one line.
    let mut text = serde_json::to_string_pretty(&serde_json::to_value(value)?)?;
    text.push('\n');
    write_out(&text);
    Ok(())
}

/// Print `value` as compact JSON on one line (for streams).
pub fn json_line<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut text = serde_json::to_string(value)?;
    text.push('\n');
    write_out(&text);
    Ok(())
}

/// A result's text for stdout (a tool's answer, a resource's or a prompt's text), ended with a
/// line break. On a terminal a person reads it: escaped as [`block()`](crate::output::shown::block) (line breaks and tabs
/// kept), so a server can neither colour it nor act on the terminal, gemctl's own colour codes
/// included, which [`terminal_safe`](crate::output::shown::terminal_safe) would let through. Piped, a script reads it: written as
/// the server sent it.
pub fn result_out(text: &str) {
    use std::io::IsTerminal as _;
    if std::io::stdout().is_terminal() {
        write_out(&format!("{}\n", crate::output::shown::block(text)));
    } else {
        write_out(&format!("{text}\n"));
    }
}
