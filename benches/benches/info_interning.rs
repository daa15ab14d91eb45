//! What interning each heap allocation's (size, callstack, alignment) as an "allocation
//! info" would do to a log's size: the measurement behind not making a format 2.0 of it.
//!
//! heaptrack interns each (size, trace) pair and names an allocation by the pair's index;
//! memreplay 1.x writes size, stack id and alignment in every allocation record
//! (SPEC.md §6.2). A 2.0 with infos was proposed: a sized record `DEFINE_INFO` (tag
//! `0x2c`; body `id` uv32, `size` uvarint, `stack` uv32, `align_log2` u8) written before
//! an info's first use and again whenever a cache slot is given to another info, and
//! heap allocations that name it: `ALLOC_INFO` (seq, addr, `info` uvarint),
//! `ALLOC_INFO_REUSE`+i (seq, `info`; the address is `freed[i]`) and `REALLOC_INFO`
//! (free_seq, seq, old_addr, new_addr, `info`). Everything else stays as in 1.x:
//! the deltas and the recent-address lists of §6.1 are applied exactly as before (frees,
//! `FREE_RECENT`, domain records, sized records unchanged). In a new major the records
//! these replace free their tags, so the model gives each replacement the tag of the
//! record it replaces: LZ4 sees the same tag bytes in both encodings.
//!
//! For each stream of a log, in stream order, the log's events are encoded twice, into
//! blocks closed once their payload reaches 64 KiB (as the recorder closes them), each
//! block LZ4-compressed and stored compressed only when that is smaller (SPEC.md §4.2):
//!
//! * **1.x as written**: with the format crate's [`EventEncoder`], framed by its
//!   [`FramedBlock`] (the real writer's path: frame, LZ4, stored/compressed choice).
//! * **2.0 with infos**, by a model encoder here (`ModelEncoder`), with the info table
//!   kept five ways: a per-stream cache of 1,024, 16,384 or 65,536 entries (4-way set
//!   associative, LRU; an info's id is its slot + 1, redefined when the slot is given to
//!   another info), one unbounded table per stream (ids never reused), one unbounded
//!   table for the whole log (heaptrack's), or one table per block, emptied with the
//!   delta state (the only one that keeps blocks decodable alone, SPEC.md §4.3; the
//!   others make a reader decode a stream's blocks in order, a cost not measured here).
//!
//! The model encodes every record itself (compact records as `codec.rs` does, sized
//! records through a scratch [`EventEncoder`]), so both encodings share every byte that
//! is not an allocation's. That it is faithful is checked on every run: with the 1.x
//! naming it must reproduce the real encoder's payload byte for byte in every block, and
//! every payload it writes (1.x and each 2.0 table) is decoded back by the model's
//! decoder and compared with the events that went in. Each heap allocation (`ALLOC` and
//! a realloc's allocation half) is an info lookup: the hit rate is the share that found
//! their info already defined.
//!
//! Printed per encoding: hit rate, raw payload bytes per event, stored bytes per event
//! (LZ4 payloads plus 48-byte frames, as on disk), their ratio to 1.x; and the log's own
//! bytes per event on disk and raw. Events are all records of the log, as
//! `replay-cli info` counts them.
//!
//! `RUSTFLAGS="-C force-frame-pointers=yes" cargo bench -p memreplay-benches --bench info_interning -- LOG...`
//! measures the logs named. Without one, it records a real program first (this binary
//! with `--program SCALE`: the serde_json work of `analyzer_memory`, 16-frame callstacks)
//! and measures its log: `-- --scale N` (default 200,000; 2,000 under
//! `cargo test --benches`, which runs it as a smoke test).
//!
//! `-- --block-bytes N` closes the blocks at N bytes instead (both encodings).
//!
//! Finding: interning makes the raw payload smaller (by 6 % on a real program) but the
//! stored log bigger, because LZ4 already finds a (size, stack, align) byte string seen
//! earlier in the block, and an info id is one more value that varies. At 64 KiB blocks,
//! stored bytes per event, 1.x → 2.0 with one unbounded table per stream / a cache of
//! 65,536 entries:
//!
//! * the serde_json program at scale 2,000,000 (`-- --scale 2000000`, or the log
//!   `analyzer_memory --keep DIR` keeps; 6.59 M events, 326,128 distinct infos, 90 %
//!   hits): 3.133 → 3.505 (+12 %) / 4.000 (+28 %);
//! * `log_size`'s `workload_stack16` (1.0 M events, 13 callstacks, 17,714 infos, 96 %
//!   hits): 3.541 → 3.524 (−0.5 %) / 3.788 (+7 %);
//! * `replay_throughput`'s generated 20 M-event log (random sizes and stacks, 1.33 M
//!   infos, 81 % hits): 6.298 → 6.649 (+6 %) / 7.422 (+18 %).
//!
//! Smaller caches and a table per block do worse still (+40 to +55 % on the program).
//! Block size moves both encodings (lz4_flex hashes 5 bytes instead of 4 from an input of
//! 65,535 bytes up), but from 16 to 256 KiB blocks the program's 2.0 log stays 9-12 %
//! bigger than its 1.x log at the same block size (+12 %, best size against best size);
//! only the synthetic workload, with its 13 callstacks, gains (3.4 % best against best:
//! 2.0 at 32 KiB, 1.x at 256 KiB). So no format 2.0 for infos.

