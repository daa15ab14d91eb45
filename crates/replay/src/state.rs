//! The replay state: the context tree with its figures, rebuilt event by event.
//!
//! Semantics (MemReplay's, made exact):
//! - A context push enters the child (type, name) of the thread's current node, creating
//!   it the first time: the tree is shared, keyed by (parent, type, name).
//! - An allocation belongs to its thread's innermost attach target if it has one, else
//!   to its innermost context. A free removes it from the context it belongs to, whatever
//!   thread frees it. A realloc is a free plus an allocation.
//! - Figures are kept per (context, domain, thread) "slot", so reports can filter by
//!   domain and thread and sum the rest.
//! - The figures at each domain's peak are kept lazily: a slot (or site) copies its
//!   figures aside the first time it changes after a new peak, so finding "who held what
//!   at the peak" costs O(1) per event instead of a snapshot per peak. Labels work alike:
//!   a slot records what it held at the labels placed since its last change, when it
//!   next changes, so a label costs nothing and is read back by [`ReplayState::held_at`].
//! - Live allocations are kept per domain in an `AddrMap`; a free leaves a tombstone, so
//!   a second free of the address is known for a double free (see [`FREED_REMEMBERED`]).
//!
//! Names are kept as string ids and resolved at the end: a thread may use an id whose
//! definition sits later in the merged order (in another thread's stream).

use memreplay_format::{
    context_flags, DomainKind, Event, Part, Record, RecordKind, Records, ResourceDesc, HEAP_DOMAIN,
};

use super::addr_map::AddrMap;
use super::ids::{FxMap, NodeId, ROOT};
use super::timeline::{ProcessMemory, ProcessSample, Timeline};

/// Figures of a slot (or of any sum of slots).
///
/// Byte figures are kept modulo 2^64 (`wrapping_add`, `wrapping_sub`): exact for any log
/// a process could write, and for a corrupt one (sizes near `u64::MAX`) wrong figures
/// rather than a panic; an allocation that runs past the top of the address space is
/// also counted in [`Anomalies::impossible_sizes`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Bytes and allocations live now.
    pub live_bytes: u64,
    /// Allocations live now.
    pub live_count: u64,
    /// Everything ever allocated.
    pub total_bytes: u64,
    /// Allocations ever made.
    pub total_count: u64,
    /// Allocations freed before their thread allocated anything else (heaptrack's
    /// definition of a temporary).
    pub temp_bytes: u64,
    /// Temporaries (see `temp_bytes`).
    pub temp_count: u64,
    /// Of the live allocations that reported their usage: bytes used, and their capacity.
    pub used_bytes: u64,
    /// Capacity of the live allocations that reported their usage.
    pub usage_capacity: u64,
}

impl Figures {
    /// Adds `o`'s figures to these (modulo 2^64).
    pub fn add(&mut self, o: &Figures) {
        self.live_bytes = self.live_bytes.wrapping_add(o.live_bytes);
        self.live_count = self.live_count.wrapping_add(o.live_count);
        self.total_bytes = self.total_bytes.wrapping_add(o.total_bytes);
        self.total_count = self.total_count.wrapping_add(o.total_count);
        self.temp_bytes = self.temp_bytes.wrapping_add(o.temp_bytes);
        self.temp_count = self.temp_count.wrapping_add(o.temp_count);
        self.used_bytes = self.used_bytes.wrapping_add(o.used_bytes);
        self.usage_capacity = self.usage_capacity.wrapping_add(o.usage_capacity);
    }
}

/// What a slot held at one point in time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Bytes held.
    pub bytes: u64,
    /// Allocations held.
    pub count: u64,
    /// Bytes used of the held allocations that reported their usage.
    pub used_bytes: u64,
    /// Capacity of the held allocations that reported their usage.
    pub usage_capacity: u64,
}

impl Held {
    fn of(f: &Figures) -> Held {
        Held { bytes: f.live_bytes, count: f.live_count, used_bytes: f.used_bytes, usage_capacity: f.usage_capacity }
    }

    /// Adds `o`'s figures to these (modulo 2^64).
    pub fn add(&mut self, o: &Held) {
        self.bytes = self.bytes.wrapping_add(o.bytes);
        self.count = self.count.wrapping_add(o.count);
        self.used_bytes = self.used_bytes.wrapping_add(o.used_bytes);
        self.usage_capacity = self.usage_capacity.wrapping_add(o.usage_capacity);
    }
}

/// What a slot or a site held at its domain's latest peak, copied lazily: the first time
/// its figures change after the peak rose (the domain's peak count `epoch` moved on).
#[derive(Debug, Clone, Copy, Default)]
struct AtPeak {
    held: Held,
    epoch: u64,
}

impl AtPeak {
    /// Before `now` changes, with the domain at peak number `epoch`.
    #[inline]
    fn before_change(&mut self, now: &Figures, epoch: u64) {
        if self.epoch != epoch {
            self.held = Held::of(now);
            self.epoch = epoch;
        }
    }

    /// What it held at peak number `epoch`, its figures being `now`.
    fn get(&self, now: &Figures, epoch: u64) -> Held {
        if self.epoch == epoch {
            self.held
        } else {
            // Unchanged since the peak.
            Held::of(now)
        }
    }
}

/// Figures of one (context, domain, thread).
///
/// Laid out as two cache lines, aligned: a free updates the slot of the allocation it
/// ends, which is anywhere in the table, so the slot costs two misses, never three.
#[derive(Debug, Clone, Default)]
#[repr(C, align(64))]
pub struct Slot {
    /// Its figures now (at the end, once the replay is finished).
    pub now: Figures,
    at_peak: AtPeak,
    /// Snapshot points (labels, the frame asked for) placed when it last changed: it has
    /// held `now` at every point since.
    points_seen: u32,
    /// Its top-level context's series in the timeline.
    series: u32,
    /// Its context node.
    pub node: NodeId,
    /// Its domain's id in the log.
    pub domain: u32,
    /// The stream id of its thread.
    pub thread: u32,
    /// Index of its domain in `ReplayState::domains`.
    dom: u32,
}

/// A context node.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its parent node (the root's is itself).
    pub parent: NodeId,
    /// Context type id and name string id (0 for the root).
    pub ty: u32,
    /// See `ty`.
    pub name: u32,
    /// Entries of this context; `instances`: entries flagged as instances.
    pub entries: u64,
    /// See `entries`.
    pub instances: u64,
    /// Its children, a list in creation order: the first and last, and each child's next
    /// sibling (`ROOT`: none; the root is nobody's child). Links rather than a list per
    /// node keep a node at 40 bytes.
    first_child: NodeId,
    last_child: NodeId,
    next_sibling: NodeId,
}

/// A live allocation: 24 bytes, so that with its address an entry of the live-allocation
/// map is 32 bytes, two to a cache line and never across two: the replay's cost is
/// mostly the cache misses of that map. Container usage is kept aside
/// (`ReplayState::used`).
#[derive(Debug, Clone, Copy, Default)]
struct Live {
    size: u64,
    /// Its sequence number: when it was made, and which of its thread's allocations is
    /// the latest (for temporaries).
    seq: u64,
    slot: u32,
    /// Index into `ReplayState::sites`, and [`Live::USAGE_REPORTED`].
    site_and_flag: u32,
}

/// A domain's running totals and where its peak was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainTotals {
    /// The domain's id in the log.
    pub id: u32,
    /// Bytes live now.
    pub live_bytes: u64,
    /// Allocations live now.
    pub live_count: u64,
    /// Bytes ever allocated.
    pub total_bytes: u64,
    /// Allocations ever made.
    pub total_count: u64,
    /// Its peak of live bytes.
    pub peak: Peak,
    /// Number of times the peak rose (the epoch of the lazy peak snapshots).
    epoch: u64,
}

