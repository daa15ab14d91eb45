//! The C library's allocator, interposed and recorded.
//!
//! `libmemreplay.so` defines `malloc`, `calloc`, `realloc`, `reallocarray`, `free`,
//! `posix_memalign`, `aligned_alloc`, `memalign`, `valloc` and `pvalloc`. Preloaded
//! (`LD_PRELOAD`, which `replay-cli record` sets) or linked before the C library, these
//! take the place of glibc's for the whole process: the program, its libraries, C++'s
//! `operator new` and `delete` (libstdc++ calls `malloc` and `free`), and the recorder
//! itself. Linux on x86_64 with glibc only.
//!
//! **The real allocator.** Each call goes to glibc's own exported entry points
//! (`__libc_malloc`, `__libc_calloc`, `__libc_realloc`, `__libc_free`,
//! `__libc_memalign`, `__libc_valloc`, `__libc_pvalloc`): nothing to look up with
//! `dlsym` (which allocates) before the first `malloc` can be served. `reallocarray`,
//! `posix_memalign` and `aligned_alloc` check their arguments as glibc does and then use
//! those.
//!
//! **What is recorded.** The recorder's hot path (`memreplay::raw`): an allocation after
//! the real call returns it, a free before the real free, a realloc numbered before and
//! recorded after. `realloc(NULL, n)` is recorded as the allocation it is; `realloc(p, 0)`
//! frees `p` and returns NULL in glibc, and is recorded as that free; a failed call
//! records nothing, and neither does `free(NULL)`. Sizes are those asked for (`pvalloc`'s
//! rounded up to whole pages, `calloc`'s the product); alignments the one asked for, or
//! 16 (what glibc's `malloc` guarantees). What the recorder allocates itself passes
//! straight through (its thread-local busy flag, set in its hooks and on its threads).
//!
//! **The callstack.** Each entry point is a naked function that pushes a frame record
//! (whatever the build's frame-pointer setting, with its unwind information) and passes
//! its stack pointer to the Rust code as the anchor of the callstack: the recorder leaves
//! out every frame at or below it, so a callstack starts at the program's call into
//! `malloc`, with either capture (`unwind=fp` or `unwind=unwinder`).
//!
//! **When it records.** The constructor, which runs before those of the program and of
//! the libraries it preloads before, starts the session from `MEMREPLAY_LOG` (and
//! `MEMREPLAY_OPTIONS`); from then on calls are recorded: the program's constructors,
//! `main`, its `atexit` handlers, thread-local and static destructors.
//!
//! **Before the constructor** the recorder cannot run (no thread can be started from
//! inside the dynamic loader), yet calls come: from the loader and the C library's
//! start-up (none with glibc 2.36), and from the constructors of the libraries the
//! program needs, which the loader initialises before a preloaded library that nothing
//! depends on (libstdc++'s emergency exception pool, 72,704 bytes, in every C++
//! program). They pass straight through and are kept track of in a static table (no
//! allocation: `malloc` is what this library is; a spin lock, in case another thread
//! exists): each block allocated (address, size, alignment; reallocs and frees update
//! it), the calls counted, and the blocks that do not fit (4096 are kept) counted as
//! untracked. While the constructor starts the session, the recorder's own calls are
//! told apart (its thread-local flag) and everyone else's still go to the table. Then,
//! under the table's lock, the constructor hands it over: each block still live is
//! recorded as an allocation without a callstack (where it came from was never seen), in
//! the context `memreplay` / `before recording started`, so that its later free matches;
//! and the counts become one `BEFORE_START` record (SPEC.md §7.13: calls, bytes, blocks
//! live, untracked), which is not a loss: `check` does not count it as damage, `info` and
//! `summarize` say it. A free of one of those blocks on another thread meanwhile waits for
//! the lock and is recorded after the block's allocation.
//!
//! **After the destructor.** The log ends in this library's destructor (not in an
//! `atexit` hook): the loader runs it after every `atexit` handler, thread-local
//! destructor and C++ static destructor, and after the program's own destructors, so all
//! those are recorded. What runs later (the destructors of the libraries initialised
//! before this one, the C library's clean-up) cannot reach the log: from the destructor
//! on, calls pass straight through and are counted (allocations, frees, reallocs, bytes
//! asked), with those of other threads still running while the log ends. Where
//! `MEMREPLAY_AFTER_END_FD` names shared memory (`replay-cli record` passes a memfd), the
//! counts go there and `record` says them once the program has exited; the constructor
//! maps it, closes the descriptor and takes the variable out of the environment.
//! Measured with glibc 2.36 and GCC 12's libstdc++: a C program and a C++ program make
//! no call after the destructor (libstdc++ keeps its pool to the end); a library the
//! program needs whose destructor allocates does (`tests/preload/early_lib.c`).
//! A process ended by `_exit` or a signal other than SIGTERM and SIGINT (which the
//! recorder handles) leaves a log cut short, which the reader reads up to its last flush.
//!
//! **Exec.** An exec replaces the process without running any destructor, so `execve`,
//! `execv`, `execvp`, `execvpe` and `fexecve` are interposed: before glibc's, the log ends
//! as in the destructor, if the exec can run (a regular file that may be executed, found
//! in `PATH` as glibc finds it for the `p` forms; a shell trying each `PATH` entry ends
//! nothing until the one that runs), and [`AfterEnd`] notes that it ended for an exec. If
//! the exec fails all the same (a file that is not a program), `AfterEnd` says that too,
//! and the process runs on, its calls counted as after the end. The child of a `vfork`
//! shares this memory but not the session's threads: its exec (another process id) ends
//! nothing. `execl`, `execlp` and `execle` call glibc's internal `execve` and are
//! variadic, which stable Rust cannot define: an exec through them leaves the log cut off.
//!
//! **Children.** Once started, the constructor takes `MEMREPLAY_LOG`, `MEMREPLAY_OPTIONS`
//! and this library's entry of `LD_PRELOAD` out of the environment, so a program the
//! process executes is not recorded (it would overwrite the same log). The child of a
//! `fork` records nothing either: the session's threads are the parent's, so a
//! `pthread_atfork` handler turns the interposer off in the child (its calls pass
//! straight through, and its `exit` does not wait for the parent's writer).
//!
//! **Threads.** The recorder registers a thread at its first recorded allocation. With
//! `malloc` interposed that may be the C library's own, made inside `pthread_getattr_np`
//! while it holds the thread's lock (Rust's runtime calls it before `main`), so the
//! thread's stack bounds come from `/proc/self/maps`, read without allocating, not from
//! `pthread_getattr_np` (`memreplay::raw`).
//! Registering the thread's exit flush makes glibc and std allocate for the recorder (a
//! `__cxa_thread_atexit_impl` node, std's list of thread-local destructors; the session's
//! start, a handle for the main thread): those calls reach the recorder inside its hook,
//! unrecorded, but the thread frees the blocks as it exits, after its flush. The recorder
//! notes such blocks and leaves those frees out, so a log of a program whose threads come
//! and go has no free of a block it does not know.
//!
//! **Libraries unloaded.** The recorder rescans the loaded modules every second, so a
//! library `dlopen`ed, used and `dlclose`d in between would be missing from the log's
//! module map, and the callstacks into it could not be named. So `dlclose` is interposed
//! as well: while a session records, it asks the recorder's writer for a scan and waits
//! (at most a second, never on a recorder thread) until that scan is in the file, then
//! calls glibc's `dlclose` (found once with `dlsym(RTLD_NEXT)`). `dlopen` is left alone:
//! glibc takes the library's search path (the caller's `RUNPATH`), `$ORIGIN` and link
//! namespace from its caller's return address, which a wrapper would turn into this
//! library's. A library still loaded when the log ends is found by the writer's last scan.
//!
//! **Thread-local storage.** The recorder's thread-local state is in this shared object's
//! TLS block, reached with `__tls_get_addr`. For a library loaded at start-up (preloaded
//! or linked) glibc serves it from the static TLS area, set up before the first thread
//! runs, without allocating. A library loaded later by `dlopen` would get its block
//! lazily, from `malloc`, on the first access of each thread: a `malloc` interposed there
//! would recurse into itself. (A `dlopen`ed library does not interpose the process's
//! `malloc` anyway: the symbol is already bound to the C library.) So the constructor
//! checks, through `dl_iterate_phdr`, that this library's TLS block already exists in
//! the loading thread; if not (it was `dlopen`ed), the interposer stays off and every
//! call passes straight through, never touching thread-local storage.

