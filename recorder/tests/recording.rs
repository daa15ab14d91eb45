//! Records real programs through the allocator wrapper and reads the logs back with
//! `memreplay-format`: every API lands in the log as the events it promises.

use std::alloc::System;
use std::collections::HashMap;
use std::sync::Mutex;

use memreplay_format::{merge_by_seq, Compression, Event, Log, Part, HEAP_DOMAIN};

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

/// One session at a time: the recorder is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn temp_log(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("memreplay-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn strings(log: &Log) -> HashMap<u32, String> {
    log.events()
        .filter_map(|(_, e)| match e {
            Event::DefineString { id, text } => Some((*id, text.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn records_allocations_contexts_and_markers() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp_log("basic.mrl");
    memreplay::start(memreplay::Config::new(&path)).unwrap();
    let v: Vec<u8>;
    {
        let _ctx = memreplay::context!("Level", "Forest {}", 1);
        let _tex = memreplay::instance_context!("Texture", "rock.dds");
        v = Vec::with_capacity(12345);
        memreplay::usage(v.as_ptr(), 100);
    }
    memreplay::label!("level {} loaded", "Forest");
    memreplay::frame_start(7);
    drop(v);
    let stats = memreplay::stop().expect("was recording");
    assert!(stats.events > 0);

    let log = Log::open(&path).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    assert_eq!(log.report.end.unwrap().events, stats.events);
    let names = strings(&log);
    let events: Vec<&Event> = log.events().map(|(_, e)| e).collect();
    let alloc = events
        .iter()
        .find_map(|e| match e {
            Event::Alloc { addr, size: 12345, domain: HEAP_DOMAIN, stack, .. } => Some((*addr, *stack)),
            _ => None,
        })
        .expect("the Vec's allocation");
    assert_ne!(alloc.1, 0, "callstacks are on by default");
    assert!(events.iter().any(|e| matches!(e, Event::Free { addr, .. } if *addr == alloc.0)));
    assert!(events.iter().any(|e| matches!(e, Event::Usage { addr, used: 100, .. } if *addr == alloc.0)));
    let pushes: Vec<(String, u8)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ContextPush { name, flags, .. } => Some((names[name].clone(), *flags)),
            _ => None,
        })
        .collect();
    assert_eq!(pushes, vec![("Forest 1".to_string(), 0), ("rock.dds".to_string(), 1)]);
    assert_eq!(events.iter().filter(|e| matches!(e, Event::ContextPop)).count(), 2);
    assert!(events.iter().any(|e| matches!(e, Event::Label { name, .. } if names[name] == "level Forest loaded")));
    assert!(events.iter().any(|e| matches!(e, Event::FrameStart { frame: 7, .. })));
    assert!(events.iter().any(|e| matches!(e, Event::Module { .. })));
    let merged = merge_by_seq(&log.blocks);
    assert!(merged.iter().all(|m| m.part == Part::Whole || matches!(m.event, Event::Realloc { .. })));
}

#[test]
fn sessions_stop_and_start_again_in_one_process() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let paths = [temp_log("first.mrl"), temp_log("second.mrl")];
    for (i, path) in paths.iter().enumerate() {
        // The writer thread encoding alone, then four encoder threads: both start and end.
        let encoders = if i == 0 { 1 } else { 4 };
        memreplay::start(memreplay::Config::new(path).callstacks(false).encoder_threads(encoders)).unwrap();
        assert!(matches!(
            memreplay::start(memreplay::Config::new(temp_log("clash.mrl"))),
            Err(memreplay::StartError::AlreadyRecording)
        ));
        let v = vec![0u8; 50_000 + i];
        drop(v);
        memreplay::stop().unwrap();
        assert!(memreplay::stop().is_none(), "a second stop has nothing to stop");
    }
    for (i, path) in paths.iter().enumerate() {
        let log = Log::open(path).unwrap();
        assert!(log.report.is_clean());
        let sizes: Vec<u64> = log
            .events()
            .filter_map(|(_, e)| match e {
                Event::Alloc { size, .. } if *size >= 50_000 && *size < 50_002 => Some(*size),
                _ => None,
            })
            .collect();
        assert_eq!(sizes, vec![50_000 + i as u64], "each log holds its own session only");
    }
}

/// `compression=zstd`: every encoder, the writer's too, writes zstd blocks, and the log
/// reads back with every allocation the threads made.
#[test]
fn zstd_compressed_sessions_keep_every_event() {
    compressed_session_keeps_every_event("compression=zstd:3", &[Compression::Zstd]);
}

