//! `instances`: contexts entered with the instance flag (one texture, one mesh, one
//! entity): how many instances, their bytes at the point and at the peak, and the
//! average per instance; per context type and per context.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use memreplay_replay::ReplayState;
use memreplay_replay::{NodeId, ROOT};

use crate::figures::{self, Agg, DomainFigures};
use crate::select::SelectionInfo;
use crate::table::{size, size_f, Align, Table};
use crate::{domain_ref, sort_rows, DomainRef, Keys, Loaded, SCHEMA_VERSION};

pub const DEFAULT_LIMIT: usize = 20;

/// The `instances` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instances {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"instances"`.
    pub report: &'static str,
    /// The log, as given.
    pub path: String,
    /// The options, resolved.
    pub selection: SelectionInfo,
    /// Where "live" is read, in words (`at the end`).
    pub at: String,
    /// Domains where instance contexts allocated.
    pub domains: Vec<DomainInstances>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainInstances {
    pub domain: DomainRef,
    /// Per context type: the outermost instance contexts of the type, summed.
    pub types: Vec<InstanceFigures>,
    /// Per instance context.
    pub contexts: Vec<InstanceFigures>,
    /// Contexts left out by `--depth`, `--limit` or `--min-bytes`.
    pub hidden_contexts: u64,
}

/// Figures of instance contexts (inclusive of their sub-contexts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstanceFigures {
    /// The context path (per context) or the context type (per type).
    pub name: String,
    /// Contexts summed (1 per context).
    pub contexts: u64,
    /// Entries flagged as instances, over the whole recording.
    pub instances: u64,
    /// Live at the selected point.
    pub bytes: u64,
    pub count: u64,
    /// At the domain's peak.
    pub peak_bytes: u64,
    /// Allocated over the whole recording.
    pub total_bytes: u64,
    pub total_count: u64,
    /// The three byte figures divided by `instances`.
    pub bytes_per_instance: f64,
    pub peak_bytes_per_instance: f64,
    pub total_bytes_per_instance: f64,
}

impl InstanceFigures {
    fn new(name: String, contexts: u64, instances: u64, a: &Agg) -> InstanceFigures {
        let per = |b: u64| figures::per_instance(b, instances).unwrap_or(0.0);
        InstanceFigures {
            name,
            contexts,
            instances,
            bytes: a.live.bytes,
            count: a.live.count,
            peak_bytes: a.peak.bytes,
            total_bytes: a.total_bytes,
            total_count: a.total_count,
            bytes_per_instance: per(a.live.bytes),
            peak_bytes_per_instance: per(a.peak.bytes),
            total_bytes_per_instance: per(a.total_bytes),
        }
    }
}

/// Instance contexts with no instance context of the same type above them: summing
/// these per type counts no byte twice.
fn outermost_of_type(state: &ReplayState, node: NodeId) -> bool {
    let ty = state.nodes[node as usize].ty;
    let mut n = state.nodes[node as usize].parent;
    while n != ROOT {
        let p = &state.nodes[n as usize];
        if p.ty == ty && p.instances > 0 {
            return false;
        }
        n = p.parent;
    }
    true
}

/// Per-type and per-context figures of one domain (each context's with its node),
/// unsorted and unfiltered.
pub fn domain_instances(
    state: &ReplayState,
    d: &DomainFigures,
) -> (Vec<InstanceFigures>, Vec<(NodeId, InstanceFigures)>) {
    let mut types: BTreeMap<String, (u64, u64, Agg)> = BTreeMap::new();
    let mut contexts = Vec::new();
    for (i, n) in state.nodes.iter().enumerate() {
        let a = d.inclusive(i as NodeId);
        if n.instances == 0 || a.is_empty() {
            continue;
        }
        let node = i as NodeId;
        contexts.push((node, InstanceFigures::new(state.node_path(node), 1, n.instances, a)));
        if outermost_of_type(state, node) {
            let t = types.entry(figures::type_name(state, node)).or_default();
            t.0 += 1;
            t.1 = t.1.wrapping_add(n.instances);
            t.2.add(a);
        }
    }
    let types = types.into_iter().map(|(ty, (c, inst, a))| InstanceFigures::new(ty, c, inst, &a)).collect();
    (types, contexts)
}

