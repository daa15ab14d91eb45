//! The GPU view: what `gpu` reports, whichever source it came from (a replayed log at a
//! point, or a VMA / D3D12MA JSON dump). Pivots, the block map and the renderers read
//! only this.

use serde::Serialize;

/// What a GPU allocation holds, as the pivots group it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuKind {
    /// A buffer (vertex, index, uniform, storage, staging...).
    Buffer,
    /// A sampled texture.
    Texture,
    /// A colour render target.
    RenderTarget,
    /// A depth or depth-stencil target.
    DepthStencil,
    /// Any other described object.
    Other,
    /// An allocation with no resource descriptor (or a kind this reader does not know).
    Unknown,
}

impl GpuKind {
    /// Every kind, in report order.
    pub const ALL: [GpuKind; 6] = [
        GpuKind::Texture,
        GpuKind::RenderTarget,
        GpuKind::DepthStencil,
        GpuKind::Buffer,
        GpuKind::Other,
        GpuKind::Unknown,
    ];

    /// The kind's name in reports ("render-target").
    pub fn name(self) -> &'static str {
        match self {
            GpuKind::Buffer => "buffer",
            GpuKind::Texture => "texture",
            GpuKind::RenderTarget => "render-target",
            GpuKind::DepthStencil => "depth-stencil",
            GpuKind::Other => "other",
            GpuKind::Unknown => "unknown",
        }
    }
}

/// Where the view was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum GpuSource {
    /// A memreplay log, at a point: "the end", "label \"Level2\" (12.000 ms)", "each
    /// domain's peak".
    Log {
        /// The log's path.
        path: String,
        /// Where the live allocations were read, in words.
        point: String,
    },
    /// A VMA (`vmaBuildStatsString`) or D3D12MA (`BuildStatsString`) JSON dump.
    Dump {
        /// The dump's path.
        path: String,
        /// `vma` or `d3d12ma`.
        format: String,
    },
}

/// One GPU memory domain (a memreplay domain of GPU kind, or a dump's memory heap or
/// memory type).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuDomain {
    /// The domain's id in the log (a dump numbers its heaps and types itself).
    pub id: u32,
    /// "vram.local", "Heap 0 (DEVICE_LOCAL)", "Type 1 in heap 0".
    pub name: String,
    /// "gpu-local", "gpu-shared", "pool", "other"...
    pub kind: String,
    /// Its size in bytes; 0 when not known.
    pub capacity: u64,
    /// The domain it sub-allocates from (its blocks are allocations of that one).
    pub parent: Option<u32>,
    /// Bytes and allocations live at the view's point.
    pub live_bytes: u64,
    /// See `live_bytes`.
    pub live_count: u64,
    /// The domain's peak over the whole log (none for a dump).
    pub peak: Option<GpuPeak>,
    /// What the driver reported (budget samples), if the log or dump has them.
    pub budget: Option<GpuBudget>,
}

/// A domain's peak of live bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuPeak {
    /// Live bytes at the peak.
    pub bytes: u64,
    /// Live allocations at the peak.
    pub count: u64,
    /// Nanoseconds since the start.
    pub time_ns: u64,
    /// The last label before it, and the frame in progress.
    pub after_label: Option<String>,
    /// See `after_label`.
    pub frame: Option<u64>,
}

/// A domain's budget as the driver reported it (VK_EXT_memory_budget's heapBudget and
/// heapUsage, DXGI's QueryVideoMemoryInfo).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuBudget {
    /// The last budget reported at or before the view's point.
    pub budget: u64,
    /// The driver's usage in that same sample.
    pub usage: u64,
    /// The smallest budget reported over the log (a dump: `budget`).
    pub min_budget: u64,
    /// The highest usage reported over the log, and when.
    pub peak_usage: u64,
    /// See `peak_usage` (nanoseconds since the start; 0 for a dump).
    pub peak_usage_time_ns: u64,
    /// Samples taken.
    pub samples: u64,
    /// Intervals in which the reported usage was over the reported budget.
    pub over_budget: Vec<OverBudget>,
}

/// An interval of samples whose usage exceeded their budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverBudget {
    /// The first sample over the budget (nanoseconds since the start).
    pub from_ns: u64,
    /// The first sample back under it, or the last sample if none came.
    pub to_ns: u64,
    /// The largest excess (usage minus budget) in the interval.
    pub max_excess: u64,
    /// The last label at or before `from_ns`.
    pub after_label: Option<String>,
}

/// A live GPU allocation with what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuResource {
    /// The domain it lives in.
    pub domain: u32,
    /// Its address (or id) in the domain; for a dump, its offset in its block.
    pub addr: u64,
    /// Bytes allocated.
    pub size: u64,
    /// What it holds (`unknown` without a resource descriptor).
    pub kind: GpuKind,
    /// Texture dimensions (0 when not described; buffers: width is the byte size or 0).
    pub width: u32,
    /// See `width`.
    pub height: u32,
    /// Depth for 3D textures, array layers otherwise (1 when neither applies).
    pub depth_or_layers: u32,
    /// Mip levels (1 when none).
    pub mip_levels: u32,
    /// Pixel or element format ("BC7_UNORM"), empty when not described.
    pub format: String,
    /// Debug name, empty when none.
    pub name: String,
    /// Its owner: the context path it was allocated in ("" = no context), as reports
    /// write paths.
    pub context: String,
}

/// A block of a sub-allocating domain's parent, drawn with its sub-allocations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuBlock {
    /// The domain the block is an allocation of ("vram.local").
    pub domain: u32,
    /// The sub-allocating domain whose allocations lie inside it ("vram.local.buffers").
    pub sub_domain: u32,
    /// The block's address in `domain`.
    pub addr: u64,
    /// Its size.
    pub size: u64,
    /// Its debug name, empty when none.
    pub name: String,
    /// Its owner's context path.
    pub context: String,
    /// The sub-allocations inside it, by offset (from the block's start).
    pub allocations: Vec<SubAllocation>,
}

/// An allocation inside a block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubAllocation {
    /// Bytes from the block's start.
    pub offset: u64,
    /// Bytes allocated.
    pub size: u64,
    /// What it holds.
    pub kind: GpuKind,
    /// Debug name, empty when none.
    pub name: String,
    /// Its owner's context path.
    pub context: String,
}

/// Everything `gpu` reports on, from one source at one point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuView {
    /// Where it was read.
    pub source: GpuSource,
    /// Every GPU domain (and every sub-allocating domain inside one), by id.
    pub domains: Vec<GpuDomain>,
    /// Allocations live at the point in those domains, by domain then address.
    pub resources: Vec<GpuResource>,
    /// The blocks of every sub-allocating domain's parent that hold sub-allocations or are
    /// live at the point, by domain then address.
    pub blocks: Vec<GpuBlock>,
    /// The screen (swap chain) size: recorded, given with `--screen`, or unknown.
    pub screen: Option<(u32, u32)>,
}

/// `root` and every domain inside it (its sub-allocating domains, theirs, ...), sorted, of
/// `domains` given as (id, parent).
pub(crate) fn with_descendants(root: u32, domains: &[(u32, Option<u32>)]) -> Vec<u32> {
    let mut set = vec![root];
    let mut grew = true;
    while grew {
        grew = false;
        for &(d, parent) in domains {
            if parent.is_some_and(|p| set.contains(&p)) && !set.contains(&d) {
                set.push(d);
                grew = true;
            }
        }
    }
    set.sort_unstable();
    set
}
