//! The replay state's data: what a context, a slot (context, domain, thread), a site,
//! a domain, a thread, a label and a frame hold. [`crate::ReplayState`] (`state.rs`)
//! keeps them up to date; reports read them.

use memreplay_format::DomainKind;

use super::ids::{DomIndex, FxMap, NodeId};

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
    pub(crate) fn of(f: &Figures) -> Held {
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
pub(crate) struct AtPeak {
    pub(crate) held: Held,
    pub(crate) epoch: u64,
}

impl AtPeak {
    /// Before `now` changes, with the domain at peak number `epoch`.
    #[inline]
    pub(crate) fn before_change(&mut self, now: &Figures, epoch: u64) {
        if self.epoch != epoch {
            self.held = Held::of(now);
            self.epoch = epoch;
        }
    }

    /// What it held at peak number `epoch`, its figures being `now`.
    pub(crate) fn get(&self, now: &Figures, epoch: u64) -> Held {
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
    pub(crate) at_peak: AtPeak,
    /// Snapshot points (labels, the frame asked for) placed when it last changed: it has
    /// held `now` at every point since.
    pub(crate) points_seen: u32,
    /// Its top-level context's series in the timeline.
    pub(crate) series: u32,
    /// Its context node.
    pub node: NodeId,
    /// Its domain's id in the log.
    pub domain: u32,
    /// The stream id of its thread.
    pub thread: u32,
    /// Index of its domain in `ReplayState::domains`.
    pub(crate) dom: DomIndex,
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
    pub(crate) first_child: NodeId,
    pub(crate) last_child: NodeId,
    pub(crate) next_sibling: NodeId,
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
    pub(crate) epoch: u64,
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
    /// Stream id of that event's thread: with `seq`, the event (two threads' events may
    /// share a sequence number, SPEC.md §7.9).
    pub thread: u32,
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
    pub(crate) contexts: Vec<NodeId>,
    /// Pushes past [`MAX_CONTEXT_DEPTH`] not popped yet (not followed).
    pub(crate) too_deep: u64,
    /// Attach targets; `None` for an attach whose address no live allocation contains.
    pub(crate) attaches: Vec<Option<NodeId>>,
    /// The sequence number of its latest allocation (an allocation freed while it is
    /// still its thread's latest is a temporary).
    pub(crate) last_alloc: Option<u64>,
    pub(crate) time_ns: u64,
    /// The slot of its latest allocation: (node, domain index, slot). Most allocations
    /// go to the same slot as the one before, which spares the slot lookup.
    pub(crate) last_slot: Option<(NodeId, DomIndex, u32)>,
}

/// A named point in time; [`crate::ReplayState::held_at`] tells what every slot held there,
/// if the replay kept a snapshot at it ([`ReplayOptions::label_snapshots`]).
#[derive(Debug, Clone)]
pub struct Marker {
    /// String id of the label's name.
    pub name: u32,
    /// Sequence number of the label.
    pub seq: u64,
    /// Stream id of its thread.
    pub thread: u32,
    /// Clock ticks at the label (its thread's last reading).
    pub time_ns: u64,
    /// The frame in progress.
    pub frame: Option<u64>,
    /// Its number among the snapshot points, if it has a snapshot.
    pub(crate) point: Option<u32>,
}

impl Marker {
    /// Whether the replay kept a snapshot here ([`crate::ReplayState::held_at`]).
    pub fn has_snapshot(&self) -> bool {
        self.point.is_some()
    }
}

/// What a slot held at the snapshot points `from..to` (it changed at neither end).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PointsHeld {
    pub(crate) slot: u32,
    pub(crate) from: u32,
    pub(crate) to: u32,
    pub(crate) held: Held,
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

/// The allocator calls a process made before its recorder could start (a log's
/// `BeforeStart` record, format 1.3, SPEC.md §7.13): counted, not recorded one by one, and
/// not a loss. `live` of their blocks were still allocated when recording started and are
/// in the log as allocations without a callstack (so their frees match); a free of one
/// of the `untracked` blocks is a free of an unknown block ([`Anomalies::untracked_frees`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CallsBeforeStart {
    /// Calls that allocated a block.
    pub allocations: u64,
    /// Calls that freed a block.
    pub frees: u64,
    /// Calls that resized a block.
    pub reallocs: u64,
    /// Bytes the allocations and reallocs asked for.
    pub bytes: u64,
    /// Blocks still allocated when recording started (recorded as allocations).
    pub live: u64,
    /// Blocks the recorder could not keep track of.
    pub untracked: u64,
}

impl CallsBeforeStart {
    /// Every call counted.
    pub fn calls(&self) -> u64 {
        self.allocations.saturating_add(self.frees).saturating_add(self.reallocs)
    }

    /// Adds a `BEFORE_START` record's counts (a log may hold more than one), saturating.
    pub fn add(&mut self, record: &memreplay_format::Event) {
        if let memreplay_format::Event::BeforeStart { allocations, frees, reallocs, bytes, live, untracked } = *record {
            for (sum, n) in [
                (&mut self.allocations, allocations),
                (&mut self.frees, frees),
                (&mut self.reallocs, reallocs),
                (&mut self.bytes, bytes),
                (&mut self.live, live),
                (&mut self.untracked, untracked),
            ] {
                *sum = sum.saturating_add(n);
            }
        }
    }
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
    pub(crate) at_peak: AtPeak,
    /// (frees, bytes) of this site's blocks freed without a callstack, and by free
    /// callstack id for the others: kept apart so that a log without free callstacks
    /// never touches the map (see [`Site::frees_by_stack`]).
    pub(crate) freed_without_stack: (u64, u64),
    /// Its allocation callstack id (0: none).
    pub stack: u32,
    /// Its domain's id in the log.
    pub domain: u32,
    /// Index of its domain in `ReplayState::domains`.
    pub(crate) dom: DomIndex,
    pub(crate) freed_from: FxMap<u32, (u64, u64)>,
}

impl Site {
    /// Where this site's blocks were freed: (free callstack id, or 0 for none; frees, bytes).
    pub fn frees_by_stack(&self) -> impl Iterator<Item = (u32, (u64, u64))> + '_ {
        let none = (self.freed_without_stack.0 > 0).then_some((0, self.freed_without_stack));
        none.into_iter().chain(self.freed_from.iter().map(|(&k, &v)| (k, v)))
    }
}

