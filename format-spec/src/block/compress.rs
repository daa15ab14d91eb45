//! The entropy stage of a block (SPEC.md §4.2): how writers compress a payload and how
//! readers get it back. LZ4 (method 1) is the default; zstd (method 2, format 1.4) is a
//! writer's choice that trades encoder CPU for a smaller log, and so are field columns in
//! front of either (methods 3 and 4, format 1.5; 5 and 6, format 1.6, where the columns
//! hold allocations' sizes as deltas; `columns.rs`). Readers take them all.

use super::columns::{self, Columns, SizeColumn};
use super::{BlockError, Compression};
use crate::varint::{write_u64, Cursor};

/// How a writer compresses block payloads. Readers need no setting: each block's frame
/// says how it is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PayloadCompression {
    /// LZ4's block format (method 1): the fastest to write and to read.
    #[default]
    Lz4,
    /// One zstd frame per block (method 2, format 1.4) at `level` (1 to 19): at level 1
    /// about a third smaller than LZ4 on a real program's log for about 8 ns more per
    /// event on the encoder (benches/RESULTS.md §36). Without the crate's `zstd` feature
    /// (which the recorder turns on when it records) writers use LZ4 instead.
    Zstd { level: i32 },
    /// The payload's fields gathered in columns, then LZ4 (method 3, format 1.5; or 5,
    /// format 1.6, in a block whose allocations' sizes are smaller as deltas from their
    /// callstack's last): a tenth to a quarter smaller than LZ4 alone, for about 18 ns
    /// more per event on the encoder (benches/RESULTS.md §38, §44).
    Lz4Columns,
    /// The payload's fields gathered in columns, then zstd at `level` (method 4, or 6
    /// with sizes as deltas). Without the `zstd` feature writers use
    /// [`PayloadCompression::Lz4Columns`].
    ZstdColumns { level: i32 },
}

impl PayloadCompression {
    /// The zstd level, for the methods that use zstd.
    pub fn zstd_level(self) -> Option<i32> {
        match self {
            PayloadCompression::Zstd { level } | PayloadCompression::ZstdColumns { level } => Some(level),
            PayloadCompression::Lz4 | PayloadCompression::Lz4Columns => None,
        }
    }

    /// Whether the payload's fields go into columns before the entropy stage.
    pub fn columns(self) -> bool {
        matches!(self, PayloadCompression::Lz4Columns | PayloadCompression::ZstdColumns { .. })
    }

    /// The method an option value names (the recorder's `compression=`, `replay-cli
    /// record --compression`): `lz4`, `zstd`, `zstd:LEVEL`, `lz4-columns`,
    /// `zstd-columns` or `zstd-columns:LEVEL` (zstd without a level: level 1); `None`
    /// for anything else ([`COMPRESSION_VALUES`] says what is accepted).
    pub fn from_option(value: &str) -> Option<Self> {
        let (name, level) = match value.split_once(':') {
            Some((name, level)) => (name, Some(level.parse().ok().filter(|l| ZSTD_LEVELS.contains(l))?)),
            None => (value, None),
        };
        Some(match (name, level) {
            ("lz4", None) => PayloadCompression::Lz4,
            ("lz4-columns", None) => PayloadCompression::Lz4Columns,
            ("zstd", level) => PayloadCompression::Zstd { level: level.unwrap_or(1) },
            ("zstd-columns", level) => PayloadCompression::ZstdColumns { level: level.unwrap_or(1) },
            _ => return None,
        })
    }
}

impl std::fmt::Display for PayloadCompression {
    /// The option value that names the method, as [`PayloadCompression::from_option`]
    /// reads it (zstd with its level: `zstd:1`, `zstd-columns:3`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PayloadCompression::Lz4 => f.write_str("lz4"),
            PayloadCompression::Lz4Columns => f.write_str("lz4-columns"),
            PayloadCompression::Zstd { level } => write!(f, "zstd:{level}"),
            PayloadCompression::ZstdColumns { level } => write!(f, "zstd-columns:{level}"),
        }
    }
}

/// What [`PayloadCompression::from_option`] accepts, for error messages.
pub const COMPRESSION_VALUES: &str =
    "lz4, zstd, zstd:LEVEL, lz4-columns, zstd-columns or zstd-columns:LEVEL (a level from 1 to 19)";

/// zstd levels a writer may ask for: 1 (the fast end; the negative levels measured no
/// smaller than LZ4 on random-sized logs) to 19 (the slowest without long-window modes).
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=19;

