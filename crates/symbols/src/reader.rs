//! DWARF sections read from their file on demand, a chunk at a time.
//!
//! Symbolizing reads little of a binary's DWARF: a report resolves tens to thousands of
//! addresses, which fall in a few of its hundreds or thousands of units. So no section is
//! read whole. A [`Reader`] (gimli's reader interface) reads the chunk its position is
//! in when it first needs it: from the file (seek and read, under a lock) or, for a
//! zlib-compressed section, from the LZ4-compressed copy of that chunk made when the
//! file was loaded (a zlib stream cannot be entered in the middle; LZ4 decompresses a
//! chunk in microseconds). Chunks are 8 KiB, 1 KiB in the string sections (a name is
//! tens of bytes, and names are looked up all over them). A chunk is shared by every
//! reader while it lives: while a reader holds it, or while it is among the chunks used
//! last, up to `RECENT_BYTES` per file (parsing a unit reads the same chunks over and
//! over, through readers that come and go, and its names come back unit after unit).
//!
//! A read that fails (the file cut short or unreadable since it was loaded) is
//! `gimli::Error::Io`: the address it was for is left unresolved. Nothing is mapped, so
//! a file truncated meanwhile cannot raise SIGBUS in the program that symbolizes.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use gimli::{Reader as _, ReaderOffsetId, RunTimeEndian};

/// Bytes per chunk, as a power of two: of most sections, and of the string sections.
pub const CHUNK_SHIFT: u32 = 13;
/// See `CHUNK_SHIFT`.
pub const STRING_CHUNK_SHIFT: u32 = 10;
/// Bytes of the chunks used last kept after their last reader dropped them, per file.
const RECENT_BYTES: usize = 512 * 1024;

/// A chunk's bytes. `Box<[u8]>` inside the `Arc`, so that the `Weak` references of
/// `Section::live` do not keep a dropped chunk's bytes allocated.
type Chunk = Arc<Box<[u8]>>;

/// Where a section's bytes are.
enum Origin {
    /// In the file, uncompressed, from this offset.
    File(u64),
    /// Inflated when the file was loaded; each chunk LZ4-compressed (`lz4_flex::block`).
    Packed(Box<[Box<[u8]>]>),
}

struct Section {
    origin: Origin,
    len: usize,
    /// log2 of its chunks' size.
    shift: u32,
    /// Its chunks, by index: the one alive (a dead `Weak` where none), and when it was
    /// last asked for.
    live: Vec<(Weak<Box<[u8]>>, u64)>,
}

/// A chunk kept because it was used lately: its section and index, its bytes, and when
/// it was last asked for as it was queued.
struct Recent {
    section: SectionIndex,
    index: usize,
    chunk: Chunk,
    used: u64,
}

struct Inner {
    file: File,
    sections: Vec<Section>,
    /// Chunks kept after their readers let them go, the one let go next at the front:
    /// the oldest, unless asked for since it was queued (then it is queued again).
    recent: VecDeque<Recent>,
    recent_bytes: usize,
    /// Counts the chunks asked for.
    clock: u64,
}

/// The DWARF sections of one file, read on demand; [`Reader`]s read them.
pub struct DwarfFile {
    inner: Mutex<Inner>,
    endian: RunTimeEndian,
}

impl fmt::Debug for DwarfFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DwarfFile").field("endian", &self.endian).finish_non_exhaustive()
    }
}

/// A section's number in its [`DwarfFile`].
pub type SectionIndex = usize;

