//! The ordered event source: a log's events in the exact order the allocator saw them,
//! streamed, with memory proportional to threads rather than to events.
//!
//! Pass one ([`IndexedLog::open`]) reads the file once, framing blocks without decoding
//! them, and keeps each thread's block list. Pass two ([`IndexedLog::replay`]) decodes
//! blocks in parallel into compact [`Record`]s, in the order of their first sequence
//! number, and merges the threads' streams by sequence number. The merge only hands out a
//! record once every block that could hold a smaller sequence number has been decoded: a
//! block's events all carry numbers at or above its frame's `first_seq`, so everything
//! below the `first_seq` of the next undecoded block is known.
//!
//! A realloc is two records, its free half at `free_seq` and its allocation half at
//! `seq`, as in [`memreplay_format::merge_by_seq`]. Unsequenced events (context push and
//! pop, time, definitions) come out just before the next sequenced event of their thread:
//! the decoding thread gives each the key of that event (found in its block, or the next
//! block of the thread that has one), so the merge compares one key per record and a
//! thread's run is a plain loop. Records with no sequenced event after them (key
//! `u64::MAX`) come out last.

use std::collections::VecDeque;
use std::fs::File;
use std::path::Path;
use std::sync::Mutex;

use memreplay_format::{
    unpack_records, Block, BlockFrame, Damage, FileHeader, FormatError, LogReader, ReadReport, Record, Records,
};
use rayon::prelude::*;

use super::addr_map::prefetch_line;
use super::ReplayState;

/// What the records are handed to, in global order.
pub trait EventSink {
    /// One record of stream `thread`; `block` holds the events its `Event` records refer to.
    fn record(&mut self, thread: u32, record: &Record, block: &Records);

    /// A hint: `record` comes a few records from now (see `addr_map.rs`).
    #[inline]
    fn upcoming(&mut self, _record: &Record) {}

    /// Whether the sink wants no more records (it ran out of room, say): the replay then
    /// stops where it stands. Asked every few thousand records, not for each one.
    #[inline]
    fn stopped(&mut self) -> bool {
        false
    }
}

impl EventSink for ReplayState {
    #[inline(always)]
    fn record(&mut self, thread: u32, record: &Record, block: &Records) {
        self.apply_record(thread, record, block)
    }

    #[inline(always)]
    fn upcoming(&mut self, record: &Record) {
        ReplayState::upcoming(self, record)
    }

    fn stopped(&mut self) -> bool {
        ReplayState::stopped(self)
    }
}

/// How far ahead of the record being applied the next ones are announced: enough for
/// their cache misses to overlap, not so far that the lines are evicted again. Measured
/// on `replay_throughput`'s 20 M-event log (same session, with `Event`s rather than
/// records): no lookahead 6.1 M events/s, 8 events 8.5, 16 12, 32 13.5, 64 12.
const LOOKAHEAD_EVENTS: usize = 32;

/// Logs whose blocks take at most this many bytes on disk are decoded on the replaying
/// thread: starting the decoding thread and waking the pool would cost more than it saves.
const INLINE_DECODING_BYTES: u64 = 1 << 20;

/// A batch of blocks decoded side by side (one per decoding thread) holds at most this
/// many events (or one block), so that a batch of blocks that each claim the most events
/// a block can hold stays a few blocks.
const BATCH_EVENTS: u64 = 1 << 17;

/// The sink is asked whether to stop each time another `1 << STOP_CHECK_SHIFT` records
/// have been handed out (and between the blocks of the tails).
const STOP_CHECK_SHIFT: u32 = 12;

/// Decoded blocks waiting for the merge, at most: how far decoding runs ahead of it. What
/// is decoded and not yet replayed (these, the batch the decoding threads hold, the blocks
/// the merge reads: 32 bytes a record, and the recorder's blocks hold about 10,000 events)
/// is a fixed part of every replay's memory. It was two batches of up to 128 Ki events
/// each, handed out whole, and made about 10 MiB of the 31 MiB that `summarize
/// --no-symbols` took besides its live-allocation table (`analyzer_memory`); at 4 blocks
/// the replay of `replay_throughput`'s 20 M-event log took no longer (RESULTS.md §32).
const READY_BLOCKS: usize = 4;

