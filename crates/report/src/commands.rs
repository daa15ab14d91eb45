//! The commands as a caller runs them: each checks its options, replays the log, builds
//! its report and returns the bytes to print or write. Where they go is the caller's
//! business: nothing here writes a file or the terminal.

use std::time::Instant;

use serde::Serialize;

use crate::loaded::{load, load_with, to_json, Loaded, Progress};
use crate::select::{self, ReportOptions, Takes};
use crate::{callstacks, efficiency, export, flame, frees, html, instances, leaks, pprof, series};
use crate::{summarize, takes, timeline_chart, top, tree, Error};
use memreplay_replay::{LabelSnapshots, Stacks};
use memreplay_symbols::{SymbolOptions, Symbolizer};

/// Which report [`run`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    /// `summarize`.
    Summarize,
    /// `tree`.
    Tree,
    /// `leaks`.
    Leaks,
    /// `efficiency`.
    Efficiency,
    /// `instances`.
    Instances,
}

/// Runs one report on the log of `args` and returns its text or JSON. `summarize` and `efficiency` symbolicate their sites as `replay-cli` runs
/// them; here `leaks` does not (see [`run_leaks`]). Shared options the report does not
/// read are refused.
pub fn run(kind: ReportKind, args: &ReportOptions, progress: Progress) -> Result<String, Error> {
    let default_symbols = SymbolOptions::default;
    match kind {
        ReportKind::Leaks => {
            let symbols = SymbolOptions { disabled: true, ..Default::default() };
            return run_leaks(args, &symbols, progress);
        }
        // As `replay-cli` runs them: their sites symbolicated.
        ReportKind::Summarize => return run_summarize(args, &default_symbols(), progress),
        ReportKind::Efficiency => return run_efficiency(args, &default_symbols(), progress),
        ReportKind::Tree => takes::TREE.check(args)?,
        ReportKind::Instances => takes::INSTANCES.check(args)?,
    }
    let loaded = load(args, progress)?;
    let start = Instant::now();
    let text = match kind {
        ReportKind::Tree => render(&tree::build(&loaded), args.json, tree::Tree::to_text),
        ReportKind::Instances => render(&instances::build(&loaded), args.json, instances::Instances::to_text),
        ReportKind::Summarize | ReportKind::Leaks | ReportKind::Efficiency => unreachable!("handled above"),
    };
    tracing::debug!("built the {kind:?} report in {:.3} s", start.elapsed().as_secs_f64());
    Ok(text)
}

/// `summarize`, with its allocation sites symbolicated unless `symbols.disabled`.
pub fn run_summarize(args: &ReportOptions, symbols: &SymbolOptions, progress: Progress) -> Result<String, Error> {
    let symbolize = |r: &mut summarize::Summary, stacks: &Stacks, syms: &mut Symbolizer| {
        if !r.sites.is_empty() {
            r.symbolize(stacks, syms);
        }
    };
    let report = SymbolizedReport {
        takes: takes::SUMMARIZE,
        build: summarize::build,
        symbolize,
        to_text: summarize::Summary::to_text,
    };
    run_symbolized(args, symbols, progress, report)
}

/// `efficiency`, with its allocation sites symbolicated unless `symbols.disabled`.
pub fn run_efficiency(args: &ReportOptions, symbols: &SymbolOptions, progress: Progress) -> Result<String, Error> {
    let symbolize = |r: &mut efficiency::Efficiency, stacks: &Stacks, syms: &mut Symbolizer| {
        if !r.sites.is_empty() {
            r.symbolize(stacks, syms);
        }
    };
    let report = SymbolizedReport {
        takes: takes::EFFICIENCY,
        build: efficiency::build,
        symbolize,
        to_text: efficiency::Efficiency::to_text,
    };
    run_symbolized(args, symbols, progress, report)
}

/// A report whose sites are symbolicated unless `symbols.disabled`.
struct SymbolizedReport<T, S> {
    /// The shared options it takes.
    takes: Takes,
    build: fn(&Loaded) -> T,
    /// Names its sites.
    symbolize: S,
    to_text: fn(&T) -> String,
}

fn run_symbolized<T: Serialize>(
    args: &ReportOptions,
    symbols: &SymbolOptions,
    progress: Progress,
    report: SymbolizedReport<T, impl FnOnce(&mut T, &Stacks, &mut Symbolizer)>,
) -> Result<String, Error> {
    let SymbolizedReport { takes, build, symbolize, to_text } = report;
    takes.check(args)?;
    callstacks::check_symbol_dirs(symbols)?;
    let loaded = load(args, progress)?;
    let start = Instant::now();
    let report = build_symbolized(loaded, symbols, build, symbolize)?;
    tracing::debug!("built the {} report in {:.3} s", takes.command, start.elapsed().as_secs_f64());
    Ok(render(&report, args.json, to_text))
}

