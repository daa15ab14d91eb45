//! Forward compatibility (SPEC.md §8): what a 1.0 reader must skip, ignore or refuse, on
//! hand-built bytes rather than on the encoder's output.

use memreplay_format::block::{decode_events, BlockFrame, FRAME_LEN};
use memreplay_format::varint::put_u64;
use memreplay_format::*;

use crate::header;

/// A block of `kind` around an uncompressed `payload`, with correct checksums.
fn block(kind: u8, compression: u8, thread: u32, event_count: u32, payload: &[u8]) -> Vec<u8> {
    stored_block(kind, compression, thread, event_count, payload, payload.len())
}

/// A block of `kind` around `stored` bytes that decompress to `raw_len`, with correct
/// checksums.
fn stored_block(kind: u8, compression: u8, thread: u32, event_count: u32, stored: &[u8], raw_len: usize) -> Vec<u8> {
    let frame = BlockFrame {
        kind: BlockKind::from_byte(kind),
        compression: Compression::from_byte(compression),
        thread,
        event_count,
        first_seq: 0,
        last_seq: 0,
        stored_len: stored.len() as u32,
        raw_len: raw_len as u32,
        payload_crc: crc32fast::hash(stored),
    };
    let mut out = frame.to_bytes().to_vec();
    out.extend_from_slice(stored);
    out
}

/// Header, the given blocks, and a matching end-of-log record.
fn log_of(blocks: &[Vec<u8>]) -> Vec<u8> {
    let mut out = header().to_bytes();
    for b in blocks {
        out.extend_from_slice(b);
    }
    out.extend_from_slice(&EndOfLog { blocks: blocks.len() as u64, ..EndOfLog::default() }.to_block_bytes());
    out
}

/// Alloc seq 10 at 0x1000, 64 bytes, no stack, align 2^3; then free seq 11 of it.
const ALLOC: [u8; 7] = [0x01, 0x14, 0x80, 0x40, 0x40, 0x00, 0x03];
const FREE: [u8; 4] = [0x02, 0x02, 0x00, 0x00];

fn alloc_free() -> [Event; 2] {
    [
        Event::Alloc { seq: 10, domain: HEAP_DOMAIN, addr: 0x1000, size: 64, align_log2: 3, stack: 0 },
        Event::Free { seq: 11, domain: HEAP_DOMAIN, addr: 0x1000, stack: 0 },
    ]
}

#[test]
fn hand_built_compact_events_decode_as_specified() {
    let mut payload = ALLOC.to_vec();
    payload.extend_from_slice(&FREE);
    let events: Vec<Event> = decode_events(&payload).collect::<Result<_, _>>().unwrap();
    assert_eq!(events, alloc_free());

    // Writers use the shortest varints; readers accept padded ones (up to 10 bytes), and
    // a domain allocation in domain 0 is a heap allocation.
    let padded = [0x04, 0x94, 0x00, 0x80, 0x00, 0x80, 0xc0, 0x00, 0xc0, 0x00, 0x80, 0x80, 0x00, 0x03];
    let events: Vec<Event> = decode_events(&padded).collect::<Result<_, _>>().unwrap();
    assert_eq!(events, alloc_free()[..1]);
}

#[test]
fn unknown_sized_records_are_skipped() {
    let mut payload = ALLOC.to_vec();
    // Tag 0x50, body length 5, a body that looks like anything.
    payload.extend_from_slice(&[0x50, 0x05, 0x00, 0xff, 0x01, 0x0e, 0x80]);
    // An empty one, and the last sized tag with a two-byte length.
    payload.extend_from_slice(&[0x7f, 0x00]);
    payload.extend_from_slice(&[0x7f, 0x81, 0x01]);
    payload.extend_from_slice(&[0xaa; 129]);
    payload.extend_from_slice(&FREE);

    let raw: Vec<Event> = decode_events(&payload).collect::<Result<_, _>>().unwrap();
    assert_eq!(raw.len(), 5);
    assert_eq!(raw[1], Event::Unknown { tag: 0x50, len: 5 });
    assert_eq!(raw[2], Event::Unknown { tag: 0x7f, len: 0 });
    assert_eq!(raw[3], Event::Unknown { tag: 0x7f, len: 129 });

    // The delta state runs across them untouched, and `Log` drops them silently.
    let log = Log::read(&log_of(&[block(1, 0, 1, 5, &payload)])[..]).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    assert_eq!(log.blocks[0].events, alloc_free());
}

