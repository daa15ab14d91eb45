//! `top`: allocation sites, symbolicated, by allocating function (or by whole callstack
//! with `--stacks`), ranked by bytes at the peak, live, allocated in all, allocation
//! count or temporaries.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::Error;
use memreplay_symbols::{Frame, SymbolOptions, SymbolStats, Symbolizer};

use crate::callstacks::{group_sites, lines_text, symbolizer};
use crate::select::{At, ReportOptions, SelectionInfo};
use crate::sites::{collect, context_mask, Metric, SiteFigures, SiteQuery};
use crate::table::{size, Align, Table};
use crate::{domain_ref, DomainRef, Loaded, SCHEMA_VERSION};

/// Rows per domain unless `--limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 20;
/// Frames printed per stack with `--stacks` (JSON has them all).
const TEXT_FRAMES: usize = 12;

/// `replay-cli top` options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopOptions {
    /// The log to read.
    pub log: PathBuf,
    /// Rank by: bytes at the domain's peak, live at the end (or --at), allocated in all,
    /// allocation count, or temporaries.
    pub by: Metric,
    /// One row per whole callstack instead of per allocating function.
    pub stacks: bool,
    /// Only this memory domain (name or id). Default: every domain, each on its own.
    pub domain: Option<String>,
    /// Only allocations made by this thread (--by peak or live).
    pub thread: Option<String>,
    /// Only allocations in this context and its descendants, by path
    /// ("Level:Forest/Textures:Forest"; --by peak or live).
    pub context: Option<String>,
    /// Read "live" at a label or the start of frame N instead of at the end.
    pub at: Option<At>,
    /// Hide rows with fewer bytes than this (of the ranking figure).
    pub min_bytes: u64,
    /// Rows per domain (default 20; 0: no limit).
    pub limit: Option<usize>,
    /// Machine-readable JSON output (see JSON.md).
    pub json: bool,
    /// Where to find binaries and debug info.
    pub symbols: SymbolOptions,
}

impl TopOptions {
    /// Default options for the log at `log`.
    pub fn new(log: impl Into<PathBuf>) -> TopOptions {
        TopOptions { log: log.into(), ..TopOptions::default() }
    }

    /// The shared report options these map to.
    pub fn report_options(&self) -> ReportOptions {
        ReportOptions {
            log: self.log.clone(),
            domain: self.domain.clone(),
            thread: self.thread.clone(),
            at: self.at.clone(),
            json: self.json,
            min_bytes: Some(self.min_bytes),
            limit: self.limit,
            ..ReportOptions::default()
        }
    }
}

/// The `top` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Top {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"top"`.
    pub report: &'static str,
    /// The log, as given.
    pub path: String,
    /// The options, resolved.
    pub selection: SelectionInfo,
    /// `--by`.
    pub by: Metric,
    /// `"function"` or `"stack"`.
    pub group: &'static str,
    /// `--context`, as given.
    pub context: Option<String>,
    /// Per domain, its top rows.
    pub domains: Vec<DomainTop>,
    /// What symbolication found.
    pub symbols: SymbolStats,
}

/// One domain's sites.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainTop {
    pub domain: DomainRef,
    pub rows: Vec<TopRow>,
    /// Rows left out by `--limit` or `--min-bytes`.
    pub hidden_rows: u64,
}

/// A source line a function allocated from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceLine {
    pub file: String,
    pub line: u32,
}

/// One allocating function (or callstack) and its figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopRow {
    /// What the row groups by: the allocating function's key (its name; a bare name with
    /// its file) or the whole stack's key. The same in two recordings of one program.
    pub key: String,
    /// The allocating function (`module+0xoffset` when unresolved).
    pub function: String,
    /// Where in it (of the callstack with most of the figure).
    pub file: Option<String>,
    /// The source line, if known.
    pub line: Option<u32>,
    /// Every line it allocated from.
    pub lines: Vec<SourceLine>,
    /// Callstack ids merged in this row.
    pub stacks: Vec<u32>,
    /// With `--stacks`: the callstack's frames, innermost first, trimmed.
    pub frames: Vec<Frame>,
    /// Figures; null where the filters make one unavailable (see JSON.md).
    pub peak: Option<crate::Amount>,
    /// Live at the point (`live` ranking, or always where it can be read).
    pub live: Option<crate::Amount>,
    /// Allocated over the whole recording.
    pub total: Option<crate::Amount>,
    /// Temporaries: freed before their thread allocated again.
    pub temporaries: Option<crate::Amount>,
}

/// Builds `top` on a replayed log.
pub fn build(l: &Loaded, args: &TopOptions) -> Result<Top, Error> {
    let mut syms = symbolizer(l, &args.symbols)?;
    build_with(l, args, &mut syms)
}

