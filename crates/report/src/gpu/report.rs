//! `replay-cli gpu`: the options, the report (what JSON carries) and its text.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use super::blockmap::{self, BlockFigures, DomainBlockFigures};
use super::from_log::{self, ViewPoint};
use super::model::{GpuDomain, GpuSource, GpuView};
use super::pivots::{pivots, Owner, Pivots, ResourceRow, DEFAULT_SMALL};
use crate::loaded::{load, Progress};
use crate::select::{At, ReportOptions};
use crate::sites::context_mask;
use crate::table::{percent, plural, size, Align, Table};
use crate::{Error, SCHEMA_VERSION};

/// Rows per list unless `--limit` says otherwise.
pub const DEFAULT_GPU_LIMIT: usize = 20;

/// `--at` of `gpu`: a label or frame, or each GPU domain's peak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuAt {
    /// A label or the start of a frame.
    Point(At),
    /// Each top-level GPU domain's peak.
    Peak,
}

/// Parses `gpu --at`: `peak`, `frame:N` or a label name.
pub fn parse_gpu_at(s: &str) -> Result<GpuAt, String> {
    if s == "peak" {
        return Ok(GpuAt::Peak);
    }
    crate::select::parse_at(s).map(GpuAt::Point)
}

/// Parses `--screen WIDTHxHEIGHT` (`1920x1080`).
pub fn parse_screen(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("`{s}` is not a screen size (WIDTHxHEIGHT, e.g. 1920x1080)");
    let (w, h) = s.trim().split_once(['x', 'X', '×']).ok_or_else(bad)?;
    let (w, h): (u32, u32) = (w.trim().parse().map_err(|_| bad())?, h.trim().parse().map_err(|_| bad())?);
    if w == 0 || h == 0 {
        return Err(bad());
    }
    Ok((w, h))
}

/// `replay-cli gpu` options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuOptions {
    /// The log to read (or `dumps`).
    pub log: Option<PathBuf>,
    /// VMA or D3D12MA JSON dumps to read instead of a log: one is reported on, two are
    /// compared (the first before, the second after).
    pub dumps: Vec<PathBuf>,
    /// Where to read the live resources (default: the end).
    pub at: Option<GpuAt>,
    /// Only this GPU domain and the domains inside it (name or id).
    pub domain: Option<String>,
    /// Only resources allocated in this context and below (pivots; the block map shows
    /// whole blocks).
    pub context: Option<String>,
    /// The screen size, over what the log recorded.
    pub screen: Option<(u32, u32)>,
    /// Resources below this many bytes are small (default 64 KiB).
    pub small: Option<u64>,
    /// Rows per list (default 20; 0: no limit).
    pub limit: Option<usize>,
    /// Machine-readable JSON output.
    pub json: bool,
    /// Also draw the block map as an SVG ([`GpuOutput::svg`]).
    pub svg: bool,
}

/// What `gpu` returns: the report, and the block map's SVG if asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuOutput {
    /// The report's text or JSON (for two dumps, their comparison).
    pub report: String,
    /// The block map as a standalone SVG ([`GpuOptions::svg`]).
    pub svg: Option<String>,
}

/// Where the screen size came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScreenSource {
    /// Recorded by the game.
    Recorded,
    /// Given with `--screen`.
    Option,
    /// Neither.
    Unknown,
}

/// The `gpu` report: the view's domains and the pivots of its resources.
#[derive(Debug, Clone, Serialize)]
pub struct GpuReport {
    /// JSON schema version.
    pub schema_version: u32,
    /// `"gpu"`.
    pub report: &'static str,
    /// Where the view was read, the GPU domains (live, peak, capacity, budget), every
    /// resource live at the point and every block with its sub-allocations.
    #[serde(flatten)]
    pub view: GpuView,
    /// Where the screen size came from.
    pub screen_source: ScreenSource,
    /// `--context`, if given.
    pub context: Option<String>,
    /// The pivots.
    pub pivots: Pivots,
    /// The block map's figures: per sub-allocating domain, and per block (in the order of
    /// `blocks`).
    pub block_domains: Vec<DomainBlockFigures>,
    /// See `block_domains`.
    pub block_figures: Vec<BlockFigures>,
}