/// A log whose blocks have been framed and indexed per thread, ready to replay.
pub struct IndexedLog {
    /// The log's file header.
    pub header: FileHeader,
    /// What pass one found; pass two adds blocks that fail to decode.
    pub report: ReadReport,
    /// Events in the blocks the index holds (from their frames).
    pub events: u64,
    file: File,
    threads: Vec<ThreadBlocks>,
    /// Bytes the blocks take on disk.
    stored_bytes: u64,
}

/// One thread's blocks, in file order.
struct ThreadBlocks {
    thread: u32,
    /// Blocks the merge orders: (file offset, frame, ordering key). The keys never
    /// decrease (see [`IndexedLog::open`]), so the thread's blocks decode in file order.
    blocks: Vec<(u64, BlockFrame, u64)>,
    /// Blocks after the thread's last sequenced event: (file offset, frame). Their
    /// records come after every sequenced record of the log, so they are decoded only
    /// then, one at a time, however many there are.
    tail: Vec<(u64, BlockFrame)>,
}

/// Whether a block holds any sequenced event.
fn sequenced(f: &BlockFrame) -> bool {
    !(f.first_seq == 0 && f.last_seq == 0)
}

impl IndexedLog {
    /// Pass one: checks the header and frames every block. Damage is recorded, not fatal.
    pub fn open(path: &Path) -> Result<IndexedLog, FormatError> {
        let file = File::open(path)?;
        let mut reader = LogReader::new(file.try_clone()?)?;
        let mut framed: Vec<(u32, Vec<(u64, BlockFrame)>)> = Vec::new();
        let mut by_thread: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        let mut events = 0u64;
        let mut stored_bytes = 0u64;
        while let Some((offset, f)) = reader.next_frame()? {
            events += u64::from(f.event_count);
            stored_bytes += u64::from(f.stored_len);
            let i = *by_thread.entry(f.thread).or_insert_with(|| {
                framed.push((f.thread, Vec::new()));
                framed.len() - 1
            });
            framed[i].1.push((offset, f));
        }
        let threads = framed.into_iter().map(|(thread, blocks)| ThreadBlocks::keyed(thread, blocks)).collect();
        let header = reader.header().clone();
        Ok(IndexedLog { header, report: reader.into_report(), events, file, threads, stored_bytes })
    }