#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

unsafe extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_valloc(size: usize) -> *mut c_void;
    fn __libc_pvalloc(size: usize) -> *mut c_void;
    fn gnu_get_libc_version() -> *const libc::c_char;
}

/// What glibc's `malloc` aligns every block to on x86_64.
const MALLOC_ALIGN: usize = 16;

/// Before the constructor: calls pass through, kept track of in [`EARLY`].
const WAITING: u8 = 0;
/// The constructor handed the early blocks over: calls go to the recorder (which records
/// if a session runs).
const ON: u8 = 1;
/// Loaded by `dlopen`, or in the child of a `fork`: calls pass through for good.
const OFF: u8 = 2;
/// The constructor is starting the session: calls other than the recorder's own are
/// still kept track of in [`EARLY`] until it hands the table over.
const STARTING: u8 = 3;
/// The log ended (in the destructor, or before an exec): calls pass through and are
/// counted ([`AFTER`]).
const ENDED: u8 = 4;

static STATE: AtomicU8 = AtomicU8::new(WAITING);

/// Whether calls are handed to the recorder.
#[inline(always)]
fn on() -> bool {
    STATE.load(Ordering::Acquire) == ON
}

/// The alignment a `memalign` of `align` gets in glibc: a power of two at least 16
/// (glibc rounds others up to the next power of two).
fn effective_align(align: usize) -> usize {
    align.max(MALLOC_ALIGN).checked_next_power_of_two().unwrap_or(MALLOC_ALIGN)
}

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

// ---- Before the start: the blocks allocated before the recorder could run.

/// Blocks [`EARLY`] keeps track of; more are counted as untracked. The dynamic loader and
/// the C library allocate a handful before any constructor, a C++ program's libraries'
/// constructors (libstdc++'s emergency exception pool) a few more.
const EARLY_BLOCKS: usize = 4096;

/// One block allocated before the start: address, size asked for, alignment.
#[derive(Clone, Copy)]
struct EarlyBlock {
    p: usize,
    size: usize,
    align: usize,
}

/// What was allocated and freed before the session started: the blocks still live and
/// the calls counted. Plain static memory: `malloc` is what this library is.
struct EarlyTable {
    blocks: [EarlyBlock; EARLY_BLOCKS],
    len: usize,
    counts: recorder::raw::CallsBeforeStart,
    /// Handed over to the session: no call is kept track of here any more.
    closed: bool,
}

impl EarlyTable {
    fn alloc(&mut self, p: *mut c_void, size: usize, align: usize) {
        if p.is_null() {
            return;
        }
        self.counts.allocations += 1;
        self.counts.bytes = self.counts.bytes.wrapping_add(size as u64);
        self.track(p, size, align);
    }

    fn track(&mut self, p: *mut c_void, size: usize, align: usize) {
        if self.len == EARLY_BLOCKS {
            self.counts.untracked += 1;
            return;
        }
        self.blocks[self.len] = EarlyBlock { p: p as usize, size, align };
        self.len += 1;
    }

    /// Forgets `p` if it is kept here (searching from the newest: a block allocated
    /// before the start is usually freed soon after).
    fn forget(&mut self, p: *mut c_void) {
        if let Some(i) = self.blocks[..self.len].iter().rposition(|b| b.p == p as usize) {
            self.len -= 1;
            self.blocks[i] = self.blocks[self.len];
        }
    }

    fn free(&mut self, p: *mut c_void) {
        self.counts.frees += 1;
        self.forget(p);
    }

