//! Every event variant, with arbitrary field values, survives encode → write → read → decode.

use memreplay_format::*;
use proptest::collection::vec;
use proptest::prelude::*;

fn resource_desc() -> impl Strategy<Value = ResourceDesc> {
    (any::<u8>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
        |(kind, width, height, depth_or_layers, mip_levels, format, name)| ResourceDesc {
            kind: ResourceKind::from_byte(kind),
            width,
            height,
            depth_or_layers,
            mip_levels,
            format,
            name,
        },
    )
}

/// Any event but `Unknown`, with every field over its full range.
fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>(), any::<u8>(), any::<u32>()).prop_map(
            |(seq, domain, addr, size, align_log2, stack)| Event::Alloc { seq, domain, addr, size, align_log2, stack }
        ),
        // Heap allocations and frees take their own (shorter) tags: make them common.
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u8>(), any::<u32>()).prop_map(
            |(seq, addr, size, align_log2, stack)| Event::Alloc {
                seq,
                domain: HEAP_DOMAIN,
                addr,
                size,
                align_log2,
                stack
            }
        ),
        (any::<u64>(), any::<u32>(), any::<u64>(), any::<u32>()).prop_map(|(seq, domain, addr, stack)| Event::Free {
            seq,
            domain,
            addr,
            stack
        }),
        (any::<u64>(), any::<u64>(), any::<u32>()).prop_map(|(seq, addr, stack)| Event::Free {
            seq,
            domain: HEAP_DOMAIN,
            addr,
            stack
        }),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u8>(), any::<u32>()).prop_map(
            |(free_seq, seq, old_addr, new_addr, new_size, align_log2, stack)| Event::Realloc {
                free_seq,
                seq,
                old_addr,
                new_addr,
                new_size,
                align_log2,
                stack
            }
        ),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(seq, addr, used)| Event::Usage { seq, addr, used }),
        (any::<u32>(), any::<u32>(), any::<u8>()).prop_map(|(ty, name, flags)| Event::ContextPush { ty, name, flags }),
        Just(Event::ContextPop),
        (any::<u64>(), any::<u64>()).prop_map(|(seq, addr)| Event::AttachPush { seq, addr }),
        Just(Event::AttachPop),
        any::<u64>().prop_map(|ns| Event::Time { ns }),
        (any::<u64>(), any::<u64>()).prop_map(|(seq, frame)| Event::FrameStart { seq, frame }),
        (any::<u64>(), any::<u32>()).prop_map(|(seq, name)| Event::Label { seq, name }),
        (any::<u32>(), any::<String>()).prop_map(|(id, text)| Event::DefineString { id, text }),
        (any::<u32>(), vec(any::<u64>(), 0..64)).prop_map(|(id, frames)| Event::DefineStack { id, frames }),
        (any::<u32>(), any::<u32>()).prop_map(|(id, name)| Event::DefineContextType { id, name }),
        (any::<u32>(), any::<u32>(), any::<u8>(), any::<u64>(), any::<Option<u32>>()).prop_map(
            |(id, name, kind, capacity, parent)| Event::DefineDomain {
                id,
                name,
                kind: DomainKind::from_byte(kind),
                capacity,
                parent
            }
        ),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u32>(), vec(any::<u8>(), 0..64)).prop_map(
            |(base, size, load_bias, path, build_id)| Event::Module { base, size, load_bias, path, build_id }
        ),
        (any::<u64>(), any::<u32>()).prop_map(|(os_tid, name)| Event::ThreadInfo { os_tid, name }),
        (any::<u32>(), any::<u64>(), resource_desc()).prop_map(|(domain, addr, desc)| Event::Resource {
            domain,
            addr,
            desc
        }),
        (any::<u64>(), any::<u64>(), any::<u8>()).prop_map(|(events, bytes, reason)| Event::Lost {
            events,
            bytes,
            reason: LossReason::from_byte(reason)
        }),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(time, resident, committed)| Event::ProcessMemory {
            time,
            resident,
            committed
        }),
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>())
            .prop_map(|(domain, time, budget, usage)| { Event::Budget { domain, time, budget, usage } }),
        (any::<u32>(), any::<u32>()).prop_map(|(width, height)| Event::Display { width, height }),
        (any::<[u64; 6]>()).prop_map(|[allocations, frees, reallocs, bytes, live, untracked]| Event::BeforeStart {
            allocations,
            frees,
            reallocs,
            bytes,
            live,
            untracked
        }),
    ]
}

