//! The recent-address lists of a block (SPEC.md §6.1): the encoder's and the decoder's,
//! kept alike, so that a free names its allocation and an allocation its reused address
//! in one tag byte.

use super::RECENT;

/// A short list of addresses, most recent first: the block-local memory that lets a free
/// name its allocation, and an allocation its reused address, in one tag byte instead
/// of a two-to-five-byte address delta (SPEC.md §6.1). Encoder and decoder keep it alike.
///
/// A ring: entry `i` is `addrs[(head + i) % RECENT]`, so putting an address first is one
/// store, and removing entry `i` moves only the `i` entries before it (or the ones after
/// it, whichever are fewer): usually none, as most hits are the first entry.
#[derive(Debug, Default, Clone)]
pub(super) struct RecentAddrs {
    /// The ring's `RECENT` slots, then a scratch slot: the moves that a removal makes
    /// without a branch but does not need land there (see [`RecentAddrs::remove_at`]).
    addrs: [u64; RECENT + 1],
    head: usize,
    pub(super) len: usize,
}

const RING: usize = RECENT - 1;
/// The scratch slot's index in `addrs`.
const SCRATCH: usize = RECENT;
/// Entries removed without a branch (see [`RecentAddrs::remove_at`]).
const NEAR: usize = 8;

impl RecentAddrs {
    /// The index of the first (most recent) entry equal to `addr`.
    ///
    /// Branch-free: all 16 slots are compared at once, the match mask (bit `2j` for slot
    /// `j`) is rotated from slot order into list order (entry `i` is slot `head + i`),
    /// and entries past `len` are masked off. The lists see two searches per heap event,
    /// with hits at any index, so a scan that stops early mispredicts often.
    #[inline(always)]
    pub(super) fn find(&self, addr: u64) -> Option<usize> {
        let ring = self.addrs.first_chunk::<RECENT>().expect("the ring's slots");
        let slots = u64::from(equal_slots(ring, addr));
        let in_order = ((slots | slots << (2 * RECENT)) >> (2 * self.head)) & ((1u64 << (2 * self.len)) - 1);
        (in_order != 0).then(|| (in_order.trailing_zeros() / 2) as usize)
    }

    /// Entry `i`, if there is one.
    #[inline]
    pub(super) fn get(&self, i: usize) -> Option<u64> {
        (i < self.len).then(|| self.addrs[(self.head + i) & RING])
    }

    /// Removes entry `i` (`i < len`): later entries move up by one.
    ///
    /// Most removals are of one of the first entries (on the replay benchmark's log,
    /// about half of them entry 0, with an average index near 2 for the others). The first
    /// `NEAR` are removed without a branch on `i`: the entries before it move one slot
    /// towards the older ones (a fixed `NEAR - 1` moves, those from `i` on into the
    /// scratch slot) and the head follows. Branching on `i == 0` and then looping `i`
    /// times mispredicted on about every removal: decoding that log took 10 % longer
    /// (`NEAR` 4: 5 % longer; 12 and 16 were slower than 8). A move into the scratch slot
    /// is a load and a store where masking a move off took a second load and three
    /// logic operations.
    #[inline(always)]
    pub(super) fn remove_at(&mut self, i: usize) {
        debug_assert!(i < self.len);
        if i < NEAR {
            for j in (0..NEAR - 1).rev() {
                let from = (self.head + j) & RING;
                let to = if j < i { (self.head + j + 1) & RING } else { SCRATCH };
                self.addrs[to] = self.addrs[from];
            }
            self.head = (self.head + 1) & RING;
            self.len -= 1;
        } else {
            self.remove_later(i);
        }
    }

    #[inline(never)]
    pub(super) fn remove_later(&mut self, i: usize) {
        if i <= self.len - 1 - i {
            // Move the `i` newer entries one slot towards the older ones.
            for j in (0..i).rev() {
                self.addrs[(self.head + j + 1) & RING] = self.addrs[(self.head + j) & RING];
            }
            self.head = (self.head + 1) & RING;
        } else {
            // Move the older entries one slot towards the newer ones.
            for j in i..self.len - 1 {
                self.addrs[(self.head + j) & RING] = self.addrs[(self.head + j + 1) & RING];
            }
        }
        self.len -= 1;
    }

    /// Removes the first entry equal to `addr`, if any.
    #[inline(always)]
    pub(super) fn remove(&mut self, addr: u64) {
        if let Some(i) = self.find(addr) {
            self.remove_at(i);
        }
    }

