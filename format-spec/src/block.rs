//! Blocks: the framed, checksummed, independently decompressible units of a log,
//! and the compact encoding of the events inside them (SPEC.md §4–§6).
//!
//! An [`EventEncoder`] turns events into one block's payload, keeping the delta state
//! (sequence, address, time) that makes most fields one or two bytes. [`decode_events`]
//! is its inverse and starts from the same fresh state, so every block decodes alone.

use crate::event::*;
use crate::varint::{put_i64, put_str, put_u64, zigzag, Cursor, CursorError};

/// The four bytes that start every block frame.
pub const BLOCK_MAGIC: [u8; 4] = *b"MRLB";
/// Size of a block frame in bytes.
pub const FRAME_LEN: usize = 48;
/// Largest decompressed payload a frame may declare (64 MiB); larger makes the frame
/// invalid (SPEC.md §4.1), and the reader looks for the next one.
pub const MAX_RAW_LEN: u32 = 64 << 20;
/// Largest decompressed payload a block may hold (4 MiB, SPEC.md §4.2); a block that
/// claims more is bad, refused before anything is allocated for it. The recorder's blocks
/// are 64 KiB and one record at most.
pub const MAX_BLOCK_RAW_LEN: u32 = 4 << 20;
/// Stream id of the recorder's own metadata (modules, session facts).
pub const METADATA_THREAD: u32 = 0;

/// What a block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A thread's event stream.
    Events,
    /// The clean end-of-log record.
    End,
    /// A kind from a newer minor version: skipped by its length.
    Unknown(u8),
}

impl BlockKind {
    pub fn to_byte(self) -> u8 {
        match self {
            BlockKind::Events => 1,
            BlockKind::End => 2,
            BlockKind::Unknown(b) => b,
        }
    }
    pub fn from_byte(b: u8) -> Self {
        match b {
            1 => BlockKind::Events,
            2 => BlockKind::End,
            b => BlockKind::Unknown(b),
        }
    }
}

/// How a block's payload is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Lz4,
    Unknown(u8),
}

impl Compression {
    pub fn to_byte(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Unknown(b) => b,
        }
    }
    pub fn from_byte(b: u8) -> Self {
        match b {
            0 => Compression::None,
            1 => Compression::Lz4,
            b => Compression::Unknown(b),
        }
    }
}

/// The fixed 48-byte frame in front of every block payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockFrame {
    pub kind: BlockKind,
    pub compression: Compression,
    /// The stream (recorder thread index) the events came from; 0 = metadata.
    pub thread: u32,
    pub event_count: u32,
    /// Smallest and largest `seq` of the block's sequenced events (both 0 if none).
    pub first_seq: u64,
    pub last_seq: u64,
    /// Bytes of payload that follow the frame on disk.
    pub stored_len: u32,
    /// Bytes of payload once decompressed.
    pub raw_len: u32,
    /// CRC-32 (IEEE) of the stored payload bytes.
    pub payload_crc: u32,
}

/// Why a frame could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    BadMagic,
    BadChecksum,
    Implausible,
}

impl BlockFrame {
    pub fn to_bytes(&self) -> [u8; FRAME_LEN] {
        let mut f = [0u8; FRAME_LEN];
        f[0..4].copy_from_slice(&BLOCK_MAGIC);
        f[4] = self.kind.to_byte();
        f[5] = self.compression.to_byte();
        // f[6..8] reserved, zero.
        f[8..12].copy_from_slice(&self.thread.to_le_bytes());
        f[12..16].copy_from_slice(&self.event_count.to_le_bytes());
        f[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        f[24..32].copy_from_slice(&self.last_seq.to_le_bytes());
        f[32..36].copy_from_slice(&self.stored_len.to_le_bytes());
        f[36..40].copy_from_slice(&self.raw_len.to_le_bytes());
        f[40..44].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32fast::hash(&f[..44]);
        f[44..48].copy_from_slice(&crc.to_le_bytes());
        f
    }

    /// Parses and validates a frame (magic, frame checksum, plausible lengths).
    pub fn parse(f: &[u8; FRAME_LEN]) -> Result<BlockFrame, FrameError> {
        if f[0..4] != BLOCK_MAGIC {
            return Err(FrameError::BadMagic);
        }
        let u32_at = |i: usize| u32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&f[i..i + 8]);
            u64::from_le_bytes(a)
        };
        if crc32fast::hash(&f[..44]) != u32_at(44) {
            return Err(FrameError::BadChecksum);
        }
        let frame = BlockFrame {
            kind: BlockKind::from_byte(f[4]),
            compression: Compression::from_byte(f[5]),
            thread: u32_at(8),
            event_count: u32_at(12),
            first_seq: u64_at(16),
            last_seq: u64_at(24),
            stored_len: u32_at(32),
            raw_len: u32_at(36),
            payload_crc: u32_at(40),
        };
        if frame.raw_len > MAX_RAW_LEN || frame.stored_len > MAX_RAW_LEN + (MAX_RAW_LEN / 255) + 16 {
            return Err(FrameError::Implausible);
        }
        Ok(frame)
    }
}

/// Record tags (SPEC.md §6). Tags below [`FIRST_SIZED_TAG`] have fixed layouts and no
/// length; tags from it up to [`LAST_SIZED_TAG`] are followed by a varint body length,
/// so that a reader skips the kinds it does not know.
pub mod tag {
    pub const ALLOC: u8 = 0x01;
    pub const FREE: u8 = 0x02;
    pub const REALLOC: u8 = 0x03;
    pub const DOMAIN_ALLOC: u8 = 0x04;
    pub const DOMAIN_FREE: u8 = 0x05;
    pub const USAGE: u8 = 0x06;
    pub const CONTEXT_PUSH: u8 = 0x07;
    pub const CONTEXT_POP: u8 = 0x08;
    pub const ATTACH_PUSH: u8 = 0x09;
    pub const ATTACH_POP: u8 = 0x0a;
    pub const TIME: u8 = 0x0b;
    pub const FRAME_START: u8 = 0x0c;
    pub const LABEL: u8 = 0x0d;
    /// `0x80 + i`: a heap free of the `i`-th most recent live allocation of the block.
    pub const FREE_RECENT: u8 = 0x80;
    /// `0x90 + i`: a heap allocation at the `i`-th most recently freed address of the block.
    pub const ALLOC_REUSE: u8 = 0x90;

