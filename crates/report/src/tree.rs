//! `tree`: the context tree of each domain, with inclusive and exclusive bytes and
//! counts, the figures at the domain's peak, instances and bytes per instance, and the
//! bytes allocated over the whole recording.

use std::fmt::Write as _;

use serde::Serialize;

use memreplay_replay::{NodeId, ROOT};

use crate::figures::{self, Agg, DomainFigures};
use crate::select::SelectionInfo;
use crate::table::{size, size_f, Align, Table};
use crate::{domain_ref, sort_rows, DomainRef, Keys, Loaded, SCHEMA_VERSION};

/// The `tree` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tree {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"tree"`.
    pub report: &'static str,
    /// The log, as given.
    pub path: String,
    /// The options, resolved.
    pub selection: SelectionInfo,
    /// `at the end`, `at label "level loaded" (8.445 ms)`, ...
    pub at: String,
    /// One tree per domain with any allocation (under the filters).
    pub domains: Vec<DomainTree>,
}

/// One domain's context tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainTree {
    pub domain: DomainRef,
    /// The whole domain: its exclusive figures are the allocations made outside any
    /// context, its children the top-level contexts.
    pub root: TreeNode,
}

/// A context and its sub-contexts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeNode {
    /// `Level:Forest/Textures:Forest` (`""` for the root).
    pub path: String,
    /// Context type and name (`""` for the root).
    pub context_type: String,
    /// The context's name (`Forest`), or `(no context)` for the root.
    pub name: String,
    /// 0 for the root, 1 for a top-level context.
    pub depth: u32,
    /// Live at the selected point, this context and its descendants.
    pub bytes: u64,
    /// Allocations live, with its descendants'.
    pub count: u64,
    /// Live at the selected point, this context's own allocations.
    pub exclusive_bytes: u64,
    /// Its own allocations live.
    pub exclusive_count: u64,
    /// At the domain's peak, inclusive.
    pub peak_bytes: u64,
    /// Allocations live at the domain's peak, with its descendants'.
    pub peak_count: u64,
    /// Entries flagged as instances, over the whole recording.
    pub instances: u64,
    /// `bytes / instances` (null without instances).
    pub bytes_per_instance: Option<f64>,
    /// Allocated over the whole recording, inclusive (null with `--at`).
    pub total_bytes: Option<u64>,
    /// Allocations made over the whole recording, with its descendants' (where counted).
    pub total_count: Option<u64>,
    /// Its children, sorted by the `sort` option.
    pub children: Vec<TreeNode>,
    /// Children left out by `--depth` or `--min-bytes`.
    pub hidden_children: u64,
}

/// The `tree` report of a replayed log.
pub fn build(l: &Loaded) -> Tree {
    let state = l.state();
    let sel = &l.sel;
    let domains = figures::compute(state, sel)
        .into_iter()
        .filter(|d| shown(l, d.total()))
        .map(|d| DomainTree { domain: domain_ref(state, d.domain), root: node(l, &d, ROOT, 0) })
        .collect();
    Tree {
        schema_version: SCHEMA_VERSION,
        report: "tree",
        path: l.path.clone(),
        selection: sel.info(state, l.ticks_per_second()),
        at: sel.point_text(state, l.ticks_per_second()),
        domains,
    }
}

/// Whether a context appears at all: it allocated in the domain (at the end), or held
/// something at the point or at the peak (with `--at`).
fn shown(l: &Loaded, a: &Agg) -> bool {
    if l.sel.at_end() {
        !a.is_empty()
    } else {
        a.live.count > 0 || a.peak.count > 0
    }
}

