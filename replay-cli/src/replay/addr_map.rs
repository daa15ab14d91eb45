//! `AddrMap`: the live-allocation table, an open-addressing hash table keyed by address.
//!
//! The replay's time goes mostly into cache misses on this table: every allocation and
//! every free looks up an address that is anywhere in it. A general-purpose map cannot be
//! asked where a key would be, so this one is hand-rolled for one trick: the replay knows
//! the next events before it applies them, and [`AddrMap::prefetch`] starts loading their
//! slots a few events ahead, so the misses overlap instead of following one another.
//!
//! It is deliberately simple: linear probing over a power-of-two array of keys and a
//! parallel array of values, insert and update only. Nothing is ever removed one by one
//! (the replay marks freed entries instead, see `state.rs`); [`AddrMap::retain`] rebuilds
//! the table without the entries it drops.

/// The key of an empty slot. A real entry with this key lives in `max_key`.
const EMPTY: u64 = u64::MAX;

/// Smallest capacity (slots) of a table that holds anything.
const MIN_CAPACITY: usize = 1024;

#[derive(Debug, Clone)]
pub struct AddrMap<V> {
    keys: Vec<u64>,
    values: Vec<V>,
    /// Entries in `keys`/`values` (not counting `max_key`).
    len: usize,
    /// The entry whose key is `u64::MAX` (the empty marker), if any.
    max_key: Option<V>,
}

impl<V> Default for AddrMap<V> {
    fn default() -> Self {
        AddrMap { keys: Vec::new(), values: Vec::new(), len: 0, max_key: None }
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

/// Fibonacci hashing: addresses are multiples of 8 or 16 and clustered; the multiply
/// spreads their middle bits over the top, which pick the slot.
#[inline(always)]
fn home(key: u64, mask: usize) -> usize {
    let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h.rotate_left(32) as usize) & mask
}

impl<V: Copy + Default> AddrMap<V> {
    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.len + usize::from(self.max_key.is_some())
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
            return self.max_key.as_ref();
        }
        if self.keys.is_empty() {
            return None;
        }
        let i = self.find(key);
        (self.keys[i] == key).then(|| &self.values[i])
    }

    /// The value of `key`, inserting `V::default()` first if it is absent; the flag says
    /// whether it was present.
    #[inline]
    pub fn entry(&mut self, key: u64) -> (&mut V, bool) {
        if key == EMPTY {
            let present = self.max_key.is_some();
            return (self.max_key.get_or_insert_with(V::default), present);
        }
        // At most three quarters full: linear probing degrades fast past that.
        if (self.len + 1) * 4 > self.keys.len() * 3 {
            self.grow();
        }
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
    #[inline]
    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let (slot, present) = self.entry(key);
        let old = std::mem::replace(slot, value);
        present.then_some(old)
    }

    /// Starts loading the slot of `key` into the cache (a hint; does nothing elsewhere
    /// than on x86-64).
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        if self.keys.is_empty() {
            return;
        }
        let i = home(key, self.mask());
        prefetch_line(&self.keys[i]);
        // A value may straddle two cache lines: fetch both ends.
        let value: *const u8 = (&self.values[i] as *const V).cast();
        prefetch_line(value);
        prefetch_line(value.wrapping_add(std::mem::size_of::<V>() - 1));
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.keys
            .iter()
            .zip(&self.values)
            .filter(|(&k, _)| k != EMPTY)
            .map(|(&k, v)| (k, v))
            .chain(self.max_key.as_ref().map(|v| (EMPTY, v)))
    }

    /// Keeps only the entries for which `keep` holds, in a table sized for them.
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        let kept = self.iter().filter(|(_, v)| keep(v)).count();
        self.rebuild(kept, keep);
    }

    fn grow(&mut self) {
        self.rebuild(self.len + 1, |_| true);
    }

    /// Moves the entries `keep` accepts into a table with room for `entries` at a load of
    /// at most one half.
    fn rebuild(&mut self, entries: usize, mut keep: impl FnMut(&V) -> bool) {
        let capacity = (entries * 2).next_power_of_two().max(MIN_CAPACITY);
        let keys = std::mem::replace(&mut self.keys, vec![EMPTY; capacity]);
        let values = std::mem::replace(&mut self.values, vec![V::default(); capacity]);
        self.len = 0;
        for (k, v) in keys.into_iter().zip(values) {
            if k != EMPTY && keep(&v) {
                let i = self.find(k);
                self.keys[i] = k;
                self.values[i] = v;
                self.len += 1;
            }
        }
        if self.max_key.as_ref().is_some_and(|v| !keep(v)) {
            self.max_key = None;
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
