//! What the program says: results on standard output, notes and errors on standard error.
//!
//! `println!` panics when standard output is closed (`host run ... | head -c0`) or full
//! (`> /dev/full`), which would throw away a run whose results are already on disk. Here a
//! closed pipe ([`StdoutClosed`]) ends the program quietly with success — the reader went away,
//! nothing is wrong with the results — and any other failure is an ordinary error. Standard
//! error is best effort: a note that cannot be written is dropped, never a panic.

use std::fmt::Arguments;
use std::io::{self, ErrorKind, Write};

use anyhow::{Context, Result};

/// Standard output was closed by its reader (a broken pipe).
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct StdoutClosed;

/// Writes `text` to standard output and flushes it.
pub fn print(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        other => other.context("cannot write to standard output"),
    }
}

/// Writes one formatted line to standard error, if it can.
pub fn note(args: Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "{args}");
}

/// `text` on one line: each line trimmed, the empty ones dropped, the rest joined by "; ". The
/// program's error is one line on standard error, whatever a cause's message holds (a parser's
/// picture of where it stopped, say).
pub fn one_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ")
}

/// `note!("...", args)`: a line on standard error (see [`note`]).
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => { $crate::console::note(format_args!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn one_line_joins_the_lines_of_a_message() {
        assert_eq!(
            one_line("dimension must be an integer"),
            "dimension must be an integer"
        );
        assert_eq!(one_line("a:\n\n  b\n c  \n"), "a:; b; c");
    }
}
