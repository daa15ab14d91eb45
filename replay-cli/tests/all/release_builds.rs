//! What users profile: optimized builds. The programs in `tests/release-app/` are built
//! with opt-level 3 (`release`) and with fat LTO and one codegen unit (`release-lto`),
//! with the recorder's `Allocator` declared in the binary crate (where the allocation
//! sites are, so its shim is inlined into them) and in a library crate. Each is recorded
//! twice: started by `memreplay::start` with frame-pointer stacks, and by `MEMREPLAY_LOG`
//! with the platform unwinder; free callstacks on.
//!
//! Every report must name each allocating and freeing function at its line (the
//! `// site:` markers of `sites.rs`) and its caller at its line (the `// call:` markers of
//! `app.rs`), the two capture paths must give the same frames, and the log's counts,
//! peak and live bytes must equal the program's own counting allocator (`oracle.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

const ALLOC_SITES: [(&str, u64); 7] = [
    ("box_site", 1000),
    ("vec_site", 1200),
    ("string_site", 1300),
    ("raw_alloc_site", 1400),
    ("zeroed_site", 1500),
    ("realloc_site", 1600),
    ("leak_known_block", 1700),
];
/// Allocation site → the function that frees its block (`raw_alloc_site`'s block is
/// freed by the realloc, which records no free callstack).
const FREE_SITES: [(&str, &str); 5] = [
    ("box_site", "free_box"),
    ("vec_site", "free_vec"),
    ("string_site", "free_string"),
    ("zeroed_site", "free_raw"),
    ("realloc_site", "free_raw"),
];

fn app_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/release-app")
}

/// Builds both programs with `profile` (once per test process) and returns the folder of
/// the executables.
fn build(profile: &'static str) -> PathBuf {
    build_with(profile, "release-app", "-C force-frame-pointers=yes", &[])
}

