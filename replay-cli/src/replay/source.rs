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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::path::Path;
use std::sync::Mutex;

use memreplay_format::{
    block::unpack_payload_into, decode_records, Block, BlockFrame, Damage, FileHeader, FormatError, LogReader,
    ReadReport, Record, Records,
};
use rayon::prelude::*;

use super::ReplayState;

/// What the records are handed to, in global order.
pub trait EventSink {
    /// One record of stream `thread`; `block` holds the events its `Event` records refer to.
    fn record(&mut self, thread: u32, record: &Record, block: &Records);

    /// A hint: `record` comes a few records from now (see `addr_map.rs`).
    #[inline]
    fn upcoming(&mut self, _record: &Record) {}
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
}

/// How far ahead of the record being applied the next ones are announced: enough for
/// their cache misses to overlap, not so far that the lines are evicted again. Measured
/// on `replay_throughput`'s 20 M-event log (same session, with `Event`s rather than
/// records): no lookahead 6.1 M events/s, 8 events 8.5, 16 12, 32 13.5, 64 12.
const LOOKAHEAD_EVENTS: usize = 32;

/// A log whose blocks have been framed and indexed per thread, ready to replay.
pub struct IndexedLog {
    pub header: FileHeader,
    /// What pass one found; pass two adds blocks that fail to decode.
    pub report: ReadReport,
    /// Events in the blocks the index holds (from their frames).
    pub events: u64,
    file: File,
    threads: Vec<ThreadBlocks>,
}

