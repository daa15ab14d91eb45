//! The analyzer's memory per live allocation, against heaptrack's on the same program.
//!
//! Not a criterion bench. The program is this binary with `--program SCALE`
//! (`memreplay_benches::json_program`): real serde_json work shaped like a compiler's or
//! a loader's: it parses a generated JSON document of about SCALE values into a
//! `serde_json::Value` (millions of small allocations live at once: strings, vectors, map
//! nodes, from serde_json's recursive descent, so many distinct (size, callstack) pairs),
//! walks it, clones a tenth of its subtrees, serializes it back (a growing buffer), and
//! drops it all.
//!
//! For two scales, the program runs recorded by memreplay (16-frame callstacks) and, when
//! Debian's `heaptrack` is installed, under `heaptrack`; then `summarize` (the library
//! call `replay-cli summarize` makes, symbolication included) and `heaptrack_print` read
//! the logs, each in a fresh child process whose peak RSS (`wait4`'s `ru_maxrss`) is
//! measured. Printed per scale: live allocations at the heap's peak, events, log size in
//! bytes per event (also of a second recording with zstd blocks), and both analyzers' peak RSS (ours also with `--no-symbols`: heaptrack
//! resolves symbols while it records, so `heaptrack_print` has none to load); then, from
//! the two scales, each analyzer's bytes per live allocation (the slope) and its fixed
//! part (the intercept).
//!
//! `RUSTFLAGS="-C force-frame-pointers=yes" cargo bench -p memreplay-benches --bench analyzer_memory`
//! (`-- --scales 200000,2000000` sets the two scales; `--keep DIR` keeps the logs.)

use std::alloc::System;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use memreplay_benches::json_program;
use memreplay_report::{self as report, Progress, ReportOptions, SymbolOptions};
use serde_json::Value;

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

/// Peak RSS in bytes of a child process, and its standard output. The child is reaped
/// with `wait4`, which gives its resource usage (std's `wait` does not).
#[allow(clippy::zombie_processes)]
fn run_measured(cmd: &mut Command) -> (u64, String) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("the child starts");
    let mut out = String::new();
    child.stdout.take().expect("piped").read_to_string(&mut out).expect("its output");
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, whose pid is valid until it is reaped here; the
    // pointers are to live locals.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert!(pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{cmd:?} failed: {out}");
    (usage.ru_maxrss as u64 * 1024, out)
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

/// One scale: record, read, and the same with heaptrack.
struct Figures {
    live: u64,
    events: u64,
    ours_rss: u64,
    /// The same without symbolication (`--no-symbols`): the replay and the report alone.
    ours_rss_unnamed: u64,
    ours_bytes: u64,
    /// The same program's log with zstd blocks (`compression=zstd`, level 1).
    ours_bytes_zstd: u64,
    ours_s: f64,
    heaptrack: Option<(u64, u64, f64)>,
}

