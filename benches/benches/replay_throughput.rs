//! The analyzer's speed and memory: end-to-end `replay-cli summarize` on generated logs.
//!
//! Not a criterion bench (one iteration takes a second or more): it generates a log,
//! then times `memreplay_report::run(Summarize, ..)` — index the file, decode blocks in
//! parallel, merge the threads by sequence number, replay every event, build and render
//! the summary — and prints events per second (median of `--runs`, default 3). Then, for
//! 20 M and 100 M events, the analyzer's peak RSS, each measured in a fresh child process
//! (this binary with `--child LOG`) so that nothing else counts.
//!
//! The log is shaped like a game's: 4 threads in runs of 1-200 events; contexts nested up
//! to 4 deep (8 levels, 10 zones, 5 groups, 50 assets flagged as instances: up to 20 000
//! context paths, 80 000 (context, thread) slots); 2000 allocation callstacks;
//! sizes mostly 16-256 bytes with a tail to 256 KiB; lifetimes mixed like `log_size`'s
//! (half LIFO temporaries, a third FIFO queues, the rest long-lived and freed at random,
//! a tenth of those by another thread) and 2 % kept to the end (assets a level holds), so
//! the live set grows with the log: about 200 000 allocations per 20 M events; addresses
//! from a malloc-like model (LIFO free lists per size class, new memory bumped from a
//! top), a frame every 100 000 events, a label every 50 frames and a container usage
//! report on 1 % of allocations.
//!
//! `cargo bench -p memreplay-benches --bench replay_throughput`
//! (`-- --events N` for the timed log, `--runs R`, `--rss-events A,B` for the memory
//! runs, `--keep DIR` to keep the logs; `--threads N --run-max M` for a timed log of N
//! threads in runs of 1..=M events: `--threads 16 --run-max 4` interleaves like a
//! 16-core recording; `--level-frames F` for a level change every F frames, which frees
//! what the level holds (the kept, long-lived and queued allocations), so that the live
//! set stays bounded however long the log: a whole play session. The shape options apply
//! to the memory runs too.)
//!
//! A billion-event play session (a 6.3 GB log, 2–3.5 minutes to generate on 2 cores):
//! `-- --runs 0 --rss-events 100000000,1000000000 --level-frames 100 --keep DIR`
//!
//! What a log's threads cost the analyzer, apart from what the program did on them:
//! `-- --one-thread LOG` (with `--runs R`, default 3, and `--keep DIR`) writes LOG's
//! events in their global order as one thread's stream, checks that the copy replays to
//! the same live, peak and total figures, then times `summarize` (without symbols) of LOG
//! and of the copy in interleaved pairs. The copy holds the same allocations, frees and
//! live set; it lacks what only means something per thread (context pushes, pops and
//! attaches, which it counts and drops), a realloc becomes its free and its allocation,
//! and time records that would go back are dropped. It reads the whole log into memory.

use std::collections::VecDeque;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use memreplay_benches::{game_size, median, rss, Rng};
use memreplay_format::{merge_by_seq, Event, EventEncoder, FileHeader, Log, LogWriter, Part, HEAP_DOMAIN};
use memreplay_report::{self as report, Progress, ReportKind, ReportOptions};

/// Addresses as malloc hands them out: the last block freed of a size class first, else
/// new memory from the top.
struct AddressModel {
    free_lists: Vec<Vec<u64>>,
    top: u64,
}

impl AddressModel {
    fn class(size: u64) -> (usize, u64) {
        if size <= 4096 {
            (size.div_ceil(16) as usize, size.next_multiple_of(16))
        } else {
            (257 + size.div_ceil(4096) as usize, size.next_multiple_of(4096))
        }
    }

    fn alloc(&mut self, size: u64) -> u64 {
        let (class, rounded) = Self::class(size);
        self.free_lists[class].pop().unwrap_or_else(|| {
            let a = self.top;
            self.top += rounded + 16;
            a
        })
    }

    fn free(&mut self, addr: u64, size: u64) {
        self.free_lists[Self::class(size).0].push(addr);
    }
}

