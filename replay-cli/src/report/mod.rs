//! The reports: `summarize`, `tree`, `leaks`, `efficiency`, `instances` and `diff`; the
//! callstack views (`top`, `frees`, `flamegraph`, `export --format pprof`); the `timeline`
//! chart, the other `export` formats and the HTML page (`report`, [`html`]).
//!
//! Each report module builds a serializable struct from the replayed state ([`Loaded`])
//! and renders it as text; `--json` prints the same struct (schema in `JSON.md`).
//! Reports read the replay state, never the log.

pub mod callstacks;
pub mod compare;
pub mod diff;
pub mod efficiency;
pub mod export;
pub mod figures;
pub mod flame;
pub mod frees;
pub mod html;
pub mod instances;
pub mod leaks;
pub mod matching;
pub mod observed;
pub mod pprof;
pub mod range;
pub mod select;
pub mod series;
pub mod sites;
pub mod summarize;
pub mod table;
pub mod takes;
pub mod timeline_chart;
pub mod top;
pub mod tree;
pub mod unnamed;

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use crate::integrity::LogIntegrity;
use crate::CliError;
use memreplay_replay::{Replay, ReplayState};
use memreplay_symbols::Symbolizer;

pub use select::{At, ReportArgs, Selection, SharedOption, SortKey, Takes};

/// Version of the JSON schemas (`JSON.md`); bumped only for incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// A replayed log and the options resolved against it: what every report reads.
pub struct Loaded {
    /// The log's path, as displayed.
    pub path: String,
    pub replay: Replay,
    pub sel: Selection,
}

impl Loaded {
    pub fn state(&self) -> &ReplayState {
        &self.replay.state
    }

    /// Clock ticks per second of the log (its `Time` records are in ticks).
    pub fn ticks_per_second(&self) -> u64 {
        self.replay.header.ticks_per_second
    }

    /// A clock reading in nanoseconds.
    pub fn ns(&self, ticks: u64) -> u64 {
        select::ticks_to_ns(ticks, self.ticks_per_second())
    }

    /// The end of the recording: the end-of-log record's, else the last clock reading
    /// (a lower bound, for a log cut off before its end).
    pub fn end_ns(&self) -> u64 {
        self.replay.report.end.map_or_else(|| self.ns(self.state().end_time_ns), |e| e.end_ns)
    }

    /// Whether the log is whole, and what was lost if not.
    pub fn integrity(&self) -> LogIntegrity {
        crate::integrity::of(&self.replay)
    }
}

/// What a command tells the person running it besides its report: how far the replay
/// is, and warnings (a damaged log, a PNG drawn without fonts). The library never writes
/// to the terminal itself: the program running a command says how (`replay-cli` draws a
/// progress bar and prints warnings on stderr).
pub trait Feedback: Sync {
    /// `done` of `total` events replayed, now and then.
    fn progress(&self, _done: u64, _total: u64) {}
    /// The replay is over (every event out, or it stopped early).
    fn replayed(&self) {}
    /// One line of warning, without a trailing newline.
    fn warning(&self, _line: &str) {}
}

/// Where a command's feedback goes.
#[derive(Clone, Copy)]
pub enum Progress {
    /// Nowhere (library use, tests): the reports themselves say what was lost.
    Hidden,
    /// To this.
    To(&'static dyn Feedback),
}

impl Progress {
    fn progress(self, done: u64, total: u64) {
        if let Progress::To(f) = self {
            f.progress(done, total)
        }
    }

    fn replayed(self) {
        if let Progress::To(f) = self {
            f.replayed()
        }
    }

    fn warning(self, line: &str) {
        if let Progress::To(f) = self {
            f.warning(line)
        }
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Progress::Hidden => "Hidden",
            Progress::To(_) => "To(..)",
        })
    }
}

