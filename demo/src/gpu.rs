//! A pretend GPU heap: a deterministic bump allocator of fake GPU virtual addresses,
//! reported to memreplay as allocations in a domain the global allocator never sees.

use memreplay::{Domain, Resource};

use crate::TEXTURE_ALIGN;

/// One allocation in a [`GpuHeap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a GPU allocation must be freed"]
pub(crate) struct GpuAlloc {
    pub addr: u64,
    pub size: u64,
}

/// Hands out addresses from `base` upwards, never reusing any until every allocation is
/// freed (then it starts over): the addresses of a run depend on nothing but its options.
pub(crate) struct GpuHeap {
    domain: Domain,
    name: &'static str,
    base: u64,
    capacity: u64,
    next: u64,
    live: u64,
    /// Bytes live (what the demo reports as the driver's usage).
    live_bytes: u64,
}

impl GpuHeap {
    pub fn new(domain: Domain, name: &'static str, base: u64, capacity: u64) -> Self {
        GpuHeap { domain, name, base, capacity, next: base, live: 0, live_bytes: 0 }
    }

    /// Allocates `size` bytes aligned to `align` and reports it, with what it holds if
    /// `resource` says (plain `alloc_aligned` otherwise).
    pub fn alloc(&mut self, size: u64, align: u64, resource: Option<&Resource<'_>>) -> GpuAlloc {
        let addr = self.next.next_multiple_of(align);
        // The options are validated so that a level always fits: running out is a bug.
        assert!(
            addr + size - self.base <= self.capacity,
            "{} is full: {size} bytes do not fit in {} bytes",
            self.name,
            self.capacity
        );
        self.next = addr + size;
        self.live += 1;
        self.live_bytes += size;
        match resource {
            Some(r) => self.domain.alloc_resource(addr, size, align, r),
            None => self.domain.alloc_aligned(addr, size, align),
        }
        GpuAlloc { addr, size }
    }

    /// Bytes live in the heap.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    pub fn free(&mut self, a: GpuAlloc) {
        self.domain.free(a.addr);
        self.live -= 1;
        self.live_bytes -= a.size;
        if self.live == 0 {
            self.next = self.base;
        }
    }
}

/// A VMA-style sub-allocator: blocks of `block_bytes` allocated from a [`GpuHeap`] (no
/// resource of their own), each handing out aligned ranges from its start, linearly.
/// Freed ranges stay holes until the blocks are released: the block map shows them.
pub(crate) struct BlockAllocator {
    domain: Domain,
    block_bytes: u64,
    align: u64,
    /// Each block and where its next range starts (an offset).
    blocks: Vec<(GpuAlloc, u64)>,
}

impl BlockAllocator {
    pub fn new(domain: Domain, block_bytes: u64, align: u64) -> Self {
        BlockAllocator { domain, block_bytes, align, blocks: Vec::new() }
    }

    /// Allocates `size` bytes in the first block with room at its end, or in a new block
    /// taken from `heap`, and reports it in this allocator's domain.
    pub fn alloc(&mut self, heap: &mut GpuHeap, size: u64, resource: &Resource<'_>) -> GpuAlloc {
        assert!(size <= self.block_bytes, "{size} bytes do not fit in a block of {}", self.block_bytes);
        let fits = |&(block, next): &(GpuAlloc, u64)| next.next_multiple_of(self.align) + size <= block.size;
        let i = match self.blocks.iter().position(fits) {
            Some(i) => i,
            None => {
                let block = {
                    let _ctx = memreplay::context!("Renderer", "buffer blocks");
                    heap.alloc(self.block_bytes, TEXTURE_ALIGN, None)
                };
                self.blocks.push((block, 0));
                self.blocks.len() - 1
            }
        };
        let (block, next) = &mut self.blocks[i];
        let offset = next.next_multiple_of(self.align);
        *next = offset + size;
        let a = GpuAlloc { addr: block.addr + offset, size };
        self.domain.alloc_resource(a.addr, size, self.align, resource);
        a
    }

    /// Reports the free of `a` (its range stays a hole in its block).
    pub fn free(&mut self, a: GpuAlloc) {
        self.domain.free(a.addr);
    }

    /// Frees the blocks (every range in them must have been freed).
    pub fn release(self, heap: &mut GpuHeap) {
        for (block, _) in self.blocks {
            heap.free(block);
        }
    }
}
