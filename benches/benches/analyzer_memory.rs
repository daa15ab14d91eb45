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
//! For each scale, the program runs recorded by memreplay (16-frame callstacks) and, when
//! Debian's `heaptrack` is installed, under `heaptrack`; then `summarize` (the library
//! call `replay-cli summarize` makes, symbolication included) and `heaptrack_print` read
//! the logs, each in a fresh child process whose peak RSS (`wait4`'s `ru_maxrss`) is
//! measured. Printed per scale: live allocations at the heap's peak, events, log size in
//! bytes per event (also of recordings with zstd blocks and with each block's fields in
//! columns, `compression=zstd`, `lz4-columns`, `zstd-columns`), and both analyzers' peak
//! RSS (ours also with `--no-symbols`: heaptrack resolves symbols while it records, so
//! `heaptrack_print` has none to load); then, from the last two scales, each analyzer's
//! bytes per live allocation (the slope) and its fixed part (the intercept).
//!
//! **heaptrack's coverage is checked first.** heaptrack 1.4.0 (Debian 12's) loses the
//! rest of a run when its interpreter process aborts, and still exits 0: on this program
//! it does from about 41,000 distinct (size, callstack) pairs on (`std::bad_alloc`: its
//! set of them grows without bound; RESULTS.md §37), which in the release build is every
//! scale above about 50,000. So each scale compares heaptrack's allocation calls (its file's `+` lines)
//! with memreplay's. Where heaptrack's file is incomplete the bench says so, quotes what
//! heaptrack printed, and compares log sizes only over the span heaptrack's file covers
//! (memreplay's blocks up to its allocation of the same count); `heaptrack_print` of a
//! partial file is not compared with `summarize` of the whole run. The default scales
//! include 50,000, at which heaptrack 1.4 records the whole program.
//!
//! `RUSTFLAGS="-C force-frame-pointers=yes" cargo bench -p memreplay-benches --bench analyzer_memory`
//! (`-- --scales 50000,200000,2000000` sets the scales, at least two; `--keep DIR` keeps the logs.)

use std::alloc::System;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use memreplay_benches::{heaptrack_file, json_program, log_prefix, summarize_as_replay_cli, HeaptrackFile};
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
    /// The same program recorded with each of `OTHER_METHODS`: its log and the log's bytes.
    other_logs: Vec<(PathBuf, u64)>,
    ours_s: f64,
    /// The heap allocation calls memreplay recorded (allocations and reallocs).
    allocations: u64,
    log: PathBuf,
    heaptrack: Option<Heaptrack>,
}

/// The recorder's other compression methods (option `compression=`), each a recording of
/// its own beside the default LZ4 one.
const OTHER_METHODS: [&str; 3] = ["zstd", "lz4-columns", "zstd-columns"];

/// `a, b, c` for the other methods' values: "zstd 2.72, lz4-columns 3.39, ...".
fn per_method(values: impl Iterator<Item = f64>, unit: &str) -> String {
    OTHER_METHODS.iter().zip(values).map(|(m, v)| format!("{m} {v:.2}{unit}")).collect::<Vec<_>>().join(", ")
}

/// The same scale under heaptrack.
struct Heaptrack {
    file: HeaptrackFile,
    /// `heaptrack_print`'s peak RSS and seconds.
    print_rss: u64,
    print_s: f64,
    /// What heaptrack printed to stderr that tells why a run was lost (its interpreter's
    /// abort), if anything.
    said: Vec<String>,
}

impl Figures {
    /// Whether `calls` allocation calls (heaptrack's) are the whole run: as many as
    /// memreplay's log holds, less 1 % (heaptrack also sees a few calls made before
    /// memreplay's recording starts).
    fn whole_run(&self, calls: u64) -> bool {
        calls * 100 >= self.allocations * 99
    }

