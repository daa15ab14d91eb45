//! Callstack capture on the hot path: raw return addresses, innermost first, written
//! straight into the record being built. Symbolication happens offline.

use crate::config::StackCapture;

/// Captures up to `max` return addresses of the caller into `out`, leaving out the
/// innermost `skip`; returns how many.
///
/// # Safety
/// `out` (any alignment) must have room for `max` addresses. `lo..hi` are the calling thread's stack
/// bounds ((0, 0) when unknown: the frame-pointer walk then records nothing).
#[inline(always)]
pub(crate) unsafe fn capture(how: StackCapture, out: *mut u64, max: usize, skip: usize, lo: usize, hi: usize) -> usize {
    match how {
        StackCapture::FramePointers => unsafe { walk_frame_pointers(out, max, skip, lo, hi) },
        StackCapture::Unwinder => unsafe { unwind(out, max, skip) },
    }
}

/// Follows the frame-pointer chain: at `fp`, `[fp]` is the caller's frame pointer and
/// `[fp + 8]` the return address. Every step is checked against the stack bounds and must
/// move up the stack, so a frame without a frame pointer ends the walk instead of
/// reading wild memory.
#[inline(always)]
unsafe fn walk_frame_pointers(out: *mut u64, max: usize, mut skip: usize, lo: usize, hi: usize) -> usize {
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
        let _ = (lo, hi);
        unsafe { unwind(out, max, skip) }
    }
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
    }

    pub struct State {
        pub out: *mut u64,
        pub max: usize,
        pub n: usize,
        pub skip: usize,
    }

    pub extern "C" fn step(ctx: *mut Context, arg: *mut c_void) -> Reason {
        let st = unsafe { &mut *(arg as *mut State) };
        if st.skip > 0 {
            st.skip -= 1;
            return NO_REASON;
        }
        if st.n >= st.max {
            return END_OF_STACK;
        }
        let ip = unsafe { _Unwind_GetIP(ctx) };
        if ip == 0 {
            return END_OF_STACK;
        }
        unsafe { st.out.add(st.n).write_unaligned(ip as u64) };
        st.n += 1;
        NO_REASON
    }
}

/// Asks the platform unwinder for the stack (slower; correct without frame pointers).
#[inline(never)]
unsafe fn unwind(out: *mut u64, max: usize, skip: usize) -> usize {
    #[cfg(unix)]
    {
        // Skip this function's own frame too.
        let mut st = unwinder::State { out, max, n: 0, skip: skip + 1 };
        unsafe { unwinder::_Unwind_Backtrace(unwinder::step, &mut st as *mut _ as *mut std::ffi::c_void) };
        st.n
    }
    #[cfg(not(unix))]
    {
        let _ = (out, max, skip);
        0
    }
}
