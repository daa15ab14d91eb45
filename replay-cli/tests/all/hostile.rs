//! No input makes `replay-cli` panic or hang: logs whose every block is well framed and
//! whose every event decodes, but whose contents make no sense.
//!
//! `damage.rs` (in `memreplay-format`) throws bytes at the reader; this throws *events* at
//! the replay and at every report built on it, which bytes rarely reach past the
//! checksums. Sequence numbers repeat and run backwards, frees and pops come without
//! their allocations and pushes, sizes and times reach `u64::MAX`, a domain is its own
//! parent, resources claim 2^32-pixel textures, ids name nothing, frames and labels jump.
//! Every command must finish with one of its documented exit statuses (0, 1, 2, and 3
//! for `check` and `diff` on a damaged log) and no panic message, within a time limit.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use memreplay_format::block::FRAME_LEN;
use memreplay_format::{
    context_flags, header_flags, BlockFrame, Compression, DomainKind, EndOfLog, Event, EventEncoder, FileHeader,
    LogWriter, LossReason, ResourceDesc, ResourceKind,
};
use proptest::prelude::*;

fn header() -> FileHeader {
    FileHeader {
        flags: header_flags::CALLSTACKS_ON_ALLOC | header_flags::USAGE_CHANGES,
        start_unix_ns: u64::MAX,
        exe_path: "/hostile".into(),
        recorder: "hostile test".into(),
        ..common::header()
    }
}

/// Numbers as a hostile log has them: mostly small (so that ids and addresses meet),
/// sometimes at the edges of their type.
fn number() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..8,
        2 => 0u64..1 << 20,
        1 => Just(u64::MAX),
        1 => Just(u64::MAX / 2 + 1),
        1 => (1u64 << 32) - 2..(1u64 << 32) + 2,
        1 => any::<u64>(),
    ]
}

fn id() -> impl Strategy<Value = u32> {
    prop_oneof![6 => 0u32..6, 1 => Just(u32::MAX), 1 => any::<u32>()]
}

/// Addresses from a small pool (so allocations overlap, are freed twice and hold each
/// other's interior pointers), plus edge values.
fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => (0u64..12).prop_map(|k| 0x1000 + k * 0x40),
        1 => Just(0u64),
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 7),
        1 => any::<u64>(),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    let domain = prop_oneof![4 => Just(0u32), 2 => 1u32..4, 1 => Just(u32::MAX)];
    prop_oneof![
        6 => (number(), domain.clone(), addr(), number(), 0u8..70, id()).prop_map(
            |(seq, domain, addr, size, align_log2, stack)| Event::Alloc { seq, domain, addr, size, align_log2, stack }
        ),
        5 => (number(), domain.clone(), addr(), id())
            .prop_map(|(seq, domain, addr, stack)| Event::Free { seq, domain, addr, stack }),
        2 => (number(), number(), addr(), addr(), number(), 0u8..70, id()).prop_map(
            |(free_seq, seq, old_addr, new_addr, new_size, align_log2, stack)| Event::Realloc {
                free_seq, seq, old_addr, new_addr, new_size, align_log2, stack
            }
        ),
        2 => (number(), addr(), number()).prop_map(|(seq, addr, used)| Event::Usage { seq, addr, used }),
        3 => (id(), id(), any::<u8>()).prop_map(|(ty, name, flags)| Event::ContextPush { ty, name, flags }),
        3 => Just(Event::ContextPop),
        1 => (number(), addr()).prop_map(|(seq, addr)| Event::AttachPush { seq, addr }),
        1 => Just(Event::AttachPop),
        2 => number().prop_map(|ns| Event::Time { ns }),
        1 => (number(), number()).prop_map(|(seq, frame)| Event::FrameStart { seq, frame }),
        1 => (number(), id()).prop_map(|(seq, name)| Event::Label { seq, name }),
        2 => (id(), prop_oneof![Just(String::new()), "[a-z/:<>&\"' ]{0,12}", ".{0,8}"])
            .prop_map(|(id, text)| Event::DefineString { id, text }),
        1 => (id(), prop::collection::vec(number(), 0..6)).prop_map(|(id, frames)| Event::DefineStack { id, frames }),
        1 => (id(), id()).prop_map(|(id, name)| Event::DefineContextType { id, name }),
        1 => (domain.clone(), id(), any::<u8>(), number(), prop::option::of(domain.clone())).prop_map(
            |(id, name, kind, capacity, parent)| Event::DefineDomain {
                id, name, kind: DomainKind::from_byte(kind % 7), capacity, parent
            }
        ),
        1 => (number(), number(), number(), id(), prop::collection::vec(any::<u8>(), 0..4)).prop_map(
            |(base, size, load_bias, path, build_id)| Event::Module { base, size, load_bias, path, build_id }
        ),
        1 => (number(), id()).prop_map(|(os_tid, name)| Event::ThreadInfo { os_tid, name }),
        1 => (domain, addr(), any::<u8>(), id(), id(), id(), id(), id(), id()).prop_map(
            |(domain, addr, kind, width, height, depth_or_layers, mip_levels, format, name)| Event::Resource {
                domain,
                addr,
                desc: ResourceDesc {
                    kind: ResourceKind::from_byte(kind % 7),
                    width, height, depth_or_layers, mip_levels, format, name
                },
            }
        ),
        1 => (number(), number(), any::<u8>()).prop_map(|(events, bytes, reason)| Event::Lost {
            events, bytes, reason: LossReason::from_byte(reason % 6)
        }),
        1 => (number(), number(), number())
            .prop_map(|(time, resident, committed)| Event::ProcessMemory { time, resident, committed }),
        1 => (prop_oneof![Just(0u32), 1u32..4, Just(u32::MAX)], number(), number(), number())
            .prop_map(|(domain, time, budget, usage)| Event::Budget { domain, time, budget, usage }),
        1 => (id(), id()).prop_map(|(width, height)| Event::Display { width, height }),
    ]
}