/// Where a domain's memory peaked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peak {
    /// Live bytes at the peak.
    pub bytes: u64,
    /// Live allocations at the peak.
    pub count: u64,
    /// Sequence number of the event that reached it.
    pub seq: u64,
    /// Clock ticks then (the latest reading of any thread).
    pub time_ns: u64,
    /// The frame in progress, and the last label before the peak.
    pub frame: Option<u64>,
    /// See `frame`.
    pub after_label: Option<u32>,
}

/// Per-thread replay state.
#[derive(Debug, Clone, Default)]
pub struct ThreadState {
    /// The stream id of the thread in the log.
    pub id: u32,
    /// The OS thread id, from its `ThreadInfo` record (0 if none).
    pub os_tid: u64,
    /// String id of its name (0 = unnamed).
    pub name: u32,
    /// Events of the thread (complete once the replay is finished).
    pub events: u64,
    contexts: Vec<NodeId>,
    /// Pushes past [`MAX_CONTEXT_DEPTH`] not popped yet (not followed).
    too_deep: u64,
    /// Attach targets; `None` for an attach whose address no live allocation contains.
    attaches: Vec<Option<NodeId>>,
    /// The sequence number of its latest allocation (an allocation freed while it is
    /// still its thread's latest is a temporary).
    last_alloc: Option<u64>,
    time_ns: u64,
    /// The slot of its latest allocation: (node, domain index, slot). Most allocations
    /// go to the same slot as the one before, which spares the slot lookup.
    last_slot: Option<(NodeId, u32, u32)>,
}

/// A named point in time; [`ReplayState::held_at`] tells what every slot held there.
#[derive(Debug, Clone)]
pub struct Marker {
    /// String id of the label's name.
    pub name: u32,
    /// Sequence number of the label.
    pub seq: u64,
    /// Clock ticks at the label (its thread's last reading).
    pub time_ns: u64,
    /// The frame in progress.
    pub frame: Option<u64>,
    /// Its number among the snapshot points.
    point: u32,
}

/// What a slot held at the snapshot points `from..to` (it changed at neither end).
#[derive(Debug, Clone, Copy)]
struct PointsHeld {
    slot: u32,
    from: u32,
    to: u32,
    held: Held,
}

/// A frame start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameMark {
    /// The frame number.
    pub frame: u64,
    /// Sequence number of the frame start.
    pub seq: u64,
    /// Clock ticks at the frame start (its thread's last reading).
    pub time_ns: u64,
}

/// Things in the log that do not add up, counted rather than fatal.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Anomalies {
    /// Frees of addresses never allocated while recording (allocated before the start).
    pub untracked_frees: u64,
    /// Frees of addresses already freed and not allocated again.
    pub double_frees: u64,
    /// Allocations at an address that was still live (the older one is dropped).
    pub overlapping_allocs: u64,
    /// Attaches to an address no live allocation contains (their allocations stay in
    /// the thread's own context).
    pub unresolved_attaches: u64,
    /// Context or attach pops with nothing to pop.
    pub unbalanced_pops: u64,
    /// Usage reports for addresses with no live allocation.
    pub usage_without_allocation: u64,
    /// Allocations that run past the top of the address space (`addr + size` > 2^64):
    /// a corrupt log. They are replayed all the same; the byte figures that hold them
    /// are wrong (see [`Figures`]).
    pub impossible_sizes: u64,
}

/// A domain as defined in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainInfo {
    /// String id of its name.
    pub name: u32,
    /// What memory it is (heap, pool, GPU, ...).
    pub kind: DomainKind,
    /// Its size in bytes, 0 if unbounded or unknown.
    pub capacity: u64,
    /// The domain it sub-allocates from (a pool inside the heap), if any.
    pub parent: Option<u32>,
}

/// Figures of one allocation site (callstack), per domain.
///
/// Aligned to cache lines, with what every allocation and free touches in the first two
/// (see [`Slot`]).
#[derive(Debug, Clone, Default)]
#[repr(C, align(64))]
pub struct Site {
    /// Its figures now (at the end, once the replay is finished).
    pub now: Figures,
    at_peak: AtPeak,
    /// (frees, bytes) of this site's blocks freed without a callstack, and by free
    /// callstack id for the others: kept apart so that a log without free callstacks
    /// never touches the map (see [`Site::frees_by_stack`]).
    freed_without_stack: (u64, u64),
    /// Its allocation callstack id (0: none).
    pub stack: u32,
    /// Its domain's id in the log.
    pub domain: u32,
    /// Index of its domain in `ReplayState::domains`.
    dom: u32,
    freed_from: FxMap<u32, (u64, u64)>,
}

impl Site {
    /// Where this site's blocks were freed: (free callstack id, or 0 for none; frees, bytes).
    pub fn frees_by_stack(&self) -> impl Iterator<Item = (u32, (u64, u64))> + '_ {
        let none = (self.freed_without_stack.0 > 0).then_some((0, self.freed_without_stack));
        none.into_iter().chain(self.freed_from.iter().map(|(&k, &v)| (k, v)))
    }
}

/// Options that change what the replay keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Keep a snapshot at the start of this frame (labels always get one).
    pub snapshot_frame: Option<u64>,
}

/// Deepest context nesting the replay follows, per thread (README, "Limits"). Pushes past
/// it are counted, not followed, and the commands refuse the log
/// ([`ReplayState::too_deep`]): every walk of the context tree and every context path
/// stays within it.
pub const MAX_CONTEXT_DEPTH: usize = 1_000;

/// Everything the replay rebuilt. Reports read this, never the log.
#[derive(Debug, Clone, Default)]
pub struct ReplayState {
    /// The context nodes of every thread's tree, parents before children ([`ROOT`] first).
    pub nodes: Vec<Node>,
    /// Figures per (context, domain, thread).
    pub slots: Vec<Slot>,
    /// Threads, in order of first appearance (see [`ReplayState::threads`]).
    threads: Vec<ThreadState>,
    /// Domains that saw an allocation or free, in order of first appearance (see
    /// [`ReplayState::domains`]); `live` is indexed alike.
    domains: Vec<DomainTotals>,
    /// Domains as the log defined them, by id.
    pub domain_info: FxMap<u32, DomainInfo>,
    /// The log's strings, by id.
    pub strings: FxMap<u32, String>,
    /// The log's callstacks (return addresses, innermost first), by id.
    pub stacks: FxMap<u32, Vec<u64>>,
    /// Context types: the string id of each type's name, by type id.
    pub context_types: FxMap<u32, u32>,
    /// Allocation sites, one per (stack, domain) that allocated.
    pub sites: Vec<Site>,
    /// Labels, in order.
    pub labels: Vec<Marker>,
    /// Frame starts, in order.
    pub frames: Vec<FrameMark>,
    /// The snapshot asked for with [`ReplayOptions::snapshot_frame`].
    pub frame_snapshot: Option<Marker>,
    /// What did not add up.
    pub anomalies: Anomalies,
    /// Resource descriptors of live domain allocations.
    pub resources: FxMap<(u32, u64), ResourceDesc>,
    /// Events applied, and lost by the recorder (from `Lost` records).
    pub events: u64,
    /// See `events`.
    pub lost_events: u64,
    /// The latest clock reading of any thread, in ticks.
    pub end_time_ns: u64,
    /// The deepest context nesting seen past [`MAX_CONTEXT_DEPTH`], 0 if none.
    deepest_refused: u64,
    /// Heap in use and the ceiling, if the replay stopped at the memory ceiling.
    out_of_room: Option<(u64, u64)>,
    options: ReplayOptions,
    children: FxMap<(NodeId, u32, u32), NodeId>,
    slot_index: FxMap<(NodeId, u32, u32), u32>,
    site_index: FxMap<(u32, u32), u32>,
    /// Site index of (stack, heap) for stack ids below [`DIRECT_IDS`] (`u32::MAX`: none yet).
    heap_sites: Vec<u32>,
    thread_index: FxMap<u32, u32>,
    /// The last thread looked up: (id, index). Events come in runs of one thread.
    last_thread: Option<(u32, u32)>,
    /// `events` when the last thread's run began (see [`ReplayState::counted`]).
    events_counted_by_thread: u64,
    domain_index: FxMap<u32, u32>,
    /// Index in `domains` of domain ids below [`DIRECT_IDS`] (`u32::MAX`: none yet).
    direct_domains: Vec<u32>,
    /// The heap's index in `domains` plus one (0 until it is seen).
    heap_index_plus_one: u32,
    live: Vec<LiveAllocations>,
    /// Bytes used of the live heap allocations that reported their usage.
    used: FxMap<u64, u64>,
    /// Live heap allocations for which [`indexed`] holds, by address, for attaches to
    /// interior pointers (the others are found by probing back from the address).
    big: InteriorIndex,
    current_frame: Option<u64>,
    last_label: Option<u32>,
    /// Snapshot points placed so far, and what slots held at them (see `touch`).
    points: u32,
    points_held: Vec<PointsHeld>,
    timeline: Timeline,
    process_memory: ProcessMemory,
    /// Set by [`ReplayState::finish`]: no more events come.
    finished: bool,
    /// Every node's path, made the first time a path is asked for once the replay is
    /// finished: reports ask for thousands, and each made alone walks up to the root.
    paths: std::sync::OnceLock<Vec<String>>,
}

