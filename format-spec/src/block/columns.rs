//! Field columns (SPEC.md §4.2, methods 3 to 6, formats 1.5 and 1.6): a block's payload
//! with each kind of field gathered in a column of its own before the entropy stage, so
//! that the entropy coder sees runs of alike values (tags with tags, addresses with
//! addresses) instead of records whose fields differ byte by byte. On a real program's
//! log and on a random churn's this stores a tenth to a quarter less than the same
//! entropy stage over the payload as it is (benches/RESULTS.md §38).
//!
//! Every field keeps its bytes but the address deltas, whose low four bits, zero for
//! every 16-byte-aligned block, are dropped where they are zero (`address_column`), and,
//! in a block whose sizes are held as deltas (methods 5 and 6, format 1.6), the sizes of
//! allocations: each is held as its difference from the last size of the same callstack
//! (`SizeColumn::StackDeltas`), so a site whose sizes repeat or step by a little gives
//! runs of small values. The payload's records say which column each field is in: the
//! tags column is read first, and each tag names its fields (§6.2, §6.3). [`join`] gives
//! back the payload byte for byte; [`split`] takes only payloads whose address deltas are
//! shortest varints, as writers write them, and a writer stores any other with the
//! entropy stage alone.

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
/// `ADDRESS` for an address delta, `STACK_FOLLOWS` for a size that its record's `stack`
/// follows (an allocation's); `END` (the tags column, which holds no field) after the
/// last. A sized record's tag has `SIZED` alone, an invalid one `INVALID`.
const END: u8 = Tags as u8;
const BYTE: u8 = 0x08;
const ADDRESS: u8 = 0x10;
const STACK_FOLLOWS: u8 = 0x20;
const SIZED: u8 = 0x40;
const INVALID: u8 = 0x80;
/// The code of a size that its record's stack follows.
const SIZE_THEN_STACK: u8 = Sizes as u8 | STACK_FOLLOWS;

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
                    Varint(Sizes) if i + 1 < fields.len() && matches!(fields[i + 1], Varint(Stacks)) => SIZE_THEN_STACK,
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

/// How a columns block holds the sizes that a `stack` follows: those of `ALLOC`,
/// `ALLOC_REUSE`, `DOMAIN_ALLOC`, and a `REALLOC`'s `new_size` (SPEC.md §4.2). Every other
/// size (`USAGE`'s `used`) is held as the payload holds it either way.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum SizeColumn {
    /// As the payload holds them (methods 3 and 4).
    AsTheyAre,
    /// Each as its difference from the last such size of the same callstack slot (a
    /// zig-zag `uvarint`; methods 5 and 6, format 1.6).
    StackDeltas,
}

/// A columns block's columns, decompressed: the bytes [`split`] wrote, and how they hold
/// the sizes (by the block's method).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ColumnsBlob<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) sizes: SizeColumn,
}

/// Slots of the table of last sizes: a callstack id's slot is the id modulo this.
/// Callstack ids are given out in order, so the callstacks of a block seldom share one.
const SIZE_SLOTS: usize = 1024;

/// The last size of each callstack slot: zero at the start of a block (SPEC.md §4.2).
struct LastSizes(Box<[u64; SIZE_SLOTS]>);

impl LastSizes {
    fn new() -> Self {
        LastSizes(Box::new([0; SIZE_SLOTS]))
    }

    fn clear(&mut self) {
        self.0.fill(0);
    }

    #[inline(always)]
    fn slot(&mut self, stack: u64) -> &mut u64 {
        &mut self.0[(stack % SIZE_SLOTS as u64) as usize]
    }

    /// The held form of `size`, the size of an allocation with callstack `stack`, which
    /// becomes its slot's last size.
    #[inline(always)]
    fn held(&mut self, stack: u64, size: u64) -> u64 {
        let last = self.slot(stack);
        let held = zigzag(size.wrapping_sub(*last) as i64);
        *last = size;
        held
    }

