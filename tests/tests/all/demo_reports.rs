//! The reports of `replay-cli` (through its library) on real demo logs: the figures the
//! demo's constants fix exactly — the deliberate leak, the textures' bytes per instance,
//! the over-reserved console's efficiency, the VRAM domains' peaks and totals.

use memreplay_demo::{
    expected, Expected, CONSOLE_CAPACITY, CONSOLE_USED, ENTITY_BYTES, ENTITY_POOL, EXTRA_LEAK_BYTES, LABELS,
    LEAK_BYTES, LEVEL, LEVEL_ENTITIES, MESHES, PROJECTILE_LIFETIME, SHADOW_ATLAS_BYTES, STAGING_BYTES, VRAM_LOCAL,
    VRAM_LOCAL_CAPACITY, VRAM_SYSTEM,
};
use memreplay_report::{self as report, build_efficiency, build_instances, build_leaks, build_summary, build_tree};
use memreplay_report::{At, Loaded, Progress, ReportKind, ReportOptions};
use memreplay_tests::{run_demo, temp_log};

const DEMO: &str = env!("CARGO_BIN_EXE_demo-runner");

/// Runs the demo with `args` into a fresh log; returns its path and what to expect.
fn record(name: &str, args: &[&str]) -> (std::path::PathBuf, Expected) {
    let path = temp_log(name);
    let mut all = vec![path.to_str().unwrap()];
    all.extend_from_slice(args);
    run_demo(DEMO, &all);
    let Ok(memreplay_demo::Command::Run(opts)) = memreplay_demo::parse_args(all.iter().map(Into::into)) else {
        panic!("the arguments parse")
    };
    (path, expected(&opts))
}

fn load(path: &std::path::Path, f: impl FnOnce(&mut ReportOptions)) -> Loaded {
    let mut args = ReportOptions::new(path);
    f(&mut args);
    report::load(&args, Progress::Hidden).unwrap_or_else(|e| panic!("{e}"))
}

fn texture_path(name: &str) -> String {
    format!("Level:{LEVEL}/Textures:{LEVEL}/Texture:{name}")
}