/// A `MODULE` record of the metadata stream: an image mapped into the process, for
/// symbolication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleRecord {
    /// Where it was mapped: `base .. base + size`.
    pub base: u64,
    /// See `base`.
    pub size: u64,
    /// What the loader added to the file's addresses.
    pub load_bias: u64,
    /// String id of its path.
    pub path: u32,
    /// Its build id (empty when it has none).
    pub build_id: Vec<u8>,
}

/// Options that change what the replay keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Keep a snapshot at the start of this frame.
    pub snapshot_frame: Option<u64>,
    /// The labels that keep a snapshot.
    pub label_snapshots: LabelSnapshots,
}

/// Which labels keep a snapshot of what every context held there
/// ([`crate::ReplayState::held_at`]). A snapshot costs memory for every context that
/// changes after it (about a megabyte per label on a game-like log of 80 000 contexts), so
/// a long log with many labels keeps only the snapshots its reports read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum LabelSnapshots {
    /// Every label (memory grows with the labels).
    #[default]
    All,
    /// At least `count` labels spread evenly over the log (every label while there are
    /// at most `2 × count`; past that, every second one, then every fourth, …), and every
    /// label with one of the `named` names. Memory stays bounded however many labels the
    /// log has.
    Evenly {
        /// How many labels keep their snapshot, at least (all while there are fewer); 0: only
        /// the named ones.
        count: usize,
        /// Labels of these names keep theirs in any case. (A label whose name is not yet
        /// defined when it is replayed keeps one too: it may be one of them.)
        named: Vec<String>,
    },
}

/// Deepest context nesting the replay follows, per thread (README, "Limits"). Pushes past
/// it are counted, not followed, and the commands refuse the log
/// ([`crate::ReplayState::too_deep`]): every walk of the context tree and every context path
/// stays within it.
pub const MAX_CONTEXT_DEPTH: usize = 1_000;
