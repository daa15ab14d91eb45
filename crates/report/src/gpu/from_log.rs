//! A [`GpuView`] of a replayed log: the GPU domains' figures, and the allocations live at
//! the end, at a label or frame, or at each GPU domain's peak, with what they hold and
//! who owns them.

use std::path::Path;

use memreplay_format::{DomainKind, ResourceDesc, ResourceKind};
use memreplay_replay::{NodeId, ReplayState};

use super::model::{
    with_descendants, GpuBlock, GpuDomain, GpuKind, GpuPeak, GpuResource, GpuSource, GpuView, SubAllocation,
};
use crate::select::{Point, Selection};
use crate::sites::replay_to_points;
use crate::{Error, Loaded};

/// Where `gpu` reads the live allocations of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewPoint {
    /// The selection's point: the end, or the label or frame `--at` named.
    Selection,
    /// Each top-level GPU domain's peak (its sub-allocating domains are read there too).
    Peak,
}

/// One live allocation of a GPU domain, as collected at the point.
struct Live {
    domain: u32,
    addr: u64,
    size: u64,
    desc: Option<ResourceDesc>,
    node: NodeId,
}

/// Whether `domain` is GPU memory: a GPU kind, or a sub-allocator inside one.
pub(crate) fn is_gpu_domain(state: &ReplayState, domain: u32) -> bool {
    let mut d = domain;
    for _ in 0..64 {
        let Some(info) = state.domain_info.get(&d) else { return false };
        if matches!(info.kind, DomainKind::GpuLocal | DomainKind::GpuShared) {
            return true;
        }
        match info.parent {
            Some(p) if p != d => d = p,
            _ => return false,
        }
    }
    false
}

/// Every GPU domain of the log, by id.
pub(crate) fn gpu_domains(state: &ReplayState) -> Vec<u32> {
    let mut ids: Vec<u32> = state.domain_info.keys().copied().filter(|&d| is_gpu_domain(state, d)).collect();
    ids.sort_unstable();
    ids
}

/// The GPU domain named `name` (or numbered so) and every domain inside it, by id. The
/// error names the log's GPU domains.
pub(crate) fn domain_tree(state: &ReplayState, name: &str) -> Result<Vec<u32>, String> {
    let all = gpu_domains(state);
    let id = all.iter().copied().find(|&d| state.domain_name(d) == name || d.to_string() == name);
    let Some(id) = id else {
        let names: Vec<String> = all.iter().map(|&d| format!("\"{}\"", state.domain_name(d))).collect();
        return Err(format!(
            "no GPU domain \"{name}\" in the log; GPU domains: {}",
            if names.is_empty() { "none".into() } else { names.join(", ") }
        ));
    };
    let parents: Vec<(u32, Option<u32>)> =
        all.iter().map(|&d| (d, state.domain_info.get(&d).and_then(|i| i.parent))).collect();
    Ok(with_descendants(id, &parents))
}

/// The top-level domain `domain` sub-allocates from (itself if it is one).
fn top_of(state: &ReplayState, domain: u32) -> u32 {
    let mut d = domain;
    for _ in 0..64 {
        match state.domain_info.get(&d).and_then(|i| i.parent) {
            Some(p) if p != d => d = p,
            _ => break,
        }
    }
    d
}

fn kind_name(kind: DomainKind) -> String {
    match kind {
        DomainKind::Heap => "heap".into(),
        DomainKind::Pool => "pool".into(),
        DomainKind::GpuLocal => "gpu-local".into(),
        DomainKind::GpuShared => "gpu-shared".into(),
        DomainKind::Other => "other".into(),
        DomainKind::Unknown(b) => format!("unknown({b})"),
    }
}

/// A resource descriptor's kind as the pivots group it.
pub(crate) fn gpu_kind(desc: Option<&ResourceDesc>) -> GpuKind {
    match desc.map(|d| d.kind) {
        Some(ResourceKind::Buffer) => GpuKind::Buffer,
        Some(ResourceKind::Texture) => GpuKind::Texture,
        Some(ResourceKind::RenderTarget) => GpuKind::RenderTarget,
        Some(ResourceKind::DepthStencil) => GpuKind::DepthStencil,
        Some(ResourceKind::Other) => GpuKind::Other,
        Some(ResourceKind::Unknown(_)) | None => GpuKind::Unknown,
    }
}