/// `compression=lz4-columns`: the same with the blocks' fields in columns. Each thread
/// asks for one size from one callstack, so the columns hold the sizes as deltas (zeros).
#[test]
fn column_compressed_sessions_keep_every_event() {
    let methods = [Compression::Lz4ColumnsSizeDeltas, Compression::Lz4Columns];
    compressed_session_keeps_every_event("compression=lz4-columns", &methods);
}

/// Records three threads with `options`, whose blocks must be stored with `methods`
/// (the first of them at least once) or as they are.
fn compressed_session_keeps_every_event(options: &str, methods: &[Compression]) {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp_log("compressed.mrl");
    let config = memreplay::Config::new(&path).encoder_threads(2).with_options(options).unwrap();
    memreplay::start(config).unwrap();
    std::thread::scope(|s| {
        for t in 0..3u64 {
            s.spawn(move || {
                for i in 0..4000u64 {
                    // Sizes no one else asks for: 70,001 to 70,003, one per thread.
                    let v = std::hint::black_box(Vec::<u8>::with_capacity((70_001 + t) as usize));
                    if i % 2 == 0 {
                        drop(v);
                    } else {
                        std::mem::forget(v);
                    }
                }
            });
        }
    });
    let stats = memreplay::stop().unwrap();
    let log = Log::open(&path).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    assert_eq!(log.report.end.unwrap().events, stats.events);
    let used: Vec<Compression> = log.blocks.iter().map(|b| b.frame.compression).collect();
    assert!(used.contains(&methods[0]), "{options}: {used:?}");
    assert!(used.iter().all(|c| methods.contains(c) || *c == Compression::None), "{options}: {used:?}");
    let mut per_size = HashMap::new();
    for (_, e) in log.events() {
        if let Event::Alloc { size: size @ 70_001..=70_003, domain: HEAP_DOMAIN, .. } = e {
            *per_size.entry(*size).or_insert(0) += 1;
        }
    }
    assert_eq!(per_size, HashMap::from([(70_001, 4000), (70_002, 4000), (70_003, 4000)]));
}

#[test]
fn domains_resources_attaches_and_reallocs_are_recorded() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Defined before recording starts: still written into the log.
    let vram = memreplay::Domain::define("vram.local", memreplay::DomainKind::GpuLocal, 1 << 30);
    let path = temp_log("domains.mrl");
    memreplay::start(memreplay::Config::new(&path).free_callstacks(true)).unwrap();
    let pool = memreplay::Domain::define_within("entities", memreplay::DomainKind::Pool, 4096, memreplay::Domain::HEAP);
    let asset = vec![0u8; 4096];
    vram.alloc_resource(
        0x10_0000,
        1 << 20,
        256,
        &memreplay::Resource {
            kind: memreplay::ResourceKind::Texture,
            width: 512,
            height: 512,
            depth_or_layers: 1,
            mip_levels: 10,
            format: "BC7_UNORM",
            name: "rock.dds",
        },
    );
    pool.alloc(64, 32);
    let worker = {
        let interior = asset.as_ptr() as usize + 100;
        std::thread::spawn(move || {
            let _a = memreplay::attach(interior as *const u8);
            let mut grow: Vec<u64> = Vec::with_capacity(1);
            for i in 0..100 {
                grow.push(i);
            }
            grow
        })
    };
    let grown = worker.join().unwrap();
    drop(grown);
    pool.free(64);
    vram.free(0x10_0000);
    memreplay::stop().unwrap();

    let log = Log::open(&path).unwrap();
    let names = strings(&log);
    let events: Vec<(u32, &Event)> = log.events().collect();
    let domains: HashMap<String, (memreplay_format::DomainKind, u64, Option<u32>, u32)> = events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::DefineDomain { id, name, kind, capacity, parent } => {
                Some((names[name].clone(), (*kind, *capacity, *parent, *id)))
            }
            _ => None,
        })
        .collect();
    let (kind, cap, parent, vram_id) = domains["vram.local"];
    assert_eq!((kind, cap, parent), (memreplay_format::DomainKind::GpuLocal, 1 << 30, None));
    let (kind, cap, parent, pool_id) = domains["entities"];
    assert_eq!((kind, cap, parent), (memreplay_format::DomainKind::Pool, 4096, Some(HEAP_DOMAIN)));
    assert!(events.iter().any(|(_, e)| matches!(e,
        Event::Alloc { domain, addr: 0x10_0000, size: 1048576, align_log2: 8, .. } if *domain == vram_id)));
    assert!(events.iter().any(|(_, e)| matches!(e, Event::Free { domain, addr: 0x10_0000, .. } if *domain == vram_id)));
    assert!(events
        .iter()
        .any(|(_, e)| matches!(e, Event::Alloc { domain, addr: 64, size: 32, .. } if *domain == pool_id)));
    let desc = events
        .iter()
        .find_map(|(_, e)| match e {
            Event::Resource { domain, desc, .. } if *domain == vram_id => Some(desc.clone()),
            _ => None,
        })
        .expect("resource descriptor");
    assert_eq!((desc.width, desc.height, desc.mip_levels), (512, 512, 10));
    assert_eq!((names[&desc.format].as_str(), names[&desc.name].as_str()), ("BC7_UNORM", "rock.dds"));
    let (attach_thread, attach_addr) = events
        .iter()
        .find_map(|(t, e)| match e {
            Event::AttachPush { addr, .. } => Some((*t, *addr)),
            _ => None,
        })
        .expect("attach");
    let asset_addr = events
        .iter()
        .find_map(|(_, e)| match e {
            Event::Alloc { addr, size: 4096, domain: HEAP_DOMAIN, .. } => Some(*addr),
            _ => None,
        })
        .unwrap();
    assert_eq!(attach_addr, asset_addr + 100, "interior pointers are recorded as given");
    let worker_reallocs = events
        .iter()
        .filter(|(t, e)| *t == attach_thread && matches!(e, Event::Realloc { free_seq, seq, .. } if free_seq < seq))
        .count();
    assert!(worker_reallocs >= 3, "Vec growth reallocs on the attached thread: {worker_reallocs}");
    assert!(events.iter().any(|(t, e)| *t == attach_thread && matches!(e, Event::AttachPop)));
    assert!(
        events.iter().any(|(_, e)| matches!(e, Event::Free { stack, .. } if *stack != 0)),
        "free callstacks were asked for"
    );
}

