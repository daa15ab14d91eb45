//! `report`: one self-contained HTML page to explore a log: the timeline (memory over
//! time per domain, process memory, labels, peaks), a treemap and an expandable table of
//! the context tree at the end, at each domain's peak or at a label, leaks, top
//! allocation sites and the summary figures. Callstacks (the top sites, the allocating
//! functions, the leaks) are symbolicated with one [`Symbolizer`] (`--symbols`), so each
//! address is resolved once; the page shows what it resolved (`symbols`).
//!
//! The page is `html/page.html` with `html/report.css` and `html/report.js` inlined, plus
//! one JSON data island (`<script type="application/json" id="report-data">`) built
//! here: [`HtmlReport`], written as an [`Island`]. The page loads nothing from the network
//! and reads no data but the island. Every `<` in the island is written `\u003c`, so no
//! string of the log (a context named `</script>`) can end the script element.
//!
//! The island stores each distinct callstack frame once: the leak, site and top lists
//! share most of their frames, and a symbolicated frame is a whole object. Every `frames`
//! list of `summary`, `leaks` and `top` holds indices instead: a symbolicated stack's into
//! `frames_table` (the frames as columns, [`FramesTable`]), a raw return address list's
//! into `addresses_table` (hex strings). The page resolves them when it shows a stack.
//!
//! Big logs stay usable: the timeline is the replay's bounded series (at most 1025
//! buckets each, low/high/last, so the peak is never lost), and the context tree is cut
//! to [`DEFAULT_MAX_NODES`] nodes (`--max-nodes`): the contexts that held or allocated
//! most are kept, the rest of each kept context's children are folded into one
//! "elided" node whose figures are the sum of theirs, so every total stays exact.

use std::collections::{BinaryHeap, HashMap};

use serde::Serialize;
use serde_json::Value;

use memreplay_format::DomainKind;

use crate::Error;
use memreplay_replay::Bucket;
use memreplay_replay::ReplayState;
use memreplay_replay::{FxMap, Held, NodeId, ROOT};
use memreplay_symbols::{SymbolStats, Symbolizer};

use crate::gpu::{self, GpuView};
use crate::leaks::{self, Leaks};
use crate::select::{held_now, Point};
use crate::sites::Metric;
use crate::summarize::LabelRef;
use crate::summarize::{self, Summary};
use crate::top::{self, Top, TopOptions};
use crate::{Loaded, SCHEMA_VERSION};

/// Nodes of the context tree kept in the page unless `--max-nodes` says otherwise.
pub const DEFAULT_MAX_NODES: usize = 5000;
/// Rows of the leak and site lists unless `--limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 25;
/// Labels at which the page has the whole tree's figures (evenly picked past this).
pub const MAX_LABEL_POINTS: usize = 64;
/// Frame starts given to the page for its frame axis (every k-th past this).
pub const MAX_FRAMES: usize = 16384;

const PAGE: &str = include_str!("html/page.html");
const CSS: &str = include_str!("html/report.css");
const JS: &str = include_str!("html/report.js");

/// Everything the page shows (the island is [`island`] of it).
#[derive(Debug, Clone, Serialize)]
pub struct HtmlReport {
    pub schema_version: u32,
    /// `"html"`.
    pub report: &'static str,
    /// `replay-cli 0.1.0`.
    pub generator: String,
    /// The `summarize` report of the same log and options (capture facts, integrity,
    /// anomalies, domains, top contexts, instances, efficiency, temporaries, sites,
    /// process memory). `summary.domains[i]` is domain index `i` everywhere below.
    /// Its `sites` have their callstacks symbolicated (`site`).
    pub summary: Summary,
    /// The `leaks` report, symbolicated.
    pub leaks: Leaks,
    /// The `top` report (by allocating function, ranked by bytes at each domain's peak).
    pub top: Top,
    /// What symbolication found over every callstack of the page (also in
    /// `leaks.symbols` and `top.symbols`).
    pub symbols: SymbolStats,
    /// Per domain index: `cpu` (heap and other CPU-side kinds), `gpu` or `pool`
    /// (within another domain), for the table's heap and VRAM columns.
    pub domain_groups: Vec<&'static str>,
    pub timeline: TimelineData,
    pub tree: TreeData,
    /// Index in `tree.points` the views open at (`--at`, else the end).
    pub initial_point: usize,
    /// The GPU section's HTML (`gpu::html`), when the log has a GPU domain and a GPU view
    /// was given; written into the page as it is, not into the island.
    #[serde(skip)]
    pub gpu_section: Option<String>,
}

/// Memory over time.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineData {
    /// Bucket edges in ns since the start: bucket `i` covers `edges_ns[i]..edges_ns[i+1]`
    /// (the last edge is the end of the recording).
    pub edges_ns: Vec<u64>,
    /// One series per domain that allocated.
    pub domains: Vec<SeriesData>,
    /// Per top-level context and domain (`node` null: "other contexts", past the
    /// replay's cap per domain). No `low`.
    pub contexts: Vec<SeriesData>,
    pub process: Option<ProcessData>,
    /// What the driver reported (format 1.2 budget samples), per selected domain that
    /// has samples; left out when none has.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<BudgetData>,
    pub labels: Vec<LabelData>,
    pub frames: FramesData,
}

/// One domain's driver budget samples (as the replay kept them), each holding until the
/// next: drawn as two step lines over the domain's live bytes.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetData {
    /// Domain index.
    pub domain: usize,
    /// When each sample was taken, in ns since the start.
    pub time_ns: Vec<u64>,
    /// Bytes the driver allowed.
    pub budget: Vec<u64>,
    /// Bytes the driver said the process used.
    pub usage: Vec<u64>,
}

