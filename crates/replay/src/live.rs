//! Live allocations: per domain, the allocations by address (with tombstones for
//! recent frees), and the index of the big ones for attaches to interior pointers.

use super::addr_map::{AddrMap, ZeroIsValid};
use super::ids::FxMap;
use super::sorted_map::SortedMap;

/// A live allocation, as the replay reads and writes it. The table keeps it packed in 16
/// bytes ([`Packed`]); this is the unpacked value its methods take and give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Live {
    pub(crate) size: u64,
    /// Its sequence number: when it was made, and which of its thread's allocations is
    /// the latest (for temporaries).
    pub(crate) seq: u64,
    pub(crate) slot: u32,
    /// Index into `ReplayState::sites`.
    pub(crate) site: u32,
    /// The allocation reported its usage (it is in `ReplayState::used`), so a free looks
    /// there only then.
    pub(crate) usage_reported: bool,
}

/// A table entry's value: 16 bytes, so that with its address an entry is 24 (it was 32:
/// a quarter less memory per live allocation, and more entries per cache line).
///
/// `place`: the slot (low half) and the site with the usage flag (high half); a slot of
/// [`Packed::FREED`] marks a tombstone, whose `size_seq` is then the domain's free count
/// at the free. `size_seq` of a live allocation: the size (low [`SIZE_BITS`]), the
/// sequence number less its epoch's base ([`OFFSET_BITS`]) and the epoch (top byte).
/// Sizes and sequence numbers are up to 64 bits, but nearly every allocation is under
/// 1 MiB, and the recorder's sequence numbers are nanoseconds of the recording: the
/// epochs ([`Epochs`]) are 255 bases, each the start of a 68-second span (2³⁶ ns),
/// given out as the spans come and taken back when no live allocation is in them. An
/// allocation that does not fit (a bigger size, every epoch in use) is [`WIDE`]: its
/// size and number are kept in full beside the table.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Packed {
    place: u64,
    size_seq: u64,
}

// SAFETY: two integers: all-zero bytes are a live allocation of 0 bytes in slot 0.
unsafe impl ZeroIsValid for Packed {}

const SIZE_BITS: u32 = 20;
const OFFSET_BITS: u32 = 36;
/// The epoch byte of an allocation kept in full in [`FullValues::wide`].
const WIDE: u8 = u8::MAX;
/// Epochs 0..=254 (255 is [`WIDE`]).
const EPOCHS: usize = WIDE as usize;

impl Packed {
    /// `place`'s slot half in a tombstone.
    const FREED: u32 = u32::MAX;
    /// An entry of the sorted tier that stands for nothing: its address is in the hash
    /// table now. (A tombstone's free count is at least 1.)
    const DEAD: Packed = Packed { place: Packed::FREED as u64, size_seq: 0 };
    /// A bit of `place`'s site half: the allocation reported its usage. (Sites are fewer
    /// than 2³¹; `ReplayState::site` checks it.)
    pub(crate) const USAGE_REPORTED: u32 = 1 << 31;

    #[inline(always)]
    fn is_live(&self) -> bool {
        self.place as u32 != Packed::FREED
    }

    #[inline(always)]
    fn is_dead(&self) -> bool {
        !self.is_live() && self.size_seq == 0
    }

    #[inline(always)]
    fn epoch(&self) -> u8 {
        (self.size_seq >> (SIZE_BITS + OFFSET_BITS)) as u8
    }

    #[inline(always)]
    fn tombstone(frees: u64) -> Packed {
        Packed { place: u64::from(Packed::FREED), size_seq: frees }
    }
}

/// The bases of the sequence-number spans that packed allocations refer to, and how
/// many live allocations each holds (see [`Packed`]).
#[derive(Debug, Clone)]
pub(crate) struct Epochs {
    base: [u64; EPOCHS],
    live: [u64; EPOCHS],
    /// The epoch new allocations go to while their numbers are in its span.
    current: u8,
}

impl Default for Epochs {
    fn default() -> Self {
        Epochs { base: [0; EPOCHS], live: [0; EPOCHS], current: 0 }
    }
}

impl Epochs {
    /// The epoch whose span holds `seq`, given out if need be; [`WIDE`] if none can be.
    #[inline(always)]
    fn of(&mut self, seq: u64) -> u8 {
        let c = self.current;
        if seq.wrapping_sub(self.base[c as usize]) < 1 << OFFSET_BITS {
            c
        } else {
            self.other(seq)
        }
    }

