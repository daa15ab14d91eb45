//! The recorder proper, compiled with the `capture_replay_log` feature.
//!
//! - `thread`: each thread's state and the hooks that append raw records (the hot path:
//!   no lock, no allocation through the hooked allocator, and no cache line that every
//!   thread writes).
//! - `order`: the ordering keys (sequence numbers) that merge the threads' streams.
//! - `buffer`: the bounded pool of record buffers and the hand-off protocol.
//! - `writer`: the writer thread: interning, encoding with `memreplay-format`, LZ4, I/O.
//! - `record`: the raw record layout shared by the two sides.
//! - `stack`, `sys`: callstack capture and OS facts; `unwind`: the cached unwinder
//!   (x86_64 Linux with glibc).

mod buffer;
mod encoder;
mod order;
mod record;
mod signals;
mod stack;
mod sys;
mod thread;
#[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
mod unwind;
mod writer;

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use memreplay_format::DomainKind;

use crate::{Config, SessionStats, StackCapture, StartError};
use buffer::{BufPtr, BufferPool, Doorbell};

pub(crate) use stack::Anchor;
pub(crate) use sys::BOUNDS_FROM_MAPS;
pub(crate) use thread::{
    attach_pop, attach_push, budget, context_pop, display_size, domain_alloc, domain_free, frame_start, in_recorder,
    label, on_alloc, on_free, realloc_begin, realloc_end, set_thread_name, untracked, untracked_by_caller, usage,
};
pub(crate) use thread::{forget_if_busy, note_if_busy, record_alloc_at, record_free_at, record_realloc_at};
// Called from the macros, expanded in the game's crate.
pub use thread::{context_push, label_fmt};

/// The hooks' callstack capture, for the recorder's own benchmark
/// (`benches/stack_capture.rs`), not for use: the callstack of this function's caller,
/// innermost first, at most `out.len()` frames, found as a hook finds it (anchored at this
/// function's frame). `lo..hi` bound the frame-pointer walk: the calling thread's stack,
/// or a part of it. The unwinder uses the calling thread's cache of unwind rules, as a
/// registered thread does (made at its first call).
#[inline(never)]
pub fn capture_callstack(how: StackCapture, out: &mut [u64], lo: usize, hi: usize) -> usize {
    let anchor = stack::Anchor::here();
    let cache = match how {
        StackCapture::Unwinder => bench_unwind_cache(),
        StackCapture::FramePointers => std::ptr::null_mut(),
    };
    // SAFETY: `out` has room for `out.len()` addresses; the caller vouches for `lo..hi`
    // (the walk reads only words inside it); `cache` is this thread's.
    unsafe { stack::capture(how, out.as_mut_ptr(), out.len(), anchor, lo, hi, cache) }
}

/// As [`capture_callstack`] with the unwinder, by `_Unwind_Backtrace` alone: what the
/// unwinder did before it cached rules (for the same benchmark, not for use).
#[inline(never)]
pub fn capture_callstack_uncached(out: &mut [u64]) -> usize {
    let anchor = stack::Anchor::here();
    // SAFETY: `out` has room for `out.len()` addresses.
    unsafe { stack::unwind(out.as_mut_ptr(), out.len(), anchor) }
}

/// The calling thread's unwinder cache for `capture_callstack`, made at its first use.
fn bench_unwind_cache() -> *mut stack::UnwindCache {
    use std::cell::Cell;
    thread_local! {
        static CACHE: Cell<*mut stack::UnwindCache> = const { Cell::new(std::ptr::null_mut()) };
    }
    CACHE.with(|c| {
        if c.get().is_null() {
            untracked(|| {
                #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
                unwind::init();
                c.set(stack::new_unwind_cache());
            });
        }
        c.get()
    })
}

/// Objects may be unloaded (around a `dlclose`): the unwinder's cached rules are forgotten.
pub(crate) fn modules_unloaded() {
    #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
    unwind::modules_changed();
}