/// Live bytes over time: per bucket the lowest, highest and last value.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesData {
    /// Domain index.
    pub domain: usize,
    /// Node index in `tree.nodes` (top-level contexts only; null when not kept).
    pub node: Option<usize>,
    /// `Level:Forest`, `(no context)`, `(other contexts)`; the domain's name for a
    /// domain series.
    pub name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub low: Vec<u64>,
    pub high: Vec<u64>,
    pub last: Vec<u64>,
}

/// What the OS saw of the process (the recorder's samples, thinned by the replay).
#[derive(Debug, Clone, Serialize)]
pub struct ProcessData {
    pub time_ns: Vec<u64>,
    pub resident: Vec<u64>,
    /// 0 where the OS did not tell.
    pub committed: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LabelData {
    pub name: String,
    pub time_ns: u64,
    pub seq: u64,
    pub frame: Option<u64>,
    /// Its index in `tree.points`, when the page has the tree's figures there.
    pub point: Option<usize>,
}

/// Frame starts (every `stride`-th when there are more than [`MAX_FRAMES`]).
#[derive(Debug, Clone, Serialize)]
pub struct FramesData {
    pub stride: usize,
    pub count: usize,
    pub frame: Vec<u64>,
    pub time_ns: Vec<u64>,
}

/// The context tree, cut to a node budget. Nodes are in an order where a parent comes
/// before its children; node 0 is the root (allocations outside any context).
#[derive(Debug, Clone, Serialize)]
pub struct TreeData {
    pub max_nodes: usize,
    /// Contexts of the log that hold or allocated anything under the filters.
    pub contexts: u64,
    /// Of those, folded into elided nodes.
    pub elided_contexts: u64,
    /// Context type names; `nodes.type` indexes this (`""`: the root and elided nodes).
    pub types: Vec<String>,
    pub nodes: Nodes,
    /// Where figures are known for the whole tree: the end, each domain's peak, labels
    /// and the `--at frame:N` start.
    pub points: Vec<PointData>,
    /// `own[domain][point]`: the nodes' own live bytes and counts there, as flat
    /// triples `[node, bytes, count, node, bytes, count, ...]` (nodes holding nothing
    /// left out). At the `peak` point, each domain's own peak.
    pub own: Vec<Vec<Vec<u64>>>,
    /// `total[domain]`: own bytes and counts allocated over the whole recording, as
    /// triples.
    pub total: Vec<Vec<u64>>,
    /// `usage[point]`: own containers' used bytes and capacity (every domain; only heap
    /// allocations report usage), as triples `[node, used, capacity, ...]`.
    pub usage: Vec<Vec<u64>>,
}

/// The nodes, column by column.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Nodes {
    pub parent: Vec<i64>,
    #[serde(rename = "type")]
    pub ty: Vec<usize>,
    pub name: Vec<String>,
    /// Entries flagged as instances (summed over the folded contexts of an elided node).
    pub instances: Vec<u64>,
    /// 0, or the number of contexts an elided node stands for.
    pub elided: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PointData {
    /// `end`, `peak`, `label` or `frame`.
    pub kind: &'static str,
    /// `at the end`, `at each domain's peak`, the label's name, `frame 10`.
    pub name: String,
    /// Null for `peak` (each domain has its own time: `summary.domains[i].peak`).
    pub time_ns: Option<u64>,
    pub frame: Option<u64>,
    /// Index in `timeline.labels`.
    pub label: Option<usize>,
}

/// Options of the page beyond the shared report options.
#[derive(Debug, Clone, Copy)]
pub struct HtmlOptions {
    /// Nodes of the context tree kept in the page; the rest of each context's children fold into one "elided" node that keeps the totals.
    pub max_nodes: usize,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions { max_nodes: DEFAULT_MAX_NODES }
    }
}

/// Builds the data of the page. `l.sel.limit` cuts the lists (leaks, sites, ...);
/// `syms` names their callstacks. `gpu`, the GPU view of the log at the selection's
/// point, gives the page its GPU section when the log has a GPU domain.
pub fn build(
    l: &Loaded,
    opts: &HtmlOptions,
    syms: &mut Symbolizer,
    gpu: Option<&GpuView>,
) -> Result<HtmlReport, Error> {
    let state = l.state();
    let mut summary = summarize::build(l);
    for s in &mut summary.sites {
        s.site = Some((*syms.site(s.stack, state.stacks.get(s.stack))).clone());
    }
    let mut leaks = leaks::build_symbolized(l, syms);
    let top_args = TopOptions { by: Metric::Peak, ..TopOptions::new(&l.path) };
    let mut top = top::build_with(l, &top_args, syms)?;
    let symbols = syms.stats();
    summary.symbols = Some(symbols.clone());
    leaks.symbols = Some(symbols.clone());
    top.symbols = symbols.clone();
    let domain_groups = l.sel.domains.iter().map(|&d| group(state, d)).collect();
    let (tree, out_of, label_points, initial_point) = tree(l, opts);
    let timeline = timeline(l, &out_of, &label_points);
    let gpu_section = gpu.filter(|_| has_gpu_domain(state)).map(|view| gpu::html::section(view, state, &l.sel));
    Ok(HtmlReport {
        schema_version: SCHEMA_VERSION,
        report: "html",
        generator: format!("replay-cli {}", env!("CARGO_PKG_VERSION")),
        summary,
        leaks,
        top,
        symbols,
        domain_groups,
        timeline,
        tree,
        initial_point,
        gpu_section,
    })
}

/// Whether the log defines a GPU domain (GPU-local or GPU-shared).
fn has_gpu_domain(state: &ReplayState) -> bool {
    state.domain_info.values().any(|d| matches!(d.kind, DomainKind::GpuLocal | DomainKind::GpuShared))
}

