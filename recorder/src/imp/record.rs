//! The raw in-memory records that threads append to their buffers.
//!
//! These are the recorder's private scratch format, never written to disk: fixed-width
//! little-endian fields, cheap to write on the hot path. The writer thread turns them
//! into `memreplay-format` events (interning names and callstacks on the way).

pub(crate) const ALLOC: u8 = 1;
pub(crate) const FREE: u8 = 2;
pub(crate) const REALLOC: u8 = 3;
pub(crate) const DOMAIN_ALLOC: u8 = 4;
pub(crate) const DOMAIN_FREE: u8 = 5;
pub(crate) const USAGE: u8 = 6;
pub(crate) const CONTEXT_PUSH: u8 = 7;
pub(crate) const CONTEXT_POP: u8 = 8;
pub(crate) const ATTACH_PUSH: u8 = 9;
pub(crate) const ATTACH_POP: u8 = 10;
pub(crate) const TIME: u8 = 11;
pub(crate) const FRAME: u8 = 12;
pub(crate) const LABEL: u8 = 13;
pub(crate) const THREAD_INFO: u8 = 14;
pub(crate) const RESOURCE: u8 = 15;
pub(crate) const BUDGET: u8 = 16;
pub(crate) const DISPLAY: u8 = 17;

/// Longest name (context, label, thread, resource) kept, in bytes; longer ones are cut
/// at a character boundary and end in "…".
pub(crate) const MAX_NAME: usize = 1024;

/// Appends fields at a raw pointer. The caller reserved `cap` bytes there (the longest
/// record it may write) and sizes its records within them; each write checks that in
/// debug builds.
pub(crate) struct RecordWriter {
    pub ptr: *mut u8,
    pub len: usize,
    pub cap: usize,
}

impl RecordWriter {
    /// Where the next `n` bytes go.
    #[inline(always)]
    fn at(&self, n: usize) -> *mut u8 {
        debug_assert!(self.len + n <= self.cap, "record of {} bytes past its {} reserved", self.len + n, self.cap);
        // SAFETY: `len + n <= cap` (checked above in debug builds, guaranteed by the
        // record sizes in release), and the caller reserved `cap` bytes at `ptr`.
        unsafe { self.ptr.add(self.len) }
    }
    #[inline(always)]
    pub fn u8(&mut self, v: u8) {
        // SAFETY: `at` points at one writable byte of the reserved space.
        unsafe { self.at(1).write(v) };
        self.len += 1;
    }
    #[inline(always)]
    pub fn u16(&mut self, v: u16) {
        // SAFETY: `at` points at two writable bytes of the reserved space (unaligned).
        unsafe { (self.at(2) as *mut u16).write_unaligned(v.to_le()) };
        self.len += 2;
    }
    #[inline(always)]
    pub fn u32(&mut self, v: u32) {
        // SAFETY: `at` points at four writable bytes of the reserved space (unaligned).
        unsafe { (self.at(4) as *mut u32).write_unaligned(v.to_le()) };
        self.len += 4;
    }
    #[inline(always)]
    pub fn u64(&mut self, v: u64) {
        // SAFETY: `at` points at eight writable bytes of the reserved space (unaligned).
        unsafe { (self.at(8) as *mut u64).write_unaligned(v.to_le()) };
        self.len += 8;
    }
    /// A u16 length and the bytes of `s`, cut to `MAX_NAME`.
    pub fn name(&mut self, s: &str) {
        let s = cut(s);
        self.u16(s.len() as u16);
        // SAFETY: `at` points at `s.len()` (at most `MAX_NAME`) writable bytes of the
        // reserved space, which `s` cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.at(s.len()), s.len()) };
        self.len += s.len();
    }
    /// A u16 length and `args` formatted in place, cut to `MAX_NAME`.
    pub fn name_fmt(&mut self, args: std::fmt::Arguments<'_>) {
        if let Some(s) = args.as_str() {
            return self.name(s);
        }
        let len_at = self.len;
        self.len += 2;
        let mut w = NameWriter { out: self, written: 0, full: false };
        let _ = std::fmt::write(&mut w, args);
        let (written, full) = (w.written, w.full);
        let mut n = written;
        if full {
            // Mark the cut: replace the tail with "…" on a character boundary.
            const ELLIPSIS: &str = "…";
            let start = self.len - written;
            // SAFETY: the `written` bytes before `len` were just written by `NameWriter`.
            let bytes = unsafe { std::slice::from_raw_parts(self.ptr.add(start), written) };
            let mut keep = written.saturating_sub(ELLIPSIS.len());
            while keep > 0 && (bytes[keep] & 0xC0) == 0x80 {
                keep -= 1;
            }
            debug_assert!(start + keep + ELLIPSIS.len() <= self.cap);
            // SAFETY: `keep + ELLIPSIS.len() <= written`: the ellipsis overwrites bytes of
            // the name just written, inside the reserved space.
            unsafe { std::ptr::copy_nonoverlapping(ELLIPSIS.as_ptr(), self.ptr.add(start + keep), ELLIPSIS.len()) };
            n = keep + ELLIPSIS.len();
            self.len = start + n;
        }
        debug_assert!(len_at + 2 <= self.cap);
        // SAFETY: the two bytes at `len_at` were skipped for this length, inside the
        // reserved space.
        unsafe { (self.ptr.add(len_at) as *mut u16).write_unaligned((n as u16).to_le()) };
    }
}

