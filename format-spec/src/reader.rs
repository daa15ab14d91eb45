//! Streaming reader: header, then framed blocks, surviving truncation and corruption.
//!
//! The reader only frames: it validates each block's frame and hands the stored payload
//! out as a [`Block`], which decodes on its own ([`Block::decode`]) so that callers can
//! decode blocks in parallel. Whatever it cannot read (a cut-off tail, bytes skipped to
//! find the next valid frame, a missing end-of-log record) it records in [`ReadReport`].

use std::io::{self, Read, Write};

use crate::block::*;
use crate::event::Event;
use crate::header::FileHeader;
use crate::FormatError;

/// One event block as stored in the file.
#[derive(Debug, Clone)]
pub struct Block {
    /// Byte offset of the block's frame in the file.
    pub offset: u64,
    pub frame: BlockFrame,
    /// The payload as stored (compressed or not).
    pub stored: Vec<u8>,
}

/// A block's events, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedBlock {
    pub offset: u64,
    pub frame: BlockFrame,
    pub events: Vec<Event>,
}

impl Block {
    /// Verifies the checksum, decompresses and decodes every event of the block.
    pub fn decode(&self) -> Result<DecodedBlock, BlockError> {
        self.decode_with(&mut Vec::new())
    }

    /// [`decode`](Self::decode), decompressing into `buf`, which keeps its memory from one
    /// block to the next.
    pub fn decode_with(&self, buf: &mut Vec<u8>) -> Result<DecodedBlock, BlockError> {
        let raw = unpack_payload_into(&self.frame, &self.stored, buf)?;
        // Every event takes at least one byte: a corrupt count must not reserve more.
        let mut events = Vec::with_capacity((self.frame.event_count as usize).min(raw.len()));
        for ev in decode_events(raw) {
            let ev = ev?;
            if !matches!(ev, Event::Unknown { .. }) {
                events.push(ev);
            }
        }
        Ok(DecodedBlock { offset: self.offset, frame: self.frame, events })
    }

    /// Verifies, decompresses and decodes the block's events into `out`, each with the
    /// length of its record in the payload (what `info` sums by record kind): the events
    /// and positions of [`decode_events`] over [`unpack_payload_into`]'s payload, with the
    /// same errors, but a columns block is read straight from its columns, never joined
    /// into its payload (unless it is damaged: then it goes that way, for the error).
    /// Unknown records come as `Event::Unknown`. `buf` keeps its memory from one block to
    /// the next. On an error `out` holds the events before it.
    pub fn decode_with_lengths(&self, buf: &mut Vec<u8>, out: &mut Vec<(Event, u32)>) -> Result<(), BlockError> {
        let (frame, stored) = (&self.frame, &self.stored[..]);
        let mark = out.len();
        if decode_stored_columns(frame, stored, buf, |blob, raw_len| {
            // An event takes at least one byte of payload: a corrupt count reserves no more.
            out.reserve((frame.event_count as usize).min(raw_len));
            decode_columns_with_lengths(blob, raw_len, out)
        })
        .is_ok()
        {
            return Ok(());
        }
        out.truncate(mark);
        let payload = unpack_payload_into(frame, stored, buf)?;
        out.reserve((frame.event_count as usize).min(payload.len()));
        decode_payload_with_lengths(payload, out)
    }
}

/// Something of the file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The file ends inside a block: the last `bytes` bytes were lost (a crash, a copy cut short).
    TruncatedTail { offset: u64, bytes: u64 },
    /// `bytes` bytes without a valid block frame were skipped to reach the next one.
    CorruptRegion { offset: u64, bytes: u64 },
    /// A block's payload failed its checksum or did not decode; its events were skipped.
    BadBlock { offset: u64, thread: u32, events: u32, first_seq: u64, last_seq: u64, error: BlockError },
    /// Bytes after the end-of-log record.
    TrailingBytes { offset: u64, bytes: u64 },
    /// A block of a kind this reader does not know (a newer minor version) was skipped.
    UnknownBlockKind { offset: u64, kind: u8 },
}

impl Damage {
    /// Where in the file the damage starts.
    pub fn offset(&self) -> u64 {
        match *self {
            Damage::TruncatedTail { offset, .. }
            | Damage::CorruptRegion { offset, .. }
            | Damage::BadBlock { offset, .. }
            | Damage::TrailingBytes { offset, .. }
            | Damage::UnknownBlockKind { offset, .. } => offset,
        }
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::TruncatedTail { offset, bytes } => {
                write!(f, "log cut off at byte {offset}: {bytes} bytes of an incomplete block lost")
            }
            Damage::CorruptRegion { offset, bytes } => {
                write!(f, "{bytes} corrupt bytes skipped at byte {offset}")
            }
            Damage::BadBlock { offset, thread, events, first_seq, last_seq, error } => write!(
                f,
                "block at byte {offset} (thread {thread}, {events} events, seq {first_seq}..={last_seq}) skipped: {error}"
            ),
            Damage::TrailingBytes { offset, bytes } => {
                write!(f, "{bytes} bytes after the end-of-log record at byte {offset} ignored")
            }
            Damage::UnknownBlockKind { offset, kind } => {
                write!(f, "block of unknown kind {kind} at byte {offset} skipped")
            }
        }
    }
}

