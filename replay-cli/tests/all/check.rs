//! `replay-cli check` and `diff` through the binary, on small logs written here, with
//! every figure worked out below: each budget rule kind passes at its exact limit and
//! fails one unit past it; exit codes; JUnit XML parsed back; GitHub annotations;
//! malformed budgets pointing to their line.
//!
//! The log (`level` is 1000 bytes in the baseline, 1500 in the log checked):
//!
//! ```text
//! main  Level:forest          [1]  heap 0x1000   level  stack 1
//! main    Texture:rock (inst) [2]  heap 0x2000   4096   stack 2
//! main                        [3]  vram 0x100000 65536  stack 2
//! main    Texture:sand (inst) [4]  heap 0x4000   2048   stack 2
//! main                        [5]  vram 0x200000 32768  stack 2
//! main    Entities:all        [6]  heap 0x8000   1024   stack 3, usage [7]: 256 used
//! main  label `loaded <"&">`  [8]
//! main                        [9]  free heap 0x4000; [10] free vram 0x200000
//! ```
//!
//! Heap: peak = level + 7168 (4), live at the end level + 5120 (3). VRAM: peak 98 304
//! (2), 65 536 (1) at the end. `Level/Texture` at the label: 104 448 bytes in 4
//! allocations, 2 instances, 52 224 per instance. Containers: 256 of 1024 (25%).
//! Growth of the heap's peak: 500 bytes over 8 168 (6.12%); of the sum of the domains'
//! peaks: 500 over 106 472 (0.47%).

use std::path::PathBuf;
use std::process::Output;

use crate::common::{self, cli, stderr, stdout, temp_in};
use memreplay_format::block::FRAME_LEN;
use memreplay_format::{
    context_flags, BlockFrame, DomainKind, Event, EventEncoder, FileHeader, LogReader, LogWriter, LossReason,
};

const LABEL: &str = r#"loaded <"&">"#;

fn temp(name: &str) -> PathBuf {
    temp_in("check", name)
}

fn header() -> FileHeader {
    common::game_header()
}

const HEAP: u32 = 0;
const VRAM: u32 = 1;

/// Writes the log of the module comment with the level's own allocation of `level` bytes.
fn write_log(name: &str, level: u64) -> PathBuf {
    write_log_with(name, level, &[])
}

/// [`write_log`], with `extra` events at the end of the main thread's block.
fn write_log_with(name: &str, level: u64, extra: &[Event]) -> PathBuf {
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
    let push = |ty: u32, name: u32, flags: u8| Event::ContextPush { ty, name, flags };
    let mut meta = EventEncoder::new();
    for e in [
        s(1, "main"),
        s(3, "Level"),
        s(4, "forest"),
        s(5, "Texture"),
        s(6, "rock"),
        s(7, "sand"),
        s(8, "Entities"),
        s(9, "all"),
        s(14, LABEL),
        s(15, "vram"),
        Event::DefineContextType { id: 1, name: 3 },
        Event::DefineContextType { id: 2, name: 5 },
        Event::DefineContextType { id: 3, name: 8 },
        Event::DefineDomain { id: VRAM, name: 15, kind: DomainKind::GpuLocal, capacity: 1 << 20, parent: None },
        Event::DefineStack { id: 1, frames: vec![0x40_1000, 0x40_2000] },
        Event::DefineStack { id: 2, frames: vec![0x40_3000] },
        Event::DefineStack { id: 3, frames: vec![0x40_4000] },
    ] {
        meta.push(&e);
    }
    w.write_block(0, &mut meta).unwrap();
    let mut main = EventEncoder::new();
    for e in [
        Event::Time { ns: 1_000_000 },
        Event::ThreadInfo { os_tid: 100, name: 1 },
        push(1, 4, 0),
        alloc(1, HEAP, 0x1000, level, 1),
        push(2, 6, context_flags::INSTANCE),
        alloc(2, HEAP, 0x2000, 4096, 2),
        alloc(3, VRAM, 0x10_0000, 65536, 2),
        Event::ContextPop,
        push(2, 7, context_flags::INSTANCE),
        alloc(4, HEAP, 0x4000, 2048, 2),
        alloc(5, VRAM, 0x20_0000, 32768, 2),
        Event::ContextPop,
        push(3, 9, 0),
        alloc(6, HEAP, 0x8000, 1024, 3),
        Event::Usage { seq: 7, addr: 0x8000, used: 256 },
        Event::ContextPop,
        Event::ContextPop,
        Event::Time { ns: 2_000_000 },
        Event::Label { seq: 8, name: 14 },
        Event::Free { seq: 9, domain: HEAP, addr: 0x4000, stack: 0 },
        Event::Free { seq: 10, domain: VRAM, addr: 0x20_0000, stack: 0 },
    ] {
        main.push(&e);
    }
    for e in extra {
        main.push(e);
    }
    w.write_block(1, &mut main).unwrap();
    w.finish(0, 3_000_000).unwrap();
    path
}

/// The log checked and its baseline.
fn logs(tag: &str) -> (String, String) {
    let log = write_log(&format!("{tag}-log.mrl"), 1500);
    let base = write_log(&format!("{tag}-base.mrl"), 1000);
    (log.to_str().unwrap().to_owned(), base.to_str().unwrap().to_owned())
}

