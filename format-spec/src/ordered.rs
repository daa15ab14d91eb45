//! Rebuilds the global order of events across threads from their sequence numbers.
//!
//! Each thread's events are in order within its stream (its blocks in file order).
//! Sequenced events (alloc, free, realloc, usage, attach, label, frame) carry the global
//! `seq` the recorder took at the moment the allocator acted, so merging the streams by
//! `seq` gives the exact order in which the allocator saw them. A realloc appears twice,
//! as its free half at `free_seq` and its allocation half at `seq`, because another
//! thread may free or reuse memory between the two. An unsequenced event (context
//! push/pop, time, definitions) stays in place: it is delivered just before the next
//! sequenced event of its own thread, or after every sequenced event if none follows.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::event::Event;
use crate::reader::DecodedBlock;

/// Which part of an event a merged item stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The whole event (every kind but realloc).
    Whole,
    /// A realloc's free of `old_addr`, at its `free_seq`.
    ReallocFree,
    /// A realloc's allocation of `new_addr`, at its `seq`.
    ReallocAlloc,
}

/// An event (or a realloc half) with the stream (thread) it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadEvent<'a> {
    pub thread: u32,
    pub event: &'a Event,
    pub part: Part,
}

/// (ordering key, event, part); the key is `None` for unsequenced events.
type Item<'a> = (Option<u64>, &'a Event, Part);

/// Merges the events of `blocks` (in file order) into their global order.
pub fn merge_by_seq(blocks: &[DecodedBlock]) -> Vec<ThreadEvent<'_>> {
    let mut streams: Vec<(u32, Vec<Item<'_>>)> = Vec::new();
    let mut index: HashMap<u32, usize> = HashMap::new();
    for b in blocks {
        let i = *index.entry(b.frame.thread).or_insert_with(|| {
            streams.push((b.frame.thread, Vec::new()));
            streams.len() - 1
        });
        let items = &mut streams[i].1;
        for e in &b.events {
            match *e {
                Event::Realloc { free_seq, seq, .. } => {
                    items.push((Some(free_seq), e, Part::ReallocFree));
                    items.push((Some(seq), e, Part::ReallocAlloc));
                }
                _ => items.push((e.seq(), e, Part::Whole)),
            }
        }
    }
    let total = streams.iter().map(|s| s.1.len()).sum();

    let next_keyed = |s: &[Item<'_>], from: usize| s[from..].iter().position(|it| it.0.is_some()).map(|p| from + p);

    let mut out = Vec::with_capacity(total);
    let mut cursors = vec![0usize; streams.len()];
    let mut heap = BinaryHeap::new();
    for (i, (_, s)) in streams.iter().enumerate() {
        if let Some(p) = next_keyed(s, 0) {
            heap.push(Reverse((s[p].0, i, p)));
        }
    }
    while let Some(Reverse((_, i, p))) = heap.pop() {
        let (thread, s) = &streams[i];
        for &(_, event, part) in &s[cursors[i]..=p] {
            out.push(ThreadEvent { thread: *thread, event, part });
        }
        cursors[i] = p + 1;
        if let Some(p) = next_keyed(s, p + 1) {
            heap.push(Reverse((s[p].0, i, p)));
        }
    }
    // Trailing unsequenced events of each stream.
    for (i, (thread, s)) in streams.iter().enumerate() {
        for &(_, event, part) in &s[cursors[i]..] {
            out.push(ThreadEvent { thread: *thread, event, part });
        }
    }
    out
}
