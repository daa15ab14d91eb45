//! `replay-cli`: the command line over the `replay_cli` library.
//!
//! Exit status: 0 on success; 1 when `--strict` finds a truncated or damaged log;
//! 2 for bad arguments, a log that cannot be read at all, and options naming what the
//! log does not have (a domain, thread, label or frame).

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use replay_cli::report::callstacks::SymbolArgs;
use replay_cli::report::{self, flame::FlameArgs, frees::FreesArgs, pprof::ExportArgs, top::TopArgs};
use replay_cli::report::{Progress, ReportArgs, ReportKind};

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
    /// leaks and temporaries.
    Summarize(ReportArgs),
    /// The context tree of each domain: inclusive and own bytes and counts, the peak,
    /// instances and bytes per instance, total allocated.
    Tree(ReportArgs),
    /// Allocations live at the end, by context and by allocation callstack, with the
    /// callstacks symbolicated.
    Leaks(LeaksArgs),
    /// Used / capacity of the containers that report their usage: per context, per
    /// allocation site, and the worst containers.
    Efficiency(ReportArgs),
    /// Instance contexts (one texture, one mesh): bytes per instance at the point, at the
    /// peak and allocated in all.
    Instances(ReportArgs),
    /// Allocation sites, symbolicated, by allocating function (or whole callstack with
    /// --stacks), ranked by bytes at the peak, live, allocated, count or temporaries.
    Top(TopArgs),
    /// Where an allocation site's blocks were freed from (free callstacks), symbolicated.
    Frees(FreesArgs),
    /// A flame graph of the allocation callstacks (SVG), or folded stacks with --folded.
    Flamegraph(FlameArgs),
    /// Writes the allocation sites in another format: a gzipped pprof profile.
    Export(ExportArgs),
}

#[derive(Debug, Args)]
struct LeaksArgs {
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
        Command::Summarize(args) => report::run(ReportKind::Summarize, &args, Progress::Auto, out),
        Command::Tree(args) => report::run(ReportKind::Tree, &args, Progress::Auto, out),
        Command::Leaks(a) => report::run_leaks(&a.report, &a.symbols, Progress::Auto, out),
        Command::Efficiency(args) => report::run(ReportKind::Efficiency, &args, Progress::Auto, out),
        Command::Instances(args) => report::run(ReportKind::Instances, &args, Progress::Auto, out),
        Command::Top(args) => report::run_top(&args, Progress::Auto, out),
        Command::Frees(args) => report::run_frees(&args, Progress::Auto, out),
        Command::Flamegraph(args) => report::run_flamegraph(&args, Progress::Auto, out),
        Command::Export(args) => report::run_export(&args, Progress::Auto, out),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // `replay-cli info x.mrl | head`: the reader has what it wanted.
        Err(replay_cli::CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("replay-cli: {e}");
            ExitCode::from(replay_cli::EXIT_ERROR)
        }
    }
}