/// Every kind of rule, each at exactly the figure measured (so each holds with margin
/// 0), or with `tighter` one unit (byte, allocation, hundredth of a percent) past it.
fn budget(tighter: bool) -> String {
    let t = u64::from(tighter);
    let p = if tighter { 0.01 } else { 0.0 };
    format!(
        r#"# every rule kind
[[domain]]
name = "heap"
max_peak = {peak}
max_live = "{live}"
max_live_count = {live_count}
max_growth_bytes = {growth}
max_growth_percent = {growth_pct}

[leaks]
max_bytes = {leaked}
max_count = {leaked_count}

[[context]]
path = "Level/Texture"
at = '{LABEL}'
max_peak = {tex}
max_live = "{tex_kib}KiB"
max_count = {tex_count}
max_instances = {tex_inst}
max_per_instance = {per_inst}

[[context]]
path = "**/Entities"
min_efficiency = "{eff}%"

[[context]]
path = "Level"
domain = "heap"
growth_of = "live"
max_growth_bytes = {growth}
max_growth_percent = {live_growth_pct}

[efficiency]
min = {eff}

[growth]
max_bytes = {growth}
max_percent = {total_growth_pct}
"#,
        peak = 8668 - t,
        live = 6620 - t,
        live_count = 3 - t,
        growth = 500 - t,
        growth_pct = 500.0 * 100.0 / 8168.0 - p,
        leaked = 6620 + 65536 - t,
        leaked_count = 4 - t,
        tex = 104_448 - t,
        // 104 448 bytes are exactly 102 KiB; 101.99 KiB is a little less.
        tex_kib = if tighter { 101.99 } else { 102.0 },
        tex_count = 4 - t,
        tex_inst = 2 - t,
        per_inst = 52_224 - t,
        eff = 25.0 + p,
        live_growth_pct = 500.0 * 100.0 / 6120.0 - p,
        total_growth_pct = 500.0 * 100.0 / 106_472.0 - p,
    )
}

const RULES: usize = 18;

