//! Hooks for an allocator that is not a Rust `GlobalAlloc`: the C library's `malloc`
//! family interposed by `libmemreplay` (`crates/capi/src/preload.rs`). Not part of the
//! API: the same hot path as [`Allocator`](crate::Allocator)'s, taking a size and an
//! alignment instead of a `Layout`, and an anchor for the callstack.
//!
//! **The anchor.** A hook records the stack of its caller. An interposed `malloc` is
//! itself a frame between the program and the hook, and the first frame of a callstack
//! must be the program's call into `malloc`. So each hook here takes `anchor`: a stack
//! address that the interposer reads in its own frame (its stack pointer once its frame
//! record is pushed). Every frame at or below it is left out; with frame pointers the
//! first return address kept is that of the interposer's frame record (the return into
//! the program), and the unwinder keeps the first frame whose stack pointer is above
//! it (the program's). The interposer must therefore push a frame record at `anchor`
//! whatever the build's frame-pointer setting: `libmemreplay`'s entry points are naked
//! functions that do exactly that.
//!
//! Unlike `Allocator`, these never start a session from `MEMREPLAY_LOG` on their own:
//! the interposer calls [`start_from_env`] once the process can run the recorder.
//!
//! **Before the start.** The interposer sees calls before the recorder can run (the
//! dynamic loader's, the C library's start-up). It keeps track of them itself; once a
//! session records it hands over the blocks still live ([`alloc_before_start`], recorded
//! without a callstack) and the counts ([`note_calls_before_start`], one `BEFORE_START`
//! record in the metadata stream, SPEC.md §7.13).

use std::alloc::Layout;
use std::sync::Mutex;

use crate::imp;

/// Records an allocation of `size` bytes at `p` aligned to `align` (a power of two),
/// made by the caller of the frame anchored at `anchor`. Nothing when nothing records,
/// or when the calling thread is inside the recorder.
#[inline]
pub fn alloc(p: *mut u8, size: usize, align: usize, anchor: usize) {
    if p.is_null() {
        return;
    }
    if !imp::is_recording() {
        // A session starting on this thread: what it allocates through the interposer
        // is the recorder's, and may be freed by the program's side later.
        imp::note_if_busy(p);
        return;
    }
    let Ok(layout) = Layout::from_size_align(size, align) else { return };
    imp::record_alloc_at(p, layout, imp::Anchor::at(anchor));
}

/// Records the free of `p` (not null), before the real free runs.
#[inline]
pub fn free(p: *mut u8, anchor: usize) {
    if p.is_null() {
        return;
    }
    if !imp::is_recording() {
        imp::forget_if_busy(p);
        return;
    }
    imp::record_free_at(p, imp::Anchor::at(anchor));
}

/// Before a realloc of `old` (not null, to a size above 0): the number of its free half,
/// 0 if nothing records. Pass it to [`realloc_end`] if the realloc succeeds.
#[inline]
pub fn realloc_begin(old: *mut u8) -> u64 {
    if !imp::is_recording() {
        imp::forget_if_busy(old);
        return 0;
    }
    imp::realloc_begin(old)
}

/// After a realloc that succeeded: `old` moved to (or stayed at) `new`, now `new_size`
/// bytes aligned to `align`. `ticket` is [`realloc_begin`]'s number; 0 (recording began
/// meanwhile) records the new block as an allocation.
#[inline]
pub fn realloc_end(ticket: u64, old: *mut u8, new: *mut u8, align: usize, new_size: usize, anchor: usize) {
    if new.is_null() {
        return;
    }
    if ticket == 0 {
        return alloc(new, new_size, align, anchor);
    }
    imp::record_realloc_at(ticket, old, new, align, new_size, imp::Anchor::at(anchor));
}

