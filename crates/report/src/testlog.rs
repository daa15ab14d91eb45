//! Logs for the crate's unit tests, written with the format crate through
//! `memreplay-fixtures`.

use std::path::PathBuf;

use memreplay_fixtures::{header, temp_dir, write_log, End, Event};
use memreplay_format::DomainKind;

/// The id of `vram.local` in [`budget_log`].
pub(crate) const VRAM: u32 = 1;
pub(crate) const MIB: u64 = 1 << 20;

/// A log in which `vram.local` (GPU-local) peaks at 900 MiB live at 5 µs, with three
/// driver samples (budget, usage in MiB): (1000, 400) at 2 µs, (800, 950) at 5 µs,
/// (900, 500) at 8 µs; display 1920 × 1080. With `budgets` false, the same log without
/// the samples and the display size.
pub(crate) fn budget_log(name: &str, budgets: bool) -> PathBuf {
    let mut events = vec![
        Event::Time { ns: 1_000 },
        Event::DefineString { id: 1, text: "vram.local".into() },
        Event::DefineDomain { id: VRAM, name: 1, kind: DomainKind::GpuLocal, capacity: 0, parent: None },
        Event::Display { width: 1920, height: 1080 },
        Event::Alloc { seq: 2, domain: VRAM, addr: 0x1000, size: 300 * MIB, align_log2: 8, stack: 0 },
        Event::Budget { domain: VRAM, time: 2_000, budget: 1000 * MIB, usage: 400 * MIB },
        Event::Time { ns: 5_000 },
        Event::Alloc { seq: 4, domain: VRAM, addr: 0x2000_0000, size: 600 * MIB, align_log2: 8, stack: 0 },
        Event::Budget { domain: VRAM, time: 5_000, budget: 800 * MIB, usage: 950 * MIB },
        Event::Time { ns: 8_000 },
        Event::Free { seq: 6, domain: VRAM, addr: 0x2000_0000, stack: 0 },
        Event::Budget { domain: VRAM, time: 8_000, budget: 900 * MIB, usage: 500 * MIB },
        Event::Alloc { seq: 8, domain: 0, addr: 0x9000, size: 64, align_log2: 3, stack: 0 },
    ];
    if !budgets {
        events.retain(|e| !matches!(e, Event::Budget { .. } | Event::Display { .. }));
    }
    let path = temp_dir("report-unit").join(format!("{name}.mrl"));
    write_log(&path, &header(), &[(1, events)], Some(End { lost: 0, end_ns: 10_000 }));
    path
}
