//! Memory over time, in a bounded number of points: what the timeline views plot.
//!
//! Time is cut into buckets of equal width (a power of two of clock ticks). Each series
//! (a domain's live bytes, or one top-level context's in one domain) keeps, per bucket,
//! the lowest and highest value it took and the value at the bucket's end. When the
//! recording outgrows [`TIMELINE_BUCKETS`] buckets, neighbouring buckets are merged in
//! pairs and the width doubles, so a log of any length gives at most that many points
//! per series, and no maximum is ever lost: the peak stays in its bucket's `high`.
//!
//! The clock is the latest `Time` the replay has seen on any thread, so buckets move
//! forward only on `Time` events and an allocation costs two running sums.
//!
//! Process memory samples (what the OS saw, `ProcessMemory` records) are kept apart in
//! [`ProcessMemory`]: they come from the recorder's metadata stream, which the merge
//! hands out last, so they are placed by their own time rather than by the clock.
//! Driver budget samples (`Budget` records) are kept the same way, per domain, in
//! [`BudgetSamples`]: placed by their own time, thinned past a bound.

use super::ids::{DomIndex, NodeId};

/// Buckets per series, at most (and at least half of it once the log is long enough).
pub const TIMELINE_BUCKETS: usize = 1024;

/// Width of the first buckets: 2^10 ticks (about a microsecond at nanosecond ticks), so
/// a short capture still gets fine buckets; each doubling costs one pass over the buckets.
const FIRST_SHIFT: u32 = 10;

/// Top-level contexts per domain that get a series of their own; later ones share the
/// domain's "other contexts" series, which keeps memory bounded whatever the tree.
pub const CONTEXT_SERIES_PER_DOMAIN: usize = 48;

/// One bucket of a series: the lowest and highest value in it, and the value at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Bucket {
    /// The lowest value in the bucket.
    pub low: u64,
    /// The highest value in the bucket.
    pub high: u64,
    /// The value at the bucket's end.
    pub last: u64,
}

impl Bucket {
    fn flat(v: u64) -> Bucket {
        Bucket { low: v, high: v, last: v }
    }

    /// The two buckets `a` then `b` as one.
    fn merged(a: Bucket, b: Bucket) -> Bucket {
        Bucket { low: a.low.min(b.low), high: a.high.max(b.high), last: b.last }
    }
}

/// A running value and its buckets. `closed.len()` is the index of the open bucket.
#[derive(Debug, Clone, Default)]
pub struct Series {
    now: u64,
    open: Bucket,
    closed: Vec<Bucket>,
}

impl Series {
    /// A series that starts at 0 in bucket `at` (earlier buckets read 0).
    fn new(at: usize) -> Series {
        Series { now: 0, open: Bucket::default(), closed: vec![Bucket::default(); at] }
    }

    #[inline]
    pub(crate) fn add(&mut self, v: u64) {
        self.now = self.now.wrapping_add(v);
        self.open.high = self.open.high.max(self.now);
    }

    #[inline]
    pub(crate) fn sub(&mut self, v: u64) {
        self.now = self.now.wrapping_sub(v);
        self.open.low = self.open.low.min(self.now);
    }

    /// Closes the open bucket and opens bucket `to` (buckets between are flat).
    fn advance(&mut self, to: usize) {
        if to <= self.closed.len() {
            return;
        }
        self.open.last = self.now;
        self.closed.push(self.open);
        self.closed.resize(to, Bucket::flat(self.now));
        self.open = Bucket::flat(self.now);
    }

    /// Merges the closed buckets in pairs (there is an even number of them).
    fn halve(&mut self) {
        debug_assert!(self.closed.len() % 2 == 0);
        let merged: Vec<Bucket> = self.closed.chunks_exact(2).map(|p| Bucket::merged(p[0], p[1])).collect();
        self.closed = merged;
    }

