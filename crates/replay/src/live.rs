//! Live allocations: per domain, the allocations by address (with tombstones for
//! recent frees), and the index of the big ones for attaches to interior pointers.

use super::addr_map::AddrMap;

/// A live allocation: 24 bytes, so that with its address an entry of the live-allocation
/// map is 32 bytes, two to a cache line and never across two: the replay's cost is
/// mostly the cache misses of that map. Container usage is kept aside
/// (`ReplayState::used`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Live {
    pub(crate) size: u64,
    /// Its sequence number: when it was made, and which of its thread's allocations is
    /// the latest (for temporaries).
    pub(crate) seq: u64,
    pub(crate) slot: u32,
    /// Index into `ReplayState::sites`, and [`Live::USAGE_REPORTED`].
    pub(crate) site_and_flag: u32,
}

/// Heap allocations of at least this size are indexed for interior-pointer lookups;
/// smaller ones are found by probing back from the address, at most `BIG / 8` lookups.
/// Attaches are rare and allocations are many: the index is what every allocation pays.
pub(crate) const BIG: u64 = 4096;

/// Freed addresses are remembered (to tell a double free from a free of memory allocated
/// before the recording) for at least this many frees of their domain.
pub const FREED_REMEMBERED: u64 = 1 << 16;

/// What a free found at its address.
pub(crate) enum Freed {
    /// The live allocation it ends.
    Live(Live),
    /// The address was freed already and not allocated again.
    Again,
    /// Nothing known: memory allocated before the recording (or freed so long ago that
    /// the address was forgotten, see [`FREED_REMEMBERED`]).
    Unknown,
}

/// One domain's live allocations by address, plus a tombstone for each address freed
/// since it was last allocated. The tombstone costs nothing extra: a free finds the entry
/// anyway, and marks it instead of removing it, so the replay probes the map once per
/// event. When the table is full, tombstones are a quarter of its entries or more and at
/// least half of them are older than [`FREED_REMEMBERED`] frees, those are swept instead
/// of growing the table, which bounds
/// memory by the live allocations (and a constant). Sweeping only a full table (rather
/// than whenever tombstones pile up) matters: each sweep rewrites the whole table, tens
/// of megabytes at a few hundred thousand live allocations, and with malloc-like address
/// reuse most frees leave a tombstone that the next allocation there takes over, so the
/// table rarely fills.
#[derive(Debug, Clone, Default)]
pub(crate) struct LiveAllocations {
    pub(crate) map: AddrMap<Live>,
    /// Tombstones in `map`.
    pub(crate) freed: u64,
    /// Frees so far: a tombstone's `seq` is the count at its free.
    pub(crate) frees: u64,
}

impl Live {
    /// `slot` of a tombstone.
    const FREED: u32 = u32::MAX;
    /// A bit of `site_and_flag`: the allocation reported its usage (it is in
    /// `ReplayState::used`), so a free looks there only then. (Sites are far fewer.)
    pub(crate) const USAGE_REPORTED: u32 = 1 << 31;

    #[inline(always)]
    pub(crate) fn site(&self) -> u32 {
        self.site_and_flag & !Live::USAGE_REPORTED
    }

    #[inline(always)]
    pub(crate) fn usage_reported(&self) -> bool {
        self.site_and_flag & Live::USAGE_REPORTED != 0
    }

    #[inline]
    pub(crate) fn is_live(&self) -> bool {
        self.slot != Live::FREED
    }
}

impl LiveAllocations {
    /// Records a live allocation; returns the live one it replaces, if the log says that
    /// address was still live.
    #[inline(always)]
    pub(crate) fn insert(&mut self, addr: u64, live: Live) -> Option<Live> {
        match self.entry(addr) {
            (old, true) if old.is_live() => Some(std::mem::replace(old, live)),
            (old, true) => {
                *old = live;
                self.freed -= 1;
                None
            }
            (new, false) => {
                *new = live;
                None
            }
        }
    }