pub(crate) fn group(state: &ReplayState, domain: u32) -> &'static str {
    if !state.is_top_level_domain(domain) {
        return "pool";
    }
    match state.domain_info.get(&domain).map(|d| d.kind) {
        Some(DomainKind::GpuLocal | DomainKind::GpuShared) => "gpu",
        _ => "cpu",
    }
}

/// The data island: the report with every `frames` list of `summary`, `leaks` and `top`
/// made of indices: a symbolicated stack's (`site.frames`, top rows' `frames`) in
/// `frames_table`, a raw return address list's in `addresses_table`; each distinct frame
/// and address is stored once. JSON.md, `report`.
#[derive(Debug, Serialize)]
pub struct Island<'a> {
    pub schema_version: u32,
    pub report: &'static str,
    pub generator: &'a str,
    pub summary: SummaryValue<'a>,
    pub leaks: Value,
    pub top: Value,
    pub symbols: &'a SymbolStats,
    pub domain_groups: &'a [&'static str],
    pub timeline: &'a TimelineData,
    pub tree: &'a TreeData,
    pub initial_point: usize,
    pub frames_table: FramesTable,
    /// Every distinct return address (`"0x55d0c0a1b2c3"`), in order of first use: of the
    /// raw lists and of `frames_table.address`.
    pub addresses_table: Vec<String>,
}

/// Every distinct symbolicated frame, in order of first use, as columns (one entry per
/// frame; frame `i` is `address[i]`, `module[i]`, ...). The fields of a `frame`
/// (JSON.md), stored compactly: strings as indices in `strings` (-1: null).
#[derive(Debug, Default, Serialize)]
pub struct FramesTable {
    /// Index in `addresses_table`.
    pub address: Vec<usize>,
    /// The hex offset; null when it equals the address.
    pub offset: Vec<Option<String>>,
    pub module: Vec<i64>,
    pub function: Vec<i64>,
    pub file: Vec<i64>,
    pub line: Vec<Option<u64>>,
    /// 1 when inlined into the next frame, else 0.
    pub inlined: Vec<u8>,
    pub resolution: Vec<i64>,
    pub reason: Vec<i64>,
    pub strings: Vec<String>,
}

/// The fields of a serialized frame ([`memreplay_symbols::Frame`]), all in [`FramesTable`].
const FRAME_FIELDS: [&str; 9] =
    ["address", "module", "offset", "function", "file", "line", "inlined", "resolution", "reason"];

/// The report as the island holds it (also what `report --json` writes).
pub fn island(report: &HtmlReport) -> Island<'_> {
    let mut tables = StackTables::default();
    let mut tabled = |mut v: Value| {
        tables.walk(&mut v);
        v
    };
    // Labels hold no frames: they go out as they are, not as a JSON value each (about
    // 600 bytes a label: 2 M labels cost the page 1.2 GB that way).
    let summary = SummaryValue {
        value: tabled(to_value(&report.summary.without_labels())),
        labels: &report.summary.capture.labels,
    };
    let leaks = tabled(to_value(&report.leaks));
    let top = tabled(to_value(&report.top));
    let StackTables { frames_table, addresses, .. } = tables;
    Island {
        schema_version: report.schema_version,
        report: report.report,
        generator: &report.generator,
        summary,
        leaks,
        top,
        symbols: &report.symbols,
        domain_groups: &report.domain_groups,
        timeline: &report.timeline,
        tree: &report.tree,
        initial_point: report.initial_point,
        frames_table,
        addresses_table: addresses,
    }
}

fn to_value<T: Serialize>(report: &T) -> Value {
    serde_json::to_value(report).expect("the report serializes")
}

/// The summary as the island holds it: a JSON value (its `frames` lists turned into
/// indices) whose `capture.labels` is empty, and the labels, serialized in its place
/// exactly as a JSON value would have them (keys in order).
#[derive(Debug)]
pub struct SummaryValue<'a> {
    value: Value,
    labels: &'a [LabelRef],
}

impl Serialize for SummaryValue<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(summary) = &self.value else { return self.value.serialize(s) };
        let mut m = s.serialize_map(Some(summary.len()))?;
        for (k, v) in summary {
            match v {
                Value::Object(capture) if k == "capture" => {
                    m.serialize_entry(k, &CaptureValue { capture, labels: self.labels })?
                }
                _ => m.serialize_entry(k, v)?,
            }
        }
        m.end()
    }
}

struct CaptureValue<'a> {
    capture: &'a serde_json::Map<String, Value>,
    labels: &'a [LabelRef],
}

impl Serialize for CaptureValue<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.capture.len()))?;
        for (k, v) in self.capture {
            if k == "labels" {
                m.serialize_entry(k, &LabelValues(self.labels))?;
            } else {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

struct LabelValues<'a>(&'a [LabelRef]);

impl Serialize for LabelValues<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(LabelValue))
    }
}

/// A label as its JSON value serializes: keys in order.
struct LabelValue<'a>(&'a LabelRef);

impl Serialize for LabelValue<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let LabelRef { name, seq, time_ns, frame } = self.0;
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("frame", frame)?;
        m.serialize_entry("name", name)?;
        m.serialize_entry("seq", seq)?;
        m.serialize_entry("time_ns", time_ns)?;
        m.end()
    }
}

/// The island's frame and address tables, filled while the `frames` lists are turned into
/// indices.
#[derive(Default)]
struct StackTables {
    frames_table: FramesTable,
    /// Frame (its JSON) → index in `frames_table`.
    frame_index: HashMap<String, usize>,
    addresses: Vec<String>,
    address_index: HashMap<String, usize>,
    string_index: HashMap<String, usize>,
}

