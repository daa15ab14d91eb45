//! Compact records: a block's events as fixed 32-byte values, for readers that go through
//! millions of them (the analyzer's replay).
//!
//! [`Event`] is a general enum of 56 bytes that some variants fill with owned strings and
//! vectors. The replay applies tens of millions of events a second, decoded on other cores,
//! so what crosses between cores is what it pays for: a [`Record`] holds the hot kinds
//! (heap allocations, frees, realloc halves, container usage, context push and pop, time)
//! in 32 bytes and refers to every other event by its index in a side list, kept as an
//! `Event`. A realloc becomes two records, its free half then its allocation half, each
//! ordered by its own sequence number, so every record has exactly one ordering key.
//!
//! The bytes are decoded by the same decoder as [`crate::block::decode_events`]; only what
//! it hands out differs.

use crate::block::{
    decode_columns, decode_payload, decode_stored_columns, unpack_payload_into, BlockError, BlockFrame, Output,
};
use crate::event::*;

/// What a [`Record`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    /// A heap allocation: `addr`, `value` = size, `stack`.
    Alloc,
    /// A heap free: `addr`, `stack` = free callstack (0 = none).
    Free,
    /// A realloc's free of its old block (`addr`), keyed by its `free_seq`.
    ReallocFree,
    /// A realloc's allocation: `addr` = new address, `value` = new size, `stack`.
    ReallocAlloc,
    /// Container usage: `addr`, `value` = bytes used.
    Usage,
    /// Context push: `stack` = context type, `value` = name string id, `flags`.
    ContextPush,
    ContextPop,
    /// The stream's clock: `value` = nanoseconds.
    Time,
    /// Any other event: `value` is its index in the block's event list.
    Event,
}

/// One event (or realloc half) in a fixed-size form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The ordering key: the sequence number of a sequenced event (a realloc's free half:
    /// its `free_seq`). An unsequenced event (context push and pop, time, definitions)
    /// comes just before the next sequenced event of its thread, and takes its key: that
    /// of the next sequenced record of the block, or, after the block's last one, 0 until
    /// the reader gives it one ([`Records::key_trailing`]).
    pub key: u64,
    pub addr: u64,
    pub value: u64,
    pub stack: u32,
    pub kind: RecordKind,
    pub flags: u8,
    /// Whether `key` is the event's own sequence number.
    pub sequenced: bool,
}

impl Record {
    /// The event's sequence number, if it has one (a realloc's free half: its `free_seq`).
    #[inline]
    pub fn seq(&self) -> Option<u64> {
        self.sequenced.then_some(self.key)
    }

    #[inline(always)]
    fn new(kind: RecordKind, key: u64, addr: u64, value: u64, stack: u32) -> Record {
        let sequenced = matches!(
            kind,
            RecordKind::Alloc
                | RecordKind::Free
                | RecordKind::ReallocFree
                | RecordKind::ReallocAlloc
                | RecordKind::Usage
        );
        Record { key, addr, value, stack, kind, flags: 0, sequenced }
    }
}

/// A block's records and the events they refer to.
#[derive(Debug, Clone, Default)]
pub struct Records {
    pub records: Vec<Record>,
    /// The events of [`RecordKind::Event`] records, by `value`.
    pub events: Vec<Event>,
    /// How many records at the end are unsequenced and wait for a key (the next
    /// sequenced record's).
    unkeyed: usize,
}

impl Records {
    /// The event a [`RecordKind::Event`] record refers to.
    #[inline]
    pub fn event(&self, r: &Record) -> &Event {
        &self.events[r.value as usize]
    }

    /// Appends `event` as the decoder would have: as one record, or two for a realloc.
    pub fn push(&mut self, event: Event) {
        match event {
            Event::Alloc { seq, domain, addr, size, align_log2, stack } => {
                self.alloc(seq, domain, addr, size, align_log2, stack)
            }
            Event::Free { seq, domain, addr, stack } => self.free(seq, domain, addr, stack),
            Event::Realloc { free_seq, seq, old_addr, new_addr, new_size, align_log2, stack } => {
                self.realloc(free_seq, seq, old_addr, new_addr, new_size, align_log2, stack)
            }
            Event::Usage { seq, addr, used } => self.usage(seq, addr, used),
            Event::ContextPush { ty, name, flags } => self.context_push(ty, name, flags),
            Event::ContextPop => self.context_pop(),
            Event::Time { ns } => self.time(ns),
            e => Output::event(self, e),
        }
    }

    pub fn clear(&mut self) {
        self.records.clear();
        self.events.clear();
        self.unkeyed = 0;
    }

