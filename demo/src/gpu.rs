//! A pretend GPU heap: a deterministic bump allocator of fake GPU virtual addresses,
//! reported to memreplay as allocations in a domain the global allocator never sees.

use memreplay::{Domain, Resource};

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
}

impl GpuHeap {
    pub fn new(domain: Domain, name: &'static str, base: u64, capacity: u64) -> Self {
        GpuHeap { domain, name, base, capacity, next: base, live: 0 }
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
        match resource {
            Some(r) => self.domain.alloc_resource(addr, size, align, r),
            None => self.domain.alloc_aligned(addr, size, align),
        }
        GpuAlloc { addr, size }
    }

    pub fn free(&mut self, a: GpuAlloc) {
        self.domain.free(a.addr);
        self.live -= 1;
        if self.live == 0 {
            self.next = self.base;
        }
    }
}
