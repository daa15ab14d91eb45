//! What every report reads: a replayed log with its options resolved ([`Loaded`]), and
//! the feedback a command gives while it works ([`Feedback`], [`Progress`]).

use std::time::Instant;

use serde::Serialize;

use crate::integrity::LogIntegrity;
use crate::select::{self, ReportOptions, Selection};
use crate::table;
use crate::Error;
use memreplay_replay::{Replay, ReplayOptions, ReplayState};

/// Version of the JSON schemas (`JSON.md`); bumped only for incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// A replayed log and the options resolved against it: what every report reads.
pub struct Loaded {
    /// The log's path, as displayed.
    pub path: String,
    /// The replay: its state, header and what the reader found.
    pub replay: Replay,
    /// The options, resolved against the state.
    pub sel: Selection,
}

impl Loaded {
    /// The replayed state.
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
    pub(crate) fn progress(self, done: u64, total: u64) {
        if let Progress::To(f) = self {
            f.progress(done, total)
        }
    }

    pub(crate) fn replayed(self) {
        if let Progress::To(f) = self {
            f.replayed()
        }
    }

    pub(crate) fn warning(self, line: &str) {
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

/// Replays the log of `args` and resolves the options against it. The replay keeps a
/// snapshot at the label `--at` names, at no other ([`ReportOptions::replay_options`]).
pub fn load(args: &ReportOptions, progress: Progress) -> Result<Loaded, Error> {
    load_with(args, args.replay_options(), progress)
}

/// [`load`] with other replay options (snapshots at more labels).
pub(crate) fn load_with(args: &ReportOptions, options: ReplayOptions, progress: Progress) -> Result<Loaded, Error> {
    let path = &args.log;
    let start = Instant::now();
    let replay = memreplay_replay::replay(path, options, |done, total| progress.progress(done, total));
    progress.replayed();
    let replay = replay.map_err(|error| Error::Open { path: path.to_owned(), error })?;
    tracing::debug!("replay and index took {:.3} s in all", start.elapsed().as_secs_f64());
    if tracing::enabled!(tracing::Level::DEBUG) {
        {
            let parts: Vec<String> = replay
                .state
                .memory_by_part()
                .iter()
                .filter(|&&(_, bytes, _)| bytes > 0)
                .map(|&(part, bytes, n)| format!("{part} {} ({n})", table::size(bytes)))
                .collect();
            tracing::debug!("replay state: {}", parts.join(", "));
        }
    }
    refuse_out_of_room(path, &replay)?;
    refuse_too_deep(path, &replay)?;
    let sel = Selection::resolve(&replay.state, args)?;
    warn_if_damaged(path, &replay, progress);
    Ok(Loaded { path: path.display().to_string(), replay, sel })
}

/// No report is made of a replay stopped at the memory ceiling: its figures would cover
/// only part of the log. The error says what took the room.
pub(crate) fn refuse_out_of_room(path: &std::path::Path, replay: &Replay) -> Result<(), Error> {
    let Some((in_use, limit)) = replay.state.out_of_room() else { return Ok(()) };
    let what = memreplay_replay::OutOfRoom {
        in_use,
        limit,
        events_done: replay.state.events,
        events_total: replay.events_in_log,
        parts: replay.state.memory_by_part(),
    };
    Err(Error::OutOfRoom { path: path.to_owned(), what })
}

/// No report is made of a log that nests contexts deeper than the replay follows
/// ([`memreplay_replay::MAX_CONTEXT_DEPTH`]): its figures would be wrong.
pub(crate) fn refuse_too_deep(path: &std::path::Path, replay: &Replay) -> Result<(), Error> {
    match replay.state.too_deep() {
        Some(depth) => Err(Error::TooDeep { path: path.to_owned(), depth }),
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

/// Pretty JSON, newline-terminated.
pub fn to_json<T: Serialize>(report: &T) -> String {
    let mut s = serde_json::to_string_pretty(report).expect("reports serialize");
    s.push('\n');
    s
}
