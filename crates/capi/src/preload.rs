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
//! **When it records.** Until this library's constructor has run, calls pass straight
//! through: the dynamic loader and the C library's start-up allocate before any
//! constructor, when the recorder cannot run yet (no thread can be started from inside
//! the loader). The constructor, which runs before those of the program and of the
//! libraries it preloads before, starts the session from `MEMREPLAY_LOG` (and
//! `MEMREPLAY_OPTIONS`); the program's constructors are recorded. The log ends in this
//! library's destructor (not in an `atexit` hook): the loader runs it after every
//! `atexit` handler, thread-local destructor and C++ static destructor, and after the
//! program's own destructors, so all those are recorded. What runs later (destructors of
//! the libraries initialised before this one, the C library's clean-up) is not recorded
//! and never touches the log. A process ended by `_exit` or a signal other than SIGTERM
//! and SIGINT (which the recorder handles) leaves a log cut short, which the reader
//! reads up to its last flush.
//! Allocations made before the constructor and freed later are frees of blocks the log
//! does not know; the analyzer counts them as such.
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
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

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

/// Before the constructor: calls pass through.
const WAITING: u8 = 0;
/// The constructor ran: calls go to the recorder (which records if a session runs).
const ON: u8 = 1;
/// Loaded by `dlopen`, or in the child of a `fork`: calls pass through for good.
const OFF: u8 = 2;

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

// ---- The Rust side of each entry point: `anchor` is the entry point's stack pointer,
// just below its frame record.

extern "C" fn malloc_impl(size: usize, anchor: usize) -> *mut c_void {
    // SAFETY: glibc's malloc, with the caller's argument.
    let p = unsafe { __libc_malloc(size) };
    if on() {
        recorder::raw::alloc(p.cast(), size, MALLOC_ALIGN, anchor);
    }
    p
}

extern "C" fn calloc_impl(n: usize, size: usize, anchor: usize) -> *mut c_void {
    // SAFETY: glibc's calloc, with the caller's arguments (it checks the product).
    let p = unsafe { __libc_calloc(n, size) };
    if on() {
        recorder::raw::alloc(p.cast(), n.wrapping_mul(size), MALLOC_ALIGN, anchor);
    }
    p
}

extern "C" fn free_impl(p: *mut c_void, anchor: usize) {
    if p.is_null() {
        return;
    }
    if on() {
        recorder::raw::free(p.cast(), anchor);
    }
    // SAFETY: glibc's free, with the caller's block.
    unsafe { __libc_free(p) }
}

/// `realloc` as glibc does it, recorded as what happened.
fn realloc_recorded(p: *mut c_void, size: usize, anchor: usize) -> *mut c_void {
    if !on() {
        // SAFETY: glibc's realloc, with the caller's arguments.
        return unsafe { __libc_realloc(p, size) };
    }
    if p.is_null() {
        // A malloc.
        // SAFETY: as above.
        let q = unsafe { __libc_realloc(p, size) };
        recorder::raw::alloc(q.cast(), size, MALLOC_ALIGN, anchor);
        return q;
    }
    if size == 0 {
        // glibc frees `p` and returns NULL: a free.
        recorder::raw::free(p.cast(), anchor);
        // SAFETY: as above.
        return unsafe { __libc_realloc(p, size) };
    }
    let ticket = recorder::raw::realloc_begin(p.cast());
    // SAFETY: as above.
    let q = unsafe { __libc_realloc(p, size) };
    recorder::raw::realloc_end(ticket, p.cast(), q.cast(), MALLOC_ALIGN, size, anchor);
    q
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
    let p = unsafe { __libc_memalign(align, size) };
    if on() {
        recorder::raw::alloc(p.cast(), size, effective_align(align), anchor);
    }
    p
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
    let p = unsafe { __libc_valloc(size) };
    if on() {
        recorder::raw::alloc(p.cast(), size, page_size(), anchor);
    }
    p
}

extern "C" fn pvalloc_impl(size: usize, anchor: usize) -> *mut c_void {
    // SAFETY: glibc's pvalloc, with the caller's argument.
    let p = unsafe { __libc_pvalloc(size) };
    if on() {
        let page = page_size();
        // What glibc allocated: the size rounded up to whole pages, one page for 0.
        let rounded = size.max(1).div_ceil(page).saturating_mul(page);
        recorder::raw::alloc(p.cast(), rounded, page, anchor);
    }
    p
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
static REAL_DLCLOSE: AtomicUsize = AtomicUsize::new(0);

type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

fn real_dlclose() -> Option<DlcloseFn> {
    let mut f = REAL_DLCLOSE.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: `dlsym` with a constant C string; it may call `malloc`, which works
        // from here (ours passes through or records).
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"dlclose".as_ptr()) } as usize;
        REAL_DLCLOSE.store(f, Ordering::Release);
    }
    // SAFETY: a non-null address `dlsym` returned for `dlclose` is glibc's `dlclose`.
    (f != 0).then(|| unsafe { std::mem::transmute::<usize, DlcloseFn>(f) })
}

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
    let closed = match real_dlclose() {
        // SAFETY: glibc's `dlclose`, with the caller's handle.
        Some(real) => unsafe { real(handle) },
        None => -1,
    };
    recorder::raw::modules_unloaded();
    closed
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

/// The library's constructor: turns the interposer on (or off for good when `dlopen`ed)
/// and starts the session from the environment.
extern "C" fn init() {
    if !tls_block_ready() {
        STATE.store(OFF, Ordering::Release);
        return;
    }
    // SAFETY: gnu_get_libc_version returns a static string.
    let version = unsafe { std::ffi::CStr::from_ptr(gnu_get_libc_version()) };
    ALIGNED_ALLOC_CHECKS.store(checks_alignment(version.to_bytes()), Ordering::Relaxed);
    STATE.store(ON, Ordering::Release);
    // SAFETY: registers a plain function for the child of every later fork.
    unsafe { libc::pthread_atfork(None, None, Some(in_fork_child)) };
    // SAFETY: getenv's pointer is read at once.
    let asked = unsafe {
        let v = libc::getenv(c"MEMREPLAY_LOG".as_ptr());
        !v.is_null() && *v != 0
    };
    if asked {
        recorder::raw::start_from_env();
        // What this takes (Rust's, and setenv's copies) is the recorder's own.
        recorder::untracked(clear_environment);
    }
}

/// The library's destructor: ends the log. The dynamic loader runs it after every
/// `atexit` handler and after the destructors of the program (initialised after this
/// library, finalised before it), so what those allocate and free is recorded; what
/// runs later (the destructors of the libraries this one was initialised after, such as
/// the C library's) is not.
extern "C" fn fini() {
    if STATE.load(Ordering::Acquire) == ON {
        let _ = recorder::stop();
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
