//! Operating-system facts: what a thread reads once, when it registers (its OS id, its
//! name and the bounds of its stack, for a safe frame-pointer walk), and what the writer
//! thread samples of the whole process (resident and committed memory).

/// The calling thread's OS id.
pub(crate) fn os_thread_id() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) as u64 }
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        unsafe { libc::pthread_self() as u64 }
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// The calling thread's OS name into `buf`; returns its length (0 if unknown).
pub(crate) fn os_thread_name(buf: &mut [u8; 64]) -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_GET_NAME writes at most 16 bytes into `buf` (64).
        let r = unsafe { libc::prctl(libc::PR_GET_NAME, buf.as_mut_ptr() as libc::c_ulong, 0, 0, 0) };
        if r != 0 {
            return 0;
        }
        buf.iter().position(|&b| b == 0).unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = buf;
        0
    }
}

/// Whether `stack_bounds` reads `/proc/self/maps` itself instead of asking
/// `pthread_getattr_np`. Set for the C library's interposed allocator (`crate::raw`): there
/// a thread's first recorded allocation may come from inside `pthread_getattr_np` (which
/// allocates while it holds the thread's lock: its `fopen` of `/proc/self/maps` on the
/// main thread, its affinity buffer on others), and calling it again from the hook would
/// wait for that lock forever.
pub(crate) static BOUNDS_FROM_MAPS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The calling thread's stack as (lowest, highest) address, or (0, 0) if unknown.
/// On Linux's main thread this reads /proc/self/maps (through libc's malloc, not ours).
pub(crate) fn stack_bounds() -> (usize, usize) {
    #[cfg(target_os = "linux")]
    if BOUNDS_FROM_MAPS.load(std::sync::atomic::Ordering::Relaxed) {
        return stack_bounds_from_maps();
    }
    #[cfg(target_os = "linux")]
    // SAFETY: `attr` is zeroed storage for pthread_getattr_np to fill, destroyed once it
    // did; the other calls only write the locals they are given.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if ok {
            (addr as usize, addr as usize + size)
        } else {
            (0, 0)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        (0, 0)
    }
}

/// The calling thread's stack from `/proc/self/maps`, read with plain system calls into a
/// buffer on the stack (no allocation, no lock): the mapping that holds the stack pointer.
/// Its low end is lowered by the stack size limit (the main thread's stack grows down into
/// room not yet mapped).
#[cfg(target_os = "linux")]
fn stack_bounds_from_maps() -> (usize, usize) {
    let probe = 0u8;
    let sp = std::hint::black_box(&probe) as *const u8 as usize;
    // SAFETY: opens a file by a NUL-terminated name; the descriptor is closed below.
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return (0, 0);
    }
    let mut buf = [0u8; 4096];
    let mut held = 0;
    let mut found = None;
    'read: loop {
        // SAFETY: reads at most the free part of `buf` into it.
        let n = unsafe { libc::read(fd, buf[held..].as_mut_ptr().cast(), buf.len() - held) };
        if n <= 0 {
            break;
        }
        held += n as usize;
        let mut start = 0;
        while let Some(nl) = buf[start..held].iter().position(|&c| c == b'\n') {
            if let Some((lo, hi)) = parse_range(&buf[start..start + nl]) {
                if (lo..hi).contains(&sp) {
                    found = Some((lo, hi));
                    break 'read;
                }
            }
            start += nl + 1;
        }
        // Keep the unfinished line (a line longer than the buffer is dropped).
        buf.copy_within(start..held, 0);
        held -= start;
        if held == buf.len() {
            held = 0;
        }
    }
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(fd) };
    let Some((lo, hi)) = found else { return (0, 0) };
    // SAFETY: getrlimit writes the struct it is given.
    let limit = unsafe {
        let mut rl: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_STACK, &mut rl) == 0 && rl.rlim_cur != libc::RLIM_INFINITY {
            rl.rlim_cur as usize
        } else {
            8 << 20
        }
    };
    (lo.min(hi.saturating_sub(limit)), hi)
}

/// `start-end` at the head of a `/proc/self/maps` line.
#[cfg(target_os = "linux")]
fn parse_range(line: &[u8]) -> Option<(usize, usize)> {
    let range = line.split(|&c| c == b' ').next()?;
    let dash = range.iter().position(|&c| c == b'-')?;
    let hex = |h: &[u8]| usize::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok();
    Some((hex(&range[..dash])?, hex(&range[dash + 1..])?))
}

