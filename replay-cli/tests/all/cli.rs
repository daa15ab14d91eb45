//! The `replay-cli` binary end to end, on logs written here with `memreplay-format`.

use std::path::PathBuf;
use std::process::Output;

use crate::common::{self, cli, stderr, stdout, temp_in};
use memreplay_format::{
    context_flags, header_flags, DomainKind, Event, EventEncoder, FileHeader, LogWriter, LossReason, ResourceDesc,
    ResourceKind, VERSION_MAJOR,
};

fn temp(name: &str) -> PathBuf {
    temp_in("cli", name)
}

fn header(major: u16) -> FileHeader {
    FileHeader { version_major: major, pid: 4242, ..common::game_header() }
}

/// A small log: metadata (strings, a domain, a module) and two threads that use every
/// kind of event. Returns its path and the number of events written.
fn write_log(name: &str) -> (PathBuf, u64) {
    let path = temp(name);
    let file = std::fs::File::create(&path).unwrap();
    let mut w = LogWriter::new(file, &header(VERSION_MAJOR)).unwrap();
    let s = |id: u32, text: &str| Event::DefineString { id, text: text.into() };

    let mut meta = EventEncoder::new();
    for e in [
        s(1, "vram.local"),
        Event::DefineDomain { id: 1, name: 1, kind: DomainKind::GpuLocal, capacity: 1 << 28, parent: None },
        s(2, "/games/forest"),
        Event::Module { base: 0x40_0000, size: 0x1000, load_bias: 0, path: 2, build_id: vec![1, 2, 3] },
    ] {
        meta.push(&e);
    }
    w.write_block(0, &mut meta).unwrap();

    let mut main = EventEncoder::new();
    for e in [
        Event::Time { ns: 1_000 },
        s(3, "main"),
        Event::ThreadInfo { os_tid: 100, name: 3 },
        Event::DefineStack { id: 1, frames: vec![0x40_0010, 0x40_0020] },
        s(4, "Texture"),
        Event::DefineContextType { id: 1, name: 4 },
        s(5, "rock.dds"),
        Event::ContextPush { ty: 1, name: 5, flags: 1 },
        Event::Alloc { seq: 1, domain: 0, addr: 0x1000, size: 4096, align_log2: 3, stack: 1 },
        Event::Usage { seq: 2, addr: 0x1000, used: 1000 },
        Event::Alloc { seq: 3, domain: 1, addr: 0x10_0000, size: 65536, align_log2: 16, stack: 1 },
        s(6, "BC7_UNORM"),
        Event::Resource {
            domain: 1,
            addr: 0x10_0000,
            desc: ResourceDesc {
                kind: ResourceKind::Texture,
                width: 256,
                height: 256,
                depth_or_layers: 1,
                mip_levels: 9,
                format: 6,
                name: 5,
            },
        },
        Event::ContextPop,
        Event::Time { ns: 2_500_000 },
        s(7, "level loaded"),
        Event::Label { seq: 4, name: 7 },
        Event::Time { ns: 3_000_000 },
        Event::FrameStart { seq: 5, frame: 0 },
        Event::Realloc {
            free_seq: 6,
            seq: 7,
            old_addr: 0x1000,
            new_addr: 0x3000,
            new_size: 8192,
            align_log2: 3,
            stack: 1,
        },
        Event::Free { seq: 8, domain: 1, addr: 0x10_0000, stack: 0 },
        Event::Time { ns: 4_000_000 },
        Event::FrameStart { seq: 9, frame: 1 },
    ] {
        main.push(&e);
    }
    w.write_block(1, &mut main).unwrap();

    let mut worker = EventEncoder::new();
    for e in [
        Event::Time { ns: 1_500 },
        s(8, "asset streaming"),
        Event::ThreadInfo { os_tid: 101, name: 8 },
        Event::AttachPush { seq: 10, addr: 0x3010 },
        Event::Alloc { seq: 11, domain: 0, addr: 0x9000, size: 100, align_log2: 0, stack: 0 },
        Event::AttachPop,
        Event::Free { seq: 12, domain: 0, addr: 0x3000, stack: 0 },
        Event::Lost { events: 3, bytes: 0, reason: LossReason::ThreadTeardown },
    ] {
        worker.push(&e);
    }
    w.write_block(2, &mut worker).unwrap();
    let events = w.events();
    w.finish(3, 5_000_000).unwrap();
    (path, events)
}

