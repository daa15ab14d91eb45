//! `replay-cli`: the command line over the `replay_cli` library.
//!
//! Exit status: 0 on success; 1 when `--strict` finds a truncated or damaged log;
//! 2 for bad arguments and for a log that cannot be read at all.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "replay-cli", version, about = "Reads memreplay logs (.mrl) and reports on them")]
struct Cli {
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { log, json, strict } => {
            let opts = replay_cli::InfoOptions { json, strict };
            replay_cli::run_info(&log, opts, &mut std::io::stdout().lock())
        }
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
