//! `frees`: where an allocation site's memory was freed from (MemReplay's free-callstack
//! view, `REPLAY_RECORD_FREECS`), symbolicated: for the site given by callstack id or
//! allocating function, its frees by freeing function (or by whole free callstack with
//! `--stacks`).

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::Error;
use memreplay_symbols::{Frame, SymbolOptions, SymbolStats};

use crate::callstacks::{group_sites, lines_text, symbolizer};
use crate::select::{ReportOptions, SelectionInfo};
use crate::sites::SiteFigures;
use crate::table::{plural, size, Align, Table};
use crate::top::SourceLine;
use crate::{domain_ref, Amount, DomainRef, Loaded, SCHEMA_VERSION};

/// Free sites listed per allocation site unless `--limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 20;
const TEXT_FRAMES: usize = 12;

/// `replay-cli frees` options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FreesOptions {
    /// The log to read.
    pub log: PathBuf,
    /// The allocation site: a callstack id (as `top --json` and `leaks` list them), or an
    /// allocating function (its full name, or a part of it).
    pub site: String,
    /// One row per whole free callstack instead of per freeing function.
    pub stacks: bool,
    /// Only this memory domain (name or id).
    pub domain: Option<String>,
    /// Free sites listed per allocation site (default 20; 0: no limit).
    pub limit: Option<usize>,
    /// Machine-readable JSON output (see JSON.md).
    pub json: bool,
    /// Where to find binaries and debug info.
    pub symbols: SymbolOptions,
}

impl FreesOptions {
    /// The shared report options these map to.
    pub fn report_options(&self) -> ReportOptions {
        ReportOptions {
            log: self.log.clone(),
            domain: self.domain.clone(),
            json: self.json,
            limit: self.limit,
            ..ReportOptions::default()
        }
    }
}

/// The `frees` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Frees {
    /// The JSON schema version (`JSON.md`).
    pub schema_version: u32,
    /// `"frees"`.
    pub report: &'static str,
    /// The log, as given.
    pub path: String,
    /// The options, resolved.
    pub selection: SelectionInfo,
    /// The site asked for, as given.
    pub site: String,
    /// `"function"` or `"stack"`: how free sites are grouped.
    pub group: &'static str,
    /// Whether the log recorded free callstacks (without them every free is "(no callstack)").
    pub free_callstacks: bool,
    /// Per domain with the site.
    pub domains: Vec<DomainFrees>,
    /// What symbolication found.
    pub symbols: SymbolStats,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainFrees {
    pub domain: DomainRef,
    pub sites: Vec<FreedSite>,
}

/// One allocating function (all its callstacks that matched) and where its blocks went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreedSite {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub stacks: Vec<u32>,
    pub total: Amount,
    pub live: Amount,
    /// Frees of its blocks (a realloc counts as one).
    pub freed: Amount,
    pub freed_from: Vec<FreeRow>,
    /// Free sites left out by `--limit`.
    pub hidden_free_sites: u64,
}

/// Frees from one freeing function (or free callstack).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreeRow {
    /// The freeing function: the first frame outside the standard library, as for
    /// allocation sites; `(no callstack)` for frees recorded without one.
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub lines: Vec<SourceLine>,
    /// Free callstack ids (0: none).
    pub stacks: Vec<u32>,
    /// With `--stacks`: the free callstack's frames, innermost first, trimmed.
    pub frames: Vec<Frame>,
    pub frees: u64,
    pub bytes: u64,
}