    /// Gives `key` to the unsequenced records after the last sequenced one (the key of
    /// the thread's next sequenced event, in a later block).
    pub fn key_trailing(&mut self, key: u64) {
        let n = self.records.len();
        for r in &mut self.records[n - self.unkeyed..] {
            r.key = key;
        }
        self.unkeyed = 0;
    }

    /// Where `out` stands, for [`Records::rewind`].
    fn mark(&self) -> Mark {
        Mark { records: self.records.len(), events: self.events.len(), unkeyed: self.unkeyed }
    }

    /// Back to where `mark` was taken: the records and events appended since are gone,
    /// and the unsequenced records that then waited for a key wait again (with key 0,
    /// which they had until a later sequenced record keyed them).
    fn rewind(&mut self, mark: Mark) {
        self.records.truncate(mark.records);
        self.events.truncate(mark.events);
        for r in &mut self.records[mark.records - mark.unkeyed..] {
            r.key = 0;
        }
        self.unkeyed = mark.unkeyed;
    }

    /// Appends `r`, keying the unsequenced records before it if it is sequenced. Keyed
    /// here, as they are decoded, rather than in a second pass over the block's records.
    #[inline(always)]
    fn push_record(&mut self, r: Record) {
        if r.sequenced {
            if self.unkeyed > 0 {
                self.key_trailing(r.key);
            }
        } else {
            self.unkeyed += 1;
        }
        self.records.push(r);
    }
}

/// How long a [`Records`] was, and how many of its records waited for a key.
#[derive(Clone, Copy)]
struct Mark {
    records: usize,
    events: usize,
    unkeyed: usize,
}

impl Output for Records {
    #[inline(always)]
    fn reserve(&mut self, records: usize) {
        self.records.reserve(records);
    }

    #[inline(always)]
    fn event(&mut self, e: Event) {
        if matches!(e, Event::Unknown { .. }) {
            // Records of a newer minor version: skipped, as `Block::decode` does.
            return;
        }
        let key = e.seq();
        self.push_record(Record {
            key: key.unwrap_or(0),
            addr: 0,
            value: self.events.len() as u64,
            stack: 0,
            kind: RecordKind::Event,
            flags: 0,
            sequenced: key.is_some(),
        });
        self.events.push(e);
    }

    #[inline(always)]
    fn alloc(&mut self, seq: u64, domain: DomainId, addr: u64, size: u64, align_log2: u8, stack: StackId) {
        if domain == HEAP_DOMAIN {
            self.push_record(Record::new(RecordKind::Alloc, seq, addr, size, stack));
        } else {
            self.event(Event::Alloc { seq, domain, addr, size, align_log2, stack });
        }
    }

    #[inline(always)]
    fn free(&mut self, seq: u64, domain: DomainId, addr: u64, stack: StackId) {
        if domain == HEAP_DOMAIN {
            self.push_record(Record::new(RecordKind::Free, seq, addr, 0, stack));
        } else {
            self.event(Event::Free { seq, domain, addr, stack });
        }
    }

    #[inline(always)]
    fn realloc(&mut self, free_seq: u64, seq: u64, old_addr: u64, new_addr: u64, new_size: u64, _: u8, stack: StackId) {
        self.push_record(Record::new(RecordKind::ReallocFree, free_seq, old_addr, 0, 0));
        self.push_record(Record::new(RecordKind::ReallocAlloc, seq, new_addr, new_size, stack));
    }

    #[inline(always)]
    fn usage(&mut self, seq: u64, addr: u64, used: u64) {
        self.push_record(Record::new(RecordKind::Usage, seq, addr, used, 0));
    }

    #[inline(always)]
    fn context_push(&mut self, ty: ContextTypeId, name: StringId, flags: u8) {
        let mut r = Record::new(RecordKind::ContextPush, 0, 0, u64::from(name), ty);
        r.flags = flags;
        self.push_record(r);
    }

    #[inline(always)]
    fn context_pop(&mut self) {
        self.push_record(Record::new(RecordKind::ContextPop, 0, 0, 0, 0));
    }

    #[inline(always)]
    fn time(&mut self, ns: u64) {
        self.push_record(Record::new(RecordKind::Time, 0, 0, ns, 0));
    }
}

/// Decodes a decompressed payload into records, appended to `out`. On a malformed
/// payload, `out` holds the records before the error.
pub fn decode_records(payload: &[u8], out: &mut Records) -> Result<(), BlockError> {
    decode_payload(payload, out)
}

