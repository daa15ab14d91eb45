//! The events a log holds, as typed values: what the recorder encodes and the
//! decoder yields. The byte encoding of each lives in `block.rs` (SPEC.md §6).

/// Id of an interned string. `0` means "no string".
pub type StringId = u32;
/// Id of an interned callstack. `0` means "no callstack recorded".
pub type StackId = u32;
/// Id of a memory domain. [`HEAP_DOMAIN`] (`0`) is the process heap and is never defined.
pub type DomainId = u32;
/// Id of a context type (e.g. "Texture"). Defined by [`Event::DefineContextType`].
pub type ContextTypeId = u32;

/// The global allocator's heap: the domain every `GlobalAlloc` allocation belongs to.
pub const HEAP_DOMAIN: DomainId = 0;

/// What kind of memory a domain is. Reports group and total domains by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DomainKind {
    /// The global allocator's heap (only domain 0).
    Heap,
    /// A pool, arena or other sub-allocator whose blocks live inside another domain.
    Pool,
    /// GPU memory local to the device (VRAM).
    GpuLocal,
    /// System memory visible to the GPU (host-visible / shared).
    GpuShared,
    /// Anything else: virtual reservations, mapped files, external allocators.
    Other,
    /// A kind this reader does not know (from a newer minor version).
    Unknown(u8),
}

impl DomainKind {
    pub fn to_byte(self) -> u8 {
        match self {
            DomainKind::Heap => 0,
            DomainKind::Pool => 1,
            DomainKind::GpuLocal => 2,
            DomainKind::GpuShared => 3,
            DomainKind::Other => 4,
            DomainKind::Unknown(b) => b,
        }
    }

    pub fn from_byte(b: u8) -> Self {
        match b {
            0 => DomainKind::Heap,
            1 => DomainKind::Pool,
            2 => DomainKind::GpuLocal,
            3 => DomainKind::GpuShared,
            4 => DomainKind::Other,
            b => DomainKind::Unknown(b),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DomainKind::Heap => "heap",
            DomainKind::Pool => "pool",
            DomainKind::GpuLocal => "gpu-local",
            DomainKind::GpuShared => "gpu-shared",
            DomainKind::Other => "other",
            DomainKind::Unknown(_) => "unknown",
        }
    }
}

/// What a GPU (or other) resource is, for breaking domain memory down by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    Buffer,
    Texture,
    RenderTarget,
    DepthStencil,
    Other,
    Unknown(u8),
}

impl ResourceKind {
    pub fn to_byte(self) -> u8 {
        match self {
            ResourceKind::Buffer => 0,
            ResourceKind::Texture => 1,
            ResourceKind::RenderTarget => 2,
            ResourceKind::DepthStencil => 3,
            ResourceKind::Other => 4,
            ResourceKind::Unknown(b) => b,
        }
    }

    pub fn from_byte(b: u8) -> Self {
        match b {
            0 => ResourceKind::Buffer,
            1 => ResourceKind::Texture,
            2 => ResourceKind::RenderTarget,
            3 => ResourceKind::DepthStencil,
            4 => ResourceKind::Other,
            b => ResourceKind::Unknown(b),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::Buffer => "buffer",
            ResourceKind::Texture => "texture",
            ResourceKind::RenderTarget => "render-target",
            ResourceKind::DepthStencil => "depth-stencil",
            ResourceKind::Other => "other",
            ResourceKind::Unknown(_) => "unknown",
        }
    }
}

/// Why the recorder lost events (SPEC.md §7, `Lost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LossReason {
    /// Events made on a thread after its recorder state was torn down and
    /// that could not be routed to the shared fallback stream.
    ThreadTeardown,
    /// A single record larger than a whole recorder buffer (e.g. an enormous name).
    RecordTooLarge,
    /// The writer thread failed to write the log (I/O error); counts what it dropped.
    WriteError,
    /// Events made while `stop` was draining that arrived after the final drain.
    AfterStop,
    Unknown(u8),
}

impl LossReason {
    pub fn to_byte(self) -> u8 {
        match self {
            LossReason::ThreadTeardown => 1,
            LossReason::RecordTooLarge => 2,
            LossReason::WriteError => 3,
            LossReason::AfterStop => 4,
            LossReason::Unknown(b) => b,
        }
    }

    pub fn from_byte(b: u8) -> Self {
        match b {
            1 => LossReason::ThreadTeardown,
            2 => LossReason::RecordTooLarge,
            3 => LossReason::WriteError,
            4 => LossReason::AfterStop,
            b => LossReason::Unknown(b),
        }
    }
}

/// Flags of a context push.
pub mod context_flags {
    /// Each push is one instance (one texture, one mesh): reports average bytes per instance.
    pub const INSTANCE: u8 = 1;
}

/// A small descriptor of a domain allocation: what GPU resource (or other object) it holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceDesc {
    pub kind: ResourceKind,
    pub width: u32,
    pub height: u32,
    /// Depth for 3D textures, array layers otherwise; 1 when neither applies.
    pub depth_or_layers: u32,
    pub mip_levels: u32,
    /// Pixel or element format, e.g. "BC7_UNORM" (`0` = none).
    pub format: StringId,
    /// Debug name of the resource (`0` = none).
    pub name: StringId,
}

