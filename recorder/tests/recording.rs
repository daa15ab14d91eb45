//! Records real programs through the allocator wrapper and reads the logs back with
//! `memreplay-format`: every API lands in the log as the events it promises.

use std::alloc::System;
use std::collections::HashMap;
use std::sync::Mutex;

use memreplay_format::{merge_by_seq, Event, Log, Part, HEAP_DOMAIN};

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
