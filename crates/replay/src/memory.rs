//! The memory ceiling: how much heap a command may take before it stops with an error
//! that says what grew, rather than failing an allocation and aborting.
//!
//! The library cannot count the heap itself; the program does (`replay-cli` installs a
//! counting global allocator) and sets the ceiling once with [`set_ceiling`]. The replay
//! asks [`over_ceiling`] between runs of records and stops where it stands; the report
//! then fails with the parts of the replay state that took the room
//! ([`crate::ReplayState::memory_by_part`]). Without a ceiling set, nothing is
//! checked.

use std::sync::OnceLock;

/// A limit on the heap in use, and how to measure it.
#[derive(Debug, Clone, Copy)]
pub struct Ceiling {
    /// Bytes of heap in use past which a replay stops.
    pub limit: u64,
    /// Bytes of heap in use now.
    pub in_use: fn() -> u64,
}

static CEILING: OnceLock<Ceiling> = OnceLock::new();

/// Sets the process's ceiling; the first call wins (it returns `false` after that).
pub fn set_ceiling(ceiling: Ceiling) -> bool {
    CEILING.set(ceiling).is_ok()
}

/// `(in use, limit)` when the heap in use is past the ceiling.
#[inline]
pub fn over_ceiling() -> Option<(u64, u64)> {
    let c = CEILING.get()?;
    let in_use = (c.in_use)();
    (in_use > c.limit).then_some((in_use, c.limit))
}

/// Why a command stopped: the heap passed the ceiling while replaying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRoom {
    /// Heap in use and the ceiling when the replay stopped.
    pub in_use: u64,
    /// The ceiling when the replay stopped.
    pub limit: u64,
    /// Events replayed by then, and in the log.
    pub events_done: u64,
    /// Events in the log (from its blocks' frames).
    pub events_total: u64,
    /// The replay state's largest parts: (what, bytes, how many), largest first.
    pub parts: Vec<(&'static str, u64, u64)>,
}

/// The default ceiling for a machine: half of what the process can have (the smaller of
/// physical memory and its address-space and data limits), so that one doubling of the
/// largest buffer still fits under the hard limit. `None` where nothing is known.
pub fn default_ceiling() -> Option<u64> {
    let room = [physical_memory(), process_limit()].into_iter().flatten().min()?;
    Some(room / 2)
}

/// The process's address-space or data-segment limit, the smaller, if either is set.
pub fn process_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let limit = |resource| {
            let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: `r` is a valid rlimit for the call to fill in.
            let ok = unsafe { libc::getrlimit(resource, &mut r) } == 0;
            // `rlim_t` is not `u64` on every Unix.
            #[allow(clippy::unnecessary_cast)]
            (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur as u64)
        };
        [limit(libc::RLIMIT_AS), limit(libc::RLIMIT_DATA)].into_iter().flatten().min()
    }
    #[cfg(not(unix))]
    None
}

/// Physical memory of the machine, where the OS says.
fn physical_memory() -> Option<u64> {
    #[cfg(unix)]
    {
        // SAFETY: sysconf only reads system configuration.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        (pages > 0 && page > 0).then(|| pages as u64 * page as u64)
    }
    #[cfg(not(unix))]
    None
}

/// Makes glibc's `malloc` serve every block of 128 KiB or more from a mapping of its own,
/// handed back to the system when freed. A program whose main work is replaying big logs
/// calls it once, at its start (`replay-cli` does); elsewhere it does nothing.
///
/// By default glibc raises that threshold to the size of the biggest such block freed so
/// far (up to 32 MiB), after which big blocks come from the heap, where memory freed
/// stays in the process. The replay rebuilds its live-allocation tables as a log grows:
/// under the default, the peak memory of a replay was 10-20 % higher.
pub fn return_big_blocks_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` changes a tuning parameter of glibc's allocator (it is safe to call
    // from any thread at any time), and M_MMAP_THRESHOLD takes any size up to 32 MiB.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}
