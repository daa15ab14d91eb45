//! Recompressing a log: every event block's payload stored again with another method, the
//! rest of the file (end record, unknown blocks, damage) kept as it was, so that a reader
//! finds the same events and the same damage in both.

use memreplay_format::block::{BlockFrame, FRAME_LEN};
use memreplay_format::*;
use proptest::prelude::*;

use crate::damage::{contents, crc32, read, sample, Trickle};

const METHODS: [PayloadCompression; 5] = [
    PayloadCompression::Lz4,
    PayloadCompression::Zstd { level: 1 },
    PayloadCompression::Zstd { level: 19 },
    PayloadCompression::Lz4Columns,
    PayloadCompression::ZstdColumns { level: 1 },
];

fn recompressed(bytes: &[u8], method: PayloadCompression, workers: usize) -> (Vec<u8>, Recompressed) {
    let mut out = Vec::new();
    let done = recompress(bytes, &mut out, method, workers).unwrap_or_else(|e| panic!("{method:?}: {e}"));
    (out, done)
}

/// Each block's frame but for how its payload is stored: stream, event count, seq range
/// and raw length.
fn frames(log: &Log) -> Vec<(u32, u32, u64, u64, u32)> {
    let f =
        |b: &DecodedBlock| (b.frame.thread, b.frame.event_count, b.frame.first_seq, b.frame.last_seq, b.frame.raw_len);
    log.blocks.iter().map(f).collect()
}

/// The damage a reader reports, without the offsets (blocks before it changed size).
fn damage(log: &Log) -> Vec<String> {
    let strip = |d: &Damage| match d {
        Damage::TruncatedTail { bytes, .. } => format!("truncated tail of {bytes}"),
        Damage::CorruptRegion { bytes, .. } => format!("corrupt region of {bytes}"),
        Damage::BadBlock { thread, events, first_seq, last_seq, error, .. } => {
            format!("bad block of stream {thread}, {events} events, seqs {first_seq}..={last_seq}: {error}")
        }
        Damage::TrailingBytes { bytes, .. } => format!("{bytes} trailing bytes"),
        Damage::UnknownBlockKind { kind, .. } => format!("block of kind {kind}"),
    };
    log.report.damage.iter().map(strip).collect()
}

/// A log with the blocks of a real recording's shape, several streams and a label, and
/// its end record.
fn program_log() -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut w = LogWriter::new(&mut bytes, &crate::header()).unwrap();
    let mut enc = EventEncoder::new();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut seq = 1;
    for b in 0..12u32 {
        enc.push(&Event::Time { ns: u64::from(b) * 1_000_000 });
        for i in 0..3000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let addr = 0x5555_0000_0000 + u64::from(b) * 0x100_0000 + 48 * i;
            let size = [16, 24, 48, 96, 4096][(rng % 5) as usize];
            enc.push(&Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size, align_log2: 4, stack: (rng % 50) as u32 });
            if rng % 4 != 0 {
                enc.push(&Event::Free { seq: seq + 2, domain: HEAP_DOMAIN, addr, stack: 0 });
            }
            seq += 4;
        }
        if b == 6 {
            enc.push(&Event::Label { seq: seq + 1, name: 0 });
        }
        w.write_block(1 + b % 3, &mut enc).unwrap();
    }
    w.finish(5, 12_000_000).unwrap();
    bytes
}

/// Every method, and back: the same header (but the minor version), the same blocks in
/// the same order with the same frames and events, the same end record; each block
/// stored with the method asked for (or as it is, where that is not smaller). zstd-columns
/// stores this log in less than LZ4.
#[test]
fn every_method_keeps_the_events_frames_and_end() {
    let original = program_log();
    let old = read(&original);
    assert!(old.report.is_clean());
    let mut sizes = Vec::new();
    for asked in METHODS {
        // Without the `zstd` feature, zstd is written as LZ4 (`PayloadCompressor::new`).
        let method = crate::built(asked);
        let (bytes, done) = recompressed(&original, asked, 2);
        let new = read(&bytes);
        assert!(new.report.is_clean(), "{method:?}: {:?}", new.report);
        assert_eq!(contents(&new), contents(&old), "{method:?}");
        assert_eq!(frames(&new), frames(&old), "{method:?}");
        assert_eq!(new.report.end, old.report.end, "{method:?}");
        let minor = match method {
            PayloadCompression::Lz4 => crate::header().version_minor,
            PayloadCompression::Zstd { .. } => crate::header().version_minor.max(4),
            _ => crate::header().version_minor.max(5),
        };
        assert_eq!(new.header, FileHeader { version_minor: minor, ..old.header.clone() }, "{method:?}");
        let want = match method {
            PayloadCompression::Lz4 => Compression::Lz4,
            PayloadCompression::Zstd { .. } => Compression::Zstd,
            PayloadCompression::Lz4Columns => Compression::Lz4Columns,
            PayloadCompression::ZstdColumns { .. } => Compression::ZstdColumns,
        };
        assert!(new.blocks.iter().all(|b| b.frame.compression == want), "{method:?}");
        assert_eq!((done.blocks, done.events, done.copied_blocks), (12, old.report.end.unwrap().events, 0));
        assert_eq!((done.bytes_in, done.bytes_out), (original.len() as u64, bytes.len() as u64));
        assert_eq!((done.method, done.version_minor), (method, minor));
        // Recompressing the result again with LZ4 gives back the LZ4 log, byte for byte
        // but for the minor version.
        let (back, _) = recompressed(&bytes, PayloadCompression::Lz4, 1);
        let (lz4, _) = recompressed(&original, PayloadCompression::Lz4, 1);
        assert_eq!(read(&back).blocks, read(&lz4).blocks, "{method:?}");
        sizes.push(bytes.len());
    }
    if cfg!(feature = "zstd") {
        assert!(sizes[4] < sizes[0] * 3 / 4, "{sizes:?}");
    }
}

