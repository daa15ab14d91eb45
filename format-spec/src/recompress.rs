//! Storing a log again with another compression method, block by block.
//!
//! A recording pays for its compression on the recording machine, where every encoder
//! nanosecond counts; a log kept for later (a CI baseline, an archive) is better small. So a
//! log recorded with the cheap default (LZ4) can be recompressed afterwards, for instance
//! with `zstd-columns`, which stores a real program's log in about 40 % less (SPEC.md
//! §4.2). Only payloads change: each event block keeps its stream, event count and
//! sequence range, and its payload, decompressed, is the same byte for byte (SPEC.md
//! §4.3: blocks are independent). Everything else of the file is copied as it is: the end
//! record, blocks of kinds this reader does not know, and damage (a corrupt region, a
//! block whose payload does not decompress, a cut-off tail), so that readers of the new
//! file find what they found in the old one.

use std::io::{self, Read, Write};

use crate::block::{frame_payload, unpack_payload_into, BlockError, PayloadCompression, PayloadCompressor};
use crate::header::with_minor;
use crate::reader::{Block, Damage, LogReader, ReadReport};
use crate::FormatError;

/// What [`recompress`] did.
#[derive(Debug, Clone, Default)]
pub struct Recompressed {
    /// Event blocks whose payloads were stored again, and their events.
    pub blocks: u64,
    pub events: u64,
    /// Event blocks copied as they were, because their payload does not decompress (each
    /// is also a `BadBlock` in [`Recompressed::report`]).
    pub copied_blocks: u64,
    /// Bytes read and written.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// The method the blocks were stored with (LZ4 for zstd in a build without zstd).
    pub method: PayloadCompression,
    /// The minor version of the log written: the old log's, or the first that has the
    /// method (1.4 for zstd, 1.6 for columns, which may hold sizes as deltas) if that is
    /// later.
    pub version_minor: u16,
    /// What reading the old log found: its damage, now also the new log's.
    pub report: ReadReport,
}

/// Why [`recompress`] stopped.
#[derive(Debug)]
pub enum RecompressError {
    /// The old log cannot be read: not a log, an unsupported version, a damaged header,
    /// or an I/O error.
    Read(FormatError),
    /// The new log cannot be written.
    Write(io::Error),
}