#[test]
fn budgets_and_display_sizes_are_recorded_in_the_querying_threads_stream() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp_log("budget.mrl");
    memreplay::start(memreplay::Config::new(&path)).unwrap();
    // Defined after the start and first named by a budget: its definition comes first.
    let vram = memreplay::Domain::define("vram.budget", memreplay::DomainKind::GpuLocal, 8 << 30);
    memreplay::display_size(1920, 1080);
    vram.alloc(0x1000, 1 << 20);
    vram.budget(6 << 30, 1 << 30);
    vram.budget(5 << 30, (5 << 30) + 1);
    memreplay::display_size(2560, 1440);
    let worker = std::thread::spawn(move || vram.budget(7 << 30, 3 << 29));
    worker.join().unwrap();
    vram.free(0x1000);
    memreplay::stop().unwrap();

    let log = Log::open(&path).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    assert_eq!((log.header.version_major, log.header.version_minor), (1, 6));
    let names = strings(&log);
    let events: Vec<(u32, &Event)> = log.events().collect();
    let vram_id = events
        .iter()
        .find_map(|(_, e)| match e {
            Event::DefineDomain { id, name, .. } if names[name] == "vram.budget" => Some(*id),
            _ => None,
        })
        .expect("domain definition");
    // Streams' blocks reach the file in any order: `time` places the samples.
    let mut budgets: Vec<(u32, u32, u64, u64, u64)> = events
        .iter()
        .filter_map(|(t, e)| match **e {
            Event::Budget { domain, time, budget, usage } => Some((*t, domain, time, budget, usage)),
            _ => None,
        })
        .collect();
    budgets.sort_by_key(|b| b.2);
    assert_eq!(budgets.len(), 3, "{budgets:?}");
    let main_thread = budgets[0].0;
    assert_eq!(
        budgets.iter().map(|b| (b.1, b.3, b.4)).collect::<Vec<_>>(),
        [(vram_id, 6 << 30, 1 << 30), (vram_id, 5 << 30, (5 << 30) + 1), (vram_id, 7 << 30, 3 << 29)]
    );
    assert_eq!(budgets[1].0, main_thread);
    assert_ne!(budgets[2].0, main_thread, "the worker's sample is in the worker's stream");
    let end_ns = log.report.end.map(|e| e.end_ns).unwrap_or(u64::MAX);
    assert!(budgets[2].2 <= end_ns);
    // Each sample follows a TIME of the same clock read in its stream (definitions may
    // come between).
    for (t, _, time, ..) in &budgets {
        let stream: Vec<&Event> = events.iter().filter(|(s, _)| s == t).map(|(_, e)| *e).collect();
        let at = stream.iter().position(|e| matches!(e, Event::Budget { time: bt, .. } if bt == time)).unwrap();
        let last_time = stream[..at].iter().rev().find_map(|e| match e {
            Event::Time { ns } => Some(*ns),
            _ => None,
        });
        assert_eq!(last_time, Some(*time));
    }
    // In the main thread's stream, in call order with its allocations.
    let main: Vec<&Event> = events.iter().filter(|(t, _)| *t == main_thread).map(|(_, e)| *e).collect();
    let pos = |f: &dyn Fn(&Event) -> bool| main.iter().position(|e| f(e)).unwrap();
    let alloc = pos(&|e| matches!(e, Event::Alloc { addr: 0x1000, domain, .. } if *domain == vram_id));
    let first_budget = pos(&|e| matches!(e, Event::Budget { budget, .. } if *budget == 6 << 30));
    let free = pos(&|e| matches!(e, Event::Free { addr: 0x1000, domain, .. } if *domain == vram_id));
    let displays: Vec<usize> =
        main.iter().enumerate().filter(|(_, e)| matches!(e, Event::Display { .. })).map(|(i, _)| i).collect();
    assert_eq!(displays.len(), 2);
    assert_eq!(*main[displays[0]], Event::Display { width: 1920, height: 1080 });
    assert_eq!(*main[displays[1]], Event::Display { width: 2560, height: 1440 });
    assert!(displays[0] < alloc && alloc < first_budget && first_budget < displays[1] && displays[1] < free);
}