/// Replays the log of `args` and resolves the options against it.
pub fn load(args: &ReportArgs, progress: Progress) -> Result<Loaded, CliError> {
    let path = &args.log;
    let start = Instant::now();
    let replay = memreplay_replay::replay(path, args.replay_options(), |done, total| progress.progress(done, total));
    progress.replayed();
    let replay = replay.map_err(|error| CliError::Open { path: path.to_owned(), error })?;
    tracing::debug!("replay and index took {:.3} s in all", start.elapsed().as_secs_f64());
    refuse_out_of_room(path, &replay)?;
    refuse_too_deep(path, &replay)?;
    let sel = Selection::resolve(&replay.state, args)?;
    warn_if_damaged(path, &replay, progress);
    Ok(Loaded { path: path.display().to_string(), replay, sel })
}

/// No report is made of a replay stopped at the memory ceiling: its figures would cover
/// only part of the log. The error says what took the room.
pub(crate) fn refuse_out_of_room(path: &std::path::Path, replay: &Replay) -> Result<(), CliError> {
    let Some((in_use, limit)) = replay.state.out_of_room() else { return Ok(()) };
    let what = memreplay_replay::OutOfRoom {
        in_use,
        limit,
        events_done: replay.state.events,
        events_total: replay.events_in_log,
        parts: replay.state.memory_by_part(),
    };
    Err(CliError::OutOfRoom { path: path.to_owned(), what })
}

/// No report is made of a log that nests contexts deeper than the replay follows
/// ([`memreplay_replay::MAX_CONTEXT_DEPTH`]): its figures would be wrong.
pub(crate) fn refuse_too_deep(path: &std::path::Path, replay: &Replay) -> Result<(), CliError> {
    match replay.state.too_deep() {
        Some(depth) => Err(CliError::TooDeep { path: path.to_owned(), depth }),
        None => Ok(()),
    }
}

/// Every report covers what survived of a damaged or cut-off log; this warns of what was
/// lost, so no report passes it over in silence (`summarize` and `info` also give the
/// details in the report itself).
pub(crate) fn warn_if_damaged(path: &std::path::Path, replay: &Replay, progress: Progress) {
    let i = crate::integrity::of(replay);
    if i.clean {
        return;
    }
    let mut what = Vec::new();
    if !i.complete {
        what.push("cut off (no end-of-log record)".to_owned());
    } else if !i.undamaged() {
        what.push("damaged".to_owned());
    }
    if i.bytes_lost > 0 {
        what.push(format!("{} lost", table::size(i.bytes_lost)));
    }
    if i.events_in_bad_blocks > 0 {
        what.push(format!("{} in damaged blocks", table::plural(i.events_in_bad_blocks, "event")));
    }
    if i.recorder_lost_events > 0 {
        what.push(format!("{} lost by the recorder", table::plural(i.recorder_lost_events, "event")));
    }
    progress.warning(&format!(
        "{}: {}; the figures cover what was read (`replay-cli info` has the details)",
        path.display(),
        what.join(", ")
    ));
}

/// Which report to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    Summarize,
    Tree,
    Leaks,
    Efficiency,
    Instances,
}

