//! Allocation-site figures for the callstack views (`top`, `flamegraph`, `export`,
//! `frees`): per (domain, callstack), optionally per context too, with the context and
//! thread filters.
//!
//! The replay keeps every site's figures (live, total, temporaries, at its domain's peak)
//! per (callstack, domain), over every context and thread. Figures split or filtered by
//! context or thread come from live allocations instead: at the end, the state's own; at
//! a label, a frame start or a domain's peak, those of a second replay of the log paused
//! at that point ([`live_at`]). Totals and temporaries per context or thread are not
//! kept, so those keys refuse the filters.

use std::collections::HashMap;
use std::path::Path;

use memreplay_format::{Record, RecordKind, Records};
use serde::Serialize;

use crate::Error;
use memreplay_replay::EventSink;
use memreplay_replay::{IndexedLog, ReplayState};
use memreplay_replay::{NodeId, ROOT};

use crate::select::Point;
use crate::{Amount, Loaded};

/// What sites are ranked and drawn by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Bytes held at the domain's peak.
    #[default]
    Peak,
    /// Bytes live at the end (or at `--at`).
    Live,
    /// Bytes allocated over the whole recording.
    Total,
    /// Allocations made over the whole recording.
    Count,
    /// Temporaries: allocations freed before their thread allocated again.
    Temporaries,
}

impl Metric {
    /// The metric as `--by` names it: `peak`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Peak => "peak",
            Metric::Live => "live",
            Metric::Total => "total",
            Metric::Count => "count",
            Metric::Temporaries => "temporaries",
        }
    }

    /// `bytes at the peak`, for titles.
    pub fn describe(self) -> &'static str {
        match self {
            Metric::Peak => "bytes held at the peak",
            Metric::Live => "bytes live",
            Metric::Total => "bytes allocated in all",
            Metric::Count => "allocations made",
            Metric::Temporaries => "temporaries",
        }
    }

    /// Whether the figure can be had per context or thread (from live allocations).
    pub fn per_context(self) -> bool {
        matches!(self, Metric::Peak | Metric::Live)
    }
}

/// A site's figures; `None` where the filters make a figure unavailable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SiteFigures {
    /// Held at its domain's peak.
    pub peak: Option<Amount>,
    /// Live at the point (the end, or `--at`).
    pub live: Option<Amount>,
    /// Allocated over the recording.
    pub total: Option<Amount>,
    /// Temporaries over the recording.
    pub temporaries: Option<Amount>,
}

fn add(a: &mut Option<Amount>, b: Option<Amount>) {
    if let Some(b) = b {
        let a = a.get_or_insert_with(Amount::default);
        a.bytes = a.bytes.wrapping_add(b.bytes);
        a.count = a.count.wrapping_add(b.count);
    }
}

impl SiteFigures {
    pub fn add(&mut self, o: &SiteFigures) {
        add(&mut self.peak, o.peak);
        add(&mut self.live, o.live);
        add(&mut self.total, o.total);
        add(&mut self.temporaries, o.temporaries);
    }

    /// The (bytes, count) a metric reads: bytes for the byte metrics, allocations for
    /// `count` and `temporaries`.
    pub fn value(&self, m: Metric) -> u64 {
        match m {
            Metric::Peak => self.peak.map_or(0, |a| a.bytes),
            Metric::Live => self.live.map_or(0, |a| a.bytes),
            Metric::Total => self.total.map_or(0, |a| a.bytes),
            Metric::Count => self.total.map_or(0, |a| a.count),
            Metric::Temporaries => self.temporaries.map_or(0, |a| a.count),
        }
    }

    /// The bytes behind a metric (`--min-bytes` applies to them).
    pub fn bytes(&self, m: Metric) -> u64 {
        match m {
            Metric::Count => self.total.map_or(0, |a| a.bytes),
            Metric::Temporaries => self.temporaries.map_or(0, |a| a.bytes),
            _ => self.value(m),
        }
    }

    fn is_empty(&self) -> bool {
        [self.peak, self.live, self.total, self.temporaries].iter().all(|a| a.is_none_or(|a| a.count == 0))
    }
}

/// One callstack's figures in one domain (and one context, when split by context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteRow {
    pub domain: u32,
    pub stack: u32,
    /// The context, when split by context.
    pub node: Option<NodeId>,
    pub figures: SiteFigures,
}

/// What to gather.
#[derive(Debug, Clone, Default)]
pub struct SiteQuery {
    /// The figure that must be there (others may be `None` under filters).
    pub metric: Metric,
    /// Split rows by context.
    pub by_context: bool,
    /// Only allocations in these contexts (a context and its descendants).
    pub contexts: Option<Vec<bool>>,
    /// Read `live` at the point of the selection (else at the end).
    pub live_at_point: bool,
}

