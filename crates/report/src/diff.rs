//! `diff a.mrl b.mrl`: what changed between two logs (two builds, two runs), per domain,
//! per context and per allocation site, largest change first.
//!
//! Contexts are matched by path — (type, name) at each level — and domains by name, so
//! the two logs need not share any id. Allocation sites are symbolicated, each log by its
//! own [`Symbolizer`] (its modules, its addresses), and matched by allocating function
//! ([`SiteName::function_key`](memreplay_symbols::SiteName::function_key), the figures of every callstack with that key summed) or,
//! with `--stacks`, by whole symbolicated callstack ([`SiteName::stack_key`](memreplay_symbols::SiteName::stack_key)). Neither
//! depends on addresses, so two builds match too. A site whose allocating function is
//! unresolved (no binary, no symbols) is keyed by its whole callstack, its frames as
//! `module+0xoffset`: module-relative addresses do not move with address-space
//! randomization, so two runs of one build still match. [`site_key`] is the rule.
//!
//! Such an unnamed site is matched only against the same build, unresolved in the other
//! log too; otherwise it is left out, never "new" or "vanished", with the other log's
//! sites that may be it, and the report says so once per log, with the fix (`--symbols`
//! with that build's binary or debug file): [`crate::unnamed`].
//! `diff game.mrl --from A --to B` (one log) is in [`crate::range`].

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::Serialize;

use crate::integrity::LogIntegrity;
use crate::Error;
use memreplay_replay::ROOT;
use memreplay_symbols::{Frame, SymbolStats, Symbolizer};

use crate::callstacks::{lines_text, symbolizer};

use crate::compare::{path_text, DomainMetrics, LevelPath, LogFigures, Metrics};
use crate::observed::{self, Observed, Wanted};
use crate::select::{At, PointInfo, ReportOptions};
use crate::table::{size, Align, Table};
use crate::top::SourceLine;
use crate::unnamed::{self, Cover, Naming, Tally, Why};
pub use crate::unnamed::{BothUnnamed, UnnamedSites};
use crate::{Progress, SCHEMA_VERSION};

use crate::matching::KeyedSite;
pub use crate::matching::{keyed_by, signed_count, signed_size, site_key, DiffOptions, MinDelta};

/// Frames printed per site with `--stacks` (JSON has them all).
const TEXT_FRAMES: usize = 12;

/// What `diff` made: its text or JSON, and whether a log it read is damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffOutput {
    /// The report.
    pub text: String,
    /// A log read is truncated or damaged: the report covers what could be read.
    pub damaged: bool,
}

/// `diff`: checks the options and builds the diff, of two logs or of two labels of one
/// log.
pub fn run(args: &DiffOptions, progress: Progress) -> Result<DiffOutput, Error> {
    let usage = |s: &str| Err(Error::Usage(s.into()));
    let damaged;
    let text = match (&args.after, &args.from, &args.to) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return usage("--from/--to compare two labels of one log: give one log, or use --at to compare two logs")
        }
        (None, Some(from), Some(to)) => {
            if args.at.is_some() {
                return usage("--at does not apply with --from/--to");
            }
            let r = crate::range::build(args, from, to, progress)?;
            damaged = !r.integrity.clean;
            if args.json {
                crate::to_json(&r)
            } else {
                r.to_text()
            }
        }
        (None, Some(_), None) | (None, None, Some(_)) => return usage("--from and --to go together"),
        (None, None, None) => {
            return usage("diff takes two logs (diff before.mrl after.mrl), or one with --from LABEL --to LABEL")
        }
        (Some(after), None, None) => {
            let d = build(args, after, progress)?;
            damaged = !(d.before.integrity.clean && d.after.integrity.clean);
            if args.json {
                crate::to_json(&d)
            } else {
                d.to_text()
            }
        }
    };
    Ok(DiffOutput { text, damaged })
}

/// The `diff` report of two logs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"diff"`.
    pub report: &'static str,
    /// The log before.
    pub before: Side,
    /// The log after.
    pub after: Side,
    /// `--domain`, if given.
    pub domain: Option<String>,
    /// `min_delta`, as applied.
    pub min_delta: MinDeltaInfo,
    /// Whether any figure of any domain, context or site differs.
    pub changed: bool,
    /// Every domain of either log, by name.
    pub domains: Vec<DomainDiff>,
    /// Contexts that changed, largest change first.
    pub contexts: Vec<ContextDiff>,
    /// Changed contexts left out by `--min-delta` or `--limit`.
    pub hidden_contexts: u64,
    /// Contexts with no change at all (not listed).
    pub unchanged_contexts: u64,
    /// `"function"` or `"stack"` (`--stacks`).
    pub group: &'static str,
    /// How sites were matched across the logs, in words.
    pub sites_keyed_by: String,
    /// Allocation sites that changed, largest change first.
    pub sites: Vec<SiteDiff>,
    /// Changed sites left out by `--min-delta` or `--limit`.
    pub hidden_sites: u64,
    /// Sites with no change at all (not listed).
    pub unchanged_sites: u64,
    /// Each log's sites that cannot be named (null: all named), and what became of them.
    pub sites_unnamed: BothUnnamed,
    /// Symbolication of each log.
    pub symbols: BothSymbols,
}

/// What symbolication found in each log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BothSymbols {
    pub before: SymbolStats,
    pub after: SymbolStats,
}

/// One of the two logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Side {
    pub path: String,
    /// Where its "live" figures are read.
    pub at: PointInfo,
    /// Whether the log is whole, and what was lost if not.
    pub integrity: LogIntegrity,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MinDeltaInfo {
    pub bytes: Option<u64>,
    pub percent: Option<f64>,
}

