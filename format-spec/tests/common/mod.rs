//! Helpers shared by the format's integration tests.

use memreplay_format::*;

/// A plausible header for test logs.
pub fn header() -> FileHeader {
    FileHeader {
        version_major: VERSION_MAJOR,
        version_minor: VERSION_MINOR,
        flags: header_flags::CALLSTACKS_ON_ALLOC,
        pointer_width: 8,
        pid: 7,
        start_unix_ns: 1_700_000_000_000_000_000,
        ticks_per_second: 1_000_000_000,
        max_stack_depth: 16,
        os: "linux".into(),
        arch: "x86_64".into(),
        exe_path: "/bin/game".into(),
        recorder: "memreplay test".into(),
    }
}
