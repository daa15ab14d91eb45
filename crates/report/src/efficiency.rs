//! `efficiency`: how much of their capacity the containers that report their usage
//! (`memreplay::usage`) actually use: per context (at the selected point and at the heap's
//! peak), per allocation site and per container (live at the end).

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use memreplay_format::HEAP_DOMAIN;

use memreplay_replay::Held;
use memreplay_replay::Stacks;
use memreplay_symbols::{SiteName, SymbolStats, Symbolizer};

use crate::figures;
use crate::leaks::{frames, site_text};
use crate::select::SelectionInfo;
use crate::table::{percent, ratio, size, Align, Table};
use crate::{sort_rows, Keys, Loaded, SortKey, SCHEMA_VERSION};

pub const DEFAULT_LIMIT: usize = 20;

/// The `efficiency` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Efficiency {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"efficiency"`.
    pub report: &'static str,
    /// The log, as given.
    pub path: String,
    /// The options, resolved.
    pub selection: SelectionInfo,
    /// Where `live` figures are read (`at the end`, `at label "..." (...)`).
    pub at: String,
    /// Every reporting container, at the point and at the peak.
    pub overall: Usage,
    /// Usage at the domain's peak.
    pub peak: Usage,
    /// Contexts whose own containers reported usage, at the point or at the peak.
    pub contexts: Vec<ContextEfficiency>,
    /// Allocation sites of the containers live at the end or at the heap's peak.
    pub sites: Vec<SiteEfficiency>,
    /// Containers live at the end, most wasted bytes first.
    pub containers: Vec<Container>,
    /// What symbolication of `sites` found; absent with `--no-symbols` or without sites.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbols: Option<SymbolStats>,
}

impl Efficiency {
    /// Names the callstacks of `sites` with `syms`.
    pub fn symbolize(&mut self, stacks: &Stacks, syms: &mut Symbolizer) {
        for s in &mut self.sites {
            s.site = Some((*syms.site(s.stack, stacks.get(s.stack))).clone());
        }
        self.symbols = Some(syms.stats());
    }
}

/// Used bytes against capacity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Bytes the containers hold.
    pub used_bytes: u64,
    /// Bytes their allocations take (the sum of their sizes).
    pub capacity_bytes: u64,
    /// `capacity_bytes - used_bytes`.
    pub wasted_bytes: u64,
    /// `used_bytes / capacity_bytes` (null without containers).
    pub efficiency: Option<f64>,
}

impl Usage {
    pub fn new(used: u64, capacity: u64) -> Usage {
        Usage {
            used_bytes: used,
            capacity_bytes: capacity,
            wasted_bytes: capacity.saturating_sub(used),
            efficiency: ratio(used, capacity),
        }
    }

    fn of(h: &Held) -> Usage {
        Usage::new(h.used_bytes, h.usage_capacity)
    }
}

/// One context's own reporting containers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextEfficiency {
    pub context: String,
    /// At the selected point.
    pub live: Usage,
    /// At the heap's peak.
    pub peak: Usage,
}

/// The containers allocated at one callstack.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteEfficiency {
    pub stack: u32,
    pub frames: Vec<String>,
    /// The callstack symbolicated; absent with `--no-symbols` (and from the report the
    /// library builds, [`build`], until [`Efficiency::symbolize`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<SiteName>,
    /// Containers live at the end (under `--thread`).
    pub containers: u64,
    pub live: Usage,
    /// At the heap's peak, over every thread: null with `--thread` (the peak figures of a
    /// site are not kept per thread).
    pub peak: Option<Usage>,
}

/// One live container.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Container {
    /// Its heap address, as a hex string.
    pub address: String,
    pub context: String,
    pub stack: u32,
    pub live: Usage,
}

/// The `efficiency` report of a replayed log (sites unnamed: see `Efficiency::symbolize`).
pub fn build(l: &Loaded) -> Efficiency {
    build_with(l, None)
}