/// How a row compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// In both logs, with figures that differ.
    Changed,
    /// In both logs, with the same figures.
    Unchanged,
    /// Only in the log after.
    New,
    /// Only in the log before.
    Vanished,
}

impl Status {
    fn text(self) -> &'static str {
        match self {
            Status::Changed => "",
            Status::Unchanged => "(no change)",
            Status::New => "(new)",
            Status::Vanished => "(vanished)",
        }
    }
}

/// An exact figure before and after.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// Null where the row does not exist (a new or vanished context).
    pub before: Option<u64>,
    pub after: Option<u64>,
    /// `after - before` (a missing side counts as 0).
    pub change: i64,
    /// `change / before` (null when `before` is 0 or missing).
    pub relative: Option<f64>,
}

impl Change {
    pub fn new(before: Option<u64>, after: Option<u64>) -> Change {
        let (b, a) = (before.unwrap_or(0), after.unwrap_or(0));
        let change = (i128::from(a) - i128::from(b)).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        Change { before, after, change, relative: (b > 0).then(|| change as f64 / b as f64) }
    }
}

/// A ratio or an average before and after (null where it does not apply).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioChange {
    pub before: Option<f64>,
    pub after: Option<f64>,
    /// `after - before`, when both exist.
    pub change: Option<f64>,
    /// `change / before`, when both exist and `before` is not 0.
    pub relative: Option<f64>,
}

impl RatioChange {
    pub fn new(before: Option<f64>, after: Option<f64>) -> RatioChange {
        let change = before.zip(after).map(|(b, a)| a - b);
        let relative = change.zip(before).filter(|&(_, b)| b != 0.0).map(|(c, b)| c / b);
        RatioChange { before, after, change, relative }
    }

    fn differs(&self) -> bool {
        self.before != self.after
    }
}

/// The figures of a domain or a context, before and after.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FigureChanges {
    /// Held at the domain's peak.
    pub peak: Change,
    /// Held at the point (the end, or `--at`).
    pub live: Change,
    /// Allocations live.
    pub live_count: Change,
    /// Allocated over the whole recording (`--at` does not move it).
    pub total: Change,
    /// Allocations made over the whole recording.
    pub total_count: Change,
    /// Instance entries over the recording.
    pub instances: Change,
    /// Bytes live at the point per instance.
    pub per_instance: RatioChange,
    /// Used / capacity of the containers live at the point.
    pub efficiency: RatioChange,
}

impl FigureChanges {
    /// The changes from `before` to `after` (`None`: not in that log).
    pub fn new(before: Option<&Metrics>, after: Option<&Metrics>) -> FigureChanges {
        let c = |f: fn(&Metrics) -> u64| Change::new(before.map(f), after.map(f));
        FigureChanges {
            peak: c(|m| m.peak),
            live: c(|m| m.live),
            live_count: c(|m| m.live_count),
            total: c(|m| m.total),
            total_count: c(|m| m.total_count),
            instances: c(|m| m.instances),
            per_instance: RatioChange::new(
                before.and_then(Metrics::per_instance),
                after.and_then(Metrics::per_instance),
            ),
            efficiency: RatioChange::new(before.and_then(Metrics::efficiency), after.and_then(Metrics::efficiency)),
        }
    }

    fn exact(&self) -> [(&'static str, &Change, bool); 6] {
        [
            ("peak", &self.peak, true),
            ("live", &self.live, true),
            ("live allocations", &self.live_count, false),
            ("allocated", &self.total, true),
            ("allocations", &self.total_count, false),
            ("instances", &self.instances, false),
        ]
    }

    /// Whether any figure changed.
    pub fn differs(&self) -> bool {
        self.exact().iter().any(|(_, c, _)| c.change != 0) || self.per_instance.differs() || self.efficiency.differs()
    }

    /// The size of the change: the largest absolute change of peak, live and allocated.
    pub fn magnitude(&self) -> u64 {
        [&self.peak, &self.live, &self.total].iter().map(|c| c.change.unsigned_abs()).max().unwrap_or(0)
    }

    /// The largest relative change of peak, live and allocated, in percent (infinite for
    /// a figure that grew from nothing).
    fn relative_percent(&self) -> f64 {
        [&self.peak, &self.live, &self.total]
            .iter()
            .map(|c| match c.relative {
                Some(r) => r.abs() * 100.0,
                None if c.change != 0 => f64::INFINITY,
                None => 0.0,
            })
            .fold(0.0, f64::max)
    }
}

/// One domain, by name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainDiff {
    pub domain: String,
    pub status: Status,
    pub figures: FigureChanges,
}

/// One context (inclusive of its descendants) in one domain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextDiff {
    /// The domain, by name.
    pub domain: String,
    /// `Level:Forest/Textures:Forest`.
    pub context: String,
    /// Added, removed, changed or unchanged.
    pub status: Status,
    /// Its figures before and after.
    pub figures: FigureChanges,
}

/// One allocation site (an allocating function, or a callstack) in one domain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteDiff {
    /// The domain, by name.
    pub domain: String,
    /// What the site is matched by: its allocating function, or its whole stack.
    pub key: String,
    /// The allocating function (`module+0xoffset` when unresolved).
    pub function: String,
    /// Where in it (of the callstack with most of the figures; the log after's first).
    pub file: Option<String>,
    /// The allocating function's source line, if known.
    pub line: Option<u32>,
    /// Every line it allocated from, in either log.
    pub lines: Vec<SourceLine>,
    /// The allocating function is unresolved: the key is the raw callstack.
    pub unresolved: bool,
    /// Callstack ids merged in the row, in each log.
    pub stacks_before: Vec<u32>,
    /// Callstack ids of the site in the log after.
    pub stacks_after: Vec<u32>,
    /// The frames of the callstack with most of the figures (the log after's first),
    /// innermost first, trimmed; empty for allocations recorded without a callstack.
    pub frames: Vec<Frame>,
    /// Added, removed, changed or unchanged.
    pub status: Status,
    /// Its figures before and after.
    pub figures: SiteChanges,
}

