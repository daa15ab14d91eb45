//! `SortedMap`: long-lived entries in one array sorted by key, with no empty slots.
//!
//! The live-allocation table ([`crate::addr_map::AddrMap`]) is fast because it is mostly
//! empty: a third full at most, so an entry of 24 bytes costs 72 to 144. Most of a big
//! program's live allocations are old and rarely touched again, and those are kept here
//! instead, 24 bytes each (see `live.rs` for when they move). A lookup here is slower
//! than in the hash table, and the replay does one only when the hash table has no entry
//! for the address: most such lookups are answered by one of two tests without touching
//! the array — the address is above the last key, or a Bloom filter says it is absent —
//! and the rest by a binary search of every [`STRIDE`]th key (an array small enough to
//! stay in cache) and then of one run of the array.
//!
//! A lookup that found an entry leaves a finger just past it, and the next one looks
//! there first: a program that tears its data down frees it much in the order it was
//! made, which for most allocators is close to address order.
//!
//! Entries are only added in sorted batches ([`SortedMap::absorb`]): the batch is merged
//! in place from the back, in one pass over the array, after the entries the caller no
//! longer wants are dropped ([`SortedMap::retain`], a pass of its own). The caller sizes
//! its batches so that these passes are cheap per entry added.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A lookup finds its run by the first key of every `STRIDE`th entry.
const STRIDE: usize = 32;

/// Entries a lookup reads from the finger on before it searches.
const NEAR: usize = 4;

#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Entry<V> {
    key: u64,
    value: V,
}

#[derive(Debug)]
pub struct SortedMap<V> {
    /// Sorted by key; keys are distinct.
    entries: Vec<Entry<V>>,
    /// The key of `entries[i * STRIDE]`, for every `i`.
    firsts: Vec<u64>,
    filter: Filter,
    /// Just past the entry the last successful search found (a hint; atomic only so that
    /// a lookup can move it through a shared reference, and so the map stays `Sync`).
    finger: AtomicUsize,
}

impl<V> Default for SortedMap<V> {
    fn default() -> Self {
        SortedMap { entries: Vec::new(), firsts: Vec::new(), filter: Filter::default(), finger: AtomicUsize::new(0) }
    }
}

impl<V: Clone> Clone for SortedMap<V> {
    fn clone(&self) -> Self {
        SortedMap {
            entries: self.entries.clone(),
            firsts: self.firsts.clone(),
            filter: self.filter.clone(),
            finger: AtomicUsize::new(self.finger.load(Relaxed)),
        }
    }
}

impl<V: Copy> SortedMap<V> {
    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of heap the map takes.
    pub fn heap_bytes(&self) -> u64 {
        let entries = self.entries.capacity() * std::mem::size_of::<Entry<V>>();
        (entries + self.firsts.capacity() * 8 + self.filter.blocks.capacity() * 64) as u64
    }

    /// The index of `key`'s entry.
    #[inline(always)]
    pub fn find(&self, key: u64) -> Option<usize> {
        match self.entries.last() {
            Some(last) if key <= last.key && self.filter.may_hold(key) => self.search(key),
            _ => None,
        }
    }