/// One event of every sized kind.
fn sized_events() -> Vec<Event> {
    vec![
        Event::DefineString { id: 3, text: "héllo".into() },
        Event::DefineStack { id: 4, frames: vec![0x5555_0000_1234, 0x5555_0000_0042, 7] },
        Event::DefineContextType { id: 5, name: 3 },
        Event::DefineDomain { id: 6, name: 3, kind: DomainKind::GpuLocal, capacity: 1 << 30, parent: Some(0) },
        Event::DefineDomain { id: 7, name: 0, kind: DomainKind::Pool, capacity: 0, parent: None },
        Event::Module {
            base: 0x5555_0000_0000,
            size: 0x10000,
            load_bias: 0x5555_0000_0000,
            path: 3,
            build_id: vec![1, 2],
        },
        Event::ThreadInfo { os_tid: 12345, name: 3 },
        Event::Resource {
            domain: 6,
            addr: 0x10_0000,
            desc: ResourceDesc {
                kind: ResourceKind::Texture,
                width: 1024,
                height: 512,
                depth_or_layers: 1,
                mip_levels: 11,
                format: 3,
                name: 3,
            },
        },
        Event::Lost { events: 10, bytes: 4000, reason: LossReason::ThreadTeardown },
        Event::ProcessMemory { time: 5_000_000, resident: 48 << 20, committed: 64 << 20 },
        Event::Budget { domain: 6, time: 7_000_000, budget: 6 << 30, usage: 5 << 30 },
        Event::Display { width: 2560, height: 1440 },
        Event::BeforeStart { allocations: 9, frees: 4, reallocs: 1, bytes: 74_000, live: 5, untracked: 0 },
    ]
}

fn encode(events: &[Event]) -> Vec<u8> {
    let mut enc = EventEncoder::new();
    events.iter().for_each(|e| enc.push(e));
    enc.payload().to_vec()
}

#[test]
fn extra_fields_at_the_end_of_known_sized_records_are_ignored() {
    let extra = [0x00, 0xff, 0x80, 0x0e, b'x'];
    for ev in sized_events() {
        let bytes = encode(std::slice::from_ref(&ev));
        // tag, one-byte length (every body here is short), body.
        assert!((0x20..=0x7f).contains(&bytes[0]) && usize::from(bytes[1]) == bytes.len() - 2, "{ev:?}");
        let mut grown = vec![bytes[0], bytes[1] + extra.len() as u8];
        grown.extend_from_slice(&bytes[2..]);
        grown.extend_from_slice(&extra);
        grown.extend_from_slice(&ALLOC);
        let got: Vec<Event> = decode_events(&grown).collect::<Result<_, _>>().unwrap();
        assert_eq!(got, [ev, alloc_free()[0].clone()]);
    }
}

#[test]
fn truncated_known_sized_records_are_malformed() {
    for ev in sized_events() {
        let bytes = encode(std::slice::from_ref(&ev));
        let mut cut = vec![bytes[0], 1];
        cut.push(bytes[2]);
        // A body cut to its first byte: every record here needs more.
        let got: Vec<_> = decode_events(&cut).collect();
        assert!(matches!(got[..], [Err(BlockError::Malformed { offset: 0, .. })]), "{ev:?}: {got:?}");
    }
}

