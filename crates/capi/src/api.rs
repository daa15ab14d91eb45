//! The C API declared by `include/memreplay.h`.
//!
//! Every function is `extern "C"` and never unwinds into C: each body runs under
//! `catch_unwind`, and a panic (a bug of ours) becomes [`ERROR_INTERNAL`]. Bad input (a
//! NULL pointer, a name that is not UTF-8, an unknown domain or kind, a bad option string)
//! is answered by a negative status code, and the reason is kept for
//! [`memreplay_last_error`] on the calling thread.
//!
//! When nothing records, the hooks return [`OK`] after at most a NULL check and one atomic
//! load: names are not read, formatted or validated.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use recorder::{Config, Domain, DomainKind, Resource, ResourceKind, SessionStats, StartError};

/// Success.
pub const OK: c_int = 0;
/// A pointer argument that must not be NULL was NULL.
pub const ERROR_NULL: c_int = -1;
/// A string argument was not valid UTF-8.
pub const ERROR_UTF8: c_int = -2;
/// The option string (or `MEMREPLAY_OPTIONS`) is invalid.
pub const ERROR_OPTIONS: c_int = -3;
/// The log file could not be created (or the recorder's threads could not start).
pub const ERROR_IO: c_int = -4;
/// A session is already recording.
pub const ERROR_ALREADY_RECORDING: c_int = -5;
/// No session is recording (from `memreplay_stop`).
pub const ERROR_NOT_RECORDING: c_int = -6;
/// The domain handle names no defined domain.
pub const ERROR_DOMAIN: c_int = -7;
/// An enum argument (domain or resource kind) is out of range.
pub const ERROR_KIND: c_int = -8;
/// A panic inside the library (a bug): caught, not propagated into C.
pub const ERROR_INTERNAL: c_int = -9;

/// A domain handle (`memreplay_domain`).
pub type MemreplayDomain = u32;
/// What `memreplay_domain_define` returns on failure (`MEMREPLAY_NO_DOMAIN`).
pub const NO_DOMAIN: MemreplayDomain = u32::MAX;

/// `memreplay_stats`: what a finished session wrote.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct MemreplayStats {
    /// Events written to the log.
    pub events: u64,
    /// Event blocks written.
    pub blocks: u64,
    /// Bytes of the log file.
    pub bytes: u64,
    /// Events the recorder had to lose (0 in a healthy session).
    pub lost_events: u64,
    /// Times a thread waited for the writer.
    pub backpressure_waits: u64,
    /// Nanoseconds threads spent waiting for the writer.
    pub backpressure_ns: u64,
    /// Most buffer memory the recorder held at once, in bytes.
    pub peak_buffer_bytes: u64,
    /// Application threads that recorded events.
    pub threads: u32,
    /// Distinct callstacks interned.
    pub stacks: u32,
    /// Encoder threads the session ran (0: the writer encoded alone).
    pub encoder_threads: u32,
    /// Padding; always 0.
    pub reserved: u32,
}

impl From<&SessionStats> for MemreplayStats {
    fn from(s: &SessionStats) -> Self {
        MemreplayStats {
            events: s.events,
            blocks: s.blocks,
            bytes: s.bytes,
            lost_events: s.lost_events,
            backpressure_waits: s.backpressure_waits,
            backpressure_ns: s.backpressure_ns,
            peak_buffer_bytes: s.peak_buffer_bytes,
            threads: s.threads,
            stacks: s.stacks,
            encoder_threads: s.encoder_threads,
            reserved: 0,
        }
    }
}

/// `memreplay_resource`: what a domain allocation holds (a GPU resource).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemreplayResource {
    /// A `memreplay_resource_kind` (0 buffer, 1 texture, 2 render target, 3 depth-stencil,
    /// 4 other).
    pub kind: c_int,
    /// Width in pixels (or bytes for a buffer).
    pub width: u32,
    /// Height in pixels, 1 when it does not apply.
    pub height: u32,
    /// Depth for 3D textures, array layers otherwise; 1 when neither applies.
    pub depth_or_layers: u32,
    /// Mip levels, 1 when it does not apply.
    pub mip_levels: u32,
    /// Pixel or element format ("BC7_UNORM"), or NULL.
    pub format: *const c_char,
    /// Debug name, or NULL.
    pub name: *const c_char,
}