/// Runs one report on the log of `args`, writing text or JSON to `out`. Returns the exit
/// status (0). `summarize` and `efficiency` symbolicate their sites as `replay-cli` runs
/// them; here `leaks` does not (see [`run_leaks`]). Shared options the report does not
/// read are refused ([`takes`]).
pub fn run(
    kind: ReportKind,
    args: &ReportArgs,
    progress: Progress,
    out: &mut dyn std::io::Write,
) -> Result<u8, CliError> {
    let default_symbols = callstacks::SymbolArgs::default;
    match kind {
        ReportKind::Leaks => {
            let symbols = callstacks::SymbolArgs { no_symbols: true, ..Default::default() };
            return run_leaks(args, &symbols, progress, out);
        }
        // As `replay-cli` runs them: their sites symbolicated.
        ReportKind::Summarize => return run_summarize(args, &default_symbols(), progress, out),
        ReportKind::Efficiency => return run_efficiency(args, &default_symbols(), progress, out),
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
    write_output(None, text.as_bytes(), out)
}

/// `summarize`, with its allocation sites symbolicated unless `symbols.no_symbols`.
pub fn run_summarize(
    args: &ReportArgs,
    symbols: &callstacks::SymbolArgs,
    progress: Progress,
    out: &mut dyn std::io::Write,
) -> Result<u8, CliError> {
    let symbolize = |r: &mut summarize::Summary, state: &ReplayState, syms: &mut Symbolizer| {
        if !r.sites.is_empty() {
            r.symbolize(state, syms);
        }
    };
    let report = SymbolizedReport {
        takes: takes::SUMMARIZE,
        build: summarize::build,
        symbolize,
        to_text: summarize::Summary::to_text,
    };
    run_symbolized(args, symbols, progress, out, report)
}

/// `efficiency`, with its allocation sites symbolicated unless `symbols.no_symbols`.
pub fn run_efficiency(
    args: &ReportArgs,
    symbols: &callstacks::SymbolArgs,
    progress: Progress,
    out: &mut dyn std::io::Write,
) -> Result<u8, CliError> {
    let symbolize = |r: &mut efficiency::Efficiency, state: &ReplayState, syms: &mut Symbolizer| {
        if !r.sites.is_empty() {
            r.symbolize(state, syms);
        }
    };
    let report = SymbolizedReport {
        takes: takes::EFFICIENCY,
        build: efficiency::build,
        symbolize,
        to_text: efficiency::Efficiency::to_text,
    };
    run_symbolized(args, symbols, progress, out, report)
}

/// A report whose sites are symbolicated unless `symbols.no_symbols`.
struct SymbolizedReport<T, S> {
    /// The shared options it takes.
    takes: Takes,
    build: fn(&Loaded) -> T,
    /// Names its sites.
    symbolize: S,
    to_text: fn(&T) -> String,
}

fn run_symbolized<T: Serialize + Send>(
    args: &ReportArgs,
    symbols: &callstacks::SymbolArgs,
    progress: Progress,
    out: &mut dyn std::io::Write,
    report: SymbolizedReport<T, impl FnOnce(&mut T, &ReplayState, &mut Symbolizer)>,
) -> Result<u8, CliError> {
    let SymbolizedReport { takes, build, symbolize, to_text } = report;
    takes.check(args)?;
    symbols.options()?;
    let loaded = load(args, progress)?;
    let start = Instant::now();
    let report = build_symbolized(&loaded, symbols, build, symbolize)?;
    tracing::debug!("built the {} report in {:.3} s", takes.command, start.elapsed().as_secs_f64());
    write_output(None, render(&report, args.json, to_text).as_bytes(), out)
}

/// Builds a report with `build` while another thread reads the log's module map for a
/// symbolizer (unless `symbols.no_symbols`), then names the report's sites with it
/// (`symbolize`).
fn build_symbolized<T: Send>(
    loaded: &Loaded,
    symbols: &callstacks::SymbolArgs,
    build: impl FnOnce(&Loaded) -> T + Send,
    symbolize: impl FnOnce(&mut T, &ReplayState, &mut Symbolizer),
) -> Result<T, CliError> {
    let (mut report, syms) = rayon::join(
        || build(loaded),
        || (!symbols.no_symbols).then(|| callstacks::symbolizer(loaded, symbols)).transpose(),
    );
    if let Some(mut syms) = syms? {
        symbolize(&mut report, loaded.state(), &mut syms);
    }
    Ok(report)
}

/// `leaks`, with its sites symbolicated unless `symbols.no_symbols`.
pub fn run_leaks(
    args: &ReportArgs,
    symbols: &callstacks::SymbolArgs,
    progress: Progress,
    out: &mut dyn std::io::Write,
) -> Result<u8, CliError> {
    takes::LEAKS.check(args)?;
    symbols.options()?;
    let loaded = load(args, progress)?;
    let start = Instant::now();
    let report = if symbols.no_symbols {
        leaks::build(&loaded)
    } else {
        let mut syms = callstacks::symbolizer(&loaded, symbols)?;
        leaks::build_symbolized(&loaded, &mut syms)
    };
    tracing::debug!("built the leaks report in {:.3} s", start.elapsed().as_secs_f64());
    write_output(None, render(&report, args.json, leaks::Leaks::to_text).as_bytes(), out)
}

/// `top`.
pub fn run_top(args: &top::TopArgs, progress: Progress, out: &mut dyn std::io::Write) -> Result<u8, CliError> {
    args.symbols.options()?;
    let loaded = load(&args.report_args(), progress)?;
    let report = top::build(&loaded, args)?;
    write_output(None, render(&report, args.json, top::Top::to_text).as_bytes(), out)
}

/// `frees`.
pub fn run_frees(args: &frees::FreesArgs, progress: Progress, out: &mut dyn std::io::Write) -> Result<u8, CliError> {
    args.symbols.options()?;
    let loaded = load(&args.report_args(), progress)?;
    let report = frees::build(&loaded, args)?;
    write_output(None, render(&report, args.json, frees::Frees::to_text).as_bytes(), out)
}

/// `flamegraph`: an SVG, or folded stacks with `--folded`, to `--output` or `out`.
pub fn run_flamegraph(
    args: &flame::FlameArgs,
    progress: Progress,
    out: &mut dyn std::io::Write,
) -> Result<u8, CliError> {
    select::refuse(args.refusals())?;
    args.symbols.options()?;
    if let Some(o) = &args.output {
        check_output(o)?;
    }
    let loaded = load(&args.report_args(), progress)?;
    let folded = flame::folded(&loaded, args)?;
    let bytes = if args.folded { folded.to_text().into_bytes() } else { flame::svg(&folded, args, &loaded.path)? };
    write_output(args.output.as_deref(), &bytes, out)
}

/// Fails early (before replaying) when `path` cannot be written: its directory is missing.
fn check_output(path: &std::path::Path) -> Result<(), CliError> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(CliError::Usage(format!("cannot write {}: no directory {}", path.display(), dir.display())));
    }
    if path.is_dir() {
        return Err(CliError::Usage(format!("cannot write {}: it is a directory", path.display())));
    }
    Ok(())
}

