//! The entropy stage of a block (SPEC.md §4.2): how writers compress a payload and how
//! readers get it back. LZ4 (method 1) is the default; zstd (method 2, format 1.4) is a
//! writer's choice that trades encoder CPU for a smaller log. Readers take both.

use super::{BlockError, Compression};

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
}

/// zstd levels a writer may ask for: 1 (the fast end; the negative levels measured no
/// smaller than LZ4 on random-sized logs) to 19 (the slowest without long-window modes).
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=19;

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
            m => m,
        };
        PayloadCompressor {
            method,
            #[cfg(feature = "zstd")]
            zstd: None,
        }
    }

    /// The method it writes with.
    pub fn method(&self) -> PayloadCompression {
        self.method
    }

    /// Compresses `raw` into `out` (which the caller sizes to at least `raw.len() - 1`
    /// bytes) and returns the method and the stored length, or `None` when the result
    /// would not be strictly smaller than `raw` (SPEC.md §4.2: then the block is stored).
    pub(super) fn compress(&mut self, raw: &[u8], out: &mut [u8]) -> Option<(Compression, usize)> {
        match self.method {
            PayloadCompression::Lz4 => {
                let n = lz4_flex::block::compress_into(raw, out).ok()?;
                (n < raw.len()).then_some((Compression::Lz4, n))
            }
            #[cfg(not(feature = "zstd"))]
            PayloadCompression::Zstd { .. } => unreachable!("`new` chose LZ4"),
            #[cfg(feature = "zstd")]
            PayloadCompression::Zstd { level } => {
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
                // Offered one byte less than the payload, zstd fails rather than write a
                // result that is no smaller.
                let room = raw.len().checked_sub(1)?;
                let n = cx.compress_to_buffer(raw, &mut out[..room]).ok()?;
                Some((Compression::Zstd, n))
            }
        }
    }

    /// Bytes `compress` may write for a payload of `raw_len` bytes.
    pub(super) fn room(&self, raw_len: usize) -> usize {
        match self.method {
            PayloadCompression::Lz4 => lz4_flex::block::get_maximum_output_size(raw_len),
            PayloadCompression::Zstd { .. } => raw_len,
        }
    }
}

/// The most bytes `stored` bytes of a compressed method can decompress to: LZ4 writes at
/// most 255 bytes per stored byte (a match length's extension bytes), zstd
/// [`ZSTD_MAX_EXPANSION`].
pub(super) fn most_raw_bytes(method: Compression, stored: usize) -> usize {
    match method {
        Compression::Lz4 => stored.saturating_mul(255).saturating_add(16),
        Compression::Zstd => stored.saturating_mul(ZSTD_MAX_EXPANSION),
        Compression::None | Compression::Unknown(_) => stored,
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
    }
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
    }
}