    pub const DEFINE_STRING: u8 = 0x20;
    pub const DEFINE_STACK: u8 = 0x21;
    pub const DEFINE_CONTEXT_TYPE: u8 = 0x22;
    pub const DEFINE_DOMAIN: u8 = 0x23;
    pub const MODULE: u8 = 0x24;
    pub const THREAD_INFO: u8 = 0x25;
    pub const RESOURCE: u8 = 0x26;
    pub const LOST: u8 = 0x27;
    pub const PROCESS_MEMORY: u8 = 0x28;
}
pub const FIRST_SIZED_TAG: u8 = 0x20;
/// Entries of each recent-address list (SPEC.md §6.1).
pub const RECENT: usize = 16;
pub const LAST_SIZED_TAG: u8 = 0x7f;

/// Encodes events into one block's payload with per-block delta state.
#[derive(Debug, Clone, Default)]
pub struct EventEncoder {
    /// The payload is `buf[..pos]`. Past it, `buf` holds room (zeroed once, when it grows)
    /// for at least one more compact record before each is encoded, so that its bytes are
    /// stored one by one without a capacity check and a length update each.
    buf: Vec<u8>,
    pos: usize,
    scratch: Vec<u8>,
    state: DeltaState,
    count: u32,
}

/// Longest compact record: a `REALLOC` (tag, two seq and two addr deltas, size, a `u32`
/// stack id, align) takes at most 1 + 4 × 10 + 10 + 5 + 1 = 57 bytes.
const MAX_COMPACT: usize = 64;

/// The per-block state of SPEC.md §6.1 (and the block's seq range).
#[derive(Debug, Clone)]
struct DeltaState {
    prev_seq: u64,
    prev_addr: u64,
    prev_time: u64,
    recent: RecentHeap,
    /// Smallest and largest `seq` so far; `first_seq > last_seq` while there is none.
    first_seq: u64,
    last_seq: u64,
}

impl Default for DeltaState {
    fn default() -> Self {
        DeltaState {
            prev_seq: 0,
            prev_addr: 0,
            prev_time: 0,
            recent: RecentHeap::default(),
            first_seq: u64::MAX,
            last_seq: 0,
        }
    }
}

/// Writes one record into the room made past the payload.
struct Out<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Out<'_> {
    #[inline(always)]
    fn u8(&mut self, b: u8) {
        self.buf[self.pos] = b;
        self.pos += 1;
    }

    /// Unsigned LEB128, as [`put_u64`].
    #[inline(always)]
    fn u64(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.u8(v as u8);
    }

    /// Zig-zag and LEB128, as [`put_i64`].
    #[inline(always)]
    fn i64(&mut self, v: i64) {
        self.u64(zigzag(v));
    }
}

/// A short list of addresses, most recent first: the block-local memory that lets a free
/// name its allocation, and an allocation its reused address, in one tag byte instead
/// of a two-to-five-byte address delta (SPEC.md §6.1). Encoder and decoder keep it alike.
///
/// A ring: entry `i` is `addrs[(head + i) % RECENT]`, so putting an address first is one
/// store, and removing entry `i` moves only the `i` entries before it (or the ones after
/// it, whichever are fewer): usually none, as most hits are the first entry.
#[derive(Debug, Default, Clone)]
struct RecentAddrs {
    addrs: [u64; RECENT],
    head: usize,
    len: usize,
}

const RING: usize = RECENT - 1;
/// Entries removed without a branch (see [`RecentAddrs::remove_at`]).
const NEAR: usize = 8;

impl RecentAddrs {
    /// The index of the first (most recent) entry equal to `addr`.
    ///
    /// Branch-free: all 16 slots are compared at once, the match mask (bit `2j` for slot
    /// `j`) is rotated from slot order into list order (entry `i` is slot `head + i`),
    /// and entries past `len` are masked off. The lists see two searches per heap event,
    /// with hits at any index, so a scan that stops early mispredicts often.
    #[inline(always)]
    fn find(&self, addr: u64) -> Option<usize> {
        let slots = u64::from(equal_slots(&self.addrs, addr));
        let in_order = ((slots | slots << (2 * RECENT)) >> (2 * self.head)) & ((1u64 << (2 * self.len)) - 1);
        (in_order != 0).then(|| (in_order.trailing_zeros() / 2) as usize)
    }

    /// Entry `i`, if there is one.
    #[inline]
    fn get(&self, i: usize) -> Option<u64> {
        (i < self.len).then(|| self.addrs[(self.head + i) & RING])
    }

    /// Removes entry `i` (`i < len`): later entries move up by one.
    ///
    /// Most removals are of one of the first entries (on the replay benchmark's log,
    /// about half of them entry 0, with an average index near 2 for the others). The first
    /// `NEAR` are removed without a branch on `i`: the entries before it move one slot
    /// towards the older ones (a fixed `NEAR - 1` moves, masked off from `i` on) and the
    /// head follows. Branching on `i == 0` and then looping `i` times mispredicted on
    /// about every removal: decoding that log took 10 % longer (`NEAR` 4: 5 % longer;
    /// 12 and 16 were slower than 8).
    #[inline(always)]
    fn remove_at(&mut self, i: usize) {
        debug_assert!(i < self.len);
        if i < NEAR {
            for j in (0..NEAR - 1).rev() {
                let (to, from) = ((self.head + j + 1) & RING, (self.head + j) & RING);
                let moves = u64::from(j < i).wrapping_neg();
                self.addrs[to] = (self.addrs[from] & moves) | (self.addrs[to] & !moves);
            }
            self.head = (self.head + 1) & RING;
            self.len -= 1;
        } else {
            self.remove_later(i);
        }
    }

    #[inline(never)]
    fn remove_later(&mut self, i: usize) {
        if i <= self.len - 1 - i {
            // Move the `i` newer entries one slot towards the older ones.
            for j in (0..i).rev() {
                self.addrs[(self.head + j + 1) & RING] = self.addrs[(self.head + j) & RING];
            }
            self.head = (self.head + 1) & RING;
        } else {
            // Move the older entries one slot towards the newer ones.
            for j in i..self.len - 1 {
                self.addrs[(self.head + j) & RING] = self.addrs[(self.head + j + 1) & RING];
            }
        }
        self.len -= 1;
    }

    /// Removes the first entry equal to `addr`, if any.
    #[inline(always)]
    fn remove(&mut self, addr: u64) {
        if let Some(i) = self.find(addr) {
            self.remove_at(i);
        }
    }