/// A site's figures before and after.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SiteChanges {
    /// Held at its domain's peak.
    pub peak: Change,
    /// Held at the point (the end, or `--at`).
    pub live: Change,
    pub live_count: Change,
    /// Allocated over the whole recording.
    pub total: Change,
    pub total_count: Change,
}

impl SiteChanges {
    fn rows(&self) -> [(&'static str, &Change, bool); 5] {
        [
            ("peak", &self.peak, true),
            ("live", &self.live, true),
            ("live allocations", &self.live_count, false),
            ("allocated", &self.total, true),
            ("allocations", &self.total_count, false),
        ]
    }

    fn magnitude(&self) -> u64 {
        [&self.peak, &self.live, &self.total].iter().map(|c| c.change.unsigned_abs()).max().unwrap_or(0)
    }

    fn as_figures(&self) -> FigureChanges {
        FigureChanges {
            peak: self.peak,
            live: self.live,
            live_count: self.live_count,
            total: self.total,
            total_count: self.total_count,
            instances: Change::new(None, None),
            per_instance: RatioChange::new(None, None),
            efficiency: RatioChange::new(None, None),
        }
    }
}

/// A site's figures in one log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SiteFigures {
    peak: u64,
    live: u64,
    live_count: u64,
    total: u64,
    total_count: u64,
}

impl SiteFigures {
    fn weight(&self) -> u64 {
        self.peak.max(self.live).max(self.total)
    }
}

/// One log's site row: the callstacks merged under one (domain, key).
#[derive(Debug, Clone)]
struct Row {
    keyed: KeyedSite,
    figures: SiteFigures,
    /// In a top-level domain (its bytes count in sums over domains).
    top_level: bool,
    /// Keyed by its whole stack (`--stacks`, or its allocating function unresolved).
    whole: bool,
    /// How it matches the other log, and why it is unnamed (see [`crate::unnamed`]).
    naming: Naming,
    why: Option<Why>,
}

impl Row {
    fn matchable(&self) -> bool {
        !matches!(self.naming, Naming::Unmatched(_))
    }
}

/// Loads one side: the replay with its modules and, with `--at LABEL`, the live
/// allocations at the label (for the sites).
fn load_side(path: &std::path::Path, args: &DiffOptions, progress: Progress) -> Result<Observed, Error> {
    let report_args = ReportOptions { at: args.at.clone(), ..ReportOptions::new(path) };
    let wanted: Vec<Wanted> = args.at.iter().map(|at| Wanted { at: at.clone(), after: None }).collect();
    observed::load(&report_args, progress, &wanted)
}

