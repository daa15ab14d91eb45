//! Spans entered under the tracing layer become contexts, named as configured.

use std::alloc::System;
use std::collections::HashMap;

use memreplay_format::{Event, Log};
use tracing_subscriber::prelude::*;

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

#[test]
fn entered_spans_become_contexts() {
    let layer = memreplay::tracing_layer::ContextLayer::new().with_type("System").with_fields(&["asset"]);
    let subscriber = tracing_subscriber::registry().with(layer);
    let path = std::env::temp_dir().join(format!("memreplay-tracing-{}.mrl", std::process::id()));
    tracing::subscriber::with_default(subscriber, || {
        memreplay::start(memreplay::Config::new(&path)).unwrap();
        {
            let _load = tracing::info_span!("load", asset = "rock.dds", ignored = 3).entered();
            let v = vec![0u8; 31_337];
            drop(v);
        }
        memreplay::stop().unwrap();
    });
    let log = Log::open(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let names: HashMap<u32, &str> = log
        .events()
        .filter_map(|(_, e)| match e {
            Event::DefineString { id, text } => Some((*id, text.as_str())),
            _ => None,
        })
        .collect();
    let types: HashMap<u32, &str> = log
        .events()
        .filter_map(|(_, e)| match e {
            Event::DefineContextType { id, name } => Some((*id, names[name])),
            _ => None,
        })
        .collect();
    let events: Vec<&Event> = log.events().map(|(_, e)| e).collect();
    let push = events.iter().position(|e| matches!(e, Event::ContextPush { .. })).expect("a context push");
    let Event::ContextPush { ty, name, .. } = events[push] else { unreachable!() };
    assert_eq!((types[ty], names[name]), ("System", "load asset=rock.dds"));
    let alloc = events.iter().position(|e| matches!(e, Event::Alloc { size: 31_337, .. })).unwrap();
    let pop = events.iter().position(|e| matches!(e, Event::ContextPop)).unwrap();
    assert!(push < alloc && alloc < pop, "the allocation is made inside the span's context");
}
