//! Each thread's recorder state and the hooks that append records: the hot path.
//!
//! A hook checks the session pointer (one acquire load), enters the thread's state
//! through a const thread-local (no lazy initialisation, no destructor), marks the thread
//! busy so that anything the recorder itself allocates passes straight through, reserves
//! room in the thread's buffer, writes a fixed-width record and publishes it with one
//! release store. No lock, no allocation through the hooked allocator.

use std::alloc::Layout;
use std::cell::Cell;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::buffer::{BufPtr, BUFFER_CAPACITY, WAKE_AT};
use super::order::{self, EVENTS_PER_CLOCK};
use super::record::{self, RecordWriter, NAME_FIELD};
use super::stack::Anchor;
use super::{session, stack, sys, Session, Slot};
use crate::Resource;

/// Marks a thread whose state was torn down (it is exiting): its later events go to the
/// shared stream of exiting threads.
const EXITED: *mut ThreadState = std::ptr::dangling_mut();

/// Events between two clock reads on a busy thread (a clock read costs about 20 ns).
const EVENTS_PER_TIME: u32 = 1024;

pub(crate) struct ThreadState {
    session: *const Session,
    slot: Arc<Slot>,
    buf: BufPtr,
    len: usize,
    next_index: u64,
    stack_lo: usize,
    stack_hi: usize,
    /// The cached unwinder's rules (`stack::UnwindCache`), when the session unwinds and
    /// the cached unwinder can run here; else null.
    unwind_cache: *mut stack::UnwindCache,
    events_since_time: u32,
    /// The stream's last ordering key (`order`): the next is larger.
    last_key: u64,
}

struct Local {
    state: Cell<*mut ThreadState>,
    /// Inside a hook or other recorder code: allocations pass through unrecorded.
    busy: Cell<bool>,
    /// One of the recorder's own threads (writer, encoders), busy for good: allocations
    /// are not noted in `own_blocks`.
    recorder: Cell<bool>,
    /// Inside `not_noted` or the public `untracked` (whose blocks the caller frees
    /// wherever it likes): allocations are not noted in `own_blocks` either.
    unnoted: Cell<bool>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            state: Cell::new(ptr::null_mut()),
            busy: Cell::new(false),
            recorder: Cell::new(false),
            unnoted: Cell::new(false),
        }
    };
    static EXIT: ExitFlush = const { ExitFlush };
}

/// Hands the thread's last buffer to the writer when the thread exits.
struct ExitFlush;

impl Drop for ExitFlush {
    fn drop(&mut self) {
        let _ = LOCAL.try_with(|l| {
            let was_busy = l.busy.replace(true);
            let st = l.state.get();
            l.state.set(EXITED);
            if !st.is_null() && st != EXITED {
                // SAFETY: a registered state was made by `Box::into_raw` and only its own
                // thread touches it; the thread is exiting, and `state` no longer points
                // to it: its later events go to the exiting threads' stream. So it is
                // freed here (a thread that comes and goes leaves nothing behind).
                let mut st = unsafe { Box::from_raw(st) };
                if ptr::eq(st.session, session()) {
                    st.finish();
                }
                stack::free_unwind_cache(std::mem::replace(&mut st.unwind_cache, ptr::null_mut()));
                drop(st);
            }
            l.busy.set(was_busy);
        });
    }
}

/// Marks the calling thread as the recorder's own: nothing it does is recorded.
pub(crate) fn mark_recorder_thread() {
    LOCAL.with(|l| {
        l.busy.set(true);
        l.recorder.set(true);
    });
}

