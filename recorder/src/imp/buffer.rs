//! Event buffers and the pool that bounds them.
//!
//! A [`Buffer`] is one thread's current run of raw records. Its owner appends records and
//! publishes each with a release store of `published`; its stream's encoder (see
//! `encoder.rs`) may read any published prefix at any time (to collect idle threads'
//! events) and receives the whole buffer through its hand-off channel once full. Only that encoder returns a buffer to the pool, so a buffer being
//! read is never reused under it.
//!
//! Buffers are allocated from `System` directly, never through the hooked allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

/// Bytes of records a buffer holds.
pub(crate) const BUFFER_CAPACITY: usize = 64 << 10;

#[repr(C)]
pub(crate) struct Buffer {
    /// Bytes of `data` the owner has finished writing (release-stored by the owner).
    pub published: AtomicUsize,
    /// Position of this buffer in its thread's sequence of buffers (set before sharing).
    pub index: u64,
    /// The stream (thread) the buffer belongs to.
    pub thread: u32,
    /// The owner's thread ended: no buffer follows this one.
    pub last: bool,
    /// Bytes of `data` the stream's encoder has consumed (encoder-only).
    pub consumed: usize,
    pub data: [u8; BUFFER_CAPACITY],
}

/// A buffer pointer that crosses threads through the channels.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct BufPtr(pub *mut Buffer);
// SAFETY: ownership of a buffer moves with the pointer; see the module comment for the
// one sharing (published prefix, read-only) the protocol allows.
unsafe impl Send for BufPtr {}

impl BufPtr {
    /// Prepares a buffer for a new owner.
    ///
    /// # Safety
    /// The caller owns the buffer exclusively (fresh from the pool).
    pub unsafe fn reset(self, thread: u32, index: u64) {
        let b = self.0;
        // SAFETY: the caller owns the buffer exclusively; it is live (buffers are freed
        // only with the pool).
        unsafe {
            (*b).published.store(0, Ordering::Relaxed);
            (*b).index = index;
            (*b).thread = thread;
            (*b).last = false;
            (*b).consumed = 0;
        }
    }

    /// Pointer to the first byte of the data area.
    pub fn data(self) -> *mut u8 {
        // SAFETY: a place projection of a live buffer: nothing is read or referenced.
        unsafe { std::ptr::addr_of_mut!((*self.0).data) as *mut u8 }
    }
}

/// Full buffers waiting in an encoder's channel before the thread that hands off the
/// last of them wakes the encoder. An encoder sleeps whenever its channel is empty, and a
/// wake-up is a system call on the handing-off thread plus a switch on the encoder's
/// core (microseconds, against the ~0.1 ms a thread takes to fill a buffer): waking per
/// buffer cost the game-like workload with 16-frame stacks ~14 ns of CPU per event
/// (RESULTS §39). Fewer buffers wait for longer only until the writer's next collection
/// (`Config::flush_interval`), a thread's end, or back-pressure, each of which wakes the
/// encoder.
pub(crate) const WAKE_AT: usize = 4;

/// How a thread wakes an encoder that sleeps for want of buffers: the encoder answers
/// (registers itself) before its first look at its channels, and sleeps with
/// `std::thread::park`, whose token makes a ring between its last look and its sleep
/// wake it at once. Ringing a bell no encoder answered (the writer thread encodes, or
/// the encoder has not started) does nothing: the writer's channel wakes it itself.
#[derive(Default)]
pub(crate) struct Doorbell(OnceLock<std::thread::Thread>);

impl Doorbell {
    /// The calling thread is the one this bell wakes.
    pub fn answer(&self) {
        let _ = self.0.set(std::thread::current());
    }

    /// Wakes the encoder if it sleeps (a system call then; an atomic swap otherwise).
    pub fn ring(&self) {
        if let Some(t) = self.0.get() {
            t.unpark();
        }
    }
}

/// Polls `f` until it yields: spin, then yield, then sleep in short steps.
///
/// Producer threads never block inside crossbeam (`recv`/`send`): a blocking call
/// lazily allocates a per-thread wait context that std frees at thread exit, outside
/// the recorder, which would show up in the log as a free of memory it never saw.
pub(crate) fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let backoff = crossbeam_utils::Backoff::new();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if backoff.is_completed() {
            std::thread::sleep(std::time::Duration::from_micros(50));
        } else {
            backoff.snooze();
        }
    }
}

