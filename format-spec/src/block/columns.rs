//! Field columns (SPEC.md §4.2, methods 3 and 4, format 1.5): a block's payload with each
//! kind of field gathered in a column of its own before the entropy stage, so that the
//! entropy coder sees runs of alike values (tags with tags, addresses with addresses)
//! instead of records whose fields differ byte by byte. On a real program's log and on a
//! random churn's this stores a tenth to a quarter less than the same entropy stage over
//! the payload as it is (benches/RESULTS.md §38).
//!
//! Every field keeps its bytes but the address deltas, whose low four bits, zero for
//! every 16-byte-aligned block, are dropped where they are zero (`address_column`). The
//! payload's records say which column each field is in: the tags column is read first,
//! and each tag names its fields (§6.2, §6.3). [`join`] gives back the payload byte for
//! byte; [`split`] takes only payloads whose address deltas are shortest varints, as
//! writers write them, and a writer stores any other with the entropy stage alone.

use super::fields::Fields;
use super::recent::HeapSide;
use crate::varint::{
    encoded_len, len_in_word, pack_word, put_u64, unpack_word, unzigzag, write_u64, zigzag, Cursor, CursorError,
};

/// The columns, in the order they are stored.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
enum Col {
    /// One byte per record: its tag.
    Tags,
    /// Sequence numbers (`seq` fields).
    Seqs,
    /// Addresses of heap and domain allocations, usage changes and attaches.
    AllocAddrs,
    /// Addresses of frees (and a realloc's old block).
    FreeAddrs,
    /// Sizes (`size`, `new_size`, `used`).
    Sizes,
    /// Callstack ids.
    Stacks,
    /// `align_log2` bytes.
    Aligns,
    /// Everything else: domains, context fields, times, frame numbers, label names, and
    /// sized records' lengths and bodies.
    Other,
}

/// Number of columns: 8, so that a column's number fits a field code's three bits.
pub(super) const COLS: usize = Col::Other as usize + 1;
const _: () = assert!(COLS == 8);

/// A field of a compact record: a varint in a column, or one byte.
#[derive(Clone, Copy)]
enum Field {
    Varint(Col),
    Byte(Col),
}

use Col::*;
use Field::{Byte, Varint};

const SEQ: Field = Varint(Seqs);
const ALLOC_ADDR: Field = Varint(AllocAddrs);
const FREE_ADDR: Field = Varint(FreeAddrs);
const SIZE: Field = Varint(Sizes);
const STACK: Field = Varint(Stacks);
const ALIGN: Field = Byte(Aligns);
const OTHER: Field = Varint(Other);

/// The fields of the compact record with tag `tag`, in payload order (SPEC.md §6.2);
/// `None` for a sized record's tag or an invalid one.
const fn compact_fields(tag: u8) -> Option<&'static [Field]> {
    Some(match tag {
        0x01 => &[SEQ, ALLOC_ADDR, SIZE, STACK, ALIGN],
        0x02 => &[SEQ, FREE_ADDR, STACK],
        0x03 => &[SEQ, SEQ, FREE_ADDR, ALLOC_ADDR, SIZE, STACK, ALIGN],
        0x04 => &[SEQ, OTHER, ALLOC_ADDR, SIZE, STACK, ALIGN],
        0x05 => &[SEQ, OTHER, FREE_ADDR, STACK],
        0x06 => &[SEQ, ALLOC_ADDR, SIZE],
        0x07 => &[OTHER, OTHER, Byte(Other)],
        0x08 | 0x0a => &[],
        0x09 => &[SEQ, ALLOC_ADDR],
        0x0b => &[OTHER],
        0x0c | 0x0d => &[SEQ, OTHER],
        0x80..=0x8f => &[SEQ, STACK],
        0x90..=0x9f => &[SEQ, SIZE, STACK, ALIGN],
        _ => return None,
    })
}

/// Whether `tag` starts a sized record (SPEC.md §6.3).
const fn is_sized(tag: u8) -> bool {
    tag >= 0x20 && tag <= 0x7f
}

/// A tag's fields for `split`, as codes: the column in the low three bits (`COLS` is 8,
/// so a masked code indexes the columns without a bounds check), `BYTE` for a `u8` field,
/// `ADDRESS` for an address delta; `END` after the last. A sized record's tag has `SIZED`
/// alone, an invalid one `INVALID`.
const BYTE: u8 = 0x08;
const ADDRESS: u8 = 0x10;
const END: u8 = 0x20;
const SIZED: u8 = 0x40;
const INVALID: u8 = 0x80;