use std::alloc::System;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use memreplay_format::block::{decode_events, tag, FRAME_LEN, RECENT};
use memreplay_format::varint::{put_i64, put_u64, Cursor};
use memreplay_format::{Event, EventEncoder, FramedBlock, Log, HEAP_DOMAIN};

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

/// The recorder closes a stream's block once its payload reaches this (64 KiB); so do the
/// encodings here unless `--block-bytes` says otherwise.
const BLOCK_TARGET: usize = 64 << 10;
/// Largest `--block-bytes`: a block holds that and one record, and readers take at most
/// `MAX_BLOCK_RAW_LEN` (4 MiB).
const MAX_BLOCK_TARGET: usize = 1 << 20;

/// The proposed records (see the top of this file). The three compact ones take the tags
/// of the 1.x records they replace.
const DEFINE_INFO: u8 = 0x2c;
const ALLOC_INFO: u8 = tag::ALLOC;
const ALLOC_INFO_REUSE: u8 = tag::ALLOC_REUSE;
const REALLOC_INFO: u8 = tag::REALLOC;

/// What an info stands for: (size, stack id, align_log2).
type Info = (u64, u32, u8);

/// Ways of each cache set.
const WAYS: usize = 4;

/// How heap allocations name their (size, stack, alignment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// 1.x: every allocation record carries them.
    Inline,
    /// A per-stream cache of this many entries, `WAYS`-way set associative, LRU.
    Cache(usize),
    /// One unbounded table per stream.
    PerStream,
    /// One unbounded table for the whole log.
    WholeLog,
    /// One unbounded table per block, emptied with the delta state.
    PerBlock,
}

impl Naming {
    fn label(self) -> String {
        match self {
            Naming::Inline => "1.x model".into(),
            Naming::Cache(n) => format!("2.0 cache {n} ({WAYS}-way) / stream"),
            Naming::PerStream => "2.0 unbounded / stream".into(),
            Naming::WholeLog => "2.0 unbounded / whole log".into(),
            Naming::PerBlock => "2.0 unbounded / block".into(),
        }
    }

    fn key(self) -> String {
        match self {
            Naming::Inline => "v1_model".into(),
            Naming::Cache(n) => format!("cache{n}"),
            Naming::PerStream => "unbounded_stream".into(),
            Naming::WholeLog => "unbounded_log".into(),
            Naming::PerBlock => "unbounded_block".into(),
        }
    }
}

/// A set-associative cache of infos: an info's id is its slot + 1.
struct Cache {
    sets: usize,
    slots: Vec<Option<Info>>,
    /// When each slot was last used (0: never).
    used: Vec<u64>,
    tick: u64,
}

impl Cache {
    fn new(entries: usize) -> Cache {
        assert!(entries >= WAYS && entries % WAYS == 0, "a cache of whole sets");
        Cache { sets: entries / WAYS, slots: vec![None; entries], used: vec![0; entries], tick: 0 }
    }

    /// The slot holding `info`, and whether it held it already; on a miss the set's
    /// least recently used slot is given to it.
    fn slot(&mut self, info: Info) -> (usize, bool) {
        self.tick += 1;
        // A 64-bit mix of the three fields (the splitmix64 finalizer) picks the set.
        let mut h = info.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (u64::from(info.1) << 8 | u64::from(info.2));
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
        let set = (h % self.sets as u64) as usize;
        let ways = set * WAYS..set * WAYS + WAYS;
        if let Some(s) = ways.clone().find(|&s| self.slots[s] == Some(info)) {
            self.used[s] = self.tick;
            return (s, true);
        }
        let victim = ways.min_by_key(|&s| self.used[s]).expect("a set has ways");
        self.slots[victim] = Some(info);
        self.used[victim] = self.tick;
        (victim, false)
    }
}

/// The encoder's info table.
enum Table {
    None,
    Cache(Cache),
    Map(HashMap<Info, u32>),
}

impl Table {
    fn new(naming: Naming) -> Table {
        match naming {
            Naming::Inline => Table::None,
            Naming::Cache(n) => Table::Cache(Cache::new(n)),
            Naming::PerStream | Naming::WholeLog | Naming::PerBlock => Table::Map(HashMap::new()),
        }
    }

