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

/// The ids of the GPU domains of [`gpu_log`].
pub(crate) const GPU_LOCAL: u32 = 1;
pub(crate) const GPU_SHARED: u32 = 2;

/// A log with two GPU domains, `vram.local` and `vram.shared`. Before the label
/// "loaded", `vram.local` gets a 256 × 256 RGBA8 texture allocated 270 336 bytes (8 192
/// of padding) and a 300 × 200 BC7 texture with 9 mips, exactly its 80 656 texel bytes
/// (rounded down to 256 × 128 it would take 43 728: 36 928 saved). After it,
/// `vram.local` gets a 128 × 128 texture of a format no reader knows (100 000 bytes) and
/// `vram.shared` three buffers of 1 000, 2 000 and 4 096 bytes and a 16 × 16 RGBA8
/// texture allocated 4 096 bytes (3 072 of padding). The heap holds 64 bytes. With `gpu`
/// false, the two domains are pools: the log has no GPU domain.
pub(crate) fn gpu_log(name: &str, gpu: bool) -> PathBuf {
    use memreplay_format::{ResourceDesc, ResourceKind};
    let (local, shared) =
        if gpu { (DomainKind::GpuLocal, DomainKind::GpuShared) } else { (DomainKind::Pool, DomainKind::Pool) };
    let mut seq = 0;
    let mut next = || {
        seq += 2;
        seq
    };
    let mut events = vec![
        Event::Time { ns: 1_000 },
        Event::DefineString { id: 1, text: "vram.local".into() },
        Event::DefineString { id: 2, text: "vram.shared".into() },
        Event::DefineString { id: 3, text: "RGBA8_UNORM".into() },
        Event::DefineString { id: 4, text: "BC7_UNORM".into() },
        Event::DefineString { id: 5, text: "MYSTERY_FMT".into() },
        Event::DefineString { id: 6, text: "loaded".into() },
        Event::DefineDomain { id: GPU_LOCAL, name: 1, kind: local, capacity: 0, parent: None },
        Event::DefineDomain { id: GPU_SHARED, name: 2, kind: shared, capacity: 0, parent: None },
        Event::Alloc { seq: next(), domain: 0, addr: 0x9000, size: 64, align_log2: 3, stack: 0 },
    ];
    let mut resource = |events: &mut Vec<Event>, domain, addr, size, kind, (width, height, mips), format| {
        events.push(Event::Alloc { seq: next(), domain, addr, size, align_log2: 8, stack: 0 });
        let desc = ResourceDesc { kind, width, height, depth_or_layers: 1, mip_levels: mips, format, name: 0 };
        events.push(Event::Resource { domain, addr, desc });
    };
    resource(&mut events, GPU_LOCAL, 0x10_0000, 270_336, ResourceKind::Texture, (256, 256, 1), 3);
    resource(&mut events, GPU_LOCAL, 0x20_0000, 80_656, ResourceKind::Texture, (300, 200, 9), 4);
    events.push(Event::Time { ns: 5_000 });
    events.push(Event::Label { seq: 100, name: 6 });
    events.push(Event::Time { ns: 6_000 });
    let mut later = Vec::new();
    resource(&mut later, GPU_LOCAL, 0x30_0000, 100_000, ResourceKind::Texture, (128, 128, 1), 5);
    for (i, size) in [1_000u64, 2_000, 4_096].into_iter().enumerate() {
        resource(&mut later, GPU_SHARED, 0x1000 * (i as u64 + 1), size, ResourceKind::Buffer, (size as u32, 1, 1), 0);
    }
    resource(&mut later, GPU_SHARED, 0x8000, 4_096, ResourceKind::Texture, (16, 16, 1), 3);
    // The label's sequence number lies between the allocations before it and after it.
    for e in &mut later {
        if let Event::Alloc { seq, .. } = e {
            *seq += 200;
        }
    }
    events.extend(later);
    let path = temp_dir("report-unit").join(format!("{name}.mrl"));
    write_log(&path, &header(), &[(1, events)], Some(End { lost: 0, end_ns: 10_000 }));
    path
}

/// A log of 60 heap containers that report their usage, in the contexts `A`, `B` and `C`
/// (one after the other), of three capacities and few distinct used sizes (so that
/// sorting them ties often), at addresses whose hex texts sort otherwise than their
/// values (`0x9f00` after `0x10000`).
pub(crate) fn containers_log(name: &str) -> PathBuf {
    let mut events = vec![
        Event::Time { ns: 1_000 },
        Event::DefineString { id: 1, text: "Kind".into() },
        Event::DefineString { id: 2, text: "A".into() },
        Event::DefineString { id: 3, text: "B".into() },
        Event::DefineString { id: 4, text: "C".into() },
        Event::DefineContextType { id: 1, name: 1 },
    ];
    let mut seq = 0;
    for i in 0..60u64 {
        seq += 2;
        let addr = 0x9000 + i * 0x100;
        events.push(Event::ContextPush { ty: 1, name: 2 + (i % 3) as u32, flags: 0 });
        events.push(Event::Alloc {
            seq,
            domain: 0,
            addr,
            size: [64, 128, 256][(i % 7 % 3) as usize],
            align_log2: 3,
            stack: 0,
        });
        events.push(Event::Usage { seq: seq + 1, addr, used: [0, 32, 64][(i % 5 % 3) as usize] });
        events.push(Event::ContextPop);
    }
    let path = temp_dir("report-unit").join(format!("{name}.mrl"));
    write_log(&path, &header(), &[(1, events)], Some(End { lost: 0, end_ns: 10_000 }));
    path
}
