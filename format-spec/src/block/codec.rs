//! The encoding of events inside a block's payload (SPEC.md §5–§6): [`EventEncoder`]
//! (events → payload, with the per-block delta state) and the one decoder, generic over
//! where it reads the fields (a payload, or a columns block's columns: `Fields`) and what
//! it hands the events to ([`Output`]): [`EventDecoder`] is it over a payload, as an
//! iterator of events.

use super::columns::{ColumnFields, ColumnsBlob};
use super::fields::Fields;
use super::recent::{HeapSide, RecentHeap};
use super::*;
use crate::varint::{put_i64, put_str, put_u64, unzigzag, zigzag, Cursor, CursorError};

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
pub(super) const MAX_COMPACT: usize = 64;

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

/// Writes one record into the room made past the payload: whoever makes an `Out` made
/// room in `buf` past `pos` for the longest record it writes there (`MAX_COMPACT` for
/// a compact record, the body's length and its header for a sized one).
struct Out<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Out<'_> {
    #[inline(always)]
    fn u8(&mut self, b: u8) {
        debug_assert!(self.pos < self.buf.len(), "a record past the room made for it");
        // SAFETY: `pos` is inside the room made for the record being written (see `Out`):
        // no record is longer than what its maker reserved. Unchecked, because this store
        // runs for every byte of every event and its bounds check cost about as much.
        unsafe { *self.buf.get_unchecked_mut(self.pos) = b };
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

    /// A heap allocation's compact record (`ALLOC` or `ALLOC_REUSE`).
    #[inline(always)]
    fn heap_alloc(&mut self, o: &mut Out<'_>, seq: u64, addr: u64, size: u64, align_log2: u8, stack: u32) {
        // The index found is the first entry equal to `addr`: the one the list update
        // removes (no second search).
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
        o.u64(size);
        o.u64(u64::from(stack));
        o.u8(align_log2);
    }

    /// A heap free's compact record (`FREE` or `FREE_RECENT`).
    #[inline(always)]
    fn heap_free(&mut self, o: &mut Out<'_>, seq: u64, addr: u64, stack: u32) {
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
        o.u64(u64::from(stack));
    }

    /// Encodes a compact record (SPEC.md §6.2) into `o`; false for the other events.
    #[inline(always)]
    fn compact(&mut self, o: &mut Out<'_>, event: &Event) -> bool {
        match *event {
            Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size, align_log2, stack } => {
                self.heap_alloc(o, seq, addr, size, align_log2, stack);
            }
            Event::Alloc { seq, domain, addr, size, align_log2, stack } => {
                o.u8(tag::DOMAIN_ALLOC);
                self.seq(o, seq);
                o.u64(u64::from(domain));
                self.addr(o, addr);
                o.u64(size);
                o.u64(u64::from(stack));
                o.u8(align_log2);
            }
            Event::Free { seq, domain: HEAP_DOMAIN, addr, stack } => self.heap_free(o, seq, addr, stack),
            Event::Free { seq, domain, addr, stack } => {
                o.u8(tag::DOMAIN_FREE);
                self.seq(o, seq);
                o.u64(u64::from(domain));
                self.addr(o, addr);
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

    /// Makes room for one more compact record past the payload.
    #[inline(always)]
    fn compact_room(&mut self) {
        if self.buf.len() - self.pos < MAX_COMPACT {
            self.make_room(MAX_COMPACT);
        }
    }

    /// Appends a heap allocation: the bytes of `push(&Event::Alloc { domain: HEAP_DOMAIN, .. })`,
    /// without building the event and matching it again (the recorder's hot path).
    #[inline]
    pub fn push_heap_alloc(&mut self, seq: u64, addr: u64, size: u64, align_log2: u8, stack: u32) {
        self.count += 1;
        self.compact_room();
        let mut o = Out { buf: &mut self.buf, pos: self.pos };
        self.state.heap_alloc(&mut o, seq, addr, size, align_log2, stack);
        self.pos = o.pos;
    }

    /// Appends a heap free: the bytes of `push(&Event::Free { domain: HEAP_DOMAIN, .. })`,
    /// without building the event.
    #[inline]
    pub fn push_heap_free(&mut self, seq: u64, addr: u64, stack: u32) {
        self.count += 1;
        self.compact_room();
        let mut o = Out { buf: &mut self.buf, pos: self.pos };
        self.state.heap_free(&mut o, seq, addr, stack);
        self.pos = o.pos;
    }

    /// Appends one event.
    pub fn push(&mut self, event: &Event) {
        self.count += 1;
        self.compact_room();
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
            Event::Budget { domain, time, budget, usage } => self.sized(tag::BUDGET, |b| {
                put_u64(b, u64::from(domain));
                put_u64(b, time);
                put_u64(b, budget);
                put_u64(b, usage);
            }),
            Event::Display { width, height } => self.sized(tag::DISPLAY, |b| {
                put_u64(b, u64::from(width));
                put_u64(b, u64::from(height));
            }),
            Event::BeforeStart { allocations, frees, reallocs, bytes, live, untracked } => {
                self.sized(tag::BEFORE_START, |b| {
                    for v in [allocations, frees, reallocs, bytes, live, untracked] {
                        put_u64(b, v);
                    }
                })
            }
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
        self.finish_compressed(thread, &mut PayloadCompressor::default(), out)
    }

    /// [`finish_into`](Self::finish_into) with the compressor's method (stored as is when
    /// that is not smaller).
    pub fn finish_compressed(&mut self, thread: u32, compressor: &mut PayloadCompressor, out: &mut Vec<u8>) {
        let seqs = self.seq_range();
        frame_payload(thread, self.count, seqs, &self.buf[..self.pos], compressor, out);
        self.clear();
    }
}

/// Appends an event block to `out`: its frame (of `thread`, with `event_count` events and
/// the sequence range `(first_seq, last_seq)`), then `raw`, its payload, compressed by
/// `compressor`, or stored as it is when that is not smaller (SPEC.md §4.2).
pub fn frame_payload(
    thread: u32,
    event_count: u32,
    (first_seq, last_seq): (u64, u64),
    raw: &[u8],
    compressor: &mut PayloadCompressor,
    out: &mut Vec<u8>,
) {
    let frame_at = out.len();
    out.resize(frame_at + FRAME_LEN, 0);
    let payload_at = out.len();
    out.resize(payload_at + compressor.room(raw.len()), 0);
    let (compression, stored_len) = match compressor.compress(raw, &mut out[payload_at..]) {
        Some(stored) => stored,
        None => {
            out.truncate(payload_at);
            out.extend_from_slice(raw);
            (Compression::None, raw.len())
        }
    };
    out.truncate(payload_at + stored_len);
    let frame = BlockFrame {
        kind: BlockKind::Events,
        compression,
        thread,
        event_count,
        first_seq,
        last_seq,
        stored_len: stored_len as u32,
        raw_len: raw.len() as u32,
        payload_crc: crc32fast::hash(&out[payload_at..]),
    };
    out[frame_at..payload_at].copy_from_slice(&frame.to_bytes());
}

/// Decodes a decompressed payload into its events, in order.
pub fn decode_events(payload: &[u8]) -> EventDecoder<'_> {
    EventDecoder { d: Decoder::new(Cursor::new(payload)), failed: false }
}

/// Iterator over a payload's events; stops after the first error.
#[derive(Debug, Clone)]
pub struct EventDecoder<'a> {
    d: Decoder<Cursor<'a>>,
    failed: bool,
}

