//! `replay-cli report` on the demo's log: the page's data island agrees with
//! `summarize --json`, and the page works in a real headless Chromium (Debian's
//! `chromium`, driven by `tests/browser/report.test.mjs` through playwright-core).
//!
//! The browser test is skipped, with a notice, when Chromium, node or the node modules
//! are missing; `MEMREPLAY_BROWSER_TESTS=required` (set by `.ci/run`) makes that a
//! failure. `MEMREPLAY_CHROMIUM` names another Chromium binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use memreplay_demo::{LEAK_FUNCTION, LEVEL};
use memreplay_report::{self as report, build_leaks_symbolized, build_summary, symbolizer, to_json, HtmlOptions};
use memreplay_report::{Progress, ReportOptions, SymbolOptions};
use memreplay_tests::{run_demo, temp_log};
use serde_json::Value;

const DEMO: &str = env!("CARGO_BIN_EXE_demo-runner");

/// Records the demo and writes its report; returns the page's path and its island.
fn demo_report(name: &str) -> (PathBuf, PathBuf, Value) {
    let log = temp_log(&format!("{name}.mrl"));
    run_demo(DEMO, &[log.to_str().unwrap()]);
    let page = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.html"));
    let args = ReportOptions::new(&log);
    let text = report::run_html(&args, &SymbolOptions::default(), &HtmlOptions::default(), Progress::Hidden)
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&page, &text).unwrap();
    let open = r#"<script type="application/json" id="report-data">"#;
    let start = text.find(open).expect("the data island") + open.len();
    let end = start + text[start..].find("</script>").unwrap();
    let data: Value = serde_json::from_str(&text[start..end]).expect("the island parses as JSON");
    (log, page, expand_stacks(&data))
}

/// The island with its `frames` lists resolved (JSON.md, `report`): a site's (and a top
/// row's) indices in `frames_table` become frame objects, a raw list's indices in
/// `addresses_table` return addresses, as in the `leaks`, `summarize` and `top` reports.
/// Checks on the way that the island stores each frame and address once.
fn expand_stacks(island: &Value) -> Value {
    let table = &island["frames_table"];
    let addresses = island["addresses_table"].as_array().expect("addresses_table");
    let distinct = |v: &[Value]| v.iter().collect::<std::collections::HashSet<_>>().len() == v.len();
    assert!(addresses.iter().all(Value::is_string) && distinct(addresses), "each address once");
    let strings = table["strings"].as_array().expect("frames_table.strings");
    let n = table["address"].as_array().expect("frames_table.address").len();
    let string = |v: &Value| match v.as_i64().expect("a string index") {
        -1 => Value::Null,
        i => strings[i as usize].clone(),
    };
    let frames: Vec<Value> = (0..n)
        .map(|i| {
            let address = addresses[u(&table["address"][i]) as usize].clone();
            let offset = &table["offset"][i];
            serde_json::json!({
                "address": address,
                "module": string(&table["module"][i]),
                "offset": if offset.is_null() { &address } else { offset },
                "function": string(&table["function"][i]),
                "file": string(&table["file"][i]),
                "line": table["line"][i],
                "inlined": u(&table["inlined"][i]) == 1,
                "resolution": string(&table["resolution"][i]),
                "reason": string(&table["reason"][i]),
            })
        })
        .collect();
    assert!(distinct(&frames), "each frame once");
    fn walk(v: &mut Value, symbolicated: bool, resolve: &dyn Fn(&Value, bool) -> Value) {
        match v {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    if key == "frames" && child.is_array() {
                        *child = child.as_array().unwrap().iter().map(|i| resolve(i, symbolicated)).collect();
                    } else {
                        walk(child, key == "site" || key == "rows", resolve);
                    }
                }
            }
            Value::Array(list) => list.iter_mut().for_each(|x| walk(x, symbolicated, resolve)),
            _ => {}
        }
    }
    let resolve = |i: &Value, symbolicated: bool| {
        let i = u(i) as usize;
        if symbolicated {
            frames[i].clone()
        } else {
            addresses[i].clone()
        }
    };
    let mut data = island.clone();
    for key in ["summary", "leaks", "top"] {
        walk(&mut data[key], false, &resolve);
    }
    let map = data.as_object_mut().unwrap();
    map.remove("frames_table").unwrap();
    map.remove("addresses_table").unwrap();
    data
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// Inclusive bytes and counts of the root from `[node, bytes, count, ...]` triples (every
/// node's figures end up in the root).
fn root_sum(triples: &Value) -> (u64, u64) {
    let t = triples.as_array().unwrap();
    t.chunks(3).fold((0, 0), |(b, c), x| (b + u(&x[1]), c + u(&x[2])))
}

