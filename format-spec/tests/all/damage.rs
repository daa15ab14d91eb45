//! Damaged and foreign files: the reader never panics, keeps every intact block, and
//! reports exactly what it could not read.

use memreplay_format::block::FRAME_LEN;
use memreplay_format::*;
use proptest::collection::vec;
use proptest::prelude::*;

use crate::header;

/// A small log of several blocks from several threads.
pub(crate) struct Sample {
    pub bytes: Vec<u8>,
    pub header_len: usize,
    /// (frame offset, end offset, thread, events) of every event block, in file order.
    pub blocks: Vec<(usize, usize, u32, Vec<Event>)>,
    /// Offset of the end-of-log block.
    pub end_at: usize,
}

pub(crate) fn sample() -> Sample {
    let mut bytes = Vec::new();
    let mut w = LogWriter::new(&mut bytes, &header()).unwrap();
    let header_len = w.bytes() as usize;
    let mut enc = EventEncoder::new();
    let mut blocks = Vec::new();
    let mut seq = 1u64;
    for b in 0..7u32 {
        let thread = [0, 1, 2, 1, 3, 2, 1][b as usize];
        let mut events = vec![Event::Time { ns: u64::from(b) * 1000 }];
        if thread == 0 {
            events.push(Event::DefineString { id: 1, text: "texture pool".into() });
            events.push(Event::Module {
                base: 0x5555_0000_0000,
                size: 1 << 20,
                load_bias: 0x5555_0000_0000,
                path: 1,
                build_id: vec![0xab; 20],
            });
        }
        // Block 3 is long and repetitive, so it is stored LZ4-compressed.
        let n = if b == 3 { 200 } else { 3 + b as u64 };
        for i in 0..n {
            let addr = 0x7f00_0000_0000 + u64::from(b) * 0x10000 + 32 * i;
            events.push(Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size: 32, align_log2: 3, stack: 0 });
            events.push(Event::Free { seq: seq + 1, domain: HEAP_DOMAIN, addr, stack: 0 });
            seq += 2;
        }
        if b == 5 {
            // Too short to compress: stored as is.
            events = vec![Event::Label { seq, name: 1 }];
            seq += 1;
        }
        events.iter().for_each(|e| enc.push(e));
        let start = w.bytes() as usize;
        w.write_block(thread, &mut enc).unwrap();
        blocks.push((start, w.bytes() as usize, thread, events));
    }
    let end_at = w.bytes() as usize;
    w.finish(0, 9999).unwrap();
    Sample { bytes, header_len, blocks, end_at }
}

pub(crate) fn read(bytes: &[u8]) -> Log {
    Log::read(bytes).unwrap_or_else(|e| panic!("log does not open: {e}"))
}

/// The decoded blocks as (thread, events), for comparing logs whose offsets moved.
pub(crate) fn contents(log: &Log) -> Vec<(u32, Vec<Event>)> {
    log.blocks.iter().map(|b| (b.frame.thread, b.events.clone())).collect()
}

fn expected(s: &Sample, keep: impl Fn(usize) -> bool) -> Vec<(u32, Vec<Event>)> {
    s.blocks.iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, b)| (b.2, b.3.clone())).collect()
}

#[test]
fn sample_is_clean_and_has_both_compressions() {
    let s = sample();
    let log = read(&s.bytes);
    assert!(log.report.is_clean(), "{:?}", log.report);
    assert_eq!(contents(&log), expected(&s, |_| true));
    let comp: Vec<_> = log.blocks.iter().map(|b| b.frame.compression).collect();
    assert!(comp.contains(&Compression::Lz4) && comp.contains(&Compression::None), "{comp:?}");
}