struct GenThread {
    enc: EventEncoder,
    lifo: Vec<(u64, u64)>,
    fifo: VecDeque<(u64, u64)>,
    long: Vec<(u64, u64)>,
    /// Allocations the current level holds: kept to the end, or to the next level.
    kept: Vec<(u64, u64)>,
    depth: u32,
}

/// How the log's threads interleave: how many, and the longest run of events one thread
/// writes before another may (each run is 1..=`run_max` events, the thread at random).
#[derive(Clone, Copy)]
struct Shape {
    threads: usize,
    run_max: u64,
    /// Frames per level: at each level change every allocation the level kept is freed,
    /// so the live set stays bounded however long the log. 0: kept to the end.
    level_frames: u64,
}

/// The game-like default: 4 threads in runs of 1-200 events, one level.
const GAME: Shape = Shape { threads: 4, run_max: 200, level_frames: 0 };
/// Context names at each depth (level, zone, group, asset).
const NAMES: [u32; 4] = [8, 10, 5, 50];
const STACKS: u64 = 2000;
/// String id of the label's name.
const LABEL: u32 = 1000;
const BLOCK_BYTES: usize = 60 << 10;

fn header() -> FileHeader {
    FileHeader {
        flags: memreplay_format::header_flags::CALLSTACKS_ON_ALLOC | memreplay_format::header_flags::USAGE_CHANGES,
        exe_path: "/bench/game".into(),
        recorder: "replay_throughput generator".into(),
        ..memreplay_fixtures::header()
    }
}

/// Writes a log of about `events` events to `path`.
fn generate(path: &Path, events: u64, shape: Shape) {
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::create(path).expect("create the log"));
    let mut w = LogWriter::new(file, &header()).expect("write the header");
    let mut threads: Vec<GenThread> = (0..shape.threads)
        .map(|_| GenThread {
            enc: EventEncoder::new(),
            lifo: Vec::new(),
            fifo: VecDeque::new(),
            long: Vec::new(),
            kept: Vec::new(),
            depth: 0,
        })
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut heap = AddressModel { free_lists: vec![Vec::new(); 257 + 65 + 1], top: 0x5555_0000_0000 };
    let (mut seq, mut ns, mut made, mut frame) = (0u64, 0u64, 0u64, 0u64);

    let defs = &mut threads[0].enc;
    let types = ["Level", "Zone", "Group", "Asset"];
    for (i, ty) in types.iter().enumerate() {
        let id = i as u32 + 1;
        defs.push(&Event::DefineString { id, text: (*ty).into() });
        defs.push(&Event::DefineContextType { id, name: id });
    }
    for depth in 0..4u32 {
        for n in 0..NAMES[depth as usize] {
            let text = format!("{}{n}", types[depth as usize].to_lowercase());
            defs.push(&Event::DefineString { id: 100 + depth * 100 + n, text });
        }
    }
    defs.push(&Event::DefineString { id: LABEL, text: "checkpoint".into() });
    for id in 1..=STACKS as u32 {
        let frames = (0..16).map(|k| 0x5555_5555_0000 + k * 0x1000 + rng.below(0x800)).collect();
        defs.push(&Event::DefineStack { id, frames });
    }

    while made < events {
        let t = rng.below(shape.threads as u64) as usize;
        for _ in 0..rng.below(shape.run_max) + 1 {
            let frame_due = made % 100_000 == 0;
            if frame_due && shape.level_frames > 0 && frame > 0 && frame % shape.level_frames == 0 {
                // A level change: every thread frees what the level holds (kept, long-lived
                // and queued allocations; allocations outnumber frees by a little, so the
                // queues would otherwise grow with the log). Not counted in `made`, so that
                // frames stay 100 000 events apart.
                for (o, owner) in threads.iter_mut().enumerate() {
                    let held = std::mem::take(&mut owner.kept).into_iter().chain(owner.long.drain(..));
                    for (addr, size) in held.chain(owner.fifo.drain(..)).collect::<Vec<_>>() {
                        seq += 1;
                        owner.enc.push(&Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: 0 });
                        heap.free(addr, size);
                        if owner.enc.len() >= BLOCK_BYTES {
                            w.write_block(o as u32 + 1, &mut owner.enc).expect("write a block");
                        }
                    }
                }
            }
            let th = &mut threads[t];
            if made % 256 == 0 {
                ns += 1_000 + rng.below(5_000);
                th.enc.push(&Event::Time { ns });
            }
            if frame_due {
                seq += 1;
                th.enc.push(&Event::FrameStart { seq, frame });
                if frame % 50 == 0 {
                    seq += 1;
                    th.enc.push(&Event::Label { seq, name: LABEL });
                }
                frame += 1;
            }
            let r = rng.below(1000);
            if r < 10 && th.depth < 4 {
                let d = th.depth;
                let name = 100 + d * 100 + rng.below(u64::from(NAMES[d as usize])) as u32;
                th.enc.push(&Event::ContextPush { ty: d + 1, name, flags: u8::from(d == 3) });
                th.depth += 1;
            } else if r < 20 && th.depth > 0 {
                th.enc.push(&Event::ContextPop);
                th.depth -= 1;
            } else if r < 510 {
                seq += 1;
                let size = game_size(&mut rng);
                let addr = heap.alloc(size);
                let stack = 1 + rng.below(STACKS) as u32;
                th.enc.push(&Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size, align_log2: 3, stack });
                if rng.below(100) == 0 {
                    seq += 1;
                    th.enc.push(&Event::Usage { seq, addr, used: rng.below(size + 1) });
                }
                match rng.below(100) {
                    0..=47 => th.lifo.push((addr, size)),
                    48..=82 => th.fifo.push_back((addr, size)),
                    83..=97 => th.long.push((addr, size)),
                    _ => th.kept.push((addr, size)),
                }
            } else {
                let freed = match rng.below(100) {
                    0..=49 => threads[t].lifo.pop(),
                    50..=84 => threads[t].fifo.pop_front(),
                    _ => {
                        let owner = if rng.below(10) == 0 { rng.below(shape.threads as u64) as usize } else { t };
                        let long = &mut threads[owner].long;
                        (!long.is_empty()).then(|| long.swap_remove(rng.below(long.len() as u64) as usize))
                    }
                };
                let Some((addr, size)) = freed else { continue };
                seq += 1;
                threads[t].enc.push(&Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: 0 });
                heap.free(addr, size);
            }
            made += 1;
            if threads[t].enc.len() >= BLOCK_BYTES {
                w.write_block(t as u32 + 1, &mut threads[t].enc).expect("write a block");
            }
        }
    }
    for (t, th) in threads.iter_mut().enumerate() {
        w.write_block(t as u32 + 1, &mut th.enc).expect("write a block");
    }
    w.finish(0, ns).expect("finish the log");
}