/// Replays the log and builds the view `gpu` reports on.
pub fn build_view(args: &GpuOptions, progress: Progress) -> Result<(GpuView, ScreenSource), Error> {
    let at = match &args.at {
        Some(GpuAt::Point(at)) => Some(at.clone()),
        _ => None,
    };
    // The domain is resolved here, against GPU domains only.
    let log = args.log.clone().ok_or_else(|| Error::Usage("gpu: name a log, or a dump with --vma".into()))?;
    let opts = ReportOptions { log, at, json: args.json, ..ReportOptions::default() };
    let l = load(&opts, progress)?;
    let state = l.state();
    let domains = match &args.domain {
        None => from_log::gpu_domains(state),
        // The domain is resolved here, against GPU domains only.
        Some(name) => from_log::domain_tree(state, name).map_err(Error::Usage)?,
    };
    let mask = args.context.as_deref().map(|c| context_mask(state, c)).transpose()?;
    let point = if args.at == Some(GpuAt::Peak) { ViewPoint::Peak } else { ViewPoint::Selection };
    let view = from_log::view(&l, point, &domains, mask.as_deref(), args.screen)?;
    let source = match (args.screen, view.screen) {
        (Some(_), _) => ScreenSource::Option,
        (None, Some(_)) => ScreenSource::Recorded,
        (None, None) => ScreenSource::Unknown,
    };
    Ok((view, source))
}

/// Builds the report of a view.
pub fn build(view: GpuView, screen_source: ScreenSource, args: &GpuOptions) -> GpuReport {
    let limit = match args.limit {
        None => DEFAULT_GPU_LIMIT,
        Some(0) => usize::MAX,
        Some(n) => n,
    };
    let pivots = pivots(&view, args.small.unwrap_or(DEFAULT_SMALL), limit);
    GpuReport {
        schema_version: SCHEMA_VERSION,
        report: "gpu",
        screen_source,
        context: args.context.clone(),
        pivots,
        block_domains: blockmap::domain_figures(&view),
        block_figures: view.blocks.iter().map(blockmap::figures).collect(),
        view,
    }
}