    /// The id naming `info`, and whether it is defined already.
    fn id(&mut self, info: Info) -> (u32, bool) {
        match self {
            Table::None => unreachable!("1.x names no infos"),
            Table::Cache(c) => {
                let (slot, hit) = c.slot(info);
                (slot as u32 + 1, hit)
            }
            Table::Map(m) => {
                let next = m.len() as u32 + 1;
                let id = *m.entry(info).or_insert(next);
                (id, id != next)
            }
        }
    }
}

/// A recent-address list of SPEC.md §6.1: at most `RECENT` addresses, most recent first.
#[derive(Debug, Default)]
struct Recent(Vec<u64>);

impl Recent {
    fn find(&self, addr: u64) -> Option<usize> {
        self.0.iter().position(|&a| a == addr)
    }

    fn get(&self, i: usize) -> Option<u64> {
        self.0.get(i).copied()
    }

    fn remove_at(&mut self, i: usize) {
        self.0.remove(i);
    }

    /// Removes the first entry equal to `addr`, if any.
    fn remove(&mut self, addr: u64) {
        if let Some(i) = self.find(addr) {
            self.0.remove(i);
        }
    }

    fn push(&mut self, addr: u64) {
        self.0.insert(0, addr);
        self.0.truncate(RECENT);
    }
}

/// The per-block state of SPEC.md §6.1.
#[derive(Debug, Default)]
struct Delta {
    prev_seq: u64,
    prev_addr: u64,
    prev_time: u64,
    live: Recent,
    freed: Recent,
}

impl Delta {
    /// After a heap allocation at `addr`.
    fn allocated(&mut self, addr: u64) {
        self.freed.remove(addr);
        self.live.push(addr);
    }

    /// After a heap free of `addr`.
    fn freed(&mut self, addr: u64) {
        self.live.remove(addr);
        self.freed.push(addr);
    }
}

/// Info lookups of the 2.0 encodings.
#[derive(Debug, Default, Clone, Copy)]
struct Lookups {
    hits: u64,
    misses: u64,
    /// Bytes of the `DEFINE_INFO` records written (raw).
    define_bytes: u64,
}

/// Encodes a block's events as 1.x does, or as the 2.0 proposal would (`naming`).
struct ModelEncoder {
    naming: Naming,
    table: Table,
    buf: Vec<u8>,
    state: Delta,
    /// Encodes the sized records, which neither use nor change the delta state.
    sized: EventEncoder,
    body: Vec<u8>,
    lookups: Lookups,
}

impl ModelEncoder {
    fn new(naming: Naming) -> ModelEncoder {
        ModelEncoder {
            naming,
            table: Table::new(naming),
            buf: Vec::new(),
            state: Delta::default(),
            sized: EventEncoder::new(),
            body: Vec::new(),
            lookups: Lookups::default(),
        }
    }

    /// A new stream begins: a per-stream table starts empty.
    fn new_stream(&mut self) {
        if self.naming != Naming::WholeLog {
            self.table = Table::new(self.naming);
        }
    }

    /// The block so far was written: the next event starts a new one.
    fn new_block(&mut self) {
        self.buf.clear();
        self.state = Delta::default();
        if self.naming == Naming::PerBlock {
            self.table = Table::new(self.naming);
        }
    }

    fn seq(&mut self, seq: u64) {
        put_i64(&mut self.buf, seq.wrapping_sub(self.state.prev_seq) as i64);
        self.state.prev_seq = seq;
    }

    fn addr(&mut self, addr: u64) {
        put_i64(&mut self.buf, addr.wrapping_sub(self.state.prev_addr) as i64);
        self.state.prev_addr = addr;
    }

    /// The id naming `info` (writing its `DEFINE_INFO` first when it is not defined), or
    /// None in 1.x.
    fn info(&mut self, info: Info) -> Option<u32> {
        if self.naming == Naming::Inline {
            return None;
        }
        let (id, known) = self.table.id(info);
        if known {
            self.lookups.hits += 1;
        } else {
            self.lookups.misses += 1;
            let body = &mut self.body;
            body.clear();
            put_u64(body, u64::from(id));
            put_u64(body, info.0);
            put_u64(body, u64::from(info.1));
            body.push(info.2);
            let start = self.buf.len();
            self.buf.push(DEFINE_INFO);
            put_u64(&mut self.buf, body.len() as u64);
            self.buf.extend_from_slice(body);
            self.lookups.define_bytes += (self.buf.len() - start) as u64;
        }
        Some(id)
    }

    /// What an allocation record says of its info: the id, or the three fields.
    fn info_fields(&mut self, id: Option<u32>, (size, stack, align_log2): Info) {
        match id {
            Some(id) => put_u64(&mut self.buf, u64::from(id)),
            None => {
                put_u64(&mut self.buf, size);
                put_u64(&mut self.buf, u64::from(stack));
                self.buf.push(align_log2);
            }
        }
    }