    /// Threads (streams) in the log.
    pub fn thread_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.threads.iter().map(|t| t.thread)
    }

    /// Pass two: hands every record to `f` in global order, and calls `progress` with the
    /// number of records handed out so far, now and then. Stops early if `f` asks to.
    pub fn replay(&mut self, f: &mut impl EventSink, progress: impl FnMut(u64)) {
        let threaded = self.stored_bytes > INLINE_DECODING_BYTES;
        self.replay_with(f, progress, threaded)
    }

    fn replay_with(&mut self, f: &mut impl EventSink, mut progress: impl FnMut(u64), threaded: bool) {
        let order = self.decoding_order();
        // The merge takes a core of its own: decoding gets the others (at least one), so
        // that the two never take turns on one core.
        let cores = cores();
        let decoders = if threaded { decoding_pool(cores) } else { None };
        let batches = match (threaded, decoders) {
            (false, _) => Vec::new(),
            (true, Some(pool)) => batches(&order, pool.current_num_threads()),
            (true, None) => batches(&order, rayon::current_num_threads()),
        };
        let mut cursors: Vec<Cursor> = self
            .threads
            .iter()
            .map(|t| Cursor {
                thread: t.thread,
                queue: VecDeque::new(),
                pos: 0,
                undecoded: t.blocks.len(),
                key_from_queue: false,
            })
            .collect();
        let mut handed_out = 0u64;
        let mut damage: Vec<Damage> = Vec::new();
        let file = &self.file;
        let threads = &self.threads;
        // Spent record buffers, back from the merge to the decoders: a block's buffers
        // are reused rather than allocated (and their pages faulted in) anew. The one
        // spent longest ago is reused first: the buffer the merge has just finished is
        // still in its core's cache, and writing it again from the decoding core first
        // takes every line back from there. Taking the latest instead (a stack) cost the
        // replay benchmark's 20 M-event log about 4 % (both threads, and the replay).
        let spare: Mutex<VecDeque<Records>> = Mutex::new(VecDeque::new());
        let merge_cpu = thread_cpu_seconds();
        let decode = |b: &BlockToDecode| {
            let out = spare_buffer(&spare);
            (b.thread_index, decode_block(file, b.offset, b.frame, b.key_after, out))
        };

        let ready = Ready::new(READY_BLOCKS);
        std::thread::scope(|scope| {
            // Decoding runs ahead of the merge on its own thread (and rayon's pool), a few
            // blocks at most, so decoding and replaying overlap. Each batch is decoded side
            // by side and handed out a block at a time, in order.
            // However the merge ends (a stop, a panic), the decoding thread stops waiting.
            let _closed = ready.closed_on_drop();
            if threaded {
                let batches = &batches;
                let (order, decode, ready) = (&order, &decode, &ready);
                scope.spawn(move || {
                    let _done = ready.done_on_drop();
                    let decode_all = || {
                        let start = thread_cpu_seconds();
                        for range in batches {
                            let decoded: Vec<_> = order[range.clone()].par_iter().map(decode).collect();
                            for block in decoded {
                                if !ready.push(block) {
                                    return;
                                }
                            }
                        }
                        if let (Some(start), Some(end)) = (start, thread_cpu_seconds()) {
                            tracing::debug!("decoding: {:.3} s of CPU on its (first) thread", end - start);
                        }
                    };
                    match decoders {
                        Some(pool) => pool.install(decode_all),
                        None => decode_all(),
                    }
                });
            } else {
                tracing::debug!("decoding: inline, on the merge's thread ({} bytes of blocks)", self.stored_bytes);
            }

            // The next block (of `order`) to take in.
            let mut next = 0usize;
            // Takes the next decoded block (in key order) into its thread's queue.
            let mut take_block = |next: &mut usize, cursors: &mut [Cursor]| {
                let (ti, result) = if threaded {
                    let Some(decoded) = ready.pop() else {
                        *next = order.len();
                        return;
                    };
                    decoded
                } else {
                    decode(&order[*next])
                };
                *next += 1;
                let c = &mut cursors[ti];
                c.undecoded -= 1;
                match result {
                    Ok(records) => c.queue.push_back(records),
                    Err(d) => damage.push(d),
                }
            };
            // The smallest key that an undecoded block can hold.
            let frontier = |next: usize| order.get(next).map_or(u64::MAX, |b| b.key);

            let mut heap = KeyHeap::default();
            for (ti, c) in cursors.iter_mut().enumerate() {
                if let Some(k) = c.head_key(|u| threads[ti].next_key(u), &spare) {
                    heap.push((k, ti));
                }
            }
            while let Some((key, ti)) = heap.top() {
                // Nothing undecoded may come before `key`. Undecoded blocks keyed `key`
                // itself wait while the thread has records: they are its own later blocks
                // or another thread's, and a thread that ties with it on `key` (keys are
                // per thread, SPEC.md §7.9) and is numbered lower has that block's key in
                // the heap, so it would be on top instead; a higher-numbered one comes
                // after it on a tie anyway.
                while next < order.len()
                    && (key > frontier(next) || key == frontier(next) && cursors[ti].queue.is_empty())
                {
                    take_block(&mut next, &mut cursors);
                }
                let c = &mut cursors[ti];
                // A key read from the thread's queue stays right until the thread hands out
                // records (decoding only appends to queues); one read from its next
                // undecoded block is read again.
                match if c.key_from_queue { Some(key) } else { c.head_key(|u| threads[ti].next_key(u), &spare) } {
                    Some(k) if k == key && c.has_record() => {}
                    // A block came in with an earlier key, or the next block is still
                    // undecoded (or was damaged and skipped: wait for the one after).
                    Some(k) => {
                        heap.replace_top(k);
                        continue;
                    }
                    // Only records without a sequenced event after them are left.
                    None => {
                        heap.pop();
                        continue;
                    }
                }
                // Hand out the thread's records while they come before every other thread's.
                // (At least its first record: a log with a sequence number twice must not stall.)
                let limit = heap.second().unwrap_or(u64::MAX).min(frontier(next)).max(key + 1);
                let before = handed_out;
                let (n, stopped_before) = c.emit_run(limit, f, &spare);
                handed_out += n;
                // Progress and the sink's stop, now and then: a call per run would be one
                // every few events with many threads.
                if handed_out >> STOP_CHECK_SHIFT != before >> STOP_CHECK_SHIFT {
                    progress(handed_out);
                    if f.stopped() {
                        return;
                    }
                }
                // Where the run stopped before a record, that record's key is the thread's
                // next; else the queue ran dry, and the key is read as at the start.
                let head = match stopped_before {
                    Some(k) => merged_key(k),
                    None => c.head_key(|u| threads[ti].next_key(u), &spare),
                };
                match head {
                    Some(k) => heap.replace_top(k),
                    None => heap.pop(),
                }
            }
            // What is left has no sequenced event after it; the decoding thread stops
            // when the channel closes.
        });
        // Then each thread's remaining records, in file order: what its queue holds,
        // its blocks not taken in yet and its tail, a block at a time.
        for (c, t) in cursors.iter_mut().zip(&self.threads) {
            if f.stopped() {
                break;
            }
            handed_out += c.drain(f);
            let undecoded = t.blocks[t.blocks.len() - c.undecoded..].iter().map(|&(offset, frame, _)| (offset, frame));
            for (offset, frame) in undecoded.chain(t.tail.iter().copied()) {
                if f.stopped() {
                    break;
                }
                let out = spare_buffer(&spare);
                match decode_block(&self.file, offset, frame, u64::MAX, out) {
                    Ok(records) => {
                        c.queue.push_back(records);
                        handed_out += c.drain(f);
                    }
                    Err(d) => damage.push(d),
                }
                progress(handed_out);
            }
        }
        progress(handed_out);
        self.report.damage.extend(damage);
        // In file order: framing damage was found when the file was indexed, bad payloads
        // as the blocks were decoded.
        self.report.damage.sort_by_key(Damage::offset);
        if let (Some(start), Some(end)) = (merge_cpu, thread_cpu_seconds()) {
            tracing::debug!("merge and replay: {:.3} s of CPU on its thread", end - start);
        }
    }

    /// The blocks the merge orders, in the order to decode them (by ordering key), with
    /// the key that their trailing unsequenced records take: the first sequenced event of
    /// the thread's next block that has one.
    fn decoding_order(&self) -> Vec<BlockToDecode> {
        let mut order = Vec::new();
        for (ti, t) in self.threads.iter().enumerate() {
            let mut after = u64::MAX;
            let start = order.len();
            for &(offset, frame, key) in t.blocks.iter().rev() {
                order.push(BlockToDecode { key, offset, frame, thread_index: ti, key_after: after });
                if sequenced(&frame) {
                    after = frame.first_seq;
                }
            }
            order[start..].reverse();
        }
        // Stable: a thread's blocks with equal keys stay in file order.
        order.sort_by_key(|b| b.key);
        order
    }
}