/// Blocks as (thread, events); empty blocks are allowed (the writer skips them).
fn blocks() -> impl Strategy<Value = Vec<(u32, Vec<Event>)>> {
    vec((prop_oneof![0u32..4, any::<u32>()], vec(event(), 0..40)), 0..6)
}

fn header_strategy() -> impl Strategy<Value = FileHeader> {
    (
        (any::<u16>(), any::<u32>(), any::<u8>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u32>()),
        (any::<String>(), any::<String>(), any::<String>(), any::<String>()),
    )
        .prop_map(
            |(
                (version_minor, flags, pointer_width, pid, start_unix_ns, ticks_per_second, max_stack_depth),
                (os, arch, exe_path, recorder),
            )| FileHeader {
                version_major: VERSION_MAJOR,
                version_minor,
                flags,
                pointer_width,
                pid,
                start_unix_ns,
                ticks_per_second,
                max_stack_depth,
                os,
                arch,
                exe_path,
                recorder,
            },
        )
}

fn fixed_header() -> FileHeader {
    FileHeader {
        version_major: VERSION_MAJOR,
        version_minor: VERSION_MINOR,
        flags: header_flags::CALLSTACKS_ON_ALLOC | header_flags::USAGE_CHANGES,
        pointer_width: 8,
        pid: 4242,
        start_unix_ns: 1_700_000_000_123_456_789,
        ticks_per_second: 1_000_000_000,
        max_stack_depth: 32,
        os: "linux".into(),
        arch: "x86_64".into(),
        exe_path: "/games/демо/game".into(),
        recorder: "memreplay 0.1.0".into(),
    }
}

/// Every sequence number of the events: a realloc has two.
fn seqs(events: &[Event]) -> impl Iterator<Item = u64> + Clone + '_ {
    events.iter().flat_map(|e| match *e {
        Event::Realloc { free_seq, seq, .. } => vec![free_seq, seq],
        _ => e.seq().into_iter().collect(),
    })
}

fn seq_range(events: &[Event]) -> (u64, u64) {
    let seqs = seqs(events);
    match (seqs.clone().min(), seqs.max()) {
        (Some(a), Some(b)) => (a, b),
        _ => (0, 0),
    }
}

/// Writes `blocks`, reads them back, and checks everything the reader reports.
/// Writes the blocks with each compression a writer may choose and reads them back.
fn check_round_trip(header: &FileHeader, blocks: &[(u32, Vec<Event>)], lost: u64, end_ns: u64) {
    for method in [
        PayloadCompression::Lz4,
        PayloadCompression::Zstd { level: 1 },
        PayloadCompression::Zstd { level: 3 },
        PayloadCompression::Lz4Columns,
        PayloadCompression::ZstdColumns { level: 1 },
    ] {
        check_round_trip_compressed(header, blocks, lost, end_ns, method);
    }
}

