//! A library crate that declares the global allocator, as a game's engine crate might.

#[path = "../../oracle.rs"]
pub mod oracle;

#[global_allocator]
static ALLOC: memreplay::Allocator<oracle::Counting> = memreplay::Allocator::new(oracle::Counting);
