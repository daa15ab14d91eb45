//! The command line: clap's view of each command, composed from shared groups of options
//! (`#[command(flatten)]`), and its translation into the report library's plain options.
//! Clap stays here: the library takes [`ReportOptions`], [`TopOptions`] and the like.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use memreplay_report as report;
use report::{At, CheckOptions, DiffOptions, FlameOptions, FreesOptions, MinDelta, ReportOptions, SymbolOptions};
use report::{ChartBy, ExportFormat, ImageFormat, Metric, SortKey, TopOptions};

/// `--domain`.
#[derive(Debug, Clone, Default, Args)]
pub struct DomainArg {
    /// Only this memory domain (name or id: heap, vram.local, ...). Default: every domain,
    /// each reported on its own.
    #[arg(long, value_name = "NAME")]
    pub domain: Option<String>,
}

/// `--thread`.
#[derive(Debug, Clone, Default, Args)]
pub struct ThreadArg {
    /// Only allocations made by this thread (its name, stream number or OS thread id).
    #[arg(long, value_name = "NAME|ID")]
    pub thread: Option<String>,
}

/// `--at`.
#[derive(Debug, Clone, Default, Args)]
pub struct AtArg {
    /// Figures at a label (by name) or at the start of frame N (frame:N) instead of at
    /// the end.
    #[arg(long, value_name = "LABEL|frame:N", value_parser = report::parse_at)]
    pub at: Option<At>,
}

/// `--context`.
#[derive(Debug, Clone, Default, Args)]
pub struct ContextArg {
    /// Only allocations in this context and its descendants, by path
    /// ("Level:Forest/Textures:Forest"; --by peak or live).
    #[arg(long, value_name = "PATH")]
    pub context: Option<String>,
}

/// `--json`.
#[derive(Debug, Clone, Default, Args)]
pub struct JsonArg {
    /// Machine-readable JSON output (exact integers; see JSON.md).
    #[arg(long)]
    pub json: bool,
}

/// `--symbols DIR` (repeatable) and `--no-symbols`.
#[derive(Debug, Clone, Default, Args)]
pub struct SymbolArgs {
    /// Also look for binaries and debug files here (repeatable): by file name, by the
    /// recorded path below DIR, and by build id (DIR/.build-id/xx/rest[.debug]). For logs
    /// recorded on another machine or a console.
    #[arg(long = "symbols", value_name = "DIR")]
    pub symbols: Vec<PathBuf>,
    /// Load no binaries: frames show as module+0xoffset.
    #[arg(long)]
    pub no_symbols: bool,
}

impl SymbolArgs {
    pub fn options(&self) -> SymbolOptions {
        SymbolOptions { search_dirs: self.symbols.clone(), disabled: self.no_symbols, ..SymbolOptions::default() }
    }
}

/// The options every report takes, and the log.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The log to read.
    #[arg(value_name = "LOG")]
    pub log: PathBuf,
    #[command(flatten)]
    pub domain: DomainArg,
    #[command(flatten)]
    pub thread: ThreadArg,
    #[command(flatten)]
    pub at: AtArg,
    #[command(flatten)]
    pub json: JsonArg,
    /// Deepest context level shown (1 = top-level contexts only).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub depth: Option<u32>,
    /// Hide rows with fewer bytes than this (4096, 64KiB, 1MiB; default 0).
    #[arg(long, value_name = "BYTES", value_parser = report::parse_bytes)]
    pub min_bytes: Option<u64>,
    /// Order of lists and of the tree's children (default: bytes).
    #[arg(long, value_enum)]
    pub sort: Option<SortArg>,
    /// Rows per list (default 20; 10 per list in `summarize`; 0: no limit).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

impl ReportArgs {
    pub fn options(&self) -> ReportOptions {
        ReportOptions {
            log: self.log.clone(),
            domain: self.domain.domain.clone(),
            thread: self.thread.thread.clone(),
            at: self.at.at.clone(),
            json: self.json.json,
            depth: self.depth,
            min_bytes: self.min_bytes,
            sort: self.sort.map(SortKey::from),
            limit: self.limit,
        }
    }
}

