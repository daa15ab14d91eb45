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
//!   a second free of the address is known for a double free (see
//!   [`crate::FREED_REMEMBERED`]).
//!
//! Names are kept as string ids and resolved at the end: a thread may use an id whose
//! definition sits later in the merged order (in another thread's stream).

use memreplay_format::{context_flags, Event, Part, Record, RecordKind, Records, ResourceDesc, HEAP_DOMAIN};

use super::ids::{DomIndex, FxMap, NodeId, ROOT};
use super::live::{Freed, InteriorIndex, Live, LiveAllocations, Packed, BIG};
use super::model::{
    Anomalies, AtPeak, CallsBeforeStart, DomainInfo, DomainTotals, FrameMark, Held, LabelSnapshots, Marker,
    ModuleRecord, Node, Peak, PointsHeld, ReplayOptions, Site, Slot, ThreadState, MAX_CONTEXT_DEPTH,
};
use super::stacks::Stacks;
use super::timeline::{BudgetSample, BudgetSamples, ProcessMemory, ProcessSample, Timeline};

/// Everything the replay rebuilt. Reports read this, never the log.
#[derive(Debug, Clone, Default)]
pub struct ReplayState {
    /// The context nodes of every thread's tree, parents before children ([`ROOT`] first).
    pub nodes: Vec<Node>,
    /// Figures per (context, domain, thread).
    pub slots: Vec<Slot>,
    /// Threads, in order of first appearance (see [`ReplayState::threads`]).
    pub(crate) threads: Vec<ThreadState>,
    /// Domains that saw an allocation or free, in order of first appearance (see
    /// [`ReplayState::domains`]); `live` is indexed alike.
    pub(crate) domains: Vec<DomainTotals>,
    /// Domains as the log defined them, by id.
    pub domain_info: FxMap<u32, DomainInfo>,
    /// The log's strings, by id.
    pub strings: FxMap<u32, String>,
    /// The log's callstacks (return addresses, innermost first), by id.
    pub stacks: Stacks,
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
    /// The `MODULE` records of the metadata stream, in its order (the symbolizer's map:
    /// no second pass over the file).
    pub modules: Vec<ModuleRecord>,
    /// Events applied, and lost by the recorder (from `Lost` records).
    pub events: u64,
    /// See `events`.
    pub lost_events: u64,
    /// What the process's allocator did before the recorder started (`BeforeStart`
    /// records, summed), if the log says.
    pub before_start: Option<CallsBeforeStart>,
    /// The latest clock reading of any thread, in ticks.
    pub end_time_ns: u64,
    /// The deepest context nesting seen past [`MAX_CONTEXT_DEPTH`], 0 if none.
    pub(crate) deepest_refused: u64,
    /// Heap in use and the ceiling, if the replay stopped at the memory ceiling.
    pub(crate) out_of_room: Option<(u64, u64)>,
    pub(crate) options: ReplayOptions,
    pub(crate) children: FxMap<(NodeId, u32, u32), NodeId>,
    pub(crate) slot_index: FxMap<(NodeId, u32, u32), u32>,
    /// Site index of (stack, domain), for the sites `heap_sites` does not hold.
    pub(crate) site_index: FxMap<(u32, u32), u32>,
    /// Site index of (stack, heap) for stack ids below [`DIRECT_IDS`] (`u32::MAX`: none yet).
    pub(crate) heap_sites: Vec<u32>,
    pub(crate) thread_index: FxMap<u32, u32>,
    /// Index in `threads` of thread ids below [`DIRECT_IDS`] (`u32::MAX`: none yet); every
    /// thread is in `thread_index` too.
    pub(crate) direct_threads: Vec<u32>,
    /// The last thread looked up: (id, index). Events come in runs of one thread.
    pub(crate) last_thread: Option<(u32, u32)>,
    /// `events` when the last thread's run began (see [`ReplayState::counted`]).
    pub(crate) events_counted_by_thread: u64,
    pub(crate) domain_index: FxMap<u32, u32>,
    /// Index in `domains` of domain ids below [`DIRECT_IDS`] (`u32::MAX`: none yet).
    pub(crate) direct_domains: Vec<u32>,
    /// The heap's index in `domains` plus one (0 until it is seen).
    pub(crate) heap_index_plus_one: u32,
    pub(crate) live: Vec<LiveAllocations>,
    /// Bytes used of the live heap allocations that reported their usage.
    pub(crate) used: FxMap<u64, u64>,
    /// Live heap allocations for which [`indexed`](super::live::indexed) holds, by address, for
    /// attaches to interior pointers (the others are found by probing back from the address).
    pub(crate) big: InteriorIndex,
    pub(crate) current_frame: Option<u64>,
    pub(crate) last_label: Option<u32>,
    /// Snapshot points placed so far, and what slots held at them (see `touch`).
    pub(crate) points: u32,
    pub(crate) points_held: Vec<PointsHeld>,
    /// With [`LabelSnapshots::Evenly`]: labels whose index is a multiple of `stride` keep a
    /// snapshot, and `spread` lists those indices, each with whether it keeps its snapshot
    /// by name as well.
    pub(crate) stride: u32,
    pub(crate) spread: Vec<(u32, bool)>,
    pub(crate) timeline: Timeline,
    pub(crate) process_memory: ProcessMemory,
    /// Driver budget samples by domain id (any id a `Budget` record names).
    pub(crate) budgets: FxMap<u32, BudgetSamples>,
    /// The last `Display` size applied.
    pub(crate) display: Option<(u32, u32)>,
    /// Set by [`ReplayState::finish`]: no more events come.
    pub(crate) finished: bool,
    /// Every node's path, made the first time a path is asked for once the replay is
    /// finished: reports ask for thousands, and each made alone walks up to the root.
    pub(crate) paths: std::sync::OnceLock<Vec<String>>,
}