/// Writes a report's bytes to the file `output`, or to `out` without one (or for `-`).
/// Returns the exit status (0).
fn write_output(output: Option<&Path>, bytes: &[u8], out: &mut dyn std::io::Write) -> Result<u8, CliError> {
    match output {
        Some(p) if p != Path::new("-") => {
            std::fs::write(p, bytes).map_err(|error| CliError::Write { path: p.to_owned(), error })?
        }
        _ => out.write_all(bytes).and_then(|()| out.flush()).map_err(CliError::Output)?,
    }
    Ok(0)
}

/// The image format of `timeline`, from `--format` or the output's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImageFormat {
    Svg,
    Png,
}

/// `timeline`: writes the memory-over-time chart of the log of `args` to `output`.
pub fn run_timeline(
    args: &ReportArgs,
    chart: timeline_chart::ChartOptions,
    format: Option<ImageFormat>,
    output: &Path,
    progress: Progress,
    out: &mut dyn std::io::Write,
) -> Result<u8, CliError> {
    takes::TIMELINE.check(args)?;
    let format = match format {
        Some(f) => f,
        None => match output.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("png") => ImageFormat::Png,
            Some("svg") | None => ImageFormat::Svg,
            Some(other) => {
                return Err(CliError::Usage(format!(
                    "cannot tell the image format from `.{other}`: name the file .svg or .png, or give --format"
                )))
            }
        },
    };
    if format == ImageFormat::Png && !cfg!(feature = "png") {
        return Err(CliError::Usage(
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
    write_output(Some(output), &bytes, out)
}

#[cfg(feature = "png")]
fn png_bytes(svg: &str, progress: Progress) -> Result<Vec<u8>, CliError> {
    let (png, warning) = timeline_chart::png(svg).map_err(CliError::Usage)?;
    if let Some(w) = warning {
        progress.warning(&w);
    }
    Ok(png)
}

#[cfg(not(feature = "png"))]
fn png_bytes(_svg: &str, _progress: Progress) -> Result<Vec<u8>, CliError> {
    unreachable!("PNG is refused above without the `png` feature")
}

/// `export`: writes the log of `args` in `format` to `output` (stdout without one).
pub fn run_export(
    args: &ReportArgs,
    format: export::ExportFormat,
    output: Option<&Path>,
    symbols: &callstacks::SymbolArgs,
    progress: Progress,
    out: &mut dyn std::io::Write,
) -> Result<u8, CliError> {
    let takes = match format {
        export::ExportFormat::Json => takes::EXPORT_JSON,
        export::ExportFormat::Csv => takes::EXPORT_CSV,
        export::ExportFormat::ChromeTrace => takes::EXPORT_CHROME_TRACE,
        export::ExportFormat::Pprof => takes::EXPORT_PPROF,
    };
    let mut refusals = takes.refusals(args);
    if format != export::ExportFormat::Pprof {
        let only_pprof = "only `--format pprof` names callstacks";
        if !symbols.symbols.is_empty() {
            refusals.push(format!("{} does not take --symbols: {only_pprof}", takes.command));
        }
        if symbols.no_symbols {
            refusals.push(format!("{} does not take --no-symbols: {only_pprof}", takes.command));
        }
    }
    select::refuse(refusals)?;
    if format == export::ExportFormat::Pprof {
        symbols.options()?;
    }
    if let Some(p) = output.filter(|p| *p != Path::new("-")) {
        check_output(p)?;
    }
    let loaded = load(args, progress)?;
    if format == export::ExportFormat::Pprof {
        let (profile, _) = pprof::profile(&loaded, symbols, args.domain.is_some())?;
        return write_output(output, &pprof::encode(&profile), out);
    }
    let text = match format {
        export::ExportFormat::Json => to_json(&export::json(&loaded)),
        export::ExportFormat::Csv => {
            export::csv(&loaded).map_err(|e| CliError::Usage(format!("cannot build the CSV: {e}")))?
        }
        export::ExportFormat::ChromeTrace => {
            let mut s = serde_json::to_string(&export::chrome_trace(&loaded)).expect("JSON values serialize");
            s.push('\n');
            s
        }
        export::ExportFormat::Pprof => unreachable!("written above"),
    };
    write_output(output, text.as_bytes(), out)
}

/// `replay-cli report`: replays the log of `args` and writes the HTML page to `output`
/// (with `args.json`, the page's data island as JSON instead). Returns the exit status
/// (0). The output file is created before the replay, so a bad path fails at once.
pub fn run_html(
    args: &ReportArgs,
    symbols: &callstacks::SymbolArgs,
    output: &std::path::Path,
    opts: &html::HtmlOptions,
    progress: Progress,
) -> Result<u8, CliError> {
    takes::REPORT.check(args)?;
    let write_error = |error| CliError::Write { path: output.to_owned(), error };
    if output.is_dir() {
        return Err(write_error(std::io::Error::other("it is a directory")));
    }
    symbols.options()?;
    let file = std::fs::File::create(output).map_err(write_error)?;
    let built = load(args, progress).and_then(|mut loaded| {
        loaded.sel.limit = Some(args.limit.unwrap_or(html::DEFAULT_LIMIT));
        let start = Instant::now();
        let mut syms = callstacks::symbolizer(&loaded, symbols)?;
        let report = html::build(&loaded, opts, &mut syms)?;
        tracing::debug!("symbolication: {}", report.symbols.text());
        let text = if args.json { to_json(&html::island(&report)) } else { html::render(&report) };
        tracing::debug!("built the HTML report ({} bytes) in {:.3} s", text.len(), start.elapsed().as_secs_f64());
        Ok(text)
    });
    let text = match built {
        Ok(t) => t,
        Err(e) => {
            drop(file);
            let _ = std::fs::remove_file(output);
            return Err(e);
        }
    };
    let mut w = std::io::BufWriter::new(file);
    std::io::Write::write_all(&mut w, text.as_bytes())
        .and_then(|()| std::io::Write::flush(&mut w))
        .map_err(write_error)?;
    Ok(0)
}

fn render<T: Serialize>(report: &T, json: bool, text: impl Fn(&T) -> String) -> String {
    if json {
        to_json(report)
    } else {
        text(report)
    }
}

/// Pretty JSON, newline-terminated.
pub fn to_json<T: Serialize>(report: &T) -> String {
    let mut s = serde_json::to_string_pretty(report).expect("reports serialize");
    s.push('\n');
    s
}

/// Bytes and allocations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Amount {
    pub bytes: u64,
    pub count: u64,
}

impl Amount {
    pub fn new(bytes: u64, count: u64) -> Amount {
        Amount { bytes, count }
    }

    /// `4.0 MiB in 12 allocations`.
    pub fn text(&self) -> String {
        format!("{} in {}", table::size(self.bytes), table::plural(self.count, "allocation"))
    }
}

/// What rows are sorted by (see [`sort_rows`]).
pub struct Keys<'a> {
    pub bytes: u64,
    pub count: u64,
    pub name: &'a str,
    pub instances: u64,
    pub total: u64,
    /// Bytes at the peak: the tie-break after `bytes` (0 where it does not apply).
    pub peak: u64,
}

