//! `memreplay-demo [OUT.mrl] [--textures N] [--frames N] [--extra-leak] [--options LIST]`:
//! plays the demo game while recording its memory (see the library's documentation).

use std::alloc::System;
use std::process::ExitCode;

/// Every heap allocation of the demo goes through the recorder.
#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

fn main() -> ExitCode {
    memreplay_demo::main_with_args(std::env::args_os().skip(1))
}