    /// [`Epochs::of`] past the current epoch: one whose span holds `seq`, else an unused
    /// one that starts at `seq`. Once per 68 s of a recording, so a scan is cheap.
    #[cold]
    #[inline(never)]
    fn other(&mut self, seq: u64) -> u8 {
        let fits = |e: usize, base: &[u64; EPOCHS]| seq.wrapping_sub(base[e]) < 1 << OFFSET_BITS;
        let found = (0..EPOCHS).find(|&e| self.live[e] > 0 && fits(e, &self.base)).or_else(|| {
            let e = (0..EPOCHS).find(|&e| self.live[e] == 0)?;
            self.base[e] = seq;
            Some(e)
        });
        match found {
            Some(e) => {
                self.current = e as u8;
                e as u8
            }
            None => WIDE,
        }
    }
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
/// since it was last allocated, in two tiers: the recent ones in a hash table, and those
/// that outlived a filling of it sorted by address.
///
/// **The hash table** (`map`) is a third full at most, for speed, so an entry of 24
/// bytes costs 72 to 144. Tombstones cost nothing extra there: a free finds the entry
/// anyway, and marks it instead of removing it, so the replay probes the map once per
/// event. When the table is full, tombstones are a quarter of its entries or more and at
/// least half of them are older than [`FREED_REMEMBERED`] frees, those are swept instead
/// of growing the table, which bounds memory by the live allocations (and a constant).
/// Sweeping only a full table (rather than whenever tombstones pile up) matters: each
/// sweep rewrites the whole table, tens of megabytes at a few hundred thousand live
/// allocations, and with malloc-like address reuse most frees leave a tombstone that the
/// next allocation there takes over, so the table rarely fills.
///
/// **The sorted tier** (`old`, a [`Tier`]) holds, 16 bytes each (20 in a log with about
/// as many places as allocations), the allocations still live from before the table
/// last filled: when it fills again, they move there (see [`LiveAllocations::settle`])
/// instead of the table growing, as many as can go for a few copies of the tier's
/// entries each. Most allocations die young and never move; those that move are the
/// program's long-lived data, which a big program holds millions of. An address the
/// hash table has no entry for is looked up in the tier, which answers most such lookups
/// without reading its array. A free there marks the entry a tombstone in place, and an
/// allocation at an address the tier holds marks its entry dead ([`Packed::DEAD`]): the
/// hash table's entry is the one that counts, and takes the dead entry's place if it
/// moves there too. Dead entries and tombstones older than [`FREED_REMEMBERED`] frees
/// are dropped by a pass over the tier at a move, once they are a sixteenth of it more
/// than the last pass kept.
#[derive(Debug, Clone, Default)]
pub(crate) struct LiveAllocations {
    pub(crate) map: AddrMap<Packed>,
    old: Tier,
    full: FullValues,
    /// Tombstones in `map`.
    pub(crate) freed: u64,
    /// Entries of `old` that are not live: tombstones and dead ones; and how many the
    /// last pass that dropped such entries kept (tombstones too recent to forget).
    old_ended: usize,
    old_ended_kept: usize,
    /// Frees so far: a tombstone's `size_seq` is the count at its free.
    pub(crate) frees: u64,
    /// The latest sequence number allocated, and what it was when `map` last filled:
    /// the allocations before that outlived a filling.
    latest: u64,
    filled_at: u64,
    /// Whether a lookup announced ahead loads the tier's filter line too (see
    /// [`LiveAllocations::review_prefetch`]), and the lookups since the last review
    /// that the hash table sent on to the tier's filter.
    prefetch_tier: bool,
    tier_lookups: u64,
    /// What the moves did, for the tests.
    #[cfg(test)]
    moves: MoveCounts,
}

/// What [`LiveAllocations::settle`] did so far (tests only).
#[cfg(test)]
#[derive(Debug, Clone, Default)]
struct MoveCounts {
    /// Moves that left long-lived allocations below the cut in the table.
    cut: usize,
    /// Allocations that moved into a dead entry of their address.
    revived: usize,
    /// Passes that dropped the tier's ended entries.
    passes: usize,
}

/// The fewest long-lived allocations worth moving to the sorted tier (fewer in the unit
/// tests, so that their few hundred thousand operations make many moves).
const SETTLE_LEAST: usize = if cfg!(test) { 1 << 10 } else { 1 << 14 };
/// A move copies at most this many of the tier's entries per allocation moved: the
/// merge shifts the entries above the lowest address moved, and the long-lived
/// allocations below the cut that keeps to this bound stay in the table (see
/// [`LiveAllocations::cut`]).
const SETTLE_SHARE: usize = 16;

/// The tier's prefetch is reviewed every this many frees...
const PREFETCH_REVIEW: u64 = 1 << 12;
/// ... and kept on while lookups that read the tier's filter were at least one in this
/// many of them.
const PREFETCH_SHARE: u64 = 32;

/// The sorted tier. While the places of its allocations (slot, site and usage flag) are
/// few against its entries, as in most programs (a place per callstack and context, a
/// few tens of thousands), it keeps each value in 12 bytes ([`Tiered`]): the place as an
/// index into a table of the places moved there. A log whose allocations have places
/// nearly as many as they are (thousands of contexts, each with its own sites) would
/// pay more for that table than it saves: once the places pass [`PLACES_LEAST`] and an
/// eighth of the entries, the tier turns for good to keeping the [`Packed`] values
/// whole (16 bytes), in one pass over its values.
#[derive(Debug, Clone, Default)]
struct Tier {
    compact: SortedMap<Tiered>,
    /// Each place moved to `compact`, by index, and the index of each (keyed by
    /// [`mixed`] place).
    places: Vec<u64>,
    place_ids: FxMap<u64, u32>,
    /// The place packed last, and its index.
    last_place: Option<(u64, u32)>,
    /// The values whole, once `compact` held too many places (then it is empty).
    whole: SortedMap<Packed>,
    is_whole: bool,
}

/// Places the compact tier takes in any case (see [`Tier`]).
const PLACES_LEAST: usize = 1 << 16;

/// A [`Packed`] in the sorted tier: the index of its place (or [`Packed::FREED`] for a
/// tombstone or a dead entry), and `size_seq` in two halves (so that the value is 12
/// bytes with an alignment of 4, and an entry with its key's low half 16).
#[derive(Debug, Clone, Copy, Default)]
struct Tiered {
    place: u32,
    size_seq: [u32; 2],
}

/// `place` with every bit of it in the low bits, one to one: an Fx hash's low bits,
/// which pick a table's bucket, come from the key's low bits only, and a place's slot
/// (low half) or site (high half) may be the same for all.
#[inline(always)]
fn mixed(place: u64) -> u64 {
    let x = place.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ x >> 32
}

impl Tier {
    fn len(&self) -> usize {
        self.compact.len() + self.whole.len()
    }