/// One end-to-end `summarize`: returns (seconds, bytes of text produced).
fn summarize(log: &Path) -> (f64, usize) {
    let args = ReportOptions::new(log);
    let start = Instant::now();
    let out = report::run(ReportKind::Summarize, &args, Progress::Hidden).expect("summarize the log");
    (start.elapsed().as_secs_f64(), out.len())
}

/// What `one_thread_copy` left out or changed, to print with the timings.
#[derive(Default)]
struct OneThreadCopy {
    events: u64,
    contexts_dropped: u64,
    reallocs_split: u64,
    times_dropped: u64,
}

/// Writes the events of `log` in their global order (as the analyzer merges them) as
/// stream 1 of a new log at `out`: see the module's notes for what it leaves out.
fn one_thread_copy(log: &Path, out: &Path) -> OneThreadCopy {
    let read = Log::open(log).unwrap_or_else(|e| panic!("read {}: {e}", log.display()));
    assert!(read.report.is_clean(), "{} is damaged: compare whole logs only", log.display());
    let file = BufWriter::with_capacity(1 << 20, std::fs::File::create(out).expect("create the copy"));
    let mut w = LogWriter::new(file, &read.header).expect("write the copy's header");
    // Stream 0's records (modules, process memory: the recorder's metadata) stay there.
    let (mut enc, mut metadata) = (EventEncoder::new(), EventEncoder::new());
    let mut copy = OneThreadCopy::default();
    let mut last_ns = 0;
    for item in merge_by_seq(&read.blocks) {
        if item.thread == 0 {
            metadata.push(item.event);
            copy.events += 1;
            if metadata.len() >= BLOCK_BYTES {
                w.write_block(0, &mut metadata).expect("write a metadata block");
            }
            continue;
        }
        match (item.event, item.part) {
            (Event::ContextPush { .. } | Event::ContextPop | Event::AttachPush { .. }, _) => {
                copy.contexts_dropped += 1;
                continue;
            }
            (&Event::Time { ns }, _) if ns < last_ns => {
                copy.times_dropped += 1;
                continue;
            }
            (&Event::Time { ns }, _) => {
                last_ns = ns;
                enc.push(item.event);
            }
            (&Event::Realloc { free_seq, old_addr, .. }, Part::ReallocFree) => {
                copy.reallocs_split += 1;
                enc.push(&Event::Free { seq: free_seq, domain: HEAP_DOMAIN, addr: old_addr, stack: 0 });
            }
            (&Event::Realloc { seq, new_addr, new_size, align_log2, stack, .. }, _) => {
                let e = Event::Alloc { seq, domain: HEAP_DOMAIN, addr: new_addr, size: new_size, align_log2, stack };
                enc.push(&e);
            }
            (e, _) => enc.push(e),
        }
        copy.events += 1;
        if enc.len() >= BLOCK_BYTES {
            w.write_block(1, &mut enc).expect("write a block");
        }
    }
    w.write_block(1, &mut enc).expect("write a block");
    w.write_block(0, &mut metadata).expect("write the metadata block");
    w.finish(0, last_ns).expect("finish the copy");
    copy
}

