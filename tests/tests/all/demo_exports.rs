//! The views over time and the exports (`timeline`, `export --format json|csv|chrome-trace`)
//! on a real demo log: each must agree with `summarize` to the byte.

use std::collections::BTreeMap;

use memreplay_demo::LABELS;
use memreplay_report::{self as report, build_summary, ChartBy, ChartOptions, ExportFormat, ImageFormat};
use memreplay_report::{Progress, ReportOptions, SymbolOptions};
use memreplay_tests::{run_demo, temp_log};
use serde_json::Value;

const DEMO: &str = env!("CARGO_BIN_EXE_demo-runner");

/// A demo log (recorded once per test binary run under this name).
fn demo(name: &str) -> std::path::PathBuf {
    let path = temp_log(name);
    run_demo(DEMO, &[path.to_str().unwrap(), "--textures", "6", "--frames", "30"]);
    path
}

/// `summarize --json`, as the reference.
fn summary(path: &std::path::Path) -> report::Summary {
    build_summary(&report::load(&ReportOptions::new(path), Progress::Hidden).unwrap())
}

fn export(path: &std::path::Path, format: ExportFormat) -> String {
    let out = report::run_export(&ReportOptions::new(path), format, &SymbolOptions::default(), Progress::Hidden);
    String::from_utf8(out.unwrap()).unwrap()
}

fn timeline(path: &std::path::Path, by: ChartBy) -> String {
    let opts = ChartOptions { by, ..ChartOptions::default() };
    let out = report::run_timeline(&ReportOptions::new(path), opts, ImageFormat::Svg, Progress::Hidden);
    String::from_utf8(out.unwrap()).unwrap()
}

fn attr(n: &roxmltree::Node, name: &str) -> u64 {
    n.attribute(name).unwrap_or_else(|| panic!("{name}")).parse().unwrap()
}

#[test]
fn the_timeline_svg_draws_what_summarize_says() {
    let path = demo("timeline.mrl");
    let s = summary(&path);
    let svg = timeline(&path, ChartBy::Domain);
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let class = |c: &str| doc.descendants().filter(move |n| n.attribute("class") == Some(c)).collect::<Vec<_>>();

    // One series per domain: its highest bucket is the domain's peak, its end the live bytes.
    let series = class("series");
    for d in &s.domains {
        let g = series.iter().find(|g| g.attribute("data-name") == Some(&d.domain.name)).expect("a series per domain");
        assert_eq!(attr(g, "data-peak"), d.peak.bytes, "{}", d.domain.name);
        assert_eq!(attr(g, "data-high"), d.peak.bytes, "{}: highest bucket", d.domain.name);
        assert_eq!(attr(g, "data-end"), d.live.bytes, "{}", d.domain.name);
        let peak = class("peak").into_iter().find(|p| p.attribute("data-domain") == Some(&d.domain.name));
        assert_eq!(peak.map(|p| attr(&p, "data-bytes")), (d.peak.bytes > 0).then_some(d.peak.bytes));
    }
    // What the OS saw, sampled every millisecond by the demo.
    let pm = s.process_memory.as_ref().unwrap();
    let resident =
        class("series process").into_iter().find(|g| g.attribute("data-name") == Some("process resident (OS)"));
    let resident = resident.expect("a resident line");
    assert_eq!(attr(&resident, "data-peak"), pm.resident.peak);
    assert_eq!(attr(&resident, "data-end"), pm.resident.end);
    // A marker per label, in order.
    let labels: Vec<&str> = class("label").iter().map(|g| g.attribute("data-name").unwrap()).collect();
    assert_eq!(labels, LABELS);
    let times: Vec<u64> = class("label").iter().map(|g| attr(g, "data-time-ns")).collect();
    assert_eq!(times, s.capture.labels.iter().map(|l| l.time_ns).collect::<Vec<_>>());

    // By context: the heap's top-level contexts, which add up to the heap.
    let svg = timeline(&path, ChartBy::Context);
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let series: Vec<_> = doc.descendants().filter(|n| n.attribute("class") == Some("series")).collect();
    assert!(series.len() > 3 && series.iter().all(|g| g.attribute("data-domain") == Some("heap")));
    let heap = s.domains.iter().find(|d| d.domain.name == "heap").unwrap();
    assert_eq!(series.iter().map(|g| attr(g, "data-end")).sum::<u64>(), heap.live.bytes);
    assert!(series.iter().any(|g| g.attribute("data-name") == Some("Level:Forest")));
    assert!(series.iter().all(|g| attr(g, "data-peak") <= heap.peak.bytes));
}