    #[inline(always)]
    fn find(&self, addr: u64) -> Option<usize> {
        match self.is_whole {
            false => self.compact.find(addr),
            true => self.whole.find(addr),
        }
    }

    /// Whether a lookup of `addr` reads the filter (see [`SortedMap::covers`]).
    #[inline(always)]
    fn covers(&self, addr: u64) -> bool {
        match self.is_whole {
            false => self.compact.covers(addr),
            true => self.whole.covers(addr),
        }
    }

    #[inline(always)]
    fn prefetch(&self, addr: u64) {
        match self.is_whole {
            false => self.compact.prefetch(addr),
            true => self.whole.prefetch(addr),
        }
    }

    fn count_below(&self, addr: u64) -> usize {
        match self.is_whole {
            false => self.compact.count_below(addr),
            true => self.whole.count_below(addr),
        }
    }

    /// The value of the entry at `i` (from [`Tier::find`]).
    #[inline(always)]
    fn get(&self, i: usize) -> Packed {
        match self.is_whole {
            false => unpack(&self.places, self.compact.value(i)),
            true => *self.whole.value(i),
        }
    }

    /// Sets the value of the entry at `i`.
    #[inline(always)]
    fn set(&mut self, i: usize, p: Packed) {
        match self.is_whole {
            false => *self.compact.value_mut(i) = self.pack(p),
            true => *self.whole.value_mut(i) = p,
        }
    }

    fn iter(&self) -> impl Iterator<Item = (u64, Packed)> + '_ {
        let compact = self.compact.iter().map(|(a, t)| (a, unpack(&self.places, t)));
        compact.chain(self.whole.iter().map(|(a, &p)| (a, p)))
    }

    fn retain(&mut self, mut keep: impl FnMut(&Packed) -> bool) {
        let places = &self.places;
        self.compact.retain(|t| keep(&unpack(places, t)));
        self.whole.retain(keep);
    }

    /// Adds `batch` (see [`SortedMap::absorb`]).
    fn absorb(&mut self, batch: &[(u64, Packed)]) {
        if !self.is_whole {
            let tiered: Vec<(u64, Tiered)> = batch.iter().map(|&(a, p)| (a, self.pack(p))).collect();
            self.compact.absorb(&tiered);
            if self.places.len() > PLACES_LEAST.max(self.compact.len() / 8) {
                let places = std::mem::take(&mut self.places);
                (self.place_ids, self.last_place) = (FxMap::default(), None);
                self.whole = std::mem::take(&mut self.compact).map_values(|t| unpack(&places, t));
                self.is_whole = true;
            }
        } else {
            self.whole.absorb(batch);
        }
    }

    fn heap_bytes(&self) -> u64 {
        let ids = self.place_ids.capacity() * (std::mem::size_of::<(u64, u32)>() + 1);
        self.compact.heap_bytes() + self.whole.heap_bytes() + (self.places.capacity() * 8 + ids) as u64
    }

    #[inline(always)]
    fn pack(&mut self, p: Packed) -> Tiered {
        let size_seq = [p.size_seq as u32, (p.size_seq >> 32) as u32];
        if !p.is_live() {
            return Tiered { place: Packed::FREED, size_seq };
        }
        // Neighbours in a batch (sorted by address) are often made by the same code.
        if let Some(&(last, id)) = self.last_place.as_ref().filter(|l| l.0 == p.place) {
            debug_assert_eq!(self.places[id as usize], last);
            return Tiered { place: id, size_seq };
        }
        let next = self.places.len() as u32;
        let place = *self.place_ids.entry(mixed(p.place)).or_insert(next);
        if place == next {
            // Fewer places than live allocations, and those fewer than 2³² - 1.
            self.places.push(p.place);
        }
        self.last_place = Some((p.place, place));
        Tiered { place, size_seq }
    }
}

/// The [`Packed`] value `t` stands for, its place one of `places`.
#[inline(always)]
fn unpack(places: &[u64], t: &Tiered) -> Packed {
    let size_seq = u64::from(t.size_seq[0]) | u64::from(t.size_seq[1]) << 32;
    let place = match t.place {
        Packed::FREED => u64::from(Packed::FREED),
        i => places[i as usize],
    };
    Packed { place, size_seq }
}

/// What a packed entry leaves out: its epoch's base, or the whole size and number of a
/// [`WIDE`] one.
#[derive(Debug, Clone, Default)]
struct FullValues {
    epochs: Epochs,
    /// (size, seq) of the [`WIDE`] allocations, by address.
    wide: FxMap<u64, (u64, u64)>,
}

