//! `replay-cli`: reads memreplay logs (`.mrl`) and reports on them.
//!
//! The binary is a thin clap front end over this library, so that tests and other tools
//! can call the same code:
//!
//! - [`info::Info::read`] summarizes a log in one pass, a block at a time (header,
//!   totals, threads, event counts, domains, contexts, labels, integrity), printable as
//!   text ([`info::Info::to_text`]) or JSON ([`info::Info::to_json`]); the ways a file
//!   can fail to be a log at all are one-line [`CliError`]s;
//! - the engine, `memreplay-replay` ([`memreplay_replay::replay`]), replays a log into a
//!   [`memreplay_replay::ReplayState`];
//! - [`report`] builds the reports on it (`summarize`, `tree`, `leaks`, `efficiency`,
//!   `instances`, `diff`), each printable as text or JSON (schema: `JSON.md`), and the HTML
//!   page ([`report::html`], `replay-cli report`);
//! - [`check`] holds a log to a memory budget (`BUDGET.md`) for CI;
//! - [`integrity`] says whether a log is whole, and what was lost if not.

pub mod check;
pub mod info;
pub mod integrity;
pub mod report;
pub mod time;
pub mod xml;

use std::path::{Path, PathBuf};

use memreplay_format::FormatError;

pub use info::Info;

/// Why a command could not do its work. Each displays as one line, but for a command
/// refusing several options it does not take: one line each.
#[derive(Debug)]
pub enum CliError {
    /// The log could not be opened or is not a log this build reads.
    Open { path: PathBuf, error: FormatError },
    /// The report could not be written (e.g. stdout closed).
    Output(std::io::Error),
    /// A report file could not be created or written.
    Write { path: PathBuf, error: std::io::Error },
    /// An option names something the log does not have (a domain, thread, label or
    /// frame), or does not apply to the command.
    Usage(String),
    /// The log nests contexts deeper than the replay follows.
    TooDeep { path: PathBuf, depth: u64 },
    /// Replaying the log took more memory than the ceiling allows.
    OutOfRoom { path: PathBuf, what: memreplay_replay::OutOfRoom },
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Open { path, error: FormatError::Io(e) } => {
                write!(f, "cannot read {}: {e}", path.display())
            }
            CliError::Open { path, error } => write!(f, "{}: {error}", path.display()),
            CliError::Output(e) => write!(f, "cannot write the report: {e}"),
            CliError::Write { path, error } => write!(f, "cannot write {}: {error}", path.display()),
            CliError::Usage(what) => write!(f, "{what}"),
            CliError::TooDeep { path, depth } => write!(
                f,
                "{}: contexts nested {depth} levels deep; replay-cli follows at most {} levels",
                path.display(),
                memreplay_replay::MAX_CONTEXT_DEPTH
            ),
            CliError::OutOfRoom { path, what } => {
                use crate::report::table::size;
                write!(
                    f,
                    "{}: stopped after {} of {} events: {} of memory in use, past the ceiling of {} \
                     (--max-memory, or MEMREPLAY_MAX_MEMORY)",
                    path.display(),
                    what.events_done,
                    what.events_total,
                    size(what.in_use),
                    size(what.limit)
                )?;
                let parts: Vec<String> = what
                    .parts
                    .iter()
                    .filter(|&&(_, bytes, _)| bytes > 0)
                    .take(3)
                    .map(|&(part, bytes, n)| format!("{part} {} ({n})", size(bytes)))
                    .collect();
                if !parts.is_empty() {
                    write!(f, "; what grew: {}", parts.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for CliError {}

/// Exit status for errors: the file is missing, unreadable, not a log, or of an
/// unsupported version; an option names what the log does not have (also what clap
/// uses for bad arguments).
pub const EXIT_ERROR: u8 = 2;
/// Exit status of `--strict` for a log that is truncated or damaged.
pub const EXIT_DAMAGED: u8 = 1;

/// What `info` should print.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InfoOptions {
    /// Machine-readable JSON instead of text.
    pub json: bool,
    /// Report a damaged or truncated log through the exit status.
    pub strict: bool,
}

/// `replay-cli info`: writes the summary of the log at `path` to `out` and returns the
/// exit status (0, or [`EXIT_DAMAGED`] under `--strict` for a damaged log).
pub fn run_info(path: &Path, opts: InfoOptions, out: &mut dyn std::io::Write) -> Result<u8, CliError> {
    let open = |error| CliError::Open { path: path.to_owned(), error };
    let file = std::fs::File::open(path).map_err(|e| open(e.into()))?;
    let info =
        Info::read(&path.display().to_string(), std::io::BufReader::with_capacity(1 << 16, file)).map_err(open)?;
    let text = if opts.json { info.to_json() } else { info.to_text() };
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(CliError::Output)?;
    Ok(if opts.strict && !info.integrity.clean { EXIT_DAMAGED } else { 0 })
}