#[test]
fn truncation_at_every_offset_keeps_the_complete_blocks() {
    let s = sample();
    let boundaries: Vec<usize> = std::iter::once(s.header_len).chain(s.blocks.iter().map(|b| b.1)).collect();
    assert_eq!(*boundaries.last().unwrap(), s.end_at);
    for cut in s.header_len..=s.bytes.len() {
        let log = read(&s.bytes[..cut]);
        assert_eq!(contents(&log), expected(&s, |i| s.blocks[i].1 <= cut), "cut at {cut}");
        assert_eq!(log.report.bytes, cut as u64);
        if cut == s.bytes.len() {
            assert!(log.report.is_clean());
            continue;
        }
        assert_eq!(log.report.end, None, "cut at {cut}");
        let last = *boundaries.iter().rev().find(|&&b| b <= cut).unwrap();
        if last == cut {
            assert_eq!(log.report.damage, [], "cut at {cut}");
        } else {
            let tail = Damage::TruncatedTail { offset: last as u64, bytes: (cut - last) as u64 };
            assert_eq!(log.report.damage, [tail], "cut at {cut}");
        }
    }
}

#[test]
fn truncation_inside_the_header_is_an_error() {
    let s = sample();
    assert!(matches!(Log::read(&s.bytes[..0]), Err(FormatError::Empty)));
    for cut in 1..s.header_len {
        match Log::read(&s.bytes[..cut]) {
            Err(FormatError::TruncatedHeader) => {}
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[test]
fn bad_payload_checksum_skips_only_that_block() {
    let s = sample();
    for (k, &(start, end, thread, ref events)) in s.blocks.iter().enumerate() {
        for at in [start + FRAME_LEN, (start + FRAME_LEN + end) / 2, end - 1] {
            let mut bytes = s.bytes.clone();
            bytes[at] ^= 0x40;
            let log = read(&bytes);
            assert_eq!(contents(&log), expected(&s, |i| i != k), "flip at {at}");
            let seqs = events.iter().filter_map(Event::seq);
            let (first_seq, last_seq) = (seqs.clone().min().unwrap(), seqs.max().unwrap());
            let bad = Damage::BadBlock {
                offset: start as u64,
                thread,
                events: events.len() as u32,
                first_seq,
                last_seq,
                error: BlockError::ChecksumMismatch,
            };
            assert_eq!(log.report.damage, [bad], "flip at {at}");
            assert!(log.report.end.is_some());
            assert_eq!(log.report.events_in_bad_blocks(), events.len() as u64);
        }
    }
}

#[test]
fn corrupt_frame_resyncs_at_the_next_block() {
    let s = sample();
    for (k, &(start, end, _, _)) in s.blocks.iter().enumerate() {
        for at in start..start + FRAME_LEN {
            let mut bytes = s.bytes.clone();
            bytes[at] ^= 0x01;
            let log = read(&bytes);
            assert_eq!(contents(&log), expected(&s, |i| i != k), "flip at {at}");
            let region = Damage::CorruptRegion { offset: start as u64, bytes: (end - start) as u64 };
            assert_eq!(log.report.damage, [region], "flip at {at}");
            assert!(log.report.end.is_some(), "flip at {at}");
            assert_eq!(log.report.bytes_lost(), (end - start) as u64);
        }
    }
    // A corrupt end-of-log frame: everything from it to the end is lost, and so is the end.
    let mut bytes = s.bytes.clone();
    bytes[s.end_at + 20] ^= 0xff;
    let log = read(&bytes);
    assert_eq!(contents(&log), expected(&s, |_| true));
    let region = Damage::CorruptRegion { offset: s.end_at as u64, bytes: (s.bytes.len() - s.end_at) as u64 };
    assert_eq!(log.report.damage, [region]);
    assert_eq!(log.report.end, None);
}

#[test]
fn garbage_between_blocks_is_skipped() {
    let s = sample();
    let mut fake_frame = b"MRLB".to_vec();
    fake_frame.extend_from_slice(&[0u8; 60]);
    let garbages: Vec<Vec<u8>> = vec![
        vec![0xab; 1],
        vec![0xab; 100],
        b"MRL".to_vec(),
        b"MRLBMRLBMRLB".to_vec(),
        fake_frame,
        (0..=255).collect(),
    ];
    let mut points: Vec<usize> = s.blocks.iter().map(|b| b.0).collect();
    points.push(s.end_at);
    for garbage in &garbages {
        for (k, &at) in points.iter().enumerate() {
            let mut bytes = s.bytes[..at].to_vec();
            bytes.extend_from_slice(garbage);
            bytes.extend_from_slice(&s.bytes[at..]);
            let log = read(&bytes);
            assert_eq!(contents(&log), expected(&s, |_| true), "garbage {k}");
            let region = Damage::CorruptRegion { offset: at as u64, bytes: garbage.len() as u64 };
            assert_eq!(log.report.damage, [region], "garbage before block {k}");
            assert!(log.report.end.is_some());
        }
    }
}

#[test]
fn foreign_files_are_refused() {
    let mut elf = b"\x7fELF\x02\x01\x01\x00".to_vec();
    elf.extend_from_slice(&[0; 56]);
    let png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    let files: [&[u8]; 4] = [b"hello, world\nthis is text\n", &elf, &png, b"\x89MRX\r\n\x1a\n\x01\x00\x00\x00"];
    for f in files {
        assert!(matches!(Log::read(f), Err(FormatError::NotAMemreplayLog)), "{f:?}");
    }
}

#[test]
fn other_major_versions_and_bad_header_checksums_are_refused() {
    let s = sample();
    let mut v2 = s.bytes.clone();
    v2[8..10].copy_from_slice(&2u16.to_le_bytes());
    assert!(matches!(Log::read(&v2[..]), Err(FormatError::UnsupportedVersion { major: 2, minor: VERSION_MINOR })));
    let mut v0 = s.bytes.clone();
    v0[8..10].copy_from_slice(&0u16.to_le_bytes());
    assert!(matches!(Log::read(&v0[..]), Err(FormatError::UnsupportedVersion { major: 0, minor: VERSION_MINOR })));

    // Any flipped byte after the versions (length, body, checksum) is caught.
    for at in 12..s.header_len {
        let mut bad = s.bytes.clone();
        bad[at] ^= 0x10;
        match Log::read(&bad[..]) {
            // A flipped high bit of the body length makes it implausible or cut off.
            Err(FormatError::CorruptHeader(_)) | Err(FormatError::TruncatedHeader) => {}
            other => panic!("flip at {at}: {other:?}"),
        }
    }
    let mut bad_crc = s.bytes.clone();
    bad_crc[s.header_len - 1] ^= 0xff;
    assert!(matches!(Log::read(&bad_crc[..]), Err(FormatError::CorruptHeader(_))));
}

#[test]
fn bytes_after_the_end_are_reported() {
    let s = sample();
    let mut trailing_block = Vec::new();
    let mut enc = EventEncoder::new();
    enc.push(&Event::Label { seq: 1, name: 0 });
    enc.finish_into(5, &mut trailing_block);
    for extra in [vec![0u8], vec![0x42; 1000], trailing_block] {
        let mut bytes = s.bytes.clone();
        bytes.extend_from_slice(&extra);
        let log = read(&bytes);
        assert_eq!(contents(&log), expected(&s, |_| true));
        assert!(log.report.end.is_some());
        let t = Damage::TrailingBytes { offset: s.bytes.len() as u64, bytes: extra.len() as u64 };
        assert_eq!(log.report.damage, [t]);
    }
}

/// A reader that hands out one byte at a time: framing must not depend on read sizes.
pub(crate) struct Trickle<'a>(pub &'a [u8]);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match (self.0.split_first(), buf.first_mut()) {
            (Some((&b, rest)), Some(slot)) => {
                *slot = b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

#[test]
fn damage_is_found_the_same_through_a_slow_reader() {
    let s = sample();
    let mut bytes = s.bytes[..s.blocks[2].0].to_vec();
    bytes.extend_from_slice(&[0x33; 77]);
    bytes.extend_from_slice(&s.bytes[s.blocks[2].0..s.bytes.len() - 3]);
    let fast = read(&bytes);
    let slow = Log::read(Trickle(&bytes)).unwrap();
    assert_eq!(contents(&fast), contents(&slow));
    assert_eq!(fast.report, slow.report);
    assert_eq!(fast.report.damage.len(), 2);
}

/// A frame with a valid checksum around `payload` (stored as is).
fn framed(thread: u32, compression: Compression, event_count: u32, raw_len: u32, payload: &[u8]) -> Vec<u8> {
    use memreplay_format::block::BlockFrame;
    let frame = BlockFrame {
        kind: BlockKind::Events,
        compression,
        thread,
        event_count,
        first_seq: 0,
        last_seq: 0,
        stored_len: payload.len() as u32,
        raw_len,
        payload_crc: crc32(payload),
    };
    let mut out = frame.to_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

/// CRC-32 (IEEE), bit by bit, as SPEC.md defines it: the tests do not borrow the crate's.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_after_a_header_never_panic(tail in vec(any::<u8>(), 0..2000)) {
        let mut bytes = header().to_bytes();
        bytes.extend_from_slice(&tail);
        let log = Log::read(&bytes[..]).unwrap();
        prop_assert_eq!(log.report.bytes, bytes.len() as u64);
    }

    #[test]
    fn arbitrary_mutations_never_panic(
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
        insert in (any::<prop::sample::Index>(), vec(any::<u8>(), 0..64)),
    ) {
        let s = sample();
        let mut bytes = s.bytes.clone();
        for (i, b) in flips {
            let at = i.index(bytes.len());
            bytes[at] = b;
        }
        let at = insert.0.index(bytes.len());
        bytes.splice(at..at, insert.1);
        let _ = Log::read(&bytes[..]);
        let cut = cut.index(bytes.len() + 1);
        let _ = Log::read(&bytes[..cut]);
    }

    /// A real zstd frame, or real columns (stored by LZ4 or zstd), damaged under a
    /// matching CRC (bytes changed, cut short, or extended): the reader never panics, and
    /// reads the block only if it still decompresses to exactly its claim.
    #[test]
    fn damaged_zstd_frames_and_columns_never_panic(
        flips in vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        cut_it in any::<bool>(),
        raw_delta in -3i64..3,
        method in 0usize..5,
    ) {
        // Without the `zstd` feature, only the columns that LZ4 stores can be written.
        let methods: &[Compression] = if cfg!(feature = "zstd") {
            &[
                Compression::Zstd,
                Compression::Lz4Columns,
                Compression::ZstdColumns,
                Compression::Lz4ColumnsSizeDeltas,
                Compression::ZstdColumnsSizeDeltas,
            ]
        } else {
            &[Compression::Lz4Columns, Compression::Lz4ColumnsSizeDeltas]
        };
        let method = methods[method % methods.len()];
        let (stored, raw_len, count) = compressed_sample(method);
        let mut payload = stored.clone();
        for (at, byte) in flips {
            let at = at.index(payload.len());
            payload[at] ^= byte;
        }
        if cut_it {
            payload.truncate(cut.index(payload.len() + 1));
        }
        let raw_len = (i64::from(raw_len) + raw_delta).max(0) as u32;
        let mut bytes = header().to_bytes();
        bytes.extend_from_slice(&framed(1, method, count, raw_len, &payload));
        bytes.extend_from_slice(&EndOfLog::default().to_block_bytes());
        let log = Log::read(&bytes[..]).unwrap();
        prop_assert_eq!(log.blocks.len() + log.report.damage.len(), 1);
    }

    /// Valid frames around arbitrary payloads: the event decoder, LZ4, zstd and the
    /// columns' join never panic, whatever the payload, declared raw length or event
    /// count.
    #[test]
    fn arbitrary_payloads_in_valid_frames_never_panic(
        payload in vec(any::<u8>(), 0..300),
        method in 0u8..7,
        event_count in any::<u32>(),
        raw_len in 0u32..4096,
    ) {
        let (compression, raw_len) = match method {
            0 => (Compression::None, payload.len() as u32),
            m => (Compression::from_byte(m), raw_len),
        };
        let mut bytes = header().to_bytes();
        bytes.extend_from_slice(&framed(1, compression, event_count, raw_len, &payload));
        bytes.extend_from_slice(&EndOfLog::default().to_block_bytes());
        let log = Log::read(&bytes[..]).unwrap();
        prop_assert!(log.report.end.is_some());
        prop_assert_eq!(log.blocks.len() + log.report.damage.len(), 1);
    }
}

#[test]
fn crc_matches_the_crate() {
    let s = sample();
    let n = s.header_len - 4;
    assert_eq!(crc32(&s.bytes[..n]).to_le_bytes(), s.bytes[n..s.header_len]);
    assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
}

/// A block that claims more than a block may hold decompressed (SPEC.md §4.2) is bad, and
/// so is an LZ4 block that claims more than its stored bytes can expand into: both are
/// refused before a buffer is made for them, and the blocks around them are read.
#[test]
fn claims_past_what_a_block_may_hold_are_bad_blocks() {
    use memreplay_format::block::MAX_BLOCK_RAW_LEN;
    // TIME 1 and six ATTACH_POPs: 8 bytes, 7 events.
    let payload = [0x0b, 0x02, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a];
    let mut bytes = header().to_bytes();
    let first = bytes.len();
    bytes.extend(framed(1, Compression::Lz4, 7, 64 << 20, &payload));
    bytes.extend(framed(1, Compression::None, 7, MAX_BLOCK_RAW_LEN + 1, &payload));
    bytes.extend(framed(1, Compression::Lz4, 7, MAX_BLOCK_RAW_LEN, &payload));
    bytes.extend(framed(1, Compression::None, 7, 8, &payload));
    let log = read(&bytes);
    let errors: Vec<_> = log
        .report
        .damage
        .iter()
        .map(|d| match d {
            Damage::BadBlock { error, .. } => error.clone(),
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(
        errors,
        [
            BlockError::TooLarge { raw_len: 64 << 20 },
            BlockError::TooLarge { raw_len: MAX_BLOCK_RAW_LEN + 1 },
            BlockError::Decompression,
        ]
    );
    assert_eq!(
        log.report.damage[0].to_string(),
        format!(
            "block at byte {first} (thread 1, 7 events, seq 0..=0) skipped: \
             claims 67108864 bytes decompressed, more than the 4194304 a block may hold"
        )
    );
    let mut honest = vec![Event::Time { ns: 1 }];
    honest.extend((0..6).map(|_| Event::AttachPop));
    assert_eq!(contents(&log), [(1, honest)]);
}

/// A zstd block (SPEC.md §4.2, method 2) is one zstd frame that decompresses to exactly
/// `raw_len` bytes. Anything else is a bad block, found before its events are decoded,
/// and the blocks around it are read: a frame with bytes after it (zstd itself would go
/// on to decode them as a second frame), a `raw_len` one byte off either way, a payload
/// that is not a zstd frame under a matching CRC, and a claim past what the stored bytes can expand to,
/// refused before a buffer is made for it.
#[test]
#[cfg(feature = "zstd")]
fn zstd_blocks_decompress_to_exactly_their_claim() {
    let events = allocations_every(48);
    let block = block_with(PayloadCompression::Zstd { level: 3 }, &events);
    let mut bytes = header().to_bytes();
    bytes.extend_from_slice(&sealed(&block));
    bytes.extend_from_slice(&EndOfLog::default().to_block_bytes());
    let good = read(&bytes);
    assert!(good.report.is_clean(), "{:?}", good.report);
    assert_eq!(good.blocks[0].frame.compression, Compression::Zstd);
    assert_eq!(good.blocks[0].events, events);
    let frame = good.blocks[0].frame;
    let stored = sealed(&block)[FRAME_LEN..].to_vec();

    let mut trailing = stored.clone();
    trailing.extend_from_slice(&stored);
    let mut damaged = stored.clone();
    damaged[0] ^= 0x5a;
    let cases: [(&str, u32, Vec<u8>); 5] = [
        ("a second frame after the first", frame.raw_len * 2, trailing),
        ("one byte short of the claim", frame.raw_len + 1, stored.clone()),
        ("one byte past the claim", frame.raw_len - 1, stored.clone()),
        ("not a zstd frame (its magic number damaged)", frame.raw_len, damaged),
        ("a claim past 32,768 bytes per stored byte", 32_768 * stored.len() as u32 + 1, stored.clone()),
    ];
    for (what, raw_len, payload) in cases {
        assert_bad_block_before(Compression::Zstd, raw_len, &payload, &events, what);
    }
}

/// A block of thread 2 stored with `method`, claiming `raw_len`, followed by a good block
/// of `events` (thread 1): the first is a bad block that does not decompress, the second
/// reads.
fn assert_bad_block_before(method: Compression, raw_len: u32, payload: &[u8], events: &[Event], what: &str) {
    let mut bytes = header().to_bytes();
    bytes.extend(framed(2, method, 400, raw_len, payload));
    bytes.extend_from_slice(&sealed(&block_of(events)));
    let log = read(&bytes);
    assert!(
        matches!(&log.report.damage[..], [Damage::BadBlock { thread: 2, error: BlockError::Decompression, .. }]),
        "{what}: {:?}",
        log.report.damage
    );
    assert_eq!(contents(&log), [(1, events.to_vec())], "{what}");
}

/// A framed block's bytes.
fn sealed(block: &FramedBlock) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = LogWriter::new(&mut out, &header()).unwrap();
    let skip = w.bytes() as usize;
    w.write_framed(block).unwrap();
    drop(w);
    out.split_off(skip)
}

/// The events as one LZ4 block of thread 1.
fn block_of(events: &[Event]) -> FramedBlock {
    block_with(PayloadCompression::Lz4, events)
}

/// The events as one block of thread 1, compressed with `method`.
fn block_with(method: PayloadCompression, events: &[Event]) -> FramedBlock {
    let mut enc = EventEncoder::new();
    events.iter().for_each(|e| enc.push(e));
    let mut block = FramedBlock::compressed_with(method);
    block.frame(1, &mut enc).unwrap();
    block
}

/// 400 heap allocations of 48 bytes, `step` bytes apart.
fn allocations_every(step: u64) -> Vec<Event> {
    (0..400u64)
        .map(|i| Event::Alloc {
            seq: 2 * i,
            domain: HEAP_DOMAIN,
            addr: 0x7f00_0000_0000 + step * i,
            size: 48,
            align_log2: 4,
            stack: 3,
        })
        .collect()
}

/// A payload of 300 heap events stored with `method` (zstd or a columns method), its
/// raw length and event count, made once per method. For the methods that hold sizes as
/// deltas, each allocation is 8 bytes larger than the one before.
fn compressed_sample(method: Compression) -> (Vec<u8>, u32, u32) {
    type Sample = std::sync::OnceLock<(Vec<u8>, u32, u32)>;
    static SAMPLES: [Sample; 5] = [Sample::new(), Sample::new(), Sample::new(), Sample::new(), Sample::new()];
    let (i, writer) = match method {
        Compression::Zstd => (0, PayloadCompression::Zstd { level: 1 }),
        Compression::Lz4Columns => (1, PayloadCompression::Lz4Columns),
        Compression::ZstdColumns => (2, PayloadCompression::ZstdColumns { level: 1 }),
        Compression::Lz4ColumnsSizeDeltas => (3, PayloadCompression::Lz4Columns),
        Compression::ZstdColumnsSizeDeltas => (4, PayloadCompression::ZstdColumns { level: 1 }),
        other => unreachable!("no sample for {other:?}"),
    };
    let stepping = i >= 3;
    SAMPLES[i]
        .get_or_init(|| {
            let mut enc = EventEncoder::new();
            for i in 0..300u64 {
                // Steps of 8 KiB + 32: three bytes a delta in the payload, two in columns.
                let addr = 0x7f00_0000_0000 + 8224 * (i % 40);
                enc.push(&Event::Alloc {
                    seq: 2 * i,
                    domain: HEAP_DOMAIN,
                    addr,
                    size: if stepping { 24 + 8 * i } else { 24 + i % 5 },
                    align_log2: 3,
                    stack: 2,
                });
                enc.push(&Event::Free { seq: 2 * i + 1, domain: HEAP_DOMAIN, addr, stack: 0 });
            }
            let raw_len = enc.len() as u32;
            let mut block = FramedBlock::compressed_with(writer);
            block.frame(1, &mut enc).unwrap();
            let bytes = sealed(&block);
            assert_eq!(bytes[5], method.to_byte(), "stored as {method:?}");
            (bytes[FRAME_LEN..].to_vec(), raw_len, 600)
        })
        .clone()
}

/// A columns block (SPEC.md §4.2, methods 3 and 4) is the columns' length, then the
/// columns compressed, which join into exactly `raw_len` bytes using up every column.
/// Anything else is a bad block, and the blocks around it are read: a column with a field
/// left over, a tag more than the other columns hold, column lengths past the columns' end,
/// columns claimed more than 70 bytes longer than the payload, and `raw_len` one byte off
/// either way.
#[test]
fn columns_join_into_exactly_their_claim() {
    // Steps of 8 KiB + 48: three bytes a delta in the payload, two in columns.
    let events = allocations_every(8240);
    let block = block_with(PayloadCompression::Lz4Columns, &events);
    let stored = sealed(&block)[FRAME_LEN..].to_vec();
    let raw_len = u32::from_le_bytes(sealed(&block)[36..40].try_into().unwrap());
    // The columns' length (one uvarint), then the columns in LZ4.
    let varint = |b: &[u8]| -> (usize, usize) {
        let n = b.iter().position(|&x| x & 0x80 == 0).unwrap() + 1;
        (b[..n].iter().rev().fold(0, |v, &x| (v << 7) | usize::from(x & 0x7f)), n)
    };
    let (blob_len, head) = varint(&stored);
    let blob = lz4_flex::block::decompress(&stored[head..], blob_len).unwrap();
    assert!(blob_len < raw_len as usize, "the columns are smaller than the payload");
    // The column lengths (all but the last's): the tags first, one per record.
    let mut lens = Vec::new();
    let mut at = 0;
    for _ in 0..7 {
        let (len, n) = varint(&blob[at..]);
        lens.push(len);
        at += n;
    }
    assert_eq!(lens[0], 400, "a tag per allocation");
    let store = |blob: &[u8], claim: Option<usize>| {
        let mut s = Vec::new();
        let mut len = claim.unwrap_or(blob.len());
        while len >= 0x80 {
            s.push(len as u8 | 0x80);
            len >>= 7;
        }
        s.push(len as u8);
        s.extend(lz4_flex::block::compress(blob));
        s
    };
    let with_lens = |lens: &[usize], columns: &[u8]| {
        let mut b = Vec::new();
        for &l in lens {
            assert!(l < 0x4000);
            if l >= 0x80 {
                b.extend([l as u8 | 0x80, (l >> 7) as u8]);
            } else {
                b.push(l as u8);
            }
        }
        b.extend_from_slice(columns);
        b
    };
    let columns = &blob[at..];
    assert_eq!(store(&with_lens(&lens, columns), None), stored, "the columns as the writer stored them");
    // A seq left over: one more byte in the seq column (the second), at its end.
    let mut extra_seq = columns.to_vec();
    extra_seq.insert(lens[0] + lens[1], 0x02);
    let mut lens_seq = lens.clone();
    lens_seq[1] += 1;
    // One more tag (an ATTACH_POP, no fields): a payload a byte past its claim.
    let mut extra_tag = columns.to_vec();
    extra_tag.insert(lens[0], 0x0a);
    let mut lens_tag = lens.clone();
    lens_tag[0] += 1;
    let mut lens_past = lens.clone();
    lens_past[6] = 0x3fff;
    let cases: [(&str, u32, Vec<u8>); 6] = [
        ("a field left over in a column", raw_len, store(&with_lens(&lens_seq, &extra_seq), None)),
        ("a tag more than its claim", raw_len, store(&with_lens(&lens_tag, &extra_tag), None)),
        ("column lengths past the columns' end", raw_len, store(&with_lens(&lens_past, columns), None)),
        ("columns claimed 71 bytes longer than the payload", raw_len, store(&blob, Some(raw_len as usize + 71))),
        ("one byte short of the claim", raw_len + 1, stored.clone()),
        ("one byte past the claim", raw_len - 1, stored.clone()),
    ];
    for (what, raw_len, payload) in cases {
        assert_bad_block_before(Compression::Lz4Columns, raw_len, &payload, &events, what);
    }
    // And the block itself, as written, reads.
    let mut bytes = header().to_bytes();
    bytes.extend(framed(2, Compression::Lz4Columns, 400, raw_len, &stored));
    let log = read(&bytes);
    assert!(log.report.damage.is_empty(), "{:?}", log.report.damage);
    assert_eq!(log.blocks[0].events, events);
}
