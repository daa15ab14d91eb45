//! `leaks`: the allocations still live at the end of the log, grouped by context, then
//! by allocation site (callstack), largest first; and grouped by callstack alone, with
//! the contexts each holds in. Sites are symbolicated when built with a [`Symbolizer`].

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use memreplay_replay::NodeId;
use memreplay_replay::ReplayState;
use memreplay_symbols::{SiteName, SymbolStats, Symbolizer};

use crate::select::SelectionInfo;
use crate::table::{plural, size, Align, Table};
use crate::{domain_ref, sort_rows, DomainRef, Keys, Loaded, SCHEMA_VERSION};

/// Rows per list unless `--limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 20;
/// Frames of a callstack printed in the text output (JSON has them all).
const TEXT_FRAMES: usize = 6;

/// The `leaks` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Leaks {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"leaks"`.
    pub report: &'static str,
    /// The log, as given.
    pub path: String,
    /// The options, resolved.
    pub selection: SelectionInfo,
    /// Live at the end, over the top-level domains only (no byte counted twice).
    pub total_bytes: u64,
    /// Allocations live at the end, every domain.
    pub total_count: u64,
    /// Domains with live allocations at the end.
    pub domains: Vec<DomainLeaks>,
    /// What symbolication found (null when built without symbols).
    pub symbols: Option<SymbolStats>,
}

/// One domain's live allocations at the end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainLeaks {
    pub domain: DomainRef,
    pub bytes: u64,
    pub count: u64,
    pub contexts: Vec<LeakContext>,
    /// Contexts left out by `--depth`, `--limit` or `--min-bytes`.
    pub hidden_contexts: u64,
    /// The same live allocations by callstack alone, largest first.
    pub stacks: Vec<LeakStack>,
    /// Callstacks left out by `--limit` or `--min-bytes`.
    pub hidden_stacks: u64,
}

/// Live allocations of one callstack, over every context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeakStack {
    pub stack: u32,
    /// As in [`LeakSite`].
    pub frames: Vec<String>,
    pub site: Option<SiteName>,
    pub bytes: u64,
    pub count: u64,
    pub first_seq: u64,
    /// The contexts its allocations belong to, largest first.
    pub contexts: Vec<StackContext>,
}

/// One context's share of a callstack's live allocations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StackContext {
    pub context: String,
    pub bytes: u64,
    pub count: u64,
}

/// Live allocations of one context (its own, not its descendants').
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakContext {
    /// `Level:Forest/Scripts:cache`, or `(no context)`.
    pub context: String,
    pub bytes: u64,
    pub count: u64,
    pub sites: Vec<LeakSite>,
    /// Sites left out by `--limit`.
    pub hidden_sites: u64,
}

/// Live allocations of one context made at one callstack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeakSite {
    /// Callstack id in the log (0: recorded without a callstack).
    pub stack: u32,
    /// Return addresses, innermost first, as hex strings (`"0x55d0c0a1b2c3"`).
    pub frames: Vec<String>,
    /// The callstack symbolicated (null when built without symbols).
    pub site: Option<SiteName>,
    pub bytes: u64,
    pub count: u64,
    /// Sequence number of the oldest of these allocations.
    pub first_seq: u64,
}

/// Live bytes and allocations at the end by domain and context (own allocations), for
/// the selected domains and thread: read from the slots' figures, not from every live
/// allocation.
pub fn by_context(l: &Loaded) -> HashMap<u32, HashMap<NodeId, (u64, u64)>> {
    let state = l.state();
    let sel = &l.sel;
    let mut by_domain: HashMap<u32, HashMap<NodeId, (u64, u64)>> = HashMap::new();
    for (i, s) in state.slots.iter().enumerate() {
        if s.now.live_count == 0 || !sel.domains.contains(&s.domain) || !sel.slot_selected(state, i as u32) {
            continue;
        }
        let g = by_domain.entry(s.domain).or_default().entry(s.node).or_default();
        g.0 = g.0.wrapping_add(s.now.live_bytes);
        g.1 = g.1.wrapping_add(s.now.live_count);
    }
    by_domain
}

