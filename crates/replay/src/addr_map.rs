//! `AddrMap`: the live-allocation table, an open-addressing hash table keyed by address.
//!
//! The replay's time goes mostly into cache misses on this table: every allocation and
//! every free looks up an address that is anywhere in it. A general-purpose map cannot be
//! asked where a key would be, so this one is hand-rolled for one trick: the replay knows
//! the next events before it applies them, and [`AddrMap::prefetch`] starts loading their
//! slots a few events ahead, so the misses overlap instead of following one another.
//!
//! It is deliberately simple: linear probing over a power-of-two array of (key, value)
//! entries, insert and update only. A key sits next to its value, so a lookup touches one
//! cache line on one page; on Linux the array asks for
//! transparent huge pages, since at a million live allocations the table spans tens of
//! megabytes and a lookup would otherwise miss the TLB as well as the cache. Nothing is
//! ever removed one by one (the replay marks freed entries instead, see `state.rs`);
//! [`AddrMap::retain`] rebuilds the table without the entries it drops.

/// The key of an empty slot: zero, so that a new table is memory the kernel hands out
/// zeroed, untouched until an entry lands in it (see [`AddrMap::rebuild`]). A real entry
/// with this key lives in `zero_key`.
const EMPTY: u64 = 0;

/// Smallest capacity (slots) of a table that holds anything.
const MIN_CAPACITY: usize = 1024;

#[derive(Debug, Clone)]
pub struct AddrMap<V> {
    entries: Vec<Entry<V>>,
    /// Entries in `entries` (not counting `zero_key`).
    len: usize,
    /// The entry whose key is 0 (the empty marker), if any.
    zero_key: Option<V>,
    /// Entries the table holds before it is full: a third of its slots (see
    /// [`AddrMap::is_full`]).
    most: usize,
}

/// A key beside its value: with the replay's 16-byte values, 24 bytes, eight to three
/// cache lines. A lookup's entry may straddle two lines; [`AddrMap::prefetch`] loads both.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Entry<V> {
    key: u64,
    value: V,
}

impl<V> Default for AddrMap<V> {
    fn default() -> Self {
        AddrMap { entries: Vec::new(), len: 0, zero_key: None, most: 0 }
    }
}

/// Starts loading the cache line at `p` (a hint: never faults; nothing off x86-64).
#[inline(always)]
pub fn prefetch_line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks the kernel to back `v`'s memory with huge pages (a hint, Linux only).
pub fn huge_pages<T>(v: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = (v.as_ptr() as usize).next_multiple_of(PAGE);
        let end = v.as_ptr() as usize + std::mem::size_of_val(v);
        if end > start + (2 << 20) {
            // SAFETY: madvise with MADV_HUGEPAGE only changes how the kernel backs these
            // pages, which lie inside `v`'s allocation; it never changes their contents.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Fibonacci hashing: addresses are multiples of 8 or 16 and clustered; the multiply
/// spreads their middle bits over the top, which pick the slot.
#[inline(always)]
fn home(key: u64, mask: usize) -> usize {
    let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h.rotate_left(32) as usize) & mask
}

/// A value whose all-zero bytes are a valid value (so a table can start as zeroed memory).
///
/// # Safety
/// Implementors promise that every field of the type is valid when all its bytes are 0.
pub unsafe trait ZeroIsValid {}

// SAFETY: any bit pattern is a valid integer.
unsafe impl ZeroIsValid for u64 {}

/// A table of `n` empty entries, all zero: for a large table, fresh pages the kernel
/// backs only once they are written.
fn empty_table<V: ZeroIsValid>(n: usize) -> Vec<Entry<V>> {
    let layout = std::alloc::Layout::array::<Entry<V>>(n).expect("a live-allocation table within the address space");
    assert!(layout.size() > 0, "a table of at least one entry");
    // SAFETY: `layout` has a non-zero size. The memory comes from the global allocator with
    // the layout a `Vec<Entry<V>>` of capacity `n` frees it with, and all-zero entries are
    // valid: a zero key is the empty marker, and `V: ZeroIsValid`.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<Entry<V>>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(p, n, n)
    }
}

const PAGE: usize = 4096;