    fn push(&mut self, event: &Event) {
        match *event {
            Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size, align_log2, stack } => {
                let info = (size, stack, align_log2);
                let id = self.info(info);
                match self.state.freed.find(addr) {
                    Some(i) => {
                        self.buf.push(ALLOC_INFO_REUSE + i as u8);
                        self.seq(seq);
                        self.state.prev_addr = addr;
                        self.state.freed.remove_at(i);
                    }
                    None => {
                        self.buf.push(ALLOC_INFO);
                        self.seq(seq);
                        self.addr(addr);
                    }
                }
                self.state.live.push(addr);
                self.info_fields(id, info);
            }
            Event::Alloc { seq, domain, addr, size, align_log2, stack } => {
                self.buf.push(tag::DOMAIN_ALLOC);
                self.seq(seq);
                put_u64(&mut self.buf, u64::from(domain));
                self.addr(addr);
                self.info_fields(None, (size, stack, align_log2));
            }
            Event::Free { seq, domain: HEAP_DOMAIN, addr, stack } => {
                match self.state.live.find(addr) {
                    Some(i) => {
                        self.buf.push(tag::FREE_RECENT + i as u8);
                        self.seq(seq);
                        self.state.prev_addr = addr;
                        self.state.live.remove_at(i);
                    }
                    None => {
                        self.buf.push(tag::FREE);
                        self.seq(seq);
                        self.addr(addr);
                    }
                }
                self.state.freed.push(addr);
                put_u64(&mut self.buf, u64::from(stack));
            }
            Event::Free { seq, domain, addr, stack } => {
                self.buf.push(tag::DOMAIN_FREE);
                self.seq(seq);
                put_u64(&mut self.buf, u64::from(domain));
                self.addr(addr);
                put_u64(&mut self.buf, u64::from(stack));
            }
            Event::Realloc { free_seq, seq, old_addr, new_addr, new_size, align_log2, stack } => {
                let info = (new_size, stack, align_log2);
                let id = self.info(info);
                self.buf.push(REALLOC_INFO);
                self.seq(free_seq);
                self.seq(seq);
                self.addr(old_addr);
                self.addr(new_addr);
                self.state.freed(old_addr);
                self.state.allocated(new_addr);
                self.info_fields(id, info);
            }
            Event::Usage { seq, addr, used } => {
                self.buf.push(tag::USAGE);
                self.seq(seq);
                self.addr(addr);
                put_u64(&mut self.buf, used);
            }
            Event::ContextPush { ty, name, flags } => {
                self.buf.push(tag::CONTEXT_PUSH);
                put_u64(&mut self.buf, u64::from(ty));
                put_u64(&mut self.buf, u64::from(name));
                self.buf.push(flags);
            }
            Event::ContextPop => self.buf.push(tag::CONTEXT_POP),
            Event::AttachPush { seq, addr } => {
                self.buf.push(tag::ATTACH_PUSH);
                self.seq(seq);
                self.addr(addr);
            }
            Event::AttachPop => self.buf.push(tag::ATTACH_POP),
            Event::Time { ns } => {
                self.buf.push(tag::TIME);
                put_i64(&mut self.buf, ns.wrapping_sub(self.state.prev_time) as i64);
                self.state.prev_time = ns;
            }
            Event::FrameStart { seq, frame } => {
                self.buf.push(tag::FRAME_START);
                self.seq(seq);
                put_u64(&mut self.buf, frame);
            }
            Event::Label { seq, name } => {
                self.buf.push(tag::LABEL);
                self.seq(seq);
                put_u64(&mut self.buf, u64::from(name));
            }
            // Sized records: the format crate's bytes.
            _ => {
                self.sized.push(event);
                self.buf.extend_from_slice(self.sized.payload());
                self.sized.clear();
            }
        }
    }
}

/// Decodes what a [`ModelEncoder`] of the same naming wrote, block after block, in the
/// same order (its info table lives as long as the encoder's).
struct ModelDecoder {
    naming: Naming,
    infos: HashMap<u32, Info>,
}

impl ModelDecoder {
    fn new(naming: Naming) -> ModelDecoder {
        ModelDecoder { naming, infos: HashMap::new() }
    }

    fn new_stream(&mut self) {
        if self.naming != Naming::WholeLog {
            self.infos.clear();
        }
    }