/// [`build`], given the heap's figures under the selection if the caller has them (what
/// `figures::compute` gives for the heap: `summarize` computes them for every domain).
pub(crate) fn build_with(l: &Loaded, heap: Option<&figures::DomainFigures>) -> Efficiency {
    let state = l.state();
    let sel = &l.sel;
    let limit = sel.limit_or(DEFAULT_LIMIT);
    let heap_selected = sel.domains.contains(&HEAP_DOMAIN);

    let mut overall = Usage::default();
    let mut peak = Usage::default();
    let mut contexts = Vec::new();
    if heap_selected {
        let computed;
        let figs = match heap {
            Some(figs) => figs,
            None => {
                computed = figures::compute(state, &sel.with_domains(vec![HEAP_DOMAIN])).remove(0);
                &computed
            }
        };
        debug_assert_eq!(figs.domain, HEAP_DOMAIN);
        let total = figs.total();
        overall = Usage::of(&total.live);
        peak = Usage::of(&total.peak);
        for (node, a, _) in figs.rows() {
            if (a.live.usage_capacity == 0 && a.peak.usage_capacity == 0) || !sel.depth_shown(state, node) {
                continue;
            }
            contexts.push(ContextEfficiency {
                context: state.node_path(node),
                live: Usage::of(&a.live),
                peak: Usage::of(&a.peak),
            });
        }
    }
    contexts.retain(|c| c.live.capacity_bytes.max(c.peak.capacity_bytes) >= sel.min_bytes);
    sort_rows(&mut contexts, sel.sort, |c| Keys {
        bytes: c.live.wasted_bytes,
        count: c.live.capacity_bytes,
        name: &c.context,
        instances: c.peak.wasted_bytes,
        total: c.live.capacity_bytes,
        peak: c.peak.wasted_bytes,
    });
    contexts.truncate(limit);

    // Containers live at the end, under the filters: (address, slot, stack, usage).
    let mut live: Vec<(u64, u32, u32, Usage)> = Vec::new();
    let mut sites: HashMap<u32, (u64, u64, u64)> = HashMap::new();
    if heap_selected {
        for (addr, capacity, used, slot, stack) in state.live_containers() {
            if !sel.slot_selected(state, slot) {
                continue;
            }
            let s = sites.entry(stack).or_default();
            s.0 += 1;
            s.1 = s.1.wrapping_add(used);
            s.2 = s.2.wrapping_add(capacity);
            live.push((addr, slot, stack, Usage::new(used, capacity)));
        }
    }
    // Sites at the heap's peak (not kept per thread: only without --thread).
    let mut at_peak: HashMap<u32, Usage> = HashMap::new();
    let site_peaks = heap_selected && sel.thread.is_none();
    if site_peaks {
        for (i, site) in state.sites.iter().enumerate() {
            let held = state.site_held_at_peak(i);
            if site.domain == HEAP_DOMAIN && held.usage_capacity > 0 {
                at_peak.insert(site.stack, Usage::of(&held));
                sites.entry(site.stack).or_default();
            }
        }
    }
    let mut sites: Vec<SiteEfficiency> = sites
        .into_iter()
        .map(|(stack, (n, used, cap))| SiteEfficiency {
            stack,
            frames: Vec::new(),
            site: None,
            containers: n,
            live: Usage::new(used, cap),
            peak: site_peaks.then(|| at_peak.get(&stack).copied().unwrap_or_default()),
        })
        .filter(|s| s.live.capacity_bytes.max(s.peak.map_or(0, |p| p.capacity_bytes)) >= sel.min_bytes)
        .collect();
    sites.sort_by(|a, b| {
        let peak_wasted = |s: &SiteEfficiency| s.peak.map_or(0, |p| p.wasted_bytes);
        let key = |s: &SiteEfficiency| match sel.sort {
            SortKey::Name => 0,
            SortKey::Count | SortKey::Instances => s.containers,
            SortKey::Total => s.live.capacity_bytes,
            SortKey::Bytes => s.live.wasted_bytes,
        };
        key(b)
            .cmp(&key(a))
            .then(b.live.wasted_bytes.cmp(&a.live.wasted_bytes))
            .then(peak_wasted(b).cmp(&peak_wasted(a)))
            .then(a.stack.cmp(&b.stack))
    });
    sites.truncate(limit);
    for s in &mut sites {
        s.frames = frames(state, s.stack);
    }

    let key = |u: &Usage| match sel.sort {
        SortKey::Name => 0,
        SortKey::Total | SortKey::Count => u.capacity_bytes,
        SortKey::Bytes | SortKey::Instances => u.wasted_bytes,
    };
    live.retain(|c| c.3.capacity_bytes >= sel.min_bytes);
    // Only the `limit` highest keys, and those that tie with the last of them, can be
    // listed: the others are dropped before their context's path and address are
    // written out (a program may hold millions of containers).
    if live.len() > limit {
        match limit.checked_sub(1) {
            Some(last) => {
                let (_, &mut (.., cut), _) = live.select_nth_unstable_by(last, |a, b| key(&b.3).cmp(&key(&a.3)));
                let cut = key(&cut);
                live.retain(|c| key(&c.3) >= cut);
            }
            None => live.clear(),
        }
    }
    let mut containers: Vec<Container> = live
        .into_iter()
        .map(|(addr, slot, stack, usage)| Container {
            address: format!("{addr:#x}"),
            context: state.node_path(state.slots[slot as usize].node),
            stack,
            live: usage,
        })
        .collect();
    containers.sort_by(|a, b| {
        key(&b.live).cmp(&key(&a.live)).then_with(|| a.context.cmp(&b.context)).then_with(|| a.address.cmp(&b.address))
    });
    containers.truncate(limit);

    Efficiency {
        schema_version: SCHEMA_VERSION,
        report: "efficiency",
        path: l.path.clone(),
        selection: sel.info(state, l.ticks_per_second()),
        at: sel.point_text(state, l.ticks_per_second()),
        overall,
        peak,
        contexts,
        sites,
        containers,
        symbols: None,
    }
}