#[test]
fn allocator_reports_are_recorded_as_their_differences() {
    use memreplay::{AllocatorSnapshot, SnapshotAllocation as A, SnapshotBlock as B, SnapshotError};
    const MIB: u64 = 1 << 20;
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp_log("allocator-report.mrl");
    memreplay::start(memreplay::Config::new(&path)).unwrap();
    let blocks = memreplay::Domain::define("wgpu.blocks", memreplay::DomainKind::GpuLocal, 0);
    let allocs = memreplay::Domain::define_within("wgpu.allocations", memreplay::DomainKind::Pool, 0, blocks);

    // Block A holds a vertex buffer and a texture, block B an index buffer.
    let first = [
        A { name: "vb", offset: 0, size: MIB },
        A { name: "tex", offset: MIB, size: 2 * MIB },
        A { name: "ib", offset: 0, size: 4 * MIB },
    ];
    let first_blocks = [B { size: 64 * MIB, allocations: 0..2 }, B { size: 32 * MIB, allocations: 2..3 }];
    let s1 = AllocatorSnapshot {
        allocations: &first,
        blocks: &first_blocks,
        total_allocated_bytes: 7 * MIB,
        total_reserved_bytes: 96 * MIB,
    };
    memreplay::record_allocator_report(blocks, allocs, &s1).unwrap();
    memreplay::label("s1");
    // The texture moved within A, B was freed, and block C (a render target) came in
    // B's place in the list.
    let second = [
        A { name: "vb", offset: 0, size: MIB },
        A { name: "tex", offset: 8 * MIB, size: 2 * MIB },
        A { name: "rt", offset: 0, size: 16 * MIB },
    ];
    let second_blocks = [B { size: 64 * MIB, allocations: 0..2 }, B { size: 128 * MIB, allocations: 2..3 }];
    let s2 = AllocatorSnapshot {
        allocations: &second,
        blocks: &second_blocks,
        total_allocated_bytes: 19 * MIB,
        total_reserved_bytes: 192 * MIB,
    };
    memreplay::record_allocator_report(blocks, allocs, &s2).unwrap();
    memreplay::label("s2");
    // Malformed reports are refused whole.
    let bad_blocks = [B { size: 64 * MIB, allocations: 0..2 }, B { size: 128 * MIB, allocations: 2..9 }];
    let bad = AllocatorSnapshot { blocks: &bad_blocks, ..s2 };
    assert_eq!(
        memreplay::record_allocator_report(blocks, allocs, &bad),
        Err(SnapshotError::BadRange { block: 1, range: 2..9, allocations: 3 })
    );
    let past_end = [A { name: "x", offset: 63 * MIB, size: 2 * MIB }];
    let bad = AllocatorSnapshot { allocations: &past_end, blocks: &[B { size: 64 * MIB, allocations: 0..1 }], ..s2 };
    assert_eq!(
        memreplay::record_allocator_report(blocks, allocs, &bad),
        Err(SnapshotError::PastBlockEnd { block: 0, allocation: 0 })
    );
    assert_eq!(memreplay::record_allocator_report(blocks, blocks, &s2), Err(SnapshotError::SameDomain));
    memreplay::label("s3");
    memreplay::stop().unwrap();

    let log = Log::open(&path).unwrap();
    let names = strings(&log);
    let events: Vec<(u32, &Event)> = log.events().collect();
    let id = |want: &str| {
        events
            .iter()
            .find_map(|(_, e)| match e {
                Event::DefineDomain { id, name, .. } if names[name] == want => Some(*id),
                _ => None,
            })
            .unwrap()
    };
    let (block_id, alloc_id) = (id("wgpu.blocks"), id("wgpu.allocations"));
    // Live bytes per domain at each label, folding the main thread's events in order.
    let thread = events.iter().find(|(_, e)| matches!(e, Event::Label { .. })).unwrap().0;
    let mut live: HashMap<(u32, u64), u64> = HashMap::new();
    let mut at_labels = Vec::new();
    let (mut allocs_made, mut frees_made) = (0, 0);
    for (_, e) in events.iter().filter(|(t, _)| *t == thread) {
        match **e {
            Event::Alloc { domain, addr, size, .. } if domain == block_id || domain == alloc_id => {
                assert!(live.insert((domain, addr), size).is_none(), "{addr:#x} allocated twice");
                allocs_made += 1;
            }
            Event::Free { domain, addr, .. } if domain == block_id || domain == alloc_id => {
                assert!(live.remove(&(domain, addr)).is_some(), "{addr:#x} freed but not live");
                frees_made += 1;
            }
            Event::Label { name, .. } => {
                let sum = |d: u32| live.iter().filter(|((dom, _), _)| *dom == d).map(|(_, s)| s).sum::<u64>();
                at_labels.push((names[&name].clone(), sum(alloc_id), sum(block_id)));
            }
            _ => {}
        }
    }
    assert_eq!(
        at_labels,
        [
            ("s1".to_owned(), s1.total_allocated_bytes, s1.total_reserved_bytes),
            ("s2".to_owned(), s2.total_allocated_bytes, s2.total_reserved_bytes),
            ("s3".to_owned(), s2.total_allocated_bytes, s2.total_reserved_bytes),
        ]
    );
    // Only the differences: 2 blocks and 3 allocations, then block C, the moved texture
    // and the render target; frees of B, its index buffer and the texture's old place.
    assert_eq!((allocs_made, frees_made), (5 + 3, 3));
    // Sub-allocations sit inside their block and carry their names.
    let tex: Vec<u64> = events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Resource { domain, addr, desc } if *domain == alloc_id && names[&desc.name] == "tex" => Some(*addr),
            _ => None,
        })
        .collect();
    assert_eq!(tex.len(), 2);
    assert_eq!(tex[1] - tex[0], 7 * MIB, "moved from 1 MiB to 8 MiB in the same block");
}

