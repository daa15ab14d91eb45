//! The log's callstacks by id: every stack's frames in one array.

use super::ids::FxMap;

/// The log's callstacks (return addresses, innermost first), by id.
///
/// The frames of every stack lie in one array, and a table indexed by id (the recorder
/// numbers stacks from 1) says where each stack's are, in one word. A vector per stack
/// in a hash map took about 48 bytes more per stack (the map's entry, the allocation's
/// header and rounding): 1.7 MiB of the 2 M-scale `analyzer_memory` program's 37,753.
/// Ids far past the stacks defined (a foreign log's), and stacks too long or too far in
/// the array for one word, are kept in a map beside it.
#[derive(Debug, Clone, Default)]
pub struct Stacks {
    frames: Vec<u64>,
    /// By id: where its frames are (start and count packed, see [`Stacks::pack`]), or
    /// [`NONE`].
    direct: Vec<u64>,
    /// The stacks the direct table does not hold: id → (start, count).
    other: FxMap<u32, (u64, u64)>,
    /// Stacks defined (each id once).
    len: usize,
}

/// A direct entry for an id no stack was defined for.
const NONE: u64 = u64::MAX;
/// Bits of a direct entry that hold the frame count; the others hold the start.
const COUNT_BITS: u32 = if cfg!(test) { 4 } else { 24 };
/// Ids below this are always in the direct table, and those below twice the stacks
/// defined (the recorder's are dense): 8 bytes an id.
const DIRECT_IDS: usize = 1 << 16;

impl Stacks {
    /// The frames of stack `id`, if the log defined it.
    pub fn get(&self, id: u32) -> Option<&[u64]> {
        let (start, count) = match self.direct.get(id as usize) {
            Some(&packed) if packed != NONE => (packed >> COUNT_BITS, packed & ((1 << COUNT_BITS) - 1)),
            _ => *self.other.get(&id)?,
        };
        Some(&self.frames[start as usize..(start + count) as usize])
    }

    /// Stacks defined.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no stack was defined.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Defines stack `id` (a second definition replaces the first; its frames stay in the
    /// array, unused).
    pub(crate) fn insert(&mut self, id: u32, frames: &[u64]) {
        if self.get(id).is_none() {
            self.len += 1;
        }
        let start = self.frames.len() as u64;
        let count = frames.len() as u64;
        self.frames.extend_from_slice(frames);
        let i = id as usize;
        let packed = Self::pack(start, count);
        if i >= self.direct.len() && packed.is_some() && i < DIRECT_IDS.max(2 * self.len) {
            self.direct.resize(i + 1, NONE);
        }
        match (self.direct.get_mut(i), packed) {
            (Some(entry), Some(packed)) => {
                *entry = packed;
                self.other.remove(&id);
            }
            (entry, _) => {
                if let Some(entry) = entry {
                    *entry = NONE;
                }
                self.other.insert(id, (start, count));
            }
        }
    }

    /// `start` and `count` in one direct entry, if they fit (and are not [`NONE`]).
    fn pack(start: u64, count: u64) -> Option<u64> {
        let fits = count < (1 << COUNT_BITS) && start < (1 << (64 - COUNT_BITS)) - 1;
        fits.then_some(start << COUNT_BITS | count)
    }

    /// Bytes of heap it holds (capacities; allocator overhead not counted).
    pub(crate) fn heap_bytes(&self) -> u64 {
        let map = self.other.capacity() as u64 * (4 + 16 + 1);
        (self.frames.capacity() as u64 + self.direct.capacity() as u64) * 8 + map
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Stacks of every length, at dense, sparse and huge ids, defined again, with the
    /// direct table's limits small (`COUNT_BITS` is 4 in tests): each reads back as the
    /// last definition, as a map of vectors would have it.
    #[test]
    fn stacks_read_back_as_defined() {
        let mut stacks = Stacks::default();
        let mut model: HashMap<u32, Vec<u64>> = HashMap::new();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for i in 0..20_000u32 {
            let id = match next() % 10 {
                0 => (next() % 1_000) as u32,
                1 => u32::MAX - (next() % 4) as u32,
                2 => (next() as u32) | 1 << 31,
                _ => i + 1,
            };
            // Most short enough for a direct entry (16 frames here), some not.
            let count = if next() % 10 == 0 { next() % 40 } else { next() % 16 };
            let frames: Vec<u64> = (0..count).map(|_| next()).collect();
            stacks.insert(id, &frames);
            model.insert(id, frames);
        }
        assert_eq!(stacks.len(), model.len());
        for (&id, frames) in &model {
            assert_eq!(stacks.get(id), Some(&frames[..]), "stack {id}");
        }
        assert!(stacks.other.len() < model.len() / 2, "most stacks in the direct table");
        for id in [0, 20_001, 1 << 20, u32::MAX - 10] {
            assert_eq!(stacks.get(id).is_some(), model.contains_key(&id));
        }
        assert!(Stacks::default().is_empty());
    }
}
