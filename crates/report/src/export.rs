//! `export`: the replayed state in formats other tools read.
//!
//! - `json`: the whole context tree of each domain (every level; `--depth` and
//!   `--min-bytes` cut it if given) with the memory-over-time series, labels and frames.
//! - `csv`: one row per (domain, context path): a tree flattened for spreadsheets.
//! - `chrome-trace`: the Trace Event Format that Perfetto's UI and `chrome://tracing`
//!   open: memory per domain and per top-level context as counters, process memory as a
//!   counter, labels as instant events.
//! - `pprof`: written by [`crate::pprof`] (symbolicated allocation sites).

use serde::Serialize;
use serde_json::json;

use memreplay_replay::ROOT;

use crate::figures::{self, Agg};
use crate::select::SelectionInfo;
use crate::series::{self, TimelineData};
use crate::tree::{self, DomainTree};
use crate::{Loaded, SCHEMA_VERSION};

/// The formats `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// The whole context tree and the series over time.
    Json,
    /// One row per (domain, context path).
    Csv,
    /// Counters and labels in the Trace Event Format (Perfetto, chrome://tracing).
    ChromeTrace,
    /// A gzipped pprof `profile.proto` of the allocation sites (`report::pprof`).
    Pprof,
}

/// `export --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportJson {
    pub schema_version: u32,
    /// `"export"`.
    pub report: &'static str,
    pub path: String,
    pub selection: SelectionInfo,
    pub at: String,
    /// As in `tree --json`, every level.
    pub domains: Vec<DomainTree>,
    pub timeline: TimelineData,
}

pub fn json(l: &Loaded) -> ExportJson {
    let t = tree::build(l);
    ExportJson {
        schema_version: SCHEMA_VERSION,
        report: "export",
        path: t.path,
        selection: t.selection,
        at: t.at,
        domains: t.domains,
        timeline: series::build(l),
    }
}

/// The CSV header; one row per (domain, context) follows.
pub const CSV_COLUMNS: [&str; 19] = [
    "domain",
    "path",
    "type",
    "name",
    "depth",
    "bytes",
    "count",
    "exclusive_bytes",
    "exclusive_count",
    "peak_bytes",
    "peak_count",
    "total_bytes",
    "total_count",
    "temporary_count",
    "instances",
    "bytes_per_instance",
    "used_bytes",
    "usage_capacity",
    "efficiency",
];

/// `export --format csv`: per domain, a row for the whole domain (path `(all)`, depth 0)
/// then one per context that ever allocated in it, parents before children. Figures as
/// in `tree`: `bytes`/`count` inclusive at the selected point, `exclusive_*` the
/// context's own, `peak_*` inclusive at the domain's peak, `total_*` allocated over the
/// recording (inclusive); `efficiency` = used / capacity of the containers that report
/// their usage (empty without any).
pub fn csv(l: &Loaded) -> Result<String, csv::Error> {
    let state = l.state();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_COLUMNS)?;
    for d in figures::compute(state, &l.sel) {
        if d.total().is_empty() && d.total().live.count == 0 {
            continue;
        }
        let domain = state.domain_name(d.domain);
        // Depth-first from the root, children in creation order.
        let mut stack = vec![ROOT];
        while let Some(node) = stack.pop() {
            let inc: &Agg = d.inclusive(node);
            let exc: &Agg = d.exclusive(node);
            if node != ROOT && inc.is_empty() && inc.live.count == 0 {
                continue;
            }
            let depth = figures::depth(state, node);
            if l.sel.depth.is_some_and(|max| depth > max) || (node != ROOT && inc.live.bytes < l.sel.min_bytes) {
                continue;
            }
            let n = &state.nodes[node as usize];
            let (ty, name) = if node == ROOT { (String::new(), String::new()) } else { state.node_label(node) };
            let path = if node == ROOT { "(all)".to_owned() } else { state.node_path(node) };
            let efficiency = (inc.live.usage_capacity > 0)
                .then(|| format!("{:.4}", inc.live.used_bytes as f64 / inc.live.usage_capacity as f64));
            let instances = if node == ROOT { 0 } else { n.instances };
            w.write_record([
                domain.clone(),
                path,
                ty,
                name,
                depth.to_string(),
                inc.live.bytes.to_string(),
                inc.live.count.to_string(),
                exc.live.bytes.to_string(),
                exc.live.count.to_string(),
                inc.peak.bytes.to_string(),
                inc.peak.count.to_string(),
                inc.total_bytes.to_string(),
                inc.total_count.to_string(),
                inc.temp_count.to_string(),
                instances.to_string(),
                figures::per_instance(inc.live.bytes, instances).map_or_else(String::new, |v| format!("{v:.1}")),
                inc.live.used_bytes.to_string(),
                inc.live.usage_capacity.to_string(),
                efficiency.unwrap_or_default(),
            ])?;
            let from = stack.len();
            stack.extend(state.children(node));
            stack[from..].reverse();
        }
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8(bytes).expect("CSV of UTF-8 strings"))
}