/// How many bytes columns may exceed their payload by (SPEC.md §4.2): their seven
/// lengths, at most 10 bytes each.
pub(super) const MAX_COLUMN_LENGTHS: usize = 70;

/// A zstd frame regenerates at most 128 KiB per block of at least 4 bytes (a 3-byte block
/// header and one byte of content): a payload that claims more than this many bytes per
/// stored byte cannot decompress, and gets no buffer.
pub const ZSTD_MAX_EXPANSION: usize = 32_768;

/// A writer's compression state: the method, and for zstd its context, made at the first
/// block and reused for every later one (making one allocates about 1 MiB).
#[derive(Default)]
pub struct PayloadCompressor {
    method: PayloadCompression,
    #[cfg(feature = "zstd")]
    zstd: Option<zstd::bulk::Compressor<'static>>,
    /// The columns of the block being compressed, and them joined (columns methods
    /// only; kept from block to block).
    columns: Box<Columns>,
    blob: Vec<u8>,
}

impl std::fmt::Debug for PayloadCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadCompressor").field("method", &self.method).finish_non_exhaustive()
    }
}

impl PayloadCompressor {
    /// A compressor for `method`: LZ4 for zstd when the `zstd` feature is off.
    pub fn new(method: PayloadCompression) -> Self {
        let method = match method {
            PayloadCompression::Zstd { .. } if !cfg!(feature = "zstd") => PayloadCompression::Lz4,
            PayloadCompression::ZstdColumns { .. } if !cfg!(feature = "zstd") => PayloadCompression::Lz4Columns,
            m => m,
        };
        PayloadCompressor {
            method,
            #[cfg(feature = "zstd")]
            zstd: None,
            columns: Box::default(),
            blob: Vec::new(),
        }
    }

    /// The method it writes with.
    pub fn method(&self) -> PayloadCompression {
        self.method
    }

    /// Compresses `raw` into `out` (which the caller sizes to [`room`](Self::room)) and
    /// returns the method and the stored length, or `None` when the result would not be
    /// strictly smaller than `raw` (SPEC.md §4.2: then the block is stored). With columns,
    /// a payload that does not split (none that a writer encodes) or whose columns exceed
    /// it by more than their lengths' bytes (unaligned addresses, each a bit longer in
    /// columns) is compressed as it is, with the same entropy stage.
    pub(super) fn compress(&mut self, raw: &[u8], out: &mut [u8]) -> Option<(Compression, usize)> {
        // How the columns hold the sizes, where the payload goes into columns.
        let sizes = if self.method.columns() {
            self.blob.clear();
            columns::split(raw, &mut self.blob, &mut self.columns)
                .filter(|_| self.blob.len() <= raw.len() + MAX_COLUMN_LENGTHS)
        } else {
            None
        };
        let Some(sizes) = sizes else {
            let n = self.entropy(raw, out, raw.len())?;
            let method = if self.method.zstd_level().is_some() { Compression::Zstd } else { Compression::Lz4 };
            return Some((method, n));
        };
        // The columns' length, then the columns compressed.
        let head = write_u64(out, self.blob.len() as u64);
        let blob = std::mem::take(&mut self.blob);
        let n = self.entropy(&blob, &mut out[head..], raw.len().checked_sub(head)?);
        self.blob = blob;
        let method = match (self.method.zstd_level().is_some(), sizes) {
            (false, SizeColumn::AsTheyAre) => Compression::Lz4Columns,
            (true, SizeColumn::AsTheyAre) => Compression::ZstdColumns,
            (false, SizeColumn::StackDeltas) => Compression::Lz4ColumnsSizeDeltas,
            (true, SizeColumn::StackDeltas) => Compression::ZstdColumnsSizeDeltas,
        };
        Some((method, head + n?))
    }

    /// The entropy stage of `input` into `out`: its length, if under `limit`.
    fn entropy(&mut self, input: &[u8], out: &mut [u8], limit: usize) -> Option<usize> {
        match self.method.zstd_level() {
            None => {
                let n = lz4_flex::block::compress_into(input, out).ok()?;
                (n < limit).then_some(n)
            }
            #[cfg(not(feature = "zstd"))]
            Some(_) => unreachable!("`new` chose LZ4"),
            #[cfg(feature = "zstd")]
            Some(level) => {
                let cx = match &mut self.zstd {
                    Some(cx) => cx,
                    None => {
                        let mut cx = zstd::bulk::Compressor::new(level).ok()?;
                        // The frame's CRC-32 covers the stored bytes; zstd's own checksum
                        // would be four more bytes a block.
                        cx.include_checksum(false).ok()?;
                        self.zstd.insert(cx)
                    }
                };
                // Offered one byte less than the limit, zstd fails rather than write a
                // result that is no smaller.
                let room = limit.checked_sub(1)?.min(out.len());
                cx.compress_to_buffer(input, &mut out[..room]).ok()
            }
        }
    }

