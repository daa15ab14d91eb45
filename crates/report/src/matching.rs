//! What `diff`, its `--from/--to` mode (`range.rs`) and `check` share: the options of
//! `diff`, how an allocation site is keyed alike in two logs (or two points of one), and
//! changes written with their sign. Below all three, so that none imports another.

use std::path::PathBuf;
use std::sync::Arc;

use memreplay_symbols::{Resolution, SiteName, SymbolOptions};

use crate::select::At;
use crate::table::size;

/// Rows per list unless `--limit` says otherwise (`--limit 0`: every row).
pub const DEFAULT_LIMIT: usize = 25;

/// Rows whose change is smaller than this are hidden (`--min-delta`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MinDelta {
    /// Bytes (the largest change of peak, live and allocated).
    Bytes(u64),
    /// Percent (the largest relative change of those; new and vanished rows always pass).
    Percent(f64),
}

/// Parses `--min-delta`: a size (`4096`, `64KiB`) or a percentage (`5%`).
pub fn parse_min_delta(s: &str) -> Result<MinDelta, String> {
    match s.trim().strip_suffix('%') {
        Some(p) => match p.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(MinDelta::Percent(v)),
            _ => Err(format!("`{s}` is not a percentage (5%, 0.5%)")),
        },
        None => crate::select::parse_bytes(s).map(MinDelta::Bytes),
    }
}

/// The command line of `diff`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiffOptions {
    /// The log before (with --from/--to, the only log).
    pub before: PathBuf,
    /// The log after.
    pub after: Option<PathBuf>,
    /// Compare both logs at this label (or frame:N) instead of at their ends.
    pub at: Option<At>,
    /// One log: what was allocated after this label and is still live at --to.
    pub from: Option<String>,
    /// One log: the label where what --from allocated is looked at.
    pub to: Option<String>,
    /// Hide rows whose change is smaller than this: bytes (64KiB) or percent (5%).
    pub min_delta: Option<MinDelta>,
    /// Only this memory domain (by name).
    pub domain: Option<String>,
    /// Rows per list (default 25; 0: no limit).
    pub limit: Option<usize>,
    /// Match allocation sites by whole symbolicated callstack instead of by allocating
    /// function.
    pub stacks: bool,
    /// Machine-readable JSON output (exact integers; see JSON.md).
    pub json: bool,
    /// Where to find binaries and debug info.
    pub symbols: SymbolOptions,
}

impl DiffOptions {
    /// Rows per list: `None` for every row.
    pub fn row_limit(&self) -> Option<usize> {
        match self.limit {
            None => Some(DEFAULT_LIMIT),
            Some(0) => None,
            Some(n) => Some(n),
        }
    }
}

/// The key a site is matched by across logs, and whether it is the raw callstack: the
/// allocating function's key ([`SiteName::function_key`]) or, `by_stack`, the whole
/// stack's ([`SiteName::stack_key`]). A site whose allocating function is unresolved is
/// keyed by its whole stack in either case: its frames as `module+0xoffset` (alone, the
/// innermost unresolved frame would merge every site of the module, recorder frames not
/// being trimmed without symbols).
pub fn site_key(site: &SiteName, by_stack: bool) -> (String, bool) {
    let unresolved = site_unresolved(site);
    if by_stack || unresolved {
        (site.stack_key(), unresolved)
    } else {
        (site.function_key(), false)
    }
}

/// Whether a site's allocating function is unresolved (`module+0xoffset`).
pub fn site_unresolved(site: &SiteName) -> bool {
    site.frames.get(site.site_frame as usize).is_some_and(|f| f.resolution == Resolution::None)
}

/// Sites of one log merged under one key.
#[derive(Debug, Clone)]
pub(crate) struct KeyedSite {
    /// The site with the most of the figures.
    pub site: Arc<SiteName>,
    pub unresolved: bool,
    /// Callstack ids, ascending.
    pub stacks: Vec<u32>,
    /// Distinct (file, line) of the merged sites, sorted.
    pub lines: Vec<(String, u32)>,
    best: u64,
}

impl KeyedSite {
    pub(crate) fn new(site: Arc<SiteName>, unresolved: bool) -> KeyedSite {
        KeyedSite { site, unresolved, stacks: Vec::new(), lines: Vec::new(), best: 0 }
    }

    /// Merges one more callstack's site, of `weight`.
    pub(crate) fn add(&mut self, site: &Arc<SiteName>, weight: u64) {
        if let Err(i) = self.stacks.binary_search(&site.stack) {
            self.stacks.insert(i, site.stack);
        }
        if let (Some(f), Some(n)) = (&site.file, site.line) {
            if let Err(i) = self.lines.binary_search_by(|(gf, gn)| (gf.as_str(), *gn).cmp(&(f.as_str(), n))) {
                self.lines.insert(i, (f.clone(), n));
            }
        }
        if weight > self.best || self.best == 0 {
            self.best = weight;
            self.site = site.clone();
        }
    }
}

/// How sites were keyed, in words: by function or stack, and how many callstacks of
/// each log (`(log, raw, callstacks)`; the log's name may be empty) fell back to their
/// raw `module+0xoffset` frames.
pub fn keyed_by(by_stack: bool, logs: &[(&str, u64, u64)]) -> String {
    let raw: u64 = logs.iter().map(|l| l.1).fold(0, u64::wrapping_add);
    if raw > 0 && logs.iter().all(|l| l.1 == l.2) {
        return "callstack frames as module+0xoffset (no symbols for the allocating functions: raw return \
                addresses relative to their module, which match across runs of one build only)"
            .into();
    }
    let base = if by_stack {
        "whole callstack, symbolicated (every frame's function, file and line)"
    } else {
        "allocating function (the figures of its callstacks summed)"
    };
    if raw == 0 {
        return base.into();
    }
    let counts: Vec<String> = logs
        .iter()
        .map(|(log, raw, n)| format!("{log}{}{raw} of {n} callstacks", if log.is_empty() { "" } else { ": " }))
        .collect();
    format!(
        "{base}; callstacks whose allocating function is unresolved by their frames as module+0xoffset ({})",
        counts.join(", ")
    )
}

/// A signed byte change, human-readable: `+1.5 MiB`, `-512 B`, `0 B`.
pub fn signed_size(change: i64) -> String {
    match change {
        0 => "0 B".into(),
        c if c > 0 => format!("+{}", size(c.unsigned_abs())),
        c => format!("-{}", size(c.unsigned_abs())),
    }
}

/// A signed count change: `+3`, `-1`, `0`.
pub fn signed_count(change: i64) -> String {
    if change > 0 {
        format!("+{change}")
    } else {
        change.to_string()
    }
}
