//! `replay-cli`: the command line over the `replay_cli` library.
//!
//! Exit status: 0 on success; 1 when `--strict` finds a truncated or damaged log, or
//! `check` finds a broken budget; 2 for bad arguments, a log that cannot be read at all,
//! a budget that cannot be read, options naming what the log does not have (a domain,
//! thread, label or frame), and options the command does not take; 3 when `check` or
//! `diff` reads a damaged log (`check`: unless the damage is allowed).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use replay_cli::check::CheckArgs;
use replay_cli::report::callstacks::SymbolArgs;
use replay_cli::report::diff::DiffArgs;
use replay_cli::report::export::ExportFormat;
use replay_cli::report::timeline_chart::{ChartBy, ChartOptions};
use replay_cli::report::{self, flame::FlameArgs, frees::FreesArgs, top::TopArgs};
use replay_cli::report::{ImageFormat, Progress, ReportArgs, ReportKind};

#[derive(Debug, Parser)]
#[command(name = "replay-cli", version, about = "Reads memreplay logs (.mrl) and reports on them")]
struct Cli {
    /// Diagnostics on stderr: -v for timings and progress of the replay, -vv for more.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Memory a command may use before it stops with an error saying what grew (4g,
    /// 512MiB, ...). Default: half of the machine's memory or of the process's limits,
    /// the smaller. Also MEMREPLAY_MAX_MEMORY.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_max_memory)]
    max_memory: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Prints a log's header, totals, threads, event counts, labels and integrity.
    Info {
        /// The log to read.
        log: PathBuf,
        /// Machine-readable JSON output.
        #[arg(long)]
        json: bool,
        /// Exit with status 1 if the log is truncated or damaged.
        #[arg(long)]
        strict: bool,
    },
    /// Where the memory went: capture facts, each domain's live, peak and total figures,
    /// top contexts at the peak and at the end, instance averages, container efficiency,
    /// leaks and temporaries, and the allocation sites (symbolicated) with where their
    /// blocks were freed.
    Summarize(SymbolizedReportArgs),
    /// The context tree of each domain: inclusive and own bytes and counts, the peak,
    /// instances and bytes per instance, total allocated.
    Tree(ReportArgs),
    /// Allocations live at the end, by context and by allocation callstack, with the
    /// callstacks symbolicated.
    Leaks(SymbolizedReportArgs),
    /// Used / capacity of the containers that report their usage: per context, per
    /// allocation site (symbolicated), and the worst containers.
    Efficiency(SymbolizedReportArgs),
    /// Instance contexts (one texture, one mesh): bytes per instance at the point, at the
    /// peak and allocated in all.
    Instances(ReportArgs),
    /// What changed between two logs (per domain, context and allocation site), or with
    /// --from/--to what one log allocated between two labels and still held at the second.
    /// Exits 3 (after the report) when a log is damaged.
    Diff(DiffArgs),
    /// Holds a log to a memory budget (TOML, see BUDGET.md) and, with --baseline, to a
    /// limit on growth: exit 0 within budget, 1 a budget broken, 2 the check could not run,
    /// 3 the log or the baseline is damaged (truncated, corrupt, events lost) in a way
    /// the budget's `[integrity] allow` and --allow-damage do not allow.
    Check(CheckArgs),
    /// Allocation sites, symbolicated, by allocating function (or whole callstack with
    /// --stacks), ranked by bytes at the peak, live, allocated, count or temporaries.
    Top(TopArgs),
    /// Where an allocation site's blocks were freed from (free callstacks), symbolicated.
    Frees(FreesArgs),
    /// A flame graph of the allocation callstacks (SVG), or folded stacks with --folded.
    Flamegraph(FlameArgs),
    /// Memory over time as an image (SVG; PNG with the `png` feature): per domain, or per
    /// top-level context of one domain, with labels, peaks, time and frames.
    Timeline(TimelineArgs),
    /// The replayed log for other tools: JSON (the whole tree and the series over time),
    /// CSV (one row per context path), a Chrome/Perfetto trace (counters and labels), or a
    /// gzipped pprof profile of the allocation sites (symbolicated).
    Export(ExportArgs),
    /// One self-contained HTML page to explore the log in a browser: the timeline,
    /// a treemap and a sortable, filterable table of the context tree, leaks, top
    /// allocation sites and the summary. Loads nothing from the network.
    Report {
        #[command(flatten)]
        args: ReportArgs,
        /// The HTML file to write.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// Nodes of the context tree kept in the page; the rest of each context's
        /// children are folded into one "elided" node that keeps the totals.
        #[arg(long, value_name = "N", default_value_t = report::html::DEFAULT_MAX_NODES as u64,
              value_parser = clap::value_parser!(u64).range(2..))]
        max_nodes: u64,
        #[command(flatten)]
        symbols: SymbolArgs,
    },
}

