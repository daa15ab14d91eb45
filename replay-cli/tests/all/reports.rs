//! The reports (`summarize`, `tree`, `leaks`, `efficiency`, `instances`) through the
//! binary, on a small log written here by hand, with every figure worked out below.
//!
//! The log (sequence numbers in brackets; "main" is stream 1, "worker" stream 2):
//!
//! ```text
//! main    Level:forest            [1]  heap   0x1000  1000  stack 1
//! main      Texture:rock (inst)   [2]  heap   0x2000  4096  stack 2
//! main                            [3]  vram  0x100000 65536 stack 2
//! worker  attach 0x2010 [4] (inside 0x2000: belongs to Texture:rock)
//! worker                          [5]  heap   0xb000   512  (no stack)
//! main      Texture:sand (inst)   [6]  heap   0x4000  2048  stack 2
//! main                            [7]  vram  0x200000 32768 stack 2
//! main      Entities:all          [8]  heap   0x8000  1024  stack 3
//! main                            [9]  usage  0x8000 used 256
//! main                           [10]  pool   0x8000   128  (entity pool: within the heap)
//! main                           [11]  pool   0x8080   128
//! main    label "loaded" [12] at 2 ms, frame 0 starts [13]
//! main    Frame:update           [14]  heap   0x9000    64, freed at [15] (a temporary)
//! main    Level:forest again  [16,17]  realloc 0x1000 -> 0xa000, 3000 bytes, stack 1
//! main    Frame:update again     [18]  pool free 0x8080
//! worker  Audio:mixer            [19]  heap   0xc000   300  stack 5 (never freed)
//! worker                         [20]  free 0x4000 (main's: a cross-thread free)
//! main    frame 1 starts [21] at 3 ms; [22] vram free 0x200000
//! ```
//!
//! Heap: peaks at 10 980 bytes in 6 allocations at [19] (2.5 ms, frame 0, after
//! "loaded"); 8 932 bytes in 5 live at the end; 12 044 bytes in 8 allocated in all; one
//! temporary of 64 bytes. VRAM: peak 98 304 (2) at [7], 65 536 (1) live at the end. Entity
//! pool: peak 256 (2), 128 (1) at the end, never added to the heap's totals.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::common::{self, cli, temp_in};
use memreplay_format::{
    context_flags, header_flags, DomainKind, Event, EventEncoder, FileHeader, LogWriter, VERSION_MAJOR,
};
use serde_json::Value;

fn temp(name: &str) -> PathBuf {
    temp_in("reports", name)
}

fn header() -> FileHeader {
    common::game_header()
}

const HEAP: u32 = 0;
const VRAM: u32 = 1;
const POOL: u32 = 2;

/// Writes the log described in the module comment (once per test, under `name`).
fn write_log(name: &str) -> PathBuf {
    let path = temp(name);
    let mut w = LogWriter::new(std::fs::File::create(&path).unwrap(), &header()).unwrap();
    let s = |id: u32, text: &str| Event::DefineString { id, text: text.into() };
    let alloc = |seq: u64, domain: u32, addr: u64, size: u64, stack: u32| Event::Alloc {
        seq,
        domain,
        addr,
        size,
        align_log2: 3,
        stack,
    };
    let free = |seq: u64, domain: u32, addr: u64| Event::Free { seq, domain, addr, stack: 0 };
    let push = |ty: u32, name: u32, flags: u8| Event::ContextPush { ty, name, flags };

    let mut meta = EventEncoder::new();
    for e in [
        s(1, "main"),
        s(2, "worker"),
        s(3, "Level"),
        s(4, "forest"),
        s(5, "Texture"),
        s(6, "rock"),
        s(7, "sand"),
        s(8, "Entities"),
        s(9, "all"),
        s(10, "Frame"),
        s(11, "update"),
        s(12, "Audio"),
        s(13, "mixer"),
        s(14, "loaded"),
        s(15, "vram"),
        s(16, "entity pool"),
        Event::DefineContextType { id: 1, name: 3 },
        Event::DefineContextType { id: 2, name: 5 },
        Event::DefineContextType { id: 3, name: 8 },
        Event::DefineContextType { id: 4, name: 10 },
        Event::DefineContextType { id: 5, name: 12 },
        Event::DefineDomain { id: VRAM, name: 15, kind: DomainKind::GpuLocal, capacity: 1 << 20, parent: None },
        Event::DefineDomain { id: POOL, name: 16, kind: DomainKind::Pool, capacity: 4096, parent: Some(HEAP) },
        Event::DefineStack { id: 1, frames: vec![0x40_1000, 0x40_2000] },
        Event::DefineStack { id: 2, frames: vec![0x40_3000] },
        Event::DefineStack { id: 3, frames: vec![0x40_4000, 0x40_5000, 0x40_6000] },
        Event::DefineStack { id: 5, frames: vec![0x40_7000] },
    ] {
        meta.push(&e);
    }
    w.write_block(0, &mut meta).unwrap();

    let mut main = EventEncoder::new();
    for e in [
        Event::Time { ns: 1_000_000 },
        Event::ThreadInfo { os_tid: 100, name: 1 },
        push(1, 4, 0),
        alloc(1, HEAP, 0x1000, 1000, 1),
        push(2, 6, context_flags::INSTANCE),
        alloc(2, HEAP, 0x2000, 4096, 2),
        alloc(3, VRAM, 0x10_0000, 65536, 2),
        Event::ContextPop,
        push(2, 7, context_flags::INSTANCE),
        alloc(6, HEAP, 0x4000, 2048, 2),
        alloc(7, VRAM, 0x20_0000, 32768, 2),
        Event::ContextPop,
        push(3, 9, 0),
        alloc(8, HEAP, 0x8000, 1024, 3),
        Event::Usage { seq: 9, addr: 0x8000, used: 256 },
        alloc(10, POOL, 0x8000, 128, 0),
        alloc(11, POOL, 0x8080, 128, 0),
        Event::ContextPop,
        Event::ContextPop,
        Event::Time { ns: 2_000_000 },
        Event::Label { seq: 12, name: 14 },
        Event::FrameStart { seq: 13, frame: 0 },
        push(4, 11, 0),
        alloc(14, HEAP, 0x9000, 64, 0),
        free(15, HEAP, 0x9000),
        Event::ContextPop,
        push(1, 4, 0),
        Event::Realloc {
            free_seq: 16,
            seq: 17,
            old_addr: 0x1000,
            new_addr: 0xa000,
            new_size: 3000,
            align_log2: 3,
            stack: 1,
        },
        Event::ContextPop,
        push(4, 11, 0),
        free(18, POOL, 0x8080),
        Event::ContextPop,
        Event::Time { ns: 3_000_000 },
        Event::FrameStart { seq: 21, frame: 1 },
        free(22, VRAM, 0x20_0000),
    ] {
        main.push(&e);
    }
    w.write_block(1, &mut main).unwrap();

    let mut worker = EventEncoder::new();
    for e in [
        Event::Time { ns: 1_500_000 },
        Event::ThreadInfo { os_tid: 101, name: 2 },
        Event::AttachPush { seq: 4, addr: 0x2010 },
        alloc(5, HEAP, 0xb000, 512, 0),
        Event::AttachPop,
        Event::Time { ns: 2_500_000 },
        push(5, 13, 0),
        alloc(19, HEAP, 0xc000, 300, 5),
        Event::ContextPop,
        free(20, HEAP, 0x4000),
    ] {
        worker.push(&e);
    }
    w.write_block(2, &mut worker).unwrap();
    w.finish(0, 4_000_000).unwrap();
    path
}