/// Blocks allocated for the recorder on a program thread, by the C library or std, that
/// the program's side frees when the thread exits. Registering a thread's exit flush makes
/// glibc allocate a node (`__cxa_thread_atexit_impl`) and std its list of thread-local
/// destructors, and starting a session makes std a handle for the calling thread; with the
/// C library's `malloc` interposed (`crate::raw`) these allocations reach the hooks while
/// the thread is busy, so they are not recorded, but the thread frees them as it exits,
/// after its exit flush, outside the recorder: frees of blocks the log never saw. So every
/// allocation that reaches a hook busy on a program thread is noted here; a free of a
/// noted block inside the recorder (any thread) forgets it, and one made by an exiting
/// thread after its flush is left out of the log. Only those two paths, both cold, look
/// here: the hot path does not. A noted block freed by a thread before its flush (none is
/// known) would be recorded as a free of a block the log does not know, which the
/// analyzer counts. Through a Rust `GlobalAlloc` the recorder's own allocations are noted
/// too, and freed inside it.
mod own_blocks {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Buckets of `WAYS` slots: a bucket is one cache line. 32 KiB in all, room for the
    /// hundreds of blocks a session's start allocates through an interposed `malloc`.
    const BUCKETS: usize = 512;
    const WAYS: usize = 8;
    #[repr(align(64))]
    struct Bucket([AtomicUsize; WAYS]);
    static TABLE: [Bucket; BUCKETS] = [const { Bucket([const { AtomicUsize::new(0) }; WAYS]) }; BUCKETS];

    fn bucket(p: usize) -> &'static Bucket {
        // Fibonacci hashing of the 16-byte granule: the product's top bits.
        &TABLE[(p >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (usize::BITS - BUCKETS.trailing_zeros())]
    }

    /// Notes `p`, allocated for the recorder. A full bucket leaves it out: its free by an
    /// exiting thread would then be recorded (a free of a block the log does not know).
    #[cold]
    pub(super) fn note(p: usize) {
        if p == 0 {
            return;
        }
        let _ = bucket(p).0.iter().any(|s| s.compare_exchange(0, p, Ordering::Relaxed, Ordering::Relaxed).is_ok());
    }

    /// Whether `p` was noted; forgets it. The allocator's own synchronisation orders a
    /// block's free after its allocation, and so the forgetting after the note.
    #[cold]
    pub(super) fn forget(p: usize) -> bool {
        p != 0 && bucket(p).0.iter().any(|s| s.compare_exchange(p, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok())
    }
}

/// While no session records (one is starting on this thread): notes a block allocated
/// for the recorder (`own_blocks`) if the thread is inside the recorder.
#[inline(always)]
pub(crate) fn note_if_busy(p: *mut u8) {
    let _ = LOCAL.try_with(|l| {
        if l.busy.get() {
            busy_block(l, OwnBlock::Alloc(p as usize));
        }
    });
}

/// While no session records (one is starting on this thread): a free of `p` inside the
/// recorder, which forgets it if it was noted.
#[inline(always)]
pub(crate) fn forget_if_busy(p: *mut u8) {
    let _ = LOCAL.try_with(|l| {
        if l.busy.get() {
            busy_block(l, OwnBlock::Free(p as usize));
        }
    });
}

/// A block allocated or freed while the thread is busy (`own_blocks`): an allocation is
/// noted unless it is a recorder thread's or the caller's own (`Local::unnoted`), and a
/// free forgets its note.
#[inline(always)]
fn busy_block(l: &Local, block: OwnBlock) {
    match block {
        OwnBlock::None => {}
        OwnBlock::Alloc(p) => {
            if !l.recorder.get() && !l.unnoted.get() {
                own_blocks::note(p);
            }
        }
        OwnBlock::Free(p) => {
            own_blocks::forget(p);
        }
    }
}

/// What a hook does to a block, for the blocks allocated for the recorder (`own_blocks`).
#[derive(Clone, Copy)]
enum OwnBlock {
    /// Not about a block.
    None,
    /// `p` was allocated.
    Alloc(usize),
    /// `p` is freed (or reallocated away).
    Free(usize),
}

/// Whether the calling thread is inside recorder code: a hook, `start`/`stop`, `untracked`,
/// or one of its own threads (writer, encoders).
pub(crate) fn in_recorder() -> bool {
    LOCAL.try_with(|l| l.busy.get()).unwrap_or(false)
}

/// Runs `f` busy: the recorder's own code (starting a session, its bookkeeping), whose
/// blocks freed later by the program's side are noted (`own_blocks`).
pub(crate) fn untracked<R>(f: impl FnOnce() -> R) -> R {
    untracked_noting(true, f)
}

/// The public `untracked`: the caller's own blocks, which it frees where it likes, so
/// they are not noted (a note outliving its block could hide a later free at the same
/// address).
pub(crate) fn untracked_by_caller<R>(f: impl FnOnce() -> R) -> R {
    untracked_noting(false, f)
}

fn untracked_noting<R>(noting: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(bool, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = LOCAL.try_with(|l| {
                l.busy.set(self.0);
                l.unnoted.set(self.1);
            });
        }
    }
    let _restore = LOCAL.with(|l| Restore(l.busy.replace(true), l.unnoted.replace(!noting)));
    f()
}