/// `--context PATH`: the nodes at `path` (`Type:name/Type:name`) and below, as a mask
/// over `state.nodes`. An error names the top-level contexts when none matches.
pub fn context_mask(state: &ReplayState, path: &str) -> Result<Vec<bool>, Error> {
    let want = path.trim_matches('/');
    let mut mask = vec![false; state.nodes.len()];
    let mut any = false;
    // Parents are created before their children: one pass in id order.
    for (i, n) in state.nodes.iter().enumerate().skip(1) {
        let parent = n.parent as usize;
        let hit = (parent != ROOT as usize && mask[parent]) || state.node_path(i as NodeId) == want;
        mask[i] = hit;
        any |= hit;
    }
    if any {
        return Ok(mask);
    }
    let tops: Vec<String> = state.children(ROOT).take(12).map(|c| format!("\"{}\"", state.node_path(c))).collect();
    Err(Error::Usage(format!(
        "no context \"{want}\" in the log (a path of Type:name parts joined by /); top-level contexts: {}",
        if tops.is_empty() { "none".into() } else { tops.join(", ") }
    )))
}

/// The sites of the selected domains, with the figures `q` asks for.
pub fn collect(l: &Loaded, q: &SiteQuery) -> Result<Vec<SiteRow>, Error> {
    let state = l.state();
    let sel = &l.sel;
    let detailed = q.by_context || q.contexts.is_some() || sel.thread.is_some();
    let at_point = q.live_at_point && !sel.at_end();
    if !detailed {
        // Whole sites: every figure, from the replay.
        let live = if at_point { Some(live_rows(l, q, &point_seqs(l, Metric::Live))?) } else { None };
        let mut rows: Vec<SiteRow> = state
            .sites
            .iter()
            .enumerate()
            .filter(|(_, s)| sel.domains.contains(&s.domain))
            .map(|(i, s)| {
                let peak = state.site_held_at_peak(i);
                SiteRow {
                    domain: s.domain,
                    stack: s.stack,
                    node: None,
                    figures: SiteFigures {
                        peak: Some(Amount::new(peak.bytes, peak.count)),
                        live: match &live {
                            None => Some(Amount::new(s.now.live_bytes, s.now.live_count)),
                            Some(m) => Some(m.get(&(s.domain, s.stack, None)).copied().unwrap_or_default()),
                        },
                        total: Some(Amount::new(s.now.total_bytes, s.now.total_count)),
                        temporaries: Some(Amount::new(s.now.temp_bytes, s.now.temp_count)),
                    },
                }
            })
            .collect();
        rows.retain(|r| !r.figures.is_empty());
        return Ok(rows);
    }
    if !q.metric.per_context() && detailed {
        return Err(Error::Usage(format!(
            "--by {} cannot be split or filtered by context or thread (the replay keeps those figures per \
             callstack only); use --by peak or --by live",
            q.metric.name()
        )));
    }
    // Per context or thread: live allocations at the end, at the point, at the peaks.
    let mut out: HashMap<(u32, u32, Option<NodeId>), SiteFigures> = HashMap::new();
    let live = live_rows(l, q, &point_seqs(l, Metric::Live))?;
    for (k, a) in live {
        out.entry(k).or_default().live = Some(a);
    }
    if q.metric == Metric::Peak {
        for (k, a) in live_rows(l, q, &point_seqs(l, Metric::Peak))? {
            out.entry(k).or_default().peak = Some(a);
        }
    }
    let peak = q.metric == Metric::Peak;
    let mut rows: Vec<SiteRow> = out
        .into_iter()
        .map(|((domain, stack, node), mut figures)| {
            // Held nothing at one of the points: zero there, not unknown.
            figures.live.get_or_insert_with(Amount::default);
            if peak {
                figures.peak.get_or_insert_with(Amount::default);
            }
            SiteRow { domain, stack, node, figures }
        })
        .filter(|r| !r.figures.is_empty())
        .collect();
    rows.sort_by_key(|r| (r.domain, r.stack, r.node));
    Ok(rows)
}

/// Where live allocations are read for a metric: per domain, the event to stop after, as
/// (sequence number, stream id) (`None`: the end).
fn point_seqs(l: &Loaded, m: Metric) -> Vec<(u32, Option<(u64, u32)>)> {
    let state = l.state();
    l.sel
        .domains
        .iter()
        .map(|&d| {
            let seq = match m {
                Metric::Peak => Some(state.domain(d).map_or((0, 0), |t| (t.peak.seq, t.peak.thread))),
                _ => match l.sel.point {
                    Point::End => None,
                    _ => l.sel.marker(state).map(|m| (m.seq, m.thread)),
                },
            };
            (d, seq)
        })
        .collect()
}

type LiveKey = (u32, u32, Option<NodeId>);

