//! Not a criterion bench: what recording costs a C program, against heaptrack. The
//! threaded C program of the preload tests (`crates/capi/tests/preload/threads.c`, built
//! with `cc -O2 -g -fno-omit-frame-pointer`: 4 threads, each iteration allocating 4
//! blocks, reallocating 1 and freeing 4, some on another thread) runs, each in a fresh
//! process, plain; with `libmemreplay.so` preloaded and `MEMREPLAY_LOG` set (what
//! `replay-cli record` does) with frame-pointer stacks, with the unwinder, and with no
//! stacks; and under `heaptrack` (its default: unwound stacks, its own interpreter
//! process). The same program built with `-fomit-frame-pointer` (what glibc and most
//! distribution C and C++ are) runs plain, with the unwinder and under heaptrack. Each
//! setup runs `RUNS` times (interleaved); printed: the median wall time and CPU time
//! (user and system time of the process and what it waited for, from `wait4`) and their
//! ratios to the plain run's of the same build, the events per second recorded, and the
//! size of the log each writes per heap event (memreplay's with LZ4 blocks and, in
//! `memreplay, fp stacks, zstd`, with zstd blocks, in `memreplay, fp, lz4-columns` and
//! `zstd-columns` with each block's fields in columns first; heaptrack's zstd-compressed
//! file).
//!
//! Each setup's overhead (its wall-time ratio − 1) is also given as a share of the
//! overhead of heaptrack on the same build.
//!
//! `-- --shape churn` runs the other log shape of issue 17 instead, for log sizes against
//! heaptrack's: `benches/programs/churn.c`, 2 threads freeing and allocating random
//! sizes from 16 B to 1 MiB in 5,000 slots each through 16-deep call chains (`-- --ops N`
//! steps per thread, default 1,800,000), frame-pointer build only.
//!
//! Each heaptrack file's allocation calls (its `+` lines) are checked against the
//! program's: heaptrack exits 0 even when its interpreter lost the end of the run.
//!
//! Then the analyzers (issue 17's target 1 on these programs): the peak RSS and wall time
//! of `summarize` (this binary with `--summarize LOG`: the library call `replay-cli
//! summarize` makes, symbols included) on the last run's log of `memreplay, fp stacks`,
//! and of `heaptrack_print` on heaptrack's file of the same build, medians of `RUNS`
//! fresh processes each, interleaved; `heaptrack_print` only where heaptrack's file
//! records the whole run.
//!
//! `cargo bench -p memreplay-benches --bench preload_overhead` (`-- --iterations N`
//! changes the work per thread, `-- --threads N` the threads, `-- --runs N` the runs).
//! `cargo test --benches` runs it as a smoke test: 10,000 iterations (20,000 churn steps),
//! one run of each setup.
//! Builds the release `libmemreplay.so` first (`cargo build --release -p memreplay-capi`)
//! and the two programs with `cc`, unless `-- --library PATH`, `-- --program PATH` and
//! `-- --program-nofp PATH` name ones already built (to run the bench on a machine
//! without a toolchain). `-- --baseline PATH` adds the stack setups with another
//! `libmemreplay.so` (an older build), interleaved with the rest, so that a change is
//! measured in the same run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use memreplay_benches::median;

const RUNS: usize = 5;

fn arg_text(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn arg(name: &str, default: usize) -> usize {
    arg_text(name).map(|v| v.parse().unwrap_or_else(|_| panic!("{name} takes a number, not {v}"))).unwrap_or(default)
}

/// `target/release/`: this bench's executable is in its `deps/`.
fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn library() -> PathBuf {
    let target = release_dir().parent().unwrap().to_path_buf();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "--release", "-p", "memreplay-capi", "--target-dir"])
        .arg(&target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo");
    assert!(status.success(), "cargo build --release -p memreplay-capi");
    release_dir().join("libmemreplay.so")
}