/// `--one-thread LOG`: `summarize` of `log` against the same events on one thread.
fn threads_cost(log: &Path, dir: &Path, runs: usize) {
    let stem = log.file_stem().map_or("log".into(), |s| s.to_string_lossy().into_owned());
    let copy_path = dir.join(format!("{stem}-one-thread.mrl"));
    let copy = one_thread_copy(log, &copy_path);
    println!(
        "wrote {} ({} events; dropped {} context events and {} time records that went back; split {} reallocs)",
        copy_path.display(),
        copy.events,
        copy.contexts_dropped,
        copy.times_dropped,
        copy.reallocs_split
    );
    let (mut many, mut one, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    // Without symbols: resolving the callstacks' addresses costs the same on both.
    let timed = |log: &Path| {
        let start = Instant::now();
        let json = memreplay_benches::summarize_as_replay_cli(&log.display().to_string(), true);
        (start.elapsed().as_secs_f64(), json)
    };
    let (_, original) = timed(log);
    let (_, copied) = timed(&copy_path);
    // Where reallocs were split, the totals count them otherwise: compare live and peak only.
    let totals = copy.reallocs_split == 0;
    assert_eq!(
        domain_figures(&original, totals),
        domain_figures(&copied, totals),
        "the one-thread copy does not replay to the same figures: not the same events"
    );
    for run in 1..=runs {
        // In turns, the first of each pair alternating.
        let (a, b) = if run % 2 == 1 {
            let a = timed(log).0;
            (a, timed(&copy_path).0)
        } else {
            let b = timed(&copy_path).0;
            (timed(log).0, b)
        };
        println!("run {run}: {a:.3} s, one thread {b:.3} s");
        many.push(a);
        one.push(b);
        ratios.push(a / b);
    }
    println!(
        "RESULT threads_cost {:.3} s against {:.3} s on one thread: {:.3}x (medians of {runs}, interleaved)",
        median(&mut many),
        median(&mut one),
        median(&mut ratios)
    );
}

/// Each domain's name, live, peak and (with `totals`) total figures in `summarize`'s JSON:
/// what a log's events add up to, whichever threads made them.
fn domain_figures(json: &str, totals: bool) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(json).expect("summarize's JSON");
    let domains = v["domains"].as_array().expect("summarize's domains");
    domains
        .iter()
        .map(|d| {
            let peak = (&d["peak"]["bytes"], &d["peak"]["count"]);
            let total = if totals { d["total"].to_string() } else { String::new() };
            format!("{} live {} peak {} {} total {total}", d["domain"]["name"], d["live"], peak.0, peak.1)
        })
        .collect()
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn events_in(log: &Path) -> u64 {
    memreplay_format::LogReader::new(std::fs::File::open(log).expect("open the log"))
        .map(|mut r| {
            let mut n = 0u64;
            while let Ok(Some(b)) = r.next_block() {
                n += u64::from(b.frame.event_count);
            }
            n
        })
        .unwrap_or(0)
}

fn log_for(dir: &Path, events: u64, shape: Shape) -> PathBuf {
    let mut name = match (shape.threads, shape.run_max) {
        (4, 200) => format!("replay-bench-{events}"),
        (t, r) => format!("replay-bench-{events}-{t}threads-runs{r}"),
    };
    if shape.level_frames > 0 {
        name += &format!("-levels{}", shape.level_frames);
    }
    let path = dir.join(name + ".mrl");
    if !path.exists() {
        let start = Instant::now();
        generate(&path, events, shape);
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        println!(
            "generated {} ({} bytes, {:.2} bytes/event) in {:.1} s",
            path.display(),
            bytes,
            bytes as f64 / events as f64,
            start.elapsed().as_secs_f64()
        );
    }
    path
}

fn main() {
    // `--child LOG`: one summarize, then report this process's peak memory.
    if let Some(log) = arg("--child") {
        // As `replay-cli` does.
        memreplay_replay::return_big_blocks_to_the_system();
        let (secs, _) = summarize(Path::new(&log));
        println!("{} {secs}", rss().1);
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: keep it small.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let events: u64 = arg("--events").and_then(|v| v.parse().ok()).unwrap_or(if smoke { 50_000 } else { 20_000_000 });
    let runs: usize = arg("--runs").and_then(|v| v.parse().ok()).unwrap_or(if smoke { 1 } else { 3 });
    let rss_events: Vec<u64> = arg("--rss-events")
        .unwrap_or_else(|| if smoke { String::new() } else { "20000000,100000000".into() })
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    let keep = arg("--keep").map(PathBuf::from);
    // `--threads N --run-max M`: the logs' threads and how finely they interleave;
    // `--level-frames F`: a level change every F frames.
    let shape = Shape {
        threads: arg("--threads").map_or(GAME.threads, |v| v.parse().expect("--threads N")),
        run_max: arg("--run-max").map_or(GAME.run_max, |v| v.parse().expect("--run-max M")),
        level_frames: arg("--level-frames").map_or(GAME.level_frames, |v| v.parse().expect("--level-frames F")),
    };
    assert!(shape.threads >= 1 && shape.run_max >= 1, "--threads and --run-max are at least 1");
    let dir = keep.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("replay-bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir).expect("create the log folder");

    if let Some(log) = arg("--one-thread") {
        threads_cost(Path::new(&log), &dir, runs.max(1));
        if keep.is_none() {
            std::fs::remove_dir_all(&dir).ok();
        }
        return;
    }
    if runs > 0 {
        let log = log_for(&dir, events, shape);
        let n = events_in(&log);
        let mut times: Vec<f64> = Vec::new();
        for run in 1..=runs {
            let (secs, text) = summarize(&log);
            let rate = n as f64 / secs / 1e6;
            println!("run {run}: summarize of {n} events in {secs:.3} s: {rate:.1} M events/s ({text} bytes of text)");
            times.push(secs);
        }
        println!("RESULT summarize_events_per_s {:.0} (median of {runs}, {n} events)", n as f64 / median(&mut times));
        if smoke {
            // The smoke run checks `--one-thread` too: its copy replays to the same figures.
            threads_cost(&log, &dir, 1);
        }
    }

    for &events in &rss_events {
        let log = log_for(&dir, events, shape);
        let n = events_in(&log);
        let out = std::process::Command::new(std::env::current_exe().expect("this binary"))
            .args(["--child", &log.display().to_string()])
            .output()
            .expect("run the child");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut fields = text.split_whitespace();
        let rss: u64 = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let secs: f64 = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
        println!(
            "RESULT summarize_peak_rss {} MiB for {n} events ({:.1} M events/s in that run)",
            rss >> 20,
            n as f64 / secs.max(1e-9) / 1e6
        );
    }
    if keep.is_none() {
        std::fs::remove_dir_all(&dir).ok();
    }
}