/// The diff of `args.before` and `after`.
pub fn build(args: &DiffOptions, after: &std::path::Path, progress: Progress) -> Result<Diff, Error> {
    crate::callstacks::check_symbol_dirs(&args.symbols)?;
    let a = load_side(&args.before, args, progress)?;
    let b = load_side(after, args, progress)?;
    let fa = LogFigures::new(a.loaded.state(), &a.loaded.sel);
    let fb = LogFigures::new(b.loaded.state(), &b.loaded.sel);
    if let Some(name) = &args.domain {
        if fa.domain(name).is_none() && fb.domain(name).is_none() {
            let mut names: Vec<String> =
                fa.domains.iter().chain(&fb.domains).map(|d| format!("\"{}\"", d.name)).collect();
            names.dedup();
            return Err(Error::Usage(format!("no domain \"{name}\" in either log; domains: {}", names.join(", "))));
        }
    }
    let wanted_domain = |name: &str| args.domain.as_deref().is_none_or(|d| d == name);

    // Domains by name, in the order of the log before, then the new ones.
    let mut domain_names: Vec<String> = Vec::new();
    for d in fa.domains.iter().chain(&fb.domains) {
        if wanted_domain(&d.name) && !domain_names.contains(&d.name) {
            domain_names.push(d.name.clone());
        }
    }
    let mut domains = Vec::new();
    let mut contexts: Vec<ContextDiff> = Vec::new();
    let mut unchanged_contexts = 0u64;
    for name in &domain_names {
        let (da, db) = (fa.domain(name), fb.domain(name));
        // Instances belong to contexts, not domains.
        let whole = |f: &LogFigures, d: &DomainMetrics| Metrics { instances: 0, ..f.metrics(d, ROOT) };
        let ma = da.map(|d| whole(&fa, d)).filter(|m| !m.is_empty());
        let mb = db.map(|d| whole(&fb, d)).filter(|m| !m.is_empty());
        if ma.is_none() && mb.is_none() {
            continue;
        }
        let figures = FigureChanges::new(Some(&ma.unwrap_or_default()), Some(&mb.unwrap_or_default()));
        domains.push(DomainDiff {
            domain: name.clone(),
            status: status(ma.is_some(), mb.is_some(), &figures),
            figures,
        });

        // Contexts by path: (before, after).
        let mut by_path: BTreeMap<LevelPath, (Option<Metrics>, Option<Metrics>)> = BTreeMap::new();
        for (figs, d, side) in [(&fa, da, 0), (&fb, db, 1)] {
            let Some(d) = d else { continue };
            for node in 1..figs.state.nodes.len() {
                let m = figs.metrics(d, node as u32);
                if m.is_empty() {
                    continue;
                }
                let e = by_path.entry(figs.paths[node].clone()).or_default();
                // The tree is keyed by (parent, type, name): a path is one node.
                if side == 0 {
                    e.0 = Some(m);
                } else {
                    e.1 = Some(m);
                }
            }
        }
        for (path, (before, after)) in by_path {
            let figures = FigureChanges::new(before.as_ref(), after.as_ref());
            let status = status(before.is_some(), after.is_some(), &figures);
            if status == Status::Unchanged {
                unchanged_contexts += 1;
                continue;
            }
            contexts.push(ContextDiff { domain: name.clone(), context: path_text(&path), status, figures });
        }
    }
    contexts.sort_by(|x, y| {
        y.figures
            .magnitude()
            .cmp(&x.figures.magnitude())
            .then_with(|| x.domain.cmp(&y.domain))
            .then_with(|| x.context.cmp(&y.context))
    });
    let changed_contexts = contexts.len() as u64;
    contexts.retain(|c| keep(args.min_delta, &c.figures));
    if let Some(n) = args.row_limit() {
        contexts.truncate(n);
    }

    // Allocation sites by (domain, key), each log symbolicated on its own.
    let mut syms_a = symbolizer(&a.loaded, &args.symbols)?;
    let mut syms_b = symbolizer(&b.loaded, &args.symbols)?;
    let (mut sa, raw_a) = site_figures(&a, args, &mut syms_a)?;
    let (mut sb, raw_b) = site_figures(&b, args, &mut syms_b)?;
    name_rows(&mut sa, &syms_a, &syms_b);
    name_rows(&mut sb, &syms_b, &syms_a);
    let (pairs, sites_unnamed) = match_rows([&sa, &sb], [&syms_a, &syms_b], &wanted_domain, args.domain.is_some());
    let mut sites = Vec::new();
    let mut unchanged_sites = 0u64;
    for (key, before, after) in pairs {
        let c = |f: fn(&SiteFigures) -> u64| Change::new(before.map(|s| f(&s.figures)), after.map(|s| f(&s.figures)));
        let figures = SiteChanges {
            peak: c(|s| s.peak),
            live: c(|s| s.live),
            live_count: c(|s| s.live_count),
            total: c(|s| s.total),
            total_count: c(|s| s.total_count),
        };
        let status = status(before.is_some(), after.is_some(), &figures.as_figures());
        if status == Status::Unchanged {
            unchanged_sites += 1;
            continue;
        }
        let shown = after.or(before).map(|s| &s.keyed).expect("a key of either log");
        let mut lines: Vec<(String, u32)> =
            before.iter().chain(after.iter()).flat_map(|s| s.keyed.lines.clone()).collect();
        lines.sort();
        lines.dedup();
        let site = &shown.site;
        sites.push(SiteDiff {
            domain: key.0.clone(),
            key: key.1.clone(),
            function: site.function.clone(),
            file: site.file.clone(),
            line: site.line,
            lines: lines.into_iter().map(|(file, line)| SourceLine { file, line }).collect(),
            unresolved: shown.unresolved,
            stacks_before: before.map_or_else(Vec::new, |s| s.keyed.stacks.clone()),
            stacks_after: after.map_or_else(Vec::new, |s| s.keyed.stacks.clone()),
            frames: site.frames.clone(),
            status,
            figures,
        });
    }
    sites.sort_by(|x, y| {
        y.figures
            .magnitude()
            .cmp(&x.figures.magnitude())
            .then_with(|| x.domain.cmp(&y.domain))
            .then_with(|| x.key.cmp(&y.key))
    });
    let changed_sites = sites.len() as u64;
    sites.retain(|s| keep(args.min_delta, &s.figures.as_figures()));
    if let Some(n) = args.row_limit() {
        sites.truncate(n);
    }

    let changed = domains.iter().any(|d| d.status != Status::Unchanged) || changed_contexts > 0 || changed_sites > 0;
    Ok(Diff {
        schema_version: SCHEMA_VERSION,
        report: "diff",
        before: side(&a),
        after: side(&b),
        domain: args.domain.clone(),
        min_delta: MinDeltaInfo {
            bytes: match args.min_delta {
                Some(MinDelta::Bytes(b)) => Some(b),
                _ => None,
            },
            percent: match args.min_delta {
                Some(MinDelta::Percent(p)) => Some(p),
                _ => None,
            },
        },
        changed,
        domains,
        hidden_contexts: changed_contexts - contexts.len() as u64,
        contexts,
        unchanged_contexts,
        group: if args.stacks { "stack" } else { "function" },
        sites_keyed_by: keyed_by(args.stacks, &[("before", raw_a.0, raw_a.1), ("after", raw_b.0, raw_b.1)]),
        hidden_sites: changed_sites - sites.len() as u64,
        sites,
        unchanged_sites,
        sites_unnamed,
        symbols: BothSymbols { before: syms_a.stats(), after: syms_b.stats() },
    })
}

/// A log's site rows by (domain name, key).
type Rows = HashMap<(String, String), Row>;

/// A key and its rows in the log before and the log after.
type Pair<'a> = (&'a (String, String), Option<&'a Row>, Option<&'a Row>);

