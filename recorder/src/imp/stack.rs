//! Callstack capture on the hot path: raw return addresses, innermost first, written
//! straight into the record being built. Symbolication happens offline.
//!
//! Where a stack starts is fixed by an [`Anchor`], not by counting frames: a count of
//! frames to skip depends on what the optimizer inlined (the allocator shim is usually
//! inlined into the game's code in a release build, so skipping "one shim frame" dropped
//! the game's own function). The hook that records (an `#[inline(never)]` function) reads
//! its own stack pointer; every frame at or below it on the stack is the recorder's, and
//! the first return address kept is the one back into the hook's caller, whatever that
//! caller is after inlining. The allocator shim, when it was not inlined,
//! is that caller, and the analyzer trims it by name; the frame-pointer walk and the
//! unwinder start at the same frame.

use crate::config::StackCapture;

/// A stack address inside the frame of the recorder's hook (the function that records an
/// event): frames at or below it are the recorder's own. The flag: a frame record (the
/// caller's rbp, then the return address into it) is at that address (`Anchor::at`).
#[derive(Clone, Copy)]
pub(crate) struct Anchor(usize, bool);

impl Anchor {
    /// The anchor of the calling function's frame: its stack pointer, which is at or
    /// below its locals and above the frames of whatever it calls. Must be inlined into
    /// the hook itself (an `#[inline(never)]` function).
    #[inline(always)]
    pub(crate) fn here() -> Anchor {
        let sp: usize;
        // SAFETY: reads the stack pointer; touches no memory and no flags.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
        };
        // SAFETY: as above.
        #[cfg(target_arch = "aarch64")]
        unsafe {
            std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags))
        };
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            // Elsewhere a local's address, kept in this frame by `black_box`.
            let local = 0u8;
            sp = std::hint::black_box(&local) as *const u8 as usize;
        }
        Anchor(sp, false)
    }

    /// An anchor at a stack address the caller read itself: every frame whose record (or
    /// stack pointer, for the unwinder) is at or below `sp` is left out, so the first
    /// frame kept is the one whose frame record is the first at or above `sp`. The caller
    /// pushed a frame record at `sp` (`raw`'s contract): the cached unwinder starts there.
    pub(crate) fn at(sp: usize) -> Anchor {
        Anchor(sp, true)
    }

    /// An anchor above every frame: the capture keeps none, and walks none.
    pub(crate) fn none() -> Anchor {
        Anchor(usize::MAX, false)
    }
}

/// Captures up to `max` return addresses into `out`, innermost first, starting at the
/// return into the caller of the hook that took `anchor`; returns how many.
///
/// # Safety
/// `out` (any alignment) must have room for `max` addresses. `lo..hi` are the calling thread's stack
/// bounds ((0, 0) when unknown: the frame-pointer walk then records nothing). `cache` is
/// the calling thread's unwinder cache (`UnwindCache`), or null (the unwinder is then
/// `_Unwind_Backtrace`'s alone).
#[inline(always)]
pub(crate) unsafe fn capture(
    how: StackCapture,
    out: *mut u64,
    max: usize,
    anchor: Anchor,
    lo: usize,
    hi: usize,
    cache: *mut UnwindCache,
) -> usize {
    if anchor.0 == usize::MAX {
        return 0;
    }
    match how {
        // SAFETY: the caller's contract, passed on.
        StackCapture::FramePointers => unsafe { walk_frame_pointers(out, max, anchor, lo, hi) },
        // SAFETY: the caller's contract, passed on.
        StackCapture::Unwinder => unsafe { unwind_cached(out, max, anchor, lo, hi, cache) },
    }
}

