//! A replay that keeps, besides the replay state, what `diff` needs and the state does
//! not: at the points asked for (a label or a frame start), the allocations live there by
//! slot, callstack and the label they were made after. (The module map, for symbolicating
//! the callstacks, is in the state: [`memreplay_replay::ReplayState::modules`].)
//!
//! It runs the engine as [`crate::load`] does (one replay, in global order), with a sink
//! around the [`ReplayState`] that looks at the events as they are applied: nothing
//! re-reads the log, and the state it hands back is the one every report reads.

use std::collections::HashMap;
use std::time::Instant;

use memreplay_format::{Event, Record, RecordKind, Records};

use crate::Error;
use memreplay_replay::FxMap;
use memreplay_replay::{EventSink, IndexedLog};
use memreplay_replay::{Replay, ReplayState};

use crate::select::{At, ReportOptions, Selection};
use crate::{Loaded, Progress};

/// Allocations live at one point: (epoch, slot, stack) → (bytes, count), where the
/// epoch of an allocation is the number of labels placed before it was made.
pub type LiveByEpoch = FxMap<(u32, u32, u32), (u64, u64)>;

/// A point to keep the live allocations at: the first label named `at` placed after the
/// first label named `after` (after nothing: the first one in the log), or the start of
/// a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub at: At,
    pub after: Option<String>,
}

/// The replayed log and the live allocations at the points asked for.
pub struct Observed {
    pub loaded: Loaded,
    /// By label index (for labels) and by frame number (for frames).
    at_labels: HashMap<usize, LiveByEpoch>,
    at_frames: HashMap<u64, LiveByEpoch>,
}

impl Observed {
    /// The live allocations at label `index` of `ReplayState::labels`, if they were kept.
    pub fn at_label(&self, index: usize) -> Option<&LiveByEpoch> {
        self.at_labels.get(&index)
    }

    /// The live allocations at the start of frame `frame`, if they were kept.
    pub fn at_frame(&self, frame: u64) -> Option<&LiveByEpoch> {
        self.at_frames.get(&frame)
    }
}

/// Replays the log of `args` (as [`crate::load`]) and keeps the live allocations at
/// every point of `wanted`.
pub fn load(args: &ReportOptions, progress: Progress, wanted: &[Wanted]) -> Result<Observed, Error> {
    let path = &args.log;
    let open = |error| Error::Open { path: path.to_owned(), error };
    let start = Instant::now();
    let mut log = IndexedLog::open(path).map_err(open)?;
    let total = log.events;
    let mut state = ReplayState::new(args.replay_options());
    let mut sink = Sink {
        state: &mut state,
        wanted: wanted.iter().map(|w| Watch { want: w.clone(), after_maybe_seen: false, done: false }).collect(),
        at_labels: HashMap::new(),
        at_frames: HashMap::new(),
    };
    let mut last = 0u64;
    log.replay(&mut sink, |done| {
        // Now and then: the source calls this after every run of records.
        if done - last >= 1 << 20 || done == total {
            last = done;
            progress.progress(done, total);
        }
    });
    progress.replayed();
    let Sink { at_labels, at_frames, .. } = sink;
    state.finish();
    tracing::debug!("replayed {} (observed) in {:.3} s", path.display(), start.elapsed().as_secs_f64());
    let replay = Replay { header: log.header, report: log.report, state, events_in_log: total };
    crate::loaded::refuse_out_of_room(path, &replay)?;
    crate::loaded::refuse_too_deep(path, &replay)?;
    let sel = Selection::resolve(&replay.state, args)?;
    crate::loaded::warn_if_damaged(path, &replay, progress);
    let loaded = Loaded { path: path.display().to_string(), replay, sel };
    Ok(Observed { loaded, at_labels, at_frames })
}

/// Where a wanted point stands in the replay.
struct Watch {
    want: Wanted,
    /// A label named `after` (or one whose name is not known yet) has been placed.
    after_maybe_seen: bool,
    /// The point has been kept for certain.
    done: bool,
}

struct Sink<'a> {
    state: &'a mut ReplayState,
    wanted: Vec<Watch>,
    at_labels: HashMap<usize, LiveByEpoch>,
    at_frames: HashMap<u64, LiveByEpoch>,
}

impl Sink<'_> {
    /// After the label `name` was applied. A label's name may be defined later in the
    /// merged order (by another thread's stream): a label whose name is not known yet
    /// might be the one wanted, so its allocations are kept too, and the right label is
    /// picked once every name is known.
    fn label(&mut self, name: u32) {
        let index = self.state.labels.len() - 1;
        let text = self.state.strings.get(&name).cloned();
        let mut keep = false;
        for w in &mut self.wanted {
            if w.done {
                continue;
            }
            let At::Label(at) = &w.want.at else { continue };
            let after_seen_before = w.want.after.is_none() || w.after_maybe_seen;
            match &text {
                None => keep |= after_seen_before,
                Some(t) if t == at && after_seen_before => {
                    keep = true;
                    // Certain only if the label it must follow was certainly placed.
                    w.done = w.want.after.is_none() || w.after_certain(self.state);
                }
                _ => {}
            }
            if text.is_none() || text.as_ref() == w.want.after.as_ref() {
                w.after_maybe_seen = true;
            }
        }
        if keep {
            let live = live_by_epoch(self.state);
            self.at_labels.insert(index, live);
        }
    }

    fn frame(&mut self, frame: u64) {
        let wanted = self.wanted.iter_mut().find(|w| !w.done && w.want.at == At::Frame(frame));
        if let Some(w) = wanted {
            w.done = true;
            let live = live_by_epoch(self.state);
            self.at_frames.insert(frame, live);
        }
    }
}

impl Watch {
    /// Whether a label named `after` is among the labels placed before the latest one.
    fn after_certain(&self, state: &ReplayState) -> bool {
        let Some(after) = &self.want.after else { return true };
        let n = state.labels.len().saturating_sub(1);
        state.labels[..n].iter().any(|m| state.strings.get(&m.name) == Some(after))
    }
}

/// The live allocations now, by (epoch, slot, stack). No allocation shares a label's
/// sequence number (SPEC.md §7.9), so "made after the label" is "a larger number".
fn live_by_epoch(state: &ReplayState) -> LiveByEpoch {
    let seqs: Vec<u64> = state.labels.iter().map(|m| m.seq).collect();
    let mut out = LiveByEpoch::default();
    for (_domain, _addr, size, slot, stack, seq) in state.live_allocations() {
        let epoch = seqs.partition_point(|&s| s < seq) as u32;
        let e = out.entry((epoch, slot, stack)).or_default();
        e.0 = e.0.wrapping_add(size);
        e.1 += 1;
    }
    out
}

impl EventSink for Sink<'_> {
    #[inline]
    fn record(&mut self, thread: u32, r: &Record, block: &Records) {
        self.state.apply_record(thread, r, block);
        if r.kind == RecordKind::Event && !self.wanted.is_empty() {
            match *block.event(r) {
                Event::Label { name, .. } => self.label(name),
                Event::FrameStart { frame, .. } => self.frame(frame),
                _ => {}
            }
        }
    }

    #[inline]
    fn upcoming(&mut self, r: &Record) {
        self.state.upcoming(r);
    }

    fn stopped(&mut self) -> bool {
        self.state.stopped()
    }
}
