//! `unpack_records`, the analyzer's way into a block, against the two steps it stands for
//! (`unpack_payload_into`, then `decode_records`): the same records, events and errors for
//! every compression method, though it reads a columns block's records from its columns
//! without joining them into the payload. Damaged columns too, under a matching CRC, and
//! with records already waiting in the output for a key. `Block::decode_with_lengths`
//! (`info`'s way) likewise, against `decode_events` and its positions.

use memreplay_format::block::{decode_events, unpack_payload_into, BlockFrame, FRAME_LEN};
use memreplay_format::varint::{put_u64, Cursor};
use memreplay_format::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

use crate::damage::crc32;

/// Events as a program makes them: sequence numbers a step apart, 16-byte-aligned
/// addresses from a few pages (so allocations and frees meet in the recent-address
/// lists), a few sizes and callstacks; and between them every other kind of record the
/// decoder reads (domains, reallocs, usage, contexts, attaches, time, markers,
/// definitions). Enough of them repeat that the columns methods store columns. Half the
/// time the sizes of each callstack step up as a loop's would, so that the columns hold
/// them as deltas (methods 5 and 6).
fn program_events() -> impl Strategy<Value = Vec<Event>> {
    prop_oneof![events(false), events(true)]
}

/// [`program_events`], with sizes that step by callstack or not.
fn events(stepping: bool) -> impl Strategy<Value = Vec<Event>> {
    vec((0u8..24, 0u64..96, 0u64..5000, 0u32..6), 0..700).prop_map(move |picks| {
        let mut seq = 1u64;
        let mut ns = 0u64;
        let mut steps = [0u64; 7];
        picks
            .into_iter()
            .map(|(kind, slot, n, stack)| {
                seq += 1 + n % 3;
                let addr = 0x7f3a_0000_0000 + slot * 48;
                // A size: `n` as it is, or the next of its callstack's.
                let mut size = |n: u64| match stepping {
                    true => {
                        steps[stack as usize] += 1;
                        16 + 8 * steps[stack as usize]
                    }
                    false => n,
                };
                match kind {
                    0..=7 => {
                        Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size: size(16 + n % 200), align_log2: 4, stack }
                    }
                    8..=14 => Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: stack % 2 },
                    15 => Event::Realloc {
                        free_seq: seq - 1,
                        seq,
                        old_addr: addr,
                        new_addr: addr + 16 * (n % 4),
                        new_size: size(n),
                        align_log2: 3,
                        stack,
                    },
                    16 => Event::Alloc { seq, domain: 1 + stack, addr: n << 12, size: size(n), align_log2: 8, stack },
                    17 => Event::Free { seq, domain: 1 + stack, addr: n << 12, stack: 0 },
                    18 => Event::Usage { seq, addr, used: n },
                    19 => {
                        if n % 2 == 0 {
                            Event::ContextPush { ty: stack, name: n as u32, flags: (n % 4) as u8 }
                        } else {
                            Event::ContextPop
                        }
                    }
                    20 => {
                        ns += n * 1000;
                        Event::Time { ns }
                    }
                    21 => match n % 4 {
                        0 => Event::AttachPush { seq, addr: addr + 8 },
                        1 => Event::AttachPop,
                        2 => Event::FrameStart { seq, frame: n },
                        _ => Event::Label { seq, name: stack },
                    },
                    22 => Event::DefineString { id: n as u32, text: format!("name {n}") },
                    _ => Event::DefineStack { id: stack + 1, frames: vec![0x5555_0000 + n, 0x5555_1000, 0x5555_2000] },
                }
            })
            .collect()
    })
}

/// `events` encoded in one block stored with `method`: its frame and stored bytes.
fn block(events: &[Event], method: PayloadCompression) -> (BlockFrame, Vec<u8>) {
    let mut enc = EventEncoder::new();
    events.iter().for_each(|e| enc.push(e));
    let mut bytes = Vec::new();
    enc.finish_compressed(3, &mut PayloadCompressor::new(method), &mut bytes);
    let frame = BlockFrame::parse(bytes[..FRAME_LEN].try_into().unwrap()).unwrap();
    (frame, bytes[FRAME_LEN..].to_vec())
}

/// What `out` holds: its records, keyed (those that waited for a key get `key`), and its
/// events.
fn contents(mut out: Records, key: u64) -> (Vec<Record>, Vec<Event>) {
    out.key_trailing(key);
    (out.records, out.events)
}

/// Records before the block's: two that wait for a key, which the block's first sequenced
/// record gives them.
fn waiting() -> Records {
    let mut out = Records::default();
    out.push(Event::Alloc { seq: 1, domain: HEAP_DOMAIN, addr: 0x10, size: 8, align_log2: 3, stack: 0 });
    out.push(Event::ContextPush { ty: 1, name: 2, flags: 0 });
    out.push(Event::Time { ns: 5 });
    out
}