/// Ids (stacks, domains) below this are looked up in plain tables, the rest in maps: the
/// recorder numbers them from 1, a foreign log might not.
const DIRECT_IDS: usize = 1 << 16;

/// Heap allocations of at least this size are indexed for interior-pointer lookups;
/// smaller ones are found by probing back from the address, at most `BIG / 8` lookups.
/// Attaches are rare and allocations are many: the index is what every allocation pays.
const BIG: u64 = 4096;

/// Freed addresses are remembered (to tell a double free from a free of memory allocated
/// before the recording) for at least this many frees of their domain.
pub const FREED_REMEMBERED: u64 = 1 << 16;

/// What a free found at its address.
enum Freed {
    /// The live allocation it ends.
    Live(Live),
    /// The address was freed already and not allocated again.
    Again,
    /// Nothing known: memory allocated before the recording (or freed so long ago that
    /// the address was forgotten, see [`FREED_REMEMBERED`]).
    Unknown,
}

/// One domain's live allocations by address, plus a tombstone for each address freed
/// since it was last allocated. The tombstone costs nothing extra: a free finds the entry
/// anyway, and marks it instead of removing it, so the replay probes the map once per
/// event. When the table is full, tombstones are a quarter of its entries or more and at
/// least half of them are older than [`FREED_REMEMBERED`] frees, those are swept instead
/// of growing the table, which bounds
/// memory by the live allocations (and a constant). Sweeping only a full table (rather
/// than whenever tombstones pile up) matters: each sweep rewrites the whole table, tens
/// of megabytes at a few hundred thousand live allocations, and with malloc-like address
/// reuse most frees leave a tombstone that the next allocation there takes over, so the
/// table rarely fills.
#[derive(Debug, Clone, Default)]
struct LiveAllocations {
    map: AddrMap<Live>,
    /// Tombstones in `map`.
    freed: u64,
    /// Frees so far: a tombstone's `seq` is the count at its free.
    frees: u64,
}

impl Live {
    /// `slot` of a tombstone.
    const FREED: u32 = u32::MAX;
    /// A bit of `site_and_flag`: the allocation reported its usage (it is in
    /// `ReplayState::used`), so a free looks there only then. (Sites are far fewer.)
    const USAGE_REPORTED: u32 = 1 << 31;

    #[inline(always)]
    fn site(&self) -> u32 {
        self.site_and_flag & !Live::USAGE_REPORTED
    }

    #[inline(always)]
    fn usage_reported(&self) -> bool {
        self.site_and_flag & Live::USAGE_REPORTED != 0
    }

    #[inline]
    fn is_live(&self) -> bool {
        self.slot != Live::FREED
    }
}

impl LiveAllocations {
    /// Records a live allocation; returns the live one it replaces, if the log says that
    /// address was still live.
    #[inline(always)]
    fn insert(&mut self, addr: u64, live: Live) -> Option<Live> {
        match self.entry(addr) {
            (old, true) if old.is_live() => Some(std::mem::replace(old, live)),
            (old, true) => {
                *old = live;
                self.freed -= 1;
                None
            }
            (new, false) => {
                *new = live;
                None
            }
        }
    }

    #[inline(always)]
    fn free(&mut self, addr: u64) -> Freed {
        self.frees += 1;
        let tombstone = Live { size: 0, seq: self.frees, slot: Live::FREED, site_and_flag: 0 };
        let found = match self.entry(addr) {
            (l, true) if l.is_live() => Freed::Live(std::mem::replace(l, tombstone)),
            (_, true) => return Freed::Again,
            (l, false) => {
                *l = tombstone;
                Freed::Unknown
            }
        };
        self.freed += 1;
        found
    }

    /// The entry of `addr`, added if absent (see [`AddrMap::entry`]); whether it was there.
    #[inline(always)]
    fn entry(&mut self, addr: u64) -> (&mut Live, bool) {
        self.make_room();
        if addr == u64::MAX {
            self.map.entry(addr)
        } else {
            self.map.entry_in_room(addr)
        }
    }

    /// Before an entry may be added: a full table is swept of old tombstones rather than
    /// grown, if they are many (at most [`FREED_REMEMBERED`] tombstones are recent).
    #[inline(always)]
    fn make_room(&mut self) {
        if self.map.is_full() {
            self.sweep_or_grow();
        }
    }

    #[inline(never)]
    fn sweep_or_grow(&mut self) {
        if self.freed >= 2 * FREED_REMEMBERED && self.freed * 4 >= self.map.len() as u64 {
            self.sweep();
        }
        if self.map.is_full() {
            self.map.grow();
        }
    }

    #[inline(never)]
    fn sweep(&mut self) {
        let oldest_kept = self.frees.saturating_sub(FREED_REMEMBERED);
        self.map.retain(|l| l.is_live() || l.seq > oldest_kept);
        self.freed = self.map.iter().filter(|(_, l)| !l.is_live()).count() as u64;
    }

    #[inline]
    fn get(&self, addr: u64) -> Option<&Live> {
        self.map.get(addr).filter(|l| l.is_live())
    }

    fn get_mut(&mut self, addr: u64) -> Option<&mut Live> {
        self.map.get_mut(addr).filter(|l| l.is_live())
    }

    fn iter(&self) -> impl Iterator<Item = (u64, &Live)> + '_ {
        self.map.iter().filter(|(_, l)| l.is_live())
    }
}

/// Live heap allocations that `owner_of` cannot find by probing back from an address
/// (see [`indexed`]), for attaches to interior pointers. Attaches are rare and
/// allocations many, so an allocation only appends its address here and a free does
/// nothing: the live map is the truth, and the index is sorted and cleaned of addresses
/// no longer live (or no longer indexed) when an attach asks, or when it has grown to
/// twice what it held after the last cleaning (so its memory stays proportional to the
/// live allocations).
#[derive(Debug, Clone, Default)]
struct InteriorIndex {
    /// Sorted and clean as of the last cleaning.
    sorted: Vec<u64>,
    /// Appended since.
    pending: Vec<u64>,
}

