//! Blocks: the framed, checksummed, independently decompressible units of a log,
//! and the compact encoding of the events inside them (SPEC.md §4–§6).
//!
//! An [`EventEncoder`] turns events into one block's payload, keeping the delta state
//! (sequence, address, time) that makes most fields one or two bytes. [`decode_events`]
//! is its inverse and starts from the same fresh state, so every block decodes alone.

//!
//! This module is the framing (frames, the end-of-log record, checksums, the bounds a
//! block's claims are held to); `compress.rs` the entropy stage, both ways (LZ4 and
//! zstd); `codec.rs` the encoding of events inside a payload, both ways; and `recent.rs`
//! the recent-address lists that encoder and decoder keep alike.

mod codec;
mod columns;
mod compress;
mod fields;
mod recent;

pub(crate) use codec::{
    decode_columns, decode_columns_with_lengths, decode_payload, decode_payload_with_lengths, Output,
};
pub use codec::{decode_events, frame_payload, EventDecoder, EventEncoder};
pub(crate) use columns::ColumnsBlob;
pub use compress::{PayloadCompression, PayloadCompressor, COMPRESSION_VALUES, ZSTD_LEVELS, ZSTD_MAX_EXPANSION};

use crate::event::*;
use crate::varint::{put_u64, Cursor};
use columns::SizeColumn;

/// The four bytes that start every block frame.
pub const BLOCK_MAGIC: [u8; 4] = *b"MRLB";
/// Size of a block frame in bytes.
pub const FRAME_LEN: usize = 48;
/// Largest decompressed payload a frame may declare (64 MiB); larger makes the frame
/// invalid (SPEC.md §4.1), and the reader looks for the next one.
pub const MAX_RAW_LEN: u32 = 64 << 20;
/// Largest decompressed payload a block may hold (4 MiB, SPEC.md §4.2); a block that
/// claims more is bad, refused before anything is allocated for it. The recorder's blocks
/// are 64 KiB and one record at most.
pub const MAX_BLOCK_RAW_LEN: u32 = 4 << 20;
/// Stream id of the recorder's own metadata (modules, session facts).
pub const METADATA_THREAD: u32 = 0;

/// What a block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A thread's event stream.
    Events,
    /// The clean end-of-log record.
    End,
    /// A kind from a newer minor version: skipped by its length.
    Unknown(u8),
}

impl BlockKind {
    pub fn to_byte(self) -> u8 {
        match self {
            BlockKind::Events => 1,
            BlockKind::End => 2,
            BlockKind::Unknown(b) => b,
        }
    }
    pub fn from_byte(b: u8) -> Self {
        match b {
            1 => BlockKind::Events,
            2 => BlockKind::End,
            b => BlockKind::Unknown(b),
        }
    }
}

/// How a block's payload is stored (the frame's `compression` byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Lz4,
    /// One zstd frame (format 1.4).
    Zstd,
    /// The payload's field columns, then LZ4 (format 1.5).
    Lz4Columns,
    /// The payload's field columns, then one zstd frame (format 1.5).
    ZstdColumns,
    /// Field columns whose allocations' sizes are held as deltas from the last size of
    /// the same callstack, then LZ4 (format 1.6).
    Lz4ColumnsSizeDeltas,
    /// The same columns, then one zstd frame (format 1.6).
    ZstdColumnsSizeDeltas,
    Unknown(u8),
}

impl Compression {
    pub fn to_byte(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
            Compression::Lz4Columns => 3,
            Compression::ZstdColumns => 4,
            Compression::Lz4ColumnsSizeDeltas => 5,
            Compression::ZstdColumnsSizeDeltas => 6,
            Compression::Unknown(b) => b,
        }
    }
    pub fn from_byte(b: u8) -> Self {
        match b {
            0 => Compression::None,
            1 => Compression::Lz4,
            2 => Compression::Zstd,
            3 => Compression::Lz4Columns,
            4 => Compression::ZstdColumns,
            5 => Compression::Lz4ColumnsSizeDeltas,
            6 => Compression::ZstdColumnsSizeDeltas,
            b => Compression::Unknown(b),
        }
    }

    /// Whether the stored payload must be decompressed (every method but none; an
    /// unknown one cannot be).
    pub fn is_compressed(self) -> bool {
        !matches!(self, Compression::None | Compression::Unknown(_))
    }

    /// For a columns method: the entropy stage under the columns (LZ4 or zstd), and how
    /// the columns hold the sizes.
    fn columns(self) -> Option<(Compression, SizeColumn)> {
        Some(match self {
            Compression::Lz4Columns => (Compression::Lz4, SizeColumn::AsTheyAre),
            Compression::ZstdColumns => (Compression::Zstd, SizeColumn::AsTheyAre),
            Compression::Lz4ColumnsSizeDeltas => (Compression::Lz4, SizeColumn::StackDeltas),
            Compression::ZstdColumnsSizeDeltas => (Compression::Zstd, SizeColumn::StackDeltas),
            _ => return None,
        })
    }
}