#[test]
fn budget_and_display_records_decode_as_specified() {
    // BUDGET: tag 0x29, body 8: domain 3, time 1000 (e8 07), budget 2^30 (80 80 80 80 04),
    // usage 5.
    let budget = [0x29, 0x09, 0x03, 0xe8, 0x07, 0x80, 0x80, 0x80, 0x80, 0x04, 0x05];
    // DISPLAY: tag 0x2a, body 4: width 1920 (80 0f), height 1080 (b8 08).
    let display = [0x2a, 0x04, 0x80, 0x0f, 0xb8, 0x08];
    let mut payload = budget.to_vec();
    payload.extend_from_slice(&display);
    let got: Vec<Event> = decode_events(&payload).collect::<Result<_, _>>().unwrap();
    assert_eq!(
        got,
        [
            Event::Budget { domain: 3, time: 1000, budget: 1 << 30, usage: 5 },
            Event::Display { width: 1920, height: 1080 },
        ]
    );
    assert_eq!(encode(&got), payload);
}

#[test]
fn before_start_records_decode_as_specified() {
    // BEFORE_START: tag 0x2b, body 8: allocations 3, frees 1, reallocs 0, bytes 72,704
    // (80 b8 04), live 2, untracked 0.
    let payload = [0x2b, 0x08, 0x03, 0x01, 0x00, 0x80, 0xb8, 0x04, 0x02, 0x00];
    let got: Vec<Event> = decode_events(&payload).collect::<Result<_, _>>().unwrap();
    let want = Event::BeforeStart { allocations: 3, frees: 1, reallocs: 0, bytes: 72_704, live: 2, untracked: 0 };
    assert_eq!(got, [want]);
    assert_eq!(encode(&got), payload);
    // The body ends before `untracked`: malformed.
    let short = [0x2b, 0x07, 0x03, 0x01, 0x00, 0x80, 0xb8, 0x04, 0x02];
    let got: Vec<_> = decode_events(&short).collect();
    assert_eq!(got, [Err(BlockError::Malformed { offset: 0, what: "calls before start" })]);
}

#[test]
fn malformed_budget_and_display_bodies_are_malformed() {
    let cases: [(&[u8], &str); 4] = [
        // A domain past 2^32 - 1 (uv32 overflow).
        (&[0x29, 0x08, 0x80, 0x80, 0x80, 0x80, 0x10, 0x01, 0x01, 0x01], "budget sample"),
        // The body ends before `usage`.
        (&[0x29, 0x03, 0x01, 0x02, 0x03], "budget sample"),
        // A height past 2^32 - 1.
        (&[0x2a, 0x06, 0x01, 0x80, 0x80, 0x80, 0x80, 0x10], "display size"),
        // The body ends inside `height`'s varint.
        (&[0x2a, 0x02, 0x01, 0x80], "display size"),
    ];
    for (payload, what) in cases {
        let got: Vec<_> = decode_events(payload).collect();
        assert_eq!(got, [Err(BlockError::Malformed { offset: 0, what })], "{payload:02x?}");
    }
}

#[test]
fn recent_address_tags_past_their_list_are_malformed() {
    // After ALLOC the live list holds one address and the freed list none.
    for t in [0x81u8, 0x8f, 0x90, 0x9f] {
        let mut payload = ALLOC.to_vec();
        payload.extend_from_slice(&[t, 2, 0, 0, 0]);
        let got: Vec<_> = decode_events(&payload).collect();
        assert_eq!(got.len(), 2, "tag {t:#04x}");
        assert!(matches!(got[1], Err(BlockError::Malformed { offset, .. }) if offset == ALLOC.len()), "{got:?}");
    }
}

