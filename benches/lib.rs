//! Shared pieces of the memreplay benchmarks: the measured allocation pair, the criterion
//! settings, recording sessions to temporary files and the figures they report, and a
//! real program to profile (serde_json work).
//!
//! Every bench target is its own binary with its own `#[global_allocator]`, so this crate
//! installs none. See `RESULTS.md` for the figures and the commands that produced them.

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use ::criterion::Criterion;

/// Allocation sizes of the per-event benches: small objects, where the recorder's
/// fixed cost per event shows most.
pub const SIZES: [usize; 3] = [16, 64, 256];

/// Criterion settings that keep the whole suite within a few minutes on 2 shared cores.
/// Command-line flags (`--warm-up-time`, `--measurement-time`, ...) still override them.
pub fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
        .configure_from_args()
}

/// One allocation and its free through the global allocator (`std::alloc::alloc`).
/// `black_box` keeps the pair from being optimised away.
#[inline(always)]
pub fn global_pair(layout: Layout) {
    // SAFETY: the caller's layout is non-zero-sized; the block is freed with it at once.
    unsafe {
        let p = std::alloc::alloc(black_box(layout));
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        std::alloc::dealloc(black_box(p), layout);
    }
}

/// One allocation and its free through `a` directly, bypassing the global allocator.
#[inline(always)]
pub fn direct_pair<A: GlobalAlloc>(a: &A, layout: Layout) {
    // SAFETY: the caller's layout is non-zero-sized; the block is freed with it at once.
    unsafe {
        let p = a.alloc(black_box(layout));
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        a.dealloc(black_box(p), layout);
    }
}

/// Frames below the measured loops: a game allocates 20-40 frames deep, so a 16-frame
/// walk fills all 16. Benchmarks run their loops this many extra calls deep.
pub const DEPTH: usize = 24;

/// Runs `f` `depth` non-inlined calls deeper than the caller, so that callstacks captured
/// inside are at least that deep.
#[inline(never)]
pub fn at_depth<R>(depth: usize, f: &mut dyn FnMut() -> R) -> R {
    if depth == 0 {
        f()
    } else {
        // black_box on the result keeps the call from becoming a tail call (a jump).
        black_box(at_depth(black_box(depth - 1), f))
    }
}

/// A `Box<[u8; N]>` made and dropped: what typical code does.
#[inline(always)]
pub fn box_pair<const N: usize>() {
    black_box(Box::new(black_box([0u8; N])));
}

pub fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).expect("valid layout")
}