/// What a session records, copied out of its [`Config`] for the hot path.
#[derive(Clone, Copy)]
pub(crate) struct Flags {
    pub stacks_on_alloc: bool,
    pub stacks_on_free: bool,
    pub usage: bool,
    pub depth: usize,
    pub capture: StackCapture,
}

/// A thread's share with the writer: which buffer it is filling now.
pub(crate) struct Slot {
    pub thread: u32,
    /// The owner's current buffer, or null while it hands one off or after it exited.
    pub current: AtomicPtr<buffer::Buffer>,
}

/// One recording, from `start` to `stop`. Sessions are leaked, never freed: a thread may
/// still hold a pointer to one while it stops.
pub(crate) struct Session {
    pub start: Instant,
    /// The process's ordering keys' table and clock.
    pub order: &'static order::Order,
    pub flags: Flags,
    pub pool: BufferPool,
    /// Where threads hand their full buffers: channel `thread id mod n` goes to encoder
    /// thread `i` of `n`; with no encoder threads, the one channel is the writer's.
    pub hand_off: Box<[Sender<BufPtr>]>,
    /// Each hand-off channel's encoder thread's bell (`Session::wake_encoder`).
    pub bells: Box<[Doorbell]>,
    /// The writer thread's channel: buffers when it encodes, else only the null buffer
    /// that `stop` sends to wake it.
    pub full_tx: Sender<BufPtr>,
    pub slots: Mutex<Vec<Arc<Slot>>>,
    pub next_thread: AtomicU32,
    /// Set by `stop`: the writer drains everything and ends the log.
    pub stopping: std::sync::atomic::AtomicBool,
    /// Module scans asked for by other threads (`request_module_scan`), counted.
    pub scans_asked: AtomicU64,
    /// The count of `scans_asked` that the writer's last scan answered: a scan that
    /// started after it read that count wrote its `MODULE` records to the metadata stream.
    pub scans_done: Mutex<u64>,
    /// Signalled when `scans_done` moves.
    pub scan_done: Condvar,
}

impl Session {
    /// Wakes the encoder thread of hand-off channel `i` if it sleeps.
    pub fn wake_encoder(&self, i: usize) {
        self.bells[i].ring();
    }

    /// Wakes every encoder thread that sleeps.
    pub fn wake_encoders(&self) {
        self.bells.iter().for_each(Doorbell::ring);
    }