    /// Bytes `compress` may write for a payload of `raw_len` bytes (columns are at most
    /// `raw_len + MAX_COLUMN_LENGTHS` bytes, or not used; the result is no longer than
    /// the payload, or not used either).
    pub(super) fn room(&self, raw_len: usize) -> usize {
        let (head, input) = if self.method.columns() { (10, raw_len + MAX_COLUMN_LENGTHS) } else { (0, raw_len) };
        match self.method.zstd_level() {
            None => head + lz4_flex::block::get_maximum_output_size(input),
            Some(_) => head + raw_len,
        }
    }
}

/// The most bytes `stored` bytes of a compressed method can decompress to: LZ4 writes at
/// most 255 bytes per stored byte (a match length's extension bytes), zstd
/// [`ZSTD_MAX_EXPANSION`].
///
/// Columns join into at most twice their bytes (an address delta grows by at most one
/// byte from its column form, which takes at least one), or ten times where they hold
/// sizes as deltas (a one-byte delta may stand for a ten-byte size).
pub(super) fn most_raw_bytes(method: Compression, stored: usize) -> usize {
    match method {
        Compression::Lz4 => stored.saturating_mul(255).saturating_add(16),
        Compression::Zstd => stored.saturating_mul(ZSTD_MAX_EXPANSION),
        Compression::None | Compression::Unknown(_) => stored,
        columns => {
            let (inner, sizes) = columns.columns().expect("every other method is a columns one");
            let growth = match sizes {
                SizeColumn::AsTheyAre => 2,
                SizeColumn::StackDeltas => 10,
            };
            most_raw_bytes(inner, stored).saturating_mul(growth)
        }
    }
}

/// Decompresses `stored`, compressed by `method` (LZ4 or zstd), into exactly `raw`.
pub(super) fn decompress(method: Compression, stored: &[u8], raw: &mut [u8]) -> Result<(), BlockError> {
    match method {
        Compression::Lz4 => match lz4_flex::block::decompress_into(stored, raw) {
            Ok(got) if got == raw.len() => Ok(()),
            _ => Err(BlockError::Decompression),
        },
        Compression::Zstd => unzstd(stored, raw),
        Compression::None | Compression::Unknown(_) => unreachable!("not a compressed method: {method:?}"),
        columns => {
            let (inner, sizes) = columns.columns().expect("every other method is a columns one");
            uncolumn(inner, sizes, stored, raw)
        }
    }
}

/// Decompresses columns (`inner`-compressed, their length in front) that hold the sizes
/// as `sizes`, and joins them into exactly `raw`.
fn uncolumn(inner: Compression, sizes: SizeColumn, stored: &[u8], raw: &mut [u8]) -> Result<(), BlockError> {
    use std::cell::RefCell;
    thread_local! {
        // The columns of the block being read: one buffer per reading thread.
        static BLOB: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    BLOB.with(|cell| {
        let mut buf = cell.borrow_mut();
        let blob = decompress_columns(inner, stored, raw.len(), &mut buf)?;
        columns::join(blob, sizes, raw).map_err(|_| BlockError::Decompression)
    })
}

/// Decompresses the columns of a payload of `raw_len` bytes (`inner`-compressed, their
/// length in front) into `buf`, and returns them. The columns are at most
/// `MAX_COLUMN_LENGTHS` bytes longer than the payload (SPEC.md §4.2).
pub(super) fn decompress_columns<'b>(
    inner: Compression,
    stored: &[u8],
    raw_len: usize,
    buf: &'b mut Vec<u8>,
) -> Result<&'b [u8], BlockError> {
    let mut c = Cursor::new(stored);
    let len = c.u64().map_err(|_| BlockError::Decompression)?;
    let stored = &stored[c.position()..];
    let len = usize::try_from(len).map_err(|_| BlockError::Decompression)?;
    if len > raw_len + MAX_COLUMN_LENGTHS || len > most_raw_bytes(inner, stored.len()) {
        return Err(BlockError::Decompression);
    }
    if buf.len() < len {
        buf.resize(len, 0);
    }
    let blob = &mut buf[..len];
    decompress(inner, stored, blob)?;
    Ok(blob)
}