impl DwarfFile {
    /// Sections of `file` (each added with `add_*`); `file` is read while lookups go on.
    pub fn new(file: File, endian: RunTimeEndian) -> DwarfFile {
        DwarfFile {
            inner: Mutex::new(Inner { file, sections: Vec::new(), recent: VecDeque::new(), recent_bytes: 0, clock: 0 }),
            endian,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add(&self, origin: Origin, len: usize, shift: u32) -> SectionIndex {
        let mut inner = self.lock();
        inner.sections.push(Section { origin, len, shift, live: vec![(Weak::new(), 0); len.div_ceil(1 << shift)] });
        inner.sections.len() - 1
    }

    /// An empty section (one that is missing).
    pub fn add_empty(&self) -> SectionIndex {
        self.add(Origin::File(0), 0, CHUNK_SHIFT)
    }

    /// `len` bytes at `offset` in the file, read as needed, in chunks of `1 << shift`
    /// bytes.
    pub fn add_file_range(&self, offset: u64, len: usize, shift: u32) -> SectionIndex {
        self.add(Origin::File(offset), len, shift)
    }

    /// A zlib stream of `len` bytes once inflated, read from `stream` now, a chunk of
    /// `1 << shift` bytes at a time, each chunk kept LZ4-compressed. `None` when it does
    /// not inflate to `len` bytes.
    pub fn add_zlib(&self, stream: impl std::io::Read, len: usize, shift: u32) -> Option<SectionIndex> {
        let chunk = 1 << shift;
        let mut z = flate2::read::ZlibDecoder::new(stream);
        let mut buf = vec![0u8; chunk];
        let mut packed = Vec::with_capacity(len.div_ceil(chunk));
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk);
            z.read_exact(&mut buf[..n]).ok()?;
            packed.push(lz4_flex::block::compress(&buf[..n]).into_boxed_slice());
            left -= n;
        }
        Some(self.add(Origin::Packed(packed.into_boxed_slice()), len, shift))
    }

    /// Lets go of the chunks kept only because they were read last (after indexing the
    /// units, which reads a little of every part of the file).
    pub fn forget_recent(&self) {
        let mut inner = self.lock();
        inner.recent.clear();
        inner.recent_bytes = 0;
    }

    /// A reader of the whole of section `section`.
    pub fn reader(self: &Arc<Self>, section: SectionIndex) -> Reader {
        let s = &self.lock().sections[section];
        let (end, shift) = (s.len, s.shift);
        Reader { file: self.clone(), section, endian: self.endian, shift, pos: 0, end, chunk: None }
    }

    /// Chunk `index` of section `section`: the live one, else read.
    fn chunk(&self, section: SectionIndex, index: usize) -> gimli::Result<Chunk> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.clock += 1;
        let now = inner.clock;
        let s = &mut inner.sections[section];
        let slot = s.live.get_mut(index).ok_or(gimli::Error::Io)?;
        slot.1 = now;
        if let Some(c) = slot.0.upgrade() {
            return Ok(c);
        }
        let size = 1usize << s.shift;
        let start = index * size;
        let n = (s.len - start).min(size);
        let bytes: Box<[u8]> = match &s.origin {
            Origin::File(offset) => {
                // Read into fresh capacity: no zeroing first.
                let mut b = Vec::with_capacity(n);
                inner.file.seek(SeekFrom::Start(offset + start as u64)).map_err(|_| gimli::Error::Io)?;
                (&inner.file).take(n as u64).read_to_end(&mut b).map_err(|_| gimli::Error::Io)?;
                if b.len() != n {
                    return Err(gimli::Error::Io);
                }
                b.into_boxed_slice()
            }
            Origin::Packed(chunks) => {
                let b = lz4_flex::block::decompress(&chunks[index], n).map_err(|_| gimli::Error::Io)?;
                if b.len() != n {
                    return Err(gimli::Error::Io);
                }
                b.into_boxed_slice()
            }
        };
        let c = Arc::new(bytes);
        s.live[index].0 = Arc::downgrade(&c);
        inner.recent_bytes += c.len();
        inner.recent.push_back(Recent { section, index, chunk: c.clone(), used: now });
        // Over budget: let go of the chunks at the front, but queue again those asked for
        // since they were queued (each at most once a round: it goes back with its time).
        while inner.recent_bytes > RECENT_BYTES {
            let Some(mut old) = inner.recent.pop_front() else { break };
            let used = inner.sections[old.section].live[old.index].1;
            if used > old.used {
                old.used = used;
                inner.recent.push_back(old);
            } else {
                inner.recent_bytes -= old.chunk.len();
            }
        }
        Ok(c)
    }
}

