//! Bytes as a log file: the reader frames them, every readable block is decoded, and the
//! events are merged in global order. Each block is also decoded, under a checksum made
//! to match its payload, the analyzer's ways: into records by `unpack_records` and into
//! events with their records' lengths by `Block::decode_with_lengths` (`info`), which
//! read a columns block straight from its columns and must end exactly as decompressing
//! and then decoding does. Nothing may panic, and nothing may allocate more than the
//! bytes justify.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memreplay_format::block::{decode_events, unpack_payload_into, BlockFrame};
use memreplay_format::{decode_records, merge_by_seq, unpack_records, Block, Log, LogReader, Records};

fuzz_target!(|data: &[u8]| {
    if let Ok(mut reader) = LogReader::new(data) {
        let (mut buf, mut one, mut two) = (Vec::new(), Records::default(), Records::default());
        while let Ok(Some(block)) = reader.next_block() {
            let _ = block.decode_with(&mut buf);
            // Under a matching checksum, so that a changed payload reaches the decoders.
            let block = Block { frame: BlockFrame { payload_crc: crc32fast::hash(&block.stored), ..block.frame }, ..block };
            let (frame, stored) = (&block.frame, &block.stored[..]);
            one.clear();
            two.clear();
            let direct = unpack_records(frame, stored, &mut buf, &mut one);
            let two_steps = unpack_payload_into(frame, stored, &mut buf).and_then(|p| decode_records(p, &mut two));
            assert_eq!(direct, two_steps);
            assert_eq!(one.records, two.records);
            assert_eq!(one.events, two.events);
            // Events with their records' lengths (`info`), both ways.
            let mut sized = Vec::new();
            let direct = block.decode_with_lengths(&mut buf, &mut sized);
            let mut events = Vec::new();
            let two_steps = unpack_payload_into(frame, stored, &mut buf).and_then(|p| {
                let (mut decoder, mut at) = (decode_events(p), 0);
                while let Some(event) = decoder.next() {
                    events.push((event?, (decoder.position() - at) as u32));
                    at = decoder.position();
                }
                Ok(())
            });
            assert_eq!(direct, two_steps);
            assert_eq!(sized, events);
        }
        let _ = reader.into_report();
    }
    if let Ok(log) = Log::read(data) {
        let _ = merge_by_seq(&log.blocks).len();
    }
});