    /// Starts loading the filter's line for `key` (a hint), for a [`SortedMap::find`]
    /// soon.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        if !self.filter.blocks.is_empty() {
            let (b, _) = self.filter.bits(key);
            crate::addr_map::prefetch_line(self.filter.blocks.as_ptr().wrapping_add(b));
        }
    }

    #[inline(never)]
    fn search(&self, key: u64) -> Option<usize> {
        let finger = self.finger.load(Relaxed);
        if self.entries.get(finger).is_some_and(|e| e.key <= key) {
            for (i, e) in self.entries.iter().enumerate().skip(finger).take(NEAR) {
                if e.key >= key {
                    return self.found(i, e.key == key);
                }
            }
        }
        let run = self.firsts.partition_point(|&k| k <= key).checked_sub(1)?;
        let start = run * STRIDE;
        let end = (start + STRIDE).min(self.entries.len());
        let i = start + self.entries[start..end].partition_point(|e| e.key < key);
        self.found(i, i < end && self.entries[i].key == key)
    }

    #[inline(always)]
    fn found(&self, i: usize, hit: bool) -> Option<usize> {
        if hit {
            self.finger.store(i + 1, Relaxed);
        }
        hit.then_some(i)
    }

    /// The value of the entry at `i` (from [`SortedMap::find`]).
    #[inline(always)]
    pub fn value(&self, i: usize) -> &V {
        &self.entries[i].value
    }

    /// The value of the entry at `i` (from [`SortedMap::find`]), to change.
    #[inline(always)]
    pub fn value_mut(&mut self, i: usize) -> &mut V {
        &mut self.entries[i].value
    }

    /// Every entry, by key.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.entries.iter().map(|e| (e.key, &e.value))
    }

    /// Drops the entries `keep` refuses (the index is made again by the next
    /// [`SortedMap::absorb`], which must come before the next lookup).
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        self.entries.retain(|e| keep(&e.value));
        self.firsts.clear();
    }

    /// How many entries have a key below `key`.
    pub fn count_below(&self, key: u64) -> usize {
        let Some(run) = self.firsts.partition_point(|&k| k < key).checked_sub(1) else { return 0 };
        let start = run * STRIDE;
        let end = (start + STRIDE).min(self.entries.len());
        start + self.entries[start..end].partition_point(|e| e.key < key)
    }

    /// Adds `batch`: sorted by key, with no key the map holds.
    pub fn absorb(&mut self, batch: &[(u64, V)]) {
        debug_assert!(batch.windows(2).all(|w| w[0].0 < w[1].0), "a batch sorted by key");
        let (n, m) = (self.entries.len(), batch.len());
        // The entries below the batch's first key stay where they are.
        let mut untouched = n;
        if m > 0 {
            // Exactly the room needed: a big array is moved by the allocator's `realloc`
            // (pages remapped, not copied), and a spare half would cost 12 bytes an entry.
            self.entries.reserve_exact(m);
            let fill = batch[0];
            self.entries.resize(n + m, Entry { key: fill.0, value: fill.1 });
            // From the back: the largest of the two tails goes last, so no entry is
            // overwritten before it has moved.
            let (mut i, mut j) = (n, m);
            while j > 0 {
                let (key, value) = batch[j - 1];
                if i > 0 && self.entries[i - 1].key > key {
                    self.entries[i + j - 1] = self.entries[i - 1];
                    i -= 1;
                } else {
                    debug_assert!(i == 0 || self.entries[i - 1].key != key, "a key the map holds");
                    self.entries[i + j - 1] = Entry { key, value };
                    j -= 1;
                }
            }
            untouched = i;
        }
        // The runs that start below the untouched ones' end keep their first keys.
        self.firsts.truncate(untouched.div_ceil(STRIDE));
        let rest = self.entries.get(self.firsts.len() * STRIDE..).unwrap_or_default();
        self.firsts.extend(rest.iter().step_by(STRIDE).map(|e| e.key));
        if !self.filter.fits(batch.len()) {
            self.filter = Filter::for_keys(self.entries.len());
            self.filter.add_all(self.entries.iter().map(|e| e.key));
        } else {
            self.filter.add_all(batch.iter().map(|e| e.0));
        }
    }
}

/// A blocked Bloom filter of the keys added since it was made: each key sets four bits
/// of one 64-byte block, so a test reads one cache line. About 16 bits a key when made,
/// 8 once twice as many keys were added (about 0.3 % and 2.4 % false positives): it is
/// made again, for the keys held, when the adds since reach twice the keys it was made
/// for, so keys the map dropped do not pile up in it.
#[derive(Debug, Clone, Default)]
struct Filter {
    blocks: Vec<[u64; 8]>,
    /// Keys added since it was made, and how many it takes before it is made again.
    added: usize,
    most: usize,
}

impl Filter {
    fn for_keys(keys: usize) -> Filter {
        let most = 2 * keys.max(1024);
        let blocks = vec![[0; 8]; (most * 8).div_ceil(512)];
        crate::addr_map::huge_pages(&blocks);
        Filter { blocks, added: 0, most }
    }

    /// Whether `more` keys fit before it must be made again.
    fn fits(&self, more: usize) -> bool {
        !self.blocks.is_empty() && self.added + more <= self.most
    }

    /// The key's block and its four bits there: the block from the hash's top 28 bits
    /// (scaled to the number of blocks, which need not be a power of two: a filter has
    /// far fewer than 2²⁸), each bit from 9 of its low 36.
    #[inline(always)]
    fn bits(&self, key: u64) -> (usize, [u32; 4]) {
        let mut h = key ^ (key >> 31);
        h = h.wrapping_mul(0x7fb5_d329_728e_a185);
        h ^= h >> 27;
        h = h.wrapping_mul(0x81da_def4_bc2d_d44d);
        h ^= h >> 33;
        let block = (((h >> 36) * self.blocks.len() as u64) >> 28) as usize;
        (block, [h as u32 & 511, (h >> 9) as u32 & 511, (h >> 18) as u32 & 511, (h >> 27) as u32 & 511])
    }