fn check_round_trip_compressed(
    header: &FileHeader,
    blocks: &[(u32, Vec<Event>)],
    lost: u64,
    end_ns: u64,
    method: PayloadCompression,
) {
    let mut bytes = Vec::new();
    let mut w = LogWriter::compressed_with(&mut bytes, header, method).unwrap();
    let mut enc = EventEncoder::new();
    for (thread, events) in blocks {
        for e in events {
            enc.push(e);
        }
        assert_eq!(enc.event_count() as usize, events.len());
        assert_eq!(enc.seq_range(), seq_range(events));
        w.write_block(*thread, &mut enc).unwrap();
        assert!(enc.is_empty());
    }
    let written = w.bytes();
    let (_, end) = w.finish(lost, end_ns).unwrap();

    let expected: Vec<&(u32, Vec<Event>)> = blocks.iter().filter(|(_, e)| !e.is_empty()).collect();
    let total_events: u64 = expected.iter().map(|(_, e)| e.len() as u64).sum();
    assert_eq!(end, EndOfLog { blocks: expected.len() as u64, events: total_events, lost_events: lost, end_ns });
    assert_eq!(written as usize + end.to_block_bytes().len(), bytes.len());

    let log = Log::read(&bytes[..]).unwrap();
    assert_eq!(&log.header, header);
    assert!(log.report.is_clean(), "{:?}", log.report);
    assert_eq!(log.report.end, Some(end));
    assert_eq!(log.report.blocks, expected.len() as u64);
    assert_eq!(log.report.bytes, bytes.len() as u64);
    assert_eq!(log.blocks.len(), expected.len());
    let mut offset = header.to_bytes().len() as u64;
    for (got, (thread, events)) in log.blocks.iter().zip(&expected) {
        assert_eq!(got.offset, offset);
        assert_eq!(got.frame.kind, BlockKind::Events);
        assert_eq!(got.frame.thread, *thread);
        assert_eq!(got.frame.event_count as usize, events.len());
        assert_eq!((got.frame.first_seq, got.frame.last_seq), seq_range(events));
        assert_eq!(&got.events, events);
        // A columns method falls back to its entropy stage alone where the columns would be
        // more than their lengths' bytes longer than the payload (unaligned addresses), and
        // holds sizes as deltas where that is smaller.
        let wanted: &[Compression] = match crate::built(method) {
            PayloadCompression::Lz4 => &[Compression::Lz4, Compression::None],
            PayloadCompression::Zstd { .. } => &[Compression::Zstd, Compression::None],
            PayloadCompression::Lz4Columns => {
                &[Compression::Lz4Columns, Compression::Lz4ColumnsSizeDeltas, Compression::Lz4, Compression::None]
            }
            PayloadCompression::ZstdColumns { .. } => {
                &[Compression::ZstdColumns, Compression::ZstdColumnsSizeDeltas, Compression::Zstd, Compression::None]
            }
        };
        assert!(wanted.contains(&got.frame.compression), "{method:?}: {:?}", got.frame);
        offset += 48 + u64::from(got.frame.stored_len);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn events_round_trip(blocks in blocks(), lost in any::<u64>(), end_ns in any::<u64>()) {
        check_round_trip(&fixed_header(), &blocks, lost, end_ns);
    }

    #[test]
    fn header_round_trips(header in header_strategy()) {
        let bytes = header.to_bytes();
        let (parsed, len) = FileHeader::parse(&bytes).unwrap();
        prop_assert_eq!(&parsed, &header);
        prop_assert_eq!(len, bytes.len());
        // And through the whole reader, as an empty log.
        let mut log_bytes = Vec::new();
        LogWriter::new(&mut log_bytes, &header).unwrap().finish(0, 0).unwrap();
        let log = Log::read(&log_bytes[..]).unwrap();
        prop_assert_eq!(log.header, header);
        prop_assert!(log.report.is_clean());
        prop_assert!(log.blocks.is_empty());
    }
}

/// Long repetitive streams compress: this exercises LZ4 blocks as well as stored ones.
#[test]
fn compressed_and_stored_blocks_round_trip() {
    let mut big = Vec::new();
    for i in 0..5000u64 {
        big.push(Event::Alloc {
            seq: 100 + 2 * i,
            domain: HEAP_DOMAIN,
            addr: 0x7f00_0000_0000 + 64 * i,
            size: 64,
            align_log2: 4,
            stack: 7,
        });
        big.push(Event::Free { seq: 101 + 2 * i, domain: HEAP_DOMAIN, addr: 0x7f00_0000_0000 + 64 * i, stack: 0 });
    }
    big.push(Event::DefineString { id: 1, text: "x".repeat(10_000) });
    let tiny = vec![Event::Label { seq: 5, name: 1 }];
    let blocks = vec![(1, big.clone()), (2, tiny.clone()), (0, vec![]), (1, big)];
    check_round_trip(&fixed_header(), &blocks, 3, 77);

    let mut bytes = Vec::new();
    let mut w = LogWriter::new(&mut bytes, &fixed_header()).unwrap();
    let mut enc = EventEncoder::new();
    for (thread, events) in &blocks {
        events.iter().for_each(|e| enc.push(e));
        w.write_block(*thread, &mut enc).unwrap();
    }
    w.finish(3, 77).unwrap();
    let log = Log::read(&bytes[..]).unwrap();
    let kinds: Vec<Compression> = log.blocks.iter().map(|b| b.frame.compression).collect();
    assert_eq!(kinds, [Compression::Lz4, Compression::None, Compression::Lz4]);
}

/// One log may mix the methods block by block (two writers of one recording may choose
/// differently; a log may be recompressed a block at a time): readers take each block as
/// its frame says. zstd stores the same payload in fewer bytes than LZ4, and a payload it
/// cannot shrink is stored as is.
#[test]
#[cfg(feature = "zstd")]
fn zstd_and_lz4_blocks_mix_in_one_log() {
    // A program-like stream: a few sizes and stacks, addresses that mostly go up.
    let mut events = Vec::new();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..20_000u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let size = [16, 24, 32, 48, 64, 128, 4096][(rng % 7) as usize];
        let addr = 0x5555_0000_0000 + 64 * i + (rng >> 40) % 4 * 16;
        events.push(Event::Alloc {
            seq: 3 * i,
            domain: HEAP_DOMAIN,
            addr,
            size,
            align_log2: 4,
            stack: (rng % 37) as u32,
        });
        if rng % 3 != 0 {
            events.push(Event::Free { seq: 3 * i + 1, domain: HEAP_DOMAIN, addr, stack: 0 });
        }
    }
    // Ten bytes of noise, which neither method shrinks.
    let noise = vec![Event::DefineString { id: 1, text: "q7#Zk!x@".into() }];
    let methods = [
        PayloadCompression::Lz4,
        PayloadCompression::Zstd { level: 1 },
        PayloadCompression::Zstd { level: 19 },
        PayloadCompression::Lz4Columns,
        PayloadCompression::ZstdColumns { level: 1 },
        PayloadCompression::Zstd { level: 1 },
    ];
    let mut bytes = Vec::new();
    let mut w = LogWriter::new(&mut bytes, &fixed_header()).unwrap();
    let mut enc = EventEncoder::new();
    let mut stored = Vec::new();
    for (i, method) in methods.iter().enumerate() {
        let mut framed = FramedBlock::compressed_with(*method);
        let events = if i == 5 { &noise } else { &events };
        events.iter().for_each(|e| enc.push(e));
        framed.frame(i as u32 + 1, &mut enc).unwrap();
        stored.push(framed.len() - 48);
        w.write_framed(&framed).unwrap();
    }
    w.finish(0, 1).unwrap();
    let log = Log::read(&bytes[..]).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    let kinds: Vec<Compression> = log.blocks.iter().map(|b| b.frame.compression).collect();
    assert_eq!(
        kinds,
        [
            Compression::Lz4,
            Compression::Zstd,
            Compression::Zstd,
            Compression::Lz4Columns,
            Compression::ZstdColumns,
            Compression::None
        ]
    );
    for b in &log.blocks[..5] {
        assert_eq!(b.events, events);
    }
    assert_eq!(log.blocks[5].events, noise);
    // The payload is the same: zstd at level 1 keeps less than LZ4, and 19 less again;
    // zstd keeps less of the columns than of the payload as it is. (LZ4, which has no
    // entropy coder of its own, keeps more of them here: this stream's addresses save
    // nothing in columns, and its small random fields repeat no more there.)
    assert!(stored[1] < stored[0] * 9 / 10 && stored[2] < stored[1], "{stored:?}");
    assert!(stored[4] < stored[1], "{stored:?}");
}