/// Runs a report and checks it succeeded.
fn run(args: &[&str]) -> String {
    let o = cli(args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{args:?}: {out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// Runs a report on a damaged log: it succeeds, and says on stderr what was lost
/// (`needle`). Returns stdout.
fn run_damaged(args: &[&str], needle: &str) -> String {
    let o = cli(args);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {out}{err}");
    assert!(err.starts_with("replay-cli: warning: ") && err.contains(needle), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    out
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = run(&all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn contains_all(out: &str, needles: &[&str]) {
    for n in needles {
        assert!(out.contains(n), "missing `{n}` in:\n{out}");
    }
}

/// The element of `array` whose `key` is `value`.
fn find<'a>(array: &'a Value, key: &str, value: &str) -> &'a Value {
    array
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {array}"))
        .iter()
        .find(|v| v[key] == value)
        .unwrap_or_else(|| panic!("no {key} = {value} in {array}"))
}

fn amount(v: &Value) -> (u64, u64) {
    (v["bytes"].as_u64().unwrap(), v["count"].as_u64().unwrap())
}

#[test]
fn summarize_json_has_every_figure() {
    let path = write_log("summarize.mrl");
    let v = json(&["summarize", path.to_str().unwrap()]);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["report"], "summarize");

    let c = &v["capture"];
    assert_eq!(c["duration_ns"], 4_000_000);
    assert_eq!(c["duration_is_lower_bound"], false);
    // Every record (a realloc counts once): 27 + 35 + 10.
    assert_eq!(c["events"], 72);
    assert_eq!(
        (c["frames"].as_u64(), c["first_frame"].as_u64(), c["last_frame"].as_u64()),
        (Some(2), Some(0), Some(1))
    );
    assert_eq!(c["labels"][0]["name"], "loaded");
    assert_eq!(c["labels"][0]["time_ns"], 2_000_000);
    assert_eq!(c["labels"][0]["seq"], 12);
    assert_eq!(c["threads"][1]["name"], "main");
    assert_eq!(c["threads"][1]["os_tid"], 100);
    assert_eq!(c["threads"][2]["name"], "worker");
    assert_eq!(c["recorded"]["callstacks_on_alloc"], true);
    assert_eq!(c["recorded"]["callstacks_on_free"], false);
    assert_eq!(c["recorded"]["usage_changes"], true);
    assert_eq!(v["integrity"]["complete"], true);
    assert_eq!(v["integrity"]["clean"], true);
    assert_eq!(v["integrity"]["lost_events"], 0);
    assert!(v["anomalies"].as_object().unwrap().values().all(|n| n == 0), "{}", v["anomalies"]);

    let d = &v["domains"];
    assert_eq!(d.as_array().unwrap().len(), 3);
    let heap = &d[0];
    assert_eq!(heap["domain"]["name"], "heap");
    assert_eq!(heap["domain"]["top_level"], true);
    assert_eq!(amount(&heap["live"]), (8932, 5));
    assert_eq!(amount(&heap["total"]), (12044, 8));
    assert_eq!(amount(&heap["temporary"]), (64, 1));
    let p = &heap["peak"];
    assert_eq!((p["bytes"].as_u64(), p["count"].as_u64(), p["seq"].as_u64()), (Some(10_980), Some(6), Some(19)));
    assert_eq!((p["time_ns"].as_u64(), p["frame"].as_u64()), (Some(2_500_000), Some(0)));
    assert_eq!(p["after_label"], "loaded");

    let vram = &d[1];
    assert_eq!(vram["domain"]["name"], "vram");
    assert_eq!(vram["domain"]["kind"], "gpu-local");
    assert_eq!(vram["domain"]["capacity"], 1 << 20);
    assert_eq!(amount(&vram["live"]), (65536, 1));
    assert_eq!(amount(&vram["total"]), (98304, 2));
    assert_eq!((vram["peak"]["bytes"].as_u64(), vram["peak"]["seq"].as_u64()), (Some(98304), Some(7)));
    // The clock at seq 7: the main thread last read 1 ms, but the worker read 1.5 ms
    // before its seq 4, so seq 7 came after 1.5 ms.
    assert_eq!(vram["peak"]["time_ns"], 1_500_000);
    assert_eq!(vram["peak"]["after_label"], Value::Null);
    assert_eq!(vram["peak"]["frame"], Value::Null);

    let pool = &d[2];
    assert_eq!(pool["domain"]["name"], "entity pool");
    assert_eq!(pool["domain"]["parent"], 0);
    assert_eq!(pool["domain"]["parent_name"], "heap");
    assert_eq!(pool["domain"]["top_level"], false);
    assert_eq!(amount(&pool["live"]), (128, 1));
    assert_eq!(amount(&pool["total"]), (256, 2));
    assert_eq!((pool["peak"]["bytes"].as_u64(), pool["peak"]["count"].as_u64()), (Some(256), Some(2)));

    // The pool's entities sit inside the heap's 0x8000 block: not added again.
    assert_eq!(v["total"]["domains"], serde_json::json!(["heap", "vram"]));
    assert_eq!(amount(&v["total"]["live"]), (8932 + 65536, 6));
    assert_eq!(amount(&v["total"]["total"]), (12044 + 98304, 10));

    let top = find(&v["top_contexts"], "domain", "heap");
    let inc = &top["peak"]["inclusive"];
    assert_eq!(inc[0], serde_json::json!({"context": "Level:forest", "bytes": 10680, "count": 5}));
    assert_eq!(inc[1], serde_json::json!({"context": "Level:forest/Texture:rock", "bytes": 4608, "count": 2}));
    let exc = &top["peak"]["exclusive"];
    assert_eq!(exc[0], serde_json::json!({"context": "Level:forest/Texture:rock", "bytes": 4608, "count": 2}));
    assert_eq!(exc[1], serde_json::json!({"context": "Level:forest", "bytes": 3000, "count": 1}));
    assert_eq!(exc[2], serde_json::json!({"context": "Level:forest/Texture:sand", "bytes": 2048, "count": 1}));
    let live = &top["live"]["inclusive"];
    assert_eq!(live[0], serde_json::json!({"context": "Level:forest", "bytes": 8632, "count": 4}));
    assert_eq!(live.as_array().unwrap().len(), 4, "{live}");
    assert_eq!(top["live"]["exclusive"][3], serde_json::json!({"context": "Audio:mixer", "bytes": 300, "count": 1}));
    assert_eq!(top["live"]["exclusive"].as_array().unwrap().len(), 4);

    let inst = find(&v["instances"], "domain", "heap");
    let tex = find(&inst["types"], "name", "Texture");
    assert_eq!((tex["contexts"].as_u64(), tex["instances"].as_u64()), (Some(2), Some(2)));
    assert_eq!(tex["bytes"], 4608);
    assert_eq!(tex["bytes_per_instance"], 2304.0);
    assert_eq!(tex["peak_bytes_per_instance"], 3328.0);
    assert_eq!(tex["total_bytes_per_instance"], 3328.0);
    let tex = find(&find(&v["instances"], "domain", "vram")["types"], "name", "Texture");
    assert_eq!(tex["bytes_per_instance"], 32768.0);
    assert_eq!(tex["peak_bytes_per_instance"], 49152.0);

    let e = &v["efficiency"];
    assert_eq!(e["live"]["used_bytes"], 256);
    assert_eq!(e["live"]["capacity_bytes"], 1024);
    assert_eq!(e["live"]["wasted_bytes"], 768);
    assert_eq!(e["live"]["efficiency"], 0.25);
    assert_eq!(e["peak"]["efficiency"], 0.25);
    assert_eq!(e["worst_containers"][0]["address"], "0x8000");
    assert_eq!(e["worst_containers"][0]["context"], "Level:forest/Entities:all");
    assert_eq!(e["least_efficient_contexts"][0]["context"], "Level:forest/Entities:all");

    let leaks = &v["leaks"];
    assert_eq!(
        leaks[0],
        serde_json::json!({"domain": "vram", "context": "Level:forest/Texture:rock", "bytes": 65536, "count": 1})
    );
    assert_eq!(
        leaks[1],
        serde_json::json!({"domain": "heap", "context": "Level:forest/Texture:rock", "bytes": 4608, "count": 2})
    );
    assert_eq!(leaks.as_array().unwrap().len(), 6, "{leaks}");
    assert_eq!(
        leaks[5],
        serde_json::json!({"domain": "entity pool", "context": "Level:forest/Entities:all", "bytes": 128, "count": 1})
    );

    let temps = &v["temporaries"];
    assert_eq!(temps.as_array().unwrap().len(), 1);
    assert_eq!(temps[0]["context"], "Frame:update");
    assert_eq!((temps[0]["bytes"].as_u64(), temps[0]["count"].as_u64()), (Some(64), Some(1)));
    assert_eq!(temps[0]["share"], 1.0);
}

/// The whole text of `summarize` on the log (after its first line, the path).
const SUMMARY_TEXT: &str = r#"  recorded   2000-02-29 12:34:56.789 UTC, pid 7 /games/forest, by memreplay test (format 1.6)
  captured   allocations, allocation callstacks, usage changes; callstacks up to 16 frames
  duration   4.000 ms, 72 events, 2 frames (0..=1)
  threads    main (35 events), worker (10 events)
  labels     "loaded" at 2.000 ms
  integrity  complete, no damage; no events lost
  anomalies  none

memory by domain
  domain            kind          capacity  live at end  count      peak  count  total allocated  count  peak at
  heap              heap                 -      8.7 KiB      5  10.7 KiB      6         11.8 KiB      8  2.500 ms, frame 0, after "loaded"
  vram              gpu-local      1.0 MiB     64.0 KiB      1  96.0 KiB      2         96.0 KiB      2  1.500 ms
  entity pool       pool in heap   4.0 KiB        128 B      1     256 B      2            256 B      2  1.500 ms
  all (top-level)*                             72.7 KiB      6                         107.8 KiB     10
  * domains within another (pools) are left out: their bytes are already in their parent

heap: top contexts at the peak (10.7 KiB, 2.500 ms, frame 0, after "loaded")
  inclusive  count  context
   10.4 KiB      5  Level:forest
    4.5 KiB      2  Level:forest/Texture:rock
    2.0 KiB      1  Level:forest/Texture:sand
    1.0 KiB      1  Level:forest/Entities:all
      300 B      1  Audio:mixer
  exclusive  count  context
    4.5 KiB      2  Level:forest/Texture:rock
    2.9 KiB      1  Level:forest
    2.0 KiB      1  Level:forest/Texture:sand
    1.0 KiB      1  Level:forest/Entities:all
      300 B      1  Audio:mixer

heap: top contexts at the end (8.7 KiB)
  inclusive  count  context
    8.4 KiB      4  Level:forest
    4.5 KiB      2  Level:forest/Texture:rock
    1.0 KiB      1  Level:forest/Entities:all
      300 B      1  Audio:mixer
  exclusive  count  context
    4.5 KiB      2  Level:forest/Texture:rock
    2.9 KiB      1  Level:forest
    1.0 KiB      1  Level:forest/Entities:all
      300 B      1  Audio:mixer

vram: top contexts at the peak (96.0 KiB, 1.500 ms)
  inclusive  count  context
   96.0 KiB      2  Level:forest
   64.0 KiB      1  Level:forest/Texture:rock
   32.0 KiB      1  Level:forest/Texture:sand
  exclusive  count  context
   64.0 KiB      1  Level:forest/Texture:rock
   32.0 KiB      1  Level:forest/Texture:sand

vram: top contexts at the end (64.0 KiB)
  inclusive  count  context
   64.0 KiB      1  Level:forest
   64.0 KiB      1  Level:forest/Texture:rock
  exclusive  count  context
   64.0 KiB      1  Level:forest/Texture:rock

entity pool: top contexts at the peak (256 B, 1.500 ms)
  inclusive  count  context
      256 B      2  Level:forest
      256 B      2  Level:forest/Entities:all
  exclusive  count  context
      256 B      2  Level:forest/Entities:all

entity pool: top contexts at the end (128 B)
  inclusive  count  context
      128 B      1  Level:forest
      128 B      1  Level:forest/Entities:all
  exclusive  count  context
      128 B      1  Level:forest/Entities:all

instances (bytes per instance, sub-contexts included)
  type     domain  instances    at end   at peak  allocated in all
  Texture  heap            2   2.2 KiB   3.2 KiB           3.2 KiB
  Texture  vram            2  32.0 KiB  48.0 KiB          48.0 KiB

container efficiency (containers that report their usage)
  at the end:         256 B of 1.0 KiB (25.0%)
  at the heap's peak: 256 B of 1.0 KiB (25.0%)
  least efficient contexts    live  at peak  wasted at peak
  Level:forest/Entities:all  25.0%    25.0%           768 B
  worst live containers              used  capacity  wasted  efficiency
  0x8000 Level:forest/Entities:all  256 B   1.0 KiB   768 B       25.0%

leaks (live at the end, by context)
     bytes  count  domain       context
  64.0 KiB      1  vram         Level:forest/Texture:rock
   4.5 KiB      2  heap         Level:forest/Texture:rock
   2.9 KiB      1  heap         Level:forest
   1.0 KiB      1  heap         Level:forest/Entities:all
     300 B      1  heap         Audio:mixer
     128 B      1  entity pool  Level:forest/Entities:all

temporaries (freed before their thread allocated again, by context)
  count  bytes   share  domain  context
      1   64 B  100.0%  heap    Frame:update

allocation sites (by bytes allocated in all, every thread)
  allocated  count   at peak    at end  temporaries  domain       callstack
   96.0 KiB      2  96.0 KiB  64.0 KiB            0  vram         stack 2: 0x403000
    6.0 KiB      2   6.0 KiB   4.0 KiB            0  heap         stack 2: 0x403000
    3.9 KiB      2   2.9 KiB   2.9 KiB            0  heap         stack 1: 0x401000 < 0x402000
    1.0 KiB      1   1.0 KiB   1.0 KiB            0  heap         stack 3: 0x404000 < 0x405000 < 0x406000
      576 B      2     512 B     512 B            1  heap         (no callstack)
      300 B      1     300 B     300 B            0  heap         stack 5: 0x407000
      256 B      2     256 B     128 B            0  entity pool  (no callstack)

symbols: 7 addresses: 0 with file and line, 0 function only, 7 unresolved (in no recorded module (7)); 0.000 s
"#;

#[test]
fn summarize_text_reads_well() {
    let path = write_log("summarize-text.mrl");
    let out = run(&["summarize", path.to_str().unwrap()]);
    let (first, rest) = out.split_once('\n').unwrap();
    assert_eq!(first, path.to_str().unwrap());
    let rest = steady(rest);
    assert_eq!(rest, SUMMARY_TEXT, "got:\n{rest}");
}

/// `text` with the time symbolication took (which varies) as 0.000 s.
fn steady(text: &str) -> String {
    text.lines()
        .map(|l| match l.strip_prefix("symbols: ").and_then(|s| s.rsplit_once("; ")) {
            Some((stats, _seconds)) => format!("symbols: {stats}; 0.000 s\n"),
            None => format!("{l}\n"),
        })
        .collect()
}

#[test]
fn summarize_at_a_label_and_a_frame() {
    let path = write_log("at.mrl");
    let p = path.to_str().unwrap();
    let v = json(&["summarize", p, "--at", "loaded"]);
    assert_eq!(v["selection"]["at"]["kind"], "label");
    assert_eq!(v["selection"]["at"]["label"], "loaded");
    assert_eq!(v["selection"]["at"]["seq"], 12);
    assert_eq!(v["selection"]["at"]["time_ns"], 2_000_000);
    assert_eq!(amount(&v["domains"][0]["live"]), (8680, 5));
    assert_eq!(amount(&v["domains"][1]["live"]), (98304, 2));
    assert_eq!(amount(&v["domains"][2]["live"]), (256, 2));
    // The peak is the domain's, wherever --at points.
    assert_eq!(v["domains"][0]["peak"]["bytes"], 10_980);
    let top = find(&v["top_contexts"], "domain", "heap");
    assert_eq!(top["live"]["inclusive"][0], serde_json::json!({"context": "Level:forest", "bytes": 8680, "count": 5}));

    let v = json(&["summarize", p, "--at", "frame:1"]);
    assert_eq!(v["selection"]["at"]["kind"], "frame");
    assert_eq!(v["selection"]["at"]["frame"], 1);
    assert_eq!(v["selection"]["at"]["time_ns"], 3_000_000);
    assert_eq!(amount(&v["domains"][0]["live"]), (8932, 5));
    // The VRAM free at [22] comes after frame 1 starts.
    assert_eq!(amount(&v["domains"][1]["live"]), (98304, 2));
    assert_eq!(amount(&v["domains"][2]["live"]), (128, 1));

    let out = run(&["summarize", p, "--at", "frame:0"]);
    contains_all(&out, &["live at frame 0", "heap: top contexts at the start of frame 0 (2.000 ms) (8.5 KiB)"]);
}

#[test]
fn tree_text_and_json() {
    let path = write_log("tree.mrl");
    let p = path.to_str().unwrap();
    let out = run(&["tree", p, "--domain", "heap"]);
    let expected = "\
heap: 8.7 KiB in 5 allocations live, peak 10.7 KiB, 11.8 KiB allocated in all
  context             bytes  count      own  own count      peak  instances  per instance  total allocated
  heap (all)        8.7 KiB      5      0 B          0  10.7 KiB                                  11.8 KiB
    Level:forest    8.4 KiB      4  2.9 KiB          1  10.4 KiB                                  11.4 KiB
      Texture:rock  4.5 KiB      2  4.5 KiB          2   4.5 KiB          1       4.5 KiB          4.5 KiB
      Entities:all  1.0 KiB      1  1.0 KiB          1   1.0 KiB                                   1.0 KiB
      Texture:sand      0 B      0      0 B          0   2.0 KiB          1         0.0 B          2.0 KiB
    Audio:mixer       300 B      1    300 B          1     300 B                                     300 B
    Frame:update        0 B      0      0 B          0       0 B                                      64 B
";
    assert!(out.ends_with(expected), "{out}");
    assert!(out.starts_with(&format!("{p}: context tree at the end\n")), "{out}");

    let v = json(&["tree", p]);
    assert_eq!(v["report"], "tree");
    let domains = v["domains"].as_array().unwrap();
    assert_eq!(domains.len(), 3);
    let root = &domains[0]["root"];
    assert_eq!((root["bytes"].as_u64(), root["count"].as_u64()), (Some(8932), Some(5)));
    assert_eq!((root["peak_bytes"].as_u64(), root["total_bytes"].as_u64()), (Some(10_980), Some(12_044)));
    let level = &root["children"][0];
    assert_eq!(level["path"], "Level:forest");
    assert_eq!(level["context_type"], "Level");
    assert_eq!(level["name"], "forest");
    assert_eq!(level["depth"], 1);
    assert_eq!((level["bytes"].as_u64(), level["count"].as_u64()), (Some(8632), Some(4)));
    assert_eq!((level["exclusive_bytes"].as_u64(), level["exclusive_count"].as_u64()), (Some(3000), Some(1)));
    assert_eq!((level["peak_bytes"].as_u64(), level["peak_count"].as_u64()), (Some(10_680), Some(5)));
    assert_eq!((level["total_bytes"].as_u64(), level["total_count"].as_u64()), (Some(11_680), Some(6)));
    assert_eq!(level["bytes_per_instance"], Value::Null);
    let rock = &level["children"][0];
    assert_eq!(rock["path"], "Level:forest/Texture:rock");
    assert_eq!(rock["instances"], 1);
    assert_eq!(rock["bytes_per_instance"], 4608.0);
    let sand = &level["children"][2];
    assert_eq!((sand["bytes"].as_u64(), sand["peak_bytes"].as_u64()), (Some(0), Some(2048)));
    let vram = &domains[1];
    assert_eq!(vram["domain"]["name"], "vram");
    assert_eq!(vram["root"]["children"][0]["children"][0]["bytes"], 65536);
    // Entities:all allocated both entities; the one Frame:update freed stays its.
    let pool = &domains[2]["root"]["children"];
    assert_eq!(pool.as_array().unwrap().len(), 1);
    assert_eq!(pool[0]["children"][0]["path"], "Level:forest/Entities:all");
    assert_eq!((pool[0]["bytes"].as_u64(), pool[0]["total_bytes"].as_u64()), (Some(128), Some(256)));
}

#[test]
fn tree_options() {
    let path = write_log("tree-options.mrl");
    let p = path.to_str().unwrap();
    // --depth 1: top-level contexts only.
    let v = json(&["tree", p, "--domain", "heap", "--depth", "1"]);
    let level = &v["domains"][0]["root"]["children"][0];
    assert_eq!(level["children"].as_array().unwrap().len(), 0);
    assert_eq!(level["hidden_children"], 3);
    assert_eq!(v["selection"]["depth"], 1);
    // --min-bytes: contexts under 1000 live bytes are left out.
    let v = json(&["tree", p, "--domain", "heap", "--min-bytes", "1000"]);
    let root = &v["domains"][0]["root"];
    let names: Vec<&str> = root["children"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["forest"]);
    assert_eq!(root["hidden_children"], 2);
    let kids: Vec<&str> =
        root["children"][0]["children"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(kids, ["rock", "all"]);
    // --sort name, total, count.
    let order = |sort: &str| -> Vec<String> {
        let v = json(&["tree", p, "--domain", "heap", "--sort", sort]);
        v["domains"][0]["root"]["children"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["path"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(order("name"), ["Audio:mixer", "Frame:update", "Level:forest"]);
    assert_eq!(order("total"), ["Level:forest", "Audio:mixer", "Frame:update"]);
    assert_eq!(order("count"), ["Level:forest", "Audio:mixer", "Frame:update"]);
    // --at: figures at the label, no totals.
    let v = json(&["tree", p, "--domain", "heap", "--at", "loaded"]);
    let root = &v["domains"][0]["root"];
    assert_eq!((root["bytes"].as_u64(), root["count"].as_u64()), (Some(8680), Some(5)));
    assert_eq!(root["total_bytes"], Value::Null);
    let level = &root["children"][0];
    assert_eq!(level["exclusive_bytes"], 1000);
    assert_eq!(find(&level["children"], "name", "sand")["bytes"], 2048);
    // Frame:update held nothing at the label or at the peak: not shown.
    assert!(root["children"].as_array().unwrap().iter().all(|c| c["name"] != "update"));
    // --thread: the worker's allocations only (its attach put one in Texture:rock).
    let v = json(&["tree", p, "--thread", "worker", "--domain", "heap"]);
    let root = &v["domains"][0]["root"];
    assert_eq!((root["bytes"].as_u64(), root["total_bytes"].as_u64()), (Some(812), Some(812)));
    assert_eq!(v["selection"]["thread"]["stream"], 2);
    let rock = &find(&root["children"], "name", "forest")["children"][0];
    assert_eq!((rock["name"].as_str(), rock["bytes"].as_u64()), (Some("rock"), Some(512)));
    // Threads by stream number and by OS thread id.
    assert_eq!(json(&["tree", p, "--thread", "2"])["selection"]["thread"]["name"], "worker");
    assert_eq!(json(&["tree", p, "--thread", "100"])["selection"]["thread"]["name"], "main");
    // Domains by id.
    assert_eq!(json(&["tree", p, "--domain", "2"])["domains"][0]["domain"]["name"], "entity pool");
}

#[test]
fn leaks_text_and_json() {
    let path = write_log("leaks.mrl");
    let p = path.to_str().unwrap();
    let v = json(&["leaks", p]);
    assert_eq!((v["total_bytes"].as_u64(), v["total_count"].as_u64()), (Some(8932 + 65536), Some(6)));
    let heap = &v["domains"][0];
    assert_eq!((heap["bytes"].as_u64(), heap["count"].as_u64()), (Some(8932), Some(5)));
    let ctx: Vec<(&str, u64, u64)> = heap["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["context"].as_str().unwrap(), c["bytes"].as_u64().unwrap(), c["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        ctx,
        [
            ("Level:forest/Texture:rock", 4608, 2),
            ("Level:forest", 3000, 1),
            ("Level:forest/Entities:all", 1024, 1),
            ("Audio:mixer", 300, 1)
        ]
    );
    let rock = &heap["contexts"][0]["sites"];
    let without_site = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("site");
        v
    };
    assert_eq!(
        without_site(&rock[0]),
        serde_json::json!({"stack": 2, "frames": ["0x403000"], "bytes": 4096, "count": 1, "first_seq": 2})
    );
    assert_eq!(
        without_site(&rock[1]),
        serde_json::json!({"stack": 0, "frames": [], "bytes": 512, "count": 1, "first_seq": 5})
    );
    // The log has no module map: sites are symbolicated to bare addresses, and say why.
    let site = &rock[0]["site"];
    assert_eq!((site["function"].as_str(), site["stack"].as_u64()), (Some("0x403000"), Some(2)));
    assert_eq!(site["frames"][0]["reason"], "no-module");
    assert_eq!(rock[1]["site"]["function"], "(no callstack)");
    assert_eq!(v["symbols"]["unresolved"], v["symbols"]["addresses"]);
    assert_eq!(v["symbols"]["reasons"][0]["reason"], "no-module");
    // By callstack, across contexts.
    let stacks = heap["stacks"].as_array().unwrap();
    assert_eq!(stacks.iter().map(|s| s["bytes"].as_u64().unwrap()).sum::<u64>(), 8932);
    assert_eq!((stacks[0]["stack"].as_u64(), stacks[0]["bytes"].as_u64()), (Some(2), Some(4096)));
    assert_eq!(stacks[0]["contexts"][0]["context"], "Level:forest/Texture:rock");
    // Without symbols: no `site`, no `symbols`.
    let bare = json(&["leaks", p, "--no-symbols"]);
    assert!(bare["domains"][0]["contexts"][0]["sites"][0]["site"].is_null() && bare["symbols"].is_null());
    assert_eq!(heap["contexts"][1]["sites"][0]["frames"], serde_json::json!(["0x401000", "0x402000"]));
    assert_eq!(v["domains"][1]["domain"]["name"], "vram");
    assert_eq!(v["domains"][1]["contexts"][0]["bytes"], 65536);
    assert_eq!(v["domains"][2]["contexts"][0]["context"], "Level:forest/Entities:all");

    let out = run(&["leaks", p, "--domain", "heap"]);
    let expected = "\
heap: 8.7 KiB in 5 allocations
    bytes  count  context / callstack
  4.5 KiB      2  Level:forest/Texture:rock
  4.0 KiB      1    stack 2: 0x403000
    512 B      1    (no callstack)
  2.9 KiB      1  Level:forest
  2.9 KiB      1    stack 1: 0x401000 < 0x402000
  1.0 KiB      1  Level:forest/Entities:all
  1.0 KiB      1    stack 3: 0x404000 < 0x405000 < 0x406000
    300 B      1  Audio:mixer
    300 B      1    stack 5: 0x407000
";
    assert!(out.contains(expected), "{out}");
    contains_all(
        &out,
        &[
            "allocations live at the end of the log",
            "8.7 KiB in 5 allocations (top-level domains)",
            "by callstack",
            "  4.0 KiB      1  stack 2: 0x403000\n",
            "in Level:forest/Texture:rock",
            "symbols: 7 addresses: 0 with file and line, 0 function only, 7 unresolved (in no recorded module (7))",
        ],
    );

    // --limit, --sort name, --thread.
    let v = json(&["leaks", p, "--domain", "heap", "--limit", "1", "--sort", "name"]);
    assert_eq!(v["domains"][0]["contexts"][0]["context"], "Audio:mixer");
    assert_eq!(v["domains"][0]["hidden_contexts"], 3);
    let v = json(&["leaks", p, "--thread", "worker"]);
    assert_eq!((v["total_bytes"].as_u64(), v["total_count"].as_u64()), (Some(812), Some(2)));
    // --depth 1: the top-level contexts' own leaks; the callstacks keep every context.
    let v = json(&["leaks", p, "--domain", "heap", "--depth", "1"]);
    let contexts: Vec<&str> =
        v["domains"][0]["contexts"].as_array().unwrap().iter().map(|c| c["context"].as_str().unwrap()).collect();
    assert_eq!(contexts, ["Level:forest", "Audio:mixer"]);
    assert_eq!(v["domains"][0]["hidden_contexts"], 2);
    assert_eq!(v["domains"][0]["stacks"].as_array().unwrap().len(), 5);
    // summarize's leak list too.
    let v = json(&["summarize", p, "--domain", "heap", "--depth", "1"]);
    let leaks: Vec<&str> = v["leaks"].as_array().unwrap().iter().map(|c| c["context"].as_str().unwrap()).collect();
    assert_eq!(leaks, ["Level:forest", "Audio:mixer"]);
}

#[test]
fn efficiency_text_and_json() {
    let path = write_log("efficiency.mrl");
    let p = path.to_str().unwrap();
    let v = json(&["efficiency", p]);
    assert_eq!(
        v["overall"],
        serde_json::json!({"used_bytes": 256, "capacity_bytes": 1024, "wasted_bytes": 768, "efficiency": 0.25})
    );
    assert_eq!(v["peak"], v["overall"]);
    let c = &v["contexts"][0];
    assert_eq!(c["context"], "Level:forest/Entities:all");
    assert_eq!(c["live"], v["overall"]);
    assert_eq!(c["peak"], v["overall"]);
    assert_eq!(v["sites"][0]["stack"], 3);
    assert_eq!(v["sites"][0]["containers"], 1);
    assert_eq!(v["sites"][0]["frames"], serde_json::json!(["0x404000", "0x405000", "0x406000"]));
    assert_eq!(v["sites"][0]["peak"], v["overall"]);
    assert_eq!(v["containers"][0]["address"], "0x8000");
    assert_eq!(v["containers"][0]["live"]["wasted_bytes"], 768);
    // Sites are symbolicated as in `leaks` and `summarize` (the log has no module map).
    assert_eq!(v["sites"][0]["site"]["function"], "0x404000");
    assert_eq!(v["sites"][0]["site"]["frames"][0]["reason"], "no-module");
    assert_eq!(v["symbols"]["reasons"][0]["reason"], "no-module");
    let bare = json(&["efficiency", p, "--no-symbols"]);
    assert!(bare["sites"][0].get("site").is_none() && bare.get("symbols").is_none(), "{bare}");

    let out = run(&["efficiency", p]);
    let expected = format!(
        "\
{p}: container efficiency (used / capacity of containers reporting their usage)
  at the end:         256 B of 1.0 KiB (25.0%)
  at the heap's peak: 256 B of 1.0 KiB (25.0%)

contexts (at the end and at the heap's peak)
   used  capacity  wasted  efficiency  peak used  peak capacity  peak wasted  peak eff.  context
  256 B   1.0 KiB   768 B       25.0%      256 B        1.0 KiB        768 B      25.0%  Level:forest/Entities:all

allocation sites (containers live at the end, and at the heap's peak)
  containers   used  capacity  wasted  efficiency  peak wasted  peak eff.  callstack
           1  256 B   1.0 KiB   768 B       25.0%        768 B      25.0%  stack 3: 0x404000 < 0x405000 < 0x406000

worst containers (live at the end)
  wasted   used  capacity  efficiency  address  context
   768 B  256 B   1.0 KiB       25.0%  0x8000   Level:forest/Entities:all

symbols: 3 addresses: 0 with file and line, 0 function only, 3 unresolved (in no recorded module (3)); 0.000 s
"
    );
    assert_eq!(steady(&out), expected, "got:\n{out}");
    // Without symbols: the same, but for the symbols line.
    let (without, _) = expected.split_once("\nsymbols: ").unwrap();
    assert_eq!(run(&["efficiency", p, "--no-symbols"]), without);
    // --depth 1: the context (two levels down) is left out; sites and containers stay.
    let shallow = run(&["efficiency", p, "--depth", "1"]);
    assert!(shallow.contains("contexts (at the end and at the heap's peak)\n  none\n"), "{shallow}");
    assert!(shallow.contains("stack 3: 0x404000") && shallow.contains("0x8000   Level:forest/Entities:all"));
    // The worker made no container; VRAM has none.
    let v = json(&["efficiency", p, "--thread", "worker"]);
    assert!(v["contexts"].as_array().unwrap().is_empty() && v["containers"].as_array().unwrap().is_empty());
    let v = json(&["efficiency", p, "--thread", "main"]);
    assert_eq!(v["sites"][0]["live"]["wasted_bytes"], 768);
    assert!(v["sites"][0]["peak"].is_null(), "sites keep no per-thread peak");
    let v = json(&["efficiency", p, "--domain", "vram"]);
    assert_eq!(v["overall"]["efficiency"], Value::Null);
}

#[test]
fn instances_text_and_json() {
    let path = write_log("instances.mrl");
    let p = path.to_str().unwrap();
    let v = json(&["instances", p]);
    let heap = &v["domains"][0];
    assert_eq!(heap["domain"]["name"], "heap");
    let t = &heap["types"][0];
    assert_eq!(t["name"], "Texture");
    assert_eq!((t["contexts"].as_u64(), t["instances"].as_u64()), (Some(2), Some(2)));
    assert_eq!(
        (t["bytes"].as_u64(), t["peak_bytes"].as_u64(), t["total_bytes"].as_u64()),
        (Some(4608), Some(6656), Some(6656))
    );
    assert_eq!((t["bytes_per_instance"].as_f64(), t["peak_bytes_per_instance"].as_f64()), (Some(2304.0), Some(3328.0)));
    let sand = find(&heap["contexts"], "name", "Level:forest/Texture:sand");
    assert_eq!(
        (sand["bytes"].as_u64(), sand["peak_bytes"].as_u64(), sand["total_bytes"].as_u64()),
        (Some(0), Some(2048), Some(2048))
    );
    assert_eq!(heap["contexts"][0]["name"], "Level:forest/Texture:rock");
    let vram = &v["domains"][1]["types"][0];
    assert_eq!(
        (vram["bytes_per_instance"].as_f64(), vram["total_bytes_per_instance"].as_f64()),
        (Some(32768.0), Some(49152.0))
    );
    // The pool has no instance context.
    assert_eq!(v["domains"].as_array().unwrap().len(), 2);

    let v = json(&["instances", p, "--at", "loaded", "--domain", "heap"]);
    assert_eq!(v["domains"][0]["types"][0]["bytes"], 6656);
    assert_eq!(v["domains"][0]["types"][0]["bytes_per_instance"], 3328.0);
    // --depth 1 leaves out the textures' contexts (two levels down), not their type.
    let v = json(&["instances", p, "--domain", "heap", "--depth", "1"]);
    assert!(v["domains"][0]["contexts"].as_array().unwrap().is_empty());
    assert_eq!(v["domains"][0]["hidden_contexts"], 2);
    assert_eq!(v["domains"][0]["types"][0]["instances"], 2);

    let out = run(&["instances", p, "--domain", "heap"]);
    contains_all(
        &out,
        &[
            "instance contexts at the end (figures include sub-contexts)",
            "per type  instances  bytes at end  per instance     peak  peak per instance  total allocated  total per instance",
            "Texture           2       4.5 KiB       2.2 KiB  6.5 KiB            3.2 KiB          6.5 KiB             3.2 KiB",
            "Level:forest/Texture:rock          1       4.5 KiB       4.5 KiB  4.5 KiB            4.5 KiB          4.5 KiB             4.5 KiB",
        ],
    );
}

fn assert_error(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty(), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(err.contains(needle), "missing `{needle}` in {err}");
}

#[test]
fn bad_options_exit_2() {
    let path = write_log("errors.mrl");
    let p = path.to_str().unwrap();
    let one_line = |o: &Output, needle: &str| {
        assert_error(o, needle);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.starts_with("replay-cli: ") && err.lines().count() == 1, "{err}");
    };
    one_line(
        &cli(&["summarize", p, "--at", "level loaded"]),
        "no label \"level loaded\" in the log; labels: \"loaded\"",
    );
    one_line(&cli(&["tree", p, "--at", "frame:7"]), "no frame 7 in the log (frames 0..=1); labels: \"loaded\"");
    one_line(
        &cli(&["tree", p, "--domain", "gpu"]),
        "no domain \"gpu\" in the log; domains: \"heap\", \"vram\", \"entity pool\"",
    );
    one_line(
        &cli(&["instances", p, "--thread", "render"]),
        "no thread \"render\" in the log; threads: 0 \"(recorder metadata)\", 1 \"main\", 2 \"worker\"",
    );
    one_line(
        &cli(&["leaks", p, "--at", "loaded"]),
        "leaks does not take --at: leaks are the allocations live at the end of the log",
    );
    one_line(&cli(&["summarize", temp("missing.mrl").to_str().unwrap()]), "cannot read");
    let text = temp("text.txt");
    std::fs::write(&text, "not a log at all, but long enough for a header\n").unwrap();
    one_line(&cli(&["efficiency", text.to_str().unwrap()]), "not a memreplay log");
    let mut newer = header();
    newer.version_major = VERSION_MAJOR + 1;
    let newer_path = temp("newer.mrl");
    std::fs::write(&newer_path, newer.to_bytes()).unwrap();
    one_line(&cli(&["tree", newer_path.to_str().unwrap()]), "is not supported");

    // clap's own errors.
    assert_error(&cli(&["tree", p, "--sort", "size"]), "invalid value 'size'");
    assert_error(&cli(&["tree", p, "--depth", "0"]), "--depth");
    assert_error(&cli(&["tree", p, "--at", "frame:x"]), "not a frame number");
    assert_error(&cli(&["tree", p, "--min-bytes", "lots"]), "not a size");
    assert_error(&cli(&["leaks", p, "--limit", "some"]), "--limit");
    assert_error(&cli(&["summarize"]), "LOG");
    assert_error(&cli(&["summarize", p, "--frobnicate"]), "--frobnicate");
}

#[test]
fn every_report_survives_a_truncated_log() {
    let path = write_log("cut.mrl");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
    let p = path.to_str().unwrap();
    for report in ["summarize", "tree", "leaks", "efficiency", "instances", "top"] {
        run_damaged(&[report, p], "cut off (no end-of-log record)");
        let text = run_damaged(&[report, p, "--json"], "lost");
        serde_json::from_str::<Value>(&text).unwrap();
    }
    let v: Value = serde_json::from_str(&run_damaged(&["summarize", p, "--json"], "cut off")).unwrap();
    assert_eq!(v["integrity"]["complete"], false);
    assert_eq!(v["capture"]["duration_is_lower_bound"], true);
    assert!(!v["integrity"]["damage"].as_array().unwrap().is_empty());
    assert!(run_damaged(&["summarize", p], "cut off").contains("TRUNCATED"));
}

#[test]
fn verbose_logs_timings_on_stderr() {
    let path = write_log("verbose.mrl");
    let o = cli(&["-v", "summarize", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("replayed 72 events"), "{err}");
    // How long each side of the replay kept its thread busy (CPU time, Linux).
    if cfg!(target_os = "linux") {
        assert!(err.contains("merge and replay: ") && err.contains("decoding: "), "{err}");
    }
    // No progress bar when stderr is not a terminal.
    assert!(!err.contains("replaying"), "{err}");
}

#[test]
fn summarize_lists_allocation_sites() {
    let path = write_log("sites.mrl");
    let v = json(&["summarize", path.to_str().unwrap()]);
    // VRAM's stack 2 allocated most: 65 536 + 32 768, both live at its peak [7], one freed
    // at [22] without a free callstack.
    let top = &v["sites"][0];
    assert_eq!((top["domain"].as_str(), top["stack"].as_u64()), (Some("vram"), Some(2)));
    assert_eq!(amount(&top["total"]), (98_304, 2));
    assert_eq!(amount(&top["peak"]), (98_304, 2));
    assert_eq!(amount(&top["live"]), (65_536, 1));
    assert_eq!(top["freed_from"], serde_json::json!([{"stack": 0, "frames": [], "frees": 1, "bytes": 32_768}]));
    // The heap's stack 2: rock and sand (6 144 in 2); sand freed by the worker.
    let heap2 = v["sites"].as_array().unwrap().iter().find(|s| s["domain"] == "heap" && s["stack"] == 2).unwrap();
    assert_eq!(amount(&heap2["total"]), (6_144, 2));
    assert_eq!(amount(&heap2["live"]), (4_096, 1));
    // Not kept per thread.
    let v = json(&["summarize", path.to_str().unwrap(), "--thread", "main"]);
    assert!(v["sites"].as_array().unwrap().is_empty());
}

/// With free callstacks recorded, each site lists where its blocks were freed from.
#[test]
fn summarize_shows_free_callstacks() {
    let path = temp("free-stacks.mrl");
    let mut h = header();
    h.flags |= header_flags::CALLSTACKS_ON_FREE;
    let mut w = LogWriter::new(std::fs::File::create(&path).unwrap(), &h).unwrap();
    let mut e = EventEncoder::new();
    e.push(&Event::DefineStack { id: 1, frames: vec![0x40_1000] });
    e.push(&Event::DefineStack { id: 7, frames: vec![0x40_7000, 0x40_7100] });
    e.push(&Event::DefineStack { id: 8, frames: vec![0x40_8000] });
    let alloc = |seq, addr| Event::Alloc { seq, domain: 0, addr, size: 100, align_log2: 3, stack: 1 };
    for (i, addr) in [0x1000u64, 0x2000, 0x3000].into_iter().enumerate() {
        e.push(&alloc(i as u64 + 1, addr));
    }
    e.push(&Event::Free { seq: 4, domain: 0, addr: 0x1000, stack: 7 });
    e.push(&Event::Free { seq: 5, domain: 0, addr: 0x2000, stack: 7 });
    e.push(&Event::Free { seq: 6, domain: 0, addr: 0x3000, stack: 8 });
    w.write_block(1, &mut e).unwrap();
    w.finish(0, 1_000).unwrap();
    let p = path.to_str().unwrap();
    let v = json(&["summarize", p, "--no-symbols"]);
    assert_eq!(
        v["sites"][0]["freed_from"],
        serde_json::json!([
            {"stack": 7, "frames": ["0x407000", "0x407100"], "frees": 2, "bytes": 200},
            {"stack": 8, "frames": ["0x408000"], "frees": 1, "bytes": 100},
        ])
    );
    assert!(v["sites"][0].get("site").is_none() && v["symbols"].is_null());
    // Symbolicated (the log has no modules: the addresses stay, each said unresolved).
    let v = json(&["summarize", p]);
    let free = &v["sites"][0]["freed_from"][0]["site"];
    assert_eq!((free["stack"].as_u64(), free["function"].as_str()), (Some(7), Some("0x407000")));
    assert_eq!(free["frames"][1]["reason"], "no-module");
    assert_eq!(v["sites"][0]["site"]["function"], "0x401000");
    assert_eq!(v["symbols"]["unresolved"], 4);
    contains_all(
        &run(&["summarize", p]),
        &[
            // The last block is freed before its thread allocates again: a temporary.
            "300 B      3    300 B     0 B            1  heap    stack 1: 0x401000",
            "2 frees (200 B): freed from stack 7: 0x407000 < 0x407100",
            "1 free (100 B): freed from stack 8: 0x408000",
        ],
    );
}

/// A block whose payload is damaged (a flipped byte: its checksum fails) is skipped;
/// every report still runs on the rest and the summary says what was lost.
#[test]
fn every_report_survives_a_corrupt_block() {
    let path = write_log("corrupt.mrl");
    let mut bytes = std::fs::read(&path).unwrap();
    let mut reader = memreplay_format::LogReader::new(&bytes[..]).unwrap();
    let mut blocks = Vec::new();
    while let Some(b) = reader.next_block().unwrap() {
        blocks.push((b.offset, b.frame));
    }
    // The worker's block (stream 2): the main thread's figures stay whole.
    let (offset, frame) = *blocks.iter().find(|(_, f)| f.thread == 2).expect("the worker's block");
    bytes[offset as usize + memreplay_format::block::FRAME_LEN + 1] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let p = path.to_str().unwrap();
    let lost = format!("damaged, {} events in damaged blocks", frame.event_count);
    for report in ["summarize", "tree", "leaks", "efficiency", "instances", "top"] {
        run_damaged(&[report, p], &lost);
        let text = run_damaged(&[report, p, "--json"], &lost);
        serde_json::from_str::<Value>(&text).unwrap();
    }
    let v: Value = serde_json::from_str(&run_damaged(&["summarize", p, "--json"], &lost)).unwrap();
    assert_eq!(v["integrity"]["clean"], false);
    assert_eq!(v["integrity"]["events_in_bad_blocks"], u64::from(frame.event_count));
    let damage = v["integrity"]["damage"][0].as_str().unwrap();
    assert!(damage.contains("thread 2") && damage.contains("checksum"), "{damage}");
    // The worker's allocations are gone, the main thread's are all there.
    assert!(v["capture"]["threads"].as_array().unwrap().iter().all(|t| t["stream"] != 2));
    let text = run_damaged(&["summarize", p], &lost);
    assert!(text.contains("checksum"), "{text}");
}

/// A log with many labels lists the first dozen in the text, all of them in JSON.
#[test]
fn summarize_text_cuts_long_label_lists() {
    let path = temp("labels.mrl");
    let mut w = LogWriter::new(std::fs::File::create(&path).unwrap(), &header()).unwrap();
    let mut e = EventEncoder::new();
    e.push(&Event::DefineString { id: 1, text: "tick".into() });
    for seq in 1..=15 {
        e.push(&Event::Label { seq, name: 1 });
    }
    w.write_block(1, &mut e).unwrap();
    w.finish(0, 1_000).unwrap();
    let p = path.to_str().unwrap();
    assert_eq!(json(&["summarize", p])["capture"]["labels"].as_array().unwrap().len(), 15);
    let text = run(&["summarize", p]);
    let line = text.lines().find(|l| l.trim_start().starts_with("labels")).unwrap();
    assert_eq!(line.matches("\"tick\"").count(), 12, "{line}");
    assert!(line.ends_with("… 3 more (--json lists them all)"), "{line}");
}

#[test]
fn summarize_sets_process_memory_against_tracked_memory() {
    const OTHER: u32 = 3;
    let path = temp("process-memory.mrl");
    let mut w = LogWriter::new(std::fs::File::create(&path).unwrap(), &header()).unwrap();
    let mib = 1u64 << 20;
    let mut meta = EventEncoder::new();
    for e in [
        Event::DefineString { id: 1, text: "vram".into() },
        Event::DefineString { id: 2, text: "pool".into() },
        Event::DefineString { id: 3, text: "mapped files".into() },
        Event::DefineDomain { id: VRAM, name: 1, kind: DomainKind::GpuLocal, capacity: 0, parent: None },
        Event::DefineDomain { id: POOL, name: 2, kind: DomainKind::Pool, capacity: 0, parent: Some(HEAP) },
        Event::DefineDomain { id: OTHER, name: 3, kind: DomainKind::Other, capacity: 0, parent: None },
        Event::ProcessMemory { time: 1_000_000, resident: 10 * mib, committed: 20 * mib },
        Event::ProcessMemory { time: 2_000_000, resident: 12 * mib, committed: 18 * mib },
        Event::ProcessMemory { time: 3_000_000, resident: 11 * mib, committed: 25 * mib },
    ] {
        meta.push(&e);
    }
    w.write_block(0, &mut meta).unwrap();
    let alloc = |seq, domain, addr, size| Event::Alloc { seq, domain, addr, size, align_log2: 3, stack: 0 };
    let mut main = EventEncoder::new();
    for e in [
        Event::Time { ns: 500_000 },
        alloc(1, HEAP, 0x1000, 1000),
        alloc(2, HEAP, 0x2000, 500),
        alloc(3, POOL, 0x1000, 100),
        alloc(4, VRAM, 0x10_0000, 65536),
        alloc(5, OTHER, 0x7000_0000, 2000),
        Event::Free { seq: 6, domain: HEAP, addr: 0x2000, stack: 0 },
    ] {
        main.push(&e);
    }
    w.write_block(1, &mut main).unwrap();
    w.finish(0, 3_000_000).unwrap();
    let p = path.to_str().unwrap();

    let v = json(&["summarize", p]);
    let pm = &v["process_memory"];
    assert_eq!(pm["samples"], 3);
    assert_eq!(pm["resident"]["peak"], 12 * mib);
    assert_eq!(pm["resident"]["peak_time_ns"], 2_000_000);
    assert_eq!(pm["resident"]["end"], 11 * mib);
    assert_eq!(pm["committed"]["peak"], 25 * mib);
    assert_eq!(pm["committed"]["peak_time_ns"], 3_000_000);
    assert_eq!(pm["committed"]["end"], 25 * mib);
    // Tracked: the heap and the "other" domain; not VRAM, and not the pool (inside the heap).
    assert_eq!(pm["tracked_domains"], serde_json::json!(["heap", "mapped files"]));
    assert_eq!(pm["tracked_end"], 3000);
    assert_eq!(pm["untracked_resident_end"], 11 * mib - 3000);
    assert_eq!(pm["untracked_committed_end"], 25 * mib - 3000);
    let text = run(&["summarize", p]);
    contains_all(
        &text,
        &[
            "process memory (what the OS saw: 3 samples)",
            "resident   peak 12.0 MiB at 2.000 ms, at the end 11.0 MiB",
            "committed  peak 25.0 MiB at 3.000 ms, at the end 25.0 MiB",
            "tracked    2.9 KiB at the end (heap, mapped files); untracked 11.0 MiB of resident, 25.0 MiB of committed",
        ],
    );

    // A log without samples says nothing about them.
    let plain = write_log("no-samples.mrl");
    assert!(json(&["summarize", plain.to_str().unwrap()])["process_memory"].is_null());
    assert!(!run(&["summarize", plain.to_str().unwrap()]).contains("process memory"));
}

/// Every report's whole output on the committed CI baseline (a real demo log), text and
/// JSON, against `tests/all/snapshots/`: a change to any output byte shows here.
/// `UPDATE_SNAPSHOTS=1 cargo test -p replay-cli --test all snapshots` rewrites the files after
/// an intended change (review the diff). Whole callstacks are left unsymbolicated
/// (`--no-symbols`): their system-library frames would read differently on a machine
/// with another C library; the text reports name the demo's functions from the committed
/// debug file, and their symbolication statistics and timings are left out. (Source paths
/// under the working directory print relative to it: record the baseline from a checkout
/// elsewhere, so that its paths read the same from every clone.)
#[test]
fn report_outputs_match_their_snapshots() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let log = "baseline/memory-baseline.mrl";
    let symbols = "baseline/memory-baseline.debug";
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/all/snapshots");
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let budget = temp("snapshot-budget.toml");
    std::fs::write(&budget, "[[domain]]\nname = \"heap\"\nmax_peak = \"4MiB\"\n\n[leaks]\nmax_bytes = \"64KiB\"\n")
        .unwrap();
    let budget = budget.to_str().unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("info.txt", &["info", log]),
        ("info.json", &["info", log, "--json"]),
        ("summarize.txt", &["summarize", log, "--symbols", symbols]),
        ("summarize.json", &["summarize", log, "--no-symbols", "--json"]),
        ("tree.txt", &["tree", log]),
        ("tree-at-label.json", &["tree", log, "--json", "--at", "level loaded"]),
        ("leaks.txt", &["leaks", log, "--symbols", symbols]),
        ("leaks.json", &["leaks", log, "--no-symbols", "--json"]),
        ("efficiency.txt", &["efficiency", log, "--symbols", symbols]),
        ("instances.txt", &["instances", log]),
        ("instances.json", &["instances", log, "--json"]),
        ("top.txt", &["top", log, "--symbols", symbols]),
        ("top-stacks.txt", &["top", log, "--no-symbols", "--stacks", "--limit", "5"]),
        ("flamegraph.folded", &["flamegraph", log, "--no-symbols", "--folded", "--contexts"]),
        ("diff.txt", &["diff", log, log, "--symbols", symbols]),
        ("diff-range.txt", &["diff", log, "--from", "main menu", "--to", "gameplay", "--symbols", symbols]),
        ("check.txt", &["check", log, "--budget", budget, "--baseline", log]),
        ("export.csv", &["export", log, "--format", "csv"]),
        ("gpu.txt", &["gpu", log, "--at", "level loaded"]),
        ("gpu-peak.json", &["gpu", log, "--at", "peak", "--json"]),
    ];
    // The same recording with its blocks compressed by zstd (format 1.4), with their
    // fields in columns (1.5), and as `recompress` stores it, reads the same: every report
    // but `info`'s byte counts is byte for byte the snapshot's.
    let copies: Vec<(String, &str)> = [
        ("memory-baseline-zstd.mrl", memreplay_fixtures::PayloadCompression::Zstd { level: 3 }, "zstd "),
        ("memory-baseline-columns.mrl", memreplay_fixtures::PayloadCompression::Lz4Columns, "lz4-columns "),
    ]
    .into_iter()
    .map(|(name, method, line)| {
        let copy = temp(name);
        memreplay_fixtures::recompress_log(&root.join(log), &copy, method);
        (copy.to_str().unwrap().to_owned(), line)
    })
    .chain(std::iter::once({
        // And `recompress` itself, with its default method: zstd and columns, format 1.6.
        let copy = temp("memory-baseline-recompressed.mrl");
        let out = Command::new(env!("CARGO_BIN_EXE_replay-cli"))
            .args(["recompress", log, "-o", copy.to_str().unwrap()])
            .current_dir(&root)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        (copy.to_str().unwrap().to_owned(), "zstd-columns ")
    }))
    .collect();
    let copy_cases = copies.iter().flat_map(|(copy, _)| {
        cases.iter().filter(|(name, _)| !name.starts_with("info")).map(move |(name, args)| {
            let args: Vec<&str> = args.iter().map(|a| if *a == log { copy.as_str() } else { a }).collect();
            (*name, args)
        })
    });
    let mut changed = Vec::new();
    for (name, args) in cases.iter().map(|(n, a)| (*n, a.to_vec())).chain(copy_cases) {
        let out = Command::new(env!("CARGO_BIN_EXE_replay-cli")).args(&args).current_dir(&root).output().unwrap();
        let mut text = String::from_utf8(out.stdout).unwrap().replace(budget, "BUDGET");
        for (copy, _) in &copies {
            text = text.replace(copy.as_str(), log);
        }
        if args.iter().any(|a| a.ends_with("recompressed.mrl")) {
            // The minor version `recompress` stamps (checked with `info` below).
            text = text
                .replace("(format 1.6)", "(format 1.2)")
                .replace(r#""format_version": "1.6""#, r#""format_version": "1.2""#);
        }
        // What depends on the machine: how long symbolication took, and what it found in
        // the system's libraries.
        let text: String = text
            .lines()
            .map(|l| {
                match (l.trim_start().starts_with("symbols").then(|| l.find(':')).flatten(), l.find("\"seconds\": ")) {
                    (Some(colon), _) => format!("{}: (statistics left out)\n", &l[..colon]),
                    (_, Some(i)) => format!("{}\"seconds\": 0{}\n", &l[..i], if l.ends_with(',') { "," } else { "" }),
                    _ => format!("{l}\n"),
                }
            })
            .collect();
        assert!(out.status.code().is_some_and(|c| c <= 1), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let path = dir.join(name);
        if update && !copies.iter().any(|(copy, _)| args.contains(&copy.as_str())) {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            changed.push(format!("{name} ({args:?})"));
        }
    }
    assert!(changed.is_empty(), "outputs differ from tests/all/snapshots (UPDATE_SNAPSHOTS=1 to rewrite): {changed:?}");

    // `info` of each copy: the same but for where the bytes go, which names its method.
    let info = |log: &str| {
        let out =
            Command::new(env!("CARGO_BIN_EXE_replay-cli")).args(["info", log]).current_dir(&root).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let lz4 = info(log);
    let outside_bytes = |text: &str| -> Vec<String> {
        let mut in_bytes = false;
        let mut kept = Vec::new();
        for l in text.lines() {
            in_bytes = if l.starts_with("bytes (") { true } else { in_bytes && !l.is_empty() };
            if !in_bytes && !l.contains(" B/event") && !l.starts_with("  bytes") {
                kept.push(l.to_owned());
            }
        }
        kept
    };
    let method_line =
        |text: &str, method: &str| text.lines().find(|l| l.trim_start().starts_with(method)).map(str::to_owned);
    assert!(method_line(&lz4, "lz4 ").is_some() && method_line(&lz4, "zstd ").is_none(), "{lz4}");
    let format_line = |text: &str| text.lines().find(|l| l.trim_start().starts_with("format")).map(str::to_owned);
    for (copy, method) in &copies {
        let mut copy_info = info(copy).replace(copy.as_str(), log);
        if copy.ends_with("recompressed.mrl") {
            // `recompress` stamps the first minor version that has columns.
            let (old, new) = (format_line(&lz4).unwrap(), format_line(&copy_info).unwrap());
            assert_eq!(new, old.replace("log 1.2,", "log 1.6,"), "{copy_info}");
            copy_info = copy_info.replace(&new, &old);
        }
        assert_eq!(outside_bytes(&copy_info), outside_bytes(&lz4), "{method}");
        assert!(method_line(&copy_info, method).is_some() && method_line(&copy_info, "lz4 ").is_none(), "{copy_info}");
    }
}
