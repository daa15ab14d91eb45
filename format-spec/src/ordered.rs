//! Rebuilds the global order of events across threads from their sequence numbers.
//!
//! Each thread's events are in order within its stream (its blocks in file order).
//! Sequenced events (alloc, free, realloc, usage, attach, label, frame) carry the global
//! `seq` the recorder took at the moment the allocator acted, so merging the streams by
//! `seq` gives the exact order in which the allocator saw them. An unsequenced event
//! (context push/pop, time, definitions) stays in place: it is delivered just before the
//! next sequenced event of its own thread, or after every sequenced event if none follows.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::event::Event;
use crate::reader::DecodedBlock;

/// An event with the stream (thread) it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadEvent<'a> {
    pub thread: u32,
    pub event: &'a Event,
}

/// Merges the events of `blocks` (in file order) into their global order.
pub fn merge_by_seq(blocks: &[DecodedBlock]) -> Vec<ThreadEvent<'_>> {
    let mut streams: Vec<(u32, Vec<&Event>)> = Vec::new();
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut total = 0usize;
    for b in blocks {
        let i = *index.entry(b.frame.thread).or_insert_with(|| {
            streams.push((b.frame.thread, Vec::new()));
            streams.len() - 1
        });
        streams[i].1.extend(b.events.iter());
        total += b.events.len();
    }

    // next_seq[i][k]: position of the first sequenced event at or after k in stream i.
    let next_seq = |s: &[&Event], from: usize| s[from..].iter().position(|e| e.seq().is_some()).map(|p| from + p);

    let mut out = Vec::with_capacity(total);
    let mut cursors = vec![0usize; streams.len()];
    let mut heap = BinaryHeap::new();
    for (i, (_, s)) in streams.iter().enumerate() {
        if let Some(p) = next_seq(s, 0) {
            heap.push(Reverse((s[p].seq().unwrap_or(u64::MAX), i, p)));
        }
    }
    while let Some(Reverse((_, i, p))) = heap.pop() {
        let (thread, s) = &streams[i];
        for event in &s[cursors[i]..=p] {
            out.push(ThreadEvent { thread: *thread, event });
        }
        cursors[i] = p + 1;
        if let Some(p) = next_seq(s, p + 1) {
            heap.push(Reverse((s[p].seq().unwrap_or(u64::MAX), i, p)));
        }
    }
    // Trailing unsequenced events of each stream.
    for (i, (thread, s)) in streams.iter().enumerate() {
        for event in &s[cursors[i]..] {
            out.push(ThreadEvent { thread: *thread, event });
        }
    }
    out
}