/// Runs `f` on this thread's state if a session records and the thread is not already
/// inside recorder code.
#[inline(always)]
fn with_state(f: impl FnOnce(&mut ThreadState, &Session)) {
    with_state_for(OwnBlock::None, f)
}

/// `with_state` for a hook about a block: a block allocated while a program thread is
/// busy is noted as allocated for the recorder, and its free by an exiting thread left
/// out (`own_blocks`).
#[inline(always)]
fn with_state_for(block: OwnBlock, f: impl FnOnce(&mut ThreadState, &Session)) {
    let s = session();
    if s.is_null() {
        return;
    }
    // A reference out of `with` keeps this inlined: `Local` is const-initialised and has
    // no destructor, so its storage lives as long as the thread.
    // SAFETY: as said above, the thread-local outlives every use on this thread.
    let l: &Local = unsafe { &*LOCAL.with(|l| l as *const Local) };
    if l.busy.get() {
        busy_block(l, block);
        return;
    }
    let mut st = l.state.get();
    // One call site of `f`, so that it is inlined.
    let exiting = st == EXITED;
    if exiting {
        if let OwnBlock::Free(p) = block {
            if own_blocks::forget(p) {
                return;
            }
        }
    }
    l.busy.set(true);
    // SAFETY: sessions are never freed.
    let session = unsafe { &*s };
    // SAFETY: a non-null state other than `EXITED` was registered (it is freed only by
    // the thread's exit flush, which sets `EXITED` first); only its own thread reads it.
    let stale = !exiting && (st.is_null() || !ptr::eq(unsafe { (*st).session }, s));
    if exiting {
        st = lock_exiting_stream(session);
    } else if stale {
        st = register(session);
        l.state.set(st);
    }
    // SAFETY: `st` is this thread's registered state (or the exiting threads' shared
    // one, under `EXITING_LOCK`): live until the thread's exit flush, and touched by no
    // one else meanwhile.
    f(unsafe { &mut *st }, session);
    if exiting {
        EXITING_LOCK.store(false, Ordering::Release);
    }
    l.busy.set(false);
}

#[cold]
fn register(session: &'static Session) -> *mut ThreadState {
    // Make sure the exit flush runs for this thread (registering it may allocate).
    let _ = EXIT.try_with(|_| ());
    let thread = session.next_thread.fetch_add(1, Ordering::Relaxed);
    let st = Box::into_raw(not_noted(|| Box::new(new_state(session, thread))));
    // SAFETY: just made from a box, and not shared yet.
    let st_ref = unsafe { &mut *st };
    let mut name = [0u8; 64];
    let n = sys::os_thread_name(&mut name);
    let name = std::str::from_utf8(&name[..n]).unwrap_or("");
    st_ref.thread_info(sys::os_thread_id(), name);
    st
}

/// Runs `f`, whose allocations are the recorder's own for good (a thread's state, never
/// freed) or freed inside it (its buffer): not noted as blocks the program's side frees
/// (`own_blocks`), so that they do not fill the table.
fn not_noted<R>(f: impl FnOnce() -> R) -> R {
    let was = LOCAL.try_with(|l| l.unnoted.replace(true)).unwrap_or(true);
    let r = f();
    let _ = LOCAL.try_with(|l| l.unnoted.set(was));
    r
}