    /// Every bucket, the open one last (with the current value as its end).
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        let open = Bucket { last: self.now, ..self.open };
        self.closed.iter().copied().chain(std::iter::once(open))
    }

    /// The value now (at the end of the replay).
    pub fn now(&self) -> u64 {
        self.now
    }
}

/// Which series a slot's allocations also count in: one top-level context in one domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextSeriesKey {
    /// The domain's id in the log.
    pub domain: u32,
    /// The top-level context (a child of the root), [`crate::ROOT`] for
    /// allocations made outside any context, or `None` for "other contexts" (the domain
    /// already had [`CONTEXT_SERIES_PER_DOMAIN`] of its own).
    pub top: Option<NodeId>,
}

/// The series of a replay: per domain, and per top-level context and domain.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Bucket width is `1 << shift` ticks.
    shift: u32,
    /// Index of the open bucket.
    current: usize,
    /// Per domain index (the replay's dense numbering): live bytes; `domain_ids` gives
    /// each one's id in the log.
    pub(crate) domains: Vec<Series>,
    domain_ids: Vec<u32>,
    /// Per (domain, top-level context): live bytes.
    pub(crate) contexts: Vec<(ContextSeriesKey, Series)>,
    /// How many context series each domain index has (for the cap).
    per_domain: Vec<usize>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            shift: FIRST_SHIFT,
            current: 0,
            domains: Vec::new(),
            domain_ids: Vec::new(),
            contexts: Vec::new(),
            per_domain: Vec::new(),
        }
    }
}

impl Timeline {
    /// Width of a bucket in clock ticks.
    pub fn bucket_ticks(&self) -> u64 {
        1 << self.shift
    }

    /// Number of buckets so far (the last one still open).
    pub fn bucket_count(&self) -> usize {
        self.current + 1
    }

    /// Live bytes of domain `id` over time (domains that saw an allocation or a free).
    pub fn domain(&self, id: u32) -> Option<&Series> {
        self.domain_ids.iter().position(|&d| d == id).map(|i| &self.domains[i])
    }

    /// The per-context series with their keys.
    pub fn contexts(&self) -> impl Iterator<Item = (ContextSeriesKey, &Series)> + '_ {
        self.contexts.iter().map(|(k, s)| (*k, s))
    }

    /// Domain `id` gets the next domain index (they are numbered densely from 0).
    pub(crate) fn add_domain(&mut self, id: u32) {
        self.domains.push(Series::new(self.current));
        self.domain_ids.push(id);
        self.per_domain.push(0);
    }

    /// The series index for top-level context `top` in domain index `dom`, created on
    /// first use (or the domain's shared "other contexts" series past the cap).
    pub(crate) fn context_series(&mut self, dom: DomIndex, top: NodeId) -> u32 {
        let domain = self.domain_ids[dom.get()];
        let wanted = if self.per_domain[dom.get()] < CONTEXT_SERIES_PER_DOMAIN
            || self.contexts.iter().any(|(k, _)| k.domain == domain && k.top == Some(top))
        {
            Some(top)
        } else {
            None
        };
        let key = ContextSeriesKey { domain, top: wanted };
        if let Some(i) = self.contexts.iter().position(|(k, _)| *k == key) {
            return i as u32;
        }
        if wanted.is_some() {
            self.per_domain[dom.get()] += 1;
        }
        self.contexts.push((key, Series::new(self.current)));
        (self.contexts.len() - 1) as u32
    }

    /// The clock moved to `time` (ticks): close buckets up to the one holding it.
    #[inline]
    pub(crate) fn clock(&mut self, time: u64) {
        if (time >> self.shift) as usize > self.current {
            self.advance(time);
        }
    }

    #[inline(never)]
    fn advance(&mut self, time: u64) {
        loop {
            let to = (time >> self.shift).min(TIMELINE_BUCKETS as u64) as usize;
            self.all_series(|s| s.advance(to));
            self.current = to;
            if to < TIMELINE_BUCKETS {
                return;
            }
            // Full: buckets 0..N are closed and N is open; pair them up and go on.
            self.all_series(Series::halve);
            self.shift += 1;
            self.current = TIMELINE_BUCKETS / 2;
        }
    }

    fn all_series(&mut self, mut f: impl FnMut(&mut Series)) {
        self.domains.iter_mut().for_each(&mut f);
        self.contexts.iter_mut().for_each(|(_, s)| f(s));
    }
}

