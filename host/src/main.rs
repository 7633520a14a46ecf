//! The `host` program: the whole of it is the library's [`host::main`] (`lib.rs` says what it
//! does and its exit codes).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(host::main(std::env::args_os()))
}
