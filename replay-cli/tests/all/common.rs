//! Helpers every module of this test binary shares: running the binary, reading its
//! output, a temporary folder per module.

use std::path::PathBuf;
use std::process::{Command, Output};

use memreplay_format::{header_flags, FileHeader};

pub use memreplay_fixtures::{header, write_log, End};

/// The header of the hand-written game logs (`check`, `cli`, `reports`): allocation
/// callstacks and usage changes recorded, pid 7, started 2000-02-29 12:34:56.789 UTC.
pub fn game_header() -> FileHeader {
    FileHeader {
        flags: header_flags::CALLSTACKS_ON_ALLOC | header_flags::USAGE_CHANGES,
        pid: 7,
        start_unix_ns: 951_827_696_789_000_000,
        exe_path: "/games/forest".into(),
        ..header()
    }
}

/// `replay-cli`, ready for arguments.
pub fn replay_cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_replay-cli"))
}

/// Runs `replay-cli args` to its end.
pub fn cli(args: &[&str]) -> Output {
    replay_cli().args(args).output().expect("run replay-cli")
}

/// What a run printed on stdout.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What a run printed on stderr.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `name` in the temporary folder of the test module `module` (its own, so that two
/// modules' files never meet).
pub fn temp_in(module: &str, name: &str) -> PathBuf {
    memreplay_fixtures::temp_dir(&format!("replay-cli-{module}")).join(name)
}