// ---------------------------------------------------------------------------------------
// Errors and the FFI guard.

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Keeps `message` as this thread's last error and returns `code`. The message's memory is
/// the library's own, not the program's: it is made with recording suspended.
#[cold]
fn fail(code: c_int, message: impl fmt::Display) -> c_int {
    recorder::untracked(|| {
        let text = message.to_string().replace('\0', " ");
        let text = CString::new(text).unwrap_or_default();
        let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = Some(text));
    });
    code
}

/// Runs `f`, turning a panic into `on_panic` (and a message) instead of unwinding into C.
#[inline(always)]
fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            fail(ERROR_INTERNAL, "internal error in libmemreplay (a panic, caught)");
            on_panic
        }
    }
}

/// The bytes of a C string, or `ERROR_NULL` (with a message naming `what`).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid and unchanged while
/// the returned slice is used.
unsafe fn c_bytes<'a>(p: *const c_char, what: &str) -> Result<&'a [u8], c_int> {
    if p.is_null() {
        return Err(fail(ERROR_NULL, format_args!("{what} is NULL")));
    }
    // SAFETY: non-NULL, and NUL-terminated and live per the caller's contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// A C string as UTF-8, or a status code (NULL, invalid UTF-8) with a message.
///
/// # Safety
/// As [`c_bytes`].
unsafe fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str, c_int> {
    // SAFETY: forwarded contract.
    let bytes = unsafe { c_bytes(p, what) }?;
    std::str::from_utf8(bytes).map_err(|e| fail(ERROR_UTF8, format_args!("{what} is not valid UTF-8: {e}")))
}

/// Writes bytes as UTF-8 text, each invalid sequence as U+FFFD, without allocating.
struct Lossy<'a>(&'a [u8]);

impl fmt::Display for Lossy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{FFFD}")?;
            }
        }
        Ok(())
    }
}

/// The status of a string that is recorded anyway (NULL as `(null)`, bad bytes as U+FFFD).
fn lossy_status(p: *const c_char, bytes: &[u8], what: &str) -> c_int {
    if p.is_null() {
        fail(ERROR_NULL, format_args!("{what} is NULL (recorded as `(null)`)"))
    } else {
        match std::str::from_utf8(bytes) {
            Ok(_) => OK,
            Err(e) => fail(ERROR_UTF8, format_args!("{what} is not valid UTF-8 ({e}); recorded with U+FFFD")),
        }
    }
}

/// The bytes of a string recorded whatever it holds: NULL reads `(null)`.
///
/// # Safety
/// As [`c_bytes`].
unsafe fn lenient_bytes<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        b"(null)"
    } else {
        // SAFETY: non-NULL, NUL-terminated and live per the caller's contract.
        unsafe { CStr::from_ptr(p) }.to_bytes()
    }
}

/// Returns the message of the last call that failed on this thread, or NULL if none has.
/// The string stays valid until the next failing call on this thread (or its exit).
/// Successful calls leave it alone, like `errno`.
#[no_mangle]
pub extern "C" fn memreplay_last_error() -> *const c_char {
    LAST_ERROR.try_with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |s| s.as_ptr())).unwrap_or(std::ptr::null())
}

// ---------------------------------------------------------------------------------------
// Start and stop.

fn start_error(e: StartError) -> c_int {
    match e {
        StartError::AlreadyRecording => fail(ERROR_ALREADY_RECORDING, &e),
        StartError::Io(_) => fail(ERROR_IO, &e),
        StartError::Config(_) => fail(ERROR_OPTIONS, &e),
    }
}