/// The fixed 48-byte frame in front of every block payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockFrame {
    pub kind: BlockKind,
    pub compression: Compression,
    /// The stream (recorder thread index) the events came from; 0 = metadata.
    pub thread: u32,
    pub event_count: u32,
    /// Smallest and largest `seq` of the block's sequenced events (both 0 if none).
    pub first_seq: u64,
    pub last_seq: u64,
    /// Bytes of payload that follow the frame on disk.
    pub stored_len: u32,
    /// Bytes of payload once decompressed.
    pub raw_len: u32,
    /// CRC-32 (IEEE) of the stored payload bytes.
    pub payload_crc: u32,
}

/// Why a frame could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    BadMagic,
    BadChecksum,
    Implausible,
}

impl BlockFrame {
    pub fn to_bytes(&self) -> [u8; FRAME_LEN] {
        let mut f = [0u8; FRAME_LEN];
        f[0..4].copy_from_slice(&BLOCK_MAGIC);
        f[4] = self.kind.to_byte();
        f[5] = self.compression.to_byte();
        // f[6..8] reserved, zero.
        f[8..12].copy_from_slice(&self.thread.to_le_bytes());
        f[12..16].copy_from_slice(&self.event_count.to_le_bytes());
        f[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        f[24..32].copy_from_slice(&self.last_seq.to_le_bytes());
        f[32..36].copy_from_slice(&self.stored_len.to_le_bytes());
        f[36..40].copy_from_slice(&self.raw_len.to_le_bytes());
        f[40..44].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32fast::hash(&f[..44]);
        f[44..48].copy_from_slice(&crc.to_le_bytes());
        f
    }

    /// Parses and validates a frame (magic, frame checksum, plausible lengths).
    pub fn parse(f: &[u8; FRAME_LEN]) -> Result<BlockFrame, FrameError> {
        if f[0..4] != BLOCK_MAGIC {
            return Err(FrameError::BadMagic);
        }
        let u32_at = |i: usize| u32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&f[i..i + 8]);
            u64::from_le_bytes(a)
        };
        if crc32fast::hash(&f[..44]) != u32_at(44) {
            return Err(FrameError::BadChecksum);
        }
        let frame = BlockFrame {
            kind: BlockKind::from_byte(f[4]),
            compression: Compression::from_byte(f[5]),
            thread: u32_at(8),
            event_count: u32_at(12),
            first_seq: u64_at(16),
            last_seq: u64_at(24),
            stored_len: u32_at(32),
            raw_len: u32_at(36),
            payload_crc: u32_at(40),
        };
        if frame.raw_len > MAX_RAW_LEN || frame.stored_len > MAX_RAW_LEN + (MAX_RAW_LEN / 255) + 16 {
            return Err(FrameError::Implausible);
        }
        Ok(frame)
    }
}

/// Record tags (SPEC.md §6). Tags below [`FIRST_SIZED_TAG`] have fixed layouts and no
/// length; tags from it up to [`LAST_SIZED_TAG`] are followed by a varint body length,
/// so that a reader skips the kinds it does not know.
pub mod tag {
    pub const ALLOC: u8 = 0x01;
    pub const FREE: u8 = 0x02;
    pub const REALLOC: u8 = 0x03;
    pub const DOMAIN_ALLOC: u8 = 0x04;
    pub const DOMAIN_FREE: u8 = 0x05;
    pub const USAGE: u8 = 0x06;
    pub const CONTEXT_PUSH: u8 = 0x07;
    pub const CONTEXT_POP: u8 = 0x08;
    pub const ATTACH_PUSH: u8 = 0x09;
    pub const ATTACH_POP: u8 = 0x0a;
    pub const TIME: u8 = 0x0b;
    pub const FRAME_START: u8 = 0x0c;
    pub const LABEL: u8 = 0x0d;
    /// `0x80 + i`: a heap free of the `i`-th most recent live allocation of the block.
    pub const FREE_RECENT: u8 = 0x80;
    /// `0x90 + i`: a heap allocation at the `i`-th most recently freed address of the block.
    pub const ALLOC_REUSE: u8 = 0x90;