struct NameWriter<'a> {
    out: &'a mut RecordWriter,
    written: usize,
    full: bool,
}

impl std::fmt::Write for NameWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = MAX_NAME - self.written;
        let mut take = s.len().min(room);
        while take < s.len() && !s.is_char_boundary(take) {
            take -= 1;
        }
        if take < s.len() {
            self.full = true;
        }
        // SAFETY: `at` points at `take` (at most `MAX_NAME` in all) writable bytes of the
        // reserved space, which `s` cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.out.at(take), take) };
        self.out.len += take;
        self.written += take;
        if self.full {
            Err(std::fmt::Error)
        } else {
            Ok(())
        }
    }
}

/// `s` cut to at most `MAX_NAME` bytes at a character boundary.
fn cut(s: &str) -> &str {
    if s.len() <= MAX_NAME {
        return s;
    }
    let mut n = MAX_NAME;
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

/// Space a name field may take.
pub(crate) const NAME_FIELD: usize = 2 + MAX_NAME;

/// Reads fields back (writer thread). Every read is bounds-checked by construction:
/// records are only read from published prefixes the recorder itself wrote.
pub(crate) struct RecordReader<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl<'a> RecordReader<'a> {
    #[inline]
    pub fn u8(&mut self) -> u8 {
        let v = self.bytes[self.pos];
        self.pos += 1;
        v
    }
    #[inline]
    pub fn u16(&mut self) -> u16 {
        let v = u16::from_le_bytes([self.bytes[self.pos], self.bytes[self.pos + 1]]);
        self.pos += 2;
        v
    }
    #[inline]
    pub fn u32(&mut self) -> u32 {
        let mut a = [0u8; 4];
        a.copy_from_slice(&self.bytes[self.pos..self.pos + 4]);
        self.pos += 4;
        u32::from_le_bytes(a)
    }
    #[inline]
    pub fn u64(&mut self) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.bytes[self.pos..self.pos + 8]);
        self.pos += 8;
        u64::from_le_bytes(a)
    }
    pub fn name(&mut self) -> &'a str {
        let n = self.u16() as usize;
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        // Names are written from &str and cut on character boundaries.
        std::str::from_utf8(s).unwrap_or("<invalid utf-8>")
    }
    /// The next `N` bytes, with one bounds check for all of them (the hot records'
    /// fixed fields are read this way).
    #[inline(always)]
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let a = *self.bytes[self.pos..].first_chunk::<N>().expect("a record the recorder wrote is whole");
        self.pos += N;
        a
    }
    /// The next `n` bytes as they are.
    pub fn raw(&mut self, n: usize) -> &'a [u8] {
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_with_an_ellipsis() {
        let mut buf = vec![0u8; NAME_FIELD + 8];
        let mut w = RecordWriter { ptr: buf.as_mut_ptr(), len: 0, cap: buf.len() };
        let long = "é".repeat(800); // 1600 bytes
        w.name_fmt(format_args!("{long}"));
        let mut r = RecordReader { bytes: &buf, pos: 0 };
        let s = r.name();
        assert!(s.len() <= MAX_NAME && s.ends_with('…'), "{}", s.len());
        assert!(s.starts_with("éé"));
        let mut w = RecordWriter { ptr: buf.as_mut_ptr(), len: 0, cap: buf.len() };
        w.name_fmt(format_args!("{}/{}", "Level", 3));
        assert_eq!(RecordReader { bytes: &buf, pos: 0 }.name(), "Level/3");
    }
}