/// A report whose allocation sites are symbolicated.
#[derive(Debug, Args)]
pub struct SymbolizedReportArgs {
    #[command(flatten)]
    pub report: ReportArgs,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

/// `--sort`: the order of lists and of the tree's children (largest first, names A–Z).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SortArg {
    /// Bytes (at the point shown, or the report's main figure).
    Bytes,
    /// Allocation counts.
    Count,
    /// Context path or name, A to Z.
    Name,
    /// Instances (contexts entered with the instance flag).
    Instances,
    /// Bytes allocated over the whole recording.
    Total,
}

impl From<SortArg> for SortKey {
    fn from(s: SortArg) -> SortKey {
        match s {
            SortArg::Bytes => SortKey::Bytes,
            SortArg::Count => SortKey::Count,
            SortArg::Name => SortKey::Name,
            SortArg::Instances => SortKey::Instances,
            SortArg::Total => SortKey::Total,
        }
    }
}

/// `--by`: what sites are ranked and drawn by.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum MetricArg {
    /// Bytes held at the domain's peak.
    Peak,
    /// Bytes live at the end (or at `--at`).
    Live,
    /// Bytes allocated over the whole recording.
    Total,
    /// Allocations made over the whole recording.
    Count,
    /// Temporaries: allocations freed before their thread allocated again.
    Temporaries,
}

impl From<MetricArg> for Metric {
    fn from(m: MetricArg) -> Metric {
        match m {
            MetricArg::Peak => Metric::Peak,
            MetricArg::Live => Metric::Live,
            MetricArg::Total => Metric::Total,
            MetricArg::Count => Metric::Count,
            MetricArg::Temporaries => Metric::Temporaries,
        }
    }
}

/// `top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// The log to read.
    #[arg(value_name = "LOG")]
    pub log: PathBuf,
    /// Rank by: bytes at the domain's peak, live at the end (or --at), allocated in all,
    /// allocation count, or temporaries.
    #[arg(long, value_enum, default_value = "peak")]
    pub by: MetricArg,
    /// One row per whole callstack instead of per allocating function.
    #[arg(long)]
    pub stacks: bool,
    #[command(flatten)]
    pub domain: DomainArg,
    #[command(flatten)]
    pub thread: ThreadArg,
    #[command(flatten)]
    pub context: ContextArg,
    #[command(flatten)]
    pub at: AtArg,
    /// Hide rows with fewer bytes than this (of the ranking figure).
    #[arg(long, value_name = "BYTES", value_parser = report::parse_bytes, default_value = "0")]
    pub min_bytes: u64,
    /// Rows per domain (default 20; 0: no limit).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub json: JsonArg,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

impl TopArgs {
    pub fn options(&self) -> TopOptions {
        TopOptions {
            log: self.log.clone(),
            by: self.by.into(),
            stacks: self.stacks,
            domain: self.domain.domain.clone(),
            thread: self.thread.thread.clone(),
            context: self.context.context.clone(),
            at: self.at.at.clone(),
            min_bytes: self.min_bytes,
            limit: self.limit,
            json: self.json.json,
            symbols: self.symbols.options(),
        }
    }
}