    /// The inverse of [`held`](Self::held): the size that `held` stands for.
    #[inline(always)]
    fn size(&mut self, stack: u64, held: u64) -> u64 {
        let last = self.slot(stack);
        *last = last.wrapping_add(unzigzag(held) as u64);
        *last
    }
}

/// Whether a writer holds a block's sizes as deltas: where they take at most three
/// quarters of the bytes the sizes do (so a block of unrelated sizes, whose deltas are a
/// bit longer and compress worse, keeps them as they are; benches/RESULTS.md §44).
fn writer_choice(as_they_are: usize, stack_deltas: usize) -> SizeColumn {
    if as_they_are > 0 && stack_deltas * 4 <= as_they_are * 3 {
        SizeColumn::StackDeltas
    } else {
        SizeColumn::AsTheyAre
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
pub(super) struct Columns {
    cols: [ColumnBuf; COLS],
    /// The sizes column as `SizeColumn::StackDeltas` holds it, made beside the other.
    size_deltas: ColumnBuf,
    last: LastSizes,
}

impl Default for Columns {
    fn default() -> Self {
        Columns { cols: Default::default(), size_deltas: ColumnBuf::default(), last: LastSizes::new() }
    }
}

/// Splits `payload` into its columns and appends them to `out`, their lengths first (all
/// but the last's, as `uvarint`s), and says how it holds the sizes (the smaller way, by
/// `writer_choice`); `None` if the payload is not a sequence of well-formed records with
/// shortest address deltas (writers only split what they encoded, which is).
///
/// Fast because it decodes nothing but tags and varint lengths: a field is one 8-byte load
/// from the payload, its length from the first byte without a continuation bit, and one
/// 8-byte store into its column (the bytes past its length are overwritten by the next).
/// The sizes as deltas are a second pass over the columns (`size_deltas_of`), which stops
/// early in a block whose first sizes gain nothing by them.
pub(super) fn split(payload: &[u8], out: &mut Vec<u8>, columns: &mut Columns) -> Option<SizeColumn> {
    split_with(payload, out, columns, writer_choice)
}

/// [`split`], holding the sizes as `choose` (their bytes as they are, and as deltas) says
/// where both ways are open (the deltas need sizes that are shortest varints).
fn split_with(
    payload: &[u8],
    out: &mut Vec<u8>,
    columns: &mut Columns,
    choose: fn(usize, usize) -> SizeColumn,
) -> Option<SizeColumn> {
    let Columns { cols, size_deltas, last } = columns;
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
    let sizes = size_deltas_of(cols, size_deltas, last, choose);
    let held = |i: usize| match (i, sizes) {
        (i, SizeColumn::StackDeltas) if i == Sizes as usize => &*size_deltas,
        (i, _) => &cols[i],
    };
    for i in 0..COLS - 1 {
        put_u64(out, held(i).len as u64);
    }
    for i in 0..COLS {
        let col = held(i);
        out.extend_from_slice(&col.buf[..col.len]);
    }
    Some(sizes)
}

/// How many of a block's first sizes that a stack follows `size_deltas_of` holds as
/// deltas before it looks whether they are any shorter: a block of unrelated sizes costs
/// the writer no more than this (the recorder's blocks hold some 4,000 allocations).
const SIZES_SAMPLED: usize = 64;

/// The sizes column of `cols` (a payload's columns) with the sizes that a stack follows as
/// deltas (`SizeColumn::StackDeltas`), into `out`, and the way `choose` picks (the sizes'
/// bytes as they are, and as deltas). `AsTheyAre` without going on where the block's first
/// `SIZES_SAMPLED` such sizes take more bytes as deltas than as they are, and where a size
/// is not a shortest varint, which a delta cannot give back (`split` takes any).
fn size_deltas_of(
    cols: &[ColumnBuf; COLS],
    out: &mut ColumnBuf,
    last: &mut LastSizes,
    choose: fn(usize, usize) -> SizeColumn,
) -> SizeColumn {
    let column = |col: Col| Cursor::new(&cols[col as usize].buf[..cols[col as usize].len]);
    let (mut sizes, mut stacks) = (column(Sizes), column(Stacks));
    out.len = 0;
    last.clear();
    let mut sampled = 0;
    for &tag in &cols[Tags as usize].buf[..cols[Tags as usize].len] {
        for &code in &FIELD_CODES[usize::from(tag)] {
            match code {
                END => break,
                SIZE_THEN_STACK => {
                    let at = sizes.position();
                    let (Ok(size), Ok(stack)) = (sizes.u64(), stacks.clone().u64()) else {
                        return SizeColumn::AsTheyAre;
                    };
                    if sizes.position() - at != encoded_len(size) {
                        return SizeColumn::AsTheyAre;
                    }
                    out.room();
                    out.put_varint(last.held(stack, size));
                    sampled += 1;
                    // Deltas longer than the sizes: unrelated sizes (a random churn's).
                    if sampled == SIZES_SAMPLED && out.len > sizes.position() {
                        return SizeColumn::AsTheyAre;
                    }
                }
                code if code == Sizes as u8 => {
                    // Held as it is (a usage change's `used`).
                    let at = sizes.position();
                    if sizes.u64().is_err() {
                        return SizeColumn::AsTheyAre;
                    }
                    out.put_long(&cols[Sizes as usize].buf[at..sizes.position()]);
                }
                code if code == Stacks as u8 => {
                    let Ok(_) = stacks.u64() else { return SizeColumn::AsTheyAre };
                }
                // The other fields, and a sized record's (all in the other column).
                _ => {}
            }
        }
    }
    choose(cols[Sizes as usize].len, out.len)
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
        match self.out.get_mut(self.pos..).and_then(|rest| rest.first_chunk_mut::<8>()) {
            Some(room) => *room = bytes,
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

/// Joins the columns that [`split`] wrote (`blob`), with its sizes held as `sizes`, back
/// into the payload, exactly `out`. Every column must be used up, and the payload must
/// fill `out`.
pub(super) fn join(blob: &[u8], sizes: SizeColumn, out: &mut [u8]) -> Result<(), JoinError> {
    match sizes {
        SizeColumn::AsTheyAre => join_as::<false>(blob, out),
        SizeColumn::StackDeltas => join_as::<true>(blob, out),
    }
}

/// [`join`], with the sizes that a stack follows held as deltas (`DELTAS`) or not: two
/// loops, so that the one of the methods without deltas has no branch for them.
fn join_as<const DELTAS: bool>(blob: &[u8], out: &mut [u8]) -> Result<(), JoinError> {
    let col_bytes = column_slices(blob)?;
    let mut cols: [Cursor<'_>; COLS] = std::array::from_fn(|i| Cursor::new(col_bytes[i]));
    let mut last = DELTAS.then(LastSizes::new);
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
            if let (true, SIZE_THEN_STACK, Some(last)) = (DELTAS, code, &mut last) {
                // The record's stack, the next field, is the front of its column.
                let stack = cols[Stacks as usize].clone().u64().map_err(|_| JoinError)?;
                let held = cols[Sizes as usize].u64().map_err(|_| JoinError)?;
                p.put_varint(last.size(stack, held))?;
                continue;
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
    /// The last sizes, where the block holds its sizes as deltas.
    last: Option<LastSizes>,
    /// Bytes of the payload that are neither address nor size fields: the tags and every
    /// other column, whole (once every column is read to its end).
    other_bytes: usize,
    /// Bytes of the address and size fields read so far, as the payload holds them
    /// (addresses and the sizes that deltas stand for as shortest varints).
    addr_and_size_bytes: usize,
}

/// The columns whose bytes are the payload's as they are.
fn is_kept(i: usize) -> bool {
    i != AllocAddrs as usize && i != FreeAddrs as usize && i != Sizes as usize
}

impl<'a> ColumnFields<'a> {
    pub(super) fn new(ColumnsBlob { bytes, sizes }: ColumnsBlob<'a>) -> Result<Self, JoinError> {
        let col_bytes = column_slices(bytes)?;
        let other_bytes = col_bytes.iter().enumerate().filter(|&(i, _)| is_kept(i)).map(|(_, c)| c.len()).sum();
        Ok(ColumnFields {
            cols: col_bytes.map(Cursor::new),
            last: (sizes == SizeColumn::StackDeltas).then(LastSizes::new),
            other_bytes,
            addr_and_size_bytes: 0,
        })
    }

    /// The length of the payload the columns join into, once every column has been read
    /// to its end (`None` before: `join` refuses columns with bytes left over).
    pub(super) fn joined_len(&self) -> Option<usize> {
        self.cols.iter().all(|c| c.is_empty()).then_some(self.other_bytes + self.addr_and_size_bytes)
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
        // Every field keeps its bytes in its column but the addresses and sizes (counted
        // as read).
        let kept = self.cols.iter().enumerate().filter(|&(i, _)| is_kept(i));
        kept.map(|(_, c)| c.position()).sum::<usize>() + self.addr_and_size_bytes
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
        self.addr_and_size_bytes += encoded_len(z);
        Ok(unzigzag(z))
    }
    #[inline(always)]
    fn size(&mut self) -> Result<u64, CursorError> {
        let sizes = self.col(Sizes);
        let at = sizes.position();
        let size = sizes.u64()?;
        self.addr_and_size_bytes += sizes.position() - at;
        Ok(size)
    }
    #[inline(always)]
    fn size_and_stack(&mut self) -> Result<(u64, u32), CursorError> {
        let Some(last) = &mut self.last else {
            return Ok((self.size()?, self.stack()?));
        };
        let stack = self.cols[Stacks as usize].u32()?;
        let size = last.size(u64::from(stack), self.cols[Sizes as usize].u64()?);
        self.addr_and_size_bytes += encoded_len(size);
        Ok((size, stack))
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
        /// Any bytes: `split` refuses them or its columns join back into exactly them,
        /// whichever way they hold the sizes.
        #[test]
        fn columns_of_any_bytes_join_back_or_are_refused(payload in proptest::collection::vec(any::<u8>(), 0..400)) {
            for sizes in [SizeColumn::AsTheyAre, SizeColumn::StackDeltas] {
                if let Some(held) = split_as(&payload, sizes) {
                    prop_assert_eq!(joined(&held, payload.len()), Ok(payload.clone()));
                }
            }
        }

        /// Payloads of compact records with fields of every length: split either way,
        /// and back.
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
            for sizes in [SizeColumn::AsTheyAre, SizeColumn::StackDeltas] {
                let held = split_as(&payload, sizes);
                prop_assert!(held.is_some());
                prop_assert_eq!(joined(&held.unwrap(), payload.len()), Ok(payload.clone()));
            }
        }
    }

    /// `split` holding the sizes as `sizes` where it can; the columns, and how they hold
    /// the sizes.
    fn split_as(payload: &[u8], sizes: SizeColumn) -> Option<(Vec<u8>, SizeColumn)> {
        let (mut blob, mut cols) = (Vec::new(), Columns::default());
        let choose = match sizes {
            SizeColumn::AsTheyAre => |_, _| SizeColumn::AsTheyAre,
            SizeColumn::StackDeltas => |_, _| SizeColumn::StackDeltas,
        };
        let held = split_with(payload, &mut blob, &mut cols, choose)?;
        Some((blob, held))
    }

    fn joined((blob, sizes): &(Vec<u8>, SizeColumn), len: usize) -> Result<Vec<u8>, JoinError> {
        let mut back = vec![0; len];
        join(blob, *sizes, &mut back)?;
        Ok(back)
    }

    /// The sizes column of `split`'s columns.
    fn sizes_column(blob: &[u8]) -> Vec<u8> {
        column_slices(blob).unwrap()[Sizes as usize].to_vec()
    }

    /// An `ALLOC` record (seq delta 2, address delta 16) of `size` with callstack `stack`.
    fn alloc(payload: &mut Vec<u8>, size: u64, stack: u64) {
        payload.extend([0x01, 2 << 1, 16 << 1]);
        put_u64(payload, size);
        put_u64(payload, stack);
        payload.push(3);
    }

    #[test]
    fn sizes_are_held_as_deltas_from_their_callstack_slots_last_size() {
        let mut payload = Vec::new();
        alloc(&mut payload, 100, 5);
        alloc(&mut payload, 101, 5);
        // Callstack 1029 shares callstack 5's slot (1029 mod 1024): its delta is from 101.
        alloc(&mut payload, 50, 1029);
        alloc(&mut payload, 300, 7);
        // A usage change's `used` is held as it is.
        payload.extend([0x06, 2 << 1, 0]);
        put_u64(&mut payload, 1000);
        // A realloc's `new_size` is a size its stack follows.
        payload.extend([0x03, 2 << 1, 2 << 1, 0, 16 << 1]);
        put_u64(&mut payload, 299);
        put_u64(&mut payload, 7);
        payload.push(3);
        let held = split_as(&payload, SizeColumn::StackDeltas).unwrap();
        assert_eq!(held.1, SizeColumn::StackDeltas);
        let mut want = Vec::new();
        for v in [zigzag(100), zigzag(1), zigzag(50 - 101), zigzag(300), 1000, zigzag(-1)] {
            put_u64(&mut want, v);
        }
        assert_eq!(sizes_column(&held.0), want);
        assert_eq!(joined(&held, payload.len()), Ok(payload.clone()));
        // Read the other way, the same columns are another payload: the method says how.
        assert_ne!(joined(&(held.0, SizeColumn::AsTheyAre), payload.len()), Ok(payload));
    }

    #[test]
    fn a_writer_holds_sizes_as_deltas_only_where_they_are_smaller() {
        // Each of three sites counts its sizes up, as a loop that sizes its blocks by its
        // index does: the deltas are ones, the sizes two bytes each.
        let mut stepping = Vec::new();
        for i in 0..600u64 {
            alloc(&mut stepping, 200 + i / 3, 1 + i % 3);
        }
        // Sizes of no pattern: their deltas are no shorter.
        let mut unrelated = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..600 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            alloc(&mut unrelated, 16 + x % 100_000, 1 + x % 3);
        }
        for (payload, want) in [(stepping, SizeColumn::StackDeltas), (unrelated, SizeColumn::AsTheyAre)] {
            let (mut blob, mut cols) = (Vec::new(), Columns::default());
            assert_eq!(split(&payload, &mut blob, &mut cols), Some(want));
            let plain = split_as(&payload, SizeColumn::AsTheyAre).unwrap();
            let deltas = split_as(&payload, SizeColumn::StackDeltas).unwrap();
            assert_eq!(&blob, if want == SizeColumn::StackDeltas { &deltas.0 } else { &plain.0 });
            assert_eq!(joined(&(blob, want), payload.len()), Ok(payload));
        }
        // Sizes of nine and ten bytes are held either way.
        let mut huge = Vec::new();
        alloc(&mut huge, 1 << 60, 1);
        alloc(&mut huge, u64::MAX, 1);
        for sizes in [SizeColumn::AsTheyAre, SizeColumn::StackDeltas] {
            let held = split_as(&huge, sizes).unwrap();
            assert_eq!(held.1, sizes);
            assert_eq!(joined(&held, huge.len()), Ok(huge.clone()));
        }
        // A size that is not a shortest varint (100 in two bytes), which a delta could not
        // give back, keeps them as they are.
        let mut padded = Vec::new();
        alloc(&mut padded, 100, 1);
        padded.splice(3..4, [0x80 | 100, 0x00]);
        let held = split_as(&padded, SizeColumn::StackDeltas).unwrap();
        assert_eq!(held.1, SizeColumn::AsTheyAre);
        assert_eq!(joined(&held, padded.len()), Ok(padded));
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