    /// `old` became `new` (`size` bytes) by a successful realloc.
    fn realloc(&mut self, old: *mut c_void, new: *mut c_void, size: usize) {
        self.counts.reallocs += 1;
        self.counts.bytes = self.counts.bytes.wrapping_add(size as u64);
        self.forget(old);
        self.track(new, size, MALLOC_ALIGN);
    }
}

/// [`EarlyTable`] behind a spin lock: before the constructor only one thread exists as a
/// rule, but nothing forbids another, and a lock that allocates is no option here.
struct Early {
    /// `pthread_self` of the holder, 0 when free.
    owner: AtomicUsize,
    /// The process the holder took the lock in (see `lock_early`).
    owner_pid: std::sync::atomic::AtomicI32,
    table: std::cell::UnsafeCell<EarlyTable>,
}

// SAFETY: `table` is only reached through `EarlyGuard`, which holds the lock.
unsafe impl Sync for Early {}

static EARLY: Early = Early {
    owner: AtomicUsize::new(0),
    owner_pid: std::sync::atomic::AtomicI32::new(0),
    table: std::cell::UnsafeCell::new(EarlyTable {
        blocks: [EarlyBlock { p: 0, size: 0, align: 0 }; EARLY_BLOCKS],
        len: 0,
        counts: recorder::raw::CallsBeforeStart {
            allocations: 0,
            frees: 0,
            reallocs: 0,
            bytes: 0,
            live: 0,
            untracked: 0,
        },
        closed: false,
    }),
};

/// The early table, locked until dropped.
struct EarlyGuard(&'static mut EarlyTable);

impl std::ops::Deref for EarlyGuard {
    type Target = EarlyTable;
    fn deref(&self) -> &EarlyTable {
        self.0
    }
}

impl std::ops::DerefMut for EarlyGuard {
    fn deref_mut(&mut self) -> &mut EarlyTable {
        self.0
    }
}

impl Drop for EarlyGuard {
    fn drop(&mut self) {
        EARLY.owner.store(0, Ordering::Release);
    }
}

/// Who is calling: `pthread_self`, which reads the thread pointer (no allocation, no
/// thread-local storage of this library).
fn me() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

enum Locked {
    Open(EarlyGuard),
    /// Handed over: the call goes to the recorder.
    Closed,
    /// This thread holds the lock already (the hand-over itself): the call passes through.
    Mine,
}

fn lock_early() -> Locked {
    let me = me();
    // SAFETY: getpid has no preconditions (a system call: these calls are few).
    let pid = unsafe { libc::getpid() };
    let mut spins = 0u32;
    loop {
        match EARLY.owner.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(owner) if owner == me => return Locked::Mine,
            Err(owner) => {
                // The child of a `fork` made while another thread held the lock (a thread
                // started before this library's constructor) would wait for a thread it
                // does not have: the lock of another process is taken over. (The
                // holder's update of the table may be half done in the child's copy: a
                // block's entry, at worst; the child never hands the table over, as the
                // constructor runs in the parent.)
                spins = spins.wrapping_add(1);
                if spins % 1024 == 0 {
                    // 0: the first holder has not said its process yet.
                    let held_in = EARLY.owner_pid.load(Ordering::Relaxed);
                    if held_in != 0
                        && held_in != pid
                        && EARLY.owner.compare_exchange(owner, me, Ordering::Acquire, Ordering::Relaxed).is_ok()
                    {
                        break;
                    }
                }
                std::hint::spin_loop()
            }
        }
    }
    EARLY.owner_pid.store(pid, Ordering::Relaxed);
    // SAFETY: the lock is held (until the guard drops): no other reference to the table.
    let guard = EarlyGuard(unsafe { &mut *EARLY.table.get() });
    if guard.closed {
        Locked::Closed
    } else {
        Locked::Open(guard)
    }
}

// ---- After the end: calls counted where `replay-cli record` can read them.

/// Calls made after the log ended (in this library's destructor, or before an exec),
/// counted. The constructor maps the shared memory that `MEMREPLAY_AFTER_END_FD` names
/// (`replay-cli record` passes a memfd): six `u64` in native byte order, `attached` (1
/// once the library counts there), `allocations`, `frees`, `reallocs`, `bytes` (asked
/// for by the allocations and reallocs), `exec` (1 if the log was ended for an exec, 2 if
/// that exec then failed).
/// Without one, the counts stay in this process.
#[repr(C)]
struct AfterEnd {
    attached: AtomicU64,
    allocations: AtomicU64,
    frees: AtomicU64,
    reallocs: AtomicU64,
    bytes: AtomicU64,
    exec: AtomicU64,
}

static AFTER_HERE: AfterEnd = AfterEnd {
    attached: AtomicU64::new(0),
    allocations: AtomicU64::new(0),
    frees: AtomicU64::new(0),
    reallocs: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    exec: AtomicU64::new(0),
};

/// Where calls after the end are counted: [`AFTER_HERE`] or the shared memory.
static AFTER: AtomicPtr<AfterEnd> = AtomicPtr::new(&AFTER_HERE as *const AfterEnd as *mut AfterEnd);

fn after() -> &'static AfterEnd {
    // SAFETY: `AFTER` points at `AFTER_HERE` or at shared memory mapped for good.
    unsafe { &*AFTER.load(Ordering::Acquire) }
}

