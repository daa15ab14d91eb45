//! `replay-cli report`: the HTML page and its data island, through the binary, on a log
//! written here: 165 contexts (3 levels × 6 zones × 8 assets) with heap and VRAM
//! allocations, two labels, frees, a domain that only ever sees a free, and a context
//! whose name tries to end the page's script element.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::common::{cli, temp_in};
use memreplay_format::{
    header_flags, DomainKind, Event, EventEncoder, FileHeader, LogWriter, VERSION_MAJOR, VERSION_MINOR,
};
use serde_json::Value;

fn temp(name: &str) -> PathBuf {
    temp_in("html", name)
}

const HEAP: u32 = 0;
const VRAM: u32 = 1;
const GHOST: u32 = 2;
const EVIL: &str = "</script><script>window.pwned = 1</script><!-- <SCRIPT>";
const LEVELS: u64 = 3;
const ZONES: u64 = 6;
const ASSETS: u64 = 8;

fn write_log(name: &str) -> PathBuf {
    let path = temp(name);
    let header = FileHeader {
        version_major: VERSION_MAJOR,
        version_minor: VERSION_MINOR,
        flags: header_flags::CALLSTACKS_ON_ALLOC,
        pointer_width: 8,
        pid: 9,
        start_unix_ns: 951_827_696_789_000_000,
        ticks_per_second: 1_000_000_000,
        max_stack_depth: 16,
        os: "linux".into(),
        arch: "x86_64".into(),
        exe_path: "/games/forest".into(),
        recorder: "memreplay test".into(),
    };
    let mut w = LogWriter::new(std::fs::File::create(&path).unwrap(), &header).unwrap();
    let mut meta = EventEncoder::new();
    let strings = [
        (1, "main"),
        (2, "Level"),
        (3, "Zone"),
        (4, "Asset"),
        (5, "vram.local"),
        (6, "ghost"),
        (7, "loaded"),
        (8, "half freed"),
        (9, EVIL),
    ];
    for (id, text) in strings {
        meta.push(&Event::DefineString { id, text: text.into() });
    }
    // Names of levels, zones and assets: strings 100.. .
    for i in 0..ASSETS.max(ZONES).max(LEVELS) {
        meta.push(&Event::DefineString { id: 100 + i as u32, text: format!("n{i}") });
    }
    for e in [
        Event::DefineContextType { id: 1, name: 2 },
        Event::DefineContextType { id: 2, name: 3 },
        Event::DefineContextType { id: 3, name: 4 },
        Event::DefineDomain { id: VRAM, name: 5, kind: DomainKind::GpuLocal, capacity: 1 << 30, parent: None },
        Event::DefineDomain { id: GHOST, name: 6, kind: DomainKind::Other, capacity: 0, parent: None },
        Event::DefineStack { id: 1, frames: vec![0x40_1000, 0x40_2000] },
    ] {
        meta.push(&e);
    }
    w.write_block(0, &mut meta).unwrap();

    let mut main = EventEncoder::new();
    let mut seq = 0u64;
    let mut next = || {
        seq += 1;
        seq
    };
    let mut live: Vec<(u32, u64)> = Vec::new();
    main.push(&Event::Time { ns: 1_000_000 });
    main.push(&Event::ThreadInfo { os_tid: 100, name: 1 });
    // A free in a domain that never allocates, before VRAM's first allocation: the
    // replay numbers the ghost domain before VRAM.
    main.push(&Event::Free { seq: next(), domain: GHOST, addr: 0x77, stack: 0 });
    let mut addr = 0x10_0000u64;
    let mut t = 1_000_000u64;
    for l in 0..LEVELS {
        main.push(&Event::ContextPush { ty: 1, name: 100 + l as u32, flags: 0 });
        for z in 0..ZONES {
            main.push(&Event::ContextPush { ty: 2, name: 100 + z as u32, flags: 0 });
            for a in 0..ASSETS {
                main.push(&Event::ContextPush { ty: 3, name: 100 + a as u32, flags: 1 });
                let size = 64 * (1 + l * 7 + z * 3 + a * a);
                main.push(&Event::Alloc { seq: next(), domain: HEAP, addr, size, align_log2: 3, stack: 1 });
                live.push((HEAP, addr));
                addr += size.next_multiple_of(64);
                if a % 3 == 0 {
                    main.push(&Event::Alloc {
                        seq: next(),
                        domain: VRAM,
                        addr,
                        size: size * 16,
                        align_log2: 8,
                        stack: 1,
                    });
                    live.push((VRAM, addr));
                    addr += (size * 16).next_multiple_of(64);
                }
                main.push(&Event::ContextPop);
                t += 150_000;
                main.push(&Event::Time { ns: t });
            }
            main.push(&Event::ContextPop);
        }
        main.push(&Event::ContextPop);
    }
    main.push(&Event::Label { seq: next(), name: 7 });
    main.push(&Event::ContextPush { ty: 1, name: 9, flags: 0 });
    main.push(&Event::Alloc { seq: next(), domain: HEAP, addr, size: 4096, align_log2: 3, stack: 1 });
    main.push(&Event::ContextPop);
    // Free every other allocation.
    for (k, &(domain, a)) in live.iter().enumerate() {
        if k % 2 == 0 {
            main.push(&Event::Free { seq: next(), domain, addr: a, stack: 0 });
        }
        if k % 20 == 0 {
            t += 100_000;
            main.push(&Event::Time { ns: t });
        }
    }
    main.push(&Event::Label { seq: next(), name: 8 });
    t += 1_000_000;
    main.push(&Event::Time { ns: t });
    w.write_block(1, &mut main).unwrap();
    w.finish(0, t + 1000).unwrap();
    path
}

