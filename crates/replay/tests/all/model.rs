//! The replay engine against a reference model.
//!
//! A random *valid* multi-threaded program is simulated with one global sequence counter:
//! threads push and pop (instance) contexts, attach to interior pointers of live heap
//! allocations (made on any thread), allocate from a small address pool (so addresses are
//! reused), free across threads, realloc in place and moving (other threads' events may
//! fall between a realloc's two halves), report container usage, start frames, place
//! labels, allocate from a pool domain defined inside the heap, and now and then free
//! addresses never allocated (untracked) or already freed (double frees).
//!
//! Each thread's events are cut into blocks that are written in a scrambled file order
//! (a thread's own blocks stay in order) and the engine replays the file. The model
//! replays the simulated operations in their true global order, the simple way: paths of
//! (type, name) instead of a tree, the live set as a plain list that every figure is
//! summed from when it is needed, full snapshots at every peak and label. Both must agree
//! on everything: the tree, every (context, domain, thread) slot's figures and what it
//! held at its domain's peak, domain totals and peaks, allocation sites, labels, frames,
//! live allocations and containers, anomalies, event counts.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use memreplay_fixtures as common;
use memreplay_format::*;
use memreplay_replay::{replay, LabelSnapshots, ReplayOptions};
use memreplay_replay::{Anomalies, Figures, Held, Peak, ReplayState, ROOT};
use proptest::prelude::*;

/// The pool domain (a sub-allocator whose blocks live in the heap).
const POOL: DomainId = 1;
/// Never allocated: frees of these are untracked, attaches to them unresolved.
const UNTRACKED: u64 = 0x90_0000;
/// Maximum nesting of contexts and attaches per thread.
const MAX_DEPTH: usize = 4;

/// A context path from the root: (type, name) per level.
type Path = Vec<(u32, u32)>;
/// (context path, domain, allocating thread): the engine's slot, by value.
type SlotKey = (Path, DomainId, u32);

// ---------------------------------------------------------------------------------------
// The program: operations in their true global order.

#[derive(Debug, Clone)]
enum Op {
    Push {
        ty: u32,
        name: u32,
        instance: bool,
    },
    Pop,
    AttachPush {
        addr: u64,
    },
    AttachPop,
    Alloc {
        seq: u64,
        domain: DomainId,
        addr: u64,
        size: u64,
        stack: u32,
    },
    Free {
        domain: DomainId,
        addr: u64,
        stack: u32,
    },
    /// A realloc's free half (at its `free_seq`).
    ReallocFree {
        addr: u64,
    },
    /// A realloc's allocation half (at its `seq`).
    ReallocAlloc {
        seq: u64,
        addr: u64,
        size: u64,
        stack: u32,
    },
    Usage {
        addr: u64,
        used: u64,
    },
    Label {
        seq: u64,
        name: u32,
    },
    Frame {
        seq: u64,
        frame: u64,
    },
    Time {
        ns: u64,
    },
}

/// One random step: (thread, kind, a, b, flush the thread's block, write a block).
type Step = (u8, u8, u32, u32, bool, u8);

/// A realloc whose free half happened and whose allocation half has not.
struct Pending {
    free_seq: u64,
    old: u64,
    in_place: bool,
    stack: u32,
}

#[derive(Default)]
struct SimThread {
    /// Open scopes, innermost last: `true` for an attach, `false` for a context.
    scopes: Vec<bool>,
    pending: Option<Pending>,
    open: Vec<Event>,
    flushed: VecDeque<Vec<Event>>,
    events: u64,
}

/// Simulates the program, recording its operations and each thread's events.
struct Sim {
    seq: u64,
    clock: u64,
    frame: u64,
    /// Heap addresses that allocations may use, with the largest size that fits there.
    heap_addrs: Vec<u64>,
    pool_addrs: Vec<u64>,
    max_size: HashMap<u64, u64>,
    /// Fresh sparse addresses for moving reallocs when the pool is used up.
    overflow: u64,
    live_heap: BTreeMap<u64, u64>,
    live_pool: BTreeMap<u64, u64>,
    /// Freed and not allocated since (candidates for double frees).
    freed_heap: BTreeSet<u64>,
    freed_pool: BTreeSet<u64>,
    /// Old addresses of in-place reallocs in flight.
    reserved: BTreeSet<u64>,
    threads: Vec<SimThread>,
    ops: Vec<(u32, Op)>,
}

/// Stream id of simulated thread `i`.
fn tid(i: usize) -> u32 {
    i as u32 + 1
}