    /// Decodes one block's payload into `out`.
    fn block(&mut self, payload: &[u8], out: &mut Vec<Event>) -> Result<(), String> {
        if self.naming == Naming::PerBlock {
            self.infos.clear();
        }
        let mut s = Delta::default();
        let mut c = Cursor::new(payload);
        let bad = |what: &str, at: usize| format!("{what} at payload offset {at}");
        while !c.is_empty() {
            let at = c.position();
            let e = |_| bad("a truncated or overlong record", at);
            let t = c.u8().map_err(e)?;
            let seq = |c: &mut Cursor<'_>, s: &mut Delta| -> Result<u64, String> {
                s.prev_seq = s.prev_seq.wrapping_add(c.i64().map_err(e)? as u64);
                Ok(s.prev_seq)
            };
            let addr = |c: &mut Cursor<'_>, s: &mut Delta| -> Result<u64, String> {
                s.prev_addr = s.prev_addr.wrapping_add(c.i64().map_err(e)? as u64);
                Ok(s.prev_addr)
            };
            let info = |c: &mut Cursor<'_>, infos: &HashMap<u32, Info>, inline: bool| -> Result<Info, String> {
                if inline {
                    Ok((c.u64().map_err(e)?, c.u32().map_err(e)?, c.u8().map_err(e)?))
                } else {
                    let id = c.u32().map_err(e)?;
                    infos.get(&id).copied().ok_or_else(|| bad(&format!("info {id} used undefined"), at))
                }
            };
            let inline = self.naming == Naming::Inline;
            let heap_alloc = |seq, addr, (size, stack, align_log2): Info| Event::Alloc {
                seq,
                domain: HEAP_DOMAIN,
                addr,
                size,
                align_log2,
                stack,
            };
            let event = match t {
                ALLOC_INFO => {
                    let seq = seq(&mut c, &mut s)?;
                    let addr = addr(&mut c, &mut s)?;
                    s.allocated(addr);
                    heap_alloc(seq, addr, info(&mut c, &self.infos, inline)?)
                }
                t if (ALLOC_INFO_REUSE..ALLOC_INFO_REUSE + RECENT as u8).contains(&t) => {
                    let seq = seq(&mut c, &mut s)?;
                    let addr =
                        s.freed.get(usize::from(t - ALLOC_INFO_REUSE)).ok_or_else(|| bad("no such freed", at))?;
                    s.prev_addr = addr;
                    s.allocated(addr);
                    heap_alloc(seq, addr, info(&mut c, &self.infos, inline)?)
                }
                tag::FREE => {
                    let seq = seq(&mut c, &mut s)?;
                    let addr = addr(&mut c, &mut s)?;
                    s.freed(addr);
                    Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: c.u32().map_err(e)? }
                }
                t if (tag::FREE_RECENT..tag::FREE_RECENT + RECENT as u8).contains(&t) => {
                    let seq = seq(&mut c, &mut s)?;
                    let addr = s.live.get(usize::from(t - tag::FREE_RECENT)).ok_or_else(|| bad("no such live", at))?;
                    s.prev_addr = addr;
                    s.freed(addr);
                    Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: c.u32().map_err(e)? }
                }
                REALLOC_INFO => {
                    let free_seq = seq(&mut c, &mut s)?;
                    let seq = seq(&mut c, &mut s)?;
                    let old_addr = addr(&mut c, &mut s)?;
                    let new_addr = addr(&mut c, &mut s)?;
                    s.freed(old_addr);
                    s.allocated(new_addr);
                    let (new_size, stack, align_log2) = info(&mut c, &self.infos, inline)?;
                    Event::Realloc { free_seq, seq, old_addr, new_addr, new_size, align_log2, stack }
                }
                tag::DOMAIN_ALLOC | tag::DOMAIN_FREE => {
                    let seq = seq(&mut c, &mut s)?;
                    let domain = c.u32().map_err(e)?;
                    let addr = addr(&mut c, &mut s)?;
                    if domain == HEAP_DOMAIN {
                        return Err(bad("a heap event as a domain record (the encoders write none)", at));
                    }
                    if t == tag::DOMAIN_FREE {
                        Event::Free { seq, domain, addr, stack: c.u32().map_err(e)? }
                    } else {
                        let (size, stack, align_log2) = info(&mut c, &self.infos, true)?;
                        Event::Alloc { seq, domain, addr, size, align_log2, stack }
                    }
                }
                tag::USAGE => {
                    let seq = seq(&mut c, &mut s)?;
                    let addr = addr(&mut c, &mut s)?;
                    Event::Usage { seq, addr, used: c.u64().map_err(e)? }
                }
                tag::CONTEXT_PUSH => {
                    Event::ContextPush { ty: c.u32().map_err(e)?, name: c.u32().map_err(e)?, flags: c.u8().map_err(e)? }
                }
                tag::CONTEXT_POP => Event::ContextPop,
                tag::ATTACH_PUSH => {
                    let seq = seq(&mut c, &mut s)?;
                    Event::AttachPush { seq, addr: addr(&mut c, &mut s)? }
                }
                tag::ATTACH_POP => Event::AttachPop,
                tag::TIME => {
                    s.prev_time = s.prev_time.wrapping_add(c.i64().map_err(e)? as u64);
                    Event::Time { ns: s.prev_time }
                }
                tag::FRAME_START => {
                    let seq = seq(&mut c, &mut s)?;
                    Event::FrameStart { seq, frame: c.u64().map_err(e)? }
                }
                tag::LABEL => {
                    let seq = seq(&mut c, &mut s)?;
                    Event::Label { seq, name: c.u32().map_err(e)? }
                }
                DEFINE_INFO if !inline => {
                    let len = c.u64().map_err(e)? as usize;
                    let mut body = Cursor::new(c.bytes(len).map_err(e)?);
                    let id = body.u32().map_err(e)?;
                    let def = (body.u64().map_err(e)?, body.u32().map_err(e)?, body.u8().map_err(e)?);
                    self.infos.insert(id, def);
                    continue;
                }
                0x20..=0x7f => {
                    // Any other sized record: the format crate decodes it alone.
                    let len = c.u64().map_err(e)? as usize;
                    c.bytes(len).map_err(e)?;
                    let record = &payload[at..c.position()];
                    match decode_events(record).next() {
                        Some(Ok(event)) => event,
                        _ => return Err(bad("a sized record that does not decode", at)),
                    }
                }
                t => return Err(bad(&format!("tag {t:#04x}"), at)),
            };
            out.push(event);
        }
        Ok(())
    }
}

