//! `AddrMap`: the live-allocation table, an open-addressing hash table keyed by address.
//!
//! The replay's time goes mostly into cache misses on this table: every allocation and
//! every free looks up an address that is anywhere in it. A general-purpose map cannot be
//! asked where a key would be, so this one is hand-rolled for one trick: the replay knows
//! the next events before it applies them, and [`AddrMap::prefetch`] starts loading their
//! slots a few events ahead, so the misses overlap instead of following one another.
//!
//! It is deliberately simple: linear probing over a power-of-two array of keys, with the
//! values in a second array at the same index, insert and update only. Keys alone are
//! eight to a cache line, so a probe past a few occupied slots stays on the line the
//! replay prefetched even when the table is two-thirds full, and a lookup touches one
//! line of keys and one of values. On Linux the arrays ask for transparent huge pages,
//! since at a million live allocations they span tens of megabytes and a lookup would
//! otherwise miss the TLB as well as the cache. Nothing is ever removed one by one (the
//! replay marks freed entries instead, see `live.rs`); [`AddrMap::retain`] rebuilds the
//! table without the entries it drops.

/// The key of an empty slot: zero, so that a new table is memory the kernel hands out
/// zeroed, untouched until an entry lands in it (see [`AddrMap::rebuild`]). A real entry
/// with this key lives in `zero_key`.
const EMPTY: u64 = 0;

/// Smallest capacity (slots) of a table that holds anything.
const MIN_CAPACITY: usize = 1024;

#[derive(Debug, Clone)]
pub struct AddrMap<V> {
    /// The key of each slot ([`EMPTY`] if none); a power-of-two number of them.
    keys: Vec<u64>,
    /// The value of each slot's key (anything, in an empty slot).
    values: Vec<V>,
    /// Keys in `keys` (not counting `zero_key`).
    len: usize,
    /// The entry whose key is 0 (the empty marker), if any.
    zero_key: Option<V>,
    /// Entries the table holds before it is full (see [`AddrMap::is_full`]).
    most: usize,
}

