//! The engine's vocabulary below the state and the timeline: context node ids, and the
//! hash map its hot loops use.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Index of a context node; [`ROOT`] is the tree's root (no context).
pub type NodeId = u32;
/// The root of every context tree: allocations outside any context.
pub const ROOT: NodeId = 0;

/// FxHash for addresses and ids: the replay loop's maps are its hottest code.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A domain's index in the replay's own dense numbering (domains in order of first
/// appearance: what `ReplayState::domains`, the live-allocation tables and the timeline
/// are indexed by), as opposed to its id in the log (a bare `u32`, what `DomainInfo`,
/// `Slot::domain` and the reports use).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct DomIndex(pub(crate) u32);

impl DomIndex {
    /// The index, for indexing.
    #[inline(always)]
    pub(crate) fn get(self) -> usize {
        self.0 as usize
    }
}

/// A `HashMap` with [`FxHasher`]: the replay's keys are small integers.
pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