/// Ids (stacks, domains) below this are looked up in plain tables, the rest in maps: the
/// recorder numbers them from 1, a foreign log might not.
const DIRECT_IDS: usize = 1 << 16;

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

impl Node {
    fn new(parent: NodeId, ty: u32, name: u32) -> Node {
        Node { parent, ty, name, entries: 0, instances: 0, first_child: ROOT, last_child: ROOT, next_sibling: ROOT }
    }
}

impl ReplayState {
    /// An empty state: the root context only.
    pub fn new(options: ReplayOptions) -> Self {
        let mut s = ReplayState { options, stride: 1, ..Default::default() };
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
            self.live[d.get()].prefetch(addr);
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

    /// Applies one record of stream `thread`, in global order (`block` holds the events its `Event` records refer to).
    // Inlined into the merge's loop (`source.rs`): as a call, the replay of the 1 M-event
    // benchmark log took 6 % more instructions on the merging thread (callgrind).
    #[inline(always)]
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
            RecordKind::Event => {
                let event = block.event(r);
                self.apply_event(ti, event, Part::Whole);
                // A RESOURCE describes the domain allocation written just before it (SPEC.md
                // §7.4) but, unsequenced, sorts with its thread's next sequenced event, after
                // other threads' events in between. Taken with its allocation, it is known
                // at any point from the allocation on (a peak, another thread's label). Its
                // own turn inserts it again, to no effect.
                // (The definitions of its strings come between them.)
                if let Event::Alloc { domain, addr, .. } = *event {
                    for next in block.events.iter().skip(r.value as usize + 1) {
                        match next {
                            Event::DefineString { .. } => continue,
                            Event::Resource { domain: d, addr: a, desc } if (*d, *a) == (domain, addr) => {
                                self.resources.insert((domain, addr), desc.clone());
                            }
                            _ => {}
                        }
                        break;
                    }
                }
            }
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
                    self.frame_snapshot = Some(self.marker(frame as u32, seq, ti, time_ns));
                }
            }
            Event::Label { seq, name } => {
                let time_ns = t.time_ns;
                self.last_label = Some(name);
                self.label(name, seq, ti, time_ns);
            }
            Event::DefineString { id, ref text } => {
                self.strings.insert(id, text.clone());
            }
            Event::DefineStack { id, ref frames } => {
                self.stacks.insert(id, frames);
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
            Event::Budget { domain, time, budget, usage } => {
                self.budgets.entry(domain).or_default().push(BudgetSample { time_ns: time, budget, usage });
            }
            Event::Display { width, height } => self.display = Some((width, height)),
            Event::BeforeStart { .. } => {
                self.before_start.get_or_insert_with(CallsBeforeStart::default).add(event);
            }
            Event::Module { base, size, load_bias, path, ref build_id } => {
                // Only the recorder's metadata stream maps modules (as `ModuleMap::read`).
                if self.threads[ti].id == memreplay_format::block::METADATA_THREAD {
                    self.modules.push(ModuleRecord { base, size, load_bias, path, build_id: build_id.clone() });
                }
            }
            Event::Unknown { .. } => {}
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
    fn slot(&mut self, node: NodeId, dom: DomIndex, ti: usize) -> u32 {
        if let Some((n, d, slot)) = self.threads[ti].last_slot {
            if n == node && d == dom {
                return slot;
            }
        }
        self.other_slot(node, dom, ti)
    }

    #[inline(never)]
    fn other_slot(&mut self, node: NodeId, dom: DomIndex, ti: usize) -> u32 {
        let thread = self.threads[ti].id;
        let domain = self.domains[dom.get()].id;
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
        let epoch = self.domains[s.dom.get()].epoch;
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
        // Small ids (stream ids are dense, from 1) by direct index: with many threads in
        // short runs this runs every few events.
        let i = match self.direct_threads.get(id as usize) {
            Some(&i) if i != u32::MAX => i,
            _ => *self.thread_index.entry(id).or_insert(next),
        };
        if i == next {
            self.threads.push(ThreadState { id, ..Default::default() });
            if (id as usize) < DIRECT_IDS {
                if self.direct_threads.len() <= id as usize {
                    self.direct_threads.resize(id as usize + 1, u32::MAX);
                }
                self.direct_threads[id as usize] = i;
            }
        }
        self.last_thread = Some((id, i));
        i as usize
    }

    /// The index of domain `id` in `domains` (and `live`), if it was seen.
    #[inline(always)]
    pub(crate) fn domain_index(&self, id: u32) -> Option<DomIndex> {
        if id == HEAP_DOMAIN && self.heap_index_plus_one != 0 {
            // The domain of nearly every event, resolved with one load.
            return Some(DomIndex(self.heap_index_plus_one - 1));
        }
        match self.direct_domains.get(id as usize) {
            Some(&u32::MAX) => None,
            Some(&i) => Some(DomIndex(i)),
            None => self.domain_index.get(&id).copied().map(DomIndex),
        }
    }

    /// The index of domain `id`, created on first sight.
    #[inline(always)]
    fn domain_index_or_new(&mut self, id: u32) -> DomIndex {
        match self.domain_index(id) {
            Some(i) => i,
            None => self.new_domain(id),
        }
    }

    #[inline(never)]
    fn new_domain(&mut self, id: u32) -> DomIndex {
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
        DomIndex(i)
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
        let old = self.live[dom.get()].insert(addr, Live { size, seq, slot, site, usage_reported: false });
        // Counted without a branch: a branch here added 15 M instructions to the merge of
        // the replay benchmark's 2 M-event log (its inlined code grew), this adds 3 M.
        self.anomalies.impossible_sizes += u64::from(addr.overflowing_add(size).1);
        if let Some(old) = old {
            self.replaced(dom, addr, old);
        }
        if domain == HEAP_DOMAIN {
            self.big.add(addr, size, &self.live[dom.get()]);
        }
        // Each table is indexed once (every index is a bounds check and an address).
        let d = &mut self.domains[dom.get()];
        let s = &mut self.slots[slot as usize];
        let st = &mut self.sites[site as usize];
        touch(s, st, slot, d.epoch, self.points, &mut self.points_held);
        for f in [&mut s.now, &mut st.now] {
            f.live_bytes = f.live_bytes.wrapping_add(size);
            f.live_count += 1;
            f.total_bytes = f.total_bytes.wrapping_add(size);
            f.total_count += 1;
        }
        self.timeline.domains[dom.get()].add(size);
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
                thread: self.threads[ti].id,
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
        match self.live[dom.get()].free(addr) {
            Freed::Live(live) => {
                let t = &self.threads[ti];
                let by = FreedBy { thread: t.id, last_alloc: t.last_alloc, stack: free_stack };
                self.release(dom, addr, live, Some(by));
            }
            Freed::Again => self.anomalies.double_frees += 1,
            Freed::Unknown => self.anomalies.untracked_frees += 1,
        }
    }

    /// The log allocated `addr` while it was live: the older allocation's figures go.
    /// Out of line: rare, and [`ReplayState::release`] inlined a second time into the
    /// replay loop made the compiler keep fewer of its values in registers.
    #[cold]
    #[inline(never)]
    fn replaced(&mut self, dom: DomIndex, addr: u64, old: Live) {
        self.anomalies.overlapping_allocs += 1;
        self.release(dom, addr, old, None);
    }

    /// Takes a no-longer-live allocation out of every figure: freed (`by` whom), or
    /// dropped because the log allocated its address again (`None`).
    #[inline(always)]
    fn release(&mut self, dom: DomIndex, addr: u64, live: Live, by: Option<FreedBy>) {
        let d = &mut self.domains[dom.get()];
        if !self.resources.is_empty() {
            self.resources.remove(&(d.id, addr));
        }
        let used = if live.usage_reported { self.used.remove(&addr) } else { None };
        let s = &mut self.slots[live.slot as usize];
        let st = &mut self.sites[live.site as usize];
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
        self.timeline.domains[dom.get()].sub(live.size);
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

    fn usage(&mut self, addr: u64, used: u64) {
        let live = self.domain_index(HEAP_DOMAIN).and_then(|d| self.live[d.get()].mark_usage_reported(addr));
        let Some(live) = live else {
            self.anomalies.usage_without_allocation += 1;
            return;
        };
        let used = used.min(live.size);
        let before = self.used.insert(addr, used);
        let (slot, size) = (live.slot, live.size);
        self.touch(slot, live.site);
        let f = &mut self.slots[slot as usize].now;
        let site = &mut self.sites[live.site as usize];
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
        let heap = &self.live[self.domain_index(HEAP_DOMAIN)?.get()];
        let node = |l: Live| self.slots[l.slot as usize].node;
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
    fn marker(&mut self, name: u32, seq: u64, ti: usize, time_ns: u64) -> Marker {
        let point = self.points;
        self.points += 1;
        let thread = self.threads[ti].id;
        Marker { name, seq, thread, time_ns, frame: self.current_frame, point: Some(point) }
    }

    /// A label: a marker, with a snapshot if [`ReplayOptions::label_snapshots`] keeps one.
    fn label(&mut self, name: u32, seq: u64, ti: usize, time_ns: u64) {
        let index = self.labels.len() as u32;
        // (kept as one of the evenly spread, kept for itself)
        let (spread, by_name) = match &self.options.label_snapshots {
            LabelSnapshots::All => (false, true),
            LabelSnapshots::Evenly { count, .. } => (*count > 0 && index % self.stride == 0, self.named(name)),
        };
        let keep = spread || by_name;
        let m = if keep {
            self.marker(name, seq, ti, time_ns)
        } else {
            // No point placed: no slot records anything for it.
            Marker { name, seq, thread: self.threads[ti].id, time_ns, frame: self.current_frame, point: None }
        };
        self.labels.push(m);
        if spread {
            self.spread.push((index, by_name));
            if let LabelSnapshots::Evenly { count, .. } = self.options.label_snapshots {
                if self.spread.len() > 2 * count {
                    self.thin_snapshots();
                }
            }
        }
    }

    /// Whether a label of this name keeps its snapshot by name (or may: its name is not yet
    /// defined). Decided when the label is replayed.
    fn named(&self, name: u32) -> bool {
        match &self.options.label_snapshots {
            LabelSnapshots::Evenly { named, .. } if !named.is_empty() => {
                self.strings.get(&name).is_none_or(|text| named.contains(text))
            }
            _ => false,
        }
    }

    /// Too many spread snapshots: doubles the stride, drops the snapshots of the labels
    /// that fall off it (unless kept by name), and every record of what a slot held that
    /// serves no remaining snapshot.
    #[cold]
    fn thin_snapshots(&mut self) {
        self.stride *= 2;
        let stride = self.stride;
        for &(i, by_name) in &self.spread {
            if i % stride != 0 && !by_name {
                self.labels[i as usize].point = None;
            }
        }
        self.spread.retain(|&(i, _)| i % stride == 0);
        let mut kept: Vec<u32> = self.labels.iter().filter_map(|m| m.point).collect();
        kept.extend(self.frame_snapshot.as_ref().and_then(|m| m.point));
        kept.sort_unstable();
        self.points_held.retain(|h| {
            let first = kept.partition_point(|&p| p < h.from);
            kept.get(first).is_some_and(|&p| p < h.to)
        });
    }

    /// The index in [`ReplayState::sites`] of (stack, domain), created on first use.
    #[inline(always)]
    fn site(&mut self, stack: u32, domain: u32, dom: DomIndex) -> u32 {
        if domain == HEAP_DOMAIN {
            if let Some(&i) = self.heap_sites.get(stack as usize).filter(|&&i| i != u32::MAX) {
                return i;
            }
        }
        self.new_site(stack, dom)
    }

    /// [`ReplayState::site`] past the table of heap sites: in the map, or created.
    #[inline(never)]
    fn new_site(&mut self, stack: u32, dom: DomIndex) -> u32 {
        let domain = self.domains[dom.get()].id;
        let direct = domain == HEAP_DOMAIN && (stack as usize) < DIRECT_IDS;
        let next = self.sites.len() as u32;
        // The top bit of a live allocation's site index is a flag (2^31 sites would be
        // hundreds of gigabytes of them).
        assert!(next < Packed::USAGE_REPORTED, "too many allocation sites");
        // A heap site in the direct table is new here (every one is put there when made):
        // only the others go into the map as well.
        let id = if direct { next } else { *self.site_index.entry((stack, domain)).or_insert(next) };
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

    /// Says that no more events come: what is derived from the whole replay may be kept.
    pub fn finish(&mut self) {
        self.count_thread_events();
        self.finished = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::FREED_REMEMBERED;

    fn live(size: u64) -> Live {
        Live { size, seq: 1, slot: 0, site: 0, usage_reported: false }
    }

    /// The lazily built and cleaned interior-pointer index finds the live big allocation
    /// that contains an address, after frees and after addresses are allocated again as
    /// small blocks, and stays bounded by the live ones.
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
                    index.add(addr(i), 64, &heap);
                } else {
                    heap.insert(addr(i), live(8192));
                    index.add(addr(i), 8192, &heap);
                }
            }
            // Nothing is kept before the first lookup, which builds the index from the
            // live allocations (round 0); later rounds find what was added since.
            assert_eq!(index.sorted.len() + index.pending.len() == 0, round == 0);
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
    fn a_live_allocation_is_packed_in_16_bytes() {
        assert_eq!(std::mem::size_of::<Packed>(), 16);
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
