//! Memory over time as the views draw it: the replay's [`Timeline`] buckets in
//! nanoseconds, named, with the labels, frames, peaks and process memory beside them.
//! The `timeline` chart, the Chrome trace and the JSON export all read this.
//!
//! [`Timeline`]: memreplay_replay::Timeline

use serde::Serialize;

use memreplay_replay::Series;
use memreplay_replay::ROOT;

use crate::{domain_ref, figures, Loaded};

/// Memory over time, per domain and per top-level context (always over every thread).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineData {
    /// Width of a bucket, and where bucket `i` starts: `i * bucket_ns`.
    pub bucket_ns: f64,
    /// Buckets per series (the last one ends at `end_ns`).
    pub buckets: usize,
    /// The end of the recording.
    pub end_ns: u64,
    /// One series per selected domain (`--domain`), live bytes.
    pub domains: Vec<SeriesData>,
    /// One series per top-level context and selected domain, live bytes (its own and its
    /// sub-contexts'); `(other contexts)` holds the top-level contexts past the 48th of a
    /// domain, `(no context)` the allocations made outside any context.
    pub contexts: Vec<SeriesData>,
    /// What the OS saw of the process, if the recorder sampled it.
    pub process: Vec<ProcessPoint>,
    /// What the driver reported (format 1.2 budget samples), per selected domain that
    /// has samples; left out of the JSON when none has.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<BudgetLine>,
    pub labels: Vec<LabelMark>,
    /// Frame starts, in order.
    pub frames: Vec<FrameMark>,
}

/// One series: per bucket, the lowest and highest value and the value at its end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesData {
    /// The domain's name, or the context (`Type:name`).
    pub name: String,
    pub domain: String,
    /// Capacity of the domain in bytes (domains that give one; `null` otherwise).
    pub capacity: Option<u64>,
    /// The highest value and when (the domain's exact peak for a domain; the start of
    /// the highest bucket for a context).
    pub peak: u64,
    pub peak_ns: u64,
    /// The value at the end.
    pub end: u64,
    pub low: Vec<u64>,
    pub high: Vec<u64>,
    pub last: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProcessPoint {
    pub time_ns: u64,
    pub resident: u64,
    /// 0 when the OS did not tell.
    pub committed: u64,
}

/// One domain's driver budget samples, as the replay kept them (in time order; thinned
/// past 2048, see `memreplay_replay::BudgetSamples`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetLine {
    /// The domain's name.
    pub domain: String,
    /// The samples: each holds until the next one.
    pub points: Vec<BudgetPoint>,
}

/// One driver budget sample, in nanoseconds since the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BudgetPoint {
    /// When the game asked the driver.
    pub time_ns: u64,
    /// Bytes the driver allows the process there.
    pub budget: u64,
    /// Bytes the driver says the process uses there.
    pub usage: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelMark {
    pub name: String,
    pub time_ns: u64,
    pub frame: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FrameMark {
    pub frame: u64,
    pub time_ns: u64,
}

impl SeriesData {
    fn new(name: String, domain: String, capacity: Option<u64>, s: &Series) -> SeriesData {
        let mut d = SeriesData {
            name,
            domain,
            capacity,
            peak: 0,
            peak_ns: 0,
            end: s.now(),
            low: Vec::new(),
            high: Vec::new(),
            last: Vec::new(),
        };
        for b in s.buckets() {
            d.low.push(b.low);
            d.high.push(b.high);
            d.last.push(b.last);
        }
        d
    }
}

pub fn build(l: &Loaded) -> TimelineData {
    let state = l.state();
    let tl = state.timeline();
    let bucket_ns = l.ns(tl.bucket_ticks()) as f64;
    let buckets = tl.bucket_count();
    let mut domains = Vec::new();
    let mut contexts = Vec::new();
    for d in state.domains() {
        if !l.sel.domains.contains(&d.id) {
            continue;
        }
        let r = domain_ref(state, d.id);
        let capacity = (r.capacity > 0).then_some(r.capacity);
        let Some(series) = tl.domain(d.id) else { continue };
        let mut s = SeriesData::new(r.name.clone(), r.name.clone(), capacity, series);
        s.peak = d.peak.bytes;
        s.peak_ns = l.ns(d.peak.time_ns);
        domains.push(s);
        for (key, series) in tl.contexts().filter(|(k, _)| k.domain == d.id) {
            let name = match key.top {
                Some(ROOT) => "(no context)".to_owned(),
                Some(node) => figures::short_name(state, node),
                None => "(other contexts)".to_owned(),
            };
            let mut s = SeriesData::new(name, r.name.clone(), None, series);
            let (i, &peak) =
                s.high.iter().enumerate().max_by_key(|&(i, &h)| (h, std::cmp::Reverse(i))).unwrap_or((0, &0));
            s.peak = peak;
            s.peak_ns = (i as f64 * bucket_ns) as u64;
            contexts.push(s);
        }
    }
    let pm = state.process_memory();
    let process = pm
        .samples()
        .iter()
        .map(|s| ProcessPoint { time_ns: l.ns(s.time), resident: s.resident, committed: s.committed })
        .collect::<Vec<_>>();
    let budgets: Vec<BudgetLine> = l
        .sel
        .domains
        .iter()
        .filter_map(|&id| {
            let samples = state.budget_samples(id);
            (!samples.is_empty()).then(|| BudgetLine {
                domain: domain_ref(state, id).name,
                points: samples
                    .iter()
                    .map(|s| BudgetPoint { time_ns: l.ns(s.time_ns), budget: s.budget, usage: s.usage })
                    .collect(),
            })
        })
        .collect();
    let labels = state
        .labels
        .iter()
        .map(|m| LabelMark { name: state.string(m.name), time_ns: l.ns(m.time_ns), frame: m.frame })
        .collect();
    let frames = state.frames.iter().map(|f| FrameMark { frame: f.frame, time_ns: l.ns(f.time_ns) }).collect();
    let last_budget = budgets.iter().filter_map(|b| b.points.last()).map(|p| p.time_ns).max();
    let end_ns = l.end_ns().max(process.last().map_or(0, |p| p.time_ns)).max(last_budget.unwrap_or(0));
    TimelineData { bucket_ns, buckets, end_ns, domains, contexts, process, budgets, labels, frames }
}

impl TimelineData {
    /// Start of bucket `i`, in nanoseconds.
    pub fn bucket_start(&self, i: usize) -> u64 {
        (i as f64 * self.bucket_ns) as u64
    }

    /// End of bucket `i` (the last one ends with the recording).
    pub fn bucket_end(&self, i: usize) -> u64 {
        if i + 1 >= self.buckets {
            self.end_ns.max(self.bucket_start(i))
        } else {
            self.bucket_start(i + 1)
        }
    }
}