#[test]
fn csv_and_json_exports_add_up_to_the_summary() {
    let path = demo("exports.mrl");
    let s = summary(&path);

    let text = export(&path, ExportFormat::Csv);
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    assert_eq!(header.iter().collect::<Vec<_>>(), report::CSV_COLUMNS);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (domain, path_c, depth) = (col("domain"), col("path"), col("depth"));
    let mut by_domain: BTreeMap<String, Vec<csv::StringRecord>> = BTreeMap::new();
    for r in rows.records() {
        let r = r.unwrap();
        by_domain.entry(r[domain].to_owned()).or_default().push(r);
    }
    let num = |r: &csv::StringRecord, name: &str| r[col(name)].parse::<u64>().unwrap();
    for d in s.domains.iter().filter(|d| d.total.count > 0) {
        let rows = &by_domain[&d.domain.name];
        let all = &rows[0];
        assert_eq!(&all[path_c], "(all)");
        assert_eq!((num(all, "bytes"), num(all, "count")), (d.live.bytes, d.live.count), "{}", d.domain.name);
        assert_eq!(num(all, "peak_bytes"), d.peak.bytes);
        assert_eq!((num(all, "total_bytes"), num(all, "total_count")), (d.total.bytes, d.total.count));
        // Own bytes over every row, and the top level's inclusive bytes plus the root's own,
        // both give the domain.
        assert_eq!(rows.iter().map(|r| num(r, "exclusive_bytes")).sum::<u64>(), d.live.bytes);
        let top: u64 = rows.iter().filter(|r| &r[depth] == "1").map(|r| num(r, "bytes")).sum();
        assert_eq!(top + num(all, "exclusive_bytes"), d.live.bytes);
        // Paths are unique and children follow their parents.
        let paths: Vec<&str> = rows.iter().map(|r| &r[path_c]).collect();
        for (i, p) in paths.iter().enumerate().skip(1) {
            if let Some((parent, _)) = p.rsplit_once('/') {
                assert!(paths[..i].contains(&parent), "{p} after its parent");
            }
        }
        assert_eq!(paths.len(), paths.iter().collect::<std::collections::BTreeSet<_>>().len());
    }
    // The console, 1000 bytes used of 1 MB reserved: live at "level loaded", freed by the end.
    let console = |text: &str| {
        let mut rows = csv::Reader::from_reader(text.as_bytes());
        rows.records().map(Result::unwrap).find(|r| r[path_c].ends_with("UI:debug console")).unwrap()
    };
    assert_eq!(&console(&text)[col("efficiency")], "", "nothing live to weigh at the end");
    let mut args = ReportOptions::new(&path);
    args.at = Some(report::At::Label(LABELS[1].into()));
    let out = report::run_export(&args, ExportFormat::Csv, &SymbolOptions::default(), Progress::Hidden).unwrap();
    let at_label = console(std::str::from_utf8(&out).unwrap());
    assert_eq!(num(&at_label, "used_bytes"), memreplay_demo::CONSOLE_USED as u64);
    assert_eq!(num(&at_label, "usage_capacity"), memreplay_demo::CONSOLE_CAPACITY as u64);
    assert_eq!(&at_label[col("efficiency")], "0.0010");

    let v: Value = serde_json::from_str(&export(&path, ExportFormat::Json)).unwrap();
    assert_eq!(v["report"], "export");
    for d in &s.domains {
        let t = v["domains"].as_array().unwrap().iter().find(|t| t["domain"]["name"] == d.domain.name.as_str());
        if d.total.count == 0 {
            continue;
        }
        let root = &t.expect("a tree per domain")["root"];
        assert_eq!((root["bytes"].as_u64(), root["peak_bytes"].as_u64()), (Some(d.live.bytes), Some(d.peak.bytes)));
        let series = v["timeline"]["domains"].as_array().unwrap().iter().find(|x| x["name"] == d.domain.name.as_str());
        let series = series.expect("a series per domain");
        assert_eq!(series["peak"].as_u64(), Some(d.peak.bytes));
        assert_eq!(series["high"].as_array().unwrap().iter().filter_map(Value::as_u64).max(), Some(d.peak.bytes));
        assert_eq!(series["end"].as_u64(), Some(d.live.bytes));
    }
    let labels: Vec<&str> =
        v["timeline"]["labels"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(labels, LABELS);
    assert_eq!(v["timeline"]["frames"].as_array().unwrap().len() as u64, s.capture.frames);
}

#[test]
fn the_chrome_trace_has_the_summary_figures() {
    let path = demo("trace.mrl");
    let s = summary(&path);
    let v: Value = serde_json::from_str(&export(&path, ExportFormat::ChromeTrace)).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["ph"] == "M" && e["name"] == "process_name"));
    for d in s.domains.iter().filter(|d| d.total.count > 0) {
        let points: Vec<(f64, u64)> = events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == d.domain.name.as_str())
            .map(|e| (e["ts"].as_f64().unwrap(), e["args"]["live bytes"].as_u64().unwrap()))
            .collect();
        assert!(points.windows(2).all(|w| w[0].0 <= w[1].0), "{}: in time order", d.domain.name);
        assert_eq!(points.iter().map(|p| p.1).max(), Some(d.peak.bytes), "{}", d.domain.name);
        assert_eq!(points.last().map(|p| p.1), Some(d.live.bytes), "{}", d.domain.name);
        // The per-context counter adds up to the domain at the end.
        let by_ctx = events.iter().rfind(|e| e["name"] == format!("{} by context", d.domain.name)).unwrap();
        let sum: u64 = by_ctx["args"].as_object().unwrap().values().filter_map(Value::as_u64).sum();
        assert_eq!(sum, d.live.bytes, "{}", d.domain.name);
    }
    let labels: Vec<(&str, f64)> = events
        .iter()
        .filter(|e| e["ph"] == "i")
        .map(|e| (e["name"].as_str().unwrap(), e["ts"].as_f64().unwrap()))
        .collect();
    let expected: Vec<(&str, f64)> =
        s.capture.labels.iter().map(|l| (l.name.as_str(), l.time_ns as f64 / 1000.0)).collect();
    assert_eq!(labels, expected);
    let pm = s.process_memory.as_ref().unwrap();
    let resident: Vec<u64> = events
        .iter()
        .filter(|e| e["name"] == "process memory (OS)")
        .map(|e| e["args"]["resident"].as_u64().unwrap())
        .collect();
    assert_eq!(resident.iter().max(), Some(&pm.resident.peak));
}