fn new_state(session: &'static Session, thread: u32) -> ThreadState {
    let slot = Arc::new(Slot { thread, current: ptr::null_mut::<super::buffer::Buffer>().into() });
    session.slots.lock().unwrap_or_else(|e| e.into_inner()).push(slot.clone());
    // Forced: a new thread never waits for buffers held by idle threads.
    let buf = session.pool.take(true, || {});
    // SAFETY: fresh from the pool, the buffer is this thread's alone.
    unsafe { buf.reset(thread, 0) };
    slot.current.store(buf.0, Ordering::Release);
    let (stack_lo, stack_hi) = sys::stack_bounds();
    let unwind_cache = match session.flags.capture {
        crate::StackCapture::Unwinder if session.flags.stacks_on_alloc || session.flags.stacks_on_free => {
            stack::new_unwind_cache()
        }
        _ => ptr::null_mut(),
    };
    let mut st = ThreadState {
        session,
        slot,
        buf,
        len: 0,
        next_index: 1,
        stack_lo,
        stack_hi,
        unwind_cache,
        events_since_time: 0,
        last_key: 0,
    };
    st.time(session);
    st
}

/// Guards the shared stream of threads whose own state is gone (events made by
/// thread-local destructors after ours ran). Rare, so a spin lock is enough.
static EXITING_LOCK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Takes `EXITING_LOCK` and returns the shared stream's state; the caller unlocks.
#[cold]
fn lock_exiting_stream(session: &'static Session) -> *mut ThreadState {
    use std::sync::atomic::AtomicPtr;
    static STATE: AtomicPtr<ThreadState> = AtomicPtr::new(ptr::null_mut());
    let backoff = crossbeam_utils::Backoff::new();
    while EXITING_LOCK.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        backoff.snooze();
    }
    let mut st = STATE.load(Ordering::Relaxed);
    // SAFETY: a non-null `STATE` was made from a box and leaked; `EXITING_LOCK` is held.
    let stale = st.is_null() || !ptr::eq(unsafe { (*st).session }, session);
    if stale {
        let thread = session.next_thread.fetch_add(1, Ordering::Relaxed);
        st = Box::into_raw(not_noted(|| Box::new(new_state(session, thread))));
        // SAFETY: just made from a box, and not shared yet.
        unsafe { (*st).thread_info(0, "(exiting threads)") };
        STATE.store(st, Ordering::Relaxed);
    }
    // The stream is shared: walk stacks within the calling thread's bounds.
    let (lo, hi) = sys::stack_bounds();
    // SAFETY: `st` is leaked, and `EXITING_LOCK` (held) keeps every other thread off it.
    unsafe {
        (*st).stack_lo = lo;
        (*st).stack_hi = hi;
    }
    st
}

/// Hands a buffer to its stream's encoder (`Session::hand_off`), and wakes the encoder
/// once `WAKE_AT` buffers wait for it, or with a thread's last buffer. The channel has room
/// for every buffer that can exist, so this only waits if the encoder is gone mid-stop
/// (then the buffer is dropped with the session's end).
fn send(session: &Session, b: BufPtr) {
    use crossbeam_channel::TrySendError;
    // SAFETY: the buffer is this thread's until it is sent; `thread` was set when it was
    // taken, `last` before the send.
    let (thread, last) = unsafe { ((*b.0).thread as usize, (*b.0).last) };
    let i = thread % session.hand_off.len();
    let to = &session.hand_off[i];
    let mut b = Some(b);
    super::buffer::wait_for(|| match to.try_send(b.take()?) {
        Ok(()) | Err(TrySendError::Disconnected(_)) => Some(()),
        Err(TrySendError::Full(back)) => {
            b = Some(back);
            None
        }
    });
    if last || to.len() >= WAKE_AT {
        session.wake_encoder(i);
    }
}

impl ThreadState {
    /// A writer for a record of at most `max` bytes, starting a new buffer if needed.
    #[inline(always)]
    fn reserve(&mut self, max: usize) -> RecordWriter {
        if self.len + max > BUFFER_CAPACITY {
            self.hand_off();
        }
        // SAFETY: `len + max <= BUFFER_CAPACITY` (a fresh buffer holds any record), so the
        // `max` bytes from `len` lie in the data area, which only this thread writes.
        RecordWriter { ptr: unsafe { self.buf.data().add(self.len) }, len: 0, cap: max }
    }

