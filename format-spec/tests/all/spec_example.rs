//! The worked example of SPEC.md §9, byte for byte: if this fails, the format changed
//! and SPEC.md must change with it.

use memreplay_format::*;

fn example() -> Vec<u8> {
    let header = FileHeader {
        version_major: 1,
        version_minor: 0,
        flags: header_flags::CALLSTACKS_ON_ALLOC,
        pointer_width: 8,
        pid: 1234,
        start_unix_ns: 1_700_000_000_000_000_000,
        ticks_per_second: 1_000_000_000,
        max_stack_depth: 32,
        os: "linux".into(),
        arch: "x86_64".into(),
        exe_path: "/g".into(),
        recorder: "mr".into(),
    };
    let events = [
        Event::Time { ns: 1500 },
        Event::DefineString { id: 1, text: "Mesh".into() },
        Event::DefineContextType { id: 1, name: 1 },
        Event::ContextPush { ty: 1, name: 0, flags: context_flags::INSTANCE },
        Event::Alloc { seq: 1, domain: HEAP_DOMAIN, addr: 0x5000_1000, size: 256, align_log2: 4, stack: 0 },
        Event::ContextPop,
        Event::Realloc {
            free_seq: 2,
            seq: 3,
            old_addr: 0x5000_1000,
            new_addr: 0x5000_2000,
            new_size: 512,
            align_log2: 4,
            stack: 0,
        },
        Event::Free { seq: 4, domain: HEAP_DOMAIN, addr: 0x5000_2000, stack: 0 },
    ];
    let mut bytes = Vec::new();
    let mut w = LogWriter::new(&mut bytes, &header).unwrap();
    let mut enc = EventEncoder::new();
    events.iter().for_each(|e| enc.push(e));
    w.write_block(1, &mut enc).unwrap();
    w.finish(0, 2000).unwrap();
    bytes
}

/// SPEC.md §9's hex dump, without its annotations.
const EXPECTED: &str = "
    89 4d 52 4c 0d 0a 1a 0a 01 00 00 00 29 00 00 00
    01 00 00 00 08 d2 09 80 80 a8 b1 e3 9f e7 cb 17
    80 94 eb dc 03 20 05 6c 69 6e 75 78 06 78 38 36
    5f 36 34 02 2f 67 02 6d 72 37 e5 d8 3c 4d 52 4c
    42 01 00 00 00 01 00 00 00 08 00 00 00 01 00 00
    00 00 00 00 00 04 00 00 00 00 00 00 00 2c 00 00
    00 2c 00 00 00 f2 10 c0 1c db 0a 00 3d 0b b8 17
    20 06 01 04 4d 65 73 68 22 02 01 01 07 01 00 01
    01 02 80 c0 80 80 0a 80 02 00 04 08 03 02 02 00
    80 40 80 04 00 04 80 02 00 4d 52 4c 42 02 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 05 00 00 00 05 00 00
    00 cc 2e 71 2f 25 6d 2e 31 01 08 00 d0 0f
";

fn dump(b: &[u8]) -> String {
    let mut out = String::new();
    for (i, c) in b.chunks(16).enumerate() {
        let hex: Vec<String> = c.iter().map(|x| format!("{x:02x}")).collect();
        out += &format!("{:04x}  {}\n", i * 16, hex.join(" "));
    }
    out
}

#[test]
fn the_worked_example_is_exact() {
    let expected: Vec<u8> = EXPECTED.split_whitespace().map(|h| u8::from_str_radix(h, 16).unwrap()).collect();
    let got = example();
    assert!(got == expected, "the example log is now:\n{}", dump(&got));

    let log = Log::read(&got[..]).unwrap();
    assert!(log.report.is_clean());
    assert_eq!(log.blocks.len(), 1);
    assert_eq!(log.blocks[0].frame.compression, Compression::None);
    assert_eq!((log.blocks[0].frame.first_seq, log.blocks[0].frame.last_seq), (1, 4));
}
