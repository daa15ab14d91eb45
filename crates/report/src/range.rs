//! `diff game.mrl --from A --to B`: what was allocated between two labels of one log and
//! is still live at the second (MemReplay's range selection: "what did loading this level
//! leave behind"), by domain, context and allocation site.
//!
//! `A` is the first label of that name, `B` the first label of its name after `A`. The
//! allocations are those live at `B` (kept by [`crate::observed`] as the replay passes
//! `B`) that were made after `A`.
//!
//! Sites are symbolicated and keyed as in `diff` ([`crate::matching::site_key`]): by
//! allocating function, or by whole callstack with `--stacks`; a site whose allocating
//! function is unresolved by its raw `module+0xoffset` frames. One log has one set of
//! binaries, so its sites are only listed, never matched with another log's: an
//! unresolved one is shown by its frames, and the `symbols` line says why.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::Error;
use memreplay_replay::{Held, ROOT};
use memreplay_symbols::{Frame, SymbolStats};

use crate::callstacks::{lines_text, symbolizer};
use crate::figures::{Agg, DomainFigures};
use crate::integrity::LogIntegrity;
use crate::matching::{keyed_by, site_key, DiffOptions, KeyedSite, MinDelta};
use crate::observed::{self, Wanted};
use crate::select::{At, ReportOptions};
use crate::summarize::LabelRef;
use crate::table::{plural, size, Align, Table};
use crate::top::SourceLine;
use crate::{domain_ref, Amount, DomainRef, Progress, SCHEMA_VERSION};

/// The `diff --from --to` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RangeDiff {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"diff-range"`.
    pub report: &'static str,
    /// The log, as given.
    pub path: String,
    /// Whether the log is whole, and what was lost if not.
    pub integrity: LogIntegrity,
    /// The label where allocations start to count.
    pub from: LabelRef,
    /// The label where what they left live is looked at.
    pub to: LabelRef,
    /// Over the top-level domains (a pool's blocks are not added to the heap's).
    pub total: Amount,
    /// Domains with allocations left, by id.
    pub domains: Vec<RangeDomain>,
    /// `"function"` or `"stack"` (`--stacks`).
    pub group: &'static str,
    /// How sites are keyed, in words (as in `diff`).
    pub sites_keyed_by: String,
    /// What symbolication found.
    pub symbols: SymbolStats,
}

