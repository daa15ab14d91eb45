//! (a) The baseline: `System` as the global allocator, no wrapper at all.
//!
//! `cargo bench -p memreplay-benches --bench alloc_plain`

use std::alloc::System;

use criterion::{Criterion, Throughput};
use memreplay_benches::{box_pair, direct_pair, global_pair, layout, SIZES};

#[global_allocator]
static ALLOC: System = System;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("alloc_pair/plain_system");
    // One element = one alloc+free pair (two events).
    g.throughput(Throughput::Elements(1));
    for size in SIZES {
        let l = layout(size);
        g.bench_function(format!("global/{size}"), |b| b.iter(|| global_pair(l)));
    }
    g.bench_function("box64", |b| b.iter(box_pair::<64>));
    g.bench_function("direct_system/64", |b| b.iter(|| direct_pair(&System, layout(64))));
    g.finish();
}

fn main() {
    let mut c = memreplay_benches::criterion();
    bench(&mut c);
    c.final_summary();
}
