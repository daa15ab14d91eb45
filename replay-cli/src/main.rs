//! `replay-cli`: the command line over the memreplay libraries (`memreplay-report` and
//! the engine below it): arguments, dispatch, output files, progress bars, exit codes.
//!
//! Exit status: 0 on success; 1 when `--strict` finds a truncated or damaged log, or
//! `check` finds a broken budget; 2 for bad arguments, a log that cannot be read at all,
//! a budget that cannot be read, options naming what the log does not have (a domain,
//! thread, label or frame), and options the command does not take; 3 when `check` or
//! `diff` reads a damaged log (`check`: unless the damage is allowed), and when `recompress`
//! recompressed one (its damage kept); `record` exits with its program's status (128 + N
//! for signal N), or 2 before running it.

mod args;
mod recompress;
mod record;

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use memreplay_report as report;
use report::{Progress, ReportKind};

use args::{CheckArgs, DiffArgs, ExportArgs, FlameArgs, FreesArgs, HtmlArgs, ReportArgs, SymbolizedReportArgs};
use args::{GpuArgs, TimelineArgs, TopArgs};

/// Exit status for errors: the file is missing, unreadable, not a log, or of an
/// unsupported version; an option names what the log does not have (also what clap
/// uses for bad arguments).
const EXIT_ERROR: u8 = 2;
/// Exit status of `info --strict` for a log that is truncated or damaged, and of `check`
/// for a broken budget.
const EXIT_FAILED: u8 = 1;
/// Exit status of `check` and `diff` when a log they read is damaged (`check`: unless
/// the damage is allowed), and of `recompress` for a damaged log (after writing).
pub(crate) const EXIT_DAMAGED: u8 = 3;

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
    /// GPU memory: each GPU domain's live and peak bytes against its capacity and the
    /// budget the driver reported, and the resources live at the end (or --at) pivoted by
    /// kind, by dimensions, screen-sized targets, non-power-of-two textures, small
    /// resources and padding, each row with the contexts that own it.
    Gpu(GpuArgs),
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
    Report(HtmlArgs),
    /// Runs a program and records its heap: `record [OPTIONS] -- PROGRAM ARGS...`. A C or
    /// C++ program (dynamically linked, x86_64 Linux) gets libmemreplay.so preloaded; a
    /// Rust program built with memreplay's `capture_replay_log` records itself. Exits with
    /// the program's status (128 + N for signal N), 2 before running anything when the
    /// program cannot be recorded (missing, not ELF, static) or the log cannot be written.
    Record(args::RecordArgs),
    /// Stores a log again with another compression method (default zstd-columns, the
    /// smallest), keeping its events, streams, end record and any damage as they were:
    /// record with the fast default, keep the log small (CI baselines, archives). Exits 3
    /// (after writing) when the log is damaged.
    Recompress(args::RecompressArgs),
}

/// Why a command failed: the report library's error, or what the command line itself
/// could not do (read a budget, write the report).
#[derive(Debug)]
pub(crate) enum CliError {
    /// The library refused or failed.
    Report(report::Error),
    /// The report could not be written (e.g. stdout closed).
    Output(std::io::Error),
    /// A report file could not be created or written.
    Write { path: PathBuf, error: std::io::Error },
    /// An option or an input file cannot be used.
    Usage(String),
}

impl From<report::Error> for CliError {
    fn from(e: report::Error) -> CliError {
        CliError::Report(e)
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Report(e) => write!(f, "{e}"),
            CliError::Output(e) => write!(f, "cannot write the report: {e}"),
            CliError::Write { path, error } => write!(f, "cannot write {}: {error}", path.display()),
            CliError::Usage(what) => write!(f, "{what}"),
        }
    }
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
    let filter =
        if verbose == 1 { "memreplay_report=debug,memreplay_replay=debug,memreplay_format=debug" } else { "trace" };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(verbose > 1)
        .try_init();
}

fn parse_max_memory(s: &str) -> Result<u64, String> {
    match report::parse_bytes(s)? {
        0 => Err("the memory ceiling must be above 0".into()),
        n => Ok(n),
    }
}