impl std::fmt::Display for RecompressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecompressError::Read(e) => write!(f, "{e}"),
            RecompressError::Write(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RecompressError {}

/// Blocks compressed at once: enough to keep every worker busy, few enough that a batch
/// holds a few MiB (a recorder's block is 64 KiB raw).
const BATCH_PER_WORKER: usize = 16;
/// Bytes a batch may hold (its blocks as stored, and as they will be): a log of large
/// blocks (up to 4 MiB raw each, SPEC.md §4.2) is compressed in smaller batches.
const BATCH_BYTES: usize = 64 << 20;

/// Reads the log `src` and writes it to `out` with every event block's payload stored
/// with `method`, on `workers` threads (at least one). See the module documentation for
/// what is kept. Memory stays flat: a batch of blocks at a time, at most
/// `BATCH_PER_WORKER` per worker and about `BATCH_BYTES` in all; the bytes between
/// blocks (damage, however long, blocks of unknown kinds, the end) go straight through.
pub fn recompress(
    src: impl Read,
    out: impl Write,
    method: PayloadCompression,
    workers: usize,
) -> Result<Recompressed, RecompressError> {
    let mut reader = LogReader::new(src).map_err(RecompressError::Read)?;
    let workers: Vec<Worker> =
        (0..workers.max(1)).map(|_| Worker { compressor: PayloadCompressor::new(method), raw: Vec::new() }).collect();
    let method = workers[0].compressor.method();
    let version_minor = reader.header().version_minor.max(first_minor_with(method));
    let header = with_minor(reader.header_bytes(), version_minor);
    let done = Recompressed { method, version_minor, ..Recompressed::default() };
    let mut w = Output { out, workers, batch: Vec::new(), batch_bytes: 0, bad: Vec::new(), done, failed: None };
    w.write_all(&header).map_err(RecompressError::Write)?;
    loop {
        let block = reader.next_block_or_write(&mut w).map_err(|e| match w.failed.take() {
            // `w` failed: the new log cannot be written.
            Some(e) => RecompressError::Write(e),
            None => RecompressError::Read(FormatError::Io(e)),
        })?;
        let Some(block) = block else { break };
        w.batch_bytes += block.stored.len() + block.frame.raw_len as usize;
        w.batch.push(Piece { block, bytes: Vec::new(), error: None });
        if w.batch.len() == BATCH_PER_WORKER * w.workers.len() || w.batch_bytes >= BATCH_BYTES {
            w.write_batch().map_err(RecompressError::Write)?;
        }
        // The bad blocks of the batches written (here, or by the reader before the bytes
        // between blocks), into the report, which keeps no payload.
        w.bad.drain(..).for_each(|(block, error)| reader.report_bad_block(&block, error));
    }
    w.write_batch().map_err(RecompressError::Write)?;
    w.bad.drain(..).for_each(|(block, error)| reader.report_bad_block(&block, error));
    w.out.flush().map_err(RecompressError::Write)?;
    let mut done = w.done;
    done.report = reader.into_report();
    // In file order, as a reader of the file finds it: a batch's bad blocks are reported
    // when it is written, which may be after the damage that follows them.
    done.report.damage.sort_by_key(Damage::offset);
    // The report counts what it read up to the end record, not what follows it.
    let trailing = done.report.damage.iter().map(|d| match d {
        Damage::TrailingBytes { bytes, .. } => *bytes,
        _ => 0,
    });
    done.bytes_in = done.report.bytes + trailing.sum::<u64>();
    Ok(done)
}

/// The new log as it is written: the blocks read but not yet written (a batch, compressed
/// at once), and `out`. Bytes written to it that are not a block (the header, damage,
/// blocks of unknown kinds, the end) go to `out` after the batch before them.
struct Output<W> {
    out: W,
    workers: Vec<Worker>,
    batch: Vec<Piece>,
    /// The batch's blocks as stored, and as they will be (raw).
    batch_bytes: usize,
    /// Blocks of written batches whose payload does not decompress, not yet reported.
    bad: Vec<(Block, BlockError)>,
    done: Recompressed,
    /// Why writing to `out` failed, while the reader that wrote to it passes the error on.
    failed: Option<io::Error>,
}

impl<W: Write> Output<W> {
    /// Compresses the batch and writes it.
    fn write_batch(&mut self) -> io::Result<()> {
        self.batch_bytes = 0;
        compress_batch(&mut self.batch, &mut self.workers);
        for piece in self.batch.drain(..) {
            self.out.write_all(&piece.bytes)?;
            self.done.bytes_out += piece.bytes.len() as u64;
            match piece.error {
                None => {
                    self.done.blocks += 1;
                    self.done.events += u64::from(piece.block.frame.event_count);
                }
                Some(error) => {
                    self.done.copied_blocks += 1;
                    self.bad.push((piece.block, error));
                }
            }
        }
        Ok(())
    }
}

impl<W: Write> Write for Output<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let wrote = (|| {
            self.write_batch()?;
            self.out.write_all(bytes)
        })();
        match wrote {
            Ok(()) => {
                self.done.bytes_out += bytes.len() as u64;
                Ok(bytes.len())
            }
            Err(e) => {
                let said = io::Error::new(e.kind(), e.to_string());
                self.failed = Some(e);
                Err(said)
            }
        }
    }

    /// Nothing: `recompress` flushes `out` once, at the end.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The first minor version whose readers take blocks stored with `method` (SPEC.md §8).
fn first_minor_with(method: PayloadCompression) -> u16 {
    match method {
        PayloadCompression::Lz4 => 0,
        PayloadCompression::Zstd { .. } => 4,
        // Columns may hold sizes as deltas (methods 5 and 6), which 1.6 added.
        PayloadCompression::Lz4Columns | PayloadCompression::ZstdColumns { .. } => 6,
    }
}

/// An event block of the old log, and what goes in the new one.
struct Piece {
    block: Block,
    /// The block as it is written: framed again, or as it was when its payload does not
    /// decompress (`error`).
    bytes: Vec<u8>,
    error: Option<BlockError>,
}

/// A compressing thread's state, kept from batch to batch (a zstd context is about 1 MiB
/// to make).
struct Worker {
    compressor: PayloadCompressor,
    /// The payload being stored again.
    raw: Vec<u8>,
}

/// Frames every block of `batch` again, the workers taking a share each.
fn compress_batch(batch: &mut [Piece], workers: &mut [Worker]) {
    if batch.is_empty() {
        return;
    }
    let share = batch.len().div_ceil(workers.len());
    if workers.len() == 1 || batch.len() == 1 {
        batch.iter_mut().for_each(|p| workers[0].store(p));
        return;
    }
    std::thread::scope(|s| {
        for (pieces, worker) in batch.chunks_mut(share).zip(workers.iter_mut()) {
            s.spawn(move || pieces.iter_mut().for_each(|p| worker.store(p)));
        }
    });
}

impl Worker {
    /// Stores the block of `piece` with this worker's method, or as it was if its payload
    /// does not decompress.
    fn store(&mut self, piece: &mut Piece) {
        let b = &piece.block;
        match unpack_payload_into(&b.frame, &b.stored, &mut self.raw) {
            Ok(raw) => {
                let seqs = (b.frame.first_seq, b.frame.last_seq);
                frame_payload(b.frame.thread, b.frame.event_count, seqs, raw, &mut self.compressor, &mut piece.bytes);
            }
            Err(error) => {
                piece.bytes.extend_from_slice(&b.frame.to_bytes());
                piece.bytes.extend_from_slice(&b.stored);
                piece.error = Some(error);
            }
        }
    }
}
