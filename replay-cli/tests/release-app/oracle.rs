//! The oracle: `System`, counting every call the program makes, inside the recorder's
//! `Allocator` (so it is in no callstack). A call the recorder makes for itself
//! (`memreplay::in_recorder()`) is not the program's and is not counted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub struct Counting;

/// Allocation calls (`alloc`, `alloc_zeroed`), `realloc` calls, `dealloc` calls, bytes
/// allocated (a realloc's new size included), live bytes, the peak of live bytes.
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);
static FREES: AtomicU64 = AtomicU64::new(0);
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

fn counted() -> bool {
    !memreplay::in_recorder()
}

fn grow(size: usize) {
    ALLOCATED.fetch_add(size as u64, Relaxed);
    let live = LIVE.fetch_add(size as u64, Relaxed) + size as u64;
    PEAK.fetch_max(live, Relaxed);
}

fn shrink(size: usize) {
    LIVE.fetch_sub(size as u64, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && counted() {
            ALLOCS.fetch_add(1, Relaxed);
            grow(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && counted() {
            ALLOCS.fetch_add(1, Relaxed);
            grow(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counted() {
            FREES.fetch_add(1, Relaxed);
            shrink(layout.size());
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && counted() {
            REALLOCS.fetch_add(1, Relaxed);
            shrink(layout.size());
            grow(new_size);
        }
        p
    }
}

/// The tally so far, as `key=value` pairs (read without allocating; printed by the caller).
pub fn tally() -> [(&'static str, u64); 6] {
    [
        ("allocs", ALLOCS.load(Relaxed)),
        ("reallocs", REALLOCS.load(Relaxed)),
        ("frees", FREES.load(Relaxed)),
        ("allocated", ALLOCATED.load(Relaxed)),
        ("peak", PEAK.load(Relaxed)),
        ("live", LIVE.load(Relaxed)),
    ]
}

/// Starts the tally afresh (for a recording started by `memreplay::start`).
pub fn reset() {
    for c in [&ALLOCS, &REALLOCS, &FREES, &ALLOCATED, &LIVE, &PEAK] {
        c.store(0, Relaxed);
    }
}
