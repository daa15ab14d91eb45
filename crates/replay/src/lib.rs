//! The analysis engine of memreplay: replays a log (`.mrl`) into a [`ReplayState`], the
//! context tree of every thread with its figures per domain, callstack sites, labels,
//! frames and memory over time. It does no terminal I/O and knows no command line;
//! `replay-cli`'s reports read what it builds.
//!
//! Data flows one way: the source ([`IndexedLog`]) turns the file into records in global
//! order, the state ([`ReplayState`]) folds them in. [`replay`] does both:
//!
//! ```no_run
//! use memreplay_replay::{replay, ReplayOptions};
//!
//! let replay = replay("game.mrl".as_ref(), ReplayOptions::default(), |_done, _total| {})?;
//! for d in replay.state.domains() {
//!     println!("domain {}: peak {} bytes in {} allocations", d.id, d.peak.bytes, d.peak.count);
//! }
//! # Ok::<(), memreplay_format::FormatError>(())
//! ```

#![warn(missing_docs)]

mod addr_map;
mod ids;
mod live;
mod memory;
mod model;
mod queries;
mod sorted_map;
mod source;
mod stacks;
mod state;
mod timeline;

use std::path::Path;

use memreplay_format::{FileHeader, FormatError, ReadReport};

pub use ids::{FxHasher, FxMap, NodeId, ROOT};
pub use live::FREED_REMEMBERED;
pub use memory::{
    default_ceiling, over_ceiling, process_limit, return_big_blocks_to_the_system, set_ceiling, Ceiling, OutOfRoom,
};
pub use model::{
    Anomalies, CallsBeforeStart, DomainInfo, DomainTotals, Figures, FrameMark, Held, LabelSnapshots, Marker,
    ModuleRecord, Node, Peak, ReplayOptions, Site, Slot, ThreadState, MAX_CONTEXT_DEPTH,
};
pub use source::{EventSink, IndexedLog};
pub use stacks::Stacks;
pub use state::ReplayState;
pub use timeline::{
    Bucket, BudgetSample, BudgetSamples, ContextSeriesKey, ProcessMemory, ProcessSample, Series, Timeline,
    BUDGET_SAMPLES_KEPT, CONTEXT_SERIES_PER_DOMAIN, TIMELINE_BUCKETS,
};

/// Converts a clock reading in ticks to nanoseconds.
pub fn ticks_to_ns(ticks: u64, ticks_per_second: u64) -> u64 {
    if ticks_per_second == 0 || ticks_per_second == 1_000_000_000 {
        ticks
    } else {
        (u128::from(ticks) * 1_000_000_000 / u128::from(ticks_per_second)).min(u128::from(u64::MAX)) as u64
    }
}

/// A replayed log: its header, what reading it found, and the state.
pub struct Replay {
    /// The log's file header.
    pub header: FileHeader,
    /// What reading the file found: damage, the end record.
    pub report: ReadReport,
    /// Everything the replay rebuilt.
    pub state: ReplayState,
    /// Events the log's blocks hold (from their frames).
    pub events_in_log: u64,
}

impl Replay {
    /// The last clock reading of the log, in nanoseconds since the start.
    pub fn last_clock_ns(&self) -> u64 {
        ticks_to_ns(self.state.end_time_ns, self.header.ticks_per_second)
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

/// What the unit tests of several modules share.
#[cfg(test)]
mod testing {
    /// A xorshift generator: random operations that are the same on every run.
    pub(crate) fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }
}