/// Follows the frame-pointer chain: at `fp`, `[fp]` is the caller's frame pointer and
/// `[fp + 8]` the return address. Every frame record must lie inside the stack bounds,
/// be aligned and sit higher up the stack than the one before, so a frame without a
/// frame pointer ends the walk instead of reading wild memory.
///
/// Frame records below the anchor are the recorder's (whatever was not inlined into the
/// hook); the hook's own record is the first at or above it (a frame pointer is at or
/// above its frame's stack pointer), and its return address is the first one kept.
///
/// The checks are split so that the loop that keeps frames (16 iterations per event with
/// 16-frame stacks) does no more than it must: the first record is checked against both
/// bounds once; each later one only against the top, since it is above the one before,
/// which was above the bottom; the anchor is passed before that loop starts.
#[inline(always)]
unsafe fn walk_frame_pointers(out: *mut u64, max: usize, anchor: Anchor, lo: usize, hi: usize) -> usize {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let mut fp: usize;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: reads the frame-pointer register into a local; touches nothing else.
        unsafe {
            std::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags))
        };
        #[cfg(target_arch = "aarch64")]
        // SAFETY: reads the frame-pointer register into a local; touches nothing else.
        unsafe {
            std::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags))
        };
        // SAFETY: the caller's contract, passed on; `fp` is the hook's frame pointer.
        unsafe { walk_from(fp, out, max, anchor, lo, hi) }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (lo, hi);
        // SAFETY: the caller's contract, passed on.
        unsafe { unwind(out, max, anchor) }
    }
}

/// The walk of [`walk_frame_pointers`] from the frame record at `fp`. Out of line, so
/// that the loop has the registers to itself: inlined into the hook, it shared them with
/// the record being written and spilled a third of its instructions.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[inline(never)]
unsafe fn walk_from(mut fp: usize, out: *mut u64, max: usize, anchor: Anchor, lo: usize, hi: usize) -> usize {
    let word = std::mem::size_of::<usize>();
    // The highest address a frame record (two words) may start at; unknown bounds
    // ((0, 0)) record nothing.
    let Some(top) = hi.checked_sub(2 * word) else { return 0 };
    if max == 0 || fp < lo || fp > top || fp % word != 0 {
        return 0;
    }
    // A frame record `next` that may follow the one at `fp`.
    let follows = |next: usize, fp: usize| next > fp && next <= top && next % word == 0;
    while fp < anchor.0 {
        // SAFETY: lo <= fp <= top: fp..fp+16 lies inside this thread's stack.
        let (next, ret) = unsafe { (*(fp as *const usize), *((fp + word) as *const usize)) };
        if ret == 0 || !follows(next, fp) {
            return 0;
        }
        fp = next;
    }
    let mut n = 0;
    loop {
        // SAFETY: lo <= fp <= top (the first record was checked above, each later one
        // is above it and at most `top`): fp..fp+16 lies inside this thread's stack.
        let (next, ret) = unsafe { (*(fp as *const usize), *((fp + word) as *const usize)) };
        if ret == 0 {
            break;
        }
        debug_assert!(n < max);
        // SAFETY: `n < max` (the loop ends when it reaches `max`), and `out` has room
        // for `max` addresses.
        unsafe { out.add(n).write_unaligned(ret as u64) };
        n += 1;
        if n == max || !follows(next, fp) {
            break;
        }
        fp = next;
    }
    n
}

#[cfg(unix)]
mod unwinder {
    use std::ffi::c_void;

    #[repr(C)]
    pub struct Context {
        _private: [u8; 0],
    }

    pub type Reason = i32;
    pub const NO_REASON: Reason = 0;
    pub const END_OF_STACK: Reason = 5;

    pub type TraceFn = extern "C" fn(ctx: *mut Context, arg: *mut c_void) -> Reason;

    // The platform unwinder that std itself links (libgcc_s / libunwind).
    unsafe extern "C" {
        pub fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> Reason;
        pub fn _Unwind_GetIP(ctx: *mut Context) -> usize;
        pub fn _Unwind_GetCFA(ctx: *mut Context) -> usize;
    }

    pub struct State {
        pub out: *mut u64,
        pub max: usize,
        pub n: usize,
        /// The hook's anchor, until the first frame above it; then 0.
        pub anchor: usize,
    }

