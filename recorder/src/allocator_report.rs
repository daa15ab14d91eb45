//! Snapshots of a GPU sub-allocator's own report, recorded as the difference from the
//! previous one: for wgpu / gpu-allocator users, whose allocations the game never sees
//! one by one.
//!
//! `wgpu::Device::generate_allocator_report()` (gpu-allocator's `AllocatorReport`) lists
//! the device-memory blocks and the sub-allocations in them. memreplay does not depend
//! on either crate: the game copies the report into the borrowed mirror
//! [`AllocatorSnapshot`] (no string is copied) and calls [`record_allocator_report`]:
//!
//! ```ignore
//! let report = device.generate_allocator_report().unwrap();
//! let allocations: Vec<memreplay::SnapshotAllocation> = report
//!     .allocations
//!     .iter()
//!     .map(|a| memreplay::SnapshotAllocation { name: &a.name, offset: a.offset, size: a.size })
//!     .collect();
//! let blocks: Vec<memreplay::SnapshotBlock> = report
//!     .blocks
//!     .iter()
//!     .map(|b| memreplay::SnapshotBlock { size: b.size, allocations: b.allocations.clone() })
//!     .collect();
//! memreplay::record_allocator_report(
//!     gpu_blocks,
//!     gpu_allocations,
//!     &memreplay::AllocatorSnapshot {
//!         allocations: &allocations,
//!         blocks: &blocks,
//!         total_allocated_bytes: report.total_allocated_bytes,
//!         total_reserved_bytes: report.total_reserved_bytes,
//!     },
//! )?;
//! ```
//!
//! **Identity rule.** A report names neither blocks nor allocations, so they are matched
//! by position and shape:
//!
//! - a block is the *same block* as in the previous snapshot when it is at the same
//!   index in `blocks` and has the same size; any other block is a new one (the old one
//!   at that index, if any, is freed);
//! - a sub-allocation is the *same allocation* when it is in the same block, at the same
//!   offset, with the same size and name; otherwise the old one is freed and the new one
//!   allocated (a moved allocation is a free and an allocation, which is what a move is).
//!
//! Each new block gets a synthetic address of its own in the `blocks` domain (the n-th
//! block of the pair at n × 2⁴⁰, so blocks up to 1 TiB never overlap), and each
//! sub-allocation the address block + offset in the `allocations` domain, which should be
//! defined within `blocks` (`Domain::define_within`) so that reports count its bytes
//! once. After each call the live bytes of `allocations` are the snapshot's
//! `total_allocated_bytes` and those of `blocks` its `total_reserved_bytes` (when the
//! report's totals are the sums of its entries, as gpu-allocator's are).
//!
//! **Limits.** The log holds what changed *between snapshots*: an allocation made and
//! freed between two calls is never seen, and its time is the call's. When a block
//! before others is freed, gpu-allocator's list shifts and the later blocks no longer
//! match their index: they are recorded as freed and allocated again (the figures stay
//! exact; the churn is synthetic). Sub-allocations carry their name as a resource
//! descriptor of kind `Other` (the report says nothing of their kind).

use std::ops::Range;

use crate::Domain;

/// A borrowed mirror of gpu-allocator's `AllocatorReport`, which
/// `wgpu::Device::generate_allocator_report()` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocatorSnapshot<'a> {
    /// Every sub-allocation (`AllocatorReport::allocations`).
    pub allocations: &'a [SnapshotAllocation<'a>],
    /// Every device-memory block, with the range of `allocations` it holds
    /// (`AllocatorReport::blocks`).
    pub blocks: &'a [SnapshotBlock],
    /// Bytes sub-allocated (`AllocatorReport::total_allocated_bytes`).
    pub total_allocated_bytes: u64,
    /// Bytes of device memory in blocks (`AllocatorReport::total_reserved_bytes`).
    pub total_reserved_bytes: u64,
}

/// One sub-allocation (gpu-allocator's `AllocationReport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotAllocation<'a> {
    /// Its debug name (may be empty).
    pub name: &'a str,
    /// Its offset in its block, in bytes.
    pub offset: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// One device-memory block (gpu-allocator's `MemoryBlockReport`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotBlock {
    /// Its size in bytes.
    pub size: u64,
    /// The indices in [`AllocatorSnapshot::allocations`] of the sub-allocations in it.
    pub allocations: Range<usize>,
}

