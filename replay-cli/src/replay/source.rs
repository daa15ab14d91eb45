//! The ordered event source: a log's events in the exact order the allocator saw them,
//! streamed, with memory proportional to threads rather than to events.
//!
//! Pass one ([`IndexedLog::open`]) reads the file once, framing blocks without decoding
//! them, and keeps each thread's block list. Pass two ([`IndexedLog::replay`]) decodes
//! blocks in parallel, in the order of their first sequence number, and merges the
//! threads' streams by sequence number. The merge only hands out an event once every
//! block that could hold a smaller sequence number has been decoded: a block's events
//! all carry numbers at or above its frame's `first_seq`, so everything below the
//! `first_seq` of the next undecoded block is known.
//!
//! A realloc is handed out twice, as in [`memreplay_format::merge_by_seq`]: its free half
//! at `free_seq` and its allocation half at `seq`. Unsequenced events (context push and
//! pop, time, definitions) come out just before the next sequenced event of their thread.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::path::Path;

use memreplay_format::{Block, BlockFrame, Damage, Event, FileHeader, FormatError, LogReader, Part, ReadReport};
use rayon::prelude::*;

use super::ReplayState;

/// What the events are handed to, in global order.
pub trait EventSink {
    /// One event (or realloc half) of stream `thread`.
    fn event(&mut self, thread: u32, event: &Event, part: Part);

    /// A hint: `event` comes a few events from now (see `addr_map.rs`).
    #[inline]
    fn upcoming(&mut self, _event: &Event) {}
}

impl<F: FnMut(u32, &Event, Part)> EventSink for F {
    #[inline]
    fn event(&mut self, thread: u32, event: &Event, part: Part) {
        self(thread, event, part)
    }
}

impl EventSink for ReplayState {
    #[inline]
    fn event(&mut self, thread: u32, event: &Event, part: Part) {
        self.apply(thread, event, part)
    }

    #[inline]
    fn upcoming(&mut self, event: &Event) {
        ReplayState::upcoming(self, event)
    }
}

/// How far ahead of the event being applied the next ones are announced: enough for
/// their cache misses to overlap, not so far that the lines are evicted again. Measured
/// on `replay_throughput`'s 20 M-event log (same session): no lookahead 6.1 M events/s,
/// 8 events 8.5, 16 12, 32 13.5, 64 12.
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

impl IndexedLog {
    /// Pass one: checks the header and frames every block. Damage is recorded, not fatal.
    pub fn open(path: &Path) -> Result<IndexedLog, FormatError> {
        let file = File::open(path)?;
        let mut reader = LogReader::new(std::io::BufReader::with_capacity(1 << 20, file.try_clone()?))?;
        let mut threads: Vec<ThreadBlocks> = Vec::new();
        let mut by_thread: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
        let mut events = 0u64;
        while let Some(block) = reader.next_block()? {
            let f = block.frame;
            events += u64::from(f.event_count);
            let i = *by_thread.entry(f.thread).or_insert_with(|| {
                threads.push(ThreadBlocks { thread: f.thread, blocks: Vec::new() });
                threads.len() - 1
            });
            let t = &mut threads[i];
            // A block without sequenced events sorts where its thread's stream stands.
            let key = if f.first_seq == 0 && f.last_seq == 0 {
                t.blocks.last().map_or(0, |&(_, prev, key)| if prev.last_seq == 0 { key } else { prev.last_seq })
            } else {
                f.first_seq
            };
            t.blocks.push((block.offset, f, key));
        }
        let header = reader.header().clone();
        Ok(IndexedLog { header, report: reader.into_report(), events, file, threads })
    }

