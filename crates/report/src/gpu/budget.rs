//! Budget samples of a replayed log, per domain: [`super::GpuBudget`], from the driver's
//! `Budget` records (SPEC.md §7.11) the replay kept (`ReplayState::budget_samples`).
//!
//! The point figures (`budget`, `usage`) are the last sample at or before the view's
//! point; the extremes (`min_budget`, `peak_usage`) and the count are the replay's exact
//! ones over every sample it applied; the over-budget intervals are read from the kept
//! samples, which are all of them up to `BUDGET_SAMPLES_KEPT` a domain (past that the
//! replay thins them, keeping in each merged pair the sample further over budget, so
//! every interval keeps at least one sample, but its ends are then approximate).

use memreplay_replay::{ticks_to_ns, BudgetSample, ReplayState};

use super::model::{GpuBudget, OverBudget};

/// The driver's budget figures of `domain`: at `until_ns` (nanoseconds since the start;
/// `None`: the end), and its over-budget intervals, each with the label `label_at` gives
/// for its start (the last label at or before a time in nanoseconds). Sample times are
/// clock ticks, converted with `ticks_per_second` (the header's). `None` when the domain
/// has no samples at or before `until_ns`.
pub(crate) fn figures(
    state: &ReplayState,
    domain: u32,
    until_ns: Option<u64>,
    ticks_per_second: u64,
    label_at: impl Fn(u64) -> Option<String>,
) -> Option<GpuBudget> {
    let series = state.budget_series(domain)?;
    let ns = |s: &BudgetSample| ticks_to_ns(s.time_ns, ticks_per_second);
    let kept = series.samples();
    // The sample in force at the point: the last kept one at or before it, or the exact
    // last sample at the end (the kept list may have thinned it away).
    let at = match until_ns {
        None => series.last,
        Some(until) => *kept.iter().take_while(|s| ns(s) <= until).last()?,
    };
    Some(GpuBudget {
        budget: at.budget,
        usage: at.usage,
        min_budget: series.min_budget.budget,
        peak_usage: series.peak_usage.usage,
        peak_usage_time_ns: ns(&series.peak_usage),
        samples: series.recorded,
        over_budget: over_budget(kept, ns, &label_at),
    })
}

