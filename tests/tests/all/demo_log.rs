//! Runs the demo game and checks its log against what the demo says it does
//! (`memreplay_demo::expected`): every recorder API must land in the log as promised.

use memreplay_demo::{
    expected, Expected, AUDIO_THREAD, BUFFER_BLOCK_BYTES, CONSOLE_CAPACITY, CONSOLE_USED, ENTITY_BYTES, ENTITY_POOL,
    EXTRA_LEAK_BYTES, FOOTSTEP_SAMPLES, LEAK_BYTES, LEVEL, MAIN_THREAD, POOL_BYTES, STREAMING_THREAD, VRAM_BUFFERS,
    VRAM_LOCAL, VRAM_LOCAL_CAPACITY, VRAM_SYSTEM,
};
use memreplay_format::{header_flags, DomainKind, Log, ResourceKind, HEAP_DOMAIN};
use memreplay_tests::{open, run_demo, temp_log, Replay};

const DEMO: &str = env!("CARGO_BIN_EXE_demo-runner");

/// Runs the demo with `args` into a fresh log and returns the log and what to expect.
fn record(name: &str, args: &[&str]) -> (Log, Expected) {
    let path = temp_log(name);
    let path_arg = path.to_str().expect("temp paths are UTF-8");
    let mut all = vec![path_arg];
    all.extend_from_slice(args);
    let out = run_demo(DEMO, &all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bytes/event"), "{stdout}");
    let Ok(memreplay_demo::Command::Run(opts)) = memreplay_demo::parse_args(all.iter().map(Into::into)) else {
        panic!("the arguments parse")
    };
    let log = open(&path);
    let _ = std::fs::remove_file(&path);
    (log, expected(&opts))
}

#[test]
fn default_run_records_everything_the_demo_does() {
    let (log, exp) = record("default.mrl", &[]);
    assert!(log.report.is_clean(), "{:?}", log.report);
    let end = log.report.end.expect("end-of-log record");
    let decoded: u64 = log.blocks.iter().map(|b| b.events.len() as u64).sum();
    assert_eq!(end.events, decoded);
    assert_eq!(end.lost_events, 0);
    for flag in [header_flags::CALLSTACKS_ON_ALLOC, header_flags::CALLSTACKS_ON_FREE, header_flags::USAGE_CHANGES] {
        assert!(log.header.has(flag), "header flag {flag}");
    }
    let r = Replay::of(&log);

    // Labels and frames, in order.
    assert_eq!(r.labels, exp.labels);
    assert_eq!(r.frames, (0..exp.frames).collect::<Vec<_>>());

    // Threads, named in the log.
    for name in exp.threads {
        assert!(r.thread(name).is_some(), "thread {name} in {:?}", r.thread_names);
    }
    let main = r.thread(MAIN_THREAD).unwrap();
    let streaming = r.thread(STREAMING_THREAD).unwrap();
    let audio = r.thread(AUDIO_THREAD).unwrap();

    // One instance context per texture, in load order, inside Level/Forest → Textures.
    let textures: Vec<&str> = r
        .pushes
        .iter()
        .filter(|(t, c)| *t == main && c.ty == "Texture" && c.instance)
        .map(|(_, c)| c.name.as_str())
        .collect();
    assert_eq!(textures, exp.textures.iter().map(|t| t.name.as_str()).collect::<Vec<_>>());
    let meshes = r.pushes.iter().filter(|(_, c)| c.ty == "Mesh" && c.instance).count();
    assert_eq!(meshes, exp.meshes.len());

    // Each texture's CPU copy: exactly one allocation of its size in its context.
    let mut texture_heap = 0;
    for spec in &exp.textures {
        let copies: Vec<_> = r
            .allocs
            .iter()
            .filter(|a| a.thread == main && a.domain == HEAP_DOMAIN && a.size == spec.heap_bytes)
            .filter(|a| a.innermost_is("Texture", Some(&spec.name)) && a.within("Level", LEVEL))
            .collect();
        assert_eq!(copies.len(), 1, "CPU copy of {}", spec.name);
        assert!(copies[0].freed_by.is_some(), "{} freed at unload", spec.name);
        texture_heap += copies[0].size;
    }
    assert_eq!(texture_heap, exp.texture_heap_bytes);

    // vram.local: every texture, mesh buffer and the shadow atlas, all freed.
    let vram = r.domain(VRAM_LOCAL).expect("vram.local defined");
    assert_eq!((vram.kind, vram.capacity, vram.parent), (DomainKind::GpuLocal, VRAM_LOCAL_CAPACITY, None));
    let in_vram: Vec<_> = r.allocs.iter().filter(|a| a.domain == vram.id).collect();
    assert_eq!(in_vram.len(), exp.vram_local_allocs);
    assert_eq!(in_vram.iter().map(|a| a.size).sum::<u64>(), exp.vram_local_bytes);
    // The level's textures (the renderer's textures are checked below).
    let texture_resources: Vec<_> = in_vram
        .iter()
        .filter(|a| {
            a.innermost_is("Texture", None) && a.resource.as_ref().is_some_and(|d| d.kind == ResourceKind::Texture)
        })
        .collect();
    assert_eq!(texture_resources.len(), exp.textures.len());
    for (a, spec) in texture_resources.iter().zip(&exp.textures) {
        let d = a.resource.as_ref().unwrap();
        assert_eq!((d.width, d.height, d.mip_levels, d.depth_or_layers), (spec.width, spec.height, spec.mip_levels, 1));
        assert_eq!(r.strings[&d.format], "BC7_UNORM");
        assert_eq!(r.strings[&d.name], spec.name);
        assert_eq!(a.size, spec.vram_bytes);
        assert!(a.innermost_is("Texture", Some(&spec.name)));
    }
    // The renderer's targets and textures: one dedicated allocation each, described.
    for spec in &exp.render {
        let found: Vec<_> =
            in_vram.iter().filter(|a| a.resource.as_ref().is_some_and(|d| r.strings[&d.name] == spec.name)).collect();
        assert_eq!(found.len(), 1, "{}", spec.name);
        let (a, d) = (found[0], found[0].resource.as_ref().unwrap());
        assert_eq!((d.kind, d.width, d.height, d.mip_levels), (spec.kind, spec.width, spec.height, spec.mip_levels));
        assert_eq!((r.strings[&d.format].as_str(), a.size), (spec.format, spec.alloc_bytes), "{}", spec.name);
        assert!(a.innermost_is(spec.context.0, Some(spec.context.1)) && a.within("Level", LEVEL), "{}", spec.name);
    }
    // Everything else in vram.local describes a resource, but the buffer blocks.
    let blocks: Vec<_> = in_vram.iter().filter(|a| a.resource.is_none()).collect();
    assert_eq!(blocks.len(), exp.buffer_blocks);
    assert!(blocks.iter().all(|b| b.size == BUFFER_BLOCK_BYTES && b.innermost_is("Renderer", Some("buffer blocks"))));
    // The sub-allocated buffers: in vram.local.buffers, inside the blocks where the layout
    // puts them, each described as a buffer of its size.
    let buffers = r.domain(VRAM_BUFFERS).expect("vram.local.buffers defined");
    assert_eq!((buffers.kind, buffers.parent), (DomainKind::GpuLocal, Some(vram.id)));
    let subs: Vec<_> = r.allocs.iter().filter(|a| a.domain == buffers.id).collect();
    assert_eq!(subs.len(), exp.buffers.len());
    for (a, spec) in subs.iter().zip(&exp.buffers) {
        let d = a.resource.as_ref().expect("a buffer resource");
        assert_eq!(
            (d.kind, r.strings[&d.name].as_str(), a.size),
            (ResourceKind::Buffer, spec.name.as_str(), spec.bytes)
        );
        assert_eq!(a.addr, blocks[spec.block].addr + spec.offset, "{}", spec.name);
        assert!(a.innermost_is("Renderer", Some("buffers")));
    }
    assert_eq!(r.live_in(buffers.id).count(), 0, "buffers freed at unload");
    assert_eq!(r.live_in(vram.id).count(), 0, "VRAM freed at unload");

    // vram.system: the staging buffer.
    let system = r.domain(VRAM_SYSTEM).expect("vram.system defined");
    assert_eq!(system.kind, DomainKind::GpuShared);
    let staging: Vec<_> = r.allocs.iter().filter(|a| a.domain == system.id).collect();
    assert_eq!(staging.iter().map(|a| a.size).sum::<u64>(), exp.vram_system_bytes);
    assert_eq!(staging.len(), 1);
    assert_eq!(staging[0].resource.as_ref().map(|d| d.kind), Some(ResourceKind::Buffer));

    // The entity pool: inside the heap, one allocation per entity, all freed; its
    // backing block reports its usage (zero once the level is gone).
    let pool = r.domain(ENTITY_POOL).expect("entity pool defined");
    assert_eq!((pool.kind, pool.parent), (DomainKind::Pool, Some(0)));
    let entities: Vec<_> = r.allocs.iter().filter(|a| a.domain == pool.id).collect();
    assert_eq!(entities.len() as u64, exp.entity_allocs);
    assert!(entities.iter().all(|a| a.size == ENTITY_BYTES as u64));
    assert_eq!(r.live_in(pool.id).count(), 0);
    let backing: Vec<_> = r
        .allocs
        .iter()
        .filter(|a| a.domain == HEAP_DOMAIN && a.size == POOL_BYTES as u64 && a.innermost_is("Entities", Some(LEVEL)))
        .collect();
    assert_eq!(backing.len(), 1);
    assert_eq!(backing[0].used, Some(0));
    assert!(entities.iter().all(|e| e.addr >= backing[0].addr && e.addr + e.size <= backing[0].addr + backing[0].size));

    // The leak: live at the end, made in Level/Forest → Scripts/cache; nothing else of
    // the demo's known sizes is left.
    let leaked: Vec<_> = r.live_in(HEAP_DOMAIN).filter(|a| a.size == LEAK_BYTES as u64).collect();
    assert_eq!(leaked.len(), 1, "one leak of {LEAK_BYTES} bytes");
    assert!(leaked[0].innermost_is("Scripts", Some("cache")) && leaked[0].within("Level", LEVEL));
    assert_ne!(leaked[0].stack, 0);
    assert!(r.live_in(HEAP_DOMAIN).all(|a| a.size != EXTRA_LEAK_BYTES as u64));
    assert!(r.live_in(HEAP_DOMAIN).all(|a| exp.textures.iter().all(|t| t.heap_bytes != a.size)));

    // The over-reserved console buffer: its capacity, and its usage far below it.
    let console: Vec<_> = r.allocs.iter().filter(|a| a.size == CONSOLE_CAPACITY as u64).collect();
    assert_eq!(console.len(), 1);
    assert_eq!(console[0].used, Some(CONSOLE_USED as u64));
    assert_eq!((exp.over_reserved_capacity, exp.over_reserved_used), (1_000_000, 1_000));
    assert!(console[0].innermost_is("UI", Some("debug console")));

    // Attaches: one per texture on the streaming thread, each resolving to that texture's
    // CPU copy; the decoded image made under it belongs to the texture.
    let attaches: Vec<_> = r.attaches.iter().filter(|(t, _, _)| *t == streaming).collect();
    assert_eq!(attaches.len(), exp.stream_jobs);
    for ((_, _, owner), spec) in attaches.iter().zip(&exp.textures) {
        let owner = &r.allocs[owner.expect("the attach address is inside a live allocation")];
        assert!(owner.innermost_is("Texture", Some(&spec.name)), "{:?}", owner.contexts);
        assert_eq!(owner.size, spec.heap_bytes);
    }
    let decoded: Vec<_> = r
        .allocs
        .iter()
        .filter(|a| {
            a.thread == streaming && a.attached_to.is_some() && exp.textures.iter().any(|t| t.heap_bytes == a.size)
        })
        .collect();
    assert_eq!(decoded.len(), exp.textures.len());

    // Cross-thread frees: decoded images (streaming → main), compressed files
    // (main → streaming), footsteps (main → audio).
    assert!(r.cross_thread_frees().count() > 0);
    assert!(decoded.iter().all(|a| a.freed_by == Some(main)));
    let to_streaming = r.cross_thread_frees().filter(|a| a.thread == main && a.freed_by == Some(streaming)).count();
    assert!(to_streaming >= exp.textures.len(), "{to_streaming}");
    let footsteps = r
        .cross_thread_frees()
        .filter(|a| a.thread == main && a.freed_by == Some(audio) && a.size == FOOTSTEP_SAMPLES as u64 * 2)
        .count() as u64;
    assert_eq!(footsteps, exp.footsteps);

    // Reallocs in their explicit context.
    assert!(r.allocs.iter().any(|a| a.by_realloc && a.innermost_is("Navigation", Some("path graph"))));

    // Per-frame temporaries in the Frame context, and the audio thread in its own.
    assert!(
        r.allocs.iter().filter(|a| a.thread == main && a.innermost_is("Frame", Some("update"))).count() as u64
            >= exp.frames
    );
    assert!(r.allocs.iter().any(|a| a.thread == audio && a.within("Audio", "mixer")));
    // The HUD's tracing span became a context through the tracing layer, every frame.
    let hud: Vec<_> = r
        .allocs
        .iter()
        .filter(|a| a.innermost_is(memreplay_demo::SYSTEM_CONTEXT_TYPE, Some(memreplay_demo::HUD_SYSTEM)))
        .collect();
    assert!(hud.len() as u64 >= exp.frames, "one HUD string a frame at least: {}", hud.len());
    assert!(hud.iter().all(|a| a.thread == main && a.within("Frame", "update")), "nested in the frame's context");

    // Callstacks on allocations and on frees.
    assert!(r.define_stacks > 0);
    assert!(r.frees_with_stack > 0);
    assert!(r.allocs.iter().filter(|a| a.thread == main).all(|a| a.stack != 0));
}

#[test]
fn extra_leak_adds_a_second_leak() {
    let (log, exp) = record("extra.mrl", &["--extra-leak", "--textures", "3", "--frames", "5"]);
    assert!(log.report.is_clean(), "{:?}", log.report);
    let r = Replay::of(&log);
    assert_eq!(r.frames.len(), 5);
    assert_eq!(r.pushes.iter().filter(|(_, c)| c.ty == "Texture" && c.instance).count(), 3);

    let mut leaked: Vec<_> =
        r.live_in(HEAP_DOMAIN).filter(|a| a.size == LEAK_BYTES as u64 || a.size == EXTRA_LEAK_BYTES as u64).collect();
    leaked.sort_by_key(|a| a.seq);
    let sizes: Vec<u64> = leaked.iter().map(|a| a.size).collect();
    assert_eq!(sizes, exp.leaks.iter().map(|l| l.bytes).collect::<Vec<_>>());
    assert_eq!(sizes, [LEAK_BYTES as u64, EXTRA_LEAK_BYTES as u64]);
    for (a, leak) in leaked.iter().zip(&exp.leaks) {
        assert!(a.innermost_is(leak.context.0, Some(leak.context.1)), "{:?}", a.contexts);
        assert!(a.within("Level", LEVEL));
    }
    // Scaled-down figures still hold.
    let vram = r.domain(VRAM_LOCAL).unwrap();
    assert_eq!(r.allocs.iter().filter(|a| a.domain == vram.id).map(|a| a.size).sum::<u64>(), exp.vram_local_bytes);
}

#[test]
fn same_options_same_figures() {
    // Determinism: two runs agree on everything the demo controls.
    let summary = |r: &Replay| {
        // GPU addresses come from the demo's bump allocators; pool addresses are heap
        // addresses, which only the allocator decides.
        let pool = r.domain(ENTITY_POOL).unwrap().id;
        let domain_allocs: Vec<(u32, u64, u64)> = r
            .allocs
            .iter()
            .filter(|a| a.domain != HEAP_DOMAIN)
            .map(|a| (a.domain, if a.domain == pool { 0 } else { a.addr }, a.size))
            .collect();
        let mut pushes: Vec<_> = r.pushes.iter().map(|(_, c)| (c.ty.clone(), c.name.clone(), c.instance)).collect();
        pushes.sort();
        (r.labels.clone(), r.frames.clone(), domain_allocs, pushes)
    };
    let args = ["--textures", "2", "--frames", "3"];
    let (a, _) = record("det-a.mrl", &args);
    let (b, _) = record("det-b.mrl", &args);
    assert_eq!(summary(&Replay::of(&a)), summary(&Replay::of(&b)));
}
