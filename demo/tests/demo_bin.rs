//! The `memreplay-demo` binary itself: its command line, its exit status, its summary
//! and the log it writes. (The log's content is checked in depth by `memreplay-tests`.)

use std::path::PathBuf;
use std::process::{Command, Output};

use memreplay_format::{Event, Log};

fn demo(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memreplay-demo"))
        .args(args)
        .current_dir(dir)
        .env_remove("MEMREPLAY_LOG")
        .output()
        .expect("run memreplay-demo")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memreplay-demo-bin-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn writes_demo_mrl_by_default_and_prints_a_summary() {
    let dir = temp_dir("default");
    let out = demo(&["--frames", "4", "--textures", "2"], &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("2 textures, 6 meshes, 4 frames"), "{stdout}");
    assert!(stdout.contains("log:     demo.mrl"), "{stdout}");
    assert!(stdout.contains("bytes/event"), "{stdout}");

    let log = Log::open(dir.join("demo.mrl")).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    let labels = log.events().filter(|(_, e)| matches!(e, Event::Label { .. })).count();
    let frames = log.events().filter(|(_, e)| matches!(e, Event::FrameStart { .. })).count();
    assert_eq!((labels, frames), (4, 4));
    // The summary's byte count is the file's.
    let bytes = std::fs::metadata(dir.join("demo.mrl")).unwrap().len();
    assert!(stdout.contains(&format!("bytes:   {bytes} (")), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_exit_2_with_a_message() {
    let dir = temp_dir("bad");
    for args in [&["--textures", "zero"][..], &["--frames"], &["--what"], &["a.mrl", "b.mrl"], &["--textures", "0"]] {
        let out = demo(args, &dir);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("memreplay-demo: "), "{stderr}");
        assert!(stderr.contains("usage:"), "{stderr}");
    }
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none(), "nothing written");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_and_failures() {
    let dir = temp_dir("help");
    let out = demo(&["--help"], &dir);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--extra-leak"));

    // A log that cannot be created: exit 1, one line on stderr.
    let out = demo(&["no/such/dir/x.mrl"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("memreplay-demo: cannot start recording"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    // Invalid recorder options: exit 1.
    let out = demo(&["x.mrl", "--options", "depth=999"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("depth takes a number of frames from 1 to 64, not `999`"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