impl InteriorIndex {
    #[inline]
    fn add(&mut self, addr: u64, heap: &LiveAllocations) {
        self.pending.push(addr);
        if self.pending.len() >= (2 * self.sorted.len()).max(4096) {
            self.clean(heap);
        }
    }

    #[inline(never)]
    fn clean(&mut self, heap: &LiveAllocations) {
        self.sorted.append(&mut self.pending);
        self.sorted.sort_unstable();
        self.sorted.dedup();
        self.sorted.retain(|&a| heap.get(a).is_some_and(|l| indexed(a, l.size)));
    }

    /// The live indexed allocation containing `addr`.
    fn find<'h>(&mut self, addr: u64, heap: &'h LiveAllocations) -> Option<&'h Live> {
        if !self.pending.is_empty() {
            self.clean(heap);
        }
        let i = self.sorted.partition_point(|&a| a <= addr);
        let base = *self.sorted.get(i.checked_sub(1)?)?;
        heap.get(base).filter(|l| addr < base.wrapping_add(l.size))
    }
}

/// Who freed an allocation: its thread (stream id) and that thread's latest allocation
/// then, and the free callstack (0 = none).
#[derive(Debug, Clone, Copy)]
struct FreedBy {
    thread: u32,
    /// The sequence number of its latest allocation.
    last_alloc: Option<u64>,
    stack: u32,
}

/// [`ReplayState::touch`] on tables already indexed: slot number `slot_id` (`s`) and a
/// site of one domain, whose peak count is `epoch`, with `points` snapshot points placed.
#[inline(always)]
fn touch(s: &mut Slot, st: &mut Site, slot_id: u32, epoch: u64, points: u32, points_held: &mut Vec<PointsHeld>) {
    s.at_peak.before_change(&s.now, epoch);
    if s.points_seen != points {
        points_passed(s, slot_id, points, points_held);
    }
    st.at_peak.before_change(&st.now, epoch);
}

/// A slot is about to change for the first time since snapshot points were placed.
#[inline(never)]
fn points_passed(s: &mut Slot, slot_id: u32, points: u32, points_held: &mut Vec<PointsHeld>) {
    if s.now.live_count > 0 {
        let held = Held::of(&s.now);
        points_held.push(PointsHeld { slot: slot_id, from: s.points_seen, to: points, held });
    }
    s.points_seen = points;
}

/// Whether a heap allocation goes in the interior-pointer index: a big one, or one whose
/// start is not 8-byte aligned (the probe in `owner_of` only visits aligned starts).
#[inline]
fn indexed(addr: u64, size: u64) -> bool {
    size >= BIG || addr % 8 != 0
}

impl Node {
    fn new(parent: NodeId, ty: u32, name: u32) -> Node {
        Node { parent, ty, name, entries: 0, instances: 0, first_child: ROOT, last_child: ROOT, next_sibling: ROOT }
    }
}

impl ReplayState {
    /// The children of `node`, in creation order.
    pub fn children(&self, node: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        let first = self.nodes[node as usize].first_child;
        std::iter::successors((first != ROOT).then_some(first), |&c| {
            let next = self.nodes[c as usize].next_sibling;
            (next != ROOT).then_some(next)
        })
    }

    /// An empty state: the root context only.
    pub fn new(options: ReplayOptions) -> Self {
        let mut s = ReplayState { options, ..Default::default() };
        s.nodes.push(Node::new(ROOT, 0, 0));
        s
    }

    /// A hint that `record` comes soon: starts loading what applying it will touch.
    #[inline(always)]
    pub fn upcoming(&self, record: &Record) {
        // Every record, whatever its kind: the heap records and usage look their address
        // up in the heap's map, and the others hold address 0 (one line, prefetched in
        // vain). No branch on the kind, which is as random as the log.
        self.prefetch(HEAP_DOMAIN, record.addr);
    }

    #[inline(always)]
    fn prefetch(&self, domain: u32, addr: u64) {
        if let Some(d) = self.domain_index(domain) {
            self.live[d as usize].map.prefetch(addr);
        }
    }

    /// Applies one record of `thread` (its `Event` records refer into `block`), in global order.
    #[inline(always)]
    /// Whether the replay must stop: the heap is past the memory ceiling
    /// (the memory ceiling ([`crate::over_ceiling`])). Once it says so, it keeps saying so.
    pub fn stopped(&mut self) -> bool {
        if self.out_of_room.is_none() {
            self.out_of_room = crate::over_ceiling();
        }
        self.out_of_room.is_some()
    }

    /// Heap in use and the ceiling, if the replay stopped at the memory ceiling: its
    /// figures cover only the events before.
    pub fn out_of_room(&self) -> Option<(u64, u64)> {
        self.out_of_room
    }

    /// What the state holds, by part: (what, bytes of heap, how many), largest first.
    /// Estimated from lengths and capacities (allocator overhead not counted), to say
    /// what grew when a log takes more memory than a command may use.
    pub fn memory_by_part(&self) -> Vec<(&'static str, u64, u64)> {
        use std::mem::size_of;
        let n = |v: usize| v as u64;
        // A hash map entry, with a load factor of 7/8 and a control byte.
        let map = |len: usize, entry: usize| n(len) * (n(entry) + 1) * 8 / 7;
        let vec_bytes = |cap: usize, each: usize| n(cap) * n(each);
        let mut parts = vec![
            (
                "live allocations",
                self.live.iter().map(|l| l.map.heap_bytes()).sum::<u64>() + map(self.used.len(), 16),
                self.live.iter().map(|l| n(l.map.len())).sum(),
            ),
            (
                "callstacks",
                self.stacks.values().map(|f| vec_bytes(f.capacity(), 8)).sum::<u64>()
                    + map(self.stacks.len(), 4 + size_of::<Vec<u64>>()),
                n(self.stacks.len()),
            ),
            (
                "strings",
                self.strings.values().map(|t| n(t.capacity())).sum::<u64>()
                    + map(self.strings.len(), 4 + size_of::<String>()),
                n(self.strings.len()),
            ),
            (
                "context nodes",
                vec_bytes(self.nodes.capacity(), size_of::<Node>())
                    + map(self.children.len(), 16)
                    + map(self.slot_index.len(), 16),
                n(self.nodes.len()),
            ),
            ("context slots", vec_bytes(self.slots.capacity(), size_of::<Slot>()), n(self.slots.len())),
            ("allocation sites", vec_bytes(self.sites.capacity(), size_of::<Site>()), n(self.sites.len())),
            (
                "labels",
                vec_bytes(self.labels.capacity(), size_of::<Marker>())
                    + vec_bytes(self.points_held.capacity(), size_of::<PointsHeld>()),
                n(self.labels.len()),
            ),
            ("frame markers", vec_bytes(self.frames.capacity(), size_of::<FrameMark>()), n(self.frames.len())),
            (
                "resource descriptors",
                map(self.resources.len(), 12 + size_of::<ResourceDesc>()),
                n(self.resources.len()),
            ),
        ];
        parts.sort_by_key(|&(_, bytes, _)| std::cmp::Reverse(bytes));
        parts
    }

    /// Applies one record of stream `thread`, in global order (`block` holds the events its `Event` records refer to).
    pub fn apply_record(&mut self, thread: u32, r: &Record, block: &Records) {
        // A realloc is one event in two records.
        let ti = self.counted(thread, r.kind != RecordKind::ReallocAlloc);
        match r.kind {
            RecordKind::Alloc | RecordKind::ReallocAlloc => {
                self.alloc(ti, HEAP_DOMAIN, r.addr, r.value, r.stack, r.key)
            }
            RecordKind::Free => self.free(ti, HEAP_DOMAIN, r.addr, r.stack),
            RecordKind::ReallocFree => self.free(ti, HEAP_DOMAIN, r.addr, 0),
            RecordKind::Usage => self.usage(r.addr, r.value),
            RecordKind::ContextPush => self.context_push(ti, r.stack, r.value as u32, r.flags),
            RecordKind::ContextPop => self.context_pop(ti),
            RecordKind::Time => self.time(ti, r.value),
            RecordKind::Event => self.apply_event(ti, block.event(r), Part::Whole),
        }
    }

