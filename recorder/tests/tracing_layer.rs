//! Spans entered under the tracing layer become contexts, named as configured.

use std::alloc::System;
use std::collections::{HashMap, HashSet};

use memreplay::tracing_layer::ContextLayer;
use memreplay_format::{merge_by_seq, Event, Log, Part, HEAP_DOMAIN};
use tracing_subscriber::prelude::*;

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

#[test]
fn entered_spans_become_contexts() {
    let path = std::env::temp_dir().join(format!("memreplay-tracing-{}.mrl", std::process::id()));
    let layer = ContextLayer::new().with_fields(&["asset"]);
    let load = |size| tracing::info_span!("load", asset = "rock.dds", ignored = 3).in_scope(|| alloc(size));
    memreplay::start(memreplay::Config::new(&path)).unwrap();
    // By default, a context's type is its span's name.
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer.clone()), || load(31_337));
    // One type for every span.
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer.clone().with_type("System")), || {
        load(31_338)
    });
    // A type from the span's metadata: here its target, the module it is in.
    let by_target = layer.type_from(|m| m.target());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(by_target), || load(31_339));
    memreplay::stop().unwrap();
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(
        paths_of(&log, &[31_337, 31_338, 31_339]),
        [
            (31_337, "load:load asset=rock.dds".to_owned()),
            (31_338, "System:load asset=rock.dds".to_owned()),
            (31_339, "tracing_layer:load asset=rock.dds".to_owned()),
        ]
    );
}

/// The child side of `worker_spans_are_placed_under_their_parents`: a Bevy app's spans,
/// with their names and fields. The main thread runs the schedules
/// (`schedule{name=?label}`) and applies commands (`system_commands{name=...}`); systems
/// run on worker threads (`system{name=...}`).
#[test]
fn worker_spans_child() {
    let Ok(path) = std::env::var("MEMREPLAY_TEST_WORKER_SPANS") else { return };
    #[derive(Debug)]
    struct Main;
    #[derive(Debug)]
    struct Update;
    let layer = ContextLayer::new().name_from_field("name");
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer)).unwrap();
    memreplay::start(memreplay::Config::new(&path)).unwrap();
    // Spans made once, when the app is built, under a span that has long exited when
    // they are entered (Bevy 0.16 and earlier make its systems' spans so, 0.17 on with
    // `parent: None`).
    let (ai, commands, executor) = {
        let _build = tracing::info_span!("plugin build", plugin = "GamePlugin").entered();
        (
            tracing::info_span!("system", name = "game::ai"),
            tracing::info_span!(parent: None, "system_commands", name = "game::physics"),
            tracing::info_span!("multithreaded executor"),
        )
    };
    let main = tracing::info_span!("schedule", name = ?Main);
    let main_entered = main.enter();
    let update = tracing::info_span!("schedule", name = ?Update);
    let update_entered = update.enter();
    alloc(10_001);
    std::thread::scope(|s| {
        s.spawn(|| {
            {
                // Work handed over with its parent: under the parent's path.
                let _physics = tracing::info_span!(parent: &update, "system", name = "game::physics").entered();
                alloc(20_001);
                // Bevy's `ParallelCommands` enters a system's commands span inside the system.
                tracing::info_span!(parent: None, "system_commands", name = "game::physics").in_scope(|| alloc(20_002));
                // A parent already on this thread's path is not pushed again.
                tracing::info_span!(parent: &update, "par_for_each").in_scope(|| alloc(20_003));
            }
            alloc(20_004);
        });
        s.spawn(|| {
            // Its parent is entered nowhere: a top-level context.
            ai.in_scope(|| alloc(30_001));
            // Re-entered (no new context), then exited before a span entered after it
            // (its contexts wait for that span's).
            let audio = tracing::info_span!(parent: &update, "system", name = "game::audio");
            let audio_entered = audio.enter();
            let par = tracing::info_span!("par_for_each").entered();
            audio.in_scope(|| alloc(30_002));
            drop(audio_entered);
            alloc(30_003);
            drop(par);
            alloc(30_004);
        });
    });
    // Commands applied on the main thread, under the schedule, and a span whose parent
    // is entered nowhere: the thread's path, not the span's parent.
    commands.in_scope(|| alloc(10_002));
    executor.in_scope(|| alloc(10_003));
    drop(update_entered);
    drop(main_entered);
    alloc(10_004);
    memreplay::stop().unwrap();
}