/// What the reader saw of the file as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// The end-of-log record, if the log has one (a log without it is truncated).
    pub end: Option<EndOfLog>,
    /// Event blocks handed out.
    pub blocks: u64,
    /// Bytes read, header included.
    pub bytes: u64,
    pub damage: Vec<Damage>,
}

impl ReadReport {
    /// True when the log ended with its end-of-log record and nothing was damaged.
    pub fn is_clean(&self) -> bool {
        self.end.is_some() && self.damage.is_empty()
    }

    /// Bytes lost to truncation and corruption.
    pub fn bytes_lost(&self) -> u64 {
        self.damage
            .iter()
            .map(|d| match d {
                Damage::TruncatedTail { bytes, .. } | Damage::CorruptRegion { bytes, .. } => *bytes,
                _ => 0,
            })
            .sum()
    }

    /// Events known to be lost in blocks that failed to decode.
    pub fn events_in_bad_blocks(&self) -> u64 {
        self.damage
            .iter()
            .map(|d| match d {
                Damage::BadBlock { events, .. } => u64::from(*events),
                _ => 0,
            })
            .sum()
    }
}

/// Reads a log from any byte stream, one block at a time.
pub struct LogReader<R> {
    src: R,
    buf: Vec<u8>,
    /// Unread data: `buf[start..end]`.
    start: usize,
    end: usize,
    /// File offset of `buf[start]`.
    offset: u64,
    eof: bool,
    done: bool,
    header: FileHeader,
    /// The header as read.
    header_bytes: Vec<u8>,
    report: ReadReport,
}

/// Bytes asked of the source at a time (more when a block needs more). Kept modest: the
/// buffer is zero-filled before each read, which small logs should not pay a MiB for.
const READ_CHUNK: usize = 64 << 10;

impl<R: Read> LogReader<R> {
    /// Reads and checks the header. Fails for a file that is not a memreplay log, a
    /// newer major version, or a header that is cut off or corrupt.
    pub fn new(src: R) -> Result<Self, FormatError> {
        let mut r = LogReader {
            src,
            buf: Vec::new(),
            end: 0,
            start: 0,
            offset: 0,
            eof: false,
            done: false,
            header: empty_header(),
            header_bytes: Vec::new(),
            report: ReadReport::default(),
        };
        r.fill(16)?;
        if r.eof && r.available() == 0 {
            return Err(FormatError::Empty);
        }
        let (header, len) = loop {
            match FileHeader::parse(&r.buf[r.start..r.end]) {
                Err(FormatError::TruncatedHeader) if !r.eof => {
                    let want = r.available() + 4096;
                    r.fill(want)?;
                }
                other => break other?,
            }
        };
        r.header_bytes = r.buf[r.start..r.start + len].to_vec();
        r.consume(len);
        r.header = header;
        Ok(r)
    }

    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The header's bytes, as they are in the file.
    pub fn header_bytes(&self) -> &[u8] {
        &self.header_bytes
    }

    /// What has been read so far, and what could not be.
    pub fn report(&self) -> &ReadReport {
        &self.report
    }

    /// Records a block that failed to decode (callers decode blocks, possibly in parallel).
    pub fn report_bad_block(&mut self, block: &Block, error: BlockError) {
        self.report.damage.push(bad_block(block, error));
    }

    pub fn into_report(self) -> ReadReport {
        self.report
    }

    fn available(&self) -> usize {
        self.end - self.start
    }

    /// Makes at least `n` unread bytes available, unless the source ends first.
    ///
    /// The buffer keeps its size between reads, so each byte of it is zeroed once, not
    /// before every read (indexing a 120 MB log zeroed 120 MB).
    fn fill(&mut self, n: usize) -> io::Result<()> {
        if self.available() >= n || self.eof {
            return Ok(());
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end < n && !self.eof {
            let want = (n - self.end).max(READ_CHUNK);
            if self.buf.len() < self.end + want {
                self.buf.resize(self.end + want, 0);
            }
            let got = loop {
                match self.src.read(&mut self.buf[self.end..]) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    other => break other,
                }
            };
            match got? {
                0 => self.eof = true,
                k => self.end += k,
            }
        }
        Ok(())
    }