/// The rows of the two logs (`rows`, symbolicated by `syms`, each named by
/// [`name_rows`]) to compare, by key in order, in the `wanted` domains; and what to say
/// about the unnamed ones. A row is compared when both logs' rows can be matched, or when
/// one log has it, it can be matched and it may not be one of the other log's rows that
/// cannot (then it is new or vanished). Bytes are summed over the top-level domains, or,
/// `one_domain`, the one wanted.
fn match_rows<'a>(
    rows: [&'a Rows; 2],
    syms: [&Symbolizer; 2],
    wanted: &dyn Fn(&str) -> bool,
    one_domain: bool,
) -> (Vec<Pair<'a>>, BothUnnamed) {
    let [sa, sb] = rows;
    let covers = |rows: &'a Rows| {
        let mut out: HashMap<&str, Cover> = HashMap::new();
        for ((domain, _), row) in rows {
            if let (Naming::Unmatched(c), true) = (&row.naming, wanted(domain)) {
                out.entry(domain.as_str()).or_default().add(c);
            }
        }
        out
    };
    let cover = [covers(sa), covers(sb)];
    let mut tally = [Tally::default(), Tally::default()];
    let mut keys: Vec<&(String, String)> = sa.keys().chain(sb.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut pairs = Vec::new();
    for key in keys {
        if !wanted(&key.0) {
            continue;
        }
        let pair = [sa.get(key), sb.get(key)];
        let compared = match pair {
            [Some(x), Some(y)] => {
                // One that can be matched may be the other's that cannot.
                match (x.matchable(), y.matchable()) {
                    (true, false) => tally[1].other_left_out += 1,
                    (false, true) => tally[0].other_left_out += 1,
                    _ => {}
                }
                x.matchable() && y.matchable()
            }
            [Some(row), None] | [None, Some(row)] => {
                let (side, other) = if pair[0].is_some() { (0, 1) } else { (1, 0) };
                let site = &row.keyed.site;
                let may_be_other = cover[other]
                    .get(key.0.as_str())
                    .is_some_and(|c| !site.frames.is_empty() && c.covers(unnamed::allocating_module(site, syms[side])));
                if row.matchable() && may_be_other {
                    tally[other].other_left_out += 1;
                }
                row.matchable() && !may_be_other
            }
            [None, None] => false,
        };
        for (row, tally) in pair.into_iter().zip(&mut tally) {
            if let Some(r @ Row { why: Some(why), .. }) = row {
                let counted = one_domain || r.top_level;
                tally.add(*why, r.figures.total_count, r.figures.total, counted, compared);
            }
        }
        if compared {
            pairs.push((key, pair[0], pair[1]));
        }
    }
    let [ta, tb] = tally;
    (pairs, BothUnnamed { before: ta.finish(syms[0]), after: tb.finish(syms[1]) })
}

/// Says how each row of one log (symbolicated by `this`) matches the other log's.
fn name_rows(rows: &mut Rows, this: &Symbolizer, other: &Symbolizer) {
    for row in rows.values_mut() {
        (row.naming, row.why) = unnamed::naming(&row.keyed.site, row.whole, this, other);
    }
}

fn side(o: &Observed) -> Side {
    let l = &o.loaded;
    Side { path: l.path.clone(), at: l.sel.info(l.state(), l.ticks_per_second()).at, integrity: l.integrity() }
}

fn status(before: bool, after: bool, figures: &FigureChanges) -> Status {
    match (before, after) {
        (false, _) => Status::New,
        (_, false) => Status::Vanished,
        _ if figures.differs() => Status::Changed,
        _ => Status::Unchanged,
    }
}

/// Whether a changed row passes `--min-delta`.
fn keep(min: Option<MinDelta>, f: &FigureChanges) -> bool {
    match min {
        None => true,
        Some(MinDelta::Bytes(b)) => f.magnitude() >= b.max(1),
        Some(MinDelta::Percent(p)) => f.magnitude() > 0 && f.relative_percent() >= p,
    }
}

/// One log's sites keyed by (domain name, [`site_key`]), with their live figures at the
/// point of the selection (all named until [`name_rows`] says otherwise); and
/// (callstacks keyed by their raw frames, callstacks).
fn site_figures(o: &Observed, args: &DiffOptions, syms: &mut Symbolizer) -> Result<(Rows, (u64, u64)), Error> {
    let state = o.loaded.state();
    // With --at, what each (stack, domain) held there, from the kept live allocations.
    let at_point: Option<HashMap<(u32, u32), (u64, u64)>> = match &args.at {
        None => None,
        Some(at) => {
            let kept = match (at, o.loaded.sel.point.clone()) {
                (_, crate::select::Point::Label(i)) => o.at_label(i),
                (At::Frame(n), _) => o.at_frame(*n),
                _ => None,
            };
            let kept = kept.ok_or_else(|| Error::Usage(format!("{at} was not reached in {}", o.loaded.path)))?;
            let mut m: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
            for (&(_, slot, stack), &(bytes, count)) in kept {
                let e = m.entry((stack, state.slots[slot as usize].domain)).or_default();
                e.0 = e.0.wrapping_add(bytes);
                e.1 = e.1.wrapping_add(count);
            }
            Some(m)
        }
    };
    let mut out: Rows = HashMap::new();
    let mut stacks: HashMap<u32, bool> = HashMap::new();
    for (i, site) in state.sites.iter().enumerate() {
        let name = syms.site(site.stack, state.stacks.get(site.stack));
        let (key, unresolved) = site_key(&name, args.stacks);
        if site.stack != 0 {
            stacks.insert(site.stack, unresolved);
        }
        let (live, live_count) = match &at_point {
            None => (site.now.live_bytes, site.now.live_count),
            Some(m) => m.get(&(site.stack, site.domain)).copied().unwrap_or_default(),
        };
        let f = SiteFigures {
            peak: state.site_held_at_peak(i).bytes,
            live,
            live_count,
            total: site.now.total_bytes,
            total_count: site.now.total_count,
        };
        let row = out.entry((state.domain_name(site.domain), key)).or_insert_with(|| Row {
            keyed: KeyedSite::new(name.clone(), unresolved),
            figures: SiteFigures::default(),
            top_level: state.is_top_level_domain(site.domain),
            whole: args.stacks || unresolved,
            naming: Naming::Named,
            why: None,
        });
        row.keyed.add(&name, f.weight());
        let e = &mut row.figures;
        e.peak = e.peak.wrapping_add(f.peak);
        e.live = e.live.wrapping_add(f.live);
        e.live_count = e.live_count.wrapping_add(f.live_count);
        e.total = e.total.wrapping_add(f.total);
        e.total_count = e.total_count.wrapping_add(f.total_count);
    }
    let raw = (stacks.values().filter(|&&u| u).count() as u64, stacks.len() as u64);
    Ok((out, raw))
}

