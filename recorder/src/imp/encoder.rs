//! Encoders: threads' raw records → events → framed, compressed blocks → the file.
//!
//! Each recorded thread's stream belongs to one [`Encoder`] (stream id mod the number of
//! encoders), which consumes that thread's buffers in order; so a stream's blocks reach
//! the file in stream order (SPEC.md §4.4) however many encoders run. An encoder frames
//! and compresses a block on its own thread and only takes the [`Output`] lock to copy
//! the finished bytes into the file's buffer.
//!
//! Ids are global to the file (SPEC.md §7.1), so the encoders share the interning tables
//! ([`Shared`]); each keeps a private cache in front of them, so that a string or
//! callstack it has seen before costs no lock. The encoder that interns something first
//! defines it in the stream that used it; another stream's block may use the id earlier
//! in the file, which readers allow (they collect definitions before they replay).
//!
//! Everything an encoder allocates passes through the hook unrecorded: it runs on the
//! writer thread or on an encoder thread, both marked as the recorder's own.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::io::{self, BufWriter};
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use memreplay_format::{
    Event, EventEncoder, FramedBlock, LogWriter, LossReason, PayloadCompression, ResourceDesc, ResourceKind,
};

use super::buffer::BufPtr;
use super::record::{self, RecordReader};
use super::{Session, DOMAINS};

/// Encoded bytes after which a stream's block is written out.
const BLOCK_TARGET: usize = 64 << 10;

/// Shards of the shared callstack table: encoders that miss their caches at once rarely
/// wait for each other.
const STACK_SHARDS: usize = 16;

/// FxHash: callstacks are hashed once per recorded event; SipHash would be the
/// encoder's biggest cost.
#[derive(Default)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Whole words without a variable-length copy (callstacks are all whole words).
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.write_u64(u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]));
        }
        for &b in words.remainder() {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxBuild = BuildHasherDefault<FxHasher>;
type FxMap<K, V> = HashMap<K, V, FxBuild>;

/// A callstack's raw frames, owned by the shared table, as a key of an encoder's cache:
/// the cache holds a pointer and an id per callstack, not a second copy of its frames.
#[derive(Clone, Copy)]
struct StackRef(*const [u8]);

impl StackRef {
    fn frames(&self) -> &[u8] {
        // SAFETY: the pointer is to a boxed key of `Shared::stacks`, which is never
        // removed or changed while any encoder (and so its cache) exists: the encoders
        // hold the `Arc<Shared>` that owns it, and a `Box`'s contents stay where they are
        // when the table moves the box.
        unsafe { &*self.0 }
    }
}

// SAFETY: what the pointer points to is never written after the shared table made it
// (see `frames`), so any thread may read it; another encoder inserting into the same shard
// moves boxes, never their contents.
unsafe impl Send for StackRef {}

impl std::hash::Hash for StackRef {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.frames().hash(h);
    }
}

impl PartialEq for StackRef {
    fn eq(&self, other: &Self) -> bool {
        self.frames() == other.frames()
    }
}

impl Eq for StackRef {}

impl std::borrow::Borrow<[u8]> for StackRef {
    fn borrow(&self) -> &[u8] {
        self.frames()
    }
}

/// Locks `m`, whatever a panic elsewhere left in it (the tables stay consistent: every
/// update is one insert).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The id of `key` in a shared table (ids dense from 1), and whether this call gave it.
fn shared_id<K: std::hash::Hash + Eq>(table: &Mutex<HashMap<K, u32>>, key: K) -> (u32, bool) {
    let mut table = lock(table);
    let next = table.len() as u32 + 1;
    match table.entry(key) {
        Entry::Occupied(e) => (*e.get(), false),
        Entry::Vacant(e) => (*e.insert(next), true),
    }
}

/// The log file and what reached it, shared by everyone who writes blocks.
pub(crate) struct Output {
    /// `None` once the end record is written.
    log: Option<LogWriter<BufWriter<File>>>,
    pub path: PathBuf,
    /// Events that never reached the file: counted from the first write failure on.
    pub lost_events: u64,
    /// Blocks, events and bytes (header included) that reached the file at the last flush.
    pub flushed_blocks: u64,
    pub flushed_events: u64,
    pub flushed_bytes: u64,
    /// A write or flush failed: nothing more is written, every later event is lost.
    pub failed: bool,
}