/// Each allocation's context path, as the analyzer builds it: a worker's system under
/// the schedule that spawned it, `system` and `system_commands` spans of one system apart
/// (a context is keyed by its parent, type and name), and every thread's stack balanced.
#[test]
fn worker_spans_are_placed_under_their_parents() {
    let log = run_child("worker_spans_child", "MEMREPLAY_TEST_WORKER_SPANS", "workers");
    let update = "schedule:Main/schedule:Update";
    let physics = format!("{update}/system:game::physics");
    let audio_par = format!("{update}/system:game::audio/par_for_each:par_for_each");
    let expected: Vec<(u64, String)> = [
        (10_001, update.to_owned()),
        (10_002, format!("{update}/system_commands:game::physics")),
        (10_003, format!("{update}/multithreaded executor:multithreaded executor")),
        (10_004, "(no context)".to_owned()),
        (20_001, physics.clone()),
        (20_002, format!("{physics}/system_commands:game::physics")),
        (20_003, format!("{physics}/par_for_each:par_for_each")),
        (20_004, "(no context)".to_owned()),
        (30_001, "system:game::ai".to_owned()),
        (30_002, audio_par.clone()),
        (30_003, audio_par),
        (30_004, "(no context)".to_owned()),
    ]
    .into();
    let sizes: Vec<u64> = expected.iter().map(|(size, _)| *size).collect();
    assert_eq!(paths_of(&log, &sizes), expected);
}

const ROUNDS: usize = 400;

/// The child side of `span_names_are_neither_allocated_nor_freed_in_the_log`: does
/// nothing unless that test runs this binary again. A process of its own, so that the
/// session is the process's first and nothing a previous session allocated (tracing's
/// global list of dispatchers, for one) is freed during it.
#[test]
fn span_churn_child() {
    let Ok(path) = std::env::var("MEMREPLAY_TEST_SPAN_CHURN") else { return };
    memreplay::start(memreplay::Config::new(&path)).unwrap();
    // A thread started inside the session, with a registry made and dropped inside it:
    // everything it frees was allocated while recording.
    std::thread::Builder::new()
        .name("spans".into())
        .spawn(|| {
            let layer = ContextLayer::new().with_fields(&["asset", "n"]);
            let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
            let mut kept = Vec::new();
            for i in 0..ROUNDS {
                let outer = tracing::info_span!("load", asset = format!("rock{}.dds", i % 7).as_str());
                let _outer = outer.enter();
                let v = vec![i as u8; 100 + i];
                {
                    // Nested, entered twice, and one never entered: all created and closed.
                    let inner = tracing::info_span!("decode", n = i);
                    inner.in_scope(|| std::hint::black_box(vec![0u8; 40]));
                    inner.in_scope(|| kept.push(Box::new(i)));
                    drop(tracing::info_span!("skipped", n = i));
                }
                drop(v);
            }
            drop(kept);
        })
        .unwrap()
        .join()
        .unwrap();
    memreplay::stop().unwrap();
}