/// `gpu`.
#[derive(Debug, Args)]
pub struct GpuArgs {
    /// The log to read (or --vma).
    #[arg(value_name = "LOG", required_unless_present = "vma", conflicts_with = "vma")]
    pub log: Option<PathBuf>,
    /// A VMA (vmaBuildStatsString) or D3D12MA (BuildStatsString) JSON dump to read instead
    /// of a log; given twice, the two dumps are compared (blocks and bytes per memory type).
    #[arg(long, value_name = "DUMP", num_args = 1, action = clap::ArgAction::Append)]
    pub vma: Vec<PathBuf>,
    /// Read the live resources at a label, at the start of frame N (frame:N), or at each
    /// GPU domain's peak (peak) instead of at the end.
    #[arg(long, value_name = "LABEL|frame:N|peak", value_parser = report::parse_gpu_at)]
    pub at: Option<report::GpuAt>,
    /// Only this GPU domain (name or id) and the domains that sub-allocate inside it.
    #[arg(long, value_name = "NAME")]
    pub domain: Option<String>,
    /// Only resources allocated in this context and its descendants, by path
    /// ("Level:Forest/Textures:Forest"); the block map still shows whole blocks.
    #[arg(long, value_name = "PATH")]
    pub context: Option<String>,
    /// The screen size the render targets are compared with, over the one the game
    /// recorded (1920x1080).
    #[arg(long, value_name = "WIDTHxHEIGHT", value_parser = report::parse_screen)]
    pub screen: Option<(u32, u32)>,
    /// Resources below this size are "small" (4096, 64KiB, 1MiB; default 64KiB).
    #[arg(long, value_name = "BYTES", value_parser = report::parse_bytes)]
    pub small: Option<u64>,
    /// Rows per list (default 20; 0: no limit).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub json: JsonArg,
    /// Also write the block map (each block of a sub-allocating domain drawn to scale with
    /// its sub-allocations) as an SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

impl GpuArgs {
    pub fn options(&self) -> report::GpuOptions {
        report::GpuOptions {
            log: self.log.clone(),
            dumps: self.vma.clone(),
            svg: self.svg.is_some(),
            at: self.at.clone(),
            domain: self.domain.clone(),
            context: self.context.clone(),
            screen: self.screen,
            small: self.small,
            limit: self.limit,
            json: self.json.json,
        }
    }
}

/// `frees`.
#[derive(Debug, Args)]
pub struct FreesArgs {
    /// The log to read.
    #[arg(value_name = "LOG")]
    pub log: PathBuf,
    /// The allocation site: a callstack id (as `top --json` and `leaks` list them), or an
    /// allocating function (its full name, or a part of it).
    #[arg(value_name = "SITE")]
    pub site: String,
    /// One row per whole free callstack instead of per freeing function.
    #[arg(long)]
    pub stacks: bool,
    #[command(flatten)]
    pub domain: DomainArg,
    /// Free sites listed per allocation site (default 20; 0: no limit).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub json: JsonArg,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

impl FreesArgs {
    pub fn options(&self) -> FreesOptions {
        FreesOptions {
            log: self.log.clone(),
            site: self.site.clone(),
            stacks: self.stacks,
            domain: self.domain.domain.clone(),
            limit: self.limit,
            json: self.json.json,
            symbols: self.symbols.options(),
        }
    }
}

/// `flamegraph`.
#[derive(Debug, Args)]
pub struct FlameArgs {
    /// The log to read.
    #[arg(value_name = "LOG")]
    pub log: PathBuf,
    /// Weigh stacks by bytes at the domain's peak, live at the end (or --at), or
    /// allocated in all (also: count, temporaries: allocations).
    #[arg(long, value_enum, default_value = "peak")]
    pub by: MetricArg,
    /// Folded stacks (text) instead of an SVG.
    #[arg(long)]
    pub folded: bool,
    /// Put each stack under its context path (Level:Forest;Textures:Forest;…) as root
    /// frames (--by peak or live).
    #[arg(long)]
    pub contexts: bool,
    /// Write to this file instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Title of the SVG.
    #[arg(long)]
    pub title: Option<String>,
    #[command(flatten)]
    pub domain: DomainArg,
    #[command(flatten)]
    pub thread: ThreadArg,
    #[command(flatten)]
    pub context: ContextArg,
    #[command(flatten)]
    pub at: AtArg,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

impl FlameArgs {
    pub fn options(&self) -> FlameOptions {
        FlameOptions {
            log: self.log.clone(),
            by: self.by.into(),
            folded: self.folded,
            contexts: self.contexts,
            title: self.title.clone(),
            domain: self.domain.domain.clone(),
            thread: self.thread.thread.clone(),
            context: self.context.context.clone(),
            at: self.at.at.clone(),
            symbols: self.symbols.options(),
        }
    }
}

/// `diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The log before (with --from/--to, the only log).
    #[arg(value_name = "BEFORE")]
    pub before: PathBuf,
    /// The log after.
    #[arg(value_name = "AFTER")]
    pub after: Option<PathBuf>,
    /// Compare both logs at this label (or frame:N) instead of at their ends.
    #[arg(long, value_name = "LABEL|frame:N", value_parser = report::parse_at)]
    pub at: Option<At>,
    /// One log: what was allocated after this label and is still live at --to.
    #[arg(long, value_name = "LABEL")]
    pub from: Option<String>,
    /// One log: the label where what --from allocated is looked at.
    #[arg(long, value_name = "LABEL")]
    pub to: Option<String>,
    /// Hide rows whose change is smaller than this: bytes (64KiB) or percent (5%).
    #[arg(long, value_name = "BYTES|PERCENT", value_parser = report::parse_min_delta)]
    pub min_delta: Option<MinDelta>,
    #[command(flatten)]
    pub domain: DomainArg,
    /// Rows per list (default 25; 0: no limit).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Match allocation sites by whole symbolicated callstack instead of by allocating
    /// function.
    #[arg(long)]
    pub stacks: bool,
    #[command(flatten)]
    pub json: JsonArg,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

impl DiffArgs {
    pub fn options(&self) -> DiffOptions {
        DiffOptions {
            before: self.before.clone(),
            after: self.after.clone(),
            at: self.at.clone(),
            from: self.from.clone(),
            to: self.to.clone(),
            min_delta: self.min_delta,
            domain: self.domain.domain.clone(),
            limit: self.limit,
            stacks: self.stacks,
            json: self.json.json,
            symbols: self.symbols.options(),
        }
    }
}

/// `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The log to check.
    #[arg(value_name = "LOG")]
    pub log: PathBuf,
    /// The budget (TOML; see BUDGET.md).
    #[arg(long, value_name = "FILE")]
    pub budget: PathBuf,
    /// A log to measure growth against (for max_growth_* rules).
    #[arg(long, value_name = "LOG")]
    pub baseline: Option<PathBuf>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON results to this file.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
    /// Also write the results as JUnit XML (one test case per rule) to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also print GitHub Actions annotations: an error per broken rule, pointing to its
    /// line of the budget.
    #[arg(long)]
    pub github: bool,
    /// Kinds of damage the log and the baseline may have without failing the check
    /// (comma-separated): truncated, corrupt, bad-blocks, unknown-blocks,
    /// trailing-bytes, lost-events. Any other damage exits with status 3.
    #[arg(long, value_name = "KINDS", value_delimiter = ',')]
    pub allow_damage: Vec<String>,
}

impl CheckArgs {
    /// The options, with the budget's text as read from its file.
    pub fn options(&self, budget: String) -> CheckOptions {
        CheckOptions {
            log: self.log.clone(),
            budget_name: self.budget.display().to_string(),
            budget,
            baseline: self.baseline.clone(),
            json: self.json,
            github: self.github,
            allow_damage: self.allow_damage.clone(),
        }
    }
}

/// `timeline`.
#[derive(Debug, Args)]
pub struct TimelineArgs {
    #[command(flatten)]
    pub report: ReportArgs,
    /// The image to write (.svg or .png; `-` for SVG on stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Image format (default: from the file's extension).
    #[arg(long, value_enum)]
    pub format: Option<ImageArg>,
    /// One line per domain, or per top-level context of one domain (`--domain`, default
    /// the heap).
    #[arg(long, value_enum, default_value = "domain")]
    pub by: ChartByArg,
    /// Image size in pixels.
    #[arg(long, default_value_t = 1200)]
    pub width: u32,
    #[arg(long, default_value_t = 600)]
    pub height: u32,
}

/// `timeline --format`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ImageArg {
    Svg,
    Png,
}

impl From<ImageArg> for ImageFormat {
    fn from(f: ImageArg) -> ImageFormat {
        match f {
            ImageArg::Svg => ImageFormat::Svg,
            ImageArg::Png => ImageFormat::Png,
        }
    }
}

/// `timeline --by`: what the chart draws one line for.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ChartByArg {
    /// Each domain (and what the OS saw of the process, when sampled).
    Domain,
    /// Each top-level context of one domain (`--domain`, default the heap).
    Context,
}