impl StackTables {
    /// Replaces every array under a `frames` key in `v` by indices: of frame objects in
    /// `frames_table`, of address strings in `addresses`. Other values under that key
    /// (`capture.frames`, a count) stay.
    fn walk(&mut self, v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    match child {
                        Value::Array(list) if key == "frames" => {
                            for item in list.iter_mut() {
                                let i = match &*item {
                                    Value::String(a) => self.address(a),
                                    frame => self.frame(frame),
                                };
                                *item = Value::from(i);
                            }
                        }
                        _ => self.walk(child),
                    }
                }
            }
            Value::Array(list) => list.iter_mut().for_each(|x| self.walk(x)),
            _ => {}
        }
    }

    /// The index of a return address, added on first sight.
    fn address(&mut self, a: &str) -> usize {
        if let Some(&i) = self.address_index.get(a) {
            return i;
        }
        self.addresses.push(a.to_owned());
        self.address_index.insert(a.to_owned(), self.addresses.len() - 1);
        self.addresses.len() - 1
    }

    /// The index of a string of `frames_table.strings`; -1 for null.
    fn string(&mut self, v: &Value) -> i64 {
        let Some(s) = v.as_str() else { return -1 };
        let strings = &mut self.frames_table.strings;
        let i = *self.string_index.entry(s.to_owned()).or_insert_with(|| {
            strings.push(s.to_owned());
            strings.len() - 1
        });
        i as i64
    }

    /// The index of a frame (a serialized [`memreplay_symbols::Frame`]), added on first
    /// sight.
    fn frame(&mut self, f: &Value) -> usize {
        let key = f.to_string();
        if let Some(&i) = self.frame_index.get(&key) {
            return i;
        }
        debug_assert!(
            f.as_object().is_some_and(|o| o.keys().all(|k| FRAME_FIELDS.contains(&k.as_str()))),
            "a frame field the island does not store: {f}"
        );
        let address = f["address"].as_str().unwrap_or_default();
        let offset = f["offset"].as_str().filter(|&o| o != address).map(str::to_owned);
        let address = self.address(address);
        let [module, function, file, resolution, reason] =
            ["module", "function", "file", "resolution", "reason"].map(|k| self.string(&f[k]));
        let t = &mut self.frames_table;
        t.address.push(address);
        t.offset.push(offset);
        t.module.push(module);
        t.function.push(function);
        t.file.push(file);
        t.line.push(f["line"].as_u64());
        t.inlined.push(u8::from(f["inlined"].as_bool().unwrap_or(false)));
        t.resolution.push(resolution);
        t.reason.push(reason);
        self.frame_index.insert(key, t.address.len() - 1);
        t.address.len() - 1
    }
}

/// `<` only occurs inside JSON strings, where `\u003c` means the same character: the
/// island can then hold no `</script>`, `<!--` or `<script`.
fn escape_island(json: &str) -> String {
    json.replace('<', "\\u003c")
}

/// The whole page. The data island is serialized into it in place (and escaped only if
/// it has a `<`): the island of a long log is a large string, made once.
pub fn render(report: &HtmlReport) -> String {
    // Split on the placeholders once; the inserted texts are never searched again.
    let (head, rest) = PAGE.split_once("/*@CSS@*/").expect("page.html has the CSS placeholder");
    let (body, rest) = rest.split_once("@GPU@").expect("page.html has the GPU section's placeholder");
    let (mid, rest) = rest.split_once("@DATA@").expect("page.html has the data placeholder");
    let (mid2, tail) = rest.split_once("/*@JS@*/").expect("page.html has the JS placeholder");
    let gpu = report.gpu_section.as_deref().unwrap_or("");
    let mut page = Vec::with_capacity(PAGE.len() + CSS.len() + JS.len() + gpu.len());
    page.extend_from_slice(head.as_bytes());
    page.extend_from_slice(CSS.as_bytes());
    page.extend_from_slice(body.as_bytes());
    page.extend_from_slice(gpu.as_bytes());
    page.extend_from_slice(mid.as_bytes());
    let at = page.len();
    serde_json::to_writer(&mut page, &island(report)).expect("the report serializes");
    let mut page = String::from_utf8(page).expect("JSON is UTF-8");
    if page[at..].contains('<') {
        let escaped = escape_island(&page[at..]);
        page.truncate(at);
        page.push_str(&escaped);
    }
    page.push_str(mid2);
    page.push_str(JS);
    page.push_str(tail);
    page
}

// ---------------------------------------------------------------------------------------
// The context tree
// ---------------------------------------------------------------------------------------

/// Own figures of the selected slots at one point, by (domain index, node).
type Own = FxMap<(usize, NodeId), Held>;

