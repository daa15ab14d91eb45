//! The fuzzer's inputs, read on every `cargo test` the way its `read_log` target reads
//! them (`fuzz/fuzz_targets/read_log.rs`): the seeds, and every input that ever made a
//! target fail (`fuzz/regressions/read_log/`). Nothing may panic; the seeds recorded by
//! the demo read whole.

use std::path::Path;

use memreplay_format::block::{decode_events, unpack_payload_into, BlockFrame, Compression};
use memreplay_format::{
    decode_records, merge_by_seq, unpack_records, Block, BlockError, Damage, Log, LogReader, Records,
};

fn read_like_the_fuzzer(data: &[u8]) -> Option<Log> {
    if let Ok(mut reader) = LogReader::new(data) {
        let (mut buf, mut one, mut two) = (Vec::new(), Records::default(), Records::default());
        while let Ok(Some(block)) = reader.next_block() {
            let _ = block.decode_with(&mut buf);
            // Under a matching checksum, so that a changed payload reaches the decoders.
            let block =
                Block { frame: BlockFrame { payload_crc: crc32fast::hash(&block.stored), ..block.frame }, ..block };
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
    let log = Log::read(data).ok()?;
    let _ = merge_by_seq(&log.blocks).len();
    Some(log)
}

fn inputs(dir: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz").join(dir);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn seeds_and_regressions_read_without_panicking() {
    let seeds = inputs("seeds/read_log");
    assert!(seeds.len() >= 5, "the seeds are there: {}", seeds.len());
    let mut baseline_events = Vec::new();
    // Without the `zstd` feature, the seeds stored with zstd read with each zstd block
    // a bad block that says zstd is not built in, and nothing else wrong.
    let not_built_in = |d: &Damage| matches!(d, Damage::BadBlock { error: BlockError::NotBuiltIn { .. }, .. });
    for (name, data) in &seeds {
        let log = read_like_the_fuzzer(data).unwrap_or_else(|| panic!("seed {name} is a log"));
        let whole = cfg!(feature = "zstd") || log.report.damage.is_empty();
        if name == "demo.mrl" || name.starts_with("baseline") {
            if whole {
                assert!(log.report.is_clean(), "{name}: {:?}", log.report);
                assert!(log.blocks.iter().map(|b| b.events.len()).sum::<usize>() > 1000, "{name}");
            } else {
                assert!(log.report.damage.iter().all(not_built_in), "{name}: {:?}", log.report);
            }
        }
        if name == "sizes-by-stack.mrl" {
            // A recording of the preload tests' C program with `compression=lz4-columns`:
            // its busy threads' blocks hold sizes as deltas (format 1.6).
            assert!(log.report.is_clean(), "{name}: {:?}", log.report);
            assert!(log.blocks.iter().any(|b| b.frame.compression == Compression::Lz4ColumnsSizeDeltas), "{name}");
        }
        if name.starts_with("baseline") && whole {
            // The baseline recompressed (zstd, field columns): the same events.
            baseline_events.push(log.blocks.iter().flat_map(|b| b.events.clone()).collect::<Vec<_>>());
        }
    }
    // Without zstd: the baseline and its LZ4 columns.
    let baselines = if cfg!(feature = "zstd") { 3 } else { 2 };
    assert_eq!(baseline_events.len(), baselines, "the baseline, with zstd blocks and with LZ4 field columns");
    assert!(baseline_events.iter().all(|e| *e == baseline_events[0]));
    for (_, data) in inputs("regressions/read_log") {
        read_like_the_fuzzer(&data);
    }
}