/// The runs of consecutive samples whose usage exceeds their budget: each from its first
/// sample over to the first sample back under (or the last sample, if none came).
pub(crate) fn over_budget(
    samples: &[BudgetSample],
    ns: impl Fn(&BudgetSample) -> u64,
    label_at: &impl Fn(u64) -> Option<String>,
) -> Vec<OverBudget> {
    let mut out = Vec::new();
    let mut open: Option<OverBudget> = None;
    for s in samples {
        let excess = s.usage.checked_sub(s.budget).filter(|&e| e > 0);
        match (excess, open.as_mut()) {
            (Some(e), Some(o)) => {
                o.max_excess = o.max_excess.max(e);
                o.to_ns = ns(s);
            }
            (Some(e), None) => {
                let from_ns = ns(s);
                open = Some(OverBudget { from_ns, to_ns: from_ns, max_excess: e, after_label: label_at(from_ns) });
            }
            (None, Some(o)) => {
                o.to_ns = ns(s);
                out.extend(open.take());
            }
            (None, None) => {}
        }
    }
    if let Some(mut o) = open {
        // Still over at the last sample: the interval runs to it.
        o.to_ns = samples.last().map_or(o.to_ns, &ns);
        out.push(o);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use memreplay_fixtures::{header, write_log, End, Event};
    use memreplay_format::{DomainKind, FileHeader};
    use memreplay_replay::{replay, ReplayOptions};

    const VRAM: u32 = 1;
    const MIB: u64 = 1 << 20;

    /// Replays a log of one stream: the vram domain, then `events`.
    fn state_of(h: &FileHeader, events: Vec<Event>) -> ReplayState {
        let mut all = vec![
            Event::DefineString { id: 1, text: "vram.local".into() },
            Event::DefineDomain { id: VRAM, name: 1, kind: DomainKind::GpuLocal, capacity: 0, parent: None },
        ];
        all.extend(events);
        let dir = memreplay_fixtures::temp_dir("report-gpu-budget");
        let path = dir.join(format!("{}.mrl", h.ticks_per_second));
        write_log(&path, h, &[(1, all)], Some(End { lost: 0, end_ns: 100_000 }));
        let r = replay(&path, ReplayOptions::default(), |_, _| {}).unwrap();
        std::fs::remove_file(&path).ok();
        r.state
    }

    fn sample(time: u64, budget: u64, usage: u64) -> Event {
        Event::Budget { domain: VRAM, time, budget, usage }
    }

    /// A label every 10 µs: "L0" at 0, "L1" at 10 000 ns, ...
    fn label_at(ns: u64) -> Option<String> {
        Some(format!("L{}", ns / 10_000))
    }

    fn samples() -> Vec<Event> {
        vec![
            sample(1_000, 100 * MIB, 50 * MIB),
            // Over from 12 000 to 30 000 (back under), the worst at 20 000.
            sample(12_000, 100 * MIB, 110 * MIB),
            sample(20_000, 90 * MIB, 120 * MIB),
            sample(30_000, 95 * MIB, 80 * MIB),
            // Usage equal to the budget is not over it.
            sample(40_000, 95 * MIB, 95 * MIB),
            // Over again until the end: to the last sample.
            sample(50_000, 95 * MIB, 96 * MIB),
            sample(60_000, 97 * MIB, 99 * MIB),
        ]
    }

    #[test]
    fn figures_at_the_end_and_at_a_point() {
        let state = state_of(&header(), samples());
        let b = figures(&state, VRAM, None, 1_000_000_000, label_at).unwrap();
        assert_eq!(
            b,
            GpuBudget {
                budget: 97 * MIB,
                usage: 99 * MIB,
                min_budget: 90 * MIB,
                peak_usage: 120 * MIB,
                peak_usage_time_ns: 20_000,
                samples: 7,
                over_budget: vec![
                    OverBudget { from_ns: 12_000, to_ns: 30_000, max_excess: 30 * MIB, after_label: Some("L1".into()) },
                    OverBudget { from_ns: 50_000, to_ns: 60_000, max_excess: 2 * MIB, after_label: Some("L5".into()) },
                ],
            }
        );
        // At a point: the sample in force then (at or before it).
        let at = figures(&state, VRAM, Some(35_000), 1_000_000_000, label_at).unwrap();
        assert_eq!((at.budget, at.usage), (95 * MIB, 80 * MIB));
        let at = figures(&state, VRAM, Some(12_000), 1_000_000_000, label_at).unwrap();
        assert_eq!((at.budget, at.usage), (100 * MIB, 110 * MIB));
        // Before the first sample, and a domain without samples: nothing to say.
        assert_eq!(figures(&state, VRAM, Some(999), 1_000_000_000, label_at), None);
        assert_eq!(figures(&state, 0, None, 1_000_000_000, label_at), None);
    }

    #[test]
    fn times_are_converted_from_ticks() {
        // A microsecond clock: sample times are in µs, figures in ns.
        let h = FileHeader { ticks_per_second: 1_000_000, ..header() };
        let state = state_of(&h, vec![sample(5, 10, 20), sample(7, 10, 5)]);
        let b = figures(&state, VRAM, Some(6_000), h.ticks_per_second, |ns| Some(ns.to_string())).unwrap();
        assert_eq!((b.budget, b.usage, b.peak_usage_time_ns), (10, 20, 5_000));
        assert_eq!(
            b.over_budget,
            [OverBudget { from_ns: 5_000, to_ns: 7_000, max_excess: 10, after_label: Some("5000".into()) }]
        );
    }

    #[test]
    fn a_single_sample_over_budget_is_an_interval_of_one_point() {
        let over = over_budget(&[BudgetSample { time_ns: 3, budget: 1, usage: u64::MAX }], |s| s.time_ns, &|_| None);
        assert_eq!(over, [OverBudget { from_ns: 3, to_ns: 3, max_excess: u64::MAX - 1, after_label: None }]);
        assert!(over_budget(&[], |s| s.time_ns, &|_| None).is_empty());
    }
}