/// The report, without symbols (sites are callstack ids and return addresses).
pub fn build(l: &Loaded) -> Leaks {
    build_with(l, None)
}

/// The report with symbolicated sites.
pub fn build_symbolized(l: &Loaded, syms: &mut Symbolizer) -> Leaks {
    build_with(l, Some(syms))
}

fn build_with(l: &Loaded, mut syms: Option<&mut Symbolizer>) -> Leaks {
    let state = l.state();
    let sel = &l.sel;
    let limit = sel.limit_or(DEFAULT_LIMIT);
    let mut by_domain = by_context(l);

    // The contexts listed, per domain, before their sites are known.
    let mut domains = Vec::new();
    let mut listed: HashMap<(u32, NodeId), (usize, usize)> = HashMap::new();
    for &d in &sel.domains {
        let Some(groups) = by_domain.remove(&d) else { continue };
        let bytes = groups.values().map(|g| g.0).fold(0, u64::wrapping_add);
        let count = groups.values().map(|g| g.1).fold(0, u64::wrapping_add);
        let mut contexts: Vec<(NodeId, LeakContext)> = groups
            .into_iter()
            .map(|(node, (bytes, count))| {
                let context = state.node_path(node);
                (node, LeakContext { context, bytes, count, sites: Vec::new(), hidden_sites: 0 })
            })
            .collect();
        sort_rows(&mut contexts, sel.sort, |(_, c)| Keys {
            bytes: c.bytes,
            count: c.count,
            name: &c.context,
            instances: 0,
            total: c.bytes,
            peak: 0,
        });
        let all = contexts.len() as u64;
        contexts.retain(|(node, c)| c.bytes >= sel.min_bytes && sel.depth_shown(state, *node));
        contexts.truncate(limit);
        for (i, (node, _)) in contexts.iter().enumerate() {
            listed.insert((d, *node), (domains.len(), i));
        }
        domains.push((
            DomainLeaks {
                domain: domain_ref(state, d),
                bytes,
                count,
                hidden_contexts: all - contexts.len() as u64,
                contexts: Vec::new(),
                stacks: Vec::new(),
                hidden_stacks: 0,
            },
            contexts,
        ));
    }

    // Their allocation sites: (bytes, count, oldest seq) by callstack, by (domain index,
    // context index) in `domains`.
    type Sites = HashMap<u32, (u64, u64, u64)>;
    let mut sites: HashMap<(usize, usize), Sites> = HashMap::new();
    // And by callstack alone.
    let mut by_stack: ByStack = HashMap::new();
    for (domain, _addr, size, slot, stack, seq) in state.live_allocations() {
        if !sel.domains.contains(&domain) || !sel.slot_selected(state, slot) {
            continue;
        }
        let node = state.slots[slot as usize].node;
        let s = by_stack.entry((domain, stack)).or_insert((0, 0, u64::MAX, HashMap::new()));
        s.0 = s.0.wrapping_add(size);
        s.1 += 1;
        s.2 = s.2.min(seq);
        let c = s.3.entry(node).or_default();
        c.0 = c.0.wrapping_add(size);
        c.1 += 1;
        let Some(&at) = listed.get(&(domain, node)) else { continue };
        let s = sites.entry(at).or_default().entry(stack).or_insert((0, 0, u64::MAX));
        s.0 = s.0.wrapping_add(size);
        s.1 += 1;
        s.2 = s.2.min(seq);
    }
    let domains: Vec<DomainLeaks> = domains
        .into_iter()
        .enumerate()
        .map(|(di, (mut d, contexts))| {
            d.contexts = contexts
                .into_iter()
                .enumerate()
                .map(|(ci, (_, mut c))| {
                    let mut list: Vec<LeakSite> = sites
                        .remove(&(di, ci))
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(stack, (bytes, count, first_seq))| LeakSite {
                            stack,
                            // Formatted below, for the sites kept.
                            frames: Vec::new(),
                            site: None,
                            bytes,
                            count,
                            first_seq,
                        })
                        .collect();
                    list.sort_by(|a, b| {
                        match sel.sort {
                            crate::SortKey::Count => b.count.cmp(&a.count).then(b.bytes.cmp(&a.bytes)),
                            _ => b.bytes.cmp(&a.bytes).then(b.count.cmp(&a.count)),
                        }
                        .then(a.first_seq.cmp(&b.first_seq))
                    });
                    let all = list.len() as u64;
                    list.truncate(limit);
                    for s in &mut list {
                        s.frames = frames(state, s.stack);
                        s.site = syms.as_deref_mut().map(|y| (*y.site(s.stack, state.stacks.get(s.stack))).clone());
                    }
                    c.hidden_sites = all - list.len() as u64;
                    c.sites = list;
                    c
                })
                .collect();
            let (stacks, hidden) = stack_rows(l, d.domain.id, &mut by_stack, syms.as_deref_mut());
            d.stacks = stacks;
            d.hidden_stacks = hidden;
            d
        })
        .collect();
    let top: Vec<&DomainLeaks> = domains.iter().filter(|d| d.domain.top_level).collect();
    Leaks {
        schema_version: SCHEMA_VERSION,
        report: "leaks",
        path: l.path.clone(),
        selection: sel.info(state, l.ticks_per_second()),
        total_bytes: top.iter().map(|d| d.bytes).fold(0, u64::wrapping_add),
        total_count: top.iter().map(|d| d.count).fold(0, u64::wrapping_add),
        domains,
        symbols: syms.map(|s| s.stats()),
    }
}