/// Starts a session from `MEMREPLAY_LOG` (and `MEMREPLAY_OPTIONS`) if it is set and no
/// session was started from it before, as the first allocation through `Allocator` would;
/// says on stderr why when it cannot. Returns whether a session records now.
///
/// No `atexit` hook is registered: the caller stops the session ([`crate::stop`]) when
/// the process ends, as late in the exit as it can (a shared object's destructor runs
/// after every `atexit` handler and after the program's own destructors).
pub fn start_from_env() -> bool {
    imp::EXIT_HOOK.store(false, std::sync::atomic::Ordering::Relaxed);
    // A thread may allocate first from inside `pthread_getattr_np`, holding its lock.
    imp::BOUNDS_FROM_MAPS.store(true, std::sync::atomic::Ordering::Relaxed);
    imp::untracked(imp::auto_start_once);
    imp::is_recording()
}

/// In the child of a `fork`, from a `pthread_atfork` child handler: the parent's session
/// is forgotten (its threads are not in the child), so the child records nothing and
/// `exit` in the child neither waits for them nor touches the parent's log.
pub fn forget_session_after_fork() {
    imp::forget_session_after_fork();
}

/// Whether the calling thread is inside the recorder (see [`in_recorder`](crate::in_recorder)).
#[inline]
pub fn in_recorder() -> bool {
    imp::in_recorder()
}

/// Asks the recorder's writer thread for a scan of the loaded modules now, rather than at
/// its next periodic rescan (every second). With `wait`, returns once a scan that started
/// after this call has written its `MODULE` records to the log (true), or after at most a
/// second (false); so a library about to be unloaded (`dlclose`) is in the log's module
/// map while still mapped. Nothing, and false, when no session records or on a thread
/// inside the recorder.
pub fn request_module_scan(wait: bool) -> bool {
    imp::request_module_scan(wait)
}

/// The allocator calls made before the recorder started, which the interposer counted
/// (SPEC.md §7.13, the `BEFORE_START` record).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallsBeforeStart {
    /// Calls that allocated a block.
    pub allocations: u64,
    /// Calls that freed a block.
    pub frees: u64,
    /// Calls that resized a block.
    pub reallocs: u64,
    /// Bytes the allocations and reallocs asked for.
    pub bytes: u64,
    /// Blocks still allocated at the start, each recorded with [`alloc_before_start`].
    pub live: u64,
    /// Blocks the interposer could not keep track of.
    pub untracked: u64,
}

/// The counts [`note_calls_before_start`] left for the writer, which takes them at its
/// next module scan.
static CALLS_BEFORE_START: Mutex<Option<CallsBeforeStart>> = Mutex::new(None);

/// Has the session's writer write `calls` as one `BEFORE_START` record to the metadata
/// stream: at the module scan this asks for (at once, not waited for), or at the end of
/// the log at the latest. Nothing when no session records.
pub fn note_calls_before_start(calls: CallsBeforeStart) {
    if !imp::is_recording() {
        return;
    }
    *CALLS_BEFORE_START.lock().unwrap_or_else(|e| e.into_inner()) = Some(calls);
    imp::request_module_scan(false);
}

/// For the writer: the counts left by [`note_calls_before_start`], once.
pub(crate) fn take_calls_before_start() -> Option<CallsBeforeStart> {
    CALLS_BEFORE_START.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// Records a block allocated before the recorder started and still allocated (`size`
/// bytes at `p`, aligned to `align`), on the calling thread's stream, without a
/// callstack: where it was allocated from was never seen. Its later free then matches.
pub fn alloc_before_start(p: *mut u8, size: usize, align: usize) {
    if p.is_null() || !imp::is_recording() {
        return;
    }
    let Ok(layout) = Layout::from_size_align(size, align) else { return };
    // An anchor above every frame of the stack: none is walked, none is kept.
    imp::record_alloc_at(p, layout, imp::Anchor::none());
}

/// Before and after a `dlclose`: objects may be unloaded, so the unwinder's cached rules
/// (`unwind=unwinder`) are forgotten; each thread's next capture looks its frames up
/// afresh. Cheap (one atomic increment); call it whether or not a session records.
pub fn modules_unloaded() {
    imp::modules_unloaded();
}