/// Starts recording to `path` with `options` in `MEMREPLAY_OPTIONS` syntax (NULL or "":
/// the defaults). Returns 0, or `ERROR_NULL` (path), `ERROR_UTF8`/`ERROR_OPTIONS`
/// (options), `ERROR_IO` (the log cannot be created or written, or the system refused a
/// recorder thread), `ERROR_ALREADY_RECORDING`.
///
/// # Safety
/// `path` and `options` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn memreplay_start(path: *const c_char, options: *const c_char) -> c_int {
    guard(ERROR_INTERNAL, || {
        // SAFETY: the caller's contract.
        let path = match unsafe { c_bytes(path, "the log path") } {
            Ok([]) => return fail(ERROR_IO, "the log path is empty"),
            Ok(p) => p,
            Err(code) => return code,
        };
        let options = if options.is_null() {
            ""
        } else {
            // SAFETY: the caller's contract.
            match unsafe { c_str(options, "the options") } {
                Ok(o) => o,
                Err(code) => return code,
            }
        };
        let config = recorder::untracked(|| {
            use std::os::unix::ffi::OsStrExt;
            Config::new(std::ffi::OsStr::from_bytes(path)).with_options(options)
        });
        match config {
            Ok(config) => match recorder::start(config) {
                Ok(()) => OK,
                Err(e) => start_error(e),
            },
            Err(e) => fail(ERROR_OPTIONS, &e),
        }
    })
}

/// Starts recording if `MEMREPLAY_LOG` names a file (options from `MEMREPLAY_OPTIONS`).
/// Returns 1 if it started, 0 if `MEMREPLAY_LOG` is unset or empty, or a negative status.
#[no_mangle]
pub extern "C" fn memreplay_start_from_env() -> c_int {
    guard(ERROR_INTERNAL, || match recorder::untracked(recorder::start_from_env) {
        Ok(true) => 1,
        Ok(false) => 0,
        Err(e) => start_error(e),
    })
}

/// Stops recording and finishes the log. Fills `*out` (if not NULL) with what was written
/// and returns 0, or `ERROR_NOT_RECORDING` (then `*out` is zeroed).
///
/// # Safety
/// `out` is NULL or points to a writable `memreplay_stats`.
#[no_mangle]
pub unsafe extern "C" fn memreplay_stop(out: *mut MemreplayStats) -> c_int {
    guard(ERROR_INTERNAL, || {
        let stats = recorder::stop();
        let (code, value) = match &stats {
            Some(s) => (OK, MemreplayStats::from(s)),
            None => (fail(ERROR_NOT_RECORDING, "no memreplay session is recording"), MemreplayStats::default()),
        };
        if !out.is_null() {
            // SAFETY: non-NULL, and writable per the caller's contract.
            unsafe { out.write(value) };
        }
        code
    })
}

/// 1 while a session records, else 0.
#[no_mangle]
pub extern "C" fn memreplay_is_recording() -> c_int {
    c_int::from(recorder::is_recording())
}

// ---------------------------------------------------------------------------------------
// Contexts, labels, frames, threads.

/// Context type names, interned: the recorder keeps a type as a `&'static str` (the log
/// defines each type once, by name). Bounded by the number of distinct types.
static TYPES: Mutex<Option<HashMap<Vec<u8>, &'static str>>> = Mutex::new(None);

