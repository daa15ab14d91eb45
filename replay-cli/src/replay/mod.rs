//! The analysis engine: replays a log into a [`ReplayState`].
//!
//! Data flows one way: [`source`] turns the file into events in global order,
//! [`state`] folds them into the context tree and its figures. Reports read the state.

mod addr_map;
pub mod source;
pub mod state;
pub mod timeline;

use std::path::Path;

use memreplay_format::{FileHeader, FormatError, ReadReport};

pub use source::IndexedLog;
pub use state::{ReplayOptions, ReplayState};

/// A replayed log: its header, what reading it found, and the state.
pub struct Replay {
    pub header: FileHeader,
    pub report: ReadReport,
    pub state: ReplayState,
    /// Events the log's blocks hold (from their frames).
    pub events_in_log: u64,
}

impl Replay {
    /// Whether the log is whole, and what was lost if not.
    pub fn integrity(&self) -> crate::integrity::LogIntegrity {
        let last_clock = crate::report::select::ticks_to_ns(self.state.end_time_ns, self.header.ticks_per_second);
        crate::integrity::LogIntegrity::new(&self.report, self.state.lost_events, last_clock)
    }
}

/// Reads and replays the log at `path`. `progress(done, total)` is called now and then.
pub fn replay(path: &Path, options: ReplayOptions, mut progress: impl FnMut(u64, u64)) -> Result<Replay, FormatError> {
    let start = std::time::Instant::now();
    let mut log = IndexedLog::open(path)?;
    let total = log.events;
    tracing::debug!("indexed {} ({} events) in {:.3} s", path.display(), total, start.elapsed().as_secs_f64());
    let start = std::time::Instant::now();
    let mut state = ReplayState::new(options);
    let mut last = 0u64;
    log.replay(&mut state, |done| {
        if done - last >= 1 << 20 || done == total {
            last = done;
            progress(done, total);
        }
    });
    state.finish();
    let secs = start.elapsed().as_secs_f64();
    tracing::debug!(
        "replayed {} events in {:.3} s ({:.1} M events/s)",
        state.events,
        secs,
        state.events as f64 / secs.max(1e-9) / 1e6
    );
    Ok(Replay { header: log.header, report: log.report, state, events_in_log: total })
}