/// Short-lived threads, a few at a time, while the writer is behind: each new thread
/// takes a buffer past the pool's bound (it never waits), and those extra buffers are
/// freed again as the writer returns buffers. The pool stays within its bound plus one
/// buffer per thread alive at once, however many threads come and go.
#[test]
fn thread_churn_keeps_buffer_memory_bounded() {
    const THREADS: usize = 120;
    const AT_ONCE: usize = 4;
    const PAIRS: usize = 3000;
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp_log("churn.mrl");
    // The smallest pool (1 MiB), 16-frame stacks: every thread fills many buffers and
    // the writer falls behind, so threads register while every buffer is in use.
    memreplay::start(memreplay::Config::new(&path).buffer_memory(1 << 20)).unwrap();
    let mut alive = std::collections::VecDeque::new();
    for t in 0..THREADS {
        if alive.len() == AT_ONCE {
            let h: std::thread::JoinHandle<()> = alive.pop_front().unwrap();
            h.join().unwrap();
        }
        alive.push_back(std::thread::spawn(move || {
            for i in 0..PAIRS {
                std::hint::black_box(vec![t as u8; 16 + i % 200]);
            }
        }));
    }
    for h in alive {
        h.join().unwrap();
    }
    let stats = memreplay::stop().unwrap();
    std::fs::remove_file(&path).ok();
    assert!(stats.threads as usize >= THREADS, "{stats:?}");
    assert!(stats.events as usize >= THREADS * PAIRS * 2, "{stats:?}");
    // The point is threads registering while the writer is behind; with 1 MiB of buffers
    // and 16-frame stacks it always was here, but a much faster machine might keep up,
    // and the bound below must hold either way: say so rather than fail.
    if stats.backpressure_waits == 0 {
        eprintln!("note: the writer never fell behind, so no thread registered past the bound: {stats:?}");
    }
    assert_eq!(
        stats.peak_buffer_bytes / stats.peak_buffers as u64 * stats.peak_buffers as u64,
        stats.peak_buffer_bytes
    );
    assert!(stats.max_buffers as u64 * (stats.peak_buffer_bytes / stats.peak_buffers as u64) <= 1 << 20);
    // Past the bound, buffers the writer returns are freed, and a thread that took one
    // past it cannot get its next buffer until the excess is gone: so the excess is at
    // most one buffer per thread alive at once (the workers, this thread, the shared
    // stream of exiting threads), where without the fix it grew with every thread.
    let bound = stats.max_buffers as usize + AT_ONCE + 2;
    assert!(
        stats.peak_buffers as usize <= bound,
        "{} buffers at the peak, bound {bound} ({} + {AT_ONCE} threads + 2): {stats:?}",
        stats.peak_buffers,
        stats.max_buffers
    );
}