#[test]
fn the_demos_island_agrees_with_summarize() {
    let (log, _, data) = demo_report("island");
    let loaded = report::load(&ReportOptions::new(&log), Progress::Hidden).unwrap();
    let summary: Value = serde_json::from_str(&to_json(&build_summary(&loaded))).unwrap();
    let page = &data["summary"];
    // Same figures; only the lists are longer in the page (25 rows rather than 10).
    for key in ["capture", "integrity", "anomalies", "domains", "total", "process_memory", "selection"] {
        if key == "selection" {
            assert_eq!(page[key]["at"], summary[key]["at"]);
            continue;
        }
        assert_eq!(page[key], summary[key], "{key}");
    }
    // The same sites; the page's are symbolicated (`site`), `summarize --json`'s are not.
    let strip = |sites: &Value| -> Vec<Value> {
        let mut v = sites.as_array().unwrap().clone();
        v.iter_mut().for_each(|s| _ = s.as_object_mut().unwrap().remove("site"));
        v
    };
    assert!(summary["sites"][0].get("site").is_none());
    assert!(page["sites"][0]["site"].is_object());
    let n = summary["sites"].as_array().unwrap().len();
    assert_eq!(strip(&page["sites"])[..n], strip(&summary["sites"])[..], "sites");
    assert!(data["summary"]["process_memory"].is_object(), "the demo samples process memory");

    // The tree's figures add up to each domain's live, peak and allocated figures.
    let points = data["tree"]["points"].as_array().unwrap();
    assert_eq!(points[0]["kind"], "end");
    assert_eq!(points[1]["kind"], "peak");
    let labels: Vec<&str> =
        points.iter().filter(|p| p["kind"] == "label").map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(labels, memreplay_demo::LABELS);
    for (i, d) in summary["domains"].as_array().unwrap().iter().enumerate() {
        let name = d["domain"]["name"].as_str().unwrap();
        let own = &data["tree"]["own"][i];
        assert_eq!(root_sum(&own[0]), (u(&d["live"]["bytes"]), u(&d["live"]["count"])), "{name} at the end");
        assert_eq!(root_sum(&own[1]), (u(&d["peak"]["bytes"]), u(&d["peak"]["count"])), "{name} at its peak");
        let total = root_sum(&data["tree"]["total"][i]);
        assert_eq!(total, (u(&d["total"]["bytes"]), u(&d["total"]["count"])), "{name} in all");
        // Its timeline series peaks at the domain's peak and ends at its live bytes.
        if let Some(s) = data["timeline"]["domains"].as_array().unwrap().iter().find(|s| u(&s["domain"]) == i as u64) {
            assert_eq!(s["high"].as_array().unwrap().iter().map(u).max(), Some(u(&d["peak"]["bytes"])), "{name}");
            assert_eq!(s["last"].as_array().unwrap().last().map(u), Some(u(&d["live"]["bytes"])), "{name}");
        } else {
            assert_eq!(u(&d["total"]["count"]), 0, "{name} allocated, so it has a series");
        }
    }
    // The demo's tree is far under the node budget: nothing is elided.
    assert_eq!(data["tree"]["elided_contexts"], 0);
    assert_eq!(data["timeline"]["labels"].as_array().unwrap().len(), memreplay_demo::LABELS.len());
    assert_eq!(u(&data["timeline"]["frames"]["count"]), u(&summary["capture"]["frames"]));
    // Leaks: the same as `leaks --json` (the demo's deliberate leak is in there),
    // symbolicated the same way.
    let mut syms = symbolizer(&loaded, &SymbolOptions::default()).unwrap();
    let leaks: Value = serde_json::from_str(&to_json(&build_leaks_symbolized(&loaded, &mut syms))).unwrap();
    assert_eq!(data["leaks"]["total_bytes"], leaks["total_bytes"]);
    assert_eq!(data["leaks"]["domains"], leaks["domains"]);
}

/// The function a site row or frame names, and its file.
fn function_and_file(v: &Value) -> (&str, &str) {
    (v["function"].as_str().unwrap_or(""), v["file"].as_str().unwrap_or(""))
}

