//! 1, 2 and 4 threads each making alloc+free pairs (64 bytes) at the same time, through
//! `memreplay::Allocator<System>`:
//!
//! - `system_direct`: `System` called directly (no wrapper): the plain-System baseline;
//! - `idle`: through the wrapper, nothing recording;
//! - `rec_nostack` / `rec_stack16`: recording without / with 16-frame callstacks.
//!
//! The loops run `DEPTH` (24) calls deep, so callstacks are walked for all 16 frames.
//! One iteration = every thread makes one pair, so criterion's time per iteration is the
//! time per pair *per thread*, and its throughput (elements = threads) is total pairs/s.
//! The threads start together on a barrier; the time is from the first start to the last
//! end. On a 2-core machine 4 threads oversubscribe the cores (and the recorder's writer
//! thread is one more runnable thread while recording).
//!
//! `RUSTFLAGS="-C force-frame-pointers=yes" cargo bench -p memreplay-benches --bench thread_scaling`

use std::alloc::{Layout, System};
use std::cell::Cell;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use memreplay::Config;
use memreplay_benches::{at_depth, direct_pair, global_pair, layout, DEPTH};

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

const THREADS: [usize; 3] = [1, 2, 4];

fn system_pair(l: Layout) {
    direct_pair(&System, l)
}

/// `threads` threads each make `iters` pairs with `pair`; returns first start to last end.
fn run(threads: usize, iters: u64, pair: fn(Layout)) -> Duration {
    let l = layout(64);
    let barrier = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    // The first event registers the thread with the recorder: not timed.
                    pair(l);
                    barrier.wait();
                    // Deep enough for a full 16-frame callstack walk.
                    at_depth(DEPTH, &mut || {
                        let t0 = Instant::now();
                        for _ in 0..iters {
                            pair(l);
                        }
                        (t0, Instant::now())
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker")).collect()
    });
    let start = spans.iter().map(|s| s.0).min().expect("threads");
    let end = spans.iter().map(|s| s.1).max().expect("threads");
    end - start
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("thread_scaling");
    for threads in THREADS {
        g.throughput(Throughput::Elements(threads as u64));
        g.bench_function(format!("system_direct/{threads}t"), |b| b.iter_custom(|n| run(threads, n, system_pair)));
        g.bench_function(format!("idle/{threads}t"), |b| b.iter_custom(|n| run(threads, n, global_pair)));
        for (name, stacks) in [("rec_nostack", false), ("rec_stack16", true)] {
            let count = Cell::new(0u64);
            let path = memreplay_benches::start(&format!("{name}-{threads}.mrl"), |c: Config| {
                c.callstacks(stacks).max_stack_depth(16).usage_changes(false)
            });
            let t = Instant::now();
            g.bench_function(format!("{name}/{threads}t"), |b| {
                b.iter_custom(|n| {
                    count.set(count.get() + n * threads as u64);
                    run(threads, n, global_pair)
                })
            });
            let wall = t.elapsed();
            let stats = memreplay::stop().expect("recording");
            memreplay_benches::print_stats(&format!("{name}/{threads}t"), &stats, wall, Some(2 * count.get()));
            let _ = std::fs::remove_file(path);
        }
    }
    g.finish();
}

fn main() {
    let mut c = memreplay_benches::criterion();
    bench(&mut c);
    c.final_summary();
    memreplay_benches::remove_temp_logs();
}
