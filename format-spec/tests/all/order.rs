//! Rebuilding the global order from per-thread streams (SPEC.md §7, ordering).

use memreplay_format::*;
use proptest::collection::vec;
use proptest::prelude::*;

use crate::header;

/// Writes `blocks` (thread, events) in this file order and reads them back.
fn write_and_read(blocks: &[(u32, Vec<Event>)]) -> Log {
    let mut bytes = Vec::new();
    let mut w = LogWriter::new(&mut bytes, &header()).unwrap();
    let mut enc = EventEncoder::new();
    for (thread, events) in blocks {
        events.iter().for_each(|e| enc.push(e));
        w.write_block(*thread, &mut enc).unwrap();
    }
    w.finish(0, 0).unwrap();
    let log = Log::read(&bytes[..]).unwrap();
    assert!(log.report.is_clean());
    log
}

const P: u64 = 0x1000;
const R: u64 = 0x3000;
const R2: u64 = 0x4000;
const A: u32 = 1;
const B: u32 = 2;
const C: u32 = 3;

fn alloc(seq: u64, addr: u64) -> Event {
    Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size: 16, align_log2: 3, stack: 0 }
}

fn free(seq: u64, addr: u64) -> Event {
    Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: 0 }
}

#[test]
fn merges_three_threads_by_seq() {
    let realloc =
        Event::Realloc { free_seq: 5, seq: 7, old_addr: R, new_addr: R2, new_size: 64, align_log2: 3, stack: 0 };
    let push = Event::ContextPush { ty: 1, name: 1, flags: 0 };
    let defs = vec![Event::DefineString { id: 1, text: "level".into() }, Event::DefineContextType { id: 1, name: 1 }];
    // The global story: A frees P (3) and B reuses it (4); C's realloc frees R (5) and A
    // reuses R (6) before the realloc's allocation half returns (7).
    let blocks = vec![
        (0, defs.clone()),
        (A, vec![Event::Time { ns: 0 }, alloc(1, P), free(3, P)]),
        (C, vec![alloc(2, R)]),
        (B, vec![push.clone(), alloc(4, P)]),
        (A, vec![alloc(6, R), Event::FrameStart { seq: 9, frame: 1 }, Event::Time { ns: 100 }]),
        (C, vec![realloc.clone(), Event::Label { seq: 10, name: 1 }]),
        (B, vec![free(8, P), Event::ContextPop]),
    ];
    let log = write_and_read(&blocks);
    let merged = merge_by_seq(&log.blocks);
    let got: Vec<(u32, Event, Part)> = merged.iter().map(|t| (t.thread, t.event.clone(), t.part)).collect();
    use Part::*;
    let expected = vec![
        (A, Event::Time { ns: 0 }, Whole),
        (A, alloc(1, P), Whole),
        (C, alloc(2, R), Whole),
        (A, free(3, P), Whole),
        (B, push, Whole),
        (B, alloc(4, P), Whole),
        (C, realloc.clone(), ReallocFree),
        (A, alloc(6, R), Whole),
        (C, realloc, ReallocAlloc),
        (B, free(8, P), Whole),
        (A, Event::FrameStart { seq: 9, frame: 1 }, Whole),
        (C, Event::Label { seq: 10, name: 1 }, Whole),
        // Unsequenced events with no sequenced event after them come last, stream by
        // stream (in order of each stream's first block): definitions of the metadata
        // stream included, which is why readers collect definitions first.
        (0, defs[0].clone(), Whole),
        (0, defs[1].clone(), Whole),
        (A, Event::Time { ns: 100 }, Whole),
        (B, Event::ContextPop, Whole),
    ];
    assert_eq!(got, expected);

    let pos = |thread: u32, ev: &Event| got.iter().position(|(t, e, _)| *t == thread && e == ev).unwrap();
    assert!(pos(A, &free(3, P)) < pos(B, &alloc(4, P)), "a free precedes the reuse of its address");
}

#[test]
fn merge_of_nothing_is_empty() {
    assert!(merge_by_seq(&[]).is_empty());
}

/// (thread, sequenced?) for every event in global order; blocks break where `cuts` say.
fn scenario() -> impl Strategy<Value = (Vec<(u32, bool)>, Vec<bool>, Vec<usize>)> {
    (vec((0u32..4, any::<bool>()), 0..120), vec(any::<bool>(), 120), vec(any::<usize>(), 240))
}

proptest! {
    #[test]
    fn merge_restores_the_global_order((items, cuts, picks) in scenario()) {
        // Give each event a unique identity: sequenced events their seq, others a Time.
        let mut seq = 100u64;
        let mut per_thread: Vec<Vec<Vec<Event>>> = vec![vec![vec![]]; 4];
        for (k, &(thread, sequenced)) in items.iter().enumerate() {
            let ev = if sequenced {
                seq += 1 + (k as u64 % 3);
                alloc(seq, seq * 16)
            } else {
                Event::Time { ns: k as u64 }
            };
            let blocks = &mut per_thread[thread as usize];
            blocks.last_mut().unwrap().push(ev);
            if cuts[k] {
                blocks.push(vec![]);
            }
        }
        // Interleave the threads' blocks in the file, each thread's blocks in order.
        let mut queues: Vec<std::collections::VecDeque<Vec<Event>>> =
            per_thread.iter().map(|b| b.iter().filter(|e| !e.is_empty()).cloned().collect()).collect();
        let mut file = Vec::new();
        let mut k = 0;
        while queues.iter().any(|q| !q.is_empty()) {
            let live: Vec<usize> = (0..4).filter(|&t| !queues[t].is_empty()).collect();
            let t = live[picks[k % picks.len()] % live.len()];
            k += 1;
            file.push((t as u32, queues[t].pop_front().unwrap()));
        }
        let log = write_and_read(&file);
        let merged = merge_by_seq(&log.blocks);
        prop_assert_eq!(merged.len(), items.len());

        // Sequenced events come out in seq order...
        let seqs: Vec<u64> = merged.iter().filter_map(|t| t.event.seq()).collect();
        prop_assert!(seqs.windows(2).all(|w| w[0] < w[1]));
        // ...each thread's events in its own order...
        for t in 0..4u32 {
            let mine: Vec<&Event> = merged.iter().filter(|m| m.thread == t).map(|m| m.event).collect();
            let stream: Vec<&Event> = per_thread[t as usize].iter().flatten().collect();
            prop_assert_eq!(mine, stream);
        }
        // ...and an unsequenced event right before its thread's next sequenced event
        // (nothing of another thread between them), or in the tail if none follows.
        for (i, m) in merged.iter().enumerate() {
            if m.event.seq().is_some() {
                continue;
            }
            match merged[i..].iter().position(|n| n.thread == m.thread && n.event.seq().is_some()) {
                Some(j) => prop_assert!(merged[i..i + j].iter().all(|n| n.thread == m.thread)),
                None => prop_assert!(merged[i..].iter().all(|n| n.event.seq().is_none())),
            }
        }
    }
}