/// Blocks of (stream id, events), in file order; stream 0 is the recorder's metadata.
fn blocks() -> impl Strategy<Value = Vec<(u32, Vec<Event>)>> {
    prop::collection::vec((0u32..4, prop::collection::vec(event(), 0..40)), 1..8)
}

fn write_log(path: &Path, blocks: &[(u32, Vec<Event>)], lost: u64, end_ns: u64) {
    common::write_log(path, &header(), blocks, Some(common::End { lost, end_ns }));
}

/// Runs `replay-cli args`; fails on a panic, an undocumented exit status, or a hang.
/// `replay-cli`, held to 4 GiB of address space (the rule of ARCHITECTURE.md: a hostile
/// log ends in a report or a clear error, never in an allocation failure's abort).
fn replay_cli() -> Command {
    replay_cli_within(4 << 30)
}

/// `replay-cli`, held to `bytes` of address space.
fn replay_cli_within(bytes: u64) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = common::replay_cli();
    // SAFETY: setrlimit is async-signal-safe, and nothing else runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

fn run(args: &[&str]) -> Result<(), TestCaseError> {
    let mut child = replay_cli().args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().ok();
            return Err(TestCaseError::fail(format!("replay-cli {args:?} ran for over a minute")));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    prop_assert!(!stderr.contains("panicked"), "replay-cli {:?} panicked:\n{}", args, stderr);
    prop_assert!(matches!(status.code(), Some(0..=3)), "replay-cli {:?} ended with {:?}:\n{}", args, status, stderr);
    Ok(())
}

/// A budget with every kind of rule, on names a hostile log may or may not have.
const BUDGET: &str = r#"
[[domain]]
name = "heap"
max_peak = "1MiB"
max_live = 0
max_growth_percent = 1
max_peak_of_budget = "90%"
max_usage_of_budget = "100%"

[leaks]
max_bytes = "1KiB"
max_count = 1

[[context]]
path = "**"
each = true
max_live = "1KiB"
max_instances = 1
max_per_instance = "1KiB"
min_efficiency = "50%"
optional = true

[efficiency]
min = "10%"

[growth]
of = "peak"
max_bytes = "1KiB"
"#;

fn temp_dir() -> PathBuf {
    memreplay_fixtures::temp_dir("replay-cli-hostile")
}