    /// Puts `addr` first, dropping the oldest entry if the list is full.
    #[inline]
    fn push(&mut self, addr: u64) {
        // When full, the slot before the first entry holds the last one: overwritten.
        self.head = (self.head + RING) & RING;
        self.addrs[self.head] = addr;
        self.len = (self.len + 1).min(RECENT);
    }
}

/// Bit `2j` set for each `addrs[j] == addr` (the odd bits clear): spread out, because
/// that is how the vector comparison yields it, and packing the bits together took a
/// dozen more instructions on the path from an event's address to its next event.
///
/// On x86-64, with SSE2 (part of its baseline): the 32-bit halves of all 16 entries are
/// compared at once, packed to one byte each, and read out as a 32-bit mask in which an
/// entry matches when both its bits are set; about 30 instructions where the compiler's
/// own vectorization of the plain loop took about 75 (the decoder runs this once per
/// heap event).
#[inline(always)]
fn equal_slots(addrs: &[u64; RECENT], addr: u64) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is always available on x86-64, and each unaligned load reads 16
        // bytes at `p.add(k)`, k < 8, all inside `addrs` (128 bytes).
        let halves = unsafe {
            let needle = _mm_set1_epi64x(addr as i64);
            let p = addrs.as_ptr().cast::<__m128i>();
            let eq = |k: usize| _mm_cmpeq_epi32(_mm_loadu_si128(p.add(k)), needle);
            let low = _mm_packs_epi16(_mm_packs_epi32(eq(0), eq(1)), _mm_packs_epi32(eq(2), eq(3)));
            let high = _mm_packs_epi16(_mm_packs_epi32(eq(4), eq(5)), _mm_packs_epi32(eq(6), eq(7)));
            (_mm_movemask_epi8(low) as u32) | (_mm_movemask_epi8(high) as u32) << 16
        };
        // Entry j is bits 2j and 2j + 1: it matches when both are set.
        halves & (halves >> 1) & 0x5555_5555
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut slots = 0u32;
        for (j, &a) in addrs.iter().enumerate() {
            slots |= u32::from(a == addr) << (2 * j);
        }
        slots
    }
}

/// The two lists of a block: live heap allocations and freed heap addresses.
#[derive(Debug, Default, Clone)]
struct RecentHeap {
    live: RecentAddrs,
    freed: RecentAddrs,
}

/// A heap allocation or a free, for the lists: an allocation takes its address out of
/// `freed` and puts it in `live`, a free the other way round.
#[derive(Debug, Clone, Copy)]
enum HeapSide {
    Alloc,
    Free,
}

impl RecentHeap {
    /// The list a heap event of `side` takes its address out of, and the one it puts it in.
    #[inline(always)]
    fn lists(&mut self, side: HeapSide) -> (&mut RecentAddrs, &mut RecentAddrs) {
        match side {
            HeapSide::Alloc => (&mut self.freed, &mut self.live),
            HeapSide::Free => (&mut self.live, &mut self.freed),
        }
    }

    /// After a heap event of `side` at `addr`.
    #[inline(always)]
    fn moved(&mut self, side: HeapSide, addr: u64) {
        let (from, to) = self.lists(side);
        from.remove(addr);
        to.push(addr);
    }

    /// After a heap event of `side` that named `addr` as entry `i` of the list it takes
    /// it out of (`FREE_RECENT`, `ALLOC_REUSE`): the first entry equal to it is entry `i`
    /// or one before, so there is nothing to search when `i` is 0, the usual case.
    #[inline(always)]
    fn moved_entry(&mut self, side: HeapSide, i: usize, addr: u64) {
        let (from, to) = self.lists(side);
        let first = if i == 0 { 0 } else { from.find(addr).unwrap_or(i) };
        from.remove_at(first);
        to.push(addr);
    }

    /// After any heap allocation at `addr` (an `ALLOC`, `ALLOC_REUSE` or a realloc's new block).
    #[inline(always)]
    fn allocated(&mut self, addr: u64) {
        self.moved(HeapSide::Alloc, addr);
    }

    /// After any heap free of `addr` (a `FREE`, `FREE_RECENT` or a realloc's old block).
    #[inline(always)]
    fn freed(&mut self, addr: u64) {
        self.moved(HeapSide::Free, addr);
    }
}

#[inline]
fn delta(new: u64, prev: u64) -> i64 {
    new.wrapping_sub(prev) as i64
}

impl DeltaState {
    #[inline(always)]
    fn seq(&mut self, o: &mut Out<'_>, seq: u64) {
        o.i64(delta(seq, self.prev_seq));
        self.prev_seq = seq;
        self.first_seq = self.first_seq.min(seq);
        self.last_seq = self.last_seq.max(seq);
    }

    #[inline(always)]
    fn addr(&mut self, o: &mut Out<'_>, addr: u64) {
        o.i64(delta(addr, self.prev_addr));
        self.prev_addr = addr;
    }