/// One sample of what the OS saw of the process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProcessSample {
    /// Clock ticks since the start of the log.
    pub time: u64,
    /// Resident bytes.
    pub resident: u64,
    /// 0 when the recorder could not tell.
    pub committed: u64,
}

/// Process memory samples, thinned to at most `2 × TIMELINE_BUCKETS`: when full,
/// neighbouring samples are merged in pairs, keeping the later time and the larger of
/// each figure, so the highest resident and committed figures survive.
#[derive(Debug, Clone, Default)]
pub struct ProcessMemory {
    samples: Vec<ProcessSample>,
    /// Samples the log held (before thinning).
    pub recorded: u64,
    /// The highest figures of all samples, with their times.
    pub peak_resident: ProcessSample,
    /// See `peak_resident`.
    pub peak_committed: ProcessSample,
    /// The latest sample.
    pub last: Option<ProcessSample>,
}

impl ProcessMemory {
    pub(crate) fn push(&mut self, s: ProcessSample) {
        self.recorded += 1;
        if s.resident > self.peak_resident.resident {
            self.peak_resident = s;
        }
        if s.committed > self.peak_committed.committed {
            self.peak_committed = s;
        }
        if self.last.is_none_or(|l| s.time >= l.time) {
            self.last = Some(s);
        }
        if self.samples.len() == 2 * TIMELINE_BUCKETS {
            let merged: Vec<ProcessSample> = self
                .samples
                .chunks_exact(2)
                .map(|p| ProcessSample {
                    time: p[1].time,
                    resident: p[0].resident.max(p[1].resident),
                    committed: p[0].committed.max(p[1].committed),
                })
                .collect();
            self.samples = merged;
        }
        self.samples.push(s);
    }

    /// The kept samples, in the order recorded.
    pub fn samples(&self) -> &[ProcessSample] {
        &self.samples
    }

    /// Whether the log held no samples.
    pub fn is_empty(&self) -> bool {
        self.recorded == 0
    }
}

/// One driver budget sample of a domain (a `Budget` record, SPEC.md §7.11).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BudgetSample {
    /// When: clock ticks since the start of the log, like every time of the state
    /// (nanoseconds at the recorder's 10⁹ ticks per second; `ticks_to_ns` converts).
    pub time_ns: u64,
    /// Bytes the driver allows the process in the domain's memory.
    pub budget: u64,
    /// Bytes the driver says the process uses there.
    pub usage: u64,
}

impl BudgetSample {
    /// Bytes of usage past the budget (negative: room left), for ranking samples.
    fn excess(&self) -> i128 {
        i128::from(self.usage) - i128::from(self.budget)
    }
}

/// Samples kept per domain before thinning starts.
pub const BUDGET_SAMPLES_KEPT: usize = 2 * TIMELINE_BUCKETS;

/// One domain's budget samples, in time order. The game makes one per driver query
/// (often one a frame), so they are thinned like process memory samples: up to
/// [`BUDGET_SAMPLES_KEPT`] are kept as recorded; past that, neighbouring samples are
/// merged in pairs, each pair keeping the one of its two samples further over (or less
/// under) its budget, ties to the later. Kept samples are always real samples, and a
/// stretch over budget keeps at least one of its samples through any thinning. The
/// count, the smallest budget, the highest usage and the latest sample are exact.
#[derive(Debug, Clone, Default)]
pub struct BudgetSamples {
    samples: Vec<BudgetSample>,
    /// Samples the log held for the domain so far (before thinning).
    pub recorded: u64,
    /// The sample with the smallest budget (the earliest of equals).
    pub min_budget: BudgetSample,
    /// The sample with the highest usage (the earliest of equals).
    pub peak_usage: BudgetSample,
    /// The latest sample by time.
    pub last: BudgetSample,
    /// Whether the samples were thinned.
    pub thinned: bool,
}