impl Output {
    pub fn new(log: LogWriter<BufWriter<File>>, path: PathBuf) -> Self {
        Output {
            log: Some(log),
            path,
            lost_events: 0,
            flushed_blocks: 0,
            flushed_events: 0,
            flushed_bytes: 0,
            failed: false,
        }
    }

    /// Writes one framed block, or counts its events as lost once the log is given up.
    fn write(&mut self, block: &FramedBlock) {
        let Some(log) = self.log.as_mut().filter(|_| !self.failed) else {
            self.lost_events += u64::from(block.event_count());
            return;
        };
        if let Err(e) = log.write_framed(block) {
            self.fail("write", &e);
        }
    }

    /// Flushes what was written to the file; what reached it is what `stop` reports.
    pub fn flush(&mut self) {
        let Some(log) = self.log.as_mut().filter(|_| !self.failed) else { return };
        match log.flush() {
            Ok(()) => {
                self.flushed_blocks = log.blocks();
                self.flushed_events = log.events();
                self.flushed_bytes = log.bytes();
            }
            Err(e) => self.fail("flush", &e),
        }
    }

    /// The first write failure: says it once on stderr (no `tracing` subscriber may
    /// exist, and nobody may read one) and gives the log up. The events written since
    /// the last flush may not be in the file: they are counted as lost, like every
    /// later one. A log given up has no end record: it reads as cut off where the
    /// failure left it.
    #[cold]
    fn fail(&mut self, what: &str, e: &io::Error) {
        self.failed = true;
        let written = self.log.as_ref().map_or(0, |l| l.events());
        self.lost_events += written - self.flushed_events;
        super::say_on_stderr(&format!(
            "memreplay: cannot {what} the log {}: {e}; recording stops writing: {} events ({} bytes) were \
             written, later events are counted as lost\n",
            self.path.display(),
            self.flushed_events,
            self.flushed_bytes
        ));
    }

    /// The log writer, to end the log (`None` if it was taken already).
    pub fn take_log(&mut self) -> Option<LogWriter<BufWriter<File>>> {
        self.log.take()
    }
}

/// What every encoder shares: the file, and the interning tables that give ids.
pub(crate) struct Shared {
    pub session: &'static Session,
    pub output: Mutex<Output>,
    strings: Mutex<HashMap<Box<str>, u32>>,
    context_types: Mutex<HashMap<&'static str, u32>>,
    /// Callstacks by their raw frames as recorded (little-endian words), sharded by hash.
    stacks: [Mutex<FxMap<Box<[u8]>, u32>>; STACK_SHARDS],
    /// Callstack ids given so far.
    stack_count: AtomicU32,
    /// Highest domain id whose definition some stream holds.
    domains_written: Mutex<u32>,
    /// How every encoder compresses its blocks.
    compression: PayloadCompression,
}

impl Shared {
    pub fn new(session: &'static Session, output: Output, compression: PayloadCompression) -> Self {
        Shared {
            compression,
            session,
            output: Mutex::new(output),
            strings: Mutex::default(),
            context_types: Mutex::default(),
            stacks: std::array::from_fn(|_| Mutex::default()),
            stack_count: AtomicU32::new(0),
            domains_written: Mutex::new(0),
        }
    }

    pub fn output(&self) -> MutexGuard<'_, Output> {
        lock(&self.output)
    }

    /// Distinct callstacks interned so far.
    pub fn stacks(&self) -> u32 {
        self.stack_count.load(Ordering::Relaxed)
    }
}

/// The little-endian word at `at` of a record's fixed fields.
#[inline(always)]
fn word<const N: usize>(fields: &[u8; N], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&fields[at..at + 8]);
    u64::from_le_bytes(w)
}

/// One thread's stream as its encoder sees it.
#[derive(Default)]
struct Stream {
    /// Index of the next buffer this thread will hand off.
    expected_index: u64,
    /// The stream's clock at the last `Time` record (each block restates it).
    last_time: u64,
    /// The stream's last callstack and its id: a thread often allocates from the same
    /// place several times in a row (27 % of allocations on a serde_json program, 78 % on
    /// `log_size`'s workload), and a compare is cheaper than a hash and a probe.
    last_stack: Option<(StackRef, u32)>,
    enc: EventEncoder,
}