/// A relative change: `+12.5%`, `-3.0%`, `new` (from nothing), `-` (no change).
pub fn relative_text(c: &Change) -> String {
    match c.relative {
        Some(r) => format!("{:+.1}%", r * 100.0),
        None if c.change != 0 => "new".into(),
        None => "-".into(),
    }
}

fn opt_bytes(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), size)
}

fn opt_count(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |n| n.to_string())
}

/// Rows of one item (a domain, a context, a site) in a change table: one per figure
/// that changed, the first carrying the item's name and status.
fn figure_rows(
    t: &mut Table,
    lead: &[String],
    status: Status,
    exact: &[(&str, &Change, bool)],
    ratios: &[(&str, &RatioChange, bool)],
) {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (name, c, bytes) in exact {
        if c.change == 0 && (c.before == c.after || (c.before.unwrap_or(0) == 0 && c.after.unwrap_or(0) == 0)) {
            continue;
        }
        let (b, a, d) = if *bytes {
            (opt_bytes(c.before), opt_bytes(c.after), signed_size(c.change))
        } else {
            (opt_count(c.before), opt_count(c.after), signed_count(c.change))
        };
        rows.push(vec![(*name).into(), b, a, d, relative_text(c)]);
    }
    for (name, r, bytes) in ratios {
        if !r.differs() {
            continue;
        }
        let fmt = |v: Option<f64>| match v {
            None => "-".into(),
            Some(v) if *bytes => crate::table::size_f(v),
            Some(v) => crate::table::percent(Some(v)),
        };
        let change = match r.change {
            None => "-".into(),
            Some(c) if *bytes => format!("{}{}", if c < 0.0 { "-" } else { "+" }, crate::table::size_f(c.abs())),
            Some(c) => format!("{:+.1} pts", c * 100.0),
        };
        let rel = r.relative.map_or_else(|| "-".into(), |x| format!("{:+.1}%", x * 100.0));
        rows.push(vec![(*name).into(), fmt(r.before), fmt(r.after), change, rel]);
    }
    if rows.is_empty() {
        rows.push(Vec::new());
    }
    for (i, cells) in rows.into_iter().enumerate() {
        let mut row: Vec<String> = if i == 0 {
            let mut l = lead.to_vec();
            if let (Some(last), false) = (l.last_mut(), status.text().is_empty()) {
                *last = format!("{last} {}", status.text());
            }
            l
        } else {
            vec![String::new(); lead.len()]
        };
        row.extend(cells);
        t.row(row);
    }
}