struct ThreadBlocks {
    thread: u32,
    /// (file offset, frame, ordering key), in file order.
    blocks: Vec<(u64, BlockFrame, u64)>,
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
        let mut threads: Vec<ThreadBlocks> = Vec::new();
        let mut by_thread: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        let mut events = 0u64;
        while let Some((offset, f)) = reader.next_frame()? {
            events += u64::from(f.event_count);
            let i = *by_thread.entry(f.thread).or_insert_with(|| {
                threads.push(ThreadBlocks { thread: f.thread, blocks: Vec::new() });
                threads.len() - 1
            });
            let t = &mut threads[i];
            // A block without sequenced events sorts where its thread's stream stands.
            let key = if sequenced(&f) {
                f.first_seq
            } else {
                t.blocks.last().map_or(0, |&(_, prev, key)| if sequenced(&prev) { prev.last_seq } else { key })
            };
            t.blocks.push((offset, f, key));
        }
        let header = reader.header().clone();
        Ok(IndexedLog { header, report: reader.into_report(), events, file, threads })
    }

    /// Threads (streams) in the log.
    pub fn thread_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.threads.iter().map(|t| t.thread)
    }

    /// Pass two: hands every record to `f` in global order, and calls `progress` with the
    /// number of records handed out so far, now and then.
    pub fn replay(&mut self, f: &mut impl EventSink, mut progress: impl FnMut(u64)) {
        let order = self.decoding_order();
        let mut cursors: Vec<Cursor> = self
            .threads
            .iter()
            .map(|t| Cursor { thread: t.thread, queue: VecDeque::new(), pos: 0, undecoded: t.blocks.len() })
            .collect();
        // The merge takes a core of its own: decoding gets the others (at least one), so
        // that the two never take turns on one core.
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let decoders = rayon::ThreadPoolBuilder::new()
            .num_threads(cores.saturating_sub(1).max(1))
            .build()
            .inspect_err(|e| tracing::debug!("no decoding pool ({e}): decoding on rayon's global pool"))
            .ok();
        let batch = (cores * 4).max(8);
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

        std::thread::scope(|scope| {
            // Decoding runs ahead of the merge on its own thread (and rayon's pool), a few
            // batches at most, so decoding and replaying overlap.
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(usize, Result<Records, Damage>)>>(LOOKAHEAD);
            let order_ref = &order;
            let spare_ref = &spare;
            let decoders = &decoders;
            scope.spawn(move || {
                let decode_all = || {
                    let start = thread_cpu_seconds();
                    for chunk in order_ref.chunks(batch) {
                        let decoded = chunk
                            .par_iter()
                            .map(|b| {
                                let out =
                                    spare_ref.lock().map(|mut s| s.pop_front()).ok().flatten().unwrap_or_default();
                                (b.thread_index, decode_block(file, b, out))
                            })
                            .collect();
                        if tx.send(decoded).is_err() {
                            return;
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

            let mut next = 0usize;
            // Takes the next decoded batch (in key order) into its threads' queues.
            let mut decode_batch = |next: &mut usize, cursors: &mut [Cursor]| {
                let Ok(decoded) = rx.recv() else {
                    *next = order.len();
                    return;
                };
                *next = (*next + decoded.len()).min(order.len());
                for (ti, result) in decoded {
                    let c = &mut cursors[ti];
                    c.undecoded -= 1;
                    match result {
                        Ok(records) => c.queue.push_back(records),
                        Err(d) => damage.push(d),
                    }
                }
            };
            let frontier = |next: usize| order.get(next).map_or(u64::MAX, |b| b.key);

            let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
            for (ti, c) in cursors.iter_mut().enumerate() {
                if let Some(k) = c.head_key(threads[ti].next_key(c.undecoded), &spare) {
                    heap.push(Reverse((k, ti)));
                }
            }
            while let Some(Reverse((key, ti))) = heap.pop() {
                // Nothing undecoded may come before `key`.
                while key >= frontier(next) && next < order.len() {
                    decode_batch(&mut next, &mut cursors);
                }
                let c = &mut cursors[ti];
                match c.head_key(threads[ti].next_key(c.undecoded), &spare) {
                    Some(k) if k == key && c.has_record() => {}
                    // A block came in with an earlier key, or the next block is still
                    // undecoded (or was damaged and skipped: wait for the one after).
                    Some(k) => {
                        heap.push(Reverse((k, ti)));
                        continue;
                    }
                    // Only records without a sequenced event after them are left.
                    None => continue,
                }
                // Hand out the thread's records while they come before every other thread's.
                // (At least its first record: a log with a sequence number twice must not stall.)
                let limit = heap.peek().map_or(u64::MAX, |Reverse((k, _))| *k).min(frontier(next)).max(key + 1);
                handed_out += c.emit_run(limit, f, &spare);
                progress(handed_out);
                if let Some(k) = c.head_key(threads[ti].next_key(c.undecoded), &spare) {
                    heap.push(Reverse((k, ti)));
                }
            }
            // Blocks left (all of them without sequenced events, or after the last one).
            while next < order.len() {
                decode_batch(&mut next, &mut cursors);
            }
        });
        for c in &mut cursors {
            handed_out += c.drain(f);
        }
        progress(handed_out);
        self.report.damage.extend(damage);
        if let (Some(start), Some(end)) = (merge_cpu, thread_cpu_seconds()) {
            tracing::debug!("merge and replay: {:.3} s of CPU on its thread", end - start);
        }
    }

    /// Every block, in the order to decode them (by ordering key), with the key that its
    /// trailing unsequenced records take: the first sequenced event of the thread's next
    /// block that has one.
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
    /// Ordering key of the thread's next undecoded block.
    fn next_key(&self, undecoded: usize) -> Option<u64> {
        (undecoded > 0).then(|| self.blocks[self.blocks.len() - undecoded].2)
    }
}

/// Batches of decoded blocks the decoding thread may run ahead of the merge.
const LOOKAHEAD: usize = 4;

thread_local! {
    /// A decoding thread's buffers for a block's stored and decompressed bytes.
    static BLOCK_BUFFERS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Reads one block again and decodes it into `out` (cleared first), keying its unsequenced
/// records; damage found now is reported like pass one's.
fn decode_block(file: &File, b: &BlockToDecode, mut out: Records) -> Result<Records, Damage> {
    let frame = b.frame;
    let damage = |error| Damage::BadBlock {
        offset: b.offset,
        thread: frame.thread,
        events: frame.event_count,
        first_seq: frame.first_seq,
        last_seq: frame.last_seq,
        error,
    };
    out.clear();
    BLOCK_BUFFERS.with_borrow_mut(|(stored, raw)| {
        Block::read_stored_at(file, b.offset, frame, stored)
            .map_err(|e| damage(memreplay_format::BlockError::Malformed { offset: 0, what: io_what(&e) }))?;
        let payload = unpack_payload_into(&frame, stored, raw).map_err(damage)?;
        // A record takes at least one byte of payload (a realloc's two, many more): a
        // corrupt count must not reserve more.
        out.records.reserve((frame.event_count as usize).min(payload.len()));
        decode_records(payload, &mut out).map_err(damage)
    })?;
    // The unsequenced records before a sequenced one were keyed as they were decoded.
    out.key_trailing(b.key_after);
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
struct Cursor {
    thread: u32,
    queue: VecDeque<Records>,
    /// Index in `queue[0].records`.
    pos: usize,
    undecoded: usize,
}

impl Cursor {
    /// Drops spent blocks from the front of the queue (into `spare`).
    fn skip_spent(&mut self, spare: &Mutex<VecDeque<Records>>) {
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
    /// block (`next_block`); `None` when only records keyed `u64::MAX` (nothing sequenced
    /// after them) are left.
    fn head_key(&mut self, next_block: Option<u64>, spare: &Mutex<VecDeque<Records>>) -> Option<u64> {
        self.skip_spent(spare);
        match self.queue.front() {
            Some(b) => Some(b.records[self.pos].key).filter(|&k| k != u64::MAX),
            None => next_block,
        }
    }

    /// Hands out records while their key stays below `limit` (the caller decoded every
    /// block that could come before it). Returns how many.
    fn emit_run(&mut self, limit: u64, f: &mut impl EventSink, spare: &Mutex<VecDeque<Records>>) -> u64 {
        let thread = self.thread;
        let mut n = 0;
        loop {
            self.skip_spent(spare);
            let Some(block) = self.queue.front() else { return n };
            let records = &block.records;
            let start = self.pos;
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
            if i < records.len() {
                return n;
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
        n
    }
}