    pub const DEFINE_STRING: u8 = 0x20;
    pub const DEFINE_STACK: u8 = 0x21;
    pub const DEFINE_CONTEXT_TYPE: u8 = 0x22;
    pub const DEFINE_DOMAIN: u8 = 0x23;
    pub const MODULE: u8 = 0x24;
    pub const THREAD_INFO: u8 = 0x25;
    pub const RESOURCE: u8 = 0x26;
    pub const LOST: u8 = 0x27;
    pub const PROCESS_MEMORY: u8 = 0x28;
    pub const BUDGET: u8 = 0x29;
    pub const DISPLAY: u8 = 0x2a;
    pub const BEFORE_START: u8 = 0x2b;
}
pub const FIRST_SIZED_TAG: u8 = 0x20;
/// Entries of each recent-address list (SPEC.md §6.1).
pub const RECENT: usize = 16;
pub const LAST_SIZED_TAG: u8 = 0x7f;

/// The end-of-log record's payload: totals a reader checks its reading against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndOfLog {
    /// Event blocks written before this record.
    pub blocks: u64,
    /// Events in those blocks.
    pub events: u64,
    /// Events the recorder had to lose (also reported by `Lost` records).
    pub lost_events: u64,
    /// Time of the end, nanoseconds since the start.
    pub end_ns: u64,
}

impl EndOfLog {
    /// The complete end-of-log block: frame and uncompressed payload.
    pub fn to_block_bytes(&self) -> Vec<u8> {
        let mut payload = Vec::with_capacity(32);
        put_u64(&mut payload, self.blocks);
        put_u64(&mut payload, self.events);
        put_u64(&mut payload, self.lost_events);
        put_u64(&mut payload, self.end_ns);
        let frame = BlockFrame {
            kind: BlockKind::End,
            compression: Compression::None,
            thread: METADATA_THREAD,
            event_count: 0,
            first_seq: 0,
            last_seq: 0,
            stored_len: payload.len() as u32,
            raw_len: payload.len() as u32,
            payload_crc: crc32fast::hash(&payload),
        };
        let mut out = frame.to_bytes().to_vec();
        out.extend_from_slice(&payload);
        out
    }

    pub fn parse(payload: &[u8]) -> Result<EndOfLog, BlockError> {
        let mut c = Cursor::new(payload);
        let e = |_| BlockError::Malformed { offset: 0, what: "end-of-log record" };
        Ok(EndOfLog {
            blocks: c.u64().map_err(e)?,
            events: c.u64().map_err(e)?,
            lost_events: c.u64().map_err(e)?,
            end_ns: c.u64().map_err(e)?,
        })
    }
}

/// Why a block's payload could not be decoded. The block is skipped and reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockError {
    /// The stored payload does not match its checksum.
    ChecksumMismatch,
    /// The payload does not decompress to its declared length.
    Decompression,
    /// A compression method this reader does not know.
    UnknownCompression(u8),
    /// A compression method this build of the reader leaves out (a crate feature).
    NotBuiltIn { method: &'static str },
    /// A record could not be parsed at `offset` of the decompressed payload.
    Malformed { offset: usize, what: &'static str },
    /// The block claims more than [`MAX_BLOCK_RAW_LEN`] bytes decompressed.
    TooLarge { raw_len: u32 },
}

impl std::fmt::Display for BlockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlockError::ChecksumMismatch => write!(f, "payload checksum mismatch"),
            BlockError::Decompression => write!(f, "payload does not decompress"),
            BlockError::UnknownCompression(c) => write!(f, "unknown compression method {c}"),
            BlockError::NotBuiltIn { method } => {
                write!(f, "{method} compression, which this build leaves out (memreplay-format's `{method}` feature)")
            }
            BlockError::Malformed { offset, what } => {
                write!(f, "malformed {what} at payload offset {offset}")
            }
            BlockError::TooLarge { raw_len } => {
                write!(f, "claims {raw_len} bytes decompressed, more than the {} a block may hold", MAX_BLOCK_RAW_LEN)
            }
        }
    }
}

impl std::error::Error for BlockError {}