/// Live allocations by (domain, stack, node when split), each domain read at its point.
fn live_rows(
    l: &Loaded,
    q: &SiteQuery,
    points: &[(u32, Option<(u64, u32)>)],
) -> Result<HashMap<LiveKey, Amount>, Error> {
    let state = l.state();
    let sel = &l.sel;
    let mut out: HashMap<LiveKey, Amount> = HashMap::new();
    let mut add = |st: &ReplayState, domain: u32, size: u64, slot: u32, stack: u32| {
        let s = &st.slots[slot as usize];
        if sel.thread.is_some_and(|t| s.thread != t) {
            return;
        }
        if let Some(mask) = &q.contexts {
            if !mask.get(s.node as usize).copied().unwrap_or(false) {
                return;
            }
        }
        let a = out.entry((domain, stack, q.by_context.then_some(s.node))).or_default();
        a.bytes = a.bytes.wrapping_add(size);
        a.count += 1;
    };
    let at_end: Vec<u32> = points.iter().filter(|(_, p)| p.is_none()).map(|&(d, _)| d).collect();
    if !at_end.is_empty() {
        for (domain, _, size, slot, stack, _) in state.live_allocations() {
            if at_end.contains(&domain) {
                add(state, domain, size, slot, stack);
            }
        }
    }
    let mut seqs: Vec<(u64, u32, u32)> = points.iter().filter_map(|&(d, p)| p.map(|(s, t)| (s, t, d))).collect();
    if seqs.is_empty() {
        return Ok(out);
    }
    seqs.sort_unstable();
    live_at(Path::new(&l.path), state, &seqs, |st, domain, size, slot, stack| add(st, domain, size, slot, stack))?;
    Ok(out)
}

/// Replays the log at `path` again, and at each `(seq, thread, domain)` of `points`
/// (sorted by seq), right after the event with that sequence number on that stream, calls
/// `f(state, domain, size, slot, stack)` for every allocation of `domain` live then.
/// See [`replay_to_points`].
pub fn live_at(
    path: &Path,
    main: &ReplayState,
    points: &[(u64, u32, u32)],
    mut f: impl FnMut(&ReplayState, u32, u64, u32, u32),
) -> Result<(), Error> {
    let at: Vec<(u64, u32)> = points.iter().map(|&(seq, thread, _)| (seq, thread)).collect();
    replay_to_points(path, main, &at, |i, state| {
        let domain = points[i].2;
        for (d, _, size, slot, stack, _) in state.live_allocations() {
            if d == domain {
                f(state, d, size, slot, stack);
            }
        }
    })
}

/// Replays the log at `path` again and calls `f(i, state)` with the state right after the
/// event of `points[i]` = `(seq, stream)` (sorted by seq): two streams' events may share a
/// sequence number, SPEC.md §7.9, so the stream says which. The second replay creates
/// contexts and slots in the same order as the first (`main`), so its node and slot ids
/// are the first's. Events past the last point are not applied; points past the last
/// event (which points found by the first replay never are) see the final state.
pub fn replay_to_points(
    path: &Path,
    main: &ReplayState,
    points: &[(u64, u32)],
    mut f: impl FnMut(usize, &ReplayState),
) -> Result<(), Error> {
    struct Sink<'a, F> {
        state: ReplayState,
        points: &'a [(u64, u32)],
        next: usize,
        f: F,
    }
    impl<F: FnMut(usize, &ReplayState)> EventSink for Sink<'_, F> {
        fn record(&mut self, thread: u32, r: &Record, block: &Records) {
            if self.next >= self.points.len() {
                return;
            }
            self.state.apply_record(thread, r, block);
            if r.kind == RecordKind::ReallocFree {
                return;
            }
            let Some(seq) = r.seq() else { return };
            // Past the point, or at its event: events come in order of sequence number,
            // and those sharing one come in a fixed order of streams.
            let reached = |&(at, on): &(u64, u32)| at < seq || at == seq && on == thread;
            while self.next < self.points.len() && reached(&self.points[self.next]) {
                (self.f)(self.next, &self.state);
                self.next += 1;
            }
        }

        fn upcoming(&mut self, r: &Record) {
            self.state.upcoming(r);
        }
    }
    let start = std::time::Instant::now();
    let mut log = IndexedLog::open(path).map_err(|error| Error::Open { path: path.to_owned(), error })?;
    let mut sink =
        Sink { state: ReplayState::new(memreplay_replay::ReplayOptions::default()), points, next: 0, f: &mut f };
    log.replay(&mut sink, |_| {});
    let Sink { state, next, .. } = sink;
    for i in next..points.len() {
        f(i, &state);
    }
    debug_assert!(state.nodes.len() <= main.nodes.len());
    tracing::debug!("replayed to {} point(s) in {:.3} s", points.len(), start.elapsed().as_secs_f64());
    Ok(())
}