/// Maps what `MEMREPLAY_AFTER_END_FD` names, closes the descriptor and takes the
/// variable out of the environment (a program run from here does not count into it).
/// Allocates nothing.
fn attach_after_end_counts() {
    // SAFETY: getenv's string is read at once, before anything changes the environment.
    let fd = unsafe {
        let v = libc::getenv(c"MEMREPLAY_AFTER_END_FD".as_ptr());
        if v.is_null() {
            return;
        }
        let digits = std::ffi::CStr::from_ptr(v).to_bytes();
        let fd = digits.iter().try_fold(0i32, |n, &d| {
            d.is_ascii_digit().then_some(())?;
            n.checked_mul(10)?.checked_add(i32::from(d - b'0'))
        });
        libc::unsetenv(c"MEMREPLAY_AFTER_END_FD".as_ptr());
        match fd {
            Some(fd) if !digits.is_empty() => fd,
            _ => return,
        }
    };
    let len = std::mem::size_of::<AfterEnd>();
    // SAFETY: maps `len` bytes of the descriptor, shared; the result is checked.
    let page =
        unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    // SAFETY: the descriptor was passed for this library only; the mapping stays.
    unsafe { libc::close(fd) };
    if page == libc::MAP_FAILED {
        return;
    }
    let page = page as *mut AfterEnd;
    // SAFETY: a fresh page-aligned mapping of at least `len` bytes: room for an
    // `AfterEnd`, whose atomics are plain `u64`s in memory.
    unsafe { (*page).attached.store(1, Ordering::Release) };
    AFTER.store(page, Ordering::Release);
}

// ---- Where a call goes when the interposer is not simply on (cold).

enum Route {
    /// To the recorder.
    Record,
    /// Kept track of before the start (the table, locked).
    Early(EarlyGuard),
    /// Counted after the end.
    Ended,
    /// Straight through: the recorder's own, or off for good.
    Pass,
}

#[cold]
fn route() -> Route {
    match STATE.load(Ordering::Acquire) {
        ON => Route::Record,
        // While starting, the recorder's own calls are its own (its thread-local storage
        // may be touched from there on: the constructor checked that it exists).
        // They go to the recorder, which records none of them (the thread is busy) but
        // notes the blocks, freed later by the program's side (a thread handle for the
        // session's start, the thread-exit registration), to leave their frees out.
        STARTING if recorder::raw::in_recorder() => Route::Record,
        WAITING | STARTING => match lock_early() {
            Locked::Open(t) => Route::Early(t),
            Locked::Closed => Route::Record,
            Locked::Mine => Route::Pass,
        },
        ENDED if recorder::raw::in_recorder() => Route::Pass,
        ENDED => Route::Ended,
        _ => Route::Pass,
    }
}

/// Counts a call after the end: `allocations`, `frees` or `reallocs`, with the bytes asked.
fn count_after(which: fn(&AfterEnd) -> &AtomicU64, bytes: usize) {
    let a = after();
    which(a).fetch_add(1, Ordering::Relaxed);
    a.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// An allocation of `size` bytes aligned to `align`, made by `real`, recorded.
#[inline(always)]
fn allocate(size: usize, align: usize, anchor: usize, real: impl FnOnce() -> *mut c_void) -> *mut c_void {
    let p = real();
    if !on() {
        return allocated_otherwise(p, size, align, anchor);
    }
    recorder::raw::alloc(p.cast(), size, align, anchor);
    p
}

/// The block `p` just allocated when the interposer is not on; returns `p`. (Allocated
/// before the table's lock is taken: if the table was handed over meanwhile, the block
/// is recorded as any other.)
#[cold]
#[inline(never)]
fn allocated_otherwise(p: *mut c_void, size: usize, align: usize, anchor: usize) -> *mut c_void {
    match route() {
        Route::Record => recorder::raw::alloc(p.cast(), size, align, anchor),
        Route::Early(mut t) => t.alloc(p, size, align),
        Route::Ended if !p.is_null() => count_after(|a| &a.allocations, size),
        Route::Ended | Route::Pass => {}
    }
    p
}

// ---- The Rust side of each entry point: `anchor` is the entry point's stack pointer,
// just below its frame record.

extern "C" fn malloc_impl(size: usize, anchor: usize) -> *mut c_void {
    // SAFETY: glibc's malloc, with the caller's argument.
    allocate(size, MALLOC_ALIGN, anchor, || unsafe { __libc_malloc(size) })
}

extern "C" fn calloc_impl(n: usize, size: usize, anchor: usize) -> *mut c_void {
    // SAFETY: glibc's calloc, with the caller's arguments (it checks the product).
    allocate(n.wrapping_mul(size), MALLOC_ALIGN, anchor, || unsafe { __libc_calloc(n, size) })
}

extern "C" fn free_impl(p: *mut c_void, anchor: usize) {
    if p.is_null() {
        return;
    }
    if on() {
        recorder::raw::free(p.cast(), anchor);
    } else {
        free_otherwise(p, anchor);
    }
    // SAFETY: glibc's free, with the caller's block.
    unsafe { __libc_free(p) }
}

/// A free of `p` (not null) when the interposer is not on; the caller frees `p` after.
#[cold]
#[inline(never)]
fn free_otherwise(p: *mut c_void, anchor: usize) {
    match route() {
        Route::Record => recorder::raw::free(p.cast(), anchor),
        // Forgotten before the real free: the table never holds a freed address.
        Route::Early(mut t) => t.free(p),
        Route::Ended => count_after(|a| &a.frees, 0),
        Route::Pass => {}
    }
}

/// `realloc` as glibc does it, recorded as what happened.
fn realloc_recorded(p: *mut c_void, size: usize, anchor: usize) -> *mut c_void {
    if on() {
        realloc_to_recorder(p, size, anchor)
    } else {
        realloc_otherwise(p, size, anchor)
    }
}

/// `realloc`, recorded by the recorder (if a session records).
#[inline(always)]
fn realloc_to_recorder(p: *mut c_void, size: usize, anchor: usize) -> *mut c_void {
    // SAFETY: glibc's realloc, with the caller's arguments.
    let real = || unsafe { __libc_realloc(p, size) };
    if p.is_null() {
        // A malloc.
        let q = real();
        recorder::raw::alloc(q.cast(), size, MALLOC_ALIGN, anchor);
        return q;
    }
    if size == 0 {
        // glibc frees `p` and returns NULL: a free.
        recorder::raw::free(p.cast(), anchor);
        return real();
    }
    let ticket = recorder::raw::realloc_begin(p.cast());
    let q = real();
    recorder::raw::realloc_end(ticket, p.cast(), q.cast(), MALLOC_ALIGN, size, anchor);
    q
}

#[cold]
#[inline(never)]
fn realloc_otherwise(p: *mut c_void, size: usize, anchor: usize) -> *mut c_void {
    // SAFETY: glibc's realloc, with the caller's arguments.
    let real = || unsafe { __libc_realloc(p, size) };
    match route() {
        Route::Record => realloc_to_recorder(p, size, anchor),
        Route::Early(mut t) => {
            // The real call under the lock: a hand-over between it and the table's
            // update would record `p` live after it was freed or moved.
            let q = real();
            match (p.is_null(), size) {
                (true, _) => t.alloc(q, size, MALLOC_ALIGN),
                (false, 0) => t.free(p),
                (false, _) if !q.is_null() => t.realloc(p, q, size),
                _ => {}
            }
            q
        }
        Route::Ended => {
            let q = real();
            match (p.is_null(), size) {
                (true, _) if !q.is_null() => count_after(|a| &a.allocations, size),
                (false, 0) => count_after(|a| &a.frees, 0),
                (false, _) if !q.is_null() => count_after(|a| &a.reallocs, size),
                _ => {}
            }
            q
        }
        Route::Pass => real(),
    }
}

extern "C" fn realloc_impl(p: *mut c_void, size: usize, anchor: usize) -> *mut c_void {
    realloc_recorded(p, size, anchor)
}

extern "C" fn reallocarray_impl(p: *mut c_void, n: usize, size: usize, anchor: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(bytes) => realloc_recorded(p, bytes, anchor),
        None => {
            set_errno(libc::ENOMEM);
            std::ptr::null_mut()
        }
    }
}