/// Splits `order` into batches of at most [`BATCH_EVENTS`] events (or one block) and at
/// most a block per decoding thread.
fn batches(order: &[BlockToDecode], decoders: usize) -> Vec<std::ops::Range<usize>> {
    let max_blocks = decoders.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    let mut events = 0u64;
    for (i, b) in order.iter().enumerate() {
        let n = u64::from(b.frame.event_count);
        if i > start && (i - start == max_blocks || events + n > BATCH_EVENTS) {
            out.push(start..i);
            start = i;
            events = 0;
        }
        events += n;
    }
    if start < order.len() {
        out.push(start..order.len());
    }
    out
}

/// A spent record buffer to decode into (the one spent longest ago), or a new one.
fn spare_buffer(spare: &Mutex<VecDeque<Records>>) -> Records {
    spare.lock().map(|mut s| s.pop_front()).ok().flatten().unwrap_or_default()
}

/// The cores this process may use, asked once (Linux reads its cgroup's files for it).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// The decoding pool, built once per process: a replay's decoders are the cores less the
/// merge's one (at least one). Building it for every replay cost a program that replays
/// many small logs (the replay fuzzer) most of its time.
fn decoding_pool(cores: usize) -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.saturating_sub(1).max(1))
            .build()
            .inspect_err(|e| tracing::debug!("no decoding pool ({e}): decoding on rayon's global pool"))
            .ok()
    })
    .as_ref()
}

/// A decoded block (or what was wrong with it), and the index of its thread.
type Decoded = (usize, Result<Records, Damage>);

/// The decoded blocks on their way from the decoding thread to the merge: a queue of at
/// most `cap` blocks whose producer, once it finds the queue full, sleeps until the merge
/// has taken half of them, so that it is woken once every `cap / 2` blocks rather than
/// once a block (as a bounded channel kept full would).
struct Ready {
    state: Mutex<ReadyState>,
    /// Where the decoding thread waits for room, and the merge for a block.
    room: std::sync::Condvar,
    block: std::sync::Condvar,
    cap: usize,
}