#[test]
fn info_prints_the_header_totals_threads_and_labels() {
    let (path, events) = write_log("info.mrl");
    let o = cli(&["info", path.to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    for needle in [
        "memreplay log 1.6, written by memreplay test",
        "linux x86_64, 8-byte pointers",
        "pid 4242, /games/forest",
        "2000-02-29 12:34:56.789 UTC",
        "allocation callstacks, usage changes; callstacks up to 16 frames",
        "duration   5.000 ms",
        &format!("events     {events}"),
        "asset streaming",
        "2.500 ms  level loaded",
        "frames     2",
        "vram.local",
        "(1 instances)",
        "complete (end-of-log record present, no damage)",
        "0 bytes / 3 events lost",
        "the recorder itself lost 3 events",
        "raw payload bytes by record",
        "    context_pop                   1    ",
    ] {
        assert!(out.contains(needle), "missing `{needle}` in:\n{out}");
    }
    assert!(!out.contains("free callstacks"), "{out}");
}

#[test]
fn info_json_has_the_counts() {
    let (path, events) = write_log("json.mrl");
    let o = cli(&["info", "--json", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    assert_eq!(v["totals"]["events"], events);
    assert_eq!(v["totals"]["blocks"], 3);
    assert_eq!(v["header"]["start_utc"], "2000-02-29 12:34:56.789 UTC");
    assert_eq!(v["header"]["callstacks_on_free"], false);
    let e = &v["events"];
    let expect = [
        ("alloc", 2),
        ("free", 1),
        ("realloc", 1),
        ("domain_alloc", 1),
        ("domain_free", 1),
        ("usage", 1),
        ("context_push", 1),
        ("context_pop", 1),
        ("attach_push", 1),
        ("attach_pop", 1),
        ("label", 1),
        ("frame_start", 2),
        ("time", 5),
        ("thread_info", 2),
        ("resource", 1),
        ("define_string", 8),
        ("define_stack", 1),
        ("define_context_type", 1),
        ("define_domain", 1),
        ("module", 1),
        ("lost", 1),
        ("lost_events", 3),
    ];
    for (k, n) in expect {
        assert_eq!(e[k], n, "events.{k}");
    }
    assert_eq!(expect.iter().filter(|(k, _)| *k != "lost_events").map(|(_, n)| n).sum::<u64>(), events);
    // Where the bytes go: every record is in one kind, with its count; the kinds' raw bytes
    // sum to the payloads' raw bytes; a tag-only record is one byte.
    let b = &v["bytes"];
    assert_eq!(b["frames"], 3 * 48);
    let by_record = b["raw_by_record"].as_array().unwrap();
    for r in by_record {
        let kind = r["record"].as_str().unwrap();
        let count = if kind == "unknown" { 0 } else { e[kind].as_u64().unwrap() };
        assert_eq!(r["count"], count, "raw_by_record {kind}");
    }
    let raw: u64 = by_record.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert_eq!(b["raw"], raw);
    assert!(b["stored"].as_u64().unwrap() <= raw);
    for kind in ["context_pop", "attach_pop"] {
        let r = by_record.iter().find(|r| r["record"] == kind).unwrap();
        assert_eq!(r["bytes"], 1, "{kind}");
    }
    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 3);
    assert_eq!(threads[2]["name"], "asset streaming");
    assert_eq!(threads[2]["os_tid"], 101);
    assert_eq!(v["domains"][0]["name"], "vram.local");
    assert_eq!(v["domains"][0]["alloc_bytes"], 65536);
    assert_eq!(v["context_types"][0]["instances"], 1);
    assert_eq!(v["labels"][0]["time_ns"], 2_500_000);
    assert_eq!(v["integrity"]["complete"], true);
    assert_eq!(v["integrity"]["events_lost"], 3);
}

fn assert_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    let err = stderr(o);
    // Warnings about a damaged log may come first; the error itself is one line.
    let errors: Vec<&str> = err.lines().filter(|l| !l.starts_with("replay-cli: warning: ")).collect();
    assert_eq!(errors.len(), 1, "one line: {err}");
    assert!(errors[0].starts_with("replay-cli: ") && errors[0].contains(needle), "{err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn missing_file() {
    let path = temp("does-not-exist.mrl");
    assert_error(&cli(&["info", path.to_str().unwrap()]), "cannot read");
}

#[test]
fn not_a_log() {
    let path = temp("notes.txt");
    std::fs::write(&path, "just some text, long enough to hold a header\n").unwrap();
    assert_error(&cli(&["info", path.to_str().unwrap()]), "not a memreplay log");
    let empty = temp("empty.mrl");
    std::fs::write(&empty, "").unwrap();
    let said = String::from_utf8(cli(&["info", empty.to_str().unwrap()]).stderr).unwrap();
    assert_eq!(
        said,
        format!(
            "replay-cli: {}: the log is empty (0 bytes): the recording process wrote nothing, e.g. it was killed \
             before its recorder started\n",
            empty.display()
        )
    );
    assert_error(&cli(&["info", empty.to_str().unwrap()]), "is empty (0 bytes)");
}

#[test]
fn unsupported_version() {
    let path = temp("v9.mrl");
    std::fs::write(&path, header(9).to_bytes()).unwrap();
    assert_error(&cli(&["info", path.to_str().unwrap()]), "version 9.6 is not supported");
}

#[test]
fn cut_inside_the_header() {
    let (path, _) = write_log("cut-header.mrl");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..20]).unwrap();
    assert_error(&cli(&["info", path.to_str().unwrap()]), "cut off inside its header");
}

/// The log minus its end-of-log record and the last `extra` bytes of the last block.
fn truncated(name: &str, extra: usize) -> (PathBuf, usize) {
    let (path, _) = write_log(name);
    let bytes = std::fs::read(&path).unwrap();
    let end_at = find_last_frame(&bytes);
    let cut = end_at - extra;
    std::fs::write(&path, &bytes[..cut]).unwrap();
    (path, end_at - cut)
}

/// Offset of the last block frame (the end-of-log record's).
fn find_last_frame(bytes: &[u8]) -> usize {
    bytes.windows(4).rposition(|w| w == b"MRLB").expect("a block frame")
}

#[test]
fn truncated_log_still_reports_and_says_what_was_lost() {
    let (path, lost) = truncated("cut.mrl", 7);
    let o = cli(&["info", path.to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("TRUNCATED"), "{out}");
    assert!(out.contains("damage: log cut off at byte"), "{out}");
    // The last block lost its tail: the whole block (its frame included) is unreadable.
    let v: serde_json::Value =
        serde_json::from_slice(&cli(&["info", "--json", path.to_str().unwrap()]).stdout).unwrap();
    let bytes_lost = v["integrity"]["bytes_lost"].as_u64().unwrap();
    assert!(bytes_lost > lost as u64, "{bytes_lost}");
    assert!(out.contains(&format!("{bytes_lost} bytes / ")), "{out}");
    assert_eq!(v["integrity"]["complete"], false);
    assert_eq!(v["totals"]["duration_is_lower_bound"], true);
    // What came before the cut is still there.
    assert_eq!(v["threads"][1]["name"], "main");

    let strict = cli(&["info", "--strict", path.to_str().unwrap()]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(stdout(&strict).contains("TRUNCATED"));
}

#[test]
fn log_without_end_record_is_truncated_but_loses_no_bytes() {
    let (path, _) = truncated("no-end.mrl", 0);
    let o = cli(&["info", path.to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0));
    assert!(out.contains("TRUNCATED") && out.contains("0 bytes / 3 events lost"), "{out}");
    // What is known of the missing tail: everything after the last clock reading.
    let integrity = &out[out.find("\nintegrity\n").unwrap()..];
    assert_eq!(
        integrity,
        "\nintegrity\n  TRUNCATED (no end-of-log record)\n  0 bytes / 3 events lost\n  events after 4.000 ms (the \
         last one read) are missing: a recording killed there loses up to one flush interval of the recorder (100 ms \
         by default); a file cut short otherwise (a full disk, a partial copy) may miss more\n  the recorder itself \
         lost 3 events\n"
    );
    let summary = stdout(&cli(&["summarize", path.to_str().unwrap()]));
    let line = summary.lines().find(|l| l.starts_with("  integrity")).unwrap();
    assert_eq!(
        line,
        "  integrity  TRUNCATED (no end-of-log record); 3 events lost by the recorder; events after 4.000 ms missing \
         (a killed recording loses up to one flush interval, 100 ms by default)"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&cli(&["info", "--json", path.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(v["integrity"]["missing_after_ns"], 4_000_000);
    let v: serde_json::Value =
        serde_json::from_slice(&cli(&["summarize", "--json", path.to_str().unwrap()]).stdout).unwrap();
    assert_eq!(v["integrity"]["missing_after_ns"], 4_000_000);
    assert_eq!(cli(&["info", "--strict", path.to_str().unwrap()]).status.code(), Some(1));
}

#[test]
fn strict_passes_a_clean_log() {
    let (path, _) = write_log("strict.mrl");
    let o = cli(&["info", "--strict", "--json", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn bad_command_lines_exit_2() {
    assert_eq!(cli(&[]).status.code(), Some(2));
    assert_eq!(cli(&["info"]).status.code(), Some(2));
    assert_eq!(cli(&["frobnicate", "x.mrl"]).status.code(), Some(2));
    assert_eq!(cli(&["--help"]).status.code(), Some(0));
}

#[test]
fn timeline_writes_svg_and_png_as_built() {
    let (path, _) = write_log("timeline.mrl");
    let p = path.to_str().unwrap();
    let svg = temp("chart.svg");
    let o = cli(&["timeline", p, "-o", svg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    let png = temp("chart.png");
    let o = cli(&["timeline", p, "-o", png.to_str().unwrap(), "--width", "640", "--height", "360"]);
    if cfg!(feature = "png") {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height, big-endian, at bytes 16..24.
        assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 640);
        assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 360);
    } else {
        assert_error(&o, "rebuild it with `--features png`");
        assert!(!png.exists());
    }
    // Bad flags are clap's: exit 2.
    assert_eq!(cli(&["timeline", p]).status.code(), Some(2), "-o is required");
    assert_eq!(cli(&["export", p, "--format", "xml"]).status.code(), Some(2));
}

#[test]
fn callstack_views_without_the_binary() {
    // The log's module (/games/forest) is not on this machine: frames are module+offset
    // and the reports say why.
    let (path, _) = write_log("callstacks.mrl");
    let p = path.to_str().unwrap();
    let o = cli(&["top", p, "--json", "--by", "total"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["report"], "top");
    let heap = &v["domains"][0];
    assert_eq!(heap["domain"]["name"], "heap");
    let row = &heap["rows"][0];
    // 4096 + the realloc's 8192 at stack 1; the attached 100 B had no stack.
    assert_eq!((row["function"].as_str(), row["total"]["bytes"].as_u64()), (Some("forest+0x400010"), Some(12288)));
    assert_eq!(row["stacks"], serde_json::json!([1]));
    assert_eq!(heap["rows"][1]["function"], "(no callstack)");
    let reasons = &v["symbols"]["reasons"];
    assert_eq!(reasons[0]["reason"], "binary-not-found");
    assert_eq!(reasons[0]["module"], "/games/forest");
    assert_eq!(v["symbols"]["unresolved"], 2);

    let text = stdout(&cli(&["top", p, "--stacks"]));
    assert!(text.contains("forest+0x400010") && text.contains("forest+0x400020"), "{text}");
    assert!(text.contains("binary not found: forest (2)"), "{text}");
    let folded = stdout(&cli(&["flamegraph", p, "--folded", "--by", "total", "--domain", "heap"]));
    assert_eq!(folded, "(no callstack) 100\nforest+0x400020;forest+0x400010 12288\n");
    let svg = stdout(&cli(&["flamegraph", p, "--by", "total"]));
    assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>") && svg.contains("forest+0x400010"));
    let frees = stdout(&cli(&["frees", p, "1"]));
    assert!(frees.contains("forest+0x400010") && frees.contains("the log has no free callstacks"), "{frees}");
    let out = temp("callstacks.pb.gz");
    let o = cli(&["export", p, "--format", "pprof", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let profile = memreplay_report::decode_pprof(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(profile.mapping.len(), 1);
    assert!(!profile.mapping[0].has_functions);
}

#[test]
fn callstack_views_reject_bad_input() {
    let (path, _) = write_log("callstacks-bad.mrl");
    let p = path.to_str().unwrap();
    assert_error(&cli(&["top", p, "--symbols", "/no/such/dir"]), "--symbols /no/such/dir: no such directory");
    assert_error(&cli(&["top", p, "--by", "total", "--thread", "main"]), "--by total cannot be split");
    assert_error(&cli(&["top", p, "--context", "Level:nowhere"]), "no context \"Level:nowhere\"");
    assert_error(&cli(&["top", p, "--at", "boss fight"]), "no label \"boss fight\"");
    assert_error(&cli(&["flamegraph", p, "--contexts", "--by", "count"]), "--by count cannot be split");
    assert_error(&cli(&["frees", p, "no_such_function"]), "no allocation site \"no_such_function\"");
    assert_error(
        &cli(&["export", p, "--format", "pprof", "-o", "/no/such/dir/out.pb.gz"]),
        "no directory /no/such/dir",
    );
    assert_error(&cli(&["flamegraph", p, "-o", "/no/such/dir/out.svg"]), "no directory /no/such/dir");
    assert_error(&cli(&["timeline", p, "-o", "/no/such/dir/chart.svg"]), "no directory /no/such/dir");
    assert_error(&cli(&["timeline", p, "-o", "chart.bmp"]), "cannot tell the image format from `.bmp`");
    assert_error(&cli(&["leaks", p, "--symbols", "/no/such/dir"]), "no such directory");
    assert_error(&cli(&["top", temp("missing.mrl").to_str().unwrap()]), "cannot read");
    // clap: a missing --format, an unknown format or ranking.
    assert_eq!(cli(&["export", p]).status.code(), Some(2));
    assert_eq!(cli(&["export", p, "--format", "perf", "-o", "x"]).status.code(), Some(2));
    assert_eq!(cli(&["top", p, "--by", "bytes"]).status.code(), Some(2));
}

/// Every (command, option) pair where the command takes the option but would not read
/// it: refused before any work, with exit 2 and one line naming both.
#[test]
fn options_a_command_would_ignore_are_refused() {
    let (path, _) = write_log("refused.mrl");
    let p = path.to_str().unwrap();
    let svg = temp("refused.svg");
    let svg = svg.to_str().unwrap();
    let html = temp("refused.html");
    let html = html.to_str().unwrap();
    let dir = std::env::temp_dir();
    let dir = dir.to_str().unwrap();
    let timeline = ["timeline", p, "-o", svg];
    let json = ["export", p, "--format", "json"];
    let csv = ["export", p, "--format", "csv"];
    let trace = ["export", p, "--format", "chrome-trace"];
    let pprof = ["export", p, "--format", "pprof"];
    let cases: &[(&[&str], &[&str], &str)] = &[
        (&["tree", p], &["--limit", "5"], "tree does not take --limit: it shows every context; cut the tree with --depth or --min-bytes"),
        (&["leaks", p], &["--at", "level loaded"], "leaks does not take --at: leaks are the allocations live at the end of the log"),
        (&timeline, &["--json"], "timeline does not take --json: it draws SVG (or PNG); use `export --format json` for the series"),
        (&timeline, &["--thread", "main"], "timeline does not take --thread: it covers every thread"),
        (&timeline, &["--at", "level loaded"], "timeline does not take --at: it covers the whole recording"),
        (&timeline, &["--depth", "1"], "timeline does not take --depth: it draws the domains, or with --by context the top-level contexts of one"),
        (&timeline, &["--min-bytes", "1k"], "timeline does not take --min-bytes: it draws memory over time, not rows to cut"),
        (&timeline, &["--sort", "name"], "timeline does not take --sort: it draws memory over time, not rows to order"),
        (&timeline, &["--limit", "5"], "timeline does not take --limit: it draws memory over time, not rows to cut"),
        (&json, &["--json"], "export --format json does not take --json: it writes JSON already"),
        (&json, &["--limit", "5"], "export --format json does not take --limit: it writes the whole tree; cut it with --depth or --min-bytes"),
        (&json, &["--symbols", dir], "export --format json does not take --symbols: only `--format pprof` names callstacks"),
        (&csv, &["--json"], "export --format csv does not take --json: --format picks what it writes (`--format json` for JSON)"),
        (&csv, &["--sort", "name"], "export --format csv does not take --sort: its rows are in tree order, each context after its parent"),
        (&csv, &["--limit", "0"], "export --format csv does not take --limit: it writes a row per context; cut them with --depth or --min-bytes"),
        (&csv, &["--no-symbols"], "export --format csv does not take --no-symbols: only `--format pprof` names callstacks"),
        (&trace, &["--thread", "main"], "export --format chrome-trace does not take --thread: the trace covers every thread"),
        (&trace, &["--at", "frame:1"], "export --format chrome-trace does not take --at: the trace covers the whole recording"),
        (&trace, &["--json"], "export --format chrome-trace does not take --json: --format picks what it writes (`--format json` for JSON)"),
        (&trace, &["--depth", "2"], "export --format chrome-trace does not take --depth: its counters are the domains and their top-level contexts"),
        (&trace, &["--min-bytes", "0"], "export --format chrome-trace does not take --min-bytes: it writes memory over time, not rows to cut"),
        (&trace, &["--sort", "bytes"], "export --format chrome-trace does not take --sort: it writes memory over time, not rows to order"),
        (&trace, &["--limit", "5"], "export --format chrome-trace does not take --limit: it writes memory over time, not rows to cut"),
        (&trace, &["--symbols", dir], "export --format chrome-trace does not take --symbols: only `--format pprof` names callstacks"),
        (&pprof, &["--thread", "main"], "export --format pprof does not take --thread: the profile covers every thread"),
        (&pprof, &["--at", "level loaded"], "export --format pprof does not take --at: the profile covers the whole recording"),
        (&pprof, &["--json"], "export --format pprof does not take --json: --format picks what it writes (`--format json` for JSON)"),
        (&pprof, &["--depth", "1"], "export --format pprof does not take --depth: the profile holds allocation callstacks, not contexts"),
        (&pprof, &["--min-bytes", "64k"], "export --format pprof does not take --min-bytes: the profile holds every allocation site; pprof's views cut it"),
        (&pprof, &["--sort", "count"], "export --format pprof does not take --sort: the profile holds every allocation site; pprof's views order it"),
        (&pprof, &["--limit", "5"], "export --format pprof does not take --limit: the profile holds every allocation site; pprof's views cut it"),
        (&["flamegraph", p, "--folded"], &["--title", "memory"], "flamegraph --folded does not take --title: it writes text; --title names the SVG"),
        (&["flamegraph", p], &["--at", "level loaded"], "flamegraph --by peak does not take --at: --at is where --by live reads what is live"),
        (&["flamegraph", p, "--by", "total"], &["--at", "frame:1"], "flamegraph --by total does not take --at: --at is where --by live reads what is live"),
    ];
    for (command, option, message) in cases {
        let args = [*command, *option].concat();
        let o = cli(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), format!("replay-cli: {message}\n"), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
        // Without the option, the command runs.
        let o = cli(command);
        assert_eq!(o.status.code(), Some(0), "{command:?}: {}", stderr(&o));
    }

    // Every option refused is named, one line each, and nothing is written.
    let _ = std::fs::remove_file(svg);
    let o = cli(&["timeline", p, "-o", svg, "--sort", "name", "--json", "--limit", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "replay-cli: timeline does not take --json: it draws SVG (or PNG); use `export --format json` for the series\n\
         replay-cli: timeline does not take --sort: it draws memory over time, not rows to order\n\
         replay-cli: timeline does not take --limit: it draws memory over time, not rows to cut\n"
    );
    assert!(!std::path::Path::new(svg).exists());

    // The options these commands do read are not refused.
    for args in [
        &[
            "efficiency",
            p,
            "--depth",
            "1",
            "--sort",
            "name",
            "--limit",
            "3",
            "--min-bytes",
            "1",
            "--at",
            "level loaded",
        ][..],
        &["leaks", p, "--depth", "1", "--thread", "main"],
        &["instances", p, "--depth", "1", "--at", "frame:1"],
        &["tree", p, "--depth", "1", "--sort", "name", "--min-bytes", "1"],
        &["summarize", p, "--depth", "1", "--limit", "2"],
        &["report", p, "-o", html, "--depth", "1", "--limit", "2", "--sort", "count", "--at", "level loaded"],
        &["export", p, "--format", "json", "--depth", "1", "--sort", "name", "--thread", "main"],
        &["export", p, "--format", "csv", "--depth", "1", "--min-bytes", "1", "--at", "level loaded"],
        &["export", p, "--format", "chrome-trace", "--domain", "heap"],
        &["timeline", p, "-o", svg, "--domain", "heap"],
        &["flamegraph", p, "--by", "live", "--at", "level loaded", "--title", "memory"],
    ] {
        let o = cli(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    }
}

/// Contexts, sites and free callstacks in the lists of the `--limit` test.
const MANY: u64 = 30;

/// A log whose lists are longer than any default `--limit`: `MANY` top-level instance
/// contexts `Level:l00`… each leaking one container (its own callstack, a quarter used),
/// and `MANY` blocks allocated at callstack 1000 (outside any context), each freed from
/// a callstack of its own. Every frame is in the module /games/forest, which is not on
/// this machine.
fn write_long_log(name: &str) -> PathBuf {
    let path = temp(name);
    let mut h = header(VERSION_MAJOR);
    h.flags |= header_flags::CALLSTACKS_ON_FREE;
    let mut w = LogWriter::new(std::fs::File::create(&path).unwrap(), &h).unwrap();
    let mut meta = EventEncoder::new();
    meta.push(&Event::DefineString { id: 1, text: "Level".into() });
    meta.push(&Event::DefineContextType { id: 1, name: 1 });
    meta.push(&Event::DefineString { id: 2, text: "/games/forest".into() });
    meta.push(&Event::Module { base: 0x40_0000, size: 0x30_0000, load_bias: 0, path: 2, build_id: vec![1, 2, 3] });
    for i in 0..MANY as u32 {
        meta.push(&Event::DefineString { id: 10 + i, text: format!("l{i:02}") });
        meta.push(&Event::DefineStack { id: 1 + i, frames: vec![0x40_0000 + 0x10 * u64::from(i)] });
        meta.push(&Event::DefineStack { id: 2000 + i, frames: vec![0x50_0000 + 0x10 * u64::from(i)] });
    }
    meta.push(&Event::DefineStack { id: 1000, frames: vec![0x60_0000] });
    w.write_block(0, &mut meta).unwrap();
    let mut main = EventEncoder::new();
    main.push(&Event::Time { ns: 1_000 });
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    for i in 0..MANY {
        let (addr, size) = (0x10_0000 * (i + 1), 64 * (i + 1));
        main.push(&Event::ContextPush { ty: 1, name: 10 + i as u32, flags: context_flags::INSTANCE });
        main.push(&Event::Alloc { seq: next(), domain: 0, addr, size, align_log2: 3, stack: 1 + i as u32 });
        main.push(&Event::Usage { seq: next(), addr, used: size / 4 });
        main.push(&Event::ContextPop);
    }
    for i in 0..MANY {
        let addr = 0x8000_0000 + 0x1000 * i;
        main.push(&Event::Alloc { seq: next(), domain: 0, addr, size: 16, align_log2: 3, stack: 1000 });
        main.push(&Event::Free { seq: next(), domain: 0, addr, stack: 2000 + i as u32 });
    }
    main.push(&Event::Time { ns: 2_000 });
    w.write_block(1, &mut main).unwrap();
    w.finish(0, 3_000).unwrap();
    path
}

/// `value` without the keys that differ between two runs asking for the same rows: the
/// `--limit` as given, and the time symbolication took.
fn without_limit_and_time(mut value: serde_json::Value) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.remove("limit");
                m.remove("seconds");
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut value);
    value
}

/// `--limit 0` is no limit, in every command that cuts lists.
#[test]
fn limit_0_is_no_limit_everywhere() {
    let long = write_long_log("long.mrl");
    let p = long.to_str().unwrap();
    let (short, _) = write_log("short.mrl");
    let html = temp("long.json");
    let n = MANY as usize;
    // (command, a list it cuts, that list's length without a limit)
    let cases: &[(&[&str], &str, usize)] = &[
        (&["summarize", p], "/top_contexts/0/live/inclusive", n),
        (&["summarize", p], "/efficiency/least_efficient_contexts", n),
        (&["leaks", p], "/domains/0/contexts", n),
        (&["leaks", p], "/domains/0/stacks", n),
        (&["efficiency", p], "/contexts", n),
        (&["efficiency", p], "/sites", n),
        (&["efficiency", p], "/containers", n),
        (&["instances", p], "/domains/0/contexts", n),
        (&["top", p, "--by", "total"], "/domains/0/rows", n + 1),
        (&["frees", p, "1000"], "/domains/0/sites/0/freed_from", n),
        // The long log's contexts are new; the short one's texture vanished from two domains.
        (&["diff", short.to_str().unwrap(), p], "/contexts", n + 2),
        (&["report", p, "-o", html.to_str().unwrap()], "/leaks/domains/0/contexts", n),
    ];
    let run = |command: &[&str], limit: &str| -> serde_json::Value {
        let args = [command, &["--json", "--limit", limit]].concat();
        let o = cli(&args);
        // The short log's recorder lost events: `diff` says so through its status.
        let status = if command[0] == "diff" { 3 } else { 0 };
        assert_eq!(o.status.code(), Some(status), "{args:?}: {}", stderr(&o));
        let text = if command[0] == "report" { std::fs::read_to_string(&html).unwrap() } else { stdout(&o) };
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    for (command, list, all) in cases {
        let rows = |v: &serde_json::Value| v.pointer(list).and_then(|l| l.as_array()).map_or(0, Vec::len);
        let unlimited = run(command, "0");
        assert_eq!(rows(&unlimited), *all, "{command:?} --limit 0: {list}");
        assert_eq!(rows(&run(command, "3")), 3, "{command:?} --limit 3: {list}");
        // The same as a limit no list reaches.
        assert_eq!(without_limit_and_time(unlimited), without_limit_and_time(run(command, "1000")), "{command:?}");
    }
}

/// `efficiency` names its sites like every other site list: by allocating function
/// (`module+0xoffset` here, the binary being elsewhere), with the symbols line; the JSON
/// keeps the raw frames beside the `site`.
#[test]
fn efficiency_names_its_sites() {
    let path = write_long_log("efficiency-sites.mrl");
    let p = path.to_str().unwrap();
    let o = cli(&["efficiency", p, "--limit", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // The time symbolication took varies.
    let (out, _seconds) = out.rsplit_once("; ").unwrap();
    let expected = format!(
        "\
{p}: container efficiency (used / capacity of containers reporting their usage)
  at the end:         7.3 KiB of 29.1 KiB (25.0%)
  at the heap's peak: 7.3 KiB of 29.1 KiB (25.0%)

contexts (at the end and at the heap's peak)
   used  capacity   wasted  efficiency  peak used  peak capacity  peak wasted  peak eff.  context
  480 B   1.9 KiB  1.4 KiB       25.0%      480 B        1.9 KiB      1.4 KiB      25.0%  Level:l29
  464 B   1.8 KiB  1.4 KiB       25.0%      464 B        1.8 KiB      1.4 KiB      25.0%  Level:l28

allocation sites (containers live at the end, and at the heap's peak)
  containers   used  capacity   wasted  efficiency  peak wasted  peak eff.  callstack
           1  480 B   1.9 KiB  1.4 KiB       25.0%      1.4 KiB      25.0%  stack 30: forest+0x4001d0
           1  464 B   1.8 KiB  1.4 KiB       25.0%      1.4 KiB      25.0%  stack 29: forest+0x4001c0

worst containers (live at the end)
   wasted   used  capacity  efficiency  address    context
  1.4 KiB  480 B   1.9 KiB       25.0%  0x1e00000  Level:l29
  1.4 KiB  464 B   1.8 KiB       25.0%  0x1d00000  Level:l28

symbols: 2 addresses: 0 with file and line, 0 function only, 2 unresolved (binary not found: forest (2))"
    );
    assert_eq!(out, expected);

    let v: serde_json::Value =
        serde_json::from_slice(&cli(&["efficiency", p, "--json", "--limit", "2"]).stdout).unwrap();
    let site = &v["sites"][0];
    assert_eq!(site["frames"], serde_json::json!(["0x4001d0"]));
    assert_eq!(
        (site["site"]["stack"].as_u64(), site["site"]["function"].as_str()),
        (Some(30), Some("forest+0x4001d0"))
    );
    assert_eq!(site["site"]["frames"][0]["reason"], "binary-not-found");
    assert_eq!(v["symbols"]["reasons"][0]["module"], "/games/forest");

    // --no-symbols: raw addresses, no symbols line; --symbols must name a directory.
    let bare = stdout(&cli(&["efficiency", p, "--limit", "2", "--no-symbols"]));
    let (head, _) = expected.split_once("\nsymbols: ").unwrap();
    assert_eq!(bare, head.replace("forest+", ""));
    assert_error(&cli(&["efficiency", p, "--symbols", "/no/such/dir"]), "--symbols /no/such/dir: no such directory");
}

/// Two streams' events may share a sequence number (SPEC.md §7.9: they are concurrent,
/// and the lower-numbered stream's comes first). The peak below is reached by the second
/// stream's allocation at sequence number 10, after the first stream's allocation with
/// the same number: what `top --thread` reads "at the peak" is the live set right after
/// the peak's own event, not the one after the first event numbered 10 (which lacks the
/// second stream's 500 bytes).
#[test]
fn the_peak_is_read_at_its_own_event_when_streams_share_its_sequence_number() {
    let path = temp("tied-peak.mrl");
    let alloc = |seq, addr, size| Event::Alloc { seq, domain: 0, addr, size, align_log2: 3, stack: 0 };
    let blocks = vec![
        (1, vec![Event::Time { ns: 1_000 }, alloc(2, 0x1000, 300), alloc(10, 0x2000, 100)]),
        (2, vec![Event::Time { ns: 1_000 }, alloc(10, 0x3000, 500)]),
    ];
    memreplay_fixtures::write_log(
        &path,
        &header(VERSION_MAJOR),
        &blocks,
        Some(memreplay_fixtures::End { lost: 0, end_ns: 2_000 }),
    );
    let p = path.to_str().unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&cli(&["summarize", p, "--json"]).stdout).unwrap();
    let heap = summary["domains"].as_array().unwrap().iter().find(|d| d["domain"]["name"] == "heap").unwrap();
    assert_eq!(heap["peak"]["bytes"], 900, "{heap}");
    // Per thread, `top` reads the live allocations again, at the peak's event: the second
    // stream's 500 bytes were live there.
    for (thread, bytes) in [("1", 400), ("2", 500)] {
        let o = cli(&["top", p, "--json", "--by", "peak", "--thread", thread]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let top: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let rows = &top["domains"][0]["rows"];
        let at_peak: u64 = rows.as_array().unwrap().iter().map(|r| r["peak"]["bytes"].as_u64().unwrap()).sum();
        assert_eq!(at_peak, bytes, "thread {thread}: {rows}");
    }
}

/// `recompress`: the new log holds the same events (every report reads the same), says
/// what it did, and is the old one byte for byte when stored again with the old method.
#[test]
fn recompress_keeps_the_log_and_says_what_it_did() {
    let (path, events) = write_log("to-recompress.mrl");
    let (log, out) = (path.to_str().unwrap(), temp("recompressed.mrl"));
    let o = cli(&["recompress", log, "-o", out.to_str().unwrap(), "--threads", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let said = stdout(&o);
    let first =
        format!("{log} -> {}: 3 blocks of {events} events stored with zstd-columns:1 (format 1.6)", out.display());
    assert_eq!(said.lines().next(), Some(first.as_str()), "{said}");
    let (old_len, new_len) = (std::fs::metadata(&path).unwrap().len(), std::fs::metadata(&out).unwrap().len());
    assert!(said.lines().nth(1).unwrap().starts_with(&format!("{old_len} -> {new_len} bytes (")), "{said}");
    for report in [&["summarize", "--no-symbols", "--json"][..], &["tree"], &["leaks", "--no-symbols"], &["gpu"]] {
        let read = |log: &str| {
            let o = cli(&[&[report[0], log], &report[1..]].concat());
            assert_eq!(o.status.code(), Some(0), "{report:?}: {}", stderr(&o));
            stdout(&o).replace(log, "LOG").replace(r#""format_version": "1.6""#, r#""format_version": "1.2""#)
        };
        assert_eq!(read(out.to_str().unwrap()), read(log), "{report:?}");
    }
    // Stored again with LZ4, which wrote it: the same bytes.
    let back = temp("recompressed-back.mrl");
    let o = cli(&["recompress", log, "-o", back.to_str().unwrap(), "--compression", "lz4"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&path).unwrap());
}

/// `info` of a columns log whose blocks hold their sizes as deltas (format 1.6) where that
/// is smaller: one block of sizes that step up at each of three sites, one of unrelated
/// sizes. It names both methods, lines their bytes up, and counts every allocation.
#[test]
fn info_names_the_columns_methods_a_log_holds() {
    let alloc = |seq: u64, size: u64, stack: u32| Event::Alloc {
        seq,
        domain: 0,
        addr: 0x10_0000 + 64 * seq,
        size,
        align_log2: 4,
        stack,
    };
    let stepping: Vec<Event> = (0..900).map(|i| alloc(i, 200 + i / 3, 1 + (i % 3) as u32)).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let unrelated: Vec<Event> = (900..1800).map(|i| alloc(i, 16 + random() % 100_000, 1)).collect();
    let path = temp("size-deltas.mrl");
    let bytes = memreplay_fixtures::log_bytes_compressed(
        &header(VERSION_MAJOR),
        &[(1, stepping), (1, unrelated)],
        Some(memreplay_fixtures::End { lost: 0, end_ns: 2_000 }),
        memreplay_fixtures::PayloadCompression::Lz4Columns,
    );
    std::fs::write(&path, bytes).unwrap();
    let o = cli(&["info", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("bytes")).skip(2).take(3).collect();
    let at = |l: &str| l.find(" stored").unwrap();
    assert!(lines[0].starts_with("  payloads "), "{text}");
    assert!(lines[1].starts_with("    lz4-columns "), "{text}");
    assert!(lines[2].starts_with("    lz4-columns-size-deltas "), "{text}");
    assert!(lines.iter().all(|l| at(l) == at(lines[0])), "the byte counts line up: {text}");
    let o = cli(&["info", "--json", path.to_str().unwrap()]);
    let info: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let methods: Vec<(&str, u64)> = info["bytes"]["compression"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["method"].as_str().unwrap(), m["blocks"].as_u64().unwrap()))
        .collect();
    assert_eq!(methods, [("lz4-columns", 1), ("lz4-columns-size-deltas", 1)]);
    assert_eq!(info["events"]["alloc"], 1800, "{}", info["events"]);
}

/// A damaged log is recompressed with its damage as it was: exit 3, each damage said.
#[test]
fn recompress_keeps_damage_and_exits_3() {
    let (path, _) = truncated("cut-recompress.mrl", 7);
    let out = temp("cut-recompressed.mrl");
    let o = cli(&["recompress", path.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("replay-cli: damage kept as it was: log cut off at byte"), "{err}");
    assert!(err.contains("replay-cli: the log has no end-of-log record"), "{err}");
    let integrity = |p: &PathBuf| {
        let v: serde_json::Value =
            serde_json::from_slice(&cli(&["info", "--json", p.to_str().unwrap()]).stdout).unwrap();
        (v["integrity"]["complete"].clone(), v["integrity"]["bytes_lost"].clone(), v["totals"]["events"].clone())
    };
    assert_eq!(integrity(&out), integrity(&path));
    assert_eq!(integrity(&out).0, false);
}

/// An interrupted `recompress` leaves nothing behind. It reads the log from a pipe that has
/// given it only the first half, so it is mid-way, its unfinished file written, when the
/// signal comes: it removes the file and ends as the signal ends a process.
#[test]
fn an_interrupted_recompress_leaves_no_file() {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    let (log, _) = write_log("interrupted-input.mrl");
    let bytes = std::fs::read(&log).unwrap();
    for (signal, name) in [(libc::SIGTERM, "term"), (libc::SIGINT, "int"), (libc::SIGHUP, "hup")] {
        let dir = temp(&format!("interrupted-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pipe = dir.join("log.pipe");
        let c_pipe = std::ffi::CString::new(pipe.to_str().unwrap()).unwrap();
        // SAFETY: makes a named pipe at a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_pipe.as_ptr(), 0o600) }, 0);
        let out = dir.join("small.mrl");
        let mut child = common::replay_cli()
            .args(["recompress", pipe.to_str().unwrap(), "-o", out.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut writer = std::fs::OpenOptions::new().write(true).open(&pipe).unwrap();
        writer.write_all(&bytes[..bytes.len() / 2]).unwrap();
        let names = || -> Vec<String> {
            let mut n: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        let started = std::time::Instant::now();
        while !names().iter().any(|n| n.starts_with(".small.mrl.recompress-")) {
            assert!(started.elapsed().as_secs() < 30, "no unfinished file: {:?}", names());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // SAFETY: sends a signal to the child, which has not been waited for.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let status = child.wait().unwrap();
        drop(writer);
        assert_eq!(status.signal(), Some(signal), "{name}: {status:?}");
        assert_eq!(names(), ["log.pipe"], "{name}");
    }
}

/// What `recompress` refuses, before it writes anything: a missing or foreign log, its
/// own input as output, a folder that is not there, a bad method or thread count. A
/// failure never leaves a file behind nor touches the one there.
#[test]
fn recompress_refuses_bad_input_and_leaves_no_file() {
    let (log, _) = write_log("recompress-input.mrl");
    let log = log.to_str().unwrap();
    let text = temp("recompress-notes.txt");
    std::fs::write(&text, "not a log at all, but long enough to be read as one\n").unwrap();
    let kept = temp("recompress-kept.mrl");
    std::fs::write(&kept, "what was there").unwrap();
    let k = kept.to_str().unwrap();
    let missing = temp("recompress-missing.mrl");
    let cases: &[(&[&str], &str)] = &[
        (&["recompress", missing.to_str().unwrap(), "-o", k], "cannot read"),
        (&["recompress", text.to_str().unwrap(), "-o", k], "not a memreplay log"),
        (&["recompress", log, "-o", log], "is the log being read"),
        (&["recompress", log, "-o", "/no/such/folder/x.mrl"], "no directory /no/such/folder"),
    ];
    for (args, needle) in cases {
        assert_error(&cli(args), needle);
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "what was there", "{args:?}");
    }
    for bad in [&["--compression", "zstd:0"][..], &["--compression", "brotli"], &["--threads", "0"]] {
        let o = cli(&[&["recompress", log, "-o", k][..], bad].concat());
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(stderr(&o).contains("invalid value"), "{bad:?}: {}", stderr(&o));
    }
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "what was there");
    let dir = kept.parent().unwrap();
    let temps: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".recompress-"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}