    /// Puts `addr` first, dropping the oldest entry if the list is full.
    #[inline]
    pub(super) fn push(&mut self, addr: u64) {
        // When full, the slot before the first entry holds the last one: overwritten.
        self.head = (self.head + RING) & RING;
        self.addrs[self.head] = addr;
        self.len = (self.len + 1).min(RECENT);
    }
}

/// Bit `2j` set for each `addrs[j] == addr` (the odd bits clear): spread out, because
/// that is how the vector comparison yields it, and packing the bits together took a
/// dozen more instructions on the path from an event's address to its next event.
///
/// On x86-64, with SSE2 (part of its baseline): the 32-bit halves of all 16 entries are
/// compared at once, packed to one byte each, and read out as a 32-bit mask in which an
/// entry matches when both its bits are set; about 30 instructions where the compiler's
/// own vectorization of the plain loop took about 75 (the decoder runs this once per
/// heap event).
#[inline(always)]
pub(super) fn equal_slots(addrs: &[u64; RECENT], addr: u64) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is always available on x86-64, and each unaligned load reads 16
        // bytes at `p.add(k)`, k < 8, all inside `addrs` (128 bytes).
        let halves = unsafe {
            let needle = _mm_set1_epi64x(addr as i64);
            let p = addrs.as_ptr().cast::<__m128i>();
            let eq = |k: usize| _mm_cmpeq_epi32(_mm_loadu_si128(p.add(k)), needle);
            let low = _mm_packs_epi16(_mm_packs_epi32(eq(0), eq(1)), _mm_packs_epi32(eq(2), eq(3)));
            let high = _mm_packs_epi16(_mm_packs_epi32(eq(4), eq(5)), _mm_packs_epi32(eq(6), eq(7)));
            (_mm_movemask_epi8(low) as u32) | (_mm_movemask_epi8(high) as u32) << 16
        };
        // Entry j is bits 2j and 2j + 1: it matches when both are set.
        halves & (halves >> 1) & 0x5555_5555
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut slots = 0u32;
        for (j, &a) in addrs.iter().enumerate() {
            slots |= u32::from(a == addr) << (2 * j);
        }
        slots
    }
}

/// The two lists of a block: live heap allocations and freed heap addresses.
#[derive(Debug, Default, Clone)]
pub(super) struct RecentHeap {
    pub(super) live: RecentAddrs,
    pub(super) freed: RecentAddrs,
}

/// A heap allocation or a free, for the lists: an allocation takes its address out of
/// `freed` and puts it in `live`, a free the other way round.
#[derive(Debug, Clone, Copy)]
pub(super) enum HeapSide {
    Alloc,
    Free,
}

impl RecentHeap {
    /// The list a heap event of `side` takes its address out of, and the one it puts it in.
    #[inline(always)]
    pub(super) fn lists(&mut self, side: HeapSide) -> (&mut RecentAddrs, &mut RecentAddrs) {
        match side {
            HeapSide::Alloc => (&mut self.freed, &mut self.live),
            HeapSide::Free => (&mut self.live, &mut self.freed),
        }
    }

    /// After a heap event of `side` at `addr`.
    #[inline(always)]
    pub(super) fn moved(&mut self, side: HeapSide, addr: u64) {
        let (from, to) = self.lists(side);
        from.remove(addr);
        to.push(addr);
    }

    /// After a heap event of `side` that named `addr` as entry `i` of the list it takes
    /// it out of (`FREE_RECENT`, `ALLOC_REUSE`): the first entry equal to it is entry `i`
    /// or one before, so there is nothing to search when `i` is 0, the usual case.
    #[inline(always)]
    pub(super) fn moved_entry(&mut self, side: HeapSide, i: usize, addr: u64) {
        let (from, to) = self.lists(side);
        let first = if i == 0 { 0 } else { from.find(addr).unwrap_or(i) };
        from.remove_at(first);
        to.push(addr);
    }

    /// After any heap allocation at `addr` (an `ALLOC`, `ALLOC_REUSE` or a realloc's new block).
    #[inline(always)]
    pub(super) fn allocated(&mut self, addr: u64) {
        self.moved(HeapSide::Alloc, addr);
    }

    /// After any heap free of `addr` (a `FREE`, `FREE_RECENT` or a realloc's old block).
    #[inline(always)]
    pub(super) fn freed(&mut self, addr: u64) {
        self.moved(HeapSide::Free, addr);
    }
}