/// The blocks come out the same whatever the number of threads that compress them, and
/// through a source that gives one byte at a time.
#[test]
fn output_does_not_depend_on_workers_or_reads() {
    let original = program_log();
    let (one, _) = recompressed(&original, PayloadCompression::ZstdColumns { level: 3 }, 1);
    for workers in [2, 3, 16] {
        assert_eq!(recompressed(&original, PayloadCompression::ZstdColumns { level: 3 }, workers).0, one);
    }
    let mut slow = Vec::new();
    recompress(Trickle(&original), &mut slow, PayloadCompression::ZstdColumns { level: 3 }, 2).unwrap();
    assert_eq!(slow, one);
}

/// Each kind of damage comes through as it was: a block whose payload fails its
/// checksum (copied as it was), garbage between blocks, a block of an unknown kind, bytes
/// after the end, a missing end, a cut-off tail. The intact blocks are stored again.
#[test]
fn damage_comes_through_as_it_was() {
    let s = sample();
    let (b1, b3, b5) = (s.blocks[1].0, s.blocks[3].0, s.blocks[5].0);
    let mut unknown = BlockFrame {
        kind: BlockKind::Unknown(9),
        compression: Compression::None,
        thread: 4,
        event_count: 0,
        first_seq: 0,
        last_seq: 0,
        stored_len: 3,
        raw_len: 3,
        payload_crc: 0,
    };
    unknown.payload_crc = crc32(&[1, 2, 3]);
    let mut unknown_block = unknown.to_bytes().to_vec();
    unknown_block.extend_from_slice(&[1, 2, 3]);
    let damaged: Vec<(&str, Vec<u8>)> = vec![
        ("bad payload", {
            let mut b = s.bytes.clone();
            b[s.blocks[3].1 - 1] ^= 0x40;
            b
        }),
        ("garbage", [&s.bytes[..b3], &[0xab; 333][..], b"MRLB", &s.bytes[b3..]].concat()),
        ("unknown kind", [&s.bytes[..b5], &unknown_block, &s.bytes[b5..]].concat()),
        ("trailing", [&s.bytes[..], &[7; 50][..]].concat()),
        ("no end", s.bytes[..s.end_at].to_vec()),
        ("cut in a frame", s.bytes[..b3 + 20].to_vec()),
        ("bad payload, then garbage to the end", {
            let mut b = s.bytes[..s.end_at].to_vec();
            b[s.blocks[1].1 - 1] ^= 0x40;
            b.extend_from_slice(&[0xab; 333]);
            b
        }),
        ("cut in a payload", s.bytes[..b3 + FRAME_LEN + 30].to_vec()),
        ("bad frame", {
            let mut b = s.bytes.clone();
            b[b1 + 9] ^= 1;
            b
        }),
    ];
    for (what, bytes) in damaged {
        let old = read(&bytes);
        assert!(!old.report.is_clean(), "{what}");
        for method in [PayloadCompression::ZstdColumns { level: 1 }, PayloadCompression::Lz4] {
            let (out, done) = recompressed(&bytes, method, 2);
            let new = read(&out);
            assert_eq!(contents(&new), contents(&old), "{what}, {method:?}");
            assert_eq!(damage(&new), damage(&old), "{what}, {method:?}");
            assert_eq!(new.report.end, old.report.end, "{what}, {method:?}");
            assert_eq!(damage(&Log { report: done.report.clone(), ..new.clone() }), damage(&old), "{what}");
            assert_eq!(done.bytes_in, bytes.len() as u64, "{what}");
            let bad = old.report.damage.iter().filter(|d| matches!(d, Damage::BadBlock { .. })).count() as u64;
            assert_eq!(done.copied_blocks, bad, "{what}");
        }
    }
}

#[test]
fn what_is_not_a_log_is_refused() {
    for bytes in [&b""[..], b"hello, world", &sample().bytes[..20]] {
        let err = recompress(bytes, Vec::new(), PayloadCompression::Lz4, 1).unwrap_err();
        assert!(matches!(err, RecompressError::Read(_)), "{err:?}");
    }
    /// A sink that refuses every write.
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let err = recompress(&sample().bytes[..], Full, PayloadCompression::Lz4, 1).unwrap_err();
    assert!(matches!(err, RecompressError::Write(_)), "{err:?}");
    assert_eq!(err.to_string(), "disk full");
}