/// [`compact_fields`] as codes, by tag: one table look-up a record, no match.
static FIELD_CODES: [[u8; 8]; 256] = {
    let mut table = [[END; 8]; 256];
    let mut tag = 0;
    while tag < 256 {
        let t = tag as u8;
        if is_sized(t) {
            table[tag][0] = SIZED;
        } else if let Some(fields) = compact_fields(t) {
            let mut i = 0;
            while i < fields.len() {
                table[tag][i] = match fields[i] {
                    Varint(col @ (AllocAddrs | FreeAddrs)) => col as u8 | ADDRESS,
                    Varint(col) => col as u8,
                    Byte(col) => col as u8 | BYTE,
                };
                i += 1;
            }
        } else {
            table[tag][0] = INVALID;
        }
        tag += 1;
    }
    table
};

/// An address delta's varint (`delta` of SPEC.md §2, zig-zag value `z`) as the address
/// columns hold it: `zz(d / 16) << 1` where the delta `d` is a multiple of 16, else
/// `z << 1 | 1`. `None` for a `z` of 2⁶³ or more that is not a multiple of 16 (a delta
/// beyond ±2⁶², which no real log has): the payload is then not split.
#[inline(always)]
fn address_column(z: u64) -> Option<u64> {
    let d = unzigzag(z);
    if d % 16 == 0 {
        Some(zigzag(d / 16) << 1)
    } else {
        (z >> 63 == 0).then_some(z << 1 | 1)
    }
}

/// The inverse of [`address_column`]: the delta's zig-zag value.
#[inline(always)]
fn address_field(c: u64) -> u64 {
    if c & 1 == 0 {
        zigzag(unzigzag(c >> 1).wrapping_mul(16))
    } else {
        c >> 1
    }
}

/// The eight bytes at `at` of `bytes` (zeros past its end), little-endian.
#[inline(always)]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    match bytes.get(at..).and_then(|b| b.first_chunk::<8>()) {
        Some(w) => u64::from_le_bytes(*w),
        None => {
            let mut w = [0u8; 8];
            let rest = bytes.get(at..).unwrap_or(&[]);
            w[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(w)
        }
    }
}

/// A column being written: `buf[..len]` are its bytes; past them, room that a record's
/// fields are written into without a check each (`room` makes it first).
#[derive(Default)]
pub(super) struct ColumnBuf {
    buf: Vec<u8>,
    len: usize,
}

/// The room one field's store needs past a column's length: one 8-byte word (a longer
/// field goes through `put_long`, which makes its own room).
const FIELD_ROOM: usize = 8;