/// A per-thread cache of interned types by the address of the caller's string (usually a
/// literal), checked against the content, so a hit costs a `strlen` and a compare.
const TYPE_CACHE: usize = 16;
thread_local! {
    static TYPE_CACHE_SLOTS: RefCell<[(usize, &'static str); TYPE_CACHE]> =
        const { RefCell::new([(0, ""); TYPE_CACHE]) };
}

/// The interned `&'static str` for type name bytes (invalid UTF-8 as U+FFFD).
fn intern_type(addr: usize, bytes: &[u8]) -> &'static str {
    let slot = (addr >> 3) % TYPE_CACHE;
    let cached = TYPE_CACHE_SLOTS
        .try_with(|c| {
            let (a, s) = c.borrow()[slot];
            (a == addr && s.as_bytes() == bytes).then_some(s)
        })
        .ok()
        .flatten();
    if let Some(s) = cached {
        return s;
    }
    let s = recorder::untracked(|| {
        let mut table = TYPES.lock().unwrap_or_else(|e| e.into_inner());
        let table = table.get_or_insert_with(HashMap::new);
        if let Some(s) = table.get(bytes) {
            return *s;
        }
        let text: &'static str = Box::leak(String::from_utf8_lossy(bytes).into_owned().into_boxed_str());
        table.insert(bytes.to_vec(), text);
        text
    });
    // Cache only exact spellings: a type with bad bytes is looked up in the table each time.
    if s.as_bytes() == bytes {
        let _ = TYPE_CACHE_SLOTS.try_with(|c| c.borrow_mut()[slot] = (addr, s));
    }
    s
}

/// Enters a context of type `type` named `name` on this thread, until
/// `memreplay_context_pop`. `instance` non-zero: each entry counts as one instance (one
/// texture, one mesh). The context is entered even on bad input, so the matching pop
/// stays balanced: a NULL type or name is recorded as `(null)` (`ERROR_NULL`), bytes that
/// are not UTF-8 as U+FFFD (`ERROR_UTF8`).
///
/// # Safety
/// `ty` and `name` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn memreplay_context_push(ty: *const c_char, name: *const c_char, instance: c_int) -> c_int {
    if !recorder::is_recording() {
        return OK;
    }
    guard(ERROR_INTERNAL, || {
        // SAFETY: the caller's contract.
        let (ty_bytes, name_bytes) = unsafe { (lenient_bytes(ty), lenient_bytes(name)) };
        let interned = intern_type(ty as usize, ty_bytes);
        match std::str::from_utf8(name_bytes) {
            Ok(n) => recorder::__private::context_push(interned, format_args!("{n}"), instance != 0),
            Err(_) => recorder::__private::context_push(interned, format_args!("{}", Lossy(name_bytes)), instance != 0),
        }
        // The type's error first (the message says the first thing wrong).
        match lossy_status(ty, ty_bytes, "the context type") {
            OK => lossy_status(name, name_bytes, "the context name"),
            status => status,
        }
    })
}

/// Leaves this thread's innermost context.
#[no_mangle]
pub extern "C" fn memreplay_context_pop() {
    if recorder::is_recording() {
        guard((), || drop(recorder::__private::ContextGuard::new()));
    }
}

/// Marks a named point in time ("level loaded"). Nothing is recorded for a NULL
/// (`ERROR_NULL`) or non-UTF-8 (`ERROR_UTF8`) name.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn memreplay_label(name: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { with_name(name, "the label", recorder::label) }
}

/// Marks the start of frame `frame`.
#[no_mangle]
pub extern "C" fn memreplay_frame_start(frame: u64) {
    if recorder::is_recording() {
        guard((), || recorder::frame_start(frame));
    }
}

/// Names the calling thread in the log. Nothing is recorded for a NULL (`ERROR_NULL`) or
/// non-UTF-8 (`ERROR_UTF8`) name.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn memreplay_set_thread_name(name: *const c_char) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { with_name(name, "the thread name", recorder::set_thread_name) }
}

/// Hands the string `name` (`what`, for messages) to `record` while a session records:
/// `ERROR_NULL` for NULL, `ERROR_UTF8` for invalid UTF-8, and nothing recorded then.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn with_name(name: *const c_char, what: &str, record: impl FnOnce(&str)) -> c_int {
    if name.is_null() {
        return fail(ERROR_NULL, format_args!("{what} is NULL"));
    }
    if !recorder::is_recording() {
        return OK;
    }
    guard(ERROR_INTERNAL, || {
        // SAFETY: the caller's contract.
        match unsafe { c_str(name, what) } {
            Ok(s) => {
                record(s);
                OK
            }
            Err(code) => code,
        }
    })
}

// ---------------------------------------------------------------------------------------
// Attach and usage.

/// Until `memreplay_attach_pop`, this thread's allocations belong to whatever context owns
/// the allocation containing `p` (an interior pointer is fine). A NULL `p` is recorded
/// anyway (it attaches to nothing, and keeps the pop balanced) and returns `ERROR_NULL`.
#[no_mangle]
pub extern "C" fn memreplay_attach_push(p: *const c_void) -> c_int {
    if !recorder::is_recording() {
        return OK;
    }
    guard(ERROR_INTERNAL, || {
        std::mem::forget(recorder::attach(p));
        if p.is_null() {
            fail(ERROR_NULL, "the attach pointer is NULL")
        } else {
            OK
        }
    })
}