    /// Adds every key; each key's block is loaded 16 keys ahead, so that the
    /// misses of a big filter overlap.
    fn add_all(&mut self, keys: impl Iterator<Item = u64> + Clone) {
        const AHEAD: usize = 16;
        let mut ahead = keys.clone().skip(AHEAD);
        for key in keys {
            if let Some(k) = ahead.next() {
                let (b, _) = self.bits(k);
                crate::addr_map::prefetch_line(self.blocks.as_ptr().wrapping_add(b));
            }
            let (b, bits) = self.bits(key);
            for bit in bits {
                self.blocks[b][bit as usize / 64] |= 1 << (bit % 64);
            }
            self.added += 1;
        }
    }

    /// Whether `key` may have been added (false: certainly not). A filter with no blocks
    /// holds nothing.
    #[inline(always)]
    fn may_hold(&self, key: u64) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        let (b, bits) = self.bits(key);
        let block = &self.blocks[b];
        bits.iter().all(|&bit| block[bit as usize / 64] & 1 << (bit % 64) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Random batches and drops against a `BTreeMap`: every key is found (or not) as
    /// there, with its value, across runs and filter rebuilds.
    #[test]
    fn behaves_like_a_sorted_map() {
        let mut rnd = crate::testing::xorshift(0x2545_f491_4f6c_dd1du64);
        let mut map: SortedMap<u64> = SortedMap::default();
        let mut reference: BTreeMap<u64, u64> = BTreeMap::new();
        for round in 0..60u64 {
            // Drop a third of the values every other round, then add a batch of new keys
            // (some in a tight range, some anywhere, 0 and u64::MAX now and then; every
            // fourth batch above the keys held but for a few).
            let drop = |v: &u64| round % 2 == 0 && v % 3 == round % 3;
            reference.retain(|_, v| !drop(v));
            let top = reference.keys().next_back().copied().unwrap_or(0).min(u64::MAX / 2);
            let mut batch: BTreeMap<u64, u64> = BTreeMap::new();
            for _ in 0..rnd() % 5_000 {
                let key = match rnd() % 50 {
                    0 => 0,
                    1 => u64::MAX,
                    2 => rnd(),
                    _ if round % 4 == 1 => top + 16 + (rnd() % 200_000) * 16,
                    _ => 0x5555_0000_0000 + (rnd() % 200_000) * 16,
                };
                if !reference.contains_key(&key) {
                    batch.insert(key, rnd());
                }
            }
            let batch: Vec<(u64, u64)> = batch.into_iter().collect();
            map.retain(|v| !drop(v));
            map.absorb(&batch);
            reference.extend(batch.iter().copied());
            assert_eq!(map.len(), reference.len());
            assert!(map.iter().map(|(k, &v)| (k, v)).eq(reference.iter().map(|(&k, &v)| (k, v))), "round {round}");
            let keys: Vec<u64> = reference.keys().copied().collect();
            for _ in 0..2_000 {
                let key = match rnd() % 3 {
                    0 => keys.get((rnd() % keys.len().max(1) as u64) as usize).copied().unwrap_or(7),
                    1 => 0x5555_0000_0000 + (rnd() % 200_000) * 16,
                    _ => rnd(),
                };
                let found = map.find(key).map(|i| *map.value(i));
                assert_eq!(found, reference.get(&key).copied(), "key {key:#x}, round {round}");
                if rnd() % 32 == 0 {
                    assert_eq!(map.count_below(key), reference.range(..key).count(), "key {key:#x}, round {round}");
                }
            }
        }
        // A value changed in place is what a later lookup sees.
        let (&key, _) = reference.iter().next().expect("keys");
        let i = map.find(key).expect("held");
        *map.value_mut(i) = 42;
        assert_eq!(map.find(key).map(|i| *map.value(i)), Some(42));
    }

    /// Keys never added are rarely let through: the filter's false positives stay under
    /// 3 % at the most keys it takes before it is made again.
    #[test]
    fn the_filter_lets_few_absent_keys_through() {
        let mut f = Filter::for_keys(100_000);
        for k in 0..200_000u64 {
            f.add_all(std::iter::once(0x7f00_0000_0000 + k * 16));
        }
        assert!((0..200_000u64).all(|k| f.may_hold(0x7f00_0000_0000 + k * 16)));
        let through = (0..100_000u64).filter(|k| f.may_hold(0x7f10_0000_0000 + k * 48)).count();
        assert!(through < 3_000, "{through} of 100,000 absent keys let through");
    }
}
