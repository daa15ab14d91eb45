//! Ordering keys: the sequence numbers that place every thread's events in one global
//! order (SPEC.md §7.9), without a counter that every thread writes.
//!
//! A single atomic counter gives a total order for the price of one cache line that
//! every allocating thread writes: measured on 16 cores, that line capped the whole
//! process at about 18 M events/s and cost ~750 ns of CPU per event. Keys are instead a
//! hybrid logical clock, kept per thread and made to agree where threads meet:
//!
//! - **Per thread**: each key is at least the thread's previous key + 1, so a stream's
//!   keys increase.
//! - **Per address**: every event on an address reads and raises that address's slot in
//!   a table (`slot_for`), after the inner allocator returns a block and before it is
//!   given a block back. If thread A frees `p` and thread B's allocator then hands `p` out
//!   again, A raised the slot before releasing `p`, so B reads it after acquiring `p`, and
//!   B's key is larger: the allocator's own synchronization carries the order, exactly as
//!   it carried the counter's. The same holds for an allocation freed on another thread,
//!   a realloc's two halves and usage changes. Addresses that share a slot
//!   only add constraints that are already true; they cannot break the order.
//! - **Parity**: labels and frame starts take odd keys, every other event even ones, so
//!   no event shares a marker's key (ties between other events are concurrent events,
//!   which the merge orders by stream).
//! - **Markers**: a label, frame start or attach raises a process-wide floor (`FLOOR`)
//!   that every event reads, so what any thread does after it has seen a marker sorts
//!   after it. An attach names an address inside a block, not the block's own: it takes
//!   its key after a fresh clock read, which no earlier event's key exceeds (below), so
//!   it sorts after the block's allocation, and the floor puts the block's free after it.
//! - **Clock**: a thread raises its key to the nanoseconds since the process first
//!   recorded every `EVENTS_PER_CLOCK` events, so where nothing relates two threads'
//!   events, their keys follow real time to within that many events. A key moves by 1
//!   per event otherwise, less than the time any event takes, so a key never runs ahead of
//!   the clock (`Order::clock`, CLOCK_MONOTONIC, which the kernel keeps consistent across
//!   CPUs) and a stream's key deltas stay small in the log.
//!
//! Each key costs a read of the floor (a line written only by markers) and, usually, one
//! atomic max on the slot, a line that the threads using that memory share the way they
//! share the memory itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// Slots in the address table: 2^20 × 8 bytes = 8 MiB of address space reserved once per
/// process; the pages are zero until touched, and only those of memory in use are (one
/// 4 KiB page of slots per 128 MiB of memory).
const SLOT_BITS: u32 = 20;
/// Bytes of memory per slot: the blocks in one 256 KiB granule share a slot. Coarse on
/// purpose: a slot line then covers 2 MiB of a thread's memory, and a program's slots
/// fit in few lines that stay cached. With 128-byte granules the misses on slot lines
/// cost the game-like workload ~10 % more CPU, with 4 KiB ~2 % (RESULTS §24); a program
/// whose blocks spread over gigabytes (the random churn of 16 B–1 MiB blocks) waited on
/// the slot's load for most of its hooks' time: 131–149 ns per event in the hooks with
/// 4 KiB granules, 63–72 with 64 KiB (RESULTS §39), 40–64 with 64 KiB and 23–33 with
/// 256 KiB in one later series (1 MiB: 20–30, RESULTS §42). Threads rarely allocate from
/// the same granule (allocators give each thread its own arena, 64 MiB-aligned in
/// glibc), and blocks that share a slot only add constraints that hold anyway: a
/// thread's keys then follow another's a little more often. The logs of cross-thread
/// frees and of the churn are the same size with 256 KiB as with 64 KiB (within their
/// run-to-run spread); with 1 MiB the cross-thread ones grew 0.4–0.5 %.
const GRANULE_BITS: u32 = 18;

/// Events between two clock reads that raise a thread's key (a read costs ~20 ns).
pub(crate) const EVENTS_PER_CLOCK: u32 = 64;

/// The address table, the clock's origin: made by the first session, kept for the
/// process (keys stay comparable across sessions, and a slot only ever grows).
pub(crate) struct Order {
    slots: &'static [AtomicU64],
    origin: Instant,
}

/// On its own cache line: read by every event, written only by markers.
#[repr(align(128))]
struct Floor(AtomicU64);
static FLOOR: Floor = Floor(AtomicU64::new(0));