impl From<ChartByArg> for ChartBy {
    fn from(b: ChartByArg) -> ChartBy {
        match b {
            ChartByArg::Domain => ChartBy::Domain,
            ChartByArg::Context => ChartBy::Context,
        }
    }
}

/// `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub report: ReportArgs,
    /// What to write.
    #[arg(long, value_enum)]
    pub format: ExportArg,
    /// The file to write (default: stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Where to find binaries and debug info (pprof only).
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

/// `export --format`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportArg {
    /// The whole context tree and the series over time.
    Json,
    /// One row per (domain, context path).
    Csv,
    /// Counters and labels in the Trace Event Format (Perfetto, chrome://tracing).
    ChromeTrace,
    /// A gzipped pprof `profile.proto` of the allocation sites.
    Pprof,
}

impl From<ExportArg> for ExportFormat {
    fn from(f: ExportArg) -> ExportFormat {
        match f {
            ExportArg::Json => ExportFormat::Json,
            ExportArg::Csv => ExportFormat::Csv,
            ExportArg::ChromeTrace => ExportFormat::ChromeTrace,
            ExportArg::Pprof => ExportFormat::Pprof,
        }
    }
}

/// `report`.
#[derive(Debug, Args)]
pub struct HtmlArgs {
    #[command(flatten)]
    pub report: ReportArgs,
    /// The HTML file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Nodes of the context tree kept in the page; the rest of each context's
    /// children are folded into one "elided" node that keeps the totals.
    #[arg(long, value_name = "N", default_value_t = report::DEFAULT_MAX_NODES as u64,
          value_parser = clap::value_parser!(u64).range(2..))]
    pub max_nodes: u64,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