impl BudgetSamples {
    pub(crate) fn push(&mut self, s: BudgetSample) {
        if self.recorded == 0 {
            (self.min_budget, self.peak_usage, self.last) = (s, s, s);
        } else {
            let earlier = |a: &BudgetSample, b: &BudgetSample| a.time_ns < b.time_ns;
            if s.budget < self.min_budget.budget || s.budget == self.min_budget.budget && earlier(&s, &self.min_budget)
            {
                self.min_budget = s;
            }
            if s.usage > self.peak_usage.usage || s.usage == self.peak_usage.usage && earlier(&s, &self.peak_usage) {
                self.peak_usage = s;
            }
            if s.time_ns >= self.last.time_ns {
                self.last = s;
            }
        }
        self.recorded += 1;
        if self.samples.len() == BUDGET_SAMPLES_KEPT {
            self.thinned = true;
            let merged: Vec<BudgetSample> =
                self.samples.chunks_exact(2).map(|p| if p[0].excess() > p[1].excess() { p[0] } else { p[1] }).collect();
            self.samples = merged;
        }
        // Streams hand their samples out in the merge's order, not by time: most come in
        // order, the others go where their time puts them (after equal times).
        let at = self.samples.partition_point(|k| k.time_ns <= s.time_ns);
        self.samples.insert(at, s);
    }