    /// Applies one event (or realloc half) of `thread`, in global order.
    pub fn apply(&mut self, thread: u32, event: &Event, part: Part) {
        let ti = self.counted(thread, part != Part::ReallocAlloc);
        self.apply_event(ti, event, part);
    }

    /// The index of thread `thread`, counting one more event of it if `new_event` (not
    /// for a realloc's second half).
    #[inline(always)]
    fn counted(&mut self, thread: u32, new_event: bool) -> usize {
        let ti = self.thread_index(thread);
        // The thread's own count is brought up to date when another thread's event comes
        // (events come in runs of one thread) and at `finish`.
        self.events += u64::from(new_event);
        ti
    }

    /// Adds the events since the last thread switch to the thread they belong to.
    fn count_thread_events(&mut self) {
        if let Some((_, i)) = self.last_thread {
            self.threads[i as usize].events += self.events - self.events_counted_by_thread;
        }
        self.events_counted_by_thread = self.events;
    }

    fn apply_event(&mut self, ti: usize, event: &Event, part: Part) {
        let t = &mut self.threads[ti];
        match *event {
            Event::Alloc { seq, domain, addr, size, stack, .. } => self.alloc(ti, domain, addr, size, stack, seq),
            Event::Free { domain, addr, stack, .. } => self.free(ti, domain, addr, stack),
            Event::Realloc { old_addr, new_addr, new_size, stack, seq, .. } => match part {
                Part::ReallocFree => self.free(ti, HEAP_DOMAIN, old_addr, 0),
                _ => self.alloc(ti, HEAP_DOMAIN, new_addr, new_size, stack, seq),
            },
            Event::Usage { addr, used, .. } => self.usage(addr, used),
            Event::ContextPush { ty, name, flags } => self.context_push(ti, ty, name, flags),
            Event::ContextPop => self.context_pop(ti),
            Event::AttachPush { addr, .. } => {
                let target = self.owner_of(addr);
                if target.is_none() {
                    self.anomalies.unresolved_attaches += 1;
                }
                self.threads[ti].attaches.push(target);
            }
            Event::AttachPop => {
                if t.attaches.pop().is_none() {
                    self.anomalies.unbalanced_pops += 1;
                }
            }
            Event::Time { ns } => self.time(ti, ns),
            Event::FrameStart { seq, frame } => {
                let time_ns = t.time_ns;
                self.current_frame = Some(frame);
                self.frames.push(FrameMark { frame, seq, time_ns });
                if self.options.snapshot_frame == Some(frame) && self.frame_snapshot.is_none() {
                    self.frame_snapshot = Some(self.marker(frame as u32, seq, time_ns));
                }
            }
            Event::Label { seq, name } => {
                let time_ns = t.time_ns;
                self.last_label = Some(name);
                let m = self.marker(name, seq, time_ns);
                self.labels.push(m);
            }
            Event::DefineString { id, ref text } => {
                self.strings.insert(id, text.clone());
            }
            Event::DefineStack { id, ref frames } => {
                self.stacks.insert(id, frames.clone());
            }
            Event::DefineContextType { id, name } => {
                self.context_types.insert(id, name);
            }
            Event::DefineDomain { id, name, kind, capacity, parent } => {
                self.domain_info.insert(id, DomainInfo { name, kind, capacity, parent });
            }
            Event::ThreadInfo { os_tid, name } => {
                t.os_tid = os_tid;
                if name != 0 {
                    t.name = name;
                }
            }
            Event::Resource { domain, addr, ref desc } => {
                self.resources.insert((domain, addr), desc.clone());
            }
            Event::Lost { events, .. } => self.lost_events = self.lost_events.saturating_add(events),
            Event::ProcessMemory { time, resident, committed } => {
                self.process_memory.push(ProcessSample { time, resident, committed });
            }
            Event::Module { .. } | Event::Unknown { .. } => {}
        }
    }

    fn context_push(&mut self, ti: usize, ty: u32, name: u32, flags: u8) {
        let t = &mut self.threads[ti];
        if t.contexts.len() >= MAX_CONTEXT_DEPTH {
            t.too_deep += 1;
            self.deepest_refused = self.deepest_refused.max(MAX_CONTEXT_DEPTH as u64 + t.too_deep);
            return;
        }
        let parent = *t.contexts.last().unwrap_or(&ROOT);
        let node = self.child(parent, ty, name);
        let n = &mut self.nodes[node as usize];
        n.entries += 1;
        if flags & context_flags::INSTANCE != 0 {
            n.instances += 1;
        }
        self.threads[ti].contexts.push(node);
    }

    fn context_pop(&mut self, ti: usize) {
        let t = &mut self.threads[ti];
        if t.too_deep > 0 {
            t.too_deep -= 1;
        } else if t.contexts.pop().is_none() {
            self.anomalies.unbalanced_pops += 1;
        }
    }

    #[inline]
    fn time(&mut self, ti: usize, ns: u64) {
        self.threads[ti].time_ns = ns;
        self.end_time_ns = self.end_time_ns.max(ns);
        self.timeline.clock(self.end_time_ns);
    }

    fn child(&mut self, parent: NodeId, ty: u32, name: u32) -> NodeId {
        let next = self.nodes.len() as NodeId;
        let id = *self.children.entry((parent, ty, name)).or_insert(next);
        if id == next {
            self.nodes.push(Node::new(parent, ty, name));
            let p = &mut self.nodes[parent as usize];
            let last = std::mem::replace(&mut p.last_child, id);
            if last == ROOT {
                p.first_child = id;
            } else {
                self.nodes[last as usize].next_sibling = id;
            }
        }
        id
    }

    /// The slot of (node, domain index `dom`, thread index `ti`), created on first use.
    #[inline(always)]
    fn slot(&mut self, node: NodeId, dom: u32, ti: usize) -> u32 {
        if let Some((n, d, slot)) = self.threads[ti].last_slot {
            if n == node && d == dom {
                return slot;
            }
        }
        self.other_slot(node, dom, ti)
    }

    #[inline(never)]
    fn other_slot(&mut self, node: NodeId, dom: u32, ti: usize) -> u32 {
        let thread = self.threads[ti].id;
        let domain = self.domains[dom as usize].id;
        let next = self.slots.len() as u32;
        let id = *self.slot_index.entry((node, domain, thread)).or_insert(next);
        if id == next {
            let series = self.timeline.context_series(dom, self.top_level(node));
            self.slots.push(Slot { node, domain, thread, dom, points_seen: self.points, series, ..Default::default() });
        }
        self.threads[ti].last_slot = Some((node, dom, id));
        id
    }

    /// Before the figures of a slot and a site (of one domain) change: keep what they held
    /// at the domain's latest peak.
    /// The same for the snapshot points (labels): a slot that held something and did not
    /// change since some points were placed records what it held at them, once; so a
    /// label costs nothing, and memory grows with the slots that change between labels.
    ///
    /// Inlined (as are `alloc`, `free` and `release` into the replay loop): each call
    /// saved and restored a dozen registers, about 60 instructions per allocation and free.
    #[inline(always)]
    fn touch(&mut self, slot: u32, site: u32) {
        let s = &mut self.slots[slot as usize];
        let epoch = self.domains[s.dom as usize].epoch;
        touch(s, &mut self.sites[site as usize], slot, epoch, self.points, &mut self.points_held);
    }