/// Hands the whole pages of `bytes` back to the kernel: their memory is no longer
/// needed, and reads of it would see zeros (Linux only; elsewhere nothing).
fn release_pages(bytes: std::ops::Range<usize>) {
    #[cfg(target_os = "linux")]
    {
        let (start, end) = (bytes.start.next_multiple_of(PAGE), bytes.end / PAGE * PAGE);
        if end > start {
            // SAFETY: the range lies inside an allocation the caller owns and no longer
            // reads (see `rebuild`); MADV_DONTNEED only drops the pages' contents.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = bytes;
}

impl<V: Copy + Default + ZeroIsValid> AddrMap<V> {
    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.len + usize::from(self.zero_key.is_some())
    }

    /// Bytes of heap the table takes.
    pub fn heap_bytes(&self) -> u64 {
        (self.entries.capacity() * std::mem::size_of::<Entry<V>>()) as u64
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.entries.len().wrapping_sub(1)
    }

    /// The slot holding `key`, or the empty slot where it would go.
    #[inline(always)]
    fn find(&self, key: u64) -> usize {
        let mask = self.mask();
        let mut i = home(key, mask);
        loop {
            let k = self.entries[i].key;
            if k == key || k == EMPTY {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        if key == EMPTY {
            return self.zero_key.as_ref();
        }
        if self.entries.is_empty() {
            return None;
        }
        let e = &self.entries[self.find(key)];
        (e.key == key).then_some(&e.value)
    }

    /// Whether adding an entry would grow the table: it is kept at most a third full.
    /// Linear probing degrades fast as the table fills (a new address probes 2.5 entries
    /// on average at half load, 1.6 at a third), and here a probe that runs past the
    /// lines the replay prefetched is a miss. On the replay benchmark, against half full:
    /// the 20 M-event log replays 5 % faster (and takes 85 MiB rather than 58: the table
    /// doubles once more), the 100 M-event one 20–25 % faster in the same peak memory;
    /// at three quarters full the 20 M log took 12 % longer.
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.len >= self.most
    }

    /// The value of `key`, to change.
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if key == EMPTY {
            return self.zero_key.as_mut();
        }
        if self.entries.is_empty() {
            return None;
        }
        let i = self.find(key);
        let e = &mut self.entries[i];
        (e.key == key).then_some(&mut e.value)
    }

    /// The value of `key`, inserting `V::default()` first if it is absent; the flag says
    /// whether it was present.
    #[inline]
    pub fn entry(&mut self, key: u64) -> (&mut V, bool) {
        if key == EMPTY {
            let present = self.zero_key.is_some();
            return (self.zero_key.get_or_insert_with(V::default), present);
        }
        if self.is_full() {
            self.grow();
        }
        self.entry_in_room(key)
    }

    /// [`AddrMap::entry`] when the table is known not to be full (and `key` is not the
    /// empty marker): the caller made room.
    #[inline(always)]
    pub fn entry_in_room(&mut self, key: u64) -> (&mut V, bool) {
        debug_assert!(!self.is_full() && key != EMPTY);
        let i = self.find(key);
        let e = &mut self.entries[i];
        let present = e.key == key;
        if !present {
            *e = Entry { key, value: V::default() };
            self.len += 1;
        }
        (&mut e.value, present)
    }

    /// The slot holding `key`, or the empty slot where it would go, when the table is
    /// known not to be full (and `key` is not the empty marker): the caller made room.
    /// The slot stays valid until the table next changes.
    #[inline(always)]
    pub fn slot_in_room(&self, key: u64) -> usize {
        debug_assert!(!self.is_full() && key != EMPTY);
        self.find(key)
    }

    /// Whether slot `i` (from [`AddrMap::slot_in_room`]) holds an entry.
    #[inline(always)]
    pub fn is_occupied(&self, i: usize) -> bool {
        self.entries[i].key != EMPTY
    }

    /// The value in the occupied slot `i`.
    #[inline(always)]
    pub fn value_at(&mut self, i: usize) -> &mut V {
        &mut self.entries[i].value
    }

    /// Puts `key` and `value` in the empty slot `i` that [`AddrMap::slot_in_room`] gave
    /// for `key`.
    #[inline(always)]
    pub fn fill(&mut self, i: usize, key: u64, value: V) {
        debug_assert!(self.entries[i].key == EMPTY && key != EMPTY);
        self.entries[i] = Entry { key, value };
        self.len += 1;
    }

    /// Sets `key` to `value`; returns the value it replaces.
    #[cfg(test)]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let (slot, present) = self.entry(key);
        let old = std::mem::replace(slot, value);
        present.then_some(old)
    }

    /// Starts loading the slot of `key` into the cache (a hint).
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        // No bounds check (nor a test for an empty table): a prefetch of any address is
        // harmless, and this runs once per replayed record.
        let e: *const u8 = self.entries.as_ptr().wrapping_add(home(key, self.mask())).cast();
        prefetch_line(e);
        prefetch_line(e.wrapping_add(64));
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.entries
            .iter()
            .filter(|e| e.key != EMPTY)
            .map(|e| (e.key, &e.value))
            .chain(self.zero_key.as_ref().map(|v| (EMPTY, v)))
    }

    /// Keeps only the entries for which `keep` holds, in a table sized for them.
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        let kept = self.iter().filter(|(_, v)| keep(v)).count();
        self.rebuild(Self::capacity_for(kept), |_, v| keep(v));
    }

    /// Removes `key`'s entry; returns its value. The entries after it in its run move
    /// back into the gap where their probe sequence allows (linear probing's deletion),
    /// so no lookup runs past an emptied slot and nothing is left behind.
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if key == EMPTY {
            return self.zero_key.take();
        }
        if self.entries.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut gap = self.find(key);
        if self.entries[gap].key != key {
            return None;
        }
        let value = self.entries[gap].value;
        let mut j = gap;
        loop {
            j = (j + 1) & mask;
            let e = self.entries[j];
            if e.key == EMPTY {
                break;
            }
            // It may fill the gap if its home is not after the gap (on the way round
            // from its home to it).
            if j.wrapping_sub(home(e.key, mask)) & mask >= j.wrapping_sub(gap) & mask {
                self.entries[gap] = e;
                gap = j;
            }
        }
        self.entries[gap].key = EMPTY;
        self.len -= 1;
        Some(value)
    }

    #[cold]
    #[inline(never)]
    pub fn grow(&mut self) {
        self.rebuild(Self::capacity_for(self.len + 1), |_, _| true);
    }

    /// The capacity a rebuild gives `entries`: a load of at most a fifth, so that more
    /// than a tenth of it fills before it is full again.
    fn capacity_for(entries: usize) -> usize {
        (entries * 5).next_power_of_two().max(MIN_CAPACITY)
    }

    /// Moves the entries `keep` accepts into a table of `capacity` slots (a power of two).
    ///
    /// The old and the new table are not both in memory whole: the new one is zeroed
    /// memory, backed by the kernel only where entries land, and the old one is moved in
    /// order and handed back a few pages at a time as it goes. An entry's new home is its
    /// old one or that plus the old capacity, so the pages the new table needs grow in
    /// step with those the old one gives back, and growing a table of a few hundred
    /// megabytes costs its new size at most, not one and a half times it.
    fn rebuild(&mut self, capacity: usize, mut keep: impl FnMut(u64, &V) -> bool) {
        debug_assert!(capacity.is_power_of_two());
        let table = empty_table(capacity);
        huge_pages(&table);
        let old = std::mem::replace(&mut self.entries, table);
        self.most = capacity / 3;
        self.len = 0;
        const CHUNK: usize = 1 << 16;
        let (at, size) = (old.as_ptr() as usize, std::mem::size_of::<Entry<V>>());
        for (c, chunk) in old.chunks(CHUNK).enumerate() {
            for e in chunk {
                if e.key != EMPTY && keep(e.key, &e.value) {
                    let i = self.find(e.key);
                    self.entries[i] = *e;
                    self.len += 1;
                }
            }
            // From where the previous chunk's release stopped (a page straddling two
            // chunks goes with the second) to the last whole page of this chunk.
            let from = if c == 0 { at } else { (at + c * CHUNK * size) / PAGE * PAGE };
            release_pages(from..at + (c * CHUNK + chunk.len()) * size);
        }
        drop(old);
        if self.zero_key.as_ref().is_some_and(|v| !keep(EMPTY, v)) {
            self.zero_key = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn an_entry_of_two_words_is_three_words() {
        assert_eq!(std::mem::size_of::<Entry<[u64; 2]>>(), 24);
    }

    /// Random inserts, updates, removals, lookups and sweeps against `HashMap`.
    #[test]
    fn behaves_like_a_hash_map() {
        let mut rnd = crate::testing::xorshift(0x2545_f491_4f6c_dd1du64);
        let mut map: AddrMap<u64> = AddrMap::default();
        let mut reference: HashMap<u64, u64> = HashMap::new();
        for step in 0..200_000u64 {
            // Keys from a small range (collisions, updates) plus the two edge values.
            let key = match rnd() % 100 {
                0 => u64::MAX,
                1 => 0,
                _ => 0x5555_0000_0000 + (rnd() % 5_000) * 16,
            };
            match rnd() % 5 {
                0 | 1 => assert_eq!(map.insert(key, step), reference.insert(key, step)),
                2 => assert_eq!(map.get(key), reference.get(&key)),
                3 => assert_eq!(map.remove(key), reference.remove(&key)),
                _ => {
                    let (v, present) = map.entry(key);
                    assert_eq!(present, reference.contains_key(&key));
                    *v += 1;
                    *reference.entry(key).or_default() += 1;
                }
            }
            if step % 50_000 == 49_999 {
                map.retain(|v| v % 3 != 0);
                reference.retain(|_, v| *v % 3 != 0);
            }
            if step % 20_000 == 9_999 {
                // Many removals at once (as a move to the sorted tier makes), then lookups
                // of every key: none may be lost behind an emptied slot.
                let cut = if step % 40_000 == 9_999 { 2 } else { 7 };
                let gone: Vec<u64> = map.iter().filter(|&(k, v)| (k ^ v) % 8 < cut).map(|(k, _)| k).collect();
                for k in gone {
                    assert_eq!(map.remove(k), reference.remove(&k));
                }
                for (&k, v) in &reference {
                    assert_eq!(map.get(k), Some(v));
                }
            }
            map.prefetch(key);
        }
        assert_eq!(map.len(), reference.len());
        let mut all: Vec<(u64, u64)> = map.iter().map(|(k, &v)| (k, v)).collect();
        let mut expected: Vec<(u64, u64)> = reference.into_iter().collect();
        all.sort_unstable();
        expected.sort_unstable();
        assert_eq!(all, expected);
    }
}
