//! One module per command of the `pto-wsp` tool: each takes the command's arguments and
//! returns what the command prints (or a [`crate::CliError`]), so `main.rs` only parses the
//! command line and writes the result.

pub mod emit;
pub mod ptog;