/// `--unwind`: how the recorder captures callstacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UnwindArg {
    /// The unwind tables where the recorder caches their rules (x86_64 Linux, glibc 2.35
    /// or later: about as fast as frame pointers), frame pointers elsewhere.
    Auto,
    /// Walk the frame pointers (fast; stacks stop at the first function built without them).
    Fp,
    /// The unwind tables (cached; exact without frame pointers).
    Unwinder,
}

/// `--compression`: checked here, so that a wrong value stops `record` before the
/// program runs (the recorder checks it again).
fn compression_option(v: &str) -> Result<String, String> {
    match memreplay_format::PayloadCompression::from_option(v) {
        Some(_) => Ok(v.to_owned()),
        None => Err(format!("expected {}", memreplay_format::COMPRESSION_VALUES)),
    }
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// `record`: the recorder's options, and the program to run.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The log to write (overwritten). Default: the program's name with `.mrl`, here.
    #[arg(short, long, value_name = "LOG")]
    pub output: Option<PathBuf>,
    /// The library to preload. Default: $MEMREPLAY_PRELOAD, else `libmemreplay.so` next
    /// to this executable (`cargo build -p memreplay-capi` puts it there).
    #[arg(long, value_name = "PATH")]
    pub preload: Option<PathBuf>,
    /// Allocation callstacks (recorder option `callstacks`).
    #[arg(long, value_name = "ON|OFF")]
    pub stacks: Option<OnOff>,
    /// Free callstacks, for `frees` (recorder option `free-callstacks`).
    #[arg(long, value_name = "ON|OFF")]
    pub free_stacks: Option<OnOff>,
    /// No free callstacks (the recorder's default): `--free-stacks off`.
    #[arg(long, conflicts_with = "free_stacks")]
    pub no_free_stacks: bool,
    /// Most frames a callstack keeps, 1 to 64 (recorder option `depth`).
    #[arg(long, value_name = "N")]
    pub depth: Option<u32>,
    /// How callstacks are captured (recorder option `unwind`): `fp` needs the program
    /// built with frame pointers (`-fno-omit-frame-pointer`), `unwinder` does not;
    /// `auto` is `unwinder` where its rules are cached (x86_64, glibc 2.35 or later),
    /// else `fp`.
    #[arg(long, value_name = "HOW", default_value = "auto")]
    pub unwind: UnwindArg,
    /// How the log's blocks are compressed (recorder option `compression`): `lz4` (the
    /// default), `zstd` (level 1: about a third smaller on a real program's log, for
    /// about 8 ns more encoder CPU per event) or `zstd:LEVEL` (1 to 19); `lz4-columns`,
    /// `zstd-columns` or `zstd-columns:LEVEL` gather each block's fields in columns
    /// first (a tenth to a quarter smaller again). A zstd log needs a reader of format
    /// 1.4 or later, a columns log one of 1.6.
    #[arg(long, value_name = "METHOD", value_parser = compression_option)]
    pub compression: Option<String>,
    /// More recorder options, as in MEMREPLAY_OPTIONS (`key=value,...`), passed through
    /// after those of the flags above.
    #[arg(long, value_name = "OPTIONS")]
    pub options: Option<String>,
    /// The program and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "PROGRAM ARGS")]
    pub command: Vec<std::ffi::OsString>,
}