/// The memory ceiling: `--max-memory`, else `MEMREPLAY_MAX_MEMORY`, else the default.
fn set_memory_ceiling(flag: Option<u64>) -> Result<(), CliError> {
    let from_env = match std::env::var("MEMREPLAY_MAX_MEMORY") {
        Ok(v) => Some(parse_max_memory(&v).map_err(|e| CliError::Usage(format!("MEMREPLAY_MAX_MEMORY: {e}")))?),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(CliError::Usage("MEMREPLAY_MAX_MEMORY is not valid UTF-8".into()))
        }
    };
    if let Some(limit) = flag.or(from_env).or_else(memreplay_replay::default_ceiling) {
        memreplay_replay::set_ceiling(memreplay_replay::Ceiling { limit, in_use: heap::in_use });
    }
    heap::set_hard_limit(memreplay_replay::process_limit());
    Ok(())
}

/// Lets this process open as many files as its hard limit allows. The symbolizer keeps
/// each binary it loads open, to read its DWARF as lookups need it, and a program maps
/// hundreds of libraries where the soft limit is often 1,024 (a binary it could not open
/// would be reported unreadable, its frames unnamed). Not for `record`: the program it
/// runs keeps the limits it was given (raising them changes what `select` can serve).
/// Best effort: where the limit cannot be raised, the reports name any binary that
/// could not be opened.
fn raise_open_file_limit() {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `r` is a valid rlimit for getrlimit to fill in and for setrlimit to read.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn main() -> ExitCode {
    memreplay_replay::return_big_blocks_to_the_system();
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    if !matches!(cli.command, Command::Record(_)) {
        raise_open_file_limit();
    }
    if let Err(e) = set_memory_ceiling(cli.max_memory) {
        eprintln!("replay-cli: {e}");
        return ExitCode::from(EXIT_ERROR);
    }
    match run(cli.command, &mut std::io::stdout().lock()) {
        Ok(code) => ExitCode::from(code),
        // `replay-cli info x.mrl | head`: the reader has what it wanted.
        Err(CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            // One line per problem (a command refuses every option it does not take).
            for line in e.to_string().lines() {
                eprintln!("replay-cli: {line}");
            }
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Runs one command, printing its report on `out` or writing it to its output file.
/// Returns the exit status.
fn run(command: Command, out: &mut dyn std::io::Write) -> Result<u8, CliError> {
    let progress = Progress::To(&TERMINAL);
    match command {
        Command::Info { log, json, strict } => {
            let open = |error| report::Error::Open { path: log.clone(), error };
            let file = std::fs::File::open(&log).map_err(|e| open(e.into()))?;
            let reader = std::io::BufReader::with_capacity(1 << 16, file);
            let info = report::Info::read(&log.display().to_string(), reader).map_err(open)?;
            print(out, if json { info.to_json() } else { info.to_text() }.as_bytes())?;
            Ok(if strict && !info.integrity.clean { EXIT_FAILED } else { 0 })
        }
        Command::Summarize(a) => {
            printed(out, report::run_summarize(&a.report.options(), &a.symbols.options(), progress)?)
        }
        Command::Tree(a) => printed(out, report::run(ReportKind::Tree, &a.options(), progress)?),
        Command::Leaks(a) => printed(out, report::run_leaks(&a.report.options(), &a.symbols.options(), progress)?),
        Command::Efficiency(a) => {
            printed(out, report::run_efficiency(&a.report.options(), &a.symbols.options(), progress)?)
        }
        Command::Instances(a) => printed(out, report::run(ReportKind::Instances, &a.options(), progress)?),
        Command::Top(a) => printed(out, report::run_top(&a.options(), progress)?),
        Command::Frees(a) => printed(out, report::run_frees(&a.options(), progress)?),
        Command::Gpu(a) => {
            if let Some(p) = &a.svg {
                check_output(p)?;
            }
            let gpu = report::run_gpu(&a.options(), progress)?;
            if let (Some(path), Some(svg)) = (&a.svg, &gpu.svg) {
                std::fs::write(path, svg).map_err(|error| CliError::Write { path: path.clone(), error })?;
            }
            printed(out, gpu.report)
        }
        Command::Diff(a) => {
            let diff = report::run_diff(&a.options(), progress)?;
            print(out, diff.text.as_bytes())?;
            Ok(if diff.damaged { EXIT_DAMAGED } else { 0 })
        }
        Command::Check(a) => {
            let name = a.budget.display();
            let budget =
                std::fs::read_to_string(&a.budget).map_err(|e| CliError::Usage(format!("cannot read {name}: {e}")))?;
            let check = report::run_check(&a.options(budget), progress)?;
            let write_file = |path: &Path, text: &str| {
                std::fs::write(path, text).map_err(|e| CliError::Usage(format!("cannot write {}: {e}", path.display())))
            };
            if let Some(path) = &a.json_out {
                write_file(path, &check.json)?;
            }
            if let Some(path) = &a.junit {
                write_file(path, &check.junit)?;
            }
            print(out, check.text.as_bytes())?;
            Ok(match check.verdict {
                report::Verdict::Passed => 0,
                report::Verdict::Broken => EXIT_FAILED,
                report::Verdict::Damaged => EXIT_DAMAGED,
            })
        }
        Command::Flamegraph(a) => {
            let output = a.output.as_deref().filter(|p| *p != Path::new("-"));
            if let Some(p) = output {
                check_output(p)?;
            }
            let bytes = report::run_flamegraph(&a.options(), progress)?;
            write_or_print(output, &bytes, out)
        }
        Command::Timeline(a) => {
            if a.output != Path::new("-") {
                check_output(&a.output)?;
            }
            let format = match a.format {
                Some(f) => f.into(),
                None => report::ImageFormat::from_path(&a.output)?,
            };
            let chart = report::ChartOptions { by: a.by.into(), width: a.width, height: a.height };
            let bytes = report::run_timeline(&a.report.options(), chart, format, progress)?;
            write_or_print(Some(a.output.as_path()).filter(|p| *p != Path::new("-")), &bytes, out)
        }
        Command::Export(a) => {
            let output = a.output.as_deref().filter(|p| *p != Path::new("-"));
            if let Some(p) = output {
                check_output(p)?;
            }
            let bytes = report::run_export(&a.report.options(), a.format.into(), &a.symbols.options(), progress)?;
            write_or_print(output, &bytes, out)
        }
        Command::Report(a) => write_html(&a, progress),
        Command::Record(a) => record::run(&a),
        Command::Recompress(a) => recompress::run(&a, out),
    }
}

/// Prints a report; returns the exit status (0).
fn printed(out: &mut dyn std::io::Write, text: String) -> Result<u8, CliError> {
    print(out, text.as_bytes())?;
    Ok(0)
}

pub(crate) fn print(out: &mut dyn std::io::Write, bytes: &[u8]) -> Result<(), CliError> {
    out.write_all(bytes).and_then(|()| out.flush()).map_err(CliError::Output)
}

/// Writes a report's bytes to the file `output`, or prints them without one. Returns the
/// exit status (0).
fn write_or_print(output: Option<&Path>, bytes: &[u8], out: &mut dyn std::io::Write) -> Result<u8, CliError> {
    match output {
        Some(p) => std::fs::write(p, bytes).map_err(|error| CliError::Write { path: p.to_owned(), error })?,
        None => print(out, bytes)?,
    }
    Ok(0)
}

/// Fails early (before replaying) when `path` cannot be written: its directory is missing.
pub(crate) fn check_output(path: &Path) -> Result<(), CliError> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(CliError::Usage(format!("cannot write {}: no directory {}", path.display(), dir.display())));
    }
    if path.is_dir() {
        return Err(CliError::Usage(format!("cannot write {}: it is a directory", path.display())));
    }
    Ok(())
}

/// `report`: the page's file is created before the replay, so a bad path fails at once,
/// and removed again if the page cannot be made.
fn write_html(a: &HtmlArgs, progress: Progress) -> Result<u8, CliError> {
    let (opts, symbols) = (a.report.options(), a.symbols.options());
    report::check_html(&opts, &symbols)?;
    let output = &a.output;
    let write_error = |error| CliError::Write { path: output.to_owned(), error };
    if output.is_dir() {
        return Err(write_error(std::io::Error::other("it is a directory")));
    }
    let file = std::fs::File::create(output).map_err(write_error)?;
    let html = report::HtmlOptions { max_nodes: usize::try_from(a.max_nodes).unwrap_or(usize::MAX) };
    let text = match report::run_html(&opts, &symbols, &html, progress) {
        Ok(t) => t,
        Err(e) => {
            drop(file);
            let _ = std::fs::remove_file(output);
            return Err(e.into());
        }
    };
    let mut w = std::io::BufWriter::new(file);
    std::io::Write::write_all(&mut w, text.as_bytes())
        .and_then(|()| std::io::Write::flush(&mut w))
        .map_err(write_error)?;
    Ok(0)
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