/// Sorts rows by `sort` (largest first; names A to Z), then by bytes, bytes at the
/// peak, total bytes and name.
pub fn sort_rows<T>(rows: &mut [T], sort: SortKey, keys: impl Fn(&T) -> Keys<'_>) {
    rows.sort_by(|a, b| {
        let (a, b) = (keys(a), keys(b));
        let primary = match sort {
            SortKey::Bytes => b.bytes.cmp(&a.bytes),
            SortKey::Count => b.count.cmp(&a.count),
            SortKey::Name => a.name.cmp(b.name),
            SortKey::Instances => b.instances.cmp(&a.instances),
            SortKey::Total => b.total.cmp(&a.total),
        };
        primary
            .then(b.bytes.cmp(&a.bytes))
            .then(b.peak.cmp(&a.peak))
            .then(b.total.cmp(&a.total))
            .then_with(|| a.name.cmp(b.name))
    });
}

/// A memory domain as the log defines it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainRef {
    pub id: u32,
    pub name: String,
    /// `heap`, `pool`, `gpu-local`, `gpu-shared`, `other` or `unknown`.
    pub kind: String,
    /// Capacity in bytes (0 when not given).
    pub capacity: u64,
    /// The domain whose memory this one sub-allocates (a pool within the heap), if any.
    pub parent: Option<u32>,
    pub parent_name: Option<String>,
    /// Not within another domain: sums over top-level domains count no byte twice.
    pub top_level: bool,
}

pub fn domain_ref(state: &ReplayState, id: u32) -> DomainRef {
    let info = state.domain_info.get(&id);
    DomainRef {
        id,
        name: state.domain_name(id),
        kind: info
            .map_or(if id == memreplay_format::HEAP_DOMAIN { "heap" } else { "unknown" }, |d| d.kind.name())
            .into(),
        capacity: info.map_or(0, |d| d.capacity),
        parent: info.and_then(|d| d.parent),
        parent_name: info.and_then(|d| d.parent).map(|p| state.domain_name(p)),
        top_level: state.is_top_level_domain(id),
    }
}

impl DomainRef {
    /// `heap`, `entity pool (pool within heap, capacity 18.8 KiB)`.
    pub fn title(&self) -> String {
        let mut facts = vec![self.kind.clone()];
        if let Some(p) = &self.parent_name {
            facts[0] = format!("{} within {p}", self.kind);
        }
        if self.capacity > 0 {
            facts.push(format!("capacity {}", table::size(self.capacity)));
        }
        if facts == ["heap"] && self.name == "heap" {
            return self.name.clone();
        }
        format!("{} ({})", self.name, facts.join(", "))
    }
}