    /// Publishes the record `w` wrote: its stream's encoder may read it from now on.
    #[inline(always)]
    fn commit(&mut self, w: RecordWriter) {
        self.len += w.len;
        // SAFETY: the buffer is live while this thread holds it; `published` is atomic.
        unsafe { (*self.buf.0).published.store(self.len, Ordering::Release) };
    }

    /// Sends the full buffer to its stream's encoder and starts a new one.
    ///
    /// Order matters: the slot is cleared before the send, so the encoder, which reads a
    /// slot's current buffer to collect idle threads, never sees a buffer it already got
    /// through the channel (and may have recycled).
    #[cold]
    fn hand_off(&mut self) {
        // SAFETY: sessions are never freed.
        let session = unsafe { &*self.session };
        self.slot.current.store(ptr::null_mut(), Ordering::Release);
        let old = self.buf;
        send(session, old);
        let new = session.pool.take(false, || session.wake_encoders());
        // SAFETY: fresh from the pool, the buffer is this thread's alone.
        unsafe { new.reset(self.slot.thread, self.next_index) };
        self.next_index += 1;
        self.slot.current.store(new.0, Ordering::Release);
        self.buf = new;
        self.len = 0;
        self.time(session);
    }

    /// The thread ends: its last buffer goes to the writer.
    fn finish(&mut self) {
        // SAFETY: sessions are never freed.
        let session = unsafe { &*self.session };
        self.slot.current.store(ptr::null_mut(), Ordering::Release);
        // SAFETY: the buffer is this thread's until it is sent below; its encoder reads
        // `last` only after receiving it.
        unsafe { (*self.buf.0).last = true };
        send(session, self.buf);
    }

    #[inline(always)]
    fn count_event(&mut self, session: &Session) {
        self.events_since_time += 1;
        if self.events_since_time % EVENTS_PER_CLOCK == 0 {
            self.clock(session);
        }
    }

    /// Raises the stream's key to the clock (`order`), and every `EVENTS_PER_TIME`
    /// events writes the time.
    #[cold]
    fn clock(&mut self, session: &Session) {
        if self.events_since_time >= EVENTS_PER_TIME {
            self.time(session);
        } else {
            self.last_key = self.last_key.max(session.order.clock());
        }
    }

    /// The ordering key of an event on the block at `addr` in `domain` (heap: 0).
    #[inline(always)]
    fn key_at(&mut self, session: &Session, domain: u32, addr: u64) -> u64 {
        self.last_key = order::next_key(self.last_key, Some(session.order.slot_for(domain, addr)));
        self.last_key
    }

    /// The ordering key of a marker (label, frame start): it raises the floor that every
    /// thread's next key reads.
    fn marker_key(&mut self, session: &Session) -> u64 {
        self.time(session);
        self.last_key = order::next_marker_key(self.last_key);
        order::raise_floor(self.last_key);
        self.last_key
    }

    /// The ordering key of an attach to the block containing `addr`, which may be an
    /// interior pointer, so the block's slot is unknown: the key comes after the clock,
    /// hence after the block's allocation (a key never runs ahead of the clock), and it
    /// raises the floor, so the block's free (after the attach) comes after it.
    fn attach_key(&mut self, session: &Session, addr: u64) -> u64 {
        self.last_key = self.last_key.max(session.order.clock());
        let key = self.key_at(session, 0, addr);
        order::raise_floor(key);
        key
    }

    /// Writes the stream's time (the recorder's clock) and returns it.
    fn time(&mut self, session: &Session) -> u64 {
        self.events_since_time = 0;
        // One clock read for both: the key's floor and the stream's time.
        let now = std::time::Instant::now();
        self.last_key = self.last_key.max(session.order.clock_at(now));
        let ns = now.saturating_duration_since(session.start).as_nanos() as u64;
        let mut w = self.reserve(9);
        w.u8(record::TIME);
        w.u64(ns);
        self.commit(w);
        ns
    }