proptest! {
    // Each case runs every command (a process each): few cases, many events each.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn no_log_of_valid_blocks_makes_any_command_panic(
        blocks in blocks(),
        other in blocks(),
        lost in number(),
        end_ns in number(),
    ) {
        let dir = temp_dir();
        let (log, other_log, budget) = (dir.join("hostile.mrl"), dir.join("other.mrl"), dir.join("budget.toml"));
        write_log(&log, &blocks, lost, end_ns);
        write_log(&other_log, &other, end_ns, lost);
        std::fs::write(&budget, BUDGET).unwrap();
        let (log, other_log, budget) = (log.to_str().unwrap(), other_log.to_str().unwrap(), budget.to_str().unwrap());
        let out = |name: &str| dir.join(name).to_str().unwrap().to_owned();
        let (svg, html, json, csv, trace, pprof, flame) = (
            out("t.svg"), out("r.html"), out("e.json"), out("e.csv"), out("e.trace.json"), out("e.pb.gz"),
            out("f.svg"),
        );
        for args in [
            vec!["info", log],
            vec!["info", "--json", log],
            vec!["summarize", log],
            vec!["summarize", "--json", log],
            vec!["tree", log],
            vec!["tree", "--json", log],
            vec!["tree", "--at", "frame:1", log],
            vec!["leaks", log],
            vec!["efficiency", "--json", log],
            vec!["instances", log],
            vec!["top", log],
            vec!["top", "--stacks", log],
            vec!["frees", log, "x"],
            vec!["flamegraph", log, "--contexts", "-o", &flame],
            vec!["timeline", log, "-o", &svg],
            vec!["timeline", log, "--by", "context", "-o", &svg],
            vec!["export", log, "--format", "json", "-o", &json],
            vec!["export", log, "--format", "csv", "-o", &csv],
            vec!["export", log, "--format", "chrome-trace", "-o", &trace],
            vec!["export", log, "--format", "pprof", "-o", &pprof],
            vec!["report", log, "-o", &html],
            vec!["tree", "--at", "end", "--sort", "count", "--thread", "1", log],
            vec!["diff", log, log],
            vec!["diff", other_log, log, "--json"],
            vec!["check", log, "--baseline", other_log],
            vec!["check", log, "--budget", budget, "--baseline", other_log],
            vec!["gpu", log],
            vec!["gpu", log, "--at", "peak", "--json", "--svg", &svg],
            vec!["gpu", log, "--at", "frame:1", "--screen", "1920x1080"],
        ] {
            run(&args)?;
        }
    }
}

/// How a log's bytes are damaged after it is written.
#[derive(Debug, Clone)]
enum Damage {
    /// Cut off at this fraction of its length (a crash).
    Truncate(f64),
    /// These bytes (offset as a fraction of the length, new value) overwritten.
    Flip(Vec<(f64, u8)>),
    /// Garbage inserted at this fraction of the length.
    Insert(f64, Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (0.0..1.0f64).prop_map(Damage::Truncate),
        prop::collection::vec((0.0..1.0f64, any::<u8>()), 1..8).prop_map(Damage::Flip),
        (0.0..1.0f64, prop::collection::vec(any::<u8>(), 1..64)).prop_map(|(at, b)| Damage::Insert(at, b)),
    ]
}