/// Builds a report with `build`, then names its sites (`symbolize`) unless
/// `symbols.disabled`. The replay is let go before the names are looked up, all but its
/// callstacks: the symbolizer's debug sections then take the room the live-allocation
/// tables held, rather than adding to it.
fn build_symbolized<T>(
    mut loaded: Loaded,
    symbols: &SymbolOptions,
    build: impl FnOnce(&Loaded) -> T,
    symbolize: impl FnOnce(&mut T, &Stacks, &mut Symbolizer),
) -> Result<T, Error> {
    let mut report = build(&loaded);
    if !symbols.disabled {
        // Lazy: a binary's symbols are read when the first address in it is looked up.
        let mut syms = callstacks::symbolizer(&loaded, symbols)?;
        let stacks = std::mem::take(&mut loaded.replay.state.stacks);
        drop(loaded);
        symbolize(&mut report, &stacks, &mut syms);
    }
    Ok(report)
}

/// `leaks`, with its sites symbolicated unless `symbols.disabled`.
pub fn run_leaks(args: &ReportOptions, symbols: &SymbolOptions, progress: Progress) -> Result<String, Error> {
    takes::LEAKS.check(args)?;
    callstacks::check_symbol_dirs(symbols)?;
    let loaded = load(args, progress)?;
    let start = Instant::now();
    let report = if symbols.disabled {
        leaks::build(&loaded)
    } else {
        let mut syms = callstacks::symbolizer(&loaded, symbols)?;
        leaks::build_symbolized(&loaded, &mut syms)
    };
    tracing::debug!("built the leaks report in {:.3} s", start.elapsed().as_secs_f64());
    Ok(render(&report, args.json, leaks::Leaks::to_text))
}

/// `top`: its text or JSON.
pub fn run_top(args: &top::TopOptions, progress: Progress) -> Result<String, Error> {
    callstacks::check_symbol_dirs(&args.symbols)?;
    let loaded = load(&args.report_options(), progress)?;
    let report = top::build(&loaded, args)?;
    Ok(render(&report, args.json, top::Top::to_text))
}

/// `frees`: its text or JSON.
pub fn run_frees(args: &frees::FreesOptions, progress: Progress) -> Result<String, Error> {
    callstacks::check_symbol_dirs(&args.symbols)?;
    let loaded = load(&args.report_options(), progress)?;
    let report = frees::build(&loaded, args)?;
    Ok(render(&report, args.json, frees::Frees::to_text))
}

/// `flamegraph`: an SVG, or folded stacks with `folded`.
pub fn run_flamegraph(args: &flame::FlameOptions, progress: Progress) -> Result<Vec<u8>, Error> {
    select::refuse(args.refusals())?;
    callstacks::check_symbol_dirs(&args.symbols)?;
    let loaded = load(&args.report_options(), progress)?;
    let folded = flame::folded(&loaded, args)?;
    if args.folded {
        Ok(folded.to_text().into_bytes())
    } else {
        flame::svg(&folded, args, &loaded.path)
    }
}

/// The image format of `timeline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// SVG.
    Svg,
    /// PNG (with the `png` feature).
    Png,
}

impl ImageFormat {
    /// The format a file name's extension says: `.svg` (or none) and `.png`, any case.
    pub fn from_path(path: &std::path::Path) -> Result<ImageFormat, Error> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("png") => Ok(ImageFormat::Png),
            Some("svg") | None => Ok(ImageFormat::Svg),
            Some(other) => Err(Error::Usage(format!(
                "cannot tell the image format from `.{other}`: name the file .svg or .png, or give --format"
            ))),
        }
    }
}

/// `timeline`: the memory-over-time chart of the log of `args`, in `format`.
pub fn run_timeline(
    args: &ReportOptions,
    chart: timeline_chart::ChartOptions,
    format: ImageFormat,
    progress: Progress,
) -> Result<Vec<u8>, Error> {
    takes::TIMELINE.check(args)?;
    if format == ImageFormat::Png && !cfg!(feature = "png") {
        return Err(Error::Usage(
            "this build of replay-cli writes SVG only: rebuild it with `--features png` for PNG".into(),
        ));
    }
    let loaded = load(args, progress)?;
    let mut data = series::build(&loaded);
    if chart.by == timeline_chart::ChartBy::Context && args.domain.is_none() {
        // One domain per context chart: the heap unless --domain says otherwise.
        let heap = loaded.state().domain_name(memreplay_format::HEAP_DOMAIN);
        data.domains.retain(|d| d.name == heap);
        data.contexts.retain(|c| c.domain == heap);
    }
    let svg = timeline_chart::svg(&data, &loaded.path, chart);
    let bytes = match format {
        ImageFormat::Svg => svg.into_bytes(),
        ImageFormat::Png => png_bytes(&svg, progress)?,
    };
    Ok(bytes)
}