/// One domain's allocations made between the labels and live at the second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RangeDomain {
    pub domain: DomainRef,
    pub bytes: u64,
    pub count: u64,
    /// Contexts holding some of them (inclusive, with their own share), most bytes first.
    pub contexts: Vec<RangeContext>,
    /// Contexts left out by `--min-delta` or `--limit`.
    pub hidden_contexts: u64,
    /// Allocation sites (functions, or callstacks with `--stacks`), most bytes first.
    pub sites: Vec<RangeSite>,
    pub hidden_sites: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RangeContext {
    /// Context path (`(no context)` for allocations outside any context).
    pub context: String,
    /// This context and its descendants.
    pub bytes: u64,
    pub count: u64,
    /// Its own allocations.
    pub own_bytes: u64,
    pub own_count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RangeSite {
    /// What the site is keyed by (as in `diff`).
    pub key: String,
    /// The allocating function (`module+0xoffset` when unresolved).
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// Every line it allocated from.
    pub lines: Vec<SourceLine>,
    /// The allocating function is unresolved: the key is the raw callstack.
    pub unresolved: bool,
    /// The callstack id with most bytes (0: recorded without one).
    pub stack: u32,
    /// Every callstack id merged in the row, ascending.
    pub stacks: Vec<u32>,
    /// The frames of callstack `stack`, innermost first, trimmed.
    pub frames: Vec<Frame>,
    pub bytes: u64,
    pub count: u64,
}

/// Builds the range report of `args.before` from label `from` to label `to`.
pub fn build(args: &DiffOptions, from: &str, to: &str, progress: Progress) -> Result<RangeDiff, Error> {
    if from == to {
        return Err(Error::Usage(format!("--from and --to both name \"{from}\": give two labels")));
    }
    crate::callstacks::check_symbol_dirs(&args.symbols)?;
    let report_args = ReportOptions { domain: args.domain.clone(), ..ReportOptions::new(&args.before) };
    let wanted = [Wanted { at: At::Label(to.to_owned()), after: Some(from.to_owned()) }];
    let o = observed::load(&report_args, progress, &wanted)?;
    let l = &o.loaded;
    let state = l.state();
    let labels = || {
        let names: Vec<String> = state.labels.iter().map(|m| format!("\"{}\"", state.string(m.name))).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    };
    let named = |name: &str, from_index: usize| {
        state.labels.iter().enumerate().skip(from_index).find(|(_, m)| state.string(m.name) == name).map(|(i, _)| i)
    };
    let Some(from_index) = named(from, 0) else {
        return Err(Error::Usage(format!("no label \"{from}\" in the log; labels: {}", labels())));
    };
    let Some(to_index) = named(to, from_index + 1) else {
        return Err(Error::Usage(format!("no label \"{to}\" after \"{from}\" in the log; labels: {}", labels())));
    };
    let kept =
        o.at_label(to_index).ok_or_else(|| Error::Usage(format!("label \"{to}\" was not reached in {}", l.path)))?;

    // What was made after `from` (epoch > from_index), by slot and by (domain, stack).
    let mut by_slot: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut by_site: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
    for (&(epoch, slot, stack), &(bytes, count)) in kept {
        if epoch as usize <= from_index || !l.sel.slot_selected(state, slot) {
            continue;
        }
        let e = by_slot.entry(slot).or_default();
        e.0 = e.0.wrapping_add(bytes);
        e.1 = e.1.wrapping_add(count);
        let e = by_site.entry((state.slots[slot as usize].domain, stack)).or_default();
        e.0 = e.0.wrapping_add(bytes);
        e.1 = e.1.wrapping_add(count);
    }

    let mut syms = symbolizer(l, &args.symbols)?;
    let mut stacks: HashMap<u32, bool> = HashMap::new();
    let limit = args.row_limit();
    let mut domains = Vec::new();
    for &d in &l.sel.domains {
        let own = by_slot.iter().filter(|&(&slot, _)| state.slots[slot as usize].domain == d).map(
            |(&slot, &(bytes, count))| {
                let live = Held { bytes, count, ..Held::default() };
                (state.slots[slot as usize].node, Agg { live, ..Agg::default() })
            },
        );
        let figs = DomainFigures::from_exclusive(state, d, own);
        let total = figs.total().live;
        if total.count == 0 {
            continue;
        }
        let mut contexts: Vec<RangeContext> = figs
            .rows()
            .filter(|&(n, exc, inc)| inc.live.count > 0 && (n != ROOT || exc.live.count > 0))
            .map(|(n, exc, inc)| RangeContext {
                context: state.node_path(n),
                bytes: if n == ROOT { exc.live.bytes } else { inc.live.bytes },
                count: if n == ROOT { exc.live.count } else { inc.live.count },
                own_bytes: exc.live.bytes,
                own_count: exc.live.count,
            })
            .collect();
        contexts
            .sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.count.cmp(&a.count)).then_with(|| a.context.cmp(&b.context)));
        let all = contexts.len() as u64;
        contexts.retain(|c| keep(args.min_delta, c.bytes, total.bytes));
        if let Some(n) = limit {
            contexts.truncate(n);
        }

        let mut keyed: HashMap<String, (KeyedSite, u64, u64)> = HashMap::new();
        let mut of_domain: Vec<(u32, u64, u64)> =
            by_site.iter().filter(|((domain, _), _)| *domain == d).map(|(&(_, st), &(b, c))| (st, b, c)).collect();
        of_domain.sort_unstable();
        for (stack, bytes, count) in of_domain {
            let name = syms.site(stack, state.stacks.get(stack));
            let (key, unresolved) = site_key(&name, args.stacks);
            if stack != 0 {
                stacks.insert(stack, unresolved);
            }
            let e = keyed.entry(key).or_insert_with(|| (KeyedSite::new(name.clone(), unresolved), 0, 0));
            e.0.add(&name, bytes);
            e.1 = e.1.wrapping_add(bytes);
            e.2 = e.2.wrapping_add(count);
        }
        let mut sites: Vec<RangeSite> = keyed
            .into_iter()
            .map(|(key, (k, bytes, count))| RangeSite {
                key,
                function: k.site.function.clone(),
                file: k.site.file.clone(),
                line: k.site.line,
                lines: k.lines.into_iter().map(|(file, line)| SourceLine { file, line }).collect(),
                unresolved: k.unresolved,
                stack: k.site.stack,
                stacks: k.stacks,
                frames: k.site.frames.clone(),
                bytes,
                count,
            })
            .collect();
        sites.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(b.count.cmp(&a.count)).then_with(|| a.key.cmp(&b.key)));
        let all_sites = sites.len() as u64;
        sites.retain(|s| keep(args.min_delta, s.bytes, total.bytes));
        if let Some(n) = limit {
            sites.truncate(n);
        }
        domains.push(RangeDomain {
            domain: domain_ref(state, d),
            bytes: total.bytes,
            count: total.count,
            hidden_contexts: all - contexts.len() as u64,
            contexts,
            hidden_sites: all_sites - sites.len() as u64,
            sites,
        });
    }
    let top: Vec<&RangeDomain> = domains.iter().filter(|d| d.domain.top_level).collect();
    let label_ref = |i: usize| {
        let m = &state.labels[i];
        LabelRef { name: state.string(m.name), seq: m.seq, time_ns: l.ns(m.time_ns), frame: m.frame }
    };
    Ok(RangeDiff {
        schema_version: SCHEMA_VERSION,
        report: "diff-range",
        path: l.path.clone(),
        integrity: l.integrity(),
        from: label_ref(from_index),
        to: label_ref(to_index),
        total: Amount::new(
            top.iter().map(|d| d.bytes).fold(0, u64::wrapping_add),
            top.iter().map(|d| d.count).fold(0, u64::wrapping_add),
        ),
        domains,
        group: if args.stacks { "stack" } else { "function" },
        sites_keyed_by: {
            let raw = stacks.values().filter(|&&u| u).count() as u64;
            keyed_by(args.stacks, &[("", raw, stacks.len() as u64)])
        },
        symbols: syms.stats(),
    })
}