/// What one encoding of a log came to.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    raw: u64,
    /// Stored payloads and their frames: the blocks' bytes in a file.
    stored: u64,
    /// The same with each payload compressed by zstd at level 1 (format 1.4's method 2)
    /// instead of LZ4, when that is smaller.
    stored_zstd: u64,
    blocks: u64,
    lookups: Lookups,
}

impl Totals {
    /// Adds a block of `payload` as a writer stores it: LZ4 when strictly smaller.
    fn block(&mut self, payload: &[u8]) {
        let lz4 = lz4_flex::block::compress(payload).len();
        self.raw += payload.len() as u64;
        self.stored += (FRAME_LEN + lz4.min(payload.len())) as u64;
        self.stored_zstd += zstd_stored(payload);
        self.blocks += 1;
    }
}

/// A block of `payload` as a writer that chose zstd (level 1) stores it, frame included.
fn zstd_stored(payload: &[u8]) -> u64 {
    let zstd = zstd::bulk::compress(payload, 1).expect("zstd compresses any payload").len();
    (FRAME_LEN + zstd.min(payload.len())) as u64
}

/// A log's events, stream by stream, in stream order; streams in order of their first
/// block in the file.
fn streams(log: &Log) -> Vec<Vec<&Event>> {
    let mut order: Vec<u32> = Vec::new();
    let mut by_thread: HashMap<u32, Vec<&Event>> = HashMap::new();
    for b in &log.blocks {
        let events = by_thread.entry(b.frame.thread).or_insert_with(|| {
            order.push(b.frame.thread);
            Vec::new()
        });
        events.extend(b.events.iter().filter(|e| !matches!(e, Event::Unknown { .. })));
    }
    order.iter().map(|t| by_thread.remove(t).expect("a stream of the log")).collect()
}

/// Checks that `decoded` is what went into a block; panics, naming the first difference.
fn check_round_trip(naming: Naming, decoded: &[Event], events: &[&Event]) {
    let at = decoded.iter().zip(events).position(|(d, e)| d != *e);
    assert!(
        at.is_none() && decoded.len() == events.len(),
        "{}: the model's payload decodes to other events (first difference at event {:?}: {:?} for {:?}; \
         {} decoded of {})",
        naming.label(),
        at,
        at.map(|i| &decoded[i]),
        at.map(|i| events[i]),
        decoded.len(),
        events.len()
    );
}

/// 1.x as written: the real encoder and writer; alongside it, the model in its 1.x
/// naming, which must write the same payload in every block.
fn as_written(streams: &[Vec<&Event>], block: usize) -> Totals {
    let mut real = EventEncoder::new();
    let mut model = ModelEncoder::new(Naming::Inline);
    let mut decoder = ModelDecoder::new(Naming::Inline);
    let mut framed = FramedBlock::new();
    let (mut totals, mut model_totals) = (Totals::default(), Totals::default());
    let mut decoded = Vec::new();
    for (thread, events) in streams.iter().enumerate() {
        let mut first = 0;
        for (i, e) in events.iter().enumerate() {
            real.push(e);
            model.push(e);
            if real.len() >= block || i + 1 == events.len() {
                assert!(
                    real.payload() == model.buf.as_slice(),
                    "the 1.x model writes other bytes than the format crate's encoder (stream #{thread}, block \
                     ending at event {i})"
                );
                decoded.clear();
                decoder.block(&model.buf, &mut decoded).unwrap_or_else(|err| panic!("1.x model: {err}"));
                check_round_trip(Naming::Inline, &decoded, &events[first..=i]);
                model_totals.block(&model.buf);
                totals.raw += real.len() as u64;
                totals.stored_zstd += zstd_stored(real.payload());
                framed.frame(thread as u32, &mut real).expect("a block below the largest a reader takes");
                totals.stored += framed.len() as u64;
                totals.blocks += 1;
                model.new_block();
                first = i + 1;
            }
        }
    }
    assert_eq!(
        (model_totals.raw, model_totals.stored, model_totals.blocks),
        (totals.raw, totals.stored, totals.blocks),
        "this bench stores blocks as the writer does"
    );
    totals
}