/// Ends this thread's innermost attach.
#[no_mangle]
pub extern "C" fn memreplay_attach_pop() {
    if recorder::is_recording() {
        // The guard's drop is the pop.
        guard((), || drop(recorder::AttachGuard::new()));
    }
}

/// Reports that the container whose heap block starts at `p` uses `used_bytes` of it.
/// NULL `p`: nothing recorded, `ERROR_NULL`.
#[no_mangle]
pub extern "C" fn memreplay_usage(p: *const c_void, used_bytes: usize) -> c_int {
    if p.is_null() {
        return fail(ERROR_NULL, "the usage pointer is NULL");
    }
    if recorder::is_recording() {
        guard((), || recorder::usage(p, used_bytes));
    }
    OK
}

// ---------------------------------------------------------------------------------------
// Domains.

fn domain_kind(kind: c_int) -> Option<DomainKind> {
    u8::try_from(kind).ok().filter(|k| *k <= 4).map(DomainKind::from_byte)
}

fn resource_kind(kind: c_int) -> Option<ResourceKind> {
    u8::try_from(kind).ok().filter(|k| *k <= 4).map(ResourceKind::from_byte)
}

fn domain(d: MemreplayDomain) -> Result<Domain, c_int> {
    Domain::from_id(d).ok_or_else(|| fail(ERROR_DOMAIN, format_args!("domain {d} is not defined")))
}

/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn define(name: *const c_char, kind: c_int, capacity: u64, parent: Option<MemreplayDomain>) -> MemreplayDomain {
    guard(NO_DOMAIN, || {
        // SAFETY: the caller's contract.
        let name = match unsafe { c_str(name, "the domain name") } {
            Ok(n) => n,
            Err(_) => return NO_DOMAIN,
        };
        let Some(kind) = domain_kind(kind) else {
            fail(ERROR_KIND, format_args!("domain kind {kind} is not one of MEMREPLAY_DOMAIN_* (0-4)"));
            return NO_DOMAIN;
        };
        let d = match parent.map(domain).transpose() {
            Ok(Some(parent)) => Domain::define_within(name, kind, capacity, parent),
            Ok(None) => Domain::define(name, kind, capacity),
            Err(_) => return NO_DOMAIN,
        };
        d.id()
    })
}

/// Defines a top-level domain (defined once, at start-up; remembered across sessions).
/// Returns its handle, or `MEMREPLAY_NO_DOMAIN` (NULL or non-UTF-8 name, bad kind).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn memreplay_domain_define(name: *const c_char, kind: c_int, capacity: u64) -> MemreplayDomain {
    // SAFETY: forwarded contract.
    unsafe { define(name, kind, capacity, None) }
}

/// Defines a domain whose allocations live inside allocations of `parent` (a pool in heap
/// blocks: `parent` `MEMREPLAY_HEAP`). Returns `MEMREPLAY_NO_DOMAIN` on bad input,
/// including an undefined parent.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn memreplay_domain_define_within(
    name: *const c_char,
    kind: c_int,
    capacity: u64,
    parent: MemreplayDomain,
) -> MemreplayDomain {
    // SAFETY: forwarded contract.
    unsafe { define(name, kind, capacity, Some(parent)) }
}

/// Records an allocation of `size` bytes at `addr` (or any id unique among the domain's
/// live allocations) in `d`, aligned to `align` (a power of two; 0 means 1).
#[no_mangle]
pub extern "C" fn memreplay_domain_alloc(d: MemreplayDomain, addr: u64, size: u64, align: u64) -> c_int {
    if !recorder::is_recording() {
        return OK;
    }
    guard(ERROR_INTERNAL, || match domain(d) {
        Ok(d) => {
            d.alloc_aligned(addr, size, align);
            OK
        }
        Err(code) => code,
    })
}