#[inline(never)]
fn alloc_at_site_a() -> *mut u8 {
    // SAFETY: a valid, non-zero-sized layout.
    std::hint::black_box(unsafe { std::alloc::alloc(std::alloc::Layout::from_size_align(5001, 8).unwrap()) })
}

#[inline(never)]
fn alloc_at_site_b() -> *mut u8 {
    // SAFETY: a valid, non-zero-sized layout.
    std::hint::black_box(unsafe { std::alloc::alloc(std::alloc::Layout::from_size_align(5002, 8).unwrap()) })
}

#[inline(never)]
fn grow_at_site_r(p: *mut u8, size: usize) -> *mut u8 {
    // SAFETY: `p` was allocated with this layout and is not used after.
    std::hint::black_box(unsafe { std::alloc::realloc(p, std::alloc::Layout::from_size_align(size, 8).unwrap(), 5003) })
}

#[inline(never)]
fn free_at_site_f(p: *mut u8, size: usize) {
    // SAFETY: `p` was allocated with this layout and is freed once.
    unsafe { std::alloc::dealloc(std::hint::black_box(p), std::alloc::Layout::from_size_align(size, 8).unwrap()) }
}

#[inline(never)]
fn free_at_site_g(p: *mut u8, size: usize) {
    // SAFETY: `p` was allocated with this layout and is freed once.
    unsafe { std::alloc::dealloc(std::hint::black_box(p), std::alloc::Layout::from_size_align(size, 8).unwrap()) }
}

/// The encoder takes a record's callstack for the stream's last one when their frames
/// compare equal, and interns it otherwise: allocations, reallocs and frees from a few
/// call sites, in runs and interleaved, each get their own site's callstack, never a
/// neighbour's.
#[test]
fn each_event_keeps_its_own_callstack_in_runs_and_interleaved() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp_log("same-stacks.mrl");
    memreplay::start(memreplay::Config::new(&path).callstacks(true).free_callstacks(true)).unwrap();
    let mut live: Vec<(*mut u8, usize)> = Vec::with_capacity(64);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..20_000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Runs of one site, switches, and the other kinds between them.
        match (rng >> 32) % 8 {
            0..=2 => live.push((alloc_at_site_a(), 5001)),
            3..=4 => live.push((alloc_at_site_b(), 5002)),
            5 if !live.is_empty() => {
                let (p, size) = live.swap_remove((rng % live.len() as u64) as usize);
                live.push((grow_at_site_r(p, size), 5003));
            }
            6 if !live.is_empty() => {
                let (p, size) = live.swap_remove((rng % live.len() as u64) as usize);
                free_at_site_f(p, size);
            }
            _ if !live.is_empty() => {
                let (p, size) = live.swap_remove((rng % live.len() as u64) as usize);
                free_at_site_g(p, size);
            }
            _ => {}
        }
    }
    for (p, size) in live.drain(..) {
        free_at_site_f(p, size);
    }
    memreplay::stop().unwrap();
    let log = Log::open(&path).unwrap();
    assert!(log.report.is_clean(), "{:?}", log.report);
    // Per site, the callstacks its events got. Which free site freed which block is not
    // kept here, so frees are checked by their callstacks: one per call path, none an
    // allocation site's.
    let mut by_site: HashMap<&str, std::collections::HashSet<u32>> = HashMap::new();
    let mut ours: HashMap<u64, u64> = HashMap::new();
    let mut free_stacks = std::collections::HashSet::new();
    // The worker is this thread, alone: its stream in order is the order of its calls.
    let mine = log
        .events()
        .find_map(|(t, e)| matches!(e, Event::Alloc { size: 5001, .. }).then_some(t))
        .expect("site a's allocations are in the log");
    for (_, e) in log.events().filter(|(t, _)| *t == mine) {
        match e {
            Event::Alloc { addr, size: size @ (5001 | 5002), stack, .. } => {
                by_site.entry(if *size == 5001 { "a" } else { "b" }).or_default().insert(*stack);
                ours.insert(*addr, *size);
            }
            Event::Realloc { old_addr, new_addr, new_size: 5003, stack, .. } if ours.contains_key(old_addr) => {
                by_site.entry("r").or_default().insert(*stack);
                ours.remove(old_addr);
                ours.insert(*new_addr, 5003);
            }
            Event::Free { addr, stack, .. } if ours.remove(addr).is_some() => {
                free_stacks.insert(*stack);
            }
            _ => {}
        }
    }
    assert!(ours.is_empty(), "every block freed: {} left", ours.len());
    let ids: Vec<u32> = ["a", "b", "r"]
        .iter()
        .map(|site| {
            let got = &by_site[site];
            assert_eq!(got.len(), 1, "site {site}: one callstack, got {got:?}");
            *got.iter().next().unwrap()
        })
        .collect();
    assert!(!ids.contains(&0) && ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2], "{ids:?}");
    // Site f called from the loop and from the drain after it, site g from the loop.
    assert_eq!(free_stacks.len(), 3, "three free call paths: {free_stacks:?}");
    assert!(!free_stacks.contains(&0) && free_stacks.iter().all(|s| !ids.contains(s)));
    std::fs::remove_file(&path).ok();
}