/// A gimli reader of part of a section of a [`DwarfFile`]: `pos .. end`, with the chunk
/// it last read from.
#[derive(Clone)]
pub struct Reader {
    file: Arc<DwarfFile>,
    section: SectionIndex,
    endian: RunTimeEndian,
    /// log2 of the section's chunk size.
    shift: u32,
    pos: usize,
    end: usize,
    /// The chunk read last: its index and bytes.
    chunk: Option<(usize, Chunk)>,
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reader(section {}, {:#x}..{:#x})", self.section, self.pos, self.end)
    }
}

impl Reader {
    /// The same bytes, holding no chunk: for a reader kept long (a name), so that it
    /// does not keep a chunk alive.
    pub fn detached(mut self) -> Reader {
        self.chunk = None;
        self
    }

    fn eof(&self) -> gimli::Error {
        gimli::Error::UnexpectedEof(self.offset_id())
    }

    /// The chunk with index `index`: the one held, else the file's.
    fn chunk_at(&self, index: usize) -> gimli::Result<Chunk> {
        match &self.chunk {
            Some((i, c)) if *i == index => Ok(c.clone()),
            _ => self.file.chunk(self.section, index),
        }
    }

    /// The bytes from `pos` to the end of its chunk or of the reader, whichever is
    /// first; the chunk is read (and held) if need be. Not empty while `pos < end`.
    fn current(&mut self) -> gimli::Result<&[u8]> {
        let index = self.pos >> self.shift;
        if !matches!(&self.chunk, Some((i, _)) if *i == index) {
            self.chunk = Some((index, self.file.chunk(self.section, index)?));
        }
        let Some((_, c)) = &self.chunk else { return Err(gimli::Error::Io) };
        let base = index << self.shift;
        let stop = (self.end - base).min(c.len());
        Ok(&c[self.pos - base..stop])
    }
}

impl gimli::Reader for Reader {
    type Endian = RunTimeEndian;
    type Offset = usize;

    fn endian(&self) -> RunTimeEndian {
        self.endian
    }

    fn len(&self) -> usize {
        self.end - self.pos
    }

    fn empty(&mut self) {
        self.pos = self.end;
    }

    fn truncate(&mut self, len: usize) -> gimli::Result<()> {
        if self.len() < len {
            return Err(self.eof());
        }
        self.end = self.pos + len;
        Ok(())
    }

    fn offset_from(&self, base: &Self) -> usize {
        debug_assert!(base.section == self.section && base.pos <= self.pos && self.end <= base.end);
        self.pos - base.pos
    }

    fn offset_id(&self) -> ReaderOffsetId {
        // The section in the top bits: an id names a place in one section.
        ReaderOffsetId(((self.section as u64) << 48) | self.pos as u64)
    }

    fn lookup_offset_id(&self, id: ReaderOffsetId) -> Option<usize> {
        let (section, pos) = ((id.0 >> 48) as usize, (id.0 & ((1 << 48) - 1)) as usize);
        (section == self.section && (self.pos..=self.end).contains(&pos)).then(|| pos - self.pos)
    }

    fn find(&self, byte: u8) -> gimli::Result<usize> {
        let mut pos = self.pos;
        while pos < self.end {
            let index = pos >> self.shift;
            let c = self.chunk_at(index)?;
            let base = index << self.shift;
            let stop = (self.end - base).min(c.len());
            if let Some(k) = c[pos - base..stop].iter().position(|&b| b == byte) {
                return Ok(pos + k - self.pos);
            }
            pos = base + stop;
        }
        Err(self.eof())
    }

    fn skip(&mut self, len: usize) -> gimli::Result<()> {
        if self.len() < len {
            return Err(self.eof());
        }
        self.pos += len;
        Ok(())
    }