/// Like `memreplay_domain_alloc`, for an allocation that holds the resource `*r`. A NULL
/// `r` records a plain allocation (`ERROR_NULL`); a bad kind records kind "other"
/// (`ERROR_KIND`); NULL strings read as empty, non-UTF-8 bytes as U+FFFD (`ERROR_UTF8`).
///
/// # Safety
/// `r` is NULL or points to a `memreplay_resource` whose strings are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn memreplay_domain_alloc_resource(
    d: MemreplayDomain,
    addr: u64,
    size: u64,
    align: u64,
    r: *const MemreplayResource,
) -> c_int {
    if !recorder::is_recording() {
        return OK;
    }
    guard(ERROR_INTERNAL, || {
        let d = match domain(d) {
            Ok(d) => d,
            Err(code) => return code,
        };
        // SAFETY: NULL or a valid `memreplay_resource`, per the caller's contract.
        let Some(r) = (unsafe { r.as_ref() }) else {
            d.alloc_aligned(addr, size, align);
            return fail(ERROR_NULL, "the resource is NULL (recorded as a plain allocation)");
        };
        let mut status = OK;
        let kind = resource_kind(r.kind).unwrap_or_else(|| {
            status =
                fail(ERROR_KIND, format_args!("resource kind {} is not one of MEMREPLAY_RESOURCE_* (0-4)", r.kind));
            ResourceKind::Other
        });
        let text = |p: *const c_char, what: &str, status: &mut c_int| -> Cow<'static, str> {
            if p.is_null() {
                return Cow::Borrowed("");
            }
            // SAFETY: non-NULL and NUL-terminated per the caller's contract; the bytes
            // are copied (or borrowed only within this call).
            let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
            match std::str::from_utf8(bytes) {
                Ok(s) => Cow::Owned(recorder::untracked(|| s.to_owned())),
                Err(e) => {
                    *status = fail(ERROR_UTF8, format_args!("the resource's {what} is not valid UTF-8 ({e})"));
                    Cow::Owned(recorder::untracked(|| Lossy(bytes).to_string()))
                }
            }
        };
        let format = text(r.format, "format", &mut status);
        let name = text(r.name, "name", &mut status);
        d.alloc_resource(
            addr,
            size,
            align,
            &Resource {
                kind,
                width: r.width,
                height: r.height,
                depth_or_layers: r.depth_or_layers,
                mip_levels: r.mip_levels,
                format: &format,
                name: &name,
            },
        );
        recorder::untracked(|| drop((format, name)));
        status
    })
}

/// Records the free of the allocation at `addr` in `d`.
#[no_mangle]
pub extern "C" fn memreplay_domain_free(d: MemreplayDomain, addr: u64) -> c_int {
    if !recorder::is_recording() {
        return OK;
    }
    guard(ERROR_INTERNAL, || match domain(d) {
        Ok(d) => {
            d.free(addr);
            OK
        }
        Err(code) => code,
    })
}

/// Records a reallocation in `d`: the recorder has no domain realloc event, so this is a
/// free of `old_addr` followed by an allocation of `new_size` bytes at `new_addr` (two
/// events, in that order). `old_addr` 0: only the allocation (realloc of NULL);
/// `new_addr` 0: only the free (a realloc to size 0 that freed).
#[no_mangle]
pub extern "C" fn memreplay_domain_realloc(
    d: MemreplayDomain,
    old_addr: u64,
    new_addr: u64,
    new_size: u64,
    align: u64,
) -> c_int {
    if !recorder::is_recording() {
        return OK;
    }
    guard(ERROR_INTERNAL, || match domain(d) {
        Ok(d) => {
            if old_addr != 0 {
                d.free(old_addr);
            }
            if new_addr != 0 {
                d.alloc_aligned(new_addr, new_size, align);
            }
            OK
        }
        Err(code) => code,
    })
}

/// Records what the driver reports for the memory `d` stands for: `budget` bytes allowed,
/// `usage` bytes used (Vulkan `heapBudget`/`heapUsage`, DXGI `Budget`/`CurrentUsage`).
#[no_mangle]
pub extern "C" fn memreplay_domain_budget(d: MemreplayDomain, budget: u64, usage: u64) -> c_int {
    if !recorder::is_recording() {
        return OK;
    }
    guard(ERROR_INTERNAL, || match domain(d) {
        Ok(d) => {
            d.budget(budget, usage);
            OK
        }
        Err(code) => code,
    })
}

/// Records the swap chain's or screen's size in pixels, from now on.
#[no_mangle]
pub extern "C" fn memreplay_display_size(width: u32, height: u32) {
    if recorder::is_recording() {
        guard((), || recorder::display_size(width, height));
    }
}