impl ColumnBuf {
    /// Makes room for one more field.
    #[inline(always)]
    fn room(&mut self) {
        if self.buf.len() - self.len < FIELD_ROOM {
            self.grow(FIELD_ROOM);
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, n: usize) {
        let want = (self.len + n).max(2 * self.buf.len()).max(4096);
        self.buf.resize(want, 0);
    }

    /// Appends the low `n` (1 to 8) bytes of `w`, writing all eight.
    #[inline(always)]
    fn put_word(&mut self, w: u64, n: usize) {
        debug_assert!(self.len + 8 <= self.buf.len(), "a field past the room made for it");
        // SAFETY: `room` made FIELD_ROOM (8) bytes past `len` for this field.
        unsafe { self.buf.as_mut_ptr().add(self.len).cast::<[u8; 8]>().write_unaligned(w.to_le_bytes()) };
        self.len += n;
    }

    #[inline(never)]
    fn put_long(&mut self, bytes: &[u8]) {
        if self.buf.len() - self.len < bytes.len() + FIELD_ROOM {
            self.grow(bytes.len() + FIELD_ROOM);
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// Appends `v` as a shortest varint.
    #[inline(always)]
    fn put_varint(&mut self, v: u64) {
        match pack_word(v) {
            Some((w, n)) => self.put_word(w, n),
            None => {
                let mut b = [0u8; 10];
                let n = write_u64(&mut b, v);
                self.put_long(&b[..n]);
            }
        }
    }
}

/// The column buffers of a writer, kept from block to block.
pub(super) type Columns = [ColumnBuf; COLS];

/// Splits `payload` into its columns and appends them to `out`, their lengths first (all
/// but the last's, as `uvarint`s); `None` if the payload is not a sequence of well-formed
/// records with shortest address deltas (writers only split what they encoded, which is).
///
/// Fast because it decodes nothing but tags and varint lengths: a field is one 8-byte load
/// from the payload, its length from the first byte without a continuation bit, and one
/// 8-byte store into its column (the bytes past its length are overwritten by the next).
pub(super) fn split(payload: &[u8], out: &mut Vec<u8>, cols: &mut Columns) -> Option<()> {
    for c in cols.iter_mut() {
        c.len = 0;
    }
    let mut pos = 0;
    while pos < payload.len() {
        let tag = payload[pos];
        pos += 1;
        cols[Tags as usize].room();
        cols[Tags as usize].put_word(u64::from(tag), 1);
        let codes = &FIELD_CODES[usize::from(tag)];
        if codes[0] & (SIZED | INVALID) != 0 {
            if codes[0] == INVALID {
                return None;
            }
            let mut c = Cursor::new(payload);
            c.bytes(pos).ok()?;
            let body = usize::try_from(c.u64().ok()?).ok()?;
            c.bytes(body).ok()?;
            cols[Other as usize].put_long(&payload[pos..c.position()]);
            pos = c.position();
            continue;
        }
        for &code in codes {
            if code == END {
                break;
            }
            let col = &mut cols[usize::from(code) & (COLS - 1)];
            col.room();
            if code & BYTE != 0 {
                col.put_word(u64::from(*payload.get(pos)?), 1);
                pos += 1;
                continue;
            }
            let w = word_at(payload, pos);
            let Some(n) = len_in_word(w).filter(|&n| pos + n <= payload.len()) else {
                // A varint of 9 or 10 bytes (or one past the end, which fails here).
                let mut c = Cursor::new(payload);
                c.bytes(pos).ok()?;
                let z = c.u64().ok()?;
                if code & ADDRESS != 0 {
                    if c.position() - pos != encoded_len(z) {
                        return None;
                    }
                    col.put_varint(address_column(z)?);
                } else {
                    col.put_long(&payload[pos..c.position()]);
                }
                pos = c.position();
                continue;
            };
            if code & ADDRESS != 0 {
                let z = unpack_word(w, n);
                if n != encoded_len(z) {
                    return None;
                }
                col.put_varint(address_column(z)?);
            } else {
                col.put_word(w, n);
            }
            pos += n;
        }
    }
    for col in &cols[..COLS - 1] {
        put_u64(out, col.len as u64);
    }
    for col in cols.iter() {
        out.extend_from_slice(&col.buf[..col.len]);
    }
    Some(())
}

/// Why columns do not join into a payload: the block is then bad, as one that does not
/// decompress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct JoinError;

/// The payload being joined: exactly `out.len()` bytes.
struct Payload<'a> {
    out: &'a mut [u8],
    pos: usize,
}

impl Payload<'_> {
    /// Appends the low `n` (1 to 8) bytes of `w`: one 8-byte store away from the end
    /// (the bytes past `n` are overwritten by the next field).
    #[inline(always)]
    fn put_word(&mut self, w: u64, n: usize) -> Result<(), JoinError> {
        let bytes = w.to_le_bytes();
        match self.out.get_mut(self.pos..self.pos + 8) {
            Some(room) => room.copy_from_slice(&bytes),
            None => self.out.get_mut(self.pos..self.pos + n).ok_or(JoinError)?.copy_from_slice(&bytes[..n]),
        }
        self.pos += n;
        Ok(())
    }

    fn put_slice(&mut self, b: &[u8]) -> Result<(), JoinError> {
        let end = self.pos + b.len();
        self.out.get_mut(self.pos..end).ok_or(JoinError)?.copy_from_slice(b);
        self.pos = end;
        Ok(())
    }

    /// Appends `v` as a shortest varint.
    #[inline(always)]
    fn put_varint(&mut self, v: u64) -> Result<(), JoinError> {
        match pack_word(v) {
            Some((w, n)) => self.put_word(w, n),
            None => {
                let mut b = [0u8; 10];
                let n = write_u64(&mut b, v);
                self.put_slice(&b[..n])
            }
        }
    }
}

/// The columns that [`split`] wrote (`blob`): their lengths, then their bytes.
fn column_slices(blob: &[u8]) -> Result<[&[u8]; COLS], JoinError> {
    let mut at = Cursor::new(blob);
    let mut lens = [0usize; COLS];
    for len in &mut lens[..COLS - 1] {
        *len = usize::try_from(at.u64().map_err(|_| JoinError)?).map_err(|_| JoinError)?;
    }
    let mut col_bytes: [&[u8]; COLS] = [&[]; COLS];
    for (i, col) in col_bytes.iter_mut().enumerate() {
        let len = if i == COLS - 1 { at.remaining() } else { lens[i] };
        *col = at.bytes(len).map_err(|_| JoinError)?;
    }
    Ok(col_bytes)
}

/// Joins the columns that [`split`] wrote (`blob`) back into the payload, exactly `out`.
/// Every column must be used up, and the payload must fill `out`.
pub(super) fn join(blob: &[u8], out: &mut [u8]) -> Result<(), JoinError> {
    let col_bytes = column_slices(blob)?;
    let mut cols: [Cursor<'_>; COLS] = std::array::from_fn(|i| Cursor::new(col_bytes[i]));
    let mut p = Payload { out, pos: 0 };
    for &tag in col_bytes[Tags as usize] {
        p.put_word(u64::from(tag), 1)?;
        let codes = &FIELD_CODES[usize::from(tag)];
        if codes[0] & (SIZED | INVALID) != 0 {
            if codes[0] == INVALID {
                return Err(JoinError);
            }
            let other = &mut cols[Other as usize];
            let at = other.position();
            let body = other.u64().map_err(|_| JoinError)?;
            p.put_slice(&col_bytes[Other as usize][at..other.position()])?;
            let body = usize::try_from(body).map_err(|_| JoinError)?;
            p.put_slice(other.bytes(body).map_err(|_| JoinError)?)?;
            continue;
        }
        for &code in codes {
            if code == END {
                break;
            }
            let i = usize::from(code) & (COLS - 1);
            let col = &mut cols[i];
            if code & BYTE != 0 {
                p.put_word(u64::from(col.u8().map_err(|_| JoinError)?), 1)?;
            } else if code & ADDRESS != 0 {
                let c = col.u64().map_err(|_| JoinError)?;
                p.put_varint(address_field(c))?;
            } else {
                let at = col.position();
                col.u64().map_err(|_| JoinError)?;
                let n = col.position() - at;
                if n <= 8 {
                    p.put_word(word_at(col_bytes[i], at), n)?;
                } else {
                    p.put_slice(&col_bytes[i][at..at + n])?;
                }
            }
        }
    }
    let used_up = cols[1..].iter().all(|c| c.is_empty());
    if p.pos != p.out.len() || !used_up {
        return Err(JoinError);
    }
    Ok(())
}

/// A columns block's fields where [`split`] put them, for the decoder: its records read
/// without the payload that [`join`] would make of them first (SPEC.md §4.2). The
/// decoder asks for the fields in the order that `join` lays them out, each from the
/// column that `FIELD_CODES` names for it.
pub(super) struct ColumnFields<'a> {
    cols: [Cursor<'a>; COLS],
    /// Bytes of the payload that are not address fields: the tags and every other
    /// column, whole (once every column is read to its end).
    other_bytes: usize,
    /// Bytes of the address fields read so far, as the payload holds them (shortest
    /// varints).
    addr_bytes: usize,
}

impl<'a> ColumnFields<'a> {
    pub(super) fn new(blob: &'a [u8]) -> Result<Self, JoinError> {
        let col_bytes = column_slices(blob)?;
        let other_bytes = col_bytes
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != AllocAddrs as usize && i != FreeAddrs as usize)
            .map(|(_, c)| c.len())
            .sum();
        Ok(ColumnFields { cols: col_bytes.map(Cursor::new), other_bytes, addr_bytes: 0 })
    }

    /// The length of the payload the columns join into, once every column has been read
    /// to its end (`None` before: `join` refuses columns with bytes left over).
    pub(super) fn joined_len(&self) -> Option<usize> {
        self.cols.iter().all(|c| c.is_empty()).then_some(self.other_bytes + self.addr_bytes)
    }

    #[inline(always)]
    fn col(&mut self, col: Col) -> &mut Cursor<'a> {
        &mut self.cols[col as usize]
    }
}