fn measure(scale: u64, dir: &Path) -> Figures {
    let exe = std::env::current_exe().expect("own path");
    let log = dir.join(format!("program-{scale}.mrl"));
    let (_, out) = run_measured(Command::new(&exe).args(["--program", &scale.to_string()]).env("MEMREPLAY_LOG", &log));
    let values: u64 = out.trim().parse().expect("the program's count");
    let t = Instant::now();
    let (ours_rss, summary) = run_measured(Command::new(&exe).args(["--summarize", &log.display().to_string()]));
    let ours_s = t.elapsed().as_secs_f64();
    let v: Value = serde_json::from_str(&summary).expect("summarize --json");
    let heap = v["domains"].as_array().and_then(|d| d.iter().find(|d| d["domain"]["name"] == "heap")).expect("heap");
    let live = heap["peak"]["count"].as_u64().expect("peak count");
    let events = v["capture"]["events"].as_u64().expect("events");
    let ours_bytes = std::fs::metadata(&log).map_or(0, |m| m.len());
    let zstd_log = dir.join(format!("program-{scale}-zstd.mrl"));
    let (_, out) = run_measured(
        Command::new(&exe)
            .args(["--program", &scale.to_string()])
            .env("MEMREPLAY_LOG", &zstd_log)
            .env("MEMREPLAY_OPTIONS", "compression=zstd"),
    );
    assert_eq!(out.trim().parse::<u64>().expect("the program's count"), values);
    let ours_bytes_zstd = std::fs::metadata(&zstd_log).map_or(0, |m| m.len());
    let (ours_rss_unnamed, _) =
        run_measured(Command::new(&exe).args(["--summarize", &log.display().to_string(), "--no-symbols"]));
    let heaptrack = which("heaptrack").and(which("heaptrack_print")).map(|_| {
        let base = dir.join(format!("program-{scale}.heaptrack"));
        let status = Command::new("heaptrack")
            .arg("-o")
            .arg(&base)
            .arg(&exe)
            .args(["--program", &scale.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("heaptrack runs");
        assert!(status.success(), "heaptrack failed");
        let file = [".zst", ".gz", ""]
            .iter()
            .map(|ext| PathBuf::from(format!("{}{ext}", base.display())))
            .find(|p| p.exists())
            .expect("heaptrack's output file");
        let t = Instant::now();
        let (rss, _) = run_measured(Command::new("heaptrack_print").arg(&file).stdout(Stdio::null()));
        (rss, std::fs::metadata(&file).map_or(0, |m| m.len()), t.elapsed().as_secs_f64())
    });
    Figures { live, events, ours_rss, ours_rss_unnamed, ours_bytes, ours_bytes_zstd, ours_s, heaptrack }
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

fn main() {
    if let Some(scale) = arg("--program") {
        let values = json_program(scale.parse().expect("a scale"));
        // Recording (MEMREPLAY_LOG) started on the first allocation; end the log here.
        memreplay::stop();
        println!("{values}");
        return;
    }
    if let Some(log) = arg("--summarize") {
        // As `replay-cli` does.
        memreplay_replay::return_big_blocks_to_the_system();
        let opts = ReportOptions { json: true, ..ReportOptions::new(log) };
        let symbols = SymbolOptions { disabled: std::env::args().any(|a| a == "--no-symbols"), ..Default::default() };
        let text = report::run_summarize(&opts, &symbols, Progress::Hidden).expect("summarize");
        print!("{text}");
        return;
    }
    // `cargo test --benches` runs this too: keep it small there.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let scales: Vec<u64> = arg("--scales")
        .unwrap_or_else(|| if smoke { "2000,20000".into() } else { "200000,2000000".into() })
        .split(',')
        .map(|s| s.parse().expect("a scale"))
        .collect();
    assert_eq!(scales.len(), 2, "--scales A,B");
    let dir = match arg("--keep") {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir().join(format!("memreplay-analyzer-memory-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).expect("a folder for the logs");
    if which("heaptrack").is_none() {
        println!("heaptrack is not installed (Debian's `heaptrack` package): memreplay's figures only");
    }
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut figures = Vec::new();
    for &scale in &scales {
        let f = measure(scale, &dir);
        println!(
            "scale {scale}: {} live allocations at the heap's peak, {} events; memreplay: log {:.2} B/event \
             ({:.2} with zstd blocks), summarize {:.1} MiB peak RSS in {:.2} s ({:.1} MiB with --no-symbols)",
            f.live,
            f.events,
            f.ours_bytes as f64 / f.events as f64,
            f.ours_bytes_zstd as f64 / f.events as f64,
            mib(f.ours_rss),
            f.ours_s,
            mib(f.ours_rss_unnamed)
        );
        if let Some((rss, bytes, s)) = f.heaptrack {
            println!(
                "  heaptrack: log {:.2} B/event (of memreplay's events), heaptrack_print {:.1} MiB peak RSS in {:.2} s",
                bytes as f64 / f.events as f64,
                mib(rss),
                s
            );
        }
        figures.push(f);
    }
    let (a, b) = (&figures[0], &figures[1]);
    let slope = |ra: u64, rb: u64| (rb as f64 - ra as f64) / (b.live as f64 - a.live as f64);
    let fixed = |ra: u64, s: f64| ra as f64 - s * a.live as f64;
    let s = slope(a.ours_rss, b.ours_rss);
    println!(
        "memreplay summarize: {s:.1} B per live allocation + {:.1} MiB fixed ({:.1} B per live allocation all told at {})",
        fixed(a.ours_rss, s) / (1 << 20) as f64,
        b.ours_rss as f64 / b.live as f64,
        b.live
    );
    let s = slope(a.ours_rss_unnamed, b.ours_rss_unnamed);
    println!(
        "  with --no-symbols: {s:.1} B per live allocation + {:.1} MiB fixed (heaptrack names its frames while it records)",
        fixed(a.ours_rss_unnamed, s) / (1 << 20) as f64
    );
    if let (Some(ha), Some(hb)) = (a.heaptrack, b.heaptrack) {
        let s = slope(ha.0, hb.0);
        println!(
            "heaptrack_print:     {s:.1} B per live allocation + {:.1} MiB fixed ({:.1} B per live allocation all told); \
             memreplay/heaptrack peak RSS {:.2}x, log size {:.2}x ({:.2}x with zstd blocks)",
            fixed(ha.0, s) / (1 << 20) as f64,
            hb.0 as f64 / b.live as f64,
            b.ours_rss as f64 / hb.0 as f64,
            b.ours_bytes as f64 / hb.1 as f64,
            b.ours_bytes_zstd as f64 / hb.1 as f64
        );
    }
    if arg("--keep").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