impl RecordArgs {
    /// MEMREPLAY_OPTIONS for the flags; `cached_unwinder`: whether the recorder caches
    /// unwind rules on this system (what `--unwind auto` picks).
    pub fn recorder_options(&self, cached_unwinder: bool) -> String {
        let on = |v: OnOff| if v == OnOff::On { "on" } else { "off" };
        let mut o = Vec::new();
        if let Some(v) = self.stacks {
            o.push(format!("callstacks={}", on(v)));
        }
        if self.no_free_stacks {
            o.push("free-callstacks=off".to_owned());
        } else if let Some(v) = self.free_stacks {
            o.push(format!("free-callstacks={}", on(v)));
        }
        if let Some(d) = self.depth {
            o.push(format!("depth={d}"));
        }
        let unwinder = match self.unwind {
            UnwindArg::Auto => cached_unwinder,
            UnwindArg::Fp => false,
            UnwindArg::Unwinder => true,
        };
        o.push(format!("unwind={}", if unwinder { "unwinder" } else { "fp" }));
        if let Some(c) = &self.compression {
            o.push(format!("compression={c}"));
        }
        if let Some(extra) = self.options.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            o.push(extra.to_owned());
        }
        o.join(",")
    }
}

/// `recompress`: the log to read, the one to write, and how.
#[derive(Debug, Args)]
pub struct RecompressArgs {
    /// The log to read.
    #[arg(value_name = "LOG")]
    pub log: PathBuf,
    /// The log to write (overwritten; not LOG itself).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// How the blocks are stored: `zstd-columns` (the default: the smallest, a real
    /// program's log in about 40 % less than LZ4, and read about as fast),
    /// `zstd-columns:LEVEL` (1 to 19), `zstd` or `zstd:LEVEL`, `lz4-columns` or `lz4`
    /// (the recorder's default). A zstd log needs a reader of format 1.4 or later, a
    /// columns log one of 1.6.
    #[arg(long, value_name = "METHOD", default_value = "zstd-columns", value_parser = compression_option)]
    pub compression: String,
    /// Threads that compress, 1 to 256 (default: one per CPU).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
}