/// Builds `top` with a symbolizer of the caller's (`args.symbols` is not read): the HTML
/// report shares one across its lists, so each address is resolved once.
pub fn build_with(l: &Loaded, args: &TopOptions, syms: &mut Symbolizer) -> Result<Top, Error> {
    let state = l.state();
    let sel = &l.sel;
    let contexts = args.context.as_deref().map(|c| context_mask(state, c)).transpose()?;
    let q = SiteQuery { metric: args.by, by_context: false, contexts, live_at_point: true };
    let rows = collect(l, &q)?;
    let limit = sel.limit_or(DEFAULT_LIMIT);
    let mut domains = Vec::new();
    for &d in &sel.domains {
        let of_domain = rows.iter().filter(|r| r.domain == d).map(|r| (r.stack, r.figures));
        let mut groups = group_sites(l, syms, of_domain, args.stacks, |f| f.value(args.by));
        if groups.is_empty() {
            continue;
        }
        groups.sort_by(|a, b| rank(&b.figures, &a.figures, args.by).then_with(|| a.key.cmp(&b.key)));
        let all = groups.len();
        groups.retain(|g| g.figures.value(args.by) > 0 && g.figures.bytes(args.by) >= sel.min_bytes);
        groups.truncate(limit);
        let rows: Vec<TopRow> = groups
            .into_iter()
            .map(|g| TopRow {
                key: g.key,
                function: g.site.function.clone(),
                file: g.site.file.clone(),
                line: g.site.line,
                lines: g.lines.iter().map(|(file, line)| SourceLine { file: file.clone(), line: *line }).collect(),
                stacks: g.stacks,
                frames: if args.stacks { g.site.frames.clone() } else { Vec::new() },
                peak: g.figures.peak,
                live: g.figures.live,
                total: g.figures.total,
                temporaries: g.figures.temporaries,
            })
            .collect();
        domains.push(DomainTop { domain: domain_ref(state, d), hidden_rows: (all - rows.len()) as u64, rows });
    }
    let symbols = syms.stats();
    tracing::debug!("symbolication: {}", symbols.text());
    Ok(Top {
        schema_version: SCHEMA_VERSION,
        report: "top",
        path: l.path.clone(),
        selection: sel.info(state, l.ticks_per_second()),
        by: args.by,
        group: if args.stacks { "stack" } else { "function" },
        context: args.context.clone(),
        domains,
        symbols,
    })
}

/// Largest first by the metric, then by the other figures.
fn rank(a: &SiteFigures, b: &SiteFigures, by: Metric) -> std::cmp::Ordering {
    a.value(by)
        .cmp(&b.value(by))
        .then(a.value(Metric::Peak).cmp(&b.value(Metric::Peak)))
        .then(a.value(Metric::Live).cmp(&b.value(Metric::Live)))
        .then(a.value(Metric::Total).cmp(&b.value(Metric::Total)))
}

fn amount_bytes(a: Option<crate::Amount>) -> String {
    a.map_or_else(|| "-".into(), |a| size(a.bytes))
}

fn amount_count(a: Option<crate::Amount>) -> String {
    a.map_or_else(|| "-".into(), |a| a.count.to_string())
}

impl Top {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let what = if self.group == "stack" { "callstack" } else { "allocating function" };
        let _ = writeln!(o, "{}: allocation sites by {what}, ranked by {}", self.path, self.by.describe());
        if let Some(t) = &self.selection.thread {
            let _ = writeln!(o, "  only allocations made by thread {}", t.name.as_deref().unwrap_or("(unnamed)"));
        }
        if let Some(c) = &self.context {
            let _ = writeln!(o, "  only allocations in context {c} and below");
        }
        let at = &self.selection.at;
        match (at.kind, &at.label, at.frame) {
            ("label", Some(l), _) => {
                let _ = writeln!(o, "  \"live\" at label \"{l}\"");
            }
            ("frame", _, Some(f)) => {
                let _ = writeln!(o, "  \"live\" at the start of frame {f}");
            }
            _ => {}
        }
        if self.domains.is_empty() {
            let _ = writeln!(o, "\nno allocation sites");
        }
        for d in &self.domains {
            let _ = writeln!(o, "\n{}", d.domain.title());
            let mut t = Table::new(&[
                ("at peak", Align::Right),
                ("live", Align::Right),
                ("allocated", Align::Right),
                ("allocations", Align::Right),
                ("temporaries", Align::Right),
                (what, Align::Left),
            ]);
            for r in &d.rows {
                let mut name = r.function.clone();
                if !r.lines.is_empty() {
                    let lines: Vec<(String, u32)> = r.lines.iter().map(|l| (l.file.clone(), l.line)).collect();
                    let _ = write!(name, "  {}", lines_text(&lines));
                }
                t.row(vec![
                    amount_bytes(r.peak),
                    amount_bytes(r.live),
                    amount_bytes(r.total),
                    amount_count(r.total),
                    amount_count(r.temporaries),
                    name,
                ]);
                if self.group == "stack" {
                    for f in r.frames.iter().take(TEXT_FRAMES) {
                        let mark = if f.inlined { " (inlined)" } else { "" };
                        t.row(vec![String::new(); 5].into_iter().chain([format!("  {}{mark}", f.text())]).collect());
                    }
                    if r.frames.len() > TEXT_FRAMES {
                        let more = format!("  … {} more frames", r.frames.len() - TEXT_FRAMES);
                        t.row(vec![String::new(); 5].into_iter().chain([more]).collect());
                    }
                }
            }
            if d.hidden_rows > 0 {
                t.row(vec![String::new(); 5].into_iter().chain([format!("… {} more", d.hidden_rows)]).collect());
            }
            o.push_str(&t.render(2));
        }
        let _ = writeln!(o, "\nsymbols: {}", self.symbols.text());
        o
    }
}
