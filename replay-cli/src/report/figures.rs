//! Per-context figures of each selected domain: exclusive (a context's own allocations)
//! and inclusive (with its descendants'), at the selected point, at the domain's peak,
//! and over the whole recording. Every report builds on these.

use crate::replay::state::{Held, NodeId, ROOT};
use crate::replay::ReplayState;

use super::select::Selection;

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

/// One domain's figures per context node (indexed by `NodeId`).
#[derive(Debug, Clone)]
pub struct DomainFigures {
    pub domain: u32,
    pub exclusive: Vec<Agg>,
    pub inclusive: Vec<Agg>,
}

impl DomainFigures {
    /// The whole domain (under the selection's thread filter).
    pub fn total(&self) -> &Agg {
        &self.inclusive[ROOT as usize]
    }
}

/// The figures of every domain of `sel.domains`, in that order, for the slots that pass
/// the selection's thread filter.
pub fn compute(state: &ReplayState, sel: &Selection) -> Vec<DomainFigures> {
    let n = state.nodes.len();
    let mut out: Vec<DomainFigures> = sel
        .domains
        .iter()
        .map(|&domain| DomainFigures { domain, exclusive: vec![Agg::default(); n], inclusive: Vec::new() })
        .collect();
    let index: std::collections::HashMap<u32, usize> = sel.domains.iter().enumerate().map(|(i, &d)| (d, i)).collect();
    for (i, slot) in state.slots.iter().enumerate() {
        let Some(&di) = index.get(&slot.domain) else { continue };
        if sel.thread.is_some_and(|t| t != slot.thread) {
            continue;
        }
        let a = &mut out[di].exclusive[slot.node as usize];
        a.add(&Agg {
            live: sel.held(state, i as u32),
            peak: state.held_at_peak(i as u32),
            total_bytes: slot.now.total_bytes,
            total_count: slot.now.total_count,
            temp_bytes: slot.now.temp_bytes,
            temp_count: slot.now.temp_count,
        });
    }
    for d in &mut out {
        d.inclusive = inclusive(state, &d.exclusive);
    }
    out
}

/// Sums every node's figures into its ancestors'. Nodes are created after their parent,
/// so a reverse walk sees every child before its parent.
pub fn inclusive(state: &ReplayState, exclusive: &[Agg]) -> Vec<Agg> {
    let mut inc = exclusive.to_vec();
    for node in (1..state.nodes.len()).rev() {
        let parent = state.nodes[node].parent as usize;
        let child = inc[node];
        inc[parent].add(&child);
    }
    inc
}

/// Depth of a node: 0 for the root, 1 for a top-level context.
pub fn depth(state: &ReplayState, node: NodeId) -> u32 {
    let mut d = 0;
    let mut n = node;
    while n != ROOT {
        d += 1;
        n = state.nodes[n as usize].parent;
    }
    d
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