fn apply(bytes: &mut Vec<u8>, d: &Damage) {
    let at = |f: f64, len: usize| ((f * len as f64) as usize).min(len.saturating_sub(1));
    match d {
        Damage::Truncate(f) => bytes.truncate(at(*f, bytes.len())),
        Damage::Flip(flips) => {
            for &(f, b) in flips {
                let i = at(f, bytes.len());
                bytes[i] = b;
            }
        }
        Damage::Insert(f, garbage) => {
            let i = at(*f, bytes.len());
            bytes.splice(i..i, garbage.iter().copied());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// The same nonsense, damaged as files are (cut off, overwritten, spliced): every
    /// command reads what survives, or refuses the file with exit status 2.
    #[test]
    fn no_damaged_log_makes_any_command_panic(blocks in blocks(), damage in damage()) {
        let dir = temp_dir();
        let log = dir.join("damaged.mrl");
        write_log(&log, &blocks, 0, 1_000);
        let mut bytes = std::fs::read(&log).unwrap();
        apply(&mut bytes, &damage);
        std::fs::write(&log, &bytes).unwrap();
        let log = log.to_str().unwrap();
        let html = dir.join("d.html");
        let html = html.to_str().unwrap();
        for args in [
            vec!["info", "--strict", log],
            vec!["summarize", log],
            vec!["tree", "--json", log],
            vec!["leaks", log],
            vec!["top", log],
            vec!["report", log, "-o", html],
            vec!["diff", log, log],
            vec!["check", log, "--baseline", log],
            vec!["gpu", log, "--at", "peak"],
        ] {
            run(&args)?;
        }
    }
}

/// An allocation that runs past the top of the address space is replayed (figures modulo
/// 2^64, no panic) and reported as an anomaly that says the byte figures are wrong.
#[test]
fn allocations_past_the_address_space_are_reported() {
    let dir = temp_dir();
    let log = dir.join("impossible.mrl");
    let alloc = |seq, addr, size| Event::Alloc { seq, domain: 0, addr, size, align_log2: 3, stack: 0 };
    let events = vec![
        alloc(1, 0x1000, u64::MAX),
        alloc(2, 0x2000, u64::MAX / 2),
        alloc(3, 0x3000, 64),
        Event::Free { seq: 4, domain: 0, addr: 0x1000, stack: 0 },
    ];
    write_log(&log, &[(1, events)], 0, 10);
    let log = log.to_str().unwrap();
    let out = replay_cli().args(["summarize", log]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("anomalies  1 allocation past the end of the address space (byte figures are wrong)"),
        "{text}"
    );
    let out = replay_cli().args(["summarize", "--json", log]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["anomalies"]["impossible_sizes"], 1);
    // Kept modulo 2^64: the two others are live, exactly.
    assert_eq!(json["domains"][0]["live"]["bytes"], u64::MAX / 2 + 64);
}

/// `replay-cli args`: its exit status, stdout and stderr.
fn output(args: &[&str]) -> (Option<i32>, String, String) {
    let out = replay_cli().args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// Blocks whose frames claim 64 MiB (and 5 MiB) decompressed around an 8-byte payload are
/// refused before anything is allocated for them: bad blocks, reported as damage, while
/// the blocks around them are read.
#[test]
fn blocks_that_claim_huge_decompressed_sizes_are_bad_blocks() {
    let block = |thread: u32, events: &[Event]| {
        let mut enc = EventEncoder::new();
        for e in events {
            enc.push(e);
        }
        let mut out = Vec::new();
        enc.finish_into(thread, &mut out);
        out
    };
    let alloc = |seq, addr| Event::Alloc { seq, domain: 0, addr, size: 64, align_log2: 3, stack: 0 };
    // The claim: a real block's 8-byte payload (its checksum right), its frame saying LZ4
    // and 64 MiB (or 5 MiB, within a valid frame's 64 MiB but past a block's 4 MiB).
    let liar = |raw_len: u32| {
        let events: Vec<Event> =
            std::iter::once(Event::Time { ns: 1 }).chain((0..6).map(|_| Event::AttachPop)).collect();
        let mut b = block(2, &events);
        let mut frame = BlockFrame::parse(b[..FRAME_LEN].try_into().unwrap()).unwrap();
        assert_eq!((frame.compression, frame.stored_len), (Compression::None, 8));
        frame.compression = Compression::Lz4;
        frame.raw_len = raw_len;
        b[..FRAME_LEN].copy_from_slice(&frame.to_bytes());
        b
    };
    let mut bytes = header().to_bytes();
    bytes.extend(block(1, &[Event::Time { ns: 10 }, alloc(1, 0x1000)]));
    let liars = 1500;
    for i in 0..liars {
        bytes.extend(liar(if i % 2 == 0 { 64 << 20 } else { 5 << 20 }));
    }
    bytes.extend(block(1, &[Event::Time { ns: 20 }, alloc(2, 0x2000)]));
    bytes.extend(EndOfLog { blocks: liars + 2, events: 4 + 7 * liars, lost_events: 0, end_ns: 20 }.to_block_bytes());
    let log = temp_dir().join("claims.mrl");
    std::fs::write(&log, &bytes).unwrap();
    let log = log.to_str().unwrap();

    let (code, stdout, stderr) = output(&["info", "--json", log]);
    assert_eq!(code, Some(0), "{stderr}");
    let info: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let integrity = &info["integrity"];
    assert_eq!(integrity["events_in_bad_blocks"], 7 * liars);
    let damage = integrity["damage"].as_array().unwrap();
    assert_eq!(damage.len(), liars as usize);
    assert!(
        damage[0]
            .as_str()
            .unwrap()
            .ends_with("skipped: claims 67108864 bytes decompressed, more than the 4194304 a block may hold"),
        "{}",
        damage[0]
    );
    assert!(
        damage[1]
            .as_str()
            .unwrap()
            .ends_with("skipped: claims 5242880 bytes decompressed, more than the 4194304 a block may hold"),
        "{}",
        damage[1]
    );
    assert_eq!(info["totals"]["events"], 4);

    let (code, stdout, stderr) = output(&["summarize", "--json", log]);
    assert_eq!(code, Some(0), "{stderr}");
    let summary: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["domains"][0]["live"]["bytes"], 128);
    assert!(stderr.contains("damaged, 10500 events in damaged blocks"), "{stderr}");
    let damage = summary["integrity"]["damage"].as_array().unwrap();
    assert_eq!((damage.len(), &damage[0]), (liars as usize, &info["integrity"]["damage"][0]));
}

/// `depth` nested pushes of one context on one thread, an allocation at the bottom, no pops.
fn nested_log(path: &Path, depth: u32) {
    let mut events = vec![
        Event::DefineString { id: 1, text: "scope".into() },
        Event::DefineContextType { id: 1, name: 1 },
        Event::Time { ns: 1 },
    ];
    events.extend((0..depth).map(|_| Event::ContextPush { ty: 1, name: 1, flags: 0 }));
    events.push(Event::Alloc { seq: 1, domain: 0, addr: 0x1000, size: 64, align_log2: 3, stack: 0 });
    write_log(path, &[(1, events)], 0, 10);
}

/// Deep context nesting (200,000 levels: a log of 3 KB) makes no command overflow its
/// stack or run out of memory: `info` reads it, and every replaying command refuses it
/// with exit status 2 and a message that names the depth and the limit.
#[test]
fn deep_context_nesting_is_refused_with_its_depth() {
    let dir = temp_dir();
    let log = dir.join("deep.mrl");
    nested_log(&log, 200_000);
    let log = log.to_str().unwrap();
    let out = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (svg, html, json, csv) = (out("deep.svg"), out("deep.html"), out("deep.json"), out("deep.csv"));
    let budget = out("deep.toml");
    std::fs::write(&budget, BUDGET).unwrap();
    let (code, stdout, stderr) = output(&["info", log]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("\n  events     200004\n"), "{stdout}");
    let refusal =
        format!("replay-cli: {log}: contexts nested 200000 levels deep; replay-cli follows at most 1000 levels\n");
    for args in [
        vec!["summarize", log],
        vec!["tree", log],
        vec!["tree", "--json", log],
        vec!["leaks", log],
        vec!["efficiency", log],
        vec!["instances", log],
        vec!["top", log],
        vec!["timeline", log, "--by", "context", "-o", &svg],
        vec!["export", log, "--format", "json", "-o", &json],
        vec!["export", log, "--format", "csv", "-o", &csv],
        vec!["report", log, "-o", &html],
        vec!["diff", log, log],
        vec!["check", log, "--budget", &budget, "--baseline", log],
        vec!["gpu", log],
    ] {
        assert_eq!(output(&args), (Some(2), String::new(), refusal.clone()), "{args:?}");
    }
}

/// At the limit, the commands whose walks of the context tree went deepest (the nested
/// JSON of `tree` and `export`, `diff`) report the whole depth.
#[test]
fn context_nesting_at_the_limit_is_reported() {
    let dir = temp_dir();
    let log = dir.join("limit.mrl");
    nested_log(&log, 1_000);
    let log = log.to_str().unwrap();
    let json = dir.join("limit.json");
    let (code, stdout, stderr) = output(&["tree", "--json", log]);
    assert_eq!(code, Some(0), "{stderr}");
    // Deeper than a default JSON parser follows: the innermost node, found by its text.
    let innermost = stdout.find("\"depth\": 1000,").expect("the innermost context");
    let rest = stdout[innermost..].strip_prefix("\"depth\": 1000,").unwrap().trim_start();
    assert!(rest.starts_with("\"bytes\": 64,"), "{}", &rest[..200]);
    let (code, _, stderr) = output(&["export", log, "--format", "json", "-o", json.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stdout, stderr) = output(&["diff", log, log]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.is_empty());
}

/// `n` labels named "tick" on one thread, `per_block` to a block, after one allocation.
fn labels_log(path: &Path, n: u64, per_block: u64) {
    let mut blocks = vec![(
        1,
        vec![
            Event::DefineString { id: 1, text: "tick".into() },
            Event::Time { ns: 1 },
            Event::Alloc { seq: 1, domain: 0, addr: 0x1000, size: 64, align_log2: 3, stack: 0 },
        ],
    )];
    let mut seq = 2;
    while seq < n + 2 {
        let end = (seq + per_block).min(n + 2);
        blocks.push((1, (seq..end).map(|seq| Event::Label { seq, name: 1 }).collect()));
        seq = end;
    }
    write_log(path, &blocks, 0, 10);
}

/// A log that takes more memory than the ceiling stops the replay with exit status 2 and a
/// message naming the ceiling and what grew; the ceiling comes from `--max-memory` or
/// `MEMREPLAY_MAX_MEMORY`, each refused loudly when it is not a size.
#[test]
fn a_log_past_the_memory_ceiling_stops_with_what_grew() {
    let dir = temp_dir();
    let log = dir.join("labels.mrl");
    labels_log(&log, 1_000_000, 50_000);
    let log = log.to_str().unwrap();
    let (code, _, stderr) = output(&["summarize", log]);
    assert_eq!(code, Some(0), "{stderr}");
    let stopped = |stderr: &str| {
        let line = stderr.lines().next().unwrap_or_default().to_owned();
        let prefix = format!("replay-cli: {log}: stopped after ");
        assert!(line.starts_with(&prefix), "{stderr}");
        assert!(line.contains(" of 1000003 events: "), "{line}");
        assert!(line.contains(" of memory in use, past the ceiling of 16.0 MiB (--max-memory, or MEMREPLAY_MAX_MEMORY); what grew: labels "), "{line}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    };
    for args in [vec!["summarize", log, "--max-memory", "16MiB"], vec!["--max-memory=16m", "tree", log]] {
        let (code, stdout, stderr) = output(&args);
        assert_eq!((code, stdout.as_str()), (Some(2), ""), "{args:?}: {stderr}");
        stopped(&stderr);
    }
    let out = replay_cli().args(["leaks", log]).env("MEMREPLAY_MAX_MEMORY", "16MiB").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    stopped(&String::from_utf8_lossy(&out.stderr));
    // The flag wins over the variable.
    let out = replay_cli()
        .args(["summarize", log, "--max-memory", "1g"])
        .env("MEMREPLAY_MAX_MEMORY", "16MiB")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for bad in ["lots", "0", "-5m"] {
        let out = replay_cli().args(["summarize", log]).env("MEMREPLAY_MAX_MEMORY", bad).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.starts_with("replay-cli: MEMREPLAY_MAX_MEMORY: "), "{bad}: {stderr}");
        let (code, _, stderr) = output(&["summarize", log, &format!("--max-memory={bad}")]);
        assert_eq!(code, Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--max-memory"), "{bad}: {stderr}");
    }
}

/// What the process cannot have at all ends the command with one line and exit status 2,
/// not an allocation failure's abort: here the ceiling is set far above a 1 GiB
/// address-space limit, and a log of 4 M-frame callstacks (each 32 MiB replayed, 17 KB
/// in the file) outgrows it.
#[test]
fn a_log_past_the_address_space_ends_with_a_message_not_an_abort() {
    let dir = temp_dir();
    let log = dir.join("stacks.mrl");
    let frames: Vec<u64> = (0..4_000_000u64).map(|i| 0x1000 + i % 64).collect();
    let mut w = LogWriter::new(std::fs::File::create(&log).unwrap(), &header()).unwrap();
    for id in 1..=40u32 {
        let mut enc = EventEncoder::new();
        enc.push(&Event::DefineStack { id, frames: frames.clone() });
        w.write_block(1, &mut enc).unwrap();
    }
    w.finish(0, 10).unwrap();
    let limited = || replay_cli_within(1 << 30);
    let out = limited().args(["summarize", log.to_str().unwrap(), "--max-memory", "100g"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("replay-cli: out of memory: "), "{stderr}");
    assert!(stderr.contains("a lower --max-memory stops the replay earlier and says what grew"), "{stderr}");
    // With the default ceiling (half the limit), the replay stops first and says why.
    let out = limited().args(["summarize", log.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("what grew: callstacks "), "{stderr}");
}

/// Blocks without sequenced events are decoded when their records are due, a few at a
/// time, not all at once: a thread's 40 blocks of 200,000 context pushes and pops each
/// (8 M records, 256 MiB decoded at once) replay under a 64 MiB ceiling, between two
/// allocations and after the last one.
#[test]
fn blocks_without_sequenced_events_stream() {
    let dir = temp_dir();
    let log = dir.join("unsequenced.mrl");
    let pushes: Vec<Event> = (0..100_000)
        .flat_map(|_| [Event::ContextPush { ty: 1, name: 1, flags: context_flags::INSTANCE }, Event::ContextPop])
        .collect();
    let mut blocks = vec![(
        1,
        vec![
            Event::DefineString { id: 1, text: "scope".into() },
            Event::DefineContextType { id: 1, name: 1 },
            Event::Time { ns: 1 },
            Event::Alloc { seq: 1, domain: 0, addr: 0x1000, size: 64, align_log2: 3, stack: 0 },
        ],
    )];
    blocks.extend((0..40).map(|_| (1, pushes.clone())));
    blocks.push((1, vec![Event::ContextPush { ty: 1, name: 1, flags: 0 }]));
    blocks.push((
        1,
        vec![Event::Alloc { seq: 2, domain: 0, addr: 0x2000, size: 32, align_log2: 3, stack: 0 }, Event::ContextPop],
    ));
    blocks.extend((0..40).map(|_| (1, pushes.clone())));
    write_log(&log, &blocks, 0, 10);
    let log = log.to_str().unwrap();
    let (code, stdout, stderr) = output(&["tree", "--json", log, "--max-memory", "64MiB"]);
    assert_eq!(code, Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // Every push of the 80 blocks (as instances), and the one around the second allocation.
    let scope = &json["domains"][0]["root"]["children"][0];
    let figures = (scope["path"].as_str(), scope["bytes"].as_u64(), scope["instances"].as_u64());
    assert_eq!(figures, (Some("scope:scope"), Some(32), Some(8_000_000)), "{scope}");
}

/// `info` decodes blocks in batches while it reads the next ones, yet says what is damaged
/// in file order, as every other command does: a bad payload, then corrupt bytes, then a
/// cut-off tail, all within one batch.
#[test]
fn info_lists_damage_in_file_order() {
    let block = |events: &[Event]| {
        let mut enc = EventEncoder::new();
        events.iter().for_each(|e| enc.push(e));
        let mut out = Vec::new();
        enc.finish_into(1, &mut out);
        out
    };
    let alloc = |seq, addr| Event::Alloc { seq, domain: 0, addr, size: 64, align_log2: 3, stack: 0 };
    let mut bytes = header().to_bytes();
    bytes.extend(block(&[Event::Time { ns: 1 }, alloc(1, 0x1000)]));
    let mut bad = block(&[alloc(2, 0x2000)]);
    *bad.last_mut().unwrap() ^= 0xff;
    bytes.extend(bad);
    bytes.extend([0x5a; 100]);
    bytes.extend(block(&[alloc(3, 0x3000)]));
    let cut = block(&[alloc(4, 0x4000)]);
    bytes.extend(&cut[..cut.len() - 2]);
    let log = temp_dir().join("damage-order.mrl");
    std::fs::write(&log, &bytes).unwrap();
    let log = log.to_str().unwrap();

    let damage_of = |command: &str| {
        let (_, stdout, stderr) = output(&[command, "--json", log]);
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        json["integrity"]["damage"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_owned()).collect()
    };
    let damage: Vec<String> = damage_of("info");
    assert_eq!(damage.len(), 3, "{damage:?}");
    assert!(damage[0].contains("skipped: ") && damage[0].starts_with("block at byte"), "{damage:?}");
    assert!(damage[1].starts_with("100 corrupt bytes skipped"), "{damage:?}");
    assert!(damage[2].starts_with("log cut off"), "{damage:?}");
    assert_eq!(damage, damage_of("summarize"));
}