    /// Consumes `n` bytes that are not part of an event block handed out, writing them to
    /// `other` ([`next_block_or_write`](Self::next_block_or_write)).
    fn pass<W: Write + ?Sized>(&mut self, n: usize, other: Option<&mut W>) -> io::Result<()> {
        if let Some(other) = other {
            other.write_all(&self.buf[self.start..self.start + n])?;
        }
        self.consume(n);
        Ok(())
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
        self.report.bytes += n as u64;
    }

    /// The next event block, or `None` at the end of the log (clean or not).
    /// I/O errors of the source are returned; damage is recorded in the report.
    pub fn next_block(&mut self) -> io::Result<Option<Block>> {
        self.next::<io::Sink>(true, None)
    }

    /// [`next_block`](Self::next_block), writing to `other` every byte it reads that is
    /// not part of the block it returns, in file order, as it goes: what comes before that
    /// block (bytes skipped as corrupt, a block of an unknown kind, an end-of-log record
    /// that does not parse), or at the end, the rest of the file (the end-of-log record, a
    /// cut-off tail, trailing bytes). Writing those bytes and each block in turn gives the
    /// file again: a tool that rewrites blocks keeps the rest, damage included, as it was,
    /// in no more memory than a block takes, however long the damage. An error of
    /// `other` ends the call, as an error of the source does.
    pub fn next_block_or_write(&mut self, other: &mut dyn Write) -> io::Result<Option<Block>> {
        self.next(true, Some(other))
    }

    /// The offset and frame of the next event block, as [`LogReader::next_block`] but
    /// without copying its payload out: for readers that index a file and read the
    /// payloads later ([`Block::read_stored_at`]).
    pub fn next_frame(&mut self) -> io::Result<Option<(u64, BlockFrame)>> {
        Ok(self.next::<io::Sink>(false, None)?.map(|b| (b.offset, b.frame)))
    }

    /// The next event block, its payload copied out if `payload` (always for the
    /// end-of-log record, which is parsed here).
    fn next<W: Write + ?Sized>(&mut self, payload: bool, mut other: Option<&mut W>) -> io::Result<Option<Block>> {
        let mut corrupt_from: Option<u64> = None;
        loop {
            if self.done {
                return Ok(None);
            }
            self.fill(FRAME_LEN)?;
            if self.available() < FRAME_LEN {
                self.finish_at_eof(corrupt_from, other.as_deref_mut())?;
                return Ok(None);
            }
            let mut fb = [0u8; FRAME_LEN];
            fb.copy_from_slice(&self.buf[self.start..self.start + FRAME_LEN]);
            let frame = match BlockFrame::parse(&fb) {
                Ok(f) => f,
                Err(_) => {
                    corrupt_from.get_or_insert(self.offset);
                    self.skip_to_next_magic(other.as_deref_mut())?;
                    continue;
                }
            };
            let total = FRAME_LEN + frame.stored_len as usize;
            self.fill(total)?;
            if self.available() < total {
                self.finish_at_eof(corrupt_from, other.as_deref_mut())?;
                return Ok(None);
            }
            if let Some(from) = corrupt_from.take() {
                self.report.damage.push(Damage::CorruptRegion { offset: from, bytes: self.offset - from });
            }
            let offset = self.offset;
            let stored = match frame.kind {
                BlockKind::Events if !payload => Vec::new(),
                _ => self.buf[self.start + FRAME_LEN..self.start + total].to_vec(),
            };
            // Any block but an event block goes with the rest of the file (`pass`).
            match frame.kind {
                BlockKind::Events => {
                    self.consume(total);
                    self.report.blocks += 1;
                    return Ok(Some(Block { offset, frame, stored }));
                }
                BlockKind::End => {
                    self.pass(total, other.as_deref_mut())?;
                    let end = unpack_payload(&frame, &stored).and_then(|p| EndOfLog::parse(&p));
                    match end {
                        Ok(end) => {
                            self.report.end = Some(end);
                            self.done = true;
                            self.fill(1)?;
                            let rest = self.trailing_len(other.as_deref_mut())?;
                            if rest > 0 {
                                self.report.damage.push(Damage::TrailingBytes { offset: self.offset, bytes: rest });
                            }
                            return Ok(None);
                        }
                        Err(error) => {
                            let block = Block { offset, frame, stored };
                            self.report.damage.push(bad_block(&block, error));
                        }
                    }
                }
                BlockKind::Unknown(kind) => {
                    self.pass(total, other.as_deref_mut())?;
                    self.report.damage.push(Damage::UnknownBlockKind { offset, kind });
                }
            }
        }
    }

