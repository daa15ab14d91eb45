//! The demo game, exactly as `memreplay-demo` runs it (same arguments, same output), built
//! in this package for the end-to-end tests.

use std::alloc::System;
use std::process::ExitCode;

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

fn main() -> ExitCode {
    memreplay_demo::main_with_args(std::env::args_os().skip(1))
}