/// Why a snapshot was refused (nothing of it was recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    /// Block `block`'s range of allocations runs past the `allocations` list (or ends
    /// before it starts).
    BadRange {
        /// Index of the block.
        block: usize,
        /// Its range.
        range: Range<usize>,
        /// Length of the `allocations` list.
        allocations: usize,
    },
    /// A sub-allocation runs past the end of its block.
    PastBlockEnd {
        /// Index of the block.
        block: usize,
        /// Index of the allocation.
        allocation: usize,
    },
    /// Two sub-allocations of a block start at the same offset.
    SameOffset {
        /// Index of the block.
        block: usize,
        /// The offset.
        offset: u64,
    },
    /// A block of 1 TiB or more (blocks are spaced 2⁴⁰ bytes apart).
    BlockTooLarge {
        /// Index of the block.
        block: usize,
    },
    /// The same domain was passed for blocks and allocations.
    SameDomain,
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::BadRange { block, range, allocations } => write!(
                f,
                "allocator report: block {block} holds allocations {range:?}, past the {allocations} allocations listed"
            ),
            SnapshotError::PastBlockEnd { block, allocation } => {
                write!(f, "allocator report: allocation {allocation} runs past the end of block {block}")
            }
            SnapshotError::SameOffset { block, offset } => {
                write!(f, "allocator report: two allocations of block {block} start at offset {offset}")
            }
            SnapshotError::BlockTooLarge { block } => {
                write!(f, "allocator report: block {block} is 1 TiB or more, past the spacing of recorded blocks")
            }
            SnapshotError::SameDomain => {
                f.write_str("allocator report: blocks and allocations need two domains, the second within the first")
            }
        }
    }
}

impl std::error::Error for SnapshotError {}

/// Records `report`, a snapshot of a sub-allocator's blocks and allocations, as the
/// difference from the previous snapshot recorded for the same (`blocks`, `allocations`)
/// pair in this session: blocks as allocations of `blocks` at synthetic addresses,
/// sub-allocations as allocations of `allocations` (a domain defined within `blocks`)
/// at block address + offset, and frees of what disappeared. See the module's identity
/// rule and its limits. A malformed report is refused before anything is recorded.
/// Does nothing (and checks nothing) when not recording, or with the feature off.
pub fn record_allocator_report(
    blocks: Domain,
    allocations: Domain,
    report: &AllocatorSnapshot<'_>,
) -> Result<(), SnapshotError> {
    #[cfg(feature = "capture_replay_log")]
    {
        imp::record(blocks, allocations, report)
    }
    #[cfg(not(feature = "capture_replay_log"))]
    {
        let _ = (blocks, allocations, report);
        Ok(())
    }
}

#[cfg(feature = "capture_replay_log")]
mod imp {
    use std::sync::Mutex;

    use super::{AllocatorSnapshot, SnapshotError};
    use crate::{Domain, Resource, ResourceKind};

    /// Where the n-th block of a pair starts: n × 2⁴⁰.
    const BLOCK_SPACING_SHIFT: u32 = 40;

    /// What the previous snapshot of one (blocks, allocations) pair held.
    struct Tracker {
        blocks: u32,
        allocations: u32,
        /// The session it was recorded in (sessions are never freed: the pointer names it).
        session: usize,
        /// Blocks handed out so far (the next synthetic address).
        next_block: u64,
        /// By index in the report.
        held: Vec<HeldBlock>,
    }

    /// A block of the previous snapshot.
    struct HeldBlock {
        size: u64,
        /// Its synthetic address.
        base: u64,
        /// Its sub-allocations as (offset, size, name), by offset.
        subs: Vec<(u64, u64, String)>,
    }

    /// Every pair's tracker. Touched only inside `untracked`, so that the recorder never
    /// records its own bookkeeping.
    static TRACKERS: Mutex<Vec<Tracker>> = Mutex::new(Vec::new());

    /// One domain call, borrowed from the report.
    enum Op<'a> {
        Free(Domain, u64),
        Alloc(Domain, u64, u64, &'a str),
    }

    pub(super) fn record(
        blocks: Domain,
        allocations: Domain,
        report: &AllocatorSnapshot<'_>,
    ) -> Result<(), SnapshotError> {
        let session = crate::imp::session() as usize;
        if session == 0 {
            return Ok(());
        }
        if blocks.id == allocations.id {
            return Err(SnapshotError::SameDomain);
        }
        let mut trackers = TRACKERS.lock().unwrap_or_else(|e| e.into_inner());
        let ops = crate::imp::untracked(|| diff(&mut trackers, session, blocks, allocations, report));
        if let Ok(ops) = &ops {
            for op in ops {
                match *op {
                    Op::Free(d, addr) => d.free(addr),
                    Op::Alloc(d, addr, size, "") => d.alloc(addr, size),
                    Op::Alloc(d, addr, size, name) => d.alloc_resource(
                        addr,
                        size,
                        1,
                        &Resource {
                            kind: ResourceKind::Other,
                            width: 0,
                            height: 0,
                            depth_or_layers: 1,
                            mip_levels: 1,
                            format: "",
                            name,
                        },
                    ),
                }
            }
        }
        // The list was allocated untracked: it is freed the same way.
        crate::imp::untracked(move || ops.map(drop))
    }

