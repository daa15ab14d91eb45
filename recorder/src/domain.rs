//! Memory domains: spaces the global allocator never sees (GPU heaps, pools, arenas).
//!
//! The engine defines a domain once and reports each allocation in it with an address
//! (or any unique id) and size. A domain can be a sub-allocator of another (a pool whose
//! blocks are heap allocations, VMA sub-allocations inside device-memory blocks): the
//! analyzer then never adds a sub-allocation to the block that holds it.

use crate::{DomainKind, ResourceKind};

/// A memory domain. Zero-sized with the feature off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Domain {
    #[cfg(feature = "capture_replay_log")]
    pub(crate) id: u32,
}

/// What a domain allocation holds: a GPU resource or other object, for per-resource
/// breakdowns ("which textures fill vram.local").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource<'a> {
    pub kind: ResourceKind,
    pub width: u32,
    pub height: u32,
    /// Depth for 3D textures, array layers otherwise; 1 when neither applies.
    pub depth_or_layers: u32,
    pub mip_levels: u32,
    /// Pixel or element format, e.g. "BC7_UNORM".
    pub format: &'a str,
    /// Debug name.
    pub name: &'a str,
}

impl Domain {
    /// The global allocator's heap.
    pub const HEAP: Domain = Domain {
        #[cfg(feature = "capture_replay_log")]
        id: 0,
    };

    /// The domain's number in the log (0 for [`Domain::HEAP`]; always 0 with the feature
    /// off). For bindings that hand domains to other languages as plain integers.
    #[inline]
    pub fn id(&self) -> u32 {
        #[cfg(feature = "capture_replay_log")]
        {
            self.id
        }
        #[cfg(not(feature = "capture_replay_log"))]
        {
            0
        }
    }

    /// The domain numbered `id`, if one was defined (0 is [`Domain::HEAP`]): the reverse
    /// of [`Domain::id`], checked against the domains defined so far with one atomic load.
    /// With the feature off only 0 is known.
    #[inline]
    pub fn from_id(id: u32) -> Option<Domain> {
        #[cfg(feature = "capture_replay_log")]
        {
            (id <= crate::imp::domains_defined()).then_some(Domain { id })
        }
        #[cfg(not(feature = "capture_replay_log"))]
        {
            (id == 0).then_some(Domain {})
        }
    }

    /// Defines a top-level domain (e.g. "vram.local", kind `GpuLocal`). `capacity`: its size
    /// in bytes if known, else 0. Define domains once, at start-up, and keep the handle.
    pub fn define(name: &str, kind: DomainKind, capacity: u64) -> Domain {
        Self::define_inner(name, kind, capacity, None)
    }

    /// Defines a sub-allocator whose allocations live inside allocations of `parent`
    /// (a pool inside heap blocks, buffers sub-allocated in device-memory blocks).
    pub fn define_within(name: &str, kind: DomainKind, capacity: u64, parent: Domain) -> Domain {
        Self::define_inner(name, kind, capacity, Some(parent))
    }

    #[inline]
    fn define_inner(name: &str, kind: DomainKind, capacity: u64, parent: Option<Domain>) -> Domain {
        #[cfg(feature = "capture_replay_log")]
        {
            Domain { id: crate::imp::define_domain(name, kind, capacity, parent.map(|p| p.id)) }
        }
        #[cfg(not(feature = "capture_replay_log"))]
        {
            let _ = (name, kind, capacity, parent);
            Domain {}
        }
    }

    /// Records an allocation of `size` bytes at `addr` (an address or any id unique
    /// among this domain's live allocations).
    #[inline]
    pub fn alloc(&self, addr: u64, size: u64) {
        self.alloc_aligned(addr, size, 1);
    }

    /// Records an allocation with its alignment (a power of two).
    #[inline]
    pub fn alloc_aligned(&self, addr: u64, size: u64, align: u64) {
        #[cfg(feature = "capture_replay_log")]
        crate::imp::domain_alloc(self.id, addr, size, align, None);
        #[cfg(not(feature = "capture_replay_log"))]
        let _ = (addr, size, align);
    }

    /// Records an allocation that holds `resource` (a texture, a buffer...).
    #[inline]
    pub fn alloc_resource(&self, addr: u64, size: u64, align: u64, resource: &Resource<'_>) {
        #[cfg(feature = "capture_replay_log")]
        crate::imp::domain_alloc(self.id, addr, size, align, Some(resource));
        #[cfg(not(feature = "capture_replay_log"))]
        let _ = (addr, size, align, resource);
    }

    /// Records what the graphics driver reports for the memory this domain stands for:
    /// `budget`, the bytes it allows the process there, and `usage`, the bytes it says
    /// the process uses there (its own count, which includes what the game never
    /// reported: driver-internal allocations, other APIs). Call it each time the game
    /// queries the driver, with the figures of the heap or segment group this domain
    /// maps to:
    ///
    /// - Vulkan with `VK_EXT_memory_budget`: `vkGetPhysicalDeviceMemoryProperties2` with a
    ///   `VkPhysicalDeviceMemoryBudgetPropertiesEXT` chained; `budget` is
    ///   `heapBudget[heap]`, `usage` is `heapUsage[heap]` (for `DEVICE_LOCAL` heaps, the
    ///   domain of kind `GpuLocal`).
    /// - DXGI: `IDXGIAdapter3::QueryVideoMemoryInfo` fills a
    ///   `DXGI_QUERY_VIDEO_MEMORY_INFO`; `budget` is `Budget`, `usage` is `CurrentUsage`
    ///   (segment group `LOCAL` for `GpuLocal`, `NON_LOCAL` for `GpuShared`).
    ///
    /// The sample is timed by the recorder's clock and written to this thread's stream
    /// (format 1.2 `BUDGET`). Reports chart it against the domain's live bytes, and
    /// `check` can hold the domain's peak to a share of the smallest budget.
    #[inline]
    pub fn budget(&self, budget: u64, usage: u64) {
        #[cfg(feature = "capture_replay_log")]
        crate::imp::budget(self.id, budget, usage);
        #[cfg(not(feature = "capture_replay_log"))]
        let _ = (budget, usage);
    }

    /// Records the free of the allocation at `addr`.
    #[inline]
    pub fn free(&self, addr: u64) {
        #[cfg(feature = "capture_replay_log")]
        crate::imp::domain_free(self.id, addr);
        #[cfg(not(feature = "capture_replay_log"))]
        let _ = addr;
    }
}