/// Verifies and decompresses a stored payload.
pub fn unpack_payload(frame: &BlockFrame, stored: &[u8]) -> Result<Vec<u8>, BlockError> {
    let mut buf = Vec::new();
    let n = unpack_payload_into(frame, stored, &mut buf)?.len();
    if frame.compression.is_compressed() {
        buf.truncate(n);
        Ok(buf)
    } else {
        Ok(stored.to_vec())
    }
}

/// Verifies and decompresses a stored payload, into `buf` if it is compressed: `buf`
/// keeps its memory from one block to the next, so a reader that decodes many blocks
/// neither allocates nor zeroes a buffer for each. Returns the payload.
pub fn unpack_payload_into<'a>(
    frame: &BlockFrame,
    stored: &'a [u8],
    buf: &'a mut Vec<u8>,
) -> Result<&'a [u8], BlockError> {
    check_stored(frame, stored)?;
    match frame.compression {
        Compression::None => {
            if stored.len() != frame.raw_len as usize {
                return Err(BlockError::Decompression);
            }
            Ok(stored)
        }
        Compression::Lz4
        | Compression::Zstd
        | Compression::Lz4Columns
        | Compression::ZstdColumns
        | Compression::Lz4ColumnsSizeDeltas
        | Compression::ZstdColumnsSizeDeltas => {
            let n = frame.raw_len as usize;
            if buf.len() < n {
                buf.resize(n, 0);
            }
            let raw = &mut buf[..n];
            compress::decompress(frame.compression, stored, raw)?;
            Ok(raw)
        }
        Compression::Unknown(c) => Err(BlockError::UnknownCompression(c)),
    }
}

/// What a block's stored bytes are checked against before they are decompressed: their
/// checksum, and the payload length the frame claims.
fn check_stored(frame: &BlockFrame, stored: &[u8]) -> Result<(), BlockError> {
    if crc32fast::hash(stored) != frame.payload_crc {
        return Err(BlockError::ChecksumMismatch);
    }
    if frame.raw_len > MAX_BLOCK_RAW_LEN {
        return Err(BlockError::TooLarge { raw_len: frame.raw_len });
    }
    // A claim beyond what the stored bytes can expand into cannot decompress, and gets no
    // buffer.
    if frame.compression.is_compressed()
        && frame.raw_len as usize > compress::most_raw_bytes(frame.compression, stored.len())
    {
        return Err(BlockError::Decompression);
    }
    Ok(())
}