/// A block of `size` bytes aligned to `align` (any value; glibc rounds it up).
fn memalign_recorded(align: usize, size: usize, anchor: usize) -> *mut c_void {
    // SAFETY: glibc's memalign, with the caller's arguments.
    allocate(size, effective_align(align), anchor, || unsafe { __libc_memalign(align, size) })
}

extern "C" fn posix_memalign_impl(out: *mut *mut c_void, align: usize, size: usize, anchor: usize) -> c_int {
    if !align.is_power_of_two() || align % std::mem::size_of::<*mut c_void>() != 0 {
        return libc::EINVAL;
    }
    let p = memalign_recorded(align, size, anchor);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller passes where to store the block, as posix_memalign requires.
    unsafe { *out = p };
    0
}

/// Whether this glibc's `aligned_alloc` refuses an alignment that is not a power of two
/// (2.38 and later; before, it was `memalign`, which rounds it up). Read by the
/// constructor.
static ALIGNED_ALLOC_CHECKS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether glibc `version` ("2.36") is 2.38 or later.
fn checks_alignment(version: &[u8]) -> bool {
    let mut parts = version.split(|&c| c == b'.').map(|p| std::str::from_utf8(p).ok()?.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (2, 38),
        _ => true,
    }
}

extern "C" fn aligned_alloc_impl(align: usize, size: usize, anchor: usize) -> *mut c_void {
    // glibc 2.38 and later: the alignment must be a power of two; any size goes.
    if !align.is_power_of_two() && ALIGNED_ALLOC_CHECKS.load(Ordering::Relaxed) {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    memalign_recorded(align, size, anchor)
}

extern "C" fn memalign_impl(align: usize, size: usize, anchor: usize) -> *mut c_void {
    memalign_recorded(align, size, anchor)
}

extern "C" fn valloc_impl(size: usize, anchor: usize) -> *mut c_void {
    // SAFETY: glibc's valloc, with the caller's argument.
    allocate(size, page_size(), anchor, || unsafe { __libc_valloc(size) })
}

extern "C" fn pvalloc_impl(size: usize, anchor: usize) -> *mut c_void {
    let page = page_size();
    // What glibc allocates: the size rounded up to whole pages, one page for 0.
    let rounded = size.max(1).div_ceil(page).saturating_mul(page);
    // SAFETY: glibc's pvalloc, with the caller's argument.
    allocate(rounded, page, anchor, || unsafe { __libc_pvalloc(size) })
}

// ---- The entry points. Each pushes a frame record (so the frame-pointer walk finds the
// return into the program), describes it to the unwinder, passes its stack pointer in
// the next free argument register as the anchor, and calls its Rust side. The stack is
// 16-byte aligned at the call (8 at entry, plus the pushed rbp).

macro_rules! entry_point {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $imp:ident, $anchor_reg:literal) => {
        $(#[$doc])*
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            std::arch::naked_asm!(
                ".cfi_startproc",
                "push rbp",
                ".cfi_def_cfa_offset 16",
                ".cfi_offset rbp, -16",
                "mov rbp, rsp",
                ".cfi_def_cfa_register rbp",
                concat!("mov ", $anchor_reg, ", rsp"),
                "call {imp}",
                "pop rbp",
                ".cfi_def_cfa rsp, 8",
                "ret",
                ".cfi_endproc",
                imp = sym $imp,
            )
        }
    };
}

entry_point!(
    /// `malloc`, recorded.
    fn malloc(size: usize) -> *mut c_void => malloc_impl, "rsi"
);
entry_point!(
    /// `calloc`, recorded.
    fn calloc(n: usize, size: usize) -> *mut c_void => calloc_impl, "rdx"
);
entry_point!(
    /// `realloc`, recorded.
    fn realloc(p: *mut c_void, size: usize) -> *mut c_void => realloc_impl, "rdx"
);
entry_point!(
    /// `reallocarray`, recorded.
    fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void => reallocarray_impl, "rcx"
);
entry_point!(
    /// `free`, recorded.
    fn free(p: *mut c_void) -> () => free_impl, "rsi"
);
entry_point!(
    /// `posix_memalign`, recorded.
    fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int => posix_memalign_impl, "rcx"
);
entry_point!(
    /// `aligned_alloc`, recorded.
    fn aligned_alloc(align: usize, size: usize) -> *mut c_void => aligned_alloc_impl, "rdx"
);
entry_point!(
    /// `memalign`, recorded.
    fn memalign(align: usize, size: usize) -> *mut c_void => memalign_impl, "rdx"
);
entry_point!(
    /// `valloc`, recorded.
    fn valloc(size: usize) -> *mut c_void => valloc_impl, "rsi"
);
entry_point!(
    /// `pvalloc`, recorded.
    fn pvalloc(size: usize) -> *mut c_void => pvalloc_impl, "rsi"
);

