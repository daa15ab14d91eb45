//! Not a timing bench: records an allocation-heavy workload and prints what the log costs
//! on disk, how fast the writer keeps up, and how much memory the recorder holds.
//!
//! The workload makes 1 M heap events (allocations + frees) from eight call sites with a
//! game-like size distribution (mostly 16-256 bytes, a tail up to 256 KiB) and a mix of
//! lifetimes: LIFO temporaries, FIFO queues and long-lived objects freed at random.
//! It runs `DEPTH` (24) calls deep, so 16-frame callstacks are full. It runs once without
//! recording (the baseline: time and memory of the workload itself), then recording with
//! 16-frame callstacks (the configuration of the ≤ 4 bytes/event target), without
//! callstacks, and with free callstacks too; the first two also with zstd blocks
//! (`_zstd`, `compression=zstd`: level 1) instead of LZ4, and with the blocks' fields in
//! columns before either (`_lz4_columns`, `_zstd_columns`: `compression=lz4-columns`,
//! `zstd-columns`; format 1.6). Then a saturation run: a tight loop of
//! 64-byte pairs as fast as possible (4 M events), where the writer is the bottleneck.
//! Then 400 threads, started one after another (`threads_*`) or four at a time
//! (`threads4_*`), each making 20 000 pairs (16 M events): the recorder's memory must not
//! grow with the threads that have come and gone. Last, weak scaling (`parallelN_*`): 1, 2,
//! 4, 8 and 16 threads at once, each running the workload (1 M events per thread), against
//! the same threads not recording: the slowdown, the back-pressure and the recorder
//! threads' CPU per event (the writer's and the encoders') as threads are added, with
//! one encoder thread per core (the default) and with the writer thread encoding alone
//! (`_writer`, `encoder_threads(1)`). On a 2-core machine past 2 threads the cores are
//! oversubscribed. Every run also reports the whole process's CPU time per event (user +
//! system, the recorder's threads included) against the not-recording run's.
//! `-- --only parallel` runs these alone.
//! Each run is a fresh child process (this binary with `--child NAME`), so that peak RSS
//! (VmHWM) minus the not-recording run's is the recorder's own memory.
//!
//! `RUSTFLAGS="-C force-frame-pointers=yes" cargo bench -p memreplay-benches --bench log_size`
//! (`-- --events N` changes the workload size; `-- --only PREFIX` runs only the setups
//! named so, e.g. `threads4`; `-- --churn-threads N` starts N threads per threads run,
//! 40 000 events each; `-- --encoders N` records through N encoder threads instead of one
//! per core, `_writer` setups excepted; `MEMREPLAY_BENCH_KEEP=DIR` keeps the logs.)

use std::alloc::{Layout, System};
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Instant;

use memreplay::{Config, PayloadCompression};
use memreplay_benches::{
    at_depth, game_size, global_pair, layout, process_usage, reset_peak_rss, rss, stack_depths, temp_log, Rng, DEPTH,
};

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

type Obj = (*mut u8, Layout);

#[inline(never)]
fn alloc_at(size: usize) -> Obj {
    let l = layout(size);
    // SAFETY: `layout` gives a valid, non-zero-sized layout.
    let p = unsafe { std::alloc::alloc(l) };
    assert!(!p.is_null());
    (black_box(p), l)
}

// Eight call sites (distinct return addresses, two of them one level deeper).
macro_rules! site {
    ($name:ident) => {
        #[inline(never)]
        fn $name(rng: &mut Rng) -> Obj {
            black_box(alloc_at(game_size(rng) as usize))
        }
    };
}
site!(site_string);
site!(site_vec);
site!(site_node);
site!(site_event);
site!(site_mesh);
site!(site_script);
#[inline(never)]
fn site_deep_a(rng: &mut Rng) -> Obj {
    black_box(site_node(rng))
}
#[inline(never)]
fn site_deep_b(rng: &mut Rng) -> Obj {
    black_box(site_string(rng))
}

