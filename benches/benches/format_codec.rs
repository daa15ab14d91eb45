//! Encode and decode throughput of `memreplay-format` on a synthetic stream shaped like
//! a recording: allocations and frees with 1-3 sequence gaps (other threads' events),
//! addresses reused from a live set, a few hundred callstacks, a `Time` every 1024 events.
//!
//! - `encode`: `EventEncoder::push` only (varint/delta encoding, blocks of 64 KiB);
//! - `encode_write`: the same through `LogWriter` into a `Vec` (adds LZ4, CRC, framing);
//! - `decode_payloads`: `decode_events` over the blocks' uncompressed payloads;
//! - `decode_records`: `decode_records` (the analyzer's compact records) over the same;
//! - `read`: `Log::read` of the whole log from memory (framing, CRC, LZ4, decoding);
//! - `stored_to_records/METHOD`: `unpack_records` (the analyzer's way into a stored block:
//!   CRC, decompression, records) over the same events stored with LZ4, zstd and
//!   zstd-columns; and `stored_to_records/zstd-columns-joined`, the two steps it stands
//!   for (`unpack_payload_into`, which joins the columns into the payload, then
//!   `decode_records`), for what reading columns without joining them saves.
//!
//! `cargo bench -p memreplay-benches --bench format_codec`

use std::hint::black_box;

use criterion::{Criterion, Throughput};
use memreplay_format::block::{decode_events, unpack_payload, unpack_payload_into, BlockFrame, FRAME_LEN};
use memreplay_format::{
    decode_records, unpack_records, Event, EventEncoder, FileHeader, Log, LogReader, LogWriter, PayloadCompression,
    PayloadCompressor, Records, HEAP_DOMAIN,
};

const EVENTS: usize = 256 * 1024;
const BLOCK_TARGET: usize = 64 << 10;

fn synthetic(n: usize) -> Vec<Event> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut events = Vec::with_capacity(n + n / 64);
    let mut live: Vec<u64> = Vec::new();
    let mut seq = 1u64;
    let mut next_addr = 0x5555_0000_0000u64;
    let mut stacks_defined = 0u32;
    let mut ns = 0u64;
    while events.len() < n {
        if events.len() % 1024 == 0 {
            ns += 1_000 + rnd() % 50_000;
            events.push(Event::Time { ns });
        }
        seq += 1 + rnd() % 3;
        let r = rnd() % 100;
        if r < 52 || live.is_empty() {
            let addr = if r < 40 && !live.is_empty() {
                // Reuse-like: near a live block.
                live[(rnd() as usize) % live.len()] + 64 * (1 + rnd() % 8)
            } else {
                next_addr += 16 * (1 + rnd() % 64);
                next_addr
            };
            let stack = 1 + (rnd() % 300) as u32;
            if stack > stacks_defined {
                stacks_defined += 1;
                let frames = (0..16).map(|i| 0x5555_5555_0000 + i * 0x100 + rnd() % 0x80).collect();
                events.push(Event::DefineStack { id: stacks_defined, frames });
            }
            let stack = stack.min(stacks_defined);
            let size = [16, 24, 32, 48, 64, 96, 128, 256, 1024, 4096][(rnd() % 10) as usize];
            events.push(Event::Alloc { seq, domain: HEAP_DOMAIN, addr, size, align_log2: 3, stack });
            live.push(addr);
        } else {
            // Mostly LIFO, sometimes an older block.
            let i = if rnd() % 4 == 0 { (rnd() as usize) % live.len() } else { live.len() - 1 };
            let addr = live.swap_remove(i);
            events.push(Event::Free { seq, domain: HEAP_DOMAIN, addr, stack: 0 });
        }
    }
    events
}

fn header() -> FileHeader {
    FileHeader { exe_path: "/bench".into(), recorder: "bench".into(), ..memreplay_fixtures::header() }
}

fn encode_only(events: &[Event], enc: &mut EventEncoder) -> usize {
    let mut bytes = 0;
    for e in events {
        enc.push(e);
        if enc.len() >= BLOCK_TARGET {
            bytes += enc.len();
            enc.clear();
        }
    }
    bytes += enc.len();
    enc.clear();
    bytes
}

fn write_log(events: &[Event], out: Vec<u8>) -> Vec<u8> {
    let mut w = LogWriter::new(out, &header()).expect("vec");
    let mut enc = EventEncoder::new();
    for e in events {
        enc.push(e);
        if enc.len() >= BLOCK_TARGET {
            w.write_block(1, &mut enc).expect("vec");
        }
    }
    w.write_block(1, &mut enc).expect("vec");
    let (out, _) = w.finish(0, 0).expect("vec");
    out
}