/// Both ways into `frame` and `stored`, from `waiting()`: their results and what they
/// leave in the output; then the same for events with their records' lengths
/// (`Block::decode_with_lengths` against `decode_events` and its positions).
type Read = (Result<(), BlockError>, (Vec<Record>, Vec<Event>), WithLengths);
type WithLengths = (Result<(), BlockError>, Vec<(Event, u32)>);
fn both_ways(frame: &BlockFrame, stored: &[u8]) -> (Read, Read) {
    let mut buf = Vec::new();
    let mut two_steps = waiting();
    let r = unpack_payload_into(frame, stored, &mut buf).and_then(|p| decode_records(p, &mut two_steps));
    let mut sized = Vec::new();
    let rs = unpack_payload_into(frame, stored, &mut buf).and_then(|p| {
        let mut events = decode_events(p);
        let mut at = 0;
        while let Some(event) = events.next() {
            sized.push((event?, (events.position() - at) as u32));
            at = events.position();
        }
        Ok(())
    });
    let mut one = waiting();
    let mut buf = vec![0xa5; 7];
    let r1 = unpack_records(frame, stored, &mut buf, &mut one);
    let block = Block { offset: 0, frame: *frame, stored: stored.to_vec() };
    let mut sized1 = vec![(Event::ContextPop, 1)];
    let rs1 = block.decode_with_lengths(&mut buf, &mut sized1);
    assert_eq!(sized1.remove(0), (Event::ContextPop, 1), "what was in the output is kept");
    ((r, contents(two_steps, u64::MAX), (rs, sized)), (r1, contents(one, u64::MAX), (rs1, sized1)))
}

/// `stored` as written with a columns method, its columns changed by `change` and stored
/// again with LZ4 (method 3, or 5 where they hold sizes as deltas), under a matching CRC:
/// the frame for it, whose claim is `raw_delta` bytes off.
fn with_columns_changed(
    frame: &BlockFrame,
    stored: &[u8],
    change: impl FnOnce(&mut Vec<u8>),
    raw_delta: i64,
) -> (BlockFrame, Vec<u8>) {
    let mut at = Cursor::new(stored);
    let len = at.u64().unwrap() as usize;
    let mut blob = lz4_flex::block::decompress(&stored[at.position()..], len).unwrap();
    change(&mut blob);
    let mut s = Vec::new();
    put_u64(&mut s, blob.len() as u64);
    s.extend(lz4_flex::block::compress(&blob));
    let raw_len = (i64::from(frame.raw_len) + raw_delta).max(0) as u32;
    let frame = BlockFrame { stored_len: s.len() as u32, raw_len, payload_crc: crc32(&s), ..*frame };
    (frame, s)
}