/// One record of a block's event stream. Memory events carry `seq`, the global
/// sequence number that orders them across threads (SPEC.md §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An allocation in `domain` (the heap for `GlobalAlloc`).
    Alloc { seq: u64, domain: DomainId, addr: u64, size: u64, align_log2: u8, stack: StackId },
    /// A free of the allocation at `addr` in `domain`; `stack` is the free callstack or 0.
    Free { seq: u64, domain: DomainId, addr: u64, stack: StackId },
    /// A heap realloc: a free of `old_addr` and an allocation of `new_size` at `new_addr`.
    /// Its two halves have their own sequence numbers: `free_seq` (taken before the
    /// allocator released `old_addr`) orders the free, `seq` (taken after it returned
    /// `new_addr`) orders the allocation; `free_seq < seq`.
    Realloc { free_seq: u64, seq: u64, old_addr: u64, new_addr: u64, new_size: u64, align_log2: u8, stack: StackId },
    /// The container at heap address `addr` now uses `used` of its capacity.
    Usage { seq: u64, addr: u64, used: u64 },
    /// Enter a context of type `ty` named `name` on this thread.
    ContextPush { ty: ContextTypeId, name: StringId, flags: u8 },
    /// Leave this thread's innermost context.
    ContextPop,
    /// Allocations that follow belong to the context owning the allocation containing `addr`.
    AttachPush { seq: u64, addr: u64 },
    /// End this thread's innermost attach.
    AttachPop,
    /// The stream's clock: nanoseconds since the log's start time.
    Time { ns: u64 },
    /// A new frame begins.
    FrameStart { seq: u64, frame: u64 },
    /// A named marker in time, e.g. "level loaded".
    Label { seq: u64, name: StringId },
    /// Interns a string under `id`.
    DefineString { id: StringId, text: String },
    /// Interns a callstack under `id`: return addresses, innermost frame first.
    DefineStack { id: StackId, frames: Vec<u64> },
    /// Names a context type.
    DefineContextType { id: ContextTypeId, name: StringId },
    /// Declares a memory domain. `parent`: the domain whose blocks hold this one's allocations.
    DefineDomain { id: DomainId, name: StringId, kind: DomainKind, capacity: u64, parent: Option<DomainId> },
    /// A loaded module (executable or shared library) for offline symbolication: mapped at
    /// `base..base + size`; `load_bias` is what was added to the file's addresses (so the
    /// file address of a return address `ip` is `ip - load_bias`); `build_id` may be empty.
    Module { base: u64, size: u64, load_bias: u64, path: StringId, build_id: Vec<u8> },
    /// Names the block's thread: its OS thread id and name.
    ThreadInfo { os_tid: u64, name: StringId },
    /// Describes the domain allocation at (`domain`, `addr`) made just before on this thread.
    Resource { domain: DomainId, addr: u64, desc: ResourceDesc },
    /// The recorder had to lose `events` events (`bytes` of payload) for `reason`.
    Lost { events: u64, bytes: u64, reason: LossReason },
    /// What the operating system saw of the process at `time` (the clock of `Time`):
    /// `resident` bytes in RAM and `committed` bytes of private memory it has been
    /// promised (0 = not known). Sampled by the recorder's writer thread; stream 0.
    /// Since format 1.1.
    ProcessMemory { time: u64, resident: u64, committed: u64 },
    /// What the graphics driver reported for `domain` at `time` (the clock of `Time`):
    /// `budget`, the bytes it allows the process in that memory (Vulkan
    /// `VK_EXT_memory_budget` `heapBudget`, DXGI `Budget`), and `usage`, the bytes it says
    /// the process uses there (`heapUsage`, `CurrentUsage`). One sample per query the game
    /// makes. Since format 1.2.
    Budget { domain: DomainId, time: u64, budget: u64, usage: u64 },
    /// The size of the swap chain or screen, in pixels, from here on (so reports can find
    /// screen-sized render targets). Since format 1.2.
    Display { width: u32, height: u32 },
    /// The allocator calls made in the process before the recorder could start (the
    /// dynamic loader's, the C library's start-up, constructors run before the
    /// recorder's): not recorded one by one, counted. `allocations` calls allocated a
    /// block, `frees` freed one, `reallocs` resized one, asking for `bytes` in all; `live`
    /// of those blocks were still allocated when recording started, and the log holds
    /// each as an allocation without a callstack (so their later frees match);
    /// `untracked` blocks could not be kept track of (a later free of one is a free of a
    /// block the log does not know). Not a loss. Since format 1.3.
    BeforeStart { allocations: u64, frees: u64, reallocs: u64, bytes: u64, live: u64, untracked: u64 },
    /// A length-prefixed record of a kind this reader does not know; skipped.
    Unknown { tag: u8, len: u32 },
}

impl Event {
    /// The global sequence number, for the memory events that carry one (for a realloc,
    /// that of its allocation half).
    pub fn seq(&self) -> Option<u64> {
        match *self {
            Event::Alloc { seq, .. }
            | Event::Free { seq, .. }
            | Event::Realloc { seq, .. }
            | Event::Usage { seq, .. }
            | Event::AttachPush { seq, .. }
            | Event::FrameStart { seq, .. }
            | Event::Label { seq, .. } => Some(seq),
            _ => None,
        }
    }
}