#[derive(Default)]
struct ReadyState {
    blocks: VecDeque<Decoded>,
    /// The decoding thread has handed out its last block.
    done: bool,
    /// The merge takes no more.
    closed: bool,
    decoder_waits: bool,
    merge_waits: bool,
}

impl Ready {
    fn new(cap: usize) -> Ready {
        let state = Mutex::new(ReadyState::default());
        Ready { state, room: std::sync::Condvar::new(), block: std::sync::Condvar::new(), cap: cap.max(1) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ReadyState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a block, waiting for room; `false` once the merge takes no more.
    fn push(&self, block: Decoded) -> bool {
        let mut s = self.lock();
        while s.blocks.len() >= self.cap && !s.closed {
            s.decoder_waits = true;
            s = self.room.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        if s.closed {
            return false;
        }
        s.blocks.push_back(block);
        if s.merge_waits {
            s.merge_waits = false;
            self.block.notify_one();
        }
        true
    }

    /// The next block, waiting for it; `None` once the decoding thread has handed out
    /// its last one.
    fn pop(&self) -> Option<Decoded> {
        let mut s = self.lock();
        loop {
            if let Some(block) = s.blocks.pop_front() {
                if s.decoder_waits && s.blocks.len() <= self.cap / 2 {
                    s.decoder_waits = false;
                    self.room.notify_one();
                }
                return Some(block);
            }
            if s.done {
                return None;
            }
            s.merge_waits = true;
            s = self.block.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Marks the decoding thread done when dropped (also when it unwinds).
    fn done_on_drop(&self) -> impl Drop + '_ {
        OnDrop(move || {
            let mut s = self.lock();
            s.done = true;
            self.block.notify_one();
        })
    }

    /// Marks the merge closed when dropped (also when it stops early or unwinds).
    fn closed_on_drop(&self) -> impl Drop + '_ {
        OnDrop(move || {
            let mut s = self.lock();
            s.closed = true;
            s.blocks.clear();
            self.room.notify_one();
        })
    }
}

/// Runs its closure when dropped.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// A block to decode, and where it goes.
struct BlockToDecode {
    /// Its ordering key (see [`IndexedLog::open`]).
    key: u64,
    offset: u64,
    frame: BlockFrame,
    thread_index: usize,
    /// The key of the records after its last sequenced one.
    key_after: u64,
}

impl ThreadBlocks {
    /// Keys a thread's blocks (in file order). A block sorts by its first sequence
    /// number; one without sequenced events by the next sequenced event of its thread
    /// (its records come just before that one), or goes to the tail if there is none.
    /// A key is never below the one before it (only a damaged log has sequence numbers
    /// running backwards), so that sorting by key keeps the thread's file order.
    fn keyed(thread: u32, framed: Vec<(u64, BlockFrame)>) -> ThreadBlocks {
        let last_sequenced = framed.iter().rposition(|(_, f)| sequenced(f));
        let tail_from = last_sequenced.map_or(0, |i| i + 1);
        let mut keys = vec![u64::MAX; tail_from];
        let mut after = u64::MAX;
        for (i, (_, f)) in framed[..tail_from].iter().enumerate().rev() {
            if sequenced(f) {
                after = f.first_seq;
            }
            keys[i] = after;
        }
        let mut floor = 0;
        let blocks = framed[..tail_from]
            .iter()
            .zip(keys)
            .map(|(&(offset, f), key)| {
                floor = key.max(floor);
                (offset, f, floor)
            })
            .collect();
        ThreadBlocks { thread, blocks, tail: framed[tail_from..].to_vec() }
    }

    /// Ordering key of the thread's next undecoded block; `None` when none is left, or
    /// the next one sorts last (its records come out with the tails).
    fn next_key(&self, undecoded: usize) -> Option<u64> {
        (undecoded > 0).then(|| self.blocks[self.blocks.len() - undecoded].2).and_then(merged_key)
    }
}

/// A record's key as the merge orders it: `None` for `u64::MAX`, which records with no
/// sequenced event after them carry (they come out last, with the tails).
#[inline(always)]
fn merged_key(key: u64) -> Option<u64> {
    (key != u64::MAX).then_some(key)
}

thread_local! {
    /// A decoding thread's buffers for a block's stored and decompressed bytes.
    static BLOCK_BUFFERS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Reads one block again and decodes it into `out` (cleared first), keying the
/// unsequenced records after its last sequenced one `key_after`; damage found now is
/// reported like pass one's.
fn decode_block(
    file: &File,
    offset: u64,
    frame: BlockFrame,
    key_after: u64,
    mut out: Records,
) -> Result<Records, Damage> {
    let damage = |error| Damage::BadBlock {
        offset,
        thread: frame.thread,
        events: frame.event_count,
        first_seq: frame.first_seq,
        last_seq: frame.last_seq,
        error,
    };
    out.clear();
    BLOCK_BUFFERS.with_borrow_mut(|(stored, raw)| {
        Block::read_stored_at(file, offset, frame, stored)
            .map_err(|e| damage(memreplay_format::BlockError::Malformed { offset: 0, what: io_what(&e) }))?;
        unpack_records(&frame, stored, raw, &mut out).map_err(damage)
    })?;
    // The unsequenced records before a sequenced one were keyed as they were decoded.
    out.key_trailing(key_after);
    Ok(out)
}

/// CPU time of the calling thread (not the time it spent waiting), where the OS says.
fn thread_cpu_seconds() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `t` is a valid timespec for the call to fill in.
        let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0;
        ok.then_some(t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

fn io_what(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "block cut off since the log was indexed",
        _ => "block that could not be read again",
    }
}

/// A thread's position in its decoded blocks.
/// The merge's threads by the key of what comes next on each (key, thread index): a
/// binary min-heap that also tells the second-smallest key (the limit of a run) and
/// replaces its top in one sift, where `BinaryHeap` would pop and push (two sifts) and
/// cannot say the second. With many threads in short runs, the merge does this once
/// every few events.
#[derive(Debug, Default)]
struct KeyHeap {
    a: Vec<(u64, usize)>,
}

impl KeyHeap {
    fn push(&mut self, e: (u64, usize)) {
        self.a.push(e);
        let mut i = self.a.len() - 1;
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.a[parent] <= self.a[i] {
                break;
            }
            self.a.swap(parent, i);
            i = parent;
        }
    }

    #[inline]
    fn top(&self) -> Option<(u64, usize)> {
        self.a.first().copied()
    }

    /// The smallest key after the top's.
    #[inline]
    fn second(&self) -> Option<u64> {
        match (self.a.get(1), self.a.get(2)) {
            (Some(l), Some(r)) => Some(l.0.min(r.0)),
            (Some(l), None) => Some(l.0),
            _ => None,
        }
    }

    /// Gives the top's thread the key `key`.
    #[inline]
    fn replace_top(&mut self, key: u64) {
        self.a[0].0 = key;
        self.sift_down(0);
    }

    fn pop(&mut self) {
        let last = self.a.pop();
        if let (Some(last), false) = (last, self.a.is_empty()) {
            self.a[0] = last;
            self.sift_down(0);
        }
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let n = self.a.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                return;
            }
            let child = if l + 1 < n && self.a[l + 1] < self.a[l] { l + 1 } else { l };
            if self.a[i] <= self.a[child] {
                return;
            }
            self.a.swap(i, child);
            i = child;
        }
    }
}

struct Cursor {
    thread: u32,
    queue: VecDeque<Records>,
    /// Index in `queue[0].records`.
    pos: usize,
    undecoded: usize,
    /// The last `head_key` came from the queue's front record (not from an undecoded block).
    key_from_queue: bool,
}

impl Cursor {
    /// Drops spent blocks from the front of the queue (into `spare`). The check inline,
    /// the dropping out of line: with many threads in short runs the merge reads a
    /// thread's queue every few events, and finds a block spent once in hundreds.
    #[inline(always)]
    fn skip_spent(&mut self, spare: &Mutex<VecDeque<Records>>) {
        if self.queue.front().is_some_and(|b| self.pos >= b.records.len()) {
            self.drop_spent(spare);
        }
    }

