//! The writer thread: collects raw records from thread buffers, interns strings and
//! callstacks, encodes events with `memreplay-format`, compresses and writes blocks.
//!
//! It wakes for every full buffer handed off, and at least every flush interval to
//! collect what idle threads have published and flush the file, which bounds what a
//! crash can lose. It also samples what the OS sees of the process (resident and
//! committed memory) at `Config::process_memory_interval`, into the metadata stream. Everything it allocates passes through the hook unrecorded (the
//! thread is marked as the recorder's own).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use memreplay_format::{
    header_flags, Event, EventEncoder, FileHeader, LogWriter, LossReason, ResourceDesc, ResourceKind, HEAP_DOMAIN,
    VERSION_MAJOR, VERSION_MINOR,
};

use super::buffer::BufPtr;
use super::record::{self, RecordReader};
use super::sys::ProcessMemoryProbe;
use super::{Session, DOMAINS};
use crate::{Config, SessionStats};

/// Encoded bytes after which a stream's block is written out.
const BLOCK_TARGET: usize = 64 << 10;
/// How often the module list is checked for libraries loaded since the last look.
const MODULE_RESCAN: Duration = Duration::from_secs(1);
/// The metadata stream (modules, process memory samples).
const METADATA: u32 = memreplay_format::block::METADATA_THREAD;

/// FxHash: callstacks are hashed once per recorded event; SipHash would be the
/// writer's biggest cost.
#[derive(Default)]
struct FxHasher(u64);

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

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// One thread's stream as the writer sees it.
#[derive(Default)]
struct Stream {
    /// Index of the next buffer this thread will hand off.
    expected_index: u64,
    /// The stream's clock at the last `Time` record (each block restates it).
    last_time: u64,
    enc: EventEncoder,
}

/// The writer's state, from the log's first bytes to its end record.
pub(crate) struct Writer {
    session: &'static Session,
    log: LogWriter<BufWriter<File>>,
    path: PathBuf,
    /// Streams by thread id (ids are dense, from 0); `None` once a thread has exited.
    streams: Vec<Option<Stream>>,
    strings: HashMap<Box<str>, u32>,
    /// Callstacks by their raw frames as recorded (little-endian words): a hit costs one
    /// hash and one compare, and nothing is copied unless the stack is new.
    stacks: FxMap<Box<[u8]>, u32>,
    context_types: HashMap<&'static str, u32>,
    domains_written: u32,
    modules: HashSet<(u64, String)>,
    /// Events that never reached the file: counted from the first write failure on.
    lost_events: u64,
    /// Blocks, events and bytes (header included) that reached the file at the last flush.
    flushed_blocks: u64,
    flushed_events: u64,
    flushed_bytes: u64,
    /// A write or flush failed: nothing more is written, every later event is lost.
    failed: bool,
}

impl Writer {
    /// Creates the log: writes the header and what is known at start (modules, domains)
    /// and flushes them to the file, so that a process killed at any later moment leaves
    /// a readable log. Runs on the thread that calls `start`. A failure to write is said
    /// on stderr and leaves the writer failed (the program runs on, every event is
    /// counted as lost); only a header that cannot even be buffered fails here.
    pub fn open(session: &'static Session, file: File, config: &Config, start_unix_ns: u64) -> io::Result<Writer> {
        let mut flags = 0;
        if config.callstacks_on_alloc {
            flags |= header_flags::CALLSTACKS_ON_ALLOC;
        }
        if config.callstacks_on_free {
            flags |= header_flags::CALLSTACKS_ON_FREE;
        }
        if config.usage_changes {
            flags |= header_flags::USAGE_CHANGES;
        }
        let header = FileHeader {
            version_major: VERSION_MAJOR,
            version_minor: VERSION_MINOR,
            flags,
            pointer_width: std::mem::size_of::<usize>() as u8,
            pid: u64::from(std::process::id()),
            start_unix_ns,
            ticks_per_second: 1_000_000_000,
            max_stack_depth: config.max_stack_depth as u32,
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            exe_path: std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            recorder: concat!("memreplay ", env!("CARGO_PKG_VERSION")).into(),
        };
        let log = LogWriter::new(BufWriter::with_capacity(1 << 20, file), &header)?;
        let mut w = Writer {
            session,
            log,
            path: config.path.clone(),
            streams: Vec::new(),
            strings: HashMap::new(),
            stacks: FxMap::default(),
            context_types: HashMap::new(),
            domains_written: 0,
            modules: HashSet::new(),
            lost_events: 0,
            flushed_blocks: 0,
            flushed_events: 0,
            flushed_bytes: 0,
            failed: false,
        };
        w.scan_modules();
        w.sync_domains(METADATA);
        w.write_stream(METADATA);
        w.flush();
        Ok(w)
    }
}