/// How instance types sort (`summarize` sorts its instance lists the same way).
pub(crate) fn keys(f: &InstanceFigures) -> Keys<'_> {
    Keys {
        bytes: f.bytes,
        count: f.count,
        name: &f.name,
        instances: f.instances,
        total: f.total_bytes,
        peak: f.peak_bytes,
    }
}

/// The `instances` report of a replayed log.
pub fn build(l: &Loaded) -> Instances {
    let state = l.state();
    let sel = &l.sel;
    let limit = sel.limit_or(DEFAULT_LIMIT);
    let mut domains = Vec::new();
    for d in figures::compute(state, sel) {
        let (mut types, contexts) = domain_instances(state, &d);
        if types.is_empty() {
            continue;
        }
        let all = contexts.len() as u64;
        let mut contexts: Vec<InstanceFigures> =
            contexts.into_iter().filter(|(node, _)| sel.depth_shown(state, *node)).map(|(_, c)| c).collect();
        sort_rows(&mut types, sel.sort, keys);
        sort_rows(&mut contexts, sel.sort, keys);
        contexts.retain(|c| c.bytes.max(c.peak_bytes) >= sel.min_bytes);
        contexts.truncate(limit);
        domains.push(DomainInstances {
            domain: domain_ref(state, d.domain),
            types,
            hidden_contexts: all - contexts.len() as u64,
            contexts,
        });
    }
    Instances {
        schema_version: SCHEMA_VERSION,
        report: "instances",
        path: l.path.clone(),
        selection: sel.info(state, l.ticks_per_second()),
        at: sel.point_text(state, l.ticks_per_second()),
        domains,
    }
}

/// A table of instance figures (`what` names the first column).
pub fn table(rows: &[InstanceFigures], what: &str, at: &str) -> Table {
    let live = format!("bytes {at}");
    let per = "per instance";
    let mut t = Table::new(&[
        (what, Align::Left),
        ("instances", Align::Right),
        (&live, Align::Right),
        (per, Align::Right),
        ("peak", Align::Right),
        ("peak per instance", Align::Right),
        ("total allocated", Align::Right),
        ("total per instance", Align::Right),
    ]);
    for r in rows {
        t.row(vec![
            r.name.clone(),
            r.instances.to_string(),
            size(r.bytes),
            size_f(r.bytes_per_instance),
            size(r.peak_bytes),
            size_f(r.peak_bytes_per_instance),
            size(r.total_bytes),
            size_f(r.total_bytes_per_instance),
        ]);
    }
    t
}

/// `at the end` → `at end`; `at label "x" (1.0 ms)` → `at "x"`: short column headers.
pub fn short_at(at: &str) -> String {
    if at == "at the end" {
        return "at end".into();
    }
    match at.split_once('(') {
        Some((head, _)) => head.trim().replace("at label ", "at ").replace("at the start of ", "at "),
        None => at.to_owned(),
    }
}

impl Instances {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{}: instance contexts {} (figures include sub-contexts)", self.path, self.at);
        if let Some(t) = &self.selection.thread {
            let _ = writeln!(o, "  only allocations made by thread {}", t.name.as_deref().unwrap_or("(unnamed)"));
        }
        if self.domains.is_empty() {
            let _ = writeln!(o, "\nno instance context allocated anything");
        }
        let at = short_at(&self.at);
        for d in &self.domains {
            let _ = writeln!(o, "\n{}", d.domain.title());
            o.push_str(&table(&d.types, "per type", &at).render(2));
            let _ = writeln!(o);
            o.push_str(&table(&d.contexts, "per context", &at).render(2));
            if d.hidden_contexts > 0 {
                let _ = writeln!(o, "  … {} more contexts", d.hidden_contexts);
            }
        }
        o
    }
}