    #[cold]
    #[inline(never)]
    fn drop_spent(&mut self, spare: &Mutex<VecDeque<Records>>) {
        while self.queue.front().is_some_and(|b| self.pos >= b.records.len()) {
            if let (Some(b), Ok(mut spare)) = (self.queue.pop_front(), spare.lock()) {
                spare.push_back(b);
            }
            self.pos = 0;
        }
    }

    fn has_record(&self) -> bool {
        !self.queue.is_empty()
    }

    /// The key of what comes next on the thread: its next record, or its next undecoded
    /// block (the key `next_block` gives, asked only then); `None` when only records
    /// keyed `u64::MAX` (nothing sequenced after them) are left.
    #[inline(always)]
    fn head_key(
        &mut self,
        next_block: impl FnOnce(usize) -> Option<u64>,
        spare: &Mutex<VecDeque<Records>>,
    ) -> Option<u64> {
        self.skip_spent(spare);
        self.key_from_queue = !self.queue.is_empty();
        match self.queue.front() {
            Some(b) => merged_key(b.records[self.pos].key),
            None => next_block(self.undecoded),
        }
    }

    /// Hands out records while their key stays below `limit` (the caller decoded every
    /// block that could come before it). Returns how many, and the key of the record it
    /// stopped before, if it stopped before one (its queue's front: what `head_key` would
    /// read); `None` if its queue ran dry.
    // Its own function, the replay loop: inlined into `replay_with` (as it was once the
    // merge took decoded blocks one at a time), the merge thread ran 4.4 % more
    // instructions on `replay_throughput`'s 2 M-event log (callgrind).
    #[inline(never)]
    fn emit_run(&mut self, limit: u64, f: &mut impl EventSink, spare: &Mutex<VecDeque<Records>>) -> (u64, Option<u64>) {
        let thread = self.thread;
        let mut n = 0;
        loop {
            let Some(block) = self.queue.front() else { return (n, None) };
            let records = &block.records;
            let start = self.pos;
            if start >= records.len() {
                self.drop_spent(spare);
                continue;
            }
            // The records this run will announce, loaded ahead for the next run: on a
            // log whose threads take turns every few events, each thread's queue is one
            // of many read a few records at a time, which the hardware does not follow
            // (16 threads in runs of 1-4: 11-12 % faster; a run of one thread's events
            // pays two prefetches).
            let ahead = records.as_ptr().wrapping_add(start + 2 * LOOKAHEAD_EVENTS).cast::<u8>();
            prefetch_line(ahead);
            prefetch_line(ahead.wrapping_add(64));
            let mut i = start;
            while let Some(r) = records.get(i) {
                if r.key >= limit {
                    break;
                }
                f.record(thread, r, block);
                if let Some(ahead) = records.get(i + LOOKAHEAD_EVENTS) {
                    f.upcoming(ahead);
                }
                i += 1;
            }
            n += (i - start) as u64;
            self.pos = i;
            if let Some(r) = records.get(i) {
                self.key_from_queue = true;
                return (n, Some(r.key));
            }
        }
    }