/// Decompresses one zstd frame, the whole of `stored`, into `raw` (exactly its length).
#[cfg(feature = "zstd")]
fn unzstd(stored: &[u8], raw: &mut [u8]) -> Result<(), BlockError> {
    use std::cell::RefCell;
    thread_local! {
        // A decompression context holds about 160 KiB of tables: one per reading thread,
        // not one per block.
        static DCTX: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    }
    // One frame and nothing after it: zstd would go on to decode frames that follow.
    if zstd::zstd_safe::find_frame_compressed_size(stored) != Ok(stored.len()) {
        return Err(BlockError::Decompression);
    }
    DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = match &mut *slot {
            Some(d) => d,
            None => slot.insert(zstd::bulk::Decompressor::new().map_err(|_| BlockError::Decompression)?),
        };
        match dctx.decompress_to_buffer(stored, raw) {
            Ok(n) if n == raw.len() => Ok(()),
            _ => Err(BlockError::Decompression),
        }
    })
}

/// Without the `zstd` feature a zstd block is one this reader cannot open.
#[cfg(not(feature = "zstd"))]
fn unzstd(_stored: &[u8], _raw: &mut [u8]) -> Result<(), BlockError> {
    Err(BlockError::NotBuiltIn { method: "zstd" })
}

#[cfg(test)]
mod tests {
    use super::super::*;

    /// With the `zstd` feature a writer asked for zstd writes zstd blocks; without it, LZ4
    /// blocks, and a reader says it cannot open a zstd block rather than misread it.
    #[test]
    fn zstd_is_written_and_read_only_where_it_is_built() {
        let mut enc = EventEncoder::new();
        for i in 0..500u64 {
            enc.push(&Event::Free { seq: i, domain: 0, addr: 0x1000 + 16 * i, stack: 0 });
        }
        let mut c = PayloadCompressor::new(PayloadCompression::Zstd { level: 1 });
        let mut out = Vec::new();
        enc.finish_compressed(1, &mut c, &mut out);
        let frame = BlockFrame::parse(out[..FRAME_LEN].try_into().unwrap()).unwrap();
        let stored = &out[FRAME_LEN..];
        if cfg!(feature = "zstd") {
            assert_eq!((c.method(), frame.compression), (PayloadCompression::Zstd { level: 1 }, Compression::Zstd));
            assert_eq!(unpack_payload(&frame, stored).unwrap().len(), frame.raw_len as usize);
        } else {
            assert_eq!((c.method(), frame.compression), (PayloadCompression::Lz4, Compression::Lz4));
            let zstd = BlockFrame { compression: Compression::Zstd, ..frame };
            assert_eq!(unpack_payload(&zstd, stored), Err(BlockError::NotBuiltIn { method: "zstd" }));
        }
        // zstd after columns: LZ4 after columns without the feature.
        let columns = PayloadCompressor::new(PayloadCompression::ZstdColumns { level: 1 }).method();
        let expected = if cfg!(feature = "zstd") {
            PayloadCompression::ZstdColumns { level: 1 }
        } else {
            PayloadCompression::Lz4Columns
        };
        assert_eq!(columns, expected);
    }

    #[test]
    fn option_values_name_every_method_and_nothing_else() {
        use PayloadCompression as P;
        let cases = [
            ("lz4", Some(P::Lz4)),
            ("zstd", Some(P::Zstd { level: 1 })),
            ("zstd:19", Some(P::Zstd { level: 19 })),
            ("lz4-columns", Some(P::Lz4Columns)),
            ("zstd-columns", Some(P::ZstdColumns { level: 1 })),
            ("zstd-columns:7", Some(P::ZstdColumns { level: 7 })),
            ("zstd:0", None),
            ("zstd-columns:20", None),
            ("lz4:1", None),
            ("lz4-columns:1", None),
            ("columns", None),
            ("", None),
        ];
        for (value, method) in cases {
            assert_eq!(PayloadCompression::from_option(value), method, "{value}");
            if let Some(m) = method {
                assert_eq!(PayloadCompression::from_option(&m.to_string()), Some(m), "{m}");
            }
        }
        let (low, high) = (ZSTD_LEVELS.start(), ZSTD_LEVELS.end());
        assert!(COMPRESSION_VALUES.ends_with(&format!("(a level from {low} to {high})")));
    }
}