    fn thread_info(&mut self, os_tid: u64, name: &str) {
        let mut w = self.reserve(9 + NAME_FIELD);
        w.u8(record::THREAD_INFO);
        w.u64(os_tid);
        w.name(name);
        self.commit(w);
    }

    /// Appends the stack of the hook's caller after the record's fixed part: `anchor` is
    /// the hook's (see `stack::Anchor`).
    #[inline(always)]
    fn stack(&self, session: &Session, w: &mut RecordWriter, on: bool, anchor: Anchor) {
        let f = &session.flags;
        let n = if on {
            debug_assert!(w.len + max_stack_bytes(session) <= w.cap, "no room for the callstack");
            // SAFETY: every record that calls this reserved `max_stack_bytes` after its
            // fixed part: the count byte, then room for `depth` addresses.
            unsafe {
                stack::capture(
                    f.capture,
                    w.ptr.add(w.len + 1) as *mut u64,
                    f.depth,
                    anchor,
                    self.stack_lo,
                    self.stack_hi,
                    self.unwind_cache,
                )
            }
        } else {
            0
        };
        w.u8(n as u8);
        w.len += n * 8;
    }
}

#[inline(always)]
fn max_stack_bytes(session: &Session) -> usize {
    1 + session.flags.depth * 8
}

#[inline(always)]
pub(crate) fn on_alloc(p: *mut u8, layout: Layout) {
    // The allocation that starts a session from `MEMREPLAY_LOG` is the session's first.
    if session().is_null() && !maybe_auto_start() {
        return;
    }
    record_alloc(p, layout);
}

/// Out of line, so that the hook is a load and a branch when nothing records, and so that
/// its frame anchors the stack walk (`stack::Anchor`): the stack starts at the return
/// into whatever called it, the allocator shim or, where the shim was inlined, the game.
#[inline(never)]
fn record_alloc(p: *mut u8, layout: Layout) {
    record_alloc_at(p, layout, Anchor::here());
}

/// `record_alloc` with the stack anchored by the caller (`crate::raw`: an interposed
/// `malloc` whose own frame must not be the stack's first).
#[inline(always)]
pub(crate) fn record_alloc_at(p: *mut u8, layout: Layout, anchor: Anchor) {
    with_state_for(OwnBlock::Alloc(p as usize), |st, s| {
        let seq = st.key_at(s, 0, p as u64);
        let mut w = st.reserve(1 + 8 + 8 + 8 + 1 + max_stack_bytes(s));
        w.u8(record::ALLOC);
        w.u64(seq);
        w.u64(p as u64);
        w.u64(layout.size() as u64);
        w.u8(layout.align().trailing_zeros() as u8);
        st.stack(s, &mut w, s.flags.stacks_on_alloc, anchor);
        st.commit(w);
        st.count_event(s);
    });
}

/// Starts a session from `MEMREPLAY_LOG` on the process's first allocation; returns
/// whether a session records now.
#[inline(always)]
fn maybe_auto_start() -> bool {
    #[cold]
    fn slow() -> bool {
        LOCAL.with(|l| {
            if !l.busy.get() {
                l.busy.set(true);
                super::auto_start_once();
                l.busy.set(false);
            }
        });
        !session().is_null()
    }
    use std::sync::atomic::AtomicBool;
    static CHECKED: AtomicBool = AtomicBool::new(false);
    if !CHECKED.load(Ordering::Relaxed) {
        CHECKED.store(true, Ordering::Relaxed);
        return slow();
    }
    false
}

#[inline(always)]
pub(crate) fn on_free(p: *mut u8) {
    if !session().is_null() {
        record_free(p);
    }
}

#[inline(never)]
fn record_free(p: *mut u8) {
    record_free_at(p, Anchor::here());
}