/// Reads what the OS counts of the process's memory. Linux: `/proc/self/statm`, kept
/// open and re-read with `pread` into a stack buffer (no allocation, a few microseconds).
pub(crate) struct ProcessMemoryProbe {
    #[cfg(target_os = "linux")]
    statm: Option<std::fs::File>,
    #[cfg(target_os = "linux")]
    page: u64,
}

impl ProcessMemoryProbe {
    pub(crate) fn open() -> ProcessMemoryProbe {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: sysconf only reads system configuration.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            ProcessMemoryProbe { statm: std::fs::File::open("/proc/self/statm").ok(), page: page.max(1) as u64 }
        }
        #[cfg(not(target_os = "linux"))]
        {
            ProcessMemoryProbe {}
        }
    }

    /// (resident bytes, committed bytes), or `None` where the OS does not tell.
    /// Committed is statm's `data` (data segment, heap, stacks and private anonymous
    /// mappings): the private memory the kernel has promised the process.
    pub(crate) fn sample(&mut self) -> Option<(u64, u64)> {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::FileExt as _;
            let mut buf = [0u8; 256];
            let n = self.statm.as_ref()?.read_at(&mut buf, 0).ok()?;
            parse_statm(&buf[..n]).map(|(resident, data)| (resident * self.page, data * self.page))
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }
}

/// (resident, data) pages from a statm line: "size resident shared text lib data dt".
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_statm(line: &[u8]) -> Option<(u64, u64)> {
    let mut fields = line.split(|&b| b == b' ' || b == b'\n').filter(|f| !f.is_empty()).map(|f| {
        f.iter()
            .try_fold(0u64, |n, &b| b.is_ascii_digit().then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))?)
    });
    let _size = fields.next()??;
    let resident = fields.next()??;
    let data = fields.nth(3)??;
    Some((resident, data))
}

/// CPU time the calling thread has used, in nanoseconds (0 where the OS does not say).
pub(crate) fn thread_cpu_ns() -> u64 {
    #[cfg(unix)]
    {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: writes one timespec into `t`, which lives across the call.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0 {
            return t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
        }
    }
    0
}

/// The recorder's own thread, started without `std::thread`: std's thread start-up
/// allocates on the new thread (its handle, its thread-local destructor list) before the
/// thread's closure could mark the thread as the recorder's, so those allocations would
/// look like the program's (a 544-byte block that never dies, for one). Here the first
/// thing the thread runs is `on_start`, before anything on it allocates.
#[cfg(unix)]
pub(crate) struct RecorderThread<T> {
    id: libc::pthread_t,
    start: *mut RecorderThreadStart<T>,
}

#[cfg(unix)]
struct RecorderThreadStart<T> {
    on_start: fn(),
    body: Option<Box<dyn FnOnce() -> T + Send>>,
    result: Option<T>,
}

// SAFETY: the start block is only touched by the thread until it ends, then by `join`.
#[cfg(unix)]
unsafe impl<T: Send> Send for RecorderThread<T> {}