    /// Threads (streams) in the log.
    pub fn thread_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.threads.iter().map(|t| t.thread)
    }

    /// Pass two: calls `f` with every event in global order, and `progress` with the
    /// number of events handed out so far, now and then.
    pub fn replay(&mut self, f: &mut impl EventSink, mut progress: impl FnMut(u64)) {
        let mut order: Vec<(u64, u64, usize)> = Vec::new();
        for (ti, t) in self.threads.iter().enumerate() {
            order.extend(t.blocks.iter().map(|&(offset, _, key)| (key, offset, ti)));
        }
        order.sort_unstable();
        let frames: std::collections::HashMap<u64, BlockFrame> =
            self.threads.iter().flat_map(|t| t.blocks.iter().map(|&(o, f, _)| (o, f))).collect();

        let mut cursors: Vec<Cursor> = self
            .threads
            .iter()
            .map(|t| Cursor { thread: t.thread, queue: VecDeque::new(), pos: 0, part: 0, undecoded: t.blocks.len() })
            .collect();
        let batch = (rayon::current_num_threads() * 4).max(8);
        let mut handed_out = 0u64;
        let mut damage: Vec<Damage> = Vec::new();
        let file = &self.file;
        let threads = &self.threads;

        std::thread::scope(|scope| {
            // Decoding runs ahead of the merge on its own thread (and rayon's pool), a few
            // batches at most, so decoding and replaying overlap.
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(usize, Result<Vec<Event>, Damage>)>>(LOOKAHEAD);
            let order_ref = &order;
            let frames = &frames;
            scope.spawn(move || {
                for chunk in order_ref.chunks(batch) {
                    let decoded = chunk
                        .par_iter()
                        .map(|&(_, offset, ti)| (ti, decode_block(file, offset, frames[&offset])))
                        .collect();
                    if tx.send(decoded).is_err() {
                        return;
                    }
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
                        Ok(events) => c.queue.push_back(events),
                        Err(d) => damage.push(d),
                    }
                }
            };
            let frontier = |next: usize| order.get(next).map_or(u64::MAX, |o| o.0);

            let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
            for (ti, c) in cursors.iter().enumerate() {
                if let Some(k) = c.head_key(threads[ti].next_key(c)) {
                    heap.push(Reverse((k, ti)));
                }
            }
            while let Some(Reverse((key, ti))) = heap.pop() {
                // Nothing undecoded may come before `key`.
                while key >= frontier(next) && next < order.len() {
                    decode_batch(&mut next, &mut cursors);
                }
                let c = &mut cursors[ti];
                match c.head(threads[ti].next_key(c)) {
                    Head::Item(k) if k == key => {}
                    Head::Item(k) => {
                        heap.push(Reverse((k, ti)));
                        continue;
                    }
                    // Its next block was damaged and skipped: wait for the one after.
                    Head::NeedBlock(k) => {
                        heap.push(Reverse((k, ti)));
                        continue;
                    }
                    // Only unsequenced events left: they come after every sequenced one.
                    Head::Done => continue,
                }
                // Hand out the thread's items while they come before every other thread's.
                let limit = heap.peek().map_or(u64::MAX, |Reverse((k, _))| *k).min(frontier(next));
                let next_block = threads[ti].next_key(c);
                handed_out += c.emit_run(key, limit, next_block, f);
                progress(handed_out);
                if let Some(k) = c.head_key(threads[ti].next_key(c)) {
                    heap.push(Reverse((k, ti)));
                }
            }
            // Threads whose last events are unsequenced, and any blocks left (all unsequenced).
            while next < order.len() {
                decode_batch(&mut next, &mut cursors);
            }
        });
        for c in &mut cursors {
            handed_out += c.drain(f);
        }
        progress(handed_out);
        self.report.damage.extend(damage);
    }
}

impl ThreadBlocks {
    /// Ordering key of the thread's next undecoded block.
    fn next_key(&self, c: &Cursor) -> Option<u64> {
        (c.undecoded > 0).then(|| self.blocks[self.blocks.len() - c.undecoded].2)
    }
}

/// Batches of decoded blocks the decoding thread may run ahead of the merge.
const LOOKAHEAD: usize = 4;

/// Reads one block again and decodes it; damage found now is reported like pass one's.
fn decode_block(file: &File, offset: u64, frame: BlockFrame) -> Result<Vec<Event>, Damage> {
    Block::read_at(file, offset, frame)
        .map_err(|e| memreplay_format::BlockError::Malformed { offset: 0, what: io_what(&e) })
        .and_then(|b| b.decode())
        .map(|d| d.events)
        .map_err(|error| Damage::BadBlock {
            offset,
            thread: frame.thread,
            events: frame.event_count,
            first_seq: frame.first_seq,
            last_seq: frame.last_seq,
            error,
        })
}

fn io_what(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "block cut off since the log was indexed",
        _ => "block that could not be read again",
    }
}

/// What comes next on a thread.
enum Head {
    /// A sequenced item with this key is next (possibly after unsequenced ones).
    Item(u64),
    /// The decoded events are used up; the next block (this key) is not decoded yet.
    NeedBlock(u64),
    /// Only unsequenced items (or nothing) remain.
    Done,
}