/// The `frees` report of a replayed log: the site asked for, its free sites by function or by stack.
pub fn build(l: &Loaded, args: &FreesOptions) -> Result<Frees, Error> {
    let state = l.state();
    let sel = &l.sel;
    let mut syms = symbolizer(l, &args.symbols)?;
    let candidates: Vec<usize> =
        (0..state.sites.len()).filter(|&i| sel.domains.contains(&state.sites[i].domain)).collect();
    let matched: Vec<usize> = match args.site.trim().parse::<u32>() {
        Ok(id) => candidates.iter().copied().filter(|&i| state.sites[i].stack == id).collect(),
        Err(_) => {
            let want = args.site.trim();
            let exact: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| {
                    let site = syms.site(state.sites[i].stack, state.stacks.get(state.sites[i].stack));
                    site.function == want || site.function_key() == want
                })
                .collect();
            if exact.is_empty() {
                candidates
                    .iter()
                    .copied()
                    .filter(|&i| {
                        syms.site(state.sites[i].stack, state.stacks.get(state.sites[i].stack))
                            .function_key()
                            .contains(want)
                    })
                    .collect()
            } else {
                exact
            }
        }
    };
    if matched.is_empty() {
        return Err(Error::Usage(format!(
            "no allocation site \"{}\" in the log{}: give a callstack id or a function `replay-cli top` lists",
            args.site,
            args.domain.as_ref().map(|d| format!(" (domain {d})")).unwrap_or_default()
        )));
    }
    let limit = sel.limit_or(DEFAULT_LIMIT);
    let mut domains = Vec::new();
    for &d in &sel.domains {
        let here: Vec<usize> = matched.iter().copied().filter(|&i| state.sites[i].domain == d).collect();
        if here.is_empty() {
            continue;
        }
        // The allocation sites, by function.
        let figures = |i: usize| {
            let n = &state.sites[i].now;
            SiteFigures {
                live: Some(Amount::new(n.live_bytes, n.live_count)),
                total: Some(Amount::new(n.total_bytes, n.total_count)),
                ..SiteFigures::default()
            }
        };
        let rows = here.iter().map(|&i| (state.sites[i].stack, figures(i)));
        let mut groups = group_sites(l, &mut syms, rows, false, |f| f.total.map_or(0, |a| a.bytes));
        groups.sort_by_key(|g| std::cmp::Reverse(g.figures.total.unwrap_or_default().bytes));
        let mut sites = Vec::new();
        for g in groups {
            // Frees of every matched callstack of this function.
            let mut frees: Vec<(u32, SiteFigures)> = Vec::new();
            for &i in &here {
                if !g.stacks.contains(&state.sites[i].stack) {
                    continue;
                }
                for (free_stack, (n, bytes)) in state.sites[i].frees_by_stack() {
                    let f = SiteFigures { total: Some(Amount::new(bytes, n)), ..SiteFigures::default() };
                    frees.push((free_stack, f));
                }
            }
            let freed = frees.iter().fold(Amount::default(), |mut a, (_, f)| {
                let t = f.total.unwrap_or_default();
                a.bytes = a.bytes.wrapping_add(t.bytes);
                a.count = a.count.wrapping_add(t.count);
                a
            });
            let mut fg = group_sites(l, &mut syms, frees, args.stacks, |f| f.total.map_or(0, |a| a.count));
            fg.sort_by(|a, b| {
                let (x, y) = (a.figures.total.unwrap_or_default(), b.figures.total.unwrap_or_default());
                y.count.cmp(&x.count).then(y.bytes.cmp(&x.bytes)).then_with(|| a.key.cmp(&b.key))
            });
            let all = fg.len();
            fg.truncate(limit);
            let freed_from: Vec<FreeRow> = fg
                .into_iter()
                .map(|f| {
                    let t = f.figures.total.unwrap_or_default();
                    FreeRow {
                        function: f.site.function.clone(),
                        file: f.site.file.clone(),
                        line: f.site.line,
                        lines: f
                            .lines
                            .iter()
                            .map(|(file, line)| SourceLine { file: file.clone(), line: *line })
                            .collect(),
                        stacks: f.stacks,
                        frames: if args.stacks { f.site.frames.clone() } else { Vec::new() },
                        frees: t.count,
                        bytes: t.bytes,
                    }
                })
                .collect();
            sites.push(FreedSite {
                function: g.site.function.clone(),
                file: g.site.file.clone(),
                line: g.site.line,
                stacks: g.stacks,
                total: g.figures.total.unwrap_or_default(),
                live: g.figures.live.unwrap_or_default(),
                freed,
                hidden_free_sites: (all - freed_from.len()) as u64,
                freed_from,
            });
        }
        domains.push(DomainFrees { domain: domain_ref(state, d), sites });
    }
    let symbols = syms.stats();
    tracing::debug!("symbolication: {}", symbols.text());
    Ok(Frees {
        schema_version: SCHEMA_VERSION,
        report: "frees",
        path: l.path.clone(),
        selection: sel.info(state, l.ticks_per_second()),
        site: args.site.clone(),
        group: if args.stacks { "stack" } else { "function" },
        free_callstacks: l.replay.header.has(memreplay_format::header_flags::CALLSTACKS_ON_FREE),
        domains,
        symbols,
    })
}

impl Frees {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{}: where the blocks of \"{}\" were freed", self.path, self.site);
        if !self.free_callstacks {
            let _ = writeln!(o, "  the log has no free callstacks (record with free-callstacks=on)");
        }
        for d in &self.domains {
            for s in &d.sites {
                let mut name = s.function.clone();
                if let (Some(f), Some(n)) = (&s.file, s.line) {
                    let _ = write!(name, "  {}", lines_text(&[(f.clone(), n)]));
                }
                let _ = writeln!(o, "\n{}: {name}", d.domain.title());
                let _ = writeln!(
                    o,
                    "  allocated {}, freed {} ({}), live at the end {}; {}",
                    s.total.text(),
                    size(s.freed.bytes),
                    plural(s.freed.count, "free"),
                    s.live.text(),
                    plural(s.stacks.len() as u64, "callstack")
                );
                let mut t = Table::new(&[
                    ("frees", Align::Right),
                    ("bytes", Align::Right),
                    (if self.group == "stack" { "freed from (callstack)" } else { "freed from" }, Align::Left),
                ]);
                for f in &s.freed_from {
                    let mut name = f.function.clone();
                    if !f.lines.is_empty() {
                        let lines: Vec<(String, u32)> = f.lines.iter().map(|l| (l.file.clone(), l.line)).collect();
                        let _ = write!(name, "  {}", lines_text(&lines));
                    }
                    t.row(vec![f.frees.to_string(), size(f.bytes), name]);
                    for fr in f.frames.iter().take(TEXT_FRAMES) {
                        let mark = if fr.inlined { " (inlined)" } else { "" };
                        t.row(vec![String::new(), String::new(), format!("  {}{mark}", fr.text())]);
                    }
                }
                if s.hidden_free_sites > 0 {
                    t.row(vec![String::new(), String::new(), format!("… {} more", s.hidden_free_sites)]);
                }
                o.push_str(&t.render(2));
            }
        }
        let _ = writeln!(o, "\nsymbols: {}", self.symbols.text());
        o
    }
}