/// Builds the view of the loaded log. `domains`: the GPU domains asked for (`--domain`
/// and everything inside it; every GPU domain without it); `contexts`: a mask over the
/// context nodes (`--context`) for the resources listed; `screen`: `--screen`, over the
/// size the game recorded last before the point.
pub fn view(
    l: &Loaded,
    point: ViewPoint,
    domains: &[u32],
    contexts: Option<&[bool]>,
    screen: Option<(u32, u32)>,
) -> Result<GpuView, Error> {
    view_at(l, &l.sel, point, domains, contexts, screen)
}

/// [`view`] at the point of `sel` (a selection resolved against the log's state) instead
/// of the log's own.
pub(crate) fn view_at(
    l: &Loaded,
    sel: &Selection,
    point: ViewPoint,
    domains: &[u32],
    contexts: Option<&[bool]>,
    screen: Option<(u32, u32)>,
) -> Result<GpuView, Error> {
    let state = l.state();
    // The domains drawn: those asked for, and the parent of a sub-allocating one (its
    // blocks hold the sub-allocations).
    let mut shown: Vec<u32> = domains.to_vec();
    for &d in domains {
        if let Some(p) = state.domain_info.get(&d).and_then(|i| i.parent) {
            if is_gpu_domain(state, p) && !shown.contains(&p) {
                shown.push(p);
            }
        }
    }
    shown.sort_unstable();
    let mut live: Vec<Live> = Vec::new();
    // The screen size recorded last before the point (the last one read wins at --at peak).
    let mut recorded_screen = state.display_size();
    let collect = |st: &ReplayState,
                   wanted: &dyn Fn(u32) -> bool,
                   live: &mut Vec<Live>,
                   shown_screen: &mut Option<(u32, u32)>| {
        *shown_screen = st.display_size();
        for (d, addr, size, slot, _, _) in st.live_allocations() {
            if wanted(d) {
                let desc = st.resources.get(&(d, addr)).cloned();
                live.push(Live { domain: d, addr, size, desc, node: st.slots[slot as usize].node });
            }
        }
    };
    let path = Path::new(&l.path);
    // The point's time in nanoseconds, per top-level domain (None: the end).
    let mut point_ns: Vec<(u32, Option<u64>)> = Vec::new();
    let point_text = match point {
        ViewPoint::Selection => {
            let at = sel.marker(state).map(|m| l.ns(m.time_ns));
            point_ns.extend(shown.iter().map(|&d| (top_of(state, d), at)));
            let text = sel.point_text(state, l.ticks_per_second());
            match (&sel.point, sel.marker(state)) {
                (Point::End, _) | (_, None) => collect(state, &|d| shown.contains(&d), &mut live, &mut recorded_screen),
                (_, Some(m)) => {
                    replay_to_points(path, state, &[(m.seq, m.thread)], |_, st| {
                        collect(st, &|d| shown.contains(&d), &mut live, &mut recorded_screen)
                    })?;
                }
            }
            text
        }
        ViewPoint::Peak => {
            // One point per top-level GPU domain that has a peak; its whole tree is read there.
            let mut tops: Vec<u32> = shown.iter().map(|&d| top_of(state, d)).collect();
            tops.sort_unstable();
            tops.dedup();
            let mut points: Vec<(u64, u32, u32)> = tops
                .iter()
                .filter_map(|&t| state.domain(t).filter(|d| d.peak.bytes > 0).map(|d| (d.peak.seq, d.peak.thread, t)))
                .collect();
            points.sort_unstable();
            let at: Vec<(u64, u32)> = points.iter().map(|&(s, t, _)| (s, t)).collect();
            point_ns.extend(points.iter().map(|&(_, _, t)| (t, state.domain(t).map(|d| l.ns(d.peak.time_ns)))));
            replay_to_points(path, state, &at, |i, st| {
                let top = points[i].2;
                collect(st, &|d| shown.contains(&d) && top_of(state, d) == top, &mut live, &mut recorded_screen)
            })?;
            let each: Vec<String> = points
                .iter()
                .map(|&(_, _, t)| {
                    let p = &state.domain(t).expect("domain with a peak").peak;
                    format!("{} at {}", state.domain_name(t), crate::time::format_ms(l.ns(p.time_ns)))
                })
                .collect();
            if each.is_empty() {
                "each GPU domain's peak (none has allocated)".into()
            } else {
                format!("each GPU domain's peak ({})", each.join(", "))
            }
        }
    };
    live.sort_unstable_by_key(|a| (a.domain, a.addr));

    // Blocks: allocations of a domain that others sub-allocate from, holding sub-allocations
    // or describing no resource of their own (a dedicated allocation describes one).
    let subs_of = |p: u32| -> Vec<u32> {
        shown.iter().copied().filter(|&s| state.domain_info.get(&s).and_then(|i| i.parent) == Some(p)).collect()
    };
    let mut is_block = vec![false; live.len()];
    let mut inside: Vec<Vec<usize>> = vec![Vec::new(); live.len()];
    for (i, a) in live.iter().enumerate() {
        let Some(p) = state.domain_info.get(&a.domain).and_then(|info| info.parent) else { continue };
        // The parent's allocations are sorted by address: the last one starting at or below.
        let lo = live.partition_point(|b| (b.domain, b.addr) < (p, 0));
        let hi = live.partition_point(|b| (b.domain, b.addr) <= (p, a.addr));
        if hi > lo {
            let b = &live[hi - 1];
            if a.addr - b.addr < b.size.max(1) {
                inside[hi - 1].push(i);
                is_block[hi - 1] = true;
            }
        }
    }
    let path_of = |node: NodeId| if node == memreplay_replay::ROOT { String::new() } else { state.node_path(node) };
    let name_of = |desc: &Option<ResourceDesc>| desc.as_ref().map_or_else(String::new, |d| state.string(d.name));
    let mut blocks = Vec::new();
    for (i, a) in live.iter().enumerate() {
        let subs = subs_of(a.domain);
        if subs.is_empty() {
            continue;
        }
        if !(is_block[i] || a.desc.is_none()) {
            continue;
        }
        is_block[i] = true;
        let allocations: Vec<SubAllocation> = inside[i]
            .iter()
            .map(|&j| {
                let s = &live[j];
                SubAllocation {
                    offset: s.addr - a.addr,
                    size: s.size,
                    kind: gpu_kind(s.desc.as_ref()),
                    name: name_of(&s.desc),
                    context: path_of(s.node),
                }
            })
            .collect();
        let sub_domain = inside[i].first().map_or(subs[0], |&j| live[j].domain);
        blocks.push(GpuBlock {
            domain: a.domain,
            sub_domain,
            addr: a.addr,
            size: a.size,
            name: name_of(&a.desc),
            context: path_of(a.node),
            allocations,
        });
    }

    // The last label at or before a time in nanoseconds.
    let label_at = |ns: u64| {
        let i = state.labels.partition_point(|m| l.ns(m.time_ns) <= ns);
        i.checked_sub(1).map(|i| state.string(state.labels[i].name))
    };
    let mut by_domain: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
    for a in &live {
        let e = by_domain.entry(a.domain).or_default();
        e.0 = e.0.wrapping_add(a.size);
        e.1 += 1;
    }
    let gpu_domains = shown
        .iter()
        .map(|&d| {
            let info = &state.domain_info[&d];
            let (live_bytes, live_count) = by_domain.get(&d).copied().unwrap_or_default();
            GpuDomain {
                id: d,
                name: state.domain_name(d),
                kind: kind_name(info.kind),
                capacity: info.capacity,
                parent: info.parent,
                live_bytes,
                live_count,
                peak: state.domain(d).filter(|t| t.peak.bytes > 0).map(|t| GpuPeak {
                    bytes: t.peak.bytes,
                    count: t.peak.count,
                    time_ns: l.ns(t.peak.time_ns),
                    after_label: t.peak.after_label.map(|s| state.string(s)),
                    frame: t.peak.frame,
                }),
                budget: {
                    let until = point_ns.iter().find(|(t, _)| *t == top_of(state, d)).and_then(|(_, at)| *at);
                    super::budget::figures(state, d, until, l.ticks_per_second(), label_at)
                },
            }
        })
        .collect();
    let resources = live
        .iter()
        .zip(&is_block)
        .filter(|&(a, &block)| !block && domains.contains(&a.domain) && contexts.is_none_or(|m| m[a.node as usize]))
        .map(|(a, _)| {
            let d = a.desc.as_ref();
            GpuResource {
                domain: a.domain,
                addr: a.addr,
                size: a.size,
                kind: gpu_kind(d),
                width: d.map_or(0, |d| d.width),
                height: d.map_or(0, |d| d.height),
                depth_or_layers: d.map_or(0, |d| d.depth_or_layers),
                mip_levels: d.map_or(0, |d| d.mip_levels),
                format: d.map_or_else(String::new, |d| state.string(d.format)),
                name: name_of(&a.desc),
                context: path_of(a.node),
            }
        })
        .collect();
    Ok(GpuView {
        source: GpuSource::Log { path: l.path.clone(), point: point_text },
        domains: gpu_domains,
        resources,
        blocks,
        screen: screen.or(recorded_screen),
    })
}
