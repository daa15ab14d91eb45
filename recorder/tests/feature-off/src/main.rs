//! Uses every memreplay API the way a game does. With the feature off, it checks that
//! the guards are zero-sized, that format arguments are never evaluated, and that
//! nothing can start; `tests/feature_off.rs` also checks no recorder code is linked.

use std::alloc::System;
use std::sync::atomic::{AtomicUsize, Ordering};

#[global_allocator]
static ALLOC: memreplay::Allocator<System> = memreplay::Allocator::new(System);

static EVALUATED: AtomicUsize = AtomicUsize::new(0);

/// Counts every time a context or label name is formatted.
struct Counted;
impl std::fmt::Display for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        EVALUATED.fetch_add(1, Ordering::Relaxed);
        f.write_str("counted")
    }
}

fn main() {
    let vram = memreplay::Domain::define("vram.local", memreplay::DomainKind::GpuLocal, 1 << 20);
    let pool = memreplay::Domain::define_within("pool", memreplay::DomainKind::Pool, 0, memreplay::Domain::HEAP);
    let started = memreplay::start(memreplay::Config::new("never-written.mrl"));
    let mut v = Vec::with_capacity(100);
    {
        let _level = memreplay::context!("Level", "{}", Counted);
        let _tex = memreplay::instance_context!("Texture", "{}.dds", Counted);
        let _attach = memreplay::attach!(v.as_ptr());
        v.push(1u8);
        memreplay::vec_usage(&v);
        memreplay::label!("loaded {}", Counted);
        memreplay::frame_start(1);
        vram.alloc(0x1000, 4096);
        vram.free(0x1000);
        vram.budget(1 << 30, 1 << 29);
        memreplay::display_size(1920, 1080);
        let report = memreplay::AllocatorSnapshot {
            allocations: &[memreplay::SnapshotAllocation { name: "vb", offset: 0, size: 256 }],
            blocks: &[memreplay::SnapshotBlock { size: 4096, allocations: 0..1 }],
            total_allocated_bytes: 256,
            total_reserved_bytes: 4096,
        };
        assert!(memreplay::record_allocator_report(vram, pool, &report).is_ok());
        pool.alloc(8, 8);
        pool.free(8);
        memreplay::set_thread_name("main");
        let sizes = [
            std::mem::size_of_val(&_level),
            std::mem::size_of_val(&_tex),
            std::mem::size_of_val(&_attach),
            std::mem::size_of_val(&vram),
        ];
        if memreplay::ENABLED {
            println!("feature on: recorder linked; start: {:?}", started.is_ok());
            let _ = memreplay::stop();
            let _ = std::fs::remove_file("never-written.mrl");
            return;
        }
        assert_eq!(sizes, [0, 0, 0, 0], "guards and domains are zero-sized");
    }
    assert!(started.is_ok(), "start does nothing and succeeds with the feature off");
    assert!(!memreplay::is_recording());
    assert!(memreplay::stop().is_none());
    assert_eq!(EVALUATED.load(Ordering::Relaxed), 0, "names are never formatted");
    assert!(!std::path::Path::new("never-written.mrl").exists());
    println!("feature off: ok");
}
