//! [`Allocator`]: the `GlobalAlloc` wrapper that reports every heap operation.

use std::alloc::{GlobalAlloc, Layout};

/// Wraps any global allocator (System, mimalloc, jemalloc) and records what passes through:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: memreplay::Allocator<std::alloc::System> = memreplay::Allocator::new(std::alloc::System);
/// ```
///
/// With the feature off, or while nothing records, each call forwards to `inner` and does
/// nothing else.
pub struct Allocator<A> {
    inner: A,
}

impl<A> Allocator<A> {
    pub const fn new(inner: A) -> Self {
        Allocator { inner }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

// Ordering: the sequence number of an allocation is taken after the inner allocator
// returns, and that of a free before the inner allocator sees it, each above the last one
// taken on the same block (`imp::order`). The allocator's own synchronization then
// guarantees that a free of `p` is numbered before any reuse of `p` by another thread, so
// the log replays exactly under any interleaving.
//
// SAFETY: every call goes to the inner allocator with the caller's layout, pointer and
// size unchanged, and returns what it returned; the hooks only record.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Allocator<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let p = unsafe { self.inner.alloc(layout) };
        #[cfg(feature = "capture_replay_log")]
        if !p.is_null() {
            crate::imp::on_alloc(p, layout);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        #[cfg(feature = "capture_replay_log")]
        if !p.is_null() {
            crate::imp::on_alloc(p, layout);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        #[cfg(feature = "capture_replay_log")]
        crate::imp::on_free(ptr);
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A realloc both frees and allocates: its number must be taken before the inner
        // call (to order the free of `ptr`) and the new block is only known after. The
        // recorder reserves the number before and writes the record after, so a reuse
        // of `ptr` elsewhere is always numbered later. If the inner realloc fails,
        // nothing happened and the reserved number is simply unused.
        #[cfg(feature = "capture_replay_log")]
        {
            let ticket = crate::imp::realloc_begin(ptr);
            // SAFETY: the caller's contract for `realloc`, passed on.
            let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                crate::imp::realloc_end(ticket, ptr, p, layout.align(), new_size);
            }
            p
        }
        #[cfg(not(feature = "capture_replay_log"))]
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe {
            self.inner.realloc(ptr, layout, new_size)
        }
    }
}