/// Top-level contexts per domain that get their own counter in the Chrome trace; the
/// rest are summed into `(other contexts)` (by each bucket's highest value).
pub const TRACE_CONTEXTS: usize = 12;

/// `export --format chrome-trace`: the Trace Event Format (JSON object form).
///
/// Counters are step functions: each bucket's point is set at the bucket's start with
/// the highest value the series took in it (so no peak is lost), and a last point at the
/// end of the recording holds the value then. Points equal to the one before are left
/// out. Timestamps are microseconds.
pub fn chrome_trace(l: &Loaded) -> serde_json::Value {
    let data = series::build(l);
    let header = &l.replay.header;
    let us = |ns: u64| ns as f64 / 1000.0;
    let mut events = vec![
        json!({"name": "process_name", "ph": "M", "pid": header.pid, "tid": 0,
               "args": {"name": format!("memreplay: {} (pid {})", header.exe_path, header.pid)}}),
        json!({"name": "thread_name", "ph": "M", "pid": header.pid, "tid": 0, "args": {"name": "memory"}}),
    ];
    let counter = |events: &mut Vec<serde_json::Value>, name: &str, points: Vec<(u64, serde_json::Value)>| {
        let mut prev: Option<serde_json::Value> = None;
        let n = points.len();
        for (i, (t, args)) in points.into_iter().enumerate() {
            if prev.as_ref() == Some(&args) && i + 1 < n {
                continue;
            }
            events.push(json!({"name": name, "cat": "memory", "ph": "C", "ts": us(t), "pid": header.pid, "tid": 0, "args": args}));
            prev = Some(args);
        }
    };
    let bucket_points = |high: &dyn Fn(usize) -> serde_json::Value, end: serde_json::Value| {
        let mut points: Vec<(u64, serde_json::Value)> =
            (0..data.buckets).map(|i| (data.bucket_start(i), high(i))).collect();
        points.push((data.end_ns, end));
        points
    };
    for d in &data.domains {
        let points = bucket_points(&|i| json!({"live bytes": d.high[i]}), json!({"live bytes": d.end}));
        counter(&mut events, &d.name, points);

        let mut ctx: Vec<&series::SeriesData> = data.contexts.iter().filter(|c| c.domain == d.name).collect();
        if ctx.is_empty() {
            continue;
        }
        ctx.sort_by(|a, b| b.peak.cmp(&a.peak).then_with(|| a.name.cmp(&b.name)));
        let (shown, rest) = ctx.split_at(ctx.len().min(TRACE_CONTEXTS));
        let args_at = |value: &dyn Fn(&series::SeriesData) -> u64| {
            let mut m = serde_json::Map::new();
            for c in shown {
                m.insert(c.name.clone(), json!(value(c)));
            }
            if !rest.is_empty() {
                let sum: u64 = rest.iter().map(|c| value(c)).fold(0, u64::wrapping_add);
                let key = if shown.iter().any(|c| c.name == "(other contexts)") {
                    "(more contexts)"
                } else {
                    "(other contexts)"
                };
                m.insert(key.to_owned(), json!(sum));
            }
            serde_json::Value::Object(m)
        };
        let points = bucket_points(&|i| args_at(&|c| c.high[i]), args_at(&|c| c.end));
        counter(&mut events, &format!("{} by context", d.name), points);
    }
    if !data.process.is_empty() {
        let points = data
            .process
            .iter()
            .map(|p| (p.time_ns, json!({"resident": p.resident, "committed": p.committed})))
            .collect();
        counter(&mut events, "process memory (OS)", points);
    }
    for label in &data.labels {
        events.push(json!({"name": label.name, "cat": "label", "ph": "i", "s": "g", "ts": us(label.time_ns),
                           "pid": header.pid, "tid": 0, "args": {"frame": label.frame}}));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "source": "memreplay",
            "log": l.path,
            "bucket_ns": data.bucket_ns,
            "note": "counters hold each bucket's highest value from its start; the last point is the value at the end",
        },
    })
}