    /// Nanoseconds since the session started.
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// The recording session, or null when nothing records. Checked first by every hook.
static SESSION: AtomicPtr<Session> = AtomicPtr::new(std::ptr::null_mut());

/// The running writer thread of the current session, joined by `stop`.
static CONTROL: Mutex<Option<sys::RecorderThread<SessionStats>>> = Mutex::new(None);

/// Domains defined so far (ids from 1), whether or not a session was recording: the
/// writer writes every one into each log it starts, and new ones as they appear.
pub(crate) struct DomainDef {
    pub id: u32,
    pub name: String,
    pub kind: DomainKind,
    pub capacity: u64,
    pub parent: Option<u32>,
}
pub(crate) static DOMAINS: Mutex<Vec<DomainDef>> = Mutex::new(Vec::new());

/// How many domains `DOMAINS` holds (their ids are 1..=this), readable without its lock.
static DOMAINS_DEFINED: AtomicU32 = AtomicU32::new(0);

/// The highest domain id defined so far (0: none but the heap).
pub(crate) fn domains_defined() -> u32 {
    DOMAINS_DEFINED.load(Ordering::Acquire)
}

#[inline(always)]
pub(crate) fn session() -> *mut Session {
    SESSION.load(Ordering::Acquire)
}

pub(crate) fn is_recording() -> bool {
    !session().is_null()
}

pub(crate) fn start(config: Config) -> Result<(), StartError> {
    config.validate().map_err(StartError::Config)?;
    untracked(|| {
        let mut control = CONTROL.lock().unwrap_or_else(|e| e.into_inner());
        if control.is_some() {
            return Err(StartError::AlreadyRecording);
        }
        let order = order::Order::get().ok_or_else(|| {
            StartError::Io(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                "no memory for the table that orders the threads' events (8 MiB of address space)",
            ))
        })?;
        let file = std::fs::File::create(&config.path).map_err(|e| {
            let what = format!("cannot create the log file: {}: {e}", config.path.display());
            StartError::Io(std::io::Error::new(e.kind(), what))
        })?;
        let pool = BufferPool::new(config.buffer_memory);
        // Room for every buffer that can exist: a hand-off never waits and never allocates.
        let (full_tx, full_rx) = crossbeam_channel::bounded(pool.capacity());
        // With one encoder the writer thread encodes, from its own channel; with more,
        // each encoder thread has a channel its threads hand off to.
        let (hand_off, hand_offs): (Vec<_>, Vec<_>) = match config.encoders() {
            1 => (vec![full_tx.clone()], Vec::new()),
            n => (0..n).map(|_| crossbeam_channel::bounded(pool.capacity())).unzip(),
        };
        #[cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
        unwind::init();
        let session: &'static Session = Box::leak(Box::new(Session {
            start: Instant::now(),
            order,
            flags: Flags {
                stacks_on_alloc: config.callstacks_on_alloc,
                stacks_on_free: config.callstacks_on_free,
                usage: config.usage_changes,
                depth: config.max_stack_depth,
                capture: config.stack_capture,
            },
            pool,
            bells: hand_off.iter().map(|_| Doorbell::default()).collect(),
            hand_off: hand_off.into_boxed_slice(),
            full_tx,
            slots: Mutex::new(Vec::new()),
            next_thread: AtomicU32::new(1),
            stopping: std::sync::atomic::AtomicBool::new(false),
            scans_asked: AtomicU64::new(0),
            scans_done: Mutex::new(0),
            scan_done: Condvar::new(),
        }));
        let start_unix_ns =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        // The header, modules and domains are in the file before `start` returns.
        let w = writer::Writer::open(session, file, &config, start_unix_ns, hand_offs).map_err(StartError::Io)?;
        // (Its errors say what failed: the header's write, or an encoder thread's start.)
        // The writer marks itself as the recorder's own before anything on it allocates.
        // (Its OS name: Linux keeps 15 bytes, as std cut "memreplay-writer" to.)
        let handle = sys::RecorderThread::spawn(c"memreplay-write", thread::mark_recorder_thread, move || {
            writer::run(w, full_rx, config)
        })
        // Refused, the closure is dropped, and the writer in it stops and joins the encoder
        // threads it started (`Writer`'s `Drop`).
        .map_err(|e| StartError::Io(std::io::Error::new(e.kind(), format!("cannot start the writer thread: {e}"))))?;
        *control = Some(handle);
        install_exit_hook();
        install_fork_handler();
        signals::install();
        SESSION.store(session as *const Session as *mut Session, Ordering::Release);
        Ok(())
    })
}

