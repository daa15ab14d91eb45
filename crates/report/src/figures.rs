//! Per-context figures of each selected domain: exclusive (a context's own allocations)
//! and inclusive (with its descendants'), at the selected point, at the domain's peak,
//! and over the whole recording. Every report builds on these.

use memreplay_replay::ReplayState;
use memreplay_replay::{Held, NodeId, ROOT};

use crate::select::Selection;

/// Figures of a context (or a sum of contexts) in one domain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Agg {
    /// At the selected point (the end, a label or a frame start).
    pub live: Held,
    /// At the domain's peak.
    pub peak: Held,
    /// Allocated over the whole recording.
    pub total_bytes: u64,
    pub total_count: u64,
    /// Temporaries over the whole recording (freed before their thread allocated again).
    pub temp_bytes: u64,
    pub temp_count: u64,
}

impl Agg {
    pub fn add(&mut self, o: &Agg) {
        self.live.add(&o.live);
        self.peak.add(&o.peak);
        self.total_bytes = self.total_bytes.wrapping_add(o.total_bytes);
        self.total_count = self.total_count.wrapping_add(o.total_count);
        self.temp_bytes = self.temp_bytes.wrapping_add(o.temp_bytes);
        self.temp_count = self.temp_count.wrapping_add(o.temp_count);
    }

    /// Whether anything was ever allocated here.
    pub fn is_empty(&self) -> bool {
        self.total_count == 0 && self.live.count == 0 && self.peak.count == 0
    }
}

/// One domain's figures per context node, kept only for the nodes that have any (and
/// their ancestors): a tree of a million contexts of which a few hundred allocated costs
/// four bytes per context here, not two hundred.
#[derive(Debug, Clone)]
pub struct DomainFigures {
    pub domain: u32,
    /// Each node's row ([`NO_ROW`]: none, all its figures are zero).
    row: Vec<u32>,
    /// Per row, in node order (the root's first): its node and figures.
    nodes: Vec<NodeId>,
    exclusive: Vec<Agg>,
    inclusive: Vec<Agg>,
}

const NO_ROW: u32 = u32::MAX;

const ZERO: Agg = Agg {
    live: Held { bytes: 0, count: 0, used_bytes: 0, usage_capacity: 0 },
    peak: Held { bytes: 0, count: 0, used_bytes: 0, usage_capacity: 0 },
    total_bytes: 0,
    total_count: 0,
    temp_bytes: 0,
    temp_count: 0,
};

impl DomainFigures {
    /// The figures of `domain` from its contexts' own figures (a node may come more than
    /// once: its figures add up).
    pub fn from_exclusive(
        state: &ReplayState,
        domain: u32,
        exclusive: impl IntoIterator<Item = (NodeId, Agg)>,
    ) -> DomainFigures {
        let mut row = vec![NO_ROW; state.nodes.len().max(1)];
        let mut nodes: Vec<NodeId> = vec![ROOT];
        let mut exc: Vec<Agg> = vec![Agg::default()];
        row[ROOT as usize] = 0;
        for (node, a) in exclusive {
            let r = &mut row[node as usize];
            if *r == NO_ROW {
                *r = nodes.len() as u32;
                nodes.push(node);
                exc.push(Agg::default());
            }
            exc[*r as usize].add(&a);
        }
        // Every ancestor of a node with figures gets a row (its own figures zero).
        for i in 0..nodes.len() {
            let mut n = nodes[i];
            while n != ROOT {
                n = state.nodes[n as usize].parent;
                if row[n as usize] != NO_ROW {
                    break;
                }
                row[n as usize] = nodes.len() as u32;
                nodes.push(n);
                exc.push(Agg::default());
            }
        }
        // Rows in node order: a node is created after its parent, so a reverse walk sees
        // every child before its parent.
        if !nodes.is_sorted() {
            let mut order: Vec<u32> = (0..nodes.len() as u32).collect();
            order.sort_unstable_by_key(|&r| nodes[r as usize]);
            nodes = order.iter().map(|&r| nodes[r as usize]).collect();
            exc = order.iter().map(|&r| exc[r as usize]).collect();
            for (r, &node) in nodes.iter().enumerate() {
                row[node as usize] = r as u32;
            }
        }
        let exclusive = exc;
        let mut inclusive = exclusive.clone();
        for r in (1..nodes.len()).rev() {
            let parent = row[state.nodes[nodes[r] as usize].parent as usize] as usize;
            let child = inclusive[r];
            inclusive[parent].add(&child);
        }
        DomainFigures { domain, row, nodes, exclusive, inclusive }
    }

    /// A context's own figures.
    pub fn exclusive(&self, node: NodeId) -> &Agg {
        self.row.get(node as usize).filter(|&&r| r != NO_ROW).map_or(&ZERO, |&r| &self.exclusive[r as usize])
    }

    /// A context's figures with its descendants'.
    pub fn inclusive(&self, node: NodeId) -> &Agg {
        self.row.get(node as usize).filter(|&&r| r != NO_ROW).map_or(&ZERO, |&r| &self.inclusive[r as usize])
    }

    /// The contexts that may have figures, in node order (the others have none):
    /// (node, exclusive, inclusive).
    pub fn rows(&self) -> impl Iterator<Item = (NodeId, &Agg, &Agg)> {
        self.nodes.iter().zip(&self.exclusive).zip(&self.inclusive).map(|((&n, e), i)| (n, e, i))
    }

    /// The whole domain (under the selection's thread filter).
    pub fn total(&self) -> &Agg {
        self.inclusive(ROOT)
    }
}

/// The figures of every domain of `sel.domains`, in that order, for the slots that pass
/// the selection's thread filter.
pub fn compute(state: &ReplayState, sel: &Selection) -> Vec<DomainFigures> {
    let own = |domain: u32| {
        state
            .slots
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.domain == domain && sel.thread.is_none_or(|t| t == s.thread))
            .map(|(i, slot)| {
                let agg = Agg {
                    live: sel.held(state, i as u32),
                    peak: state.held_at_peak(i as u32),
                    total_bytes: slot.now.total_bytes,
                    total_count: slot.now.total_count,
                    temp_bytes: slot.now.temp_bytes,
                    temp_count: slot.now.temp_count,
                };
                (slot.node, agg)
            })
    };
    sel.domains.iter().map(|&domain| DomainFigures::from_exclusive(state, domain, own(domain))).collect()
}

/// Depth of a node: 0 for the root, 1 for a top-level context.
pub fn depth(state: &ReplayState, node: NodeId) -> u32 {
    state.node_depth(node)
}

/// A node's context type name ("" for the root).
pub fn type_name(state: &ReplayState, node: NodeId) -> String {
    state.node_label(node).0
}

/// A node's own name, `Type:name` ("(no context)" for the root).
pub fn short_name(state: &ReplayState, node: NodeId) -> String {
    if node == ROOT {
        return "(no context)".into();
    }
    let (ty, name) = state.node_label(node);
    format!("{ty}:{name}")
}

/// `bytes / instances`, or `None` without instances.
pub fn per_instance(bytes: u64, instances: u64) -> Option<f64> {
    (instances > 0).then(|| bytes as f64 / instances as f64)
}