    fn split(&mut self, len: usize) -> gimli::Result<Self> {
        if self.len() < len {
            return Err(self.eof());
        }
        let mut head = self.clone();
        head.end = self.pos + len;
        self.pos += len;
        Ok(head)
    }

    fn to_slice(&self) -> gimli::Result<Cow<'_, [u8]>> {
        if self.pos == self.end {
            return Ok(Cow::Borrowed(&[]));
        }
        let index = self.pos >> self.shift;
        let base = index << self.shift;
        if let Some((i, c)) = &self.chunk {
            if *i == index && self.end - base <= c.len() {
                return Ok(Cow::Borrowed(&c[self.pos - base..self.end - base]));
            }
        }
        let mut out = vec![0u8; self.len()];
        self.clone().read_slice(&mut out)?;
        Ok(Cow::Owned(out))
    }

    fn to_string(&self) -> gimli::Result<Cow<'_, str>> {
        match self.to_slice()? {
            Cow::Borrowed(b) => std::str::from_utf8(b).map(Cow::Borrowed).map_err(|_| gimli::Error::BadUtf8),
            Cow::Owned(v) => String::from_utf8(v).map(Cow::Owned).map_err(|_| gimli::Error::BadUtf8),
        }
    }

    fn to_string_lossy(&self) -> gimli::Result<Cow<'_, str>> {
        Ok(match self.to_slice()? {
            Cow::Borrowed(b) => String::from_utf8_lossy(b),
            Cow::Owned(v) => Cow::Owned(String::from_utf8_lossy(&v).into_owned()),
        })
    }

    fn read_slice(&mut self, buf: &mut [u8]) -> gimli::Result<()> {
        if self.len() < buf.len() {
            return Err(self.eof());
        }
        let mut done = 0;
        while done < buf.len() {
            let bytes = self.current()?;
            let n = bytes.len().min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&bytes[..n]);
            done += n;
            self.pos += n;
        }
        Ok(())
    }

    fn read_null_terminated_slice(&mut self) -> gimli::Result<Self> {
        // As the default, but the string's reader keeps the chunk it was found in: reading
        // it next (most are names about to be read) needs no lookup.
        if self.pos < self.end {
            self.current()?;
        }
        let len = self.find(0)?;
        let s = self.split(len)?;
        self.skip(1)?;
        Ok(s)
    }

    #[inline]
    fn read_u8(&mut self) -> gimli::Result<u8> {
        // The common case, one byte of the chunk held: without the general path's loop.
        if let Some((i, c)) = &self.chunk {
            if self.pos < self.end && *i == self.pos >> self.shift {
                let b = c[self.pos - (*i << self.shift)];
                self.pos += 1;
                return Ok(b);
            }
        }
        let mut b = [0u8; 1];
        self.read_slice(&mut b)?;
        Ok(b[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// Bytes across several chunks, read through the file and through a packed zlib
    /// copy, in chunks of either size: every read gives the bytes of the slice.
    #[test]
    fn reads_across_chunks_match_the_bytes() {
        let chunk = 1 << CHUNK_SHIFT;
        let data: Vec<u8> = (0..(3 * chunk + 123)).map(|i| (i * 7 % 251) as u8).collect();
        let dir = std::env::temp_dir().join(format!("memreplay-symbols-{}-reader", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bytes");
        let mut f = File::create(&path).unwrap();
        f.write_all(b"head").unwrap();
        f.write_all(&data).unwrap();
        drop(f);
        let file = Arc::new(DwarfFile::new(File::open(&path).unwrap(), RunTimeEndian::Little));
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&data).unwrap();
        let stream = z.finish().unwrap();
        assert!(
            file.add_zlib(&stream[..], data.len() + 1, CHUNK_SHIFT).is_none(),
            "a stream shorter than said is refused"
        );
        let sections = [
            file.add_file_range(4, data.len(), CHUNK_SHIFT),
            file.add_file_range(4, data.len(), STRING_CHUNK_SHIFT),
            file.add_zlib(&stream[..], data.len(), CHUNK_SHIFT).unwrap(),
            file.add_zlib(&stream[..], data.len(), STRING_CHUNK_SHIFT).unwrap(),
        ];
        for section in sections {
            let whole = file.reader(section);
            assert_eq!(whole.len(), data.len());
            assert_eq!(&*whole.to_slice().unwrap(), &data[..]);
            for &(start, len) in &[(0, 10), (chunk - 3, 7), (chunk - 1, 2 * chunk + 5), (3 * chunk, 123), (1000, 100)] {
                let mut r = whole.clone();
                r.skip(start).unwrap();
                let mut part = r.split(len).unwrap();
                assert_eq!(part.offset_from(&whole), start);
                assert_eq!(r.offset_from(&whole), start + len);
                assert_eq!(&*part.to_slice().unwrap(), &data[start..start + len]);
                let mut buf = vec![0u8; len];
                part.clone().read_slice(&mut buf).unwrap();
                assert_eq!(buf, &data[start..start + len]);
                let first = part.read_u8().unwrap();
                assert_eq!(first, data[start]);
                let b = data[start + len - 1];
                let at = data[start + 1..start + len].iter().position(|&x| x == b).unwrap();
                assert_eq!(part.find(b).unwrap(), at);
                let mut string = part.clone();
                let s = string.read_null_terminated_slice();
                match data[start + 1..start + len].iter().position(|&x| x == 0) {
                    Some(z) => assert_eq!(&*s.unwrap().to_slice().unwrap(), &data[start + 1..start + 1 + z]),
                    None => assert!(s.is_err()),
                }
                let id = part.offset_id();
                assert_eq!(whole.lookup_offset_id(id), Some(start + 1));
            }
            let mut end = whole.clone();
            end.skip(data.len() - 1).unwrap();
            assert!(end.clone().read_u16().is_err() && end.read_u8().is_ok());
        }
        // The file cut short after loading: reads fail, they do not panic.
        File::create(&path).unwrap().write_all(b"head").unwrap();
        let fresh = Arc::new(DwarfFile::new(File::open(&path).unwrap(), RunTimeEndian::Little));
        let s = fresh.add_file_range(4, data.len(), CHUNK_SHIFT);
        assert!(matches!(fresh.reader(s).read_u8(), Err(gimli::Error::Io)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Chunks no reader holds are let go beyond `RECENT_BYTES`, the ones asked for
    /// lately last.
    #[test]
    fn chunks_no_reader_holds_are_let_go_beyond_the_budget() {
        let chunk = 1usize << CHUNK_SHIFT;
        let len = 4 * RECENT_BYTES;
        let dir = std::env::temp_dir().join(format!("memreplay-symbols-{}-budget", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bytes");
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let file = Arc::new(DwarfFile::new(File::open(&path).unwrap(), RunTimeEndian::Little));
        let s = file.add_file_range(0, len, CHUNK_SHIFT);
        let whole = file.reader(s);
        let held = {
            let mut r = whole.clone();
            r.skip(5 * chunk).unwrap();
            r.read_u8().unwrap();
            r
        };
        for i in 0..len / chunk {
            let mut r = whole.clone();
            r.skip(i * chunk).unwrap();
            assert_eq!(r.read_u8().unwrap(), 7);
            // The first chunk is asked for again and again: it stays.
            whole.clone().read_u8().unwrap();
        }
        let alive: Vec<usize> = {
            let inner = file.lock();
            (0..len / chunk).filter(|&i| inner.sections[s].live[i].0.strong_count() > 0).collect()
        };
        assert!(alive.len() * chunk <= RECENT_BYTES + chunk, "{} chunks alive", alive.len());
        assert!(alive.contains(&0) && alive.contains(&5) && alive.contains(&(len / chunk - 1)), "{alive:?}");
        assert!(!alive.contains(&(len / chunk / 2)), "{alive:?}");
        drop(held);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