impl Order {
    /// The process's table, made on first use; `None` if its memory cannot be had.
    pub(crate) fn get() -> Option<&'static Order> {
        static ORDER: OnceLock<Option<Order>> = OnceLock::new();
        ORDER
            .get_or_init(|| {
                let layout = std::alloc::Layout::array::<AtomicU64>(1 << SLOT_BITS).ok()?;
                // Zeroed memory from `calloc`, which maps fresh pages for a block this
                // large: nothing is written, so untouched slots cost no memory.
                // SAFETY: the layout has a non-zero size.
                let p = unsafe { std::alloc::GlobalAlloc::alloc_zeroed(&std::alloc::System, layout) };
                if p.is_null() {
                    return None;
                }
                // SAFETY: `p` is a live, zeroed, suitably aligned block of 2^SLOT_BITS
                // `AtomicU64`s (all-zero bytes are a valid `AtomicU64`), leaked for the
                // process.
                let slots = unsafe { std::slice::from_raw_parts(p.cast::<AtomicU64>(), 1 << SLOT_BITS) };
                Some(Order { slots, origin: Instant::now() })
            })
            .as_ref()
    }

    /// Nanoseconds since the process first recorded, plus 1 (keys start at 1: 0 means
    /// "no key" in the log).
    #[inline]
    pub(crate) fn clock(&self) -> u64 {
        self.clock_at(Instant::now())
    }

    /// [`Order::clock`] at the instant `now`, for a caller that reads the time anyway.
    #[inline]
    pub(crate) fn clock_at(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_nanos() as u64 + 1
    }

    /// The slot of the block at `addr` in `domain` (0 for the heap): the granule's number
    /// modulo the table's size, so consecutive granules get consecutive slots and a
    /// thread's nearby blocks share the table's cache lines, not other threads'. The table
    /// spans 256 GiB of addresses, so allocators' arenas (64 MiB apart in glibc) do not
    /// meet in it; granules 256 GiB apart, and other domains' blocks (moved by a constant per
    /// domain), may share a slot, which only adds constraints that hold anyway. (A heap
    /// event's slot costs a shift and a mask.)
    #[inline(always)]
    pub(crate) fn slot_for(&self, domain: u32, addr: u64) -> &AtomicU64 {
        let domain_offset = u64::from(domain).wrapping_mul(0x9e37_79b9);
        let i = (((addr >> GRANULE_BITS) ^ domain_offset) & ((1 << SLOT_BITS) - 1)) as usize;
        // SAFETY: `i` is masked to the table's length.
        unsafe { self.slots.get_unchecked(i) }
    }
}

/// The next key of a thread whose previous key was `last`, for an event on the block
/// whose slot is `at` (None: an event on no block).
#[inline(always)]
pub(crate) fn next_key(last: u64, at: Option<&AtomicU64>) -> u64 {
    let key = (last + 1).max(FLOOR.0.load(Ordering::Relaxed));
    // Even: markers take the odd keys, so no other event shares a marker's key.
    let key = key + (key & 1);
    let Some(slot) = at else { return key };
    // One read-modify-write in the common case (the slot is below the thread's key): a
    // load first would fetch the line shared and then again to write it.
    // Relaxed is enough: what orders two events on one block across threads is the
    // program's (or the allocator's) own synchronization between them, which makes the
    // later event's access see the earlier one's raise.
    let seen = slot.fetch_max(key, Ordering::Relaxed);
    if seen < key {
        return key;
    }
    // `seen` is an event's key, so even.
    slot.fetch_max(seen + 2, Ordering::Relaxed);
    seen + 2
}

/// The next key of a marker (label, frame start) on a thread whose previous key was
/// `last`: odd, so that it is never another event's. A report can then place a point "at
/// the marker" by its key alone: what sorts before it is what has a smaller key.
#[inline]
pub(crate) fn next_marker_key(last: u64) -> u64 {
    (last + 1).max(FLOOR.0.load(Ordering::Relaxed)) | 1
}

/// Raises the floor past a marker's key: every event that reads it afterwards sorts
/// later. Strictly past it: an equal key on another stream would sort by stream number,
/// possibly before the marker.
#[inline]
pub(crate) fn raise_floor(key: u64) {
    FLOOR.0.fetch_max(key + 1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_carries_the_order_between_threads_whatever_their_keys() {
        let slot = AtomicU64::new(0);
        // Thread A is far ahead (a busy thread, or a late clock read) and frees the block;
        // thread B, behind, gets the block again: B's key comes after A's.
        let a = next_key(1_000_000, Some(&slot));
        let b = next_key(5, Some(&slot));
        assert!(a > 1_000_000 && b > a, "a = {a}, b = {b}");
        // B frees it, A reuses it: after B's free again.
        let b_free = next_key(b, Some(&slot));
        let a_again = next_key(a, Some(&slot));
        assert!(b_free > b && a_again > b_free);
    }

    #[test]
    fn markers_raise_every_threads_next_key_past_their_own() {
        let marker = next_marker_key(u64::MAX / 2);
        raise_floor(marker);
        // Another thread, far behind: its next key is past the marker's, not equal to it.
        let after = next_key(5, None);
        assert!(after > marker, "{after}");
        FLOOR.0.store(0, Ordering::Relaxed);
    }

    #[test]
    fn markers_have_odd_keys_and_every_other_event_even_ones() {
        let slot = AtomicU64::new(0);
        let mut last = 0;
        for i in 0..100u64 {
            let key = if i % 7 == 3 { next_marker_key(last) } else { next_key(last, (i % 2 == 0).then_some(&slot)) };
            assert!(key > last, "a thread's keys increase");
            assert_eq!(key % 2 == 1, i % 7 == 3, "key {key} of event {i}");
            last = key;
        }
        // Another thread behind the slot: past it, and even.
        let before = slot.load(Ordering::Relaxed);
        assert_eq!(next_key(1, Some(&slot)), before + 2);
    }

    #[test]
    fn neighbouring_blocks_share_lines_and_arenas_stay_apart() {
        let order = Order::get().expect("the table");
        let index = |domain: u32, addr: u64| {
            (order.slot_for(domain, addr) as *const AtomicU64 as usize - order.slots.as_ptr() as usize) / 8
        };
        let base = 0x7f00_0000_0000u64;
        let granule = 1u64 << GRANULE_BITS;
        // Blocks in one granule share a slot; the next granule has the next slot.
        assert_eq!(index(0, base), index(0, base + granule - 1));
        assert_eq!((index(0, base) + 1) % (1 << SLOT_BITS), index(0, base + granule));
        // The same offset 64 MiB apart (two arenas) and in another domain: elsewhere.
        assert_ne!(index(0, base + granule), index(0, base + (64 << 20) + granule));
        assert_ne!(index(0, base + granule), index(1, base + granule));
    }
}