/// `1000 B of 976.6 KiB (0.1%)`.
pub fn usage_text(u: &Usage) -> String {
    if u.capacity_bytes == 0 {
        return "no container".into();
    }
    format!("{} of {} ({})", size(u.used_bytes), size(u.capacity_bytes), percent(u.efficiency))
}

impl Efficiency {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ =
            writeln!(o, "{}: container efficiency (used / capacity of containers reporting their usage)", self.path);
        if let Some(t) = &self.selection.thread {
            let _ = writeln!(o, "  only allocations made by thread {}", t.name.as_deref().unwrap_or("(unnamed)"));
        }
        let live_at = format!("{}:", self.at);
        let w = live_at.chars().count().max(19) + 1;
        let _ = writeln!(o, "  {live_at:<w$}{}", usage_text(&self.overall));
        let _ = writeln!(o, "  {:<w$}{}", "at the heap's peak:", usage_text(&self.peak));

        let _ = writeln!(o, "\ncontexts ({} and at the heap's peak)", self.at);
        if self.contexts.is_empty() {
            // Contexts hold every reporting container, so none listed with some reporting:
            // --depth or --min-bytes left them all out.
            let reported = self.overall.capacity_bytes > 0 || self.peak.capacity_bytes > 0;
            let _ = writeln!(o, "  {}", if reported { "none" } else { "no container reported its usage" });
        } else {
            let mut t = Table::new(&[
                ("used", Align::Right),
                ("capacity", Align::Right),
                ("wasted", Align::Right),
                ("efficiency", Align::Right),
                ("peak used", Align::Right),
                ("peak capacity", Align::Right),
                ("peak wasted", Align::Right),
                ("peak eff.", Align::Right),
                ("context", Align::Left),
            ]);
            for c in &self.contexts {
                t.row(vec![
                    size(c.live.used_bytes),
                    size(c.live.capacity_bytes),
                    size(c.live.wasted_bytes),
                    percent(c.live.efficiency),
                    size(c.peak.used_bytes),
                    size(c.peak.capacity_bytes),
                    size(c.peak.wasted_bytes),
                    percent(c.peak.efficiency),
                    c.context.clone(),
                ]);
            }
            o.push_str(&t.render(2));
        }