/// Builds the tree data; also returns the output node of every state node (folded
/// ones: their elided node), the tree point of each label (by label index) and the
/// initial point.
fn tree(l: &Loaded, opts: &HtmlOptions) -> (TreeData, Vec<usize>, Vec<Option<usize>>, usize) {
    let state = l.state();
    let sel = &l.sel;
    let n = state.nodes.len();
    let dom_index: FxMap<u32, usize> = sel.domains.iter().enumerate().map(|(i, &d)| (d, i)).collect();
    let nd = sel.domains.len();
    // The selected slots, with their domain index.
    let slots: Vec<(u32, usize)> = state
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| sel.thread.is_none_or(|t| t == s.thread))
        .filter_map(|(i, s)| dom_index.get(&s.domain).map(|&d| (i as u32, d)))
        .collect();

    // The points: the end, the peak, labels (at most MAX_LABEL_POINTS), the frame.
    let mut points = vec![
        PointData { kind: "end", name: "at the end".into(), time_ns: Some(l.end_ns()), frame: None, label: None },
        PointData { kind: "peak", name: "at each domain's peak".into(), time_ns: None, frame: None, label: None },
    ];
    let wanted_label = match sel.point {
        Point::Label(i) => Some(i),
        _ => None,
    };
    let mut label_points = vec![None; state.labels.len()];
    // The replay kept snapshots at MAX_LABEL_POINTS to twice as many labels (all of them in
    // a log with no more), spread evenly, and at the wanted one.
    let kept: Vec<usize> = (0..state.labels.len()).filter(|&i| state.labels[i].has_snapshot()).collect();
    let wanted_kept = wanted_label.and_then(|w| kept.iter().position(|&i| i == w));
    for i in pick_labels(kept.len(), wanted_kept).into_iter().map(|k| kept[k]) {
        let m = &state.labels[i];
        label_points[i] = Some(points.len());
        points.push(PointData {
            kind: "label",
            name: state.string(m.name),
            time_ns: Some(l.ns(m.time_ns)),
            frame: m.frame,
            label: Some(i),
        });
    }
    let mut initial = wanted_label.and_then(|i| label_points[i]).unwrap_or(0);
    if let (Point::Frame(f), Some(m)) = (&sel.point, &state.frame_snapshot) {
        initial = points.len();
        points.push(PointData {
            kind: "frame",
            name: format!("frame {f}"),
            time_ns: Some(l.ns(m.time_ns)),
            frame: Some(*f),
            label: None,
        });
    }

    // Own figures at each point.
    let mut own: Vec<Own> = Vec::with_capacity(points.len());
    for p in &points {
        let mut map = Own::default();
        let mut put = |slot: u32, d: usize, h: Held| {
            if h.count > 0 || h.bytes > 0 || h.usage_capacity > 0 {
                map.entry((d, state.slots[slot as usize].node)).or_default().add(&h);
            }
        };
        match p.kind {
            "end" => slots.iter().for_each(|&(s, d)| put(s, d, held_now(state, s))),
            "peak" => slots.iter().for_each(|&(s, d)| put(s, d, state.held_at_peak(s))),
            _ => {
                let marker = match p.label {
                    Some(i) => &state.labels[i],
                    None => state.frame_snapshot.as_ref().expect("a frame point has its snapshot"),
                };
                let selected: FxMap<u32, usize> = slots.iter().copied().collect();
                for (s, h) in state.held_at(marker).expect("a point's marker keeps its snapshot") {
                    if let Some(&d) = selected.get(&s) {
                        put(s, d, h);
                    }
                }
            }
        }
        own.push(map);
    }
    let mut total = FxMap::<(usize, NodeId), (u64, u64)>::default();
    for &(s, d) in &slots {
        let f = &state.slots[s as usize].now;
        if f.total_count > 0 {
            let t = total.entry((d, state.slots[s as usize].node)).or_default();
            t.0 = t.0.wrapping_add(f.total_bytes);
            t.1 = t.1.wrapping_add(f.total_count);
        }
    }

    // How much each node matters: the most it held inclusively at any point in any
    // domain, or allocated in all. Nodes with nothing anywhere are not shown.
    let mut weight = vec![0u64; n];
    let mut shown = vec![false; n];
    let mut inc = vec![0u64; n];
    let mut any = vec![0u64; n];
    let mut bump = |entries: &mut dyn Iterator<Item = (NodeId, u64, u64)>, weight: &mut [u64], shown: &mut [bool]| {
        inc.iter_mut().for_each(|v| *v = 0);
        any.iter_mut().for_each(|v| *v = 0);
        for (node, bytes, count) in entries {
            inc[node as usize] = inc[node as usize].wrapping_add(bytes);
            any[node as usize] = any[node as usize].wrapping_add(count.max(u64::from(bytes > 0)));
        }
        for node in (1..n).rev() {
            let p = state.nodes[node].parent as usize;
            inc[p] = inc[p].wrapping_add(inc[node]);
            any[p] = any[p].wrapping_add(any[node]);
        }
        for node in 0..n {
            weight[node] = weight[node].max(inc[node]);
            shown[node] |= any[node] > 0;
        }
    };
    for d in 0..nd {
        for o in &own {
            let mut it = o.iter().filter(|((od, _), _)| *od == d).map(|(&(_, node), h)| (node, h.bytes, h.count));
            bump(&mut it, &mut weight, &mut shown);
        }
        let mut it = total.iter().filter(|((od, _), _)| *od == d).map(|(&(_, node), t)| (node, t.0, t.1));
        bump(&mut it, &mut weight, &mut shown);
    }
    shown[ROOT as usize] = true;

    let cut = cut_tree(state, &weight, &shown, opts.max_nodes, sel.depth, sel.min_bytes);

    // The output nodes.
    let mut types: Vec<String> = vec![String::new()];
    let mut type_index: FxMap<String, usize> = FxMap::default();
    type_index.insert(String::new(), 0);
    let mut nodes = Nodes::default();
    for (i, node) in cut.order.iter().enumerate() {
        match *node {
            Out::Kept(id) => {
                let parent = if id == ROOT { -1 } else { cut.out_of[state.nodes[id as usize].parent as usize] as i64 };
                let (ty, name) = if id == ROOT { (String::new(), "(all)".into()) } else { state.node_label(id) };
                let t = *type_index.entry(ty.clone()).or_insert_with(|| {
                    types.push(ty);
                    types.len() - 1
                });
                nodes.parent.push(parent);
                nodes.ty.push(t);
                nodes.name.push(name);
                nodes.instances.push(state.nodes[id as usize].instances);
                nodes.elided.push(0);
            }
            Out::Elided(parent) => {
                let folded = cut.folded[i];
                nodes.parent.push(cut.out_of[parent as usize] as i64);
                nodes.ty.push(0);
                nodes.name.push(format!("{folded} more {}", if folded == 1 { "context" } else { "contexts" }));
                nodes.instances.push(0);
                nodes.elided.push(folded);
            }
        }
    }
    // Instances of folded contexts go to their elided node.
    for (id, node) in state.nodes.iter().enumerate().skip(1) {
        let o = cut.out_of[id];
        if shown[id] && matches!(cut.order[o], Out::Elided(_)) {
            nodes.instances[o] = nodes.instances[o].wrapping_add(node.instances);
        }
    }

    let m = cut.order.len();
    let triples = |entries: &mut dyn Iterator<Item = (NodeId, u64, u64)>| -> Vec<u64> {
        let mut sums = vec![(0u64, 0u64); m];
        for (node, a, b) in entries {
            let o = &mut sums[cut.out_of[node as usize]];
            o.0 = o.0.wrapping_add(a);
            o.1 = o.1.wrapping_add(b);
        }
        let mut flat = Vec::new();
        for (i, (a, b)) in sums.into_iter().enumerate() {
            if a > 0 || b > 0 {
                flat.extend([i as u64, a, b]);
            }
        }
        flat
    };
    let own_out: Vec<Vec<Vec<u64>>> = (0..nd)
        .map(|d| {
            own.iter()
                .map(|o| {
                    triples(
                        &mut o.iter().filter(|((od, _), _)| *od == d).map(|(&(_, node), h)| (node, h.bytes, h.count)),
                    )
                })
                .collect()
        })
        .collect();
    let total_out: Vec<Vec<u64>> = (0..nd)
        .map(|d| triples(&mut total.iter().filter(|((od, _), _)| *od == d).map(|(&(_, node), t)| (node, t.0, t.1))))
        .collect();
    let usage_out: Vec<Vec<u64>> = own
        .iter()
        .map(|o| triples(&mut o.iter().map(|(&(_, node), h)| (node, h.used_bytes, h.usage_capacity))))
        .collect();

    let contexts = shown.iter().skip(1).filter(|&&s| s).count() as u64;
    let tree = TreeData {
        max_nodes: opts.max_nodes,
        contexts,
        elided_contexts: cut.folded.iter().copied().fold(0, u64::wrapping_add),
        types,
        nodes,
        points,
        own: own_out,
        total: total_out,
        usage: usage_out,
    };
    (tree, cut.out_of, label_points, initial)
}