#[test]
fn options_that_do_not_apply_are_refused() {
    let path = demo("refused.mrl");
    let svg = ImageFormat::Svg;
    let mut args = ReportOptions::new(&path);
    args.thread = Some("main".into());
    let e = report::run_timeline(&args, ChartOptions::default(), svg, Progress::Hidden).unwrap_err();
    assert_eq!(e.to_string(), "timeline does not take --thread: it covers every thread");
    let none = SymbolOptions::default();
    let e = report::run_export(&args, ExportFormat::ChromeTrace, &none, Progress::Hidden).unwrap_err();
    assert_eq!(e.to_string(), "export --format chrome-trace does not take --thread: the trace covers every thread");
    let mut args = ReportOptions::new(&path);
    args.at = Some(report::At::Label("gameplay".into()));
    let e = report::run_timeline(&args, ChartOptions::default(), svg, Progress::Hidden).unwrap_err();
    assert_eq!(e.to_string(), "timeline does not take --at: it covers the whole recording");
    let e = ImageFormat::from_path(std::path::Path::new("chart.bmp")).unwrap_err();
    assert!(e.to_string().contains("cannot tell the image format"), "{e}");
    assert_eq!(ImageFormat::from_path(std::path::Path::new("chart.PNG")).unwrap(), ImageFormat::Png);
}