// ---- `dlclose`: the module map keeps what is unloaded.

/// glibc's `dlclose`, found once with `dlsym(RTLD_NEXT)` (0 until then).
/// The address of the next definition of `name` after this library's (glibc's), looked up
/// once and kept in `cache`; 0 if there is none.
fn next_definition(cache: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let mut f = cache.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: `dlsym` with a C string; it may call `malloc`, which works from here
        // (ours passes through or records).
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
        cache.store(f, Ordering::Release);
    }
    f
}

static REAL_DLCLOSE: AtomicUsize = AtomicUsize::new(0);

type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// `dlclose`: first has the recorder scan the modules and waits (a second at most) until
/// that scan is in the log, so a library about to be unloaded is in the module map while
/// still mapped and the callstacks into it can be named; then glibc's `dlclose`. The
/// unwinder forgets the rules it cached before and after it (the library's addresses may
/// be reused by the next `dlopen` on any thread): after the first, no thread caches a rule
/// of the library unless it runs the library's code while it is closed (only its
/// destructors, on this thread, should), and after the second, this thread drops those.
///
/// # Safety
///
/// As glibc's `dlclose`: `handle` comes from `dlopen` and is closed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    if on() && !handle.is_null() {
        recorder::raw::request_module_scan(true);
    }
    recorder::raw::modules_unloaded();
    // SAFETY: glibc's `dlclose` has this type.
    let closed = match unsafe { real::<DlcloseFn>(&REAL_DLCLOSE, c"dlclose") } {
        // SAFETY: glibc's `dlclose`, with the caller's handle.
        Some(real) => unsafe { real(handle) },
        None => -1,
    };
    recorder::raw::modules_unloaded();
    closed
}

// ---- Exec: the log ends before the process is replaced.

/// The process the session records (the child of a `vfork`, which shares this memory but
/// not the session's threads, must not end it).
static RECORDING_PID: AtomicI32 = AtomicI32::new(0);

/// [`AfterEnd::exec`]: the log was ended for an exec...
const EXEC_ENDED: u64 = 1;
/// ... which then failed: the process ran on.
const EXEC_FAILED: u64 = 2;

/// Runs the exec `real` (glibc's, or `None` if there is none: `ENOSYS`), after ending the
/// log if it `runs` (its program exists and may be executed) as the destructor would,
/// since an exec replaces the process without running it. [`AfterEnd::exec`] says that
/// the log ended there, and whether the exec failed all the same (a file that is not a
/// program): the process then runs on with its log ended, its calls counted as after
/// the end. An exec that cannot run (a shell trying each `PATH` entry) ends nothing.
fn end_then_exec(runs: bool, real: Option<impl FnOnce() -> c_int>) -> c_int {
    // SAFETY: getpid takes nothing and cannot fail.
    let pid = unsafe { libc::getpid() };
    let ends = runs && on() && !recorder::raw::in_recorder() && pid == RECORDING_PID.load(Ordering::Relaxed);
    let ended = ends && STATE.compare_exchange(ON, ENDED, Ordering::AcqRel, Ordering::Acquire).is_ok();
    if ended {
        after().exec.store(EXEC_ENDED, Ordering::Relaxed);
        recorder::untracked(|| drop(recorder::stop()));
    }
    let Some(real) = real else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // It returns only if it failed (errno says why, for the caller).
    let failed = real();
    if ended {
        after().exec.store(EXEC_FAILED, Ordering::Relaxed);
    }
    failed
}

/// Whether `path` names a regular file this process may execute.
///
/// # Safety
///
/// `path` is null or a NUL-terminated string.
unsafe fn executable(path: *const libc::c_char) -> bool {
    if path.is_null() {
        return false;
    }
    // SAFETY: `st` is written by `stat` before it is read; `path` is a C string.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::stat(path, &mut st) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFREG
            && libc::access(path, libc::X_OK) == 0
    }
}

/// Whether `execvp` would find `file` to execute: itself if it names a directory part,
/// else the first executable `DIR/file` for `DIR` in `PATH` (glibc's default
/// `/bin:/usr/bin` when it is unset; an empty entry is the current directory). Allocates
/// nothing.
///
/// # Safety
///
/// `file` is null or a NUL-terminated string.
unsafe fn found_in_path(file: *const libc::c_char) -> bool {
    if file.is_null() {
        return false;
    }
    // SAFETY: a C string, as the caller promises.
    let name = unsafe { std::ffi::CStr::from_ptr(file) }.to_bytes();
    if name.is_empty() {
        return false;
    }
    if name.contains(&b'/') {
        // SAFETY: as above.
        return unsafe { executable(file) };
    }
    // SAFETY: getenv's string is read at once.
    let path = unsafe {
        let v = libc::getenv(c"PATH".as_ptr());
        if v.is_null() {
            &b"/bin:/usr/bin"[..]
        } else {
            std::ffi::CStr::from_ptr(v).to_bytes()
        }
    };
    let mut buf = [0u8; 4096];
    path.split(|&c| c == b':').any(|dir| {
        let dir = if dir.is_empty() { &b"."[..] } else { dir };
        let len = dir.len() + 1 + name.len();
        if len >= buf.len() {
            return false;
        }
        buf[..dir.len()].copy_from_slice(dir);
        buf[dir.len()] = b'/';
        buf[dir.len() + 1..len].copy_from_slice(name);
        buf[len] = 0;
        // SAFETY: `buf` holds a NUL-terminated string.
        unsafe { executable(buf.as_ptr().cast()) }
    })
}

type Argv = *const *const libc::c_char;