    /// heaptrack's figures, if its file records the whole run.
    fn heaptrack_complete(&self) -> Option<&Heaptrack> {
        self.heaptrack.as_ref().filter(|h| h.file.allocations.is_some_and(|n| self.whole_run(n)))
    }
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
    let other_logs = OTHER_METHODS
        .iter()
        .map(|method| {
            let other = dir.join(format!("program-{scale}-{method}.mrl"));
            let (_, out) = run_measured(
                Command::new(&exe)
                    .args(["--program", &scale.to_string()])
                    .env("MEMREPLAY_LOG", &other)
                    .env("MEMREPLAY_OPTIONS", format!("compression={method}")),
            );
            assert_eq!(out.trim().parse::<u64>().expect("the program's count"), values);
            let bytes = std::fs::metadata(&other).map_or(0, |m| m.len());
            (other, bytes)
        })
        .collect();
    let (ours_rss_unnamed, _) =
        run_measured(Command::new(&exe).args(["--summarize", &log.display().to_string(), "--no-symbols"]));
    let allocations = heap["total"]["count"].as_u64().expect("allocation count");
    let heaptrack = which("heaptrack").and(which("heaptrack_print")).map(|_| {
        let base = dir.join(format!("program-{scale}.heaptrack"));
        let out = Command::new("heaptrack")
            .arg("-o")
            .arg(&base)
            .arg(&exe)
            .args(["--program", &scale.to_string()])
            .stdin(Stdio::null())
            .output()
            .expect("heaptrack runs");
        assert!(out.status.success(), "heaptrack failed: {}", String::from_utf8_lossy(&out.stderr));
        let said = String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| ["terminate", "what()", "abort", "error"].iter().any(|w| l.to_lowercase().contains(w)))
            .map(|l| l.trim().to_string())
            .collect();
        let path = [".zst", ".gz", ""]
            .iter()
            .map(|ext| PathBuf::from(format!("{}{ext}", base.display())))
            .find(|p| p.exists())
            .expect("heaptrack's output file");
        let t = Instant::now();
        let (print_rss, _) = run_measured(Command::new("heaptrack_print").arg(&path));
        Heaptrack { file: heaptrack_file(&path), print_rss, print_s: t.elapsed().as_secs_f64(), said }
    });
    Figures { live, events, ours_rss, ours_rss_unnamed, ours_bytes, other_logs, ours_s, allocations, log, heaptrack }
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
        print!("{}", summarize_as_replay_cli(&log, std::env::args().any(|a| a == "--no-symbols")));
        return;
    }
    // `cargo test --benches` runs this too: keep it small there.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let scales: Vec<u64> = arg("--scales")
        .unwrap_or_else(|| if smoke { "2000,20000".into() } else { "50000,200000,2000000".into() })
        .split(',')
        .map(|s| s.parse().expect("a scale"))
        .collect();
    assert!(scales.len() >= 2, "--scales A,B[,...]: at least two");
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
            "scale {scale}: {} live allocations at the heap's peak, {} events, {} allocation calls; memreplay: log \
             {:.2} B/event ({}), summarize {:.1} MiB peak RSS in {:.2} s ({:.1} MiB with --no-symbols)",
            f.live,
            f.events,
            f.allocations,
            f.ours_bytes as f64 / f.events as f64,
            per_method(f.other_logs.iter().map(|o| o.1 as f64 / f.events as f64), ""),
            mib(f.ours_rss),
            f.ours_s,
            mib(f.ours_rss_unnamed)
        );
        match f.heaptrack.as_ref().map(|h| (h, h.file.allocations)) {
            None => {}
            Some((h, Some(calls))) if f.whole_run(calls) => println!(
                "  heaptrack: its file records the whole run ({calls} allocation calls); log {:.2} B/event (of \
                 memreplay's events): memreplay's log {:.2}x its size ({}); heaptrack_print {:.1} MiB peak RSS in \
                 {:.2} s: summarize {:.2}x that",
                h.file.bytes as f64 / f.events as f64,
                f.ours_bytes as f64 / h.file.bytes as f64,
                per_method(f.other_logs.iter().map(|o| o.1 as f64 / h.file.bytes as f64), "x"),
                mib(h.print_rss),
                h.print_s,
                f.ours_rss as f64 / h.print_rss as f64
            ),
            Some((h, Some(covered))) => {
                println!(
                    "  heaptrack: INCOMPLETE: its file records {covered} of the run's {} allocation calls ({:.0} %) \
                     and heaptrack exited 0{}",
                    f.allocations,
                    100.0 * covered as f64 / f.allocations as f64,
                    if h.said.is_empty() { String::new() } else { format!("; it printed: {}", h.said.join(" / ")) }
                );
                let (n, bytes, events) = log_prefix(&f.log, covered);
                let others = f.other_logs.iter().map(|o| log_prefix(&o.0, covered).1 as f64 / h.file.bytes as f64);
                println!(
                    "    over the span it covers (memreplay's blocks up to its allocation call {n}: {events} events), \
                     memreplay's log is {:.2}x heaptrack's file ({}); heaptrack_print of that partial file: {:.1} MiB \
                     peak RSS in {:.2} s (not compared with summarize of the whole run)",
                    bytes as f64 / h.file.bytes as f64,
                    per_method(others, "x"),
                    mib(h.print_rss),
                    h.print_s
                );
            }
            Some((h, None)) => println!(
                "  heaptrack: a gzip file ({} bytes), not read: how much of the run it covers is not known, so it is \
                 not compared",
                h.file.bytes
            ),
        }
        figures.push(f);
    }
    let (a, b) = (&figures[figures.len() - 2], &figures[figures.len() - 1]);
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
    if let (Some(ha), Some(hb)) = (a.heaptrack_complete(), b.heaptrack_complete()) {
        let s = slope(ha.print_rss, hb.print_rss);
        println!(
            "heaptrack_print:     {s:.1} B per live allocation + {:.1} MiB fixed ({:.1} B per live allocation all told)",
            fixed(ha.print_rss, s) / (1 << 20) as f64,
            hb.print_rss as f64 / b.live as f64,
        );
    } else if which("heaptrack").is_some() {
        let complete: Vec<String> = figures
            .iter()
            .zip(&scales)
            .filter(|(f, _)| f.heaptrack_complete().is_some())
            .map(|(_, s)| s.to_string())
            .collect();
        println!(
            "heaptrack_print: no slope: heaptrack's file is complete at {} of these scales{}",
            if complete.is_empty() { "none".to_string() } else { complete.len().to_string() },
            if complete.is_empty() { String::new() } else { format!(" ({})", complete.join(", ")) }
        );
    }
    if arg("--keep").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