/// A thread's position in its decoded blocks.
struct Cursor {
    thread: u32,
    queue: VecDeque<Vec<Event>>,
    /// Index in `queue[0]` and, for a realloc, which half (0 = free, 1 = allocation).
    pos: usize,
    part: u8,
    undecoded: usize,
}

/// The ordering key and part of item (`e`, `part`).
#[inline]
fn item(e: &Event, part: u8) -> (Option<u64>, Part) {
    match *e {
        Event::Realloc { free_seq, seq, .. } => {
            if part == 0 {
                (Some(free_seq), Part::ReallocFree)
            } else {
                (Some(seq), Part::ReallocAlloc)
            }
        }
        _ => (e.seq(), Part::Whole),
    }
}

impl Cursor {
    /// The current item, if the decoded blocks hold one.
    #[inline(always)]
    fn current(&mut self) -> Option<(&Event, u8)> {
        while let Some(front) = self.queue.front() {
            if self.pos < front.len() {
                break;
            }
            self.queue.pop_front();
            self.pos = 0;
            self.part = 0;
        }
        let part = self.part;
        self.queue.front().map(|b| (&b[self.pos], part))
    }

    /// The event `d` events after the current one, if its block is at hand.
    #[inline]
    fn ahead(&self, d: usize) -> Option<&Event> {
        self.queue.front()?.get(self.pos + d)
    }

    #[inline]
    fn advance(&mut self, e_is_realloc: bool) {
        if e_is_realloc && self.part == 0 {
            self.part = 1;
        } else {
            self.part = 0;
            self.pos += 1;
        }
    }

    fn head(&self, next_block: Option<u64>) -> Head {
        let (mut bi, mut pos, mut part) = (0usize, self.pos, self.part);
        // Skip exhausted blocks without consuming anything.
        while let Some(b) = self.queue.get(bi) {
            while pos < b.len() {
                let e = &b[pos];
                if let (Some(k), _) = item(e, part) {
                    return Head::Item(k);
                }
                if matches!(e, Event::Realloc { .. }) && part == 0 {
                    part = 1;
                } else {
                    part = 0;
                    pos += 1;
                }
            }
            bi += 1;
            pos = 0;
            part = 0;
        }
        match next_block {
            Some(k) => Head::NeedBlock(k),
            None => Head::Done,
        }
    }

    fn head_key(&self, next_block: Option<u64>) -> Option<u64> {
        match self.head(next_block) {
            Head::Item(k) | Head::NeedBlock(k) => Some(k),
            Head::Done => None,
        }
    }

    /// Hands out items up to the sequenced one keyed `first`, then on while this thread's
    /// next sequenced item stays below `limit` (`first < limit`: the caller decoded every
    /// block that could come before it). Unsequenced items go out only once the
    /// sequenced item after them is known to go out too. Returns how many.
    fn emit_run(&mut self, first: u64, limit: u64, next_block: Option<u64>, f: &mut impl EventSink) -> u64 {
        debug_assert!(first < limit);
        let thread = self.thread;
        let mut n = 0;
        // Whether the unsequenced items before the next sequenced one may go out.
        let mut cleared = false;
        loop {
            let Some((e, part)) = self.current() else { return n };
            let (k, p) = item(e, part);
            let is_realloc = matches!(e, Event::Realloc { .. });
            match k {
                Some(k) if k >= limit => return n,
                Some(_) => cleared = false,
                None if !cleared => match self.head(next_block) {
                    Head::Item(k) if k < limit => {
                        cleared = true;
                        continue;
                    }
                    _ => return n,
                },
                None => {}
            }
            f.event(thread, e, p);
            n += 1;
            self.advance(is_realloc);
            if let Some(ahead) = self.ahead(LOOKAHEAD_EVENTS) {
                f.upcoming(ahead);
            }
            // The decoded events were written by another core: fetch them before
            // `upcoming` reads them, or every line of them is a stall.
            if let Some(later) = self.ahead(2 * LOOKAHEAD_EVENTS) {
                super::addr_map::prefetch_line(later);
            }
        }
    }

    /// Hands out everything left.
    fn drain(&mut self, f: &mut impl EventSink) -> u64 {
        let mut n = 0;
        let thread = self.thread;
        while let Some((e, part)) = self.current() {
            let (_, p) = item(e, part);
            let is_realloc = matches!(e, Event::Realloc { .. });
            f.event(thread, e, p);
            n += 1;
            self.advance(is_realloc);
        }
        n
    }
}