impl FullValues {
    /// Packs `live` (at `addr`) for the table, counting it in its epoch.
    #[inline(always)]
    fn pack(&mut self, addr: u64, live: Live) -> Packed {
        let flag = if live.usage_reported { Packed::USAGE_REPORTED } else { 0 };
        let place = u64::from(live.slot) | u64::from(live.site | flag) << 32;
        let epoch = if live.size < 1 << SIZE_BITS { self.epochs.of(live.seq) } else { WIDE };
        let size_seq = if epoch == WIDE {
            self.wide.insert(addr, (live.size, live.seq));
            u64::from(WIDE) << (SIZE_BITS + OFFSET_BITS)
        } else {
            self.epochs.live[epoch as usize] += 1;
            let offset = live.seq.wrapping_sub(self.epochs.base[epoch as usize]);
            live.size | offset << SIZE_BITS | u64::from(epoch) << (SIZE_BITS + OFFSET_BITS)
        };
        Packed { place, size_seq }
    }

    /// The live allocation `p` (at `addr`) holds.
    #[inline(always)]
    fn unpack(&self, addr: u64, p: &Packed) -> Live {
        let site = (p.place >> 32) as u32;
        let (size, seq) = match p.epoch() {
            WIDE => {
                let full = self.wide.get(&addr).copied();
                debug_assert!(full.is_some(), "a wide allocation is kept in full");
                full.unwrap_or_default()
            }
            e => (p.size_seq & ((1 << SIZE_BITS) - 1), self.packed_seq(e, p)),
        };
        Live {
            size,
            seq,
            slot: p.place as u32,
            site: site & !Packed::USAGE_REPORTED,
            usage_reported: site & Packed::USAGE_REPORTED != 0,
        }
    }

    /// The sequence number of the live allocation `p` (at `addr`).
    #[inline(always)]
    fn seq(&self, addr: u64, p: &Packed) -> u64 {
        match p.epoch() {
            WIDE => self.wide.get(&addr).map_or(0, |&(_, seq)| seq),
            e => self.packed_seq(e, p),
        }
    }

    /// The sequence number of `p`, packed in epoch `e` (not [`WIDE`]).
    #[inline(always)]
    fn packed_seq(&self, e: u8, p: &Packed) -> u64 {
        self.epochs.base[e as usize].wrapping_add((p.size_seq >> SIZE_BITS) & ((1 << OFFSET_BITS) - 1))
    }

    /// Unpacks `p` (at `addr`), which stops being live: its epoch or wide entry lets go.
    #[inline(always)]
    fn take(&mut self, addr: u64, p: &Packed) -> Live {
        let live = self.unpack(addr, p);
        match p.epoch() {
            WIDE => {
                self.wide.remove(&addr);
            }
            e => self.epochs.live[e as usize] -= 1,
        }
        live
    }
}

impl LiveAllocations {
    /// Records a live allocation; returns the live one it replaces, if the log says that
    /// address was still live.
    #[inline(always)]
    pub(crate) fn insert(&mut self, addr: u64, live: Live) -> Option<Live> {
        self.make_room();
        self.latest = self.latest.max(live.seq);
        if addr == 0 {
            return self.insert_at_zero(live);
        }
        let i = self.map.slot_in_room(addr);
        if self.map.is_occupied(i) {
            let entry = self.map.value_at(i);
            let old = match entry.is_live() {
                true => Some(self.full.take(addr, entry)),
                false => {
                    self.freed -= 1;
                    None
                }
            };
            *entry = self.full.pack(addr, live);
            return old;
        }
        let old = self.kill_old(addr);
        let p = self.full.pack(addr, live);
        self.map.fill(i, addr, p);
        old
    }

    /// An address the hash table has no entry for is allocated: its entry in the sorted
    /// tier, if any, is marked dead; returns the allocation that was live there.
    #[inline(always)]
    fn kill_old(&mut self, addr: u64) -> Option<Live> {
        self.tier_lookups += u64::from(self.old.covers(addr));
        let i = self.old.find(addr)?;
        let p = self.old.get(i);
        self.old.set(i, Packed::DEAD);
        self.old_ended += usize::from(p.is_live());
        p.is_live().then(|| self.full.take(addr, &p))
    }

    #[inline(always)]
    pub(crate) fn free(&mut self, addr: u64) -> Freed {
        self.frees += 1;
        if self.frees % PREFETCH_REVIEW == 0 {
            self.review_prefetch();
        }
        self.make_room();
        if addr == 0 {
            return self.free_at_zero();
        }
        let i = self.map.slot_in_room(addr);
        if self.map.is_occupied(i) {
            let entry = self.map.value_at(i);
            if !entry.is_live() {
                return Freed::Again;
            }
            let live = self.full.take(addr, entry);
            *entry = Packed::tombstone(self.frees);
            self.freed += 1;
            return Freed::Live(live);
        }
        self.tier_lookups += u64::from(self.old.covers(addr));
        if let Some(j) = self.old.find(addr) {
            let p = self.old.get(j);
            if p.is_live() {
                self.old.set(j, Packed::tombstone(self.frees));
                self.old_ended += 1;
                return Freed::Live(self.full.take(addr, &p));
            }
            if !p.is_dead() {
                return Freed::Again;
            }
        }
        self.map.fill(i, addr, Packed::tombstone(self.frees));
        self.freed += 1;
        Freed::Unknown
    }

