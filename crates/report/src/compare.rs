//! One log's figures in the terms that survive from one log to another, for `diff`
//! (which matches two logs) and `check` (which holds a log to a budget and a baseline):
//! domains by name, contexts by their path of (type, name) levels, and per context the
//! metrics both commands speak of — peak, live, allocated in all, instances, bytes per
//! instance, container efficiency.

use memreplay_replay::ReplayState;
use memreplay_replay::{NodeId, ROOT};

use crate::figures::{self, Agg, DomainFigures};
use crate::select::Selection;

/// A context's path: (type, name) per level, outermost first; empty for the root (the
/// whole domain).
pub type LevelPath = Vec<(String, String)>;

/// The figures `diff` and `check` compare, of a context (inclusive of its descendants),
/// a domain, or a sum of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Held at the domain's peak.
    pub peak: u64,
    pub peak_count: u64,
    /// Held at the selected point (the end, a label or a frame start).
    pub live: u64,
    pub live_count: u64,
    /// Allocated over the whole recording.
    pub total: u64,
    pub total_count: u64,
    /// Instance entries (see [`instances`]).
    pub instances: u64,
    /// Of the containers live at the point that report their usage: used and capacity.
    pub used: u64,
    pub capacity: u64,
}

impl Metrics {
    pub fn of(a: &Agg, instances: u64) -> Metrics {
        Metrics {
            peak: a.peak.bytes,
            peak_count: a.peak.count,
            live: a.live.bytes,
            live_count: a.live.count,
            total: a.total_bytes,
            total_count: a.total_count,
            instances,
            used: a.live.used_bytes,
            capacity: a.live.usage_capacity,
        }
    }

    pub fn add(&mut self, o: &Metrics) {
        self.peak = self.peak.wrapping_add(o.peak);
        self.peak_count = self.peak_count.wrapping_add(o.peak_count);
        self.live = self.live.wrapping_add(o.live);
        self.live_count = self.live_count.wrapping_add(o.live_count);
        self.total = self.total.wrapping_add(o.total);
        self.total_count = self.total_count.wrapping_add(o.total_count);
        self.instances = self.instances.wrapping_add(o.instances);
        self.used = self.used.wrapping_add(o.used);
        self.capacity = self.capacity.wrapping_add(o.capacity);
    }

    /// Bytes live at the point per instance (`None` without instances).
    pub fn per_instance(&self) -> Option<f64> {
        figures::per_instance(self.live, self.instances)
    }

    /// Used / capacity of the containers live at the point (`None` without containers).
    pub fn efficiency(&self) -> Option<f64> {
        crate::table::ratio(self.used, self.capacity)
    }

    /// Whether the context ever held or allocated anything.
    pub fn is_empty(&self) -> bool {
        self.total_count == 0 && self.live_count == 0 && self.peak_count == 0
    }
}

/// Instances of each node: its own instance entries if it was entered as an instance,
/// else those of its outermost instance descendants (so `Textures:Forest` counts the
/// textures under it, and nested instance contexts are not counted twice).
pub fn instances(state: &ReplayState) -> Vec<u64> {
    let n = state.nodes.len();
    let mut below = vec![0u64; n];
    let mut out = vec![0u64; n];
    // Nodes are created after their parent: a reverse walk sees children first.
    for node in (0..n).rev() {
        let own = state.nodes[node].instances;
        out[node] = if own > 0 { own } else { below[node] };
        if node != ROOT as usize {
            below[state.nodes[node].parent as usize] = below[state.nodes[node].parent as usize].wrapping_add(out[node]);
        }
    }
    out
}

/// The (type, name) levels of a node's path.
pub fn level_path(state: &ReplayState, node: NodeId) -> LevelPath {
    let mut levels = Vec::new();
    let mut n = node;
    while n != ROOT {
        levels.push(state.node_label(n));
        n = state.nodes[n as usize].parent;
    }
    levels.reverse();
    levels
}

/// One domain's figures at a point.
pub struct DomainMetrics {
    pub name: String,
    pub top_level: bool,
    pub figures: DomainFigures,
}

/// One log's figures at one point: every domain, every context.
pub struct LogFigures<'a> {
    pub state: &'a ReplayState,
    pub domains: Vec<DomainMetrics>,
    /// Per node.
    pub paths: Vec<LevelPath>,
    pub instances: Vec<u64>,
}

impl<'a> LogFigures<'a> {
    /// The figures of every domain in `sel.domains` under `sel` (its point and thread).
    pub fn new(state: &'a ReplayState, sel: &Selection) -> LogFigures<'a> {
        let domains = figures::compute(state, sel)
            .into_iter()
            .map(|f| DomainMetrics {
                name: state.domain_name(f.domain),
                top_level: state.is_top_level_domain(f.domain),
                figures: f,
            })
            .collect();
        let paths = (0..state.nodes.len() as NodeId).map(|n| level_path(state, n)).collect();
        LogFigures { state, domains, paths, instances: instances(state) }
    }

    /// The domain named `name`.
    pub fn domain(&self, name: &str) -> Option<&DomainMetrics> {
        self.domains.iter().find(|d| d.name == name)
    }

    /// A context's metrics in one domain (the root: the whole domain).
    pub fn metrics(&self, d: &DomainMetrics, node: NodeId) -> Metrics {
        Metrics::of(d.figures.inclusive(node), self.instances[node as usize])
    }
}

/// `Level:Forest/Textures:Forest` from levels (`(whole domain)` for the root).
pub fn path_text(levels: &[(String, String)]) -> String {
    if levels.is_empty() {
        return "(whole domain)".into();
    }
    levels.iter().map(|(t, n)| format!("{t}:{n}")).collect::<Vec<_>>().join("/")
}