impl<'a> Fields<'a> for ColumnFields<'a> {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.cols[Tags as usize].is_empty()
    }
    #[inline(always)]
    fn position(&self) -> usize {
        // Not the payload's offset, which the caller learns by joining.
        self.cols[Tags as usize].position()
    }
    fn payload_position(&self) -> usize {
        // Every field keeps its bytes in its column but the addresses (counted as read).
        let kept = self.cols.iter().enumerate().filter(|&(i, _)| i != AllocAddrs as usize && i != FreeAddrs as usize);
        kept.map(|(_, c)| c.position()).sum::<usize>() + self.addr_bytes
    }
    #[inline(always)]
    fn tag(&mut self) -> Result<u8, CursorError> {
        self.col(Tags).u8()
    }
    #[inline(always)]
    fn seq_delta(&mut self) -> Result<i64, CursorError> {
        self.col(Seqs).i64()
    }
    #[inline(always)]
    fn addr_delta(&mut self, side: HeapSide) -> Result<i64, CursorError> {
        let col = match side {
            HeapSide::Alloc => AllocAddrs,
            HeapSide::Free => FreeAddrs,
        };
        let z = address_field(self.col(col).u64()?);
        self.addr_bytes += encoded_len(z);
        Ok(unzigzag(z))
    }
    #[inline(always)]
    fn size(&mut self) -> Result<u64, CursorError> {
        self.col(Sizes).u64()
    }
    #[inline(always)]
    fn stack(&mut self) -> Result<u32, CursorError> {
        self.col(Stacks).u32()
    }
    #[inline(always)]
    fn align(&mut self) -> Result<u8, CursorError> {
        self.col(Aligns).u8()
    }
    #[inline(always)]
    fn other(&mut self) -> Result<u64, CursorError> {
        self.col(Other).u64()
    }
    #[inline(always)]
    fn other_u8(&mut self) -> Result<u8, CursorError> {
        self.col(Other).u8()
    }
    #[inline(always)]
    fn sized_body(&mut self) -> Result<&'a [u8], (&'static str, CursorError)> {
        let other = self.col(Other);
        let len = other.u64().map_err(|e| ("record length", e))?;
        let len = usize::try_from(len).map_err(|_| ("record length", CursorError::Overlong))?;
        other.bytes(len).map_err(|e| ("record body", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any bytes: `split` refuses them or its columns join back into exactly them.
        #[test]
        fn columns_of_any_bytes_join_back_or_are_refused(payload in proptest::collection::vec(any::<u8>(), 0..400)) {
            let (mut blob, mut cols) = (Vec::new(), Columns::default());
            if split(&payload, &mut blob, &mut cols).is_some() {
                let mut back = vec![0; payload.len()];
                prop_assert_eq!(join(&blob, &mut back), Ok(()));
                prop_assert_eq!(back, payload);
            }
        }

        /// Payloads of compact records with fields of every length: split, and back.
        #[test]
        fn records_split_and_join_back(
            records in proptest::collection::vec((any::<u8>(), proptest::collection::vec(any::<u64>(), 7)), 0..60),
        ) {
            let mut payload = Vec::new();
            for (tag, values) in &records {
                let Some(fields) = compact_fields(*tag) else { continue };
                payload.push(*tag);
                for (field, &v) in fields.iter().zip(values) {
                    match field {
                        // Address deltas of every size up to ±2⁶¹, aligned or not.
                        Varint(AllocAddrs | FreeAddrs) => put_u64(&mut payload, zigzag((v as i64) >> (v % 64).max(2))),
                        Varint(_) => put_u64(&mut payload, v >> (v % 64)),
                        Byte(_) => payload.push(v as u8),
                    }
                }
            }
            let (mut blob, mut cols) = (Vec::new(), Columns::default());
            prop_assert!(split(&payload, &mut blob, &mut cols).is_some());
            let mut back = vec![0; payload.len()];
            prop_assert_eq!(join(&blob, &mut back), Ok(()));
            prop_assert_eq!(back, payload);
        }
    }

    #[test]
    fn address_deltas_round_trip_through_their_column_form() {
        for d in [0i64, 16, -16, 32, 1, -1, 15, 17, 1 << 40, -(1 << 40) + 8, i64::MAX & !15, i64::MIN, (1 << 62) - 1] {
            let z = zigzag(d);
            let c = address_column(z).expect("every delta within ±2⁶² has a column form");
            assert_eq!(address_field(c), z, "delta {d}");
        }
        // Aligned deltas lose their four zero bits: a 16-byte step is one byte.
        assert_eq!(encoded_len(address_column(zigzag(16 * 20)).unwrap()), 1);
        assert_eq!(address_column(zigzag(i64::MAX)), None);
    }

    #[test]
    fn varint_sizes_and_column_varints_are_the_shortest_encodings() {
        let mut values = vec![0u64, 1, 127, 128, 16383, 16384, (1 << 56) - 1, 1 << 56, u64::MAX];
        values.extend((0..64).map(|b| 1u64 << b));
        values.extend((1..64).map(|b| (1u64 << b) - 1));
        for v in values {
            let mut b = Vec::new();
            put_u64(&mut b, v);
            assert_eq!(encoded_len(v), b.len(), "{v}");
            let mut at = [0u8; 10];
            let n = write_u64(&mut at, v);
            assert_eq!(&at[..n], &b[..], "{v:#x}");
            let mut col = ColumnBuf::default();
            col.room();
            col.put_varint(v);
            assert_eq!(&col.buf[..col.len], &b[..], "{v:#x}");
        }
    }
}