    /// [`LiveAllocations::insert`] at address 0, the hash table's empty key (kept beside
    /// it, never in the sorted tier).
    #[cold]
    fn insert_at_zero(&mut self, live: Live) -> Option<Live> {
        let (entry, present) = self.map.entry(0);
        let old = match present {
            true if entry.is_live() => Some(self.full.take(0, entry)),
            true => {
                self.freed -= 1;
                None
            }
            false => None,
        };
        *entry = self.full.pack(0, live);
        old
    }

    /// [`LiveAllocations::free`] at address 0.
    #[cold]
    fn free_at_zero(&mut self) -> Freed {
        let (entry, present) = self.map.entry(0);
        let found = match present {
            true if entry.is_live() => Freed::Live(self.full.take(0, entry)),
            true => return Freed::Again,
            false => Freed::Unknown,
        };
        *entry = Packed::tombstone(self.frees);
        self.freed += 1;
        found
    }

    /// Before an entry may be added: a full table is swept of old tombstones, or its
    /// long-lived allocations move to the sorted tier, rather than it growing.
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
        if self.map.is_full() && !self.settle() {
            self.map.grow();
        }
        self.filled_at = self.latest;
    }

    #[inline(never)]
    pub(crate) fn sweep(&mut self) {
        let oldest_kept = self.frees.saturating_sub(FREED_REMEMBERED);
        self.map.retain(|p| p.is_live() || p.size_seq > oldest_kept);
        self.freed = self.map.iter().filter(|(_, p)| !p.is_live()).count() as u64;
    }

    /// Moves the allocations that were live before the hash table last filled, and still
    /// are, to the sorted tier, if enough of them can go to pay for the pass over it
    /// that takes them in (see [`SETTLE_SHARE`]); returns whether it did. The table keeps
    /// its size, so the ones that stay have as much room to die in as before.
    #[inline(never)]
    fn settle(&mut self) -> bool {
        let (mark, full) = (self.filled_at, &self.full);
        let long_lived = |addr: u64, p: &Packed| addr != 0 && p.is_live() && full.seq(addr, p) < mark;
        let mut batch: Vec<(u64, Packed)> =
            self.map.iter().filter(|&(a, p)| long_lived(a, p)).map(|(a, p)| (a, *p)).collect();
        let least = SETTLE_LEAST.max(self.map.len() / 4);
        if batch.len() < least {
            return false;
        }
        crate::sorted_map::sort_by_key(&mut batch);
        let Some(cut) = self.cut(&batch, least) else { return false };
        #[cfg(test)]
        {
            self.moves.cut += usize::from(cut > 0);
        }
        let mut moving = batch.split_off(cut);
        for &(addr, _) in &moving {
            self.map.remove(addr);
        }
        // An address moving may have a dead entry in the tier (it was allocated again
        // since it moved there): that entry takes the allocation in place. (None has
        // while the tier has no ended entry, as while a program builds its data.)
        moving.retain(|&(addr, p)| match (self.old_ended > 0).then(|| self.old.find(addr)).flatten() {
            Some(i) => {
                debug_assert!(self.old.get(i).is_dead(), "the table's entry counts");
                self.old.set(i, p);
                self.old_ended -= 1;
                #[cfg(test)]
                {
                    self.moves.revived += 1;
                }
                false
            }
            None => true,
        });
        // Ended entries are dropped in a pass over the whole tier, so only once they are
        // a [`SETTLE_SHARE`]th of it more than the last pass left.
        if self.old_ended >= self.old_ended_kept + self.old.len() / SETTLE_SHARE && self.old_ended > 0 {
            let (oldest_kept, mut ended) = (self.frees.saturating_sub(FREED_REMEMBERED), 0);
            self.old.retain(|p| {
                let keep = p.is_live() || (!p.is_dead() && p.size_seq > oldest_kept);
                ended += usize::from(keep && !p.is_live());
                keep
            });
            (self.old_ended, self.old_ended_kept) = (ended, ended);
            #[cfg(test)]
            {
                self.moves.passes += 1;
            }
        }
        self.old.absorb(&moving);
        true
    }

    /// Where `batch` (sorted, at least `least` entries) is cut: the entries from there
    /// on move, as many as can while each moved costs at most [`SETTLE_SHARE`] entries
    /// of the tier copied (the merge copies the tier's entries above the lowest one
    /// moved). A heap that grows puts most long-lived allocations above the tier's, so
    /// most of a batch moves at the cost of a few copies; the rest stays in the table
    /// for a later move. `None` if fewer than `least` can move.
    fn cut(&self, batch: &[(u64, Packed)], least: usize) -> Option<usize> {
        const TRIES: usize = 64;
        let m = batch.len();
        (0..TRIES).map(|t| t * m / TRIES).take_while(|&c| m - c >= least).find(|&c| {
            let above = self.old.len() - self.old.count_below(batch[c].0);
            above <= SETTLE_SHARE * (m - c)
        })
    }

    /// Starts loading what a lookup of `addr` reads first (a hint).
    #[inline(always)]
    pub(crate) fn prefetch(&self, addr: u64) {
        self.map.prefetch(addr);
        if self.prefetch_tier {
            self.old.prefetch(addr);
        }
    }

    /// Whether lookups announced ahead load the tier's filter line as well as the hash
    /// table's slot: only while the lookups that the table sends on to the filter are at
    /// least a [`PREFETCH_SHARE`]th of the frees. Where the tier is rarely read (a
    /// game's level data, held until the level ends), the prefetch is a hash of every
    /// address for nothing (on the replay benchmark's log, 1.5 % of all the replay's
    /// instructions); where it is read (a program tearing its data down, or building it
    /// in holes below the tier), the filter's line is a cache miss that the prefetch
    /// hides. Reviewed at frees only, which the replay loop counts anyway.
    #[cold]
    #[inline(never)]
    fn review_prefetch(&mut self) {
        self.prefetch_tier = self.tier_lookups * PREFETCH_SHARE >= PREFETCH_REVIEW;
        self.tier_lookups = 0;
    }

    #[inline]
    pub(crate) fn get(&self, addr: u64) -> Option<Live> {
        let p = match self.map.get(addr) {
            Some(p) => *p,
            None => self.old.get(self.old.find(addr)?),
        };
        p.is_live().then(|| self.full.unpack(addr, &p))
    }

    /// Marks the live allocation at `addr` as one that reported its usage; returns it.
    pub(crate) fn mark_usage_reported(&mut self, addr: u64) -> Option<Live> {
        let flag = u64::from(Packed::USAGE_REPORTED) << 32;
        let p = match self.map.get_mut(addr) {
            Some(p) if p.is_live() => {
                p.place |= flag;
                *p
            }
            Some(_) => return None,
            None => {
                let i = self.old.find(addr)?;
                let mut p = self.old.get(i);
                if !p.is_live() {
                    return None;
                }
                p.place |= flag;
                self.old.set(i, p);
                p
            }
        };
        Some(self.full.unpack(addr, &p))
    }

    /// Every live allocation, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, Live)> + '_ {
        let live = |(a, p): (u64, &Packed)| p.is_live().then(|| (a, self.full.unpack(a, p)));
        let old = self.old.iter().filter_map(move |(a, p)| live((a, &p)));
        self.map.iter().filter_map(live).chain(old)
    }

    /// Entries held, tombstones included.
    pub(crate) fn entries(&self) -> usize {
        self.map.len() + self.old.len()
    }

    /// Bytes of heap the two tiers and what they leave out take.
    pub(crate) fn heap_bytes(&self) -> u64 {
        let wide = self.full.wide.capacity() * (std::mem::size_of::<(u64, (u64, u64))>() + 1);
        self.map.heap_bytes() + self.old.heap_bytes() + wide as u64
    }
}