    /// Encodes a compact record (SPEC.md §6.2) into `o`; false for the other events.
    #[inline(always)]
    fn compact(&mut self, o: &mut Out<'_>, event: &Event) -> bool {
        match *event {
            Event::Alloc { seq, domain, addr, size, align_log2, stack } => {
                if domain == HEAP_DOMAIN {
                    // The index found is the first entry equal to `addr`: the one the
                    // list update removes (no second search).
                    match self.recent.freed.find(addr) {
                        Some(i) => {
                            o.u8(tag::ALLOC_REUSE + i as u8);
                            self.seq(o, seq);
                            self.prev_addr = addr;
                            self.recent.freed.remove_at(i);
                        }
                        None => {
                            o.u8(tag::ALLOC);
                            self.seq(o, seq);
                            self.addr(o, addr);
                        }
                    }
                    self.recent.live.push(addr);
                } else {
                    o.u8(tag::DOMAIN_ALLOC);
                    self.seq(o, seq);
                    o.u64(u64::from(domain));
                    self.addr(o, addr);
                }
                o.u64(size);
                o.u64(u64::from(stack));
                o.u8(align_log2);
            }
            Event::Free { seq, domain, addr, stack } => {
                if domain == HEAP_DOMAIN {
                    match self.recent.live.find(addr) {
                        Some(i) => {
                            o.u8(tag::FREE_RECENT + i as u8);
                            self.seq(o, seq);
                            self.prev_addr = addr;
                            self.recent.live.remove_at(i);
                        }
                        None => {
                            o.u8(tag::FREE);
                            self.seq(o, seq);
                            self.addr(o, addr);
                        }
                    }
                    self.recent.freed.push(addr);
                } else {
                    o.u8(tag::DOMAIN_FREE);
                    self.seq(o, seq);
                    o.u64(u64::from(domain));
                    self.addr(o, addr);
                }
                o.u64(u64::from(stack));
            }
            Event::Realloc { free_seq, seq, old_addr, new_addr, new_size, align_log2, stack } => {
                o.u8(tag::REALLOC);
                self.seq(o, free_seq);
                self.seq(o, seq);
                self.addr(o, old_addr);
                self.addr(o, new_addr);
                self.recent.freed(old_addr);
                self.recent.allocated(new_addr);
                o.u64(new_size);
                o.u64(u64::from(stack));
                o.u8(align_log2);
            }
            Event::Usage { seq, addr, used } => {
                o.u8(tag::USAGE);
                self.seq(o, seq);
                self.addr(o, addr);
                o.u64(used);
            }
            Event::ContextPush { ty, name, flags } => {
                o.u8(tag::CONTEXT_PUSH);
                o.u64(u64::from(ty));
                o.u64(u64::from(name));
                o.u8(flags);
            }
            Event::ContextPop => o.u8(tag::CONTEXT_POP),
            Event::AttachPush { seq, addr } => {
                o.u8(tag::ATTACH_PUSH);
                self.seq(o, seq);
                self.addr(o, addr);
            }
            Event::AttachPop => o.u8(tag::ATTACH_POP),
            Event::Time { ns } => {
                o.u8(tag::TIME);
                o.i64(delta(ns, self.prev_time));
                self.prev_time = ns;
            }
            Event::FrameStart { seq, frame } => {
                o.u8(tag::FRAME_START);
                self.seq(o, seq);
                o.u64(frame);
            }
            Event::Label { seq, name } => {
                o.u8(tag::LABEL);
                self.seq(o, seq);
                o.u64(u64::from(name));
            }
            _ => return false,
        }
        true
    }
}

impl EventEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Encoded payload bytes so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn event_count(&self) -> u32 {
        self.count
    }

    /// The uncompressed payload so far.
    pub fn payload(&self) -> &[u8] {
        &self.buf[..self.pos]
    }

    /// (first, last) sequence numbers of the block's sequenced events, or (0, 0).
    pub fn seq_range(&self) -> (u64, u64) {
        if self.state.first_seq <= self.state.last_seq {
            (self.state.first_seq, self.state.last_seq)
        } else {
            (0, 0)
        }
    }

    /// Forgets the payload and the delta state: the next event starts a new block.
    pub fn clear(&mut self) {
        // The buffer keeps its length: room for the next block, already zeroed.
        self.pos = 0;
        self.state = DeltaState::default();
        self.count = 0;
    }

    /// Makes room for `n` more bytes past the payload.
    #[cold]
    fn make_room(&mut self, n: usize) {
        let want = self.pos + n;
        if self.buf.len() < want {
            self.buf.resize(want.max(2 * self.buf.len()).max(1024), 0);
        }
    }

    /// Appends one event.
    pub fn push(&mut self, event: &Event) {
        self.count += 1;
        if self.buf.len() - self.pos < MAX_COMPACT {
            self.make_room(MAX_COMPACT);
        }
        let mut o = Out { buf: &mut self.buf, pos: self.pos };
        if self.state.compact(&mut o, event) {
            self.pos = o.pos;
            return;
        }
        match *event {
            Event::DefineString { id, ref text } => self.sized(tag::DEFINE_STRING, |b| {
                put_u64(b, u64::from(id));
                put_str(b, text);
            }),
            Event::DefineStack { id, ref frames } => self.sized(tag::DEFINE_STACK, |b| {
                put_u64(b, u64::from(id));
                put_u64(b, frames.len() as u64);
                let mut prev = 0u64;
                for &f in frames {
                    put_i64(b, delta(f, prev));
                    prev = f;
                }
            }),
            Event::DefineContextType { id, name } => self.sized(tag::DEFINE_CONTEXT_TYPE, |b| {
                put_u64(b, u64::from(id));
                put_u64(b, u64::from(name));
            }),
            Event::DefineDomain { id, name, kind, capacity, parent } => self.sized(tag::DEFINE_DOMAIN, |b| {
                put_u64(b, u64::from(id));
                put_u64(b, u64::from(name));
                b.push(kind.to_byte());
                put_u64(b, capacity);
                put_u64(b, parent.map_or(0, |p| u64::from(p) + 1));
            }),
            Event::Module { base, size, load_bias, path, ref build_id } => self.sized(tag::MODULE, |b| {
                put_u64(b, base);
                put_u64(b, size);
                put_u64(b, load_bias);
                put_u64(b, u64::from(path));
                put_u64(b, build_id.len() as u64);
                b.extend_from_slice(build_id);
            }),
            Event::ThreadInfo { os_tid, name } => self.sized(tag::THREAD_INFO, |b| {
                put_u64(b, os_tid);
                put_u64(b, u64::from(name));
            }),
            Event::Resource { domain, addr, ref desc } => self.sized(tag::RESOURCE, |b| {
                put_u64(b, u64::from(domain));
                put_u64(b, addr);
                b.push(desc.kind.to_byte());
                put_u64(b, u64::from(desc.width));
                put_u64(b, u64::from(desc.height));
                put_u64(b, u64::from(desc.depth_or_layers));
                put_u64(b, u64::from(desc.mip_levels));
                put_u64(b, u64::from(desc.format));
                put_u64(b, u64::from(desc.name));
            }),
            Event::Lost { events, bytes, reason } => self.sized(tag::LOST, |b| {
                put_u64(b, events);
                put_u64(b, bytes);
                b.push(reason.to_byte());
            }),
            Event::ProcessMemory { time, resident, committed } => self.sized(tag::PROCESS_MEMORY, |b| {
                put_u64(b, time);
                put_u64(b, resident);
                put_u64(b, committed);
            }),
            Event::Unknown { .. } => {
                // Nothing to write: an unknown record's body was not kept.
                self.count -= 1;
            }
            // Compact records are encoded above.
            _ => unreachable!("a compact record"),
        }
    }

    /// Appends a sized record (SPEC.md §6.3): tag, body length, body.
    fn sized(&mut self, tag: u8, body: impl FnOnce(&mut Vec<u8>)) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        body(&mut scratch);
        let n = scratch.len();
        self.make_room(1 + 10 + n);
        let mut o = Out { buf: &mut self.buf, pos: self.pos };
        o.u8(tag);
        o.u64(n as u64);
        o.buf[o.pos..o.pos + n].copy_from_slice(&scratch);
        self.pos = o.pos + n;
        self.scratch = scratch;
    }

    /// Frames the payload as a complete block (compressed with LZ4 when that is smaller),
    /// appends it to `out`, and clears the encoder for the next block. The caller keeps
    /// [`len`](Self::len) at most [`MAX_BLOCK_RAW_LEN`]: readers reject larger blocks.
    pub fn finish_into(&mut self, thread: u32, out: &mut Vec<u8>) {
        let (first_seq, last_seq) = self.seq_range();
        let raw_len = self.pos;
        let frame_at = out.len();
        out.resize(frame_at + FRAME_LEN, 0);
        let payload_at = out.len();
        out.resize(payload_at + lz4_flex::block::get_maximum_output_size(raw_len), 0);
        let compressed = lz4_flex::block::compress_into(&self.buf[..raw_len], &mut out[payload_at..]).ok();
        let (compression, stored_len) = match compressed {
            Some(n) if n < raw_len => (Compression::Lz4, n),
            _ => {
                out.truncate(payload_at);
                out.extend_from_slice(&self.buf[..raw_len]);
                (Compression::None, raw_len)
            }
        };
        out.truncate(payload_at + stored_len);
        let frame = BlockFrame {
            kind: BlockKind::Events,
            compression,
            thread,
            event_count: self.count,
            first_seq,
            last_seq,
            stored_len: stored_len as u32,
            raw_len: raw_len as u32,
            payload_crc: crc32fast::hash(&out[payload_at..]),
        };
        out[frame_at..payload_at].copy_from_slice(&frame.to_bytes());
        self.clear();
    }
}