/// A fresh path for a log in this process's temporary directory.
pub fn temp_log(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memreplay-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

/// Removes this process's temporary logs.
pub fn remove_temp_logs() {
    let dir = std::env::temp_dir().join(format!("memreplay-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(dir);
}

/// xorshift64*: deterministic, allocation-free; the workloads' random source.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A game-like allocation size, a multiple of 8: 55% 16-64 B, 27% 64-256 B, 12% 256 B-4 KiB,
/// 5% 4-64 KiB, 1% 64-256 KiB.
pub fn game_size(rng: &mut Rng) -> u64 {
    let (lo, hi) = match rng.below(100) {
        0..=54 => (16, 64),
        55..=81 => (64, 256),
        82..=93 => (256, 4096),
        94..=98 => (4096, 65536),
        _ => (65536, 262_144),
    };
    (lo + rng.below(hi - lo) + 7) & !7
}

/// Fields of `/proc/self/status` in bytes: (VmRSS, VmHWM). Zero where unavailable.
pub fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU time this process has used so far, its exited threads' included (user + system,
/// `getrusage(RUSAGE_SELF)`), in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    let u = process_usage();
    u.user_ns + u.system_ns
}

/// What `getrusage(RUSAGE_SELF)` says of this process so far, its exited threads' included.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessUsage {
    pub user_ns: u64,
    pub system_ns: u64,
    /// Context switches, voluntary (a thread slept: a wait, a `futex`) and not.
    pub switches: u64,
}

/// The process's CPU time and context switches so far (zero where `getrusage` fails).
pub fn process_usage() -> ProcessUsage {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage` for the call to fill.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return ProcessUsage::default();
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ProcessUsage { user_ns: ns(ru.ru_utime), system_ns: ns(ru.ru_stime), switches: (ru.ru_nvcsw + ru.ru_nivcsw) as u64 }
}

/// Resets the peak-RSS mark (VmHWM) to the current RSS (Linux `clear_refs`, value 5).
/// Returns whether it worked.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Depths of the callstacks a log defines: (stacks, shortest, longest, mean frames).
/// The frame-pointer walk only gets past the first frame or two when the binary was built
/// with `-C force-frame-pointers=yes`, so this tells whether the callstack figures count.
pub fn stack_depths(path: &std::path::Path) -> (usize, usize, usize, f64) {
    let log = memreplay_format::Log::open(path).expect("the log reads back");
    let depths: Vec<usize> = log
        .events()
        .filter_map(|(_, e)| match e {
            memreplay_format::Event::DefineStack { frames, .. } => Some(frames.len()),
            _ => None,
        })
        .collect();
    let n = depths.len();
    let min = depths.iter().copied().min().unwrap_or(0);
    let max = depths.iter().copied().max().unwrap_or(0);
    let mean = if n == 0 { 0.0 } else { depths.iter().sum::<usize>() as f64 / n as f64 };
    (n, min, max, mean)
}

/// What a heaptrack output file (`heaptrack -o FILE`) holds: its bytes, and the allocation
/// calls it records (its `+` lines; `None` for a gzip file, which is not read here).
///
/// Compare the calls with the program's own count before comparing anything else:
/// Debian's heaptrack 1.4.0 loses the rest of a run when its interpreter process aborts,
/// and still exits 0. It does abort (`std::bad_alloc`) on some programs with tens of
/// thousands of distinct (size, callstack) pairs, whose set it grows without bound
/// (benches/RESULTS.md §37). Its file then covers only the part of the run before that.
pub struct HeaptrackFile {
    pub bytes: u64,
    pub allocations: Option<u64>,
}

/// What `replay-cli summarize LOG` does (`--no-symbols` when `no_symbols`), as the JSON
/// report: in a bench's child process, whose peak memory the bench measures, or timed in
/// the bench's own. Big blocks first go back to the system, as `replay-cli` has them.
pub fn summarize_as_replay_cli(log: &str, no_symbols: bool) -> String {
    use memreplay_report::{Progress, ReportOptions, SymbolOptions};
    memreplay_replay::return_big_blocks_to_the_system();
    let opts = ReportOptions { json: true, ..ReportOptions::new(log) };
    let symbols = SymbolOptions { disabled: no_symbols, ..Default::default() };
    memreplay_report::run_summarize(&opts, &symbols, Progress::Hidden).expect("summarize")
}

/// The median of `v` (sorted in place; the upper one of an even count).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Reads heaptrack's file at `path` (`.zst`, or uncompressed).
pub fn heaptrack_file(path: &std::path::Path) -> HeaptrackFile {
    use std::io::BufRead;
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let name = path.to_string_lossy();
    let open = || std::fs::File::open(path).expect("heaptrack's file opens");
    let reader: Option<Box<dyn std::io::Read>> = if name.ends_with(".zst") {
        Some(Box::new(zstd::stream::read::Decoder::new(open()).expect("a zstd stream")))
    } else if name.ends_with(".gz") {
        None
    } else {
        Some(Box::new(open()))
    };
    let allocations = reader.map(|r| {
        let mut r = std::io::BufReader::with_capacity(1 << 20, r);
        let (mut line, mut n) = (Vec::new(), 0u64);
        while r.read_until(b'\n', &mut line).expect("heaptrack's file reads") > 0 {
            n += u64::from(line.starts_with(b"+ "));
            line.clear();
        }
        n
    });
    HeaptrackFile { bytes, allocations }
}

/// The heap allocation calls a memreplay log records (allocations and reallocs, the
/// calls heaptrack counts), and the bytes of the log up to the end of the first block at
/// which they reach `upto` (the whole file if they never do), with the events up to there:
/// `(allocations, bytes, events)`. Blocks are taken in file order, which follows time to
/// within a flush. Used to compare a log with a heaptrack file that covers only the start
/// of the same run.
pub fn log_prefix(path: &std::path::Path, upto: u64) -> (u64, u64, u64) {
    use memreplay_format::{block::FRAME_LEN, Event, LogReader};
    let file = std::fs::File::open(path).expect("the log opens");
    let mut reader = LogReader::new(std::io::BufReader::new(file)).expect("a memreplay log");
    let (mut allocations, mut bytes, mut events) = (0u64, 0u64, 0u64);
    let mut buf = Vec::new();
    while let Some(block) = reader.next_block().expect("the log reads") {
        if allocations >= upto {
            break;
        }
        let decoded = block.decode_with(&mut buf).expect("an undamaged block");
        for e in &decoded.events {
            allocations += u64::from(matches!(e, Event::Alloc { domain: 0, .. } | Event::Realloc { .. }));
        }
        events += decoded.events.len() as u64;
        bytes = block.offset + FRAME_LEN as u64 + u64::from(block.frame.stored_len);
    }
    (allocations, bytes, events)
}

#[cfg(feature = "recording")]
mod recording {
    use std::time::Duration;

    use memreplay::SessionStats;

    /// What a recording session cost and wrote, as one greppable line:
    /// `STATS <label> key=value ...`. `events` is the number of heap events the benchmark
    /// itself made, when known (otherwise the log's event count is used).
    pub fn print_stats(label: &str, stats: &SessionStats, wall: Duration, own_events: Option<u64>) {
        let events = own_events.unwrap_or(stats.events).max(1);
        let bp_per_event = stats.backpressure_ns as f64 / events as f64;
        println!(
            "STATS {label} wall_s={:.3} log_events={} own_events={} bytes={} bytes_per_event={:.3} \
             blocks={} stacks={} threads={} lost={} backpressure_waits={} backpressure_ms={:.1} \
             backpressure_ns_per_event={:.2} peak_buffer_bytes={} log_events_per_s={:.0}",
            wall.as_secs_f64(),
            stats.events,
            own_events.map_or_else(|| "-".to_string(), |e| e.to_string()),
            stats.bytes,
            stats.bytes as f64 / events as f64,
            stats.blocks,
            stats.stacks,
            stats.threads,
            stats.lost_events,
            stats.backpressure_waits,
            stats.backpressure_ns as f64 / 1e6,
            bp_per_event,
            stats.peak_buffer_bytes,
            stats.events as f64 / wall.as_secs_f64().max(1e-9),
        );
    }

    /// Starts a session writing to a temporary file; panics if it cannot.
    pub fn start(name: &str, config: impl FnOnce(memreplay::Config) -> memreplay::Config) -> std::path::PathBuf {
        let path = super::temp_log(name);
        let cfg = config(memreplay::Config::new(&path));
        memreplay::start(cfg).expect("recording starts");
        path
    }

    /// Stops the session, prints its figures and deletes the log.
    pub fn stop(label: &str, path: &std::path::Path, wall: Duration) -> SessionStats {
        let stats = memreplay::stop().expect("a session was recording");
        print_stats(label, &stats, wall, None);
        let _ = std::fs::remove_file(path);
        stats
    }
}

#[cfg(feature = "recording")]
pub use recording::{print_stats, start, stop};

/// A real program for the benches that profile one (`analyzer_memory`, `info_interning`):
/// serde_json work shaped like a compiler's or a loader's. It parses a generated JSON
/// document of about `scale` values into a `serde_json::Value` (millions of small
/// allocations live at once: strings, vectors, map nodes, from serde_json's recursive
/// descent, so many distinct (size, callstack) pairs), walks it, clones a tenth of its
/// subtrees, serializes it back (a growing buffer), and drops it all.
mod json {
    use std::hint::black_box;

    use serde_json::Value;

    use crate::Rng;

    /// Writes a JSON document of about `values` values: objects of 2-8 keys and arrays of
    /// 1-12 items, nested up to 9 deep, strings of 1-40 characters, numbers.
    fn document(values: u64, rng: &mut Rng) -> String {
        fn value(out: &mut String, depth: u32, budget: &mut i64, rng: &mut Rng) {
            *budget -= 1;
            let kind = if depth >= 9 || *budget <= 0 { 2 + rng.below(3) } else { rng.below(5) };
            match kind {
                0 => {
                    out.push('{');
                    for i in 0..2 + rng.below(7) {
                        if i > 0 {
                            out.push(',');
                        }
                        out.push('"');
                        word(out, rng);
                        out.push_str("\":");
                        value(out, depth + 1, budget, rng);
                    }
                    out.push('}');
                }
                1 => {
                    out.push('[');
                    for i in 0..1 + rng.below(12) {
                        if i > 0 {
                            out.push(',');
                        }
                        value(out, depth + 1, budget, rng);
                    }
                    out.push(']');
                }
                2 => {
                    out.push('"');
                    for _ in 0..1 + rng.below(4) {
                        word(out, rng);
                    }
                    out.push('"');
                }
                3 => out.push_str(&rng.below(1 << 40).to_string()),
                _ => out.push_str(["true", "false", "null"][rng.below(3) as usize]),
            }
        }
        fn word(out: &mut String, rng: &mut Rng) {
            for _ in 0..1 + rng.below(10) {
                out.push((b'a' + rng.below(26) as u8) as char);
            }
        }
        let mut out = String::from("[");
        let mut budget = values as i64;
        while budget > 0 {
            if out.len() > 1 {
                out.push(',');
            }
            value(&mut out, 1, &mut budget, rng);
        }
        out.push(']');
        out
    }

    /// Counts the values of a tree (a walk that reads every node).
    fn count(v: &Value) -> u64 {
        match v {
            Value::Array(a) => 1 + a.iter().map(count).sum::<u64>(),
            Value::Object(o) => 1 + o.values().map(count).sum::<u64>(),
            _ => 1,
        }
    }

    /// Clones every tenth subtree of `v` (by position), into `out`.
    fn clone_some(v: &Value, i: &mut u64, out: &mut Vec<Value>) {
        *i += 1;
        if *i % 10 == 0 {
            out.push(v.clone());
            return;
        }
        match v {
            Value::Array(a) => a.iter().for_each(|x| clone_some(x, i, out)),
            Value::Object(o) => o.values().for_each(|x| clone_some(x, i, out)),
            _ => {}
        }
    }

    /// The program: parse, walk, clone a tenth, serialize, drop. Returns the values parsed.
    #[inline(never)]
    pub fn json_program(scale: u64) -> u64 {
        let text = document(scale, &mut Rng(0x5eed_1234_abcd));
        let tree: Value = serde_json::from_str(&text).expect("the document parses");
        drop(text);
        let n = count(&tree);
        let mut clones = Vec::new();
        clone_some(&tree, &mut 0, &mut clones);
        let back = serde_json::to_string(&tree).expect("serializes");
        black_box(back.len());
        drop(back);
        drop(clones);
        drop(black_box(tree));
        n
    }
}

pub use json::json_program;

#[cfg(test)]
mod tests {
    use memreplay_fixtures::{header, log_bytes, temp_dir, End};
    use memreplay_format::Event;

    use super::*;

    #[test]
    fn heaptrack_files_are_counted_by_their_allocation_lines() {
        // heaptrack's line kinds: allocation infos (`a`), allocations (`+`), frees (`-`),
        // traces, strings, comments; only `+ ` lines are allocation calls.
        let text = "v 10400 3\nX ./p\ns 6d61696e\nt 1 0\na 10 1\n+ 0\n+ 0\n- 0\na 20 1\n+ 1\n# + not one\nc 5\n";
        let dir = temp_dir("bench-heaptrack-file");
        let plain = dir.join("p.heaptrack");
        std::fs::write(&plain, text).unwrap();
        let zst = dir.join("p.heaptrack.zst");
        std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
        let gz = dir.join("p.heaptrack.gz");
        std::fs::write(&gz, b"not read").unwrap();
        for path in [&plain, &zst] {
            let f = heaptrack_file(path);
            assert_eq!((f.allocations, f.bytes), (Some(3), std::fs::metadata(path).unwrap().len()), "{path:?}");
        }
        assert_eq!(heaptrack_file(&gz).allocations, None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_log_prefix_ends_with_the_block_that_reaches_the_count() {
        let alloc = |seq: u64| Event::Alloc { seq, domain: 0, addr: 0x1000 * seq, size: 16, align_log2: 3, stack: 0 };
        let free = |seq: u64, of: u64| Event::Free { seq, domain: 0, addr: 0x1000 * of, stack: 0 };
        let realloc = |seq: u64, of: u64| Event::Realloc {
            free_seq: seq,
            seq: seq + 1,
            old_addr: 0x1000 * of,
            new_addr: 0x1000 * seq,
            new_size: 32,
            align_log2: 3,
            stack: 0,
        };
        // Block 1: 2 allocation calls (4 events); block 2: 2 more (a realloc counts, a
        // domain allocation does not); block 3: 1 more.
        let blocks = vec![
            (1, vec![alloc(1), alloc(2), free(3, 1), Event::Time { ns: 5 }]),
            (
                2,
                vec![
                    alloc(4),
                    realloc(5, 2),
                    Event::Alloc { seq: 7, domain: 1, addr: 0x10, size: 16, align_log2: 0, stack: 0 },
                ],
            ),
            (1, vec![alloc(8)]),
        ];
        let bytes = log_bytes(&header(), &blocks, Some(End { lost: 0, end_ns: 10 }));
        let dir = temp_dir("bench-log-prefix");
        let path = dir.join("p.mrl");
        std::fs::write(&path, &bytes).unwrap();
        let whole = log_prefix(&path, u64::MAX);
        assert_eq!((whole.0, whole.2), (5, 8));
        assert!(whole.1 < bytes.len() as u64, "the end-of-log record follows the last block");
        let (n1, b1, e1) = log_prefix(&path, 1);
        assert_eq!((n1, e1), (2, 4));
        let (n3, b3, e3) = log_prefix(&path, 3);
        assert_eq!((n3, e3), (4, 7));
        assert!(b1 < b3 && b3 < whole.1, "{b1} {b3} {}", whole.1);
        assert_eq!(log_prefix(&path, 4).0, 4, "the second block reaches 4");
        assert_eq!(log_prefix(&path, 5), whole);
        assert_eq!(log_prefix(&path, 100), whole, "a count never reached takes the whole log");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
