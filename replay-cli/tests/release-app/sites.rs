//! Allocation and free sites at known lines, for `tests/release_builds.rs`: each site's
//! allocating (or freeing) line ends with a `// site: NAME` marker, and the test looks
//! the marker up to know the line every report must name. Every function does some work
//! after its allocator call, so that none ends in a tail call (a function whose last act
//! is the call into the allocator is not on the stack in an optimized build: it jumps).

use std::alloc::{alloc, alloc_zeroed, dealloc, handle_alloc_error, realloc, Layout};
use std::hint::black_box;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::Relaxed};

pub const BOX_BYTES: usize = 1000;
pub const VEC_BYTES: usize = 1200;
pub const RAW_BYTES: usize = 1400;
pub const ZEROED_BYTES: usize = 1500;
pub const REALLOC_BYTES: usize = 1600;
pub const LEAK_BYTES: usize = 1700;

const TEXT: &str = include_str!("text.txt");

/// Frees made, so that each free function does something after its free.
static FREED: AtomicU64 = AtomicU64::new(0);
/// Where the leaked block is kept (so it is not elided, and stays unreachable to a drop).
static LEAKED: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());

#[inline(never)]
pub fn box_site(v: u64) -> Box<[u64; BOX_BYTES / 8]> {
    Box::new([black_box(v); BOX_BYTES / 8]) // site: box_site
}

#[inline(never)]
pub fn vec_site() -> Vec<u32> {
    let mut v = Vec::<u32>::with_capacity(black_box(VEC_BYTES / 4)); // site: vec_site
    v.push(1);
    v
}

#[inline(never)]
pub fn string_site() -> String {
    String::from(black_box(TEXT)) // site: string_site
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 16).unwrap()
}

#[inline(never)]
pub fn raw_alloc_site() -> *mut u8 {
    let p = unsafe { alloc(layout(black_box(RAW_BYTES))) }; // site: raw_alloc_site
    if p.is_null() {
        handle_alloc_error(layout(RAW_BYTES));
    }
    p
}

#[inline(never)]
pub fn zeroed_site() -> *mut u8 {
    let p = unsafe { alloc_zeroed(layout(black_box(ZEROED_BYTES))) }; // site: zeroed_site
    if p.is_null() {
        handle_alloc_error(layout(ZEROED_BYTES));
    }
    p
}

#[inline(never)]
pub fn realloc_site(p: *mut u8) -> *mut u8 {
    let q = unsafe { realloc(p, layout(RAW_BYTES), black_box(REALLOC_BYTES)) }; // site: realloc_site
    if q.is_null() {
        handle_alloc_error(layout(REALLOC_BYTES));
    }
    q
}

#[inline(never)]
pub fn leak_known_block() {
    let b = Box::new([black_box(7u8); LEAK_BYTES]); // site: leak_known_block
    // `black_box`: a store to a static nothing reads would let the optimizer drop the
    // store, then the allocation (when the allocator is in another crate it may).
    LEAKED.store(black_box(Box::into_raw(b).cast()), Relaxed);
}

#[inline(never)]
pub fn free_box(b: Box<[u64; BOX_BYTES / 8]>) {
    drop(black_box(b)); // site: free_box
    FREED.fetch_add(1, Relaxed);
}

#[inline(never)]
pub fn free_vec(v: Vec<u32>) {
    drop(black_box(v)); // site: free_vec
    FREED.fetch_add(1, Relaxed);
}

#[inline(never)]
pub fn free_string(s: String) {
    drop(black_box(s)); // site: free_string
    FREED.fetch_add(1, Relaxed);
}

#[inline(never)]
pub fn free_raw(p: *mut u8, size: usize) {
    unsafe { dealloc(black_box(p), layout(size)) }; // site: free_raw
    FREED.fetch_add(1, Relaxed);
}

/// Frees made so far.
pub fn freed() -> u64 {
    FREED.load(Relaxed)
}
