//! `flamegraph`: the allocation callstacks as a flame graph (an SVG drawn by `inferno`),
//! or as folded stacks (`--folded`: one `root;…;leaf value` line per stack, the input of
//! speedscope, inferno, flamegraph.pl and others), weighted by bytes at the peak, live or
//! allocated in all. With `--contexts`, each stack sits under its context path, so the
//! graph shows systems and assets above code.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::Error;
use memreplay_replay::ReplayState;
use memreplay_replay::{NodeId, ROOT};
use memreplay_symbols::{SymbolOptions, SymbolStats};

use crate::callstacks::symbolizer;
use crate::select::{At, ReportOptions};
use crate::sites::{collect, context_mask, Metric, SiteQuery};
use crate::Loaded;

/// `replay-cli flamegraph` options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlameOptions {
    /// The log to read.
    pub log: PathBuf,
    /// Weigh stacks by bytes at the domain's peak, live at the end (or --at), or
    /// allocated in all (also: count, temporaries: allocations).
    pub by: Metric,
    /// Folded stacks (text) instead of an SVG.
    pub folded: bool,
    /// Put each stack under its context path (Level:Forest;Textures:Forest;…) as root
    /// frames (--by peak or live).
    pub contexts: bool,
    /// Title of the SVG.
    pub title: Option<String>,
    /// Only this memory domain (name or id). Default: every top-level domain, each a root
    /// frame.
    pub domain: Option<String>,
    /// Only allocations made by this thread (--by peak or live).
    pub thread: Option<String>,
    /// Only allocations in this context and its descendants (--by peak or live).
    pub context: Option<String>,
    /// Read "live" at a label or the start of frame N instead of at the end.
    pub at: Option<At>,
    /// Where to find binaries and debug info.
    pub symbols: SymbolOptions,
}

impl FlameOptions {
    /// Default options for the log at `log`.
    pub fn new(log: impl Into<PathBuf>) -> FlameOptions {
        FlameOptions { log: log.into(), ..FlameOptions::default() }
    }

    /// The options given that this run would not read, one line each: `--title` names the
    /// SVG (not `--folded` text), and `--at` is where `--by live` is read (the other
    /// weights are at each domain's peak or over the whole recording).
    pub fn refusals(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.folded && self.title.is_some() {
            v.push("flamegraph --folded does not take --title: it writes text; --title names the SVG".to_owned());
        }
        if self.at.is_some() && self.by != Metric::Live {
            v.push(format!(
                "flamegraph --by {} does not take --at: --at is where --by live reads what is live",
                self.by.name()
            ));
        }
        v
    }

    /// The shared report options these map to.
    pub fn report_options(&self) -> ReportOptions {
        ReportOptions {
            log: self.log.clone(),
            domain: self.domain.clone(),
            thread: self.thread.clone(),
            at: self.at.clone(),
            ..ReportOptions::default()
        }
    }
}

/// Folded stacks and what symbolication found.
#[derive(Debug, Clone, PartialEq)]
pub struct Folded {
    /// `frame;frame;… value` lines, outermost frame first, sorted, one per distinct stack.
    pub lines: Vec<String>,
    /// The sum of the values.
    pub total: u64,
    /// What symbolication found.
    pub symbols: SymbolStats,
}

impl Folded {
    /// The lines, one per stack, newline-terminated.
    pub fn to_text(&self) -> String {
        let mut s = self.lines.join("\n");
        if !s.is_empty() {
            s.push('\n');
        }
        s
    }
}

/// A frame name as a folded-stack token: `;` separates frames and the last space the
/// count, so `;` becomes `,` and line breaks spaces.
fn token(name: &str) -> String {
    name.replace(';', ",").replace(['\n', '\r'], " ")
}

/// The context path of `node` as frames, outermost first (`Level:Forest`, …).
fn context_frames(state: &ReplayState, node: NodeId) -> Vec<String> {
    let mut v = Vec::new();
    let mut n = node;
    while n != ROOT {
        let (ty, name) = state.node_label(n);
        v.push(token(&format!("{ty}:{name}")));
        n = state.nodes[n as usize].parent;
    }
    if v.is_empty() {
        v.push("(no context)".into());
    }
    v.reverse();
    v
}