#[derive(Debug, Args)]
struct TimelineArgs {
    #[command(flatten)]
    report: ReportArgs,
    /// The image to write (.svg or .png; `-` for SVG on stdout).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Image format (default: from the file's extension).
    #[arg(long, value_enum)]
    format: Option<ImageFormat>,
    /// One line per domain, or per top-level context of one domain (`--domain`, default
    /// the heap).
    #[arg(long, value_enum, default_value_t = ChartBy::Domain)]
    by: ChartBy,
    /// Image size in pixels.
    #[arg(long, default_value_t = 1200)]
    width: u32,
    #[arg(long, default_value_t = 600)]
    height: u32,
}

#[derive(Debug, Args)]
struct ExportArgs {
    #[command(flatten)]
    report: ReportArgs,
    /// What to write.
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// The file to write (default: stdout).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Where to find binaries and debug info (pprof only).
    #[command(flatten)]
    symbols: SymbolArgs,
}

#[derive(Debug, Args)]
struct SymbolizedReportArgs {
    #[command(flatten)]
    report: ReportArgs,
    #[command(flatten)]
    symbols: SymbolArgs,
}

/// The command's feedback on stderr: a progress bar while a log replays (when stderr is
/// a terminal), and warnings, one line each.
struct Terminal(std::sync::Mutex<Option<indicatif::ProgressBar>>);

static TERMINAL: Terminal = Terminal(std::sync::Mutex::new(None));

impl report::Feedback for Terminal {
    fn progress(&self, done: u64, total: u64) {
        if !std::io::stderr().is_terminal() {
            return;
        }
        let mut bar = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let bar = bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::with_draw_target(Some(0), indicatif::ProgressDrawTarget::stderr());
            let style = indicatif::ProgressStyle::with_template(
                "replaying {bar:40.cyan/blue} {human_pos}/{human_len} events, {eta} left",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            bar.set_style(style);
            bar
        });
        bar.set_length(total);
        bar.set_position(done);
    }

    fn replayed(&self) {
        // Cleared as soon as the replay is over, before any warning.
        if let Some(bar) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
    }

    fn warning(&self, line: &str) {
        eprintln!("replay-cli: warning: {line}");
    }
}

fn init_tracing(verbose: u8) {
    if verbose == 0 {
        return;
    }
    let filter = if verbose == 1 { "replay_cli=debug,memreplay_replay=debug,memreplay_format=debug" } else { "trace" };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(verbose > 1)
        .try_init();
}

fn parse_max_memory(s: &str) -> Result<u64, String> {
    match report::select::parse_bytes(s)? {
        0 => Err("the memory ceiling must be above 0".into()),
        n => Ok(n),
    }
}

/// The memory ceiling: `--max-memory`, else `MEMREPLAY_MAX_MEMORY`, else the default.
fn set_memory_ceiling(flag: Option<u64>) -> Result<(), replay_cli::CliError> {
    let from_env = match std::env::var("MEMREPLAY_MAX_MEMORY") {
        Ok(v) => {
            Some(parse_max_memory(&v).map_err(|e| replay_cli::CliError::Usage(format!("MEMREPLAY_MAX_MEMORY: {e}")))?)
        }
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(replay_cli::CliError::Usage("MEMREPLAY_MAX_MEMORY is not valid UTF-8".into()))
        }
    };
    if let Some(limit) = flag.or(from_env).or_else(memreplay_replay::default_ceiling) {
        memreplay_replay::set_ceiling(memreplay_replay::Ceiling { limit, in_use: heap::in_use });
    }
    heap::set_hard_limit(memreplay_replay::process_limit());
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    if let Err(e) = set_memory_ceiling(cli.max_memory) {
        eprintln!("replay-cli: {e}");
        return ExitCode::from(replay_cli::EXIT_ERROR);
    }
    let out = &mut std::io::stdout().lock();
    let result = match cli.command {
        Command::Info { log, json, strict } => {
            let opts = replay_cli::InfoOptions { json, strict };
            replay_cli::run_info(&log, opts, out)
        }
        Command::Summarize(a) => report::run_summarize(&a.report, &a.symbols, Progress::To(&TERMINAL), out),
        Command::Tree(args) => report::run(ReportKind::Tree, &args, Progress::To(&TERMINAL), out),
        Command::Leaks(a) => report::run_leaks(&a.report, &a.symbols, Progress::To(&TERMINAL), out),
        Command::Efficiency(a) => report::run_efficiency(&a.report, &a.symbols, Progress::To(&TERMINAL), out),
        Command::Instances(args) => report::run(ReportKind::Instances, &args, Progress::To(&TERMINAL), out),
        Command::Diff(args) => report::diff::run(&args, Progress::To(&TERMINAL), out),
        Command::Check(args) => replay_cli::check::run(&args, Progress::To(&TERMINAL), out),
        Command::Timeline(t) => {
            let chart = ChartOptions { by: t.by, width: t.width, height: t.height };
            report::run_timeline(&t.report, chart, t.format, &t.output, Progress::To(&TERMINAL), out)
        }
        Command::Export(e) => {
            report::run_export(&e.report, e.format, e.output.as_deref(), &e.symbols, Progress::To(&TERMINAL), out)
        }
        Command::Report { args, output, max_nodes, symbols } => report::run_html(
            &args,
            &symbols,
            &output,
            &report::html::HtmlOptions { max_nodes: usize::try_from(max_nodes).unwrap_or(usize::MAX) },
            Progress::To(&TERMINAL),
        ),
        Command::Top(args) => report::run_top(&args, Progress::To(&TERMINAL), out),
        Command::Frees(args) => report::run_frees(&args, Progress::To(&TERMINAL), out),
        Command::Flamegraph(args) => report::run_flamegraph(&args, Progress::To(&TERMINAL), out),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // `replay-cli info x.mrl | head`: the reader has what it wanted.
        Err(replay_cli::CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            // One line per problem (a command refuses every option it does not take).
            for line in e.to_string().lines() {
                eprintln!("replay-cli: {line}");
            }
            ExitCode::from(replay_cli::EXIT_ERROR)
        }
    }
}

