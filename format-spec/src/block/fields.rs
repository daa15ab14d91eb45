//! Where the decoder reads a record's fields: the payload (a [`Cursor`]) or a columns
//! block's columns (`columns::ColumnFields`). Below both the decoder (`codec.rs`) and the
//! columns, so that neither depends on the other for it.

use super::recent::HeapSide;
use crate::varint::{Cursor, CursorError};

/// Where the decoder reads a record's fields from, by what each field is (SPEC.md §6.2):
/// the payload itself, one field after the other ([`Cursor`]), or a columns block's
/// columns, each field from its own (`ColumnFields`). The decoder asks for the fields in
/// payload order, so both read the same values.
pub(super) trait Fields<'a> {
    /// Whether every record has been read.
    fn is_empty(&self) -> bool;
    /// Where the next record starts (in the payload: its offset, for errors).
    fn position(&self) -> usize;
    /// Bytes of the payload read so far, which a columns block's columns would join into:
    /// the difference before and after a record is its length in the payload.
    fn payload_position(&self) -> usize;
    fn tag(&mut self) -> Result<u8, CursorError>;
    /// A `seq` field (zig-zag delta).
    fn seq_delta(&mut self) -> Result<i64, CursorError>;
    /// An `addr` field (zig-zag delta) of an allocation (`HeapSide::Alloc`: also a usage
    /// change's and an attach's) or of a free (a realloc's old block).
    fn addr_delta(&mut self, side: HeapSide) -> Result<i64, CursorError>;
    /// A `size`, `new_size` or `used` field.
    fn size(&mut self) -> Result<u64, CursorError>;
    fn stack(&mut self) -> Result<u32, CursorError>;
    /// An allocation's `size` (or `new_size`) and the `stack` that follows it, which a
    /// columns block may need first to know the size.
    #[inline(always)]
    fn size_and_stack(&mut self) -> Result<(u64, u32), CursorError> {
        Ok((self.size()?, self.stack()?))
    }
    fn align(&mut self) -> Result<u8, CursorError>;
    /// Any other varint field: domains, context fields, times, frame numbers, label names.
    fn other(&mut self) -> Result<u64, CursorError>;
    /// Any other one-byte field (a context push's flags).
    fn other_u8(&mut self) -> Result<u8, CursorError>;
    /// A sized record's length and body.
    fn sized_body(&mut self) -> Result<&'a [u8], (&'static str, CursorError)>;
}

/// The payload as it is: every field is the next.
impl<'a> Fields<'a> for Cursor<'a> {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        Cursor::is_empty(self)
    }
    #[inline(always)]
    fn position(&self) -> usize {
        Cursor::position(self)
    }
    #[inline(always)]
    fn payload_position(&self) -> usize {
        Cursor::position(self)
    }
    #[inline(always)]
    fn tag(&mut self) -> Result<u8, CursorError> {
        self.u8()
    }
    #[inline(always)]
    fn seq_delta(&mut self) -> Result<i64, CursorError> {
        self.i64()
    }
    #[inline(always)]
    fn addr_delta(&mut self, _: HeapSide) -> Result<i64, CursorError> {
        self.i64()
    }
    #[inline(always)]
    fn size(&mut self) -> Result<u64, CursorError> {
        self.u64()
    }
    #[inline(always)]
    fn stack(&mut self) -> Result<u32, CursorError> {
        self.u32()
    }
    #[inline(always)]
    fn align(&mut self) -> Result<u8, CursorError> {
        self.u8()
    }
    #[inline(always)]
    fn other(&mut self) -> Result<u64, CursorError> {
        self.u64()
    }
    #[inline(always)]
    fn other_u8(&mut self) -> Result<u8, CursorError> {
        self.u8()
    }
    #[inline(always)]
    fn sized_body(&mut self) -> Result<&'a [u8], (&'static str, CursorError)> {
        let len = self.u64().map_err(|e| ("record length", e))?;
        let len = usize::try_from(len).map_err(|_| ("record length", CursorError::Overlong))?;
        self.bytes(len).map_err(|e| ("record body", e))
    }
}