#[inline(never)]
fn free(o: Obj) {
    // SAFETY: `o` came from `alloc_at` with this layout and is freed once.
    unsafe { std::alloc::dealloc(o.0, o.1) }
}

/// Makes `events` heap events (allocations + frees, the frees of what is left at the end
/// included). Returns the number made.
#[inline(never)]
fn workload(events: u64) -> u64 {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Reserved up front: the containers themselves do not allocate while we count.
    let mut lifo: Vec<Obj> = Vec::with_capacity(4096);
    let mut fifo: VecDeque<Obj> = VecDeque::with_capacity(4096);
    let mut long: Vec<Obj> = Vec::with_capacity(20_000);
    let mut made = 0u64;
    let sites: [fn(&mut Rng) -> Obj; 8] =
        [site_string, site_vec, site_node, site_event, site_mesh, site_script, site_deep_a, site_deep_b];
    let live = |lifo: &Vec<Obj>, fifo: &VecDeque<Obj>, long: &Vec<Obj>| (lifo.len() + fifo.len() + long.len()) as u64;
    while made + live(&lifo, &fifo, &long) < events {
        let r = rng.below(100);
        if r < 50 {
            // A burst of temporaries freed in reverse order.
            let n = 1 + rng.below(8) as usize;
            for _ in 0..n.min(lifo.capacity() - lifo.len()) {
                lifo.push(sites[rng.below(4) as usize](&mut rng));
                made += 1;
            }
            while lifo.len() > rng.below(4) as usize {
                free(lifo.pop().expect("nonempty"));
                made += 1;
            }
        } else if r < 85 {
            // Messages through a queue: freed oldest first.
            if fifo.len() < 4000 {
                fifo.push_back(sites[3 + rng.below(3) as usize](&mut rng));
                made += 1;
            }
            if fifo.len() > 64 + rng.below(512) as usize {
                free(fifo.pop_front().expect("nonempty"));
                made += 1;
            }
        } else {
            // Long-lived objects, freed at random.
            if long.len() < long.capacity() {
                long.push(sites[rng.below(8) as usize](&mut rng));
                made += 1;
            }
            if long.len() > 8000 {
                let i = rng.below(long.len() as u64) as usize;
                free(long.swap_remove(i));
                made += 1;
            }
        }
    }
    for o in lifo.drain(..).chain(fifo.drain(..)).chain(long.drain(..)) {
        free(o);
        made += 1;
    }
    made
}

