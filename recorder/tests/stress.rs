//! Many threads allocating, handing blocks to each other to free, and reusing addresses:
//! the log, merged by sequence number, must replay exactly — no allocation lands on a
//! live address, no free misses, and every thread's events are all there.

use std::alloc::{alloc, dealloc, realloc, Layout, System};
use std::collections::{HashMap, HashSet};
use std::sync::{mpsc, Arc, Barrier};

use memreplay_format::{merge_by_seq, Event, Log, Part};

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

const THREADS: usize = 8;
const ROUNDS: usize = 20_000;
/// Sizes only this test's workers allocate, so their events can be counted exactly.
const MARK_MIN: usize = 3001;
const MARK_SPAN: usize = 64;
const LEAKED_PER_THREAD: usize = 3;

fn mark_size(i: usize) -> usize {
    MARK_MIN + (i * 7) % MARK_SPAN
}

struct Ptr(*mut u8, usize);
// SAFETY: a block handed from one thread to another, which then owns it.
unsafe impl Send for Ptr {}

#[test]
fn cross_thread_frees_and_address_reuse_replay_exactly() {
    let path = std::env::temp_dir().join(format!("memreplay-stress-{}.mrl", std::process::id()));
    // Small buffers and a short flush interval: many hand-offs, idle collection and
    // back-pressure all happen during the run. Three encoder threads share the eight
    // workers' streams (and the callstack and string tables) whatever the machine's cores.
    memreplay::start(
        memreplay::Config::new(&path)
            .callstacks(true)
            .free_callstacks(true)
            .buffer_memory(1 << 20)
            .flush_interval(std::time::Duration::from_millis(5))
            .encoder_threads(3),
    )
    .unwrap();

    let barrier = Arc::new(Barrier::new(THREADS));
    // Each worker sends half of its blocks to the next worker to free.
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| mpsc::channel::<Ptr>()).unzip();
    let mut rxs: Vec<Option<mpsc::Receiver<Ptr>>> = rxs.into_iter().map(Some).collect();
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let next = txs[(t + 1) % THREADS].clone();
            let rx = rxs[t].take().unwrap();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut mine = Vec::new();
                for i in 0..ROUNDS {
                    let size = mark_size(i + t);
                    // SAFETY: a valid, non-zero-sized layout.
                    let p = unsafe { alloc(Layout::from_size_align(size, 8).unwrap()) };
                    if i % 2 == 0 {
                        next.send(Ptr(p, size)).unwrap();
                    } else if i % 5 == 1 {
                        // Grow in place or move: a realloc's two halves.
                        // SAFETY: `p` was allocated here with this layout and is not used after.
                        let q = unsafe { realloc(p, Layout::from_size_align(size, 8).unwrap(), size + MARK_SPAN) };
                        mine.push(Ptr(q, size + MARK_SPAN));
                    } else {
                        mine.push(Ptr(p, size));
                    }
                    while let Ok(Ptr(q, s)) = rx.try_recv() {
                        // SAFETY: `q` was allocated (or reallocated) with this layout, and is freed once.
                        unsafe { dealloc(q, Layout::from_size_align(s, 8).unwrap()) };
                    }
                    if mine.len() > 16 {
                        let Ptr(q, s) = mine.swap_remove(i % mine.len());
                        // SAFETY: `q` was allocated (or reallocated) with this layout, and is freed once.
                        unsafe { dealloc(q, Layout::from_size_align(s, 8).unwrap()) };
                    }
                }
                drop(next);
                barrier.wait();
                for Ptr(q, s) in rx.try_iter() {
                    // SAFETY: `q` was allocated (or reallocated) with this layout, and is freed once.
                    unsafe { dealloc(q, Layout::from_size_align(s, 8).unwrap()) };
                }
                // Leak a known number of blocks; free the rest.
                for (k, Ptr(q, s)) in mine.into_iter().enumerate() {
                    if k >= LEAKED_PER_THREAD {
                        // SAFETY: `q` was allocated (or reallocated) with this layout, and is freed once.
                        unsafe { dealloc(q, Layout::from_size_align(s, 8).unwrap()) };
                    }
                }
            })
        })
        .collect();
    drop(txs);
    for h in handles {
        h.join().unwrap();
    }
    let stats = memreplay::stop().unwrap();
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(log.report.is_clean(), "{:?}", log.report);
    assert_eq!(log.report.end.unwrap().events, stats.events);

    // Encoders intern callstacks and strings in parallel: each id is defined exactly
    // once, every id used is defined, and the ids are dense from 1.
    let (mut stacks, mut strings) = (Vec::new(), Vec::new());
    let mut used = HashSet::new();
    for e in log.blocks.iter().flat_map(|b| &b.events) {
        match *e {
            Event::DefineStack { id, .. } => stacks.push(id),
            Event::DefineString { id, .. } => strings.push(id),
            Event::Alloc { stack, .. } | Event::Free { stack, .. } | Event::Realloc { stack, .. } => {
                used.insert(stack);
            }
            _ => {}
        }
    }
    for ids in [&mut stacks, &mut strings] {
        ids.sort_unstable();
        assert_eq!(*ids, (1..=ids.len() as u32).collect::<Vec<_>>(), "ids defined once each, dense from 1");
    }
    assert_eq!(stacks.len() as u32, stats.stacks);
    let undefined: Vec<_> = used.iter().filter(|&&s| s != 0 && s as usize > stacks.len()).collect();
    assert!(undefined.is_empty(), "callstacks used but never defined: {undefined:?}");
    assert!(stacks.len() > 1, "the workers' callstacks are recorded");

    let is_mark = |size: u64| (MARK_MIN as u64..(MARK_MIN + 2 * MARK_SPAN) as u64).contains(&size);
    let mut live: HashMap<u64, (u64, u32)> = HashMap::new();
    let mut ever: HashSet<u64> = HashSet::new();
    let (mut overlaps, mut bad_frees, mut cross_thread, mut marked_allocs, mut realloc_halves) = (0, 0, 0, 0, 0);
    for te in merge_by_seq(&log.blocks) {
        let mut on_alloc = |addr: u64, size: u64| {
            if live.insert(addr, (size, te.thread)).is_some() {
                overlaps += 1;
            }
            ever.insert(addr);
        };
        match (te.event, te.part) {
            (&Event::Alloc { addr, size, .. }, _) => {
                on_alloc(addr, size);
                if is_mark(size) {
                    marked_allocs += 1;
                }
            }
            (&Event::Realloc { new_addr, new_size, .. }, Part::ReallocAlloc) => {
                if is_mark(new_size) {
                    realloc_halves += 1;
                }
                on_alloc(new_addr, new_size)
            }
            (&Event::Free { addr, .. }, _) | (&Event::Realloc { old_addr: addr, .. }, Part::ReallocFree) => {
                match live.remove(&addr) {
                    Some((size, thread)) if thread != te.thread && is_mark(size) => cross_thread += 1,
                    Some(_) => {}
                    // A free of memory allocated before the session started is legal;
                    // a free of an address the session allocated and already freed is not.
                    None if ever.contains(&addr) => bad_frees += 1,
                    None => {}
                }
            }
            _ => {}
        }
    }
    assert_eq!(overlaps, 0, "an allocation replayed onto a live address");
    assert_eq!(bad_frees, 0, "a free replayed after its address was already free");
    assert_eq!(marked_allocs, THREADS * ROUNDS, "every worker allocation is in the log");
    assert_eq!(realloc_halves, THREADS * ROUNDS.div_ceil(10), "every realloc is in the log");
    assert!(cross_thread >= THREADS * ROUNDS / 2 - THREADS * 64, "cross-thread frees: {cross_thread}");
    let leaked = live.values().filter(|(size, _)| is_mark(*size)).count();
    assert_eq!(leaked, THREADS * LEAKED_PER_THREAD, "exactly the deliberate leaks stay live");
}