/// Live heap allocations that `owner_of` cannot find by probing back from an address
/// (see [`indexed`]), for attaches to interior pointers. Most logs have no attaches, so
/// the index is built only at the first lookup, from the live allocations, and kept from
/// then on. Attaches are rare and allocations many, so an allocation only appends its
/// address here and a free does nothing: the live map is the truth, and the index is
/// sorted and cleaned of addresses no longer live (or no longer indexed) when an attach
/// asks, or when it has grown to twice what it held after the last cleaning (so its
/// memory stays proportional to the live allocations).
#[derive(Debug, Clone, Default)]
pub(crate) struct InteriorIndex {
    /// Sorted and clean as of the last cleaning.
    pub(crate) sorted: Vec<u64>,
    /// Appended since.
    pub(crate) pending: Vec<u64>,
    /// Whether the index is built (at the first lookup) and kept.
    built: bool,
}

impl InteriorIndex {
    /// A heap allocation was made at `addr` (already in `heap`).
    #[inline(always)]
    pub(crate) fn add(&mut self, addr: u64, size: u64, heap: &LiveAllocations) {
        if self.built && indexed(addr, size) {
            self.pending.push(addr);
            if self.pending.len() >= (2 * self.sorted.len()).max(4096) {
                self.clean(heap);
            }
        }
    }

    /// Builds the index from `heap`'s live allocations, for the first lookup.
    #[cold]
    fn build(&mut self, heap: &LiveAllocations) {
        self.sorted = heap.iter().filter(|&(a, l)| indexed(a, l.size)).map(|(a, _)| a).collect();
        self.sorted.sort_unstable();
        self.pending.clear();
        self.built = true;
    }

    #[inline(never)]
    pub(crate) fn clean(&mut self, heap: &LiveAllocations) {
        self.sorted.append(&mut self.pending);
        self.sorted.sort_unstable();
        self.sorted.dedup();
        self.sorted.retain(|&a| heap.get(a).is_some_and(|l| indexed(a, l.size)));
    }

