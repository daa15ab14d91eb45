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
use std::process::{Command, Output};

use memreplay_format::{
    context_flags, header_flags, DomainKind, Event, EventEncoder, FileHeader, LogWriter, VERSION_MAJOR, VERSION_MINOR,
};

const LABEL: &str = r#"loaded <"&">"#;

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replay-cli")).args(args).output().expect("run replay-cli")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("replay-cli-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn header() -> FileHeader {
    FileHeader {
        version_major: VERSION_MAJOR,
        version_minor: VERSION_MINOR,
        flags: header_flags::CALLSTACKS_ON_ALLOC | header_flags::USAGE_CHANGES,
        pointer_width: 8,
        pid: 7,
        start_unix_ns: 951_827_696_789_000_000,
        ticks_per_second: 1_000_000_000,
        max_stack_depth: 16,
        os: "linux".into(),
        arch: "x86_64".into(),
        exe_path: "/games/forest".into(),
        recorder: "memreplay test".into(),
    }
}

const HEAP: u32 = 0;
const VRAM: u32 = 1;

/// Writes the log of the module comment with the level's own allocation of `level` bytes.
fn write_log(name: &str, level: u64) -> PathBuf {
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