    /// Counts (and discards, or writes to `other`) whatever follows the end-of-log record.
    fn trailing_len<W: Write + ?Sized>(&mut self, mut other: Option<&mut W>) -> io::Result<u64> {
        let mut n = self.available() as u64;
        if let Some(other) = other.as_deref_mut() {
            other.write_all(&self.buf[self.start..self.end])?;
        }
        self.start = self.end;
        if !self.eof {
            n += match other {
                Some(other) => io::copy(&mut self.src, other)?,
                None => io::copy(&mut self.src, &mut io::sink())?,
            };
        }
        Ok(n)
    }

    fn finish_at_eof<W: Write + ?Sized>(&mut self, corrupt_from: Option<u64>, other: Option<&mut W>) -> io::Result<()> {
        self.done = true;
        let rest = self.available() as u64;
        match corrupt_from {
            Some(from) => {
                self.report.damage.push(Damage::CorruptRegion { offset: from, bytes: self.offset - from + rest })
            }
            None if rest > 0 => self.report.damage.push(Damage::TruncatedTail { offset: self.offset, bytes: rest }),
            None => {}
        }
        self.pass(rest as usize, other)
    }

    /// Advances past the current byte to the next occurrence of the block magic
    /// (or to the end of what is available, keeping a possible partial magic).
    fn skip_to_next_magic<W: Write + ?Sized>(&mut self, mut other: Option<&mut W>) -> io::Result<()> {
        self.pass(1, other.as_deref_mut())?;
        loop {
            let window = &self.buf[self.start..self.end];
            if let Some(i) = window.windows(BLOCK_MAGIC.len()).position(|w| w == BLOCK_MAGIC) {
                return self.pass(i, other);
            }
            let keep = BLOCK_MAGIC.len() - 1;
            let skip = window.len().saturating_sub(keep);
            self.pass(skip, other.as_deref_mut())?;
            if self.eof {
                return Ok(());
            }
            let want = self.available() + READ_CHUNK;
            self.fill(want)?;
            if self.eof && self.available() < BLOCK_MAGIC.len() {
                return Ok(());
            }
        }
    }
}

fn empty_header() -> FileHeader {
    FileHeader {
        version_major: 0,
        version_minor: 0,
        flags: 0,
        pointer_width: 0,
        pid: 0,
        start_unix_ns: 0,
        ticks_per_second: 0,
        max_stack_depth: 0,
        os: String::new(),
        arch: String::new(),
        exe_path: String::new(),
        recorder: String::new(),
    }
}

fn bad_block(block: &Block, error: BlockError) -> Damage {
    Damage::BadBlock {
        offset: block.offset,
        thread: block.frame.thread,
        events: block.frame.event_count,
        first_seq: block.frame.first_seq,
        last_seq: block.frame.last_seq,
        error,
    }
}

/// A whole log read into memory: header, decoded blocks in file order, and the report.
#[derive(Debug, Clone)]
pub struct Log {
    pub header: FileHeader,
    pub blocks: Vec<DecodedBlock>,
    pub report: ReadReport,
}

impl Log {
    /// Reads and decodes every block of `src`, skipping and reporting damaged ones.
    pub fn read(src: impl Read) -> Result<Log, FormatError> {
        let mut reader = LogReader::new(src)?;
        let (mut blocks, mut buf) = (Vec::new(), Vec::new());
        while let Some(block) = reader.next_block()? {
            match block.decode_with(&mut buf) {
                Ok(d) => blocks.push(d),
                Err(e) => reader.report_bad_block(&block, e),
            }
        }
        let header = reader.header().clone();
        Ok(Log { header, blocks, report: reader.into_report() })
    }

    /// Reads a log file from disk.
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Log, FormatError> {
        let f = std::fs::File::open(path)?;
        Log::read(io::BufReader::with_capacity(1 << 16, f))
    }

    /// Every event of every block, in file order, with the thread it came from.
    pub fn events(&self) -> impl Iterator<Item = (u32, &Event)> {
        self.blocks.iter().flat_map(|b| b.events.iter().map(move |e| (b.frame.thread, e)))
    }
}

impl Block {
    /// Reads the stored payload of the block whose frame (as indexed by a [`LogReader`]
    /// pass) is at `offset` of `file`: random access for readers that index first.
    pub fn read_at(file: &std::fs::File, offset: u64, frame: BlockFrame) -> io::Result<Block> {
        let mut stored = Vec::new();
        Block::read_stored_at(file, offset, frame, &mut stored)?;
        Ok(Block { offset, frame, stored })
    }

    /// Reads the stored payload of the block at `offset` (whose frame is `frame`) into
    /// `buf`, which keeps its memory from one call to the next.
    pub fn read_stored_at(file: &std::fs::File, offset: u64, frame: BlockFrame, buf: &mut Vec<u8>) -> io::Result<()> {
        buf.resize(frame.stored_len as usize, 0);
        read_exact_at(file, buf, offset + FRAME_LEN as u64)
    }
}

#[cfg(unix)]
fn read_exact_at(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &std::fs::File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}