#[inline(never)]
fn tight_pairs(pairs: u64) -> u64 {
    let l = layout(64);
    for _ in 0..pairs {
        global_pair(l);
    }
    2 * pairs
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// One configuration, run in a fresh child process so that its peak RSS is its own.
struct Setup {
    name: &'static str,
    /// None: not recording (the baseline).
    config: Option<fn(Config) -> Config>,
    work: fn(u64) -> u64,
}

fn stacks16(c: Config) -> Config {
    c.callstacks(true).max_stack_depth(16).usage_changes(false)
}
fn nostack(c: Config) -> Config {
    c.callstacks(false).usage_changes(false)
}
/// The same with blocks compressed by zstd at level 1 (`compression=zstd`).
fn stacks16_zstd(c: Config) -> Config {
    stacks16(c).compression(PayloadCompression::Zstd { level: 1 })
}
fn nostack_zstd(c: Config) -> Config {
    nostack(c).compression(PayloadCompression::Zstd { level: 1 })
}
/// The same with the blocks' fields in columns, then LZ4 or zstd (format 1.6).
fn stacks16_lz4_columns(c: Config) -> Config {
    stacks16(c).compression(PayloadCompression::Lz4Columns)
}
fn stacks16_zstd_columns(c: Config) -> Config {
    stacks16(c).compression(PayloadCompression::ZstdColumns { level: 1 })
}
fn nostack_zstd_columns(c: Config) -> Config {
    nostack(c).compression(PayloadCompression::ZstdColumns { level: 1 })
}
fn stacks16_free(c: Config) -> Config {
    stacks16(c).free_callstacks(true)
}
fn tight(n: u64) -> u64 {
    tight_pairs(n / 2)
}

/// Short-lived threads per `threads_*` run (`-- --churn-threads N` changes it).
static CHURN_THREADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(400);

fn churn_threads() -> u64 {
    CHURN_THREADS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Encoder threads for the recording setups (`-- --encoders N`); 0: the default, one per core.
static ENCODERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn encoders() -> usize {
    ENCODERS.load(std::sync::atomic::Ordering::Relaxed)
}

/// `churn_threads()` short-lived threads, `at_once` at a time, each making its share of
/// 64-byte pairs: what the recorder keeps per exited thread, and whether threads that
/// register while the writer is behind grow the buffer pool.
fn churn(n: u64, at_once: u64) -> u64 {
    let threads = churn_threads();
    let pairs = (n / 2 / threads).max(1);
    for _ in 0..threads / at_once {
        std::thread::scope(|s| {
            for _ in 0..at_once {
                s.spawn(move || at_depth(DEPTH, &mut || tight_pairs(pairs)));
            }
        });
    }
    2 * pairs * threads
}
fn churn1(n: u64) -> u64 {
    churn(n, 1)
}
fn churn4(n: u64) -> u64 {
    churn(n, 4)
}

/// `threads` threads at once, each running the workload for `n` events (weak scaling:
/// the work per thread stays the same as threads are added).
fn parallel(n: u64, threads: usize) -> u64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(move || at_depth(DEPTH, &mut || workload(n)))).collect();
        handles.into_iter().map(|h| h.join().expect("a workload thread")).sum()
    })
}
fn parallel1(n: u64) -> u64 {
    parallel(n, 1)
}
fn parallel2(n: u64) -> u64 {
    parallel(n, 2)
}
fn parallel4(n: u64) -> u64 {
    parallel(n, 4)
}
fn parallel8(n: u64) -> u64 {
    parallel(n, 8)
}
fn parallel16(n: u64) -> u64 {
    parallel(n, 16)
}

/// The design before encoder threads: the writer thread encodes every stream.
fn stacks16_writer_encodes(c: Config) -> Config {
    stacks16(c).encoder_threads(1)
}

const SETUPS: [Setup; 32] = [
    Setup { name: "workload_baseline", config: None, work: workload },
    Setup { name: "workload_stack16", config: Some(stacks16), work: workload },
    Setup { name: "workload_stack16_zstd", config: Some(stacks16_zstd), work: workload },
    Setup { name: "workload_stack16_lz4_columns", config: Some(stacks16_lz4_columns), work: workload },
    Setup { name: "workload_stack16_zstd_columns", config: Some(stacks16_zstd_columns), work: workload },
    Setup { name: "workload_nostack", config: Some(nostack), work: workload },
    Setup { name: "workload_nostack_zstd", config: Some(nostack_zstd), work: workload },
    Setup { name: "workload_nostack_zstd_columns", config: Some(nostack_zstd_columns), work: workload },
    Setup { name: "workload_stack16_free", config: Some(stacks16_free), work: workload },
    Setup { name: "saturation_baseline", config: None, work: tight },
    Setup { name: "saturation_stack16", config: Some(stacks16), work: tight },
    Setup { name: "saturation_stack16_zstd", config: Some(stacks16_zstd), work: tight },
    Setup { name: "saturation_nostack", config: Some(nostack), work: tight },
    Setup { name: "threads_baseline", config: None, work: churn1 },
    Setup { name: "threads_stack16", config: Some(stacks16), work: churn1 },
    Setup { name: "threads4_baseline", config: None, work: churn4 },
    Setup { name: "threads4_stack16", config: Some(stacks16), work: churn4 },
    Setup { name: "parallel1_baseline", config: None, work: parallel1 },
    Setup { name: "parallel1_stack16", config: Some(stacks16), work: parallel1 },
    Setup { name: "parallel1_stack16_writer", config: Some(stacks16_writer_encodes), work: parallel1 },
    Setup { name: "parallel2_baseline", config: None, work: parallel2 },
    Setup { name: "parallel2_stack16", config: Some(stacks16), work: parallel2 },
    Setup { name: "parallel2_stack16_writer", config: Some(stacks16_writer_encodes), work: parallel2 },
    Setup { name: "parallel4_baseline", config: None, work: parallel4 },
    Setup { name: "parallel4_stack16", config: Some(stacks16), work: parallel4 },
    Setup { name: "parallel4_stack16_writer", config: Some(stacks16_writer_encodes), work: parallel4 },
    Setup { name: "parallel8_baseline", config: None, work: parallel8 },
    Setup { name: "parallel8_stack16", config: Some(stacks16), work: parallel8 },
    Setup { name: "parallel8_stack16_writer", config: Some(stacks16_writer_encodes), work: parallel8 },
    Setup { name: "parallel16_baseline", config: None, work: parallel16 },
    Setup { name: "parallel16_stack16", config: Some(stacks16), work: parallel16 },
    Setup { name: "parallel16_stack16_writer", config: Some(stacks16_writer_encodes), work: parallel16 },
];