#[test]
fn default_run_reports_the_demos_figures() {
    let (path, exp) = record("reports.mrl", &[]);
    let n = exp.textures.len() as u64;
    let end = load(&path, |_| {});
    let s = build_summary(&end);

    // Capture facts.
    assert!(s.integrity.complete && s.integrity.clean, "{:?}", s.integrity);
    assert_eq!(s.capture.frames, exp.frames);
    assert_eq!(s.capture.labels.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), LABELS);
    for name in exp.threads {
        assert!(s.capture.threads.iter().any(|t| t.name.as_deref() == Some(name)), "thread {name}");
    }
    assert!(s.capture.recorded.callstacks_on_alloc && s.capture.recorded.usage_changes);
    assert!(s.capture.threads.iter().all(|t| t.open_contexts == 0));
    // A well-behaved game: nothing freed twice, no overlap, every attach and pop resolved
    // (frees of memory allocated before the recording started are legitimate).
    let a = &s.anomalies;
    assert_eq!(
        (a.double_frees, a.overlapping_allocs, a.unresolved_attaches, a.unbalanced_pops, a.usage_without_allocation),
        (0, 0, 0, 0, 0),
        "{a:?}"
    );

    // The VRAM domains: everything is loaded before anything is freed, so the peak is
    // the sum of every allocation, reached during the level load (after "main menu").
    let domain = |name: &str| s.domains.iter().find(|d| d.domain.name == name).unwrap_or_else(|| panic!("{name}"));
    let vram = domain(VRAM_LOCAL);
    assert_eq!(vram.domain.kind, "gpu-local");
    assert_eq!(vram.domain.capacity, VRAM_LOCAL_CAPACITY);
    assert_eq!((vram.peak.bytes, vram.peak.count), (exp.vram_local_bytes, exp.vram_local_allocs as u64));
    assert_eq!((vram.total.bytes, vram.total.count), (exp.vram_local_bytes, exp.vram_local_allocs as u64));
    assert_eq!((vram.live.bytes, vram.live.count), (0, 0));
    assert_eq!(vram.peak.after_label.as_deref(), Some(LABELS[0]));
    assert_eq!(vram.peak.frame, None);
    let system = domain(VRAM_SYSTEM);
    assert_eq!((system.peak.bytes, system.total.bytes, system.live.bytes), (STAGING_BYTES, STAGING_BYTES, 0));
    // The entity pool: within the heap, so out of the grand total.
    let pool = domain(ENTITY_POOL);
    assert!(!pool.domain.top_level);
    assert_eq!(pool.domain.parent_name.as_deref(), Some("heap"));
    assert_eq!((pool.total.count, pool.total.bytes), (exp.entity_allocs, exp.entity_allocs * ENTITY_BYTES as u64));
    assert_eq!(pool.live.count, 0);
    let heap = domain("heap");
    assert_eq!(s.total.domains, ["heap", VRAM_LOCAL, VRAM_SYSTEM]);
    assert_eq!(s.total.live.bytes, heap.live.bytes + vram.live.bytes + system.live.bytes);
    assert_eq!(s.total.total.bytes, heap.total.bytes + vram.total.bytes + system.total.bytes);
    // Who held what at the peak adds up to the peak.
    for d in &s.domains {
        let engine = &end.state().domain(d.domain.id).expect("the domain allocated").peak;
        assert_eq!((d.peak.bytes, d.peak.count), (engine.bytes, engine.count), "{}", d.domain.name);
    }
    let top = s.top_contexts.iter().find(|t| t.domain == VRAM_LOCAL).unwrap();
    assert_eq!(top.peak.inclusive[0].context, format!("Level:{LEVEL}"));
    assert_eq!(top.peak.inclusive[0].bytes, exp.vram_local_bytes);
    // The frame graph's targets, then the shadow atlas.
    let frame_graph: u64 =
        exp.render.iter().filter(|r| r.context == ("Renderer", "frame graph")).map(|r| r.alloc_bytes).sum();
    assert_eq!(top.peak.exclusive[0].context, format!("Level:{LEVEL}/Renderer:frame graph"));
    assert_eq!(top.peak.exclusive[0].bytes, frame_graph);
    assert_eq!(top.peak.exclusive[1].context, format!("Level:{LEVEL}/Renderer:shadows"));
    assert_eq!(top.peak.exclusive[1].bytes, SHADOW_ATLAS_BYTES);

    // What the OS saw: sampled as recording starts and stops (and every millisecond),
    // set against the heap (the VRAM domains are not process memory, the pool is
    // inside the heap).
    let pm = s.process_memory.as_ref().expect("the demo samples process memory");
    assert!(pm.samples >= 2, "{pm:?}");
    assert!(pm.resident.end > 0 && pm.resident.peak >= pm.resident.end, "{pm:?}");
    assert_eq!(pm.tracked_domains, ["heap"]);
    assert_eq!(pm.tracked_end, heap.live.bytes);
    assert_eq!(pm.untracked_resident_end, pm.resident.end as i64 - heap.live.bytes as i64);

    // The timeline: VRAM peaks at everything the level loads, all of it in the level.
    let state = end.state();
    let tl = state.timeline();
    let vram_id = vram.domain.id;
    let highest = |s: &memreplay_replay::Series| s.buckets().map(|b| b.high).max().unwrap();
    assert_eq!(highest(tl.domain(vram_id).unwrap()), exp.vram_local_bytes);
    assert_eq!(tl.domain(vram_id).unwrap().now(), 0);
    let level = tl
        .contexts()
        .find(|(k, _)| k.domain == vram_id && k.top.is_some_and(|n| state.node_path(n) == format!("Level:{LEVEL}")))
        .expect("a series for the level in VRAM");
    assert_eq!(highest(level.1), exp.vram_local_bytes);

    // The deliberate leak: its bytes, in Level/Forest → Scripts/cache, at one callstack.
    let cache = format!("Level:{LEVEL}/Scripts:cache");
    let l = build_leaks(&end);
    let heap_leaks = l.domains.iter().find(|d| d.domain.name == "heap").expect("heap leaks");
    let leak = heap_leaks.contexts.iter().find(|c| c.context == cache).expect("the script cache leaks");
    assert_eq!((leak.bytes, leak.count), (LEAK_BYTES as u64, 1));
    assert_eq!(leak.sites.len(), 1);
    assert!(!leak.sites[0].frames.is_empty() && leak.sites[0].frames.iter().all(|f| f.starts_with("0x")));
    assert!(l.domains.iter().all(|d| d.domain.name == "heap"), "only the heap leaks");
    assert_eq!(l.total_bytes, heap.live.bytes);
    assert!(s.leaks.iter().any(|g| g.context == cache && g.bytes == LEAK_BYTES as u64));
    // It is the biggest thing live at the end.
    assert_eq!(heap_leaks.contexts[0].context, cache);

    // Textures per instance, in VRAM: exactly their mip chains.
    let inst = build_instances(&end);
    let vram_types = &inst.domains.iter().find(|d| d.domain.name == VRAM_LOCAL).unwrap().types;
    let tex = vram_types.iter().find(|t| t.name == "Texture").unwrap();
    assert_eq!((tex.contexts, tex.instances), (n, n));
    assert_eq!(tex.peak_bytes, exp.texture_vram_bytes);
    assert_eq!(tex.peak_bytes_per_instance, exp.texture_vram_bytes as f64 / n as f64);
    assert_eq!(tex.total_bytes_per_instance, exp.texture_vram_bytes as f64 / n as f64);
    assert_eq!(tex.bytes_per_instance, 0.0);
    let mesh = vram_types.iter().find(|t| t.name == "Mesh").unwrap();
    assert_eq!(mesh.instances, MESHES.len() as u64);
    assert_eq!(mesh.total_bytes, exp.mesh_vram_bytes);

    // In the heap, at "level loaded" each texture holds exactly its CPU copy: one
    // allocation of width * height * 4 bytes. The first also holds what the standard
    // library allocated for the streaming job channel on its first send (made in that
    // texture's context; a few hundred bytes, part of it kept until the end).
    let loaded = load(&path, |a| a.at = Some(At::Label(LABELS[1].into())));
    let inst_loaded = build_instances(&loaded);
    let heap_of =
        |i: &report::Instances| i.domains.iter().find(|d| d.domain.name == "heap").expect("heap instances").clone();
    let at_label = heap_of(&inst_loaded);
    let context = |name: &str| {
        let path = texture_path(name);
        at_label.contexts.iter().find(|c| c.name == path).unwrap_or_else(|| panic!("{path}")).clone()
    };
    let first = &exp.textures[0];
    let channel = context(&first.name).bytes - first.heap_bytes;
    assert!(channel < 4096, "{channel} bytes besides {}'s copy", first.name);
    for spec in &exp.textures[1..] {
        let c = context(&spec.name);
        assert_eq!((c.bytes, c.count, c.instances), (spec.heap_bytes, 1, 1), "{}", spec.name);
        assert_eq!(c.bytes_per_instance, spec.heap_bytes as f64);
    }
    let tex = at_label.types.iter().find(|t| t.name == "Texture").unwrap();
    assert_eq!(tex.bytes, exp.texture_heap_bytes + channel);
    assert_eq!(tex.bytes_per_instance, (exp.texture_heap_bytes + channel) as f64 / n as f64);
    assert_eq!(exp.texture_heap_bytes / n, 337_920, "the default textures' average CPU copy");
    // At the end every copy is freed: what is left is the channel's.
    let at_end = heap_of(&inst);
    assert!(at_end.types.iter().find(|t| t.name == "Texture").unwrap().bytes <= channel);

    // The over-reserved console: CONSOLE_USED of CONSOLE_CAPACITY, live at the label and
    // at the heap's peak; the least efficient context of the summary.
    let console = "UI:main menu/UI:debug console";
    let e = build_efficiency(&loaded);
    let c = e.contexts.iter().find(|c| c.context == console).expect("the console reports its usage");
    for u in [&c.live, &c.peak] {
        assert_eq!((u.used_bytes, u.capacity_bytes), (CONSOLE_USED as u64, CONSOLE_CAPACITY as u64));
        assert_eq!(u.wasted_bytes, (CONSOLE_CAPACITY - CONSOLE_USED) as u64);
        assert_eq!(u.efficiency, Some(CONSOLE_USED as f64 / CONSOLE_CAPACITY as f64));
    }
    assert_eq!(e.contexts[0].context, console, "the most wasteful context");
    // Its allocation site, at the heap's peak: the same container, the most wasted bytes.
    let site = e.sites.iter().max_by_key(|s| s.peak.map_or(0, |p| p.wasted_bytes)).expect("container sites");
    let peak = site.peak.expect("no --thread: sites have their peak figures");
    assert_eq!((peak.used_bytes, peak.capacity_bytes), (CONSOLE_USED as u64, CONSOLE_CAPACITY as u64));
    assert_eq!(s.efficiency.least_efficient_contexts[0].context, console);

    // The VRAM tree at "level loaded": the shadow atlas, the meshes, the textures.
    let t = build_tree(&load(&path, |a| {
        a.at = Some(At::Label(LABELS[1].into()));
        a.domain = Some(VRAM_LOCAL.into());
    }));
    assert_eq!(t.domains.len(), 1);
    let root = &t.domains[0].root;
    assert_eq!(root.bytes, exp.vram_local_bytes);
    let level = &root.children[0];
    let child = |name: &str| level.children.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!(child("shadows").bytes, SHADOW_ATLAS_BYTES);
    let textures = level.children.iter().find(|c| c.context_type == "Textures").unwrap();
    assert_eq!(textures.bytes, exp.texture_vram_bytes);
    let meshes = level.children.iter().find(|c| c.context_type == "Meshes").unwrap();
    assert_eq!(meshes.bytes, exp.mesh_vram_bytes);
    for spec in &exp.textures {
        let node = textures.children.iter().find(|c| c.name == spec.name).unwrap();
        assert_eq!((node.exclusive_bytes, node.instances), (spec.vram_bytes, 1));
        assert_eq!(node.bytes_per_instance, Some(spec.vram_bytes as f64));
    }

    // Every report renders, as text and JSON.
    for kind in
        [ReportKind::Summarize, ReportKind::Tree, ReportKind::Leaks, ReportKind::Efficiency, ReportKind::Instances]
    {
        for json in [false, true] {
            let args = ReportOptions { json, ..ReportOptions::new(&path) };
            let text = report::run(kind, &args, Progress::Hidden).unwrap();
            if json {
                serde_json::from_str::<serde_json::Value>(&text).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            } else {
                assert!(text.starts_with(path.to_str().unwrap()), "{kind:?}: {text}");
            }
        }
    }
    let text = s.to_text();
    for needle in ["memory by domain", VRAM_LOCAL, "Scripts:cache", "UI:debug console", "Texture", "0.1%"] {
        assert!(text.contains(needle), "missing `{needle}` in:\n{text}");
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn extra_leak_and_frames() {
    let (path, exp) = record("reports-extra.mrl", &["--extra-leak", "--textures", "3", "--frames", "20"]);
    let l = build_leaks(&load(&path, |a| a.domain = Some("heap".into())));
    for leak in &exp.leaks {
        let context = format!("Level:{LEVEL}/{}:{}", leak.context.0, leak.context.1);
        let c = l.domains[0].contexts.iter().find(|c| c.context == context).unwrap_or_else(|| panic!("{context}"));
        assert_eq!((c.bytes, c.count), (leak.bytes, 1));
    }
    assert!(exp.leaks.iter().any(|l| l.bytes == EXTRA_LEAK_BYTES as u64));

    // At the start of frame 10, the entity pool holds the level's entities and the
    // projectiles of frames 2..=9 (each lives 8 frames).
    let at = load(&path, |a| {
        a.at = Some(At::Frame(10));
        a.domain = Some(ENTITY_POOL.into());
    });
    let s = build_summary(&at);
    assert_eq!(s.selection.at.frame, Some(10));
    let pool = &s.domains[0];
    let live = LEVEL_ENTITIES as u64 + PROJECTILE_LIFETIME;
    assert_eq!((pool.live.count, pool.live.bytes), (live, live * ENTITY_BYTES as u64));

    // A frame or label the log does not have is an error naming the labels.
    let mut args = ReportOptions::new(&path);
    args.at = Some(At::Frame(20));
    let err = report::load(&args, Progress::Hidden).err().expect("no frame 20").to_string();
    assert!(err.contains("no frame 20") && err.contains("\"level loaded\""), "{err}");
    args.at = Some(At::Label("boss fight".into()));
    let err = report::load(&args, Progress::Hidden).err().expect("no such label").to_string();
    assert!(err.contains("no label \"boss fight\""), "{err}");
    let _ = std::fs::remove_file(&path);
}