/// Verifies, decompresses and decodes a block's stored payload (`stored`, framed by
/// `frame`) into records appended to `out`: [`unpack_payload_into`] then
/// [`decode_records`], with the same result and the same errors, but a columns block's
/// records are read straight from its columns, never joined into a payload (unless it is
/// damaged: then it goes that way, for the error). `buf` keeps its memory from one block
/// to the next. On an error `out` holds the records before it.
pub fn unpack_records(
    frame: &BlockFrame,
    stored: &[u8],
    buf: &mut Vec<u8>,
    out: &mut Records,
) -> Result<(), BlockError> {
    // Any columns method (`decode_stored_columns` says which are, before it reads a byte).
    let mark = out.mark();
    if records_from_columns(frame, stored, buf, out).is_ok() {
        return Ok(());
    }
    out.rewind(mark);
    let payload = unpack_payload_into(frame, stored, buf)?;
    // A record takes at least one byte of payload: a corrupt count reserves no more.
    out.reserve((frame.event_count as usize).min(payload.len()));
    decode_records(payload, out)
}

/// A columns block's records, read from its columns (`decode_stored_columns`).
fn records_from_columns(frame: &BlockFrame, stored: &[u8], buf: &mut Vec<u8>, out: &mut Records) -> Result<(), ()> {
    decode_stored_columns(frame, stored, buf, |blob, raw_len| {
        // A record takes at least one byte of payload: a corrupt count reserves no more.
        out.reserve((frame.event_count as usize).min(raw_len));
        decode_columns(blob, raw_len, out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::{decode_columns_with_lengths, Compression};

    #[test]
    fn a_record_is_32_bytes() {
        assert_eq!(std::mem::size_of::<Record>(), 32);
    }

    #[test]
    fn a_realloc_is_two_records_each_with_its_own_key() {
        let mut r = Records::default();
        r.push(Event::Realloc {
            free_seq: 7,
            seq: 9,
            old_addr: 0x10,
            new_addr: 0x20,
            new_size: 48,
            align_log2: 3,
            stack: 5,
        });
        r.push(Event::Label { seq: 10, name: 3 });
        r.push(Event::ContextPop);
        let kinds: Vec<_> = r.records.iter().map(|x| (x.kind, x.seq(), x.addr, x.value, x.stack)).collect();
        assert_eq!(
            kinds,
            [
                (RecordKind::ReallocFree, Some(7), 0x10, 0, 0),
                (RecordKind::ReallocAlloc, Some(9), 0x20, 48, 5),
                (RecordKind::Event, Some(10), 0, 0, 0),
                (RecordKind::ContextPop, None, 0, 0, 0),
            ]
        );
        assert_eq!(r.event(&r.records[2]), &Event::Label { seq: 10, name: 3 });
    }

    /// A columns block is read from its columns, whichever way they hold its sizes:
    /// `decode_stored_columns` takes it (the integration tests only see that
    /// `unpack_records` reads what the two steps do, which a fall-back to them on every
    /// block would too), and refuses one whose claim is a byte off, which joining would
    /// refuse.
    #[test]
    fn columns_blocks_are_read_from_their_columns() {
        for (stepping, held) in [
            (false, [Compression::Lz4Columns, Compression::ZstdColumns]),
            (true, [Compression::Lz4ColumnsSizeDeltas, Compression::ZstdColumnsSizeDeltas]),
        ] {
            columns_block_is_read_from_its_columns(stepping, held);
        }
    }

    /// A block of allocations of one size, or of sizes that step up (`stepping`), which
    /// the methods store as `held` (LZ4 columns, zstd columns), read from its columns.
    fn columns_block_is_read_from_its_columns(stepping: bool, held: [Compression; 2]) {
        use crate::block::FRAME_LEN;
        use crate::{PayloadCompression, PayloadCompressor};
        let mut enc = crate::EventEncoder::new();
        let mut events = Vec::new();
        for i in 0..2000u64 {
            let addr = 0x7f00_0000_0000 + 48 * (i % 50);
            events.push(Event::Alloc {
                seq: 2 * i,
                domain: crate::HEAP_DOMAIN,
                addr,
                size: if stepping { 200 + i } else { 24 },
                align_log2: 4,
                stack: 3,
            });
            events.push(Event::Free { seq: 2 * i + 1, domain: crate::HEAP_DOMAIN, addr, stack: 0 });
            if i % 100 == 0 {
                events.push(Event::ContextPush { ty: 1, name: i as u32, flags: 1 });
                events.push(Event::DefineString { id: i as u32, text: format!("s{i}") });
                events.push(Event::Realloc {
                    free_seq: 2 * i + 1,
                    seq: 2 * i + 1,
                    old_addr: addr,
                    new_addr: addr + 0x1000,
                    new_size: 9,
                    align_log2: 3,
                    stack: 2,
                });
                events.push(Event::ContextPop);
            }
        }
        events.iter().for_each(|e| enc.push(e));
        let mut expected = Records::default();
        events.iter().for_each(|e| expected.push(e.clone()));
        for (method, held) in
            [PayloadCompression::Lz4Columns, PayloadCompression::ZstdColumns { level: 1 }].iter().zip(held)
        {
            let mut bytes = Vec::new();
            enc.clone().finish_compressed(1, &mut PayloadCompressor::new(*method), &mut bytes);
            let frame = BlockFrame::parse(bytes[..FRAME_LEN].try_into().unwrap()).unwrap();
            // Without zstd, a writer asked for it writes LZ4.
            let lz4 = |c| match c {
                Compression::ZstdColumns => Compression::Lz4Columns,
                Compression::ZstdColumnsSizeDeltas => Compression::Lz4ColumnsSizeDeltas,
                c => c,
            };
            assert_eq!(frame.compression, if cfg!(feature = "zstd") { held } else { lz4(held) }, "{method}");
            let stored = &bytes[FRAME_LEN..];
            let mut got = Records::default();
            assert_eq!(records_from_columns(&frame, stored, &mut Vec::new(), &mut got), Ok(()), "{method}");
            assert_eq!((&got.records, &got.events), (&expected.records, &expected.events));
            // Events with their lengths (`Block::decode_with_lengths`) too.
            let with_lengths = |frame: &BlockFrame, out: &mut Vec<(Event, u32)>| {
                decode_stored_columns(frame, stored, &mut Vec::new(), |blob, raw_len| {
                    decode_columns_with_lengths(blob, raw_len, out)
                })
            };
            let mut sized = Vec::new();
            assert_eq!(with_lengths(&frame, &mut sized), Ok(()), "{method}");
            assert_eq!(sized.len(), events.len());
            assert!(sized.iter().zip(&events).all(|((got, _), e)| got == e));
            assert_eq!(sized.iter().map(|(_, n)| *n).sum::<u32>(), frame.raw_len);
            for off_by in [frame.raw_len - 1, frame.raw_len + 1] {
                let frame = BlockFrame { raw_len: off_by, ..frame };
                assert_eq!(records_from_columns(&frame, stored, &mut Vec::new(), &mut Records::default()), Err(()));
                assert_eq!(with_lengths(&frame, &mut Vec::new()), Err(()));
            }
        }
    }

    /// An unsequenced record takes the key of the next sequenced one, found as the block
    /// is decoded; those after the last sequenced one wait for `key_trailing`.
    #[test]
    fn unsequenced_records_take_the_next_sequenced_key() {
        let mut enc = crate::EventEncoder::new();
        for e in [
            Event::ContextPush { ty: 1, name: 2, flags: 0 },
            Event::Time { ns: 5 },
            Event::Alloc { seq: 40, domain: crate::HEAP_DOMAIN, addr: 0x100, size: 8, align_log2: 3, stack: 1 },
            Event::Free { seq: 41, domain: crate::HEAP_DOMAIN, addr: 0x100, stack: 0 },
            Event::ContextPop,
            Event::DefineString { id: 9, text: "x".into() },
            Event::Usage { seq: 44, addr: 0x100, used: 4 },
            Event::ContextPop,
            Event::Time { ns: 6 },
        ] {
            enc.push(&e);
        }
        let mut block = Vec::new();
        enc.finish_into(1, &mut block);
        let frame = crate::block::BlockFrame::parse(block[..crate::block::FRAME_LEN].try_into().unwrap()).unwrap();
        let mut raw = Vec::new();
        let payload = crate::block::unpack_payload_into(&frame, &block[crate::block::FRAME_LEN..], &mut raw).unwrap();
        let mut r = Records::default();
        decode_records(payload, &mut r).unwrap();
        let keys = |r: &Records| r.records.iter().map(|x| (x.key, x.sequenced)).collect::<Vec<_>>();
        let before = [(40, false), (40, false), (40, true), (41, true), (44, false), (44, false), (44, true)];
        assert_eq!(keys(&r)[..7], before);
        assert_eq!(keys(&r)[7..], [(0, false), (0, false)]);
        r.key_trailing(50);
        assert_eq!(keys(&r)[7..], [(50, false), (50, false)]);
        // Cleared, nothing waits for a key any more.
        r.clear();
        r.push(Event::ContextPop);
        r.key_trailing(60);
        assert_eq!(keys(&r), [(60, false)]);
    }
}