    /// Each frame, innermost first. `_Unwind_GetCFA` gives a frame's stack pointer (the
    /// CFA of the frame it called: libgcc and LLVM's libunwind agree), so the frames of
    /// the hook and of what it called are at or below the hook's anchor (its stack
    /// pointer), and the first frame above it is the hook's caller.
    pub extern "C" fn step(ctx: *mut Context, arg: *mut c_void) -> Reason {
        // SAFETY: `arg` is the `State` that `unwind` passed to `_Unwind_Backtrace`.
        let st = unsafe { &mut *(arg as *mut State) };
        if st.anchor != 0 {
            // SAFETY: `ctx` is the unwinder's context for this frame.
            if unsafe { _Unwind_GetCFA(ctx) } <= st.anchor {
                return NO_REASON;
            }
            st.anchor = 0;
        }
        if st.n >= st.max {
            return END_OF_STACK;
        }
        // SAFETY: as above.
        let ip = unsafe { _Unwind_GetIP(ctx) };
        if ip == 0 {
            return END_OF_STACK;
        }
        // SAFETY: `n < max`, and `out` has room for `max` addresses.
        unsafe { st.out.add(st.n).write_unaligned(ip as u64) };
        st.n += 1;
        NO_REASON
    }
}

/// Asks the platform unwinder for the stack (slower; correct without frame pointers).
#[inline(never)]
pub(crate) unsafe fn unwind(out: *mut u64, max: usize, anchor: Anchor) -> usize {
    #[cfg(unix)]
    {
        let mut st = unwinder::State { out, max, n: 0, anchor: anchor.0 };
        // SAFETY: `step` reads `st` through the pointer only while this call runs.
        unsafe { unwinder::_Unwind_Backtrace(unwinder::step, &mut st as *mut _ as *mut std::ffi::c_void) };
        st.n
    }
    #[cfg(not(unix))]
    {
        let _ = (out, max, anchor);
        0
    }
}

/// A thread's cache of unwind rules (x86_64 Linux with glibc; elsewhere nothing).
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
pub(crate) use super::unwind::UnwindCache;
#[cfg(not(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu")))]
pub(crate) enum UnwindCache {}

/// A new cache of unwind rules for a registering thread, or null where the cached
/// unwinder cannot run. Allocates: call it where the recorder's own allocations pass
/// through.
pub(crate) fn new_unwind_cache() -> *mut UnwindCache {
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    if super::unwind::available() {
        return super::unwind::new_cache();
    }
    std::ptr::null_mut()
}

/// Frees a cache `new_unwind_cache` made (null: nothing) that no thread uses any more.
pub(crate) fn free_unwind_cache(cache: *mut UnwindCache) {
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    if !cache.is_null() {
        // SAFETY: made by `Box::into_raw` in `new_cache`, and no longer used (the caller's word).
        drop(unsafe { Box::from_raw(cache) });
    }
    let _ = cache;
}

/// The cached unwinder (`unwind.rs`) where it can do the capture, else the platform's.
/// Debug builds check every cached capture against the platform's.
#[inline(always)]
unsafe fn unwind_cached(
    out: *mut u64,
    max: usize,
    anchor: Anchor,
    lo: usize,
    hi: usize,
    cache: *mut UnwindCache,
) -> usize {
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    // SAFETY: a non-null cache is the calling thread's own, used by nothing else meanwhile.
    if let Some(cache) = unsafe { cache.as_mut() } {
        // SAFETY: the caller's contract, passed on.
        if let Some(n) = unsafe { super::unwind::unwind(cache, out, max, anchor.0, anchor.1, lo, hi) } {
            #[cfg(debug_assertions)]
            // SAFETY: `theirs` has room for the `m` addresses asked for.
            super::unwind::check(out, n, max, |theirs, m| unsafe { unwind(theirs, m, anchor) });
            return n;
        }
        #[cfg(debug_assertions)]
        super::unwind::FELL_BACK.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let _ = (lo, hi, cache);
    // SAFETY: the caller's contract, passed on.
    unsafe { unwind(out, max, anchor) }
}