    /// Hands out everything left.
    fn drain(&mut self, f: &mut impl EventSink) -> u64 {
        let mut n = 0;
        let thread = self.thread;
        for (bi, block) in self.queue.iter().enumerate() {
            let from = if bi == 0 { self.pos } else { 0 };
            for r in block.records.iter().skip(from) {
                f.record(thread, r, block);
                n += 1;
            }
        }
        self.queue.clear();
        self.pos = 0;
        n
    }
}

#[cfg(test)]
mod tests {
    use memreplay_format::{header_flags, Event, EventEncoder, LogWriter, RecordKind};

    use super::*;

    /// Every record handed out: (thread, key, kind, addr).
    #[derive(Default)]
    struct Seen(Vec<(u32, u64, RecordKind, u64)>);

    impl EventSink for Seen {
        fn record(&mut self, thread: u32, r: &Record, _block: &Records) {
            self.0.push((thread, r.key, r.kind, r.addr));
        }
    }

    /// Three threads whose allocations interleave across blocks, with blocks of context
    /// pushes and pops between their sequenced blocks and after their last ones.
    fn log(path: &Path) {
        let header = FileHeader { flags: header_flags::CALLSTACKS_ON_ALLOC, ..memreplay_fixtures::header() };
        let mut w = LogWriter::new(File::create(path).unwrap(), &header).unwrap();
        let mut seq = 1u64;
        for round in 0..60u64 {
            for thread in 1..=3u32 {
                let mut enc = EventEncoder::new();
                if (round + u64::from(thread)) % 4 == 0 {
                    // A block without sequenced events.
                    for _ in 0..50 {
                        enc.push(&Event::ContextPush { ty: thread, name: 1, flags: 0 });
                        enc.push(&Event::ContextPop);
                    }
                } else if round < 50 {
                    for i in 0..20 {
                        enc.push(&Event::ContextPush { ty: thread, name: 1, flags: 0 });
                        let addr = u64::from(thread) << 32 | round << 8 | i;
                        enc.push(&Event::Alloc { seq, domain: 0, addr, size: 16, align_log2: 3, stack: 0 });
                        enc.push(&Event::ContextPop);
                        // The threads' sequence numbers interleave.
                        seq += 1 + u64::from(i % 3 == 0);
                    }
                } else {
                    continue;
                }
                w.write_block(thread, &mut enc).unwrap();
            }
        }
        w.finish(0, 10).unwrap();
    }