/// The end-of-log record's payload: totals a reader checks its reading against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndOfLog {
    /// Event blocks written before this record.
    pub blocks: u64,
    /// Events in those blocks.
    pub events: u64,
    /// Events the recorder had to lose (also reported by `Lost` records).
    pub lost_events: u64,
    /// Time of the end, nanoseconds since the start.
    pub end_ns: u64,
}

impl EndOfLog {
    /// The complete end-of-log block: frame and uncompressed payload.
    pub fn to_block_bytes(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(32);
        put_u64(&mut payload, self.blocks);
        put_u64(&mut payload, self.events);
        put_u64(&mut payload, self.lost_events);
        put_u64(&mut payload, self.end_ns);
        let frame = BlockFrame {
            kind: BlockKind::End,
            compression: Compression::None,
            thread: METADATA_THREAD,
            event_count: 0,
            first_seq: 0,
            last_seq: 0,
            stored_len: payload.len() as u32,
            raw_len: payload.len() as u32,
            payload_crc: crc32fast::hash(&payload),
        };
        let mut out = frame.to_bytes().to_vec();
        out.extend_from_slice(&payload);
        out
    }

    pub fn parse(payload: &[u8]) -> Result<EndOfLog, BlockError> {
        let mut c = Cursor::new(payload);
        let e = |_| BlockError::Malformed { offset: 0, what: "end-of-log record" };
        Ok(EndOfLog {
            blocks: c.u64().map_err(e)?,
            events: c.u64().map_err(e)?,
            lost_events: c.u64().map_err(e)?,
            end_ns: c.u64().map_err(e)?,
        })
    }
}

/// Why a block's payload could not be decoded. The block is skipped and reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockError {
    /// The stored payload does not match its checksum.
    ChecksumMismatch,
    /// The payload does not decompress to its declared length.
    Decompression,
    /// A compression method this reader does not know.
    UnknownCompression(u8),
    /// A record could not be parsed at `offset` of the decompressed payload.
    Malformed { offset: usize, what: &'static str },
    /// The block claims more than [`MAX_BLOCK_RAW_LEN`] bytes decompressed.
    TooLarge { raw_len: u32 },
}

impl std::fmt::Display for BlockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlockError::ChecksumMismatch => write!(f, "payload checksum mismatch"),
            BlockError::Decompression => write!(f, "payload does not decompress"),
            BlockError::UnknownCompression(c) => write!(f, "unknown compression method {c}"),
            BlockError::Malformed { offset, what } => {
                write!(f, "malformed {what} at payload offset {offset}")
            }
            BlockError::TooLarge { raw_len } => {
                write!(f, "claims {raw_len} bytes decompressed, more than the {} a block may hold", MAX_BLOCK_RAW_LEN)
            }
        }
    }
}

impl std::error::Error for BlockError {}

/// Verifies and decompresses a stored payload.
pub fn unpack_payload(frame: &BlockFrame, stored: &[u8]) -> Result<Vec<u8>, BlockError> {
    let mut buf = Vec::new();
    let n = unpack_payload_into(frame, stored, &mut buf)?.len();
    if matches!(frame.compression, Compression::Lz4) {
        buf.truncate(n);
        Ok(buf)
    } else {
        Ok(stored.to_vec())
    }
}

/// Verifies and decompresses a stored payload, into `buf` if it is compressed: `buf`
/// keeps its memory from one block to the next, so a reader that decodes many blocks
/// neither allocates nor zeroes a buffer for each. Returns the payload.
pub fn unpack_payload_into<'a>(
    frame: &BlockFrame,
    stored: &'a [u8],
    buf: &'a mut Vec<u8>,
) -> Result<&'a [u8], BlockError> {
    if crc32fast::hash(stored) != frame.payload_crc {
        return Err(BlockError::ChecksumMismatch);
    }
    if frame.raw_len > MAX_BLOCK_RAW_LEN {
        return Err(BlockError::TooLarge { raw_len: frame.raw_len });
    }
    match frame.compression {
        Compression::None => {
            if stored.len() != frame.raw_len as usize {
                return Err(BlockError::Decompression);
            }
            Ok(stored)
        }
        Compression::Lz4 => {
            let n = frame.raw_len as usize;
            // LZ4 writes at most 255 bytes per stored byte (a match length's extension
            // bytes): a claim beyond that cannot decompress, and gets no buffer.
            if n > stored.len().saturating_mul(255).saturating_add(16) {
                return Err(BlockError::Decompression);
            }
            if buf.len() < n {
                buf.resize(n, 0);
            }
            let raw = &mut buf[..n];
            match lz4_flex::block::decompress_into(stored, raw) {
                Ok(got) if got == n => Ok(raw),
                _ => Err(BlockError::Decompression),
            }
        }
        Compression::Unknown(c) => Err(BlockError::UnknownCompression(c)),
    }
}

