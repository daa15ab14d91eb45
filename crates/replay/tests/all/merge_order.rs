//! The engine's streaming merge gives exactly the order of the format crate's in-memory
//! reference (`merge_by_seq`), whatever the file order of the threads' blocks: the same
//! events, as records, in the same order.

use memreplay_fixtures as common;
use memreplay_format::*;
use proptest::prelude::*;

fn header() -> FileHeader {
    FileHeader { recorder: "merge test".into(), ..common::header() }
}

/// (thread, kind, flush-after, write-now, clock-ticks) steps: kind picks the event;
/// flush-after ends the block.
fn steps() -> impl Strategy<Value = Vec<(u32, u8, bool, bool, bool)>> {
    proptest::collection::vec(
        (1u32..5, 0u8..8, prop::bool::weighted(0.1), prop::bool::weighted(0.5), prop::bool::weighted(0.3)),
        0..300,
    )
}

/// Builds a log: per-thread blocks flushed at random, and flushed blocks written when
/// `write_now` (else held back, to scramble file order). Sequence numbers are keys as the
/// recorder takes them (SPEC.md §7.9): each at least the thread's previous + 1 and at
/// least a shared clock that ticks now and then, so threads often share a key, and the
/// merge must break those ties by stream number as the reference does.
fn build(steps: &[(u32, u8, bool, bool, bool)]) -> Vec<u8> {
    let mut clock = 1u64;
    let mut last: std::collections::BTreeMap<u32, u64> = Default::default();
    let mut open: std::collections::BTreeMap<u32, Vec<Event>> = Default::default();
    let mut held: Vec<(u32, Vec<Event>)> = Vec::new();
    let mut bytes = Vec::new();
    let mut w = LogWriter::new(&mut bytes, &header()).unwrap();
    let write = |w: &mut LogWriter<&mut Vec<u8>>, t: u32, evs: Vec<Event>| {
        let mut enc = EventEncoder::new();
        evs.iter().for_each(|e| enc.push(e));
        w.write_block(t, &mut enc).unwrap();
    };
    for &(t, kind, flush, write_now, tick) in steps {
        clock += u64::from(tick);
        let mut seq = clock.max(last.get(&t).map_or(1, |l| l + 1));
        let addr = 0x1000 + u64::from(kind) * 16 + u64::from(t) * 0x100;
        let ev = match kind {
            0 | 1 => Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size: 16, align_log2: 3, stack: 0 },
            2 => Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: 0 },
            3 => {
                seq += 1;
                Event::Realloc {
                    free_seq: seq - 1,
                    seq,
                    old_addr: addr,
                    new_addr: addr + 8,
                    new_size: 32,
                    align_log2: 3,
                    stack: 0,
                }
            }
            4 => Event::ContextPush { ty: 1, name: t, flags: 0 },
            5 => Event::ContextPop,
            6 => Event::Time { ns: seq * 10 },
            _ => Event::Label { seq, name: 1 },
        };
        if !matches!(kind, 4..=6) {
            last.insert(t, seq);
        }
        open.entry(t).or_default().push(ev);
        if flush {
            let evs = std::mem::take(open.get_mut(&t).unwrap());
            // A thread's blocks keep their order: hold back only if none of it is held.
            if write_now || held.iter().any(|(h, _)| *h == t) {
                held.push((t, evs));
            } else {
                write(&mut w, t, evs);
            }
        }
    }
    for (t, evs) in held.into_iter().rev().collect::<Vec<_>>().into_iter().rev() {
        write(&mut w, t, evs);
    }
    for (t, evs) in open {
        write(&mut w, t, evs);
    }
    w.finish(0, 0).unwrap();
    bytes
}

/// What the merge hands out, comparable with the reference's (thread, event, part).
#[derive(Debug, Clone, PartialEq)]
enum Item {
    /// (kind, sequence number, addr, value, stack, flags) of a hot record.
    Record(RecordKind, Option<u64>, u64, u64, u32, u8),
    Event(Event),
}

/// The record the engine should get for the reference's `event` (or realloc half).
fn expected(event: &Event, part: Part) -> Item {
    match (event.clone(), part) {
        (Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size, stack, .. }, _) => {
            Item::Record(RecordKind::Alloc, Some(seq), addr, size, stack, 0)
        }
        (Event::Free { seq, domain: HEAP_DOMAIN, addr, stack }, _) => {
            Item::Record(RecordKind::Free, Some(seq), addr, 0, stack, 0)
        }
        (Event::Realloc { free_seq, old_addr, .. }, Part::ReallocFree) => {
            Item::Record(RecordKind::ReallocFree, Some(free_seq), old_addr, 0, 0, 0)
        }
        (Event::Realloc { seq, new_addr, new_size, stack, .. }, _) => {
            Item::Record(RecordKind::ReallocAlloc, Some(seq), new_addr, new_size, stack, 0)
        }
        (Event::ContextPush { ty, name, flags }, _) => {
            Item::Record(RecordKind::ContextPush, None, 0, u64::from(name), ty, flags)
        }
        (Event::ContextPop, _) => Item::Record(RecordKind::ContextPop, None, 0, 0, 0, 0),
        (Event::Time { ns }, _) => Item::Record(RecordKind::Time, None, 0, ns, 0, 0),
        (e, _) => Item::Event(e),
    }
}

struct Collect(Vec<(u32, Item)>);

impl memreplay_replay::EventSink for Collect {
    fn record(&mut self, thread: u32, r: &Record, block: &Records) {
        let item = match r.kind {
            RecordKind::Event => Item::Event(block.event(r).clone()),
            kind => Item::Record(kind, r.seq(), r.addr, r.value, r.stack, r.flags),
        };
        self.0.push((thread, item));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn streaming_merge_matches_the_reference(steps in steps()) {
        let bytes = build(&steps);
        let path = std::env::temp_dir().join(format!("replay-merge-{}-{:?}.mrl", std::process::id(), std::thread::current().id()));
        std::fs::write(&path, &bytes).unwrap();
        let log = Log::read(&bytes[..]).unwrap();
        let expected: Vec<(u32, Item)> =
            merge_by_seq(&log.blocks).into_iter().map(|te| (te.thread, expected(te.event, te.part))).collect();
        let mut indexed = memreplay_replay::IndexedLog::open(&path).unwrap();
        let mut got = Collect(Vec::new());
        indexed.replay(&mut got, |_| {});
        std::fs::remove_file(&path).ok();
        prop_assert_eq!(got.0, expected);
    }
}
