//! The memreplay log format (`.mrl`): the one place that knows its bytes.
//!
//! A log is a [header](header::FileHeader) followed by [blocks](block::BlockFrame): framed,
//! checksummed, independently compressed (LZ4, or zstd where the writer chose it) runs of
//! one thread's [events](event::Event), ended by an end-of-log record. `SPEC.md` beside this crate describes every byte; this
//! crate is its reference implementation, used by the recorder to write logs and by the
//! analyzer to read them. Nothing else in the workspace encodes or decodes events.
//!
//! Data flows one way: bytes → [`LogReader`] (frames, damage report) → [`Block::decode`]
//! (events, in parallel if the caller likes) → [`merge_by_seq`] (global order). Readers
//! that go through millions of events decode into compact [`Record`]s instead
//! ([`decode_records`], or [`unpack_records`] from a block's stored bytes, which reads a
//! columns block's fields from their columns), with the same decoder. [`recompress`]
//! stores a log's blocks again with another compression method, keeping everything else
//! as it was.

pub mod block;
pub mod event;
pub mod header;
pub mod ordered;
pub mod reader;
mod recompress;
pub mod record;
pub mod varint;
pub mod writer;

pub use block::{
    BlockError, BlockFrame, BlockKind, Compression, EndOfLog, EventEncoder, PayloadCompression, PayloadCompressor,
    COMPRESSION_VALUES, ZSTD_LEVELS,
};
pub use event::*;
pub use header::{header_flags, FileHeader, MAGIC, VERSION_MAJOR, VERSION_MINOR};
pub use ordered::{merge_by_seq, Part, ThreadEvent};
pub use reader::{Block, Damage, DecodedBlock, Log, LogReader, ReadReport};
pub use recompress::{recompress, RecompressError, Recompressed};
pub use record::{decode_records, unpack_records, Record, RecordKind, Records};
pub use writer::{FramedBlock, LogWriter};

/// Why a log could not be opened at all. Damage past the header is not an error: it is
/// recorded in the [`ReadReport`] and reading goes on.
#[derive(Debug)]
pub enum FormatError {
    /// The file is empty (0 bytes): the recording process wrote nothing at all.
    Empty,
    /// The file does not start with the memreplay magic.
    NotAMemreplayLog,
    /// The log was written by an incompatible (newer or older major) version.
    UnsupportedVersion {
        major: u16,
        minor: u16,
    },
    /// The file ends inside the header.
    TruncatedHeader,
    /// The header fails its checksum or does not parse.
    CorruptHeader(&'static str),
    Io(std::io::Error),
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::Empty => write!(
                f,
                "the log is empty (0 bytes): the recording process wrote nothing, e.g. it was killed before \
                 its recorder started"
            ),
            FormatError::NotAMemreplayLog => {
                write!(f, "not a memreplay log (.mrl): the file does not start with the log magic")
            }
            FormatError::UnsupportedVersion { major, minor } => write!(
                f,
                "log format version {major}.{minor} is not supported: this build reads version {VERSION_MAJOR}.x"
            ),
            FormatError::TruncatedHeader => write!(f, "the log is cut off inside its header"),
            FormatError::CorruptHeader(why) => write!(f, "the log header is corrupt: {why}"),
            FormatError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FormatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FormatError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for FormatError {
    fn from(e: std::io::Error) -> Self {
        FormatError::Io(e)
    }
}