/// Decodes a columns block (methods 3 to 6) from its columns, with `decode` (the columns,
/// the claimed payload length), without joining them into its payload first: joining
/// cost a reader as much as decoding (RESULTS §41). `Err(())` for any other method, and
/// wherever [`unpack_payload_into`] or decoding its payload would fail (`decode` says so
/// for the decoding): the caller then goes that way, which says what failed and where.
/// `buf` receives the columns.
pub(crate) fn decode_stored_columns(
    frame: &BlockFrame,
    stored: &[u8],
    buf: &mut Vec<u8>,
    decode: impl FnOnce(ColumnsBlob<'_>, usize) -> Result<(), ()>,
) -> Result<(), ()> {
    let (inner, sizes) = frame.compression.columns().ok_or(())?;
    check_stored(frame, stored).map_err(|_| ())?;
    let raw_len = frame.raw_len as usize;
    let bytes = compress::decompress_columns(inner, stored, raw_len, buf).map_err(|_| ())?;
    decode(ColumnsBlob { bytes, sizes }, raw_len)
}

#[cfg(test)]
mod tests {
    use super::recent::{equal_slots, RecentAddrs};
    use super::*;

    /// xorshift64*: a fixed pseudo-random sequence, the same on every machine.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A recent-address list as SPEC.md §6.1 words it: most recent first, at most 16.
    #[derive(Default)]
    struct SpecList(Vec<u64>);

    impl SpecList {
        fn push(&mut self, a: u64) {
            self.0.insert(0, a);
            self.0.truncate(RECENT);
        }
        fn remove_first(&mut self, a: u64) {
            if let Some(i) = self.0.iter().position(|&x| x == a) {
                self.0.remove(i);
            }
        }
    }

    /// The vectorized comparison agrees with the plain loop, also for entries that share
    /// only their low or only their high 32 bits with the address.
    #[test]
    fn equal_slots_matches_whole_addresses_only() {
        let mut rng = Rng(0x5151_7e7e_0101_abcd);
        for _ in 0..20_000 {
            let addr = rng.next();
            let mut addrs = [0u64; RECENT];
            for a in addrs.iter_mut() {
                *a = match rng.below(4) {
                    0 => addr,
                    1 => (addr & 0xffff_ffff) | (rng.next() << 32),
                    2 => (addr & !0xffff_ffff) | (rng.next() & 0xffff_ffff),
                    _ => rng.next(),
                };
            }
            let plain = addrs.iter().enumerate().fold(0u32, |m, (j, &a)| m | u32::from(a == addr) << (2 * j));
            assert_eq!(equal_slots(&addrs, addr), plain, "{addrs:x?} {addr:#x}");
        }
    }

    #[test]
    fn ring_lists_behave_as_the_spec_lists() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut ring, mut spec) = (RecentAddrs::default(), SpecList::default());
        for step in 0..200_000 {
            // Few distinct addresses, so that the list often holds one twice.
            let a = 0x1000 + rng.below(24) * 16;
            match rng.below(3) {
                0 => {
                    ring.push(a);
                    spec.push(a);
                }
                1 => {
                    ring.remove(a);
                    spec.remove_first(a);
                }
                _ => {
                    if let Some(i) = ring.find(a) {
                        ring.remove_at(i);
                    }
                    spec.remove_first(a);
                }
            }
            assert_eq!(ring.len, spec.0.len(), "step {step}");
            for i in 0..RECENT + 1 {
                assert_eq!(ring.get(i), spec.0.get(i).copied(), "entry {i} at step {step}");
            }
            for k in 0..24 {
                let b = 0x1000 + k * 16;
                assert_eq!(ring.find(b), spec.0.iter().position(|&x| x == b), "find {b:#x} at step {step}");
            }
        }
    }

    /// A deterministic stream that exercises every compact record and both recent-address
    /// lists (hits at every index, duplicates, misses), in blocks of varying length.
    fn churn_stream(rng: &mut Rng, n: usize) -> Vec<Event> {
        let mut seq = 1u64;
        let mut events = Vec::with_capacity(n);
        for i in 0..n {
            seq = seq.wrapping_add(1 + rng.below(3));
            // 48 hot addresses (list hits and misses), and now and then a far one.
            let addr = if rng.below(10) == 0 {
                0x7f00_0000_0000 + rng.below(1 << 30) * 16
            } else {
                0x5555_0000_0000 + rng.below(48) * 64
            };
            let stack = rng.below(300) as u32;
            events.push(match rng.below(100) {
                0..=41 => Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size: rng.below(5000), align_log2: 3, stack },
                42..=83 => Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: stack % 2 },
                84..=88 => {
                    let new_addr = if rng.below(2) == 0 { addr } else { addr + 64 };
                    seq += 1;
                    Event::Realloc {
                        free_seq: seq - 1,
                        seq,
                        old_addr: addr,
                        new_addr,
                        new_size: rng.below(9000),
                        align_log2: 4,
                        stack,
                    }
                }
                89..=90 => Event::Alloc { seq, domain: 2, addr, size: 4096, align_log2: 12, stack },
                91 => Event::Free { seq, domain: 2, addr, stack: 0 },
                92 => Event::Usage { seq, addr, used: rng.below(100) },
                93 => Event::AttachPush { seq, addr },
                94 => Event::AttachPop,
                95 => Event::ContextPush { ty: 1, name: stack, flags: (i % 2) as u8 },
                96 => Event::ContextPop,
                97 => Event::Time { ns: seq * 40 },
                98 => Event::Label { seq, name: 7 },
                _ => Event::DefineString { id: i as u32, text: format!("string {i}") },
            });
            // Now and then a sequence number from the past (another thread's order).
            if rng.below(50) == 0 {
                seq = seq.saturating_sub(rng.below(20));
            }
        }
        events
    }

    /// The record decoder gives, block by block, exactly the events of the event decoder
    /// as records: the same decoder state, only the output differs. Also for a payload
    /// cut short: the records before the error, and the same error.
    #[test]
    fn records_decode_as_the_events_do() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let events = churn_stream(&mut rng, 30_000);
        for chunk in events.chunks(2_500) {
            let mut enc = EventEncoder::new();
            chunk.iter().for_each(|e| enc.push(e));
            let payload = enc.payload().to_vec();
            for cut in [payload.len(), payload.len() * 2 / 3] {
                let p = &payload[..cut];
                let mut expected = crate::record::Records::default();
                let mut expected_err = None;
                for e in decode_events(p) {
                    match e {
                        Ok(e) => expected.push(e),
                        Err(err) => expected_err = Some(err),
                    }
                }
                let mut got = crate::record::Records::default();
                let err = crate::record::decode_records(p, &mut got).err();
                assert_eq!(got.records, expected.records);
                assert_eq!(got.events, expected.events);
                assert_eq!(err, expected_err);
            }
        }
    }

    /// The heap fast paths (`push_heap_alloc`, `push_heap_free`) write exactly what
    /// `push` of the same events writes, recent-address lists and block state included.
    #[test]
    fn heap_fast_paths_encode_as_push_does() {
        let mut rng = Rng(0x0bad_cafe_f00d_1234);
        let events = churn_stream(&mut rng, 40_000);
        for chunk in events.chunks(3_000) {
            let (mut slow, mut fast) = (EventEncoder::new(), EventEncoder::new());
            for e in chunk {
                slow.push(e);
                match *e {
                    Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size, align_log2, stack } => {
                        fast.push_heap_alloc(seq, addr, size, align_log2, stack)
                    }
                    Event::Free { seq, domain: HEAP_DOMAIN, addr, stack } => fast.push_heap_free(seq, addr, stack),
                    _ => fast.push(e),
                }
            }
            assert_eq!(fast.payload(), slow.payload());
            assert_eq!((fast.event_count(), fast.seq_range()), (slow.event_count(), slow.seq_range()));
        }
    }

    /// No compact record is longer than the room the encoder makes for one
    /// (`codec::MAX_COMPACT`): each, with every field at its widest, after a long payload
    /// (so it is written at the end of the room, not inside a buffer grown for others).
    #[test]
    fn the_widest_compact_records_fit_their_room() {
        // From a block's zeroed state, a delta of 2^63 is the widest zig-zag value.
        let (h, m, id) = (1u64 << 63, u64::MAX, u32::MAX);
        let widest = [
            Event::Alloc { seq: h, domain: HEAP_DOMAIN, addr: h, size: m, align_log2: 63, stack: id },
            Event::Alloc { seq: h, domain: id, addr: h, size: m, align_log2: 63, stack: id },
            Event::Free { seq: h, domain: HEAP_DOMAIN, addr: h, stack: id },
            Event::Free { seq: h, domain: id, addr: h, stack: id },
            // Each delta from the one before: 2^63, then 0 - 2^63 = 2^63 again.
            Event::Realloc { free_seq: h, seq: 0, old_addr: h, new_addr: 0, new_size: m, align_log2: 63, stack: id },
            Event::Usage { seq: h, addr: h, used: m },
            Event::ContextPush { ty: id, name: id, flags: 0xff },
            Event::AttachPush { seq: h, addr: h },
            Event::Time { ns: h },
            Event::FrameStart { seq: h, frame: m },
            Event::Label { seq: h, name: id },
        ];
        for e in &widest {
            let mut enc = EventEncoder::new();
            enc.push(e);
            assert!(enc.len() <= codec::MAX_COMPACT, "{e:?}: {} bytes", enc.len());
        }
        // The realloc is the longest: 1 + 4 × 10 + 10 + 5 + 1 bytes.
        let mut enc = EventEncoder::new();
        enc.push(&widest[4]);
        assert_eq!(enc.len(), 57);
    }

    /// The encoded bytes of `churn_stream`, framed and compressed, pinned: their length
    /// and CRC-32 as the encoder wrote them before its recent-address lists became rings
    /// (commit a5313df). Encoding changes that keep the output byte-identical keep this.
    #[test]
    fn encoding_is_byte_identical_to_the_pinned_output() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let events = churn_stream(&mut rng, 60_000);
        let mut enc = EventEncoder::new();
        let mut out = Vec::new();
        let mut raw = Vec::new();
        for (i, e) in events.iter().enumerate() {
            enc.push(e);
            // Blocks of uneven length, so the lists restart at many states.
            if rng.below(3000) == 0 || i + 1 == events.len() {
                raw.extend_from_slice(enc.payload());
                enc.finish_into((i % 5) as u32, &mut out);
            }
        }
        assert_eq!((raw.len(), crc32fast::hash(&raw)), (436_875, 0xd0ff_cf62), "raw payloads");
        assert_eq!((out.len(), crc32fast::hash(&out)), (382_787, 0x7eae_7b0b), "blocks");
    }
}