/// The folded stacks of the selected domains.
pub fn folded(l: &Loaded, args: &FlameOptions) -> Result<Folded, Error> {
    let state = l.state();
    let mut syms = symbolizer(l, &args.symbols)?;
    let contexts = args.context.as_deref().map(|c| context_mask(state, c)).transpose()?;
    let q = SiteQuery { metric: args.by, by_context: args.contexts, contexts, live_at_point: true };
    let rows = collect(l, &q)?;
    // Default: the top-level domains (a pool's blocks are inside a heap block already).
    let domains: Vec<u32> = if args.domain.is_some() {
        l.sel.domains.clone()
    } else {
        l.sel.domains.iter().copied().filter(|&d| state.is_top_level_domain(d)).collect()
    };
    let root_domain = domains.len() > 1;
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for r in rows.iter().filter(|r| domains.contains(&r.domain)) {
        let v = r.figures.value(args.by);
        if v == 0 {
            continue;
        }
        let site = syms.site(r.stack, state.stacks.get(r.stack));
        let mut frames: Vec<String> = Vec::new();
        if root_domain {
            frames.push(token(&format!("[{}]", state.domain_name(r.domain))));
        }
        if let Some(node) = r.node {
            frames.extend(context_frames(state, node));
        }
        if site.frames.is_empty() {
            frames.push(site.function.clone());
        }
        frames.extend(site.frames.iter().rev().map(|f| token(&f.name())));
        let e = stacks.entry(frames.join(";")).or_default();
        *e = e.wrapping_add(v);
    }
    let total = stacks.values().copied().fold(0, u64::wrapping_add);
    let symbols = syms.stats();
    tracing::debug!("symbolication: {}", symbols.text());
    Ok(Folded { lines: stacks.into_iter().map(|(k, v)| format!("{k} {v}")).collect(), total, symbols })
}

/// The flame graph of `folded` as an SVG.
pub fn svg(folded: &Folded, args: &FlameOptions, path: &str) -> Result<Vec<u8>, Error> {
    use inferno::flamegraph::{self, color, Options};
    let mut opts = Options::default();
    opts.title = args.title.clone().unwrap_or_else(|| format!("{path}: {}", args.by.describe()));
    opts.count_name = match args.by {
        Metric::Count | Metric::Temporaries => "allocations".into(),
        _ => "bytes".into(),
    };
    opts.name_type = "Frame:".into();
    opts.colors = color::Palette::Basic(color::BasicPalette::Mem);
    opts.hash = true;
    opts.deterministic = true;
    let mut out = Vec::new();
    if folded.lines.is_empty() {
        // inferno draws nothing for no samples; say so in a valid SVG.
        let title = xml_escape(&opts.title);
        let svg = format!(
            "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"1200\" height=\"60\" \
             xmlns=\"http://www.w3.org/2000/svg\"><text x=\"600\" y=\"24\" text-anchor=\"middle\">{title}</text>\
             <text x=\"600\" y=\"48\" text-anchor=\"middle\">no allocations to show</text></svg>\n"
        );
        return Ok(svg.into_bytes());
    }
    // inferno adds the values up in a `usize`: a corrupt log's sizes can overflow it.
    // Then every value is scaled down by the same power of two, and the title says so.
    let lines = match scaled_to_fit(&folded.lines) {
        None => folded.lines.clone(),
        Some((shift, lines)) => {
            opts.title = format!("{} (values divided by 2^{shift}: their sum overflows 64 bits)", opts.title);
            lines
        }
    };
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)
        .map_err(|e| Error::Usage(format!("cannot draw the flame graph: {e}")))?;
    Ok(out)
}

/// Folded lines (`stack value`) whose values add up past `u64::MAX`, with each value
/// shifted right by the fewest bits that make the sum fit (and the shift); `None` when
/// they fit already.
fn scaled_to_fit(lines: &[String]) -> Option<(u32, Vec<String>)> {
    let split = |l: &str| l.rsplit_once(' ').map(|(k, v)| (k.to_owned(), v.parse::<u64>().unwrap_or(0)));
    let values: Vec<(String, u64)> = lines.iter().filter_map(|l| split(l)).collect();
    let fits = |shift: u32| values.iter().try_fold(0u64, |a, (_, v)| a.checked_add(v >> shift)).is_some();
    // Each value shifted by `shift` is below 2^(64 - shift): 64 bits hold 2^(shift - 1) of them.
    let shift = (0..63).find(|&s| fits(s)).unwrap_or(63);
    (shift > 0).then(|| (shift, values.iter().map(|(k, v)| format!("{k} {}", v >> shift)).collect()))
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::scaled_to_fit;

    #[test]
    fn values_that_overflow_are_scaled_by_the_fewest_bits() {
        let fit = vec!["a;b 5".to_owned(), "a;c 7".to_owned()];
        assert_eq!(scaled_to_fit(&fit), None);
        let max = vec![format!("a {}", u64::MAX), "b 3".to_owned()];
        assert_eq!(scaled_to_fit(&max), Some((1, vec![format!("a {}", u64::MAX >> 1), "b 1".to_owned()])));
        let many = vec![format!("a {}", u64::MAX); 4];
        let (shift, lines) = scaled_to_fit(&many).unwrap();
        assert_eq!(shift, 2);
        assert_eq!(lines[0], format!("a {}", u64::MAX >> 2));
    }
}
