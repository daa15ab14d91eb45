//! With `capture_replay_log` off, memreplay compiles to nothing: builds the probe game in
//! `tests/feature-off/` with the feature off, runs it (it checks zero-sized guards,
//! unevaluated names, no start), and checks that no recorder function is linked into it.
//! The same probe built with the feature on is the control: there the symbols are present.

use std::path::{Path, PathBuf};
use std::process::Command;

fn probe_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/feature-off")
}

/// Builds the probe (`on`: with the recorder feature) and returns its executable.
fn build_probe(on: bool) -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/feature-off-probe");
    let target = target.join(if on { "on" } else { "off" });
    let mut cmd = Command::new(env!("CARGO"));
    cmd.arg("build")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(probe_dir().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target);
    if on {
        cmd.args(["--features", "on"]);
    }
    let status = cmd.status().expect("run cargo");
    assert!(status.success(), "building the probe failed");
    target.join("debug").join(format!("memreplay-feature-off-probe{}", std::env::consts::EXE_SUFFIX))
}

/// Whether the executable holds a symbol of the recorder's implementation module.
fn links_recorder(exe: &Path) -> bool {
    let bytes = std::fs::read(exe).unwrap();
    // Legacy and v0 manglings of `memreplay::imp::…`.
    [&b"9memreplay3imp"[..], &b"9memreplay3imp6thread"[..]]
        .iter()
        .any(|needle| bytes.windows(needle.len()).any(|w| w == *needle))
}

#[test]
fn feature_off_compiles_every_hook_to_nothing() {
    let off = build_probe(false);
    let out = Command::new(&off).current_dir(std::env::temp_dir()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "feature off: ok");
    assert!(!links_recorder(&off), "no recorder code may be linked with the feature off");

    let on = build_probe(true);
    assert!(links_recorder(&on), "control: with the feature on the recorder is linked");
}