/// The child's side: runs one setup and prints its figures as `key=value` on one line.
fn child(setup: &Setup, events: u64) {
    let path = temp_log(&format!("{}.mrl", setup.name));
    let peak_reset = reset_peak_rss();
    let (rss0, _) = rss();
    let u0 = process_usage();
    if let Some(cfg) = setup.config {
        let mut config = cfg(Config::new(&path));
        if encoders() > 0 && !setup.name.ends_with("_writer") {
            config = config.encoder_threads(encoders());
        }
        memreplay::start(config).expect("recording starts");
    }
    let t = Instant::now();
    // The workload runs DEPTH calls deep, as a game's allocations do.
    let made = at_depth(DEPTH, &mut || (setup.work)(events));
    let t_loop = t.elapsed();
    let stats = setup.config.map(|_| memreplay::stop().expect("recording"));
    let t_stop = t.elapsed();
    let u1 = process_usage();
    let (user, sys) = (u1.user_ns - u0.user_ns, u1.system_ns - u0.system_ns);
    let (cpu, switches) = (user + sys, u1.switches - u0.switches);
    let (_, hwm) = rss();
    let mut line = format!(
        "made={made} loop_ns={} stop_ns={} cpu_ns={cpu} sys_ns={sys} switches={switches} peak_rss_delta={} peak_reset={peak_reset}",
        t_loop.as_nanos(),
        t_stop.as_nanos(),
        hwm.saturating_sub(rss0)
    );
    if let Some(stats) = stats {
        let (stacks, dmin, dmax, dmean) = stack_depths(&path);
        let file = std::fs::metadata(&path).map_or(0, |m| m.len());
        line += &format!(
            " file={file} log_events={} stacks={stacks} depth_min={dmin} depth_max={dmax} depth_mean={dmean:.1} \
             bp_waits={} bp_ns={} peak_buffer={} peak_buffers={} max_buffers={} lost={} writer_cpu_ns={} \
             encoder_cpu_ns={} encoders={}",
            stats.events,
            stats.backpressure_waits,
            stats.backpressure_ns,
            stats.peak_buffer_bytes,
            stats.peak_buffers,
            stats.max_buffers,
            stats.lost_events,
            stats.writer_cpu_ns,
            stats.encoder_cpu_ns,
            stats.encoder_threads
        );
    }
    println!("CHILD {line}");
    // MEMREPLAY_BENCH_KEEP=DIR keeps the logs, e.g. to inspect them with replay-cli.
    if let Some(dir) = std::env::var_os("MEMREPLAY_BENCH_KEEP") {
        let _ = std::fs::copy(&path, std::path::Path::new(&dir).join(format!("{}.mrl", setup.name)));
    }
    let _ = std::fs::remove_file(path);
}