/// Whether a row of `bytes` passes `--min-delta` (a percentage is of the domain's total).
fn keep(min: Option<MinDelta>, bytes: u64, domain_bytes: u64) -> bool {
    match min {
        None => true,
        Some(MinDelta::Bytes(b)) => bytes >= b,
        Some(MinDelta::Percent(p)) => domain_bytes > 0 && bytes as f64 * 100.0 / domain_bytes as f64 >= p,
    }
}

impl RangeDiff {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let ms = crate::time::format_ms;
        let _ = writeln!(
            o,
            "{}: allocated after \"{}\" ({}) and still live at \"{}\" ({})",
            self.path,
            self.from.name,
            ms(self.from.time_ns),
            self.to.name,
            ms(self.to.time_ns)
        );
        if let Some(line) = self.integrity.damaged_line("the log") {
            let _ = writeln!(o, "{line}");
        }
        if self.domains.is_empty() {
            let _ = writeln!(o, "\nnothing: every allocation made in between was freed by then");
            return o;
        }
        let _ = writeln!(o, "  {} (top-level domains)", self.total.text());
        for d in &self.domains {
            let _ = writeln!(o, "\n{}: {} in {}", d.domain.title(), size(d.bytes), plural(d.count, "allocation"));
            let mut t = Table::new(&[
                ("bytes", Align::Right),
                ("count", Align::Right),
                ("own", Align::Right),
                ("own count", Align::Right),
                ("context", Align::Left),
            ]);
            for c in &d.contexts {
                t.row(vec![
                    size(c.bytes),
                    c.count.to_string(),
                    size(c.own_bytes),
                    c.own_count.to_string(),
                    c.context.clone(),
                ]);
            }
            if d.hidden_contexts > 0 {
                t.row(vec![
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    format!("… {} more contexts", d.hidden_contexts),
                ]);
            }
            o.push_str(&t.render(2));
            let mut t =
                Table::new(&[("bytes", Align::Right), ("count", Align::Right), ("allocation site", Align::Left)]);
            for s in &d.sites {
                let title = if s.unresolved || self.group == "stack" {
                    let names: Vec<String> = s.frames.iter().map(|f| f.text()).collect();
                    crate::leaks::frames_text(&names)
                } else if s.lines.is_empty() {
                    s.function.clone()
                } else {
                    let lines: Vec<(String, u32)> = s.lines.iter().map(|l| (l.file.clone(), l.line)).collect();
                    format!("{}  {}", s.function, lines_text(&lines))
                };
                t.row(vec![size(s.bytes), s.count.to_string(), title]);
            }
            if d.hidden_sites > 0 {
                t.row(vec![String::new(), String::new(), format!("… {} more sites", d.hidden_sites)]);
            }
            o.push_str(&t.render(2));
        }
        let _ = writeln!(o, "\n(allocation sites keyed by {})", self.sites_keyed_by);
        let _ = writeln!(o, "symbols: {}", self.symbols.text());
        o
    }
}