static REAL_EXECVE: AtomicUsize = AtomicUsize::new(0);
static REAL_EXECV: AtomicUsize = AtomicUsize::new(0);
static REAL_EXECVP: AtomicUsize = AtomicUsize::new(0);
static REAL_EXECVPE: AtomicUsize = AtomicUsize::new(0);
static REAL_FEXECVE: AtomicUsize = AtomicUsize::new(0);

/// Looks up glibc's exec functions while the session starts, so that an exec never calls
/// `dlsym` (which may allocate) in the child of a `vfork`.
fn find_exec_functions() {
    for (cache, name) in [
        (&REAL_EXECVE, c"execve"),
        (&REAL_EXECV, c"execv"),
        (&REAL_EXECVP, c"execvp"),
        (&REAL_EXECVPE, c"execvpe"),
        (&REAL_FEXECVE, c"fexecve"),
    ] {
        next_definition(cache, name);
    }
}

/// glibc's definition of `name`, of type `F` (a function pointer type), if there is one.
///
/// # Safety
///
/// `F` is the type of glibc's `name`.
unsafe fn real<F: Copy>(cache: &AtomicUsize, name: &std::ffi::CStr) -> Option<F> {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>()) };
    match next_definition(cache, name) {
        0 => None,
        // SAFETY: a non-null address `dlsym` gave for `name`, whose type the caller names.
        f => Some(unsafe { std::mem::transmute_copy::<usize, F>(&f) }),
    }
}

type ExecveFn = unsafe extern "C" fn(*const libc::c_char, Argv, Argv) -> c_int;
type ExecvFn = unsafe extern "C" fn(*const libc::c_char, Argv) -> c_int;
type FexecveFn = unsafe extern "C" fn(c_int, Argv, Argv) -> c_int;

/// `execve`: the log ends first if the program can run (see [`end_then_exec`]).
///
/// The exec functions glibc defines with variable arguments (`execl`, `execlp`,
/// `execle`) call its internal `execve`, which no preloaded library can interpose, and
/// stable Rust cannot define a variadic function: a program that replaces itself through
/// them leaves its log cut off, as before, and `replay-cli record` says so.
///
/// # Safety
///
/// As glibc's `execve`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(path: *const libc::c_char, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: the caller's C string; glibc's `execve` has this type, and takes the
    // caller's arguments.
    unsafe {
        let f = real::<ExecveFn>(&REAL_EXECVE, c"execve");
        end_then_exec(executable(path), f.map(|f| move || f(path, argv, envp)))
    }
}

/// `execv`, as [`execve`].
///
/// # Safety
///
/// As glibc's `execv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(path: *const libc::c_char, argv: Argv) -> c_int {
    // SAFETY: as in `execve`.
    unsafe {
        let f = real::<ExecvFn>(&REAL_EXECV, c"execv");
        end_then_exec(executable(path), f.map(|f| move || f(path, argv)))
    }
}

/// `execvp`, as [`execve`], the program found in `PATH` as glibc finds it.
///
/// # Safety
///
/// As glibc's `execvp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(file: *const libc::c_char, argv: Argv) -> c_int {
    // SAFETY: as in `execve`.
    unsafe {
        let f = real::<ExecvFn>(&REAL_EXECVP, c"execvp");
        end_then_exec(found_in_path(file), f.map(|f| move || f(file, argv)))
    }
}

/// `execvpe`, as [`execvp`].
///
/// # Safety
///
/// As glibc's `execvpe`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(file: *const libc::c_char, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: as in `execve`.
    unsafe {
        let f = real::<ExecveFn>(&REAL_EXECVPE, c"execvpe");
        end_then_exec(found_in_path(file), f.map(|f| move || f(file, argv, envp)))
    }
}

/// `fexecve`, as [`execve`] (what a descriptor holds is not checked ahead).
///
/// # Safety
///
/// As glibc's `fexecve`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: as in `execve`.
    unsafe {
        let f = real::<FexecveFn>(&REAL_FEXECVE, c"fexecve");
        end_then_exec(fd >= 0, f.map(|f| move || f(fd, argv, envp)))
    }
}

// ---- Start-up.

/// glibc's `struct dl_phdr_info` with the fields after `dlpi_phnum` (glibc 2.4 and
/// later), which the `libc` crate leaves out.
#[repr(C)]
struct PhdrInfo {
    addr: usize,
    name: *const libc::c_char,
    phdr: *const libc::Elf64_Phdr,
    phnum: u16,
    adds: u64,
    subs: u64,
    tls_modid: usize,
    tls_data: *mut c_void,
}

/// Whether this library's TLS block exists in the calling thread: true for a library
/// loaded at start-up (static TLS), false for one `dlopen`ed whose block this thread has
/// not touched (it would come from `malloc`). Reads no thread-local variable.
fn tls_block_ready() -> bool {
    struct Search {
        here: usize,
        ready: Option<bool>,
    }
    extern "C" fn visit(info: *mut libc::dl_phdr_info, size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `Search` that `tls_block_ready` passed.
        let search = unsafe { &mut *(data as *mut Search) };
        if size < std::mem::size_of::<PhdrInfo>() {
            return 1;
        }
        // SAFETY: glibc passes its `dl_phdr_info`, at least `size` bytes (checked above).
        let info = unsafe { &*(info as *const PhdrInfo) };
        for i in 0..info.phnum as usize {
            // SAFETY: `phdr` points to `phnum` program headers.
            let ph = unsafe { &*info.phdr.add(i) };
            let start = info.addr.wrapping_add(ph.p_vaddr as usize);
            if ph.p_type == libc::PT_LOAD && (start..start + ph.p_memsz as usize).contains(&search.here) {
                search.ready = Some(info.tls_modid == 0 || !info.tls_data.is_null());
                return 1;
            }
        }
        0
    }
    let mut search = Search { here: tls_block_ready as *const () as usize, ready: None };
    // SAFETY: `visit` reads `search` through the pointer only during this call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut search as *mut Search).cast()) };
    search.ready.unwrap_or(false)
}

/// Removes `lib` from the `LD_PRELOAD` list `list` (separated by spaces or colons).
fn without_entry(list: &[u8], lib: &[u8]) -> Vec<u8> {
    let kept: Vec<&[u8]> = list.split(|&c| c == b' ' || c == b':').filter(|e| !e.is_empty() && *e != lib).collect();
    kept.join(&b':')
}