/// Encodes the streams `id % of == index`, and no other: a stream's blocks must reach the
/// file in stream order, which only one encoder per stream can keep. Every thread id an
/// encoder is given is one of its own: its threads' buffers come through its channel
/// (`Session::hand_off`, by id mod `of`), `collect_idle` takes only its threads' slots,
/// and the writer's encoder, 0 of 1, owns every stream (it writes the metadata stream,
/// and all of them when it encodes alone).
pub(crate) struct Encoder {
    index: u32,
    of: NonZeroU32,
    /// This encoder's streams: thread `id`'s at `id / of` (its ids, `index` plus a
    /// multiple of `of`, give dense slots from 0); `None` before a thread's first event
    /// and once it has exited. Ids are never reused, so the vector keeps a slot for every
    /// thread of this encoder that ever was: 8 bytes per thread across all encoders.
    /// Boxed, so that a thread's stream state (about 1.8 KiB) goes when its last buffer
    /// has been encoded.
    streams: Vec<Option<Box<Stream>>>,
    /// Private caches of the shared tables.
    strings: HashMap<Box<str>, u32>,
    stacks: FxMap<StackRef, u32>,
    context_types: HashMap<&'static str, u32>,
    /// The block being framed (its buffer is reused).
    framed: FramedBlock,
    /// Declared last, so dropped after the caches that point into its callstack table.
    shared: Arc<Shared>,
}

impl Encoder {
    pub fn new(shared: Arc<Shared>, index: u32, of: NonZeroU32) -> Self {
        debug_assert!(index < of.get());
        Encoder {
            index,
            of,
            streams: Vec::new(),
            strings: HashMap::new(),
            stacks: FxMap::default(),
            context_types: HashMap::new(),
            framed: FramedBlock::compressed_with(shared.compression),
            shared,
        }
    }

    /// Whether `thread`'s stream is this encoder's.
    fn owns(&self, thread: u32) -> bool {
        thread % self.of == self.index
    }

    /// Where `thread`'s stream is in `streams`. Inline: it runs for every event.
    #[inline(always)]
    fn slot(&self, thread: u32) -> usize {
        debug_assert!(self.owns(thread), "an encoder is given only its own streams");
        (thread / self.of) as usize
    }

    /// The thread whose stream is at `slot` of `streams`.
    fn thread_at(&self, slot: usize) -> u32 {
        slot as u32 * self.of.get() + self.index
    }

    /// A buffer handed off through the channel: everything its owner published.
    pub fn take_full(&mut self, b: BufPtr) {
        // SAFETY: the owner gave the buffer up; only this thread touches it now.
        let (thread, index, last, len) =
            unsafe { ((*b.0).thread, (*b.0).index, (*b.0).last, (*b.0).published.load(Ordering::Acquire)) };
        debug_assert!(self.owns(thread), "a buffer reaches its stream's encoder");
        let stream = self.stream(thread);
        debug_assert_eq!(stream.expected_index, index, "a thread's buffers arrive in order");
        stream.expected_index = index + 1;
        self.consume(b, len);
        let session = self.shared.session;
        if last {
            self.write_stream(thread);
            // The thread is gone: free its stream's state (its slot stays, `None`).
            let slot = self.slot(thread);
            self.streams[slot] = None;
            lock(&session.slots).retain(|s| s.thread != thread);
        }
        session.pool.give(b);
    }

    /// What idle (and busy) threads of this encoder's streams have published in their
    /// current buffers.
    pub fn collect_idle(&mut self) {
        let mut slots: Vec<_> = lock(&self.shared.session.slots).clone();
        slots.retain(|s| self.owns(s.thread));
        for slot in slots {
            let cur = slot.current.load(Ordering::Acquire);
            if cur.is_null() {
                continue;
            }
            // SAFETY: a buffer in a slot is owned by its thread and only returned to the
            // pool by its stream's encoder, after it arrives through the channel.
            let (index, published) = unsafe { ((*cur).index, (*cur).published.load(Ordering::Acquire)) };
            let expected = self.stream(slot.thread).expected_index;
            // A buffer whose predecessor is still in the channel waits for its turn.
            if index == expected {
                self.consume(BufPtr(cur), published);
            }
        }
    }