impl Sim {
    fn new(threads: usize, heap: usize, pool: usize) -> Sim {
        let mut max_size = HashMap::new();
        // Even slots are sparse (room for big blocks), odd ones packed 48 bytes apart
        // (an allocation may end exactly where the next one starts); every fourth slot
        // starts off 8-byte alignment (an allocator handing out align-1 blocks).
        let heap_addrs: Vec<u64> = (0..heap as u64)
            .map(|i| {
                let (addr, max) = match i % 4 {
                    0 | 2 => (0x10_0000 + i * 0x1000, 3000),
                    1 => (0x20_0000 + i * 0x18, 48),
                    _ => (0x20_0000 + i * 0x18 + 3, 45),
                };
                max_size.insert(addr, max);
                addr
            })
            .collect();
        // The pool's addresses are heap addresses too: domains are separate address spaces.
        let pool_addrs = heap_addrs.iter().take(pool).copied().collect();
        Sim {
            seq: 0,
            clock: 0,
            frame: 0,
            heap_addrs,
            pool_addrs,
            max_size,
            overflow: 0x50_0000,
            live_heap: BTreeMap::new(),
            live_pool: BTreeMap::new(),
            freed_heap: BTreeSet::new(),
            freed_pool: BTreeSet::new(),
            reserved: BTreeSet::new(),
            threads: (0..threads).map(|_| SimThread::default()).collect(),
            ops: Vec::new(),
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn emit(&mut self, t: usize, op: Option<Op>, event: Option<Event>) {
        if let Some(op) = op {
            self.ops.push((tid(t), op));
        }
        if let Some(e) = event {
            self.threads[t].open.push(e);
            self.threads[t].events += 1;
        }
    }

    fn free_heap_addrs(&self) -> Vec<u64> {
        self.heap_addrs
            .iter()
            .copied()
            .filter(|a| !self.live_heap.contains_key(a) && !self.reserved.contains(a))
            .collect()
    }

    fn size_for(addr_max: u64, b: u32) -> u64 {
        let b = u64::from(b);
        if b % 3 == 0 {
            1 + (b / 3) % addr_max
        } else {
            1 + (b / 3) % addr_max.min(255)
        }
    }

    fn step(&mut self, t: usize, kind: u8, a: u32, b: u32) {
        if self.threads[t].pending.is_some() {
            return self.complete_realloc(t, a);
        }
        match kind % 20 {
            0..=3 => self.heap_alloc(t, a, b),
            4 | 5 => self.heap_free(t, a, b),
            6 | 7 => self.realloc_start(t, a, b),
            8 | 9 => self.push_context(t, a, b),
            10 => self.pop(t, a, b),
            11 => self.attach(t, a, b),
            12 => self.usage(t, a, b),
            13 => self.pool_alloc(t, a, b),
            14 => self.pool_free(t, a, b),
            15 => {
                let (seq, name) = (self.next_seq(), 1 + a % LABEL_NAMES);
                self.emit(t, Some(Op::Label { seq, name }), Some(Event::Label { seq, name }));
            }
            16 => {
                self.frame += 1;
                let (seq, frame) = (self.next_seq(), self.frame);
                self.emit(t, Some(Op::Frame { seq, frame }), Some(Event::FrameStart { seq, frame }));
            }
            17 => {
                self.clock += 1 + u64::from(a % 1000);
                let ns = self.clock;
                self.emit(t, Some(Op::Time { ns }), Some(Event::Time { ns }));
            }
            18 => self.untracked_free(t, a, b),
            _ => self.double_free(t, a, b),
        }
    }

    fn heap_alloc(&mut self, t: usize, a: u32, b: u32) {
        let free = self.free_heap_addrs();
        if free.is_empty() {
            // Every address is live or held by a realloc in flight: free one instead, if
            // any is live (with all of them held by reallocs, this step does nothing).
            if !self.live_heap.is_empty() {
                self.heap_free(t, a, b);
            }
            return;
        }
        let addr = free[a as usize % free.len()];
        let size = Self::size_for(self.max_size[&addr], b);
        let (seq, stack) = (self.next_seq(), (a >> 16) % 4);
        self.live_heap.insert(addr, size);
        self.freed_heap.remove(&addr);
        self.emit(
            t,
            Some(Op::Alloc { seq, domain: HEAP_DOMAIN, addr, size, stack }),
            Some(Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size, align_log2: 4, stack }),
        );
    }

    fn heap_free(&mut self, t: usize, a: u32, b: u32) {
        if self.live_heap.is_empty() {
            return self.heap_alloc(t, a, b);
        }
        let addr = *self.live_heap.keys().nth(a as usize % self.live_heap.len()).unwrap();
        let (seq, stack) = (self.next_seq(), 4 + b % 3);
        self.live_heap.remove(&addr);
        self.freed_heap.insert(addr);
        self.emit(
            t,
            Some(Op::Free { domain: HEAP_DOMAIN, addr, stack }),
            Some(Event::Free { seq, domain: HEAP_DOMAIN, addr, stack }),
        );
    }

    fn realloc_start(&mut self, t: usize, a: u32, b: u32) {
        let untracked = a % 16 == 15;
        if self.live_heap.is_empty() && !untracked {
            return self.heap_alloc(t, a, b);
        }
        let old = if untracked {
            UNTRACKED + u64::from(b % 64) * 16
        } else {
            *self.live_heap.keys().nth(a as usize % self.live_heap.len()).unwrap()
        };
        let in_place = !untracked && (a >> 8) % 2 == 0;
        let free_seq = self.next_seq();
        if !untracked {
            self.live_heap.remove(&old);
            if in_place {
                self.reserved.insert(old);
            } else {
                self.freed_heap.insert(old);
            }
        }
        self.emit(t, Some(Op::ReallocFree { addr: old }), None);
        self.threads[t].pending = Some(Pending { free_seq, old, in_place, stack: (a >> 16) % 4 });
        // Often no other thread gets between the two halves.
        if b % 3 == 0 {
            self.complete_realloc(t, b >> 4);
        }
    }

    fn complete_realloc(&mut self, t: usize, r: u32) {
        let p = self.threads[t].pending.take().expect("a realloc in flight");
        let new = if p.in_place {
            self.reserved.remove(&p.old);
            p.old
        } else {
            let free = self.free_heap_addrs();
            if free.is_empty() {
                self.overflow += 0x1000;
                self.max_size.insert(self.overflow, 4000);
                self.overflow
            } else {
                free[r as usize % free.len()]
            }
        };
        let new_size = Self::size_for(self.max_size[&new], r >> 6);
        let seq = self.next_seq();
        self.live_heap.insert(new, new_size);
        self.freed_heap.remove(&new);
        self.emit(
            t,
            Some(Op::ReallocAlloc { seq, addr: new, size: new_size, stack: p.stack }),
            Some(Event::Realloc {
                free_seq: p.free_seq,
                seq,
                old_addr: p.old,
                new_addr: new,
                new_size,
                align_log2: 4,
                stack: p.stack,
            }),
        );
    }

    fn push_context(&mut self, t: usize, a: u32, b: u32) {
        if self.threads[t].scopes.len() >= MAX_DEPTH {
            return self.pop(t, a, b);
        }
        let (ty, name, instance) = (1 + a % 3, (a >> 8) % 3, b % 2 == 0);
        self.threads[t].scopes.push(false);
        let flags = if instance { context_flags::INSTANCE } else { 0 };
        self.emit(t, Some(Op::Push { ty, name, instance }), Some(Event::ContextPush { ty, name, flags }));
    }

    fn pop(&mut self, t: usize, a: u32, b: u32) {
        match self.threads[t].scopes.pop() {
            Some(true) => self.emit(t, Some(Op::AttachPop), Some(Event::AttachPop)),
            Some(false) => self.emit(t, Some(Op::Pop), Some(Event::ContextPop)),
            None => self.push_context(t, a, b),
        }
    }

    fn attach(&mut self, t: usize, a: u32, b: u32) {
        if self.threads[t].scopes.len() >= MAX_DEPTH {
            return self.pop(t, a, b);
        }
        let nth = |m: &BTreeMap<u64, u64>| m.iter().nth(a as usize % m.len().max(1)).map(|(&k, &v)| (k, v));
        let addr = match (b % 8, nth(&self.live_heap), nth(&self.live_pool)) {
            // A live pool block: not a heap allocation (unless the heap has one there too).
            (1, _, Some((pool_addr, size))) => pool_addr + u64::from(b >> 8) % size,
            // One past the end: not inside (unless the next allocation starts there).
            (2, Some((base, size)), _) => base + size,
            // Any byte of a live heap allocation.
            (3.., Some((base, size)), _) => base + u64::from(b >> 8) % size,
            _ => UNTRACKED + u64::from(a % 4096),
        };
        let seq = self.next_seq();
        self.threads[t].scopes.push(true);
        self.emit(t, Some(Op::AttachPush { addr }), Some(Event::AttachPush { seq, addr }));
    }

    fn usage(&mut self, t: usize, a: u32, b: u32) {
        if self.live_heap.is_empty() {
            return self.heap_alloc(t, a, b);
        }
        let (addr, used) = if b % 16 == 0 {
            // Not live (the anomaly), e.g. a pool address or a freed one.
            let addr = self.heap_addrs[a as usize % self.heap_addrs.len()];
            if self.live_heap.contains_key(&addr) {
                (UNTRACKED, 1)
            } else {
                (addr, 1)
            }
        } else {
            let (&addr, &size) = self.live_heap.iter().nth(a as usize % self.live_heap.len()).unwrap();
            // Sometimes more than the capacity: the engine clamps.
            (addr, u64::from(b >> 4) % (size + size / 4 + 1))
        };
        let seq = self.next_seq();
        self.emit(t, Some(Op::Usage { addr, used }), Some(Event::Usage { seq, addr, used }));
    }

    fn pool_alloc(&mut self, t: usize, a: u32, b: u32) {
        let free: Vec<u64> = self.pool_addrs.iter().copied().filter(|a| !self.live_pool.contains_key(a)).collect();
        if free.is_empty() {
            return self.pool_free(t, a, b);
        }
        let addr = free[a as usize % free.len()];
        let size = Self::size_for(self.max_size[&addr], b);
        let (seq, stack) = (self.next_seq(), (a >> 16) % 4);
        self.live_pool.insert(addr, size);
        self.freed_pool.remove(&addr);
        self.emit(
            t,
            Some(Op::Alloc { seq, domain: POOL, addr, size, stack }),
            Some(Event::Alloc { seq, domain: POOL, addr, size, align_log2: 3, stack }),
        );
    }

    fn pool_free(&mut self, t: usize, a: u32, b: u32) {
        if self.live_pool.is_empty() {
            return self.pool_alloc(t, a, b);
        }
        let addr = *self.live_pool.keys().nth(a as usize % self.live_pool.len()).unwrap();
        let (seq, stack) = (self.next_seq(), 4 + b % 3);
        self.live_pool.remove(&addr);
        self.freed_pool.insert(addr);
        self.emit(
            t,
            Some(Op::Free { domain: POOL, addr, stack }),
            Some(Event::Free { seq, domain: POOL, addr, stack }),
        );
    }

    fn free_event(&mut self, t: usize, domain: DomainId, addr: u64, stack: u32) {
        let seq = self.next_seq();
        self.emit(t, Some(Op::Free { domain, addr, stack }), Some(Event::Free { seq, domain, addr, stack }));
    }

    fn untracked_free(&mut self, t: usize, a: u32, b: u32) {
        let domain = if b % 2 == 0 { HEAP_DOMAIN } else { POOL };
        self.free_event(t, domain, UNTRACKED + u64::from(a % 64) * 16, 0);
    }

    fn double_free(&mut self, t: usize, a: u32, b: u32) {
        let mut candidates: Vec<(DomainId, u64)> = self
            .freed_heap
            .iter()
            .filter(|a| !self.live_heap.contains_key(a) && !self.reserved.contains(a))
            .map(|&a| (HEAP_DOMAIN, a))
            .collect();
        candidates.extend(self.freed_pool.iter().filter(|a| !self.live_pool.contains_key(a)).map(|&a| (POOL, a)));
        if candidates.is_empty() {
            return self.untracked_free(t, a, b);
        }
        let (domain, addr) = candidates[a as usize % candidates.len()];
        self.free_event(t, domain, addr, 7);
    }

    fn flush(&mut self, t: usize) {
        let th = &mut self.threads[t];
        if !th.open.is_empty() {
            let block = std::mem::take(&mut th.open);
            th.flushed.push_back(block);
        }
    }
}

fn header() -> FileHeader {
    FileHeader { recorder: "model test".into(), ..common::header() }
}

/// A simulated program: its operations in global order and its log.
struct Program {
    ops: Vec<(u32, Op)>,
    log: Vec<u8>,
    /// Events per thread.
    events: BTreeMap<u32, u64>,
}

/// Labels are named by string ids 1..=LABEL_NAMES, defined first.
const LABEL_NAMES: u32 = 4;

fn label_name(id: u32) -> String {
    format!("label {id}")
}

fn simulate(threads: usize, heap: usize, pool: usize, steps: &[Step]) -> Program {
    let mut sim = Sim::new(threads, heap, pool);
    let mut log = Vec::new();
    let mut w = LogWriter::new(&mut log, &header()).unwrap();
    let write = |w: &mut LogWriter<&mut Vec<u8>>, t: usize, evs: Vec<Event>| {
        let mut enc = EventEncoder::new();
        evs.iter().for_each(|e| enc.push(e));
        w.write_block(tid(t), &mut enc).unwrap();
    };
    for t in 0..threads {
        let os_tid = 1000 + t as u64;
        sim.emit(t, None, Some(Event::ThreadInfo { os_tid, name: 0 }));
    }
    for id in 1..=LABEL_NAMES {
        sim.emit(0, None, Some(Event::DefineString { id, text: label_name(id) }));
    }
    sim.emit(
        0,
        None,
        Some(Event::DefineDomain { id: POOL, name: 0, kind: DomainKind::Pool, capacity: 1 << 20, parent: Some(0) }),
    );
    for &(thread, kind, a, b, flush, write_sel) in steps {
        let t = thread as usize % threads;
        sim.step(t, kind, a, b);
        if flush {
            sim.flush(t);
        }
        // Write some thread's oldest flushed block now; the rest wait (scrambling the
        // file order while keeping each thread's blocks in order).
        if write_sel < 96 {
            let t = write_sel as usize % threads;
            if let Some(block) = sim.threads[t].flushed.pop_front() {
                write(&mut w, t, block);
            }
        }
    }
    for t in 0..threads {
        if sim.threads[t].pending.is_some() {
            sim.complete_realloc(t, t as u32);
        }
        sim.flush(t);
    }
    // The rest, round robin from the last thread.
    loop {
        let mut any = false;
        for t in (0..threads).rev() {
            if let Some(block) = sim.threads[t].flushed.pop_front() {
                write(&mut w, t, block);
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    w.finish(0, 0).unwrap();
    let events = sim.threads.iter().enumerate().map(|(t, th)| (tid(t), th.events)).collect();
    Program { ops: sim.ops, log, events }
}

// ---------------------------------------------------------------------------------------
// The reference model.

#[derive(Debug, Clone)]
struct LiveAlloc {
    key: SlotKey,
    size: u64,
    stack: u32,
    seq: u64,
    /// The allocating thread, and its number of allocations including this one.
    thread: u32,
    alloc_no: u64,
    used: Option<u64>,
}

/// Counters that only grow: everything allocated, and temporaries.
#[derive(Debug, Clone, Copy, Default)]
struct Cumulative {
    total_bytes: u64,
    total_count: u64,
    temp_bytes: u64,
    temp_count: u64,
}

/// A site's figures and where its blocks were freed from (free stack → count, bytes).
type SiteM = (Figures, BTreeMap<u32, (u64, u64)>);

/// A label or frame snapshot: name, seq, time, frame, what every holding slot held.
type MarkerM = (u32, u64, u64, Option<u64>, BTreeMap<SlotKey, Held>);

#[derive(Debug, Clone, Default)]
struct PeakM {
    peak: Peak,
    held: BTreeMap<SlotKey, Held>,
    /// What each allocation site of the domain held.
    site_held: BTreeMap<(u32, DomainId), Held>,
}

#[derive(Default)]
struct Model {
    contexts: HashMap<u32, Vec<Path>>,
    attaches: HashMap<u32, Vec<Option<Path>>>,
    /// Path → (entries, instances).
    nodes: BTreeMap<Path, (u64, u64)>,
    /// (domain, address) → allocation, for the allocations live now.
    live: Vec<((DomainId, u64), LiveAlloc)>,
    /// Freed and not allocated again since.
    freed: BTreeSet<(DomainId, u64)>,
    slots: BTreeMap<SlotKey, Cumulative>,
    sites: BTreeMap<(u32, DomainId), Cumulative>,
    freed_from: BTreeMap<(u32, DomainId), BTreeMap<u32, (u64, u64)>>,
    domain_totals: BTreeMap<DomainId, (u64, u64)>,
    peaks: BTreeMap<DomainId, PeakM>,
    thread_allocs: HashMap<u32, u64>,
    times: HashMap<u32, u64>,
    /// Clock readings not yet in the merged order: an unsequenced `Time` comes out just
    /// before its thread's next sequenced event (SPEC.md §7.9), so only then does it move
    /// the clock (the latest reading of any thread) that peaks are timed by.
    pending_times: HashMap<u32, u64>,
    clock: u64,
    frame: Option<u64>,
    last_label: Option<u32>,
    labels: Vec<MarkerM>,
    frames: Vec<(u64, u64, u64)>,
    snapshot_frame: Option<u64>,
    frame_snapshot: Option<MarkerM>,
    anomalies: Anomalies,
}

impl Model {
    fn run(ops: &[(u32, Op)], snapshot_frame: Option<u64>) -> Model {
        let mut m = Model { snapshot_frame, ..Model::default() };
        for (thread, op) in ops {
            m.apply(*thread, op);
        }
        m
    }

    fn current_path(&self, thread: u32) -> Path {
        self.contexts.get(&thread).and_then(|s| s.last().cloned()).unwrap_or_default()
    }

    fn time(&self, thread: u32) -> u64 {
        self.times.get(&thread).copied().unwrap_or(0)
    }

    fn find_live(&self, domain: DomainId, addr: u64) -> Option<usize> {
        self.live.iter().position(|(k, _)| *k == (domain, addr))
    }

    fn apply(&mut self, thread: u32, op: &Op) {
        let sequenced = !matches!(op, Op::Push { .. } | Op::Pop | Op::AttachPop | Op::Time { .. });
        if sequenced {
            if let Some(t) = self.pending_times.remove(&thread) {
                self.clock = self.clock.max(t);
            }
        }
        match *op {
            Op::Push { ty, name, instance } => {
                let mut path = self.current_path(thread);
                path.push((ty, name));
                let n = self.nodes.entry(path.clone()).or_default();
                n.0 += 1;
                n.1 += u64::from(instance);
                self.contexts.entry(thread).or_default().push(path);
            }
            Op::Pop => {
                self.contexts.get_mut(&thread).unwrap().pop().unwrap();
            }
            Op::AttachPush { addr } => {
                // The heap allocation containing `addr`, if any, by a plain scan.
                let owner = self
                    .live
                    .iter()
                    .find(|((d, base), l)| *d == HEAP_DOMAIN && *base <= addr && addr < base + l.size)
                    .map(|(_, l)| l.key.0.clone());
                if owner.is_none() {
                    self.anomalies.unresolved_attaches += 1;
                }
                self.attaches.entry(thread).or_default().push(owner);
            }
            Op::AttachPop => {
                self.attaches.get_mut(&thread).unwrap().pop().unwrap();
            }
            Op::Alloc { seq, domain, addr, size, stack } => self.alloc(thread, seq, domain, addr, size, stack),
            Op::ReallocAlloc { seq, addr, size, stack } => self.alloc(thread, seq, HEAP_DOMAIN, addr, size, stack),
            Op::Free { domain, addr, stack } => self.free(thread, domain, addr, stack),
            Op::ReallocFree { addr } => self.free(thread, HEAP_DOMAIN, addr, 0),
            Op::Usage { addr, used } => match self.find_live(HEAP_DOMAIN, addr) {
                Some(i) => {
                    let l = &mut self.live[i].1;
                    l.used = Some(used.min(l.size));
                }
                None => self.anomalies.usage_without_allocation += 1,
            },
            Op::Label { seq, name } => {
                self.last_label = Some(name);
                let m = (name, seq, self.time(thread), self.frame, self.held(None));
                self.labels.push(m);
            }
            Op::Frame { seq, frame } => {
                self.frame = Some(frame);
                self.frames.push((frame, seq, self.time(thread)));
                if self.snapshot_frame == Some(frame) {
                    self.frame_snapshot = Some((frame as u32, seq, self.time(thread), self.frame, self.held(None)));
                }
            }
            Op::Time { ns } => {
                self.times.insert(thread, ns);
                self.pending_times.insert(thread, ns);
            }
        }
    }

    fn alloc(&mut self, thread: u32, seq: u64, domain: DomainId, addr: u64, size: u64, stack: u32) {
        assert!(self.find_live(domain, addr).is_none(), "the simulation never overlaps allocations");
        // The innermost attach decides if it resolved; otherwise the innermost context.
        let path = match self.attaches.get(&thread).and_then(|a| a.last()) {
            Some(Some(owner)) => owner.clone(),
            _ => self.current_path(thread),
        };
        let n = self.thread_allocs.entry(thread).or_default();
        *n += 1;
        let key = (path, domain, thread);
        let l = LiveAlloc { key: key.clone(), size, stack, seq, thread, alloc_no: *n, used: None };
        self.live.push(((domain, addr), l));
        self.freed.remove(&(domain, addr));
        for c in [self.slots.entry(key).or_default(), self.sites.entry((stack, domain)).or_default()] {
            c.total_bytes += size;
            c.total_count += 1;
        }
        let d = self.domain_totals.entry(domain).or_default();
        d.0 += size;
        d.1 += 1;

        // A new peak: the first moment the domain's live bytes exceed every earlier figure.
        let live: Vec<&LiveAlloc> = self.live.iter().filter(|((d, _), _)| *d == domain).map(|(_, l)| l).collect();
        let bytes: u64 = live.iter().map(|l| l.size).sum();
        let peak = self.peaks.entry(domain).or_default();
        if bytes > peak.peak.bytes {
            peak.peak = Peak {
                bytes,
                count: live.len() as u64,
                seq,
                thread,
                // The clock: the latest time any thread has recorded so far.
                time_ns: self.clock,
                frame: self.frame,
                after_label: self.last_label,
            };
            let held = self.held(Some(domain));
            let site_held = self.site_held(Some(domain));
            let p = self.peaks.get_mut(&domain).unwrap();
            p.held = held;
            p.site_held = site_held;
        }
    }

    fn free(&mut self, thread: u32, domain: DomainId, addr: u64, stack: u32) {
        match self.find_live(domain, addr) {
            Some(i) => {
                let (_, l) = self.live.remove(i);
                // Heaptrack's temporary: freed by its own thread before that thread
                // allocated anything else.
                if l.thread == thread && self.thread_allocs[&thread] == l.alloc_no {
                    for c in [self.slots.get_mut(&l.key).unwrap(), self.sites.get_mut(&(l.stack, domain)).unwrap()] {
                        c.temp_bytes += l.size;
                        c.temp_count += 1;
                    }
                }
                let f = self.freed_from.entry((l.stack, domain)).or_default().entry(stack).or_default();
                f.0 += 1;
                f.1 += l.size;
            }
            None if self.freed.contains(&(domain, addr)) => self.anomalies.double_frees += 1,
            None => self.anomalies.untracked_frees += 1,
        }
        // Freed, whether it was known or not: a second free is a double free.
        self.freed.insert((domain, addr));
    }

    /// What every allocation site (of `domain`, or of all) holds now.
    fn site_held(&self, domain: Option<DomainId>) -> BTreeMap<(u32, DomainId), Held> {
        let mut out: BTreeMap<(u32, DomainId), Held> = BTreeMap::new();
        for ((d, _), l) in &self.live {
            if domain.is_some_and(|x| x != *d) {
                continue;
            }
            let h = out.entry((l.stack, *d)).or_default();
            h.bytes += l.size;
            h.count += 1;
            if let Some(u) = l.used {
                h.used_bytes += u;
                h.usage_capacity += l.size;
            }
        }
        out
    }

    /// What every slot (of `domain`, or of all) holds now, summed from the live set.
    fn held(&self, domain: Option<DomainId>) -> BTreeMap<SlotKey, Held> {
        let mut out: BTreeMap<SlotKey, Held> = BTreeMap::new();
        for ((d, _), l) in &self.live {
            if domain.is_some_and(|x| x != *d) {
                continue;
            }
            let h = out.entry(l.key.clone()).or_default();
            h.bytes += l.size;
            h.count += 1;
            if let Some(u) = l.used {
                h.used_bytes += u;
                h.usage_capacity += l.size;
            }
        }
        out
    }

    /// Figures of `c` with the live part of `held`.
    fn figures(c: &Cumulative, held: Option<&Held>) -> Figures {
        let h = held.copied().unwrap_or_default();
        Figures {
            live_bytes: h.bytes,
            live_count: h.count,
            total_bytes: c.total_bytes,
            total_count: c.total_count,
            temp_bytes: c.temp_bytes,
            temp_count: c.temp_count,
            used_bytes: h.used_bytes,
            usage_capacity: h.usage_capacity,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Comparison.

/// Each engine node's path, by ids (checking that no two nodes share one).
fn node_paths(s: &ReplayState) -> Vec<Path> {
    let mut paths: Vec<Path> = Vec::with_capacity(s.nodes.len());
    for (i, n) in s.nodes.iter().enumerate() {
        if i == ROOT as usize {
            paths.push(Vec::new());
            continue;
        }
        assert!((n.parent as usize) < i, "a node's parent is created before it");
        let mut p = paths[n.parent as usize].clone();
        p.push((n.ty, n.name));
        paths.push(p);
    }
    let distinct: BTreeSet<&Path> = paths.iter().collect();
    assert_eq!(distinct.len(), paths.len(), "two nodes with the same path");
    for i in 0..s.nodes.len() as u32 {
        // In creation order, which is id order.
        let children: Vec<u32> = s.children(i).collect();
        let expected: Vec<u32> = (1..s.nodes.len() as u32).filter(|&c| s.nodes[c as usize].parent == i).collect();
        assert_eq!(children, expected, "children of node {i}");
    }
    paths
}

fn check(p: &Program, options: &ReplayOptions, s: &ReplayState) -> Result<(), TestCaseError> {
    let snapshot_frame = options.snapshot_frame;
    let m = Model::run(&p.ops, snapshot_frame);
    let paths = node_paths(s);
    let key = |slot: u32| {
        let sl = &s.slots[slot as usize];
        (paths[sl.node as usize].clone(), sl.domain, sl.thread)
    };
    let held_map = |held: &[(u32, Held)]| -> BTreeMap<SlotKey, Held> {
        let map: BTreeMap<SlotKey, Held> = held.iter().map(|&(slot, h)| (key(slot), h)).collect();
        assert_eq!(map.len(), held.len(), "a marker lists a slot twice");
        map
    };

    // The tree.
    let nodes: BTreeMap<Path, (u64, u64)> =
        s.nodes.iter().enumerate().skip(1).map(|(i, n)| (paths[i].clone(), (n.entries, n.instances))).collect();
    prop_assert_eq!(&nodes, &m.nodes, "context tree (entries, instances)");
    prop_assert_eq!(s.nodes[ROOT as usize].entries, 0);

    // Slots: every figure now, and at the peak.
    let mut slots: BTreeMap<SlotKey, Figures> = BTreeMap::new();
    let mut at_peak: BTreeMap<SlotKey, Held> = BTreeMap::new();
    for (i, sl) in s.slots.iter().enumerate() {
        let k = key(i as u32);
        at_peak.insert(k.clone(), s.held_at_peak(i as u32));
        prop_assert!(slots.insert(k, sl.now).is_none(), "two slots for one (node, domain, thread)");
    }
    let held_now = m.held(None);
    let expected: BTreeMap<SlotKey, Figures> =
        m.slots.iter().map(|(k, c)| (k.clone(), Model::figures(c, held_now.get(k)))).collect();
    prop_assert_eq!(&slots, &expected, "slot figures");
    let expected_at_peak: BTreeMap<SlotKey, Held> = m
        .slots
        .keys()
        .map(|k| (k.clone(), m.peaks.get(&k.1).and_then(|p| p.held.get(k)).copied().unwrap_or_default()))
        .collect();
    prop_assert_eq!(&at_peak, &expected_at_peak, "held at the peak");

    // Domains.
    let domains: BTreeMap<DomainId, (u64, u64, u64, u64, Peak)> = s
        .domains()
        .map(|t| (t.id, (t.live_bytes, t.live_count, t.total_bytes, t.total_count, t.peak.clone())))
        .collect();
    let expected: BTreeMap<DomainId, (u64, u64, u64, u64, Peak)> = m
        .domain_totals
        .iter()
        .map(|(&d, &(total_bytes, total_count))| {
            let live: Vec<u64> = m.live.iter().filter(|((x, _), _)| *x == d).map(|(_, l)| l.size).collect();
            let peak = m.peaks[&d].peak.clone();
            (d, (live.iter().sum(), live.len() as u64, total_bytes, total_count, peak))
        })
        .collect();
    prop_assert_eq!(&domains, &expected, "domain totals and peaks");

    // The timeline: each domain's series ends at its live bytes and its highest bucket
    // is its peak; the top-level context series of a domain add up to it.
    let tl = s.timeline();
    for d in s.domains() {
        let series = tl.domain(d.id).expect("a series per domain");
        prop_assert_eq!(series.now(), d.live_bytes, "timeline now, domain {}", d.id);
        let high = series.buckets().map(|b| b.high).max().unwrap_or(0);
        prop_assert_eq!(high, d.peak.bytes, "timeline peak, domain {}", d.id);
        let by_context: u64 = tl.contexts().filter(|(k, _)| k.domain == d.id).map(|(_, s)| s.now()).sum();
        prop_assert_eq!(by_context, d.live_bytes, "context series sum, domain {}", d.id);
    }

    // Allocation sites.
    let sites: BTreeMap<(u32, DomainId), SiteM> =
        s.sites.iter().map(|site| ((site.stack, site.domain), (site.now, site.frees_by_stack().collect()))).collect();
    let site_held = m.site_held(None);
    let expected: BTreeMap<(u32, DomainId), SiteM> = m
        .sites
        .iter()
        .map(|(k, c)| (*k, (Model::figures(c, site_held.get(k)), m.freed_from.get(k).cloned().unwrap_or_default())))
        .collect();
    prop_assert_eq!(&sites, &expected, "allocation sites");
    let sites_at_peak: BTreeMap<(u32, DomainId), Held> =
        s.sites.iter().enumerate().map(|(i, site)| ((site.stack, site.domain), s.site_held_at_peak(i))).collect();
    let expected: BTreeMap<(u32, DomainId), Held> = m
        .sites
        .keys()
        .map(|k| (*k, m.peaks.get(&k.1).and_then(|p| p.site_held.get(k)).copied().unwrap_or_default()))
        .collect();
    prop_assert_eq!(&sites_at_peak, &expected, "allocation sites at the peak");

    // Live allocations and containers.
    let live: BTreeSet<(DomainId, u64, u64, SlotKey, u32, u64)> =
        s.live_allocations().map(|(d, addr, size, slot, stack, seq)| (d, addr, size, key(slot), stack, seq)).collect();
    let expected: BTreeSet<(DomainId, u64, u64, SlotKey, u32, u64)> =
        m.live.iter().map(|&((d, addr), ref l)| (d, addr, l.size, l.key.clone(), l.stack, l.seq)).collect();
    prop_assert_eq!(live, expected, "live allocations");
    let containers: BTreeSet<(u64, u64, u64, SlotKey, u32)> =
        s.live_containers().map(|(addr, cap, used, slot, stack)| (addr, cap, used, key(slot), stack)).collect();
    let expected: BTreeSet<(u64, u64, u64, SlotKey, u32)> = m
        .live
        .iter()
        .filter(|((d, _), _)| *d == HEAP_DOMAIN)
        .filter_map(|((_, addr), l)| l.used.map(|u| (*addr, l.size, u, l.key.clone(), l.stack)))
        .collect();
    prop_assert_eq!(containers, expected, "live containers");

    // Labels, frames, the frame snapshot.
    // Every snapshot kept equals the model's; the labels without one are those the option
    // leaves out: past 2 × count, all but every stride-th (the stride the smallest power of
    // two that leaves at most 2 × count), unless named.
    let kept: Vec<usize> = (0..s.labels.len()).filter(|&i| s.labels[i].has_snapshot()).collect();
    let expected_kept: Vec<usize> = match &options.label_snapshots {
        LabelSnapshots::All => (0..s.labels.len()).collect(),
        LabelSnapshots::Evenly { count, named } => {
            let n = s.labels.len();
            let mut stride = 1;
            while *count > 0 && n.div_ceil(stride) > 2 * count {
                stride *= 2;
            }
            // A label replayed before its name's definition keeps its snapshot in case it is
            // the named one: the names are defined on the first thread before its first
            // sequenced record, which the merge puts at that record.
            let sequenced = |op: &Op| !matches!(op, Op::Push { .. } | Op::Pop | Op::AttachPop | Op::Time { .. });
            let names_from = p.ops.iter().position(|(t, op)| *t == tid(0) && sequenced(op)).unwrap_or(usize::MAX);
            let unnamed_yet: Vec<bool> = p
                .ops
                .iter()
                .enumerate()
                .filter(|(_, (_, op))| matches!(op, Op::Label { .. }))
                .map(|(at, (t, _))| *t != tid(0) && at < names_from)
                .collect();
            let by_name =
                |i: usize| !named.is_empty() && (unnamed_yet[i] || named.contains(&label_name(s.labels[i].name)));
            (0..n).filter(|&i| (*count > 0 && i % stride == 0) || by_name(i)).collect()
        }
    };
    prop_assert_eq!(&kept, &expected_kept, "labels with a snapshot");
    let labels: Vec<MarkerM> = s
        .labels
        .iter()
        .zip(&m.labels)
        .map(|(l, expected)| match s.held_at(l) {
            Some(held) => (l.name, l.seq, l.time_ns, l.frame, held_map(&held)),
            None => (l.name, l.seq, l.time_ns, l.frame, expected.4.clone()),
        })
        .collect();
    prop_assert_eq!(&labels, &m.labels, "labels");
    let frames: Vec<(u64, u64, u64)> = s.frames.iter().map(|f| (f.frame, f.seq, f.time_ns)).collect();
    prop_assert_eq!(&frames, &m.frames, "frames");
    let snapshot = s.frame_snapshot.as_ref().map(|l| {
        let held = s.held_at(l).expect("the frame snapshot");
        (l.name, l.seq, l.time_ns, l.frame, held_map(&held))
    });
    prop_assert_eq!(&snapshot, &m.frame_snapshot, "frame snapshot");

    // Anomalies, events, threads.
    prop_assert_eq!(&s.anomalies, &m.anomalies, "anomalies");
    prop_assert_eq!(s.events, p.events.values().sum::<u64>());
    let threads: BTreeMap<u32, (u64, u64)> = s.threads().map(|th| (th.id, (th.events, th.os_tid))).collect();
    let expected: BTreeMap<u32, (u64, u64)> = p.events.iter().map(|(&t, &n)| (t, (n, 999 + u64::from(t)))).collect();
    prop_assert_eq!(threads, expected, "threads");
    prop_assert_eq!(s.end_time_ns, m.times.values().copied().max().unwrap_or(0));
    prop_assert_eq!(s.domain_info.get(&POOL).and_then(|d| d.parent), Some(HEAP_DOMAIN));
    for t in p.events.keys() {
        let depth = m.contexts.get(t).map_or(0, Vec::len);
        prop_assert_eq!(s.open_contexts(*t), depth);
    }
    Ok(())
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        (any::<u8>(), any::<u8>(), any::<u32>(), any::<u32>(), prop::bool::weighted(0.12), any::<u8>()),
        0..400,
    )
}

static CASE: AtomicU64 = AtomicU64::new(0);

/// Simulates, writes, replays and compares one program.
fn run_case(
    threads: usize,
    heap: usize,
    pool: usize,
    options: ReplayOptions,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let program = simulate(threads, heap, pool, steps);
    let path = std::env::temp_dir().join(format!(
        "replay-model-{}-{}.mrl",
        std::process::id(),
        CASE.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, &program.log).unwrap();
    let replayed = replay(&path, options.clone(), |_, _| {});
    std::fs::remove_file(&path).ok();
    let replayed = replayed.unwrap();
    prop_assert!(replayed.report.damage.is_empty());
    check(&program, &options, &replayed.state)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_the_reference_model(
        threads in 1usize..=6,
        heap in 3usize..=12,
        pool in 1usize..=4,
        snapshot_frame in proptest::option::of(1u64..6),
        evenly in proptest::option::of((0usize..4, proptest::collection::vec(1u32..=LABEL_NAMES, 0..=2))),
        steps in steps(),
    ) {
        let label_snapshots = match evenly {
            None => LabelSnapshots::All,
            Some((count, named)) => LabelSnapshots::Evenly { count, named: named.into_iter().map(label_name).collect() },
        };
        run_case(threads, heap, pool, ReplayOptions { snapshot_frame, label_snapshots }, &steps)?;
    }
}

/// Found by the property test: an attach to a byte of a small block at an offset that
/// is not a multiple of 8 (here 25 into a 32-byte block) was left unresolved.
#[test]
fn attach_to_any_byte_of_a_small_block() {
    run_case(
        2,
        4,
        1,
        ReplayOptions::default(),
        &[(0, 20, 0, 94_323_829, false, 0), (0, 111, 0, 170_178_835, false, 0)],
    )
    .unwrap();
}

/// An attach inside a small block that does not start 8-byte aligned (an allocator
/// handing out align-1 blocks): 10 bytes into a 21-byte block at `..4b`.
#[test]
fn attach_inside_an_unaligned_small_block() {
    run_case(1, 4, 1, ReplayOptions::default(), &[(0, 0, 3, 60, false, 0), (0, 11, 0, (10 << 8) | 3, false, 0)])
        .unwrap();
}