    /// The index of thread `id` in `threads`, created on first sight.
    #[inline]
    fn thread_index(&mut self, id: u32) -> usize {
        if let Some((last, i)) = self.last_thread {
            if last == id {
                return i as usize;
            }
        }
        self.other_thread(id)
    }

    #[inline(never)]
    fn other_thread(&mut self, id: u32) -> usize {
        self.count_thread_events();
        let next = self.threads.len() as u32;
        let i = *self.thread_index.entry(id).or_insert(next);
        if i == next {
            self.threads.push(ThreadState { id, ..Default::default() });
        }
        self.last_thread = Some((id, i));
        i as usize
    }

    /// The index of domain `id` in `domains` (and `live`), if it was seen.
    #[inline(always)]
    fn domain_index(&self, id: u32) -> Option<u32> {
        if id == HEAP_DOMAIN && self.heap_index_plus_one != 0 {
            // The domain of nearly every event, resolved with one load.
            return Some(self.heap_index_plus_one - 1);
        }
        match self.direct_domains.get(id as usize) {
            Some(&u32::MAX) => None,
            Some(&i) => Some(i),
            None => self.domain_index.get(&id).copied(),
        }
    }

    /// The index of domain `id`, created on first sight.
    #[inline(always)]
    fn domain_index_or_new(&mut self, id: u32) -> u32 {
        match self.domain_index(id) {
            Some(i) => i,
            None => self.new_domain(id),
        }
    }

    #[inline(never)]
    fn new_domain(&mut self, id: u32) -> u32 {
        let i = self.domains.len() as u32;
        self.domains.push(DomainTotals { id, ..Default::default() });
        self.live.push(LiveAllocations::default());
        self.timeline.add_domain(id);
        if (id as usize) < DIRECT_IDS {
            if self.direct_domains.len() <= id as usize {
                self.direct_domains.resize(id as usize + 1, u32::MAX);
            }
            self.direct_domains[id as usize] = i;
            if id == HEAP_DOMAIN {
                self.heap_index_plus_one = i + 1;
            }
        } else {
            self.domain_index.insert(id, i);
        }
        i
    }

    #[inline(always)]
    fn alloc(&mut self, ti: usize, domain: u32, addr: u64, size: u64, stack: u32, seq: u64) {
        let dom = self.domain_index_or_new(domain);
        let t = &mut self.threads[ti];
        t.last_alloc = Some(seq);
        // The latest time any thread recorded: the tightest known lower bound on when
        // this allocation happened (a thread records its clock every 1024 events, so its
        // own reading may be far older), and the clock the timeline uses.
        let time_ns = self.end_time_ns;
        let node = match t.attaches.last() {
            Some(&Some(target)) => target,
            _ => *t.contexts.last().unwrap_or(&ROOT),
        };
        let slot = self.slot(node, dom, ti);
        let site = self.site(stack, domain, dom);
        let old = self.live[dom as usize].insert(addr, Live { size, seq, slot, site_and_flag: site });
        // Counted without a branch: a branch here added 15 M instructions to the merge of
        // the replay benchmark's 2 M-event log (its inlined code grew), this adds 3 M.
        self.anomalies.impossible_sizes += u64::from(addr.overflowing_add(size).1);
        if let Some(old) = old {
            // The log says the address was live: drop the older allocation's figures.
            self.anomalies.overlapping_allocs += 1;
            self.release(dom, addr, old, None);
        }
        if domain == HEAP_DOMAIN && indexed(addr, size) {
            self.big.add(addr, &self.live[dom as usize]);
        }
        // Each table is indexed once (every index is a bounds check and an address).
        let d = &mut self.domains[dom as usize];
        let s = &mut self.slots[slot as usize];
        let st = &mut self.sites[site as usize];
        touch(s, st, slot, d.epoch, self.points, &mut self.points_held);
        for f in [&mut s.now, &mut st.now] {
            f.live_bytes = f.live_bytes.wrapping_add(size);
            f.live_count += 1;
            f.total_bytes = f.total_bytes.wrapping_add(size);
            f.total_count += 1;
        }
        self.timeline.domains[dom as usize].add(size);
        self.timeline.contexts[s.series as usize].1.add(size);
        d.live_bytes = d.live_bytes.wrapping_add(size);
        d.live_count += 1;
        d.total_bytes = d.total_bytes.wrapping_add(size);
        d.total_count += 1;
        if d.live_bytes > d.peak.bytes {
            d.epoch += 1;
            d.peak = Peak {
                bytes: d.live_bytes,
                count: d.live_count,
                seq,
                time_ns,
                frame: self.current_frame,
                after_label: self.last_label,
            };
            // The slot and the site just grew past what they held at the new peak: their
            // figures now are the ones at the peak.
            let epoch = d.epoch;
            s.at_peak = AtPeak { held: Held::of(&s.now), epoch };
            st.at_peak = AtPeak { held: Held::of(&st.now), epoch };
        }
    }

    #[inline(always)]
    fn free(&mut self, ti: usize, domain: u32, addr: u64, free_stack: u32) {
        let dom = self.domain_index_or_new(domain);
        match self.live[dom as usize].free(addr) {
            Freed::Live(live) => {
                let t = &self.threads[ti];
                let by = FreedBy { thread: t.id, last_alloc: t.last_alloc, stack: free_stack };
                self.release(dom, addr, live, Some(by));
            }
            Freed::Again => self.anomalies.double_frees += 1,
            Freed::Unknown => self.anomalies.untracked_frees += 1,
        }
    }

    /// Takes a no-longer-live allocation out of every figure: freed (`by` whom), or
    /// dropped because the log allocated its address again (`None`).
    #[inline(always)]
    fn release(&mut self, dom: u32, addr: u64, live: Live, by: Option<FreedBy>) {
        let d = &mut self.domains[dom as usize];
        if !self.resources.is_empty() {
            self.resources.remove(&(d.id, addr));
        }
        let used = if live.usage_reported() { self.used.remove(&addr) } else { None };
        let s = &mut self.slots[live.slot as usize];
        let st = &mut self.sites[live.site() as usize];
        touch(s, st, live.slot, d.epoch, self.points, &mut self.points_held);
        let mut temporary = false;
        if let Some(by) = by {
            // Freed before its thread allocated anything else.
            temporary = s.thread == by.thread && by.last_alloc == Some(live.seq);
            let e = match by.stack {
                0 => &mut st.freed_without_stack,
                stack => st.freed_from.entry(stack).or_default(),
            };
            e.0 += 1;
            e.1 = e.1.wrapping_add(live.size);
        }
        for f in [&mut s.now, &mut st.now] {
            f.live_bytes = f.live_bytes.wrapping_sub(live.size);
            f.live_count -= 1;
            if let Some(used) = used {
                f.used_bytes = f.used_bytes.wrapping_sub(used);
                f.usage_capacity = f.usage_capacity.wrapping_sub(live.size);
            }
            if temporary {
                f.temp_bytes = f.temp_bytes.wrapping_add(live.size);
                f.temp_count += 1;
            }
        }
        self.timeline.domains[dom as usize].sub(live.size);
        self.timeline.contexts[s.series as usize].1.sub(live.size);
        d.live_bytes = d.live_bytes.wrapping_sub(live.size);
        d.live_count -= 1;
    }

    /// The top-level context (child of the root) that `node` is in; the root for itself.
    fn top_level(&self, mut node: NodeId) -> NodeId {
        while node != ROOT && self.nodes[node as usize].parent != ROOT {
            node = self.nodes[node as usize].parent;
        }
        node
    }

    /// Memory over time, per domain and per top-level context.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// What the OS saw of the process over time, if the recorder sampled it.
    pub fn process_memory(&self) -> &ProcessMemory {
        &self.process_memory
    }