/// Runs a setup in a child process and parses its figures.
fn spawn(setup: &Setup, events: u64) -> std::collections::HashMap<String, String> {
    let out = std::process::Command::new(std::env::current_exe().expect("own path"))
        .args(["--child", setup.name, "--events", &events.to_string()])
        .args(["--churn-threads", &churn_threads().to_string()])
        .args(["--encoders", &encoders().to_string()])
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child {} failed: {text}{}", setup.name, String::from_utf8_lossy(&out.stderr));
    let line = text.lines().find_map(|l| l.strip_prefix("CHILD ")).expect("child figures");
    line.split_whitespace().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn report(name: &str, r: &std::collections::HashMap<String, String>, base: &std::collections::HashMap<String, String>) {
    let f = |m: &std::collections::HashMap<String, String>, k: &str| {
        m.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
    };
    let made = f(r, "made");
    let file = f(r, "file");
    let loop_ns = f(r, "loop_ns");
    let stop_ns = f(r, "stop_ns");
    let writer = f(r, "writer_cpu_ns");
    let encoders = f(r, "encoder_cpu_ns");
    let rec_mem = f(r, "peak_rss_delta") - f(base, "peak_rss_delta");
    println!("== {name}");
    println!(
        "  heap events made          {made}   (log events incl. metadata/time/definitions: {})",
        f(r, "log_events")
    );
    println!("  log size                  {file} bytes = {:.3} bytes/event", file / made);
    println!(
        "  callstacks interned       {} (frames min {} max {} mean {})",
        f(r, "stacks"),
        f(r, "depth_min"),
        f(r, "depth_max"),
        f(r, "depth_mean")
    );
    println!(
        "  workload loop             {:.1} ms = {:.1} ns/event (not recording: {:.1} ns/event)",
        loop_ns / 1e6,
        loop_ns / made,
        f(base, "loop_ns") / made
    );
    println!(
        "  slowdown                  {:.2}x the not-recording loop's wall time ({:.2}x until stop returned)",
        loop_ns / f(base, "loop_ns"),
        stop_ns / f(base, "loop_ns")
    );
    println!(
        "  start..stop returned      {:.1} ms = {:.2} M events/s recorded, encoded, compressed and written (drain after the loop {:.1} ms)",
        stop_ns / 1e6,
        made / stop_ns * 1e3,
        (stop_ns - loop_ns) / 1e6
    );
    println!(
        "  recorder threads' CPU     {:.1} ms = {:.1} ns/event: writer thread {:.1} ns/event, {} encoder threads {:.1} ns/event",
        (writer + encoders) / 1e6,
        (writer + encoders) / made,
        writer / made,
        f(r, "encoders"),
        encoders / made
    );
    println!(
        "  whole process's CPU       {:.1} ns/event (not recording: {:.1} ns/event): the recorder adds {:.1} ns/event",
        f(r, "cpu_ns") / made,
        f(base, "cpu_ns") / made,
        (f(r, "cpu_ns") - f(base, "cpu_ns")) / made
    );
    println!(
        "  of which in the kernel    {:.1} ns/event (not recording: {:.1}); context switches {} (not recording: {})",
        f(r, "sys_ns") / made,
        f(base, "sys_ns") / made,
        f(r, "switches"),
        f(base, "switches")
    );
    println!(
        "  back-pressure             {} waits, {:.1} ms = {:.1} ns/event",
        f(r, "bp_waits"),
        f(r, "bp_ns") / 1e6,
        f(r, "bp_ns") / made
    );
    println!(
        "  peak buffer memory        {:.2} MiB = {} buffers, {} paid for by buffer_memory (SessionStats.peak_buffer_bytes, peak_buffers, max_buffers)",
        f(r, "peak_buffer") / (1 << 20) as f64,
        f(r, "peak_buffers"),
        f(r, "max_buffers")
    );
    println!(
        "  peak RSS over start       {:.2} MiB; not recording {:.2} MiB; recorder = {:.2} MiB{}",
        f(r, "peak_rss_delta") / (1 << 20) as f64,
        f(base, "peak_rss_delta") / (1 << 20) as f64,
        rec_mem / (1 << 20) as f64,
        if r.get("peak_reset").map(String::as_str) == Some("true") {
            ""
        } else {
            " (VmHWM not resettable: upper bound)"
        }
    );
    println!("  lost events               {}", f(r, "lost"));
    println!(
        "STATS log_size/{name} bytes_per_event={:.3} loop_ns_per_event={:.2} base_ns_per_event={:.2} events_per_s_until_stop={:.0} \
         writer_cpu_ns_per_event={:.1} encoder_cpu_ns_per_event={:.1} process_cpu_ns_per_event={:.1} \
         added_cpu_ns_per_event={:.1} system_cpu_ns_per_event={:.1} context_switches={} backpressure_ns_per_event={:.2} \
         peak_buffer_bytes={} recorder_rss_bytes={:.0} slowdown={:.2}",
        file / made,
        loop_ns / made,
        f(base, "loop_ns") / made,
        made / stop_ns * 1e9,
        writer / made,
        encoders / made,
        f(r, "cpu_ns") / made,
        (f(r, "cpu_ns") - f(base, "cpu_ns")) / made,
        f(r, "sys_ns") / made,
        f(r, "switches"),
        f(r, "bp_ns") / made,
        f(r, "peak_buffer"),
        rec_mem,
        loop_ns / f(base, "loop_ns")
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        println!("log_size: bench");
        return;
    }
    // `cargo test --benches` / `cargo bench -- --test`: a quick smoke run.
    let smoke = args.iter().any(|a| a == "--test");
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let events = arg("--events").and_then(|v| v.parse().ok()).unwrap_or(if smoke { 20_000 } else { 1_000_000 });
    if let Some(n) = arg("--churn-threads").and_then(|v| v.parse::<u64>().ok()) {
        CHURN_THREADS.store(n.max(4), std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(v) = arg("--encoders") {
        let n = v.parse::<usize>().unwrap_or_else(|_| panic!("--encoders takes a number, not {v:?}"));
        ENCODERS.store(n, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(name) = arg("--child") {
        let setup = SETUPS.iter().find(|s| s.name == name).expect("known setup");
        child(setup, events);
        memreplay_benches::remove_temp_logs();
        return;
    }
    let tight_events = if smoke { 20_000 } else { 4 * events };
    // 40 000 heap events per thread, whatever the number of threads.
    let churn_events = if smoke { 8 * churn_threads() } else { 16 * events * churn_threads() / 400 };
    println!(
        "log_size: {events} heap events per workload run, {tight_events} per saturation run, {churn_events} from \
         {} threads per threads run; each in its own process",
        churn_threads()
    );
    // `-- --only threads4`: only the setups whose name starts with this (and their
    // not-recording baseline, which shares the prefix).
    let only = arg("--only").map(String::as_str).unwrap_or("");
    let mut base = None;
    // A recording setup is measured against its group's baseline ("workload_stack16"
    // against "workload_baseline"), which runs first even when `--only` names one setup.
    let group = |name: &str| name.split('_').next().unwrap_or("").to_owned();
    let wanted = |s: &&Setup| {
        s.name.starts_with(only)
            || (s.config.is_none() && SETUPS.iter().any(|o| o.name.starts_with(only) && group(o.name) == group(s.name)))
    };
    for s in SETUPS.iter().filter(wanted) {
        let n = if s.name.starts_with("saturation") {
            tight_events
        } else if s.name.starts_with("threads") {
            churn_events
        } else {
            events
        };
        let r = spawn(s, n);
        if s.config.is_none() {
            println!(
                "== {} (not recording): {:.1} ns/event, peak RSS +{:.2} MiB",
                s.name,
                r["loop_ns"].parse::<f64>().unwrap_or(0.0) / r["made"].parse::<f64>().unwrap_or(n as f64),
                mib(r["peak_rss_delta"].parse().unwrap_or(0))
            );
            base = Some(r);
        } else {
            report(s.name, &r, base.as_ref().expect("baseline first"));
        }
    }
}