fn ratios(f: &FigureChanges) -> [(&'static str, &RatioChange, bool); 2] {
    [("per instance", &f.per_instance, true), ("efficiency", &f.efficiency, false)]
}

const FIGURE_COLUMNS: [(&str, Align); 5] = [
    ("figure", Align::Left),
    ("before", Align::Right),
    ("after", Align::Right),
    ("change", Align::Right),
    ("relative", Align::Right),
];

fn point_words(p: &PointInfo) -> String {
    match (p.kind, &p.label, p.frame) {
        ("label", Some(l), _) => format!("at label \"{l}\""),
        ("frame", _, Some(f)) => format!("at the start of frame {f}"),
        _ => "at the end".into(),
    }
}

impl Diff {
    /// Site rows of the log before and of the log after left out of the comparison: their
    /// own unnamed ones, and those that may be the other log's.
    pub fn sites_left_out(&self) -> [u64; 2] {
        let (b, a) = (&self.sites_unnamed.before, &self.sites_unnamed.after);
        let own = |u: &Option<UnnamedSites>| u.as_ref().map_or(0, |u| u.left_out);
        let others = |u: &Option<UnnamedSites>| u.as_ref().map_or(0, |u| u.other_sites_left_out);
        [own(b) + others(a), own(a) + others(b)]
    }

    /// The report as text: the domains, then the contexts and sites that changed most.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "diff: {} -> {} ({}; peak at each domain's peak, allocated over the whole recording)",
            self.before.path,
            self.after.path,
            point_words(&self.before.at).replacen("at ", "live at ", 1)
        );
        for (which, side) in [("before", &self.before), ("after", &self.after)] {
            if let Some(line) = side.integrity.damaged_line(which) {
                let _ = writeln!(o, "{line}");
            }
        }
        match self.min_delta {
            MinDeltaInfo { bytes: Some(b), .. } => {
                let _ = writeln!(o, "  rows changed by less than {} hidden", size(b));
            }
            MinDeltaInfo { percent: Some(p), .. } => {
                let _ = writeln!(o, "  rows changed by less than {p}% hidden");
            }
            _ => {}
        }
        let by_stack = self.group == "stack";
        for (this, other, u) in
            [("before", "after", &self.sites_unnamed.before), ("after", "before", &self.sites_unnamed.after)]
        {
            if let Some(u) = u {
                let _ = write!(o, "\n{}", u.text(this, other, by_stack));
            }
        }
        if !self.changed {
            let line = match (self.sites_left_out(), self.unchanged_sites) {
                ([0, 0], _) => "no change: every domain, context and allocation site has the same figures",
                (_, 0) => "no change in the domains and contexts; no allocation site could be compared (see the note above)",
                _ => "no change: every domain, context and allocation site compared has the same figures (see the note above)",
            };
            let _ = writeln!(o, "\n{line}");
            let _ = writeln!(o, "  (allocation sites keyed by {})", self.sites_keyed_by);
            let _ = writeln!(o, "\nsymbols before: {}", self.symbols.before.text());
            let _ = writeln!(o, "symbols after: {}", self.symbols.after.text());
            return o;
        }

        let _ = writeln!(o, "\ndomains");
        let mut t = Table::new(&[&[("domain", Align::Left)][..], &FIGURE_COLUMNS[..]].concat());
        for d in &self.domains {
            figure_rows(&mut t, std::slice::from_ref(&d.domain), d.status, &d.figures.exact(), &ratios(&d.figures));
        }
        o.push_str(&t.render(2));

        let _ = writeln!(
            o,
            "\ncontexts (inclusive; largest change first; {} unchanged{})",
            self.unchanged_contexts,
            if self.hidden_contexts > 0 {
                format!(", {} more changed not shown", self.hidden_contexts)
            } else {
                String::new()
            }
        );
        if self.contexts.is_empty() {
            let _ = writeln!(o, "  none changed");
        } else {
            let mut t =
                Table::new(&[&[("domain", Align::Left), ("context", Align::Left)][..], &FIGURE_COLUMNS[..]].concat());
            for c in &self.contexts {
                figure_rows(
                    &mut t,
                    &[c.domain.clone(), c.context.clone()],
                    c.status,
                    &c.figures.exact(),
                    &ratios(&c.figures),
                );
            }
            o.push_str(&t.render(2));
        }

        let left_out = match self.sites_left_out() {
            [0, 0] => String::new(),
            [b, a] => format!("; not compared: {b} of the log before, {a} of the log after, see the note above"),
        };
        let _ = writeln!(
            o,
            "\nallocation sites (keyed by {}; {} unchanged{}{left_out})",
            self.sites_keyed_by,
            self.unchanged_sites,
            if self.hidden_sites > 0 {
                format!(", {} more changed not shown", self.hidden_sites)
            } else {
                String::new()
            }
        );
        if self.sites.is_empty() {
            let none = if self.unchanged_sites == 0 && self.sites_left_out() != [0, 0] {
                "none compared"
            } else {
                "none changed"
            };
            let _ = writeln!(o, "  {none}");
        }
        for s in &self.sites {
            let _ = writeln!(o, "  {}", format!("{}: {} {}", s.domain, s.title(), s.status.text()).trim_end());
            if self.group == "stack" || s.unresolved {
                for f in s.frames.iter().take(TEXT_FRAMES) {
                    let mark = if f.inlined { " (inlined)" } else { "" };
                    let _ = writeln!(o, "      {}{mark}", f.text());
                }
                if s.frames.len() > TEXT_FRAMES {
                    let _ = writeln!(o, "      … {} more frames", s.frames.len() - TEXT_FRAMES);
                }
            }
            let mut t = Table::new(&FIGURE_COLUMNS);
            figure_rows(&mut t, &[], Status::Changed, &s.figures.rows(), &[]);
            o.push_str(&t.render(4));
        }
        let _ = writeln!(o, "\nsymbols before: {}", self.symbols.before.text());
        let _ = writeln!(o, "symbols after: {}", self.symbols.after.text());
        o
    }
}