/// How long `encoders_wake_for_waiting_buffers_without_the_writers_collections` waits
/// for its worker (`MEMREPLAY_TEST_WAKE_LIMIT_S` seconds, for checking that it fails).
fn wake_test_limit() -> std::time::Duration {
    let s = std::env::var("MEMREPLAY_TEST_WAKE_LIMIT_S").ok().and_then(|s| s.parse().ok()).unwrap_or(120);
    std::time::Duration::from_secs(s)
}

/// Encoder threads sleep until a few buffers wait for them, not until the writer's next
/// collection: with collections an hour apart and a pool of 16 buffers, a thread that fills
/// hundreds of buffers is neither stalled (back-pressure wakes the encoders) nor loses
/// anything, and its last buffer is encoded when the thread ends.
#[test]
fn encoders_wake_for_waiting_buffers_without_the_writers_collections() {
    const PAIRS: usize = 100_000;
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for encoders in [2, 3] {
        let path = temp_log(&format!("wake-{encoders}.mrl"));
        let config = memreplay::Config::new(&path)
            .flush_interval(std::time::Duration::from_secs(3600))
            .process_memory_interval(None)
            .buffer_memory(1 << 20)
            .encoder_threads(encoders);
        memreplay::start(config).unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            for i in 0..PAIRS {
                std::hint::black_box(vec![0u8; 16 + i % 200]);
            }
            done_tx.send(()).unwrap();
        });
        // A generous limit: the work takes well under a second; asleep encoders with
        // every buffer waiting would hold it for the hour between collections. A panic
        // would wait too (its message is allocated, and this thread needs a buffer for
        // that): say it without allocating, and abort.
        if done_rx.recv_timeout(wake_test_limit()).is_err() {
            eprintln!("encoders_wake_for_waiting_buffers: the worker is stuck waiting for buffers");
            std::process::abort();
        }
        worker.join().unwrap();
        let stats = memreplay::stop().unwrap();
        assert_eq!(stats.lost_events, 0, "{stats:?}");
        assert!(stats.peak_buffers <= stats.max_buffers + 3, "{stats:?}");
        let log = Log::open(&path).unwrap();
        assert!(log.report.is_clean(), "{:?}", log.report);
        let sizes: HashMap<u64, usize> = log
            .events()
            .filter_map(|(_, e)| match e {
                Event::Alloc { size, domain, .. } if *domain == HEAP_DOMAIN && (16..216).contains(size) => Some(*size),
                _ => None,
            })
            .fold(HashMap::new(), |mut m, size| {
                *m.entry(size).or_default() += 1;
                m
            });
        // Every allocation of the worker's loop is in the log (the test harness's own
        // of those sizes only add to the counts).
        for size in 16..216u64 {
            let made = (0..PAIRS).filter(|i| 16 + (i % 200) as u64 == size).count();
            assert!(sizes.get(&size).copied().unwrap_or(0) >= made, "size {size}: {:?} of {made}", sizes.get(&size));
        }
        std::fs::remove_file(&path).ok();
    }
}