fn write_budget(name: &str, text: &str) -> String {
    let path = temp(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn every_rule_kind_holds_at_its_limit() {
    let (log, base) = logs("pass");
    let b = write_budget("pass.toml", &budget(false));
    let o = cli(&["check", &log, "--budget", &b, "--baseline", &base]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains(&format!("within budget: {RULES} rules, 0 broken")), "{out}");
    assert!(!out.contains("FAIL"), "{out}");

    let o = cli(&["check", &log, "--budget", &b, "--baseline", &base, "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["report"].as_str(), v["passed"].as_bool(), v["rules"].as_u64()),
        (Some("check"), Some(true), Some(RULES as u64))
    );
    let results = v["results"].as_array().unwrap();
    let find = |table: &str, metric: &str| {
        results
            .iter()
            .find(|r| r["table"] == table && r["metric"] == metric)
            .unwrap_or_else(|| panic!("{table} {metric}"))
    };
    let heap_peak = find("domain", "peak");
    assert_eq!((heap_peak["measured"].as_i64(), heap_peak["margin"].as_i64()), (Some(8668), Some(0)));
    assert_eq!((heap_peak["line"].as_u64(), heap_peak["unit"].as_str()), (Some(4), Some("bytes")));
    let per = find("context", "per_instance");
    assert_eq!((per["measured"].as_i64(), per["at"].as_str()), (Some(52_224), Some(LABEL)));
    let g = find("growth", "growth_bytes");
    assert_eq!(
        (g["measured"].as_i64(), g["baseline"].as_i64(), g["growth_of"].as_str()),
        (Some(500), Some(106_472), Some("peak"))
    );
    let eff = find("efficiency", "efficiency");
    assert_eq!(eff["measured"].as_f64(), Some(25.0));
    let leaks = find("leaks", "live_count");
    assert_eq!(leaks["measured"].as_i64(), Some(4));
}

#[test]
fn every_rule_kind_fails_one_past_its_limit_with_junit_and_annotations() {
    let (log, base) = logs("fail");
    let b = write_budget("fail.toml", &budget(true));
    let junit = temp("fail.xml");
    let json = temp("fail.json");
    let o = cli(&[
        "check",
        &log,
        "--budget",
        &b,
        "--baseline",
        &base,
        "--junit",
        junit.to_str().unwrap(),
        "--json-out",
        json.to_str().unwrap(),
        "--github",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(out.contains(&format!("BUDGET BROKEN: {RULES} rules, {RULES} broken")), "{out}");

    // JUnit: valid XML, one test case per rule, every one failed, the label's markup
    // escaped and read back intact.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    let suite = doc.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
    assert_eq!(suite.attribute("tests"), Some(RULES.to_string().as_str()));
    assert_eq!(suite.attribute("failures"), Some(RULES.to_string().as_str()));
    let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    assert_eq!(cases.len(), RULES);
    assert_eq!(doc.descendants().filter(|n| n.has_tag_name("failure")).count(), RULES);
    let peak = cases.iter().find(|c| c.attribute("name") == Some("domain heap: peak")).unwrap();
    assert_eq!(peak.attribute("line"), Some("4"));
    let msg = peak.children().find(|n| n.has_tag_name("failure")).unwrap().attribute("message").unwrap();
    assert!(msg.contains("8.5 KiB at the end, over the maximum 8.5 KiB by 1 B"), "{msg}");
    assert!(
        doc.descendants().filter_map(|n| n.attribute("message")).any(|m| m.contains(&format!("at \"{LABEL}\""))),
        "the label, unescaped"
    );

    // GitHub annotations: one error per broken rule, at its line of the budget.
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("::error ")).collect();
    assert_eq!(errors.len(), RULES, "{out}");
    assert!(
        errors[0].starts_with(&format!(
            "::error file={},line=4,title=memory budget%3A domain heap%3A peak::",
            b.replace(':', "%3A")
        )),
        "{}",
        errors[0]
    );
    assert!(out.lines().any(|l| l.starts_with("::notice title=memory budget::0 of 18 rules hold")), "{out}");
    // Percent signs are escaped in annotation messages.
    assert!(errors.iter().any(|l| l.contains("%25")));

    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((v["passed"].as_bool(), v["failed"].as_u64()), (Some(false), Some(RULES as u64)));
    assert!(v["results"].as_array().unwrap().iter().all(|r| r["margin"].as_f64().is_some_and(|m| m < 0.0)));
}

#[test]
fn each_context_on_its_own_and_patterns_that_match_nothing() {
    let (log, _) = logs("each");
    let b = write_budget(
        "each.toml",
        &format!(
            r#"at = '{LABEL}'

[[context]]
path = "Level:forest/Texture:*"
each = true
max_per_instance = 50000

[[context]]
path = "Level/Audio"
max_live = 0

[[context]]
path = "Level/Audio"
optional = true
max_live = 0
"#
        ),
    );
    let o = cli(&["check", &log, "--budget", &b, "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 4);
    // rock: 4096 + 65536 at the label; sand: 2048 + 32768.
    assert_eq!(
        (r[0]["subject"].as_str(), r[0]["measured"].as_i64(), r[0]["passed"].as_bool()),
        (Some("Level:forest/Texture:rock"), Some(69_632), Some(false))
    );
    assert_eq!(
        (r[1]["subject"].as_str(), r[1]["measured"].as_i64(), r[1]["passed"].as_bool()),
        (Some("Level:forest/Texture:sand"), Some(34_816), Some(true))
    );
    assert_eq!((r[2]["passed"].as_bool(), r[2]["measured"].is_null()), (Some(false), true), "no match fails");
    assert!(r[2]["message"].as_str().unwrap().contains("no context matches `Level/Audio`"));
    assert_eq!((r[3]["passed"].as_bool(), r[3]["measured"].as_i64()), (Some(true), Some(0)), "optional");
}

fn assert_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(o), stderr(o));
    let err = stderr(o);
    assert!(err.starts_with("replay-cli: ") && err.contains(needle), "`{needle}` not in: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
fn a_check_that_cannot_run_exits_2_naming_the_line() {
    let (log, base) = logs("bad");
    let check = |name: &str, text: &str| {
        let b = write_budget(name, text);
        let o = cli(&["check", &log, "--budget", &b, "--baseline", &base]);
        (o, b)
    };
    let (o, b) = check("syntax.toml", "[[domain]]\nname = \"heap\"\nmax_peak = [1\n");
    assert_error(&o, &format!("{b}:3: "));
    let (o, b) = check("unknown.toml", "[[domain]]\nname = \"heap\"\nmax_peek = 1\n");
    assert_error(&o, &format!("{b}:3: unknown field `max_peek`"));
    let (o, b) = check("type.toml", "\n[leaks]\nmax_count = \"many\"\n");
    assert_error(&o, &format!("{b}:3: "));
    let (o, b) = check("glob.toml", "[[context]]\nmax_live = 1\npath = \"Level/a**\"\n");
    assert_error(&o, &format!("{b}:3: `Level/a**`: `**` must be a whole segment"));
    let (o, b) = check("size.toml", "[[domain]]\nname = \"heap\"\n\nmax_live = \"3 elephants\"\n");
    assert_error(&o, &format!("{b}:4: `3 elephants` is not a size"));
    let (o, b) = check("empty.toml", "# nothing\n");
    assert_error(&o, &format!("{b}: no rules"));
    let (o, b) = check("label.toml", "[[domain]]\nname = \"heap\"\nat = \"boss fight\"\nmax_live = 1\n");
    assert_error(&o, &format!("{b}:3: no label \"boss fight\" in the log"));
    let (o, b) = check("domain.toml", "[[domain]]\nname = \"vram.local\"\nmax_live = 1\n");
    assert_error(&o, &format!("{b}:2: no domain \"vram.local\" in the log; domains: \"heap\", \"vram\""));

    // Growth without a baseline; a missing log; a file that is not a log; --json with --github.
    let b = write_budget("growth.toml", "[growth]\nmax_bytes = 1\n");
    assert_error(&cli(&["check", &log, "--budget", &b]), &format!("{b}:2: growth limits need a --baseline"));
    let b = write_budget("fine.toml", "[[domain]]\nname = \"heap\"\nmax_peak = \"1MiB\"\n");
    assert_eq!(cli(&["check", &log, "--budget", &b]).status.code(), Some(0));
    assert_error(&cli(&["check", temp("missing.mrl").to_str().unwrap(), "--budget", &b]), "cannot read");
    assert_error(&cli(&["check", &b, "--budget", &b]), "not a memreplay log");
    assert_error(&cli(&["check", &log, "--budget", temp("missing.toml").to_str().unwrap()]), "cannot read");
    assert_error(&cli(&["check", &log, "--budget", &b, "--json", "--github"]), "--json-out");
    assert_eq!(cli(&["check", &log]).status.code(), Some(2), "--budget is required");
}

#[test]
fn diff_through_the_binary() {
    let (log, base) = logs("diff");
    // Against itself: no change.
    let o = cli(&["diff", &log, &log]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("no change"), "{}", stdout(&o));

    // The level's own allocation grew by 500 bytes: the heap, Level:forest and its site.
    let o = cli(&["diff", &base, &log, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["report"].as_str(), v["changed"].as_bool()), (Some("diff"), Some(true)));
    let heap = &v["domains"][0];
    assert_eq!((heap["domain"].as_str(), heap["status"].as_str()), (Some("heap"), Some("changed")));
    let peak = &heap["figures"]["peak"];
    assert_eq!(
        (peak["before"].as_u64(), peak["after"].as_u64(), peak["change"].as_i64()),
        (Some(8168), Some(8668), Some(500))
    );
    assert_eq!(peak["relative"].as_f64(), Some(500.0 / 8168.0));
    assert_eq!(v["domains"][1]["status"].as_str(), Some("unchanged"));
    let contexts = v["contexts"].as_array().unwrap();
    assert_eq!(contexts.len(), 1, "only Level:forest changed: {contexts:?}");
    assert_eq!(contexts[0]["context"].as_str(), Some("Level:forest"));
    assert_eq!(contexts[0]["figures"]["live"]["change"].as_i64(), Some(500));
    let sites = v["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 1);
    // No module map in this log: nothing to symbolicate, the site is keyed by its raw
    // frames, plain addresses, and says so.
    assert_eq!(sites[0]["key"], "0x401000;0x402000");
    assert_eq!(sites[0]["unresolved"], true);
    let addresses: Vec<&str> =
        sites[0]["frames"].as_array().unwrap().iter().map(|f| f["address"].as_str().unwrap()).collect();
    assert_eq!(addresses, ["0x401000", "0x402000"]);
    assert!(sites[0]["frames"].as_array().unwrap().iter().all(|f| f["reason"] == "no-module"));
    assert!(v["sites_keyed_by"].as_str().unwrap().starts_with("callstack frames as module+0xoffset"));
    assert!(v["symbols"]["before"]["unresolved"].as_u64() > Some(0));
    assert_eq!(sites[0]["figures"]["total"]["change"].as_i64(), Some(500));

    // --min-delta above the change hides it; a percentage below keeps it.
    let v: serde_json::Value =
        serde_json::from_slice(&cli(&["diff", &base, &log, "--json", "--min-delta", "1KiB"]).stdout).unwrap();
    assert_eq!((v["contexts"].as_array().unwrap().len(), v["hidden_contexts"].as_u64()), (0, Some(1)));
    let v: serde_json::Value =
        serde_json::from_slice(&cli(&["diff", &base, &log, "--json", "--min-delta", "5%"]).stdout).unwrap();
    assert_eq!(v["contexts"].as_array().unwrap().len(), 1, "+50% of the level's own bytes");

    // One log, --from/--to: nothing but the free happens after the label, so nothing.
    let o = cli(&["diff", &log, "--from", LABEL, "--to", LABEL]);
    assert_error(&o, "both name");
    let o = cli(&["diff", &log, "--from", LABEL, "--to", "later"]);
    assert_error(&o, "no label \"later\" after");

    // Bad command lines.
    assert_error(&cli(&["diff", &log]), "diff takes two logs");
    assert_error(
        &cli(&["diff", &log, &base, "--from", LABEL, "--to", "x"]),
        "--from/--to compare two labels of one log",
    );
    assert_error(&cli(&["diff", &log, "--from", LABEL]), "--from and --to go together");
    assert_error(&cli(&["diff", &log, &base, "--at", "boss fight"]), "no label \"boss fight\"");
    assert_error(&cli(&["diff", &log, &base, "--domain", "gpu"]), "no domain \"gpu\" in either log");
    assert_error(&cli(&["diff", &log, temp("nope.mrl").to_str().unwrap()]), "cannot read");
    assert_eq!(cli(&["diff", &log, &base, "--min-delta", "lots"]).status.code(), Some(2));
}

/// `diff --from --to` through the binary, on a log where the second label's name is
/// defined late in the merged order (by another thread's stream, after the label), and
/// where what the range left live is freed right after the second label.
#[test]
fn from_to_with_a_label_named_later_in_the_merged_order() {
    let path = temp("late-name.mrl");
    let mut w = LogWriter::new(std::fs::File::create(&path).unwrap(), &header()).unwrap();
    let s = |id: u32, text: &str| Event::DefineString { id, text: text.into() };
    let alloc =
        |seq: u64, addr: u64, size: u64| Event::Alloc { seq, domain: HEAP, addr, size, align_log2: 3, stack: 1 };
    let mut meta = EventEncoder::new();
    for e in [s(1, "start"), s(3, "Level"), s(4, "forest"), Event::DefineContextType { id: 1, name: 3 }] {
        meta.push(&e);
    }
    meta.push(&Event::DefineStack { id: 1, frames: vec![0x40_1000] });
    w.write_block(0, &mut meta).unwrap();
    let mut main = EventEncoder::new();
    for e in [
        Event::Time { ns: 1_000 },
        alloc(1, 0x1000, 10),
        Event::Label { seq: 2, name: 1 },
        Event::ContextPush { ty: 1, name: 4, flags: 0 },
        alloc(3, 0x2000, 100),
        alloc(4, 0x3000, 1000),
        Event::ContextPop,
        Event::Free { seq: 5, domain: HEAP, addr: 0x3000, stack: 0 },
        // Named by string 2, which the worker's stream defines before its event 10.
        Event::Label { seq: 6, name: 2 },
        Event::Free { seq: 7, domain: HEAP, addr: 0x2000, stack: 0 },
    ] {
        main.push(&e);
    }
    w.write_block(1, &mut main).unwrap();
    let mut worker = EventEncoder::new();
    for e in [Event::Time { ns: 2_000 }, s(2, "end"), alloc(10, 0x9000, 7)] {
        worker.push(&e);
    }
    w.write_block(2, &mut worker).unwrap();
    w.finish(0, 3_000).unwrap();

    let p = path.to_str().unwrap();
    let o = cli(&["diff", p, "--from", "start", "--to", "end", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["report"].as_str(), v["to"]["name"].as_str(), v["to"]["seq"].as_u64()),
        (Some("diff-range"), Some("end"), Some(6))
    );
    // The 100 bytes made after "start" and live at "end" (freed just after); not the 10
    // made before "start", nor the 1000 freed before "end".
    assert_eq!((v["total"]["bytes"].as_u64(), v["total"]["count"].as_u64()), (Some(100), Some(1)));
    let ctx = &v["domains"][0]["contexts"][0];
    assert_eq!(
        (ctx["context"].as_str(), ctx["bytes"].as_u64(), ctx["own_count"].as_u64()),
        (Some("Level:forest"), Some(100), Some(1))
    );
    let site = &v["domains"][0]["sites"][0];
    assert_eq!((site["key"].as_str(), site["stack"].as_u64()), (Some("0x401000"), Some(1)));
    assert_eq!(site["frames"][0]["address"], "0x401000");
    let text = stdout(&cli(&["diff", p, "--from", "start", "--to", "end"]));
    assert!(text.contains("allocated after \"start\"") && text.contains("Level:forest"), "{text}");
}

/// How a test damages the log of [`write_log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Harm {
    /// Cut off in the middle of the main thread's block (the last one).
    CutMidBlock,
    /// Cut off right after the main thread's block: no end-of-log record.
    CutBeforeEnd,
    /// One byte of the main thread's block payload flipped: its checksum fails.
    FlipInBlock,
    /// The recorder reported 5 events it could not record (a `Lost` record).
    Lost,
}

/// The offset and frame of every event block of the log at `path`.
fn frames(path: &std::path::Path) -> Vec<(u64, BlockFrame)> {
    let mut r = LogReader::new(std::fs::File::open(path).unwrap()).unwrap();
    std::iter::from_fn(|| r.next_frame().unwrap()).collect()
}

/// The log of [`write_log`] (level 1500), damaged by `harm`, and the main block's offset
/// and frame in the intact log.
fn damaged(tag: &str, harm: Harm) -> (String, u64, BlockFrame) {
    let lost = [Event::Lost { events: 5, bytes: 320, reason: LossReason::ThreadTeardown }];
    let path = write_log_with(&format!("{tag}.mrl"), 1500, if harm == Harm::Lost { &lost } else { &[] });
    let (offset, frame) = *frames(&path).last().unwrap();
    let end = offset as usize + FRAME_LEN + frame.stored_len as usize;
    let mut bytes = std::fs::read(&path).unwrap();
    match harm {
        Harm::CutMidBlock => bytes.truncate(end - frame.stored_len as usize / 2),
        Harm::CutBeforeEnd => bytes.truncate(end),
        Harm::FlipInBlock => bytes[end - frame.stored_len as usize / 2] ^= 0xff,
        Harm::Lost => {}
    }
    std::fs::write(&path, &bytes).unwrap();
    (path.to_str().unwrap().to_owned(), offset, frame)
}

/// The cells of the table row whose rule is `rule`, split on runs of spaces.
fn row(out: &str, rule: &str) -> Option<Vec<String>> {
    let line = out.lines().find(|l| l.contains(rule))?;
    Some(line.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect())
}

const HEAP_BUDGET: &str = "[[domain]]\nname = \"heap\"\nmax_peak = \"1MiB\"\n";

#[test]
fn every_kind_of_damage_fails_check_with_status_3_in_the_table_json_and_junit() {
    let b = write_budget("damage.toml", HEAP_BUDGET);
    for (harm, kind) in [
        (Harm::CutMidBlock, "truncated"),
        (Harm::CutBeforeEnd, "truncated"),
        (Harm::FlipInBlock, "bad-blocks"),
        (Harm::Lost, "lost-events"),
    ] {
        let (log, offset, frame) = damaged(&format!("{harm:?}"), harm);
        let junit = temp(&format!("{harm:?}.xml"));
        let json = temp(&format!("{harm:?}.json"));
        let args = ["check", &log, "--budget", &b, "--junit", junit.to_str().unwrap()];
        let o = cli(&[&args[..], &["--json-out", json.to_str().unwrap()]].concat());
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(3), "{harm:?}: {out}{}", stderr(&o));
        assert_eq!(
            row(&out, "integrity of the log"),
            Some(["DAMAGED", "integrity of the log", "-", "undamaged", kind, "-", "-"].map(String::from).to_vec()),
            "{harm:?}: {out}"
        );
        assert!(out.contains(&format!("\nLOG DAMAGED: 1 rules, 0 broken\n  the log is damaged ({kind} not allowed): ")));

        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!((v["passed"].as_bool(), v["failed"].as_u64()), (Some(false), Some(0)), "{harm:?}");
        let i = &v["integrity"];
        assert_eq!((i["passed"].as_bool(), i["allowed"].as_array().map(Vec::len)), (Some(false), Some(0)));
        assert_eq!(i["baseline"], serde_json::Value::Null);
        let l = &i["log"];
        assert_eq!((l["clean"].as_bool(), l["passed"].as_bool()), (Some(false), Some(false)), "{harm:?}");
        assert_eq!(
            (l["kinds"].clone(), l["not_allowed"].clone()),
            (serde_json::json!([kind]), serde_json::json!([kind]))
        );
        let intact_end = offset + (FRAME_LEN as u64) + u64::from(frame.stored_len);
        let half = u64::from(frame.stored_len) / 2;
        let file_len = std::fs::metadata(&log).unwrap().len();
        // What was lost, where, and how much.
        let expected = match harm {
            Harm::CutMidBlock => serde_json::json!({
                "complete": false, "bytes_read": intact_end - half, "read_until_ns": 0,
                "bytes_lost": intact_end - half - offset, "blocks_lost": 0, "events_in_bad_blocks": 0,
                "recorder_lost_events": 0,
                "damage": [{"kind": "truncated", "offset": offset, "bytes": intact_end - half - offset, "events": 0,
                            "what": format!("log cut off at byte {offset}: {} bytes of an incomplete block lost",
                                            intact_end - half - offset)}],
            }),
            Harm::CutBeforeEnd => serde_json::json!({
                "complete": false, "bytes_read": intact_end, "read_until_ns": 2_000_000, "bytes_lost": 0,
                "blocks_lost": 0, "events_in_bad_blocks": 0, "recorder_lost_events": 0, "damage": [],
            }),
            Harm::FlipInBlock => serde_json::json!({
                "complete": true, "bytes_read": file_len, "read_until_ns": null, "bytes_lost": 0,
                "blocks_lost": 1, "events_in_bad_blocks": frame.event_count, "recorder_lost_events": 0,
                "damage": [{"kind": "bad-blocks", "offset": offset, "bytes": 0, "events": frame.event_count,
                            "what": l["damage"][0]["what"].clone()}],
            }),
            Harm::Lost => serde_json::json!({
                "complete": true, "bytes_read": file_len, "read_until_ns": null, "bytes_lost": 0,
                "blocks_lost": 0, "events_in_bad_blocks": 0, "recorder_lost_events": 5, "damage": [],
            }),
        };
        for (key, want) in expected.as_object().unwrap() {
            assert_eq!(&l[key], want, "{harm:?}: {key}");
        }
        if harm == Harm::FlipInBlock {
            let what = l["damage"][0]["what"].as_str().unwrap();
            assert!(what.starts_with(&format!("block at byte {offset} (thread 1, {} events", frame.event_count)));
        }

        // JUnit: a failed test case of its own, beside the rule's.
        let xml = std::fs::read_to_string(&junit).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
        let suite = doc.descendants().find(|n| n.has_tag_name("testsuite")).unwrap();
        assert_eq!((suite.attribute("tests"), suite.attribute("failures")), (Some("2"), Some("1")));
        let case = doc.descendants().find(|n| n.attribute("name") == Some("integrity of the log")).unwrap();
        let failure = case.children().find(|n| n.has_tag_name("failure")).expect("a failure");
        assert_eq!(failure.attribute("type"), Some("damaged"));
        assert_eq!(failure.attribute("message"), l["message"].as_str());
    }
}

#[test]
fn a_truncated_log_in_full() {
    let (log, _, _) = damaged("whole-text", Harm::CutBeforeEnd);
    let b = write_budget("whole-text.toml", HEAP_BUDGET);
    let o = cli(&["check", &log, "--budget", &b]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(
        stdout(&o),
        format!(
            "{log}: checked against {b}
  result   rule                  at         limit   measured       margin  budget line
  DAMAGED  integrity of the log  -      undamaged  truncated            -  -
  ok       domain heap: peak     end  max 1.0 MiB    8.5 KiB  +1015.5 KiB  {b}:3

LOG DAMAGED: 1 rules, 0 broken
  the log is damaged (truncated not allowed): truncated (no end-of-log record: read to byte {}, events after 2.000 ms missing); the figures cover only what could be read
",
            std::fs::metadata(&log).unwrap().len()
        )
    );
}

#[test]
fn damage_the_budget_or_a_flag_allows_passes_and_other_damage_still_fails() {
    let (cut, _, _) = damaged("allow-cut", Harm::CutBeforeEnd);
    let (flipped, _, _) = damaged("allow-flip", Harm::FlipInBlock);
    let (lost, _, _) = damaged("allow-lost", Harm::Lost);
    let b =
        write_budget("allow.toml", &format!("{HEAP_BUDGET}\n[integrity]\nallow = [\"truncated\", \"lost-events\"]\n"));

    for log in [&cut, &lost] {
        let o = cli(&["check", log, "--budget", &b, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!((v["passed"].as_bool(), v["integrity"]["passed"].as_bool()), (Some(true), Some(true)));
        assert_eq!(v["integrity"]["allowed"], serde_json::json!(["truncated", "lost-events"]));
        assert_eq!(
            (v["integrity"]["log"]["clean"].as_bool(), v["integrity"]["log"]["passed"].as_bool()),
            (Some(false), Some(true))
        );
        let out = stdout(&cli(&["check", log, "--budget", &b]));
        assert_eq!(row(&out, "integrity of the log").unwrap()[0], "allowed", "{out}");
        assert_eq!(row(&out, "integrity of the log").unwrap()[6], format!("{b}:6"), "{out}");
        assert!(out.contains("\nwithin budget: 1 rules, 0 broken\n  the log is damaged, as allowed ("), "{out}");
    }
    // A bad block is not allowed by that budget; with the flag it is.
    let o = cli(&["check", &flipped, "--budget", &b]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stdout(&o).contains("the log is damaged (bad-blocks not allowed)"), "{}", stdout(&o));
    let o = cli(&["check", &flipped, "--budget", &b, "--allow-damage", "corrupt,bad-blocks"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(row(&stdout(&o), "integrity of the log").unwrap()[6], "--allow-damage");

    // A broken rule on a log with allowed damage is a broken budget (1); with damage
    // not allowed the damage wins (3).
    let tight = write_budget("allow-tight.toml", "[[domain]]\nname = \"heap\"\nmax_peak = 1\n");
    assert_eq!(cli(&["check", &cut, "--budget", &tight, "--allow-damage", "truncated"]).status.code(), Some(1));
    assert_eq!(cli(&["check", &cut, "--budget", &tight]).status.code(), Some(3));

    // The baseline is held to the same rule, and says which side it is.
    let (log, _) = logs("allow-base");
    let o = cli(&["check", &log, "--budget", &b, "--baseline", &flipped]);
    assert_eq!(o.status.code(), Some(3));
    let out = stdout(&o);
    assert!(row(&out, "integrity of the log").is_none(), "the log is whole: {out}");
    assert_eq!(row(&out, "integrity of the baseline").unwrap()[..2], ["DAMAGED", "integrity of the baseline"]);
    assert!(
        out.contains("\nBASELINE DAMAGED: 1 rules, 0 broken\n  the baseline is damaged (bad-blocks not allowed): "),
        "{out}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&cli(&["check", &log, "--budget", &b, "--baseline", &flipped, "--json"]).stdout)
            .unwrap();
    assert_eq!(
        (v["integrity"]["log"]["clean"].as_bool(), v["integrity"]["baseline"]["passed"].as_bool()),
        (Some(true), Some(false))
    );

    // A label lost with a bad block: no rule can be measured, and the damage is what
    // fails (3), with the report; with that damage allowed the check cannot run (2).
    let at_label = write_budget("allow-label.toml", &format!("at = '{LABEL}'\n{HEAP_BUDGET}"));
    let o = cli(&["check", &flipped, "--budget", &at_label, "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((v["rules"].as_u64(), v["results"].as_array().map(Vec::len)), (Some(0), Some(0)));
    assert_eq!(
        v["integrity"]["unmeasured"].as_str(),
        Some(format!("{at_label}:1: no label \"{LABEL}\" in the log; labels: none (the log)").as_str())
    );
    let out = stdout(&cli(&["check", &flipped, "--budget", &at_label]));
    assert!(out.contains("\nLOG DAMAGED: 0 rules, 0 broken\n"), "{out}");
    assert!(out.ends_with(&format!("  the rules could not be measured: {at_label}:1: no label \"{LABEL}\" in the log; labels: none (the log)\n")), "{out}");
    let o = cli(&["check", &flipped, "--budget", &at_label, "--allow-damage", "bad-blocks"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&format!("replay-cli: {at_label}:1: no label")), "{}", stderr(&o));

    // Unknown kinds are errors, in the budget (at their line) and on the command line.
    let bad = write_budget(
        "allow-bad.toml",
        &format!("{HEAP_BUDGET}[integrity]\nallow = [\n  \"truncated\",\n  \"cut\",\n]\n"),
    );
    assert_error(&cli(&["check", &log, "--budget", &bad]), &format!("{bad}:7: [integrity] allow: unknown kind of damage `cut`; kinds: truncated, corrupt, bad-blocks, unknown-blocks, trailing-bytes, lost-events"));
    assert_error(
        &cli(&["check", &log, "--budget", &b, "--allow-damage", "truncated,torn"]),
        "--allow-damage: unknown kind of damage `torn`",
    );
    let unknown_key = write_budget("allow-key.toml", &format!("{HEAP_BUDGET}[integrity]\nallows = []\n"));
    assert_error(&cli(&["check", &log, "--budget", &unknown_key]), "unknown field `allows`");
}

#[test]
fn diff_marks_a_damaged_side_and_exits_3() {
    let (log, _) = logs("diff-damage");
    let (flipped, _, _) = damaged("diff-flip", Harm::FlipInBlock);
    let o = cli(&["diff", &flipped, &log]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("diff: {flipped} -> {log} (live at the end; peak at each domain's peak, allocated over the whole recording)"));
    assert!(lines[1].starts_with("  before is DAMAGED: bad-blocks, "), "{out}");
    assert!(lines[1].ends_with(" in 1 block skipped; its figures cover only what could be read"), "{out}");
    assert!(!out.contains("after is DAMAGED"), "{out}");

    let o = cli(&["diff", &log, &flipped, "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["before"]["integrity"]["clean"].as_bool(), v["after"]["integrity"]["clean"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(v["after"]["integrity"]["kinds"], serde_json::json!(["bad-blocks"]));
    assert_eq!(v["after"]["integrity"]["blocks_lost"].as_u64(), Some(1));

    // Two whole logs: status 0, and no such line.
    let o = cli(&["diff", &log, &log]);
    assert_eq!(o.status.code(), Some(0));
    assert!(!stdout(&o).contains("DAMAGED"));

    // --from/--to on a log whose recorder lost events.
    let lost = write_log_with(
        "diff-lost.mrl",
        1500,
        &[
            Event::DefineString { id: 20, text: "later".into() },
            Event::Label { seq: 11, name: 20 },
            Event::Lost { events: 5, bytes: 320, reason: LossReason::ThreadTeardown },
        ],
    );
    let lost = lost.to_str().unwrap();
    let o = cli(&["diff", lost, "--from", LABEL, "--to", "later"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).lines().nth(1),
        Some("  the log is DAMAGED: 5 events lost by the recorder; its figures cover only what could be read")
    );
    let o = cli(&["diff", lost, "--from", LABEL, "--to", "later", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["integrity"]["kinds"].clone(), v["integrity"]["recorder_lost_events"].as_u64()),
        (serde_json::json!(["lost-events"]), Some(5))
    );
    let (cut, _, _) = damaged("diff-cut", Harm::CutBeforeEnd);
    let o = cli(&["diff", &cut, &log]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stdout(&o)
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("  before is DAMAGED: truncated (no end-of-log record: read to byte "));
}

#[test]
fn a_broken_gpu_rule_exits_1_naming_its_line() {
    // After the label, a 256 x 256 RGBA8 texture allocated 8 KiB past its 256 KiB of
    // texels in `vram` (whose other allocations describe no resource).
    let texture = [
        Event::DefineString { id: 16, text: "RGBA8_UNORM".into() },
        Event::Alloc { seq: 11, domain: VRAM, addr: 0x30_0000, size: 270_336, align_log2: 8, stack: 2 },
        Event::Resource {
            domain: VRAM,
            addr: 0x30_0000,
            desc: memreplay_format::ResourceDesc {
                kind: memreplay_format::ResourceKind::Texture,
                width: 256,
                height: 256,
                depth_or_layers: 1,
                mip_levels: 1,
                format: 16,
                name: 0,
            },
        },
    ];
    let log = write_log_with("gpu-log.mrl", 1500, &texture);
    let log = log.to_str().unwrap();
    let text = "[[domain]]\nname = \"heap\"\nmax_peak = \"1MiB\"\n\n[[gpu]]\ndomain = \"vram\"\n\
                max_padding_bytes = 8191\nmax_unknown_formats = 0\n";
    let b = write_budget("gpu.toml", text);
    let junit = temp("gpu.xml");
    let o = cli(&["check", log, "--budget", &b, "--junit", junit.to_str().unwrap(), "--github"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(out.contains("BUDGET BROKEN: 3 rules, 1 broken"), "{out}");
    let fail = row(&out, "gpu vram: padding bytes").unwrap_or_else(|| panic!("{out}"));
    assert_eq!(fail.first().map(String::as_str), Some("FAIL"), "{out}");
    assert_eq!(fail.last(), Some(&format!("{b}:7")), "{out}");
    assert!(
        out.contains(&format!("gpu vram: padding bytes: 8.0 KiB at the end, over the maximum 8.0 KiB by 1 B ({b}:7)")),
        "{out}"
    );
    let ok = row(&out, "gpu vram: resources of unknown format").unwrap_or_else(|| panic!("{out}"));
    assert_eq!(ok.first().map(String::as_str), Some("ok"), "{out}");
    assert!(out.lines().any(|l| l.starts_with(&format!("::error file={},line=7,", b.replace(':', "%3A")))), "{out}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    let case = doc
        .descendants()
        .find(|n| n.attribute("name") == Some("gpu vram: padding bytes"))
        .unwrap_or_else(|| panic!("{xml}"));
    assert_eq!((case.attribute("classname"), case.attribute("line")), (Some("memreplay.budget.gpu"), Some("7")));
    assert!(case.children().any(|n| n.has_tag_name("failure")), "{xml}");

    let o = cli(&["check", log, "--budget", &b, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["results"][1];
    assert_eq!(
        (
            r["table"].as_str(),
            r["subject"].as_str(),
            r["metric"].as_str(),
            r["measured"].as_i64(),
            r["margin"].as_i64()
        ),
        (Some("gpu"), Some("vram"), Some("padding_bytes"), Some(8192), Some(-1))
    );

    // At the label the texture was not allocated yet: nothing padded, the rule holds.
    let b = write_budget(
        "gpu-at.toml",
        &text.replace("domain = \"vram\"\n", &format!("domain = \"vram\"\nat = '{LABEL}'\n")),
    );
    let o = cli(&["check", log, "--budget", &b]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
}