/// The layer's own memory (span names, the thread's list of entries) is out of the log
/// on both sides: every heap free the log holds is of an address the log saw allocated
/// and not yet freed. (A name allocated unrecorded but freed recorded by the registry
/// when the span closes shows up as a free of an unseen address, and, as the next span
/// reuses it, as a double free; so would the list, freed when the thread exits.)
#[test]
fn span_names_are_neither_allocated_nor_freed_in_the_log() {
    let log = run_child("span_churn_child", "MEMREPLAY_TEST_SPAN_CHURN", "close");
    let names = strings(&log);
    let spans_thread = log
        .events()
        .find_map(|(t, e)| {
            matches!(e, Event::ThreadInfo { name, .. } if names.get(name) == Some(&"spans")).then_some(t)
        })
        .expect("the spans thread is in the log");
    let pushes = log.events().filter(|(t, e)| *t == spans_thread && matches!(e, Event::ContextPush { .. })).count();
    assert_eq!(pushes, ROUNDS * 3, "every entry of the load and decode spans is a context");
    let pushed_names: HashSet<&str> = log
        .events()
        .filter_map(|(_, e)| match e {
            Event::ContextPush { name, .. } => Some(names[name]),
            _ => None,
        })
        .collect();
    assert!(pushed_names.contains("load asset=rock3.dds") && pushed_names.contains("decode n=399"));

    // Replay the heap in the global order.
    let mut live = HashSet::new();
    let mut freed = HashSet::new();
    let (mut frees, mut unseen_elsewhere) = (0, 0);
    let mut bad = Vec::new();
    for te in merge_by_seq(&log.blocks) {
        let (alloc, free) = match (te.event, te.part) {
            (&Event::Alloc { domain: HEAP_DOMAIN, addr, .. }, _) => (Some(addr), None),
            (&Event::Free { domain: HEAP_DOMAIN, addr, .. }, _) => (None, Some(addr)),
            (&Event::Realloc { old_addr, .. }, Part::ReallocFree) => (None, Some(old_addr)),
            (&Event::Realloc { new_addr, .. }, Part::ReallocAlloc) => (Some(new_addr), None),
            _ => (None, None),
        };
        if let Some(addr) = alloc {
            live.insert(addr);
            freed.remove(&addr);
        }
        if let Some(addr) = free {
            frees += 1;
            if live.remove(&addr) {
                freed.insert(addr);
            } else if freed.contains(&addr) {
                bad.push(format!("double free of {addr:#x} on thread {}", te.thread));
            } else if te.thread == spans_thread {
                bad.push(format!("free of {addr:#x}, never allocated in the log, on the spans thread"));
            } else {
                // Another thread freeing memory it allocated before the session started.
                unseen_elsewhere += 1;
                freed.insert(addr);
            }
        }
    }
    assert!(frees > ROUNDS * 3, "the log holds the program's frees: {frees}");
    assert!(
        bad.is_empty(),
        "{} bad frees of {frees} (and {unseen_elsewhere} pre-start frees elsewhere), first: {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
}

/// One heap allocation of `size` bytes, kept from the optimiser.
fn alloc(size: usize) {
    std::hint::black_box(Vec::<u8>::with_capacity(size));
}

/// Runs this binary's test `child` in a process of its own, with the environment
/// variable `var` naming its log, and reads that log.
fn run_child(child: &str, var: &str, tag: &str) -> Log {
    let path = std::env::temp_dir().join(format!("memreplay-tracing-{tag}-{}.mrl", std::process::id()));
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([child, "--exact", "--test-threads=1", "--nocapture"])
        .env(var, &path)
        .env_remove("MEMREPLAY_LOG")
        .env_remove("MEMREPLAY_OPTIONS")
        .output()
        .unwrap();
    assert!(out.status.success(), "child: {}", String::from_utf8_lossy(&out.stderr));
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(log.report.is_clean(), "{:?}", log.report);
    log
}

/// The log's strings, by id.
fn strings(log: &Log) -> HashMap<u32, &str> {
    log.events()
        .filter_map(|(_, e)| match e {
            Event::DefineString { id, text } => Some((*id, text.as_str())),
            _ => None,
        })
        .collect()
}

/// The log's context types' names, by id.
fn context_types<'a>(log: &'a Log, names: &HashMap<u32, &'a str>) -> HashMap<u32, &'a str> {
    log.events()
        .filter_map(|(_, e)| match e {
            Event::DefineContextType { id, name } => Some((*id, names[name])),
            _ => None,
        })
        .collect()
}

/// The context path ("type:name/type:name", or "(no context)") of the heap allocation of
/// each of `sizes`, in that order, from each thread's pushes and pops. Fails on a pop
/// with nothing to pop and on a thread still inside a context at the end of the log.
fn paths_of(log: &Log, sizes: &[u64]) -> Vec<(u64, String)> {
    let names = strings(log);
    let types = context_types(log, &names);
    let mut stacks: HashMap<u32, Vec<String>> = HashMap::new();
    let mut found = HashMap::new();
    for te in merge_by_seq(&log.blocks) {
        let stack = stacks.entry(te.thread).or_default();
        match *te.event {
            Event::ContextPush { ty, name, .. } => stack.push(format!("{}:{}", types[&ty], names[&name])),
            Event::ContextPop => {
                assert!(stack.pop().is_some(), "a pop with no context on thread {}", te.thread);
            }
            Event::Alloc { domain: HEAP_DOMAIN, size, .. } if sizes.contains(&size) => {
                let path = if stack.is_empty() { "(no context)".to_owned() } else { stack.join("/") };
                assert!(found.insert(size, path).is_none(), "two allocations of {size} bytes");
            }
            _ => {}
        }
    }
    for (thread, stack) in &stacks {
        assert!(stack.is_empty(), "thread {thread} ends inside {stack:?}");
    }
    sizes.iter().map(|size| (*size, found.remove(size).unwrap_or_else(|| panic!("no allocation of {size}")))).collect()
}
