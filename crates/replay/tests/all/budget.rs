//! Driver budget samples and display sizes (format 1.2) as the replay keeps them.

use memreplay_fixtures as common;
use memreplay_format::{DomainKind, Event, Record, RecordKind, Records};
use memreplay_replay::{replay, BudgetSample, EventSink, IndexedLog, ReplayOptions, ReplayState};

const VRAM: u32 = 1;
const GIB: u64 = 1 << 30;

fn log(dir: &str) -> std::path::PathBuf {
    let main = vec![
        Event::Time { ns: 1_000 },
        Event::DefineString { id: 1, text: "vram.local".into() },
        Event::DefineDomain { id: VRAM, name: 1, kind: DomainKind::GpuLocal, capacity: 8 * GIB, parent: None },
        Event::Display { width: 1920, height: 1080 },
        Event::Alloc { seq: 2, domain: VRAM, addr: 0x1000, size: GIB, align_log2: 8, stack: 0 },
        Event::Budget { domain: VRAM, time: 2_000, budget: 6 * GIB, usage: GIB },
        Event::Time { ns: 4_000 },
        Event::Budget { domain: VRAM, time: 4_000, budget: 5 * GIB, usage: 6 * GIB },
        Event::Display { width: 2560, height: 1440 },
        Event::Free { seq: 10, domain: VRAM, addr: 0x1000, stack: 0 },
    ];
    let other = vec![
        Event::Time { ns: 3_000 },
        // A sample from another thread, between the main thread's two in time.
        Event::Budget { domain: VRAM, time: 3_000, budget: 6 * GIB, usage: 2 * GIB },
        // A domain nobody defined: kept all the same.
        Event::Budget { domain: 9, time: 3_000, budget: 1, usage: 2 },
        Event::Alloc { seq: 6, domain: 0, addr: 0x9000, size: 16, align_log2: 3, stack: 0 },
    ];
    let path = common::temp_dir(dir).join("budget.mrl");
    common::write_log(&path, &common::header(), &[(1, main), (2, other)], Some(common::End { lost: 0, end_ns: 5_000 }));
    path
}

#[test]
fn budget_samples_are_kept_per_domain_by_time() {
    let r = replay(&log("replay-budget"), ReplayOptions::default(), |_, _| {}).unwrap();
    let s = &r.state;
    assert_eq!(
        s.budget_samples(VRAM),
        [
            BudgetSample { time_ns: 2_000, budget: 6 * GIB, usage: GIB },
            BudgetSample { time_ns: 3_000, budget: 6 * GIB, usage: 2 * GIB },
            BudgetSample { time_ns: 4_000, budget: 5 * GIB, usage: 6 * GIB },
        ]
    );
    assert_eq!(s.budget_samples(9), [BudgetSample { time_ns: 3_000, budget: 1, usage: 2 }]);
    assert!(s.budget_samples(0).is_empty());
    assert_eq!(s.budget_domains(), [VRAM, 9]);
    let series = s.budget_series(VRAM).unwrap();
    assert_eq!((series.recorded, series.min_budget.budget, series.peak_usage.usage), (3, 5 * GIB, 6 * GIB));
    assert_eq!(s.display_size(), Some((2560, 1440)));
    assert!(s.memory_by_part().iter().any(|&(part, _, n)| part == "budget samples" && n == 4));
}

/// A replay stopped at the event with sequence number `stop_at`.
struct Until {
    state: ReplayState,
    stop_at: u64,
    done: bool,
}

impl EventSink for Until {
    fn record(&mut self, thread: u32, r: &Record, block: &Records) {
        if self.done {
            return;
        }
        self.state.apply_record(thread, r, block);
        if r.kind != RecordKind::ReallocFree && r.seq() == Some(self.stop_at) {
            self.done = true;
        }
    }
}

#[test]
fn a_replay_stopped_at_a_point_has_the_display_size_and_samples_of_then() {
    let path = log("replay-budget-stop");
    let at = |stop_at| {
        let mut log = IndexedLog::open(&path).unwrap();
        let mut sink = Until { state: ReplayState::new(ReplayOptions::default()), stop_at, done: false };
        log.replay(&mut sink, |_| {});
        sink.state
    };
    // At the first allocation: the first display size, no sample yet (the sample comes
    // after it in its thread).
    let s = at(2);
    assert_eq!(s.display_size(), Some((1920, 1080)));
    assert!(s.budget_samples(VRAM).is_empty());
    // At the other thread's allocation: its sample is applied; the main thread's samples
    // are unsequenced records before its free (seq 10), so they take that key (§7.9).
    let s = at(6);
    assert_eq!(s.display_size(), Some((1920, 1080)));
    let times: Vec<u64> = s.budget_samples(VRAM).iter().map(|b| b.time_ns).collect();
    assert_eq!(times, [3_000]);
    let s = at(10);
    assert_eq!(s.display_size(), Some((2560, 1440)));
    assert_eq!(s.budget_samples(VRAM).len(), 3);
}