    /// The new state of the pair's tracker, and the calls that take the log there.
    fn diff<'a>(
        trackers: &mut Vec<Tracker>,
        session: usize,
        blocks: Domain,
        allocations: Domain,
        report: &AllocatorSnapshot<'a>,
    ) -> Result<Vec<Op<'a>>, SnapshotError> {
        // Check everything first: a refused snapshot changes nothing.
        let mut new: Vec<Vec<(u64, u64, &'a str)>> = Vec::with_capacity(report.blocks.len());
        for (bi, b) in report.blocks.iter().enumerate() {
            if b.size >= 1 << BLOCK_SPACING_SHIFT {
                return Err(SnapshotError::BlockTooLarge { block: bi });
            }
            let bad = || SnapshotError::BadRange {
                block: bi,
                range: b.allocations.clone(),
                allocations: report.allocations.len(),
            };
            let list = report.allocations.get(b.allocations.clone()).ok_or_else(bad)?;
            let mut subs = Vec::with_capacity(list.len());
            for (k, a) in list.iter().enumerate() {
                if a.offset.checked_add(a.size).is_none_or(|end| end > b.size) {
                    return Err(SnapshotError::PastBlockEnd { block: bi, allocation: b.allocations.start + k });
                }
                subs.push((a.offset, a.size, a.name));
            }
            subs.sort_unstable_by_key(|s| s.0);
            if let Some(w) = subs.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(SnapshotError::SameOffset { block: bi, offset: w[0].0 });
            }
            new.push(subs);
        }

        let t = match trackers.iter().position(|t| t.blocks == blocks.id && t.allocations == allocations.id) {
            Some(i) => &mut trackers[i],
            None => {
                trackers.push(Tracker {
                    blocks: blocks.id,
                    allocations: allocations.id,
                    session,
                    next_block: 1,
                    held: Vec::new(),
                });
                trackers.last_mut().expect("just pushed")
            }
        };
        if t.session != session {
            // A new log: nothing of the previous snapshot is in it.
            t.session = session;
            t.held.clear();
        }

        let (mut frees, mut block_frees, mut block_allocs, mut allocs) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut held = Vec::with_capacity(report.blocks.len());
        let mut old = std::mem::take(&mut t.held).into_iter();
        for (bi, subs) in new.into_iter().enumerate() {
            let size = report.blocks[bi].size;
            let prev = old.next();
            let kept = match prev {
                Some(p) if p.size == size => Some((p.base, p.subs)),
                Some(p) => {
                    frees.extend(p.subs.iter().map(|s| Op::Free(allocations, p.base + s.0)));
                    block_frees.push(Op::Free(blocks, p.base));
                    None
                }
                None => None,
            };
            let (base, prev_subs) = match kept {
                Some(k) => k,
                None => {
                    let base = t.next_block << BLOCK_SPACING_SHIFT;
                    t.next_block += 1;
                    block_allocs.push(Op::Alloc(blocks, base, size, ""));
                    (base, Vec::new())
                }
            };
            // Both lists by offset: a merge.
            let (mut i, mut j) = (0, 0);
            while i < prev_subs.len() || j < subs.len() {
                let p = prev_subs.get(i);
                let n = subs.get(j);
                match (p, n) {
                    (Some(p), Some(n)) if p.0 == n.0 && p.1 == n.1 && p.2 == n.2 => {
                        i += 1;
                        j += 1;
                    }
                    (Some(p), Some(n)) if p.0 <= n.0 => {
                        frees.push(Op::Free(allocations, base + p.0));
                        i += 1;
                    }
                    (Some(p), None) => {
                        frees.push(Op::Free(allocations, base + p.0));
                        i += 1;
                    }
                    (_, Some(n)) => {
                        allocs.push(Op::Alloc(allocations, base + n.0, n.1, n.2));
                        j += 1;
                    }
                    (None, None) => unreachable!("the loop's condition"),
                }
            }
            held.push(HeldBlock { size, base, subs: subs.iter().map(|&(o, s, n)| (o, s, n.to_owned())).collect() });
        }
        // Blocks past the end of the new list are gone.
        for p in old {
            frees.extend(p.subs.iter().map(|s| Op::Free(allocations, p.base + s.0)));
            block_frees.push(Op::Free(blocks, p.base));
        }
        t.held = held;
        // Frees before allocations (an allocation may take a freed one's address), and a
        // block after its sub-allocations.
        frees.append(&mut block_frees);
        frees.append(&mut block_allocs);
        frees.append(&mut allocs);
        Ok(frees)
    }
}