/// Decodes a decompressed payload into its events, in order.
pub fn decode_events(payload: &[u8]) -> EventDecoder<'_> {
    EventDecoder {
        c: Cursor::new(payload),
        prev_seq: 0,
        prev_addr: 0,
        prev_time: 0,
        recent: RecentHeap::default(),
        failed: false,
    }
}

/// Iterator over a payload's events; stops after the first error.
#[derive(Debug, Clone)]
pub struct EventDecoder<'a> {
    c: Cursor<'a>,
    prev_seq: u64,
    prev_addr: u64,
    prev_time: u64,
    recent: RecentHeap,
    failed: bool,
}

const RECENT_LAST: u8 = tag::FREE_RECENT + RECENT as u8 - 1;
const REUSE_LAST: u8 = tag::ALLOC_REUSE + RECENT as u8 - 1;
/// A recent-address index past the list's length: the payload is malformed.
const NO_SUCH_RECENT: CursorError = CursorError::Overlong;

/// Where the decoder puts each event it reads. One decoder serves two outputs: whole
/// [`Event`]s ([`EventDecoder`]) and compact [`Record`]s ([`decode_records`]), so the
/// encoding is read in one place. The hot kinds have methods of their own, which the
/// record output implements without building an `Event`; the rest go to [`Output::event`].
pub(crate) trait Output {
    fn event(&mut self, e: Event);

    #[inline(always)]
    fn alloc(&mut self, seq: u64, domain: DomainId, addr: u64, size: u64, align_log2: u8, stack: StackId) {
        self.event(Event::Alloc { seq, domain, addr, size, align_log2, stack });
    }

    #[inline(always)]
    fn free(&mut self, seq: u64, domain: DomainId, addr: u64, stack: StackId) {
        self.event(Event::Free { seq, domain, addr, stack });
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn realloc(
        &mut self,
        free_seq: u64,
        seq: u64,
        old_addr: u64,
        new_addr: u64,
        new_size: u64,
        align_log2: u8,
        stack: StackId,
    ) {
        self.event(Event::Realloc { free_seq, seq, old_addr, new_addr, new_size, align_log2, stack });
    }

    #[inline(always)]
    fn usage(&mut self, seq: u64, addr: u64, used: u64) {
        self.event(Event::Usage { seq, addr, used });
    }

    #[inline(always)]
    fn context_push(&mut self, ty: ContextTypeId, name: StringId, flags: u8) {
        self.event(Event::ContextPush { ty, name, flags });
    }

    #[inline(always)]
    fn context_pop(&mut self) {
        self.event(Event::ContextPop);
    }

    #[inline(always)]
    fn time(&mut self, ns: u64) {
        self.event(Event::Time { ns });
    }
}

impl<'a> EventDecoder<'a> {
    #[inline(always)]
    fn seq(&mut self) -> Result<u64, CursorError> {
        self.prev_seq = self.prev_seq.wrapping_add(self.c.i64()? as u64);
        Ok(self.prev_seq)
    }

    #[inline(always)]
    fn addr(&mut self) -> Result<u64, CursorError> {
        self.prev_addr = self.prev_addr.wrapping_add(self.c.i64()? as u64);
        Ok(self.prev_addr)
    }

    /// The domain and address of an allocation or a free (`side`) with tag `t`, whose
    /// three forms are `[plain, in_domain, recent]`: an addr field (heap), a domain and an
    /// addr field, or entry `t - recent` of the list the address leaves (heap). The
    /// recent-address lists are updated for a heap event.
    #[inline(always)]
    fn domain_and_addr(
        &mut self,
        t: u8,
        side: HeapSide,
        [plain, in_domain, recent]: [u8; 3],
    ) -> Result<(DomainId, u64), CursorError> {
        if t == plain || t == in_domain {
            let domain = if t == plain { HEAP_DOMAIN } else { self.c.u32()? };
            let addr = self.addr()?;
            if domain == HEAP_DOMAIN {
                self.recent.moved(side, addr);
            }
            return Ok((domain, addr));
        }
        let i = usize::from(t - recent);
        let addr = self.recent.lists(side).0.get(i).ok_or(NO_SUCH_RECENT)?;
        self.prev_addr = addr;
        self.recent.moved_entry(side, i, addr);
        Ok((HEAP_DOMAIN, addr))
    }

    /// Decodes the next record into `out`.
    #[inline(always)]
    fn decode_one(&mut self, out: &mut impl Output) -> Result<(), (&'static str, CursorError)> {
        let t = self.c.u8().map_err(|e| ("tag", e))?;
        match t {
            tag::ALLOC | tag::DOMAIN_ALLOC | tag::ALLOC_REUSE..=REUSE_LAST => {
                let (seq, domain, addr, size, stack, align_log2) = (|| {
                    let seq = self.seq()?;
                    let tags = [tag::ALLOC, tag::DOMAIN_ALLOC, tag::ALLOC_REUSE];
                    let (domain, addr) = self.domain_and_addr(t, HeapSide::Alloc, tags)?;
                    Ok((seq, domain, addr, self.c.u64()?, self.c.u32()?, self.c.u8()?))
                })()
                .map_err(|e| ("alloc", e))?;
                out.alloc(seq, domain, addr, size, align_log2, stack);
            }
            tag::FREE | tag::DOMAIN_FREE | tag::FREE_RECENT..=RECENT_LAST => {
                let (seq, domain, addr, stack) = (|| {
                    let seq = self.seq()?;
                    let tags = [tag::FREE, tag::DOMAIN_FREE, tag::FREE_RECENT];
                    let (domain, addr) = self.domain_and_addr(t, HeapSide::Free, tags)?;
                    Ok((seq, domain, addr, self.c.u32()?))
                })()
                .map_err(|e| ("free", e))?;
                out.free(seq, domain, addr, stack);
            }
            tag::REALLOC => {
                let (free_seq, seq, old_addr, new_addr, new_size, stack, align_log2) = (|| {
                    let free_seq = self.seq()?;
                    let seq = self.seq()?;
                    let old_addr = self.addr()?;
                    let new_addr = self.addr()?;
                    self.recent.freed(old_addr);
                    self.recent.allocated(new_addr);
                    Ok((free_seq, seq, old_addr, new_addr, self.c.u64()?, self.c.u32()?, self.c.u8()?))
                })()
                .map_err(|e| ("realloc", e))?;
                out.realloc(free_seq, seq, old_addr, new_addr, new_size, align_log2, stack);
            }
            tag::USAGE => {
                let (seq, addr, used) =
                    (|| Ok((self.seq()?, self.addr()?, self.c.u64()?)))().map_err(|e| ("usage", e))?;
                out.usage(seq, addr, used);
            }
            tag::CONTEXT_PUSH => {
                let (ty, name, flags) =
                    (|| Ok((self.c.u32()?, self.c.u32()?, self.c.u8()?)))().map_err(|e| ("context push", e))?;
                out.context_push(ty, name, flags);
            }
            tag::CONTEXT_POP => out.context_pop(),
            tag::ATTACH_PUSH => {
                let (seq, addr) = (|| Ok((self.seq()?, self.addr()?)))().map_err(|e| ("attach push", e))?;
                out.event(Event::AttachPush { seq, addr });
            }
            tag::ATTACH_POP => out.event(Event::AttachPop),
            tag::TIME => {
                let d = self.c.i64().map_err(|e| ("time", e))?;
                self.prev_time = self.prev_time.wrapping_add(d as u64);
                out.time(self.prev_time);
            }
            tag::FRAME_START => {
                let (seq, frame) = (|| Ok((self.seq()?, self.c.u64()?)))().map_err(|e| ("frame start", e))?;
                out.event(Event::FrameStart { seq, frame });
            }
            tag::LABEL => {
                let (seq, name) = (|| Ok((self.seq()?, self.c.u32()?)))().map_err(|e| ("label", e))?;
                out.event(Event::Label { seq, name });
            }
            FIRST_SIZED_TAG..=LAST_SIZED_TAG => {
                let len = self.c.u64().map_err(|e| ("record length", e))?;
                let len = usize::try_from(len).map_err(|_| ("record length", CursorError::Overlong))?;
                let body = self.c.bytes(len).map_err(|e| ("record body", e))?;
                out.event(decode_sized(t, body)?);
            }
            _ => return Err(("record tag", CursorError::Overlong)),
        }
        Ok(())
    }