/// `record_free` with the stack anchored by the caller (`crate::raw`).
#[inline(always)]
pub(crate) fn record_free_at(p: *mut u8, anchor: Anchor) {
    with_state_for(OwnBlock::Free(p as usize), |st, s| {
        let seq = st.key_at(s, 0, p as u64);
        let mut w = st.reserve(1 + 8 + 8 + max_stack_bytes(s));
        w.u8(record::FREE);
        w.u64(seq);
        w.u64(p as u64);
        st.stack(s, &mut w, s.flags.stacks_on_free, anchor);
        st.commit(w);
        st.count_event(s);
    });
}

/// The sequence number of a realloc's free half, taken before the inner realloc of
/// `old`; 0 if nothing records (or this thread is inside the recorder).
#[inline(always)]
pub(crate) fn realloc_begin(old: *mut u8) -> u64 {
    if session().is_null() {
        return 0;
    }
    let mut seq = 0;
    // A realloc of a block allocated for the recorder (std's list of thread-local
    // destructors growing) frees a block the log does not know: 0, so that the new block
    // is recorded as an allocation (or, while busy, noted).
    with_state_for(OwnBlock::Free(old as usize), |st, s| seq = st.key_at(s, 0, old as u64));
    seq
}

#[inline(always)]
pub(crate) fn realloc_end(free_seq: u64, old: *mut u8, new: *mut u8, align: usize, new_size: usize) {
    if free_seq == 0 {
        // Recording started during the realloc: record it as a plain allocation
        // (the old block's free was not numbered, so it cannot be placed exactly).
        // SAFETY: `align` and `new_size` come from the layout the realloc was given
        // (its alignment, and a size the allocator accepted for it).
        return on_alloc(new, unsafe { Layout::from_size_align_unchecked(new_size, align) });
    }
    record_realloc(free_seq, old, new, align, new_size);
}

#[inline(never)]
fn record_realloc(free_seq: u64, old: *mut u8, new: *mut u8, align: usize, new_size: usize) {
    record_realloc_at(free_seq, old, new, align, new_size, Anchor::here());
}

/// `record_realloc` with the stack anchored by the caller (`crate::raw`); `free_seq` is
/// `realloc_begin`'s number, not 0.
#[inline(always)]
pub(crate) fn record_realloc_at(
    free_seq: u64,
    old: *mut u8,
    new: *mut u8,
    align: usize,
    new_size: usize,
    anchor: Anchor,
) {
    with_state(|st, s| {
        let seq = st.key_at(s, 0, new as u64);
        let mut w = st.reserve(1 + 8 * 5 + 1 + max_stack_bytes(s));
        w.u8(record::REALLOC);
        w.u64(free_seq);
        w.u64(seq);
        w.u64(old as u64);
        w.u64(new as u64);
        w.u64(new_size as u64);
        w.u8(align.trailing_zeros() as u8);
        st.stack(s, &mut w, s.flags.stacks_on_alloc, anchor);
        st.commit(w);
        st.count_event(s);
    });
}

pub(crate) fn usage(addr: usize, used: usize) {
    with_state(|st, s| {
        if !s.flags.usage {
            return;
        }
        let seq = st.key_at(s, 0, addr as u64);
        let mut w = st.reserve(1 + 8 * 3);
        w.u8(record::USAGE);
        w.u64(seq);
        w.u64(addr as u64);
        w.u64(used as u64);
        st.commit(w);
    });
}

pub fn context_push(ty: &'static str, name: std::fmt::Arguments<'_>, instance: bool) {
    with_state(|st, _| {
        let mut w = st.reserve(1 + 16 + 1 + NAME_FIELD);
        w.u8(record::CONTEXT_PUSH);
        w.u64(ty.as_ptr() as u64);
        w.u64(ty.len() as u64);
        w.u8(if instance { memreplay_format::context_flags::INSTANCE } else { 0 });
        w.name_fmt(name);
        st.commit(w);
    });
}

pub(crate) fn context_pop() {
    with_state(|st, _| {
        let mut w = st.reserve(1);
        w.u8(record::CONTEXT_POP);
        st.commit(w);
    });
}