/// A callstack's live allocations: bytes, count, oldest seq, and (bytes, count) by context.
type StackLive = (u64, u64, u64, HashMap<NodeId, (u64, u64)>);
/// Live allocations by (domain, callstack).
type ByStack = HashMap<(u32, u32), StackLive>;

/// One domain's live allocations by callstack, largest first, cut by `--min-bytes` and
/// `--limit`: (rows, rows left out).
fn stack_rows(
    l: &Loaded,
    domain: u32,
    by_stack: &mut ByStack,
    mut syms: Option<&mut Symbolizer>,
) -> (Vec<LeakStack>, u64) {
    let state = l.state();
    let sel = &l.sel;
    let keys: Vec<(u32, u32)> = by_stack.keys().filter(|k| k.0 == domain).copied().collect();
    let mut rows: Vec<(u32, StackLive)> =
        keys.into_iter().filter_map(|k| by_stack.remove(&k).map(|v| (k.1, v))).collect();
    rows.sort_by(|a, b| {
        match sel.sort {
            crate::SortKey::Count => b.1 .1.cmp(&a.1 .1).then(b.1 .0.cmp(&a.1 .0)),
            _ => b.1 .0.cmp(&a.1 .0).then(b.1 .1.cmp(&a.1 .1)),
        }
        .then(a.1 .2.cmp(&b.1 .2))
    });
    let all = rows.len() as u64;
    rows.retain(|r| r.1 .0 >= sel.min_bytes);
    rows.truncate(sel.limit_or(DEFAULT_LIMIT));
    let out: Vec<LeakStack> = rows
        .into_iter()
        .map(|(stack, (bytes, count, first_seq, nodes))| {
            let mut contexts: Vec<StackContext> = nodes
                .into_iter()
                .map(|(node, (bytes, count))| StackContext { context: state.node_path(node), bytes, count })
                .collect();
            contexts.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.context.cmp(&b.context)));
            LeakStack {
                stack,
                frames: frames(state, stack),
                site: syms.as_deref_mut().map(|y| (*y.site(stack, state.stacks.get(stack))).clone()),
                bytes,
                count,
                first_seq,
                contexts,
            }
        })
        .collect();
    let hidden = all - out.len() as u64;
    (out, hidden)
}

