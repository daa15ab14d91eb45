//! (b)-(e): the recorder's added cost per heap event, through `memreplay::Allocator<System>`
//! as the global allocator:
//!
//! - `idle`: compiled with `capture_replay_log`, nothing recording;
//! - `rec_nostack`: recording, callstacks off;
//! - `rec_stack16`: recording, 16-frame callstacks on allocations (frame-pointer walk);
//! - `rec_stack16_free`: recording, 16-frame callstacks on allocations and frees.
//!
//! The measured loops run `DEPTH` (24) calls deep, so that a 16-frame walk walks 16 frames;
//! each recording configuration first checks that (a `STACKS` line).
//!
//! Each recording runs in its own session writing to a temporary file, for as long as
//! criterion iterates, so the writer's throughput (back-pressure when it falls behind)
//! is part of the measured cost; each session's back-pressure is printed on a `STATS` line.
//!
//! `RUSTFLAGS="-C force-frame-pointers=yes" cargo bench -p memreplay-benches --bench alloc_overhead`
//!
//! `alloc_overhead fixed N` (run the binary directly, e.g. under callgrind) skips criterion
//! and makes N pairs of 64 bytes in each configuration, one function per configuration
//! (`alloc_overhead fixed N rec_stack16`: that recording configuration only).

use std::alloc::System;
use std::cell::Cell;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use memreplay::Config;
use memreplay_benches::{at_depth, global_pair, layout, stack_depths, DEPTH, SIZES};

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

#[derive(Clone, Copy)]
struct Setup {
    name: &'static str,
    stacks: bool,
    free_stacks: bool,
}

const RECORDING: [Setup; 3] = [
    Setup { name: "rec_nostack", stacks: false, free_stacks: false },
    Setup { name: "rec_stack16", stacks: true, free_stacks: false },
    Setup { name: "rec_stack16_free", stacks: true, free_stacks: true },
];

fn config(s: Setup) -> impl FnOnce(Config) -> Config {
    move |c| c.callstacks(s.stacks).free_callstacks(s.free_stacks).max_stack_depth(16).usage_changes(false)
}

/// Times `iters` pairs and counts them (for the events-per-session figures). The loop
/// runs `DEPTH` frames deep so that a 16-frame callstack walk really walks 16 frames.
fn timed_pairs(iters: u64, size: usize, count: &Cell<u64>) -> Duration {
    let l = layout(size);
    count.set(count.get() + iters);
    at_depth(DEPTH, &mut || {
        let t = Instant::now();
        for _ in 0..iters {
            global_pair(l);
        }
        t.elapsed()
    })
}

/// Records a few pairs and reads the log back: are the callstacks as deep as asked?
fn check_stacks(s: Setup) {
    let path = memreplay_benches::start(&format!("check-{}.mrl", s.name), config(s));
    timed_pairs(10_000, 64, &Cell::new(0));
    memreplay::stop().expect("recording");
    let (n, min, max, mean) = stack_depths(&path);
    println!("STACKS {} distinct={n} frames min={min} max={max} mean={mean:.1}", s.name);
    let _ = std::fs::remove_file(path);
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("alloc_pair/memreplay");
    // One element = one alloc+free pair (two events).
    g.throughput(Throughput::Elements(1));
    for size in SIZES {
        let count = Cell::new(0);
        g.bench_function(format!("idle/{size}"), |b| b.iter_custom(|iters| timed_pairs(iters, size, &count)));
    }
    for s in RECORDING {
        check_stacks(s);
        for size in SIZES {
            let count = Cell::new(0);
            let path = memreplay_benches::start(&format!("{}-{size}.mrl", s.name), config(s));
            let t = Instant::now();
            g.bench_function(format!("{}/{size}", s.name), |b| b.iter_custom(|iters| timed_pairs(iters, size, &count)));
            let wall = t.elapsed();
            let stats = memreplay::stop().expect("recording");
            memreplay_benches::print_stats(&format!("{}/{size}", s.name), &stats, wall, Some(2 * count.get()));
            let _ = std::fs::remove_file(path);
        }
    }
    g.finish();
}

macro_rules! fixed_fn {
    ($name:ident) => {
        #[inline(never)]
        fn $name(n: u64) {
            let l = layout(64);
            at_depth(DEPTH, &mut || {
                for _ in 0..n {
                    global_pair(l);
                }
            })
        }
    };
}
fixed_fn!(fixed_idle);
fixed_fn!(fixed_rec_nostack);
fixed_fn!(fixed_rec_stack16);
fixed_fn!(fixed_rec_stack16_free);

fn fixed(n: u64, only: Option<&str>) {
    let t = Instant::now();
    fixed_idle(n);
    println!("FIXED idle {n} pairs {:.2} ns/pair", t.elapsed().as_nanos() as f64 / n as f64);
    let runs: [(Setup, fn(u64)); 3] =
        [(RECORDING[0], fixed_rec_nostack), (RECORDING[1], fixed_rec_stack16), (RECORDING[2], fixed_rec_stack16_free)];
    for (s, f) in runs {
        if only.is_some_and(|o| o != s.name) {
            continue;
        }
        let path = memreplay_benches::start(&format!("fixed-{}.mrl", s.name), config(s));
        let t = Instant::now();
        f(n);
        let loop_time = t.elapsed();
        let stats = memreplay::stop().expect("recording");
        let wall = t.elapsed();
        println!("FIXED {} {n} pairs {:.2} ns/pair in the loop", s.name, loop_time.as_nanos() as f64 / n as f64);
        memreplay_benches::print_stats(s.name, &stats, wall, Some(2 * n));
        let _ = std::fs::remove_file(path);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("fixed") {
        let n = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
        fixed(n, args.get(3).map(String::as_str));
        memreplay_benches::remove_temp_logs();
        return;
    }
    let mut c = memreplay_benches::criterion();
    bench(&mut c);
    c.final_summary();
    memreplay_benches::remove_temp_logs();
}
