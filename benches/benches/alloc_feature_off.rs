//! The wrapper's cost when memreplay is compiled without `capture_replay_log`:
//! `memreplay::Allocator<System>` must then be a pure pass-through.
//!
//! `cargo bench -p memreplay-benches --no-default-features --bench alloc_feature_off`
//!
//! Built with the default features instead (as `cargo bench -p memreplay-benches` does),
//! the same binary measures the wrapper compiled in but idle (not recording), and names
//! its group accordingly so the two never share a criterion baseline.

use std::alloc::System;

use criterion::{Criterion, Throughput};
use memreplay_benches::{box_pair, direct_pair, global_pair, layout, SIZES};

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

fn bench(c: &mut Criterion) {
    let group =
        if memreplay::ENABLED { "alloc_pair/wrapper_feature_on_idle" } else { "alloc_pair/wrapper_feature_off" };
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    for size in SIZES {
        let l = layout(size);
        g.bench_function(format!("global/{size}"), |b| b.iter(|| global_pair(l)));
    }
    g.bench_function("box64", |b| b.iter(box_pair::<64>));
    // Same process, no wrapper: System called directly, for a noise-free comparison.
    g.bench_function("direct_system/64", |b| b.iter(|| direct_pair(&System, layout(64))));
    g.finish();
}

fn main() {
    let mut c = memreplay_benches::criterion();
    bench(&mut c);
    c.final_summary();
}