fn layout() -> Layout {
    Layout::new::<Buffer>()
}

/// The fixed set of buffers: at most `max` exist, plus one per thread that registers
/// while all are in use (so that a new thread never waits on idle ones). Those extra
/// buffers are temporary: while more than `max` exist, every buffer the encoders return is
/// freed instead of pooled, so thread churn never makes the pool grow.
pub(crate) struct BufferPool {
    free_tx: Sender<BufPtr>,
    free_rx: Receiver<BufPtr>,
    allocated: AtomicUsize,
    peak: AtomicUsize,
    max: usize,
    pub waits: AtomicU64,
    pub wait_ns: AtomicU64,
}

impl BufferPool {
    pub fn new(memory: usize) -> Self {
        let max = (memory / std::mem::size_of::<Buffer>()).max(4);
        // Room for every buffer that may exist, forced ones included.
        let (free_tx, free_rx) = crossbeam_channel::bounded(max * 4 + 1024 + 1);
        BufferPool {
            free_tx,
            free_rx,
            allocated: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            max,
            waits: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
        }
    }

    /// How many buffers may ever be handed around at once (channel capacity).
    pub fn capacity(&self) -> usize {
        self.max * 4 + 1024
    }

    /// A new buffer, already counted: `n` buffers exist with it.
    fn allocate(&self, n: usize) -> BufPtr {
        self.peak.fetch_max(n, Ordering::Relaxed);
        // SAFETY: non-zero-sized layout. Only the header is initialised: the data area is
        // written before it is published and never read before that.
        let p = unsafe { System.alloc(layout()) } as *mut Buffer;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout());
        }
        // SAFETY: `p` is a fresh allocation of a `Buffer`; its header fields are written
        // in place, without reading or dropping the uninitialised memory.
        unsafe {
            std::ptr::addr_of_mut!((*p).published).write(AtomicUsize::new(0));
            std::ptr::addr_of_mut!((*p).index).write(0);
            std::ptr::addr_of_mut!((*p).thread).write(0);
            std::ptr::addr_of_mut!((*p).last).write(false);
            std::ptr::addr_of_mut!((*p).consumed).write(0);
        }
        BufPtr(p)
    }

    /// A free buffer. Waits for the encoders when all `max` are in use, unless `force`,
    /// calling `wake_encoders` on every look while it waits.
    pub fn take(&self, force: bool, wake_encoders: impl Fn()) -> BufPtr {
        if let Ok(b) = self.free_rx.try_recv() {
            return b;
        }
        if force {
            let n = self.allocated.fetch_add(1, Ordering::Relaxed) + 1;
            return self.allocate(n);
        }
        // Only forced takes go past `max`: reserve the count first, so that threads
        // racing here cannot overshoot together.
        if let Ok(n) =
            self.allocated.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < self.max).then_some(n + 1))
        {
            return self.allocate(n + 1);
        }
        // Back-pressure: the encoders are behind. Wait for them; never drop events.
        let t = Instant::now();
        let b = wait_for(|| {
            wake_encoders();
            self.free_rx.try_recv().ok()
        });
        self.waits.fetch_add(1, Ordering::Relaxed);
        self.wait_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        b
    }

    /// Returns a consumed buffer (the stream's encoder only). Frees it instead while more than
    /// `max` exist (forced takes made them), or if the free channel is full.
    pub fn give(&self, b: BufPtr) {
        if self.allocated.load(Ordering::Relaxed) > self.max || self.free_tx.try_send(b).is_err() {
            self.release(b);
        }
    }

    fn release(&self, b: BufPtr) {
        self.allocated.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: allocated by `allocate` with the same layout; no one else holds it.
        unsafe { System.dealloc(b.0 as *mut u8, layout()) };
    }

    /// Frees every buffer waiting in the pool (at the end of a session).
    pub fn drain(&self) {
        while let Ok(b) = self.free_rx.try_recv() {
            self.release(b);
        }
    }

    /// Most buffers that existed at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Buffers the configured memory pays for.
    pub fn max(&self) -> usize {
        self.max
    }

    pub fn peak_bytes(&self) -> u64 {
        (self.peak() * std::mem::size_of::<Buffer>()) as u64
    }
}
