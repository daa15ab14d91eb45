//! `SortedMap`: long-lived entries in one array sorted by key, with no empty slots.
//!
//! The live-allocation table ([`crate::addr_map::AddrMap`]) is fast because it is mostly
//! empty: a third full at most, so an entry of 24 bytes costs 72 to 144. Most of a big
//! program's live allocations are old and rarely touched again, and those are kept here
//! instead, 16 or 20 bytes each (see `live.rs` for when they move, and for their
//! values). A lookup here is slower
//! than in the hash table, and the replay does one only when the hash table has no entry
//! for the address: most such lookups are answered by one of two tests without touching
//! the array — the address is above the last key, or a Bloom filter says it is absent —
//! and the rest by a binary search of every [`STRIDE`]th key (an array small enough to
//! stay in cache) and then of one run of the array.
//!
//! The entries are two arrays (the keys' low halves, and the values) rather than one of
//! key and value, which would be 24 bytes with an 8-aligned value.
//! Keys are sorted, so the entries whose keys share a high half are contiguous: those
//! halves are kept once per such segment, and a heap's addresses fall in a few of them
//! (each spans 4 GiB). The every-`STRIDE`th keys are kept whole, and tell whether a run
//! lies in the key's high half (its first key's and the next run's first's are both in
//! it): then its entries compare as their low halves. Only a run that straddles two
//! segments is cut to the key's, found in the list of segments.
//!
//! A lookup that found an entry leaves a finger just past it, and the next one looks
//! there first: a program that tears its data down frees it much in the order it was
//! made, which for most allocators is close to address order.
//!
//! Entries are only added in sorted batches ([`SortedMap::absorb`]): the batch is merged
//! in place from the back, in one pass over the arrays, after the entries the caller no
//! longer wants are dropped ([`SortedMap::retain`], a pass of its own). The caller sizes
//! its batches so that these passes are cheap per entry added.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A lookup finds its run by the first key of every `STRIDE`th entry.
const STRIDE: usize = 32;

/// Entries a lookup reads from the finger on before it searches.
const NEAR: usize = 4;

/// The entries from `start` to the next segment's start, whose keys' high half is
/// `high`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    start: usize,
    high: u32,
}

#[derive(Debug)]
pub struct SortedMap<V> {
    /// The low half of each entry's key; keys are sorted and distinct.
    lows: Vec<u32>,
    /// Each entry's value, at its key's index.
    values: Vec<V>,
    /// The entries by their keys' high half: sorted by both fields, the first starting
    /// at 0, none empty (none at all when the map is empty).
    highs: Vec<Segment>,
    /// The key of entry `i * STRIDE`, for every `i` (whole: the high half too).
    firsts: Vec<u64>,
    /// The last key, if any.
    last: Option<u64>,
    filter: Filter,
    /// Just past the entry the last successful search found (a hint; atomic only so that
    /// a lookup can move it through a shared reference, and so the map stays `Sync`).
    finger: AtomicUsize,
}

impl<V> Default for SortedMap<V> {
    fn default() -> Self {
        SortedMap {
            lows: Vec::new(),
            values: Vec::new(),
            highs: Vec::new(),
            firsts: Vec::new(),
            last: None,
            filter: Filter::default(),
            finger: AtomicUsize::new(0),
        }
    }
}

impl<V: Clone> Clone for SortedMap<V> {
    fn clone(&self) -> Self {
        SortedMap {
            lows: self.lows.clone(),
            values: self.values.clone(),
            highs: self.highs.clone(),
            firsts: self.firsts.clone(),
            last: self.last,
            filter: self.filter.clone(),
            finger: AtomicUsize::new(self.finger.load(Relaxed)),
        }
    }
}

/// Each segment of `highs` (of `len` entries in all): its entries' indices, and their
/// keys' high half.
fn segments(highs: &[Segment], len: usize) -> impl Iterator<Item = (Range<usize>, u32)> + Clone + '_ {
    highs.iter().enumerate().map(move |(s, g)| (g.start..highs.get(s + 1).map_or(len, |n| n.start), g.high))
}

/// Every key of the entries `lows` and `highs` describe, in order.
fn keys<'a>(lows: &'a [u32], highs: &'a [Segment]) -> impl Iterator<Item = u64> + Clone + 'a {
    segments(highs, lows.len())
        .flat_map(move |(r, high)| lows[r].iter().map(move |&low| u64::from(high) << 32 | u64::from(low)))
}