pub(crate) fn stop() -> Option<SessionStats> {
    untracked(|| {
        let mut control = CONTROL.lock().unwrap_or_else(|e| e.into_inner());
        let handle = control.take()?;
        let s = SESSION.swap(std::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: a non-null session pointer is a leaked session (never freed).
        if let Some(session) = unsafe { s.as_ref() } {
            session.stopping.store(true, Ordering::Release);
            // Wake the writer at once (if the channel is full, it is awake anyway).
            let _ = session.full_tx.try_send(BufPtr(std::ptr::null_mut()));
        }
        #[cfg(all(debug_assertions, target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]
        if std::env::var_os("MEMREPLAY_DEBUG_UNWIND").is_some() {
            say_on_stderr(&format!(
                "memreplay: unwinder: {} captures cached (each checked), {} by _Unwind_Backtrace\n",
                unwind::CHECKED.load(Ordering::Relaxed),
                unwind::FELL_BACK.load(Ordering::Relaxed)
            ));
        }
        handle.join()
    })
}

/// The longest `request_module_scan` waits for the writer's scan.
const MODULE_SCAN_WAIT: Duration = Duration::from_secs(1);

/// Asks the writer thread for a module scan now (the periodic one comes every second)
/// and wakes it. With `wait`, returns once a scan that started after this call has
/// written its `MODULE` records to the metadata stream (true), or after at most
/// `MODULE_SCAN_WAIT` (false). Nothing (false) when no session records or on a thread
/// inside the recorder (the writer itself may be the caller). Not on the hot path.
pub(crate) fn request_module_scan(wait: bool) -> bool {
    if in_recorder() {
        return false;
    }
    // SAFETY: a non-null session pointer is a leaked session (never freed).
    let Some(session) = (unsafe { session().as_ref() }) else { return false };
    let ticket = session.scans_asked.fetch_add(1, Ordering::AcqRel) + 1;
    // A null buffer only wakes the writer (if the channel is full, it is awake anyway).
    let _ = session.full_tx.try_send(BufPtr(std::ptr::null_mut()));
    if !wait {
        return true;
    }
    // The wait allocates nothing (a futex), so it needs no `untracked`.
    let deadline = Instant::now() + MODULE_SCAN_WAIT;
    let mut done = session.scans_done.lock().unwrap_or_else(|e| e.into_inner());
    while *done < ticket {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        done = session.scan_done.wait_timeout(done, left).unwrap_or_else(|e| e.into_inner()).0;
    }
    true
}

/// In the child of a `fork`: the session belongs to the parent, whose writer and encoder
/// threads the child does not have. Recording stops here without a word to them (the
/// child's hooks see no session, and `stop`, on `exit`, finds nothing to join). Called
/// where the child runs alone (a `pthread_atfork` child handler); if the parent was
/// inside `start` or `stop` at the fork, the lock is left as it is.
pub(crate) fn forget_session_after_fork() {
    SESSION.store(std::ptr::null_mut(), Ordering::Release);
    let control = match CONTROL.try_lock() {
        Ok(c) => Some(c),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    };
    if let Some(mut control) = control {
        // The handle names a thread of the parent: dropped without a join (a handle
        // joins nothing when dropped).
        let _ = control.take();
    }
}

/// Whether `start` registers the `atexit` hook that stops the session. Off for a caller
/// that stops the session itself, later in the exit (`libmemreplay`'s destructor, so that
/// the program's own destructors are recorded).
pub(crate) static EXIT_HOOK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Stops the session when the process exits normally (main returned, `exit` called),
/// so a log started from the environment is always complete.
fn install_exit_hook() {
    if !EXIT_HOOK.load(Ordering::Relaxed) {
        return;
    }
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        extern "C" fn at_exit() {
            let _ = stop();
        }
        // SAFETY: registers a plain `extern "C"` function that takes nothing.
        unsafe { libc::atexit(at_exit) };
    });
}

/// A child made by `fork` has none of the recorder's threads (writer, encoders): nothing
/// would ever take its events, its threads would wait for buffers forever once the pool
/// ran dry, and `stop` (from the child's `exit`) would wait for a writer that is not
/// there. So the child records nothing: the session ends in it without a word (the log
/// stays the parent's), and the child may `start` a session of its own. A termination
/// signal then ends the child at once, as nothing records.
fn install_fork_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        extern "C" fn in_child() {
            forget_session_after_fork();
        }
        // SAFETY: registers a plain `extern "C"` function that takes nothing, run in the
        // child only (single-threaded then); it touches atomics and an uncontended lock.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    });
}

pub(crate) fn define_domain(name: &str, kind: DomainKind, capacity: u64, parent: Option<u32>) -> u32 {
    untracked(|| {
        let mut domains = DOMAINS.lock().unwrap_or_else(|e| e.into_inner());
        let id = domains.len() as u32 + 1;
        domains.push(DomainDef { id, name: name.to_owned(), kind, capacity, parent });
        DOMAINS_DEFINED.store(id, Ordering::Release);
        id
    })
}