/// The heap, counted: what the memory ceiling measures. A request that the process
/// cannot have (past its address-space limit, less room for stacks and code, or refused
/// by the system) ends the command with a message and exit status 2, not an abort.
mod heap {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    struct Counting;

    #[global_allocator]
    static HEAP: Counting = Counting;

    static IN_USE: AtomicU64 = AtomicU64::new(0);
    static HARD_LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);

    /// Bytes of heap in use.
    pub fn in_use() -> u64 {
        IN_USE.load(Relaxed)
    }

    /// Past seven eighths of the process's limit a request fails the command: the rest is
    /// for thread stacks, code and the allocator's own overhead.
    pub fn set_hard_limit(process_limit: Option<u64>) {
        if let Some(limit) = process_limit {
            HARD_LIMIT.store(limit / 8 * 7, Relaxed);
        }
    }

    /// Counts `size` more bytes in use; fails the command if they cannot be had.
    #[inline]
    fn take(size: usize) {
        let now = IN_USE.fetch_add(size as u64, Relaxed) + size as u64;
        if now > HARD_LIMIT.load(Relaxed) {
            out_of_memory(size, now - size as u64);
        }
    }

    /// Writes one line and exits with status 2, allocating nothing (the heap is what ran
    /// out) and running no destructors.
    #[cold]
    fn out_of_memory(size: usize, in_use: u64) -> ! {
        let mut line = [0u8; 256];
        let mut w = Writer { buf: &mut line, len: 0 };
        let mib = |b: u64| b >> 20;
        let _ = std::fmt::Write::write_fmt(
            &mut w,
            format_args!(
                "replay-cli: out of memory: {} MiB more asked for with {} MiB in use, past what the process may have; \
                 a lower --max-memory stops the replay earlier and says what grew\n",
                mib(size as u64).max(1),
                mib(in_use)
            ),
        );
        let len = w.len;
        // SAFETY: writes `len` initialized bytes of `line` to stderr, then ends the process
        // without unwinding or running anything else.
        unsafe {
            libc::write(2, line.as_ptr().cast(), len);
            libc::_exit(2)
        }
    }

    /// A `fmt::Write` into a fixed buffer: what does not fit is cut.
    struct Writer<'a> {
        buf: &'a mut [u8],
        len: usize,
    }

    impl std::fmt::Write for Writer<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let n = s.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
            Ok(())
        }
    }

    // SAFETY: every call goes to `System` with the caller's layout and pointer unchanged;
    // the count is bookkeeping beside it.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            take(layout.size());
            // SAFETY: the caller's contract for `alloc`, passed on.
            let p = unsafe { System.alloc(layout) };
            if p.is_null() {
                out_of_memory(layout.size(), in_use());
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            take(layout.size());
            // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
            let p = unsafe { System.alloc_zeroed(layout) };
            if p.is_null() {
                out_of_memory(layout.size(), in_use());
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            IN_USE.fetch_sub(layout.size() as u64, Relaxed);
            // SAFETY: the caller's contract for `dealloc`, passed on.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if new_size > layout.size() {
                take(new_size - layout.size());
            } else {
                IN_USE.fetch_sub((layout.size() - new_size) as u64, Relaxed);
            }
            // SAFETY: the caller's contract for `realloc`, passed on.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if p.is_null() {
                out_of_memory(new_size, in_use());
            }
            p
        }
    }
}