impl<V> Default for AddrMap<V> {
    fn default() -> Self {
        AddrMap { keys: Vec::new(), values: Vec::new(), len: 0, zero_key: None, most: 0 }
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
fn huge_pages<T>(v: &[T]) {
    #[cfg(target_os = "linux")]
    {
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

/// `n` zeroed values: for a large array, fresh pages the kernel backs only once they are
/// written.
fn zeroed<T: ZeroIsValid>(n: usize) -> Vec<T> {
    let layout = std::alloc::Layout::array::<T>(n).expect("a live-allocation table within the address space");
    assert!(layout.size() > 0, "a table of at least one slot");
    // SAFETY: `layout` has a non-zero size. The memory comes from the global allocator with
    // the layout a `Vec<T>` of capacity `n` frees it with, and all-zero values are valid
    // (`T: ZeroIsValid`).
    unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<T>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(p, n, n)
    }
}

const PAGE: usize = 4096;

/// Hands the whole pages of `v[from..to]` back to the kernel, and the page that holds
/// `v[from]` if it begins after `v` does: their contents are no longer needed (reads of
/// them would see zeros). Linux only; elsewhere nothing.
fn release_pages<T>(v: &[T], from: usize, to: usize) {
    #[cfg(target_os = "linux")]
    {
        let (at, size) = (v.as_ptr() as usize, std::mem::size_of::<T>());
        // A page straddling the previous range and this one goes with this one; the first
        // page of `v` only if `v` starts it (whatever precedes `v` there is not ours).
        let start = if from == 0 { at.next_multiple_of(PAGE) } else { (at + from * size) / PAGE * PAGE };
        let end = (at + to * size) / PAGE * PAGE;
        if end > start.max(at.next_multiple_of(PAGE)) {
            // SAFETY: the range lies inside `v`'s allocation, which the caller owns and no
            // longer reads (see `rebuild`); MADV_DONTNEED only drops the pages' contents.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (v, from, to);
}

impl<V: Copy + Default + ZeroIsValid> AddrMap<V> {
    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.len + usize::from(self.zero_key.is_some())
    }

    /// Bytes of heap the table takes.
    pub fn heap_bytes(&self) -> u64 {
        (self.keys.capacity() * 8 + self.values.capacity() * std::mem::size_of::<V>()) as u64
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.keys.len().wrapping_sub(1)
    }

    /// The slot holding `key`, or the empty slot where it would go.
    #[inline(always)]
    fn find(&self, key: u64) -> usize {
        let mask = self.mask();
        let mut i = home(key, mask);
        loop {
            let k = self.keys[i];
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
        if self.keys.is_empty() {
            return None;
        }
        let i = self.find(key);
        (self.keys[i] == key).then(|| &self.values[i])
    }

    /// Whether adding an entry would grow the table: it is kept at most two-thirds full.
    /// Linear probing degrades as the table fills (a new address probes 5 slots on
    /// average at two-thirds, 2.5 at half), but with eight keys to a cache line most
    /// probes end on the line the replay prefetched.
    #[inline(always)]
    pub fn is_full(&self) -> bool {
        self.len >= self.most
    }

    /// The value of `key`, to change.
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if key == EMPTY {
            return self.zero_key.as_mut();
        }
        if self.keys.is_empty() {
            return None;
        }
        let i = self.find(key);
        (self.keys[i] == key).then(|| &mut self.values[i])
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
        let present = self.keys[i] == key;
        if !present {
            self.keys[i] = key;
            self.values[i] = V::default();
            self.len += 1;
        }
        (&mut self.values[i], present)
    }

    /// Sets `key` to `value`; returns the value it replaces.
    #[cfg(test)]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let (slot, present) = self.entry(key);
        let old = std::mem::replace(slot, value);
        present.then_some(old)
    }

    /// Starts loading the slot of `key` into the cache (a hint): its line of keys and the
    /// value at its home.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        // No bounds check (nor a test for an empty table): a prefetch of any address is
        // harmless, and this runs once per replayed record.
        let i = home(key, self.mask());
        prefetch_line(self.keys.as_ptr().wrapping_add(i));
        let v: *const u8 = self.values.as_ptr().wrapping_add(i).cast();
        prefetch_line(v);
        prefetch_line(v.wrapping_add(std::mem::size_of::<V>() - 1));
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.keys
            .iter()
            .zip(&self.values)
            .filter(|(&k, _)| k != EMPTY)
            .map(|(&k, v)| (k, v))
            .chain(self.zero_key.as_ref().map(|v| (EMPTY, v)))
    }

    /// Keeps only the entries for which `keep` holds, in a table sized for them.
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        let kept = self.iter().filter(|(_, v)| keep(v)).count();
        self.rebuild(kept, keep);
    }

    #[cold]
    #[inline(never)]
    pub fn grow(&mut self) {
        self.rebuild(self.len + 1, |_| true);
    }

    /// Moves the entries `keep` accepts into a table with room for `entries` at a load of
    /// at most a third, so that a third of it fills before it is full again.
    ///
    /// The old and the new table are not both in memory whole: the new one is zeroed
    /// memory, backed by the kernel only where entries land, and the old one is moved in
    /// order and handed back a few pages at a time as it goes. An entry's new home is its
    /// old one or that plus the old capacity, so the pages the new table needs grow in
    /// step with those the old one gives back, and growing a table of a few hundred
    /// megabytes costs its new size at most, not one and a half times it.
    fn rebuild(&mut self, entries: usize, mut keep: impl FnMut(&V) -> bool) {
        // At most a third full, and twice the old table when it grows (at two-thirds
        // full plus one entry).
        let capacity = (entries * 3).saturating_sub(1).next_power_of_two().max(MIN_CAPACITY);
        let (keys, values) = (zeroed(capacity), zeroed(capacity));
        huge_pages(&keys);
        huge_pages(&values);
        let old_keys = std::mem::replace(&mut self.keys, keys);
        let old_values = std::mem::replace(&mut self.values, values);
        self.most = capacity / 3 * 2;
        self.len = 0;
        const CHUNK: usize = 1 << 16;
        let mut from = 0;
        while from < old_keys.len() {
            let to = (from + CHUNK).min(old_keys.len());
            for (&k, v) in old_keys[from..to].iter().zip(&old_values[from..to]) {
                if k != EMPTY && keep(v) {
                    let i = self.find(k);
                    self.keys[i] = k;
                    self.values[i] = *v;
                    self.len += 1;
                }
            }
            release_pages(&old_keys, from, to);
            release_pages(&old_values, from, to);
            from = to;
        }
        drop((old_keys, old_values));
        if self.zero_key.as_ref().is_some_and(|v| !keep(v)) {
            self.zero_key = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Random inserts, updates, lookups and sweeps against `HashMap`.
    #[test]
    fn behaves_like_a_hash_map() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut map: AddrMap<u64> = AddrMap::default();
        let mut reference: HashMap<u64, u64> = HashMap::new();
        for step in 0..200_000u64 {
            // Keys from a small range (collisions, updates) plus the two edge values.
            let key = match rnd() % 100 {
                0 => u64::MAX,
                1 => 0,
                _ => 0x5555_0000_0000 + (rnd() % 5_000) * 16,
            };
            match rnd() % 4 {
                0 | 1 => assert_eq!(map.insert(key, step), reference.insert(key, step)),
                2 => assert_eq!(map.get(key), reference.get(&key)),
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