/// Starts a session from `MEMREPLAY_LOG` the first time the allocator runs, if set.
/// Runs inside the allocation hook with recording suspended for this thread.
pub(crate) fn auto_start_once() {
    use std::sync::atomic::AtomicU8;
    static STATE: AtomicU8 = AtomicU8::new(0);
    if STATE.load(Ordering::Relaxed) != 0 || STATE.swap(1, Ordering::AcqRel) != 0 {
        return;
    }
    // SAFETY: getenv reads the environment without allocating; the pointer it returns is
    // read at once, before anything could change the environment.
    let set = unsafe {
        let v = libc::getenv(c"MEMREPLAY_LOG".as_ptr());
        !v.is_null() && *v != 0
    };
    if set {
        let failed = match Config::from_env() {
            Ok(Some(config)) => match start(config) {
                Ok(()) => None,
                Err(StartError::Config(e)) => Some(e.0),
                Err(e) => Some(e.to_string()),
            },
            Ok(None) => None,
            Err(e) => Some(e.0),
        };
        if let Some(why) = failed {
            say_on_stderr(&format!("memreplay: MEMREPLAY_LOG is set but nothing is recorded: {why}\n"));
        }
    }
}

/// Writes one line on stderr with a plain `write(2)`. For what goes wrong before `main`
/// or inside an allocation: no `tracing` subscriber exists yet, and std's `Stderr` may be
/// borrowed by the very call that allocated.
pub(crate) fn say_on_stderr(line: &str) {
    let mut rest = line.as_bytes();
    while !rest.is_empty() {
        // SAFETY: writes `rest.len()` bytes from a live slice to file descriptor 2.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

#[cfg(test)]
mod tests {
    use super::sys::spawn_tests::{REFUSE_AFTER, UNJOINED};
    use crate::{Config, StartError};

    /// `start` with `encoders` encoder threads, where the OS refuses the recorder thread
    /// spawned after `spawns` others (encoder threads first, then the writer): what it
    /// returns, and whether every thread it started was joined before it returned.
    fn start_refused(encoders: usize, spawns: u32) -> String {
        let path = std::env::temp_dir().join(format!("memreplay-unit-{}-refused.mrl", std::process::id()));
        REFUSE_AFTER.with(|r| r.set(Some(spawns)));
        UNJOINED.with(|u| u.set(0));
        let result = super::start(Config::new(&path).encoder_threads(encoders));
        REFUSE_AFTER.with(|r| r.set(None));
        assert_eq!(UNJOINED.with(|u| u.get()), 0, "threads started and not joined by a failed start");
        assert!(!super::is_recording());
        let _ = std::fs::remove_file(&path);
        match result {
            Err(StartError::Io(e)) => {
                assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
                e.to_string()
            }
            Err(e) => panic!("{e}"),
            Ok(()) => panic!("started"),
        }
    }

    #[test]
    fn a_start_whose_threads_the_os_refuses_fails_and_leaves_no_thread_behind() {
        // The writer refused after three encoder threads started: they are stopped and joined.
        assert!(start_refused(3, 3).starts_with("cannot start the writer thread: "));
        // The second encoder thread refused: the first is stopped and joined.
        assert!(start_refused(3, 1).starts_with("cannot start encoder thread 1 of 3: "));
        // The writer alone, refused.
        assert!(start_refused(1, 0).starts_with("cannot start the writer thread: "));
        // Nothing of those starts is left: the next one records, and stops. (And the count
        // sees the threads a start makes: two encoder threads and the writer, started on
        // this thread; `stop` joins the writer here, which joined the encoder threads.)
        let path = std::env::temp_dir().join(format!("memreplay-unit-{}-after.mrl", std::process::id()));
        UNJOINED.with(|u| u.set(0));
        super::start(Config::new(&path).encoder_threads(2)).unwrap();
        assert_eq!(UNJOINED.with(|u| u.get()), 3);
        let stats = super::stop().unwrap();
        assert_eq!((stats.encoder_threads, UNJOINED.with(|u| u.get())), (2, 2));
        let _ = std::fs::remove_file(&path);
    }
}
