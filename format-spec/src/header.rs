//! The file header: what a reader learns before the first block (SPEC.md §3).

use crate::varint::{put_str, put_u64, Cursor};
use crate::FormatError;

/// The first eight bytes of every log: a non-ASCII byte, "MRL", CR LF, ^Z, LF, so that
/// text-mode transfers and truncation to 7 bits are detected (the PNG trick).
pub const MAGIC: [u8; 8] = [0x89, b'M', b'R', b'L', b'\r', b'\n', 0x1a, b'\n'];
/// The major version this crate writes and reads. A reader refuses other majors.
pub const VERSION_MAJOR: u16 = 1;
/// The minor version this crate writes. Readers accept any minor of their major.
pub const VERSION_MINOR: u16 = 6;

/// Bits of [`FileHeader::flags`]: what the recorder was asked to record.
pub mod header_flags {
    /// Allocations carry callstacks.
    pub const CALLSTACKS_ON_ALLOC: u32 = 1 << 0;
    /// Frees carry callstacks.
    pub const CALLSTACKS_ON_FREE: u32 = 1 << 1;
    /// Container usage changes were recorded.
    pub const USAGE_CHANGES: u32 = 1 << 2;
}

/// Capture facts written once at the start of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    pub version_major: u16,
    pub version_minor: u16,
    /// See [`header_flags`].
    pub flags: u32,
    /// Size of a pointer in the recorded process, in bytes (4 or 8).
    pub pointer_width: u8,
    pub pid: u64,
    /// Wall-clock time of the recording start, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// Units of `Time` events per second (1 000 000 000: nanoseconds).
    pub ticks_per_second: u64,
    /// Most frames a recorded callstack holds.
    pub max_stack_depth: u32,
    /// Operating system, e.g. "linux".
    pub os: String,
    /// CPU architecture, e.g. "x86_64".
    pub arch: String,
    /// Path of the recorded executable.
    pub exe_path: String,
    /// Name and version of the recorder that wrote the log.
    pub recorder: String,
}

impl FileHeader {
    /// Whether `flag` (from [`header_flags`]) is set.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// The header's bytes: magic, versions, body length, body, CRC-32.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(128);
        body.extend_from_slice(&self.flags.to_le_bytes());
        body.push(self.pointer_width);
        put_u64(&mut body, self.pid);
        put_u64(&mut body, self.start_unix_ns);
        put_u64(&mut body, self.ticks_per_second);
        put_u64(&mut body, u64::from(self.max_stack_depth));
        put_str(&mut body, &self.os);
        put_str(&mut body, &self.arch);
        put_str(&mut body, &self.exe_path);
        put_str(&mut body, &self.recorder);

        let mut out = Vec::with_capacity(body.len() + 20);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.version_major.to_le_bytes());
        out.extend_from_slice(&self.version_minor.to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses a header from the start of `bytes`; returns it and its length in bytes.
    pub fn parse(bytes: &[u8]) -> Result<(FileHeader, usize), FormatError> {
        if bytes.len() < MAGIC.len() {
            // A non-empty start of the magic is a log cut off inside its header.
            return Err(if !bytes.is_empty() && MAGIC.starts_with(bytes) {
                FormatError::TruncatedHeader
            } else {
                FormatError::NotAMemreplayLog
            });
        }
        if bytes[..MAGIC.len()] != MAGIC {
            return Err(FormatError::NotAMemreplayLog);
        }
        let mut c = Cursor::new(bytes);
        c.bytes(MAGIC.len()).map_err(|_| FormatError::TruncatedHeader)?;
        let major = c.fixed_u16().map_err(|_| FormatError::TruncatedHeader)?;
        let minor = c.fixed_u16().map_err(|_| FormatError::TruncatedHeader)?;
        if major != VERSION_MAJOR {
            return Err(FormatError::UnsupportedVersion { major, minor });
        }
        let body_len = c.fixed_u32().map_err(|_| FormatError::TruncatedHeader)? as usize;
        if body_len > MAX_HEADER_BODY {
            return Err(FormatError::CorruptHeader("header body length is implausible"));
        }
        let body = c.bytes(body_len).map_err(|_| FormatError::TruncatedHeader)?;
        let crc_end = c.position();
        let stored_crc = c.fixed_u32().map_err(|_| FormatError::TruncatedHeader)?;
        if crc32fast::hash(&bytes[..crc_end]) != stored_crc {
            return Err(FormatError::CorruptHeader("header checksum mismatch"));
        }
        let bad = |_| FormatError::CorruptHeader("header body is malformed");
        let mut b = Cursor::new(body);
        let header = FileHeader {
            version_major: major,
            version_minor: minor,
            flags: b.fixed_u32().map_err(bad)?,
            pointer_width: b.u8().map_err(bad)?,
            pid: b.u64().map_err(bad)?,
            start_unix_ns: b.u64().map_err(bad)?,
            ticks_per_second: b.u64().map_err(bad)?,
            max_stack_depth: b.u32().map_err(bad)?,
            os: b.string().map_err(bad)?.to_owned(),
            arch: b.string().map_err(bad)?.to_owned(),
            exe_path: b.string().map_err(bad)?.to_owned(),
            recorder: b.string().map_err(bad)?.to_owned(),
        };
        // Bytes left in `body` are fields of a newer minor version: skipped.
        Ok((header, c.position()))
    }
}

/// `header`, the bytes of a whole header (as [`FileHeader::parse`] took them), with its
/// minor version set to `minor` and its checksum made again: every other byte is kept,
/// fields of a newer minor included.
pub fn with_minor(header: &[u8], minor: u16) -> Vec<u8> {
    let mut out = header.to_vec();
    let at = MAGIC.len() + 2;
    out[at..at + 2].copy_from_slice(&minor.to_le_bytes());
    let crc_at = out.len() - 4;
    let crc = crc32fast::hash(&out[..crc_at]);
    out[crc_at..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Largest header body a reader accepts (1 MiB); anything larger is corruption.
pub const MAX_HEADER_BODY: usize = 1 << 20;