/// The path this library was loaded from, as the loader has it.
fn own_path() -> Option<Vec<u8>> {
    // SAFETY: `info` is zeroed storage that dladdr fills; `dli_fname` is the loader's
    // string, valid while the library is loaded, copied at once.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(own_path as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some(std::ffi::CStr::from_ptr(info.dli_fname).to_bytes().to_vec())
    }
}

/// After the session started: the environment a program executed from here inherits has
/// neither the log's variables nor this library in `LD_PRELOAD`.
fn clear_environment() {
    // SAFETY: start-up, before the program's code runs: no other thread reads the
    // environment (the recorder's threads never do).
    unsafe {
        libc::unsetenv(c"MEMREPLAY_LOG".as_ptr());
        libc::unsetenv(c"MEMREPLAY_OPTIONS".as_ptr());
        let v = libc::getenv(c"LD_PRELOAD".as_ptr());
        if v.is_null() {
            return;
        }
        let list = std::ffi::CStr::from_ptr(v).to_bytes().to_vec();
        let Some(me) = own_path() else { return };
        let rest = without_entry(&list, &me);
        if rest.is_empty() {
            libc::unsetenv(c"LD_PRELOAD".as_ptr());
        } else if let Ok(rest) = std::ffi::CString::new(rest) {
            libc::setenv(c"LD_PRELOAD".as_ptr(), rest.as_ptr(), 1);
        }
    }
}

extern "C" fn in_fork_child() {
    STATE.store(OFF, Ordering::Release);
    recorder::raw::forget_session_after_fork();
}

/// The library's constructor: starts the session from the environment, hands it the
/// blocks allocated before (and the counts), and turns the interposer on; or turns it
/// off for good when `dlopen`ed.
extern "C" fn init() {
    if !tls_block_ready() {
        STATE.store(OFF, Ordering::Release);
        return;
    }
    // From here the recorder's own calls are told apart (thread-local storage exists);
    // everyone else's are still kept track of in the early table.
    STATE.store(STARTING, Ordering::Release);
    // SAFETY: gnu_get_libc_version returns a static string.
    let version = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
    ALIGNED_ALLOC_CHECKS.store(checks_alignment(version.to_bytes()), Ordering::Relaxed);
    // SAFETY: registers a plain function for the child of every later fork.
    unsafe { libc::pthread_atfork(None, None, Some(in_fork_child)) };
    attach_after_end_counts();
    // SAFETY: getenv's pointer is read at once.
    let asked = unsafe {
        let v = libc::getenv(c"MEMREPLAY_LOG".as_ptr());
        !v.is_null() && *v != 0
    };
    if asked {
        // SAFETY: getpid takes nothing and cannot fail.
        RECORDING_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
        find_exec_functions();
        recorder::raw::start_from_env();
        // What this takes (Rust's, and setenv's copies) is the recorder's own.
        recorder::untracked(clear_environment);
    }
    hand_over_early_blocks();
}

/// The context type and name of the blocks allocated before the session started.
const BEFORE_START_CONTEXT: (&str, &str) = ("memreplay", "before recording started");

/// Closes the early table: if a session records, each block still live in it is recorded
/// as an allocation without a callstack (in the context [`BEFORE_START_CONTEXT`]), and
/// the counts as one `BEFORE_START` record; then the interposer is on. Under the table's
/// lock throughout, so that another thread's free of such a block waits, and is recorded
/// after its allocation. (Whatever the recorder allocates meanwhile is its own and never
/// takes the lock.)
fn hand_over_early_blocks() {
    let mut t = match lock_early() {
        Locked::Open(t) => t,
        Locked::Closed | Locked::Mine => return,
    };
    t.closed = true;
    if recorder::is_recording() {
        let live = t.len;
        {
            let _context = recorder::push_context(BEFORE_START_CONTEXT.0, BEFORE_START_CONTEXT.1, false);
            for b in &t.blocks[..live] {
                recorder::raw::alloc_before_start(b.p as *mut u8, b.size, b.align);
            }
        }
        let mut counts = t.counts;
        counts.live = live as u64;
        recorder::raw::note_calls_before_start(counts);
    }
    STATE.store(ON, Ordering::Release);
    drop(t);
}

/// The library's destructor: ends the log. The dynamic loader runs it after every
/// `atexit` handler and after the destructors of the program (initialised after this
/// library, finalised before it), so what those allocate and free is recorded. What
/// runs later (the destructors of the libraries this one was initialised after, such as
/// libstdc++'s and the C library's) cannot reach the log: from here on calls are counted
/// ([`AfterEnd`]), and so is what other threads still running do while the log ends.
extern "C" fn fini() {
    if STATE.compare_exchange(ON, ENDED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        // The session's figures, dropped inside too: their memory is the recorder's.
        recorder::untracked(|| drop(recorder::stop()));
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

#[used]
#[unsafe(link_section = ".fini_array")]
static FINI: extern "C" fn() = fini;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ld_preload_lists_lose_only_this_library() {
        assert_eq!(without_entry(b"/a/libmemreplay.so", b"/a/libmemreplay.so"), b"");
        assert_eq!(without_entry(b"/x.so /a/libmemreplay.so:/y.so", b"/a/libmemreplay.so"), b"/x.so:/y.so");
        assert_eq!(without_entry(b"/x.so", b"/a/libmemreplay.so"), b"/x.so");
    }

    #[test]
    fn aligned_alloc_checks_from_glibc_2_38() {
        assert!(!checks_alignment(b"2.36"));
        assert!(checks_alignment(b"2.38"));
        assert!(checks_alignment(b"2.40"));
        assert!(checks_alignment(b"3.0"));
    }

    #[test]
    fn alignments_follow_glibc() {
        assert_eq!(effective_align(1), 16);
        assert_eq!(effective_align(24), 32);
        assert_eq!(effective_align(4096), 4096);
    }
}
