//! The frame-pointer walk alone: what capturing an N-frame callstack costs, without the
//! record, the buffer or the writer around it.
//!
//! `walk` is a copy of `walk_frame_pointers` in `recorder/src/imp/stack.rs` (private
//! there; same loop, same bound checks, same unaligned stores), called at `DEPTH + 16`
//! calls deep so that every depth measured finds enough frames. The bounds are 64 KiB
//! below a local of the measuring closure (bottom) and a local of `main` (top): every
//! frame between them is ours, and a chain without frame pointers stops at them.
//!
//! `cargo bench -p memreplay-benches --bench stack_capture`

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput};
use memreplay_benches::{at_depth, DEPTH};

/// Copy of the recorder's walk (x86_64 / aarch64); returns the frames stored in `out`.
///
/// # Safety
/// `out` has room for `max` words; `lo..hi` lies inside the calling thread's stack.
#[inline(never)]
unsafe fn walk(out: *mut u64, max: usize, mut skip: usize, lo: usize, hi: usize) -> usize {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let mut fp: usize;
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags))
        };
        #[cfg(target_arch = "aarch64")]
        unsafe {
            std::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags))
        };
        let word = std::mem::size_of::<usize>();
        let mut n = 0;
        while n < max && fp >= lo && fp.saturating_add(2 * word) <= hi && fp % word == 0 {
            // SAFETY: fp..fp+16 lies inside this thread's stack (checked above).
            let (next, ret) = unsafe { (*(fp as *const usize), *((fp + word) as *const usize)) };
            if ret == 0 {
                break;
            }
            if skip > 0 {
                skip -= 1;
            } else {
                unsafe { out.add(n).write_unaligned(ret as u64) };
                n += 1;
            }
            if next <= fp {
                break;
            }
            fp = next;
        }
        n
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (out, max, skip, lo, hi);
        0
    }
}

const DEPTHS: [usize; 5] = [1, 4, 8, 16, 32];

fn bench(c: &mut Criterion, top: usize) {
    let mut g = c.benchmark_group("stack_capture");
    g.throughput(Throughput::Elements(1));
    for depth in DEPTHS {
        // Deep enough that the walk always finds `depth` frames (+1 skipped, as the hooks do).
        at_depth(DEPTH + 16, &mut || {
            let here = 0u8;
            // Below every frame the walk starts from (the walk's own frame is deeper).
            let lo = (&here as *const u8 as usize).saturating_sub(64 << 10);
            let mut out = [0u64; 64];
            let n = unsafe { walk(out.as_mut_ptr(), depth, 1, lo, top) };
            assert_eq!(n, depth, "frame pointers missing? (build with -C force-frame-pointers=yes)");
            g.bench_function(format!("frame_pointers/{depth}"), |b| {
                b.iter_custom(|iters| {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let n = unsafe {
                            walk(
                                black_box(out.as_mut_ptr()),
                                black_box(depth),
                                black_box(1),
                                black_box(lo),
                                black_box(top),
                            )
                        };
                        black_box(n);
                    }
                    t.elapsed()
                })
            });
        });
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