impl SiteDiff {
    /// `function  game.rs:12,40` (its lines), or the raw frames when unresolved.
    fn title(&self) -> String {
        if self.unresolved {
            return "(allocating function unresolved: raw callstack)".into();
        }
        let mut t = self.function.clone();
        if !self.lines.is_empty() {
            let lines: Vec<(String, u32)> = self.lines.iter().map(|l| (l.file.clone(), l.line)).collect();
            let _ = write!(t, "  {}", lines_text(&lines));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use memreplay_symbols::{Resolution, SiteName};

    use super::*;
    use crate::matching::parse_min_delta;
    use crate::unnamed::UnnamedReason;

    #[test]
    fn min_delta_parses() {
        assert_eq!(parse_min_delta("64KiB"), Ok(MinDelta::Bytes(65536)));
        assert_eq!(parse_min_delta("5%"), Ok(MinDelta::Percent(5.0)));
        assert_eq!(parse_min_delta("0.5 %"), Ok(MinDelta::Percent(0.5)));
        assert!(parse_min_delta("-3%").is_err());
        assert!(parse_min_delta("lots").is_err());
    }

    #[test]
    fn changes() {
        let c = Change::new(Some(100), Some(150));
        assert_eq!((c.change, c.relative), (50, Some(0.5)));
        assert_eq!(relative_text(&c), "+50.0%");
        let c = Change::new(None, Some(10));
        assert_eq!((c.change, c.relative), (10, None));
        assert_eq!(relative_text(&c), "new");
        let c = Change::new(Some(10), None);
        assert_eq!((c.change, c.relative), (-10, Some(-1.0)));
        assert_eq!(signed_size(-2048), "-2.0 KiB");
        assert_eq!(signed_size(0), "0 B");
        assert_eq!(signed_count(3), "+3");
        let r = RatioChange::new(Some(0.5), Some(0.25));
        assert_eq!((r.change, r.relative), (Some(-0.25), Some(-0.5)));
        assert_eq!(RatioChange::new(None, Some(1.0)).change, None);
    }

    /// The partial case: the log before was recorded with another libc, which it cannot
    /// name; its game is named. Only the site allocating in libc is left out (with the
    /// log after's site it may be); the game's sites compare, new and vanished included.
    #[test]
    fn only_the_sites_that_may_be_unnamed_ones_are_left_out() {
        use memreplay_symbols::{Module, ModuleMap, SymbolOptions};
        const GAME: u64 = 0x10_0000;
        const LIBC: u64 = 0x70_0000;
        let module = |base, path: &str, id| Module {
            base,
            size: 0x1_0000,
            load_bias: base,
            path: path.into(),
            build_id: vec![id; 20],
        };
        let symbolizer = |libc_id| {
            let modules = vec![module(GAME, "/nowhere/game", 1), module(LIBC, "/nowhere/libc.so.6", libc_id)];
            Symbolizer::new(ModuleMap::new(modules), SymbolOptions { system_debug_dir: false, ..Default::default() })
        };
        let (mut syms_a, syms_b) = (symbolizer(9), symbolizer(8));
        let named = |address, function: &str| Frame {
            address,
            module: None,
            offset: 0,
            function: Some(function.into()),
            file: None,
            line: None,
            inlined: false,
            resolution: Resolution::Symbol,
            reason: Some(memreplay_symbols::Reason::NoDebugInfo),
        };
        let row = |frames: Vec<Frame>, total: u64| {
            let site = SiteName {
                stack: 1,
                function: String::new(),
                file: None,
                line: None,
                frames,
                trimmed: 0,
                site_frame: 0,
            };
            let site = Arc::new(SiteName {
                function: site.frames.first().map_or("(no callstack)".into(), Frame::name),
                ..site
            });
            let (key, unresolved) = site_key(&site, false);
            let mut keyed = KeyedSite::new(site.clone(), unresolved);
            keyed.add(&site, total);
            let figures = SiteFigures { total, total_count: 1, ..SiteFigures::default() };
            let row = Row { keyed, figures, top_level: true, whole: unresolved, naming: Naming::Named, why: None };
            (("heap".to_owned(), key), row)
        };
        let libc_raw = syms_a.resolve(LIBC + 0x30)[0].clone();
        let mut sa: Rows = [
            row(vec![named(GAME + 0x10, "game::load")], 100),
            row(vec![named(GAME + 0x20, "game::old")], 50),
            row(vec![libc_raw], 64),
        ]
        .into_iter()
        .collect();
        let mut sb: Rows = [
            row(vec![named(GAME + 0x10, "game::load")], 120),
            row(vec![named(GAME + 0x40, "game::new")], 30),
            row(vec![named(LIBC + 0x30, "start_thread")], 64),
            row(Vec::new(), 8),
        ]
        .into_iter()
        .collect();
        name_rows(&mut sa, &syms_a, &syms_b);
        name_rows(&mut sb, &syms_b, &syms_a);
        let (pairs, unnamed) = match_rows([&sa, &sb], [&syms_a, &syms_b], &|_| true, false);
        let compared: Vec<(&str, bool, bool)> =
            pairs.iter().map(|(k, b, a)| (k.1.as_str(), b.is_some(), a.is_some())).collect();
        assert_eq!(
            compared,
            [
                ("(no callstack)", false, true),
                ("game::load", true, true),
                ("game::new", false, true),
                ("game::old", true, false)
            ]
        );
        assert_eq!(unnamed.after, None);
        let before = unnamed.before.expect("libc's site is unnamed");
        assert_eq!(
            before,
            UnnamedSites {
                sites: 1,
                allocations: 1,
                bytes: 64,
                reasons: vec![UnnamedReason {
                    reason: memreplay_symbols::Reason::BinaryNotFound,
                    module: Some("/nowhere/libc.so.6".into()),
                    build_id: Some("09".repeat(20)),
                    sites: 1,
                    bytes: 64,
                }],
                compared: 0,
                left_out: 1,
                other_sites_left_out: 1,
            }
        );
        assert_eq!(
            before.text("before", "after", false),
            format!(
                "note: the log before cannot name 1 of its allocation sites (64 B allocated): their allocating \
                 function is unresolved\n  libc.so.6: binary not found (build id {id}, recorded as \
                 /nowhere/libc.so.6): 1 site, 64 B\n  left out of the allocation sites below, and so is 1 site \
                 of the log after that may be among them\n  to name them: --symbols DIR, with the binary of the \
                 build that was recorded, or its debug file, in DIR (by build id: DIR/.build-id/09/{rest}.debug)\n",
                id = "09".repeat(20),
                rest = "09".repeat(19)
            )
        );
    }

    #[test]
    fn min_delta_filters_by_the_largest_change() {
        let m = |peak, live| Metrics { peak, live, total: peak, ..Metrics::default() };
        let f = FigureChanges::new(Some(&m(1000, 10)), Some(&m(1100, 10)));
        assert_eq!(f.magnitude(), 100);
        assert!(keep(Some(MinDelta::Bytes(100)), &f));
        assert!(!keep(Some(MinDelta::Bytes(101)), &f));
        assert!(keep(Some(MinDelta::Percent(10.0)), &f));
        assert!(!keep(Some(MinDelta::Percent(10.1)), &f));
        let new = FigureChanges::new(None, Some(&m(1, 1)));
        assert!(keep(Some(MinDelta::Percent(1000.0)), &new), "new rows grow from nothing");
    }
}