/// Damage however long goes straight through, not through memory: a corrupt region and
/// trailing bytes of 32 MiB each are written while they are read, never more than a few
/// blocks' worth behind the source, and the log reads the same after.
#[test]
fn long_damage_streams_through() {
    use std::cell::Cell;
    use std::io::{Read, Write};
    use std::rc::Rc;

    const LONG: u64 = 32 << 20;
    /// What the source has handed out, what the sink has taken, and the most the sink
    /// was ever behind.
    #[derive(Default)]
    struct Flow {
        read: Cell<u64>,
        written: Cell<u64>,
        most_behind: Cell<u64>,
    }
    struct Source<R>(R, Rc<Flow>);
    impl<R: Read> Read for Source<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.read.set(self.1.read.get() + n as u64);
            Ok(n)
        }
    }
    /// Keeps what it is given, but at most `SHORT` bytes of a run of one byte (`run`:
    /// the length of the run the kept bytes end with).
    struct Sink(Rc<Flow>, Vec<u8>, usize);
    const SHORT: usize = 64;
    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let f = &self.0;
            f.written.set(f.written.get() + bytes.len() as u64);
            f.most_behind.set(f.most_behind.get().max(f.read.get().saturating_sub(f.written.get())));
            let mut rest = bytes;
            while let Some((&b, _)) = rest.split_first() {
                let same = rest.iter().position(|&x| x != b).unwrap_or(rest.len());
                let run = if self.1.last() == Some(&b) { self.2 } else { 0 };
                let keep = same.min(SHORT.saturating_sub(run));
                self.1.extend_from_slice(&rest[..keep]);
                self.2 = run + same;
                rest = &rest[same..];
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let s = sample();
    let b3 = s.blocks[3].0;
    let flow = Rc::new(Flow::default());
    let filler = |byte: u8| std::io::repeat(byte).take(LONG);
    let src = (&s.bytes[..b3]).chain(filler(0xab)).chain(&s.bytes[b3..]).chain(filler(0xcd));
    let mut sink = Sink(flow.clone(), Vec::new(), 0);
    let done = recompress(Source(src, flow.clone()), &mut sink, PayloadCompression::Lz4, 1).unwrap();
    assert_eq!(flow.read.get(), s.bytes.len() as u64 + 2 * LONG);
    assert!(flow.most_behind.get() < 4 << 20, "the sink was {} bytes behind", flow.most_behind.get());
    assert_eq!(done.bytes_in, flow.read.get());
    assert_eq!(done.bytes_out, flow.written.get());
    let damage: Vec<_> = done.report.damage.iter().map(|d| (d.offset(), format!("{d:?}"))).collect();
    assert_eq!(
        damage.iter().map(|d| d.1.split(' ').next().unwrap()).collect::<Vec<_>>(),
        ["CorruptRegion", "TrailingBytes"],
        "{damage:?}"
    );
    assert!(matches!(done.report.damage[0], Damage::CorruptRegion { bytes: LONG, .. }), "{damage:?}");
    assert!(matches!(done.report.damage[1], Damage::TrailingBytes { bytes: LONG, .. }), "{damage:?}");
    // What was written is what the same damage, but short, gives.
    let short = [&s.bytes[..b3], &[0xab; SHORT], &s.bytes[b3..], &[0xcd; SHORT]].concat();
    let (written, _) = recompressed(&short, PayloadCompression::Lz4, 1);
    assert!(sink.1 == written, "the same log, but for the length of the damage");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Whatever the damage (bytes flipped, cut, inserted), the recompressed log reads
    /// the same events and reports the same damage.
    #[test]
    fn arbitrary_damage_reads_the_same_after(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        insert in proptest::option::of((any::<prop::sample::Index>(), proptest::collection::vec(any::<u8>(), 1..80))),
    ) {
        let s = sample();
        let mut bytes = s.bytes.clone();
        for (at, x) in &flips {
            // Past the header: a damaged header is refused, not carried.
            let at = s.header_len + at.index(bytes.len() - s.header_len);
            bytes[at] ^= x;
        }
        if let Some((at, garbage)) = &insert {
            let at = s.header_len + at.index(bytes.len() - s.header_len);
            bytes.splice(at..at, garbage.iter().copied());
        }
        if let Some(cut) = cut {
            bytes.truncate(s.header_len + cut.index(bytes.len() - s.header_len));
        }
        let old = read(&bytes);
        let (out, _) = recompressed(&bytes, PayloadCompression::ZstdColumns { level: 1 }, 2);
        let new = read(&out);
        prop_assert_eq!(contents(&new), contents(&old));
        prop_assert_eq!(damage(&new), damage(&old));
        prop_assert_eq!(new.report.end, old.report.end);
    }
}