fn owners_text(owners: &[Owner]) -> String {
    owners
        .iter()
        .map(|o| {
            let name = if o.context.is_empty() { "(no context)" } else { o.context.as_str() };
            format!("{name} ({})", size(o.bytes))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn context_text(c: &str) -> &str {
    if c.is_empty() {
        "(no context)"
    } else {
        c
    }
}

fn dims(r: &ResourceRow) -> String {
    let mut s = format!("{}x{}", r.width, r.height);
    if r.depth_or_layers > 1 {
        let _ = write!(s, "x{}", r.depth_or_layers);
    }
    s
}

fn name_text(r: &ResourceRow) -> &str {
    if r.name.is_empty() {
        "(unnamed)"
    } else {
        &r.name
    }
}

fn format_text(f: &str) -> &str {
    if f.is_empty() {
        "(none)"
    } else {
        f
    }
}

fn share(ppm: u64) -> String {
    percent(Some(ppm as f64 / 1_000_000.0))
}

impl GpuReport {
    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = self.write_text(&mut o);
        o
    }

    fn write_text(&self, o: &mut String) -> std::fmt::Result {
        match &self.view.source {
            GpuSource::Log { path, point } => writeln!(o, "GPU memory of {path}, {point}")?,
            GpuSource::Dump { path, format } => writeln!(o, "GPU memory of {path} ({format} dump)")?,
        }
        if let Some(c) = &self.context {
            writeln!(o, "Resources allocated in context {c} and below")?;
        }
        writeln!(o)?;
        if self.view.domains.is_empty() {
            writeln!(o, "No GPU domains: the log defines none (memreplay::Domain::define with a GPU kind).")?;
            return Ok(());
        }
        writeln!(o, "Domains")?;
        let mut t = Table::new(&[
            ("domain", Align::Left),
            ("kind", Align::Left),
            ("live", Align::Right),
            ("allocations", Align::Right),
            ("peak", Align::Right),
            ("peak at", Align::Left),
            ("capacity", Align::Right),
            ("peak/capacity", Align::Right),
        ]);
        for d in &self.view.domains {
            let name = match d.parent.and_then(|p| self.view.domains.iter().find(|x| x.id == p)) {
                Some(p) => format!("{} (in {})", d.name, p.name),
                None => d.name.clone(),
            };
            let (peak, when) = match &d.peak {
                Some(p) => {
                    let mut when = crate::time::format_ms(p.time_ns);
                    if let Some(l) = &p.after_label {
                        let _ = write!(when, " after \"{l}\"");
                    }
                    (size(p.bytes), when)
                }
                None => ("-".into(), String::new()),
            };
            let cap = if d.capacity == 0 { "-".into() } else { size(d.capacity) };
            let ratio = match (&d.peak, d.capacity) {
                (Some(p), c) if c > 0 => percent(Some(p.bytes as f64 / c as f64)),
                _ => "-".into(),
            };
            t.row(vec![name, d.kind.clone(), size(d.live_bytes), d.live_count.to_string(), peak, when, cap, ratio]);
        }
        o.push_str(&t.render(2));
        self.write_budgets(o)?;
        self.write_pivots(o)?;
        if !self.view.blocks.is_empty() {
            writeln!(o)?;
            o.push_str(&blockmap::to_text(&self.view));
        }
        Ok(())
    }

    fn write_budgets(&self, o: &mut String) -> std::fmt::Result {
        let with: Vec<&GpuDomain> = self.view.domains.iter().filter(|d| d.budget.is_some()).collect();
        if with.is_empty() {
            return Ok(());
        }
        writeln!(o, "\nBudget (as the driver reported it)")?;
        let mut t = Table::new(&[
            ("domain", Align::Left),
            ("budget", Align::Right),
            ("usage", Align::Right),
            ("lowest budget", Align::Right),
            ("peak usage", Align::Right),
            ("peak/lowest budget", Align::Right),
            ("samples", Align::Right),
            ("over budget", Align::Right),
        ]);
        for d in &with {
            let b = d.budget.as_ref().expect("filtered");
            t.row(vec![
                d.name.clone(),
                size(b.budget),
                size(b.usage),
                size(b.min_budget),
                size(b.peak_usage),
                percent(crate::table::ratio(b.peak_usage, b.min_budget)),
                b.samples.to_string(),
                plural(b.over_budget.len() as u64, "interval"),
            ]);
        }
        o.push_str(&t.render(2));
        for d in &with {
            for i in &d.budget.as_ref().expect("filtered").over_budget {
                let after = i.after_label.as_ref().map(|l| format!(" after \"{l}\"")).unwrap_or_default();
                writeln!(
                    o,
                    "  {} over budget from {} to {}{after}, by up to {}",
                    d.name,
                    crate::time::format_ms(i.from_ns),
                    crate::time::format_ms(i.to_ns),
                    size(i.max_excess)
                )?;
            }
        }
        Ok(())
    }

    fn write_pivots(&self, o: &mut String) -> std::fmt::Result {
        let p = &self.pivots;
        writeln!(o, "\nResources live: {} in {}", size(p.total.bytes), plural(p.total.count, "allocation"))?;
        if p.total.count == 0 {
            return Ok(());
        }
        writeln!(o, "\nBy kind")?;
        let mut t = Table::new(&[
            ("kind", Align::Left),
            ("count", Align::Right),
            ("bytes", Align::Right),
            ("share", Align::Right),
            ("largest owners", Align::Left),
        ]);
        for r in &p.by_kind {
            t.row(vec![
                r.kind.name().into(),
                r.count.to_string(),
                size(r.bytes),
                share(r.share_ppm),
                owners_text(&r.owners),
            ]);
        }
        o.push_str(&t.render(2));

        if !p.by_dimensions.is_empty() {
            writeln!(o, "\nBy dimensions (textures and targets)")?;
            let mut t = Table::new(&[
                ("width x height", Align::Left),
                ("count", Align::Right),
                ("bytes", Align::Right),
                ("share", Align::Right),
                ("kinds", Align::Left),
                ("largest owners", Align::Left),
            ]);
            for r in &p.by_dimensions {
                let kinds: Vec<&str> = r.kinds.iter().map(|k| k.name()).collect();
                t.row(vec![
                    format!("{}x{}", r.width, r.height),
                    r.count.to_string(),
                    size(r.bytes),
                    share(r.share_ppm),
                    kinds.join(", "),
                    owners_text(&r.owners),
                ]);
            }
            o.push_str(&t.render(2));
            if p.dimensions_total > p.by_dimensions.len() {
                writeln!(o, "  ({} more sizes; --limit 0 lists all)", p.dimensions_total - p.by_dimensions.len())?;
            }
        }

        match p.screen {
            None => writeln!(
                o,
                "\nScreen-sized targets: the screen size is unknown (the game records it with \
                 memreplay::display_size; or pass --screen WIDTHxHEIGHT)"
            )?,
            Some((w, h)) => {
                let from = match self.screen_source {
                    ScreenSource::Recorded => "recorded",
                    ScreenSource::Option => "--screen",
                    ScreenSource::Unknown => "unknown",
                };
                writeln!(
                    o,
                    "\nScreen-sized targets (screen {w}x{h}, {from}): {} in {}",
                    size(p.screen_sized_total.bytes),
                    plural(p.screen_sized_total.count, "target")
                )?;
                let mut t = Table::new(&[
                    ("name", Align::Left),
                    ("kind", Align::Left),
                    ("size", Align::Left),
                    ("of screen", Align::Right),
                    ("format", Align::Left),
                    ("bytes", Align::Right),
                    ("context", Align::Left),
                ]);
                for r in &p.screen_sized {
                    let x = &r.resource;
                    t.row(vec![
                        name_text(x).into(),
                        x.kind.name().into(),
                        dims(x),
                        r.fraction.clone(),
                        format_text(&x.format).into(),
                        size(x.size),
                        context_text(&x.context).into(),
                    ]);
                }
                if !p.screen_sized.is_empty() {
                    o.push_str(&t.render(2));
                }
            }
        }

        if p.npot_total.count > 0 {
            writeln!(
                o,
                "\nNon-power-of-two textures with mips: {} in {}; rounding each side down would save {}, up would cost {}",
                size(p.npot_total.bytes),
                plural(p.npot_total.count, "texture"),
                size(p.npot_save),
                size(p.npot_cost)
            )?;
            let mut t = Table::new(&[
                ("name", Align::Left),
                ("size", Align::Left),
                ("mips", Align::Right),
                ("format", Align::Left),
                ("bytes", Align::Right),
                ("texel data", Align::Right),
                ("down to", Align::Left),
                ("saves", Align::Right),
                ("up to", Align::Left),
                ("costs", Align::Right),
                ("context", Align::Left),
            ]);
            for r in &p.npot {
                let x = &r.resource;
                let pow = |p: &Option<super::pivots::PowerOfTwo>| match p {
                    Some(p) => (format!("{}x{}", p.width, p.height), size(p.delta)),
                    None => ("-".into(), "-".into()),
                };
                let (down, saves) = pow(&r.down);
                let (up, costs) = pow(&r.up);
                t.row(vec![
                    name_text(x).into(),
                    dims(x),
                    x.mip_levels.to_string(),
                    if r.texel_bytes.is_some() { format_text(&x.format).into() } else { "unknown format".into() },
                    size(x.size),
                    r.texel_bytes.map_or_else(|| "-".into(), size),
                    down,
                    saves,
                    up,
                    costs,
                    context_text(&x.context).into(),
                ]);
            }
            o.push_str(&t.render(2));
        }

        let s = &p.small;
        writeln!(
            o,
            "\nSmall resources (under {}): {} in {}",
            size(s.below),
            size(s.total.bytes),
            plural(s.total.count, "resource")
        )?;
        if s.total.count > 0 {
            let mut t = Table::new(&[
                ("kind", Align::Left),
                ("count", Align::Right),
                ("bytes", Align::Right),
                ("largest owners", Align::Left),
            ]);
            for r in &s.by_kind {
                t.row(vec![r.kind.name().into(), r.count.to_string(), size(r.bytes), owners_text(&r.owners)]);
            }
            o.push_str(&t.render(2));
        }

        writeln!(
            o,
            "\nPadding (allocated beyond the texel data of format, size, layers and mips): {} over {}",
            size(p.padding_bytes),
            plural(p.padding_total.count, "resource")
        )?;
        if !p.padding.is_empty() {
            let mut t = Table::new(&[
                ("name", Align::Left),
                ("kind", Align::Left),
                ("size", Align::Left),
                ("mips", Align::Right),
                ("format", Align::Left),
                ("bytes", Align::Right),
                ("texel data", Align::Right),
                ("padding", Align::Right),
                ("context", Align::Left),
            ]);
            for r in &p.padding {
                let x = &r.resource;
                t.row(vec![
                    name_text(x).into(),
                    x.kind.name().into(),
                    dims(x),
                    x.mip_levels.to_string(),
                    x.format.clone(),
                    size(x.size),
                    size(r.texel_bytes),
                    size(r.padding),
                    context_text(&x.context).into(),
                ]);
            }
            o.push_str(&t.render(2));
        }
        let u = &p.unchecked;
        for (a, what) in [
            (u.unknown_format, "with an unknown format (or none), not checked"),
            (u.no_dimensions, "described without dimensions, not checked"),
            (u.undersized, "allocated smaller than their texel data (descriptor and allocation disagree)"),
        ] {
            if a.count > 0 {
                writeln!(o, "  {} ({}) {what}", plural(a.count, "resource"), size(a.bytes))?;
            }
        }
        Ok(())
    }
}

/// The domain named `name` (or by id) among `view`'s, and every domain inside it; an
/// error names the view's domains.
fn domain_and_inside(view: &GpuView, name: &str) -> Result<Vec<u32>, Error> {
    let Some(id) = view.domains.iter().find(|d| d.name == name || d.id.to_string() == name).map(|d| d.id) else {
        let names: Vec<String> = view.domains.iter().map(|d| format!("\"{}\"", d.name)).collect();
        return Err(Error::Usage(format!("no GPU domain \"{name}\" in the dump; domains: {}", names.join(", "))));
    };
    let parents: Vec<(u32, Option<u32>)> = view.domains.iter().map(|d| (d.id, d.parent)).collect();
    Ok(super::model::with_descendants(id, &parents))
}

/// `view` with only the domains of `set` (and the parents their blocks are allocations of).
fn only(mut view: GpuView, set: &[u32]) -> GpuView {
    view.resources.retain(|r| set.contains(&r.domain));
    view.blocks.retain(|b| set.contains(&b.sub_domain) || set.contains(&b.domain));
    let parents: Vec<u32> = view.blocks.iter().map(|b| b.domain).collect();
    view.domains.retain(|d| set.contains(&d.id) || parents.contains(&d.id));
    view
}

fn read_dump(path: &std::path::Path) -> Result<GpuView, Error> {
    super::vma::read_dump(path).map_err(|e| Error::Usage(e.to_string()))
}

/// `replay-cli gpu`: replays the log (or reads the dumps) and returns the report's text or
/// JSON, and the block map's SVG if asked for.
pub fn run(args: &GpuOptions, progress: Progress) -> Result<GpuOutput, Error> {
    let (view, screen_source) = match (&args.log, args.dumps.as_slice()) {
        (Some(_), []) => build_view(args, progress)?,
        (Some(_), _) => return Err(Error::Usage("gpu: read a log or --vma dumps, not both".into())),
        (None, []) => return Err(Error::Usage("gpu: name a log, or a dump with --vma".into())),
        (None, dumps) => {
            let mut refused = Vec::new();
            if args.at.is_some() {
                refused.push("--at (a dump is one point in time)");
            }
            if args.context.is_some() {
                refused.push("--context (a dump has no contexts)");
            }
            if dumps.len() > 2 {
                refused.push("more than two --vma dumps (one is reported on, two are compared)");
            }
            if dumps.len() == 2 && args.svg {
                refused.push("--svg with two dumps (each dump's map is drawn on its own)");
            }
            if !refused.is_empty() {
                return Err(Error::Usage(format!("gpu --vma does not take {}", refused.join(", "))));
            }
            if let [before, after] = dumps {
                let (a, b) = (read_dump(before)?, read_dump(after)?);
                let diff = super::vma::diff_dumps(&a, &b);
                #[derive(Serialize)]
                struct Json<'a> {
                    schema_version: u32,
                    report: &'static str,
                    #[serde(flatten)]
                    diff: &'a super::vma::DumpDiff,
                }
                let report = match args.json {
                    true => crate::loaded::to_json(&Json {
                        schema_version: SCHEMA_VERSION,
                        report: "gpu-diff",
                        diff: &diff,
                    }),
                    false => diff.to_text(),
                };
                return Ok(GpuOutput { report, svg: None });
            }
            let mut view = read_dump(&dumps[0])?;
            if let Some(name) = &args.domain {
                let set = domain_and_inside(&view, name)?;
                view = only(view, &set);
            }
            view.screen = args.screen;
            (view, if args.screen.is_some() { ScreenSource::Option } else { ScreenSource::Unknown })
        }
    };
    let svg = args.svg.then(|| {
        let title = match &view.source {
            GpuSource::Log { path, point } => format!("GPU block map of {path}, {point}"),
            GpuSource::Dump { path, format } => format!("GPU block map of {path} ({format} dump)"),
        };
        blockmap::svg(&view, &title)
    });
    let report = build(view, screen_source, args);
    let report = if args.json { crate::loaded::to_json(&report) } else { report.to_text() };
    Ok(GpuOutput { report, svg })
}