/// The end of the recording, in ns.
/// The labels that get the tree's figures: all, or `MAX_LABEL_POINTS` evenly spread
/// (always with the one `--at` names).
fn pick_labels(count: usize, wanted: Option<usize>) -> Vec<usize> {
    let mut picked: Vec<usize> = if count <= MAX_LABEL_POINTS {
        (0..count).collect()
    } else {
        (0..MAX_LABEL_POINTS).map(|k| k * (count - 1) / (MAX_LABEL_POINTS - 1)).collect()
    };
    if let Some(w) = wanted {
        if !picked.contains(&w) {
            picked.push(w);
            picked.sort_unstable();
        }
    }
    picked.dedup();
    picked
}

/// An output node: a context of the log, or the elided rest of one's children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    Kept(NodeId),
    Elided(NodeId),
}

/// The tree cut to a budget.
#[derive(Debug, Clone)]
struct Cut {
    /// Output nodes, parents before children.
    order: Vec<Out>,
    /// Per output node: how many shown contexts it stands for (elided nodes), else 0.
    folded: Vec<u64>,
    /// Per state node: its output node (a folded node: the elided node it went into).
    out_of: Vec<usize>,
}

/// Keeps the heaviest contexts, parents first, while the kept nodes plus one elided node
/// per kept parent with children left out fit in `max_nodes`. Children deeper than
/// `depth` or lighter than `min_bytes` are always folded.
fn cut_tree(
    state: &ReplayState,
    weight: &[u64],
    shown: &[bool],
    max_nodes: usize,
    depth: Option<u32>,
    min_bytes: u64,
) -> Cut {
    let n = state.nodes.len();
    let max_nodes = max_nodes.max(2);
    let mut kept = vec![false; n];
    let mut level = vec![0u32; n];
    // Shown children not kept, per node.
    let mut left_out = vec![0usize; n];
    let eligible =
        |node: usize, level: u32| shown[node] && depth.is_none_or(|d| level <= d) && weight[node] >= min_bytes;
    let mut order = vec![Out::Kept(ROOT)];
    kept[ROOT as usize] = true;
    let mut elided_parents = 0usize;
    let mut frontier: BinaryHeap<(u64, std::cmp::Reverse<NodeId>)> = BinaryHeap::new();
    let push_children = |node: NodeId,
                         level: &mut [u32],
                         left_out: &mut [usize],
                         frontier: &mut BinaryHeap<(u64, std::cmp::Reverse<NodeId>)>| {
        for c in state.children(node) {
            level[c as usize] = level[node as usize] + 1;
            if shown[c as usize] {
                left_out[node as usize] += 1;
                if eligible(c as usize, level[c as usize]) {
                    frontier.push((weight[c as usize], std::cmp::Reverse(c)));
                }
            }
        }
    };
    push_children(ROOT, &mut level, &mut left_out, &mut frontier);
    if left_out[ROOT as usize] > 0 {
        elided_parents += 1;
    }
    while let Some((_, std::cmp::Reverse(c))) = frontier.pop() {
        let p = state.nodes[c as usize].parent as usize;
        // Keeping `c`: its parent may have no child left out any more; `c` may have some.
        let shown_kids = state.children(c).filter(|&k| shown[k as usize]).count();
        let after = order.len() + 1 + elided_parents - usize::from(left_out[p] == 1) + usize::from(shown_kids > 0);
        if after > max_nodes {
            break;
        }
        kept[c as usize] = true;
        order.push(Out::Kept(c));
        left_out[p] -= 1;
        if left_out[p] == 0 {
            elided_parents -= 1;
        }
        push_children(c, &mut level, &mut left_out, &mut frontier);
        if left_out[c as usize] > 0 {
            elided_parents += 1;
        }
    }
    // Output indices: kept nodes in the order kept, then one elided node per kept parent
    // with children left out (created as they are met, parents first).
    let mut out_of = vec![usize::MAX; n];
    for (i, o) in order.iter().enumerate() {
        if let Out::Kept(id) = o {
            out_of[*id as usize] = i;
        }
    }
    let mut folded = vec![0u64; order.len()];
    let mut elided_of: FxMap<NodeId, usize> = FxMap::default();
    // Node ids are created after their parent's: ascending ids visit parents first.
    for id in 1..n {
        if kept[id] {
            continue;
        }
        let p = state.nodes[id].parent;
        // A node that never held or allocated anything (nor did any descendant) adds
        // nothing: it goes wherever its parent went, without an elided node of its own.
        let o = if kept[p as usize] && shown[id] {
            *elided_of.entry(p).or_insert_with(|| {
                order.push(Out::Elided(p));
                folded.push(0);
                order.len() - 1
            })
        } else {
            out_of[p as usize]
        };
        out_of[id] = o;
        if shown[id] {
            folded[o] += 1;
        }
    }
    Cut { order, folded, out_of }
}