    /// The kept samples, by time.
    pub fn samples(&self) -> &[BudgetSample] {
        &self.samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_samples_stay_sorted_bounded_and_keep_their_extremes() {
        let mut b = BudgetSamples::default();
        b.push(BudgetSample { time_ns: 20, budget: 100, usage: 50 });
        b.push(BudgetSample { time_ns: 10, budget: 90, usage: 95 });
        b.push(BudgetSample { time_ns: 30, budget: 100, usage: 60 });
        let times: Vec<u64> = b.samples().iter().map(|s| s.time_ns).collect();
        assert_eq!(times, [10, 20, 30]);
        assert_eq!((b.min_budget.time_ns, b.peak_usage.time_ns, b.last.time_ns), (10, 10, 30));

        // Many more: one over-budget sample in the middle must survive the thinning.
        let mut b = BudgetSamples::default();
        let n = 10 * BUDGET_SAMPLES_KEPT as u64;
        for t in 0..n {
            let usage = if t == n / 2 { 2_000 } else { 500 + t % 7 };
            b.push(BudgetSample { time_ns: t, budget: 1_000 + t % 3, usage });
        }
        assert!(b.thinned && b.samples().len() <= BUDGET_SAMPLES_KEPT + 1);
        assert_eq!(b.recorded, n);
        assert!(b.samples().contains(&BudgetSample { time_ns: n / 2, budget: 1_000 + (n / 2) % 3, usage: 2_000 }));
        assert!(b.samples().windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        assert_eq!((b.min_budget.budget, b.min_budget.time_ns), (1_000, 0));
        assert_eq!(b.peak_usage.usage, 2_000);
        assert_eq!(b.last.time_ns, n - 1);
    }

    /// A reference: every (time, value) change, bucketed afterwards at the final width.
    fn reference(changes: &[(u64, i64)], shift: u32, buckets: usize) -> Vec<Bucket> {
        let mut out = vec![None::<Bucket>; buckets];
        let mut now = 0i64;
        let mut last_bucket = 0usize;
        for &(t, d) in changes {
            let b = (t >> shift) as usize;
            // Buckets skipped over hold the value flat.
            for skipped in out.iter_mut().take(b.min(buckets - 1) + 1).skip(last_bucket + 1) {
                skipped.get_or_insert(Bucket::flat(now as u64));
            }
            last_bucket = last_bucket.max(b);
            now += d;
            let e = out[b].get_or_insert(Bucket::flat((now - d) as u64));
            e.low = e.low.min(now as u64);
            e.high = e.high.max(now as u64);
            e.last = now as u64;
        }
        let mut prev = 0u64;
        out.into_iter()
            .map(|b| {
                let b = b.unwrap_or(Bucket::flat(prev));
                prev = b.last;
                b
            })
            .collect()
    }

    #[test]
    fn buckets_match_a_reference_at_every_width() {
        let mut next = crate::testing::xorshift(0x2545_f491_4f6c_dd1du64);
        for round in 0..20 {
            let mut tl = Timeline::default();
            tl.add_domain(0);
            let mut changes = Vec::new();
            let (mut t, mut live) = (0u64, 0u64);
            let steps = 2000 + round * 500;
            for _ in 0..steps {
                t += next() % (1 << (18 + round % 6));
                tl.clock(t);
                let size = next() % 5000;
                if live > 0 && next() % 2 == 0 {
                    let v = size.min(live);
                    live -= v;
                    tl.domains[0].sub(v);
                    changes.push((t, -(v as i64)));
                } else {
                    live += size;
                    tl.domains[0].add(size);
                    changes.push((t, size as i64));
                }
            }
            let got: Vec<Bucket> = tl.domains[0].buckets().collect();
            assert!(got.len() <= TIMELINE_BUCKETS + 1);
            assert_eq!(got.len(), tl.bucket_count());
            let want = reference(&changes, tl.shift, got.len());
            assert_eq!(got, want, "round {round}, shift {}", tl.shift);
            // The maximum of the series is the highest value it ever took.
            let mut peak = (0i64, 0i64);
            for &(_, d) in &changes {
                peak.0 += d;
                peak.1 = peak.1.max(peak.0);
            }
            assert_eq!(got.iter().map(|b| b.high).max(), Some(peak.1 as u64));
        }
    }

    #[test]
    fn context_series_are_capped_per_domain() {
        let mut tl = Timeline::default();
        tl.add_domain(0);
        tl.add_domain(7);
        let firsts: Vec<u32> =
            (1..=CONTEXT_SERIES_PER_DOMAIN as u32).map(|n| tl.context_series(DomIndex(0), n)).collect();
        assert_eq!(tl.context_series(DomIndex(0), 1), firsts[0]);
        let other = tl.context_series(DomIndex(0), 1000);
        assert_eq!(tl.contexts[other as usize].0, ContextSeriesKey { domain: 0, top: None });
        assert_eq!(tl.context_series(DomIndex(0), 1001), other);
        // The other domain has its own allowance.
        let d1 = tl.context_series(DomIndex(1), 1000);
        assert_eq!(tl.contexts[d1 as usize].0, ContextSeriesKey { domain: 7, top: Some(1000) });
    }

    #[test]
    fn process_samples_thin_out_keeping_the_highest() {
        let mut pm = ProcessMemory::default();
        for i in 0..10_000u64 {
            let resident = if i == 7777 { 1 << 40 } else { i };
            pm.push(ProcessSample { time: i * 10, resident, committed: 2 * i });
        }
        assert!(pm.samples().len() <= 2 * TIMELINE_BUCKETS);
        assert_eq!(pm.recorded, 10_000);
        assert_eq!(pm.peak_resident.time, 77_770);
        assert!(pm.samples().iter().any(|s| s.resident == 1 << 40));
        assert_eq!(pm.last.unwrap().time, 99_990);
        assert!(pm.samples().windows(2).all(|w| w[0].time <= w[1].time));
    }
}