const METHODS: [PayloadCompression; 5] = [
    PayloadCompression::Lz4,
    PayloadCompression::Zstd { level: 1 },
    PayloadCompression::Lz4Columns,
    PayloadCompression::ZstdColumns { level: 1 },
    PayloadCompression::ZstdColumns { level: 9 },
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Whole blocks: both ways read the events that were written, for every method.
    #[test]
    fn every_method_reads_the_same_records_both_ways(events in program_events(), method in 0usize..METHODS.len()) {
        let (frame, stored) = block(&events, METHODS[method]);
        let (two_steps, one) = both_ways(&frame, &stored);
        prop_assert_eq!(&one, &two_steps);
        prop_assert_eq!(one.0, Ok(()));
        prop_assert_eq!(&one.2.0, &Ok(()));
        let sized: Vec<Event> = one.2.1.iter().map(|(e, _)| e.clone()).collect();
        prop_assert_eq!(&sized, &events);
        prop_assert_eq!(one.2.1.iter().map(|(_, n)| *n).sum::<u32>(), frame.raw_len);
        let mut expected = waiting();
        events.into_iter().for_each(|e| expected.push(e));
        prop_assert_eq!(one.1, contents(expected, u64::MAX));
    }

    /// Columns changed (bytes flipped, inserted, removed, cut) and stored under a matching
    /// CRC, with the payload's claim off or not: `unpack_records` ends as the two steps
    /// do, with the records before the error and the same error.
    #[test]
    fn damaged_columns_read_the_same_both_ways(
        events in program_events(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        insert in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
        remove in proptest::option::of(any::<prop::sample::Index>()),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        raw_delta in prop_oneof![4 => Just(0i64), 1 => -2i64..3],
    ) {
        let (frame, stored) = block(&events, PayloadCompression::Lz4Columns);
        prop_assume!(matches!(frame.compression, Compression::Lz4Columns | Compression::Lz4ColumnsSizeDeltas));
        let (frame, stored) = with_columns_changed(&frame, &stored, |blob| {
            for (at, x) in flips {
                let at = at.index(blob.len());
                blob[at] ^= x;
            }
            if let Some((at, b)) = insert {
                blob.insert(at.index(blob.len() + 1), b);
            }
            if let Some(at) = remove.filter(|_| !blob.is_empty()) {
                blob.remove(at.index(blob.len()));
            }
            if let Some(at) = cut {
                blob.truncate(at.index(blob.len() + 1));
            }
        }, raw_delta);
        let (two_steps, one) = both_ways(&frame, &stored);
        prop_assert_eq!(one, two_steps);
    }

    /// Stored bytes changed under a matching CRC, for every method: the same either way.
    #[test]
    fn damaged_stored_bytes_read_the_same_both_ways(
        events in program_events(),
        method in 0usize..METHODS.len(),
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let (frame, mut stored) = block(&events, METHODS[method]);
        // No events stored with LZ4 (zstd where it is not built in) are no bytes to change.
        prop_assume!(!stored.is_empty());
        for (at, x) in flips {
            let at = at.index(stored.len());
            stored[at] ^= x;
        }
        let frame = BlockFrame { payload_crc: crc32(&stored), ..frame };
        let (two_steps, one) = both_ways(&frame, &stored);
        prop_assert_eq!(one, two_steps);
    }
}

/// A program's block, stored in columns, reads from its columns, whichever way they hold
/// its sizes; and the cases that the two steps refuse (a field left over, a tag more, the
/// claim a byte off either way, a bad checksum) are refused alike, with what was read
/// before kept.
#[test]
fn columns_blocks_and_their_refusals() {
    let runner = &mut proptest::test_runner::TestRunner::deterministic();
    for (stepping, row) in [(false, [Compression::Lz4Columns, Compression::ZstdColumns]), (true, DELTAS)] {
        let events = events(stepping).new_tree(runner).unwrap().current();
        let events: Vec<Event> = events.into_iter().cycle().take(3000).collect();
        for (method, held) in
            [PayloadCompression::Lz4Columns, PayloadCompression::ZstdColumns { level: 3 }].iter().zip(row)
        {
            let (frame, stored) = block(&events, *method);
            // Without zstd, writers asked for it write LZ4.
            let held = if cfg!(feature = "zstd") { held } else { row[0] };
            assert_eq!(frame.compression, held, "{method}, sizes stepping: {stepping}");
            let (two_steps, one) = both_ways(&frame, &stored);
            assert_eq!(one.0, Ok(()));
            assert_eq!(one, two_steps);
        }
        let (frame, stored) = block(&events, PayloadCompression::Lz4Columns);
        let cases: [(&str, BlockFrame, Vec<u8>); 7] = [
            ("a byte left over in the last column", with_columns_changed(&frame, &stored, |b| b.push(0), 0)),
            ("a claim a byte short", with_columns_changed(&frame, &stored, |_| {}, -1)),
            ("a claim a byte long", with_columns_changed(&frame, &stored, |_| {}, 1)),
            ("a column cut short", with_columns_changed(&frame, &stored, |b| b.truncate(b.len() - 3), 0)),
            ("no columns at all", with_columns_changed(&frame, &stored, |b| b.clear(), 0)),
            ("a bad checksum", (BlockFrame { payload_crc: frame.payload_crc ^ 1, ..frame }, stored.clone())),
            (
                "the sizes read the other way",
                (BlockFrame { compression: other_sizes(frame.compression), ..frame }, stored.clone()),
            ),
        ]
        .map(|(what, (frame, stored))| (what, frame, stored));
        for (what, frame, stored) in cases {
            let (two_steps, one) = both_ways(&frame, &stored);
            assert!(one.0.is_err(), "{what}, sizes stepping: {stepping}: read");
            assert_eq!(one, two_steps, "{what}, sizes stepping: {stepping}");
        }
    }
}

/// The methods whose columns hold sizes as deltas, over LZ4 and zstd.
const DELTAS: [Compression; 2] = [Compression::Lz4ColumnsSizeDeltas, Compression::ZstdColumnsSizeDeltas];

/// The LZ4 columns method that holds sizes the other way.
fn other_sizes(method: Compression) -> Compression {
    match method {
        Compression::Lz4Columns => Compression::Lz4ColumnsSizeDeltas,
        Compression::Lz4ColumnsSizeDeltas => Compression::Lz4Columns,
        m => panic!("not an LZ4 columns method: {m:?}"),
    }
}