    /// The live indexed allocation containing `addr`.
    pub(crate) fn find(&mut self, addr: u64, heap: &LiveAllocations) -> Option<Live> {
        if !self.built {
            self.build(heap);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Random allocations, frees and usage marks against a `HashMap` of unpacked values:
    /// every value comes back as it went in, whatever its size and number — small ones
    /// packed in an epoch, big sizes and numbers every epoch is too busy for kept in full,
    /// numbers that go back in time, the address that is the table's empty marker — and
    /// the epochs and wide entries are let go with the allocations.
    #[test]
    fn packed_allocations_unpack_to_what_went_in() {
        let mut rnd = crate::testing::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let mut m = LiveAllocations::default();
        let mut reference: HashMap<u64, Live> = HashMap::new();
        let mut seq = 0u64;
        for step in 0..300_000u64 {
            let addr = match rnd() % 200 {
                0 => u64::MAX,
                _ => 0x7f00_0000_0000 + (rnd() % 20_000) * 16,
            };
            // Mostly small steps; now and then a jump past an epoch's span, or back.
            seq = match rnd() % 1000 {
                0 => seq.wrapping_add(1 << 40),
                1 => seq.saturating_sub(1 << 37),
                2 => u64::MAX - rnd() % 1000,
                _ => seq.wrapping_add(rnd() % 100),
            };
            let size = match rnd() % 50 {
                0 => 1 << 20,
                1 => rnd(),
                _ => rnd() % 4096,
            };
            match rnd() % 5 {
                0 | 1 => {
                    let live =
                        Live { size, seq, slot: rnd() as u32 >> 1, site: rnd() as u32 >> 1, usage_reported: false };
                    assert_eq!(m.insert(addr, live), reference.insert(addr, live), "step {step}");
                }
                2 => {
                    let want = reference.remove(&addr);
                    match m.free(addr) {
                        Freed::Live(l) => assert_eq!(Some(l), want, "step {step}"),
                        _ => assert_eq!(want, None, "step {step}"),
                    }
                }
                3 => {
                    let want = reference.get_mut(&addr).map(|l| {
                        l.usage_reported = true;
                        *l
                    });
                    assert_eq!(m.mark_usage_reported(addr), want, "step {step}");
                }
                _ => assert_eq!(m.get(addr), reference.get(&addr).copied(), "step {step}"),
            }
        }
        let mut all: Vec<(u64, Live)> = m.iter().collect();
        let mut expected: Vec<(u64, Live)> = reference.into_iter().collect();
        all.sort_unstable_by_key(|e| e.0);
        expected.sort_unstable_by_key(|e| e.0);
        assert_eq!(all, expected);
        let in_epochs: u64 = m.full.epochs.live.iter().sum();
        assert_eq!(in_epochs + m.full.wide.len() as u64, all.len() as u64, "each live allocation counted once");
        for (addr, _) in all {
            assert!(matches!(m.free(addr), Freed::Live(_)));
        }
        assert!(m.full.epochs.live.iter().all(|&n| n == 0) && m.full.wide.is_empty(), "all let go");
    }

    /// Long-lived allocations move to the sorted tier as the hash table fills, and every
    /// operation answers as one table would: frees, double frees and frees of unknown
    /// addresses of either tier, allocations again at an address of either (live or
    /// freed), usage marks and lookups, against a reference of live and freed addresses
    /// (fewer frees than [`FREED_REMEMBERED`], so every freed address is remembered).
    #[test]
    fn the_sorted_tier_answers_as_the_hash_table_would() {
        // Long-lived blocks spread over a wide range; short-lived ones churn in a narrow
        // one.
        let short = |r: u64, _| 0x7f00_0000_0000 + (r % 3_000) * 16;
        let m = answers_as_the_hash_table_would(800_000, 100, |r, _| 0x5500_0000_0000 + (r % 4_000_000) * 16, short);
        assert!(m.moves.revived > 0, "dead entries took allocations in place: {:?}", m.moves);
        assert!(!m.old.is_whole && m.old.places.len() <= 200, "few places are kept compact");
        // A heap that grows, as a program builds its data: most long-lived blocks above
        // those before, some in holes below. Long enough for the tier to reach 16 times
        // a move.
        let grown = |r: u64, step: u64| match r % 16 {
            0 => 0x5500_0000_0000 + (r % 4_000_000) * 16,
            _ => 0x5600_0000_0000 + step * 16,
        };
        let m = answers_as_the_hash_table_would(1_600_000, u64::MAX, grown, short);
        assert!(m.old.is_whole && m.old.compact.len() == 0, "a place per allocation: values kept whole");
        assert!(m.moves.cut > 0 && m.moves.passes > 0, "some moves left the lowest blocks: {:?}", m.moves);
    }

    /// The tier's filter is prefetched while lookups reach the tier, and not while the
    /// hash table answers them.
    #[test]
    fn the_tier_is_prefetched_only_while_it_is_read() {
        let mut m = LiveAllocations::default();
        let live = |seq| Live { size: 32, seq, slot: 1, site: 2, usage_reported: false };
        let long_lived: Vec<u64> = (0..200_000u64).map(|i| 0x5500_0000_0000 + i * 32).collect();
        let mut seq = 0;
        for &addr in &long_lived {
            seq += 1;
            m.insert(addr, live(seq));
        }
        assert!(m.old.len() > 100_000, "most moved to the tier");
        // Churn at a few addresses: the hash table answers every lookup.
        for i in 0..4 * PREFETCH_REVIEW {
            seq += 1;
            let addr = 0x7f00_0000_0000 + (i % 64) * 16;
            m.insert(addr, live(seq));
            m.free(addr);
        }
        assert!(!m.prefetch_tier, "the table answers");
        // Tear the long-lived data down: nearly every free looks in the tier.
        let mut freed = 0;
        for &addr in &long_lived {
            freed += usize::from(matches!(m.free(addr), Freed::Live(_)));
            if freed == 2 * PREFETCH_REVIEW as usize {
                assert!(m.prefetch_tier, "the tier is read");
            }
        }
        assert_eq!(freed, long_lived.len());
    }

    /// Random operations on `LiveAllocations` against a reference of live and freed
    /// addresses, `steps` of them, blocks made to last at `long(random, step)` and others
    /// at `short(random, step)`, each in one of `slots` slots (so of as many places);
    /// returns the map at the end.
    fn answers_as_the_hash_table_would(
        steps: u64,
        slots: u64,
        long: impl Fn(u64, u64) -> u64,
        short: impl Fn(u64, u64) -> u64,
    ) -> LiveAllocations {
        let mut rnd = crate::testing::xorshift(0x2545_f491_4f6c_dd1du64);
        let mut m = LiveAllocations::default();
        let mut reference: HashMap<u64, Live> = HashMap::new();
        let mut freed: std::collections::HashSet<u64> = Default::default();
        let (mut seq, mut frees, mut most_old) = (0u64, 0u64, 0usize);
        // Now and then any block is freed, allocated again, or marked.
        let mut longs: Vec<u64> = Vec::new();
        for step in 0..steps {
            seq += 1 + rnd() % 50;
            let live = |size| Live { size, seq, slot: (step % slots) as u32, site: 3, usage_reported: false };
            let pick = |r: u64, longs: &Vec<u64>| longs.get((r % longs.len().max(1) as u64) as usize).copied();
            match rnd() % 100 {
                0..=29 => {
                    let addr = long(rnd(), step);
                    longs.push(addr);
                    freed.remove(&addr);
                    assert_eq!(m.insert(addr, live(48)), reference.insert(addr, live(48)), "step {step}");
                }
                30..=59 => {
                    let addr = short(rnd(), step);
                    freed.remove(&addr);
                    assert_eq!(m.insert(addr, live(16)), reference.insert(addr, live(16)), "step {step}");
                }
                60..=84 if frees < FREED_REMEMBERED - 10 => {
                    let addr = match rnd() % 10 {
                        0 => pick(rnd(), &longs).unwrap_or(8),
                        1 => long(rnd(), step),
                        _ => short(rnd(), step),
                    };
                    frees += 1;
                    let got = m.free(addr);
                    match reference.remove(&addr) {
                        Some(l) => assert!(matches!(got, Freed::Live(g) if g == l), "step {step}"),
                        None if freed.contains(&addr) => assert!(matches!(got, Freed::Again), "step {step}"),
                        None => assert!(matches!(got, Freed::Unknown), "step {step}"),
                    }
                    freed.insert(addr);
                }
                85..=89 => {
                    let addr = pick(rnd(), &longs).unwrap_or(8);
                    let want = reference.get_mut(&addr).map(|l| {
                        l.usage_reported = true;
                        *l
                    });
                    assert_eq!(m.mark_usage_reported(addr), want, "step {step}");
                }
                90..=94 => {
                    // Allocated again at a long-lived address, live or freed.
                    let addr = pick(rnd(), &longs).unwrap_or(8);
                    freed.remove(&addr);
                    assert_eq!(m.insert(addr, live(80)), reference.insert(addr, live(80)), "step {step}");
                }
                _ => {
                    let addr = if rnd() % 2 == 0 { pick(rnd(), &longs).unwrap_or(8) } else { long(rnd(), step) };
                    assert_eq!(m.get(addr), reference.get(&addr).copied(), "step {step}");
                }
            }
            most_old = most_old.max(m.old.len());
        }
        assert!(most_old > 50_000, "long-lived allocations moved ({most_old} at most)");
        assert!(m.old.len() > m.map.len(), "most entries are in the sorted tier: {} {}", m.old.len(), m.map.len());
        let ended = m.old.iter().filter(|(_, p)| !p.is_live()).count();
        assert_eq!(m.old_ended, ended, "the sorted tier's ended entries are counted");
        let mut all: Vec<(u64, Live)> = m.iter().collect();
        let mut expected: Vec<(u64, Live)> = reference.into_iter().collect();
        all.sort_unstable_by_key(|e| e.0);
        expected.sort_unstable_by_key(|e| e.0);
        assert_eq!(all, expected);
        let mut ended = m.clone();
        for (addr, _) in all {
            assert!(matches!(ended.free(addr), Freed::Live(_)));
        }
        assert!(ended.full.epochs.live.iter().all(|&n| n == 0) && ended.full.wide.is_empty(), "all let go");
        m
    }

    /// More live spans than epochs: the allocations past them are kept in full, and
    /// epochs are given out again once their allocations are freed.
    #[test]
    fn allocations_past_every_epoch_are_kept_in_full() {
        let mut m = LiveAllocations::default();
        let span = 1u64 << OFFSET_BITS;
        let live = |seq| Live { size: 64, seq, slot: 1, site: 2, usage_reported: false };
        for i in 0..300u64 {
            m.insert(0x1000 + i * 16, live(i * span + 5));
        }
        assert_eq!(m.full.wide.len(), 300 - EPOCHS);
        for i in 0..300u64 {
            assert_eq!(m.get(0x1000 + i * 16), Some(live(i * span + 5)));
        }
        for i in 0..100u64 {
            m.free(0x1000 + i * 16);
        }
        m.insert(0x9_0000, live(1000 * span));
        assert_eq!(m.full.wide.len(), 300 - EPOCHS, "a freed epoch was given out again");
        assert_eq!(m.get(0x9_0000), Some(live(1000 * span)));
    }
}