#[cfg(feature = "png")]
fn png_bytes(svg: &str, progress: Progress) -> Result<Vec<u8>, Error> {
    let (png, warning) = timeline_chart::png(svg).map_err(Error::Usage)?;
    if let Some(w) = warning {
        progress.warning(&w);
    }
    Ok(png)
}

#[cfg(not(feature = "png"))]
fn png_bytes(_svg: &str, _progress: Progress) -> Result<Vec<u8>, Error> {
    unreachable!("PNG is refused above without the `png` feature")
}

/// `export`: the log of `args` in `format`.
pub fn run_export(
    args: &ReportOptions,
    format: export::ExportFormat,
    symbols: &SymbolOptions,
    progress: Progress,
) -> Result<Vec<u8>, Error> {
    let takes = match format {
        export::ExportFormat::Json => takes::EXPORT_JSON,
        export::ExportFormat::Csv => takes::EXPORT_CSV,
        export::ExportFormat::ChromeTrace => takes::EXPORT_CHROME_TRACE,
        export::ExportFormat::Pprof => takes::EXPORT_PPROF,
    };
    let mut refusals = takes.refusals(args);
    if format != export::ExportFormat::Pprof {
        let only_pprof = "only `--format pprof` names callstacks";
        if !symbols.search_dirs.is_empty() {
            refusals.push(format!("{} does not take --symbols: {only_pprof}", takes.command));
        }
        if symbols.disabled {
            refusals.push(format!("{} does not take --no-symbols: {only_pprof}", takes.command));
        }
    }
    select::refuse(refusals)?;
    if format == export::ExportFormat::Pprof {
        callstacks::check_symbol_dirs(symbols)?;
    }
    let loaded = load(args, progress)?;
    if format == export::ExportFormat::Pprof {
        let (profile, _) = pprof::profile(&loaded, symbols, args.domain.is_some())?;
        return Ok(pprof::encode(&profile));
    }
    let text = match format {
        export::ExportFormat::Json => to_json(&export::json(&loaded)),
        export::ExportFormat::Csv => {
            export::csv(&loaded).map_err(|e| Error::Usage(format!("cannot build the CSV: {e}")))?
        }
        export::ExportFormat::ChromeTrace => {
            let mut s = serde_json::to_string(&export::chrome_trace(&loaded)).expect("JSON values serialize");
            s.push('\n');
            s
        }
        export::ExportFormat::Pprof => unreachable!("written above"),
    };
    Ok(text.into_bytes())
}

/// Refuses what `report` cannot take before anything is replayed (or a file created):
/// the shared options it does not read, and symbol directories that are not there.
pub fn check_html(args: &ReportOptions, symbols: &SymbolOptions) -> Result<(), Error> {
    takes::REPORT.check(args)?;
    callstacks::check_symbol_dirs(symbols)
}

/// `report`: the HTML page of the log of `args` (with `args.json`, the page's data
/// island as JSON instead).
pub fn run_html(
    args: &ReportOptions,
    symbols: &SymbolOptions,
    opts: &html::HtmlOptions,
    progress: Progress,
) -> Result<String, Error> {
    check_html(args, symbols)?;
    // The page's points: up to MAX_LABEL_POINTS labels of twice as many kept.
    let mut options = args.replay_options();
    if let LabelSnapshots::Evenly { count, .. } = &mut options.label_snapshots {
        *count = html::MAX_LABEL_POINTS;
    }
    let mut loaded = load_with(args, options, progress)?;
    loaded.sel.limit = Some(args.limit.unwrap_or(html::DEFAULT_LIMIT));
    let start = Instant::now();
    let mut syms = callstacks::symbolizer(&loaded, symbols)?;
    // The page's GPU section draws the GPU view of the log at `--at`, else at each GPU
    // domain's peak (at the end a game has often freed its GPU resources).
    let gpu_domains = crate::gpu::gpu_domains(loaded.state());
    let view = match gpu_domains.is_empty() {
        true => None,
        false => {
            let point =
                if loaded.sel.at_end() { crate::gpu::ViewPoint::Peak } else { crate::gpu::ViewPoint::Selection };
            Some(crate::gpu::view(&loaded, point, &gpu_domains, None, None)?)
        }
    };
    let report = html::build(&loaded, opts, &mut syms, view.as_ref())?;
    tracing::debug!("symbolication: {}", report.symbols.text());
    let text = if args.json { to_json(&html::island(&report)) } else { html::render(&report) };
    tracing::debug!("built the HTML report ({} bytes) in {:.3} s", text.len(), start.elapsed().as_secs_f64());
    Ok(text)
}

fn render<T: Serialize>(report: &T, json: bool, text: impl Fn(&T) -> String) -> String {
    if json {
        to_json(report)
    } else {
        text(report)
    }
}