    /// Turns the records of `b` from its consumed mark up to `upto` into events.
    fn consume(&mut self, b: BufPtr, upto: usize) {
        // SAFETY: the stream's encoder owns `consumed` of every buffer it received.
        let from = unsafe { (*b.0).consumed };
        if upto <= from {
            return;
        }
        // SAFETY: `thread` was set before the buffer was published and does not change.
        let thread = unsafe { (*b.0).thread };
        // SAFETY: `from..upto` was published by the owner (release/acquire) and is never
        // written again.
        let bytes = unsafe { std::slice::from_raw_parts(b.data().add(from), upto - from) };
        let mut r = RecordReader { bytes, pos: 0 };
        // Once per buffer: the slot is a division, which took 4 % of the encoder's time
        // when it ran per event (RESULTS §39).
        let slot = self.slot(thread);
        while r.pos < bytes.len() {
            // Heap allocations and frees, nearly every record, take the short way: read
            // in one piece and encoded straight from their fields, without an `Event`
            // to build and match again.
            match r.u8() {
                record::ALLOC => {
                    let f = r.array::<26>();
                    let (seq, addr, size, align_log2, frames) = (word(&f, 0), word(&f, 8), word(&f, 16), f[24], f[25]);
                    self.heap_event(thread, slot, &mut r, frames, |enc, stack| {
                        enc.push_heap_alloc(seq, addr, size, align_log2, stack)
                    });
                }
                record::FREE => {
                    let f = r.array::<17>();
                    let (seq, addr, frames) = (word(&f, 0), word(&f, 8), f[16]);
                    self.heap_event(thread, slot, &mut r, frames, |enc, stack| enc.push_heap_free(seq, addr, stack));
                }
                kind => self.record(thread, kind, &mut r),
            }
        }
        // SAFETY: the stream's encoder owns `consumed` of every buffer it received.
        unsafe { (*b.0).consumed = upto };
    }

    /// A heap allocation's or free's record, whose fixed fields were read, and whose
    /// callstack of `frames` words follows in `r`: `push` appends it to the stream of
    /// `thread`, at `slot` (`EventEncoder::push_heap_alloc`, `push_heap_free`), with its
    /// callstack's id. The same as `emit` of the event, with one look-up of the stream
    /// when the callstack is the stream's last one.
    #[inline(always)]
    fn heap_event(
        &mut self,
        thread: u32,
        slot: usize,
        r: &mut RecordReader<'_>,
        frames: u8,
        push: impl FnOnce(&mut EventEncoder, u32),
    ) {
        debug_assert_eq!(slot, self.slot(thread));
        let raw = (frames != 0).then(|| r.raw(8 * usize::from(frames)));
        let mut stream = self.stream_at(slot);
        let stack = match (raw, stream.last_stack) {
            (None, _) => 0,
            (Some(raw), Some((last, id))) if last.frames() == raw => id,
            (Some(raw), _) => {
                let (key, id) = self.intern_stack(thread, raw);
                stream = self.stream_at(slot);
                stream.last_stack = Some((key, id));
                id
            }
        };
        if stream.enc.is_empty() {
            let ns = stream.last_time;
            stream.enc.push(&Event::Time { ns });
        }
        push(&mut stream.enc, stack);
        if stream.enc.len() >= BLOCK_TARGET {
            self.write_stream(thread);
        }
    }