// ---------------------------------------------------------------------------------------
// The timeline
// ---------------------------------------------------------------------------------------

fn timeline(l: &Loaded, out_of: &[usize], label_points: &[Option<usize>]) -> TimelineData {
    let state = l.state();
    let sel = &l.sel;
    let tl = state.timeline();
    let n = tl.bucket_count();
    let w = tl.bucket_ticks();
    let end = l.end_ns();
    let mut edges_ns: Vec<u64> = (0..n as u64).map(|i| l.ns(i * w)).collect();
    edges_ns.push(end.max(edges_ns.last().copied().unwrap_or(0)));

    let report_index = |id: u32| -> Option<usize> { sel.domains.iter().position(|&d| d == id) };
    let split = |buckets: &mut dyn Iterator<Item = Bucket>, low: bool| {
        let (mut lo, mut hi, mut last) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
        for b in buckets {
            if low {
                lo.push(b.low);
            }
            hi.push(b.high);
            last.push(b.last);
        }
        (lo, hi, last)
    };
    // Series count every thread: with --thread they are left out (they are not kept per
    // thread).
    let per_thread = sel.thread.is_some();
    let mut domains = Vec::new();
    let mut contexts = Vec::new();
    if !per_thread {
        for d in state.domains() {
            let Some(series) = tl.domain(d.id) else { continue };
            let Some(di) = report_index(d.id) else { continue };
            let (low, high, last) = split(&mut series.buckets(), true);
            domains.push(SeriesData {
                domain: di,
                node: None,
                name: state.domain_name(sel.domains[di]),
                low,
                high,
                last,
            });
        }
        for (key, series) in tl.contexts() {
            let Some(di) = report_index(key.domain) else { continue };
            let (_, high, last) = split(&mut series.buckets(), false);
            if high.iter().all(|&v| v == 0) {
                continue;
            }
            let (node, name) = match key.top {
                Some(ROOT) => (Some(0), "(no context)".to_string()),
                Some(top) => {
                    let o = out_of.get(top as usize).copied().filter(|&o| o != usize::MAX);
                    (o, crate::figures::short_name(state, top))
                }
                None => (None, "(other contexts)".to_string()),
            };
            contexts.push(SeriesData { domain: di, node, name, low: Vec::new(), high, last });
        }
    }

    let pm = state.process_memory();
    let process = (!pm.is_empty()).then(|| ProcessData {
        time_ns: pm.samples().iter().map(|s| l.ns(s.time)).collect(),
        resident: pm.samples().iter().map(|s| s.resident).collect(),
        committed: pm.samples().iter().map(|s| s.committed).collect(),
    });
    let budgets = sel
        .domains
        .iter()
        .enumerate()
        .filter_map(|(di, &id)| {
            let samples = state.budget_samples(id);
            (!samples.is_empty()).then(|| BudgetData {
                domain: di,
                time_ns: samples.iter().map(|s| l.ns(s.time_ns)).collect(),
                budget: samples.iter().map(|s| s.budget).collect(),
                usage: samples.iter().map(|s| s.usage).collect(),
            })
        })
        .collect();
    let labels = state
        .labels
        .iter()
        .enumerate()
        .map(|(i, m)| LabelData {
            name: state.string(m.name),
            time_ns: l.ns(m.time_ns),
            seq: m.seq,
            frame: m.frame,
            point: label_points.get(i).copied().flatten(),
        })
        .collect();
    let stride = state.frames.len().div_ceil(MAX_FRAMES).max(1);
    let kept_frames: Vec<_> = state.frames.iter().step_by(stride).collect();
    let frames = FramesData {
        stride,
        count: state.frames.len(),
        frame: kept_frames.iter().map(|f| f.frame).collect(),
        time_ns: kept_frames.iter().map(|f| l.ns(f.time_ns)).collect(),
    };
    TimelineData { edges_ns, domains, contexts, process, budgets, labels, frames }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{GpuBlock, GpuKind, GpuSource, SubAllocation};
    use crate::{load, Progress, ReportOptions};
    use memreplay_format::{header_flags, Event, EventEncoder, FileHeader, LogWriter, VERSION_MAJOR, VERSION_MINOR};

    /// A log with a heap allocation in a context and, if `gpu`, a VRAM allocation.
    fn write_log(name: &str, gpu: bool) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("memreplay-{}-{name}.mrl", std::process::id()));
        let header = FileHeader {
            version_major: VERSION_MAJOR,
            version_minor: VERSION_MINOR,
            flags: header_flags::CALLSTACKS_ON_ALLOC,
            pointer_width: 8,
            pid: 9,
            start_unix_ns: 0,
            ticks_per_second: 1_000_000_000,
            max_stack_depth: 16,
            os: "linux".into(),
            arch: "x86_64".into(),
            exe_path: "/games/forest".into(),
            recorder: "memreplay test".into(),
        };
        let mut w = LogWriter::new(std::fs::File::create(&path).unwrap(), &header).unwrap();
        let mut meta = EventEncoder::new();
        for (id, text) in [(1, "Level"), (2, "Forest"), (3, "vram.local")] {
            meta.push(&Event::DefineString { id, text: text.into() });
        }
        meta.push(&Event::DefineContextType { id: 1, name: 1 });
        let kind = if gpu { DomainKind::GpuLocal } else { DomainKind::Other };
        meta.push(&Event::DefineDomain { id: 1, name: 3, kind, capacity: 1 << 30, parent: None });
        w.write_block(0, &mut meta).unwrap();
        let mut main = EventEncoder::new();
        main.push(&Event::Time { ns: 1_000 });
        main.push(&Event::ContextPush { ty: 1, name: 2, flags: 0 });
        main.push(&Event::Alloc { seq: 2, domain: 0, addr: 0x100, size: 640, align_log2: 3, stack: 0 });
        main.push(&Event::Alloc { seq: 4, domain: 1, addr: 0x10_0000, size: 4096, align_log2: 8, stack: 0 });
        main.push(&Event::ContextPop);
        main.push(&Event::Time { ns: 2_000 });
        w.write_block(1, &mut main).unwrap();
        w.finish(0, 3_000).unwrap();
        path
    }

    fn page(gpu_log: bool, view: Option<&GpuView>) -> String {
        let path = write_log(if gpu_log { "gpu" } else { "cpu" }, gpu_log);
        let loaded = load(&ReportOptions::new(&path), Progress::Hidden).unwrap();
        let mut syms = crate::callstacks::symbolizer(&loaded, &Default::default()).unwrap();
        let report = build(&loaded, &HtmlOptions::default(), &mut syms, view).unwrap();
        std::fs::remove_file(&path).unwrap();
        render(&report)
    }

    /// The GPU section goes between the contexts and the leaks, when the log has a GPU
    /// domain and a view is given; the page is the same as before otherwise.
    #[test]
    fn the_gpu_section_goes_into_the_page() {
        let view = GpuView {
            source: GpuSource::Log { path: "game.mrl".into(), point: "at the end".into() },
            domains: Vec::new(),
            resources: Vec::new(),
            blocks: vec![GpuBlock {
                domain: 1,
                sub_domain: 2,
                addr: 0x10_0000,
                size: 4096,
                name: String::new(),
                context: String::new(),
                allocations: vec![SubAllocation {
                    offset: 0,
                    size: 1024,
                    kind: GpuKind::Texture,
                    name: "rock".into(),
                    context: "Level:Forest".into(),
                }],
            }],
            screen: None,
        };
        let with = page(true, Some(&view));
        let (tree, gpu, leaks) = (
            with.find("id=\"tree-panel\"").unwrap(),
            with.find("id=\"gpu-panel\"").unwrap(),
            with.find("id=\"leaks-panel\"").unwrap(),
        );
        assert!(tree < gpu && gpu < leaks);
        assert!(!with.contains("@GPU@"));
        assert!(with.contains(
            "<tr><td class=\"l\">Level:Forest</td><td data-v=\"640\">640 B</td><td data-v=\"4096\">4.0 KiB</td></tr>"
        ));
        let without = page(true, None);
        assert!(!without.contains("id=\"gpu-panel\"") && !without.contains("@GPU@"));
        assert!(!page(false, Some(&view)).contains("id=\"gpu-panel\""), "no GPU domain, no GPU section");
    }

    fn budget_page(name: &str, budgets: bool) -> String {
        let args = crate::ReportOptions::new(crate::testlog::budget_log(name, budgets));
        let symbols = memreplay_symbols::SymbolOptions { disabled: true, ..Default::default() };
        crate::run_html(&args, &symbols, &HtmlOptions::default(), crate::Progress::Hidden).unwrap()
    }

    #[test]
    fn the_timeline_carries_each_domains_budget_samples() {
        use crate::testlog::MIB;
        let with = budget_page("html-budget", true);
        let want = format!(
            r#""budgets":[{{"domain":{},"time_ns":[2000,5000,8000],"budget":[{},{},{}],"usage":[{},{},{}]}}]"#,
            1,
            1000 * MIB,
            800 * MIB,
            900 * MIB,
            400 * MIB,
            950 * MIB,
            500 * MIB
        );
        assert!(with.contains(&want), "{}", with.split("\"timeline\"").nth(1).unwrap_or("")[..600].to_owned());
        let without = budget_page("html-plain", false);
        assert!(!without.contains(r#""budgets""#));
    }

    /// The summary's labels, serialized beside its JSON value, come out as the value of
    /// the whole summary would have them, byte for byte.
    #[test]
    fn labels_serialize_as_their_json_value() {
        let labels = [
            LabelRef { name: "level <1> \"loaded\"".into(), seq: 7, time_ns: 1_000, frame: Some(3) },
            LabelRef { name: String::new(), seq: u64::MAX, time_ns: 0, frame: None },
        ];
        let value = serde_json::json!({
            "at": "at the end",
            "capture": { "events": 5, "labels": [], "threads": [{ "stream": 1 }] },
            "sites": [],
        });
        let mut whole = value.clone();
        whole["capture"]["labels"] = serde_json::to_value(labels.as_slice()).unwrap();
        let spliced = SummaryValue { value, labels: &labels };
        assert_eq!(serde_json::to_string(&spliced).unwrap(), serde_json::to_string(&whole).unwrap());
        assert_eq!(serde_json::to_string_pretty(&spliced).unwrap(), serde_json::to_string_pretty(&whole).unwrap());
    }
}