#[cfg(unix)]
impl<T: Send + 'static> RecorderThread<T> {
    /// Starts a thread named `name` (at most 15 bytes, Linux's limit) that runs
    /// `on_start`, then `body`.
    pub(crate) fn spawn(
        name: &std::ffi::CStr,
        on_start: fn(),
        body: impl FnOnce() -> T + Send + 'static,
    ) -> std::io::Result<Self> {
        extern "C" fn run<T>(arg: *mut libc::c_void) -> *mut libc::c_void {
            // SAFETY: `arg` is the start block `spawn` leaked for this thread; `join`
            // reads it only after the thread ended.
            let start = unsafe { &mut *(arg as *mut RecorderThreadStart<T>) };
            (start.on_start)();
            if let Some(body) = start.body.take() {
                // A panic must not unwind into C; the result is then missing.
                start.result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).ok();
            }
            std::ptr::null_mut()
        }
        let start = Box::into_raw(Box::new(RecorderThreadStart { on_start, body: Some(Box::new(body)), result: None }));
        let mut id: libc::pthread_t = 0;
        let rc = if spawn_tests::refuse() {
            libc::EAGAIN
        } else {
            // SAFETY: `run::<T>` takes the start block made above, which outlives the thread.
            unsafe { libc::pthread_create(&mut id, std::ptr::null(), run::<T>, start.cast()) }
        };
        if rc != 0 {
            // SAFETY: the thread was not created: the block is still ours alone.
            drop(unsafe { Box::from_raw(start) });
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        debug_assert!(name.to_bytes().len() <= 15, "a thread name Linux would refuse");
        #[cfg(target_os = "linux")]
        // SAFETY: `id` is a live thread; the name is a C string of at most 15 bytes.
        unsafe {
            libc::pthread_setname_np(id, name.as_ptr());
        }
        #[cfg(not(target_os = "linux"))]
        let _ = name;
        spawn_tests::unjoined(1);
        Ok(RecorderThread { id, start })
    }

    /// Waits for the thread to end; its body's result, or `None` if it panicked.
    pub(crate) fn join(self) -> Option<T> {
        // SAFETY: `id` is the thread `spawn` created, joined once (`self` is consumed).
        unsafe { libc::pthread_join(self.id, std::ptr::null_mut()) };
        spawn_tests::unjoined(-1);
        // SAFETY: the thread has ended, so the start block is ours alone again.
        unsafe { Box::from_raw(self.start) }.result
    }
}

/// The unit tests' hold on `RecorderThread`, per calling thread: a spawn the OS refuses
/// on demand, and the count of threads started and not joined.
#[cfg(all(unix, test))]
pub(crate) mod spawn_tests {
    use std::cell::Cell;

    thread_local! {
        /// Spawns this thread makes before one is refused (`None`: none is).
        pub(crate) static REFUSE_AFTER: Cell<Option<u32>> = const { Cell::new(None) };
        /// Threads this thread started, less those it joined.
        pub(crate) static UNJOINED: Cell<i64> = const { Cell::new(0) };
    }

    /// Whether this spawn fails as if the OS refused it.
    pub(super) fn refuse() -> bool {
        REFUSE_AFTER.with(|r| match r.get() {
            Some(0) => true,
            Some(n) => {
                r.set(Some(n - 1));
                false
            }
            None => false,
        })
    }

    /// A thread was started (1) or joined (-1) by this one.
    pub(super) fn unjoined(delta: i64) {
        UNJOINED.with(|u| u.set(u.get() + delta));
    }
}

/// Outside the unit tests: nothing.
#[cfg(all(unix, not(test)))]
mod spawn_tests {
    #[inline(always)]
    pub(super) fn refuse() -> bool {
        false
    }

    #[inline(always)]
    pub(super) fn unjoined(_: i64) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_maps_give_this_threads_stack() {
        let local = 0u8;
        let here = &local as *const u8 as usize;
        let (lo, hi) = stack_bounds_from_maps();
        assert!(lo < here && here < hi, "{lo:#x}..{hi:#x} lacks {here:#x}");
        let (plo, phi) = std::thread::spawn(stack_bounds_from_maps).join().unwrap();
        assert!(plo < phi && !(plo..phi).contains(&here));
        assert_eq!(parse_range(b"7ffd1000-7ffd3000 rw-p 00000000 00:00 0  [stack]"), Some((0x7ffd1000, 0x7ffd3000)));
    }

    #[test]
    fn statm_lines_parse() {
        assert_eq!(parse_statm(b"12345 678 90 12 0 4321 0\n"), Some((678, 4321)));
        assert_eq!(parse_statm(b"1 2 3"), None);
        assert_eq!(parse_statm(b"1 x 3 4 5 6 7"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_probe_sees_this_process() {
        let (resident, committed) = ProcessMemoryProbe::open().sample().expect("statm is readable");
        assert!(resident > 0 && committed > 0);
        // Committing and touching 64 MiB shows in both figures.
        let v = vec![1u8; 64 << 20];
        let (r2, c2) = ProcessMemoryProbe::open().sample().unwrap();
        assert!(c2 >= committed + (60 << 20) && r2 >= resident + (60 << 20), "{resident} {committed} -> {r2} {c2}");
        drop(v);
    }
}