/// The log re-encoded by the model with `naming`, every block decoded back and checked.
fn modelled(streams: &[Vec<&Event>], naming: Naming, block: usize) -> Totals {
    let mut enc = ModelEncoder::new(naming);
    let mut dec = ModelDecoder::new(naming);
    let mut totals = Totals::default();
    let mut decoded = Vec::new();
    for events in streams {
        enc.new_stream();
        dec.new_stream();
        let mut first = 0;
        for (i, e) in events.iter().enumerate() {
            enc.push(e);
            if enc.buf.len() >= block || i + 1 == events.len() {
                totals.block(&enc.buf);
                decoded.clear();
                dec.block(&enc.buf, &mut decoded).unwrap_or_else(|err| panic!("{}: {err}", naming.label()));
                check_round_trip(naming, &decoded, &events[first..=i]);
                enc.new_block();
                first = i + 1;
            }
        }
    }
    totals.lookups = enc.lookups;
    totals
}

const NAMINGS: [Naming; 6] = [
    Naming::Cache(1024),
    Naming::Cache(16_384),
    Naming::Cache(65_536),
    Naming::PerStream,
    Naming::WholeLog,
    Naming::PerBlock,
];

/// Measures one log and prints its table.
fn measure(path: &Path, block: usize) -> Result<(), String> {
    let log = Log::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.len();
    let streams = streams(&log);
    let events: u64 = streams.iter().map(|s| s.len() as u64).sum();
    if events == 0 {
        return Err(format!("{}: the log holds no events", path.display()));
    }
    let own_raw: u64 = log.blocks.iter().map(|b| u64::from(b.frame.raw_len)).sum();
    let mut distinct = std::collections::HashSet::new();
    let (mut allocs, mut reallocs) = (0u64, 0u64);
    for e in streams.iter().flatten() {
        match **e {
            Event::Alloc { domain: HEAP_DOMAIN, size, stack, align_log2, .. } => {
                allocs += 1;
                distinct.insert((size, stack, align_log2));
            }
            Event::Realloc { new_size, stack, align_log2, .. } => {
                reallocs += 1;
                distinct.insert((new_size, stack, align_log2));
            }
            _ => {}
        }
    }
    let per = |b: u64| b as f64 / events as f64;
    println!("info_interning: {}", path.display());
    println!(
        "  {events} events in {} streams; {} heap allocations ({allocs} allocs + {reallocs} realloc halves), {} distinct \
         (size, stack, align)",
        streams.len(),
        allocs + reallocs,
        distinct.len()
    );
    if !log.report.is_clean() {
        println!(
            "  (the log is damaged or cut off: {} damage records; its readable events are measured)",
            log.report.damage.len()
        );
    }
    println!(
        "  on disk: {file} bytes = {:.3} B/event; its {} blocks' raw payloads {own_raw} bytes = {:.3} B/event",
        per(file),
        log.blocks.len(),
        per(own_raw)
    );
    let v1 = as_written(&streams, block);
    let rows: Vec<(Naming, Totals)> = NAMINGS.iter().map(|&n| (n, modelled(&streams, n, block))).collect();
    let hit_rate = |t: &Totals| 100.0 * t.lookups.hits as f64 / (t.lookups.hits + t.lookups.misses).max(1) as f64;
    println!(
        "  re-encoded in blocks closed at {block} bytes (stored = LZ4 payloads + 48-byte frames, as on disk; zstd = \
         the same blocks with zstd level 1 payloads, format 1.4):"
    );
    println!(
        "    {:<34} {:>8} {:>11} {:>14} {:>7} {:>10} {:>12} {:>9} {:>13}",
        "encoding",
        "hit rate",
        "raw B/event",
        "stored B/event",
        "raw/1.x",
        "stored/1.x",
        "zstd B/event",
        "zstd/1.x",
        "DEFINE_INFO B"
    );
    println!(
        "    {:<34} {:>8} {:>11.3} {:>14.3} {:>7.3} {:>10.3} {:>12.3} {:>9.3} {:>13}",
        "1.x as written (EventEncoder)",
        "-",
        per(v1.raw),
        per(v1.stored),
        1.0,
        1.0,
        per(v1.stored_zstd),
        1.0,
        "-"
    );
    for (naming, t) in &rows {
        println!(
            "    {:<34} {:>7.1}% {:>11.3} {:>14.3} {:>7.3} {:>10.3} {:>12.3} {:>9.3} {:>13}",
            naming.label(),
            hit_rate(t),
            per(t.raw),
            per(t.stored),
            t.raw as f64 / v1.raw as f64,
            t.stored as f64 / v1.stored as f64,
            per(t.stored_zstd),
            t.stored_zstd as f64 / v1.stored_zstd as f64,
            t.lookups.define_bytes
        );
    }
    println!(
        "STATS info_interning/v1 events={events} raw_bytes_per_event={:.3} stored_bytes_per_event={:.3} \
         zstd_bytes_per_event={:.3} blocks={} file_bytes_per_event={:.3}",
        per(v1.raw),
        per(v1.stored),
        per(v1.stored_zstd),
        v1.blocks,
        per(file)
    );
    for (naming, t) in &rows {
        println!(
            "STATS info_interning/{} hit_rate={:.2} raw_bytes_per_event={:.3} stored_bytes_per_event={:.3} \
             raw_ratio={:.4} stored_ratio={:.4} zstd_bytes_per_event={:.3} zstd_ratio={:.4} define_info_bytes={} \
             blocks={}",
            naming.key(),
            hit_rate(t),
            per(t.raw),
            per(t.stored),
            t.raw as f64 / v1.raw as f64,
            t.stored as f64 / v1.stored as f64,
            per(t.stored_zstd),
            t.stored_zstd as f64 / v1.stored_zstd as f64,
            t.lookups.define_bytes,
            t.blocks
        );
    }
    println!("  (the 1.x model wrote the encoder's bytes in every block; every payload decoded back to its events)");
    Ok(())
}