#[test]
fn the_demos_island_is_symbolicated() {
    let (_, _, data) = demo_report("island-symbols");
    // The demo is built with debug info and its binary is where it ran: most addresses
    // resolve to files and lines, and the stats are the same object everywhere.
    let stats = &data["symbols"];
    let (addresses, with_lines) = (u(&stats["addresses"]), u(&stats["with_lines"]));
    assert!(addresses > 0 && with_lines > addresses / 2, "{stats}");
    assert_eq!(addresses, with_lines + u(&stats["function_only"]) + u(&stats["unresolved"]), "{stats}");
    assert_eq!(data["leaks"]["symbols"], *stats);
    assert_eq!(data["top"]["symbols"], *stats);

    // By allocating function, ranked by bytes at the peak: the demo's loaders, in their
    // source file, each with the callstacks merged into it.
    assert_eq!((&data["top"]["by"], &data["top"]["group"]), (&Value::from("peak"), &Value::from("function")));
    let heap = data["top"]["domains"].as_array().unwrap().iter().find(|d| d["domain"]["name"] == "heap").unwrap();
    let rows = heap["rows"].as_array().unwrap();
    for (function, file) in [
        ("memreplay_demo::game::load_texture", "demo/src/game.rs"),
        ("memreplay_demo::workers::decode", "demo/src/workers.rs"),
    ] {
        let r = rows.iter().find(|r| r["function"] == function).unwrap_or_else(|| {
            panic!("no {function} in the top functions: {:?}", rows.iter().map(|r| &r["function"]).collect::<Vec<_>>())
        });
        assert!(r["file"].as_str().unwrap().ends_with(file), "{r}");
        assert!(!r["stacks"].as_array().unwrap().is_empty());
        assert!(r["lines"].as_array().unwrap().iter().all(|l| l["file"].as_str().unwrap().ends_with(file)), "{r}");
        assert!(u(&r["peak"]["bytes"]) > 0);
    }
    let peaks: Vec<u64> = rows.iter().map(|r| u(&r["peak"]["bytes"])).collect();
    assert!(peaks.windows(2).all(|w| w[0] >= w[1]), "largest at the peak first: {peaks:?}");

    // By callstack: every site row keeps its raw return addresses and gets its site; the
    // symbolicated frames come from those addresses (only frames at the top trimmed).
    let sites = data["summary"]["sites"].as_array().unwrap();
    assert!(!sites.is_empty());
    let mut demo_functions = 0;
    for st in sites {
        let site = &st["site"];
        assert_eq!(site["stack"], st["stack"]);
        let raw: Vec<&str> = st["frames"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        let frames = site["frames"].as_array().unwrap();
        assert_eq!(frames.is_empty(), raw.is_empty(), "{st}");
        let mut last = 0;
        for f in frames {
            let at = raw.iter().position(|a| *a == f["address"].as_str().unwrap()).expect("a recorded address");
            assert!(at >= last, "frames keep the recorded order: {st}");
            last = at;
        }
        let (function, file) = function_and_file(site);
        if function.starts_with("memreplay_demo::") {
            demo_functions += 1;
            assert!(file.contains("demo/src/"), "{site}");
            assert!(site["line"].is_u64());
            let f = &frames[u(&site["site_frame"]) as usize];
            assert_eq!(function_and_file(f), (function, file));
        }
    }
    assert!(demo_functions > 0, "no site in the demo's own functions");

    // The leak: its function and file, in the context list and by callstack.
    let heap = data["leaks"]["domains"].as_array().unwrap().iter().find(|d| d["domain"]["name"] == "heap").unwrap();
    let cache = format!("Level:{LEVEL}/Scripts:cache");
    let c = heap["contexts"].as_array().unwrap().iter().find(|c| c["context"] == cache.as_str()).expect("the leak");
    let (function, file) = function_and_file(&c["sites"][0]["site"]);
    assert_eq!(function, format!("memreplay_demo::game::{LEAK_FUNCTION}"));
    assert!(file.ends_with("demo/src/game.rs"), "{file}");
    let by_stack = heap["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stack"] == c["sites"][0]["stack"])
        .expect("the leak by callstack");
    assert_eq!(by_stack["site"], c["sites"][0]["site"]);
}

/// What the browser test needs, or why it cannot run.
fn browser_setup() -> Result<(PathBuf, PathBuf), String> {
    let chromium = PathBuf::from(std::env::var("MEMREPLAY_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()));
    if !chromium.exists() {
        return Err(format!("no Chromium at {} (apt-get install chromium)", chromium.display()));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    if !dir.join("node_modules/playwright-core/package.json").exists() {
        return Err(format!("no node modules in {} (npm ci there)", dir.display()));
    }
    match Command::new("node").arg("--version").output() {
        Ok(o) if o.status.success() => Ok((chromium, dir)),
        _ => Err("no node on the PATH".into()),
    }
}

#[test]
fn the_demos_report_works_in_chromium() {
    let (chromium, dir) = match browser_setup() {
        Ok(s) => s,
        Err(why) => {
            if std::env::var("MEMREPLAY_BROWSER_TESTS").is_ok_and(|v| v == "required") {
                panic!("the browser test is required (MEMREPLAY_BROWSER_TESTS=required) but cannot run: {why}");
            }
            eprintln!("SKIPPED the_demos_report_works_in_chromium: {why}");
            return;
        }
    };
    let (_, page, _) = demo_report("browser");
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report-demo.png");
    let out = Command::new("node")
        .arg(dir.join("report.test.mjs"))
        .args(["check", page.to_str().unwrap(), shot.to_str().unwrap()])
        .env("MEMREPLAY_CHROMIUM", &chromium)
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser checks failed:\n{stdout}\n{stderr}");
    let results: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or("")).expect("the results line");
    assert!(shot.exists());
    println!("report: {}\nscreenshot: {}\nresults: {results}", page.display(), shot.display());
    eprintln!("screenshot of the demo's report: {}", shot.display());
}