        let _ = writeln!(o, "\nallocation sites (containers live at the end, and at the heap's peak)");
        if self.sites.is_empty() {
            let _ = writeln!(o, "  none");
        } else {
            let mut t = Table::new(&[
                ("containers", Align::Right),
                ("used", Align::Right),
                ("capacity", Align::Right),
                ("wasted", Align::Right),
                ("efficiency", Align::Right),
                ("peak wasted", Align::Right),
                ("peak eff.", Align::Right),
                ("callstack", Align::Left),
            ]);
            for s in &self.sites {
                t.row(vec![
                    s.containers.to_string(),
                    size(s.live.used_bytes),
                    size(s.live.capacity_bytes),
                    size(s.live.wasted_bytes),
                    percent(s.live.efficiency),
                    s.peak.map_or_else(|| "-".into(), |p| size(p.wasted_bytes)),
                    s.peak.map_or_else(|| "-".into(), |p| percent(p.efficiency)),
                    site_text(s.stack, &s.frames, s.site.as_ref()),
                ]);
            }
            o.push_str(&t.render(2));
        }

        let _ = writeln!(o, "\nworst containers (live at the end)");
        if self.containers.is_empty() {
            let _ = writeln!(o, "  none");
        } else {
            let mut t = Table::new(&[
                ("wasted", Align::Right),
                ("used", Align::Right),
                ("capacity", Align::Right),
                ("efficiency", Align::Right),
                ("address", Align::Left),
                ("context", Align::Left),
            ]);
            for c in &self.containers {
                t.row(vec![
                    size(c.live.wasted_bytes),
                    size(c.live.used_bytes),
                    size(c.live.capacity_bytes),
                    percent(c.live.efficiency),
                    c.address.clone(),
                    c.context.clone(),
                ]);
            }
            o.push_str(&t.render(2));
        }
        if let Some(s) = &self.symbols {
            let _ = writeln!(o, "\nsymbols: {}", s.text());
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaded::{load, Progress};
    use crate::select::ReportOptions;

    /// The worst containers are those a sort of every live container would list first:
    /// the cut before their texts are made keeps every tie that could be listed.
    #[test]
    fn the_worst_containers_are_those_a_whole_sort_lists() {
        let log = crate::testlog::containers_log("worst-containers");
        for sort in [SortKey::Bytes, SortKey::Count, SortKey::Name, SortKey::Instances, SortKey::Total] {
            for limit in [1, 2, 5, 7, 20, 59, 60, 0] {
                let mut args = ReportOptions::new(&log);
                (args.sort, args.limit) = (Some(sort), Some(limit));
                let loaded = load(&args, Progress::Hidden).expect("the log loads");
                let state = loaded.state();
                let key = |c: &Container| match sort {
                    SortKey::Name => 0,
                    SortKey::Total | SortKey::Count => c.live.capacity_bytes,
                    SortKey::Bytes | SortKey::Instances => c.live.wasted_bytes,
                };
                let mut all: Vec<Container> = state
                    .live_containers()
                    .map(|(addr, capacity, used, slot, stack)| Container {
                        address: format!("{addr:#x}"),
                        context: state.node_path(state.slots[slot as usize].node),
                        stack,
                        live: Usage::new(used, capacity),
                    })
                    .collect();
                assert_eq!(all.len(), 60);
                all.sort_by(|a, b| {
                    key(b).cmp(&key(a)).then_with(|| a.context.cmp(&b.context)).then_with(|| a.address.cmp(&b.address))
                });
                all.truncate(if limit == 0 { usize::MAX } else { limit });
                assert_eq!(build(&loaded).containers, all, "sort {sort:?}, limit {limit}");
            }
        }
    }
}