/// Records the serde_json program at `scale` into `log` (a child process: this binary
/// with `--program`, recording from `MEMREPLAY_LOG` with the recorder's defaults).
fn record_program(scale: u64, log: &Path) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let out = Command::new(exe)
        .args(["--program", &scale.to_string()])
        .env("MEMREPLAY_LOG", log)
        .output()
        .map_err(|e| format!("the program does not start: {e}"))?;
    if !out.status.success() {
        return Err(format!("the program failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    if let Some(scale) = value("--program") {
        let scale = scale.parse().unwrap_or_else(|_| panic!("--program takes a scale, not {scale:?}"));
        memreplay_benches::json_program(scale);
        // Recording (MEMREPLAY_LOG) started on the first allocation; end the log here.
        memreplay::stop();
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: keep it small.
    let smoke = !args.iter().any(|a| a == "--bench");
    let mut logs: Vec<PathBuf> = Vec::new();
    let mut scale: u64 = if smoke { 2_000 } else { 200_000 };
    let mut block = BLOCK_TARGET;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--scale" => {
                let v = rest.next().map(String::as_str).unwrap_or("");
                scale = v.parse().unwrap_or_else(|_| {
                    eprintln!("info_interning: --scale takes a number of JSON values, not {v:?}");
                    std::process::exit(2)
                });
            }
            "--block-bytes" => {
                let v = rest.next().map(String::as_str).unwrap_or("");
                block = match v.parse() {
                    Ok(n) if (1..=MAX_BLOCK_TARGET).contains(&n) => n,
                    _ => {
                        eprintln!(
                            "info_interning: --block-bytes takes a number from 1 to {MAX_BLOCK_TARGET}, not {v:?}"
                        );
                        std::process::exit(2)
                    }
                };
            }
            // Flags of the test and bench harnesses (`--bench`, `--nocapture`, ...).
            a if a.starts_with("--") => {}
            a => logs.push(PathBuf::from(a)),
        }
    }
    let temp = std::env::temp_dir().join(format!("memreplay-info-interning-{}", std::process::id()));
    if logs.is_empty() {
        let log = temp.join(format!("program-{scale}.mrl"));
        let made = std::fs::create_dir_all(&temp).map_err(|e| format!("{}: {e}", temp.display()));
        if let Err(err) = made.and_then(|()| record_program(scale, &log)) {
            eprintln!("info_interning: recording the program: {err}");
            std::process::exit(1);
        }
        println!("info_interning: no log named: recorded the serde_json program at scale {scale}");
        logs.push(log);
    }
    let mut failed = false;
    for log in &logs {
        if let Err(err) = measure(log, block) {
            eprintln!("info_interning: {err}");
            failed = true;
        }
    }
    let _ = std::fs::remove_dir_all(&temp);
    if failed {
        std::process::exit(1);
    }
}