    /// Any other record than a heap allocation or free (`consume` reads those), whose
    /// kind byte was read.
    fn record(&mut self, thread: u32, kind: u8, r: &mut RecordReader<'_>) {
        let event = match kind {
            record::REALLOC => {
                let (free_seq, seq, old_addr, new_addr, new_size, align_log2) =
                    (r.u64(), r.u64(), r.u64(), r.u64(), r.u64(), r.u8());
                let stack = self.stack(thread, r);
                Event::Realloc { free_seq, seq, old_addr, new_addr, new_size, align_log2, stack }
            }
            record::DOMAIN_ALLOC => {
                let (seq, domain, addr, size, align_log2) = (r.u64(), r.u32(), r.u64(), r.u64(), r.u8());
                let stack = self.stack(thread, r);
                self.sync_domains(thread, domain);
                Event::Alloc { seq, domain, addr, size, align_log2, stack }
            }
            record::DOMAIN_FREE => {
                let (seq, domain, addr) = (r.u64(), r.u32(), r.u64());
                let stack = self.stack(thread, r);
                Event::Free { seq, domain, addr, stack }
            }
            record::RESOURCE => {
                let (domain, addr, kind) = (r.u32(), r.u64(), ResourceKind::from_byte(r.u8()));
                let (width, height, depth_or_layers, mip_levels) = (r.u32(), r.u32(), r.u32(), r.u32());
                let format = r.name();
                let format = self.string(thread, format);
                let name = r.name();
                let name = self.string(thread, name);
                let desc = ResourceDesc { kind, width, height, depth_or_layers, mip_levels, format, name };
                Event::Resource { domain, addr, desc }
            }
            record::BUDGET => {
                let (domain, time, budget, usage) = (r.u32(), r.u64(), r.u64(), r.u64());
                self.sync_domains(thread, domain);
                Event::Budget { domain, time, budget, usage }
            }
            record::DISPLAY => Event::Display { width: r.u32(), height: r.u32() },
            record::USAGE => Event::Usage { seq: r.u64(), addr: r.u64(), used: r.u64() },
            record::CONTEXT_PUSH => {
                let (ptr, len, flags) = (r.u64(), r.u64(), r.u8());
                // SAFETY: written from a `&'static str` by `context_push`.
                let ty: &'static str = unsafe {
                    std::str::from_utf8_unchecked(std::slice::from_raw_parts(ptr as *const u8, len as usize))
                };
                let ty = self.context_type(thread, ty);
                let name = r.name();
                let name = self.string(thread, name);
                Event::ContextPush { ty, name, flags }
            }
            record::CONTEXT_POP => Event::ContextPop,
            record::ATTACH_PUSH => Event::AttachPush { seq: r.u64(), addr: r.u64() },
            record::ATTACH_POP => Event::AttachPop,
            record::TIME => {
                let ns = r.u64();
                self.stream(thread).last_time = ns;
                Event::Time { ns }
            }
            record::FRAME => Event::FrameStart { seq: r.u64(), frame: r.u64() },
            record::LABEL => {
                let seq = r.u64();
                let name = r.name();
                Event::Label { seq, name: self.string(thread, name) }
            }
            record::THREAD_INFO => {
                let os_tid = r.u64();
                let name = r.name();
                let name = if name.is_empty() { 0 } else { self.string(thread, name) };
                Event::ThreadInfo { os_tid, name }
            }
            other => {
                // Only this crate writes records: an unknown kind is a recorder bug.
                // Skip the rest of the range rather than misread it, and say so.
                tracing::error!(target: "memreplay", "internal error: unknown record kind {other}");
                let rest = (r.bytes.len() - r.pos) as u64;
                r.pos = r.bytes.len();
                Event::Lost { events: 1, bytes: rest, reason: LossReason::Unknown(0) }
            }
        };
        self.emit(thread, &event);
    }

    /// The stream of `thread`, created on first use.
    #[inline(always)]
    fn stream(&mut self, thread: u32) -> &mut Stream {
        let i = self.slot(thread);
        self.stream_at(i)
    }

    /// The stream at `slot(thread)` = `i`, created on first use. Inline: it runs for
    /// every event.
    #[inline(always)]
    fn stream_at(&mut self, i: usize) -> &mut Stream {
        if !matches!(self.streams.get(i), Some(Some(_))) {
            self.new_stream(i);
        }
        match &mut self.streams[i] {
            Some(s) => s,
            None => unreachable!("created above"),
        }
    }

    #[cold]
    #[inline(never)]
    fn new_stream(&mut self, i: usize) {
        if i >= self.streams.len() {
            self.streams.resize_with(i + 1, || None);
        }
        self.streams[i] = Some(Box::default());
    }

    /// Appends an event to its thread's stream; each block starts by restating the time.
    pub fn emit(&mut self, thread: u32, event: &Event) {
        let stream = self.stream(thread);
        if stream.enc.is_empty() && !matches!(event, Event::Time { .. }) {
            let ns = stream.last_time;
            stream.enc.push(&Event::Time { ns });
        }
        stream.enc.push(event);
        if stream.enc.len() >= BLOCK_TARGET {
            self.write_stream(thread);
        }
    }

    /// Frames and compresses `thread`'s pending events here, then writes the block.
    pub fn write_stream(&mut self, thread: u32) {
        let slot = self.slot(thread);
        let Some(Some(stream)) = self.streams.get_mut(slot) else { return };
        if stream.enc.is_empty() {
            return;
        }
        if let Err(e) = self.framed.frame(thread, &mut stream.enc) {
            // Only a block past MAX_BLOCK_RAW_LEN fails, which BLOCK_TARGET rules out:
            // count its events as lost rather than write what readers refuse.
            let events = stream.enc.event_count();
            stream.enc.clear();
            tracing::error!(target: "memreplay", "internal error: a block cannot be framed: {e}");
            self.shared.output().lost_events += u64::from(events);
            return;
        }
        self.shared.output().write(&self.framed);
    }

    pub fn write_all_streams(&mut self) {
        for slot in 0..self.streams.len() {
            self.write_stream(self.thread_at(slot));
        }
    }

    /// Interns the callstack that follows in the record; 0 when it has no frames.
    /// Inline, so that a record without a callstack costs one test here.
    #[inline(always)]
    fn stack(&mut self, thread: u32, r: &mut RecordReader<'_>) -> u32 {
        let n = r.u8() as usize;
        if n == 0 {
            return 0;
        }
        let raw = r.raw(8 * n);
        let stream = self.stream(thread);
        if let Some((last, id)) = stream.last_stack {
            if last.frames() == raw {
                return id;
            }
        }
        let (key, id) = self.intern_stack(thread, raw);
        self.stream(thread).last_stack = Some((key, id));
        id
    }

    /// The callstack whose frames are `raw` (little-endian words), as the shared table
    /// holds it, and its id: from the private cache (a hit costs one hash and one compare, and copies nothing; the cache
    /// points at the shared table's copy of the frames), else
    /// from the shared table, where the first encoder to see it gives it its id and
    /// defines it in `thread`'s stream.
    #[inline(never)]
    fn intern_stack(&mut self, thread: u32, raw: &[u8]) -> (StackRef, u32) {
        if let Some((&key, &id)) = self.stacks.get_key_value(raw) {
            return (key, id);
        }
        let shard = (FxBuild::default().hash_one(raw) >> 32) as usize % STACK_SHARDS;
        let (key, id, new) = {
            let mut shared = lock(&self.shared.stacks[shard]);
            match shared.get_key_value(raw) {
                Some((key, &id)) => (StackRef(&**key), id, false),
                None => {
                    let id = self.shared.stack_count.fetch_add(1, Ordering::Relaxed) + 1;
                    let key: Box<[u8]> = raw.into();
                    let r = StackRef(&*key);
                    shared.insert(key, id);
                    (r, id, true)
                }
            }
        };
        self.stacks.insert(key, id);
        if new {
            let frames = raw
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
                .collect();
            self.emit(thread, &Event::DefineStack { id, frames });
        }
        (key, id)
    }

    /// The id of string `s`, defined in `thread`'s stream the first time any encoder
    /// sees it.
    pub fn string(&mut self, thread: u32, s: &str) -> u32 {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let (id, new) = shared_id(&self.shared.strings, s.into());
        self.strings.insert(s.into(), id);
        if new {
            self.emit(thread, &Event::DefineString { id, text: s.to_owned() });
        }
        id
    }

    fn context_type(&mut self, thread: u32, ty: &'static str) -> u32 {
        if let Some(&id) = self.context_types.get(ty) {
            return id;
        }
        let (id, new) = shared_id(&self.shared.context_types, ty);
        self.context_types.insert(ty, id);
        if new {
            let name = self.string(thread, ty);
            self.emit(thread, &Event::DefineContextType { id, name });
        }
        id
    }

    /// Before an allocation in `domain`: if no stream defines it yet, writes the
    /// definitions of every domain defined since the last look into `thread`'s stream.
    /// `domain` 0: every domain defined since the last look.
    pub fn sync_domains(&mut self, thread: u32, domain: u32) {
        let defs: Vec<_> = {
            let mut written = lock(&self.shared.domains_written);
            if domain != 0 && domain <= *written {
                return;
            }
            let domains = lock(&DOMAINS);
            let defs: Vec<_> = domains
                .iter()
                .filter(|d| d.id > *written)
                .map(|d| (d.id, d.name.clone(), d.kind, d.capacity, d.parent))
                .collect();
            *written = defs.iter().fold(*written, |w, d| w.max(d.0));
            defs
        };
        for (id, name, kind, capacity, parent) in defs {
            let name = self.string(thread, &name);
            self.emit(thread, &Event::DefineDomain { id, name, kind, capacity, parent });
        }
    }
}
