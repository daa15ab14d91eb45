//! The log's callstacks by id: their frames in a few large arrays.

use super::ids::FxMap;

/// The log's callstacks (return addresses, innermost first), by id.
///
/// The frames of the stacks lie side by side in arrays of 64 Ki frames (a stack longer
/// than a quarter of that has an array of its own), and a table indexed by id (the
/// recorder numbers stacks from 1) says where each stack's are, in one word. A vector per
/// stack in a hash map took about 48 bytes more per stack (the map's entry, the
/// allocation's header and rounding): 1.7 MiB of the 2 M-scale `analyzer_memory`
/// program's 37,753. Arrays of a fixed size rather than one that doubles: memory grows
/// as stacks come, so the memory ceiling stops a replay before one doubling asks for
/// more than the process may have. Ids far past the stacks defined (a foreign log's),
/// and stacks in an array of their own, are kept in a map beside the table.
#[derive(Debug, Clone, Default)]
pub struct Stacks {
    chunks: Vec<Vec<u64>>,
    /// The chunk that short stacks are added to.
    shared: Option<u32>,
    /// By id: where its frames are (see [`pack`]), or [`NONE`].
    direct: Vec<u64>,
    /// The stacks the direct table does not hold: id → (chunk, start, count).
    other: FxMap<u32, (u32, u32, u64)>,
    /// Stacks defined (each id once).
    len: usize,
}

/// Frames in an array shared by many stacks. Tests make it small.
const CHUNK: usize = if cfg!(test) { 64 } else { 1 << 16 };
/// A direct entry for an id no stack was defined for.
const NONE: u64 = u64::MAX;
/// Ids below this are always in the direct table, and those below twice the stacks
/// defined (the recorder's are dense): 8 bytes an id.
const DIRECT_IDS: usize = 1 << 16;

/// A direct entry: the chunk in the high 32 bits, then the start and the count (each
/// below [`CHUNK`], so 16 bits each); `None` if it does not fit (or would be [`NONE`]).
fn pack(chunk: u32, start: u32, count: u64) -> Option<u64> {
    let fits = start < 1 << 16 && count < 1 << 16 && chunk < u32::MAX;
    fits.then(|| u64::from(chunk) << 32 | u64::from(start) << 16 | count)
}

impl Stacks {
    /// The frames of stack `id`, if the log defined it.
    pub fn get(&self, id: u32) -> Option<&[u64]> {
        let (chunk, start, count) = match self.direct.get(id as usize) {
            Some(&packed) if packed != NONE => ((packed >> 32) as u32, (packed >> 16) as u32 & 0xffff, packed & 0xffff),
            _ => *self.other.get(&id)?,
        };
        let start = start as usize;
        Some(&self.chunks[chunk as usize][start..start + count as usize])
    }

    /// Stacks defined.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no stack was defined.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Defines stack `id` (a second definition replaces the first; its frames stay,
    /// unused).
    pub(crate) fn insert(&mut self, id: u32, frames: &[u64]) {
        if self.get(id).is_none() {
            self.len += 1;
        }
        let (chunk, start) = self.place(frames);
        let count = frames.len() as u64;
        let i = id as usize;
        let packed = pack(chunk, start, count);
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
                self.other.insert(id, (chunk, start, count));
            }
        }
    }

    /// Copies `frames` into a chunk: a long stack into one of its own, a short one into
    /// the shared chunk, or a new shared chunk when that one is full. Returns the chunk
    /// and where in it they start.
    fn place(&mut self, frames: &[u64]) -> (u32, u32) {
        // A chunk's index and a start fit in 32 bits: 2^32 chunks would be far past
        // memory, and a start is below `CHUNK` (0 in a chunk of its own).
        let new_chunk = |chunks: &mut Vec<Vec<u64>>, capacity: usize| {
            chunks.push(Vec::with_capacity(capacity));
            (chunks.len() - 1) as u32
        };
        let chunk = if frames.len() > CHUNK / 4 {
            new_chunk(&mut self.chunks, frames.len())
        } else {
            match self.shared {
                Some(c) if CHUNK - self.chunks[c as usize].len() >= frames.len() => c,
                _ => *self.shared.insert(new_chunk(&mut self.chunks, CHUNK)),
            }
        };
        let c = &mut self.chunks[chunk as usize];
        let start = c.len() as u32;
        c.extend_from_slice(frames);
        (chunk, start)
    }

    /// Bytes of heap it holds (capacities; allocator overhead not counted).
    pub(crate) fn heap_bytes(&self) -> u64 {
        let frames: u64 = self.chunks.iter().map(|c| c.capacity() as u64 * 8).sum();
        let map = self.other.capacity() as u64 * (4 + 16 + 1);
        frames + self.chunks.capacity() as u64 * 24 + self.direct.capacity() as u64 * 8 + map
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Stacks of every length (a few longer than a shared chunk holds: `CHUNK` is 64 in
    /// tests), at dense, sparse and huge ids, defined again: each reads back as the last
    /// definition, as a map of vectors would have it, and memory grows with the frames.
    #[test]
    fn stacks_read_back_as_defined() {
        let mut stacks = Stacks::default();
        let mut model: HashMap<u32, Vec<u64>> = HashMap::new();
        let mut next = crate::testing::xorshift(0x2545_f491_4f6c_dd1du64);
        let mut frames_in = 0u64;
        for i in 0..20_000u32 {
            let id = match next() % 10 {
                0 => (next() % 1_000) as u32,
                1 => u32::MAX - (next() % 4) as u32,
                2 => (next() as u32) | 1 << 31,
                _ => i + 1,
            };
            // Mostly short, some longer than a quarter chunk (arrays of their own).
            let count = if next() % 10 == 0 { next() % 200 } else { next() % 16 };
            let frames: Vec<u64> = (0..count).map(|_| next()).collect();
            frames_in += count;
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
        let frames_held: u64 = stacks.chunks.iter().map(|c| c.capacity() as u64).sum();
        assert!(frames_held < frames_in * 3 / 2 + CHUNK as u64, "{frames_held} for {frames_in}");
        assert!(Stacks::default().is_empty());
    }
}
