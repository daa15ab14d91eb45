//! Bytes as a log file: the reader frames them, every readable block is decoded, and the
//! events are merged in global order. Nothing may panic, and nothing may allocate more
//! than the bytes justify.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memreplay_format::{merge_by_seq, Log, LogReader};

fuzz_target!(|data: &[u8]| {
    if let Ok(mut reader) = LogReader::new(data) {
        let mut buf = Vec::new();
        while let Ok(Some(block)) = reader.next_block() {
            let _ = block.decode_with(&mut buf);
        }
        let _ = reader.into_report();
    }
    if let Ok(log) = Log::read(data) {
        let _ = merge_by_seq(&log.blocks).len();
    }
});