pub(crate) fn run(mut w: Writer, full_rx: Receiver<BufPtr>, config: Config) -> SessionStats {
    let session = w.session;
    tracing::info!(target: "memreplay", path = %w.path.display(), "recording started");

    let mut sampler = config.process_memory_interval.map(|every| ProcessMemorySampler::new(every, session));
    if let Some(p) = &mut sampler {
        p.sample(&mut w);
    }

    let mut next_tick = Instant::now() + config.flush_interval;
    let mut next_modules = Instant::now() + MODULE_RESCAN;
    // A termination signal to raise again once the log is finished.
    let mut end_by_signal = None;
    loop {
        let due = sampler.as_ref().map_or(next_tick, |p| p.next.min(next_tick));
        let wait = due.saturating_duration_since(Instant::now());
        match full_rx.recv_timeout(wait) {
            Ok(b) if !b.0.is_null() => w.take_full(b),
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if session.stopping.load(Ordering::Acquire) {
            break;
        }
        match super::signals::take() {
            Some((sig, true)) => {
                end_by_signal = Some(sig);
                break;
            }
            // The program's own handler chained to ours: it ends on its own terms (its
            // exit finishes the log); what was recorded so far goes to the file now.
            Some((_, false)) => {
                w.collect_idle();
                w.write_all_streams();
                w.flush();
            }
            None => {}
        }
        let now = Instant::now();
        if let Some(p) = sampler.as_mut().filter(|p| now >= p.next) {
            p.sample(&mut w);
        }
        if now >= next_tick {
            // Domains defined since the last tick, used or not yet.
            w.sync_domains(METADATA);
            w.collect_idle();
            w.write_all_streams();
            if now >= next_modules {
                w.scan_modules();
                w.write_stream(METADATA);
                next_modules = now + MODULE_RESCAN;
            }
            w.flush();
            next_tick = now + config.flush_interval;
        }
    }

    // Final drain: every handed-off buffer, then what each thread has published.
    while let Ok(b) = full_rx.try_recv() {
        if !b.0.is_null() {
            w.take_full(b);
        }
    }
    w.collect_idle();
    w.sync_domains(METADATA);
    if let Some(p) = &mut sampler {
        p.sample(&mut w);
    }
    w.write_all_streams();
    // Everything reaches the file before the end record is written, so that a failure
    // here is counted like any other.
    w.flush();
    session.pool.drain();

    let stacks = w.stacks.len() as u32;
    let (blocks, events, lost_events, failed) = (w.flushed_blocks, w.flushed_events, w.lost_events, w.failed);
    let end_ns = session.now_ns();
    let path = w.path;
    let file_len = |f: &File| f.metadata().map(|m| m.len()).unwrap_or(0);
    let bytes = if failed {
        // Nothing more is written after a failure (not even what the file buffer holds):
        // no end record, the log reads as cut off.
        let (file, _unwritten) = w.log.into_inner().into_parts();
        file_len(&file)
    } else {
        let bytes = w.flushed_bytes;
        match w.log.finish(lost_events, end_ns) {
            Ok((file, _)) => file_len(file.get_ref()),
            Err(e) => {
                super::say_on_stderr(&format!(
                    "memreplay: cannot write the end of the log {}: {e}; all {events} events ({bytes} bytes) \
                     were written, but the log will read as cut off\n",
                    path.display()
                ));
                bytes
            }
        }
    };
    let stats = SessionStats {
        path,
        events,
        blocks,
        bytes,
        lost_events,
        threads: session.next_thread.load(Ordering::Relaxed) - 1,
        stacks,
        backpressure_waits: session.pool.waits.load(Ordering::Relaxed),
        backpressure_ns: session.pool.wait_ns.load(Ordering::Relaxed),
        peak_buffer_bytes: session.pool.peak_bytes(),
        peak_buffers: session.pool.peak() as u32,
        max_buffers: session.pool.max() as u32,
    };
    tracing::info!(
        target: "memreplay",
        events = stats.events,
        bytes = stats.bytes,
        lost = stats.lost_events,
        backpressure_waits = stats.backpressure_waits,
        backpressure_ms = stats.backpressure_ns / 1_000_000,
        "recording stopped"
    );
    if let Some(sig) = end_by_signal {
        super::signals::end_by(sig);
    }
    stats
}

/// Samples process memory into the metadata stream every `every`.
struct ProcessMemorySampler {
    probe: ProcessMemoryProbe,
    every: Duration,
    next: Instant,
    session: &'static Session,
}

impl ProcessMemorySampler {
    fn new(every: Duration, session: &'static Session) -> Self {
        ProcessMemorySampler { probe: ProcessMemoryProbe::open(), every, next: Instant::now(), session }
    }

    fn sample(&mut self, w: &mut Writer) {
        // Late wake-ups skip samples rather than bunching them up.
        self.next = Instant::now() + self.every;
        if let Some((resident, committed)) = self.probe.sample() {
            let time = self.session.now_ns();
            w.emit(METADATA, &Event::ProcessMemory { time, resident, committed });
        }
    }
}

impl Writer {
    /// A buffer handed off through the channel: everything its owner published.
    fn take_full(&mut self, b: BufPtr) {
        // SAFETY: the owner gave the buffer up; only this thread touches it now.
        let (thread, index, last, len) =
            unsafe { ((*b.0).thread, (*b.0).index, (*b.0).last, (*b.0).published.load(Ordering::Acquire)) };
        let stream = self.stream(thread);
        debug_assert_eq!(stream.expected_index, index, "a thread's buffers arrive in order");
        stream.expected_index = index + 1;
        self.consume(b, len);
        if last {
            self.write_stream(thread);
            // The thread is gone: free its encoder.
            self.streams[thread as usize] = None;
            self.session.slots.lock().unwrap_or_else(|e| e.into_inner()).retain(|s| s.thread != thread);
        }
        self.session.pool.give(b);
    }

    /// What idle (and busy) threads have published in their current buffers.
    fn collect_idle(&mut self) {
        let slots: Vec<_> = self.session.slots.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for slot in slots {
            let cur = slot.current.load(Ordering::Acquire);
            if cur.is_null() {
                continue;
            }
            // SAFETY: a buffer in a slot is owned by its thread and only returned to the
            // pool by this thread, after it arrives through the channel.
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
        // SAFETY: the writer owns `consumed` of every buffer it received.
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
        while r.pos < bytes.len() {
            self.record(thread, &mut r);
        }
        // SAFETY: the writer owns `consumed` of every buffer it received.
        unsafe { (*b.0).consumed = upto };
    }

    fn record(&mut self, thread: u32, r: &mut RecordReader<'_>) {
        let kind = r.u8();
        let event = match kind {
            record::ALLOC => {
                let (seq, addr, size, align_log2) = (r.u64(), r.u64(), r.u64(), r.u8());
                let stack = self.stack(thread, r);
                Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size, align_log2, stack }
            }
            record::FREE => {
                let (seq, addr) = (r.u64(), r.u64());
                let stack = self.stack(thread, r);
                Event::Free { seq, domain: HEAP_DOMAIN, addr, stack }
            }
            record::REALLOC => {
                let (free_seq, seq, old_addr, new_addr, new_size, align_log2) =
                    (r.u64(), r.u64(), r.u64(), r.u64(), r.u64(), r.u8());
                let stack = self.stack(thread, r);
                Event::Realloc { free_seq, seq, old_addr, new_addr, new_size, align_log2, stack }
            }
            record::DOMAIN_ALLOC => {
                let (seq, domain, addr, size, align_log2) = (r.u64(), r.u32(), r.u64(), r.u64(), r.u8());
                let stack = self.stack(thread, r);
                if domain > self.domains_written {
                    self.sync_domains(thread);
                }
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

    /// The stream of `thread`, created on first use. Inline: it runs for every event.
    #[inline(always)]
    fn stream(&mut self, thread: u32) -> &mut Stream {
        let i = thread as usize;
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
        self.streams[i] = Some(Stream::default());
    }

    /// Appends an event to its thread's stream; each block starts by restating the time.
    fn emit(&mut self, thread: u32, event: &Event) {
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

    fn write_stream(&mut self, thread: u32) {
        let Some(Some(stream)) = self.streams.get_mut(thread as usize) else { return };
        if stream.enc.is_empty() {
            return;
        }
        if self.failed {
            // The log is given up: the events are decoded (their buffers go back to
            // their threads) and counted, nothing is written.
            self.lost_events += u64::from(stream.enc.event_count());
            stream.enc.clear();
            return;
        }
        if let Err(e) = self.log.write_block(thread, &mut stream.enc) {
            stream.enc.clear();
            self.fail("write", &e);
        }
    }

    /// Flushes what was written to the file; what reached it is what `stop` reports.
    fn flush(&mut self) {
        if self.failed {
            return;
        }
        match self.log.flush() {
            Ok(()) => {
                self.flushed_blocks = self.log.blocks();
                self.flushed_events = self.log.events();
                self.flushed_bytes = self.log.bytes();
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
        self.lost_events += self.log.events() - self.flushed_events;
        super::say_on_stderr(&format!(
            "memreplay: cannot {what} the log {}: {e}; recording stops writing: {} events ({} bytes) were \
             written, later events are counted as lost\n",
            self.path.display(),
            self.flushed_events,
            self.flushed_bytes
        ));
    }

    fn write_all_streams(&mut self) {
        for t in 0..self.streams.len() as u32 {
            self.write_stream(t);
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
        self.intern_stack(thread, r.raw(8 * n))
    }

    /// The id of the callstack whose frames are `raw` (little-endian words), defined in
    /// `thread`'s stream the first time it is seen.
    #[inline(never)]
    fn intern_stack(&mut self, thread: u32, raw: &[u8]) -> u32 {
        if let Some(&id) = self.stacks.get(raw) {
            return id;
        }
        let id = self.stacks.len() as u32 + 1;
        self.stacks.insert(raw.into(), id);
        let frames =
            raw.chunks_exact(8).map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]])).collect();
        self.emit(thread, &Event::DefineStack { id, frames });
        id
    }

    fn string(&mut self, thread: u32, s: &str) -> u32 {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = self.strings.len() as u32 + 1;
        self.strings.insert(s.into(), id);
        self.emit(thread, &Event::DefineString { id, text: s.to_owned() });
        id
    }

    fn context_type(&mut self, thread: u32, ty: &'static str) -> u32 {
        let next = self.context_types.len() as u32 + 1;
        match self.context_types.entry(ty) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => {
                e.insert(next);
                let name = self.string(thread, ty);
                self.emit(thread, &Event::DefineContextType { id: next, name });
                next
            }
        }
    }

    /// Writes the definitions of domains defined since the last look into `thread`'s stream.
    fn sync_domains(&mut self, thread: u32) {
        let defs: Vec<_> = {
            let domains = DOMAINS.lock().unwrap_or_else(|e| e.into_inner());
            domains
                .iter()
                .filter(|d| d.id > self.domains_written)
                .map(|d| (d.id, d.name.clone(), d.kind, d.capacity, d.parent))
                .collect()
        };
        for (id, name, kind, capacity, parent) in defs {
            let name = self.string(thread, &name);
            self.emit(thread, &Event::DefineDomain { id, name, kind, capacity, parent });
            self.domains_written = self.domains_written.max(id);
        }
    }

    /// Records modules loaded since the last scan, for offline symbolication.
    fn scan_modules(&mut self) {
        use findshlibs::{SharedLibrary, SharedLibraryId, TargetSharedLibrary};
        let mut found = Vec::new();
        let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default();
        TargetSharedLibrary::each(|lib| {
            let mut path = lib.name().to_string_lossy().into_owned();
            if path.is_empty() {
                path = exe.clone();
            }
            let base = lib.actual_load_addr().0 as u64;
            let build_id = match lib.id() {
                Some(SharedLibraryId::GnuBuildId(b)) => b,
                Some(SharedLibraryId::Uuid(u)) => u.to_vec(),
                _ => Vec::new(),
            };
            found.push((base, lib.len() as u64, lib.virtual_memory_bias().0 as u64, path, build_id));
        });
        for (base, size, load_bias, path, build_id) in found {
            if !self.modules.insert((base, path.clone())) {
                continue;
            }
            let path = self.string(METADATA, &path);
            self.emit(METADATA, &Event::Module { base, size, load_bias, path, build_id });
        }
    }
}
