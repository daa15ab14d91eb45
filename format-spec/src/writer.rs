//! Writes a log: the header, framed event blocks, and the end-of-log record.

use std::io::{self, Write};

use crate::block::{EndOfLog, EventEncoder, PayloadCompression, PayloadCompressor, MAX_BLOCK_RAW_LEN};
use crate::header::FileHeader;

/// One block framed and compressed away from the file, on any thread, for
/// [`LogWriter::write_framed`]: recorders that encode several streams at once build
/// their blocks in parallel and write them one after another.
#[derive(Debug, Default)]
pub struct FramedBlock {
    bytes: Vec<u8>,
    events: u32,
    compressor: PayloadCompressor,
}

impl FramedBlock {
    /// Frames blocks compressed with LZ4.
    pub fn new() -> Self {
        Self::default()
    }

    /// Frames blocks compressed with `method` (SPEC.md §4.2).
    pub fn compressed_with(method: PayloadCompression) -> Self {
        FramedBlock { compressor: PayloadCompressor::new(method), ..Self::default() }
    }

    /// Frames and compresses the encoder's events as one block of `thread`, replacing
    /// what this held, and clears the encoder. An empty encoder gives an empty block
    /// (which writes nothing). Fails (keeping the encoder, leaving this empty) if the
    /// payload exceeds [`MAX_BLOCK_RAW_LEN`], which readers reject.
    pub fn frame(&mut self, thread: u32, events: &mut EventEncoder) -> io::Result<()> {
        self.bytes.clear();
        self.events = 0;
        if events.is_empty() {
            return Ok(());
        }
        if events.len() > MAX_BLOCK_RAW_LEN as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "block payload exceeds MAX_BLOCK_RAW_LEN"));
        }
        self.events = events.event_count();
        events.finish_compressed(thread, &mut self.compressor, &mut self.bytes);
        Ok(())
    }

    /// Whether it holds no block.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Events in the block.
    pub fn event_count(&self) -> u32 {
        self.events
    }

    /// Bytes of the block in the file (frame and stored payload).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
}

/// Appends blocks to a log and counts what it wrote.
pub struct LogWriter<W: Write> {
    out: W,
    scratch: FramedBlock,
    blocks: u64,
    events: u64,
    bytes: u64,
}

impl<W: Write> LogWriter<W> {
    /// Writes the header and returns a writer ready for blocks, which it compresses
    /// with LZ4.
    pub fn new(out: W, header: &FileHeader) -> io::Result<Self> {
        Self::compressed_with(out, header, PayloadCompression::Lz4)
    }

    /// [`new`](Self::new), compressing the blocks that [`write_block`](Self::write_block)
    /// frames with `method`.
    pub fn compressed_with(mut out: W, header: &FileHeader, method: PayloadCompression) -> io::Result<Self> {
        let h = header.to_bytes();
        out.write_all(&h)?;
        let scratch = FramedBlock::compressed_with(method);
        Ok(LogWriter { out, scratch, blocks: 0, events: 0, bytes: h.len() as u64 })
    }

    /// Frames, compresses and writes the encoder's events as one block of `thread`, then
    /// clears the encoder. Writes nothing for an empty encoder. Fails (writing nothing and
    /// keeping the encoder) if the payload exceeds [`MAX_BLOCK_RAW_LEN`], which readers reject.
    pub fn write_block(&mut self, thread: u32, events: &mut EventEncoder) -> io::Result<()> {
        let mut block = std::mem::take(&mut self.scratch);
        let written = block.frame(thread, events).and_then(|()| self.write_framed(&block));
        self.scratch = block;
        written
    }

    /// Writes a block framed by [`FramedBlock::frame`] (nothing for an empty one).
    /// A stream's blocks must be written in stream order (SPEC.md §4.4).
    pub fn write_framed(&mut self, block: &FramedBlock) -> io::Result<()> {
        if block.is_empty() {
            return Ok(());
        }
        self.events += u64::from(block.events);
        self.out.write_all(&block.bytes)?;
        self.blocks += 1;
        self.bytes += block.bytes.len() as u64;
        Ok(())
    }

    /// Event blocks written so far.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Bytes written so far, header included.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes the underlying writer (each flush bounds what a crash can lose).
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// The underlying writer, without an end record (a log given up after a failed write).
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Writes the end-of-log record and returns the underlying writer and the record.
    pub fn finish(mut self, lost_events: u64, end_ns: u64) -> io::Result<(W, EndOfLog)> {
        let end = EndOfLog { blocks: self.blocks, events: self.events, lost_events, end_ns };
        let b = end.to_block_bytes();
        self.out.write_all(&b)?;
        self.out.flush()?;
        Ok((self.out, end))
    }
}