    fn usage(&mut self, addr: u64, used: u64) {
        let live = self.domain_index(HEAP_DOMAIN).and_then(|d| self.live[d as usize].get_mut(addr));
        let Some(live) = live else {
            self.anomalies.usage_without_allocation += 1;
            return;
        };
        live.site_and_flag |= Live::USAGE_REPORTED;
        let live = *live;
        let used = used.min(live.size);
        let before = self.used.insert(addr, used);
        let (slot, size) = (live.slot, live.size);
        self.touch(slot, live.site());
        let f = &mut self.slots[slot as usize].now;
        let site = &mut self.sites[live.site() as usize];
        match before {
            Some(b) => {
                f.used_bytes = f.used_bytes.wrapping_sub(b).wrapping_add(used);
                site.now.used_bytes = site.now.used_bytes.wrapping_sub(b).wrapping_add(used);
            }
            None => {
                f.used_bytes = f.used_bytes.wrapping_add(used);
                f.usage_capacity = f.usage_capacity.wrapping_add(size);
                site.now.used_bytes = site.now.used_bytes.wrapping_add(used);
                site.now.usage_capacity = site.now.usage_capacity.wrapping_add(size);
            }
        }
    }

    /// The context owning the live heap allocation that contains `addr`.
    fn owner_of(&mut self, addr: u64) -> Option<NodeId> {
        let heap = &self.live[self.domain_index(HEAP_DOMAIN)? as usize];
        let node = |l: &Live| self.slots[l.slot as usize].node;
        if let Some(l) = heap.get(addr) {
            return Some(node(l));
        }
        if let Some(l) = self.big.find(addr, heap) {
            return Some(node(l));
        }
        // Small aligned allocations: their start is one of the 8-byte-aligned addresses
        // less than `BIG` bytes before `addr` (which itself may be any byte inside).
        let aligned = addr & !7;
        (0..BIG / 8)
            .map(|k| aligned.wrapping_sub(k * 8))
            .find_map(|base| heap.get(base).filter(|l| addr < base.wrapping_add(l.size)).map(node))
    }

    /// Places a snapshot point.
    fn marker(&mut self, name: u32, seq: u64, time_ns: u64) -> Marker {
        let point = self.points;
        self.points += 1;
        Marker { name, seq, time_ns, frame: self.current_frame, point }
    }