/// Blocks decode on their own, in any order and on any thread.
#[test]
fn blocks_decode_independently_in_parallel() {
    let blocks: Vec<(u32, Vec<Event>)> = (0..8u64)
        .map(|b| {
            let events = (0..100u64)
                .map(|i| Event::Alloc {
                    seq: b * 1000 + i,
                    domain: (b % 3) as u32,
                    addr: 0x1000 * (b + 1) + i * 16,
                    size: i,
                    align_log2: 3,
                    stack: 0,
                })
                .collect();
            (b as u32 % 3, events)
        })
        .collect();
    let mut bytes = Vec::new();
    let mut w = LogWriter::new(&mut bytes, &fixed_header()).unwrap();
    let mut enc = EventEncoder::new();
    for (thread, events) in &blocks {
        events.iter().for_each(|e| enc.push(e));
        w.write_block(*thread, &mut enc).unwrap();
    }
    w.finish(0, 0).unwrap();

    let mut reader = LogReader::new(&bytes[..]).unwrap();
    let mut raw = Vec::new();
    while let Some(b) = reader.next_block().unwrap() {
        raw.push(b);
    }
    assert!(reader.report().is_clean());
    let decoded: Vec<DecodedBlock> = std::thread::scope(|s| {
        let handles: Vec<_> = raw.iter().rev().map(|b| s.spawn(move || b.decode().unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).rev().collect()
    });
    for (d, (thread, events)) in decoded.iter().zip(&blocks) {
        assert_eq!(d.frame.thread, *thread);
        assert_eq!(&d.events, events);
    }
}

/// Every variant with all fields at their largest, then at zero: the edges a uniform
/// strategy rarely draws (e.g. a domain parent of `u32::MAX`, stored as 2^32).
#[test]
fn extreme_values_round_trip() {
    let max = Event::Resource {
        domain: u32::MAX,
        addr: u64::MAX,
        desc: ResourceDesc {
            kind: ResourceKind::Unknown(u8::MAX),
            width: u32::MAX,
            height: u32::MAX,
            depth_or_layers: u32::MAX,
            mip_levels: u32::MAX,
            format: u32::MAX,
            name: u32::MAX,
        },
    };
    let (m64, m32, m8) = (u64::MAX, u32::MAX, u8::MAX);
    let all_max = vec![
        Event::Alloc { seq: m64, domain: m32, addr: m64, size: m64, align_log2: m8, stack: m32 },
        Event::Alloc { seq: 0, domain: 0, addr: 0, size: 0, align_log2: 0, stack: 0 },
        Event::Free { seq: m64, domain: m32, addr: m64, stack: m32 },
        Event::Free { seq: 0, domain: 0, addr: 0, stack: 0 },
        Event::Realloc { free_seq: m64, seq: 0, old_addr: m64, new_addr: 0, new_size: m64, align_log2: m8, stack: m32 },
        Event::Realloc { free_seq: 0, seq: m64, old_addr: 0, new_addr: m64, new_size: 0, align_log2: 0, stack: 0 },
        Event::Usage { seq: m64, addr: m64, used: m64 },
        Event::ContextPush { ty: m32, name: m32, flags: m8 },
        Event::AttachPush { seq: 0, addr: 0 },
        Event::AttachPush { seq: m64, addr: m64 },
        Event::Time { ns: m64 },
        Event::Time { ns: 0 },
        Event::FrameStart { seq: m64, frame: m64 },
        Event::Label { seq: m64, name: m32 },
        Event::DefineString { id: m32, text: String::new() },
        Event::DefineStack { id: m32, frames: vec![m64, 0, m64, 1, m64 - 1] },
        Event::DefineStack { id: 0, frames: vec![] },
        Event::DefineContextType { id: m32, name: m32 },
        Event::DefineDomain { id: m32, name: m32, kind: DomainKind::Unknown(m8), capacity: m64, parent: Some(m32) },
        Event::DefineDomain { id: 0, name: 0, kind: DomainKind::Heap, capacity: 0, parent: Some(0) },
        Event::Module { base: m64, size: m64, load_bias: m64, path: m32, build_id: vec![m8; 64] },
        Event::ThreadInfo { os_tid: m64, name: m32 },
        max,
        Event::Lost { events: m64, bytes: m64, reason: LossReason::Unknown(m8) },
        Event::Lost { events: 0, bytes: 0, reason: LossReason::Unknown(0) },
        Event::ProcessMemory { time: m64, resident: m64, committed: m64 },
        Event::ProcessMemory { time: 0, resident: 0, committed: 0 },
        Event::Budget { domain: m32, time: m64, budget: m64, usage: m64 },
        Event::Budget { domain: 0, time: 0, budget: 0, usage: 0 },
        Event::Display { width: m32, height: m32 },
        Event::Display { width: 0, height: 0 },
        Event::BeforeStart { allocations: m64, frees: m64, reallocs: m64, bytes: m64, live: m64, untracked: m64 },
        Event::BeforeStart { allocations: 0, frees: 0, reallocs: 0, bytes: 0, live: 0, untracked: 0 },
    ];
    check_round_trip(&fixed_header(), &[(u32::MAX, all_max)], u64::MAX, u64::MAX);
}

/// Heap events over a handful of addresses: frees of recent allocations, allocations at
/// recently freed addresses, double frees, duplicate allocations and reallocs in place,
/// so that the recent-address tags (SPEC.md §6.1) and their edge cases are exercised.
fn heap_churn() -> impl Strategy<Value = Vec<Event>> {
    let addr = (0u64..40).prop_map(|i| 0x7f00_0000_0000 + i * 48);
    let ev = prop_oneof![
        4 => (any::<u64>(), addr.clone(), 1u64..4096, 0u32..3).prop_map(|(seq, addr, size, stack)| Event::Alloc {
            seq, domain: HEAP_DOMAIN, addr, size, align_log2: 3, stack
        }),
        4 => (any::<u64>(), addr.clone(), 0u32..3).prop_map(|(seq, addr, stack)| Event::Free {
            seq, domain: HEAP_DOMAIN, addr, stack
        }),
        1 => (any::<u64>(), addr.clone(), addr.clone(), 1u64..4096).prop_map(|(seq, old_addr, new_addr, new_size)| {
            Event::Realloc { free_seq: seq, seq: seq.wrapping_add(1), old_addr, new_addr, new_size, align_log2: 4, stack: 1 }
        }),
        1 => (any::<u64>(), addr).prop_map(|(seq, addr)| Event::Alloc { seq, domain: 3, addr, size: 64, align_log2: 0, stack: 0 }),
    ];
    proptest::collection::vec(ev, 0..400)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn reused_addresses_round_trip(events in heap_churn()) {
        let mut enc = EventEncoder::new();
        events.iter().for_each(|e| enc.push(e));
        let decoded: Result<Vec<_>, _> = memreplay_format::block::decode_events(enc.payload()).collect();
        prop_assert_eq!(decoded.unwrap(), events);
    }
}

#[test]
fn recent_address_tags_make_churn_compact() {
    // Alloc then free the same 8 blocks, again and again: after the first round every
    // free names a recent allocation and every allocation a recently freed address.
    let mut enc = EventEncoder::new();
    let mut seq = 0;
    for round in 0..100u64 {
        for i in 0..8u64 {
            seq += 1;
            let addr = 0x5555_0000_0000 + i * 0x1_0000 + (round % 2) * 0x40;
            enc.push(&Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size: 64, align_log2: 3, stack: 1 });
        }
        for i in 0..8u64 {
            seq += 1;
            let addr = 0x5555_0000_0000 + i * 0x1_0000 + (round % 2) * 0x40;
            enc.push(&Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: 0 });
        }
    }
    let per_event = enc.len() as f64 / f64::from(enc.event_count());
    // Allocations: tag, seq delta, size, stack, align; frees: tag, seq delta, stack.
    // That is 4 bytes an event on average, plus the first two rounds' addresses.
    assert!(per_event < 4.05, "{per_event} raw bytes per event");
}
