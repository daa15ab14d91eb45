//! Writes a log: the header, framed event blocks, and the end-of-log record.

use std::io::{self, Write};

use crate::block::{EndOfLog, EventEncoder, MAX_BLOCK_RAW_LEN};
use crate::header::FileHeader;

/// Appends blocks to a log and counts what it wrote.
pub struct LogWriter<W: Write> {
    out: W,
    scratch: Vec<u8>,
    blocks: u64,
    events: u64,
    bytes: u64,
}

impl<W: Write> LogWriter<W> {
    /// Writes the header and returns a writer ready for blocks.
    pub fn new(mut out: W, header: &FileHeader) -> io::Result<Self> {
        let h = header.to_bytes();
        out.write_all(&h)?;
        Ok(LogWriter { out, scratch: Vec::new(), blocks: 0, events: 0, bytes: h.len() as u64 })
    }

    /// Frames, compresses and writes the encoder's events as one block of `thread`, then
    /// clears the encoder. Writes nothing for an empty encoder. Fails (writing nothing and
    /// keeping the encoder) if the payload exceeds [`MAX_BLOCK_RAW_LEN`], which readers reject.
    pub fn write_block(&mut self, thread: u32, events: &mut EventEncoder) -> io::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        if events.len() > MAX_BLOCK_RAW_LEN as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "block payload exceeds MAX_BLOCK_RAW_LEN"));
        }
        self.events += u64::from(events.event_count());
        self.scratch.clear();
        events.finish_into(thread, &mut self.scratch);
        self.out.write_all(&self.scratch)?;
        self.blocks += 1;
        self.bytes += self.scratch.len() as u64;
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