    /// Decodes every remaining record into `out`; the error says where and what.
    #[inline(always)]
    pub(crate) fn decode_all(&mut self, out: &mut impl Output) -> Result<(), BlockError> {
        while !self.c.is_empty() {
            let offset = self.c.position();
            if let Err((what, _)) = self.decode_one(out) {
                self.failed = true;
                return Err(BlockError::Malformed { offset, what });
            }
        }
        Ok(())
    }
}

fn decode_sized(t: u8, body: &[u8]) -> Result<Event, (&'static str, CursorError)> {
    let mut b = Cursor::new(body);
    let what = match t {
        tag::DEFINE_STRING => "string definition",
        tag::DEFINE_STACK => "stack definition",
        tag::DEFINE_CONTEXT_TYPE => "context type definition",
        tag::DEFINE_DOMAIN => "domain definition",
        tag::MODULE => "module record",
        tag::THREAD_INFO => "thread info",
        tag::RESOURCE => "resource descriptor",
        tag::LOST => "lost record",
        tag::PROCESS_MEMORY => "process memory sample",
        _ => return Ok(Event::Unknown { tag: t, len: body.len() as u32 }),
    };
    let r = (|| -> Result<Event, CursorError> {
        Ok(match t {
            tag::DEFINE_STRING => {
                let id = b.u32()?;
                let text = b.string()?;
                Event::DefineString { id, text: text.to_owned() }
            }
            tag::DEFINE_STACK => {
                let id = b.u32()?;
                let n = b.u64()?;
                // Each frame takes at least one byte: never reserve more than the body holds.
                let mut frames = Vec::with_capacity((n as usize).min(b.remaining()));
                let mut prev = 0u64;
                for _ in 0..n {
                    prev = prev.wrapping_add(b.i64()? as u64);
                    frames.push(prev);
                }
                Event::DefineStack { id, frames }
            }
            tag::DEFINE_CONTEXT_TYPE => Event::DefineContextType { id: b.u32()?, name: b.u32()? },
            tag::DEFINE_DOMAIN => {
                let id = b.u32()?;
                let name = b.u32()?;
                let kind = DomainKind::from_byte(b.u8()?);
                let capacity = b.u64()?;
                // Stored as parent + 1 (0 = none), so it needs 33 bits.
                let parent = match b.u64()? {
                    0 => None,
                    p => Some(u32::try_from(p - 1).map_err(|_| CursorError::Overlong)?),
                };
                Event::DefineDomain { id, name, kind, capacity, parent }
            }
            tag::MODULE => {
                let base = b.u64()?;
                let size = b.u64()?;
                let load_bias = b.u64()?;
                let path = b.u32()?;
                let n = usize::try_from(b.u64()?).map_err(|_| CursorError::UnexpectedEnd)?;
                let build_id = b.bytes(n)?.to_vec();
                Event::Module { base, size, load_bias, path, build_id }
            }
            tag::THREAD_INFO => Event::ThreadInfo { os_tid: b.u64()?, name: b.u32()? },
            tag::RESOURCE => {
                let domain = b.u32()?;
                let addr = b.u64()?;
                let desc = ResourceDesc {
                    kind: ResourceKind::from_byte(b.u8()?),
                    width: b.u32()?,
                    height: b.u32()?,
                    depth_or_layers: b.u32()?,
                    mip_levels: b.u32()?,
                    format: b.u32()?,
                    name: b.u32()?,
                };
                Event::Resource { domain, addr, desc }
            }
            tag::LOST => Event::Lost { events: b.u64()?, bytes: b.u64()?, reason: LossReason::from_byte(b.u8()?) },
            tag::PROCESS_MEMORY => Event::ProcessMemory { time: b.u64()?, resident: b.u64()?, committed: b.u64()? },
            _ => unreachable!("filtered above"),
        })
    })();
    // Bytes left in the body are fields of a newer minor version: ignored.
    r.map_err(|e| (what, e))
}

/// The [`Output`] of [`EventDecoder`]'s iterator: the one event just decoded.
impl Output for Option<Event> {
    #[inline(always)]
    fn event(&mut self, e: Event) {
        *self = Some(e);
    }
}

impl Iterator for EventDecoder<'_> {
    type Item = Result<Event, BlockError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.c.is_empty() {
            return None;
        }
        let offset = self.c.position();
        let mut out = None;
        match self.decode_one(&mut out) {
            Ok(()) => out.map(Ok),
            Err((what, _)) => {
                self.failed = true;
                Some(Err(BlockError::Malformed { offset, what }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*: a fixed pseudo-random sequence, the same on every machine.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A recent-address list as SPEC.md §6.1 words it: most recent first, at most 16.
    #[derive(Default)]
    struct SpecList(Vec<u64>);

    impl SpecList {
        fn push(&mut self, a: u64) {
            self.0.insert(0, a);
            self.0.truncate(RECENT);
        }
        fn remove_first(&mut self, a: u64) {
            if let Some(i) = self.0.iter().position(|&x| x == a) {
                self.0.remove(i);
            }
        }
    }

    /// The vectorized comparison agrees with the plain loop, also for entries that share
    /// only their low or only their high 32 bits with the address.
    #[test]
    fn equal_slots_matches_whole_addresses_only() {
        let mut rng = Rng(0x5151_7e7e_0101_abcd);
        for _ in 0..20_000 {
            let addr = rng.next();
            let mut addrs = [0u64; RECENT];
            for a in addrs.iter_mut() {
                *a = match rng.below(4) {
                    0 => addr,
                    1 => (addr & 0xffff_ffff) | (rng.next() << 32),
                    2 => (addr & !0xffff_ffff) | (rng.next() & 0xffff_ffff),
                    _ => rng.next(),
                };
            }
            let plain = addrs.iter().enumerate().fold(0u32, |m, (j, &a)| m | u32::from(a == addr) << (2 * j));
            assert_eq!(equal_slots(&addrs, addr), plain, "{addrs:x?} {addr:#x}");
        }
    }

    #[test]
    fn ring_lists_behave_as_the_spec_lists() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut ring, mut spec) = (RecentAddrs::default(), SpecList::default());
        for step in 0..200_000 {
            // Few distinct addresses, so that the list often holds one twice.
            let a = 0x1000 + rng.below(24) * 16;
            match rng.below(3) {
                0 => {
                    ring.push(a);
                    spec.push(a);
                }
                1 => {
                    ring.remove(a);
                    spec.remove_first(a);
                }
                _ => {
                    if let Some(i) = ring.find(a) {
                        ring.remove_at(i);
                    }
                    spec.remove_first(a);
                }
            }
            assert_eq!(ring.len, spec.0.len(), "step {step}");
            for i in 0..RECENT + 1 {
                assert_eq!(ring.get(i), spec.0.get(i).copied(), "entry {i} at step {step}");
            }
            for k in 0..24 {
                let b = 0x1000 + k * 16;
                assert_eq!(ring.find(b), spec.0.iter().position(|&x| x == b), "find {b:#x} at step {step}");
            }
        }
    }

    /// A deterministic stream that exercises every compact record and both recent-address
    /// lists (hits at every index, duplicates, misses), in blocks of varying length.
    fn churn_stream(rng: &mut Rng, n: usize) -> Vec<Event> {
        let mut seq = 1u64;
        let mut events = Vec::with_capacity(n);
        for i in 0..n {
            seq = seq.wrapping_add(1 + rng.below(3));
            // 48 hot addresses (list hits and misses), and now and then a far one.
            let addr = if rng.below(10) == 0 {
                0x7f00_0000_0000 + rng.below(1 << 30) * 16
            } else {
                0x5555_0000_0000 + rng.below(48) * 64
            };
            let stack = rng.below(300) as u32;
            events.push(match rng.below(100) {
                0..=41 => Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size: rng.below(5000), align_log2: 3, stack },
                42..=83 => Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: stack % 2 },
                84..=88 => {
                    let new_addr = if rng.below(2) == 0 { addr } else { addr + 64 };
                    seq += 1;
                    Event::Realloc {
                        free_seq: seq - 1,
                        seq,
                        old_addr: addr,
                        new_addr,
                        new_size: rng.below(9000),
                        align_log2: 4,
                        stack,
                    }
                }
                89..=90 => Event::Alloc { seq, domain: 2, addr, size: 4096, align_log2: 12, stack },
                91 => Event::Free { seq, domain: 2, addr, stack: 0 },
                92 => Event::Usage { seq, addr, used: rng.below(100) },
                93 => Event::AttachPush { seq, addr },
                94 => Event::AttachPop,
                95 => Event::ContextPush { ty: 1, name: stack, flags: (i % 2) as u8 },
                96 => Event::ContextPop,
                97 => Event::Time { ns: seq * 40 },
                98 => Event::Label { seq, name: 7 },
                _ => Event::DefineString { id: i as u32, text: format!("string {i}") },
            });
            // Now and then a sequence number from the past (another thread's order).
            if rng.below(50) == 0 {
                seq = seq.saturating_sub(rng.below(20));
            }
        }
        events
    }