pub(crate) fn attach_push(addr: usize) {
    with_state(|st, s| {
        let seq = st.attach_key(s, addr as u64);
        let mut w = st.reserve(17);
        w.u8(record::ATTACH_PUSH);
        w.u64(seq);
        w.u64(addr as u64);
        st.commit(w);
    });
}

pub(crate) fn attach_pop() {
    with_state(|st, _| {
        let mut w = st.reserve(1);
        w.u8(record::ATTACH_POP);
        st.commit(w);
    });
}

pub(crate) fn label(name: &str) {
    label_fmt(format_args!("{name}"));
}

pub fn label_fmt(name: std::fmt::Arguments<'_>) {
    with_state(|st, s| {
        let seq = st.marker_key(s);
        let mut w = st.reserve(9 + NAME_FIELD);
        w.u8(record::LABEL);
        w.u64(seq);
        w.name_fmt(name);
        st.commit(w);
    });
}

pub(crate) fn frame_start(frame: u64) {
    with_state(|st, s| {
        let seq = st.marker_key(s);
        let mut w = st.reserve(17);
        w.u8(record::FRAME);
        w.u64(seq);
        w.u64(frame);
        st.commit(w);
    });
}

/// A driver's budget and usage for `domain`, at the recorder's clock: written after a
/// `TIME` of the same clock read, in this thread's stream, so it keeps its place among
/// the thread's allocations.
pub(crate) fn budget(domain: u32, budget: u64, usage: u64) {
    with_state(|st, s| {
        let time = st.time(s);
        let mut w = st.reserve(1 + 4 + 8 * 3);
        w.u8(record::BUDGET);
        w.u32(domain);
        w.u64(time);
        w.u64(budget);
        w.u64(usage);
        st.commit(w);
    });
}

/// The swap chain's or screen's size from here on, in this thread's stream.
pub(crate) fn display_size(width: u32, height: u32) {
    with_state(|st, _| {
        let mut w = st.reserve(1 + 4 + 4);
        w.u8(record::DISPLAY);
        w.u32(width);
        w.u32(height);
        st.commit(w);
    });
}

pub(crate) fn set_thread_name(name: &str) {
    with_state(|st, _| st.thread_info(sys::os_thread_id(), name));
}

/// Out of line to anchor the stack walk, like the heap hooks: the stack starts at the
/// return into `Domain`'s method (trimmed offline) or, inlined, the game's code.
#[inline(never)]
pub(crate) fn domain_alloc(domain: u32, addr: u64, size: u64, align: u64, resource: Option<&Resource<'_>>) {
    let anchor = Anchor::here();
    with_state(|st, s| {
        let seq = st.key_at(s, domain, addr);
        let mut w = st.reserve(1 + 8 + 4 + 8 + 8 + 1 + max_stack_bytes(s));
        w.u8(record::DOMAIN_ALLOC);
        w.u64(seq);
        w.u32(domain);
        w.u64(addr);
        w.u64(size);
        w.u8(align.max(1).trailing_zeros() as u8);
        st.stack(s, &mut w, s.flags.stacks_on_alloc, anchor);
        st.commit(w);
        if let Some(r) = resource {
            let mut w = st.reserve(1 + 4 + 8 + 1 + 16 + 2 * NAME_FIELD);
            w.u8(record::RESOURCE);
            w.u32(domain);
            w.u64(addr);
            w.u8(r.kind.to_byte());
            w.u32(r.width);
            w.u32(r.height);
            w.u32(r.depth_or_layers);
            w.u32(r.mip_levels);
            w.name(r.format);
            w.name(r.name);
            st.commit(w);
        }
        st.count_event(s);
    });
}

#[inline(never)]
pub(crate) fn domain_free(domain: u32, addr: u64) {
    let anchor = Anchor::here();
    with_state(|st, s| {
        let seq = st.key_at(s, domain, addr);
        let mut w = st.reserve(1 + 8 + 4 + 8 + max_stack_bytes(s));
        w.u8(record::DOMAIN_FREE);
        w.u64(seq);
        w.u32(domain);
        w.u64(addr);
        st.stack(s, &mut w, s.flags.stacks_on_free, anchor);
        st.commit(w);
        st.count_event(s);
    });
}