/// The C program at `source` (relative to this package) built with `-O2 -g` and
/// `frame_pointers` (`-fno-omit-frame-pointer` or `-fomit-frame-pointer`).
fn program(source: &str, frame_pointers: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(source);
    let out = std::env::temp_dir().join(format!("memreplay-preload-bench-{}{frame_pointers}", std::process::id()));
    let status = Command::new("cc")
        .args(["-O2", "-g", frame_pointers, "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("run cc");
    assert!(status.success());
    out
}

/// Runs `cmd` to its end: (wall seconds, CPU seconds of it and its waited-for children,
/// peak RSS in bytes of its largest process).
#[allow(clippy::zombie_processes)]
fn measure(cmd: &mut Command) -> (f64, f64, u64) {
    let start = Instant::now();
    let child = cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, filling `status` and `usage`.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let wall = start.elapsed().as_secs_f64();
    assert!(pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{cmd:?} failed");
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (wall, secs(usage.ru_utime) + secs(usage.ru_stime), usage.ru_maxrss as u64 * 1024)
}

/// A setup: its name, `MEMREPLAY_OPTIONS` (none: not recorded by memreplay), which
/// build (0 with frame pointers, 1 without), and whether it preloads the baseline library.
type Setup = (&'static str, Option<&'static str>, usize, bool);

fn main() {
    // The analyzers' half: this binary as `replay-cli summarize LOG`, in its own process.
    if let Some(log) = arg_text("--summarize") {
        memreplay_benches::summarize_as_replay_cli(&log, false);
        return;
    }
    // `cargo test --benches` runs this too (no `--bench`): one small run of each setup.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let iterations = arg("--iterations", if smoke { 10_000 } else { 100_000 });
    let threads = arg("--threads", 4);
    let runs = arg("--runs", if smoke { 1 } else { RUNS });
    let churn = match arg_text("--shape").as_deref() {
        None | Some("threads") => false,
        Some("churn") => true,
        Some(other) => panic!("--shape takes threads or churn, not {other}"),
    };
    let ops = arg("--ops", if smoke { 20_000 } else { 1_800_000 });
    let lib = arg_text("--library").map(PathBuf::from).unwrap_or_else(library);
    let baseline = arg_text("--baseline").map(PathBuf::from);
    let prebuilt = [arg_text("--program"), arg_text("--program-nofp")];
    let source = if churn { "programs/churn.c" } else { "../crates/capi/tests/preload/threads.c" };
    // The churn shape compares log sizes: its frame-pointer build only.
    let exes: Vec<PathBuf> = prebuilt
        .iter()
        .zip(["-fno-omit-frame-pointer", "-fomit-frame-pointer"])
        .take(if churn { 1 } else { 2 })
        .map(|(given, flag)| given.as_ref().map(PathBuf::from).unwrap_or_else(|| program(source, flag)))
        .collect();
    let dir = std::env::temp_dir();
    let log = dir.join(format!("memreplay-preload-bench-{}.mrl", std::process::id()));
    let heaptrack_out = dir.join(format!("memreplay-preload-bench-{}-heaptrack", std::process::id()));
    let args =
        if churn { vec![ops.to_string()] } else { vec![threads.to_string(), "7".to_owned(), iterations.to_string()] };
    // Events: threads × iterations × (4 allocations + 1 realloc + 4 frees); churn.c: 2
    // threads × ops × (1 allocation + 1 free).
    let events = if churn { 4.0 * ops as f64 } else { threads as f64 * iterations as f64 * 9.0 };
    // Each build's plain run comes first.
    let mut setups: Vec<Setup> = vec![
        ("plain", None, 0, false),
        ("memreplay, fp stacks", Some("unwind=fp"), 0, false),
        ("memreplay, fp stacks, zstd", Some("unwind=fp,compression=zstd"), 0, false),
        ("memreplay, fp, lz4-columns", Some("unwind=fp,compression=lz4-columns"), 0, false),
        ("memreplay, fp, zstd-columns", Some("unwind=fp,compression=zstd-columns"), 0, false),
        ("memreplay, unwinder stacks", Some("unwind=unwinder"), 0, false),
        ("memreplay, no stacks", Some("callstacks=off"), 0, false),
        ("heaptrack", None, 0, false),
        ("plain, no-fp build", None, 1, false),
        ("memreplay, unwinder, no-fp", Some("unwind=unwinder"), 1, false),
        ("heaptrack, no-fp build", None, 1, false),
    ];
    if baseline.is_some() {
        setups.push(("baseline, fp stacks", Some("unwind=fp"), 0, true));
        setups.push(("baseline, unwinder stacks", Some("unwind=unwinder"), 0, true));
        setups.push(("baseline, unwinder, no-fp", Some("unwind=unwinder"), 1, true));
    }
    setups.retain(|s| s.2 < exes.len());
    let have_heaptrack = Command::new("heaptrack").arg("--version").output().is_ok();
    let mut figures: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); setups.len()];
    // Each setup's log (or heaptrack's file), bytes: the same every run but for timing.
    let mut log_bytes: Vec<Option<u64>> = vec![None; setups.len()];
    // heaptrack's allocation calls, from its file of the last run: checked against the
    // program's, since heaptrack exits 0 even when its interpreter lost the run's end.
    let mut heaptrack_calls: Vec<Option<u64>> = vec![None; setups.len()];
    // Allocation calls the program makes (heaptrack's `+` lines: allocations and reallocs),
    // at least: threads × iterations × 4 (threads.c's tally: 3 allocations and 1 realloc
    // an iteration; the C library makes a few more); churn.c: 2 × ops.
    let calls = if churn { 2 * ops as u64 } else { threads as u64 * iterations as u64 * 4 };
    let heaptrack_file = {
        let mut f = heaptrack_out.clone().into_os_string();
        f.push(".zst");
        PathBuf::from(f)
    };
    // The last run's logs of the frame-pointer build's default recording and of heaptrack
    // on it, for the analyzers.
    let kept_log = dir.join(format!("memreplay-preload-bench-{}-kept.mrl", std::process::id()));
    let kept_heaptrack = dir.join(format!("memreplay-preload-bench-{}-kept-heaptrack.zst", std::process::id()));
    for run in 0..runs {
        for (i, (name, options, build, old)) in setups.iter().enumerate() {
            let exe = &exes[*build];
            let mut cmd = if name.starts_with("heaptrack") {
                if !have_heaptrack {
                    continue;
                }
                let mut c = Command::new("heaptrack");
                c.arg("-o").arg(&heaptrack_out).arg(exe);
                c
            } else {
                Command::new(exe)
            };
            cmd.args(&args);
            if let Some(o) = options {
                let lib = if *old { baseline.as_ref().unwrap() } else { &lib };
                cmd.env("LD_PRELOAD", lib).env("MEMREPLAY_LOG", &log).env("MEMREPLAY_OPTIONS", o);
            }
            let (wall, cpu, _) = measure(&mut cmd);
            figures[i].0.push(wall);
            figures[i].1.push(cpu);
            let written = if name.starts_with("heaptrack") { Some(&heaptrack_file) } else { options.map(|_| &log) };
            log_bytes[i] = written.and_then(|f| std::fs::metadata(f).ok()).map(|m| m.len());
            if name.starts_with("heaptrack") && heaptrack_calls[i].is_none() {
                heaptrack_calls[i] = memreplay_benches::heaptrack_file(&heaptrack_file).allocations;
            }
            if run + 1 == runs {
                match *name {
                    "memreplay, fp stacks" => std::fs::copy(&log, &kept_log).map(drop).expect("the log is kept"),
                    "heaptrack" => std::fs::copy(&heaptrack_file, &kept_heaptrack).map(drop).expect("the file is kept"),
                    _ => {}
                }
            }
        }
    }
    let work = if churn {
        format!("churn.c, 2 threads x {ops} steps")
    } else {
        format!("threads.c, {threads} threads x {iterations} iterations")
    };
    println!("preload_overhead: {work} ({:.1} M heap events), median of {runs}", events / 1e6);
    println!(
        "{:<28} {:>9} {:>7} {:>9} {:>7} {:>12} {:>14} {:>9}",
        "setup", "wall s", "x", "CPU s", "x", "M events/s", "of heaptrack's", "B/event"
    );
    let medians: Vec<Option<(f64, f64)>> = figures
        .iter()
        .map(|(w, c)| (!w.is_empty()).then(|| (median(&mut w.clone()), median(&mut c.clone()))))
        .collect();
    // Each build's plain run, and heaptrack's added wall time on it.
    let of_build = |build: usize, heaptrack: bool| {
        let i = setups.iter().position(|s| s.2 == build && s.1.is_none() && s.0.starts_with("heaptrack") == heaptrack);
        i.and_then(|i| medians[i])
    };
    for (i, (((name, options, build, _), m), bytes)) in setups.iter().zip(&medians).zip(&log_bytes).enumerate() {
        let Some((w, c)) = *m else {
            println!("{name:<28} (not installed)");
            continue;
        };
        let (w0, c0) = of_build(*build, false).unwrap();
        let share = match of_build(*build, true) {
            Some((h, _)) if options.is_some() && h > w0 => format!("{:.2}", (w / w0 - 1.0) / (h / w0 - 1.0)),
            _ => String::new(),
        };
        let partial = heaptrack_calls[i].is_some_and(|n| n < calls);
        let per_event = bytes
            .map_or(String::new(), |b| format!("{}{:.2}", if partial { "partial " } else { "" }, b as f64 / events));
        println!(
            "{name:<28} {w:>9.3} {:>7.2} {c:>9.3} {:>7.2} {:>12.2} {share:>14} {per_event:>9}",
            w / w0,
            c / c0,
            events / w / 1e6
        );
    }
    for ((name, ..), n) in setups.iter().zip(&heaptrack_calls) {
        match n {
            Some(n) if *n < calls => println!(
                "{name}: INCOMPLETE: its file records {n} of the program's {calls} or more allocation calls (heaptrack's \
                 interpreter stopped early and heaptrack exited 0): its B/event covers part of the run"
            ),
            Some(n) => println!("{name}: its file records the whole run ({n} allocation calls; the program makes at least {calls})"),
            None => {}
        }
    }
    let heaptrack_whole = match setups.iter().position(|s| s.0 == "heaptrack").and_then(|i| heaptrack_calls[i]) {
        _ if !have_heaptrack => {
            println!("analyzers: heaptrack is not installed: summarize alone");
            false
        }
        Some(n) if n >= calls => true,
        n => {
            let n = n.map_or("none".to_owned(), |n| n.to_string());
            println!(
                "analyzers: heaptrack's file records {n} of {calls} allocation calls: heaptrack_print not compared"
            );
            false
        }
    };
    analyzers(&kept_log, heaptrack_whole.then_some(kept_heaptrack.as_path()), runs);
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(heaptrack_file);
    let _ = std::fs::remove_file(&kept_log);
    let _ = std::fs::remove_file(&kept_heaptrack);
    for (exe, given) in exes.iter().zip(&prebuilt) {
        if given.is_none() {
            let _ = std::fs::remove_file(exe);
        }
    }
}

/// Issue 17's target 1 on this program: the peak RSS and wall time of `summarize` (this
/// binary's `--summarize`, the library call `replay-cli summarize` makes, symbols
/// included) on `log`, and of `heaptrack_print` on `heaptrack` (heaptrack's file of the
/// same run, given only if it records the whole run), each the median of `runs` fresh
/// processes, interleaved.
fn analyzers(log: &Path, heaptrack: Option<&Path>, runs: usize) {
    let exe = std::env::current_exe().unwrap();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        ours.push(measure(Command::new(&exe).arg("--summarize").arg(log)));
        if let Some(file) = heaptrack {
            theirs.push(measure(Command::new("heaptrack_print").arg(file)));
        }
    }
    let mib = |b: f64| b / (1 << 20) as f64;
    let figures = |v: &[(f64, f64, u64)]| {
        let (mut wall, mut rss): (Vec<f64>, Vec<f64>) = v.iter().map(|&(w, _, r)| (w, r as f64)).unzip();
        (median(&mut wall), median(&mut rss))
    };
    let (wall, rss) = figures(&ours);
    print!(
        "analyzers, on the last run's log of `memreplay, fp stacks`{}: summarize {:.1} MiB peak RSS, {wall:.2} s",
        if theirs.is_empty() { "" } else { " and heaptrack's file" },
        mib(rss)
    );
    if !theirs.is_empty() {
        let (h_wall, h_rss) = figures(&theirs);
        print!(
            "; heaptrack_print {:.1} MiB, {h_wall:.2} s: {:.2}x its memory, {:.2}x its time",
            mib(h_rss),
            rss / h_rss,
            wall / h_wall
        );
    }
    println!(" (medians of {runs})");
}