    /// (slot, what it held) at `marker`, for every slot that held something, by slot.
    pub fn held_at(&self, marker: &Marker) -> Vec<(u32, Held)> {
        let p = marker.point;
        let mut held: Vec<(u32, Held)> = self
            .points_held
            .iter()
            .filter(|h| h.from <= p && p < h.to)
            .map(|h| (h.slot, h.held))
            .chain(
                // Unchanged since the point.
                self.slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.points_seen <= p && s.now.live_count > 0)
                    .map(|(i, s)| (i as u32, Held::of(&s.now))),
            )
            .collect();
        held.sort_unstable_by_key(|&(slot, _)| slot);
        held
    }

    /// What slot `slot` held at its domain's peak.
    pub fn held_at_peak(&self, slot: u32) -> Held {
        let s = &self.slots[slot as usize];
        s.at_peak.get(&s.now, self.domains[s.dom as usize].epoch)
    }

    /// What site `site` (an index in [`ReplayState::sites`]) held at its domain's peak.
    pub fn site_held_at_peak(&self, site: usize) -> Held {
        let s = &self.sites[site];
        s.at_peak.get(&s.now, self.domains[s.dom as usize].epoch)
    }

    /// Live heap allocations that reported their usage: (address, capacity, used, slot, stack).
    pub fn live_containers(&self) -> impl Iterator<Item = (u64, u64, u64, u32, u32)> + '_ {
        let heap = self.domain_index(HEAP_DOMAIN).map(|d| &self.live[d as usize]);
        self.used.iter().filter_map(move |(&addr, &used)| {
            let l = heap?.get(addr)?;
            Some((addr, l.size, used, l.slot, self.sites[l.site() as usize].stack))
        })
    }

    /// Every live allocation: (domain, address, size, slot, stack, seq).
    pub fn live_allocations(&self) -> impl Iterator<Item = (u32, u64, u64, u32, u32, u64)> + '_ {
        self.live.iter().zip(&self.domains).flat_map(move |(m, d)| {
            m.iter().map(move |(addr, l)| (d.id, addr, l.size, l.slot, self.sites[l.site() as usize].stack, l.seq))
        })
    }

    /// The index in [`ReplayState::sites`] of (stack, domain), created on first use.
    #[inline(always)]
    fn site(&mut self, stack: u32, domain: u32, dom: u32) -> u32 {
        if domain == HEAP_DOMAIN {
            if let Some(&i) = self.heap_sites.get(stack as usize).filter(|&&i| i != u32::MAX) {
                return i;
            }
        }
        self.new_site(stack, dom)
    }

    /// [`ReplayState::site`] past the table of heap sites: in the map, or created.
    #[inline(never)]
    fn new_site(&mut self, stack: u32, dom: u32) -> u32 {
        let domain = self.domains[dom as usize].id;
        let direct = domain == HEAP_DOMAIN && (stack as usize) < DIRECT_IDS;
        let next = self.sites.len() as u32;
        // The top bit of a live allocation's site index is a flag (2^31 sites would be
        // hundreds of gigabytes of them).
        assert!(next < Live::USAGE_REPORTED, "too many allocation sites");
        let id = *self.site_index.entry((stack, domain)).or_insert(next);
        if id == next {
            self.sites.push(Site { stack, domain, dom, ..Default::default() });
        }
        if direct {
            if self.heap_sites.len() <= stack as usize {
                self.heap_sites.resize(stack as usize + 1, u32::MAX);
            }
            self.heap_sites[stack as usize] = id;
        }
        id
    }

    /// Threads, in order of first appearance in the replay.
    pub fn threads(&self) -> impl Iterator<Item = &ThreadState> + '_ {
        self.threads.iter()
    }

    /// Thread `id` (a stream id of the log), if it had events.
    pub fn thread(&self, id: u32) -> Option<&ThreadState> {
        self.thread_index.get(&id).map(|&i| &self.threads[i as usize])
    }

    /// Domains that allocated, in order of first allocation.
    pub fn domains(&self) -> impl Iterator<Item = &DomainTotals> + '_ {
        self.domains.iter().filter(|d| d.total_count > 0)
    }

    /// The totals of domain `id`, if it allocated.
    pub fn domain(&self, id: u32) -> Option<&DomainTotals> {
        self.domain_index(id).map(|i| &self.domains[i as usize]).filter(|d| d.total_count > 0)
    }

    /// A string by id, or a placeholder naming the id when the log never defined it.
    pub fn string(&self, id: u32) -> String {
        match self.strings.get(&id) {
            Some(s) => s.clone(),
            None if id == 0 => String::new(),
            None => format!("<string #{id}>"),
        }
    }

    /// A context node's type and name.
    pub fn node_label(&self, node: NodeId) -> (String, String) {
        if node == ROOT {
            return (String::new(), "(no context)".into());
        }
        let n = &self.nodes[node as usize];
        let ty = self.context_types.get(&n.ty).map_or_else(|| format!("<type #{}>", n.ty), |&s| self.string(s));
        (ty, self.string(n.name))
    }

    /// Says that no more events come: what is derived from the whole replay may be kept.
    pub fn finish(&mut self) {
        self.count_thread_events();
        self.finished = true;
    }

    /// A node's path from the root: "Level:Forest/Textures:rock.dds".
    pub fn node_path(&self, node: NodeId) -> String {
        if self.finished {
            return self.paths.get_or_init(|| self.all_node_paths())[node as usize].clone();
        }
        let mut parts = Vec::new();
        let mut n = node;
        while n != ROOT {
            let (ty, name) = self.node_label(n);
            parts.push(format!("{ty}:{name}"));
            n = self.nodes[n as usize].parent;
        }
        parts.reverse();
        if parts.is_empty() {
            "(no context)".into()
        } else {
            parts.join("/")
        }
    }

    /// The deepest context nesting of the log, if it is deeper than [`MAX_CONTEXT_DEPTH`]:
    /// the replay did not follow it, and its figures must not be reported.
    pub fn too_deep(&self) -> Option<u64> {
        (self.deepest_refused > 0).then_some(self.deepest_refused)
    }

    /// The path of every node, by id (a parent is always created before its children).
    fn all_node_paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = Vec::with_capacity(self.nodes.len());
        for (i, n) in self.nodes.iter().enumerate() {
            let path = if i == ROOT as usize {
                "(no context)".to_owned()
            } else {
                let (ty, name) = self.node_label(i as NodeId);
                match n.parent {
                    ROOT => format!("{ty}:{name}"),
                    p => format!("{}/{ty}:{name}", paths[p as usize]),
                }
            };
            paths.push(path);
        }
        paths
    }

    /// A domain's name ("heap" for domain 0).
    pub fn domain_name(&self, domain: u32) -> String {
        match self.domain_info.get(&domain) {
            Some(d) => self.string(d.name),
            None if domain == HEAP_DOMAIN => "heap".into(),
            None => format!("<domain #{domain}>"),
        }
    }

    /// Domains that are not sub-allocators of another: their sum counts no byte twice.
    pub fn is_top_level_domain(&self, domain: u32) -> bool {
        self.domain_info.get(&domain).is_none_or(|d| d.parent.is_none())
    }

    /// Time of a thread's latest clock reading.
    pub fn thread_time(&self, thread: u32) -> u64 {
        self.thread(thread).map_or(0, |t| t.time_ns)
    }

    /// Context depth of a thread at the end (unbalanced pushes show as non-zero).
    pub fn open_contexts(&self, thread: u32) -> usize {
        self.thread(thread).map_or(0, |t| t.contexts.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(size: u64) -> Live {
        Live { size, seq: 1, slot: 0, site_and_flag: 0 }
    }

    /// The lazily cleaned interior-pointer index finds the live big allocation that
    /// contains an address, after frees and after addresses are allocated again as small
    /// blocks, and stays bounded by the live ones.
    #[test]
    fn interior_pointers_find_their_big_allocation_after_churn() {
        let mut heap = LiveAllocations::default();
        let mut index = InteriorIndex::default();
        let addr = |i: u64| 0x10_0000 + i * 0x4000;
        for round in 0..3u64 {
            for i in 0..10_000u64 {
                if (i + round) % 3 == 0 {
                    heap.free(addr(i));
                } else if (i + round) % 5 == 0 {
                    heap.insert(addr(i), live(64));
                } else {
                    heap.insert(addr(i), live(8192));
                    index.add(addr(i), &heap);
                }
            }
            for i in 0..10_000u64 {
                let want = heap.get(addr(i)).filter(|l| l.size == 8192).map(|l| l.size);
                assert_eq!(index.find(addr(i) + 100, &heap).map(|l| l.size), want, "block {i}, round {round}");
                // Past the end of a big block: nothing (the next one starts later).
                assert_eq!(index.find(addr(i) + 8192, &heap).map(|l| l.size), None);
            }
            let live_big = heap.iter().filter(|(_, l)| l.size == 8192).count();
            assert!(index.sorted.len() + index.pending.len() <= 3 * live_big + 4096);
        }
    }

    #[test]
    fn a_live_allocation_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Live>(), 24);
    }

    /// A context node is 40 bytes (with the map entry that finds it, under the 100 bytes
    /// per context of ARCHITECTURE.md), and its children list keeps creation order.
    #[test]
    fn a_context_node_is_40_bytes_and_lists_its_children_in_order() {
        assert_eq!(std::mem::size_of::<Node>(), 40);
        let mut s = ReplayState::new(ReplayOptions::default());
        let a = s.child(ROOT, 1, 1);
        let b = s.child(ROOT, 1, 2);
        let a1 = s.child(a, 1, 3);
        let c = s.child(ROOT, 2, 1);
        assert_eq!(s.child(ROOT, 1, 2), b);
        assert_eq!(s.children(ROOT).collect::<Vec<_>>(), [a, b, c]);
        assert_eq!(s.children(a).collect::<Vec<_>>(), [a1]);
        assert_eq!(s.children(b).count(), 0);
    }

    /// A double free is recognized across `FREED_REMEMBERED - 1` other frees, and the
    /// tombstones of a long run of frees stay bounded.
    #[test]
    fn freed_addresses_are_remembered_for_a_bounded_window() {
        let mut m = LiveAllocations::default();
        m.insert(0x10, live(16));
        assert!(matches!(m.free(0x10), Freed::Live(l) if l.size == 16));
        // Many other blocks allocated and freed, each at a new address.
        for i in 0..FREED_REMEMBERED - 1 {
            let addr = 0x1_0000 + i * 16;
            m.insert(addr, live(16));
            assert!(matches!(m.free(addr), Freed::Live(_)));
        }
        assert!(matches!(m.free(0x10), Freed::Again));
        assert!(matches!(m.free(0x20), Freed::Unknown), "never allocated");
        assert!(matches!(m.free(0x20), Freed::Again), "freed just before");
        // Reallocated: live again, then freed once more.
        m.insert(0x10, live(32));
        assert!(matches!(m.free(0x10), Freed::Live(l) if l.size == 32));
        // A long run of frees: what is remembered stays bounded. The table grows only
        // while it fills with fewer than 2 × FREED_REMEMBERED tombstones, to at most the
        // one a rebuild sizes for that many; once full it is swept instead.
        let bound = (2 * FREED_REMEMBERED * 5).next_power_of_two() / 3 + 1;
        let mut most = 0;
        for i in 0..20 * FREED_REMEMBERED {
            m.free(0x100_0000 + i * 16);
            assert!(m.freed <= bound);
            most = most.max(m.freed);
        }
        assert!(m.map.len() as u64 <= bound);
        assert!(most >= 2 * FREED_REMEMBERED, "swept only when many tombstones are old");
        assert_eq!(m.iter().count(), 0, "nothing live");
    }

    /// A thread's event count is brought up to date at each switch of thread and at
    /// `finish`, and a realloc counts once.
    #[test]
    fn events_are_counted_per_thread_across_runs() {
        let mut state = ReplayState::new(ReplayOptions::default());
        let mut block = Records::default();
        let mut seq = 0;
        for (thread, n) in [(7u32, 3u64), (9, 2), (7, 4), (11, 1), (9, 5)] {
            for _ in 0..n {
                seq += 1;
                block.clear();
                block.push(Event::Alloc { seq, domain: HEAP_DOMAIN, addr: seq * 16, size: 8, align_log2: 3, stack: 0 });
                state.apply_record(thread, &block.records[0], &block);
            }
        }
        block.clear();
        block.push(Event::Realloc {
            free_seq: seq + 1,
            seq: seq + 2,
            old_addr: 16,
            new_addr: 0x9000,
            new_size: 32,
            align_log2: 3,
            stack: 0,
        });
        for r in &block.records {
            state.apply_record(11, r, &block);
        }
        state.finish();
        let counts: Vec<(u32, u64)> = state.threads().map(|t| (t.id, t.events)).collect();
        assert_eq!(counts, [(7, 7), (9, 7), (11, 2)]);
        assert_eq!(state.events, 16);
    }
}