/// A site on one line: `stack 12: function (file:line) < caller < …`, or the return
/// addresses without symbols.
pub fn site_text(stack: u32, frames: &[String], site: Option<&SiteName>) -> String {
    match site {
        None if stack == 0 => "(no callstack)".into(),
        None => format!("stack {stack}: {}", frames_text(frames)),
        Some(s) if s.frames.is_empty() => s.function.clone(),
        Some(s) => {
            let callers: Vec<String> = s
                .frames
                .iter()
                .skip(s.site_frame as usize + 1)
                .filter(|f| !f.inlined)
                .take(2)
                .map(|f| f.name())
                .collect();
            let mut t = format!("stack {stack}: {}", s.text());
            for c in callers {
                let _ = write!(t, " < {c}");
            }
            t
        }
    }
}

/// A callstack's frames as hex return addresses (symbolication comes later).
pub fn frames(state: &ReplayState, stack: u32) -> Vec<String> {
    state.stacks.get(stack).map_or_else(Vec::new, |f| f.iter().map(|a| format!("{a:#x}")).collect())
}

/// A callstack on one line: `0x1234 ← 0x5678 ← … (+10 frames)`.
pub fn frames_text(frames: &[String]) -> String {
    if frames.is_empty() {
        return "(no callstack)".into();
    }
    let mut s = frames.iter().take(TEXT_FRAMES).cloned().collect::<Vec<_>>().join(" < ");
    if frames.len() > TEXT_FRAMES {
        let _ = write!(s, " < … (+{} frames)", frames.len() - TEXT_FRAMES);
    }
    s
}

impl Leaks {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{}: allocations live at the end of the log", self.path);
        if let Some(t) = &self.selection.thread {
            let _ = writeln!(o, "  only allocations made by thread {}", t.name.as_deref().unwrap_or("(unnamed)"));
        }
        if self.domains.is_empty() {
            let _ = writeln!(o, "\nno live allocations: nothing leaked");
            return o;
        }
        let _ = writeln!(
            o,
            "  {} in {} (top-level domains)",
            size(self.total_bytes),
            plural(self.total_count, "allocation")
        );
        for d in &self.domains {
            let _ = writeln!(o, "\n{}: {} in {}", d.domain.title(), size(d.bytes), plural(d.count, "allocation"));
            let mut t =
                Table::new(&[("bytes", Align::Right), ("count", Align::Right), ("context / callstack", Align::Left)]);
            for c in &d.contexts {
                t.row(vec![size(c.bytes), c.count.to_string(), c.context.clone()]);
                for s in &c.sites {
                    let name = format!("  {}", site_text(s.stack, &s.frames, s.site.as_ref()));
                    t.row(vec![size(s.bytes), s.count.to_string(), name]);
                }
                if c.hidden_sites > 0 {
                    t.row(vec![String::new(), String::new(), format!("  … {} more callstacks", c.hidden_sites)]);
                }
            }
            if d.hidden_contexts > 0 {
                t.row(vec![String::new(), String::new(), format!("… {} more contexts", d.hidden_contexts)]);
            }
            o.push_str(&t.render(2));
            if !d.stacks.is_empty() {
                let _ = writeln!(o, "\n  by callstack");
                let mut t = Table::new(&[
                    ("bytes", Align::Right),
                    ("count", Align::Right),
                    ("callstack / contexts", Align::Left),
                ]);
                for s in &d.stacks {
                    t.row(vec![size(s.bytes), s.count.to_string(), site_text(s.stack, &s.frames, s.site.as_ref())]);
                    let shown: Vec<&str> = s.contexts.iter().take(3).map(|c| c.context.as_str()).collect();
                    let more = s.contexts.len().saturating_sub(shown.len());
                    let mut line = format!("  in {}", shown.join(", "));
                    if more > 0 {
                        let _ = write!(line, " and {more} more");
                    }
                    t.row(vec![String::new(), String::new(), line]);
                }
                if d.hidden_stacks > 0 {
                    t.row(vec![String::new(), String::new(), format!("… {} more callstacks", d.hidden_stacks)]);
                }
                o.push_str(&t.render(2));
            }
        }
        if let Some(s) = &self.symbols {
            let _ = writeln!(o, "\nsymbols: {}", s.text());
        }
        o
    }
}