#[test]
fn invalid_compact_tags_make_the_block_malformed() {
    let invalid = std::iter::once(0x00u8).chain(0x0e..=0x1f).chain(0xa0..=0xff);
    for t in invalid {
        let mut payload = ALLOC.to_vec();
        payload.push(t);
        payload.extend_from_slice(&FREE);
        let got: Vec<_> = decode_events(&payload).collect();
        assert_eq!(got.len(), 2, "tag {t:#04x}");
        assert_eq!(got[0], Ok(alloc_free()[0].clone()));
        assert_eq!(got[1], Err(BlockError::Malformed { offset: ALLOC.len(), what: "record tag" }));

        // The whole block is skipped and reported; the blocks around it are read.
        let good = block(1, 0, 2, 2, &[&ALLOC[..], &FREE[..]].concat());
        let log = Log::read(&log_of(&[good.clone(), block(1, 0, 1, 3, &payload), good])[..]).unwrap();
        assert_eq!(log.blocks.len(), 2);
        let offset = header().to_bytes().len() + 59;
        assert_eq!(
            log.report.damage,
            [Damage::BadBlock {
                offset: offset as u64,
                thread: 1,
                events: 3,
                first_seq: 0,
                last_seq: 0,
                error: BlockError::Malformed { offset: ALLOC.len(), what: "record tag" },
            }]
        );
        assert!(log.report.end.is_some());
    }
}

#[test]
fn unknown_block_kinds_are_skipped_by_length() {
    let events = [ALLOC.to_vec(), FREE.to_vec()].concat();
    let first = block(1, 0, 1, 2, &events);
    // Kind 9 with a payload that holds a block magic and would not decode as events.
    let unknown = block(9, 0, 0, 0, b"MRLB\x00\x00 not events");
    let blocks = [first.clone(), unknown, block(1, 0, 2, 2, &events)];
    let log = Log::read(&log_of(&blocks)[..]).unwrap();
    let threads: Vec<u32> = log.blocks.iter().map(|b| b.frame.thread).collect();
    assert_eq!(threads, [1, 2]);
    assert!(log.blocks.iter().all(|b| b.events == alloc_free()));
    let offset = (header().to_bytes().len() + first.len()) as u64;
    assert_eq!(log.report.damage, [Damage::UnknownBlockKind { offset, kind: 9 }]);
    assert!(log.report.end.is_some());
}

#[test]
fn unknown_compression_is_a_bad_block() {
    let events = [ALLOC.to_vec(), FREE.to_vec()].concat();
    let log = Log::read(&log_of(&[block(1, 7, 1, 2, &events), block(1, 0, 2, 2, &events)])[..]).unwrap();
    assert_eq!(log.blocks.len(), 1);
    assert!(matches!(
        log.report.damage[..],
        [Damage::BadBlock { error: BlockError::UnknownCompression(7), thread: 1, .. }]
    ));
}

