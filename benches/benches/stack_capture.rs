//! Callstack capture alone: what capturing an N-frame callstack costs, without the
//! record, the buffer or the writer around it, through the recorder's own capture
//! (`memreplay::imp::capture_callstack`: the function the hooks call, anchored the same
//! way), by frame pointers, by the unwinder (cached rules, `unwind.rs`) and by
//! `_Unwind_Backtrace` alone (`unwinder_uncached`: what the unwinder cost before it
//! cached). Measured at `DEPTH + 16` calls deep so
//! that every depth finds enough frames. The frame-pointer walk is bounded by 64 KiB
//! below a local of the measuring closure (bottom) and a local of `main` (top): every
//! frame between them is ours, and a chain without frame pointers stops at them.
//!
//! `cargo bench -p memreplay-benches --bench stack_capture`

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput};
use memreplay::imp::{capture_callstack, capture_callstack_uncached};
use memreplay::StackCapture;
use memreplay_benches::{at_depth, DEPTH};

const DEPTHS: [usize; 5] = [1, 4, 8, 16, 32];

fn bench(c: &mut Criterion, top: usize) {
    let mut g = c.benchmark_group("stack_capture");
    g.throughput(Throughput::Elements(1));
    for depth in DEPTHS {
        for (name, how) in [
            ("frame_pointers", Some(StackCapture::FramePointers)),
            ("unwinder", Some(StackCapture::Unwinder)),
            ("unwinder_uncached", None),
        ] {
            let capture = |how: Option<StackCapture>, out: &mut [u64], lo, hi| match how {
                Some(how) => capture_callstack(how, out, lo, hi),
                None => capture_callstack_uncached(out),
            };
            // Deep enough that the capture always finds `depth` frames.
            at_depth(DEPTH + 16, &mut || {
                let here = 0u8;
                // Below every frame the walk starts from (the capture's own frame is deeper).
                let lo = (&here as *const u8 as usize).saturating_sub(64 << 10);
                let mut out = [0u64; 64];
                let n = capture(how, &mut out[..depth], lo, top);
                assert_eq!(n, depth, "{name}: frames missing? (build with -C force-frame-pointers=yes)");
                g.bench_function(format!("{name}/{depth}"), |b| {
                    b.iter_custom(|iters| {
                        let t = Instant::now();
                        for _ in 0..iters {
                            let n =
                                capture(black_box(how), black_box(&mut out[..depth]), black_box(lo), black_box(top));
                            black_box(n);
                        }
                        t.elapsed()
                    })
                });
            });
        }
    }
    g.finish();
}

fn main() {
    let top_marker = 0u8;
    let top = black_box(&top_marker as *const u8 as usize);
    let mut c = memreplay_benches::criterion();
    bench(&mut c, top);
    c.final_summary();
}
