//! A small log written and read back.

use memreplay_format::*;

use crate::header;

#[test]
fn writes_and_reads_back_a_small_log() {
    let events = vec![
        Event::Time { ns: 5 },
        Event::DefineString { id: 1, text: "rock.dds".into() },
        Event::DefineStack { id: 1, frames: vec![0x5555_0000_1000, 0x5555_0000_0800] },
        Event::ContextPush { ty: 1, name: 1, flags: context_flags::INSTANCE },
        Event::Alloc { seq: 10, domain: HEAP_DOMAIN, addr: 0x7f00_0000_1000, size: 64, align_log2: 3, stack: 1 },
        Event::Alloc { seq: 11, domain: 2, addr: 0x1000, size: 1 << 20, align_log2: 8, stack: 0 },
        Event::Free { seq: 12, domain: HEAP_DOMAIN, addr: 0x7f00_0000_1000, stack: 0 },
        Event::ContextPop,
        Event::Label { seq: 13, name: 1 },
    ];
    let mut bytes = Vec::new();
    let mut w = LogWriter::new(&mut bytes, &header()).unwrap();
    let mut enc = EventEncoder::new();
    for e in &events {
        enc.push(e);
    }
    w.write_block(3, &mut enc).unwrap();
    w.finish(0, 99).unwrap();
    let log = Log::read(&bytes[..]).unwrap();
    assert_eq!(log.header, header());
    assert!(log.report.is_clean(), "{:?}", log.report);
    assert_eq!(log.blocks.len(), 1);
    assert_eq!(log.blocks[0].frame.thread, 3);
    assert_eq!(log.blocks[0].frame.first_seq, 10);
    assert_eq!(log.blocks[0].frame.last_seq, 13);
    assert_eq!(log.blocks[0].events, events);
}