fn ok(args: &[&str]) -> String {
    let o = cli(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn report_json(log: &str, extra: &[&str], name: &str) -> Value {
    let out = temp(name);
    let mut args = vec!["report", log, "-o", out.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    ok(&args);
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// The page's tree: per node its path, and its inclusive (bytes, count) at every point of
/// every domain, and allocated in all.
struct PageTree {
    paths: Vec<String>,
    elided: Vec<u64>,
    /// inc[domain][point][node]
    inc: Vec<Vec<Vec<(u64, u64)>>>,
    /// total[domain][node]
    total: Vec<Vec<(u64, u64)>>,
}

fn inclusive(parent: &[i64], triples: &Value) -> Vec<(u64, u64)> {
    let mut v = vec![(0u64, 0u64); parent.len()];
    let t = triples.as_array().unwrap();
    assert_eq!(t.len() % 3, 0);
    for c in t.chunks(3) {
        let n = u(&c[0]) as usize;
        v[n].0 += u(&c[1]);
        v[n].1 += u(&c[2]);
    }
    for n in (1..parent.len()).rev() {
        let p = parent[n] as usize;
        assert!(p < n, "a parent comes before its children");
        v[p].0 += v[n].0;
        v[p].1 += v[n].1;
    }
    v
}

fn page_tree(data: &Value) -> PageTree {
    let t = &data["tree"];
    let nodes = &t["nodes"];
    let parent: Vec<i64> = nodes["parent"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
    let types: Vec<&str> = t["types"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let mut paths = vec![String::new(); parent.len()];
    for n in 1..parent.len() {
        let own = format!("{}:{}", types[u(&nodes["type"][n]) as usize], nodes["name"][n].as_str().unwrap());
        let p = parent[n] as usize;
        paths[n] = if p == 0 { own } else { format!("{}/{own}", paths[p]) };
    }
    let elided = nodes["elided"].as_array().unwrap().iter().map(u).collect();
    let inc = t["own"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_array().unwrap().iter().map(|p| inclusive(&parent, p)).collect())
        .collect();
    let total = t["total"].as_array().unwrap().iter().map(|d| inclusive(&parent, d)).collect();
    PageTree { paths, elided, inc, total }
}

/// Every node of a `tree --json` domain: path → (bytes, count, peak_bytes, total_bytes).
fn tree_nodes(domain: &Value) -> HashMap<String, (u64, u64, u64, Option<u64>)> {
    fn walk(n: &Value, out: &mut HashMap<String, (u64, u64, u64, Option<u64>)>) {
        out.insert(
            n["path"].as_str().unwrap().to_owned(),
            (u(&n["bytes"]), u(&n["count"]), u(&n["peak_bytes"]), n["total_bytes"].as_u64()),
        );
        for c in n["children"].as_array().unwrap() {
            walk(c, out);
        }
    }
    let mut out = HashMap::new();
    walk(&domain["root"], &mut out);
    out
}

/// The kept nodes of a cut tree have the figures `tree` gives their contexts, at the end,
/// at the peak, at a label and in all; the root (and so every total) is exact.
fn check_against_tree(log: &str, data: &Value) {
    let page = page_tree(data);
    let names: Vec<String> = data["summary"]["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["domain"]["name"].as_str().unwrap().to_owned())
        .collect();
    let points = data["tree"]["points"].as_array().unwrap();
    let tree_end: Value = serde_json::from_str(&ok(&["tree", log, "--json"])).unwrap();
    let tree_label: Value = serde_json::from_str(&ok(&["tree", log, "--json", "--at", "loaded"])).unwrap();
    let label_point = points.iter().position(|p| p["name"] == "loaded").expect("a point at the label");
    let mut checked = 0;
    for (di, name) in names.iter().enumerate() {
        let find = |t: &Value| t["domains"].as_array().unwrap().iter().find(|d| d["domain"]["name"] == **name).cloned();
        let Some(end) = find(&tree_end) else {
            assert_eq!(page.inc[di][0][0], (0, 0), "{name} has nothing");
            continue;
        };
        let end = tree_nodes(&end);
        let label = find(&tree_label).map(|d| tree_nodes(&d)).unwrap_or_default();
        let summary = &data["summary"]["domains"][di];
        assert_eq!(
            page.inc[di][0][0],
            (u(&summary["live"]["bytes"]), u(&summary["live"]["count"])),
            "{name} at the end"
        );
        assert_eq!(page.inc[di][1][0].0, u(&summary["peak"]["bytes"]), "{name} at the peak");
        assert_eq!(page.total[di][0], (u(&summary["total"]["bytes"]), u(&summary["total"]["count"])), "{name} in all");
        for n in 0..page.paths.len() {
            if page.elided[n] > 0 {
                continue;
            }
            let (bytes, count, peak, total) = end.get(&page.paths[n]).copied().unwrap_or((0, 0, 0, Some(0)));
            assert_eq!(page.inc[di][0][n], (bytes, count), "{name} {} at the end", page.paths[n]);
            assert_eq!(page.inc[di][1][n].0, peak, "{name} {} at the peak", page.paths[n]);
            assert_eq!(Some(page.total[di][n].0), total, "{name} {} in all", page.paths[n]);
            let (lb, lc, _, _) = label.get(&page.paths[n]).copied().unwrap_or_default();
            assert_eq!(page.inc[di][label_point][n], (lb, lc), "{name} {} at the label", page.paths[n]);
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn cut_tree_keeps_every_total() {
    let log = write_log("cut.mrl");
    let log = log.to_str().unwrap();
    let full = report_json(log, &[], "full.json");
    let t = &full["tree"];
    let contexts = LEVELS + LEVELS * ZONES + LEVELS * ZONES * ASSETS + 1;
    assert_eq!(u(&t["contexts"]), contexts);
    assert_eq!(u(&t["elided_contexts"]), 0);
    assert_eq!(t["nodes"]["parent"].as_array().unwrap().len() as u64, contexts + 1);
    check_against_tree(log, &full);

    for max in [2u64, 7, 20, 60] {
        let cut = report_json(log, &["--max-nodes", &max.to_string()], &format!("cut{max}.json"));
        let t = &cut["tree"];
        let nodes = t["nodes"]["parent"].as_array().unwrap().len() as u64;
        assert!(nodes <= max, "{nodes} nodes for --max-nodes {max}");
        let elided: Vec<u64> = t["nodes"]["elided"].as_array().unwrap().iter().map(u).collect();
        let folded: u64 = elided.iter().sum();
        assert_eq!(folded, u(&t["elided_contexts"]));
        assert_eq!(
            folded + elided.iter().skip(1).filter(|&&e| e == 0).count() as u64,
            contexts,
            "every context is kept or folded"
        );
        assert!(folded > 0);
        // Each elided node is the last child of its parent, one per parent.
        let parent: Vec<i64> = t["nodes"]["parent"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        let mut elided_parents: Vec<i64> = (0..parent.len()).filter(|&n| elided[n] > 0).map(|n| parent[n]).collect();
        let before = elided_parents.len();
        elided_parents.dedup();
        assert_eq!(elided_parents.len(), before);
        check_against_tree(log, &cut);
        // The timeline does not depend on the cut.
        assert_eq!(cut["timeline"]["domains"], full["timeline"]["domains"]);
    }
}

#[test]
fn timeline_series_match_the_domains() {
    let log = write_log("timeline.mrl");
    let data = report_json(log.to_str().unwrap(), &[], "timeline.json");
    let tl = &data["timeline"];
    let edges = tl["edges_ns"].as_array().unwrap();
    let series = tl["domains"].as_array().unwrap();
    assert_eq!(series.len(), 2, "heap and VRAM (the ghost domain never allocated)");
    for s in series {
        let d = &data["summary"]["domains"][u(&s["domain"]) as usize];
        assert_eq!(s["name"], d["domain"]["name"]);
        let high = s["high"].as_array().unwrap();
        assert_eq!(high.len() + 1, edges.len());
        assert_eq!(high.iter().map(u).max(), Some(u(&d["peak"]["bytes"])), "{}", s["name"]);
        assert_eq!(u(s["last"].as_array().unwrap().last().unwrap()), u(&d["live"]["bytes"]), "{}", s["name"]);
        let low = s["low"].as_array().unwrap();
        assert!(low.iter().zip(high).all(|(l, h)| u(l) <= u(h)));
    }
    let labels = tl["labels"].as_array().unwrap();
    assert_eq!(labels.iter().map(|l| l["name"].as_str().unwrap()).collect::<Vec<_>>(), ["loaded", "half freed"]);
    assert!(labels.iter().all(|l| l["point"].is_u64()));
    // One context series per top-level context that held something.
    let names: Vec<&str> = tl["contexts"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"Level:n0") && names.contains(&"Level:n2"), "{names:?}");
}

#[test]
fn a_context_name_cannot_end_the_script() {
    let log = write_log("evil.mrl");
    let out = temp("evil.html");
    ok(&["report", log.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let page = std::fs::read_to_string(&out).unwrap();
    let lower = page.to_ascii_lowercase();
    assert_eq!(lower.matches("</script").count(), 2, "the data island's and the code's");
    assert_eq!(lower.matches("<script").count(), 2);
    assert!(!page.contains("<!--"));
    // The one URI is SVG's namespace, a name rather than an address to load.
    let addresses = page.replace("'http://www.w3.org/2000/svg'", "");
    assert!(!addresses.contains("http://") && !addresses.contains("https://"), "the page names no address to load");
    assert!(page.contains("default-src 'none'"), "the page forbids itself any load");
    let start = page.find(r#"<script type="application/json" id="report-data">"#).unwrap();
    let body = &page[start..];
    let island = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
    let data: Value = serde_json::from_str(island).expect("the island is JSON");
    assert!(data["tree"]["nodes"]["name"].as_array().unwrap().iter().any(|n| n == EVIL), "the name survives intact");
    assert_eq!(data["report"], "html");
}

#[test]
fn bad_output_paths_fail_cleanly() {
    let log = write_log("paths.mrl");
    let log = log.to_str().unwrap();
    let missing_dir = temp("no-such-dir").join("report.html");
    for out in [missing_dir.to_str().unwrap(), std::env::temp_dir().to_str().unwrap()] {
        let o = cli(&["report", log, "-o", out]);
        assert_eq!(o.status.code(), Some(2), "{out}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.starts_with("replay-cli: cannot write ") && err.lines().count() == 1, "{err}");
        assert!(!err.contains("panicked"));
    }
    // A log that cannot be read leaves no empty report behind.
    let out = temp("never.html");
    let o = cli(&["report", temp("missing.mrl").to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.exists());
    // Too small a node budget, and a missing -o, are usage errors.
    assert_eq!(
        cli(&["report", log, "-o", temp("x.html").to_str().unwrap(), "--max-nodes", "1"]).status.code(),
        Some(2)
    );
    assert_eq!(cli(&["report", log]).status.code(), Some(2));
}

#[test]
fn callstacks_are_named_and_the_symbol_options_apply() {
    let log = write_log("symbols.mrl");
    let log = log.to_str().unwrap();
    // The log records no modules: its two return addresses stay addresses, and say why.
    let data = report_json(log, &[], "symbols.json");
    let stats = &data["symbols"];
    assert_eq!((u(&stats["addresses"]), u(&stats["unresolved"])), (2, 2), "{stats}");
    assert_eq!(stats["reasons"][0]["reason"], "no-module");
    assert_eq!(data["leaks"]["symbols"], *stats);
    assert_eq!(data["top"]["symbols"], *stats);
    // Each frame and address is stored once; the lists hold indices in those tables.
    let addresses = &data["addresses_table"];
    assert_eq!(*addresses, serde_json::json!(["0x401000", "0x402000"]));
    let table = &data["frames_table"];
    assert_eq!(table["address"], serde_json::json!([0, 1]));
    assert_eq!(table["offset"], serde_json::json!([null, null]), "the offsets are the addresses");
    let strings = table["strings"].as_array().unwrap();
    let string = |v: &Value| strings[u(v) as usize].as_str().unwrap();
    assert_eq!(table["function"], serde_json::json!([-1, -1]));
    assert_eq!((string(&table["resolution"][0]), string(&table["reason"][1])), ("none", "no-module"));
    let site = &data["summary"]["sites"][0];
    let raw: Vec<&Value> = site["frames"].as_array().unwrap().iter().map(|i| &addresses[u(i) as usize]).collect();
    assert_eq!(raw, ["0x401000", "0x402000"]);
    assert_eq!(site["site"]["function"], "0x401000");
    let frames: Vec<&Value> = site["site"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &addresses[u(&table["address"][u(i) as usize]) as usize])
        .collect();
    assert_eq!(frames, ["0x401000", "0x402000"]);
    // By function: the one callstack, in both domains that allocated, largest at the peak.
    let top = &data["top"]["domains"];
    let names: Vec<&str> = top.as_array().unwrap().iter().map(|d| d["domain"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["heap", "vram.local"]);
    for d in top.as_array().unwrap() {
        assert_eq!(d["rows"][0]["function"], "0x401000");
        assert_eq!(d["rows"][0]["stacks"], serde_json::json!([1]));
    }
    let leak = &data["leaks"]["domains"][0]["contexts"][0]["sites"][0];
    assert_eq!(leak["site"]["function"], "0x401000");
    assert_eq!(
        (&leak["frames"], &leak["site"]["frames"]),
        (&site["frames"], &site["site"]["frames"]),
        "the same frames"
    );

    // --no-symbols: no binary loaded, every address unresolved (these are in no module).
    let data = report_json(log, &["--no-symbols"], "no-symbols.json");
    assert_eq!((u(&data["symbols"]["modules_loaded"]), u(&data["symbols"]["unresolved"])), (0, 2));
    // --symbols must name a directory; nothing is written otherwise.
    let out = temp("bad-symbols.html");
    let o = cli(&["report", log, "-o", out.to_str().unwrap(), "--symbols", temp("no-such-symbols").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--symbols"));
    assert!(!out.exists());
    ok(&[
        "report",
        log,
        "-o",
        temp("with-symbols.html").to_str().unwrap(),
        "--symbols",
        std::env::temp_dir().to_str().unwrap(),
    ]);
}