/// Builds both programs with `profile`, `rustflags` and more arguments of `cargo build`
/// (`args`) into `target/<folder>` (once per test process).
fn build_with(profile: &'static str, folder: &'static str, rustflags: &str, args: &[&str]) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<BTreeMap<(&'static str, &'static str), PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(dir) = built.get(&(profile, folder)) {
        return dir.clone();
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target").join(folder);
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--profile", profile, "-p", "alloc-in-bin", "-p", "alloc-in-lib"])
        .arg("--manifest-path")
        .arg(app_dir().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .args(args)
        // Frame pointers, as the README asks of a game that records callstacks (or not).
        .env("RUSTFLAGS", rustflags)
        .status()
        .expect("run cargo");
    assert!(status.success(), "building the release fixtures ({profile}, {rustflags}) failed");
    let dir = target.join(profile);
    built.insert((profile, folder), dir.clone());
    dir
}

/// The line of `file` (in the fixture folder) that ends with `// {tag}: {name}`.
fn marker_line(file: &str, tag: &str, name: &str) -> u64 {
    let text = std::fs::read_to_string(app_dir().join(file)).unwrap();
    let marker = format!("// {tag}: {name}");
    let lines: Vec<usize> =
        text.lines().enumerate().filter(|(_, l)| l.trim_end().ends_with(&marker)).map(|(i, _)| i + 1).collect();
    assert_eq!(lines.len(), 1, "one `{marker}` in {file}");
    lines[0] as u64
}

/// The last path segment of a function's name, without generics.
fn short_name(function: &str) -> &str {
    let f = function.split('<').next().unwrap_or(function);
    f.rsplit("::").next().unwrap_or(f)
}

fn replay_cli(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_replay-cli")).args(args).output().unwrap();
    assert!(out.status.success(), "replay-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn json(args: &[&str]) -> Value {
    serde_json::from_slice(&replay_cli(args).stdout).unwrap()
}

/// (function, file name, line) of a frame.
fn frame_at(frame: &Value) -> (String, String, u64) {
    let file = frame["file"].as_str().unwrap_or("?");
    let file = file.rsplit('/').next().unwrap().to_owned();
    (short_name(frame["function"].as_str().unwrap_or("?")).to_owned(), file, frame["line"].as_u64().unwrap_or(0))
}

/// A symbolicated site's frames from its allocating function to the program's `main`.
fn site_frames(site: &Value) -> Vec<(String, String, u64)> {
    let from = site["site_frame"].as_u64().unwrap() as usize;
    let frames = site["frames"].as_array().unwrap();
    let mut out = Vec::new();
    for f in &frames[from..] {
        out.push(frame_at(f));
        if out.last().unwrap().0 == "main" {
            break;
        }
    }
    out
}

/// Asserts that `site` is `name` at its marker line, called from `scenario` at its marker.
fn assert_site(site: &Value, name: &str, what: &str) {
    let frames = site_frames(site);
    let expected_site = (name.to_owned(), "sites.rs".to_owned(), marker_line("sites.rs", "site", name));
    assert_eq!(frames.first(), Some(&expected_site), "{what}: the site's function and line; frames {frames:?}");
    let caller = frames.get(1).map(|f| (f.0.as_str(), f.1.as_str()));
    assert_eq!(caller, Some(("scenario", "app.rs")), "{what}: the caller; frames {frames:?}");
}

struct Recording {
    log: PathBuf,
    /// The oracle's tally, printed by the program.
    oracle: BTreeMap<String, u64>,
}

/// Runs `exe` in `mode` (`start` with frame pointers, `env` with the unwinder).
fn record(exe: &Path, mode: &str, dir: &Path) -> Recording {
    let log = dir.join(format!("{}-{mode}.mrl", exe.file_name().unwrap().to_string_lossy()));
    let mut cmd = Command::new(exe);
    cmd.env_remove("MEMREPLAY_LOG").env_remove("MEMREPLAY_OPTIONS");
    if mode == "start" {
        cmd.arg("start").arg(&log).arg("free-callstacks=on,unwind=fp");
    } else {
        cmd.arg("env").env("MEMREPLAY_LOG", &log).env("MEMREPLAY_OPTIONS", "free-callstacks=on,unwind=unwinder");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{} {mode}: {}", exe.display(), String::from_utf8_lossy(&out.stderr));
    Recording { log, oracle: oracle(&out.stdout) }
}

/// The oracle's tally from the program's output: `key=count` lines.
fn oracle(stdout: &[u8]) -> BTreeMap<String, u64> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect()
}

/// The log's figures as the oracle names them.
fn log_tally(log: &str, summary: &Value) -> BTreeMap<String, u64> {
    let info = json(&["info", log, "--json"]);
    let heap = &summary["domains"][0];
    assert_eq!(heap["domain"]["name"], "heap");
    let n = |v: &Value| v.as_u64().unwrap();
    BTreeMap::from([
        ("allocs".to_owned(), n(&info["events"]["alloc"])),
        ("reallocs".to_owned(), n(&info["events"]["realloc"])),
        ("frees".to_owned(), n(&info["events"]["free"])),
        ("allocated".to_owned(), n(&heap["total"]["bytes"])),
        ("peak".to_owned(), n(&heap["peak"]["bytes"])),
        ("live".to_owned(), n(&heap["live"]["bytes"])),
    ])
}

/// Everything the reports say of one recording's sites, checked.
fn check_sites(rec: &Recording, every_report: bool, what: &str) -> BTreeMap<String, Vec<(String, String, u64)>> {
    let log = rec.log.to_str().unwrap();
    let summary = json(&["summarize", log, "--json", "--limit", "100"]);
    assert_eq!(log_tally(log, &summary), rec.oracle, "{what}: the log against the program's counting allocator");
    for (k, v) in summary["anomalies"].as_object().unwrap() {
        assert_eq!(v, 0, "{what}: anomaly {k}");
    }

    // summarize: each allocation site and where its block was freed.
    let sites = summary["sites"].as_array().unwrap();
    let mut frames = BTreeMap::new();
    for (name, bytes) in ALLOC_SITES {
        let site = sites
            .iter()
            .find(|s| s["total"]["bytes"] == bytes && s["total"]["count"] == 1)
            .unwrap_or_else(|| panic!("{what}: summarize has a site of {bytes} B"));
        assert_site(&site["site"], name, &format!("{what}, summarize, {name}"));
        frames.insert(name.to_owned(), site_frames(&site["site"]));
        if let Some((_, freer)) = FREE_SITES.iter().find(|(s, _)| *s == name) {
            let free = &site["freed_from"][0]["site"];
            assert_site(free, freer, &format!("{what}, summarize, {name} freed from"));
            frames.insert(format!("{name} freed from"), site_frames(free));
        }
    }
    if !every_report {
        return frames;
    }

    // leaks: the one leak of the program's own, in `leak_known_block`.
    let leaks = json(&["leaks", log, "--json"]);
    let leak_sites: Vec<&Value> = leaks["domains"][0]["stacks"].as_array().unwrap().iter().collect();
    let leak = leak_sites.iter().find(|s| s["bytes"] == 1700).expect("the 1700-byte leak");
    assert_site(&leak["site"], "leak_known_block", &format!("{what}, leaks"));

    // top: every allocating function, at its line.
    let top = json(&["top", log, "--json", "--by", "total", "--limit", "100"]);
    let rows = top["domains"][0]["rows"].as_array().unwrap();
    for (name, bytes) in ALLOC_SITES {
        let row = rows
            .iter()
            .find(|r| short_name(r["function"].as_str().unwrap()) == name)
            .unwrap_or_else(|| panic!("{what}: top has no row for {name}: {rows:#?}"));
        assert_eq!(row["total"]["bytes"], bytes, "{what}, top, {name}");
        assert_eq!(row["line"], marker_line("sites.rs", "site", name), "{what}, top, {name}'s line");
    }

    // frees: where each site's blocks were freed from.
    for (name, freer) in FREE_SITES {
        let frees = json(&["frees", log, name, "--json"]);
        let site = &frees["domains"][0]["sites"][0];
        assert_eq!(short_name(site["function"].as_str().unwrap()), name, "{what}, frees {name}");
        let from = site["freed_from"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["function"] != "(no callstack)")
            .unwrap_or_else(|| panic!("{what}: frees {name} names a freeing function"));
        assert_eq!(short_name(from["function"].as_str().unwrap()), freer, "{what}, frees {name}");
        assert_eq!(from["line"], marker_line("sites.rs", "site", freer), "{what}, frees {name}: the line");
    }

    // flamegraph --folded: each site's bytes under `scenario;…;site`.
    let folded = String::from_utf8(replay_cli(&["flamegraph", log, "--folded", "--by", "total"]).stdout).unwrap();
    for (name, bytes) in ALLOC_SITES {
        let line = folded
            .lines()
            .find(|l| l.ends_with(&format!(" {bytes}")))
            .unwrap_or_else(|| panic!("{what}: a folded stack of {bytes} B in\n{folded}"));
        let names: Vec<&str> = line.rsplit_once(' ').unwrap().0.split(';').map(short_name).collect();
        let at = names.iter().position(|f| *f == name).unwrap_or_else(|| panic!("{what}: {name} in {line}"));
        assert_eq!(names[at - 1], "scenario", "{what}: {name}'s caller in {line}");
    }
    frames
}

fn check_build(profile: &'static str) {
    let dir = build(profile);
    let logs = std::env::temp_dir().join(format!("memreplay-release-{profile}-{}", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    for exe in ["alloc-in-bin", "alloc-in-lib"] {
        let exe = dir.join(exe);
        let what = format!("{profile} {}", exe.file_name().unwrap().to_string_lossy());
        let fp = check_sites(&record(&exe, "start", &logs), true, &format!("{what}, start, frame pointers"));
        let unwinder = check_sites(&record(&exe, "env", &logs), false, &format!("{what}, MEMREPLAY_LOG, unwinder"));
        assert_eq!(fp, unwinder, "{what}: the frame-pointer walk and the unwinder give the same frames");
    }
    std::fs::remove_dir_all(&logs).ok();
}

#[test]
fn release_build_sites_and_counts_are_exact() {
    check_build("release");
}

#[test]
fn fat_lto_build_sites_and_counts_are_exact() {
    check_build("release-lto");
}

/// A game built without frame pointers, recorded with the unwinder (`unwind=unwinder`):
/// fat LTO, one codegen unit, and debug assertions on, with which the recorder redoes each
/// capture of its cached unwinder with `_Unwind_Backtrace` and aborts on a difference
/// (`recorder/src/imp/unwind.rs`); `MEMREPLAY_DEBUG_UNWIND` has it count them. Every site
/// and count must be as exact as with frame pointers.
#[test]
fn fat_lto_build_without_frame_pointers_through_the_cached_unwinder() {
    let dir = build_with(
        "release-lto",
        "release-app-nofp",
        "-C force-frame-pointers=no",
        &["--config", "profile.release-lto.debug-assertions=true"],
    );
    let logs = std::env::temp_dir().join(format!("memreplay-release-nofp-{}", std::process::id()));
    std::fs::create_dir_all(&logs).unwrap();
    for exe in ["alloc-in-bin", "alloc-in-lib"] {
        let exe = dir.join(exe);
        let what = format!("release-lto, no frame pointers, {}", exe.file_name().unwrap().to_string_lossy());
        let log = logs.join(format!("{}.mrl", exe.file_name().unwrap().to_string_lossy()));
        let out = Command::new(&exe)
            .arg("env")
            .env("MEMREPLAY_LOG", &log)
            .env("MEMREPLAY_OPTIONS", "free-callstacks=on,unwind=unwinder")
            .env("MEMREPLAY_DEBUG_UNWIND", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{what}: {stderr}");
        let counts: Vec<u64> = stderr
            .lines()
            .find_map(|l| l.strip_prefix("memreplay: unwinder: "))
            .unwrap_or_else(|| panic!("{what}: no count of the unwinder's captures in {stderr:?}"))
            .split(' ')
            .filter_map(|w| w.parse().ok())
            .collect();
        assert!(counts[0] > 0, "{what}: no capture by the cached unwinder: {stderr}");
        assert_eq!(counts[1], 0, "{what}: captures left to _Unwind_Backtrace: {stderr}");
        check_sites(&Recording { log, oracle: oracle(&out.stdout) }, true, &what);
    }
    std::fs::remove_dir_all(&logs).ok();
}