impl EventDecoder<'_> {
    /// Bytes of the payload decoded so far: the difference before and after an event is the
    /// size of its record.
    #[inline]
    pub fn position(&self) -> usize {
        self.d.f.position()
    }
}

/// Decodes every record of a payload into `out`; the error says where and what.
#[inline(always)]
pub(crate) fn decode_payload(payload: &[u8], out: &mut impl Output) -> Result<(), BlockError> {
    Decoder::new(Cursor::new(payload)).decode_all(out)
}

/// Decodes a columns block's columns (`blob`, SPEC.md §4.2) into `out` without joining
/// them into their payload first: the same decoder, reading each field from its column.
/// `Err` wherever joining the columns into a payload of `raw_len` bytes or decoding that
/// payload would fail; the caller then takes that way to learn what failed, and where
/// (an offset in the payload, which only the joined payload has).
pub(crate) fn decode_columns(blob: ColumnsBlob<'_>, raw_len: usize, out: &mut impl Output) -> Result<(), ()> {
    let mut d = Decoder::new(ColumnFields::new(blob).map_err(|_| ())?);
    d.decode_all(out).map_err(|_| ())?;
    (d.f.joined_len() == Some(raw_len)).then_some(()).ok_or(())
}

/// Decodes a payload's events into `out`, each with the length of its record in the
/// payload: [`decode_events`] and its positions, in one call. On an error, `out` holds
/// the events before it.
pub(crate) fn decode_payload_with_lengths(payload: &[u8], out: &mut Vec<(Event, u32)>) -> Result<(), BlockError> {
    decode_all_with_lengths(&mut Decoder::new(Cursor::new(payload)), out)
}