    /// Decoding on the replaying thread and on the pool hand out the same records in the
    /// same order, sequenced ones by sequence number, and every record once.
    #[test]
    fn inline_and_threaded_decoding_agree() {
        let path = std::env::temp_dir().join(format!("replay-source-{}.mrl", std::process::id()));
        log(&path);
        let replay = |threaded| {
            let mut seen = Seen::default();
            IndexedLog::open(&path).unwrap().replay_with(&mut seen, |_| {}, threaded);
            seen.0
        };
        let inline = replay(false);
        assert_eq!(inline, replay(true));
        let total: u64 = IndexedLog::open(&path).unwrap().events;
        assert_eq!(inline.len() as u64, total);
        let keys: Vec<u64> = inline.iter().filter(|r| r.2 == RecordKind::Alloc).map(|r| r.1).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "allocations out of order");
        // Each thread's records stay in its own order: its pushes and pops balance.
        for thread in 1..=3 {
            let mut depth = 0i64;
            for r in inline.iter().filter(|r| r.0 == thread) {
                match r.2 {
                    RecordKind::ContextPush => depth += 1,
                    RecordKind::ContextPop => depth -= 1,
                    RecordKind::Alloc => assert_eq!(depth, 1),
                    _ => {}
                }
                assert!((0..=1).contains(&depth));
            }
        }
        std::fs::remove_file(&path).ok();
    }

    /// A sink that stops after `n` records.
    struct StopAfter(u64, u64);

    impl EventSink for StopAfter {
        fn record(&mut self, _thread: u32, _r: &Record, _block: &Records) {
            self.0 += 1;
        }

        fn stopped(&mut self) -> bool {
            self.0 >= self.1
        }
    }

    /// A replay that stops early returns (the decoding thread, waiting for room, is let
    /// go) where it stood: 500 blocks of 100 allocations, stopped at the first check.
    #[test]
    fn a_threaded_replay_that_stops_returns() {
        let path = std::env::temp_dir().join(format!("replay-source-stop-{}.mrl", std::process::id()));
        let mut w = LogWriter::new(File::create(&path).unwrap(), &memreplay_fixtures::header()).unwrap();
        for block in 0..500u64 {
            let mut enc = EventEncoder::new();
            for i in 0..100 {
                let seq = block * 100 + i + 1;
                enc.push(&Event::Alloc { seq, domain: 0, addr: seq * 16, size: 16, align_log2: 3, stack: 0 });
            }
            w.write_block(1, &mut enc).unwrap();
        }
        w.finish(0, 10).unwrap();
        let mut sink = StopAfter(0, 1);
        IndexedLog::open(&path).unwrap().replay_with(&mut sink, |_| {}, true);
        assert!(sink.0 > 1 << STOP_CHECK_SHIFT && sink.0 < 2 << STOP_CHECK_SHIFT, "{} records", sink.0);
        std::fs::remove_file(&path).ok();
    }

    /// The queue between the decoding thread and the merge hands out every block in
    /// order, never holds more than its capacity, and lets a waiting producer go when
    /// the consumer closes it.
    #[test]
    fn ready_blocks_come_in_order_and_close() {
        let block = |i: usize| (i, Ok(Records::default()));
        let ready = Ready::new(4);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let _done = ready.done_on_drop();
                for i in 0..1_000 {
                    assert!(ready.push(block(i)));
                    assert!(ready.lock().blocks.len() <= 4);
                }
            });
            for i in 0..1_000 {
                assert_eq!(ready.pop().map(|b| b.0), Some(i));
            }
            assert!(ready.pop().is_none(), "done");
        });
        let ready = Ready::new(4);
        std::thread::scope(|scope| {
            let producer = scope.spawn(|| {
                let _done = ready.done_on_drop();
                (0..1_000).take_while(|&i| ready.push(block(i))).count()
            });
            assert_eq!(ready.pop().map(|b| b.0), Some(0));
            drop(ready.closed_on_drop());
            let pushed = producer.join().unwrap();
            assert!((1..=6).contains(&pushed), "{pushed} pushed");
        });
    }
}
