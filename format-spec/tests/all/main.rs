//! The format crate's integration tests, one binary: round trips of every event, the
//! worked example of SPEC.md, forward compatibility, damaged and foreign files, the
//! global order, recompressing a log (damaged ones too), the analyzer's way into a
//! block (`unpack_records`), and the fuzzer's inputs.

mod compat;
mod damage;
mod fuzz_inputs;
mod order;
mod recompress;
mod records;
mod roundtrip;
mod smoke;
mod spec_example;

use memreplay_format::{header_flags, FileHeader, PayloadCompression, PayloadCompressor};

/// The method a writer asked for `method` stores blocks with in this build: LZ4 for zstd
/// where the `zstd` feature is off.
fn built(method: PayloadCompression) -> PayloadCompression {
    PayloadCompressor::new(method).method()
}

/// The header of these tests' logs.
fn header() -> FileHeader {
    FileHeader {
        flags: header_flags::CALLSTACKS_ON_ALLOC,
        pid: 7,
        start_unix_ns: 1_700_000_000_000_000_000,
        ..memreplay_fixtures::header()
    }
}