    #[inline(always)]
    pub(crate) fn free(&mut self, addr: u64) -> Freed {
        self.frees += 1;
        let tombstone = Live { size: 0, seq: self.frees, slot: Live::FREED, site_and_flag: 0 };
        let found = match self.entry(addr) {
            (l, true) if l.is_live() => Freed::Live(std::mem::replace(l, tombstone)),
            (_, true) => return Freed::Again,
            (l, false) => {
                *l = tombstone;
                Freed::Unknown
            }
        };
        self.freed += 1;
        found
    }

    /// The entry of `addr`, added if absent (see [`AddrMap::entry`]); whether it was there.
    #[inline(always)]
    pub(crate) fn entry(&mut self, addr: u64) -> (&mut Live, bool) {
        self.make_room();
        if addr == u64::MAX {
            self.map.entry(addr)
        } else {
            self.map.entry_in_room(addr)
        }
    }

    /// Before an entry may be added: a full table is swept of old tombstones rather than
    /// grown, if they are many (at most [`FREED_REMEMBERED`] tombstones are recent).
    #[inline(always)]
    pub(crate) fn make_room(&mut self) {
        if self.map.is_full() {
            self.sweep_or_grow();
        }
    }

    #[inline(never)]
    pub(crate) fn sweep_or_grow(&mut self) {
        if self.freed >= 2 * FREED_REMEMBERED && self.freed * 4 >= self.map.len() as u64 {
            self.sweep();
        }
        if self.map.is_full() {
            self.map.grow();
        }
    }

    #[inline(never)]
    pub(crate) fn sweep(&mut self) {
        let oldest_kept = self.frees.saturating_sub(FREED_REMEMBERED);
        self.map.retain(|l| l.is_live() || l.seq > oldest_kept);
        self.freed = self.map.iter().filter(|(_, l)| !l.is_live()).count() as u64;
    }

    #[inline]
    pub(crate) fn get(&self, addr: u64) -> Option<&Live> {
        self.map.get(addr).filter(|l| l.is_live())
    }

    pub(crate) fn get_mut(&mut self, addr: u64) -> Option<&mut Live> {
        self.map.get_mut(addr).filter(|l| l.is_live())
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Live)> + '_ {
        self.map.iter().filter(|(_, l)| l.is_live())
    }
}

/// Live heap allocations that `owner_of` cannot find by probing back from an address
/// (see [`indexed`]), for attaches to interior pointers. Attaches are rare and
/// allocations many, so an allocation only appends its address here and a free does
/// nothing: the live map is the truth, and the index is sorted and cleaned of addresses
/// no longer live (or no longer indexed) when an attach asks, or when it has grown to
/// twice what it held after the last cleaning (so its memory stays proportional to the
/// live allocations).
#[derive(Debug, Clone, Default)]
pub(crate) struct InteriorIndex {
    /// Sorted and clean as of the last cleaning.
    pub(crate) sorted: Vec<u64>,
    /// Appended since.
    pub(crate) pending: Vec<u64>,
}

impl InteriorIndex {
    #[inline]
    pub(crate) fn add(&mut self, addr: u64, heap: &LiveAllocations) {
        self.pending.push(addr);
        if self.pending.len() >= (2 * self.sorted.len()).max(4096) {
            self.clean(heap);
        }
    }

    #[inline(never)]
    pub(crate) fn clean(&mut self, heap: &LiveAllocations) {
        self.sorted.append(&mut self.pending);
        self.sorted.sort_unstable();
        self.sorted.dedup();
        self.sorted.retain(|&a| heap.get(a).is_some_and(|l| indexed(a, l.size)));
    }

    /// The live indexed allocation containing `addr`.
    pub(crate) fn find<'h>(&mut self, addr: u64, heap: &'h LiveAllocations) -> Option<&'h Live> {
        if !self.pending.is_empty() {
            self.clean(heap);
        }
        let i = self.sorted.partition_point(|&a| a <= addr);
        let base = *self.sorted.get(i.checked_sub(1)?)?;
        heap.get(base).filter(|l| addr < base.wrapping_add(l.size))
    }
}

/// Whether a heap allocation goes in the interior-pointer index: a big one, or one whose
/// start is not 8-byte aligned (the probe in `owner_of` only visits aligned starts).
#[inline]
pub(crate) fn indexed(addr: u64, size: u64) -> bool {
    size >= BIG || addr % 8 != 0
}