fn node(l: &Loaded, d: &DomainFigures, id: NodeId, depth: u32) -> TreeNode {
    let state = l.state();
    let sel = &l.sel;
    let inc = d.inclusive(id);
    let exc = d.exclusive(id);
    let n = &state.nodes[id as usize];
    let (context_type, name) = if id == ROOT { (String::new(), String::new()) } else { state.node_label(id) };

    let mut kids: Vec<NodeId> = state.children(id).filter(|&c| shown(l, d.inclusive(c))).collect();
    let all = kids.len() as u64;
    let deeper = sel.depth.is_none_or(|max| depth < max);
    kids.retain(|&c| deeper && d.inclusive(c).live.bytes >= sel.min_bytes);
    let mut named: Vec<(NodeId, String)> = kids.iter().map(|&c| (c, figures::short_name(state, c))).collect();
    sort_rows(&mut named, sel.sort, |(c, name)| {
        let a = d.inclusive(*c);
        Keys {
            bytes: a.live.bytes,
            count: a.live.count,
            name,
            instances: state.nodes[*c as usize].instances,
            total: a.total_bytes,
            peak: a.peak.bytes,
        }
    });
    let children: Vec<TreeNode> = named.into_iter().map(|(c, _)| node(l, d, c, depth + 1)).collect();

    TreeNode {
        path: if id == ROOT { String::new() } else { state.node_path(id) },
        context_type,
        name,
        depth,
        bytes: inc.live.bytes,
        count: inc.live.count,
        exclusive_bytes: exc.live.bytes,
        exclusive_count: exc.live.count,
        peak_bytes: inc.peak.bytes,
        peak_count: inc.peak.count,
        instances: n.instances,
        bytes_per_instance: figures::per_instance(inc.live.bytes, n.instances),
        total_bytes: sel.at_end().then_some(inc.total_bytes),
        total_count: sel.at_end().then_some(inc.total_count),
        hidden_children: all - children.len() as u64,
        children,
    }
}

impl Tree {
    /// The report as text: one indented line per context.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{}: context tree {}", self.path, self.at);
        let _ = writeln!(
            o,
            "  bytes and count include sub-contexts; own: the context's own allocations (first row: outside any context); peak: at the domain's peak"
        );
        if let Some(t) = &self.selection.thread {
            let _ = writeln!(o, "  only allocations made by thread {}", t.name.as_deref().unwrap_or("(unnamed)"));
        }
        if self.domains.is_empty() {
            let _ = writeln!(o, "\nno allocations");
        }
        let at_end = self.selection.at.kind == "end";
        for d in &self.domains {
            let r = &d.root;
            let _ = writeln!(
                o,
                "\n{}: {} in {} live, peak {}{}",
                d.domain.title(),
                size(r.bytes),
                crate::table::plural(r.count, "allocation"),
                size(r.peak_bytes),
                r.total_bytes.map_or_else(String::new, |t| format!(", {} allocated in all", size(t)))
            );
            let mut cols = vec![
                ("context", Align::Left),
                ("bytes", Align::Right),
                ("count", Align::Right),
                ("own", Align::Right),
                ("own count", Align::Right),
                ("peak", Align::Right),
                ("instances", Align::Right),
                ("per instance", Align::Right),
            ];
            if at_end {
                cols.push(("total allocated", Align::Right));
            }
            let mut t = Table::new(&cols);
            rows(&mut t, r, 0, at_end, &d.domain.name);
            o.push_str(&t.render(2));
        }
        o
    }
}

fn rows(t: &mut Table, n: &TreeNode, indent: usize, at_end: bool, domain: &str) {
    let label = if n.depth == 0 {
        format!("{domain} (all)")
    } else {
        format!("{}{}:{}", "  ".repeat(indent), n.context_type, n.name)
    };
    let mut cells = vec![
        label,
        size(n.bytes),
        n.count.to_string(),
        size(n.exclusive_bytes),
        n.exclusive_count.to_string(),
        size(n.peak_bytes),
        if n.instances > 0 { n.instances.to_string() } else { String::new() },
        n.bytes_per_instance.map_or_else(String::new, size_f),
    ];
    if at_end {
        cells.push(n.total_bytes.map_or_else(String::new, size));
    }
    t.row(cells);
    for c in &n.children {
        rows(t, c, indent + 1, at_end, domain);
    }
    if n.hidden_children > 0 {
        let what = if n.hidden_children == 1 { "sub-context" } else { "sub-contexts" };
        t.row(vec![format!("{}… {} more {what}", "  ".repeat(indent + 1), n.hidden_children)]);
    }
}