fn payloads(log: &[u8]) -> Vec<Vec<u8>> {
    let mut r = LogReader::new(log).expect("log");
    let mut out = Vec::new();
    while let Some(b) = r.next_block().expect("memory") {
        out.push(unpack_payload(&b.frame, &b.stored).expect("payload"));
    }
    out
}

/// `events` in blocks of 64 KiB stored with `method`: each block's frame and stored bytes.
fn stored_blocks(events: &[Event], method: PayloadCompression) -> Vec<(BlockFrame, Vec<u8>)> {
    let mut compressor = PayloadCompressor::new(method);
    let mut enc = EventEncoder::new();
    let mut blocks = Vec::new();
    let mut finish = |enc: &mut EventEncoder| {
        let mut bytes = Vec::new();
        enc.finish_compressed(1, &mut compressor, &mut bytes);
        let frame = BlockFrame::parse(bytes[..FRAME_LEN].try_into().expect("a frame")).expect("valid");
        blocks.push((frame, bytes[FRAME_LEN..].to_vec()));
    };
    for e in events {
        enc.push(e);
        if enc.len() >= BLOCK_TARGET {
            finish(&mut enc);
        }
    }
    finish(&mut enc);
    blocks
}

fn bench(c: &mut Criterion) {
    let events = synthetic(EVENTS);
    let n = events.len() as u64;
    let log = write_log(&events, Vec::new());
    let raw = payloads(&log);
    let raw_bytes: usize = raw.iter().map(Vec::len).sum();
    println!(
        "FORMAT synthetic stream: {n} events, raw payload {raw_bytes} bytes = {:.2} B/event, \
         log {} bytes = {:.2} B/event ({} blocks)",
        raw_bytes as f64 / n as f64,
        log.len(),
        log.len() as f64 / n as f64,
        raw.len()
    );
    let check = Log::read(&log[..]).expect("reads");
    assert!(check.report.is_clean());
    assert_eq!(check.events().count() as u64, n);

    let mut g = c.benchmark_group("format_codec");
    g.throughput(Throughput::Elements(n));
    let mut enc = EventEncoder::new();
    g.bench_function("encode", |b| b.iter(|| black_box(encode_only(black_box(&events), &mut enc))));
    let mut out = Vec::with_capacity(log.len() * 2);
    g.bench_function("encode_write", |b| {
        b.iter(|| {
            out.clear();
            out = write_log(black_box(&events), std::mem::take(&mut out));
            black_box(out.len())
        })
    });
    g.bench_function("decode_payloads", |b| {
        b.iter(|| {
            let mut k = 0usize;
            for p in &raw {
                for e in decode_events(black_box(p)) {
                    black_box(e.expect("valid"));
                    k += 1;
                }
            }
            k
        })
    });
    g.bench_function("decode_records", |b| {
        let mut out = Records::default();
        b.iter(|| {
            let mut k = 0usize;
            for p in &raw {
                out.clear();
                decode_records(black_box(p), &mut out).expect("valid");
                k += out.records.len();
            }
            black_box(k)
        })
    });
    g.bench_function("read", |b| b.iter(|| black_box(Log::read(black_box(&log[..])).expect("reads")).blocks.len()));
    let methods = [
        ("lz4", PayloadCompression::Lz4),
        ("zstd", PayloadCompression::Zstd { level: 1 }),
        ("zstd-columns", PayloadCompression::ZstdColumns { level: 1 }),
    ];
    let mut buf = Vec::new();
    let mut out = Records::default();
    for (name, method) in methods {
        let blocks = stored_blocks(&events, method);
        g.bench_function(format!("stored_to_records/{name}"), |b| {
            b.iter(|| {
                let mut k = 0usize;
                for (frame, stored) in &blocks {
                    out.clear();
                    unpack_records(frame, black_box(stored), &mut buf, &mut out).expect("valid");
                    k += out.records.len();
                }
                black_box(k)
            })
        });
        if name == "zstd-columns" {
            g.bench_function("stored_to_records/zstd-columns-joined", |b| {
                b.iter(|| {
                    let mut k = 0usize;
                    for (frame, stored) in &blocks {
                        out.clear();
                        let payload = unpack_payload_into(frame, black_box(stored), &mut buf).expect("valid");
                        decode_records(payload, &mut out).expect("valid");
                        k += out.records.len();
                    }
                    black_box(k)
                })
            });
        }
    }
    g.finish();
}

fn main() {
    let mut c = memreplay_benches::criterion();
    bench(&mut c);
    c.final_summary();
}