/// Keys follow each block's order and the markers without a shared counter (SPEC.md §7.9):
/// a thread that has been idle (its keys far behind the clock) still sorts after a label
/// that happened before its next event, and its free of a block sorts after an attach to
/// the inside of that block made before the block was handed over.
#[test]
fn an_idle_threads_events_sort_after_the_markers_and_attaches_before_them() {
    use std::sync::mpsc;
    const GO: usize = 7777; // sizes only this test allocates
    const BLOCK: usize = 5555;
    const UNDER_ATTACH: usize = 3333;
    struct Block(Vec<u8>);
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let path = temp_log("lagging.mrl");
    memreplay::start(memreplay::Config::new(&path)).unwrap();
    let (to_worker, from_main) = mpsc::channel::<Block>();
    let (ready_tx, ready) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        // Registers this thread (a clock read), then waits with its keys standing still.
        std::hint::black_box(vec![0u8; 16]);
        ready_tx.send(()).unwrap();
        let block = from_main.recv().unwrap();
        // After the label: its next allocation and the free come after it.
        std::hint::black_box(vec![0u8; GO]);
        drop(block);
    });
    ready.recv().unwrap();
    let block = Block(vec![1u8; BLOCK]);
    std::thread::sleep(std::time::Duration::from_millis(30));
    memreplay::label!("go");
    {
        // Inside the block, not at its start: the attach cannot use the block's own slot.
        let _a = memreplay::attach(block.0[100..].as_ptr());
        std::hint::black_box(vec![0u8; UNDER_ATTACH]);
    }
    to_worker.send(block).unwrap();
    worker.join().unwrap();
    memreplay::stop().expect("was recording");

    let log = Log::open(&path).unwrap();
    let names = strings(&log);
    let merged = merge_by_seq(&log.blocks);
    let at = |what: &str, f: &dyn Fn(&Event) -> bool| {
        merged.iter().position(|m| f(m.event)).unwrap_or_else(|| panic!("{what} is in the log"))
    };
    let block_addr = merged
        .iter()
        .find_map(|m| match m.event {
            Event::Alloc { addr, size, .. } if *size == BLOCK as u64 => Some(*addr),
            _ => None,
        })
        .expect("the block's allocation");
    let label = at("the label", &|e| matches!(e, Event::Label { name, .. } if names[name] == "go"));
    let go = at("the worker's allocation", &|e| matches!(e, Event::Alloc { size, .. } if *size == GO as u64));
    let attach = at("the attach", &|e| matches!(e, Event::AttachPush { addr, .. } if *addr == block_addr + 100));
    let free = at("the block's free", &|e| matches!(e, Event::Free { addr, .. } if *addr == block_addr));
    let alloc = at("the block's allocation", &|e| matches!(e, Event::Alloc { addr, .. } if *addr == block_addr));
    assert!(label < go, "the worker's allocation ({go}) sorts after the label ({label})");
    assert!(alloc < attach && attach < free, "allocation {alloc}, attach {attach}, free {free}");
}

#[test]
fn a_module_scan_asked_for_is_answered_at_once() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Nothing records: nothing to ask, nothing waited for.
    assert!(!memreplay::raw::request_module_scan(true));
    for encoders in [1, 3] {
        let path = temp_log(&format!("scan-{encoders}.mrl"));
        // Neither a flush nor a process sample wakes the writer on its own meanwhile.
        let config = memreplay::Config::new(&path)
            .flush_interval(std::time::Duration::from_secs(30))
            .process_memory_interval(None)
            .encoder_threads(encoders);
        memreplay::start(config).unwrap();
        assert!(memreplay::raw::request_module_scan(false), "{encoders} encoders");
        // Several threads at once, each answered by a scan that started after it asked.
        let started = std::time::Instant::now();
        let answered: Vec<bool> = std::thread::scope(|s| {
            let askers: Vec<_> = (0..4).map(|_| s.spawn(|| memreplay::raw::request_module_scan(true))).collect();
            askers.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert_eq!(answered, [true; 4], "{encoders} encoders");
        assert!(
            started.elapsed() < std::time::Duration::from_millis(900),
            "{encoders} encoders: {:?}",
            started.elapsed()
        );
        memreplay::stop().expect("was recording");
        let log = Log::open(&path).unwrap();
        assert!(log.report.is_clean(), "{:?}", log.report);
        let names = strings(&log);
        let exe = std::env::current_exe().unwrap().display().to_string();
        let modules: Vec<&str> = log
            .events()
            .filter_map(|(_, e)| match e {
                Event::Module { path, .. } => names.get(path).map(String::as_str),
                _ => None,
            })
            .collect();
        assert_eq!(modules.iter().filter(|p| **p == exe).count(), 1, "each module once: {modules:?}");
    }
}
