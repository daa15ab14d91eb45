//! `gpu` on a real demo log: the renderer's resources (its targets at and below the screen
//! size, its non-power-of-two textures, the padded lightmap, the buffers sub-allocated in
//! blocks) and the driver budget the demo reports each frame, against the figures the
//! demo's constants fix.

use memreplay_demo::{
    expected, Expected, BUFFER_BLOCK_BYTES, LEVEL, SCREEN, VRAM_BUFFERS, VRAM_LOCAL, VRAM_LOCAL_BUDGET,
    VRAM_LOCAL_LOW_BUDGET,
};
use memreplay_report::{build_gpu, build_gpu_view, At, GpuAt, GpuKind, GpuOptions, GpuReport, Progress, ScreenSource};
use memreplay_tests::{run_demo, temp_log};

const DEMO: &str = env!("CARGO_BIN_EXE_demo-runner");

fn record(name: &str) -> (std::path::PathBuf, Expected) {
    let path = temp_log(name);
    run_demo(DEMO, &[path.to_str().unwrap()]);
    (path, expected(&memreplay_demo::Options::default()))
}

fn gpu(path: &std::path::Path, at: Option<GpuAt>) -> GpuReport {
    let opts = GpuOptions { log: Some(path.to_owned()), at, limit: Some(0), ..GpuOptions::default() };
    let (view, screen) = build_gpu_view(&opts, Progress::Hidden).unwrap_or_else(|e| panic!("{e}"));
    build_gpu(view, screen, &opts)
}

#[test]
fn the_demo_s_gpu_resources_pivot_to_the_expected_figures() {
    let (path, exp) = record("gpu.mrl");
    let r = gpu(&path, Some(GpuAt::Point(At::Label("level loaded".into()))));
    assert_eq!((r.view.screen, r.screen_source), (Some(SCREEN), ScreenSource::Recorded));
    let vram = r.view.domains.iter().find(|d| d.name == VRAM_LOCAL).unwrap();
    assert_eq!((vram.live_bytes, vram.live_count), (exp.vram_local_bytes, exp.vram_local_allocs as u64));
    let p = &r.pivots;

    // Every target is the screen's size or a fraction of it.
    let targets: Vec<_> = exp.render.iter().filter(|x| x.mip_levels == 1 && x.name != "lightmap").collect();
    let mut screen: Vec<(&str, &str)> =
        p.screen_sized.iter().map(|s| (s.resource.name.as_str(), s.fraction.as_str())).collect();
    screen.sort();
    let mut want: Vec<(&str, &str)> =
        targets.iter().map(|t| (t.name, ["", "1", "1/2", "", "1/4"][(SCREEN.0 / t.width) as usize])).collect();
    want.sort();
    assert_eq!(screen, want);
    assert_eq!(p.screen_sized_total.bytes, targets.iter().map(|t| t.alloc_bytes).sum::<u64>());

    // The non-power-of-two textures, largest first, with their texel data.
    let npot: Vec<(&str, Option<u64>)> = p.npot.iter().map(|n| (n.resource.name.as_str(), n.texel_bytes)).collect();
    let texel = |name: &str| exp.render.iter().find(|x| x.name == name).unwrap().texel_bytes;
    assert_eq!(npot, [("ui atlas", Some(texel("ui atlas"))), ("terrain heightmap", Some(texel("terrain heightmap")))]);

    // Padding: the renderer's resources rounded up to 64 KiB, and the lightmap; the level's
    // BC7 textures, meshes and the shadow atlas are allocated at their exact size.
    let padded: Vec<_> = exp.render.iter().filter(|x| x.alloc_bytes > x.texel_bytes).collect();
    assert_eq!(p.padding_total.count, padded.len() as u64);
    assert_eq!(p.padding_bytes, padded.iter().map(|x| x.alloc_bytes - x.texel_bytes).sum::<u64>());
    assert_eq!(p.padding[0].resource.name, "lightmap");
    assert_eq!(p.unchecked.unknown_format.count, 0, "every format the demo uses is in the table");
    assert_eq!(p.by_kind.iter().find(|k| k.kind == GpuKind::DepthStencil).map(|k| k.count), Some(2));
    let atlas = p.by_kind.iter().find(|k| k.kind == GpuKind::Texture).unwrap();
    assert_eq!(atlas.owners[0].context, format!("Level:{LEVEL}/UI:atlas"));

    // The buffer blocks, where the layout put each buffer; the freed draw constants are holes.
    assert_eq!(r.view.blocks.len(), exp.buffer_blocks);
    for (i, block) in r.view.blocks.iter().enumerate() {
        assert_eq!(block.size, BUFFER_BLOCK_BYTES);
        let mut want: Vec<(u64, u64, String)> = exp
            .buffers
            .iter()
            .filter(|b| b.block == i && !b.freed_after_load)
            .map(|b| (b.offset, b.bytes, b.name.clone()))
            .collect();
        want.sort();
        let mut got: Vec<(u64, u64, String)> =
            block.allocations.iter().map(|a| (a.offset, a.size, a.name.clone())).collect();
        got.sort();
        assert_eq!(got, want, "block {i}");
        let f = &r.block_figures[i];
        assert_eq!(f.used_bytes, want.iter().map(|w| w.1).sum::<u64>());
    }
    let buffers = r.block_domains.iter().find(|d| d.sub_domain_name == VRAM_BUFFERS).unwrap();
    assert_eq!(buffers.blocks, exp.buffer_blocks as u64);

    // The budget: one sample a frame, lower for a few frames, over which the level's
    // resources do not fit.
    let end = gpu(&path, None);
    let vram = end.view.domains.iter().find(|d| d.name == VRAM_LOCAL).unwrap();
    let b = vram.budget.as_ref().expect("the demo reports vram.local's budget");
    assert_eq!((b.samples, b.min_budget, b.budget), (exp.frames, VRAM_LOCAL_LOW_BUDGET, VRAM_LOCAL_BUDGET));
    assert_eq!(b.peak_usage, exp.vram_local_bytes);
    assert!(exp.vram_local_bytes > VRAM_LOCAL_LOW_BUDGET);
    assert_eq!(b.over_budget.len(), 1);
    assert_eq!(b.over_budget[0].max_excess, exp.vram_local_bytes - VRAM_LOCAL_LOW_BUDGET);
    assert_eq!(b.over_budget[0].after_label.as_deref(), Some("gameplay"));
    let _ = std::fs::remove_file(path);
}