/// [`decode_payload_with_lengths`] of the payload that a columns block's columns (`blob`) join
/// into, read from the columns; `Err` as [`decode_columns`].
pub(crate) fn decode_columns_with_lengths(
    blob: ColumnsBlob<'_>,
    raw_len: usize,
    out: &mut Vec<(Event, u32)>,
) -> Result<(), ()> {
    let mut d = Decoder::new(ColumnFields::new(blob).map_err(|_| ())?);
    decode_all_with_lengths(&mut d, out).map_err(|_| ())?;
    (d.f.joined_len() == Some(raw_len)).then_some(()).ok_or(())
}

/// Every record of `d` into `out`, as [`EventDecoder`] yields them, with its length.
fn decode_all_with_lengths<'a, F: Fields<'a>>(
    d: &mut Decoder<F>,
    out: &mut Vec<(Event, u32)>,
) -> Result<(), BlockError> {
    while !d.f.is_empty() {
        let (offset, at) = (d.f.position(), d.f.payload_position());
        let mut event = None;
        d.decode_one(&mut event).map_err(|(what, _)| BlockError::Malformed { offset, what })?;
        let Some(event) = event else { break };
        out.push((event, (d.f.payload_position() - at) as u32));
    }
    Ok(())
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

    /// About `records` more records are coming (an upper bound a corrupt block cannot
    /// inflate past its payload's length).
    #[inline(always)]
    fn reserve(&mut self, _records: usize) {}

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

/// The decoder: the per-block delta state of SPEC.md §6.1 over a source of fields.
#[derive(Debug, Clone)]
struct Decoder<F> {
    f: F,
    prev_seq: u64,
    prev_addr: u64,
    prev_time: u64,
    recent: RecentHeap,
}

impl<'a, F: Fields<'a>> Decoder<F> {
    fn new(f: F) -> Self {
        Decoder { f, prev_seq: 0, prev_addr: 0, prev_time: 0, recent: RecentHeap::default() }
    }

    #[inline(always)]
    fn seq(&mut self) -> Result<u64, CursorError> {
        self.prev_seq = self.prev_seq.wrapping_add(self.f.seq_delta()? as u64);
        Ok(self.prev_seq)
    }

    #[inline(always)]
    fn addr(&mut self, side: HeapSide) -> Result<u64, CursorError> {
        self.prev_addr = self.prev_addr.wrapping_add(self.f.addr_delta(side)? as u64);
        Ok(self.prev_addr)
    }

    #[inline(always)]
    fn u32(&mut self) -> Result<u32, CursorError> {
        u32::try_from(self.f.other()?).map_err(|_| CursorError::Overlong)
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
            let domain = if t == plain { HEAP_DOMAIN } else { self.u32()? };
            let addr = self.addr(side)?;
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
        let t = self.f.tag().map_err(|e| ("tag", e))?;
        match t {
            tag::ALLOC | tag::DOMAIN_ALLOC | tag::ALLOC_REUSE..=REUSE_LAST => {
                let (seq, domain, addr, size, stack, align_log2) = (|| {
                    let seq = self.seq()?;
                    let tags = [tag::ALLOC, tag::DOMAIN_ALLOC, tag::ALLOC_REUSE];
                    let (domain, addr) = self.domain_and_addr(t, HeapSide::Alloc, tags)?;
                    let (size, stack) = self.f.size_and_stack()?;
                    Ok((seq, domain, addr, size, stack, self.f.align()?))
                })()
                .map_err(|e| ("alloc", e))?;
                out.alloc(seq, domain, addr, size, align_log2, stack);
            }
            tag::FREE | tag::DOMAIN_FREE | tag::FREE_RECENT..=RECENT_LAST => {
                let (seq, domain, addr, stack) = (|| {
                    let seq = self.seq()?;
                    let tags = [tag::FREE, tag::DOMAIN_FREE, tag::FREE_RECENT];
                    let (domain, addr) = self.domain_and_addr(t, HeapSide::Free, tags)?;
                    Ok((seq, domain, addr, self.f.stack()?))
                })()
                .map_err(|e| ("free", e))?;
                out.free(seq, domain, addr, stack);
            }
            tag::REALLOC => {
                let (free_seq, seq, old_addr, new_addr, new_size, stack, align_log2) = (|| {
                    let free_seq = self.seq()?;
                    let seq = self.seq()?;
                    let old_addr = self.addr(HeapSide::Free)?;
                    let new_addr = self.addr(HeapSide::Alloc)?;
                    self.recent.freed(old_addr);
                    self.recent.allocated(new_addr);
                    let (new_size, stack) = self.f.size_and_stack()?;
                    Ok((free_seq, seq, old_addr, new_addr, new_size, stack, self.f.align()?))
                })()
                .map_err(|e| ("realloc", e))?;
                out.realloc(free_seq, seq, old_addr, new_addr, new_size, align_log2, stack);
            }
            tag::USAGE => {
                let (seq, addr, used) =
                    (|| Ok((self.seq()?, self.addr(HeapSide::Alloc)?, self.f.size()?)))().map_err(|e| ("usage", e))?;
                out.usage(seq, addr, used);
            }
            tag::CONTEXT_PUSH => {
                let (ty, name, flags) =
                    (|| Ok((self.u32()?, self.u32()?, self.f.other_u8()?)))().map_err(|e| ("context push", e))?;
                out.context_push(ty, name, flags);
            }
            tag::CONTEXT_POP => out.context_pop(),
            tag::ATTACH_PUSH => {
                let (seq, addr) =
                    (|| Ok((self.seq()?, self.addr(HeapSide::Alloc)?)))().map_err(|e| ("attach push", e))?;
                out.event(Event::AttachPush { seq, addr });
            }
            tag::ATTACH_POP => out.event(Event::AttachPop),
            tag::TIME => {
                let d = self.f.other().map(unzigzag).map_err(|e| ("time", e))?;
                self.prev_time = self.prev_time.wrapping_add(d as u64);
                out.time(self.prev_time);
            }
            tag::FRAME_START => {
                let (seq, frame) = (|| Ok((self.seq()?, self.f.other()?)))().map_err(|e| ("frame start", e))?;
                out.event(Event::FrameStart { seq, frame });
            }
            tag::LABEL => {
                let (seq, name) = (|| Ok((self.seq()?, self.u32()?)))().map_err(|e| ("label", e))?;
                out.event(Event::Label { seq, name });
            }
            FIRST_SIZED_TAG..=LAST_SIZED_TAG => {
                let body = self.f.sized_body()?;
                out.event(decode_sized(t, body)?);
            }
            _ => return Err(("record tag", CursorError::Overlong)),
        }
        Ok(())
    }

    /// Decodes every remaining record into `out`; the error says where and what.
    #[inline(always)]
    fn decode_all(&mut self, out: &mut impl Output) -> Result<(), BlockError> {
        while !self.f.is_empty() {
            let offset = self.f.position();
            if let Err((what, _)) = self.decode_one(out) {
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
        tag::BUDGET => "budget sample",
        tag::DISPLAY => "display size",
        tag::BEFORE_START => "calls before start",
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
            tag::BUDGET => Event::Budget { domain: b.u32()?, time: b.u64()?, budget: b.u64()?, usage: b.u64()? },
            tag::DISPLAY => Event::Display { width: b.u32()?, height: b.u32()? },
            tag::BEFORE_START => Event::BeforeStart {
                allocations: b.u64()?,
                frees: b.u64()?,
                reallocs: b.u64()?,
                bytes: b.u64()?,
                live: b.u64()?,
                untracked: b.u64()?,
            },
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
        if self.failed || self.d.f.is_empty() {
            return None;
        }
        let offset = self.d.f.position();
        let mut out = None;
        match self.d.decode_one(&mut out) {
            Ok(()) => out.map(Ok),
            Err((what, _)) => {
                self.failed = true;
                Some(Err(BlockError::Malformed { offset, what }))
            }
        }
    }
}
