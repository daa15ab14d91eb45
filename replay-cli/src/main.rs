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

fn init_tracing(verbose: u8) {
    if verbose == 0 {
        return;
    }
    let filter = if verbose == 1 { "replay_cli=debug,memreplay_format=debug" } else { "trace" };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(verbose > 1)
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let out = &mut std::io::stdout().lock();
    let result = match cli.command {
        Command::Info { log, json, strict } => {
            let opts = replay_cli::InfoOptions { json, strict };
            replay_cli::run_info(&log, opts, out)
        }
        Command::Summarize(a) => report::run_summarize(&a.report, &a.symbols, Progress::Auto, out),
        Command::Tree(args) => report::run(ReportKind::Tree, &args, Progress::Auto, out),
        Command::Leaks(a) => report::run_leaks(&a.report, &a.symbols, Progress::Auto, out),
        Command::Efficiency(a) => report::run_efficiency(&a.report, &a.symbols, Progress::Auto, out),
        Command::Instances(args) => report::run(ReportKind::Instances, &args, Progress::Auto, out),
        Command::Diff(args) => report::diff::run(&args, Progress::Auto, out),
        Command::Check(args) => replay_cli::check::run(&args, Progress::Auto, out),
        Command::Timeline(t) => {
            let chart = ChartOptions { by: t.by, width: t.width, height: t.height };
            report::run_timeline(&t.report, chart, t.format, &t.output, Progress::Auto, out)
        }
        Command::Export(e) => {
            report::run_export(&e.report, e.format, e.output.as_deref(), &e.symbols, Progress::Auto, out)
        }
        Command::Report { args, output, max_nodes, symbols } => report::run_html(
            &args,
            &symbols,
            &output,
            &report::html::HtmlOptions { max_nodes: usize::try_from(max_nodes).unwrap_or(usize::MAX) },
            Progress::Auto,
        ),
        Command::Top(args) => report::run_top(&args, Progress::Auto, out),
        Command::Frees(args) => report::run_frees(&args, Progress::Auto, out),
        Command::Flamegraph(args) => report::run_flamegraph(&args, Progress::Auto, out),
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