impl<V: Copy> SortedMap<V> {
    /// Entries held.
    pub fn len(&self) -> usize {
        self.lows.len()
    }

    /// Bytes of heap the map takes.
    pub fn heap_bytes(&self) -> u64 {
        let entries = self.lows.capacity() * 4 + self.values.capacity() * std::mem::size_of::<V>();
        let index = self.highs.capacity() * std::mem::size_of::<Segment>() + self.firsts.capacity() * 8;
        (entries + index + self.filter.blocks.capacity() * 64) as u64
    }

    /// Whether a lookup of `key` reads more than the map's own fields: the key is not
    /// above the last one.
    #[inline(always)]
    pub fn covers(&self, key: u64) -> bool {
        self.last.is_some_and(|last| key <= last)
    }

    /// The index of `key`'s entry.
    #[inline(always)]
    pub fn find(&self, key: u64) -> Option<usize> {
        match self.last {
            Some(last) if key <= last && self.filter.may_hold(key) => self.search(key),
            _ => None,
        }
    }

    /// Starts loading the filter's line for `key` (a hint), for a [`SortedMap::find`]
    /// soon.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        // No test for an empty filter: its block is then 0 of a dangling pointer, and a
        // prefetch of any address is harmless.
        crate::addr_map::prefetch_line(self.filter.blocks.as_ptr().wrapping_add(self.filter.block(key)));
    }

    #[inline(never)]
    fn search(&self, key: u64) -> Option<usize> {
        let low = key as u32;
        let finger = self.finger.load(Relaxed);
        if let Some(end) = self.run_end(finger / STRIDE, key) {
            if finger < end && self.lows[finger] <= low {
                for (i, &l) in self.lows[finger..end].iter().enumerate().take(NEAR) {
                    if l >= low {
                        return self.found(finger + i, l == low);
                    }
                }
            }
        }
        let run = self.firsts.partition_point(|&k| k <= key).checked_sub(1)?;
        let (start, end) = match self.run_end(run, key) {
            Some(end) => (run * STRIDE, end),
            None => self.run_cut(run, key)?,
        };
        let i = start + self.lows.get(start..end).map_or(0, |r| r.partition_point(|&l| l < low));
        self.found(i, i < end && self.lows[i] == low)
    }

    /// The end of run `r`, if all its keys have `key`'s high half (then they compare as
    /// their low halves): its first key's and the next run's first's (or the last key's)
    /// are the same as `key`'s. Most runs lie in one high half.
    #[inline(always)]
    fn run_end(&self, r: usize, key: u64) -> Option<usize> {
        let first = *self.firsts.get(r)?;
        let next = match self.firsts.get(r + 1) {
            Some(&next) => next,
            None => self.last?,
        };
        (((first ^ key) | (next ^ key)) >> 32 == 0).then(|| (r * STRIDE + STRIDE).min(self.lows.len()))
    }

    /// The entries of run `r` with `key`'s high half (none if no segment has it), for a
    /// run that straddles segments or a key above its first key's high half.
    #[cold]
    fn run_cut(&self, r: usize, key: u64) -> Option<(usize, usize)> {
        let high = (key >> 32) as u32;
        let s = self.highs.partition_point(|g| g.high < high);
        let lo = self.highs.get(s).filter(|g| g.high == high)?.start;
        let hi = self.highs.get(s + 1).map_or(self.lows.len(), |g| g.start);
        Some(((r * STRIDE).max(lo), (r * STRIDE + STRIDE).min(hi)))
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
        &self.values[i]
    }

    /// The value of the entry at `i` (from [`SortedMap::find`]), to change.
    #[inline(always)]
    pub fn value_mut(&mut self, i: usize) -> &mut V {
        &mut self.values[i]
    }

    /// Every entry, by key.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        keys(&self.lows, &self.highs).zip(&self.values)
    }

    /// Drops the entries `keep` refuses (the index is made again by the next
    /// [`SortedMap::absorb`], which must come before the next lookup).
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        let mut highs = Vec::with_capacity(self.highs.len());
        let mut w = 0;
        for (entries, high) in segments(&self.highs, self.lows.len()) {
            let start = w;
            for r in entries {
                if keep(&self.values[r]) {
                    self.lows[w] = self.lows[r];
                    self.values[w] = self.values[r];
                    w += 1;
                }
            }
            if w > start {
                highs.push(Segment { start, high });
            }
        }
        self.lows.truncate(w);
        self.values.truncate(w);
        self.highs = highs;
        self.firsts.clear();
    }

    /// The same map with each value made by `f` (the keys and their index kept as they
    /// are: only the values are copied).
    pub fn map_values<W>(self, f: impl FnMut(&V) -> W) -> SortedMap<W> {
        let finger = AtomicUsize::new(self.finger.load(Relaxed));
        let values = self.values.iter().map(f).collect();
        drop(self.values);
        let SortedMap { lows, highs, firsts, last, filter, .. } = self;
        SortedMap { lows, values, highs, firsts, last, filter, finger }
    }

    /// How many entries have a key below `key`.
    pub fn count_below(&self, key: u64) -> usize {
        let Some(run) = self.firsts.partition_point(|&k| k < key).checked_sub(1) else { return 0 };
        let (mut lo, mut hi) = (run * STRIDE, ((run + 1) * STRIDE).min(self.lows.len()));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.key_at(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The key of the entry at `i`.
    fn key_at(&self, i: usize) -> u64 {
        let g = self.highs[self.highs.partition_point(|g| g.start <= i) - 1];
        u64::from(g.high) << 32 | u64::from(self.lows[i])
    }

    /// Adds `batch`: sorted by key, with no key the map holds.
    pub fn absorb(&mut self, batch: &[(u64, V)]) {
        debug_assert!(batch.windows(2).all(|w| w[0].0 < w[1].0), "a batch sorted by key");
        let (n, m) = (self.lows.len(), batch.len());
        // The entries below the batch's first key stay where they are.
        let mut untouched = n;
        if m > 0 {
            // Exactly the room needed: a big array is moved by the allocator's `realloc`
            // (pages remapped, not copied), and a spare half would cost 10 bytes an entry.
            self.lows.reserve_exact(m);
            self.values.reserve_exact(m);
            self.lows.resize(n + m, 0);
            self.values.resize(n + m, batch[0].1);
            // From the back, one high half at a time (the highest of the old entries'
            // and the batch's left): the largest of the two tails goes last, so no entry
            // is overwritten before it has moved; the old entries of that high half (the
            // segment `old - 1`, below `i`) and the batch's (below `j`) compare as their
            // low halves. The new segments are made back to front, one per high half.
            let mut highs: Vec<Segment> = Vec::with_capacity(self.highs.len() + 1);
            let mut old = self.highs.len();
            let (mut i, mut j) = (n, m);
            while j > 0 {
                let high = (batch[j - 1].0 >> 32) as u32;
                let held = old.checked_sub(1).map(|s| self.highs[s]);
                let high = held.map_or(high, |g| g.high.max(high));
                // The old entries of `high` are [below, i), the batch's [j_below, j).
                let below = match held {
                    Some(g) if g.high == high => {
                        old -= 1;
                        g.start
                    }
                    _ => i,
                };
                let j_below = batch[..j].partition_point(|e| e.0 >> 32 < u64::from(high));
                while j > j_below {
                    let (key, value) = batch[j - 1];
                    if i > below && self.lows[i - 1] > key as u32 {
                        self.lows[i + j - 1] = self.lows[i - 1];
                        self.values[i + j - 1] = self.values[i - 1];
                        i -= 1;
                    } else {
                        debug_assert!(i == below || self.lows[i - 1] != key as u32, "a key the map holds");
                        self.lows[i + j - 1] = key as u32;
                        self.values[i + j - 1] = value;
                        j -= 1;
                    }
                }
                // The old entries of `high` left are below the batch's: they move up past
                // the rest of the batch (and stay where they are if it is all placed).
                if j > 0 {
                    self.lows.copy_within(below..i, below + j);
                    self.values.copy_within(below..i, below + j);
                }
                untouched = i;
                i = below;
                highs.push(Segment { start: below + j, high });
            }
            // The old entries below `i` are where they were, in their old segments.
            highs.extend(self.highs[..old].iter().rev());
            highs.reverse();
            self.highs = highs;
        }
        // The runs that start below the untouched entries' end keep their first keys.
        self.firsts.truncate(untouched.div_ceil(STRIDE));
        let from = self.firsts.len() * STRIDE;
        for (entries, high) in segments(&self.highs, self.lows.len()) {
            let (high, lows) = (u64::from(high) << 32, &self.lows);
            let start = entries.start.max(from).next_multiple_of(STRIDE);
            self.firsts.extend((start..entries.end).step_by(STRIDE).map(|i| high | u64::from(lows[i])));
        }
        self.last = self.lows.last().zip(self.highs.last()).map(|(&low, g)| u64::from(g.high) << 32 | u64::from(low));
        if !self.filter.fits(m) {
            // The old filter goes first: both at once would be a peak of their own.
            self.filter = Filter::default();
            self.filter = Filter::for_keys(self.lows.len());
            self.filter.add_all(keys(&self.lows, &self.highs));
        } else {
            self.filter.add_all(batch.iter().map(|e| e.0));
        }
    }
}

/// Sorts `entries` by key, for [`SortedMap::absorb`] (equal keys in no particular order).
///
/// A least-significant-digit radix sort over the bits in which the keys differ, 11 at a
/// time: a batch of heap addresses differs in 20 to 30 bits (the low ones of an
/// alignment not among them), so it takes two or three passes of a count and a scatter,
/// a third of the instructions of a comparison sort of the tens of thousands of entries
/// a move takes.
pub fn sort_by_key<V: Copy>(entries: &mut Vec<(u64, V)>) {
    const DIGIT: u32 = 11;
    const MASK: u64 = (1 << DIGIT) - 1;
    if entries.len() < 1024 {
        entries.sort_unstable_by_key(|e| e.0);
        return;
    }
    let first = entries[0].0;
    let differ = entries.iter().fold(0, |d, e| d | (e.0 ^ first));
    let end = 64 - differ.leading_zeros();
    let mut shift = differ.trailing_zeros();
    let mut from = std::mem::take(entries);
    let mut to = from.clone();
    let mut counts = [0usize; 1 << DIGIT];
    while shift < end {
        counts.fill(0);
        for e in &from {
            counts[(e.0 >> shift & MASK) as usize] += 1;
        }
        // A digit every key shares orders nothing.
        if counts[(first >> shift & MASK) as usize] < from.len() {
            let mut start = 0;
            for c in &mut counts {
                (*c, start) = (start, start + *c);
            }
            for e in &from {
                let c = &mut counts[(e.0 >> shift & MASK) as usize];
                to[*c] = *e;
                *c += 1;
            }
            std::mem::swap(&mut from, &mut to);
        }
        shift += DIGIT;
    }
    *entries = from;
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

    /// The key's block: the top 28 bits of a Fibonacci hash (one multiply: the replay
    /// computes it ahead of lookups to load the line, see [`SortedMap::prefetch`]),
    /// scaled to the number of blocks (which need not be a power of two: a filter has
    /// far fewer than 2²⁸).
    #[inline(always)]
    fn block(&self, key: u64) -> usize {
        (((key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 36) * self.blocks.len() as u64) >> 28) as usize
    }

    /// The key's block and its four bits there, each from 9 bits of a second hash
    /// (a full mix: all of the key's bits in each).
    #[inline(always)]
    fn bits(&self, key: u64) -> (usize, [u32; 4]) {
        let mut h = key ^ (key >> 31);
        h = h.wrapping_mul(0x7fb5_d329_728e_a185);
        h ^= h >> 27;
        h = h.wrapping_mul(0x81da_def4_bc2d_d44d);
        h ^= h >> 33;
        (self.block(key), [h as u32 & 511, (h >> 9) as u32 & 511, (h >> 18) as u32 & 511, (h >> 27) as u32 & 511])
    }

    /// Adds every key; each key's block is loaded 16 keys before its bits are set, so
    /// that the misses of a big filter overlap (the keys' bits wait in a ring, each
    /// hashed once).
    fn add_all(&mut self, keys: impl Iterator<Item = u64>) {
        const AHEAD: usize = 16;
        let mut ring = [(0, [0; 4]); AHEAD];
        let mut n = 0;
        for key in keys {
            let (b, bits) = self.bits(key);
            crate::addr_map::prefetch_line(self.blocks.as_ptr().wrapping_add(b));
            let slot = &mut ring[n % AHEAD];
            if n >= AHEAD {
                set(&mut self.blocks, *slot);
            }
            *slot = (b, bits);
            n += 1;
        }
        for &waiting in &ring[..n.min(AHEAD)] {
            set(&mut self.blocks, waiting);
        }
        self.added += n;

        fn set(blocks: &mut [[u64; 8]], (b, bits): (usize, [u32; 4])) {
            for bit in bits {
                blocks[b][bit as usize / 64] |= 1 << (bit % 64);
            }
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

    /// The radix sort orders as a comparison sort does: small and big batches, keys that
    /// differ in a few low bits, in bits across both halves, in the top bit, and equal.
    #[test]
    fn batches_sort_as_a_comparison_sort_would() {
        let mut rnd = crate::testing::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let shapes: [(usize, u64, u64); 7] = [
            (100, u64::MAX, 0),
            (5_000, 0xfff0, 0x5555_0000_0000),
            (20_000, 0x3fff_fff0, 0x7f00_0000_0000),
            (20_000, 0xffff_ffff_ffff, 0),
            (20_000, u64::MAX, 0),
            (3_000, 0, 0x1234),
            (4_000, 0x7, 1 << 63),
        ];
        for (n, mask, base) in shapes {
            let mut batch: Vec<(u64, u32)> = (0..n as u32).map(|i| (base | (rnd() & mask), i)).collect();
            let mut want = batch.clone();
            sort_by_key(&mut batch);
            want.sort_unstable();
            assert!(batch.windows(2).all(|w| w[0].0 <= w[1].0), "sorted, {n} keys under {mask:#x}");
            batch.sort_unstable();
            assert_eq!(batch, want, "the same entries, {n} keys under {mask:#x}");
        }
    }

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
            check_index(&map);
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

    /// The index agrees with the entries: segments sorted by both fields, the first at
    /// 0, none empty, every `STRIDE`th key and the last one.
    fn check_index(map: &SortedMap<u64>) {
        let keys: Vec<u64> = map.iter().map(|(k, _)| k).collect();
        assert_eq!(map.highs.first().map(|g| g.start), (!keys.is_empty()).then_some(0));
        assert!(map.highs.windows(2).all(|w| w[0].start < w[1].start && w[0].high < w[1].high));
        assert!(map.highs.last().is_none_or(|g| g.start < keys.len()));
        assert!(map.firsts.iter().copied().eq(keys.iter().copied().step_by(STRIDE)));
        assert_eq!(map.last, keys.last().copied());
    }

    /// Keys over several high halves (0, a heap's, and the highest), with runs and
    /// batches that straddle a high half's boundary, batches landing before, between
    /// and after the segments held, and drops that empty whole segments: against a
    /// `BTreeMap`, with lookups of held keys, their neighbours and keys in no segment,
    /// and a walk through all held keys in order (the finger across segments).
    #[test]
    fn keys_over_many_high_halves() {
        const HIGHS: [u32; 8] = [0, 1, 2, 0x5555, 0x7fff_fffe, 0x7fff_ffff, u32::MAX - 1, u32::MAX];
        let mut rnd = crate::testing::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let mut map: SortedMap<u64> = SortedMap::default();
        let mut reference: BTreeMap<u64, u64> = BTreeMap::new();
        let (mut segments_emptied, mut most_segments) = (0, 0);
        // Batches with a high half below the segments held, between two, above them.
        let mut landed = [0; 3];
        for round in 0..80u64 {
            // A value is tagged with its key's high half mod 8: every fourth round drops
            // a whole tag, so whole segments go; the others a third of the values.
            let tag = round % 8;
            let drop = |v: &u64| if round % 4 == 3 { v >> 32 == tag } else { v % 3 == round % 3 };
            let before: Vec<u32> = map.highs.iter().map(|g| g.high).collect();
            // (Every fourth round none: the batch merges into the index as it is.)
            if round % 4 != 1 {
                reference.retain(|_, v| !drop(v));
                map.retain(|v| !drop(v));
            }
            let after: Vec<u32> = map.iter().map(|(k, _)| (k >> 32) as u32).collect();
            segments_emptied += before.iter().filter(|h| !after.contains(h)).count();
            // This round's batch: from one to three high halves.
            let mut batch: BTreeMap<u64, u64> = BTreeMap::new();
            let halves: Vec<u32> = (0..1 + rnd() % 3).map(|_| HIGHS[(rnd() % 8) as usize]).collect();
            for _ in 0..rnd() % 3_000 {
                let high = u64::from(halves[(rnd() % halves.len() as u64) as usize]) << 32;
                let key = match rnd() % 8 {
                    // Across the boundary above `high` (wrapping at the top).
                    0 | 1 => (high | 0xffff_f000).wrapping_add((rnd() % 1024) * 8),
                    2 => high | (rnd() % 4096),
                    3 => high | (u32::MAX - (rnd() % 4096) as u32) as u64,
                    4 => high | (rnd() as u32) as u64,
                    _ => (high | 0x1234_0000) + (rnd() % 100_000) * 16,
                };
                if !reference.contains_key(&key) {
                    batch.insert(key, ((key >> 32) % 8) << 32 | (rnd() & 0xffff_ffff));
                }
            }
            let batch: Vec<(u64, u64)> = batch.into_iter().collect();
            if let (Some(first), Some(last)) = (after.first(), after.last()) {
                let new = |&(k, _): &(u64, u64)| !after.contains(&((k >> 32) as u32));
                landed[0] += usize::from(batch.iter().any(|e| (e.0 >> 32) < u64::from(*first)));
                landed[1] += usize::from(
                    batch
                        .iter()
                        .filter(|e| new(e))
                        .any(|e| (u64::from(*first)..u64::from(*last)).contains(&(e.0 >> 32))),
                );
                landed[2] += usize::from(batch.iter().any(|e| (e.0 >> 32) > u64::from(*last)));
            }
            map.absorb(&batch);
            reference.extend(batch.iter().copied());
            assert_eq!(map.len(), reference.len());
            assert!(map.iter().map(|(k, &v)| (k, v)).eq(reference.iter().map(|(&k, &v)| (k, v))), "round {round}");
            check_index(&map);
            most_segments = most_segments.max(map.highs.len());
            let keys: Vec<u64> = reference.keys().copied().collect();
            for _ in 0..3_000 {
                let near = keys.get((rnd() % keys.len().max(1) as u64) as usize).copied().unwrap_or(7);
                let key = match rnd() % 6 {
                    0 | 1 => near,
                    2 => near.wrapping_add(1),
                    3 => near.wrapping_sub(1),
                    4 => (u64::from(HIGHS[(rnd() % 8) as usize]) << 32) | (rnd() % 4096),
                    _ => rnd(),
                };
                let found = map.find(key).map(|i| *map.value(i));
                assert_eq!(found, reference.get(&key).copied(), "key {key:#x}, round {round}");
                // And past the filter, which turns most absent keys away.
                let found = map.search(key).map(|i| *map.value(i));
                assert_eq!(found, reference.get(&key).copied(), "key {key:#x} searched, round {round}");
                if rnd() % 16 == 0 {
                    assert_eq!(map.count_below(key), reference.range(..key).count(), "key {key:#x}, round {round}");
                }
            }
            for (&key, &value) in reference.iter().step_by(1 + (round % 3) as usize) {
                assert_eq!(map.find(key).map(|i| *map.value(i)), Some(value), "key {key:#x} in order, round {round}");
            }
        }
        assert!(segments_emptied >= 10, "{segments_emptied} segments emptied");
        assert!(most_segments >= 8, "at most {most_segments} segments");
        assert!(landed.iter().all(|&n| n >= 5), "batches before, between, after the segments: {landed:?}");
    }

    /// A key whose low half an entry of another high half has is absent, whether the
    /// search starts at the finger or at its run (searched past the filter, which would
    /// most likely turn it away first).
    #[test]
    fn a_low_half_in_another_segment_is_not_the_key() {
        let mut map: SortedMap<u64> = SortedMap::default();
        let (a, b) = (0x5555u64 << 32, 0x5556u64 << 32);
        map.absorb(&[(a | 5, 1), (a | 6, 2), (b | 30, 3), (b | 31, 4)]);
        assert_eq!(map.highs.len(), 2);
        for key in [a | 30, a | 31, b | 5, b | 6, 0x5557 << 32 | 5] {
            assert_eq!(map.find(a | 5), Some(0));
            assert_eq!(map.search(key), None, "{key:#x} after the finger");
            assert_eq!(map.search(key), None, "{key:#x}");
        }
        assert_eq!(map.find(b | 30), Some(2));
        assert_eq!(map.find(b | 31), Some(3));
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