    /// The record decoder gives, block by block, exactly the events of the event decoder
    /// as records: the same decoder state, only the output differs. Also for a payload
    /// cut short: the records before the error, and the same error.
    #[test]
    fn records_decode_as_the_events_do() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let events = churn_stream(&mut rng, 30_000);
        for chunk in events.chunks(2_500) {
            let mut enc = EventEncoder::new();
            chunk.iter().for_each(|e| enc.push(e));
            let payload = enc.payload().to_vec();
            for cut in [payload.len(), payload.len() * 2 / 3] {
                let p = &payload[..cut];
                let mut expected = crate::record::Records::default();
                let mut expected_err = None;
                for e in decode_events(p) {
                    match e {
                        Ok(e) => expected.push(e),
                        Err(err) => expected_err = Some(err),
                    }
                }
                let mut got = crate::record::Records::default();
                let err = crate::record::decode_records(p, &mut got).err();
                assert_eq!(got.records, expected.records);
                assert_eq!(got.events, expected.events);
                assert_eq!(err, expected_err);
            }
        }
    }

    /// The encoded bytes of `churn_stream`, framed and compressed, pinned: their length
    /// and CRC-32 as the encoder wrote them before its recent-address lists became rings
    /// (commit a5313df). Encoding changes that keep the output byte-identical keep this.
    #[test]
    fn encoding_is_byte_identical_to_the_pinned_output() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let events = churn_stream(&mut rng, 60_000);
        let mut enc = EventEncoder::new();
        let mut out = Vec::new();
        let mut raw = Vec::new();
        for (i, e) in events.iter().enumerate() {
            enc.push(e);
            // Blocks of uneven length, so the lists restart at many states.
            if rng.below(3000) == 0 || i + 1 == events.len() {
                raw.extend_from_slice(enc.payload());
                enc.finish_into((i % 5) as u32, &mut out);
            }
        }
        assert_eq!((raw.len(), crc32fast::hash(&raw)), (436_875, 0xd0ff_cf62), "raw payloads");
        assert_eq!((out.len(), crc32fast::hash(&out)), (382_787, 0x7eae_7b0b), "blocks");
    }
}