#[test]
fn newer_minor_header_fields_are_skipped() {
    let h = header();
    let bytes = h.to_bytes();
    let body_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    // Minor 3, with two more body fields (a varint and a string) after the 1.0 ones.
    let mut newer = bytes[..16 + body_len].to_vec();
    newer[10..12].copy_from_slice(&3u16.to_le_bytes());
    put_u64(&mut newer, 300);
    newer.extend_from_slice(b"\x03new");
    let new_len = (newer.len() - 16) as u32;
    newer[12..16].copy_from_slice(&new_len.to_le_bytes());
    let crc = crc32fast::hash(&newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    let (parsed, len) = FileHeader::parse(&newer).unwrap();
    assert_eq!(len, newer.len());
    assert_eq!(parsed, FileHeader { version_minor: 3, ..h });

    newer.extend_from_slice(&EndOfLog::default().to_block_bytes());
    assert!(Log::read(&newer[..]).unwrap().report.is_clean());
}

#[test]
fn newer_end_of_log_fields_are_ignored() {
    let mut payload = Vec::new();
    for v in [3u64, 300, 2, 123_456, 99] {
        put_u64(&mut payload, v);
    }
    let mut bytes = header().to_bytes();
    bytes.extend_from_slice(&block(2, 0, 0, 0, &payload));
    let log = Log::read(&bytes[..]).unwrap();
    assert!(log.report.is_clean());
    assert_eq!(log.report.end, Some(EndOfLog { blocks: 3, events: 300, lost_events: 2, end_ns: 123_456 }));
}

#[test]
fn reserved_frame_bytes_are_ignored() {
    let events = [ALLOC.to_vec(), FREE.to_vec()].concat();
    let mut b = block(1, 0, 1, 2, &events);
    b[6] = 0x5a;
    b[7] = 0xa5;
    let crc = crc32fast::hash(&b[..FRAME_LEN - 4]);
    b[FRAME_LEN - 4..FRAME_LEN].copy_from_slice(&crc.to_le_bytes());
    let log = Log::read(&log_of(&[b])[..]).unwrap();
    assert!(log.report.is_clean());
    assert_eq!(log.blocks[0].events, alloc_free());
}

/// Columns whose allocations' sizes are deltas (SPEC.md §4.2, methods 5 and 6, format
/// 1.6), built by hand: each size that a `stack` follows is held as its difference from
/// the last such size of its callstack's slot (the id mod 1024), and a usage change's
/// `used` as it is. Read as method 3, the same columns are not the payload.
#[test]
fn hand_built_size_delta_columns_decode_as_specified() {
    let events = [
        Event::Alloc { seq: 10, domain: HEAP_DOMAIN, addr: 0x1000, size: 100, align_log2: 3, stack: 5 },
        Event::Alloc { seq: 11, domain: HEAP_DOMAIN, addr: 0x1040, size: 104, align_log2: 3, stack: 5 },
        Event::Usage { seq: 12, addr: 0x1040, used: 1000 },
        // Callstack 1029 is in callstack 5's slot: its size is held against 104.
        Event::Alloc { seq: 13, domain: HEAP_DOMAIN, addr: 0x1080, size: 90, align_log2: 3, stack: 1029 },
    ];
    let payload = [
        [0x01, 0x14, 0x80, 0x40, 0x64, 0x05, 0x03].as_slice(),
        &[0x01, 0x02, 0x80, 0x01, 0x68, 0x05, 0x03],
        &[0x06, 0x02, 0x00, 0xe8, 0x07],
        &[0x01, 0x02, 0x80, 0x01, 0x5a, 0x85, 0x08, 0x03],
    ]
    .concat();
    assert_eq!(decode_events(&payload).collect::<Result<Vec<_>, _>>().unwrap(), events);
    let columns: [&[u8]; 8] = [
        &[0x01, 0x01, 0x06, 0x01],
        &[0x14, 0x02, 0x02, 0x02],
        // Address deltas 0x1000, 0x40, 0, 0x40: multiples of 16, held as zz(d / 16) << 1.
        &[0x80, 0x08, 0x10, 0x00, 0x10],
        &[],
        // zz(100), zz(+4), 1000 as it is, zz(90 - 104).
        &[0xc8, 0x01, 0x08, 0xe8, 0x07, 0x1b],
        &[0x05, 0x05, 0x85, 0x08],
        &[0x03, 0x03, 0x03],
        &[],
    ];
    let mut blob = Vec::new();
    columns[..7].iter().for_each(|c| put_u64(&mut blob, c.len() as u64));
    columns.iter().for_each(|c| blob.extend_from_slice(c));
    let mut stored = Vec::new();
    put_u64(&mut stored, blob.len() as u64);
    stored.extend(lz4_flex::block::compress(&blob));
    let columns_block = |method: Compression| stored_block(1, method.to_byte(), 1, 4, &stored, payload.len());
    let log = Log::read(&log_of(&[columns_block(Compression::Lz4ColumnsSizeDeltas)])[..]).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    assert_eq!(log.blocks[0].events, events);
    let log = Log::read(&log_of(&[columns_block(Compression::Lz4Columns)])[..]).unwrap();
    assert!(log.blocks.is_empty());
    assert!(matches!(log.report.damage[..], [Damage::BadBlock { error: BlockError::Decompression, .. }]));
}
